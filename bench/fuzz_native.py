"""Coverage-guided differential fuzzing of the native capture reading path against the pure-Python one.

Why: the C extension (``mqttaudit.capture._native``) must give exactly what the pure path gives, on every input,
corrupt ones included. Each fuzz input becomes a capture file (pcap or pcapng, any link type; frames written with
:mod:`mqttaudit.capture.writer` then mutated, raw records and blocks, or raw bytes after a valid header: see
:class:`Case`), cut into chunks of a fuzz-chosen size and read with a fuzz-chosen read size and broker ports by the
reading stage (``mqttaudit.pipeline.segments.chunk_segments``, once ``_chunk_segments``) twice,
``MQTTAUDIT_NATIVE=0`` and ``=1``. Any difference in the record batches, any exception escaping either, and
anything AddressSanitizer or UBSan sees in the C code is a crash.

Run it through ``scripts/fuzz-native.sh`` (atheris, the sanitizer build, the preloads). Arguments: ``-runs=N``
(default 200000), ``--corpus=DIR`` (kept, seeds added), ``--captures=DIR`` (real captures to seed from, default
``../shared/captures`` beside the repository), other libFuzzer flags, or crash files to replay. It prints the
executions, the time and atheris's coverage figures and exits 0 when nothing was found; crash inputs go to
``bench/out/fuzz-native/``.

Coverage guidance: atheris instruments the Python side (pure parsers, native driver, reading stage). gcc cannot
give the C side edge coverage that atheris's bundled libFuzzer reads: gcc's block instrumentation,
``-fsanitize-coverage=trace-pc``, calls ``__sanitizer_cov_trace_pc``, which that libFuzzer defines only to print
"deprecated instrumentation" and exit (it reads ``inline-8bit-counters`` and ``pc-table``, clang-only). gcc's
``-fsanitize-coverage=trace-cmp`` does feed it: the ``__sanitizer_cov_trace_cmp*``/``trace_switch`` callbacks fill
libFuzzer's table of compared values (mutation hints) and, with ``-use_value_profile=1`` (on here), count as
features, so the C code's comparisons on header fields guide the search. That needs atheris's libFuzzer to come
before gcc's ASan runtime, whose weak no-op callbacks would otherwise take those calls and atheris's Python
coverage too (the script preloads both in that order; :func:`cmp_feedback` checks it). The rest of the C side
is checked by ASan and UBSan only.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import io
import ipaddress
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
#: Where the real captures lie by default (beside the repository, as the tests find them).
CAPTURES: Final = REPO.parent / "shared" / "captures"
ARTIFACTS: Final = REPO / "bench" / "out" / "fuzz-native"
DEFAULT_RUNS: Final = 200_000
MAX_INPUT: Final = 64 * 1024
#: A capture the ops build stops growing at (ops can write more bytes than the input holds).
MAX_FILE: Final = 128 * 1024
MAX_CHUNKS: Final = 8
#: Bytes of each real capture taken as a seed.
SEED_BYTES: Final = 4096
WORK_ENV: Final = "FUZZ_NATIVE_WORK"
#: Set by ``scripts/fuzz-native.sh --compiled``: the directory of the sanitizer build of the extension, put before
#: the installed one in ``mqttaudit.capture``'s path, so that it runs beside the installed (mypyc-compiled) parsers.
EXTENSION_ENV: Final = "FUZZ_NATIVE_EXTENSION"

# Modes: how the bytes after the parameters become a capture file.
VERBATIM, PCAP_RAW, PCAPNG_RAW, PCAP_OPS, PCAPNG_OPS = range(5)
MODES: Final = 5

LINKTYPES: Final = (1, 113, 276, 101, 12, 14, 228, 229, 0, 108, 147, 1, 1, 113, 101, 0)
TSRESOLS: Final = (6, 9, 0, 3, 12, 19, 0x80 | 10, 0x80 | 40, 0xFF, 127)
TSOFFSETS: Final = (0, 0, 1, -1, 1 << 33, -(1 << 40), (1 << 63) - 1, -(1 << 63))
SNAPLENS: Final = (262_144, 0, 65_535, 0xFFFF_FFFF, 300_000, 64)
READ_SIZES: Final = (0, 0, 0, 0, 1, 13, 100, 1000, 4096)  # 0: the reader's own READ_SIZE
FIXED_PORTS: Final[tuple[frozenset[int], ...]] = (
    frozenset({1883}),
    frozenset({1883, 8883}),
    frozenset({80}),
    frozenset({50000}),
    frozenset(),
    frozenset({1883, 50000}),
    frozenset({0, 65535}),
)
ENDPOINTS: Final = (
    (("10.0.0.1", 50000), ("10.0.0.2", 1883)),
    (("2001:db8::1", 50001), ("2001:db8::2", 1883)),
    (("10.0.0.3", 40000), ("10.0.0.2", 8883)),
    (("192.168.1.5", 51000), ("192.168.1.9", 80)),
    (("10.0.0.2", 1883), ("10.0.0.2", 1883)),
    (("::1", 65535), ("::1", 0)),
)
EPOCH_S: Final = 1_700_000_000
V6_NET: Final = bytes.fromhex("20010db8") + bytes(9)
PAYLOAD: Final = bytes(range(256)) * 6


class Input:
    """The fuzz input read front to back; past its end every read gives zeros, so every input means something."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def take(self, count: int) -> bytes:
        out = self.data[self.pos : self.pos + count]
        self.pos += len(out)
        return out

    def byte(self) -> int:
        return self.take(1)[0] if self.left() else 0

    def u16(self) -> int:
        return int.from_bytes(self.take(2).ljust(2, b"\0"), "little")

    def u32(self) -> int:
        return int.from_bytes(self.take(4).ljust(4, b"\0"), "little")

    def rest(self) -> bytes:
        return self.take(self.left())


class Case:
    """What one input asks for: the capture's bytes, the chunk size, the broker ports and the read size."""

    def __init__(self, data: bytes) -> None:
        inp = Input(data)
        mode = inp.byte() % MODES
        self.flags = inp.byte()
        target = inp.u16()
        self.target = 1 << 30 if target >= 0xE000 else 1 + (target & 0x3FFF)
        choice = inp.byte()
        if choice % 8 < len(FIXED_PORTS):
            self.ports = FIXED_PORTS[choice % 8]
        else:
            self.ports = frozenset({inp.u16(), inp.u16()})
        self.read_size = READ_SIZES[inp.byte() % len(READ_SIZES)]
        self.order = "<" if self.flags & 1 else ">"
        self.capture = self._build(mode, inp)

    def _build(self, mode: int, inp: Input) -> bytes:
        if mode == VERBATIM:
            return inp.rest()
        if mode in (PCAP_RAW, PCAP_OPS):
            linktype = LINKTYPES[inp.byte() % len(LINKTYPES)] | (self.flags >> 4 & 3) << 28  # FCS bits, ignored
            snaplen = SNAPLENS[inp.byte() % len(SNAPLENS)]
            magic = 0xA1B23C4D if self.flags & 2 else 0xA1B2C3D4
            head = struct.pack(self.order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)
            if mode == PCAP_RAW:
                return head + inp.rest()
            return PcapOps(inp, self.order, linktype & 0xFFFF, 1000 if magic == 0xA1B2C3D4 else 1).build(head)
        ng = PcapngOps(inp, self.order)
        ng.section(self.order)
        for _ in range(inp.byte() % 4):
            ng.interface()
        if mode == PCAPNG_RAW:
            return ng.out.getvalue() + inp.rest()
        return ng.build()


def _packed(endpoint: tuple[str, int]) -> tuple[bytes, int]:
    return ipaddress.ip_address(endpoint[0]).packed, endpoint[1]


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


class Frames:
    """Frames of a few TCP connections built with :mod:`mqttaudit.capture.writer`, then mutated by the input.

    Input bytes per frame: ``what`` (connection, side, handshake step), ``kind`` (packet kind and payload size),
    the bytes of a variant or fresh flow, ``link`` (link header choices), ``how`` (mutations) and theirs."""

    def __init__(self, inp: Input) -> None:
        from mqttaudit.capture import writer

        self.inp = inp
        self.writer: Any = writer  # given packed addresses, which it takes though it declares text
        # Packed addresses: the writer then never parses address text (it costs more than the frames).
        self.sessions = [self.writer.TcpSession(_packed(client), _packed(server)) for client, server in ENDPOINTS]

    def frame(self, linktype: int) -> bytes:
        inp = self.inp
        what = inp.byte()
        session = self.sessions[what % len(self.sessions)]
        side = what >> 3 & 1
        kind = inp.byte()
        payload = PAYLOAD[: (kind >> 3) * 47 % 1461]
        version = 6 if len(session.endpoints[0][0]) == 16 else 4
        match kind & 7:
            case 0:
                packet = session.handshake()[(what >> 4) % 3]
            case 1 | 2:
                packet = session.send(side, payload)
            case 3:
                packet = session.fin(side)
            case 4:
                packet = session.reset(side)
            case 5:
                packet = session.segment(side, payload, at=(what >> 4) - 8)
            case 6:
                packet, version = self._variant(session, side, payload)
            case _:
                packet, version = self._fresh(payload)
        return self._mutate(self._link(linktype, packet, version))

    def _fresh(self, payload: bytes) -> tuple[bytes, int]:
        """A segment of a flow of its own (many flows grow the extension's flow table)."""
        w, inp = self.writer, self.inp
        a, port, flags = inp.byte(), inp.u16(), inp.byte()
        service = (1883, 8883, 80, port ^ 0x5A5A)[a & 3]
        if a & 0x80:
            src, dst = V6_NET + bytes([a]) + port.to_bytes(2, "big"), V6_NET + b"\0\0\x02"
        else:
            src, dst = bytes([10, 1, a, port >> 8]), bytes([10, 0, 0, 2])
        pair = (src, dst, port, service) if a & 0x40 else (dst, src, service, port)
        return w.ip_tcp(*pair, payload, seq=port << 8, flags=flags), 6 if a & 0x80 else 4

    def _variant(self, session: Any, side: int, payload: bytes) -> tuple[bytes, int]:
        """An IP packet with options, fragments, extension headers or another protocol."""
        w, inp = self.writer, self.inp
        (src, sport), (dst, dport) = session.endpoints[side], session.endpoints[1 - side]
        v = inp.byte()
        options = bytes([2, 4, 5, 180]) if v & 0x80 else b""
        flags = inp.byte() | v << 1 & 0x100
        segment = w.tcp(src, dst, sport, dport, payload, seq=session.next[side], flags=flags, options=options)
        if len(src) == 4:
            match v % 5:
                case 0:
                    return w.ipv4(src, dst, segment, options=b"\x01" * (v >> 3 & 7)), 4
                case 1:
                    return w.ipv4(src, dst, segment, more_fragments=True, dont_fragment=False), 4
                case 2:
                    return w.ipv4(src, dst, segment, fragment_offset=v >> 3), 4
                case 3:
                    return w.ipv4(src, dst, segment, protocol=17), 4
                case _:
                    return w.ipv4(src, dst, segment[: v >> 3]), 4
        chains: tuple[list[tuple[int, bytes]], ...] = (
            [(w.IPV6_HOP_BY_HOP, b"\0" * 4)],
            [(w.IPV6_FRAGMENT, w.ipv6_fragment_header(0, more=True))],
            [(w.IPV6_FRAGMENT, w.ipv6_fragment_header(3, more=False))],
            [(w.IPV6_AH, b"\0" * 10), (w.IPV6_DESTINATION, b"")],
            [(w.IPV6_ROUTING, b"\0" * 14), (w.IPV6_FRAGMENT, w.ipv6_fragment_header(0, more=False))],
            [],
        )
        chain = chains[v % len(chains)]
        next_header = (6, 6, 50, 17, 59)[v >> 3 & 3 if v & 0x40 else 0]
        return w.ipv6(src, dst, segment, extensions=chain, next_header=next_header), 6

    def _link(self, linktype: int, packet: bytes, version: int) -> bytes:
        w, inp = self.writer, self.inp
        v = inp.byte()
        ethertype = 0x86DD if version == 6 else 0x0800
        if v & 0xE0 == 0xE0:
            ethertype = (0x0806, 0x0800, 0x86DD, 0x8100)[v >> 2 & 3]
        vlans = [((0x8100, 0x88A8, 0x9100, 0x9300)[i], i) for i in range(v & 3)]
        family = 2 if version == 4 else (10, 23, 24, 28, 30)[v % 5]
        if v & 0x70 == 0x70:
            family = v << 8 | v
        byteorder = "<" if v & 0x08 else ">"
        frame: bytes = w.link_frame(
            linktype, packet, ethertype=ethertype, vlans=vlans, family=family, byteorder=byteorder
        )
        return frame

    def _mutate(self, frame: bytes) -> bytes:
        """Up to three bytes changed (3 frames in 8), and now and then the frame cut short."""
        inp = self.inp
        how = inp.byte()
        if not frame or not how & 0xE0:
            return frame
        data = bytearray(frame)
        for _ in range(how & 3 if how & 0x80 else 0):
            at = inp.u16() % len(data)
            data[at] ^= inp.byte() or 0xFF
        if how & 0x60 == 0x60:
            del data[inp.u16() % (len(data) + 1) :]
        return bytes(data)


class PcapOps:
    """A pcap file built op by op (one byte each, then the op's own bytes): frames (ops 0-11), raw records (12),
    raw bytes (13) and records with corrupt headers (14, 15); the high half of the op advances the clock."""

    def __init__(self, inp: Input, order: str, linktype: int, unit: int) -> None:
        self.inp = inp
        self.order = order
        self.linktype = linktype
        self.unit = unit
        self.frames = Frames(inp)
        self.time = EPOCH_S * 10**9

    def build(self, head: bytes) -> bytes:
        out = [head]
        size = len(head)
        inp = self.inp
        while inp.left() and size < MAX_FILE:
            op = inp.byte()
            self.time += 1_000_003 * (op >> 4)
            seconds, fraction = divmod(self.time, 10**9)
            fraction //= self.unit
            match op & 15:
                case 12:
                    data = inp.take(inp.u16() % 2048)
                    record = self._record(seconds, fraction, len(data), data)
                case 13:
                    record = inp.take(inp.byte())
                case 14 | 15:
                    data = self.frames.frame(self.linktype)
                    caplen = (inp.u32(), len(data) + 1, len(data) - 1, 262_145, 0xFFFF_FFFF)[(op >> 4) % 5]
                    record = self._record(inp.u32(), inp.u32(), caplen & 0xFFFF_FFFF, data)
                case _:
                    data = self.frames.frame(self.linktype)
                    record = self._record(seconds, fraction, len(data), data)
            out.append(record)
            size += len(record)
        return b"".join(out)

    def _record(self, seconds: int, fraction: int, caplen: int, data: bytes) -> bytes:
        return struct.pack(self.order + "IIII", seconds & 0xFFFF_FFFF, fraction & 0xFFFF_FFFF, caplen, len(data)) + data


class PcapngOps:
    """A pcapng file built op by op (one byte each, then the op's own bytes): Enhanced Packet Blocks of frames (ops
    0-9), of raw bytes (10), raw bytes (11), interfaces (12), sections (13), Simple or obsolete Packet Blocks (14),
    contradictory Enhanced Packet Blocks or other blocks (15); the high half of the op picks the interface."""

    def __init__(self, inp: Input, order: str) -> None:
        from mqttaudit.capture import pcapng

        self.inp = inp
        self.pcapng = pcapng
        self.order = order
        self.out = io.BytesIO()
        self.interfaces: list[tuple[int, int, int]] = []  # (linktype, tsresol, tsoffset)
        self.frames = Frames(inp)
        self.time = EPOCH_S * 10**9

    def block(self, kind: int, body: bytes, *, length: int | None = None, trailer: int | None = None) -> None:
        body = _pad(body)
        size = len(body) + 12
        head = size if length is None else length
        tail = head if trailer is None else trailer
        self.out.write(struct.pack(self.order + "II", kind, head & 0xFFFF_FFFF) + body)
        self.out.write(struct.pack(self.order + "I", tail & 0xFFFF_FFFF))

    def section(self, order: str) -> None:
        self.order = order
        self.block(self.pcapng.SECTION_HEADER, struct.pack(order + "IHHq", self.pcapng.BYTE_ORDER_MAGIC, 1, 0, -1))
        self.interfaces = []

    def interface(self) -> None:
        """An Interface Description Block: link type, ``if_tsresol``/``if_tsoffset`` (extremes included), snaplen."""
        inp = self.inp
        linktype = LINKTYPES[inp.byte() % len(LINKTYPES)]
        choice = inp.byte()
        tsresol = TSRESOLS[choice % len(TSRESOLS)]
        tsoffset = TSOFFSETS[choice >> 4 & 7]
        snaplen = SNAPLENS[inp.byte() % len(SNAPLENS)]
        options = b""
        if tsresol != 6:
            options += struct.pack(self.order + "HH", 9, 1) + _pad(bytes([tsresol]))
        if tsoffset:
            options += struct.pack(self.order + "HHq", 14, 8, tsoffset)
        if options and choice & 0x80:
            options += struct.pack(self.order + "HH", 0, 0)
        self.block(self.pcapng.INTERFACE_DESCRIPTION, struct.pack(self.order + "HHI", linktype, 0, snaplen) + options)
        self.interfaces.append((linktype, tsresol, tsoffset))

    def _units(self, interface: int) -> tuple[int, int]:
        """The next timestamp in the interface's units, as (high, low); one in 8, any 64 bits the input gives."""
        from mqttaudit.capture.records import Interface

        inp = self.inp
        if inp.byte() & 0xE0 == 0xE0:
            return inp.u32(), inp.u32()
        self.time += 1_000_003
        if interface >= len(self.interfaces):
            units = self.time // 1000
        else:
            linktype, tsresol, tsoffset = self.interfaces[interface]
            units = Interface(linktype, 0, tsresol, tsoffset).from_ns(self.time)
        units &= (1 << 64) - 1
        return units >> 32, units & 0xFFFF_FFFF

    def _packet(self, interface: int, data: bytes, orig_len: int) -> None:
        high, low = self._units(interface)
        body = struct.pack(self.order + "IIIII", interface, high, low, len(data), orig_len)
        self.block(self.pcapng.ENHANCED_PACKET, body + data)

    def build(self) -> bytes:
        inp = self.inp
        ng = self.pcapng
        while inp.left() and self.out.tell() < MAX_FILE:
            op = inp.byte()
            high = op >> 4
            count = len(self.interfaces)
            interface = count if high == 15 else high % max(count, 1)
            linktype = self.interfaces[interface][0] if interface < count else 1
            match op & 15:
                case 10:
                    data = inp.take(inp.u16() % 2048)
                    self._packet(interface, data, len(data))
                case 11:
                    self.out.write(inp.take(inp.byte()))
                case 12:
                    self.interface()
                case 13:
                    self.section("<" if high & 1 else ">")
                case 14:
                    data = self.frames.frame(linktype)
                    if high & 1:
                        self.block(ng.SIMPLE_PACKET, struct.pack(self.order + "I", len(data) + (high & 2) * 8) + data)
                    else:
                        high_units, low_units = self._units(interface)
                        head = struct.pack(
                            self.order + "HHIIII", interface, 0, high_units, low_units, len(data), len(data)
                        )
                        self.block(ng.PACKET, head + data)
                case 15:
                    if high & 1:
                        self._broken_packet(interface, linktype)
                    else:
                        kind = (inp.u32(), 4, 5, 0x0BAD, 0x40000BAD, 6, 2, 1)[high >> 1]
                        self.block(kind, inp.take(inp.byte()))
                case _:
                    data = self.frames.frame(linktype)
                    self._packet(interface, data, len(data) + (high & 1) * 8)
        return self.out.getvalue()

    def _broken_packet(self, interface: int, linktype: int) -> None:
        """An Enhanced Packet Block whose captured length, length fields or size contradict each other."""
        inp = self.inp
        data = self.frames.frame(linktype)
        how = inp.byte()
        high, low = self._units(interface)
        caplen = len(data)
        length = trailer = None
        size = len(_pad(data)) + 32
        match how % 6:
            case 0:
                caplen = len(_pad(data)) + 1 + (how >> 3)
            case 1:
                trailer = size + 4
            case 2:
                length = size + 4 * (how >> 3)
            case 3:
                length = size - 4 * (1 + (how >> 3))
            case 4:
                length = inp.u32()
            case _:
                length = size + 1
        body = struct.pack(self.order + "IIIII", interface, high, low, caplen, caplen)
        self.block(self.pcapng.ENHANCED_PACKET, body + data, length=length, trailer=trailer)


# The differential check ------------------------------------------------------------------------------------------


class Difference(AssertionError):
    """The two paths disagree, or one of them raised."""


class Checker:
    """Runs one input through both paths (the modules imported under atheris's instrumentation)."""

    def __init__(self, work: Path) -> None:
        from mqttaudit.capture import CaptureError, native, plan_chunks, reader
        from mqttaudit.pipeline import segments
        from mqttaudit.pipeline.options import AuditOptions

        if not native.built():
            raise SystemExit("the native extension is not built: nothing to compare")
        self.capture_error = CaptureError
        self.plan_chunks = plan_chunks
        self.segments = segments
        self.options = AuditOptions
        self.path = str(work / "input.pcap")
        self.read_size = reader.READ_SIZE
        # The reading stage's function (``chunk_segments``, once ``_chunk_segments``); one that takes no read size
        # gets it through the defaults of the readers it makes.
        stage = vars(segments)
        self.read: Callable[..., Iterator[Any]] = stage.get("chunk_segments") or stage["_chunk_segments"]
        self.takes_read_size = "read_size" in inspect.signature(self.read).parameters
        self.defaults: list[dict[str, Any]] = []
        if not self.takes_read_size:
            kwdefaults = (reader.read_chunk.__kwdefaults__, native.NativeChunk.__init__.__kwdefaults__)
            self.defaults = [defaults for defaults in kwdefaults if defaults is not None]

    def __call__(self, data: bytes) -> None:
        case = Case(data)
        # A new file each time: truncating one makes some file systems (ext4) flush it at close.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        with open(self.path, "wb") as file:
            file.write(case.capture)
        try:  # at most MAX_CHUNKS chunks: each costs two reads
            chunks = self.plan_chunks(self.path, max(case.target, len(case.capture) // MAX_CHUNKS))
        except self.capture_error:
            return  # not a capture at all: the reading stage never sees it
        options = self.options(broker_ports=case.ports)
        read_size = case.read_size or self.read_size
        for defaults in self.defaults:
            defaults["read_size"] = read_size
        for number, chunk in enumerate(chunks):
            pure = self._read(chunk, options, read_size, "0")
            fast = self._read(chunk, options, read_size, "1")
            if len(pure) != len(fast) or not all(a.equals(b) for a, b in zip(pure, fast, strict=True)):
                raise Difference(describe(self.segments, case, number, chunk, pure, fast))

    def _read(self, chunk: Any, options: Any, read_size: int, switch: str) -> list[Any]:
        os.environ["MQTTAUDIT_NATIVE"] = switch
        extra = {"read_size": read_size} if self.takes_read_size else {}
        try:
            return list(self.read("fuzz", self.path, chunk, options, **extra))
        except Exception as exc:
            side = "native" if switch == "1" else "pure"
            raise Difference(f"the {side} path raised {type(exc).__name__}: {exc} (chunk {chunk})") from exc


def describe(segments: Any, case: Case, number: int, chunk: Any, pure: list[Any], fast: list[Any]) -> str:
    """What differs between the two paths' batches for one chunk, shortly."""

    def rows(batches: list[Any]) -> Iterator[str]:
        for batch in batches:
            for row in batch.to_pylist():
                if row["note"] is not None:
                    yield f"note {row['note']}"
                else:
                    run = segments.decode_run("fuzz", row["segments"]).to_pylist()
                    yield f"run {row['flow']} from record {row['first_record']}: {run}"[:600]

    lines = [f"chunk {number} {chunk}, ports {sorted(case.ports)}, read size {case.read_size or 'default'}"]
    for a, b in zip(rows(pure), rows(fast), strict=False):
        if a != b:
            lines += [f"pure:   {a}", f"native: {b}"]
    lines.append(f"batches: pure {len(pure)}, native {len(fast)}")
    return "\n".join(lines)


# Seeds ------------------------------------------------------------------------------------------------------------


def params(mode: int, *, flags: int = 1, target: int = 0xFFFF, ports: int = 0, read: int = 0) -> bytes:
    """The parameter bytes every input starts with (see :class:`Case`)."""
    return bytes([mode, flags]) + target.to_bytes(2, "little") + bytes([ports, read])


def _session_ops(pcapng: bool) -> bytes:
    """Op bytes of well-formed connections (handshake, data both ways, close) for the op-built modes."""
    out = bytearray()
    for session in range(len(ENDPOINTS)):
        steps = [(session | step << 4, 0) for step in range(3)]  # handshake
        steps += [(session, 1 | 9 << 3), (session | 8, 1 | 3 << 3), (session, 3), (session | 8, 3)]
        for what, kind in steps:
            op = (session % 2) << 4 if pcapng else 0x10
            out += bytes([op, what, kind, session & 3, 0])  # op, what, kind, link, how
            if pcapng:
                out.append(0)  # the timestamp: the clock's
    return bytes(out)


def seeds(captures: Path) -> Iterator[bytes]:
    """Seed inputs: the first SEED_BYTES of each real capture (read, never copied into the project) and captures
    written with the writer, verbatim or as the op bytes that build them."""
    from mqttaudit import codec
    from mqttaudit.capture import writer

    files = (
        sorted(p for p in captures.rglob("*") if p.suffix in (".pcap", ".pcapng", ".cap")) if captures.is_dir() else []
    )
    for number, path in enumerate(files):
        with open(path, "rb") as file:
            head = file.read(SEED_BYTES)
        yield params(VERBATIM) + head
        yield params(VERBATIM, target=40 + number * 97, ports=number % 7, read=4 + number % 5) + head
    session = writer.TcpSession()
    packets = [*session.handshake(), session.send(0, codec.encode(codec.Connect(client_id="seed")))]
    packets += [session.send(1, codec.encode(codec.Connack())), session.fin(0), session.fin(1)]
    timed = [((EPOCH_S + i) * 10**9 + i * 1000, p) for i, p in enumerate(packets)]
    links: list[tuple[int, Callable[[bytes], bytes]]] = [
        (1, writer.ethernet),
        (113, writer.linux_sll),
        (276, writer.linux_sll2),
        (0, writer.loopback),
        (101, lambda p: p),
    ]
    for linktype, wrap in links:
        framed = [(t, wrap(p)) for t, p in timed]
        yield params(VERBATIM) + writer.pcap_bytes(framed, linktype)
        yield params(VERBATIM, target=100, read=5) + writer.pcap_bytes(
            framed, linktype, nanoseconds=True, byteorder=">"
        )
    out = io.BytesIO()
    ng = writer.PcapngWriter(out)
    eth = ng.add_interface(1)
    raw = ng.add_interface(101, tsresol=9, tsoffset=5)
    for i, (t, p) in enumerate(timed):
        ng.write(eth if i % 2 else raw, t, writer.ethernet(p) if i % 2 else p)
    ng.write_simple(writer.ethernet(packets[0]))
    ng.write_obsolete(eth, timed[1][0], writer.ethernet(packets[1]))
    ng.write_block(0x0BAD, b"custom")
    big = writer.PcapngWriter(out, byteorder=">")
    big.add_interface(113, tsresol=0x80 | 20)
    big.write(0, timed[2][0], writer.linux_sll(packets[2]))
    yield params(VERBATIM) + out.getvalue()
    yield params(VERBATIM, target=64, ports=1, read=6) + out.getvalue()
    # More flows than the extension's first flow table holds, most of them on port 80 (fresh-flow frames: op, what,
    # kind 7, a, port, flags, link, how).
    fresh = b"".join(bytes([0x10, 0, 7, 0xC2 if i % 16 else 0, i & 0xFF, i >> 8, 2, 0, 0]) for i in range(540))
    yield params(PCAP_OPS, ports=0, target=0xFFFF) + bytes([0, 0]) + fresh
    # Op-built captures: the op bytes are the seed (every byte string means some capture).
    for linktype in (0, 1, 2, 3, 8):  # indexes into LINKTYPES
        yield params(PCAP_OPS, flags=linktype & 1, target=300) + bytes([linktype, 0]) + _session_ops(False)
        interfaces = bytes([2, linktype, 0, 0, 3, 1, 0])  # two interfaces: this link type, raw IP in nanoseconds
        yield params(PCAPNG_OPS, flags=linktype & 1, target=300, read=6) + interfaces + _session_ops(True)
    yield params(PCAP_RAW) + bytes([0, 0]) + bytes(64)
    yield params(PCAPNG_RAW) + bytes([1, 0, 0, 0]) + bytes(64)


# Running ----------------------------------------------------------------------------------------------------------


def cmp_feedback() -> str:
    """Whether the extension's trace-cmp callbacks reach atheris's libFuzzer (its symbols must come first in the
    process, as ``scripts/fuzz-native.sh`` preloads them), said in one line."""
    import atheris

    if os.environ.get("FUZZ_NATIVE_CMP") == "0":
        return "C comparisons: extension built without trace-cmp (FUZZ_NATIVE_CMP=0): Python coverage only"
    core = next(Path(atheris.__file__).parent.glob("core_with_libfuzzer*.so"), None)
    process = ctypes.CDLL(None)
    name = "__sanitizer_cov_trace_cmp4"
    if core is None or not hasattr(process, name):
        return "C comparisons: no libFuzzer callbacks in the process"
    resolved = ctypes.cast(getattr(process, name), ctypes.c_void_p).value
    libfuzzer = ctypes.cast(getattr(ctypes.CDLL(str(core)), name), ctypes.c_void_p).value
    if resolved != libfuzzer:
        return "C comparisons: callbacks resolve to another runtime (not preloaded first): Python coverage only"
    return "C comparisons: trace-cmp callbacks resolve to atheris's libFuzzer"


def child(argv: list[str]) -> None:
    """The fuzzing process: atheris over :class:`Checker` (libFuzzer exits it when the runs are done)."""
    import atheris

    work = Path(os.environ[WORK_ENV])
    extension = os.environ.get(EXTENSION_ENV)
    if extension:
        import mqttaudit.capture

        mqttaudit.capture.__path__.insert(0, extension)
    with atheris.instrument_imports(include=["mqttaudit"]):
        checker = Checker(work)
    from mqttaudit.capture import _native, pcapng

    print(f"fuzz-native: extension {_native.__file__}", file=sys.stderr)
    if extension and not str(_native.__file__).startswith(extension):
        raise SystemExit(f"fuzz-native: the sanitizer build in {extension} was not the one imported")
    compiled = not str(pcapng.__file__).endswith(".py")
    print(f"fuzz-native: Python parsers {'compiled (mypyc)' if compiled else 'pure Python'}", file=sys.stderr)
    if extension and not compiled:  # --compiled would have fuzzed the pure pair again and said it checked the other
        raise SystemExit(f"fuzz-native: --compiled, but the parsers imported are pure Python ({pcapng.__file__})")

    def test_one_input(data: bytes) -> None:
        checker(data)

    print(f"fuzz-native: {cmp_feedback()}", file=sys.stderr, flush=True)
    atheris.Setup([sys.argv[0], *argv], test_one_input, internal_libfuzzer=True)
    atheris.Fuzz()


STATUS = re.compile(r"^#(\d+)\s+(?:DONE|pulse|NEW|REDUCE|INITED)\s+cov: (\d+) ft: (\d+) corp: (\S+)")
DONE = re.compile(r"^Done (\d+) runs in (\d+) second")
ARTIFACT = re.compile(r"Test unit written to (\S+)")
REPLAYED = re.compile(r"^Executed \S+ in")


def main(args: list[str]) -> int:
    """Parses the options, writes the seed corpus, runs the fuzzing process and sums up what it reported."""
    runs, corpus, captures = DEFAULT_RUNS, "", CAPTURES
    flags: list[str] = []
    inputs: list[str] = []
    for arg in args:
        if arg.startswith("-runs="):
            runs = int(arg.split("=", 1)[1])
        elif arg.startswith("--corpus="):
            corpus = arg.split("=", 1)[1]
        elif arg.startswith("--captures="):
            captures = Path(arg.split("=", 1)[1])
        elif arg.startswith("-"):
            flags.append(arg)
        else:
            inputs.append(arg)
    # Stopped from outside: leave through the with-blocks, so that the temporary directory goes.
    signal.signal(signal.SIGTERM, lambda _number, _frame: sys.exit(143))
    if not any(f.startswith("-artifact_prefix=") for f in flags):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        flags.append(f"-artifact_prefix={ARTIFACTS}/")
    with tempfile.TemporaryDirectory(prefix="fuzz-native-", dir=_memory_dir()) as work:
        if inputs:  # replay crash files
            command = [*flags, *inputs]
        else:
            corpus_dir = Path(corpus or Path(work) / "corpus")
            corpus_dir.mkdir(parents=True, exist_ok=True)
            count = 0
            for count, seed in enumerate(seeds(captures), 1):
                (corpus_dir / f"seed-{count:03d}").write_bytes(seed[:MAX_INPUT])
            print(f"fuzz-native: {count} seeds, {runs} runs", file=sys.stderr)
            defaults = [
                f"-max_len={MAX_INPUT}",
                "-use_value_profile=1",
                "-print_final_stats=1",
                "-timeout=60",
                "-rss_limit_mb=8192",
            ]
            command = [*defaults, *flags, f"-runs={runs}", str(corpus_dir)]
        env = {**os.environ, WORK_ENV: work}
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, __file__, "--child", *command],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
        )
        assert process.stderr is not None
        status: re.Match[str] | None = None
        done: re.Match[str] | None = None
        artifacts: list[str] = []
        replayed = 0
        try:
            for line in process.stderr:
                sys.stderr.write(line)
                status = STATUS.match(line) or status
                done = DONE.match(line) or done
                artifacts += ARTIFACT.findall(line)
                replayed += bool(REPLAYED.match(line))
        finally:
            if process.poll() is None:  # this process was stopped: so is the fuzzing one
                process.terminate()
            code = process.wait()
        elapsed = time.monotonic() - started
    executions = done.group(1) if done else (status.group(1) if status else str(replayed))
    coverage = f"cov {status.group(2)}, ft {status.group(3)}, corpus {status.group(4)}" if status else "cov ?"
    print(f"fuzz-native: {executions} executions in {elapsed:.0f} s; {coverage}; exit {code}")
    for artifact in artifacts:
        print(f"fuzz-native: crash input {artifact}")
    return 0 if code == 0 and not artifacts else (code or 1)


def _memory_dir() -> str | None:
    """A memory file system for the input file written at every execution, when the machine has one."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1:]))
