"""What the reports say about a statement id: its catalogue rule, section, level and place in spec order, always in
the catalogue of the version that numbers it (:func:`case_catalogue` gives a case's)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..probe.statements import LEVEL_ORDER, case_catalogue, strongest_level
from ..spec import VERSIONS, Catalogue, load_catalogue

__all__ = [
    "LEVEL_ORDER",
    "binds_text",
    "case_catalogue",
    "default_catalogue",
    "in_spec_order",
    "own_catalogue",
    "rule_json",
    "rule_text",
    "section_of",
    "spec_name",
    "strongest_level",
]

_SECTION_IN_ID = re.compile(r"^MQTT-(\d+(?:\.\d+)*)-")


def default_catalogue(catalogue: Catalogue | None = None) -> Catalogue:
    """``catalogue``, or the MQTT 3.1.1 catalogue (of rows that name no version). A probe case's statements are
    looked up in the catalogue of the version it speaks: :func:`case_catalogue` of this one."""
    return catalogue if catalogue is not None else load_catalogue("3.1.1")


def section_of(statement: str, catalogue: Catalogue) -> str:
    """The section of a statement: from the catalogue, else read from the id (``MQTT-4.7.3-1`` -> ``4.7.3``)."""
    rule = catalogue.get(statement)
    if rule is not None:
        return rule.section
    match = _SECTION_IN_ID.match(statement)
    return match.group(1) if match else "unknown"


def in_spec_order(statements: Iterable[str], catalogue: Catalogue) -> list[str]:
    """Distinct statements sorted by section, catalogue order within a section; unknown ids last, by id."""
    position = {rule.id: index for index, rule in enumerate(catalogue)}

    def key(statement: str) -> tuple[int, tuple[int, ...], int, str]:
        section = section_of(statement, catalogue)
        numbers = tuple(int(part) for part in section.split(".")) if section[0].isdigit() else ()
        return (statement not in position, numbers, position.get(statement, 0), statement)

    return sorted(set(statements), key=key)


def spec_name(catalogue: Catalogue) -> str:
    """The specification a catalogue's rules come from, short: ``MQTT 5.0``, ``AMQP 0-9-1``."""
    version = catalogue.version
    return f"AMQP {version.removeprefix('amqp-')}" if version.lower().startswith("amqp") else f"MQTT {version}"


def binds_text(actor: str) -> str:
    """Whom a statement binds, in words ("" when the catalogue does not say)."""
    return {"both": "the client and the server"}.get(actor, f"the {actor}" if actor else "")


def own_catalogue(statement: str, catalogue: Catalogue) -> Catalogue:
    """The catalogue of the version a registry id names (:class:`~mqttaudit.spec.registry.StatementId`), else
    ``catalogue`` (an id read back from a report, or another specification's)."""
    version = getattr(statement, "version", None)
    if isinstance(version, str) and version in VERSIONS and catalogue.version in VERSIONS:
        return load_catalogue(version)
    return catalogue


def rule_text(statement: str, catalogue: Catalogue) -> str:
    """One line naming a statement with what its version's catalogue says of it: ``MQTT-3.1.2-24 (MQTT 5.0, section
    3.1.2.11, MUST, binds the server): <summary>``; an id the catalogue does not hold says so."""
    catalogue = own_catalogue(statement, catalogue)
    rule = catalogue.get(statement)
    if rule is None:
        return f"{statement} ({spec_name(catalogue)}, section {section_of(statement, catalogue)}): not in the catalogue"
    where = f"{spec_name(catalogue)}, section {rule.section}, {rule.level}, binds {binds_text(rule.actor)}"
    return f"{statement} ({where}): {rule.summary}"


def rule_json(statement: str, catalogue: Catalogue) -> dict[str, Any]:
    """A statement as the JSON reports hold it: its id, the version whose catalogue numbers it, and that catalogue's
    section, level, the side it binds and its summary (level, binds and summary None for an id it does not hold)."""
    catalogue = own_catalogue(statement, catalogue)
    rule = catalogue.get(statement)
    return {
        "id": str(statement),
        "version": catalogue.version,
        "section": rule.section if rule is not None else section_of(statement, catalogue),
        "level": None if rule is None else rule.level,
        "binds": None if rule is None else rule.actor,
        "summary": None if rule is None else rule.summary,
    }
