"""The sliced routing replay on the pipeline's path (:mod:`mqttaudit.pipeline.slicing`, ``replay="sliced"``): the
judging stage's heads and pieces, merged in time order and judged slice by slice in one task per broker, give the
tables the shard replay gives (:func:`~mqttaudit.pipeline.replay.replay_batches` over whole transcripts): the same
``deliveries``, ``routing_findings`` and ``not_assessable`` rows, on every routing scenario of the judge's tests
with pieces and slices far smaller than the traffic, and on Spark on recordings with routing findings."""

from __future__ import annotations

import dataclasses
import pickle
import tempfile
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.transcript import Transcript
from mqttaudit.pipeline.conversations import Columns
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.replay import replay_batches
from mqttaudit.pipeline.slicing import connection_pieces, replay_sliced
from mqttaudit.pipeline.task_files import PieceWriter

from .talk import transcribe
from .test_judge_stream import CONFIG, SCENARIOS, V5, busy_broker, offline_scenarios, scenarios

BROKER = "10.0.0.1:1883"
TABLES = ("deliveries", "routing_findings", "not_assessable")


def _rows(columns: Columns) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*columns.data.values(), strict=True))


def shard_tables(transcripts: Mapping[str, Transcript], config: JudgeConfig) -> dict[str, Counter[tuple[Any, ...]]]:
    """The tables of today's replay of one broker, every session judged (as the shards together judge them)."""
    blobs = [(name, pickle.dumps(transcript)) for name, transcript in transcripts.items()]
    captures = {name: "capture.pcap" for name in transcripts}
    batches, findings, undecided = replay_batches(BROKER, blobs, config, captures=captures)
    deliveries: Counter[tuple[Any, ...]] = Counter()
    for batch in batches:
        deliveries += _rows(batch)
    return {"deliveries": deliveries, "routing_findings": _rows(findings), "not_assessable": _rows(undecided)}


def sliced_tables(
    transcripts: Mapping[str, Transcript], config: JudgeConfig, folder: Path, slice_bytes: int, piece_bytes: int
) -> dict[str, Counter[tuple[Any, ...]]]:
    """The tables the sliced replay task writes, from the heads and pieces the judging stage writes."""
    for table in (*TABLES, "_transcripts"):
        (folder / table).mkdir(parents=True)
    writer = PieceWriter(str(folder), "judging")
    rows = []
    for transcript in transcripts.values():
        head, *pieces = connection_pieces(transcript, piece_bytes)
        rows.append(writer.add_transcript(head, b""))
        for piece in pieces:
            writer.add_transcript(piece, b"")
    writer.close()
    names = list(transcripts)
    table = pa.table(
        {
            "server": [BROKER] * len(names),
            "flow": names,
            "capture": ["capture.pcap"] * len(names),
            "transcripts": [writer.name] * len(names),
            "transcript_row": rows,
        }
    )
    replayed = replay_sliced(table, AuditOptions(out_dir=str(folder), slice_bytes=slice_bytes), config).to_pylist()
    tables = {}
    for name in TABLES:
        files = sorted((folder / name).glob("*.parquet"))
        read = [pq.read_table(path).to_pylist() for path in files]
        tables[name] = Counter(tuple(row.values()) for rows_ in read for row in rows_)
    assert replayed[0]["deliveries"] == sum(tables["deliveries"].values())
    assert replayed[0]["routing_findings"] == sum(tables["routing_findings"].values())
    return tables


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_sliced_replay_task_writes_the_shard_replay_s_tables_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Any], config: JudgeConfig, tmp_path: Path
) -> None:
    """Slices of one message and pieces of one event each: every boundary the traffic has is a slice's."""
    transcripts = transcribe(conversation, config)
    whole = shard_tables(transcripts, config)
    assert sliced_tables(transcripts, config, tmp_path / "small", 1, 1) == whole
    assert sliced_tables(transcripts, config, tmp_path / "large", 1 << 30, 1 << 30) == whole


@settings(max_examples=60, deadline=None)
@given(st.one_of(scenarios(), scenarios(overlapping=True), offline_scenarios()), st.sampled_from((0.5, 3.0, 60.0)))
def test_the_sliced_replay_task_writes_the_shard_replay_s_tables_on_generated_scenarios(
    conversation: dict[str, Any], late: float
) -> None:
    config = dataclasses.replace(V5, late_window=late)
    transcripts = transcribe(conversation, config)
    with tempfile.TemporaryDirectory() as folder:
        assert sliced_tables(transcripts, config, Path(folder), 40, 200) == shard_tables(transcripts, config)


def test_a_busy_broker_s_traffic_in_many_pieces_and_slices_gives_the_same_tables(tmp_path: Path) -> None:
    transcripts = busy_broker(600)
    whole = shard_tables(transcripts, CONFIG)
    assert sum(whole["deliveries"].values()) == 600
    assert sliced_tables(transcripts, CONFIG, tmp_path, 500, 2000) == whole
    assert len(list((tmp_path / "_transcripts").iterdir())) == 1
