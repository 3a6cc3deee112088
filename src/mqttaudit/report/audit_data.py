"""What the audit reports are written from: the bounded, already aggregated data the driver collects from the
audit's tables (counts, top-N lists, a few sample rows per rule), never a whole table. JSON-serialisable, so the
pipeline can keep it beside the tables as ``report_data.json`` and the reports can be written again from it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, NotRequired, TypedDict, cast


class CaptureInfo(TypedDict):
    """One capture file audited."""

    file: str
    #: Size of the file in bytes.
    bytes: int
    #: Capture records (frames) read from it.
    records: int


class ByteAccounting(TypedDict):
    """Where the bytes of the MQTT flows went. They reconcile when
    ``mqtt_bytes == packet_bytes + malformed_bytes + gap_bytes + unsynced_bytes``."""

    #: Bytes of TCP stream (both directions of every MQTT flow) the audit covered.
    mqtt_bytes: int
    #: Bytes of whole packets that break no MUST-level codec rule of their connection's version (3.1.1, 5.0, 3.1),
    #: and the packets of a connection framed only (no CONNECT captured, packets no 3.1.1 peer sends).
    packet_bytes: int
    #: Bytes of malformed frames: packets that break a MUST-level codec rule of their connection's version, and frames
    #: whose body did not decode (a truncated tail, an oversized packet, a stream after a five-byte Remaining Length).
    malformed_bytes: int
    #: Bytes missing from the capture (gap records): sequence space the capture never saw.
    gap_bytes: int
    #: Bytes captured but not assessable: before the first proven packet boundary (a connection captured from its
    #: middle, or after a gap), a packet cut short by a gap or by the end of the capture, a packet a conflicting
    #: retransmission contradicts, or the rest of a stream past the cap of malformed packets.
    unsynced_bytes: int


class CaptureErrorRow(TypedDict):
    """A capture that could not be read to its end (corrupt or truncated): where and why it stopped."""

    file: str
    #: Byte offset in the file of the structure at fault (None when unknown).
    offset: int | None
    #: The frame number (from 1) of the record at fault: the one cut short, or skipped as corrupt (None otherwise).
    frame: NotRequired[int | None]
    reason: str


class TimeSpan(TypedDict):
    """First and last capture timestamps, in seconds (Unix time for real captures)."""

    start: float | None
    end: float | None


class VersionInfo(TypedDict):
    """The connections that spoke one MQTT version, and how the audit handled them."""

    connections: int
    #: One sentence: ``judged against MQTT 3.1.1``, ``judged against MQTT 5.0``, ``decoded with the MQTT 3.1.1 rules
    #: MQTT 3.1 shares; its behaviour is not judged``...
    handling: str
    #: Packets (frames) of those connections.
    packets: NotRequired[int]


class MalformedCap(TypedDict, total=False):
    """The policy at the cap of malformed packets per connection, and what it did."""

    per_connection: int
    connections_capped: int
    bytes_not_decoded: int
    policy: str


class Conflicts(TypedDict, total=False):
    """Conflicting TCP retransmissions: the policy, the ranges recorded and their bytes."""

    ranges: int
    bytes: int
    policy: str


class MessageBudget(TypedDict, total=False):
    """The per-message budget: its bound, its policy, the packets above it and their bytes."""

    max_bytes: int
    messages_skipped: int
    bytes_skipped: int
    connections: int
    policy: str


class OutOfOrderBudget(TypedDict, total=False):
    """The out-of-order budget per direction: its bound, its policy, the gaps declared at it and their bytes."""

    max_bytes: int
    piece_cost: int
    gaps_declared: int
    gap_bytes: int
    connections: int
    policy: str


class FlowBudget(TypedDict, total=False):
    """The per-flow (and per-task) budget: its bound, its policy, the flows stopped at it and what was not held."""

    max_bytes: int
    flows_stopped: int
    segments_not_held: int
    bytes_not_held: int
    policy: str


class Budgets(TypedDict, total=False):
    """The audit's declared budgets (:mod:`mqttaudit.capture.budgets`), each with what it did."""

    message: MessageBudget
    out_of_order: OutOfOrderBudget
    flow: FlowBudget


class ConflictingCopy(TypedDict, total=False):
    """A connection two files hold with different bytes: the files, the connections judged apart (one per file),
    the side whose stream differs, its endpoint and the first stream offset where the copies differ."""

    captures: list[str]
    #: The connection, as the first file's copy names it apart from its file (None: no copy was judged).
    connection: str | None
    connections: list[str | None]
    side: str
    sender: str
    offset: int


class ConflictingCopies(TypedDict, total=False):
    """Connections held by several files with different bytes: how many, the first ones, the policy."""

    count: int
    copies: list[ConflictingCopy]
    policy: str


class AuditSummary(TypedDict, total=False):
    """The audit as a whole. Every key is optional; the reports leave out what is missing."""

    captures: list[CaptureInfo]
    flows: int
    connections: int
    packets: int
    bytes: ByteAccounting
    time_span: TimeSpan
    spark_master: str
    #: Seconds the audit took.
    duration: float
    #: When the audit ran (ISO 8601).
    started: str
    #: Capture records that yielded no TCP segment, by reason (``truncated-ip-header``, ``not-tcp``, ...).
    skipped: dict[str, int]
    errors: list[CaptureErrorRow]
    #: Rule instances the audit could not decide (rows of the ``not_assessable`` table).
    not_assessable: int
    #: Malformed packets and Protocol Errors a receiver accepted that it was not bound to detect (not violations).
    lenient: int
    #: Those rows by the tag their reason starts with (:mod:`mqttaudit.judge.reasons`).
    not_assessable_by_tag: dict[str, int]
    #: Version ("3.1.1", "3.1", "5.0", "unknown"...) -> its connections and how they were handled.
    versions: dict[str, VersionInfo]
    #: The cap of malformed packets kept per connection: its policy, the connections that reached it and the bytes
    #: left undecoded past it.
    malformed_cap: MalformedCap
    #: Bytes that arrived twice with different content: the policy, the ranges and their bytes.
    conflicting_retransmissions: Conflicts
    #: The per-message, out-of-order and per-flow budgets, each with its policy and what it did.
    budgets: Budgets
    #: Connections that two files hold with different bytes (each copy judged apart).
    conflicting_copies: ConflictingCopies


class RuleCount(TypedDict):
    """Violations of one rule by one side, found one way (``violations`` grouped by rule, actor, origin)."""

    rule: str
    level: str
    section: str
    #: The side that broke the rule: ``client`` or ``server``.
    actor: str
    #: ``codec`` (seen in the bytes) or ``judge`` (seen in the behaviour).
    origin: str
    count: int
    first_time: float | None
    #: The rule's one-line summary from the catalogue ("" to let the reports look it up).
    summary: str
    #: The MQTT version whose specification numbers ``rule`` ("3.1.1" when missing; "5.0" for the codec's findings
    #: on MQTT 5.0 connections): the same id can name different statements in 3.1.1 and 5.0.
    rule_version: NotRequired[str | None]


class TimeBucket(TypedDict):
    bucket_start: float
    actor: str
    count: int


class ClientCount(TypedDict):
    """A client by the violations it committed itself (never the server's on its connections): one per ClientId of a
    capture, and one per address (``ip:port``) for a connection with an empty ClientId or none captured."""

    #: Its address (for a ClientId seen on several connections, the first of them that broke a rule).
    client: str
    #: Its ClientId: "" when it sent an empty one, None when no CONNECT was captured.
    client_id: str | None
    violations: int
    connections: int
    #: The capture it was seen in (a ClientId of two captures is two clients).
    capture: NotRequired[str | None]


class ServerCount(TypedDict):
    """A server (``ip:port``) by the violations it committed itself."""

    server: str
    violations: int
    connections: int


class ViolationRow(TypedDict):
    """A row of the ``violations`` table."""

    capture: str
    flow: str
    #: Index of the judge event that shows the violation, within its flow.
    event: int | None
    rule: str
    level: str
    section: str
    actor: str
    origin: str
    kind: str | None
    #: The frame number (1 for the capture's first record, as Wireshark numbers them) that completed the event.
    frame: int | None
    #: Byte offset in that direction of the connection's stream.
    offset: int | None
    time: float | None
    detail: str
    expected: str | None
    #: The frame's bytes in hex, possibly cut (ending in "…"); "" when the finding is not about a packet. A missing
    #: answer that shows at a silence or a close (no ``frame``) holds the unanswered packet's bytes.
    evidence: str | None
    #: The unanswered packet of a missing-answer finding: its event and frame number (None for other findings).
    cause_event: NotRequired[int | None]
    cause_frame: NotRequired[int | None]
    #: That packet as the packets table describes it (``PUBLISH id 7, QoS 1, topic 'a/b', 9 bytes``).
    cause_packet: NotRequired[str | None]
    #: The MQTT version whose specification numbers ``rule`` ("3.1.1" when missing).
    rule_version: NotRequired[str | None]
    #: The other statements the same act breaks, failed with ``rule`` (one act, one row).
    also: NotRequired[list[str] | None]


class RoutingRow(TypedDict):
    """A row of the ``routing_findings`` table."""

    broker: str
    flow: str
    event: int | None
    #: ``leak``, ``missing``, ``duplicate``, ``qos`` or ``session``.
    kind: str
    rule: str
    level: str
    section: str
    time: float | None
    detail: str
    expected: str | None


class ConnectionRow(TypedDict):
    """A row of the ``connections`` table."""

    capture: str
    flow: str
    client: str
    server: str
    client_id: str | None
    protocol_level: int | None
    clean_session: bool | None
    keep_alive: int | None
    connack_code: int | None
    start: float | None
    end: float | None
    ended_by: str | None
    how: str | None
    mid_stream: bool | None
    roles: str | None
    packets: int | None
    violations: int | None
    not_assessable: int | None
    #: The MQTT version its CONNECT names ("unknown" without one), and how the audit handled it.
    version: NotRequired[str | None]
    handling: NotRequired[str | None]


class UndecidedCount(TypedDict):
    """Rule instances of one rule and side the audit could not decide, for one reason tag."""

    tag: str
    rule: str
    level: str
    actor: str
    count: int


class UndecidedRow(TypedDict):
    """A row of the ``not_assessable`` table: one instance of a rule the capture could not decide, and why."""

    capture: str
    flow: str
    client: str | None
    server: str | None
    client_id: str | None
    rule: str
    level: str
    section: str
    #: The side the rule binds ("" when neither).
    actor: str
    #: The event that called for the rule, and its frame number (None when unknown).
    event: int | None
    frame: int | None
    time: float | None
    #: Who left it: ``judge`` (the connection's judge) or ``routing`` (the routing replay).
    origin: NotRequired[str | None]
    #: The tag the reason starts with (:mod:`mqttaudit.judge.reasons`; "" for none of them).
    tag: str
    reason: str


class GapRow(TypedDict):
    """Bytes of one direction of a flow the capture never saw."""

    capture: str
    flow: str
    direction: str
    offset: int
    length: int
    time: NotRequired[float | None]


class LenientCount(TypedDict):
    """Packets breaking one rule that one receiver accepted and was not bound to detect (MQTT 5.0 section 4.13.1: a
    Server closes on a Malformed Packet or Protocol Error "when" it detects one): not violations of the receiver."""

    rule: str
    #: The MQTT version whose specification numbers ``rule`` ("3.1.1" when missing).
    rule_version: NotRequired[str | None]
    level: str
    section: str
    #: The receiver that accepted them: ``client`` or ``server``.
    actor: str
    count: int
    first_time: float | None
    #: Why that receiver was not bound to detect them, from the text of the version.
    basis: str


class LenientRow(TypedDict):
    """A row of the ``lenient`` table: a defect a receiver accepted without being bound to detect it (MQTT 5.0,
    section 4.13.1), with what was accepted and how, the basis, and the bytes."""

    capture: str
    flow: str
    client: str | None
    server: str | None
    client_id: str | None
    #: The statement the packet broke (its sender's), and the others the same packet broke.
    rule: str
    also: list[str]
    level: str
    section: str
    #: The receiver that accepted it.
    actor: str
    event: int | None
    frame: int | None
    offset: int | None
    time: float | None
    detail: str
    basis: str
    evidence: str | None
    cause_event: int | None
    cause_frame: int | None
    rule_version: str


def _empty_summary() -> AuditSummary:
    return AuditSummary()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditReportData:
    """Everything the audit reports show. Every list is bounded by the driver (top N, N samples per rule)."""

    summary: AuditSummary = field(default_factory=_empty_summary)
    violations_by_rule: list[RuleCount] = field(default_factory=list)
    violations_over_time: list[TimeBucket] = field(default_factory=list)
    #: Width of a time bucket in seconds (0: unknown, inferred from the bucket starts).
    bucket_seconds: float = 0.0
    top_clients: list[ClientCount] = field(default_factory=list)
    top_servers: list[ServerCount] = field(default_factory=list)
    #: Up to N example rows per (rule, actor).
    violation_samples: list[ViolationRow] = field(default_factory=list)
    #: Up to N routing findings.
    routing_findings: list[RoutingRow] = field(default_factory=list)
    #: All routing findings, by kind.
    routing_counts: dict[str, int] = field(default_factory=dict)
    #: Deliveries the broker model owed and what became of them: ``owed``, ``observed``, ``missing``, ``leaked``...
    deliveries_summary: dict[str, int] = field(default_factory=dict)
    connections_sample: list[ConnectionRow] = field(default_factory=list)
    #: Up to N gaps, and how many there were in all.
    gaps: list[GapRow] = field(default_factory=list)
    gaps_total: int = 0
    #: Undecided rule instances by (tag, rule, side), and up to N of them per (tag, rule, side).
    not_assessable_counts: list[UndecidedCount] = field(default_factory=list)
    not_assessable_rows: list[UndecidedRow] = field(default_factory=list)
    #: Accepted packets a receiver was not bound to detect, by (rule, version, receiver), and up to N rows of each.
    lenient_counts: list[LenientCount] = field(default_factory=list)
    lenient_rows: list[LenientRow] = field(default_factory=list)
    #: The mqttaudit version that collected the data ("" when not recorded).
    mqttaudit_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        """The data as JSON text; NaN and infinities are refused (JSON has none)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditReportData:
        """The inverse of :meth:`to_dict`. Raises ``ValueError`` on keys it does not know or values of the wrong
        JSON type (rows are taken as they are)."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown audit report data keys: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            spec = known[name]
            default = spec.default if spec.default_factory is MISSING else spec.default_factory()
            if isinstance(default, list):
                if not isinstance(value, list) or not all(isinstance(row, dict) for row in value):
                    raise ValueError(f"{name}: expected a list of objects")
            elif isinstance(default, dict):
                if not isinstance(value, dict):
                    raise ValueError(f"{name}: expected an object")
            elif isinstance(default, str):
                if not isinstance(value, str):
                    raise ValueError(f"{name}: expected a string")
            elif not isinstance(value, int | float) or isinstance(value, bool):
                raise ValueError(f"{name}: expected a number")
            values[name] = value
        return cls(**values)

    @classmethod
    def from_json(cls, text: str | bytes) -> AuditReportData:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("audit report data must be a JSON object")
        return cls.from_dict(cast(dict[str, Any], data))
