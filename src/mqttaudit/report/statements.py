"""What the reports say about a statement id: its catalogue rule, section, level and place in spec order."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..spec import Catalogue, Rule, load_catalogue

#: Strongest first.
LEVEL_ORDER = ("MUST", "SHOULD", "MAY")
_SECTION_IN_ID = re.compile(r"^MQTT-(\d+(?:\.\d+)*)-")


def default_catalogue(catalogue: Catalogue | None = None) -> Catalogue:
    """``catalogue``, or the MQTT 3.1.1 catalogue the probe cases are written against."""
    return catalogue if catalogue is not None else load_catalogue("3.1.1")


def section_of(statement: str, catalogue: Catalogue) -> str:
    """The section of a statement: from the catalogue, else read from the id (``MQTT-4.7.3-1`` -> ``4.7.3``)."""
    rule = catalogue.get(statement)
    if rule is not None:
        return rule.section
    match = _SECTION_IN_ID.match(statement)
    return match.group(1) if match else "unknown"


def strongest_level(statements: Iterable[str], catalogue: Catalogue) -> str | None:
    """The strongest level (MUST, then SHOULD, then MAY) among the catalogued statements, None when none is."""
    levels = {rule.level for rule in _rules(statements, catalogue)}
    return next((level for level in LEVEL_ORDER if level in levels), None)


def in_spec_order(statements: Iterable[str], catalogue: Catalogue) -> list[str]:
    """Distinct statements sorted by section, catalogue order within a section; unknown ids last, by id."""
    position = {rule.id: index for index, rule in enumerate(catalogue)}

    def key(statement: str) -> tuple[int, tuple[int, ...], int, str]:
        section = section_of(statement, catalogue)
        numbers = tuple(int(part) for part in section.split(".")) if section[0].isdigit() else ()
        return (statement not in position, numbers, position.get(statement, 0), statement)

    return sorted(set(statements), key=key)


def _rules(statements: Iterable[str], catalogue: Catalogue) -> list[Rule]:
    return [rule for rule in map(catalogue.get, statements) if rule is not None]
