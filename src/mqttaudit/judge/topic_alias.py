"""The topic of a PUBLISH that may name it only by a Topic Alias (MQTT 5.0 section 3.3.2.3.4): an empty Topic Name
with a Topic Alias stands for the topic the alias was last mapped to, which a :class:`TopicSource` (the
connection's limits) resolves; without one, or when the mapping is unknown, the topic is unknown."""

from __future__ import annotations

from typing import Protocol

from mqttaudit.codec import Publish
from mqttaudit.codec.properties import TOPIC_ALIAS, first

from .context import Seen


class TopicSource(Protocol):
    def topic_of(self, seen: Seen) -> str | None:
        """The topic the PUBLISH just judged stands for (None: not known)."""
        ...


def named_by_alias_only(packet: Publish) -> bool:
    """An empty Topic Name with a Topic Alias: the topic is the alias's."""
    return not packet.topic and first(packet.properties, TOPIC_ALIAS) is not None


def topic_of(seen: Seen, packet: Publish, source: TopicSource | None) -> str | None:
    """The topic ``packet`` (the packet of ``seen``) stands for; None when it is named only by an alias that
    ``source`` does not resolve."""
    if not named_by_alias_only(packet):
        return packet.topic
    return None if source is None else source.topic_of(seen)
