"""The native reading path against its reference, the pure-Python one: the reading stage
(:func:`mqttaudit.pipeline.segments.chunk_segments`) gives the same runs of segments, skip counts, notes and errors
either way, on every shared capture and on generated captures of every link type the reader knows, corrupt,
truncated, cut into chunks anywhere and read in reads of any size.

The pure path is taken with ``MQTTAUDIT_NATIVE=0``; the native one needs the compiled build (`make install`): from
the source tree (``PYTHONPATH=src``, no extension) the comparisons cannot run and fail rather than pass unseen.
(`make test` runs this module on the compiled build; its pure-Python run checks that the extension is absent,
in tests/test_codec_build.py.)
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit.capture import Chunk, native, plan_chunks, writer
from mqttaudit.capture.link import AF_INET, ETHERTYPE_IPV6, Skip
from mqttaudit.capture.records import NANOSECONDS
from mqttaudit.capture.segments import decode_segment
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.segments import chunk_segments

from . import corpus

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)
EPOCH = 1_700_000_000 * 10**9
BROKER = 1883


def needs_native() -> None:
    if not native.built():
        pytest.fail("the native extension is not built: run the tests on the compiled build (make install)")


def stage(path: Path, chunk: Chunk, ports: frozenset[int], read_size: int, switch: str) -> list[pa.RecordBatch]:
    """The reading stage's output for one chunk, the native path on (``"1"``) or off (``"0"``): by the switch the
    audit reads (``MQTTAUDIT_NATIVE``)."""
    saved = os.environ.get(native.SWITCH)
    os.environ[native.SWITCH] = switch
    try:
        assert native.available() is (switch == "1")
        return list(chunk_segments("t", str(path), chunk, AuditOptions(broker_ports=ports), read_size))
    finally:
        if saved is None:
            del os.environ[native.SWITCH]
        else:
            os.environ[native.SWITCH] = saved


def assert_same_stage(path: Path, target: int, ports: frozenset[int], read_size: int = 1 << 20) -> int:
    """Asserts both paths give the same batches for every chunk; returns the segments read."""
    segments = 0
    for chunk in plan_chunks(path, target):
        pure = stage(path, chunk, ports, read_size, "0")
        fast = stage(path, chunk, ports, read_size, "1")
        assert len(fast) == len(pure)
        for mine, reference in zip(fast, pure, strict=True):
            assert mine.schema == reference.schema
            assert mine.to_pydict() == reference.to_pydict()
        notes = [json.loads(note) for batch in pure for note in batch.column("note").to_pylist() if note]
        segments += sum(note["segments"] for note in notes)
    return segments


def test_the_extension_counts_skips_under_the_reasons_of_the_pure_path() -> None:
    needs_native()
    assert native.skip_reasons() == tuple(reason.value for reason in Skip)


@pytest.mark.parametrize("name", corpus.capture_names())
def test_every_shared_capture_reads_the_same_both_ways(name: str) -> None:
    needs_native()
    path = corpus.capture(name)
    size = path.stat().st_size
    ports = frozenset({1883, 8883, 1884, 1885})
    assert_same_stage(path, 1 << 40, ports)
    assert_same_stage(path, max(1, size // 5), frozenset(range(65536)), read_size=4096)


# ---- generated captures ------------------------------------------------------------------------------------------

ADDRESSES_4 = ["10.0.0.1", "10.0.0.2", "192.168.1.9"]
ADDRESSES_6 = ["::1", "2001:db8::7", "fe80::1"]
PORTS = [BROKER, 8080, 50000, 50001]


@st.composite
def ip_packets(draw: st.DrawFn) -> bytes:
    """An IPv4 or IPv6 packet holding a TCP segment (sometimes with options, extension headers, fragments,
    another protocol), its bytes sometimes cut or mended at random."""
    six = draw(st.booleans())
    pool = ADDRESSES_6 if six else ADDRESSES_4
    src, dst = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
    sport, dport = draw(st.sampled_from(PORTS)), draw(st.sampled_from(PORTS))
    payload = draw(st.binary(max_size=60))
    segment = writer.tcp(
        src,
        dst,
        sport,
        dport,
        payload,
        seq=draw(st.integers(0, 2**32 - 1)),
        ack=draw(st.integers(0, 2**32 - 1)),
        flags=draw(st.integers(0, 0x1FF)),
        options=draw(st.sampled_from([b"", b"\x01\x01\x01\x00", b"\x02\x04\x05\xb4"])),
    )
    shape = draw(st.integers(0, 9))
    if six:
        extensions: list[tuple[int, bytes]] = []
        if shape == 1:
            extensions = [(writer.IPV6_HOP_BY_HOP, b"\x00" * 6)]
        elif shape == 2:
            extensions = [(writer.IPV6_FRAGMENT, writer.ipv6_fragment_header(draw(st.integers(0, 3)), more=True))]
        elif shape == 3:
            extensions = [(writer.IPV6_AH, b"\x00" * 10), (writer.IPV6_DESTINATION, b"")]
        next_header = draw(st.sampled_from([6, 17, writer.IPV6_ESP])) if shape == 4 else 6
        packet = writer.ipv6(src, dst, segment, extensions=extensions, next_header=next_header)
    else:
        packet = writer.ipv4(
            src,
            dst,
            segment,
            protocol=draw(st.sampled_from([6, 17])) if shape == 4 else 6,
            more_fragments=shape == 2,
            fragment_offset=draw(st.integers(0, 2)) if shape in (2, 3) else 0,
            options=b"\x01\x01\x01\x01" if shape == 1 else b"",
        )
    if shape == 5:  # any TCP data offset, beyond the segment too
        at = len(packet) - len(segment) + 12
        packet = packet[:at] + bytes([draw(st.integers(0, 15)) << 4 | packet[at] & 0x0F]) + packet[at + 1 :]
    if draw(st.integers(0, 4)) == 0:  # a few bytes changed anywhere: lengths, versions, offsets
        data = bytearray(packet)
        for _ in range(draw(st.integers(1, 3))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        packet = bytes(data)
    if draw(st.integers(0, 5)) == 0:
        packet = packet[: draw(st.integers(0, len(packet)))]
    return packet


LINK_TYPES = [1, 113, 276, 101, 12, 14, 228, 229, 0, 108, 147]


@st.composite
def frames(draw: st.DrawFn, linktype: int) -> bytes:
    """A frame of ``linktype`` around an IP packet (VLAN tags, loopback families in either byte order)."""
    packet = draw(ip_packets())
    six = bool(packet) and packet[0] >> 4 == 6
    ethertype = ETHERTYPE_IPV6 if six else 0x0800
    if draw(st.integers(0, 9)) == 0:
        ethertype = draw(st.sampled_from([0x0806, 0x8100, 0x88A8]))
    vlans = draw(st.lists(st.tuples(st.sampled_from([0x8100, 0x88A8, 0x9100]), st.integers(0, 4095)), max_size=2))
    family = draw(st.sampled_from([AF_INET, 10, 24, 28, 30, 7])) if six else AF_INET
    byteorder = draw(st.sampled_from("<>"))
    frame = writer.link_frame(linktype, packet, ethertype=ethertype, vlans=vlans, family=family, byteorder=byteorder)
    if draw(st.integers(0, 7)) == 0:
        frame = frame[: draw(st.integers(0, len(frame)))]
    return frame


@st.composite
def captures(draw: st.DrawFn) -> bytes:
    """A pcap or pcapng file of generated frames; pcapng adds interfaces (timestamp units of every kind, offsets),
    sections in either byte order, simple and obsolete packet blocks and unknown blocks along the way. Sometimes
    cut short, sometimes with a byte changed in a record or block header."""
    count = draw(st.integers(0, 25))
    if draw(st.booleans()):
        linktype = draw(st.sampled_from(LINK_TYPES))
        written = [(EPOCH + i * 1_000_003, draw(frames(linktype))) for i in range(count)]
        data = writer.pcap_bytes(
            written, linktype, nanoseconds=draw(st.booleans()), byteorder=draw(st.sampled_from("<>"))
        )
    else:
        out = io.BytesIO()
        byteorder = draw(st.sampled_from("<>"))
        pcap = writer.PcapngWriter(out, byteorder=byteorder)
        linktypes = [draw(st.sampled_from(LINK_TYPES))]
        pcap.add_interface(linktypes[0])
        for index in range(count):
            action = draw(st.integers(0, 14))
            if action == 0:
                linktypes.append(draw(st.sampled_from(LINK_TYPES)))
                tsresol = draw(st.sampled_from([6, 9, 3, 0x80 | 20, 0x80 | 70, 30, 127, 0xFF]))
                tsoffset = draw(st.sampled_from([0, 100, -(10**12), 2**62]))
                pcap.add_interface(linktypes[-1], tsresol=tsresol, tsoffset=tsoffset, snaplen=draw(st.integers(0, 90)))
            elif action == 1:
                byteorder = draw(st.sampled_from("<>"))
                pcap = writer.PcapngWriter(out, byteorder=byteorder)
                linktypes = [draw(st.sampled_from(LINK_TYPES))]
                pcap.add_interface(linktypes[0], tsresol=NANOSECONDS)
            elif action == 2:
                pcap.write_block(0x40000BAD, bytes(index % 9))
            interface = draw(st.integers(0, len(linktypes) - 1))
            frame = draw(frames(linktypes[interface]))
            # Timestamps in the interface's units: ordinary ones, and any 64-bit value (beyond 64-bit nanoseconds)
            units = draw(st.one_of(st.just(1_700_000_000_000_000 + index), st.integers(0, 2**64 - 1)))
            kind = draw(st.integers(0, 9))
            if kind == 0:
                pcap.write_simple(frame)
            elif kind == 1:
                head = struct.pack(
                    byteorder + "HHIIII", interface, 0, units >> 32, units & 0xFFFFFFFF, len(frame), len(frame)
                )
                pcap.write_block(2, head + frame)
            else:
                head = struct.pack(
                    byteorder + "IIIII", interface, units >> 32, units & 0xFFFFFFFF, len(frame), len(frame)
                )
                pcap.write_block(6, head + frame)
        data = out.getvalue()
    if data and draw(st.integers(0, 4)) == 0:  # a corrupt header byte somewhere
        mended = bytearray(data)
        mended[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        data = bytes(mended)
    if draw(st.integers(0, 5)) == 0:
        data = data[: max(28, len(data) - draw(st.integers(1, 60)))]
    return data


@SETTINGS
@given(
    data=captures(),
    target=st.integers(1, 4000),
    read_size=st.integers(1, 3000),
    everything=st.booleans(),
)
def test_generated_captures_read_the_same_both_ways_in_any_chunks_and_reads(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, target: int, read_size: int, everything: bool
) -> None:
    needs_native()
    path = tmp_path_factory.mktemp("capture") / "generated.cap"
    path.write_bytes(data)
    try:
        chunks = plan_chunks(path, target)
    except Exception:  # not a capture at all (the planner names why): both paths start from the same plan
        return
    ports = frozenset(range(65536)) if everything else frozenset({BROKER})
    for chunk in chunks:
        pure = stage(path, chunk, ports, read_size, "0")
        fast = stage(path, chunk, ports, read_size, "1")
        assert [batch.to_pydict() for batch in fast] == [batch.to_pydict() for batch in pure]


def test_a_pcapng_file_of_every_block_kind_reads_the_same_with_its_records_in_both_paths(tmp_path: Path) -> None:
    """Enhanced, simple and obsolete packet blocks, an interface with a timestamp unit beyond 64-bit arithmetic and
    one whose offset overflows, and a block with a bad trailer at the end: the native path hands each to Python
    and takes the records back, and the error note comes after the segments before it."""
    needs_native()
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(1)
    wide = pcap.add_interface(101, tsresol=127)
    shifted = pcap.add_interface(101, tsresol=0x80 | 64, tsoffset=2**62)
    session = writer.TcpSession()
    packets = [*session.handshake(), session.send(0, b"\x10\x00"), session.send(1, b"\x20\x02\x00\x00")]
    for index, packet in enumerate(packets):
        pcap.write(0, EPOCH + index, writer.ethernet(packet))
        # 2**40 + index units of 10**-127 s: a divisor beyond 64 bits
        pcap.write_block(6, struct.pack("<IIIII", wide, 2**8, index, len(packet), len(packet)) + packet)
        # units of 2**-64 s after an offset of 2**62 s: nanoseconds beyond 64 bits, the record skipped as corrupt
        pcap.write_block(6, struct.pack("<IIIII", shifted, 1, index, len(packet), len(packet)) + packet)
    pcap.write_simple(writer.ethernet(packets[-1]))
    pcap.write_obsolete(0, EPOCH, writer.ethernet(packets[0]))
    late = pcap.add_interface(113)  # an interface described after packets: the table the C reads grows
    pcap.write(late, EPOCH, writer.linux_sll(packets[2], protocol=0x0800))
    data = bytearray(out.getvalue())
    good = len(data)
    pcap.write(0, EPOCH, writer.ethernet(packets[1]))
    data += out.getvalue()[good:]
    struct.pack_into("<I", data, len(data) - 4, 999)  # the last block's trailing length disagrees
    path = tmp_path / "blocks.pcapng"
    path.write_bytes(bytes(data))
    segments = assert_same_stage(path, 1 << 40, frozenset({1883}))
    assert segments >= 2 * len(packets)
    [chunk] = plan_chunks(path, 1 << 40)
    note = stage(path, chunk, frozenset({1883}), 1 << 20, "1")[-1].column("note")[0].as_py()
    assert '"error"' in note and "different length field" in note


def test_a_scanner_is_set_up_once() -> None:
    """Setting a scanner up again would keep the flow table of its first chunk: refused."""
    needs_native()
    assert native._native is not None
    scanner = native._native.Scanner({BROKER})
    with pytest.raises(RuntimeError, match="set up once"):
        scanner.__init__({BROKER})  # type: ignore[misc]


def native_decode(linktype: int, frame: bytes) -> str | tuple[bytes, int, bytes, int, int, int, int, bytes]:
    """What the extension makes of one frame: the reason it holds no segment, or the segment's fields."""
    if native._native is None:
        pytest.fail("the native extension is not built: run the tests on the compiled build (make install)")
    scanner = native._native.Scanner(range(65536))
    scanner.record(EPOCH, linktype, frame, 0)
    _records, skipped = scanner.counts()
    if skipped:
        [reason] = skipped
        return str(reason)
    columns = native.Columns(*scanner.take())
    assert columns.rows == 1
    seq, ack = struct.unpack("<qq", columns.seq + columns.ack)
    sport, dport, flags = struct.unpack("<iii", columns.src_port + columns.dst_port + columns.flags)
    return (columns.src_ip, sport, columns.dst_ip, dport, seq, ack, flags, columns.payload)


def boundary_frames() -> Iterator[tuple[int, bytes]]:
    """Frames at every boundary the decoder checks: each cut short at every length, with every TCP data offset,
    every IPv4 header length and total length near the segment's, and payloads of 0 to 4 bytes."""
    for payload in (b"", b"a", b"ab", b"abc", b"abcd"):
        for src, dst in (("10.0.0.1", "10.0.0.2"), ("2001:db8::1", "2001:db8::2")):
            segment = writer.tcp(src, dst, 50000, BROKER, payload, seq=7, ack=9, flags=0x118)
            six = ":" in src
            extensions = [(writer.IPV6_HOP_BY_HOP, b"\x00" * 6)] if six else []
            packet = writer.ipv6(src, dst, segment, extensions=extensions) if six else writer.ipv4(src, dst, segment)
            tcp_at = len(packet) - len(segment)
            for nibble in range(16):
                shaped = bytearray(packet)
                shaped[tcp_at + 12] = nibble << 4 | shaped[tcp_at + 12] & 0x0F
                yield 101, bytes(shaped)
            for value in {*range(45), *range(len(packet) - 6, len(packet) + 6)}:
                shaped = bytearray(packet)
                struct.pack_into("!H", shaped, 4 if six else 2, (value - (40 if six else 0)) % 65536)
                yield 101, bytes(shaped)
                if not six:
                    shaped = bytearray(packet)
                    shaped[0] = 0x40 | min(15, value % 16)
                    yield 101, bytes(shaped)
            for linktype, frame in (
                (1, writer.ethernet(packet, ethertype=ETHERTYPE_IPV6 if six else 0x0800, vlans=[(0x8100, 5)])),
                (113, writer.linux_sll(packet, protocol=ETHERTYPE_IPV6 if six else 0x0800)),
                (276, writer.linux_sll2(packet, protocol=ETHERTYPE_IPV6 if six else 0x0800)),
                (0, writer.loopback(packet, family=30 if six else AF_INET)),
                (108, writer.loopback(packet, family=24 if six else AF_INET, byteorder=">")),
                (229 if six else 228, packet),
                (228 if six else 229, packet),
            ):
                for cut in range(len(frame) + 1):
                    yield linktype, frame[:cut]


def test_the_extension_decodes_every_boundary_frame_as_the_pure_decoder_does() -> None:
    checked = 0
    for linktype, frame in boundary_frames():
        reference = decode_segment(EPOCH, linktype, frame)
        expected = reference if isinstance(reference, str) else tuple(reference[1:])
        assert native_decode(linktype, frame) == expected, (linktype, frame.hex())
        checked += 1
    assert checked > 4000
