"""The evidence of a probe case in words: each connection's transcript, and what the server did after each packet
the client sent. Works on the recorded connections (``CaseResult.connections``, as written to findings.json)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..judge import Finding
from .peer_text import cut, printable

__all__ = ["printable"]

#: Longest frame shown in full; longer ones are cut (the JSON evidence keeps more of them).
MAX_HEX_BYTES = 256
#: Events of one connection a transcript shows: the first ones and the last ones (a flooding broker sends millions).
HEAD_EVENTS = 40
TAIL_EVENTS = 10
#: Packets named in what the server did after one client packet, and violations listed under one packet; the
#: rest are counted.
MAX_ANSWERS = 5
#: Where a probe's human reports point for what they leave out.
WHOLE_IN = "findings.json"
#: Characters of evidence (transcripts) one report writes at most; the rest is in findings.json.
EVIDENCE_CHARS = 600_000
ARROWS = {"client": "client -> server", "server": "server -> client"}
_INDENT = " " * 20

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One packet the client sent and what the server did before the client's next packet."""

    connection: str
    #: Indexes of the client's packet and of the connection's next client packet (or the end) in its events.
    first: int
    stop: int
    time: float
    stimulus: str
    violations: tuple[str, ...]
    observed: str

    def holds(self, connection: str, event: int) -> bool:
        """Whether event number ``event`` of ``connection`` lies in this exchange."""
        return connection == self.connection and self.first <= event < self.stop


def seconds(value: float) -> str:
    return f"{value:.3f} s"


def is_packet(event: Record) -> bool:
    return "from" in event


def shown_hex(hex_bytes: str, length: object = None) -> str:
    """The frame's hex, cut after ``MAX_HEX_BYTES`` bytes with a note of the frame's size (``length`` when the
    evidence gives it: the JSON may itself hold only the start of a long frame)."""
    octets = hex_bytes.split(" ", MAX_HEX_BYTES)
    total = _int(length, (len(hex_bytes) + 1) // 3)
    if len(octets) <= MAX_HEX_BYTES and total <= MAX_HEX_BYTES:
        return hex_bytes
    return " ".join(octets[:MAX_HEX_BYTES]) + f" ... (first {min(MAX_HEX_BYTES, len(octets))} of {total:,} bytes)"


def packet_label(event: Record) -> str:
    """The decoded packet (cut: a topic may be 60,000 characters); for a frame without a decoded packet, its bytes:
    ``malformed: <hex>`` when a rule it breaks says why, else ``MQTT 5.0 packet, not decoded: <hex>`` (a frame that
    was framed only, such as one of a connection whose CONNECT was not captured and whose packets no MQTT 3.1.1 peer
    sends, is not read as MQTT 3.1.1, and is not malformed for that)."""
    if event.get("packet") is None:
        hexed = shown_hex(event["hex"], event.get("length"))
        if event.get("violations"):
            return f"malformed: {hexed}"
        version = event.get("version")
        return f"{'MQTT ' + printable(str(version)) if version else 'a'} packet, not decoded: {hexed}"
    return printable(cut(str(event["packet"]), whole_in=WHOLE_IN))


def ending(event: Record) -> str:
    """How a connection ended, or that it was still open when observation stopped; any other event by its fields."""
    if event.get("quiet_until"):
        return "observation stopped with the connection still open"
    if "lost" in event:
        return f"{_int(event.get('length'), 0):,} bytes from the {printable(str(event['lost']))} not recorded"
    if "closed_by" not in event and "how" not in event:
        fields = ", ".join(f"{key} {value}" for key, value in event.items() if key != "t")
        return printable(cut(fields, whole_in=WHOLE_IN))
    by = event.get("closed_by")
    return f"closed by the {by} ({_how(event)})" if by else f"the connection ended ({_how(event)}), closer unknown"


def _how(event: Record) -> str:
    """``FIN`` for an orderly close, ``RST`` for a reset."""
    return str(event.get("how", "fin")).upper()


class Budget:
    """Characters of evidence one report may still write, shared by its transcripts, so that the report stays
    bounded however many failures and frames the run holds."""

    def __init__(self, chars: int = EVIDENCE_CHARS) -> None:
        self.chars = chars
        self.left = chars

    def note(self) -> str:
        return f"… evidence left out: this report shows at most {self.chars:,} characters of evidence; see {WHOLE_IN}"


def transcript(connections: Sequence[Mapping[str, Any]], budget: Budget | None = None) -> str:
    """Every event of every connection in order: its number (as findings cite it), time, direction, decoded
    packet, bytes, violations, and how the connection ended. A connection's events beyond the first
    :data:`HEAD_EVENTS` and the last :data:`TAIL_EVENTS` are counted, not shown; with a ``budget``, the transcript
    stops where the report's evidence budget runs out."""
    lines: list[str] = []
    used = 0
    for connection in connections:
        client_id = connection.get("client_id")
        lines.append(
            f"connection {printable(cut(str(connection['name']), whole_in=WHOLE_IN))}"
            + (f", client id {printable(cut(str(client_id), whole_in=WHOLE_IN))!r}" if client_id else "")
        )
        for line in _connection_lines(connection):
            lines.append(line)
            used += len(line) + 1
            if budget is not None and used >= budget.left:
                budget.left = 0
                return "\n".join([*lines, budget.note()])
        lines.append("")
    if budget is not None:
        budget.left -= used
    return "\n".join(lines).rstrip("\n")


def _connection_lines(connection: Mapping[str, Any]) -> Iterator[str]:
    events = list(connection["events"])
    hidden = range(HEAD_EVENTS, len(events) - TAIL_EVENTS) if len(events) > HEAD_EVENTS + TAIL_EVENTS else range(0)
    for number, event in enumerate(events):
        if number in hidden:
            if number == hidden.start:
                yield f"{_INDENT}{_left_out(events[hidden.start : hidden.stop])}"
            continue
        yield from _event_lines(number, event)
    omitted = connection.get("omitted")
    if isinstance(omitted, Mapping):
        end = omitted.get("end")
        yield f"{_INDENT}{_omitted(omitted, isinstance(end, Mapping))}"
        if isinstance(end, Mapping):
            yield from _event_lines(len(events) + _int(omitted.get("events"), 1) - 1, end)


def _event_lines(number: int, event: Record) -> list[str]:
    stamp = f"{f'[{number}]':>6} {event['t']:9.3f} s  "
    if not is_packet(event):
        return [f"{stamp}{ending(event)}"]
    return [
        f"{stamp}{ARROWS.get(event['from'], printable(str(event['from'])))}  {packet_label(event)}",
        f"{_INDENT}bytes at offset {event['offset']}: {shown_hex(event['hex'], event.get('length'))}",
        *(
            f"{_INDENT}violation {printable(str(v['rule']))} at offset {v['offset']}: "
            f"{printable(cut(str(v['detail']), whole_in=WHOLE_IN))}"
            for v in event["violations"][:MAX_ANSWERS]
        ),
        *(
            [f"{_INDENT}… {len(event['violations']) - MAX_ANSWERS:,} more violations of this packet"]
            if len(event["violations"]) > MAX_ANSWERS
            else []
        ),
    ]


def _omitted(omitted: Record, end_shown: bool) -> str:
    """What findings.json itself left out of a connection, as the prober counted it."""
    server = omitted.get("from_server")
    said = printable(cut(str(server.get("summary", "")), whole_in=WHOLE_IN)) if isinstance(server, Mapping) else ""
    parts = [f"from the server: {said}"] if said else []
    parts.append(f"{_int(omitted.get('client_packets'), 0):,} client packets")
    count = _int(omitted.get("events"), 0) - end_shown
    last = ", then the last one" if end_shown else ""
    return f"… {count:,} more events not recorded in {WHOLE_IN} ({'; '.join(parts)}){last}"


def _int(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _left_out(events: Sequence[Record]) -> str:
    """``… 12,003 more events not shown here (12,001 packets, 1,048,576 bytes); see findings.json``."""
    packets = [event for event in events if is_packet(event)]
    size = sum(_int(event.get("length"), (len(str(event.get("hex", ""))) + 1) // 3) for event in packets)
    return f"… {len(events):,} more events not shown here ({len(packets):,} packets, {size:,} bytes); see {WHOLE_IN}"


def exchanges(connections: Sequence[Mapping[str, Any]]) -> list[Exchange]:
    """One exchange per packet the client sent, on every connection, in time order."""
    out: list[Exchange] = []
    for connection in connections:
        events = list(connection["events"])
        sent = [i for i, event in enumerate(events) if is_packet(event) and event["from"] == "client"]
        for i, start in enumerate(sent):
            stop = sent[i + 1] if i + 1 < len(sent) else len(events)
            stimulus = events[start]
            out.append(
                Exchange(
                    connection=str(connection["name"]),
                    first=start,
                    stop=stop,
                    time=float(stimulus["t"]),
                    stimulus=packet_label(stimulus),
                    violations=tuple(v["rule"] for v in stimulus["violations"]),
                    observed=reaction(stimulus, events[start + 1 : stop], events[stop] if stop < len(events) else None),
                )
            )
    out.sort(key=lambda exchange: exchange.time)
    return out


def reaction(stimulus: Record, after: Sequence[Record], next_sent: Record | None) -> str:
    """What the server did after ``stimulus``: the packets it answered, then whether and how the connection ended."""
    t0 = float(stimulus["t"])
    answered = [event for event in after if is_packet(event)]
    answers = [packet_label(event) for event in answered[:MAX_ANSWERS]]
    if len(answered) > MAX_ANSWERS:
        answers.append(f"{len(answered) - MAX_ANSWERS:,} more packets")
    parts = ["answered " + ", then ".join(answers)] if answers else []
    for event in after:
        if is_packet(event):
            continue
        elapsed = seconds(float(event["t"]) - t0)
        if event.get("quiet_until"):
            parts.append(f"kept the connection open for {elapsed}")
        elif event.get("closed_by") == "server":
            parts.append(f"closed the connection ({_how(event)}) after {elapsed}")
        elif event.get("closed_by") == "client":
            parts.append(f"kept the connection open for {elapsed}, until the client closed it")
        else:
            parts.append(f"the connection ended ({_how(event)}) after {elapsed}")
    if parts:
        return "; then ".join(parts)
    if next_sent is not None:
        return f"no answer within {seconds(float(next_sent['t']) - t0)}, before the client's next packet"
    return "nothing observed after it"


def exchange_of(finding: Finding, exchanges: Sequence[Exchange]) -> Exchange | None:
    """The exchange a finding is about: the one holding its event (a lone conversation may go unnamed), else the
    last one started by the finding's time, else the first."""
    names = {exchange.connection for exchange in exchanges}
    connection = finding.conversation or (names.pop() if len(names) == 1 else "")
    held = [exchange for exchange in exchanges if exchange.holds(connection, finding.event)]
    if held:
        return held[0]
    before = [exchange for exchange in exchanges if exchange.time <= finding.time]
    return before[-1] if before else next(iter(exchanges), None)


def expectations(findings: Sequence[Finding], expected: str, exchanges: Sequence[Exchange]) -> dict[Exchange, str]:
    """What a conforming broker does at each exchange: the expectation of every finding that lands on it (the
    case's ``expected`` where a finding has none), the case's where the client's packet breaks a rule on purpose,
    else nothing (an empty text)."""
    landed: dict[Exchange, list[str]] = {}
    for finding in findings:
        exchange = exchange_of(finding, exchanges)
        if exchange is not None:
            landed.setdefault(exchange, []).append(finding.expected or expected)
    return {
        exchange: "; ".join(dict.fromkeys(landed.get(exchange) or ([expected] if exchange.violations else [])))
        for exchange in exchanges
    }
