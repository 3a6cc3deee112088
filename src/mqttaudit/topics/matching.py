"""Whether a Topic Filter matches a Topic Name (MQTT 3.1.1 section 4.7), one pair at a time.

The plain reference for every routing structure: a filter is split into levels at '/', a whole-level '+' matches
exactly one level (an empty one included), a last-level '#' matches its parent level and any number of child
levels, every other level must be equal character for character (no normalisation [MQTT-4.7.3-4]), and a filter
that starts with a wildcard never matches a name that starts with '$' [MQTT-4.7.2-1].

Filters that break 4.7.1 (``a#``, ``a/#/b``) are not refused here: their misplaced wildcards compare as plain text,
which no valid Topic Name can equal. Validate them with :mod:`mqttaudit.topics.validation`.
"""

from __future__ import annotations

from typing import Final

SEPARATOR: Final = "/"
SINGLE_LEVEL: Final = "+"
MULTI_LEVEL: Final = "#"
_WILDCARDS: Final = (SINGLE_LEVEL, MULTI_LEVEL)


def matches(topic_filter: str, topic_name: str) -> bool:
    """True when ``topic_filter`` matches ``topic_name``.

    >>> matches("sport/#", "sport"), matches("sport/+", "sport"), matches("+/+", "/"), matches("#", "$SYS/x")
    (True, False, True, False)
    """
    if dollar_rule_applies(topic_filter, topic_name):  # [MQTT-4.7.2-1]
        return False
    return _levels_match(topic_filter.split(SEPARATOR), topic_name.split(SEPARATOR))


def dollar_rule_applies(topic_filter: str, topic_name: str) -> bool:
    """True when the name starts with '$' and the filter with a wildcard, so they cannot match [MQTT-4.7.2-1]."""
    return topic_name.startswith("$") and topic_filter.startswith(_WILDCARDS)


def matches_but_for_dollar_rule(topic_filter: str, topic_name: str) -> bool:
    """True when only the '$' rule keeps ``topic_filter`` from matching ``topic_name`` (``#`` and ``$SYS/x``):
    a router that forgets [MQTT-4.7.2-1] delivers exactly these."""
    return dollar_rule_applies(topic_filter, topic_name) and _levels_match(
        topic_filter.split(SEPARATOR), topic_name.split(SEPARATOR)
    )


def _levels_match(filter_levels: list[str], name_levels: list[str]) -> bool:
    last = len(filter_levels) - 1
    for index, level in enumerate(filter_levels):
        if level == MULTI_LEVEL and index == last:
            return True  # '#' also matches the parent level: "sport/#" matches "sport"
        if index >= len(name_levels):
            return False
        if level != SINGLE_LEVEL and level != name_levels[index]:
            return False
    return len(filter_levels) == len(name_levels)
