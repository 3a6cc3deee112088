"""``junit.xml`` of an audit, so CI systems show an audit's findings like test failures: one test case per (rule,
side) the audit checks or saw broken (``mqttaudit.audit.client`` / ``mqttaudit.audit.server``), failed with the
count and the first violation's evidence; one per (rule, kind) of routing finding (``mqttaudit.audit.routing``).
A rule the audit checks and saw no violation of passes: no violation was seen in the captured traffic, which is
all a capture can show."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

from .. import __version__
from ..codec import rules as codec_rules
from ..judge import CHECKED_RULES
from ..spec import Catalogue, Rule, load_catalogue
from .audit_format import MAX_ROWS, WHOLE_IN, also_text, cause_text, evidence_is_cause, plural, when
from .audit_tables import ROUTING, VIOLATION
from .evidence import MAX_HEX_BYTES, printable
from .peer_text import LIMIT, shown
from .statements import default_catalogue, in_spec_order

SIDES = ("client", "server")
#: A rule label naming its version: ``MQTT-3.1.2-17 (MQTT 5.0)``.
_LABELLED = re.compile(r"(.+) \(MQTT ([0-9.]+)\)")
EVIDENCE = "evidence (hex)"


@dataclass(slots=True)
class Tally:
    """How many findings share one key, and the earliest of them."""

    count: int = 0
    first: dict[str, Any] | None = None

    def add(self, row: Mapping[str, Any]) -> None:
        self.count += 1
        if self.first is None or _earlier(row, self.first):
            self.first = dict(row)


@dataclass(slots=True)
class FindingTally:
    """Findings counted per (rule, side) and per (rule, kind) of routing finding, as the rows stream past; it
    holds one row per key, never the table."""

    violations: dict[tuple[str, str], Tally] = field(default_factory=dict)
    routing: dict[tuple[str, str], Tally] = field(default_factory=dict)

    def add(self, event_type: str, row: Mapping[str, Any]) -> None:
        if event_type == VIOLATION:
            key = (rule_label(row), str(row.get("actor") or ""))
            self.violations.setdefault(key, Tally()).add(row)
        elif event_type == ROUTING:
            key = (str(row.get("rule") or ""), str(row.get("kind") or "session"))
            self.routing.setdefault(key, Tally()).add(row)


def rule_label(row: Mapping[str, Any]) -> str:
    """A violation's rule id, with the version whose specification numbers it when that is not 3.1.1 (the same id
    names other statements in MQTT 5.0): ``MQTT-3.1.2-17 (MQTT 5.0)``."""
    rule, version = str(row.get("rule") or ""), str(row.get("rule_version") or "3.1.1")
    return rule if version == "3.1.1" else f"{rule} (MQTT {version})"


def _entry(label: str, rules: Catalogue) -> Rule | None:
    """The catalogue entry of a rule label: from the catalogue of the version it names, else from ``rules``."""
    labelled = _LABELLED.fullmatch(label)
    if labelled is None:
        return rules.get(label)
    try:
        return load_catalogue(labelled.group(2)).get(labelled.group(1))
    except ValueError:  # a version no catalogue has
        return None


def audit_checked_rules(catalogue: Catalogue) -> list[str]:
    """The catalogue's rules an audit decides: those the codec checks in the bytes or the judge in a conversation."""
    return [rule.id for rule in catalogue if rule.id in codec_rules.CHECKED or rule.id in CHECKED_RULES]


def audit_to_junit(
    tally: FindingTally,
    catalogue: Catalogue | None = None,
    *,
    captures: Iterable[str] = (),
    checked: Iterable[str] | None = None,
) -> ET.Element:
    """A ``<testsuite>`` of the audit. ``checked``: the rules that pass when nobody broke them (by default
    :func:`audit_checked_rules`). Every text goes through :func:`printable` (XML 1.0 cannot hold control
    characters even as references); ElementTree escapes the markup characters. Values from the traffic and capture
    names are cut, and at most :data:`MAX_ROWS` captures are named, so the document stays bounded."""
    rules = default_catalogue(catalogue)
    checked_ids = audit_checked_rules(rules) if checked is None else list(checked)
    routed = {rule for rule, _ in tally.routing}
    cases: set[tuple[str, str]] = set(tally.violations)
    for rule_id in checked_ids:
        entry = rules.get(rule_id)
        sides = SIDES if entry is None or entry.actor == "both" else (entry.actor,)
        # A routing rule's findings are its routing test cases; a passing server case beside them would contradict.
        cases.update((rule_id, side) for side in sides if not (side == "server" and rule_id in routed))
    order = {rule: index for index, rule in enumerate(in_spec_order([r for r, _ in [*cases, *tally.routing]], rules))}
    suite = ET.Element("testsuite", {"name": "mqttaudit audit"})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "mqttaudit_version", "value": __version__})
    names = list(captures)
    for capture in names[:MAX_ROWS]:
        ET.SubElement(properties, "property", {"name": "capture", "value": shown(capture, whole_in=WHOLE_IN)})
    if len(names) > MAX_ROWS:
        ET.SubElement(properties, "property", {"name": "captures_not_named", "value": str(len(names) - MAX_ROWS)})
    failures = 0
    for rule_id, side in sorted(cases, key=lambda key: (order[key[0]], _side_order(key[1]), key[1])):
        testcase = _testcase(suite, f"mqttaudit.audit.{side or 'unknown'}", rule_id, rules)
        found = tally.violations.get((rule_id, side))
        if found is not None:
            failures += 1
            _failure(testcase, rule_id, found, f"{plural(found.count, 'violation')} by the {side or 'unnamed side'}")
    for (rule_id, kind), found in sorted(tally.routing.items(), key=lambda item: (order[item[0][0]], item[0][1])):
        testcase = _testcase(suite, "mqttaudit.audit.routing", rule_id, rules, f" ({kind})")
        failures += 1
        _failure(testcase, rule_id, found, f"{plural(found.count, 'routing finding')} of kind {kind}")
    suite.set("tests", str(len(cases) + len(tally.routing)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    return suite


def _testcase(suite: ET.Element, classname: str, rule_id: str, rules: Catalogue, suffix: str = "") -> ET.Element:
    entry = _entry(rule_id, rules)
    summary = entry.summary if entry is not None else "(not in the rule catalogue)"
    return ET.SubElement(
        suite,
        "testcase",
        {"classname": printable(classname), "name": printable(f"{rule_id}{suffix}: {summary}"), "time": "0"},
    )


def _failure(testcase: ET.Element, rule_id: str, found: Tally, counted: str) -> None:
    first = found.first or {}
    detail = shown(first.get("detail") or "no detail", whole_in=WHOLE_IN)
    message = printable(f"{counted}; first: ") + detail
    failure = ET.SubElement(testcase, "failure", {"message": message, "type": printable(rule_id)})
    lines = [printable(f"{rule_id}: {counted}."), "The first one:"]
    lines += [
        f"  {label}: {shown(text, 3 * MAX_HEX_BYTES if label.startswith(EVIDENCE) else LIMIT, WHOLE_IN)}"
        for label, text in evidence_lines(first)
    ]
    failure.text = "\n".join(lines) + "\n"


def evidence_lines(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) of what the row says about where and how a finding shows, what is known of it only."""
    out: list[tuple[str, str]] = []

    def add(label: str, value: object, text: str | None = None) -> None:
        if value is not None and value != "":
            out.append((label, text if text is not None else str(value)))

    add("broker", row.get("broker"))
    add("capture", row.get("capture"))
    add("flow", row.get("flow"))
    add("frame", row.get("frame"))  # numbered from 1, as Wireshark numbers frames
    add("event", row.get("event"))
    add("answer owed for", row.get("cause_event"), cause_text(row).removeprefix("answer owed for "))
    add("stream offset", row.get("offset"))
    add("time", row.get("time"), when(row.get("time")))
    add("found by", row.get("origin"))
    add("kind", row.get("kind"))
    add("same act", also_text(row))
    add("detail", row.get("detail"))
    add("expected", row.get("expected"))
    add(EVIDENCE + (", the unanswered packet" if evidence_is_cause(row) else ""), row.get("evidence"))
    return out


def _earlier(row: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    def key(r: Mapping[str, Any]) -> tuple[bool, float]:
        time = r.get("time")
        return (time is None, float(time) if time is not None else 0.0)

    return key(row) < key(than)


def _side_order(side: str) -> int:
    return SIDES.index(side) if side in SIDES else len(SIDES)


def junit_document(suite: ET.Element) -> bytes:
    """The suite as an indented UTF-8 XML document."""
    ET.indent(suite)
    document: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return document
