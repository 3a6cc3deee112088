"""Corrupt captures: pcapng timestamps beyond 64-bit nanoseconds are corrupt records (skipped, reported with their
offsets, the rest read); one corrupt record header costs only what follows it; and seeded mutants of real captures
(the capture corpus and captures written here) run through the capture layer and the audit's own stages without
Spark (reading, judging, routing replay, tables written): only records and CaptureErrors, never another exception.
A few mutants go through ``mqttaudit audit`` (``main``, on the test session's Spark) too."""

from __future__ import annotations

import io
import json
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pytest

from mqttaudit.capture import CaptureError, audit_records, plan_chunks, read_chunk, read_records, segments, writer
from mqttaudit.capture import pcapng as ng
from mqttaudit.capture.conversation import DEFAULT_MAX_MALFORMED, malformed_cap_reason
from mqttaudit.capture.link import RAW
from mqttaudit.capture.records import MAX_TIME_NS
from mqttaudit.codec import Connack, Connect, Publish, encode
from mqttaudit.judge.events import Lost
from mqttaudit.pipeline import local
from mqttaudit.pipeline import segments as reading
from mqttaudit.pipeline.conversations import Flow, connection_flow, judge_flow
from mqttaudit.pipeline.options import AuditOptions

from .cli_in_process import run_mqttaudit
from .corpus import capture
from .crafted import chunk_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The captures of the third-party corpus the mutants are made of, beside the ones written here.
REAL = [
    "suricata-verify/mqtt311-pub-qos1.pcap",
    "suricata-verify/mqtt-frames-truncated.pcap",
    "suricata-verify/mqtt5-excessiveproplen.pcap",
    "peafowl/mqtt-1.pcapng",
]
EPOCH = 1_700_000_000 * 10**9
MICROS = EPOCH // 1000


def opener(data: bytes) -> Callable[[], BinaryIO]:
    return lambda: io.BytesIO(data)


def conversation(port: int = 50000, payloads: tuple[bytes, ...] = ()) -> list[bytes]:
    """The IP packets of one MQTT connection to port 1883: handshake, CONNECT, CONNACK, a PUBLISH, the given
    extra payloads from the client, then both FINs."""
    session = writer.TcpSession(("10.0.0.1", port), ("10.0.0.2", 1883))
    packets = session.handshake()
    packets += [session.send(0, encode(Connect(client_id=f"c{port}"))), session.send(1, encode(Connack()))]
    packets += [session.send(0, encode(Publish(topic="a/b", payload=b"hello")))]
    packets += [session.send(0, payload) for payload in payloads]
    return [*packets, session.fin(0), session.fin(1)]


def raw_epb(interface: int, units: int, frame: bytes, byteorder: str = "<") -> bytes:
    """The body of an Enhanced Packet Block with a timestamp of ``units`` as stored (any 64-bit value)."""
    head = struct.pack(byteorder + "IIIII", interface, units >> 32, units & 0xFFFFFFFF, len(frame), len(frame))
    return head + frame + b"\x00" * (-len(frame) % 4)


def timestamp_capture() -> tuple[bytes, list[int], int]:
    """A pcapng file: interfaces 0 (microseconds), 1 (``if_tsresol`` 0, seconds, while its packets hold
    microseconds), 2 and 3 (``if_tsoffset`` +2**62 and -2**62 s); a valid conversation on interface 0, with a packet
    of each bad kind among it (and one whose timestamp high word is ffffffff). Returns the file, the offsets of the
    bad packets, and how many packets are good."""
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(RAW)
    pcap.add_interface(RAW, tsresol=0)
    pcap.add_interface(RAW, tsoffset=1 << 62)
    pcap.add_interface(RAW, tsoffset=-(1 << 62))
    good = conversation()
    intruder = conversation(port=50009)[0]  # a SYN of another connection: read, it would show as one
    bad: list[int] = []
    for index, packet in enumerate(good):
        pcap.write(0, EPOCH + index * 1000, packet)
        if index < 4:
            bad.append(out.tell())
            if index == 0:
                pcap.write_block(ng.ENHANCED_PACKET, raw_epb(0, 0xFFFFFFFF << 32, intruder))
            else:
                pcap.write_block(ng.ENHANCED_PACKET, raw_epb(index, MICROS + index, intruder))
    return out.getvalue(), bad, len(good)


def test_pcapng_timestamps_beyond_64_bit_nanoseconds_are_corrupt_records_skipped_and_the_rest_read() -> None:
    data, bad, good = timestamp_capture()
    reader = read_records(opener(data), name="t.pcapng")
    records = list(reader)
    assert len(records) == good and reader.truncation is None
    assert all(0 < record[0] <= MAX_TIME_NS for record in records)
    assert [c.offset for c in reader.corrupt] == bad and reader.corrupt_count == 4
    # Indexes stay the file's frame numbers: a skipped packet keeps its own.
    assert [c.index for c in reader.corrupt] == [1, 3, 5, 7]
    assert [record[4] for record in records] == [0, 2, 4, 6, 8, *range(9, 9 + good - 5)]
    assert "0xffffffff:00000000" in reader.corrupt[0].reason and "if_tsresol 0" in reader.corrupt[1].reason
    assert "if_tsoffset 4611686018427387904 s" in reader.corrupt[2].reason
    assert all("outside 64-bit nanoseconds" in c.reason for c in reader.corrupt)
    [flow] = audit_records(records)
    assert flow.total.reconciles and len(flow.frames) == 3


def test_an_obsolete_packet_block_with_an_overflowing_timestamp_is_skipped_too() -> None:
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(RAW, tsoffset=-(1 << 62))
    pcap.add_interface(RAW)
    packets = conversation()
    at = out.tell()
    pcap.write_obsolete(1, EPOCH, packets[0])
    head = struct.pack("<HHIIII", 0, 0, MICROS >> 32, MICROS & 0xFFFFFFFF, len(packets[1]), len(packets[1]))
    bad = out.tell()
    pcap.write_block(ng.PACKET, head + packets[1])
    pcap.write(1, EPOCH + 2000, packets[2])
    reader = read_records(opener(out.getvalue()))
    assert [record[4] for record in reader] == [0, 2]
    assert [(c.offset, c.index) for c in reader.corrupt] == [(bad, 1)] and at < bad


def test_many_corrupt_records_are_all_counted_the_first_described_and_the_note_says_how_many_more() -> None:
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(RAW)
    for index in range(100):
        pcap.write_block(ng.ENHANCED_PACKET, raw_epb(0, (0xFFFFFFFF << 32) + index, b"\x45" + bytes(19)))
    pcap.write(0, EPOCH, conversation()[0])
    [chunk] = plan_chunks(opener(out.getvalue()), 1 << 20)
    reader = read_chunk(opener(out.getvalue()), chunk)
    assert [record[4] for record in reader] == [100]
    assert reader.corrupt_count == 100 and len(reader.corrupt) == ng.KEPT_CORRUPT
    note = reading.corrupt_note(reader)
    assert len(note) == ng.KEPT_CORRUPT + 1
    assert note[-1]["reason"] == f"{100 - ng.KEPT_CORRUPT} more corrupt record(s) after this one"
    assert note[0] == {"offset": reader.corrupt[0].offset, "frame": 1, "reason": reader.corrupt[0].reason}


def valid_then_huge_header() -> tuple[bytes, int, int]:
    """A pcap of one conversation, then a record header declaring 16 MiB and a few bytes: the file, the offset
    of the bad header and the good records."""
    packets = conversation(port=50001)
    data = writer.pcap_bytes([(EPOCH + i * 1000, p) for i, p in enumerate(packets)], linktype=RAW)
    return data + struct.pack("<IIII", EPOCH // 10**9, 0, 16 << 20, 16 << 20) + b"\x45" * 300, len(data), len(packets)


def valid_section_then_garbage() -> tuple[bytes, int, int]:
    """A pcapng section of one conversation, then garbage: the file, where the garbage starts, the good records."""
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out)
    pcap.add_interface(RAW)
    packets = conversation(port=50002)
    for index, packet in enumerate(packets):
        pcap.write(0, EPOCH + index * 1000, packet)
    data = out.getvalue()
    return data + bytes(range(7, 250)) * 3, len(data), len(packets)


@pytest.mark.parametrize("target", [1, 100, 1000, 1 << 20])
@pytest.mark.parametrize("make", [valid_then_huge_header, valid_section_then_garbage])
def test_one_corrupt_header_costs_only_the_records_after_it(
    make: Callable[[], tuple[bytes, int, int]], target: int
) -> None:
    data, bad, good = make()
    chunks = plan_chunks(opener(data), target, name="bad")
    assert chunks[-1].end == len(data)
    seen: list[int] = []
    with pytest.raises(CaptureError) as caught:
        for chunk in chunks:
            seen.extend(record[4] for record in read_chunk(opener(data), chunk))
    assert seen == list(range(good))
    assert caught.value.offset == bad and caught.value.source == "bad"


# -- seeded mutants through the capture layer and the audit's stages, without Spark ------------------------------

SEED = 20261124
#: Mutants per source capture (the fuzz test takes some 20 s).
MUTANTS = 500


def written_captures() -> dict[str, bytes]:
    """Captures written here: pcap and pcapng (two interfaces, big-endian) of conversations, one with random TCP
    payloads on port 1883 after a valid start."""
    rng = random.Random(SEED)
    noise = tuple(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))) for _ in range(6))
    first, second = conversation(), conversation(port=50001, payloads=noise)
    frames = [(EPOCH + i * 1000, p) for i, p in enumerate(first + second)]
    out = io.BytesIO()
    pcap = writer.PcapngWriter(out, byteorder=">")
    pcap.add_interface(RAW)
    pcap.add_interface(RAW, tsresol=9)
    for index, (time_ns, packet) in enumerate(frames):
        pcap.write(index % 2, time_ns, packet)
    random_only = writer.TcpSession(("10.0.0.1", 50002), ("10.0.0.2", 1883))
    streams = random_only.handshake() + [random_only.send(i % 2, payload) for i, payload in enumerate(noise)]
    return {
        "written.pcap": writer.pcap_bytes(frames, linktype=RAW, nanoseconds=True),
        "written.pcapng": out.getvalue(),
        "random.pcap": writer.pcap_bytes([(EPOCH + i, p) for i, p in enumerate(streams)], linktype=RAW),
    }


def headers(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of the record or block headers of a capture (24-byte pcap header included)."""
    if data[:4] == b"\x0a\x0d\x0d\x0a":
        found, pos = [], 0
        byteorder = "<" if data[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        while pos + 12 <= len(data):
            length = struct.unpack_from(byteorder + "I", data, pos + 4)[0]
            found.append((pos, max(12, min(28, length))))
            if length < 12:
                break
            pos += length
        return found
    found, pos = [(0, 24)], 24
    byteorder = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    while pos + 16 <= len(data):
        found.append((pos, 16))
        pos += 16 + struct.unpack_from(byteorder + "I", data, pos + 8)[0]
    return found


ABSURD = (0, 1, 11, 12, 13, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 16 << 20, (16 << 20) + 4, 262_145, 65_536)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three of: truncated at or near a header, header bytes flipped, an absurd length or timestamp written
    over a header field, random bytes written into the records, garbage appended."""
    for _ in range(rng.choice([1, 1, 2, 3])):
        data = mutation(data, rng) if data else data
    return data


def mutation(data: bytes, rng: random.Random) -> bytes:
    at, size = rng.choice(headers(data) or [(0, 12)])
    size = max(size, 1)
    kind = rng.randrange(6)
    out = bytearray(data)
    if kind == 0:  # truncation at a boundary, inside a header, or inside a record
        cut = max(0, min(len(out), at + rng.choice([0, 1, size - 1, size, size + 1, rng.randrange(1, 64)])))
        return bytes(out[:cut])
    if kind == 1:  # flipped header bytes
        for _ in range(rng.randrange(1, 4)):
            index = at + rng.randrange(size)
            if index < len(out):
                out[index] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == 2:  # an absurd length (pcap caplen at +8, pcapng block length at +4 and its trailer)
        field = at + (8 if data[:4] != b"\x0a\x0d\x0d\x0a" and at else 4)
        if field + 4 <= len(out):
            out[field : field + 4] = struct.pack(rng.choice("<>") + "I", rng.choice(ABSURD))
        return bytes(out)
    if kind == 3:  # an absurd timestamp (high word, or pcap seconds) or an option value of an interface
        field = at + rng.choice([0, 4, 8, 12, 16, 20, 24])
        if field + 4 <= len(out):
            out[field : field + 4] = struct.pack("<I", rng.choice([0xFFFFFFFF, 0x80000000, 0, 0x7FFFFFFF]))
        return bytes(out)
    if kind == 4:  # random bytes over a stretch of records (TCP payloads and headers alike)
        start = rng.randrange(len(out))
        length = min(rng.randrange(1, 120), len(out) - start)
        out[start : start + length] = bytes(rng.randrange(256) for _ in range(length))
        return bytes(out)
    # garbage appended after the last record
    return bytes(out) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))


def capture_layer(data: bytes, target: int) -> tuple[int, int, int]:
    """Plans, reads and audits a capture the way the library's users do, each chunk on its own as the audit's
    tasks read them; returns (records, capture errors, TCP segments on port 1883)."""
    try:
        chunks = plan_chunks(opener(data), target, name="mutant")
    except CaptureError:
        return 0, 1, 0
    records = []
    errors = 0
    for chunk in chunks:
        reader = read_chunk(opener(data), chunk, read_size=257)
        try:
            records.extend(reader)
        except CaptureError as error:
            assert error.source == "mutant" and 0 <= error.offset <= len(data)
            errors += 1
        assert all(0 <= c.offset < len(data) for c in reader.corrupt)
    mqtt = sum(1 for _index, segment in segments(records) if 1883 in (segment[2], segment[4]))
    for flow in audit_records(records, detect=True):
        assert flow.total.reconciles
        judge_flow(Flow("mutant", "f", "c", "s", flow.events, []), AuditOptions().judge_config)
    return len(records), errors, mqtt


def pipeline_without_spark(path: Path, out_dir: Path, target: int) -> dict[str, Any]:
    """The audit's stages on one capture, without Spark, as the local engine runs them: chunks planned, read,
    the runs ordered by flow (as Spark's shuffle does) and judged, writing their Parquet tables
    (:func:`local.judge`), and every broker replayed (:func:`local.replay`). Returns the notes and the judged
    rows."""
    options = AuditOptions(out_dir=str(out_dir))
    try:
        chunks = plan_chunks(str(path), target, name=path.name)
    except CaptureError:
        return {"notes": [], "judged": []}
    judged_table = local.judge(chunk_rows([(path, chunks)], options.out_dir), options)
    local.replay(judged_table, options)
    judged = judged_table.to_pylist()
    notes = [json.loads(row["note"]) for row in judged if row["note"] is not None]
    return {"notes": notes, "judged": judged}


def mutants() -> Iterator[tuple[str, bytes]]:
    rng = random.Random(SEED)
    sources = {Path(name).name: capture(name).read_bytes() for name in REAL} | written_captures()
    for name, data in sorted(sources.items()):
        for number in range(MUTANTS):
            yield f"{name}#{number}", mutate(data, rng)


@pytest.mark.captures
def test_the_real_and_written_captures_are_found() -> None:
    assert all(capture(name).stat().st_size > 0 for name in REAL)
    assert len(list(mutants())) == MUTANTS * (len(REAL) + 3)


@pytest.mark.captures
def test_every_mutant_gives_records_or_capture_errors_and_the_audit_stages_never_fail(tmp_path: Path) -> None:
    """Each mutant through the capture layer (in chunks of a random size), then through the audit's stages
    without Spark (a mutant in three): anything but a CaptureError fails the test, naming the mutant."""
    rng = random.Random(SEED + 1)
    outcomes = {"records": 0, "errors": 0, "corrupt": 0}
    for number, (name, data) in enumerate(mutants()):
        try:
            target = rng.choice([1, 64, 1000, 1 << 20])
            records, errors, mqtt = capture_layer(data, target)
            outcomes["records"] += records
            outcomes["errors"] += errors
            if number % 3 == 0:
                path = tmp_path / f"m{number}.pcap"
                path.write_bytes(data)
                audited = pipeline_without_spark(path, tmp_path / f"out{number}", target)
                # The reading tasks hand on every segment read before an error, as the capture layer reads them.
                assert sum(note.get("segments", 0) for note in audited["notes"]) == mqtt
                for note in audited["notes"]:
                    outcomes["corrupt"] += len(note.get("corrupt", []))
                    if "error" in note:
                        assert note["error"]["reason"] and 0 <= note["error"]["offset"] <= len(data)
        except Exception as exc:  # the invariant: nothing but a CaptureError, which is caught above
            raise AssertionError(f"mutant {name} raised {type(exc).__name__}: {exc}") from exc
    # The mutants exercised both outcomes: records read, and capture errors reported.
    assert outcomes["records"] > 1000 and outcomes["errors"] > 20 and outcomes["corrupt"] > 0, outcomes


@pytest.mark.captures
def test_a_few_mutants_through_the_whole_command_never_end_in_an_internal_error(
    spark: SparkSession, tmp_path: Path
) -> None:
    rng = random.Random(SEED + 2)
    chosen = [data for _name, data in mutants()]
    folder = tmp_path / "mutants"
    folder.mkdir()
    for number in range(4):
        (folder / f"mutant-{number}.pcap").write_bytes(chosen[rng.randrange(len(chosen))])
    done = run_mqttaudit("audit", str(folder), "--out", str(tmp_path / "out"), "--master", "local[2]")
    assert done.returncode in (0, 1, 4), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


# -- issue 28 items 8, 9, 11: one 4-tuple, two connections; conflicting retransmissions; a flood of malformed bytes --

#: SUBSCRIBE id 1 with an empty Topic Filter at QoS 0: the client breaks [MQTT-4.7.3-1].
EMPTY_FILTER_SUBSCRIBE = bytes.fromhex("82 05 00 01 00 00 00")


def rebooted_device() -> list[tuple[int, bytes]]:
    """A device connects, closes, reboots and connects again from the same port with the same initial sequence
    numbers (and so does the broker): the second connection sends a SUBSCRIBE with an empty Topic Filter."""
    packets: list[bytes] = []
    for extra in (b"", EMPTY_FILTER_SUBSCRIBE):
        session = writer.TcpSession(("10.0.0.1", 50000), ("10.0.0.2", 1883), client_isn=1000, server_isn=5000)
        packets += session.handshake()
        packets += [session.send(0, encode(Connect(client_id="device"))), session.send(1, encode(Connack()))]
        packets += [session.send(0, extra)] if extra else []
        packets += [session.fin(0), session.fin(1)]
    return [(EPOCH + index * 1_000_000, packet) for index, packet in enumerate(packets)]


def conflicting_retransmission(*, at_header: bool = False) -> list[tuple[int, bytes]]:
    """A client's PUBLISH to ``a/b`` whose byte ``b`` was first captured as ``#`` in a one-byte segment sent ahead
    of it (or, ``at_header``, whose Remaining Length byte was first captured as another value), then a PUBLISH to
    ``c``; the server closes."""
    session = writer.TcpSession(("10.0.0.1", 50001), ("10.0.0.2", 1883))
    publish = encode(Publish(topic="a/b", payload=b"x"))
    at, byte = (1, b"\x07") if at_header else (publish.index(b"a/b") + 2, b"#")
    packets = [
        *session.handshake(),
        session.send(0, encode(Connect(client_id="c"))),
        session.send(1, encode(Connack())),
    ]
    packets += [session.segment(0, byte, at=at), session.send(0, publish)]
    packets += [session.send(0, encode(Publish(topic="c", payload=b"y"))), session.fin(1), session.fin(0)]
    return [(EPOCH + index * 1_000_000, packet) for index, packet in enumerate(packets)]


def zeros_after_connect(zeros: int, *, segment: int = 60_000) -> list[tuple[int, bytes]]:
    """A CONNECT, then ``zeros`` zero bytes from the client (``00 00`` frames a reserved type 0 packet each)."""
    session = writer.TcpSession(("10.0.0.1", 50002), ("10.0.0.2", 1883))
    packets = [*session.handshake(), session.send(0, encode(Connect(client_id="z")))]
    packets += [session.send(0, bytes(min(segment, zeros - at))) for at in range(0, zeros, segment)]
    packets += [session.fin(0), session.fin(1)]
    return [(EPOCH + index * 1_000, packet) for index, packet in enumerate(packets)]


def audited(timed: list[tuple[int, bytes]]) -> list[Any]:
    return audit_records(read_records(opener(writer.pcap_bytes(timed, linktype=RAW))))


def test_a_device_that_reboots_onto_the_same_ports_and_sequence_numbers_is_a_second_connection() -> None:
    first, second = audited(rebooted_device())
    assert [f.frame.raw for f in first.frames][2:] == []
    assert second.frames[-1].frame.raw == EMPTY_FILTER_SUBSCRIBE
    assert [v.rule for v in second.frames[-1].frame.violations] == ["MQTT-4.7.3-1"]
    assert first.first_time < second.first_time and all(f.started_with_syn == (True, True) for f in (first, second))
    assert all(count.reconciles for f in (first, second) for count in f.counts)


def test_a_packet_a_conflicting_retransmission_contradicts_is_withheld_from_judgement() -> None:
    (flow,) = audited(conflicting_retransmission())
    start = len(encode(Connect(client_id="c")))  # the PUBLISH's stream offset; its 'b' is 6 bytes in
    assert [(c.side, c.offset, c.length) for c in flow.conflicts] == [(0, start + 6, 1)]
    (withheld,) = flow.withheld
    assert withheld.frame.raw == bytes.fromhex("30 06 00 03 61 2f 23 78")  # the first copy: a/#
    assert all(b"a/#" not in f.frame.raw for f in flow.frames)  # nothing judged rests on it
    assert [f.frame.raw for f in flow.frames][-1] == encode(Publish(topic="c", payload=b"y"))
    (hole,) = flow.unassessable
    assert (hole.offset, hole.length) == (start, 8) and hole.reason.startswith("conflicting retransmission: ")
    assert flow.counts[0].reconciles and flow.counts[0].unassessable == 8


def test_a_conflict_in_a_fixed_header_puts_the_framing_of_the_rest_of_that_side_in_doubt() -> None:
    (flow,) = audited(conflicting_retransmission(at_header=True))
    client_frames = [f for f in flow.frames if f.side == flow.client]
    assert [f.frame.packet.packet_type.name for f in client_frames if f.frame.packet] == ["CONNECT"]
    # Every client byte after the CONNECT was framed from the first copy's length: all of it is withheld.
    connect = len(encode(Connect(client_id="c")))
    assert sum(f.frame.length for f in flow.withheld) == flow.counts[0].stream - connect == flow.counts[0].unassessable
    assert flow.counts[0].reconciles


def test_malformed_packets_are_kept_up_to_the_cap_and_the_rest_of_the_stream_is_one_counted_record() -> None:
    cap = DEFAULT_MAX_MALFORMED
    (flow,) = audited(zeros_after_connect(1 << 20))
    malformed = [f for f in flow.frames if f.frame.violations]
    assert len(malformed) == cap and all(f.frame.raw == b"\x00\x00" for f in malformed)
    (rest,) = flow.unassessable
    assert (rest.offset, rest.length) == (15 + 2 * cap, (1 << 20) - 2 * cap)
    assert rest.reason == malformed_cap_reason(cap) and flow.capped_bytes == rest.length
    assert flow.counts[0].reconciles and flow.counts[0].malformed == 2 * cap
    # The judge hears of the rest once, as bytes it cannot read.
    assert sum(1 for event in flow.events if isinstance(event, Lost)) == 1


def test_two_connections_of_one_flow_that_start_at_the_same_time_keep_ids_of_their_own() -> None:
    flows = audited([(EPOCH, packet) for _time, packet in rebooted_device()])  # one timestamp for every record
    assert [flow.ordinal for flow in flows] == [0, 1]
    assert [connection_flow("t.pcap", flow).flow for flow in flows] == [
        f"10.0.0.1:50000|10.0.0.2:1883@{EPOCH}",
        f"10.0.0.1:50000|10.0.0.2:1883@{EPOCH}#1",
    ]


def test_mqtt_5_packets_of_a_connection_without_connect_never_count_toward_the_cap_of_malformed_packets() -> None:
    """No CONNECT names the version, so the packets are read as MQTT 3.1.1: a 5.0 PUBACK with a Reason Code
    breaks 3.1.1's Remaining Length of 2, yet is a well-formed 5.0 packet. The connection is framed only, whole."""
    session = writer.TcpSession(("10.0.0.1", 50003), ("10.0.0.2", 1883))
    packets = session.handshake()
    count = 3 * DEFAULT_MAX_MALFORMED // 2
    for packet_id in range(1, count + 1):
        packets.append(session.send(0, encode(Publish(topic="t", payload=b"p", qos=1, packet_id=packet_id))))
        packets.append(session.send(1, bytes([0x40, 3, 0, packet_id, 0x10])))  # PUBACK: No matching subscribers
    packets += [session.fin(0), session.fin(1)]
    (flow,) = audited([(EPOCH + index * 1_000, packet) for index, packet in enumerate(packets)])
    assert flow.version == "unknown, not 3.1.1" and flow.capped_bytes == 0
    assert len(flow.frames) == 2 * count and not flow.unassessable
