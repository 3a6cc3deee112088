"""What the readers produce: one plain tuple per captured packet, and the interface it was captured on.

A record is ``(time_ns, linktype, data, orig_len, index, offset)``: the capture time in nanoseconds since the epoch,
the link-layer type of ``data``, the captured bytes, the length of the packet on the wire, the record's index in the
file (0 for the first packet, as tshark's frame number minus one) and the byte offset of its header in the file.
Records are tuples rather than objects because a task reads millions of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

Record = tuple[int, int, bytes, int, int, int]

#: Positions of the fields in a :data:`Record`.
TIME: Final = 0
LINKTYPE: Final = 1
DATA: Final = 2
ORIG_LEN: Final = 3
INDEX: Final = 4
OFFSET: Final = 5

#: pcapng ``if_tsresol`` of one microsecond (the default) and of one nanosecond.
MICROSECONDS: Final = 6
NANOSECONDS: Final = 9

_NS_PER_SECOND: Final = 1_000_000_000
#: Capture times a record may carry: what 64-bit nanoseconds since the epoch hold (the years 1677 to 2262), as the
#: audit's tables store them. A timestamp outside is corrupt (a flipped high word, a resolution or offset that
#: overflows) and its record is skipped as corrupt.
MIN_TIME_NS: Final = -(1 << 63)
MAX_TIME_NS: Final = (1 << 63) - 1


def frame_number(index: int) -> int:
    """The frame number of the record at ``index``: numbered from 1, as Wireshark and tshark number frames (and
    Suricata its ``pcap_cnt``). Every ``frame`` the audit writes is one; a record's index stays internal."""
    return index + 1


@dataclass(frozen=True, slots=True)
class Interface:
    """A capture interface: its link type, snapshot length and timestamp unit.

    ``tsresol`` is the pcapng ``if_tsresol`` byte: a unit of 10**-n seconds, or 2**-n seconds when its top bit is
    set (a pcap file is 6 or 9). ``tsoffset`` is ``if_tsoffset``, seconds added to every timestamp.
    """

    linktype: int
    snaplen: int = 0
    tsresol: int = MICROSECONDS
    tsoffset: int = 0

    def scale(self) -> tuple[int, int]:
        """``(multiplier, divisor)`` that turn a timestamp in this interface's units into nanoseconds."""
        exponent = self.tsresol & 0x7F
        if self.tsresol & 0x80:
            return _NS_PER_SECOND, 1 << exponent
        if exponent <= 9:
            return 10 ** (9 - exponent), 1
        return 1, 10 ** (exponent - 9)

    def to_ns(self, units: int) -> int:
        multiplier, divisor = self.scale()
        return units * multiplier // divisor + self.tsoffset * _NS_PER_SECOND

    def from_ns(self, time_ns: int) -> int:
        """The timestamp in this interface's units (rounded down) for a time in nanoseconds: what a writer stores."""
        multiplier, divisor = self.scale()
        return (time_ns - self.tsoffset * _NS_PER_SECOND) * divisor // multiplier


@dataclass(frozen=True, slots=True)
class Truncation:
    """The capture ends inside a record: the header at ``offset`` (record ``index``) announces ``needed`` bytes,
    only ``available`` are there. Every record before it was read."""

    offset: int
    index: int
    needed: int
    available: int


@dataclass(frozen=True, slots=True)
class CorruptRecord:
    """A record skipped because its header is corrupt though its length is sound (the records after it are read):
    the offset of its header in the file, its index and why."""

    offset: int
    index: int
    reason: str
