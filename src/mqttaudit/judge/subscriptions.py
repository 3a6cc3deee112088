"""The subscriptions one connection shows: asked for by SUBSCRIBE, granted or refused by SUBACK, removed by
UNSUBSCRIBE."""

from __future__ import annotations

from collections.abc import Iterable

from mqttaudit.codec import Suback, Subscribe
from mqttaudit.topics import matches, matches_but_for_dollar_rule

#: SUBACK return code of a refused subscription (3.9.3).
FAILURE = 0x80
#: Topic Names whose matching filters are remembered at most (a connection may see any number of topics).
BOUNDS_KEPT = 4096


class Subscriptions:
    def __init__(self) -> None:
        self._requested: dict[str, int] = {}  # every filter asked for, with the highest QoS requested
        self._granted: dict[str, int] = {}  # filters granted at least once, with the highest QoS granted
        self._refused: set[str] = set()  # filters refused and never granted
        self._held: set[str] = set()  # filters asked for and not unsubscribed since
        #: :meth:`bounds` per Topic Name until a SUBSCRIBE or SUBACK changes them (deliveries repeat topics).
        self._bounds: dict[str, dict[str, int]] = {}

    def asked(self, subscribe: Subscribe) -> None:
        self._bounds.clear()
        for subscription in subscribe.subscriptions:
            name = subscription.topic_filter
            self._requested[name] = max(self._requested.get(name, 0), subscription.qos)
            self._held.add(name)

    def answered(self, subscribe: Subscribe, suback: Suback) -> None:
        self._bounds.clear()
        for subscription, code in zip(subscribe.subscriptions, suback.return_codes, strict=False):
            name = subscription.topic_filter
            if code == FAILURE:
                if name not in self._granted:
                    self._refused.add(name)
                continue
            self._granted[name] = max(self._granted.get(name, 0), code)
            self._refused.discard(name)

    def removed(self, topic_filters: Iterable[str]) -> None:
        self._held.difference_update(topic_filters)

    def holds_any(self, topic_filters: Iterable[str]) -> bool:
        """Some filter is one the session holds, compared character by character [MQTT-3.10.4-1]."""
        return any(name in self._held for name in topic_filters)

    def bounds(self, topic: str) -> dict[str, int]:
        """Every filter that may have been in effect and matches ``topic``, with the highest QoS it allows: the
        granted QoS once a SUBACK said so, the requested one before. (The caller must not change it.)"""
        found = self._bounds.get(topic)
        if found is None:
            if len(self._bounds) >= BOUNDS_KEPT:
                self._bounds.clear()
            found = self._bounds[topic] = self._find_bounds(topic)
        return found

    def _find_bounds(self, topic: str) -> dict[str, int]:
        return {
            name: self._granted.get(name, requested)
            for name, requested in self._requested.items()
            if name not in self._refused and matches(name, topic)
        }

    def blocked_by_dollar_rule(self, topic: str) -> list[str]:
        """Filters that would match ``topic`` but for the '$' rule [MQTT-4.7.2-1]."""
        return [
            name for name in self._requested if name not in self._refused and matches_but_for_dollar_rule(name, topic)
        ]
