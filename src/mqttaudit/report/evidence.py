"""The evidence of a probe case in words: each connection's transcript, and what the server did after each packet
the client sent. Works on the recorded connections (``CaseResult.connections``, as written to findings.json)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..judge import Finding

#: Longest frame shown in full; longer ones are cut (the JSON evidence keeps every byte).
MAX_HEX_BYTES = 256
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


def printable(text: str) -> str:
    """``text`` with control and other non-printable characters as Python escapes (``\\x00``, ``\\u200b``)."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def seconds(value: float) -> str:
    return f"{value:.3f} s"


def is_packet(event: Record) -> bool:
    return "from" in event


def shown_hex(hex_bytes: str) -> str:
    """The frame's hex, cut after ``MAX_HEX_BYTES`` bytes with a note of the full size."""
    octets = hex_bytes.split()
    if len(octets) <= MAX_HEX_BYTES:
        return hex_bytes
    return " ".join(octets[:MAX_HEX_BYTES]) + f" ... (first {MAX_HEX_BYTES} of {len(octets)} bytes)"


def packet_label(event: Record) -> str:
    """The decoded packet, or ``malformed: <hex>`` for bytes that did not decode."""
    if event.get("packet") is None:
        return f"malformed: {shown_hex(event['hex'])}"
    return printable(str(event["packet"]))


def ending(event: Record) -> str:
    """How a connection ended, or that it was still open when observation stopped."""
    if event.get("quiet_until"):
        return "observation stopped with the connection still open"
    by = event.get("closed_by")
    return f"closed by the {by} ({_how(event)})" if by else f"the connection ended ({_how(event)}), closer unknown"


def _how(event: Record) -> str:
    """``FIN`` for an orderly close, ``RST`` for a reset."""
    return str(event.get("how", "fin")).upper()


def transcript(connections: Sequence[Mapping[str, Any]]) -> str:
    """Every event of every connection in order: its number (as findings cite it), time, direction, decoded
    packet, bytes, violations, and how the connection ended."""
    lines: list[str] = []
    for connection in connections:
        client_id = connection.get("client_id")
        lines.append(
            f"connection {connection['name']}" + (f", client id {printable(client_id)!r}" if client_id else "")
        )
        for number, event in enumerate(connection["events"]):
            stamp = f"{f'[{number}]':>6} {event['t']:9.3f} s  "
            if not is_packet(event):
                lines.append(f"{stamp}{ending(event)}")
                continue
            lines.append(f"{stamp}{ARROWS[event['from']]}  {packet_label(event)}")
            lines.append(f"{_INDENT}bytes at offset {event['offset']}: {shown_hex(event['hex'])}")
            lines.extend(
                f"{_INDENT}violation {v['rule']} at offset {v['offset']}: {printable(v['detail'])}"
                for v in event["violations"]
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n")


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
    answers = [packet_label(event) for event in after if is_packet(event)]
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
