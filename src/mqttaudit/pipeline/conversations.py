"""One captured connection through the judge, as table rows: its packets, every violation (the codec's and the
judge's, each with the side at fault), the connection itself, and the transcript the routing replay needs.
Text from the wire is written by one rule (:func:`~mqttaudit.codec.describe.wire_text`): each ill-formed byte as
``\\xNN``; the frame's bytes are in the violation's evidence.

Pure: no Spark here. The Spark stages call :func:`judge_flow` once per connection inside an Arrow UDF and turn the
column lists it returns into record batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from mqttaudit.capture.conversation import FRAMED_ONLY, INFERRED_5, NOT_JUDGED, FlowAudit, handling
from mqttaudit.capture.flows import flow_name
from mqttaudit.capture.layers import PLAIN, LayerNote
from mqttaudit.capture.segments import format_endpoint
from mqttaudit.codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Disconnect,
    Frame,
    PacketType,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Unsuback,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.describe import wire_text
from mqttaudit.codec.packets import Packet, Property, Value
from mqttaudit.codec.remaining_length import read_remaining_length
from mqttaudit.judge import ConversationJudge, Finding, JudgeConfig, reasons
from mqttaudit.judge.connection import connect_version
from mqttaudit.judge.events import Closed, Event, Quiet, Sent, masked_password
from mqttaudit.judge.reasons import tag_of
from mqttaudit.judge.rules import TRANSPORT_RULES
from mqttaudit.judge.sides import side_name
from mqttaudit.judge.transcript import Delivered, Published, Transcript
from mqttaudit.judge.verdict import Leniency, Undecided
from mqttaudit.spec import Catalogue, load_catalogue

from .tables import (
    CONNECTION_COLUMNS,
    LENIENT_COLUMNS,
    LIST_PROPERTIES,
    NOT_ASSESSABLE_COLUMNS,
    PACKET_COLUMNS,
    PROPERTY_COLUMNS,
    PROPERTY_IDS,
    VIOLATION_COLUMNS,
)

CATALOGUE = load_catalogue("3.1.1")
#: The catalogue that names a connection's codec findings, by the connection's version (3.1 findings carry the
#: ids of the 3.1.1 rules it shares; any other version's connection was read as 3.1.1).
CATALOGUES: dict[str, Catalogue] = {"5.0": load_catalogue("5.0")}
CATALOGUES[INFERRED_5] = CATALOGUES["5.0"]  # read as 5.0: no CONNECT named it, its packets did
#: The specification whose numbering a connection's findings follow, by the version it was read (codec) or judged
#: (judge) in: the ``rule_version`` of its violation rows (3.1.1 for any version not listed).
RULE_VERSIONS: dict[str, str] = {version: catalogue.version for version, catalogue in CATALOGUES.items()}


@dataclass
class Flow:
    """One TCP connection of a capture, as the capture layer hands it over."""

    capture: str
    #: Stable id of the connection within the audit (capture, endpoints, first sequence number).
    flow: str
    client: str
    server: str
    #: The judge events of the connection, in order.
    events: Sequence[Event]
    #: For each event, the frame number (Wireshark's, from 1) of the capture record that completed it (None when
    #: unknown).
    frames: Sequence[int | None]
    #: The file that holds each event's frame, when a connection continues from file to file (empty: ``capture``).
    frame_captures: Sequence[str] = ()
    #: The capture began inside the connection (no SYN seen): what came before is unknown.
    mid_stream: bool = False
    #: How the client/server roles were decided ("handshake", "port", ...).
    roles: str = "handshake"
    #: The MQTT version the client's CONNECT names ("unknown" without one), the one its packets were read as; a
    #: version in ``NOT_JUDGED`` is not judged, one in ``FRAMED_ONLY`` not decoded either.
    version: str = "3.1.1"
    #: What carried the MQTT bytes ("tcp", "websocket", "tls", "tls (encrypted)").
    transport: str = PLAIN
    #: What the transport layers found, each with the role of its side ("client", "server", or "unknown" when the
    #: roles are not known): a sender's defect when the note's ``rule`` is set (a violation row each).
    layer_notes: Sequence[tuple[str, LayerNote]] = ()
    #: Frames not judged because a conflicting TCP retransmission contradicts their bytes: (the sender's role,
    #: capture time in seconds, the frame as the first copy made it, why).
    withheld: Sequence[tuple[str, float, Frame, str]] = ()


#: The Protocol Level of each version, for a connection whose CONNECT was framed but not read.
LEVELS = {"3.1": 3, "3.1.1": 4, "5.0": 5}


def connection_id(audit: FlowAudit) -> str:
    """A connection's id: its endpoints in order, its first time, and its ordinal among the connections of its
    flow that started at that time (none for the first)."""
    first, second = sorted(audit.endpoints)
    return f"{flow_name((first, second))}@{audit.first_time}" + (f"#{audit.ordinal}" if audit.ordinal else "")


def connection_flow(
    capture: str,
    audit: FlowAudit,
    record_of: Callable[[int], int | None] | None = None,
    capture_of: Callable[[int], str] | None = None,
) -> Flow:
    """The Flow of one reassembled connection: its id (endpoints, in order, and its first time), client and
    server (in the order seen when the roles are unknown), and, through ``record_of`` (capture time in ns -> frame
    number, from 1), the capture record that completed each packet; through ``capture_of`` (capture time in ns ->
    file), the file that holds that record, when a connection continues from file to file."""
    endpoints = [format_endpoint(*endpoint) for endpoint in audit.endpoints]
    client = endpoints[0] if audit.client is None else endpoints[audit.client]
    server = endpoints[1] if audit.client is None else endpoints[1 - audit.client]
    # Each Sent event is the next decoded frame of the connection; the frame's time names its capture record.
    frame_times = iter([side_frame.time for side_frame in audit.frames])
    times = [next(frame_times, -1) if isinstance(event, Sent) else None for event in audit.events]
    frames: list[int | None] = [
        record_of(time) if record_of is not None and time is not None else None for time in times
    ]
    files = [capture_of(time) if capture_of is not None and time is not None else capture for time in times]
    return Flow(
        capture,
        connection_id(audit),
        client,
        server,
        [masked_password(event) for event in audit.events],
        frames,
        frame_captures=files if any(name != capture for name in files) else (),
        mid_stream=audit.mid_stream,
        roles=audit.direction_reason,
        version=audit.version,
        transport=audit.transport,
        layer_notes=[(_role(audit, note.side), note) for note in audit.layer_notes],
        withheld=[
            (_role(audit, side), time / 1e9, frame, _withheld_reason(audit, side, frame))
            for side, time, frame in audit.withheld
        ],
    )


def _withheld_reason(audit: FlowAudit, side: int, frame: Frame) -> str:
    """Why a withheld frame is not judged: the reason the capture layer gave its bytes."""
    return next(
        (
            hole.reason
            for hole in audit.unassessable
            if hole.side == side and hole.offset == frame.offset and hole.length == frame.length
        ),
        reasons.reason(reasons.CONFLICTING, "its bytes arrived twice with different content"),
    )


def _role(audit: FlowAudit, side: int) -> str:
    direction = audit.direction(side)
    return "unknown" if direction is None else side_name(direction)


#: Packet type names by type number (Enum's ``name`` property costs a Python call per packet).
TYPE_NAMES = [packet_type.name for packet_type in PacketType]


@dataclass
class Columns:
    """Column lists of one table, appended row by row."""

    names: tuple[str, ...]
    data: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.data = {name: [] for name in self.names}

    def add(self, **row: Any) -> None:
        for name in self.names:
            self.data[name].append(row.get(name))

    def __len__(self) -> int:
        return len(self.data[self.names[0]])


#: Bytes of evidence kept per violation (hex); longer frames are cut, with the full length in the packets table.
EVIDENCE_BYTES = 64
#: Of a longer frame whose offending byte lies past the first bytes: its first bytes kept (the fixed header), and
#: the bytes kept before the offending one.
EVIDENCE_HEAD = 8
EVIDENCE_BEFORE = 16


@dataclass
class FlowResult:
    packets: Columns
    violations: Columns
    connection: Columns
    not_assessable: Columns
    #: The defects a receiver accepted without being bound to detect them (see :data:`LENIENT_COLUMNS`).
    lenient: Columns
    #: The transcript for the routing replay (payloads replaced by digests).
    replayed: Transcript


#: A lone surrogate U+DC80..U+DCFF as ``repr()`` writes it (``\\udcff``), not preceded by an escaped backslash.
def finding_text(text: str) -> str:
    """A judge's sentence as the tables hold it, by :func:`wire_text` (the judge quotes values with ``quoted``)."""
    return wire_text(text)


def rule_level(rule: str, version: str = "3.1.1") -> tuple[str, str]:
    """The level and section of a rule as the catalogue of ``version`` (a connection's) holds it ("MUST" and ""
    for an id the catalogue does not hold)."""
    entry = CATALOGUES.get(version, CATALOGUE).get(rule)
    return ("MUST", "") if entry is None else (entry.level, entry.section)


#: The property columns of a packet without properties.
NO_PROPERTIES: tuple[None, ...] = (None,) * len(PROPERTY_COLUMNS)


def property_values(found: tuple[Property, ...]) -> tuple[Any, ...]:
    """The property columns of a packet's ``found`` properties: the first value of each (text by
    :func:`wire_text`), every value for the list columns (a User Property as ``name=value``), None when absent."""
    out: list[Any] = []
    for name, identifier in PROPERTY_IDS.items():
        values = [prop.value for prop in found if prop.identifier == identifier]
        if name in LIST_PROPERTIES:
            out.append([_column_text(value) for value in values] if values else None)
        else:
            out.append(_column_text(values[0]) if values else None)
    return tuple(out)


def _column_text(value: object) -> object:
    """A property value as a table cell: text escaped by :func:`wire_text`, a string pair as ``name=value``."""
    if isinstance(value, str):
        return wire_text(value)
    if isinstance(value, tuple):
        return "=".join(wire_text(str(part)) for part in value)
    return value


def reason_code_of(packet: Packet | None) -> int | None:
    """The packet's single reason or return code: CONNACK's, a 5.0 acknowledgement's, DISCONNECT's or AUTH's (None
    where the bytes leave it out), SUBACK's or UNSUBACK's when it acknowledges one filter; None otherwise."""
    if isinstance(packet, Connack):
        return packet.return_code
    if isinstance(packet, Suback):
        return packet.return_codes[0] if len(packet.return_codes) == 1 else None
    if isinstance(packet, Unsuback):
        return packet.reason_codes[0] if len(packet.reason_codes) == 1 else None
    if isinstance(packet, (Puback, Pubrec, Pubrel, Pubcomp, Disconnect, Auth)):
        return packet.reason_code
    return None


def judge_flow(flow: Flow, config: JudgeConfig) -> FlowResult:
    """Feeds the connection's events to the judge and returns its rows, the judge's named by the catalogue of the
    version it judged the connection in. A connection of a version that is not judged (``NOT_JUDGED``) gives its
    packets' rows and its codec violations (by its version's catalogue), and nothing of the judge; one that is
    framed only (``FRAMED_ONLY``) its packets' rows (type from the fixed header) and nothing else."""
    judged = flow.version not in NOT_JUDGED
    decoded = flow.version not in FRAMED_ONLY
    rule_version = RULE_VERSIONS.get(flow.version, CATALOGUE.version)
    judge = ConversationJudge(config, conversation=flow.flow, mid_stream=flow.mid_stream)
    packets = Columns(PACKET_COLUMNS)
    packet_columns = [packets.data[name] for name in PACKET_COLUMNS]
    violations = Columns(VIOLATION_COLUMNS)
    codec_violations = 0
    for index, event in enumerate(flow.events):
        if judged:
            judge.feed(event)
        if not isinstance(event, Sent):
            continue
        frame, packet = event.frame, event.frame.packet
        record = flow.frames[index] if index < len(flow.frames) else None
        side = side_name(event.sender)
        publish = packet if isinstance(packet, Publish) else None
        held_by = capture_at(flow, index)
        values = (
            held_by,
            flow.flow,
            index,
            side,
            record,
            frame.offset,
            frame.length,
            event.time,
            packet_type_name(event) if packet is None else TYPE_NAMES[packet.packet_type],
            getattr(packet, "packet_id", None),
            None if publish is None else publish.qos,
            None if publish is None else publish.retain,
            None if publish is None else publish.dup,
            None if publish is None else wire_text(publish.topic),
            wire_text(packet.client_id) if isinstance(packet, Connect) else None,
            flow.version,
            reason_code_of(packet),
        )
        found = getattr(packet, "properties", None)
        cells = values + (property_values(found) if found else NO_PROPERTIES)
        for column, value in zip(packet_columns, cells, strict=True):
            column.append(value)
        for violation in frame.violations if decoded else ():
            if violation.rule_key in TRANSPORT_RULES:
                continue  # the transport layer's own row reports it, with the frame that shows it
            codec_violations += 1
            level, section = rule_level(violation.rule, flow.version)
            violations.add(
                capture=held_by,
                flow=flow.flow,
                event=index,
                rule=violation.rule,
                level=level,
                section=section,
                actor=side,
                origin="codec",
                kind="",
                frame=record,
                offset=violation.offset,
                time=event.time,
                detail=wire_text(violation.detail),
                expected="",
                evidence=evidence(frame.raw, violation.offset - frame.offset),
                rule_version=rule_version,
            )
    judgement = judge.finish()
    transcript = judge.transcript
    version = judged_version(transcript, config)
    for finding in judgement.findings:
        add_finding(violations, capture_at(flow, finding.event), finding, flow, "judge", version)
    layer_defects = add_layer_defects(violations, flow, rule_version)
    connection = Columns(CONNECTION_COLUMNS)
    row = _connection_row(flow, transcript, len(packets), codec_violations + len(judgement.findings) + layer_defects)
    undecided = Columns(NOT_ASSESSABLE_COLUMNS)
    for instance in judgement.undecided:
        add_undecided(undecided, flow.capture, instance, flow, row["client_id"], version)
    add_withheld(undecided, flow, row["client_id"])
    lenient = Columns(LENIENT_COLUMNS)
    for entry in judgement.lenient:
        add_lenient(lenient, flow.capture, entry, flow, row["client_id"], version)
    connection.add(**row, not_assessable=len(undecided), lenient=len(lenient))
    return FlowResult(packets, violations, connection, undecided, lenient, digested(transcript))


def capture_at(flow: Flow, event: int) -> str:
    """The file that holds the frame of the flow's ``event`` (the connection's own for any other event)."""
    files = flow.frame_captures
    return files[event] if 0 <= event < len(files) else flow.capture


#: The origin of the not assessable rows of a frame's codec violations that the bytes cannot uphold.
CODEC_ORIGIN = "codec"


def add_withheld(rows: Columns, flow: Flow, client_id: str | None) -> None:
    """A not assessable row per MUST-level codec violation of each frame a conflicting retransmission contradicts:
    the first copy showed it, the other copy may not have; which one the receiver kept is unknown."""
    for actor, time, frame, why in flow.withheld:
        for violation in frame.violations:
            if violation.rule_key in TRANSPORT_RULES or codec_rules.is_advisory(violation.rule):
                continue
            level, section = rule_level(violation.rule, flow.version)
            rows.add(
                capture=flow.capture,
                flow=flow.flow,
                client=flow.client,
                server=flow.server,
                client_id=client_id,
                rule=violation.rule,
                level=level,
                section=section,
                actor=actor,
                time=time,
                origin=CODEC_ORIGIN,
                tag=tag_of(why),
                reason=finding_text(
                    f"{why}; the frame at stream offset {frame.offset} ({evidence(frame.raw)}) broke it as first "
                    f"captured: {violation.detail}"
                ),
            )


#: The origin of the violation rows a transport layer found (WebSocket framing).
TRANSPORT_ORIGIN = "transport"


def add_layer_defects(violations: Columns, flow: Flow, rule_version: str) -> int:
    """A violation row per defect a transport layer found (a note with a rule): the statement, the side that broke
    it, what was expected, and the bytes that show it. Returns how many."""
    from mqttaudit.capture.websocket import EXPECTED

    added = 0
    for actor, note in flow.layer_notes:
        if note.rule is None:
            continue
        level, section = rule_level(note.rule, rule_version)
        violations.add(
            capture=flow.capture,
            flow=flow.flow,
            rule=note.rule,
            level=level,
            section=section,
            actor=actor,
            origin=TRANSPORT_ORIGIN,
            kind=flow.transport,
            time=note.time / 1e9,
            detail=wire_text(note.text),
            expected=EXPECTED.get(note.rule, ""),
            evidence=evidence(note.raw),
            rule_version=rule_version,
        )
        added += 1
    return added


def judged_version(transcript: Transcript, config: JudgeConfig) -> str:
    """The version the judge judged a connection in, the one its findings are numbered in: its CONNECT's, when the
    server supports that level and the judge knows it (:func:`connect_version`); else 3.1.1."""
    connect = transcript.connect
    return CATALOGUE.version if connect is None else connect_version(connect, config.supported_protocol_levels)


def packet_type_name(event: Sent) -> str | None:
    """The packet type a whole frame's fixed header names, for a frame not decoded (another version's)."""
    frame = event.frame
    if frame.violations or len(frame.raw) != frame.length or not frame.raw:
        return None
    return TYPE_NAMES[frame.raw[0] >> 4]


def framed_connack_code(flow: Flow) -> int | None:
    """The return (or reason) code of the first CONNACK the server sent, read from its bytes: the second byte of
    its variable header in every version (a connection not judged has no decoded CONNACK)."""
    for event in flow.events:
        if isinstance(event, Sent) and event.sender is Direction.FROM_SERVER:
            raw = event.frame.raw
            if raw[:1] != b"\x20" or len(raw) != event.frame.length:
                continue
            _remaining, body = read_remaining_length(raw, 1, len(raw))
            return raw[body + 1] if body >= 0 and body + 1 < len(raw) else None
    return None


def add_undecided(
    rows: Columns,
    capture: str,
    instance: Undecided,
    flow: Flow | None,
    client_id: str | None = None,
    version: str = "3.1.1",
) -> None:
    """One undecided instance as a ``not_assessable`` row, located by the event that called for it: the
    connection's judge's when ``flow`` is given (origin "judge"), else the routing replay's; its rule named in
    ``version``."""
    level, section = rule_level(instance.rule, version)
    frame = None
    if flow is not None and 0 <= instance.event < len(flow.frames):
        frame = flow.frames[instance.event]
    rows.add(
        capture=capture,
        flow=instance.conversation or (None if flow is None else flow.flow),
        client=None if flow is None else flow.client,
        server=None if flow is None else flow.server,
        client_id=client_id,
        rule=instance.rule,
        level=level,
        section=section,
        actor="" if instance.side is None else instance.side.value,
        event=None if instance.event < 0 else instance.event,
        frame=frame,
        time=instance.time,
        origin="routing" if flow is None else "judge",
        tag=tag_of(instance.reason),
        reason=finding_text(instance.reason),
    )


def add_finding(
    violations: Columns, capture: str, finding: Finding, flow: Flow | None, origin: str, version: str = "3.1.1"
) -> None:
    """A judge finding as a violation row, located by the event it names; its rule named in ``version``."""
    level, section = rule_level(finding.rule, version)
    where = located(flow, finding.event, finding.cause)
    violations.add(
        capture=capture,
        flow=finding.conversation,
        event=finding.event,
        rule=finding.rule,
        level=level,
        section=section,
        actor=finding.side.value,
        origin=origin,
        kind=finding.kind,
        frame=where.frame,
        offset=where.offset,
        time=finding.time,
        detail=finding_text(finding.detail),
        expected=finding_text(finding.expected),
        evidence=where.evidence,
        cause_event=None if finding.cause < 0 else finding.cause,
        cause_frame=where.cause_frame,
        rule_version=RULE_VERSIONS.get(version, CATALOGUE.version),
        also=[str(rule) for rule in finding.also],
    )


def add_lenient(
    rows: Columns, capture: str, entry: Leniency, flow: Flow, client_id: str | None, version: str = "3.1.1"
) -> None:
    """A leniency of the judge as a ``lenient`` row, located as a finding is; its rules named in ``version``."""
    level, section = rule_level(entry.rule, version)
    where = located(flow, entry.event, entry.cause)
    rows.add(
        capture=capture,
        flow=entry.conversation or flow.flow,
        client=flow.client,
        server=flow.server,
        client_id=client_id,
        rule=entry.rule,
        level=level,
        section=section,
        actor=entry.side.value,
        event=entry.event,
        frame=where.frame,
        offset=where.offset,
        time=entry.time,
        detail=finding_text(entry.detail),
        basis=finding_text(entry.basis),
        also=[str(rule) for rule in entry.others],
        evidence=where.evidence,
        cause_event=None if entry.cause < 0 else entry.cause,
        cause_frame=where.cause_frame,
        rule_version=RULE_VERSIONS.get(version, CATALOGUE.version),
    )


@dataclass(frozen=True, slots=True)
class Location:
    """Where a judge's conclusion shows in a flow: the record and stream offset of its event's frame, that frame's
    bytes (or, for a conclusion shown at a silence or a close, those of the packet that called for it), and the
    record of that packet."""

    frame: int | None = None
    offset: int | None = None
    evidence: str = ""
    cause_frame: int | None = None


def located(flow: Flow | None, event: int, cause: int) -> Location:
    """The :class:`Location` of a conclusion at ``event``, called for by ``cause`` (-1: none), in ``flow``."""
    if flow is None:
        return Location()
    frame = cause_frame = offset = None
    hexed = ""
    if 0 <= event < len(flow.events):
        shown = flow.events[event]
        frame = flow.frames[event] if event < len(flow.frames) else None
        if isinstance(shown, Sent):
            offset, hexed = shown.frame.offset, evidence(shown.frame.raw)
    if 0 <= cause < len(flow.events):
        called = flow.events[cause]
        cause_frame = flow.frames[cause] if cause < len(flow.frames) else None
        if isinstance(called, Sent) and not hexed:
            # Shown at a silence or a close: the bytes that called for the answer are the evidence.
            offset, hexed = called.frame.offset, evidence(called.frame.raw)
    return Location(frame, offset, hexed, cause_frame)


def evidence(raw: bytes, at: int | None = None) -> str:
    """The bytes of a frame in hex, at most :data:`EVIDENCE_BYTES` of them, an ellipsis for each stretch left out.
    With ``at`` (the offending byte's index in the frame) that byte is written in brackets (``[90]``) and always
    shown: past the first bytes, the frame's first :data:`EVIDENCE_HEAD` bytes (its fixed header), then a window
    from :data:`EVIDENCE_BEFORE` bytes before it."""
    marked = at if at is not None and 0 <= at < len(raw) else None
    if marked is None or marked < EVIDENCE_BYTES - EVIDENCE_BEFORE:
        kept = [range(min(len(raw), EVIDENCE_BYTES))]
    else:
        start = marked - EVIDENCE_BEFORE
        kept = [range(EVIDENCE_HEAD), range(start, min(len(raw), start + EVIDENCE_BYTES - EVIDENCE_HEAD))]
    tokens: list[str] = []
    shown_to = 0
    for part in kept:
        tokens += ["…"] if part.start > shown_to else []
        tokens += [f"[{raw[i]:02x}]" if i == marked else f"{raw[i]:02x}" for i in part]
        shown_to = part.stop
    return " ".join(tokens + (["…"] if shown_to < len(raw) else []))


def _connection_row(flow: Flow, transcript: Transcript, packets: int, violations: int) -> dict[str, Any]:
    connect, connack = transcript.connect, transcript.connack
    if connect is None:  # not judged (another version's connection): its CONNECT, when it could be read
        first = next((e.frame.packet for e in flow.events if isinstance(e, Sent)), None)
        connect = first if isinstance(first, Connect) else None
    closed = next((e for e in reversed(flow.events) if isinstance(e, Closed)), None)
    quiet = next((e for e in reversed(flow.events) if isinstance(e, Quiet)), None)
    times = [e.time for e in flow.events]
    if closed is not None:
        how = "rst" if closed.abrupt else "fin"
        ended_by = None if closed.by is None else closed.by.value
    else:
        how, ended_by = ("capture-end" if quiet is not None or times else "unknown"), None
    return {
        "capture": flow.capture,
        "flow": flow.flow,
        "client": flow.client,
        "server": flow.server,
        "client_id": None if connect is None else wire_text(connect.client_id),
        "protocol_level": LEVELS.get(flow.version) if connect is None else connect.protocol_level,
        "clean_session": None if connect is None else connect.clean_session,
        "keep_alive": None if connect is None else connect.keep_alive,
        "connack_code": framed_connack_code(flow) if connack is None else connack.return_code,
        "start": min(times) if times else None,
        "end": max(times) if times else None,
        "ended_by": ended_by,
        "how": how,
        "mid_stream": flow.mid_stream,
        "roles": flow.roles,
        "transport": flow.transport,
        "version": flow.version,
        "handling": handling(flow.version),
        "packets": packets,
        "violations": violations,
    }


#: Payloads longer than this are replaced by a digest of this size in the routing replay.
DIGEST_SIZE = 16


def _digest(payload: bytes) -> bytes:
    """Stands in for a payload in the routing replay: equal payloads stay equal, an empty one stays empty."""
    return payload if len(payload) <= DIGEST_SIZE else b"#" + hashlib.blake2b(payload, digest_size=15).digest()


V = TypeVar("V", bound=Value)


def _with(value: V, **changes: object) -> V:
    """A copy of a codec value with some fields changed."""
    return type(value)(**{**value.as_dict(), **changes})


def _digest_publish(publish: Publish) -> Publish:
    """The PUBLISH with its payload's digest: every other field kept, its 5.0 properties too (the replay compares
    a copy's with the message's, and reads the Message Expiry Interval)."""
    digest = _digest(publish.payload)
    if digest is publish.payload:
        return publish
    return Publish(
        topic=publish.topic,
        payload=digest,
        qos=publish.qos,
        retain=publish.retain,
        dup=publish.dup,
        packet_id=publish.packet_id,
        properties=publish.properties,
    )


def digested(transcript: Transcript) -> Transcript:
    """The transcript with every payload replaced by its digest (what the broker model compares)."""
    connect = transcript.connect
    if connect is not None and connect.will is not None and len(connect.will.message) > DIGEST_SIZE:
        connect = _with(connect, will=_with(connect.will, message=_digest(connect.will.message)))
    return replace(
        transcript,
        connect=connect,
        published=[
            p
            if len(p.message.payload) <= DIGEST_SIZE
            else Published(p.event, _digest_publish(p.message), p.sent, p.accepted, p.certain)
            for p in transcript.published
        ],
        delivered=[
            d if len(d.message.payload) <= DIGEST_SIZE else Delivered(d.event, d.time, _digest_publish(d.message))
            for d in transcript.delivered
        ],
    )
