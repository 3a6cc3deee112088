"""Whether a Topic Filter matches a Topic Name (MQTT 3.1.1 section 4.7), one pair at a time.

The plain reference for every routing structure: a filter is split into levels at '/', a whole-level '+' matches
exactly one level (an empty one included), a last-level '#' matches its parent level and any number of child
levels, every other level must be equal character for character (no normalisation [MQTT-4.7.3-4]), and a filter
that starts with a wildcard never matches a name that starts with '$' [MQTT-4.7.2-1].

Filters that break 4.7.1 (``a#``, ``a/#/b``) are not refused here: their misplaced wildcards compare as plain text,
which no valid Topic Name can equal. Validate them with :mod:`mqttaudit.topics.validation`.
"""

from __future__ import annotations

from collections.abc import Iterable
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


class _Level:
    __slots__ = ("children", "position")

    def __init__(self) -> None:
        self.children: dict[str, _Level] = {}
        #: Position of the Topic Name that ends at this level (-1: none does).
        self.position = -1


class TopicIndex:
    """Topic Names held in a tree of levels, to find those a Topic Filter matches without comparing each one:
    the reverse of a subscription trie. It answers exactly as :func:`matches` would for every held name
    (misplaced wildcards included), in the order the names were first added."""

    __slots__ = ("_count", "_root")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._root = _Level()
        self._count = 0
        for name in names:
            self.add(name)

    def __len__(self) -> int:
        return self._count

    def add(self, name: str) -> None:
        node = self._root
        for level in name.split(SEPARATOR):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Level()
            node = child
        if node.position < 0:
            node.position = self._count
            self._count += 1

    def matching(self, topic_filter: str) -> list[str]:
        """The held names ``topic_filter`` matches, in the order they were added."""
        found: list[tuple[int, str]] = []
        levels = topic_filter.split(SEPARATOR)
        last = len(levels) - 1
        # (level node, index of the filter level to match below it, the name so far; None above the first level)
        stack: list[tuple[_Level, int, str | None]] = [(self._root, 0, None)]
        while stack:
            node, index, path = stack.pop()
            level = levels[index]
            if level == MULTI_LEVEL and index == last:
                _subtree(node, path, found)  # '#' matches the parent level and every level below it
                continue
            if level == SINGLE_LEVEL:
                below = list(node.children.items())
            else:
                child = node.children.get(level)
                below = [] if child is None else [(level, child)]
            for key, child in below:
                child_path = key if path is None else f"{path}{SEPARATOR}{key}"
                if index < last:
                    stack.append((child, index + 1, child_path))
                elif child.position >= 0:
                    found.append((child.position, child_path))
        found.sort()
        dollar_excluded = topic_filter.startswith(_WILDCARDS)  # [MQTT-4.7.2-1]
        return [name for _, name in found if not (dollar_excluded and name.startswith("$"))]


def _subtree(node: _Level, path: str | None, found: list[tuple[int, str]]) -> None:
    stack = [(node, path)]
    while stack:
        current, current_path = stack.pop()
        if current_path is not None and current.position >= 0:
            found.append((current.position, current_path))
        for key, child in current.children.items():
            stack.append((child, key if current_path is None else f"{current_path}{SEPARATOR}{key}"))
