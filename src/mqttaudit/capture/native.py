"""The reading path in native code: a chunk's records walked, parsed to TCP segments and gathered per flow by the C
extension ``_native`` over the bytes read, with the segments of MQTT flows handed on as columns (Arrow's layouts)
instead of a Python object per packet.

The pure-Python modules are its reference and its fallback. :func:`available` is false in the pure build (installed
without a compiler, or with ``MQTTAUDIT_PURE_PYTHON=1``) and when ``MQTTAUDIT_NATIVE=0`` is set; callers then take
the pure path (:func:`~.flows.broker_segments`). Both give the same segments, skip counts, notes and errors: what
the C code does not handle (a pcapng block other than an ordinary Enhanced Packet Block, a timestamp beyond 64-bit
arithmetic, any header that fails a check) it leaves to the Python parser, one block at a time, and takes its
records back; the differential tests hold the two paths to one output.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Final

from .chunks import Chunk, Opener
from .errors import CaptureError
from .flows import FlowKey, OtherTcp, flow_name
from .pcap import PcapParser
from .pcapng import PcapngParser
from .reader import READ_SIZE, ChunkReader

_native: ModuleType | None
try:
    from . import _native
except ImportError:  # the pure build
    _native = None

#: The environment variable that turns the native path off (``0``) in a build that has it.
SWITCH: Final = "MQTTAUDIT_NATIVE"
_INT64: Final = 1 << 63


def built() -> bool:
    """True when this install has the native extension."""
    return _native is not None


def available() -> bool:
    """True when the reading stage takes the native path: the extension is built and not switched off."""
    return _native is not None and os.environ.get(SWITCH, "1") != "0"


def skip_reasons() -> tuple[str, ...]:
    """The reasons the extension counts records without a segment under, in its order (the tests hold them to
    :class:`~.link.Skip`)."""
    if _native is None:
        return ()
    reasons: tuple[str, ...] = _native.SKIP_REASONS
    return reasons


@dataclass(frozen=True, slots=True)
class Columns:
    """The segments of MQTT flows one read yielded, as the extension lays them out: ``rows`` segments, each
    column the bytes of an Arrow buffer (int64: ``record``, ``time_ns``, ``seq``, ``ack``; int32: ``flow`` (an
    index into :attr:`NativeChunk.names`), ``src_port``, ``dst_port``, ``flags``; binary columns as int32 offsets
    and values)."""

    rows: int
    record: bytes
    time_ns: bytes
    flow: bytes
    src_ip_offsets: bytes
    src_ip: bytes
    src_port: bytes
    dst_ip_offsets: bytes
    dst_ip: bytes
    dst_port: bytes
    seq: bytes
    ack: bytes
    flags: bytes
    payload_offsets: bytes
    payload: bytes


class NativeChunk:
    """One chunk read by the native path: iterate :meth:`columns` for the MQTT segments of each read; afterwards
    :meth:`skipped` and :meth:`other_tcp` count what was left out, and :attr:`reader` holds the records read, the
    truncation and the corrupt records, as the pure path's reader does."""

    def __init__(
        self, opener: Opener, chunk: Chunk, broker_ports: frozenset[int], *, read_size: int = READ_SIZE
    ) -> None:
        if _native is None:
            raise RuntimeError("the native extension is not built")
        self.reader = ChunkReader(opener, chunk, read_size=read_size)
        self._scanner = _native.Scanner(broker_ports)
        #: Per flow the scanner has seen, in its order: its name (an MQTT flow) or "" (a flow left out).
        self.names: list[str] = []
        self._scales = _Scales()

    def columns(self) -> Iterator[Columns]:
        """The MQTT segments of each read that held any records. A corrupt header raises
        :class:`~.errors.CaptureError` once the segments before it are out."""
        parser = self.reader.parser()

        def parse(buf: bytes) -> tuple[Columns, int, int]:
            if isinstance(parser, PcapParser):
                used, count = self._scanner.pcap(
                    buf, 0, parser.byteorder == "<", parser.multiplier, parser.linktype, parser.limit, parser.index
                )
                parser.index += count
                parser.offset += used
            else:
                used, count = self._pcapng(parser, buf)
            columns = Columns(*self._scanner.take())
            self._name_new_flows()
            return columns, used, count

        return self.reader.read(parser, parse)

    def _pcapng(self, parser: PcapngParser, buf: bytes) -> tuple[int, int]:
        """Reads the whole blocks of ``buf``: Enhanced Packet Blocks in C, any other block in Python."""
        scanner = self._scanner
        pos = count = 0
        while True:
            if parser.byteorder:
                end, read = scanner.pcapng(buf, pos, parser.byteorder == "<", self._scales.of(parser), parser.index)
                parser.index += read
                parser.offset += end - pos
                count += read
                pos = end
            try:
                records, used = parser.parse(buf[pos : _block_end(parser, buf, pos)], 1)
            except CaptureError as error:
                if not count:
                    raise
                parser.keep_error(error)  # raised by the next call, as the pure path does
                return pos, count
            for time_ns, linktype, data, _orig_len, index, _offset in records:
                scanner.record(time_ns, linktype, data, index)
            count += len(records)
            pos += used
            if not used:
                return pos, count

    def _name_new_flows(self) -> None:
        for ip_a, port_a, ip_b, port_b, broker, *_counts in self._scanner.flows(len(self.names)):
            self.names.append(flow_name(((ip_a, port_a), (ip_b, port_b))) if broker else "")

    def skipped(self) -> dict[str, int]:
        """Records without a segment per reason, and segments of flows on no broker port (``not a broker port``)."""
        counts: dict[str, int] = self._scanner.counts()[1]
        return counts

    def other_tcp(self) -> OtherTcp:
        """The TCP flows left out, as the pure path counts them."""
        other = OtherTcp()
        for ip_a, port_a, ip_b, port_b, broker, frames, payload, shown in self._scanner.flows(0):
            if not broker:
                key: FlowKey = ((ip_a, port_a), (ip_b, port_b))
                other.flows[key] = [frames, payload, shown]
        return other


def _block_end(parser: PcapngParser, buf: bytes, pos: int) -> int:
    """Where the block at ``pos`` ends in ``buf`` as its header says (the end of ``buf`` when the block is not
    wholly in it, or its header cannot tell): the bytes the Python parser needs for that one block, copied alone so
    that a file of blocks left to Python costs no copy of the rest of each read."""
    try:
        return min(len(buf), pos + parser.needed(buf[pos : pos + 12]))
    except CaptureError:  # the parser reports it on the rest
        return len(buf)


class _Scales:
    """The parser's interfaces as the extension takes them: None for one whose arithmetic needs more than 64 bits
    (its blocks are left to Python). Built again only when the parser's interface table changed: it grows with an
    Interface Description Block and is a new list after a Section Header Block (the list kept here cannot be freed,
    so no new one can take its identity)."""

    def __init__(self) -> None:
        self._table: list[tuple[int, int, int, int, int]] | None = None
        self._size = -1
        self._value: tuple[tuple[int, int, int, int] | None, ...] = ()

    def of(self, parser: PcapngParser) -> tuple[tuple[int, int, int, int] | None, ...]:
        table = parser.scales()
        if table is not self._table or len(table) != self._size:
            self._table, self._size = table, len(table)
            self._value = tuple(
                (linktype, multiplier, divisor, offset_ns)
                if multiplier < _INT64 and divisor < _INT64 and -_INT64 <= offset_ns < _INT64
                else None
                for linktype, multiplier, divisor, offset_ns, _snaplen in table
            )
        return self._value
