"""Stage 3, the routing replay's output: what a broker's replay task (:func:`~.slicing.replay_sliced`, one task per
broker endpoint, ``groupBy(server).applyInArrow``) writes its deliveries, routing findings and not-assessable rows
with, and the row it hands back.
"""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa

from .conversations import Columns
from .options import AuditOptions
from .tables import REPLAYED_SCHEMA
from .task_files import TableWriter, columns_table, part_name, partition

#: The tables a routing replay task writes.
REPLAY_TABLES = ("deliveries", "routing_findings", "not_assessable")


def replay_writers(
    broker: str, options: AuditOptions, writer: type[TableWriter] = TableWriter
) -> dict[str, TableWriter]:
    """A writer of each of :data:`REPLAY_TABLES` for the replay task of ``broker``."""
    part = part_name(hashlib.blake2b(broker.encode(), digest_size=6).hexdigest())
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


def first_reasons(rows: Columns) -> dict[str, str]:
    """Rule -> the first reason of the ``not_assessable`` rows."""
    reasons: dict[str, str] = {}
    for rule, reason in zip(rows.data["rule"], rows.data["reason"], strict=True):
        reasons.setdefault(rule, reason)
    return reasons
