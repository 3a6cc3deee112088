"""Stage 3, the routing replay: :func:`replay_group` (``groupBy(server, shard).applyInArrow``) replays one broker
endpoint for the sessions of one shard of its ClientIds (shards run in parallel; each sees every message) with
:mod:`.replay`'s model; it writes the deliveries and routing findings tables.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import pyarrow as pa

from .conversations import Columns
from .options import AuditOptions
from .replay import replay_batches
from .sealed import unseal
from .tables import REPLAYED_SCHEMA
from .task_files import TableWriter, columns_table, part_name, partition, transcript_blobs
from .worker_gc import tune_gc


def replay_group(table: pa.Table, options: AuditOptions) -> pa.Table:
    """One shard of one broker: every connection's transcript (where its judging task left it), whole for the flows
    of the shard's ClientIds (``own``), as message sources for the others. Writes its deliveries and routing
    findings; returns their counts and what it could not decide."""
    tune_gc()
    broker = table.column("server")[0].as_py()
    shard = table.column("shard")[0].as_py()
    flows = table.column("flow").to_pylist()
    mine = table.column("own").to_pylist()
    own = [flow for flow, owned in zip(flows, mine, strict=True) if owned]
    files = table.column("transcripts").to_pylist()
    rows = table.column("transcript_row").to_pylist()
    wanted = [
        (name, row, "transcript" if owned else "sources") for name, row, owned in zip(files, rows, mine, strict=True)
    ]
    # Each transcript's bytes are copied out of the mapped file (or the ranged read) only while it is unpickled.
    key = options.seal_key
    blobs = (unseal(key, blob.to_pybytes()) for blob in transcript_blobs(options.out_dir, wanted))
    captures = dict(zip(flows, table.column("capture").to_pylist(), strict=True))
    batches, findings, undecided = replay_batches(
        broker, zip(flows, blobs, strict=True), options.judge_config, own, captures=captures
    )
    writers = replay_writers(broker, shard, options)
    for batch in batches:
        writers["deliveries"].add(batch)
    writers["routing_findings"].add(findings)
    writers["not_assessable"].add(undecided)
    return replayed_row(broker, shard, writers, first_reasons(undecided))


#: The tables a routing replay task writes.
REPLAY_TABLES = ("deliveries", "routing_findings", "not_assessable")


def replay_writers(
    broker: str, shard: int, options: AuditOptions, writer: type[TableWriter] = TableWriter
) -> dict[str, TableWriter]:
    """A writer of each of :data:`REPLAY_TABLES` for the replay task of ``broker``'s ``shard``."""
    part = part_name(hashlib.blake2b(broker.encode(), digest_size=6).hexdigest(), shard)
    return {name: writer(options.out_dir, name, f"{part}-routing", options.published) for name in REPLAY_TABLES}


def replayed_row(broker: str, shard: int, writers: dict[str, TableWriter], reasons: dict[str, str]) -> pa.Table:
    """Closes a replay task's ``writers`` and returns its row (:data:`~.tables.REPLAYED_SCHEMA`): what it wrote, and
    the first reason of each rule it could not decide (``reasons``)."""
    for table_writer in writers.values():
        table_writer.close()
    row = Columns(tuple(REPLAYED_SCHEMA.names))
    row.add(
        broker=broker,
        shard=shard,
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


def broker_replayer(options: AuditOptions) -> Callable[[pa.Table], pa.Table]:
    """:func:`replay_group` bound to ``options``, with the type hints Spark reads to pick the grouped Arrow API."""

    def run(table: pa.Table) -> pa.Table:
        return replay_group(table, options)

    return run
