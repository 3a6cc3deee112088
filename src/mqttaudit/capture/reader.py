"""Reading records from a capture, whole or one chunk at a time, with memory bounded by the read size.

The parsers (:mod:`.pcap`, :mod:`.pcapng`) work on bytes handed in; this module is the only one that reads files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Final, TypeVar

from .chunks import PCAP, Chunk, Opener, Source, resolve, whole_file
from .pcap import PcapParser
from .pcapng import PcapngParser
from .records import CorruptRecord, Record, Truncation

T = TypeVar("T")

#: Bytes read at a time; a batch of records comes from one read.
READ_SIZE: Final = 1 << 20


class ChunkReader:
    """The records of one chunk, in order, read ``read_size`` bytes at a time.

    Iterate it for records, or call :meth:`batches` for lists of them (one list per read). When the chunk ends
    inside a record, the records before it are all yielded and :attr:`truncation` says where the cut one starts;
    a header that contradicts itself raises :class:`~mqttaudit.capture.CaptureError` once the records before it
    have been yielded. Records skipped as corrupt while reading on (a timestamp out of range) are in
    :attr:`corrupt` (the first few) and :attr:`corrupt_count` (all).
    """

    def __init__(self, opener: Opener, chunk: Chunk, *, read_size: int = READ_SIZE) -> None:
        self.chunk = chunk
        self.truncation: Truncation | None = None
        self.records = 0
        self._parser: PcapParser | PcapngParser | None = None
        self._opener = opener
        self._read_size = read_size

    def __iter__(self) -> Iterator[Record]:
        for batch in self.batches():
            yield from batch
            del batch  # before the next read, so that one batch is alive at a time

    @property
    def corrupt(self) -> list[CorruptRecord]:
        return [] if self._parser is None else self._parser.corrupt

    @property
    def corrupt_count(self) -> int:
        return 0 if self._parser is None else self._parser.corrupt_count

    def parser(self) -> PcapParser | PcapngParser:
        """A new parser positioned at the chunk's start (with the state the chunk carries from before it)."""
        chunk = self.chunk
        parser: PcapParser | PcapngParser
        if chunk.format == PCAP:
            parser = PcapParser(
                chunk.interfaces[0], chunk.byteorder, source=chunk.source, index=chunk.first_index, offset=chunk.start
            )
        else:
            parser = PcapngParser(
                chunk.byteorder, chunk.interfaces, source=chunk.source, index=chunk.first_index, offset=chunk.start
            )
        self._parser = parser
        return parser

    def batches(self) -> Iterator[list[Record]]:
        parser = self.parser()

        def parse(buf: bytes) -> tuple[list[Record], int, int]:
            records, used = parser.parse(buf)
            return records, used, len(records)

        return self.read(parser, parse)

    def read(self, parser: PcapParser | PcapngParser, parse: Callable[[bytes], tuple[T, int, int]]) -> Iterator[T]:
        """The chunk's bytes handed to ``parse`` a read at a time (with what the last call left unparsed in front):
        it returns what it made of them, the bytes it used and the records it read; what it made is yielded when
        it read any. ``parser`` (made by :meth:`parser`) says how many bytes the next record needs."""
        chunk = self.chunk
        left = chunk.end - chunk.start
        buf = b""
        with self._opener() as file:
            file.seek(chunk.start)
            while True:
                want = min(left, max(self._read_size, parser.needed(buf) - len(buf)))
                data = file.read(want) if want > 0 else b""
                left -= len(data)
                buf = buf + data if buf else data
                made, used, count = parse(buf)
                if used:
                    buf = buf[used:]
                if count:
                    self.records += count
                    yield made
                got = len(data)
                del made, data  # before the next read: one batch in memory at a time
                if not left or not got:  # the chunk is read, or the file ends early
                    break
        if buf:
            self.truncation = Truncation(parser.offset, parser.index, parser.needed(buf), len(buf))


def read_chunk(opener: Opener, chunk: Chunk, *, read_size: int = READ_SIZE) -> ChunkReader:
    """The records of ``chunk`` (reads only its byte range)."""
    return ChunkReader(opener, chunk, read_size=read_size)


def read_records(source: Source, *, name: str | None = None, read_size: int = READ_SIZE) -> ChunkReader:
    """The records of a whole capture (a path, or an opener), read sequentially."""
    opener, label = resolve(source, name)
    return ChunkReader(opener, whole_file(opener, name=label), read_size=read_size)
