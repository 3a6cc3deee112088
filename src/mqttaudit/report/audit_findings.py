"""The audit's findings as both reports present them: one per (rule, side) with its catalogue entry and sample rows,
routing findings grouped by kind, the rule instances not assessable grouped by the reason's tag, the connections per
MQTT version, the headline counts, the byte accounting and the anchors that link them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..judge import reasons
from ..spec import Catalogue, Rule, load_catalogue
from ..spec.ids import R5
from . import budget_texts
from .audit_data import (
    AuditReportData,
    AuditSummary,
    ConnectionRow,
    LenientCount,
    LenientRow,
    RoutingRow,
    RuleCount,
    UndecidedCount,
    UndecidedRow,
    VersionInfo,
    ViolationRow,
)
from .audit_format import WHOLE_IN, count, duration, plural, size, when
from .peer_text import cut
from .statements import LEVEL_ORDER, binds_text, default_catalogue, in_spec_order, section_of

SIDES = ("client", "server")
#: The version whose specification numbers a rule when its row does not say (the judge's, and every version's
#: until MQTT 5.0).
DEFAULT_RULE_VERSION = "3.1.1"
#: How a violation was found.
ORIGINS = {
    "codec": "seen in the bytes",
    "judge": "seen in the behaviour",
    "transport": "seen in the transport framing (WebSocket)",
}
#: Routing finding kinds, in report order: (title, what went wrong).
KINDS = {
    "leak": ("Leaked deliveries", "a subscriber received a message that none of its subscriptions matches"),
    "missing": ("Missing deliveries", "a message owed to a matching subscriber never arrived"),
    "duplicate": ("Duplicate deliveries", "a subscriber received more copies of a message than allowed"),
    "qos": ("Deliveries at the wrong QoS", "a message arrived at a QoS other than the one owed"),
    "session": (
        "Session state",
        "session state (subscriptions, queued messages, the Will) was not kept or not discarded as required",
    ),
}
#: What a finding means for the people who run or build on the implementation at fault.
MEANINGS = {
    "client": (
        "Clients in this traffic send what the specification forbids. A broker that follows the specification closes "
        "their connections, so these clients can fail as soon as they meet a stricter broker; a broker that lets the "
        "data through passes it on to sessions, subscriptions and other subscribers."
    ),
    "server": (
        "The broker behaves in a way the specification rules out. Client libraries and applications written against "
        "the specification may lose, duplicate or misroute messages, stall waiting for an answer, or keep talking to "
        "a broker that should have closed the connection."
    ),
    "leak": (
        "Subscribers receive messages they never asked for: data crosses between subscriptions, sessions or tenants "
        "that should be kept apart. This is a confidentiality problem as much as a conformance one."
    ),
    "missing": (
        "Messages the broker accepted never reach a subscriber whose filter matches them: data is lost without the "
        "publisher or the subscriber being told."
    ),
    "duplicate": (
        "Subscribers get more copies than the QoS allows; an application relying on exactly-once delivery processes "
        "the same message twice."
    ),
    "qos": "Messages arrive with other delivery guarantees than the publisher and the subscription agreed on.",
    "session": (
        "Session state does not follow what the client asked for: subscriptions, queued messages or Wills outlive "
        "their session, or are lost while it lasts."
    ),
}
#: What each tag of a not-assessable reason means for a reader.
TAG_MEANINGS = {
    reasons.GAP_BEFORE_CONNECT: "the client's first bytes were not captured: its CONNECT may be among them",
    reasons.MID_STREAM: "the capture began inside the connection: its CONNECT, version and session are unknown",
    reasons.NEVER_ACKNOWLEDGED: (
        "the receiver's TCP never acknowledged the bytes that called for an answer: they may never have reached it"
    ),
    reasons.NO_ACTIVITY: "nothing of the connection was captured after a time before the deadline",
    reasons.CAPTURE_ENDS: "the capture ends before the deadline of the answer",
    reasons.NOT_ACCEPTED: "the server never accepted the connection, so it owed no answer on it",
    reasons.LOST_BYTES: "bytes of the side that owed the answer were not captured while it was due",
    reasons.PEER_CLOSED: "the other side closed the connection before the deadline",
    reasons.CLOSED_INSTEAD: "the side that owed an answer closed the connection instead, which it may do",
    reasons.NOT_OWED: (
        "a statement would owe it, but a SHOULD lets the server withhold it (section 4.7.2, '$' topics): its "
        "arrival is judged, its absence decides nothing"
    ),
    reasons.NO_ANSWER: "the answer the rule judges never came, so there is nothing to judge it on",
    reasons.TOO_SHORT: "the observation stopped before the rule was exercised for long enough",
    reasons.UNDECODED: "bytes were captured but could not be framed as a packet",
    reasons.CONFLICTING: (
        "bytes arrived twice with different content (a TCP retransmission that conflicts): which copy the receiver "
        "kept is unknown, so nothing decoded from them is judged"
    ),
    reasons.ANOTHER_SPECIFICATION: "the connection follows another specification",
    reasons.EARLIER_SESSION: "the session began on an earlier connection the capture does not hold",
    reasons.AMBIGUOUS: "a delivery may stand for more than one message, and which one decides the rule",
    reasons.LATE_COPY: (
        "the message was not delivered within its late window, but a copy that can be it came later on its "
        "session; MQTT sets no time limit on delivery"
    ),
}
#: Why accepting what a receiver was not bound to detect is not a violation, in the words of MQTT 5.0.
LENIENCY_TEXT = (
    "A receiver accepted a malformed packet or a Protocol Error that it was not bound to detect: MQTT 5.0 binds a "
    f'Server to close the Network Connection on one "when" it detects it ({R5.MQTT_4_13_1_1}) and calls the rigour of '
    "checking a compromise (section 4.13.1). The rule the packet breaks binds its sender, whose violation is listed "
    "above; the receiver's acceptance is leniency, counted apart and never a violation."
)

_NOT_AN_ID = re.compile(r"[^A-Za-z0-9._-]+")


class Anchors:
    """Unique, HTML-safe ids for the sections and rows the reports link to."""

    def __init__(self) -> None:
        self._used: set[str] = set()

    def make(self, *parts: object) -> str:
        base = "-".join(_NOT_AN_ID.sub("-", str(part)).strip("-") or "x" for part in parts)
        anchor, number = base, 1
        while anchor in self._used:
            number += 1
            anchor = f"{base}--{number}"
        self._used.add(anchor)
        return anchor


@dataclass(frozen=True, slots=True)
class Reference:
    """What the catalogue says about a statement id."""

    rule: str
    section: str
    level: str
    #: The side the statement binds, as the catalogue has it (``client``, ``server``, ``both``); "" if unlisted.
    binds: str
    summary: str
    #: For a rule the spec states without a number: where it comes from.
    basis: str
    catalogued: bool
    #: The MQTT version whose specification numbers the statement (the same id names other statements in 3.1.1
    #: and 5.0).
    version: str = "3.1.1"

    @property
    def label(self) -> str:
        """The statement id, with its version when that is not 3.1.1: ``MQTT-2.2.2-property-length (MQTT 5.0)``."""
        return self.rule if self.version == DEFAULT_RULE_VERSION else f"{self.rule} (MQTT {self.version})"

    @property
    def binds_text(self) -> str:
        """Whom the statement binds, in words ("" when the catalogue does not say)."""
        return binds_text(self.binds)


@dataclass(frozen=True, slots=True)
class Sample:
    number: int
    anchor: str
    row: ViolationRow
    #: The anchor and title of the sample that shows the same packet's bytes, when an earlier finding shows them
    #: ("" for the first sample of a packet): one packet, one evidence block.
    shown_in: str = ""
    shown_in_title: str = ""
    #: The statements the other findings' rows of the same packet broke (other acts on the same bytes), besides
    #: this one's and its row's ``also``.
    others: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RuleFinding:
    """Every violation of one rule by one side."""

    reference: Reference
    actor: str
    count: int
    #: ``codec`` and/or ``judge``.
    origins: tuple[str, ...]
    first_time: float | None
    samples: tuple[Sample, ...]
    anchor: str

    @property
    def rule(self) -> str:
        return self.reference.rule

    @property
    def level(self) -> str:
        return self.reference.level

    @property
    def title(self) -> str:
        return f"{self.reference.label} broken by {_side_phrase(self.actor)}"

    @property
    def summary(self) -> str:
        """One sentence: who broke what, how often, since when, and how it was seen."""
        seen = " and ".join(ORIGINS.get(origin, f"found by {origin}") for origin in self.origins)
        first = f", first at {when(self.first_time)}" if self.first_time is not None else ""
        return (
            f"{_side_phrase(self.actor).capitalize()} broke {self.reference.label} ({self.level}) "
            f"{plural(self.count, 'time')} in the audited traffic{first}" + (f"; {seen}" if seen else "") + "."
        )

    @property
    def meaning(self) -> str:
        return MEANINGS.get(self.actor, MEANINGS["server"]) + _level_note(self.level)


@dataclass(frozen=True, slots=True)
class LenientFinding:
    """Every packet breaking one rule that one receiver accepted and was not bound to detect: not a violation of the
    receiver (MQTT 5.0 section 4.13.1), reported apart."""

    #: The rule the accepted packets broke, in the catalogue of its version, and whom it binds.
    reference: Reference
    #: The receiver that accepted them.
    actor: str
    count: int
    first_time: float | None
    #: Why that receiver was not bound to detect them.
    basis: str
    samples: tuple[LenientRow, ...]
    anchor: str

    @property
    def rule(self) -> str:
        return self.reference.rule

    @property
    def title(self) -> str:
        return f"{self.reference.label} accepted by {_side_phrase(self.actor)}"

    @property
    def summary(self) -> str:
        """One sentence: who accepted what, how often, since when, and that it is not a violation."""
        first = f", first at {when(self.first_time)}" if self.first_time is not None else ""
        binds = f", which binds {self.reference.binds_text}" if self.reference.binds else ""
        return (
            f"{_side_phrase(self.actor).capitalize()} accepted {plural(self.count, 'packet')} breaking "
            f"{self.reference.label} ({self.reference.level}){binds}{first}, without being bound to detect it: "
            "leniency, not a violation."
        )


@dataclass(frozen=True, slots=True)
class RoutingSample:
    number: int
    anchor: str
    row: RoutingRow


@dataclass(frozen=True, slots=True)
class RoutingGroup:
    """The routing findings of one kind."""

    kind: str
    count: int
    references: tuple[Reference, ...]
    samples: tuple[RoutingSample, ...]
    anchor: str

    @property
    def title(self) -> str:
        return KINDS.get(self.kind, (f"Routing findings of kind {self.kind!r}", ""))[0]

    @property
    def description(self) -> str:
        return KINDS.get(self.kind, ("", "a routing finding of a kind this report does not describe"))[1]

    @property
    def summary(self) -> str:
        brokers = sorted({cut(str(sample.row["broker"]), whole_in=WHOLE_IN) for sample in self.samples})
        where = f" at broker {', '.join(brokers)}" if brokers else ""
        shown = f"; {count(len(self.samples))} shown" if len(self.samples) < self.count else ""
        return f"{plural(self.count, 'routing finding')} of kind {self.kind}{where}{shown}: {self.description}."

    @property
    def meaning(self) -> str:
        strongest = next((lv for lv in LEVEL_ORDER if any(r.level == lv for r in self.references)), "MUST")
        return MEANINGS.get(self.kind, MEANINGS["server"]) + _level_note(strongest)


@dataclass(frozen=True, slots=True)
class UndecidedGroup:
    """The rule instances not assessable for one reason tag: their count per rule and side, and sample rows."""

    tag: str
    count: int
    counts: tuple[UndecidedCount, ...]
    rows: tuple[UndecidedRow, ...]
    anchor: str

    @property
    def title(self) -> str:
        return self.tag or "other reasons (no known tag)"

    @property
    def meaning(self) -> str:
        if not self.tag:
            return "reasons that start with none of the known tags: each row's reason says what could not be seen"
        return TAG_MEANINGS.get(self.tag, "a reason of a kind this report does not describe")


@dataclass(frozen=True, slots=True)
class Headline:
    violations: int
    by_client: int
    by_server: int
    #: Violations by an actor that is neither client nor server (should be none).
    by_other: int
    routing: int
    #: Packets accepted that the receiver was not bound to detect: counted apart, never violations.
    lenient: int = 0

    @property
    def clean(self) -> bool:
        return not self.violations and not self.routing

    @property
    def text(self) -> str:
        lenient = (
            f"; {plural(self.lenient, 'malformed packet or Protocol Error', 'malformed packets or Protocol Errors')} "
            "accepted by a receiver not bound to detect it (leniency, not violations)"
            if self.lenient
            else ""
        )
        if self.clean:
            return "No violations found: 0 by clients, 0 by servers; no routing findings" + lenient
        other = f", {count(self.by_other)} by an unnamed side" if self.by_other else ""
        return (
            f"{plural(self.violations, 'violation')}: {count(self.by_client)} by clients, "
            f"{count(self.by_server)} by servers{other}; {plural(self.routing, 'routing finding')}" + lenient
        )


@dataclass(frozen=True, slots=True)
class Accounting:
    """The bytes of the MQTT flows and where they went; they reconcile when the parts add up to the total."""

    total: int
    parts: tuple[tuple[str, int], ...]
    #: The policies behind the account (the cap of malformed packets, conflicting retransmissions), with figures.
    notes: tuple[str, ...] = ()

    @property
    def difference(self) -> int:
        return self.total - sum(value for _, value in self.parts)

    @property
    def reconciles(self) -> bool:
        return self.difference == 0

    @property
    def verdict(self) -> str:
        if self.reconciles:
            return (
                "The byte counts reconcile: every byte of the MQTT flows is in a whole packet, in a malformed frame, "
                "in a gap, or captured but not assessable."
            )
        if self.difference > 0:
            return f"The byte counts do not reconcile: {plural(self.difference, 'byte')} unaccounted for."
        return f"The byte counts do not reconcile: the parts exceed the total by {plural(-self.difference, 'byte')}."


@dataclass(frozen=True)
class AuditView:
    """What both reports show, computed once."""

    data: AuditReportData
    catalogue: Catalogue
    headline: Headline
    findings: tuple[RuleFinding, ...]
    routing: tuple[RoutingGroup, ...]
    accounting: Accounting | None
    #: Flow id -> anchor of its row in the connections sample.
    flows: Mapping[str, str]
    #: The connections sample with the anchor of each row ("" for a flow already listed).
    connections: tuple[tuple[str, ConnectionRow], ...]
    #: The rule instances not assessable, one group per reason tag, the most frequent first.
    undecided: tuple[UndecidedGroup, ...] = ()
    #: What receivers accepted and were not bound to detect, one entry per (rule, version, receiver).
    lenient: tuple[LenientFinding, ...] = ()

    @property
    def versions(self) -> list[tuple[str, VersionInfo]]:
        """(version, its connections and handling), the judged versions first."""
        versions = self.summary.get("versions", {})
        return sorted(versions.items(), key=lambda item: (not _judged(item[1]), item[0]))

    @property
    def undecided_total(self) -> int:
        return self.summary.get("not_assessable", 0) or sum(group.count for group in self.undecided)

    @property
    def summary(self) -> AuditSummary:
        return self.data.summary

    @property
    def facts(self) -> list[tuple[str, str]]:
        """What was audited, where and how long it took, as (label, text) pairs; what the summary lacks is left out."""
        summary, out = self.summary, []
        if "captures" in summary:
            captures = summary["captures"]
            total = sum(capture.get("bytes", 0) for capture in captures)
            records = sum(capture.get("records", 0) for capture in captures)
            out.append(("Captures", f"{plural(len(captures), 'capture')}, {size(total)}, {plural(records, 'record')}"))
        traffic = [
            plural(value, word)
            for key, word in (("connections", "connection"), ("flows", "flow"), ("packets", "packet"))
            for value in [summary.get(key)]
            if isinstance(value, int)
        ]
        if traffic:
            out.append(("Traffic", ", ".join(traffic)))
        span = summary.get("time_span")
        if span:
            out.append(("Time span", f"{when(span.get('start'))} to {when(span.get('end'))}"))
        if summary.get("spark_master"):
            out.append(("Spark master", summary["spark_master"]))
        if summary.get("started"):
            out.append(("Started", summary["started"]))
        if self.data.mqttaudit_version:
            out.append(("mqttaudit version", self.data.mqttaudit_version))
        if "duration" in summary:
            out.append(("Duration", duration(summary["duration"])))
        return out

    @property
    def warnings(self) -> list[str]:
        """What limits the audit: unreadable captures, bytes that do not add up, rules not decided."""
        out = []
        errors = self.summary.get("errors", [])
        if errors:
            out.append(
                f"{plural(len(errors), 'capture')} could not be read to the end; the traffic after the point where "
                "reading stopped was not audited."
            )
        if self.accounting is not None and not self.accounting.reconciles:
            out.append(self.accounting.verdict)
        undecided = self.undecided_total
        if undecided:
            out.append(
                f"{plural(undecided, 'rule check')} could not be decided from the traffic (not assessable); "
                "they are neither passes nor violations."
            )
        unjudged = [(v, info) for v, info in self.versions if not _judged(info)]
        if unjudged:
            each = "; ".join(
                f"{version}: {count(info['connections'])}, {info.get('handling', '')}" for version, info in unjudged
            )
            out.append(
                f"The behaviour of {plural(sum(info['connections'] for _, info in unjudged), 'connection')} was not "
                f"judged ({each}). Their bytes were checked as their version reads them and any codec finding is "
                "reported; nothing they did over time was held against a rule, nor counted as a pass."
            )
        return out


def audit_view(data: AuditReportData, catalogue: Catalogue | None = None) -> AuditView:
    rules = default_catalogue(catalogue)
    anchors = Anchors()
    findings = rule_findings(data, rules, anchors)
    routing = routing_groups(data, rules, anchors)
    lenient = lenient_findings(data, rules, anchors)
    by_side = {side: sum(f.count for f in findings if f.actor == side) for side in SIDES}
    total = sum(f.count for f in findings)
    headline = Headline(
        total,
        by_side["client"],
        by_side["server"],
        total - sum(by_side.values()),
        sum(g.count for g in routing),
        data.summary.get("lenient", 0) or sum(f.count for f in lenient),
    )
    flows = {flow: anchors.make("flow", flow) for flow in dict.fromkeys(row["flow"] for row in data.connections_sample)}
    listed: set[str] = set()
    connections = []
    for row in data.connections_sample:
        connections.append(("" if row["flow"] in listed else flows[row["flow"]], row))
        listed.add(row["flow"])
    return AuditView(
        data,
        rules,
        headline,
        findings,
        routing,
        accounting(data.summary),
        flows,
        tuple(connections),
        undecided_groups(data, rules, anchors),
        lenient,
    )


def undecided_groups(data: AuditReportData, catalogue: Catalogue, anchors: Anchors) -> tuple[UndecidedGroup, ...]:
    """One group per reason tag, the most frequent first, with its counts per rule and side and its sample rows (in
    spec order, then by time)."""
    counts: dict[str, list[UndecidedCount]] = {}
    for row in data.not_assessable_counts:
        counts.setdefault(_tag(row.get("tag")), []).append(row)
    rows: dict[str, list[UndecidedRow]] = {}
    for sample in data.not_assessable_rows:
        rows.setdefault(_tag(sample.get("tag")), []).append(sample)
    totals: dict[str, int] = {}
    for tag, number in data.summary.get("not_assessable_by_tag", {}).items():
        totals[_tag(tag)] = totals.get(_tag(tag), 0) + number
    for tag in {*counts, *rows}:
        totals.setdefault(tag, sum(row["count"] for row in counts.get(tag, [])) or len(rows.get(tag, [])))
    order = sorted(totals, key=lambda tag: (-totals[tag], tag == "", tag))
    position = {
        rule: n for n, rule in enumerate(in_spec_order((row["rule"] for row in data.not_assessable_rows), catalogue))
    }
    return tuple(
        UndecidedGroup(
            tag,
            totals[tag],
            tuple(counts.get(tag, [])),
            tuple(sorted(rows.get(tag, []), key=lambda r: (position[r["rule"]], r["actor"], r.get("time") or 0.0))),
            anchors.make("not-assessable", tag or "other"),
        )
        for tag in order
    )


def _tag(tag: object) -> str:
    """A reason's tag as the report groups by it: "" for none of the known tags (None, blank, or JSON's "null" for a
    missing key)."""
    text = str(tag or "").strip()
    return "" if text == "null" else text


def reference(rule: str, catalogue: Catalogue, level: str = "", section: str = "", summary: str = "") -> Reference:
    """The catalogue's entry for ``rule``; for an id it does not hold, what the audit's rows say about it."""
    entry: Rule | None = catalogue.get(rule)
    version = catalogue.version
    if entry is not None:
        return Reference(rule, entry.section, entry.level, entry.actor, entry.summary, entry.basis, True, version)
    return Reference(
        rule,
        section or section_of(rule, catalogue),
        level or "unlisted",
        "",
        summary or "not in the rule catalogue",
        "",
        False,
        version,
    )


def catalogue_for(version: object, catalogue: Catalogue) -> Catalogue:
    """The catalogue that numbers a row's rule: ``catalogue`` for the rows of its own version (and rows that name
    none, numbered by 3.1.1), the catalogue of ``version`` for the others."""
    wanted = str(version or DEFAULT_RULE_VERSION)
    return catalogue if wanted == catalogue.version else load_catalogue(wanted)


def rule_findings(data: AuditReportData, catalogue: Catalogue, anchors: Anchors) -> tuple[RuleFinding, ...]:
    """One finding per (rule, actor) of the counts and the samples; MUST first, then the most frequent, then in
    spec order."""
    counts: dict[tuple[str, str, str], list[RuleCount]] = {}
    for row in data.violations_by_rule:
        counts.setdefault((row["rule"], _rule_version(row), row["actor"]), []).append(row)
    samples: dict[tuple[str, str, str], list[ViolationRow]] = {}
    for sample in data.violation_samples:
        samples.setdefault((sample["rule"], _rule_version(sample), sample["actor"]), []).append(sample)
    keys = list(dict.fromkeys([*counts, *samples]))
    findings = []
    for rule, version, actor in keys:
        rows, examples = counts.get((rule, version, actor), []), samples.get((rule, version, actor), [])
        ref = reference(
            rule,
            catalogue_for(version, catalogue),
            _first(r.get("level") for r in [*rows, *examples]),
            _first(r.get("section") for r in [*rows, *examples]),
            _first(r.get("summary") for r in rows),
        )
        origins = {str(r.get("origin") or "") for r in [*rows, *examples]} - {""}
        times = [t for t in [*(r.get("first_time") for r in rows), *(r.get("time") for r in examples)] if t is not None]
        by_version = () if version == DEFAULT_RULE_VERSION else (version,)
        anchor = anchors.make("rule", rule, *by_version, actor)
        examples.sort(key=lambda r: (r.get("time") is None, r.get("time") or 0.0))
        findings.append(
            RuleFinding(
                ref,
                actor,
                sum(r["count"] for r in rows) if rows else len(examples),
                tuple(sorted(origins, key=lambda o: (o not in ORIGINS, o))),
                min(times, default=None),
                tuple(Sample(n, anchors.make(anchor, "sample", n), r) for n, r in enumerate(examples, 1)),
                anchor,
            )
        )
    position = {rule: index for index, rule in enumerate(in_spec_order((f.rule for f in findings), catalogue))}
    findings.sort(key=lambda f: (_strength(f.level), -f.count, position[f.rule], f.actor))
    return one_block_per_packet(findings)


def packet_of(row: ViolationRow) -> tuple[str, str, int] | None:
    """The packet a violation row shows (capture, flow, event), or None when it shows at no packet of its own."""
    event = row.get("event")
    if row.get("frame") is None or event is None or not row.get("evidence"):
        return None
    return (str(row.get("capture") or ""), str(row["flow"]), int(event))


def one_block_per_packet(findings: Sequence[RuleFinding]) -> tuple[RuleFinding, ...]:
    """The findings with each sample naming every statement its packet broke, and every sample of a packet already
    shown by an earlier finding pointing to it instead of repeating its bytes."""
    broken: dict[tuple[str, str, int], list[str]] = {}
    for finding in findings:
        for sample in finding.samples:
            key = packet_of(sample.row)
            if key is not None:
                statements = broken.setdefault(key, [])
                statements += [str(s) for s in (finding.rule, *(sample.row.get("also") or ())) if s not in statements]
    first: dict[tuple[str, str, int], tuple[Sample, RuleFinding]] = {}
    out = []
    for finding in findings:
        samples = []
        for sample in finding.samples:
            key = packet_of(sample.row)
            if key is None:
                samples.append(sample)
                continue
            own = {finding.rule, *(sample.row.get("also") or ())}
            others = tuple(s for s in broken[key] if s not in own)
            shown = first.setdefault(key, (sample, finding))
            if shown[0] is sample:
                samples.append(replace(sample, others=others))
            else:
                title = f"sample {shown[0].number} of {shown[1].title}"
                samples.append(replace(sample, shown_in=shown[0].anchor, shown_in_title=title, others=others))
        out.append(replace(finding, samples=tuple(samples)))
    return tuple(out)


def lenient_findings(data: AuditReportData, catalogue: Catalogue, anchors: Anchors) -> tuple[LenientFinding, ...]:
    """One entry per (rule, version, receiver) of the leniency counts and samples, each rule explained by the
    catalogue of its version; the most frequent first, then in spec order."""
    counts: dict[tuple[str, str, str], list[LenientCount]] = {}
    for row in data.lenient_counts:
        counts.setdefault((row["rule"], _rule_version(row), row["actor"]), []).append(row)
    samples: dict[tuple[str, str, str], list[LenientRow]] = {}
    for sample in data.lenient_rows:
        samples.setdefault((sample["rule"], _rule_version(sample), sample["actor"]), []).append(sample)
    found = []
    for rule, version, actor in dict.fromkeys([*counts, *samples]):
        rows, examples = counts.get((rule, version, actor), []), samples.get((rule, version, actor), [])
        ref = reference(
            rule,
            catalogue_for(version, catalogue),
            _first(r.get("level") for r in [*rows, *examples]),
            _first(r.get("section") for r in [*rows, *examples]),
        )
        times = [t for t in [*(r.get("first_time") for r in rows), *(r.get("time") for r in examples)] if t is not None]
        by_version = () if version == DEFAULT_RULE_VERSION else (version,)
        examples.sort(key=lambda r: (r.get("time") is None, r.get("time") or 0.0))
        found.append(
            LenientFinding(
                ref,
                actor,
                sum(r["count"] for r in rows) if rows else len(examples),
                min(times, default=None),
                _first(r.get("basis") for r in [*rows, *examples]),
                tuple(examples),
                anchors.make("lenient", rule, *by_version, actor),
            )
        )
    position = {rule: index for index, rule in enumerate(in_spec_order((f.rule for f in found), catalogue))}
    found.sort(key=lambda f: (-f.count, position[f.rule], f.actor))
    return tuple(found)


def routing_groups(data: AuditReportData, catalogue: Catalogue, anchors: Anchors) -> tuple[RoutingGroup, ...]:
    """One group per kind with findings, known kinds first in :data:`KINDS` order."""
    rows: dict[str, list[RoutingRow]] = {}
    for row in data.routing_findings:
        rows.setdefault(str(row.get("kind") or "session"), []).append(row)
    kinds = [k for k in KINDS if data.routing_counts.get(k) or k in rows]
    kinds += sorted(k for k in {*data.routing_counts, *rows} - set(KINDS) if data.routing_counts.get(k) or k in rows)
    groups = []
    for kind in kinds:
        examples = sorted(rows.get(kind, []), key=lambda r: (r.get("time") is None, r.get("time") or 0.0))
        statements = in_spec_order((r["rule"] for r in examples), catalogue)
        first = {r["rule"]: r for r in reversed(examples)}
        anchor = anchors.make("routing", kind)
        groups.append(
            RoutingGroup(
                kind,
                max(data.routing_counts.get(kind, 0), len(examples)),
                tuple(
                    reference(s, catalogue, first[s].get("level", ""), first[s].get("section", "")) for s in statements
                ),
                tuple(RoutingSample(n, anchors.make(anchor, n), r) for n, r in enumerate(examples, 1)),
                anchor,
            )
        )
    return tuple(groups)


def accounting(summary: AuditSummary) -> Accounting | None:
    counted = summary.get("bytes")
    if counted is None:
        return None
    return Accounting(
        counted.get("mqtt_bytes", 0),
        (
            (
                "in whole MQTT packets (packets with no MUST-level codec violation of the version of their connection, "
                "MQTT 3.1.1, 5.0 or 3.1, and the packets of connections framed only: no CONNECT captured, and "
                "packets no MQTT 3.1.1 peer sends)",
                counted.get("packet_bytes", 0),
            ),
            (
                "in malformed frames (packets that break a MUST-level codec rule of the version of their connection, "
                "and frames whose body did not decode: a truncated tail, the rest of a stream after a five-byte "
                "length)",
                counted.get("malformed_bytes", 0),
            ),
            ("in gaps (never captured)", counted.get("gap_bytes", 0)),
            (
                "captured but not assessable (before the first proven packet boundary of a connection captured from "
                "its middle or after a gap, a packet cut short by a gap or by the end of the capture, a packet a "
                "conflicting retransmission contradicts, the rest of a stream past the cap of malformed packets, a "
                "packet above the per-message budget, or what a flow carried past the per-flow budget)",
                counted.get("unsynced_bytes", 0),
            ),
        ),
        accounting_notes(summary),
    )


def accounting_notes(summary: AuditSummary) -> tuple[str, ...]:
    """The policies behind the byte account, each with what it did in this audit."""
    notes: list[str] = []
    cap = summary.get("malformed_cap")
    if cap:
        capped = cap.get("connections_capped", 0)
        outcome = (
            f"{plural(capped, 'connection')} reached the cap of {cap.get('per_connection', 0)}: "
            f"{plural(cap.get('bytes_not_decoded', 0), 'byte')} not decoded."
            if capped
            else "No connection reached it."
        )
        notes.append(_policy_note("Malformed packets", cap.get("policy", ""), outcome))
    conflicts = summary.get("conflicting_retransmissions")
    if conflicts:
        ranges = conflicts.get("ranges", 0)
        outcome = (
            f"Seen: {plural(ranges, 'range')}, {plural(conflicts.get('bytes', 0), 'byte')}."
            if ranges
            else "None were seen."
        )
        notes.append(_policy_note("Conflicting retransmissions", conflicts.get("policy", ""), outcome))
    notes += budget_notes(summary)
    copies = summary.get("conflicting_copies")
    if copies:
        listed = [
            f"{record.get('captures', ['?', '?'])[0]} and {record.get('captures', ['?', '?'])[1]} differ at offset "
            f"{record.get('offset', 0)} of the {record.get('side', 'unknown')}'s stream of "
            f"{record.get('connection') or '?'}"
            for record in copies.get("copies", [])
        ]
        count = copies.get("count", 0)
        outcome = f"Seen: {plural(count, 'connection')}: " + "; ".join(listed) + "." if count else "None were seen."
        notes.append(_policy_note("Conflicting copies", copies.get("policy", ""), outcome))
    return tuple(notes)


def budget_notes(summary: AuditSummary) -> list[str]:
    """Each budget of the audit: its bound and policy, then what it did in this audit."""
    return [_policy_note(title, policy, did) for title, policy, did in budget_texts.budget_notes(summary, plural)]


def _policy_note(title: str, policy: str, outcome: str) -> str:
    """One note of the byte account: the policy, by its title, then what it did in this audit."""
    return f"{title}: {policy}. {outcome}"


def expected_of(sample: Sample, finding: RuleFinding) -> str:
    """What a conforming side does: the judge's words, else (a codec violation) the rule itself."""
    return sample.row.get("expected") or finding.reference.summary


def _rule_version(row: RuleCount | ViolationRow | LenientCount | LenientRow) -> str:
    """The version whose specification numbers a row's rule (3.1.1 for rows that name none)."""
    return str(row.get("rule_version") or DEFAULT_RULE_VERSION)


def _judged(version: VersionInfo) -> bool:
    return version.get("handling", "").startswith("judged")


def _side_phrase(actor: str) -> str:
    return {"client": "clients", "server": "the server"}.get(actor, f"the {actor}" if actor else "an unnamed side")


def _level_note(level: str) -> str:
    if level in ("MUST", "unlisted"):
        return ""
    return (
        f" The statement is {level}-level: a recommended behaviour, so this limits interoperability rather than "
        "breaking conformance outright."
    )


def _strength(level: str) -> int:
    return LEVEL_ORDER.index(level) if level in LEVEL_ORDER else len(LEVEL_ORDER)


def _first(values: Iterable[object]) -> str:
    return next((str(value) for value in values if value), "")


def side_counts(findings: Sequence[RuleFinding], rule: str) -> dict[str, int]:
    """Violations of ``rule`` per side."""
    return {side: sum(f.count for f in findings if f.rule == rule and f.actor == side) for side in SIDES}
