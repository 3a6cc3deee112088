"""pcapng files: blocks parsed from bytes handed in, with the section's byte order and interface table as state.

Packets come from Enhanced Packet Blocks, Simple Packet Blocks and the obsolete Packet Block; Section Header Blocks
reset the byte order and the interface table, Interface Description Blocks extend it (link type, snapshot length,
``if_tsresol``, ``if_tsoffset``), and every other block is skipped by its length.
"""

from __future__ import annotations

import struct
from typing import Final

from .errors import CaptureError
from .records import MAX_TIME_NS, MIN_TIME_NS, CorruptRecord, Interface, Record

SECTION_HEADER: Final = 0x0A0D0D0A
INTERFACE_DESCRIPTION: Final = 0x00000001
PACKET: Final = 0x00000002  # obsolete, still written by old tools
SIMPLE_PACKET: Final = 0x00000003
ENHANCED_PACKET: Final = 0x00000006
BYTE_ORDER_MAGIC: Final = 0x1A2B3C4D

OPTION_END: Final = 0
OPTION_TSRESOL: Final = 9
OPTION_TSOFFSET: Final = 14

#: Blocks larger than this have a corrupt length: the reader stops instead of buffering what the header asks for.
MAX_BLOCK_SIZE: Final = 16 * 1024 * 1024
BLOCK_HEADER_SIZE: Final = 8
#: A Simple Packet Block carries no timestamp: its records get this time (as Wireshark shows them, at the epoch).
NO_TIMESTAMP: Final = 0
#: Corrupt records a parser describes (:attr:`PcapngParser.corrupt`); the others are only counted.
KEPT_CORRUPT: Final = 16

_MAGIC_LITTLE: Final = b"\x4d\x3c\x2b\x1a"
_MAGIC_BIG: Final = b"\x1a\x2b\x3c\x4d"


def is_pcapng(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts with a Section Header Block."""
    return head[:4] == b"\x0a\x0d\x0d\x0a"


def section_byteorder(block: bytes, offset: int, source: str) -> str:
    """The byte order announced by the Section Header Block at the start of ``block`` (12 bytes suffice)."""
    magic = block[8:12]
    if magic == _MAGIC_LITTLE:
        return "<"
    if magic == _MAGIC_BIG:
        return ">"
    raise CaptureError(source, offset + 8, f"byte-order magic {magic.hex()} is not 1a2b3c4d in either byte order")


def block_length(block: bytes, byteorder: str, offset: int, source: str) -> int:
    """The total length of the block at the start of ``block`` (8 bytes suffice), checked for sanity."""
    length: int = struct.unpack_from(byteorder + "I", block, 4)[0]
    if length < 12 or length % 4:
        raise CaptureError(source, offset, f"block length {length} is not a multiple of 4 of at least 12")
    return length


def parse_interface(block: bytes, byteorder: str, offset: int, source: str) -> Interface:
    """The interface described by a whole Interface Description Block."""
    if len(block) < 20:
        raise CaptureError(source, offset, f"Interface Description Block of {len(block)} bytes; 20 is the minimum")
    linktype, _reserved, snaplen = struct.unpack_from(byteorder + "HHI", block, 8)
    tsresol, tsoffset = 6, 0
    pos, end = 16, len(block) - 4
    while pos + 4 <= end:
        code, size = struct.unpack_from(byteorder + "HH", block, pos)
        value = pos + 4
        if code == OPTION_END or value + size > end:
            break
        if code == OPTION_TSRESOL and size >= 1:
            tsresol = block[value]
        elif code == OPTION_TSOFFSET and size >= 8:
            tsoffset = struct.unpack_from(byteorder + "q", block, value)[0]
        pos = value + (size + 3) // 4 * 4
    return Interface(linktype, snaplen, tsresol, tsoffset)


class PcapngParser:
    """Parses whole blocks out of the bytes handed to :meth:`parse`; keeps the section's byte order, its interface
    table, the next record index and the file offset of the next block between calls.

    ``byteorder`` is ``""`` until the first Section Header Block has been seen. A packet block whose timestamp
    is outside 64-bit nanoseconds (:data:`~.records.MAX_TIME_NS`) is skipped: the first :data:`KEPT_CORRUPT` are
    described in :attr:`corrupt`, all are counted in :attr:`corrupt_count`, and its index is not reused.
    """

    def __init__(
        self, byteorder: str, interfaces: tuple[Interface, ...], *, source: str, index: int, offset: int
    ) -> None:
        self.source = source
        self.index = index
        self.offset = offset
        self.byteorder = byteorder
        self.interfaces: list[Interface] = []
        self._scales: list[tuple[int, int, int, int, int]] = []  # (linktype, multiplier, divisor, offset_ns, snaplen)
        self._error: CaptureError | None = None  # met after some records of a batch: raised on the next call
        self._block = 0  # position in the buffer of the block being parsed
        self.corrupt: list[CorruptRecord] = []
        self.corrupt_count = 0
        for interface in interfaces:
            self._add(interface)

    def _add(self, interface: Interface) -> None:
        multiplier, divisor = interface.scale()
        self.interfaces.append(interface)
        entry = (interface.linktype, multiplier, divisor, interface.tsoffset * 1_000_000_000, interface.snaplen)
        self._scales.append(entry)

    def scales(self) -> list[tuple[int, int, int, int, int]]:
        """Per interface of the section: ``(linktype, multiplier, divisor, offset_ns, snaplen)``, a timestamp in
        nanoseconds being ``units * multiplier // divisor + offset_ns``."""
        return self._scales

    def keep_error(self, error: CaptureError) -> None:
        """Keeps ``error`` for the next call to raise (a caller that read records before it hands those on first)."""
        self._error = error

    def needed(self, buf: bytes) -> int:
        """How many bytes the block at the start of ``buf`` takes (its header alone while that is incomplete)."""
        if self._error is not None:
            raise self._error
        if len(buf) < 12:
            return 12
        return self._length(buf, 0, self.offset)

    def _length(self, buf: bytes, pos: int, offset: int) -> int:
        kind = buf[pos : pos + 4]
        if kind == b"\x0a\x0d\x0d\x0a":
            byteorder = section_byteorder(buf[pos : pos + 12], offset, self.source)
        elif not self.byteorder:
            raise CaptureError(self.source, offset, "the first block is not a Section Header Block")
        else:
            byteorder = self.byteorder
        length = block_length(buf[pos : pos + 8], byteorder, offset, self.source)
        if length > MAX_BLOCK_SIZE:
            raise CaptureError(self.source, offset, f"block length {length} is above the {MAX_BLOCK_SIZE}-byte limit")
        return length

    def parse(self, buf: bytes, blocks: int = -1) -> tuple[list[Record], int]:
        """The packets of the whole blocks at the start of ``buf`` (at most ``blocks`` of them when that is not
        negative), and how many bytes those blocks take.

        A corrupt block raises :class:`CaptureError`; when records come before it in ``buf``, they are returned
        first and the error is raised by the next call."""
        if self._error is not None:
            raise self._error
        records: list[Record] = []
        try:
            pos = self._parse(buf, records, blocks)
        except CaptureError as error:
            if not records:
                raise
            self._error = error
            pos = self._block
        self.offset += pos
        return records, pos

    def _parse(self, buf: bytes, records: list[Record], blocks: int) -> int:
        pos, size = 0, len(buf)
        source = self.source
        append = records.append
        base = self.offset
        while pos + 12 <= size and blocks:
            blocks -= 1
            self._block = pos
            # The Section Header Block type reads the same in both byte orders.
            kind, length = struct.unpack_from((self.byteorder or "<") + "II", buf, pos)
            if kind == SECTION_HEADER or length < 32 or length & 3 or length > MAX_BLOCK_SIZE:
                length = self._length(buf, pos, base + pos)
            elif not self.byteorder:
                raise CaptureError(source, base + pos, "the first block is not a Section Header Block")
            end = pos + length
            if end > size:
                break
            byteorder = self.byteorder
            if kind == ENHANCED_PACKET:
                if length < 32:
                    raise CaptureError(source, base + pos, f"packet block of {length} bytes; 32 is the minimum")
                # One unpack for the whole header and one for the trailing length: the hot path.
                _kind, _length, interface, high, low, caplen, orig_len = struct.unpack_from(byteorder + "7I", buf, pos)
                trailer: int = struct.unpack_from(byteorder + "I", buf, end - 4)[0]
                if trailer != length or caplen > length - 32 or interface >= len(self._scales):
                    self._check_packet(buf, pos, length, base + pos)
                linktype, multiplier, divisor, offset_ns, _snaplen = self._scales[interface]
                time_ns = ((high << 32) | low) * multiplier // divisor + offset_ns
                if MIN_TIME_NS <= time_ns <= MAX_TIME_NS:
                    append((time_ns, linktype, buf[pos + 28 : pos + 28 + caplen], orig_len, self.index, base + pos))
                else:
                    self._skip_time(base + pos, high, low, interface)
                self.index += 1
                pos = end
                continue
            if kind == SECTION_HEADER:
                byteorder = self.byteorder = section_byteorder(buf[pos : pos + 12], base + pos, source)
                self.interfaces, self._scales = [], []
            if struct.unpack_from(byteorder + "I", buf, end - 4)[0] != length:
                raise CaptureError(source, base + pos, f"block of {length} bytes ends with a different length field")
            if kind == PACKET:
                packet = self._packet(buf, pos, length, base + pos)
                if packet is not None:
                    append(packet)
            elif kind == SIMPLE_PACKET:
                append(self._simple(buf, pos, length, base + pos))
            elif kind == INTERFACE_DESCRIPTION:
                self._add(parse_interface(buf[pos:end], byteorder, base + pos, source))
            pos = end
        return pos

    def _check_packet(self, buf: bytes, pos: int, length: int, offset: int) -> None:
        """Raises the error a packet block that failed the hot path's checks deserves."""
        if struct.unpack_from(self.byteorder + "I", buf, pos + length - 4)[0] != length:
            raise CaptureError(self.source, offset, f"block of {length} bytes ends with a different length field")
        interface, _high, _low, caplen = struct.unpack_from(self.byteorder + "IIII", buf, pos + 8)
        if caplen > length - 32:
            raise CaptureError(self.source, offset, f"packet of {caplen} bytes does not fit its {length}-byte block")
        raise CaptureError(
            self.source, offset, f"packet names interface {interface}; the section describes {len(self._scales)}"
        )

    def _skip_time(self, offset: int, high: int, low: int, interface: int) -> None:
        """Counts (and describes, the first few) a packet block skipped for its timestamp."""
        self.corrupt_count += 1
        if len(self.corrupt) < KEPT_CORRUPT:
            resolution = self.interfaces[interface]
            reason = (
                f"packet {self.index} has timestamp {high:#010x}:{low:08x} (interface {interface}: if_tsresol "
                f"{resolution.tsresol}, if_tsoffset {resolution.tsoffset} s), outside 64-bit nanoseconds since the "
                "epoch: corrupt timestamp, record skipped"
            )
            self.corrupt.append(CorruptRecord(offset, self.index, reason))

    def _packet(self, buf: bytes, pos: int, length: int, offset: int) -> Record | None:
        """An obsolete Packet Block (None when skipped for its timestamp)."""
        if length < 32:
            raise CaptureError(self.source, offset, f"packet block of {length} bytes; 32 is the minimum")
        interface, _drops, high, low, caplen, orig_len = struct.unpack_from(self.byteorder + "HHIIII", buf, pos + 8)
        if caplen > length - 32:
            raise CaptureError(self.source, offset, f"packet of {caplen} bytes does not fit its {length}-byte block")
        if interface >= len(self._scales):
            raise CaptureError(
                self.source, offset, f"packet names interface {interface}; the section describes {len(self._scales)}"
            )
        linktype, multiplier, divisor, offset_ns, _snaplen = self._scales[interface]
        time_ns = ((high << 32) | low) * multiplier // divisor + offset_ns
        if not MIN_TIME_NS <= time_ns <= MAX_TIME_NS:
            self._skip_time(offset, high, low, interface)
            self.index += 1
            return None
        record = (time_ns, linktype, buf[pos + 28 : pos + 28 + caplen], orig_len, self.index, offset)
        self.index += 1
        return record

    def _simple(self, buf: bytes, pos: int, length: int, offset: int) -> Record:
        if not self._scales:
            raise CaptureError(self.source, offset, "Simple Packet Block in a section that describes no interface")
        linktype, _multiplier, _divisor, _offset_ns, snaplen = self._scales[0]
        orig_len = struct.unpack_from(self.byteorder + "I", buf, pos + 8)[0]
        # The captured length is not stored: the least of the original length, the snapshot length and the room.
        caplen = min(orig_len, length - 16, snaplen or orig_len)
        record = (NO_TIMESTAMP, linktype, buf[pos + 12 : pos + 12 + caplen], orig_len, self.index, offset)
        self.index += 1
        return record
