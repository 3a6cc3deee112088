"""Stage 3, the routing replay's output: what a broker's replay task (:func:`~.slicing.replay_sliced`, one task per
broker endpoint and shard, ``groupBy(server, shard).applyInArrow``) writes its deliveries, routing findings and
not-assessable rows with, and the row it hands back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from .conversations import Columns
from .options import AuditOptions
from .tables import REPLAYED_SCHEMA
from .task_files import TableWriter, columns_table, part_name, partition

#: The tables a routing replay task writes.
REPLAY_TABLES = ("deliveries", "routing_findings", "not_assessable")
#: The column of a replay task's rows that names its shard of the broker's connections.
SHARD = "shard"


def replay_writers(
    broker: str, options: AuditOptions, writer: type[TableWriter] = TableWriter, shard: int = 0
) -> dict[str, TableWriter]:
    """A writer of each of :data:`REPLAY_TABLES` for the replay task of ``broker`` (and its ``shard``)."""
    name = broker if shard == 0 else f"{broker}#{shard}"
    part = part_name(hashlib.blake2b(name.encode(), digest_size=6).hexdigest())
    return {name: writer(options.out_dir, name, f"{part}-routing", options.published) for name in REPLAY_TABLES}


def replayed_row(broker: str, writers: dict[str, TableWriter], reasons: dict[str, str]) -> pa.Table:
    """Closes a replay task's ``writers`` and returns its row (:data:`~.tables.REPLAYED_SCHEMA`): what it wrote, and
    the first reason of each rule it could not decide (``reasons``)."""
    for table_writer in writers.values():
        table_writer.close()
    row = Columns(tuple(REPLAYED_SCHEMA.names))
    row.add(
        broker=broker,
        partition=partition(),
        deliveries=writers["deliveries"].rows,
        routing_findings=writers["routing_findings"].rows,
        not_assessable=json.dumps(reasons, sort_keys=True),
    )
    return columns_table([row], REPLAYED_SCHEMA)


def rule_reasons(rows: Columns) -> dict[str, str]:
    """Rule -> one reason of the ``not_assessable`` rows: the least in text order, so that a broker's row names the
    same reasons however its replay was split (in slices, in shards side by side)."""
    reasons: dict[str, str] = {}
    merge_reasons(reasons, zip(rows.data["rule"], rows.data["reason"], strict=True))
    return reasons


def merge_reasons(reasons: dict[str, str], more: Iterable[tuple[str, str]]) -> None:
    """Adds ``more`` (rule, reason) to ``reasons`` (rule -> reason), keeping per rule the least reason in text
    order."""
    for rule, reason in more:
        if rule not in reasons or reason < reasons[rule]:
            reasons[rule] = reason


def broker_replays(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``summary.json``'s ``routing_replays``: one row per broker from the rows of its replay tasks (one per shard,
    see :func:`~mqttaudit.judge.stream.shard_connections`): what they wrote, added up; the reasons of every task
    (:func:`merge_reasons`); the first task's partition; how many tasks."""
    merged: dict[str, dict[str, Any]] = {}
    reasons: dict[str, dict[str, str]] = {}
    for row in sorted(rows, key=lambda row: (row["broker"], row["partition"])):
        broker = row["broker"]
        if broker not in merged:
            merged[broker] = {**row, "deliveries": 0, "routing_findings": 0, "tasks": 0}
            reasons[broker] = {}
        merged[broker]["deliveries"] += row["deliveries"]
        merged[broker]["routing_findings"] += row["routing_findings"]
        merged[broker]["tasks"] += 1
        merge_reasons(reasons[broker], json.loads(row["not_assessable"]).items())
    for broker, row in merged.items():
        row["not_assessable"] = json.dumps(reasons[broker], sort_keys=True)
    return list(merged.values())
