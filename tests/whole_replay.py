"""The reference the audit's routing replay is held against: the whole model of each broker
(:func:`mqttaudit.pipeline.replay.replay_batches`: every connection's whole transcript at once), run by the local
engine in place of the sliced replay task, so that an audit's tables can be compared with the whole model's on the
same captures (the same reading, judging, port detection and tables; only the replay differs)."""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqttaudit.pipeline import local
from mqttaudit.pipeline.audit import AuditResult, run_audit
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.replay import replay_batches
from mqttaudit.pipeline.replaying import replay_writers, replayed_row, rule_reasons
from mqttaudit.pipeline.slicing import Pieces, broker_rows
from mqttaudit.pipeline.tables import TABLES
from mqttaudit.pipeline.task_files import TranscriptFiles


def whole_replayer(options: AuditOptions) -> Callable[[pa.Table], pa.Table]:
    """A replay task of one broker (the rows :func:`~mqttaudit.pipeline.slicing.replay_sliced` is handed) that
    rebuilds every connection's whole transcript from its head and pieces and replays them all at once."""

    def run(table: pa.Table) -> pa.Table:
        broker, captures = broker_rows(table)
        files = TranscriptFiles(options.out_dir)
        try:
            whole = Pieces(table, options, files).whole()
        finally:
            files.close()
        blobs = [(flow, pickle.dumps(transcript)) for flow, transcript in whole.items()]
        batches, findings, undecided = replay_batches(broker, blobs, options.judge_config, captures=captures)
        writers = replay_writers(broker, options)
        for batch in batches:
            writers["deliveries"].add(batch)
        writers["routing_findings"].add(findings)
        writers["not_assessable"].add(undecided)
        return replayed_row(broker, writers, rule_reasons(undecided))

    return run


def whole_model_audit(
    monkeypatch: pytest.MonkeyPatch, paths: Sequence[Path | str], out: Path, **options: Any
) -> AuditResult:
    """``run_audit`` of ``paths`` on the local engine with every broker replayed by the whole model."""
    with monkeypatch.context() as patched:
        patched.setattr(local, "sliced_replayer", whole_replayer)
        return run_audit([str(path) for path in paths], out, engine="local", **options)


def audited_tables(out: Path, names: Sequence[str] = TABLES) -> dict[str, Counter[str]]:
    """Each table's rows of an audit's output (multisets: the order tasks write them in is not the result)."""
    return {
        name: Counter(json.dumps(row, sort_keys=True, default=str) for row in pq.read_table(out / name).to_pylist())
        for name in names
    }
