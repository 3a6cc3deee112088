"""How the audit reports write times, counts, sizes, frame numbers, packet shapes, clients and CONNACK codes, the
same in HTML and Markdown."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..codec import PacketType
from ..judge.reasons import elapsed
from .evidence import seconds

#: Times at or after this (2001-09-09) are Unix time from a real capture; smaller ones count from the capture's
#: start (hand-made and test captures).
EPOCH_FLOOR = 1e9
_UNITS = ("KB", "MB", "GB", "TB", "PB")
#: Where the audit's human reports point for a value they cut or a row they leave out: every value they show is
#: kept whole there.
WHOLE_IN = "report_data.json"
#: Rows of one table in a human report (capture files, capture errors, gaps); the rest are counted.
MAX_ROWS = 100


def when(value: float | None) -> str:
    """A capture time: UTC date and time for Unix time, else seconds from the start; "-" when unknown."""
    if value is None:
        return "-"
    if value >= EPOCH_FLOOR:
        stamp = datetime.datetime.fromtimestamp(value, datetime.UTC)
        return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{stamp.microsecond // 1000:03d} UTC"
    return seconds(value)


DAY = 86_400.0
#: The longest span a time axis labels with dates and times of day; a longer one is labelled with dates.
WEEKS = 31 * DAY
#: What a CONNACK return code means in MQTT 3.1.1 and 3.1 [MQTT-3.2.2-3 table 3.1].
CONNACK_CODES = {
    0: "accepted",
    1: "refused: unacceptable protocol version",
    2: "refused: identifier rejected",
    3: "refused: server unavailable",
    4: "refused: bad user name or password",
    5: "refused: not authorized",
}


@dataclass(frozen=True, slots=True)
class TimeAxis:
    """How a chart labels times over a span: ``pattern`` (strftime, UTC; "" for seconds from the start) and a note
    saying what the labels leave out (the day, the year)."""

    pattern: str
    note: str

    def label(self, value: float) -> str:
        if not self.pattern:
            return duration(value) if value else "0 s"
        return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime(self.pattern)


def time_axis(start: float, end: float) -> TimeAxis:
    """The labels of a time axis from ``start`` to ``end``: times within one day, dates and times within weeks,
    dates beyond; the year in every label when the span crosses one (a capture may span years)."""
    if start < EPOCH_FLOOR:
        return TimeAxis("", "seconds from the start of the capture")
    first, last = (datetime.datetime.fromtimestamp(value, datetime.UTC) for value in (start, end))
    one_year = first.year == last.year
    if first.date() == last.date():
        return TimeAxis("%H:%M:%S", f"time of day (UTC) on {first:%Y-%m-%d}")
    if end - start <= WEEKS:
        if one_year:
            return TimeAxis("%m-%d %H:%M", f"date and time (UTC) in {first.year}")
        return TimeAxis("%Y-%m-%d %H:%M", "date and time (UTC)")
    return TimeAxis("%m-%d", f"date (UTC) in {first.year}") if one_year else TimeAxis("%Y-%m-%d", "date (UTC)")


def client_label(address: str | None, client_id: str | None) -> str:
    """Who a client is, for a reader: its ClientId when it has one, else its address and why it has no name."""
    if client_id:
        return client_id
    where = address or "unknown address"
    return f"(empty ClientId) {where}" if client_id == "" else f"(no CONNECT captured) {where}"


def connack_text(code: int | None, version: str | None = None) -> str:
    """A CONNACK's return code and what it means ("-" when no CONNACK was captured); an MQTT 5.0 reason code in
    hex, as that specification writes it."""
    if code is None:
        return "-"
    if version is not None and version.startswith("5.0"):  # named by a CONNECT, or inferred from the packets
        return f"0x{code:02x}" + (" (success)" if code == 0 else "")
    meaning = CONNACK_CODES.get(code)
    return f"{code} ({meaning})" if meaning else f"{code} (reserved)"


def packet_text(row: Mapping[str, Any]) -> str:
    """A packet as a row of the packets table describes it: ``PUBLISH id 7, QoS 1, topic 'a/b', 9 bytes``."""
    parts = [str(row.get("type") or "packet")]
    if row.get("packet_id") is not None:
        parts[0] += f" id {row['packet_id']}"
    if row.get("type") == "PUBLISH" and row.get("qos") is not None:
        parts.append(f"QoS {row['qos']}")
    if row.get("topic") is not None:
        parts.append(f"topic '{row['topic']}'")
    if row.get("length") is not None:
        parts.append(plural(int(row["length"]), "byte"))
    return ", ".join(parts)


def cause_text(row: Mapping[str, Any]) -> str:
    """For a missing-answer finding, the packet the answer was owed for: ``answer owed for PUBLISH id 7, ... at
    frame 6, event 2``; "" for any other finding."""
    event = row.get("cause_event")
    if event is None:
        return ""
    packet = row.get("cause_packet")
    frame = row.get("cause_frame")
    where = f"{frame_label(frame)}, event {event}" if frame is not None else f"event {event}"
    return f"answer owed for {packet}, at {where}" if packet else f"answer owed for {where}"


def also_text(row: Mapping[str, Any]) -> str:
    """The other statements the act of a violation row breaks (one act, one row): ``the same act also breaks
    MQTT-2.2.1-3, MQTT-4.3.2-3``; "" when there are none."""
    also = row.get("also")
    return f"the same act also breaks {', '.join(str(rule) for rule in also)}" if also else ""


def shown_at(row: Mapping[str, Any]) -> str:
    """The capture record a finding shows at, or that it shows at no packet of its own."""
    frame = row.get("frame")
    return frame_label(frame) if frame is not None else "no frame of its own (it shows at a silence or a close)"


def evidence_is_cause(row: Mapping[str, Any]) -> bool:
    """Whether a finding's evidence bytes are the unanswered packet's: a missing answer that shows at a silence or
    a close, not at a packet of its own (the audit then keeps the bytes that called for the answer)."""
    return row.get("cause_event") is not None and row.get("frame") is None and bool(row.get("evidence"))


def count(value: int | None) -> str:
    """An integer with thousands separators; "-" when unknown."""
    return "-" if value is None else f"{value:,}"


def plural(value: int, word: str, words: str = "") -> str:
    return f"{count(value)} {word if value == 1 else words or word + 's'}"


def size(value: int | None) -> str:
    """Bytes exactly, and in the largest unit under 1024 of it."""
    if value is None:
        return "-"
    exact = plural(value, "byte")
    scaled, unit = float(value), ""
    for name in _UNITS:
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, name
    return f"{exact} ({scaled:.1f} {unit})" if unit else exact


def duration(value: float | None) -> str:
    """A duration as a person reads it (µs, ms, s, min, h); "-" when unknown."""
    return "-" if value is None else elapsed(value)


def frame_label(frame: int | None) -> str:
    """A capture record by its frame number, numbered from 1 as Wireshark and tshark number them (``frame.number``),
    the numbering of every ``frame`` column of the audit."""
    return "-" if frame is None else f"frame {frame}"


def packet_shape(evidence: str | None) -> str:
    """What the evidence bytes are, read from their first byte and length: ``SUBSCRIBE, 7 bytes``. Bytes that did
    not frame may not be a packet at all; the type is only what their first byte would mean."""
    tokens = (evidence or "").split()
    cut = "…" in tokens
    octets = [token.strip("[]") for token in tokens if token != "…"]
    if not octets:
        return "no packet (the finding is about what the connection did, not about bytes)"
    try:
        first = int(octets[0], 16) if len(octets[0]) == 2 else None
    except ValueError:
        first = None
    if first is None:
        return "bytes not given in hex"
    kind = PacketType(first >> 4)
    name = f"reserved type {kind.value}" if kind.name.startswith("RESERVED") else kind.name
    length = f"more than {len(octets)} bytes" if cut else plural(len(octets), "byte")
    return f"{name}, {length}"
