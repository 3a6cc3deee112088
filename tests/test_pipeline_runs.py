"""What the audit's stages hand each other besides Spark rows (pure, no Spark): the reading stage's runs of segments
(every segment of a chunk reaches the judging stage once, with its flow, capture and record, in its flow's order,
however the flows interleave and however long they are), and the judging stage's transcript files."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from mqttaudit.capture import Segment
from mqttaudit.pipeline import segments as reading
from mqttaudit.pipeline.segments import Runs, decode_run
from mqttaudit.pipeline.tables import SEGMENT_SCHEMA
from mqttaudit.pipeline.task_files import TRANSCRIPTS_DIR, TranscriptFiles, TranscriptWriter, transcript_blobs

CLIENT_A = (b"\x0a\x00\x00\x02", 50000)
CLIENT_B = (b"\x0a\x00\x00\x03", 50001)
BROKER = (b"\x0a\x00\x00\x01", 1883)


def segment(time_ns: int, src: tuple[bytes, int], dst: tuple[bytes, int], seq: int, payload: bytes) -> Segment:
    return (time_ns, src[0], src[1], dst[0], dst[1], seq, 7, 0x18, memoryview(payload))


def add(runs: Runs, flow: str, record: int, seg: Segment) -> None:
    """One segment, as the reading task's loop hands it on."""
    time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload = seg
    runs.extend([(flow, record, time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, bytes(payload))])


def interleaved(count: int, seed: int) -> list[tuple[str, int, Segment]]:
    """``count`` segments of two connections in both directions, interleaved at random (flow, record, segment)."""
    rng = random.Random(seed)
    out = []
    for record in range(count):
        client = rng.choice((CLIENT_A, CLIENT_B))
        flow = f"{client[1]}|1883"
        src, dst = (client, BROKER) if rng.random() < 0.5 else (BROKER, client)
        out.append((flow, record, segment(1_000 + record, src, dst, record * 10, bytes([record % 256]) * (record % 5))))
    return out


def handed_on(batches: list[pa.RecordBatch]) -> dict[str, list[tuple[object, ...]]]:
    """What the judging stage rebuilds from the runs: per flow, (capture, record, segment fields) in run order."""
    rebuilt: dict[str, list[tuple[object, ...]]] = {}
    for batch in batches:
        assert batch.schema == SEGMENT_SCHEMA
        for flow, capture, first, blob in zip(
            batch.column("flow").to_pylist(),
            batch.column("capture").to_pylist(),
            batch.column("first_record").to_pylist(),
            batch.column("segments"),
            strict=True,
        ):
            run = decode_run(capture, blob.as_buffer())
            rows = run.to_pylist()
            assert rows[0]["record"] == first
            rebuilt.setdefault(flow, []).extend(
                (
                    row["capture"],
                    row["record"],
                    row["time_ns"],
                    row["src_ip"],
                    row["src_port"],
                    row["dst_ip"],
                    row["dst_port"],
                    row["seq"],
                    row["ack"],
                    row["flags"],
                    row["payload"],
                )
                for row in rows
            )
    return rebuilt


def expected(segments: list[tuple[str, int, Segment]], capture: str) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    for flow, record, (time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload) in segments:
        out.setdefault(flow, []).append(
            (capture, record, time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, bytes(payload))
        )
    return out


@pytest.mark.parametrize(("count", "run_segments", "batch_rows"), [(1, 16384, 8192), (500, 16384, 64), (500, 7, 64)])
def test_every_segment_reaches_its_flow_once_in_order(
    count: int, run_segments: int, batch_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "RUN_SEGMENTS", run_segments)
    monkeypatch.setattr(reading, "BATCH_ROWS", batch_rows)
    segments = interleaved(count, seed=count + run_segments)
    runs = Runs("cap.pcap")
    for flow, record, seg in segments:
        add(runs, flow, record, seg)
    batches = list(runs.finish())
    assert handed_on(batches) == expected(segments, "cap.pcap")


def test_a_long_flow_is_cut_into_runs_of_bounded_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "RUN_SEGMENTS", 10)
    runs = Runs("cap.pcap")
    for record in range(95):
        add(runs, "a|b", record, segment(record, CLIENT_A, BROKER, record, b"x"))
    batches = list(runs.finish())
    lengths = [decode_run("cap.pcap", blob.as_buffer()).num_rows for b in batches for blob in b.column("segments")]
    assert lengths == [10] * 9 + [5]


def test_batches_are_cut_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "RUN_SEGMENTS", 1)
    monkeypatch.setattr(reading, "BATCH_BYTES", 4096)
    runs = Runs("cap.pcap")
    for record in range(40):
        add(runs, "a|b", record, segment(record, CLIENT_A, BROKER, record, bytes(1000)))
    batches = list(runs.finish())
    assert len(batches) > 1
    assert sum(b.num_rows for b in batches) == 40
    assert all(sum(len(blob.as_py()) for blob in b.column("segments")) < 4096 + 2000 for b in batches)


def test_a_chunk_without_segments_hands_on_nothing() -> None:
    assert list(Runs("cap.pcap").finish()) == []


def test_a_flow_of_large_segments_is_cut_into_runs_of_bounded_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "RUN_BYTES", 10_000)
    runs = Runs("cap.pcap")
    for record in range(7):
        add(runs, "a|b", record, segment(record, CLIENT_A, BROKER, record, bytes(4_000)))
    add(runs, "a|b", 7, segment(7, CLIENT_A, BROKER, 7, bytes(30_000)))  # above the bound alone: a run of its own
    add(runs, "a|b", 8, segment(8, CLIENT_A, BROKER, 8, b"x"))
    batches = list(runs.finish())
    records = [
        decode_run("cap.pcap", blob.as_buffer()).column("record").to_pylist()
        for batch in batches
        for blob in batch.column("segments")
    ]
    assert records == [[0, 1], [2, 3], [4, 5], [6], [7], [8]]


def test_transcripts_are_handed_to_the_replay_through_a_file_published_when_the_task_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TranscriptWriter, "BATCH", 2)
    (tmp_path / TRANSCRIPTS_DIR).mkdir()
    writer = TranscriptWriter(str(tmp_path), "00003")
    written = [bytes([n]) * n for n in range(5)]
    assert [writer.add_transcript(blob) for blob in written] == [0, 1, 2, 3, 4]
    assert all(p.name.startswith(".") for p in (tmp_path / TRANSCRIPTS_DIR).iterdir())  # hidden until done
    writer.close()
    # Asked in any order: the rows come back in the order asked (batches of 2 rows, the last 1).
    order = [4, 0, 3, 1, 2]
    wanted = [(writer.name, row, "transcript") for row in order]
    blobs = [blob.to_pybytes() for blob in transcript_blobs(str(tmp_path), wanted)]
    assert blobs == [written[row] for row in order]
    files = TranscriptFiles(str(tmp_path))  # the sliced replay's reader, the file kept open: the same blobs
    assert [files.blob(*each) for each in wanted] == blobs
    files.close()
    assert sorted(p.name for p in (tmp_path / TRANSCRIPTS_DIR).iterdir()) == [writer.name]


def test_a_task_without_connections_leaves_no_transcript_file(tmp_path: Path) -> None:
    (tmp_path / TRANSCRIPTS_DIR).mkdir()
    TranscriptWriter(str(tmp_path), "00000").close()
    assert list((tmp_path / TRANSCRIPTS_DIR).iterdir()) == []
