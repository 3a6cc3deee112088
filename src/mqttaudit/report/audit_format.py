"""How the audit reports write times, counts, sizes, frame numbers and packet shapes, the same in HTML and Markdown."""

from __future__ import annotations

import datetime

from ..codec import PacketType
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


def short_when(value: float) -> str:
    """A chart axis label: the time of day for Unix time (date too when it is midnight), else seconds."""
    if value >= EPOCH_FLOOR:
        stamp = datetime.datetime.fromtimestamp(value, datetime.UTC)
        return stamp.strftime("%Y-%m-%d" if stamp.time() == datetime.time() else "%H:%M:%S")
    return f"{value:g} s"


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
    if value is None:
        return "-"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min {rest} s" if hours else f"{minutes} min {rest} s"


def frame_label(frame: int | None) -> str:
    """A capture record: its index in the file (0 for the first) and the frame number Wireshark shows for it."""
    return "-" if frame is None else f"record {frame} (Wireshark frame {frame + 1})"


def packet_shape(evidence: str | None) -> str:
    """What the evidence bytes are, read from their first byte and length: ``SUBSCRIBE, 7 bytes``. Bytes that did
    not frame may not be a packet at all; the type is only what their first byte would mean."""
    octets = (evidence or "").split()
    cut = bool(octets) and octets[-1] == "…"
    octets = octets[:-1] if cut else octets
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
