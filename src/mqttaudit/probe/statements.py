"""The statements a case cites, looked up in the catalogue of the MQTT version the case speaks: a 5.0 case's ids are
5.0's (5.0 renumbers, so the same text often names another 3.1.1 statement), never looked up in 3.1.1's."""

from __future__ import annotations

from collections.abc import Iterable

from ..codec import ProtocolVersion
from ..spec import VERSIONS, Catalogue, Rule, load_catalogue
from .case import Case

#: Strongest first.
LEVEL_ORDER = ("MUST", "SHOULD", "MAY")


def case_catalogue(case: Case, catalogue: Catalogue | None = None) -> Catalogue:
    """The catalogue that states ``case``'s statements: that of the MQTT version it speaks (an MQTT 3.1 case cites
    3.1.1 ids), whatever MQTT catalogue the run was given; ``catalogue`` itself when it is another specification's
    (the AMQP 0-9-1 routing suite)."""
    if catalogue is not None and catalogue.version not in VERSIONS:
        return catalogue
    version = ProtocolVersion.V3_1_1 if case.protocol is ProtocolVersion.V3_1 else case.protocol
    return load_catalogue(version.value)


def statement_rules(statements: Iterable[str], catalogue: Catalogue) -> list[Rule]:
    """The catalogue entries of the catalogued ``statements``, in their order."""
    return [rule for rule in map(catalogue.get, statements) if rule is not None]


def strongest_level(statements: Iterable[str], catalogue: Catalogue) -> str | None:
    """The strongest level (MUST, then SHOULD, then MAY) among the catalogued statements, None when none is."""
    levels = {rule.level for rule in statement_rules(statements, catalogue)}
    return next((level for level in LEVEL_ORDER if level in levels), None)


def case_level(case: Case, catalogue: Catalogue | None = None, statements: Iterable[str] | None = None) -> str | None:
    """The strongest level of ``case``'s statements (or of ``statements``, those a result of it cites) in the
    catalogue of its version, None when none is listed."""
    return strongest_level(case.statements if statements is None else statements, case_catalogue(case, catalogue))
