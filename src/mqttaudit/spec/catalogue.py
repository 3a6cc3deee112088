"""Rules of the MQTT specifications: id, section, level, actor, observability and a one-line summary.

Two kinds: the spec's numbered normative statements (``MQTT-4.7.3-1``) and rules the spec states without a
number, named ``MQTT-<section>-<short name>`` (``MQTT-2.2.3-four-bytes``), each with the text it rests on.
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

#: The protocol versions that have a catalogue, oldest first.
VERSIONS: Final = ("3.1.1", "5.0")
#: What a user may type for each version: MQTT 5.0 is often called "5".
_VERSION_NAMES: Final = {"3.1.1": "3.1.1", "5": "5.0", "5.0": "5.0"}
LEVELS: Final = ("MUST", "SHOULD", "MAY")
ACTORS: Final = ("client", "server", "both")
OBSERVABILITY: Final = ("bytes", "stateful", "conversation", "not-observable")
_STATEMENT_ID = re.compile(r"^MQTT-\d+(\.\d+)*-\d+$")
_DERIVED_ID = re.compile(r"^MQTT-\d+(\.\d+)*-[a-z][a-z0-9-]*$")


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    version: str
    section: str
    level: str
    actor: str
    observability: str
    summary: str
    #: "statement" for a numbered normative statement of the spec, "derived" for a rule named here.
    origin: str
    #: For derived rules: where in the spec the rule comes from.
    basis: str = ""

    @property
    def severity(self) -> str:
        """How a violation is reported: MUST breaks are errors, SHOULD breaks warnings, MAY notes."""
        return {"MUST": "error", "SHOULD": "warning", "MAY": "note"}[self.level]

    def binds(self, side: str) -> bool:
        """Whether the rule binds ``side`` ("client" or "server"): its actor is that side, or both."""
        return self.actor in (side, "both")

    def section_key(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.section.split("."))


class Catalogue:
    """The rules of one protocol version, in spec order, looked up by id."""

    def __init__(self, version: str, rules: list[Rule]) -> None:
        self.version = version
        self._rules = {rule.id: rule for rule in rules}
        if len(self._rules) != len(rules):
            raise ValueError(f"duplicate rule ids in the MQTT {version} catalogue")

    def __iter__(self) -> Iterator[Rule]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self._rules

    def __getitem__(self, rule_id: str) -> Rule:
        return self._rules[rule_id]

    def get(self, rule_id: str) -> Rule | None:
        return self._rules.get(rule_id)


def _read_rows(name: str) -> list[dict[str, str]]:
    text = importlib.resources.files(__package__).joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))


def _parse(row: dict[str, str], version: str, origin: str) -> Rule:
    rule = Rule(
        id=row["id"],
        version=version,
        section=row["section"],
        level=row["level"],
        actor=row["actor"],
        observability=row["observability"],
        summary=row["summary"],
        origin=origin,
        basis=row.get("basis", ""),
    )
    pattern = _STATEMENT_ID if origin == "statement" else _DERIVED_ID
    problems = []
    if not pattern.match(rule.id):
        problems.append(f"id {rule.id!r}")
    if rule.level not in LEVELS:
        problems.append(f"level {rule.level!r}")
    if rule.actor not in ACTORS:
        problems.append(f"actor {rule.actor!r}")
    if not set(rule.observability.split("+")) <= set(OBSERVABILITY):
        problems.append(f"observability {rule.observability!r}")
    if problems:
        raise ValueError(f"bad catalogue row {rule.id}: " + ", ".join(problems))
    return rule


def parse_version(text: str) -> str:
    """The catalogue version ``text`` names ("3.1.1", "5.0", or "5" for 5.0). Raises ``ValueError`` naming the
    versions there are."""
    version = _VERSION_NAMES.get(text.strip())
    if version is None:
        raise ValueError(f"no MQTT version {text!r}: choose one of {', '.join(_VERSION_NAMES)}")
    return version


def load_catalogue(version: str = "3.1.1") -> Catalogue:
    """The catalogue of ``version`` (any name :func:`parse_version` takes): its numbered statements, then the
    derived rules, sorted by section."""
    return _load(parse_version(version))


@functools.cache
def _load(version: str) -> Catalogue:
    rules = [_parse(row, version, "statement") for row in _read_rows(f"mqtt-{version}-statements.tsv")]
    rules += [_parse(row, version, "derived") for row in _read_rows(f"mqtt-{version}-derived.tsv")]
    rules.sort(key=Rule.section_key)
    return Catalogue(version, rules)
