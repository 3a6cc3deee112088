"""Validity of Topic Names and Topic Filters as text, for callers that hold strings rather than packets.

The MQTT dialect runs the codec's own checks on the UTF-8 bytes of the string, so a topic judged here is judged
exactly as it would be inside a PUBLISH or SUBSCRIBE. Offsets in the violations count UTF-8 bytes of the topic.
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import rules
from mqttaudit.codec import validators as check
from mqttaudit.codec.buffer import wire_string
from mqttaudit.codec.errors import ProtocolViolation, Violation

#: "mqtt5" differs from "mqtt" in Topic Filters only: a filter starting "$share/" is a Shared Subscription (4.8.2).
DIALECTS: Final = ("mqtt", "mqtt5")
_NAME_FIELD: Final = check.StringField("Topic Name", "topic-name")
_FILTER_FIELDS: Final = {
    "mqtt": check.StringField("Topic Filter", "topic-filter"),
    "mqtt5": check.StringField("Topic Filter", "topic-filter-5"),
}


class InvalidTopic(ProtocolViolation, ValueError):
    """A Topic Name or Topic Filter breaks a rule; ``rule`` names it."""


def _violations(text: str, field: check.StringField, dialect: str) -> list[Violation]:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown topic dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    raw = wire_string(text)
    too_long = check.string_too_long(raw, field.name, rules.TOPIC_MAX_LENGTH)
    out: list[Violation] = [] if too_long is None else [Violation(too_long.rule, 2, too_long.detail)]
    # The checks take the offset of the string's first byte; 2 stands for the length prefix that precedes it.
    check.check_string(raw, 2, field, out)
    return [Violation(v.rule, max(v.offset - 2, 0), v.detail, v.key) for v in out]


def topic_name_violations(name: str, dialect: str = "mqtt") -> list[Violation]:
    """Every rule ``name`` breaks as a Topic Name (warnings included)."""
    return _violations(name, _NAME_FIELD, dialect)


def topic_filter_violations(topic_filter: str, dialect: str = "mqtt") -> list[Violation]:
    """Every rule ``topic_filter`` breaks as a Topic Filter (warnings included)."""
    return _violations(topic_filter, _FILTER_FIELDS.get(dialect, _FILTER_FIELDS["mqtt"]), dialect)


def _raise_first(violations: list[Violation]) -> None:
    errors = [v for v in violations if not rules.is_advisory(v.rule)]
    if errors:
        raise InvalidTopic(errors[0], violations=tuple(violations))


def validate_topic_name(name: str, dialect: str = "mqtt") -> None:
    """Raises :class:`InvalidTopic` when ``name`` breaks a MUST-level rule."""
    _raise_first(topic_name_violations(name, dialect))


def validate_topic_filter(topic_filter: str, dialect: str = "mqtt") -> None:
    """Raises :class:`InvalidTopic` when ``topic_filter`` breaks a MUST-level rule."""
    _raise_first(topic_filter_violations(topic_filter, dialect))


def is_valid_topic_name(name: str, dialect: str = "mqtt") -> bool:
    return not any(not rules.is_advisory(v.rule) for v in topic_name_violations(name, dialect))


def is_valid_topic_filter(topic_filter: str, dialect: str = "mqtt") -> bool:
    return not any(not rules.is_advisory(v.rule) for v in topic_filter_violations(topic_filter, dialect))
