"""Reading captures written here: pcap in both timestamp resolutions and byte orders, pcapng with several
interfaces, sections and block kinds, truncated and corrupt files, and record-aligned chunks that read alone
exactly what the whole file holds, in bounded memory."""

from __future__ import annotations

import io
import itertools
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit.capture import CaptureError, plan_chunks, read_chunk, read_records, whole_file, writer
from mqttaudit.capture import pcapng as ng
from mqttaudit.capture.link import ETHERNET, IPV4, IPV6, LINUX_SLL2, RAW
from mqttaudit.capture.pcap import GLOBAL_HEADER_SIZE, MAX_CAPLEN
from mqttaudit.capture.records import NANOSECONDS

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=60)
EPOCH = 1_700_000_000 * 10**9


def opener(data: bytes) -> Callable[[], BinaryIO]:
    return lambda: io.BytesIO(data)


def frames(count: int, size: int = 40) -> list[tuple[int, bytes]]:
    return [(EPOCH + index * 1_234_567 + 891, bytes([index % 256]) * (size + index % 7)) for index in range(count)]


def read_all(data: bytes, name: str = "t.pcap") -> list[tuple[int, int, bytes, int, int, int]]:
    return list(read_records(opener(data), name=name))


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_pcap_records_carry_time_link_type_lengths_index_and_offset(byteorder: str, nanoseconds: bool) -> None:
    written = frames(5)
    data = writer.pcap_bytes(written, ETHERNET, nanoseconds=nanoseconds, byteorder=byteorder)
    records = read_all(data)
    offset = GLOBAL_HEADER_SIZE
    for index, ((time_ns, frame), record) in enumerate(zip(written, records, strict=True)):
        expected_time = time_ns if nanoseconds else time_ns // 1000 * 1000
        assert record == (expected_time, ETHERNET, frame, len(frame), index, offset)
        offset += 16 + len(frame)


def test_pcap_keeps_the_original_length_when_the_snapshot_cut_the_frame() -> None:
    out = io.BytesIO()
    pcap = writer.PcapWriter(out, RAW, snaplen=64)
    pcap.write(EPOCH, b"x" * 64, orig_len=1500)
    [record] = read_all(out.getvalue())
    assert (len(record[2]), record[3]) == (64, 1500)


def test_pcap_link_type_ignores_the_fcs_bits_of_the_header_field() -> None:
    data = bytearray(writer.pcap_bytes(frames(1), ETHERNET))
    data[20:24] = struct.pack("<I", ETHERNET | 0x1 << 26 | 0x4 << 28)  # FCS present, 4 bytes
    [record] = read_all(bytes(data))
    assert record[1] == ETHERNET


def pcapng_two_interfaces(byteorder: str = "<") -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """An Ethernet interface in microseconds, a Linux SLL2 interface in nanoseconds with a time offset, and a
    raw-IP interface counting 2**-20 seconds; packets interleaved; unknown blocks between them."""
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out, byteorder=byteorder)
    ethernet = pcap.add_interface(ETHERNET, snaplen=65535)
    pcap.write_block(0x0000_0BAD, b"a custom block nobody here knows")
    cooked = pcap.add_interface(LINUX_SLL2, tsresol=NANOSECONDS, tsoffset=100)
    binary = pcap.add_interface(RAW, tsresol=0x80 | 20)
    expected: list[tuple[int, int, bytes]] = []
    for index in range(6):
        interface = (ethernet, cooked, binary)[index % 3]
        time_ns = EPOCH + index * 1_000_003_007
        frame = bytes([index]) * (13 + index)
        pcap.write(interface, time_ns, frame)
        if index == 2:
            pcap.write_block(5, b"\x00" * 12)  # an Interface Statistics Block
        if interface == ethernet:
            expected_time = time_ns // 1000 * 1000
        elif interface == cooked:
            expected_time = time_ns
        else:  # whole units of 2**-20 seconds, back in nanoseconds
            expected_time = ((time_ns << 20) // 10**9) * 10**9 >> 20
        expected.append((expected_time, (ETHERNET, LINUX_SLL2, RAW)[index % 3], frame))
    return out.getvalue(), expected


@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_pcapng_interfaces_keep_their_own_link_type_and_timestamp_unit(byteorder: str) -> None:
    data, expected = pcapng_two_interfaces(byteorder)
    records = read_all(data, "t.pcapng")
    assert [(time, linktype, frame) for time, linktype, frame, _length, _index, _offset in records] == expected
    assert [record[4] for record in records] == list(range(6))
    for record in records:  # each offset is the start of an Enhanced Packet Block
        assert struct.unpack_from(byteorder + "I", data, record[5])[0] == ng.ENHANCED_PACKET
    cooked = records[1]  # stored in nanoseconds less the interface's 100-second offset
    high, low = struct.unpack_from(byteorder + "II", data, cooked[5] + 12)
    assert (high << 32 | low) == cooked[0] - 100 * 10**9


def test_pcapng_simple_and_obsolete_packet_blocks_and_a_second_big_endian_section() -> None:
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(ETHERNET, snaplen=20)
    pcap.write_simple(b"s" * 30)  # cut to the snapshot length of interface 0
    pcap.write_obsolete(0, EPOCH, b"old")
    first = out.getvalue()
    second = io.BytesIO()
    pcap = writer.PcapngWriter(second, byteorder=">")
    pcap.add_interface(IPV6, tsresol=NANOSECONDS)
    pcap.write(0, EPOCH + 7, b"six")
    records = read_all(first + second.getvalue(), "t.pcapng")
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in records] == [
        (ng.NO_TIMESTAMP, ETHERNET, b"s" * 20, 30, 0),
        (EPOCH, ETHERNET, b"old", 3, 1),
        (EPOCH + 7, IPV6, b"six", 3, 2),
    ]


def test_a_pcap_cut_inside_its_last_record_keeps_every_record_before_it() -> None:
    data = writer.pcap_bytes(frames(4), ETHERNET)
    cut = data[:-5]
    reader = read_records(opener(cut), name="cut.pcap")
    records = list(reader)
    assert records == read_all(data)[:3]
    assert reader.truncation is not None
    last = read_all(data)[3]
    assert (reader.truncation.offset, reader.truncation.index) == (last[5], 3)
    assert (reader.truncation.needed, reader.truncation.available) == (16 + len(last[2]), 16 + len(last[2]) - 5)


def test_a_pcap_cut_inside_a_record_header_is_reported_too() -> None:
    data = writer.pcap_bytes(frames(2), ETHERNET)
    first_end = GLOBAL_HEADER_SIZE + 16 + len(frames(2)[0][1])
    reader = read_records(opener(data[: first_end + 10]))
    assert len(list(reader)) == 1
    assert reader.truncation is not None
    assert (reader.truncation.offset, reader.truncation.needed, reader.truncation.available) == (first_end, 16, 10)


def test_a_pcapng_cut_inside_a_block_keeps_every_packet_before_it() -> None:
    data, expected = pcapng_two_interfaces()
    reader = read_records(opener(data[:-8]))
    assert [record[2] for record in reader] == [frame for _time, _link, frame in expected[:5]]
    assert reader.truncation is not None and reader.truncation.index == 5


def test_an_intact_file_reports_no_truncation() -> None:
    reader = read_records(opener(writer.pcap_bytes(frames(3), ETHERNET)))
    assert len(list(reader)) == 3 and reader.truncation is None and reader.records == 3


def test_a_file_that_is_no_capture_is_refused_naming_the_file_and_offset() -> None:
    with pytest.raises(CaptureError, match=r"^notes\.txt: offset 0: magic number 68656c6c is neither"):
        read_records(opener(b"hello, this is not a capture"), name="notes.txt")
    with pytest.raises(CaptureError, match="offset 0") as caught:
        plan_chunks(opener(b"\x00" * 100), 1000, name="zeros.pcap")
    assert caught.value.source == "zeros.pcap"


def test_a_pcap_global_header_with_an_unknown_version_is_refused() -> None:
    data = bytearray(writer.pcap_bytes([], ETHERNET))
    data[4:6] = struct.pack("<H", 3)
    with pytest.raises(CaptureError, match=r"v\.pcap: offset 4: pcap version 3\.4"):
        whole_file(opener(bytes(data)), name="v.pcap")


def test_a_corrupt_record_header_raises_naming_the_file_and_offset_after_the_records_before_it() -> None:
    data = bytearray(writer.pcap_bytes(frames(3), ETHERNET))
    third = read_all(bytes(data))[2][5]
    struct.pack_into("<I", data, third + 8, MAX_CAPLEN + 1)
    seen: list[int] = []
    with pytest.raises(CaptureError) as caught:
        seen.extend(record[4] for record in read_records(opener(bytes(data)), name="bad.pcap"))
    assert seen == [0, 1]
    assert (caught.value.source, caught.value.offset) == ("bad.pcap", third)
    assert "record 2 declares 262145 captured bytes" in str(caught.value)
    # Planning stops at the bad header: the last chunk runs to the end of the file and its reader reports it.
    chunks = plan_chunks(opener(bytes(data)), 100, name="bad.pcap")
    assert chunks[-1].end == len(data) and chunks[-1].start <= third
    seen = []
    with pytest.raises(CaptureError, match=f"bad.pcap: offset {third}: record 2"):
        for chunk in chunks:
            seen.extend(record[4] for record in read_chunk(opener(bytes(data)), chunk))
    assert seen == [0, 1]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data, at: struct.pack_into("<I", data, at + 4, 30), "block length 30 is not a multiple of 4"),
        (lambda data, at: struct.pack_into("<I", data, at + 8, 9), "packet names interface 9; the section describes 3"),
        (lambda data, at: struct.pack_into("<I", data, at + 20, 4000), "packet of 4000 bytes does not fit"),
        (
            lambda data, at: struct.pack_into("<I", data, at + struct.unpack_from("<I", data, at + 4)[0] - 4, 99),
            "ends with a different length field",
        ),
    ],
)
def test_a_corrupt_pcapng_block_raises_naming_the_file_and_the_block_offset(
    damage: Callable[[bytearray, int], None], message: str
) -> None:
    data, _expected = pcapng_two_interfaces()
    at = read_all(data)[3][5]
    broken = bytearray(data)
    damage(broken, at)
    seen: list[int] = []
    with pytest.raises(CaptureError, match=message) as caught:
        seen.extend(record[4] for record in read_records(opener(bytes(broken)), name="bad.pcapng"))
    assert seen == [0, 1, 2]
    assert (caught.value.source, caught.value.offset) == ("bad.pcapng", at)


def test_a_pcapng_that_does_not_start_with_a_section_header_is_refused() -> None:
    data, _expected = pcapng_two_interfaces()
    section_end = struct.unpack_from("<I", data, 4)[0]
    with pytest.raises(CaptureError, match="neither pcap nor pcapng"):
        whole_file(opener(data[section_end:]))


def test_a_byte_order_magic_that_is_neither_order_is_refused() -> None:
    data = bytearray(pcapng_two_interfaces()[0])
    data[8:12] = b"\x01\x02\x03\x04"
    with pytest.raises(CaptureError, match="offset 8: byte-order magic 01020304"):
        list(read_records(opener(bytes(data))))


def test_chunks_cover_the_file_from_record_boundaries_and_carry_the_header_state() -> None:
    data = writer.pcap_bytes(frames(50), LINUX_SLL2, nanoseconds=True, byteorder=">")
    chunks = plan_chunks(opener(data), 300)
    assert chunks[0].start == GLOBAL_HEADER_SIZE and chunks[-1].end == len(data)
    assert all(a.end == b.start for a, b in itertools.pairwise(chunks))
    offsets = {record[5] for record in read_all(data)}
    assert all(chunk.start in offsets for chunk in chunks)
    assert all(chunk.end - chunk.start >= 300 for chunk in chunks[:-1])
    assert {(chunk.byteorder, chunk.interfaces[0].linktype, chunk.interfaces[0].tsresol) for chunk in chunks} == {
        (">", LINUX_SLL2, NANOSECONDS)
    }


def test_a_pcapng_chunk_carries_the_interface_table_in_effect_where_it_starts() -> None:
    data, _expected = pcapng_two_interfaces(">")
    chunks = plan_chunks(opener(data), 1)
    tables = [[interface.linktype for interface in chunk.interfaces] for chunk in chunks]
    assert tables[0] == [] and tables[-1] == [ETHERNET, LINUX_SLL2, RAW]
    assert all(chunk.byteorder == ">" for chunk in chunks[1:])


@st.composite
def captures(draw: st.DrawFn) -> bytes:
    """A pcap or pcapng file of random records; pcapng ones add interfaces and sections along the way."""
    sizes = draw(st.lists(st.integers(0, 300), max_size=40))
    if draw(st.booleans()):
        byteorder = draw(st.sampled_from("<>"))
        nanoseconds = draw(st.booleans())
        return writer.pcap_bytes(
            [(EPOCH + i * 999, bytes([i % 256]) * size) for i, size in enumerate(sizes)],
            ETHERNET,
            nanoseconds=nanoseconds,
            byteorder=byteorder,
        )
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out, byteorder=draw(st.sampled_from("<>")))
    pcap.add_interface(ETHERNET)
    interfaces = 1
    for index, size in enumerate(sizes):
        action = draw(st.integers(0, 9))
        if action == 0:
            pcap.add_interface(draw(st.sampled_from([RAW, IPV4, LINUX_SLL2])), tsresol=draw(st.sampled_from([6, 9])))
            interfaces += 1
        elif action == 1:
            pcap.section()
            pcap.add_interface(IPV6, tsresol=9)
            interfaces = 1
        elif action == 2:
            pcap.write_block(0x40000BAD, bytes(size % 50))
        pcap.write(draw(st.integers(0, interfaces - 1)), EPOCH + index * 999, bytes([index % 256]) * size)
    return out.getvalue()


@SETTINGS
@given(data=captures(), target=st.integers(1, 5000), read_size=st.integers(1, 4096))
def test_chunked_reading_yields_the_records_of_whole_file_reading(data: bytes, target: int, read_size: int) -> None:
    whole = read_all(data)
    chunks = plan_chunks(opener(data), target)
    chunked = [record for chunk in chunks for record in read_chunk(opener(data), chunk, read_size=read_size)]
    assert chunked == whole
    assert [record[4] for record in whole] == list(range(len(whole)))


@SETTINGS
@given(data=captures(), cut=st.integers(1, 200), target=st.integers(1, 3000))
def test_a_truncated_file_reads_the_same_records_whole_and_in_chunks(data: bytes, cut: int, target: int) -> None:
    data = data[: max(len(data) - cut, 28)]
    whole_reader = read_records(opener(data))
    whole = list(whole_reader)
    chunk_readers = [read_chunk(opener(data), chunk) for chunk in plan_chunks(opener(data), target)]
    assert [record for reader in chunk_readers for record in reader] == whole
    truncations = [reader.truncation for reader in chunk_readers if reader.truncation is not None]
    assert truncations == ([whole_reader.truncation] if whole_reader.truncation else [])


def test_reading_a_chunk_holds_memory_bounded_by_the_chunk_not_the_file(tmp_path: Path) -> None:
    session = writer.TcpSession()
    packets = [writer.ethernet(session.send(index % 2, bytes(100 + index * 37 % 1300))) for index in range(400)]
    path = tmp_path / "big.pcap"
    with path.open("wb") as out:
        pcap = writer.PcapWriter(out, ETHERNET)
        for index in range(8000):
            pcap.write(EPOCH + index * 1000, packets[index % 400])
    size = path.stat().st_size
    assert size > 6_000_000
    peaks = {}
    for target in (32 * 1024, 128 * 1024):
        chunks = plan_chunks(path, target)
        tracemalloc.start()
        count = sum(1 for chunk in chunks for _record in read_chunk(lambda: path.open("rb"), chunk))
        peaks[target] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == 8000
        # The chunk's bytes, the records cut from them, and one record of slack.
        assert peaks[target] < 4 * target + 64 * 1024, (target, peaks[target])
    assert peaks[32 * 1024] < size / 50


def reference_boundaries(data: bytes, byteorder: str, target: int) -> list[tuple[int, int, int]]:
    """(start, end, first record) of each chunk, by walking every record header one at a time."""
    out: list[tuple[int, int, int]] = []
    start = pos = GLOBAL_HEADER_SIZE
    first = index = 0
    while pos + 16 <= len(data):
        if pos - start >= target:
            out.append((start, pos, first))
            start, first = pos, index
        pos += 16 + struct.unpack_from(byteorder + "I", data, pos + 8)[0]
        index += 1
    out.append((start, len(data), first))
    return out


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("window", [16, 37, 64, 1 << 20])
@pytest.mark.parametrize("target", [1, 100, 1000])
def test_chunk_boundaries_do_not_depend_on_byte_order_or_the_planner_window(
    byteorder: str, window: int, target: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mqttaudit.capture import chunks as planner

    monkeypatch.setattr(planner, "WINDOW", window)
    written = [(EPOCH + i, bytes([i]) * (i * 7 % 90)) for i in range(60)]
    data = writer.pcap_bytes(written, ETHERNET, byteorder=byteorder)
    planned = [(c.start, c.end, c.first_index) for c in plan_chunks(opener(data), target)]
    assert planned == reference_boundaries(data, byteorder, target)
    # A record cut off by the end of the file stays in the last chunk.
    cut = data[:-5]
    assert [(c.start, c.end, c.first_index) for c in plan_chunks(opener(cut), target)] == reference_boundaries(
        cut, byteorder, target
    )
