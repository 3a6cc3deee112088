"""Classic pcap (libpcap) files: the 24-byte global header and the records after it, parsed from bytes handed in.

Four magic numbers: microsecond (0xA1B2C3D4) or nanosecond (0xA1B23C4D) timestamps, each in either byte order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from .errors import CaptureError
from .records import MICROSECONDS, NANOSECONDS, CorruptRecord, Interface, Record

GLOBAL_HEADER_SIZE: Final = 24
RECORD_HEADER_SIZE: Final = 16
MAGIC_MICROSECONDS: Final = 0xA1B2C3D4
MAGIC_NANOSECONDS: Final = 0xA1B23C4D
#: A record longer than this, or than the snapshot length when that is larger, has a corrupt header (Wireshark's
#: bound for Ethernet): the reader stops there instead of allocating what the header asks for.
MAX_CAPLEN: Final = 262_144

_MAGICS: Final = {
    (b"\xd4\xc3\xb2\xa1"): ("<", False),
    (b"\xa1\xb2\xc3\xd4"): (">", False),
    (b"\x4d\x3c\xb2\xa1"): ("<", True),
    (b"\xa1\xb2\x3c\x4d"): (">", True),
}


def is_pcap(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts with one of the four pcap magic numbers."""
    return head[:4] in _MAGICS


@dataclass(frozen=True, slots=True)
class PcapHeader:
    """The global header: byte order (``"<"`` or ``">"``), timestamp unit, version, snapshot length, link type."""

    byteorder: str
    nanoseconds: bool
    version: tuple[int, int]
    snaplen: int
    linktype: int

    @property
    def interface(self) -> Interface:
        return Interface(self.linktype, self.snaplen, NANOSECONDS if self.nanoseconds else MICROSECONDS)


def parse_header(data: bytes, source: str) -> PcapHeader:
    """Parses the global header at the start of ``data``; raises :class:`CaptureError` naming ``source``."""
    if len(data) < GLOBAL_HEADER_SIZE:
        raise CaptureError(source, 0, f"{len(data)} byte(s): too short for a pcap global header ({GLOBAL_HEADER_SIZE})")
    magic = _MAGICS.get(data[:4])
    if magic is None:
        raise CaptureError(source, 0, f"magic number {data[:4].hex()} is not a pcap magic number")
    byteorder, nanoseconds = magic
    major, minor, _zone, _sigfigs, snaplen, link = struct.unpack_from(byteorder + "HHiIII", data, 4)
    if major != 2:
        raise CaptureError(source, 4, f"pcap version {major}.{minor}; only version 2 is defined")
    # The top bits of the link-type field carry the FCS length; the link type is the low 16 bits.
    return PcapHeader(byteorder, nanoseconds, (major, minor), snaplen, link & 0xFFFF)


def caplen_limit(snaplen: int) -> int:
    return max(snaplen, MAX_CAPLEN)


def skip_records(data: bytes, stop: int, little_endian: bool, limit: int) -> tuple[int, int, int]:
    """Walks the record headers at the start of ``data`` (which begins at a record): returns the offset reached
    (the next record, possibly beyond ``data``), the records passed, and the captured length of a record that
    declares more than ``limit`` (-1 when none does; the walk stops at it). The walk stops before a header that is
    not wholly in ``data`` and at the first record that starts at or after ``stop``. (The chunk planner's inner
    loop: one pass over every record header of a capture.)"""
    offset = count = 0
    size = len(data)
    while offset + RECORD_HEADER_SIZE <= size and offset < stop:
        at = offset + 8
        if little_endian:
            caplen = data[at] | data[at + 1] << 8 | data[at + 2] << 16 | data[at + 3] << 24
        else:
            caplen = data[at] << 24 | data[at + 1] << 16 | data[at + 2] << 8 | data[at + 3]
        if caplen > limit:
            return offset, count, caplen
        offset += RECORD_HEADER_SIZE + caplen
        count += 1
    return offset, count, -1


class PcapParser:
    """Parses whole records out of the bytes handed to :meth:`parse`; keeps the record index and file offset of
    the next record between calls, so a file can be handed in piece by piece."""

    def __init__(self, interface: Interface, byteorder: str, *, source: str, index: int, offset: int) -> None:
        self.source = source
        self.index = index
        self.offset = offset
        self.byteorder = byteorder
        self.linktype = interface.linktype
        self.multiplier = interface.scale()[0]
        self.limit = caplen_limit(interface.snaplen)
        self._header = struct.Struct(byteorder + "IIII")
        #: Every pcap timestamp (32-bit seconds and fraction) fits 64-bit nanoseconds: none is skipped.
        self.corrupt: list[CorruptRecord] = []
        self.corrupt_count = 0

    def needed(self, buf: bytes) -> int:
        """How many bytes the record at the start of ``buf`` takes (its header alone while that is incomplete)."""
        if len(buf) < RECORD_HEADER_SIZE:
            return RECORD_HEADER_SIZE
        caplen: int = self._header.unpack_from(buf, 0)[2]
        self._check(caplen, self.offset, self.index)
        return RECORD_HEADER_SIZE + caplen

    def parse(self, buf: bytes) -> tuple[list[Record], int]:
        """The whole records at the start of ``buf``, and how many bytes they take (the rest waits for more)."""
        unpack = self._header.unpack_from
        linktype, multiplier, limit = self.linktype, self.multiplier, self.limit
        records: list[Record] = []
        append = records.append
        pos, size, index, base = 0, len(buf), self.index, self.offset
        while pos + RECORD_HEADER_SIZE <= size:
            seconds, fraction, caplen, orig_len = unpack(buf, pos)
            if caplen > limit:
                break  # raised by needed(), once the records before it are out
            end = pos + RECORD_HEADER_SIZE + caplen
            if end > size:
                break
            append(
                (
                    seconds * 1_000_000_000 + fraction * multiplier,
                    linktype,
                    buf[pos + 16 : end],
                    orig_len,
                    index,
                    base + pos,
                )
            )
            index += 1
            pos = end
        self.index = index
        self.offset = base + pos
        return records, pos

    def _check(self, caplen: int, offset: int, index: int) -> None:
        if caplen > self.limit:
            raise CaptureError(
                self.source,
                offset,
                f"record {index} declares {caplen} captured bytes, above the {self.limit}-byte limit: corrupt header",
            )
