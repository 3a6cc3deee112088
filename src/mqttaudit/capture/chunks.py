"""Record-aligned chunks: a capture file cut into byte ranges that each start at a record (pcap) or block (pcapng)
boundary and carry what is needed to decode them alone, so that separate tasks can read one file in parallel.

Planning is one sequential pass over the record headers (pcap: 16 bytes per record; pcapng: 8 bytes per block,
whole Section Header and Interface Description Blocks). It reads through a window, so small records cost one
read per window and large ones a seek each; packet bytes are never parsed.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Final

from . import pcap, pcapng
from .errors import CaptureError
from .records import Interface

#: Opens the capture for reading (binary, seekable); each call returns a new file object the caller closes.
Opener = Callable[[], BinaryIO]
Source = str | os.PathLike[str] | Opener

PCAP: Final = "pcap"
PCAPNG: Final = "pcapng"
#: How much the planner reads at once while walking headers.
WINDOW: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes ``[start, end)`` of the capture ``source`` (a name for messages), starting at a record boundary.

    ``first_index`` is the index in the file of the chunk's first record. ``byteorder`` and ``interfaces`` are the
    state a reader needs from before ``start``: for pcap, the global header's byte order and its one interface
    (link type, snapshot length, micro- or nanoseconds); for pcapng, the byte order of the section in effect and its
    interface table (``""`` and no interfaces when the chunk starts with a Section Header Block).
    """

    source: str
    format: str
    start: int
    end: int
    first_index: int
    byteorder: str
    interfaces: tuple[Interface, ...]


def resolve(source: Source, name: str | None = None) -> tuple[Opener, str]:
    """An opener and a display name for ``source``: a path, or an opener (named ``name`` or ``"<capture>"``)."""
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        return (lambda: open(path, "rb")), name or path
    return source, name or "<capture>"


def _size(file: BinaryIO) -> int:
    position = file.tell()
    size = file.seek(0, os.SEEK_END)
    file.seek(position)
    return size


class _Window:
    """Random reads through a window of ``WINDOW`` bytes, so that headers close together cost one read."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._start = 0
        self._data = b""

    def get(self, pos: int, size: int) -> bytes:
        offset = pos - self._start
        if offset < 0 or offset + size > len(self._data):
            self._file.seek(pos)
            self._data = self._file.read(max(WINDOW, size))
            self._start, offset = pos, 0
        return self._data[offset : offset + size]


def whole_file(source: Source, *, name: str | None = None) -> Chunk:
    """The one chunk that covers the whole capture (reads its first bytes only)."""
    opener, label = resolve(source, name)
    with opener() as file:
        head = file.read(pcap.GLOBAL_HEADER_SIZE)
        size = _size(file)
    if pcap.is_pcap(head):
        header = pcap.parse_header(head, label)
        return Chunk(label, PCAP, pcap.GLOBAL_HEADER_SIZE, size, 0, header.byteorder, (header.interface,))
    if pcapng.is_pcapng(head):
        return Chunk(label, PCAPNG, 0, size, 0, "", ())
    raise CaptureError(label, 0, f"magic number {head[:4].hex()} is neither pcap nor pcapng")


def plan_chunks(source: Source, target_bytes: int, *, name: str | None = None, size: int | None = None) -> list[Chunk]:
    """Cuts the capture into chunks of at least ``target_bytes`` (the last one may be smaller), each starting at a
    record boundary; together they cover every byte after the pcap global header (or the whole pcapng file).

    A record cut off by the end of the file stays in the last chunk, whose reader reports it. So does a record
    header that contradicts itself: planning stops there and the last chunk runs to the end of the file, so that
    its reader yields every record before that header, then raises :class:`CaptureError` naming its offset (one
    bad header never costs the records before it). A file that is no capture at all (its magic number, the pcap
    global header) raises :class:`CaptureError` here.
    """
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, not {target_bytes}")
    opener, label = resolve(source, name)
    with opener() as file:
        if size is None:
            size = _size(file)
        head = file.read(pcap.GLOBAL_HEADER_SIZE)
        if pcap.is_pcap(head):
            return _plan_pcap(_Window(file), size, pcap.parse_header(head, label), target_bytes, label)
        if pcapng.is_pcapng(head):
            return _plan_pcapng(_Window(file), size, target_bytes, label)
    raise CaptureError(label, 0, f"magic number {head[:4].hex()} is neither pcap nor pcapng")


def _plan_pcap(window: _Window, size: int, header: pcap.PcapHeader, target: int, label: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    interfaces = (header.interface,)
    little = header.byteorder == "<"
    limit = pcap.caplen_limit(header.snaplen)
    start = pos = pcap.GLOBAL_HEADER_SIZE
    first = index = 0
    while pos + pcap.RECORD_HEADER_SIZE <= size:
        if pos - start >= target:
            chunks.append(Chunk(label, PCAP, start, pos, first, header.byteorder, interfaces))
            start, first = pos, index
        # As many headers as the window holds, up to where the chunk is full.
        data = window.get(pos, min(WINDOW, size - pos))
        reached, count, caplen = pcap.skip_records(data, start + target - pos, little, limit)
        if caplen >= 0:
            break  # a corrupt record header: the last chunk's reader reports it after the records before it
        pos += reached
        index += count
    if size > start:
        chunks.append(Chunk(label, PCAP, start, size, first, header.byteorder, interfaces))
    return chunks


def _plan_pcapng(window: _Window, size: int, target: int, label: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    byteorder = ""
    interfaces: list[Interface] = []
    start = pos = 0
    first = index = 0
    state: tuple[str, tuple[Interface, ...]] = ("", ())  # in effect where the current chunk starts
    while pos + 12 <= size:
        if pos - start >= target:
            chunks.append(Chunk(label, PCAPNG, start, pos, first, *state))
            start, first, state = pos, index, (byteorder, tuple(interfaces))
        head = window.get(pos, 12)
        try:
            length, block_type, byteorder, interfaces = _walk_block(window, head, pos, byteorder, interfaces, label)
        except CaptureError:
            break  # a corrupt block: the last chunk's reader reports it after the packets before it
        if pos + length > size:
            break
        if block_type in (pcapng.ENHANCED_PACKET, pcapng.SIMPLE_PACKET, pcapng.PACKET):
            index += 1
        pos += length
    if size > start:
        chunks.append(Chunk(label, PCAPNG, start, size, first, *state))
    return chunks


def _walk_block(
    window: _Window, head: bytes, pos: int, byteorder: str, interfaces: list[Interface], label: str
) -> tuple[int, int, str, list[Interface]]:
    """The length and type of the pcapng block at ``pos`` (``head``: its first 12 bytes) and the byte order and
    interface table in effect after it; raises :class:`CaptureError` for a block that contradicts itself."""
    if head[:4] == b"\x0a\x0d\x0d\x0a":
        byteorder = pcapng.section_byteorder(head, pos, label)
        interfaces = []
    elif not byteorder:
        raise CaptureError(label, pos, "the first block is not a Section Header Block")
    length = pcapng.block_length(head, byteorder, pos, label)
    block_type: int = struct.unpack_from(byteorder + "I", head)[0]
    if block_type == pcapng.INTERFACE_DESCRIPTION:
        if length > pcapng.MAX_BLOCK_SIZE:
            raise CaptureError(label, pos, f"block length {length} is above the {pcapng.MAX_BLOCK_SIZE}-byte limit")
        interfaces = [*interfaces, pcapng.parse_interface(window.get(pos, length), byteorder, pos, label)]
    return length, block_type, byteorder, interfaces
