"""The local engine: a small audit in one process, without Spark (which costs an audit of a few packets some 20
seconds: the JVM, a job per stage, a query per report part).

The driver runs the stage functions the Spark engine's Python workers run (:mod:`.segments`, :mod:`.judging`,
:mod:`.slicing`, :mod:`.detection`'s first pass) over Arrow tables, in the order Spark would hand them their rows,
writing the same Parquet tables through the same task-file code; the summary and the report data are the same
parts, added up over the rows of the (small) tables (:func:`~.summary.local_audit_summary`,
:func:`~.report_data.local_report_data`). The routing replay runs per broker, slice by slice, as on Spark.

Nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mqttaudit import locations
from mqttaudit.report import AuditReportData

from . import tables
from .detection import detection_summary, local_port_proofs
from .engines import LOCAL, Job
from .judging import flow_judge
from .options import AuditOptions
from .replaying import broker_replays
from .report_data import local_report_data
from .rows import rows_of
from .segments import read_segments
from .slicing import replay_groups, sliced_replayer
from .summary import local_audit_summary
from .tables import CHUNK_SCHEMA, JUDGED_SCHEMA, SEGMENT_SCHEMA, TABLES
from .task_files import ensure_readable

#: The order Spark's judging stage sorts the runs of segments in (``sortWithinPartitions``), after the reading
#: tasks' notes (no flow: nulls first).
FLOW_ORDER = [(name, "ascending") for name in tables.FLOW_ORDER]
#: The columns of a broker's connections the replay reads (as the Spark engine selects them).
REPLAY_COLUMNS = ("server", "flow", "capture", "transcripts", "transcript_row")


class LocalEngine:
    """Runs an audit's stages in this process (see the module)."""

    name = LOCAL
    #: Cores the planning divides the captures between: one process.
    parallelism = 1
    master = None

    def accumulator(self) -> None:
        """Which files the tasks published needs no accumulator: every task runs once, here."""
        return None

    def port_proofs(self, chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes]) -> dict[int, str]:
        return local_port_proofs(chunk_rows, tls_randoms)

    @contextmanager
    def watching(self, progress: Callable[[str], None], tasks: Callable[[int, int], None] | None) -> Iterator[None]:
        """No task progress to watch: the stages say what they do through ``progress``."""
        yield

    def run(self, job: Job) -> dict[str, Any]:
        """The stages of :func:`~.audit._run`, in this process; returns the summary."""
        options, progress = job.options, job.progress
        progress(f"reading {len(job.chunk_rows)} chunk(s), then reassembling and judging connections (in this process)")
        judged = judge(job.chunk_rows, options)
        progress("replaying routing per broker")
        replayed = replay(judged, options)
        for table in TABLES:
            ensure_readable(locations.join(job.out_dir, table), table)
        progress("adding up the summary")
        summary, notes, by_port = local_audit_summary(judged, job.out_dir, options.budgets)
        summary["detection"] = detection_summary(options, by_port, notes)
        summary["routing_replays"] = replayed
        return summary

    def report_data(self, job: Job, summary: dict[str, Any]) -> AuditReportData:
        return local_report_data(job.out_dir, summary, samples=job.samples, rows=job.rows)


def judge(chunk_rows: list[dict[str, Any]], options: AuditOptions) -> pa.Table:
    """The reading and judging stages over the chunks (:data:`~.tables.CHUNK_SCHEMA` rows): the judged
    connections and the reading tasks' notes (:data:`~.tables.JUDGED_SCHEMA`); the tables written."""
    return _table(flow_judge(options)(iter(ordered_runs(chunk_rows, options).to_batches())), JUDGED_SCHEMA)


def ordered_runs(chunk_rows: list[dict[str, Any]], options: AuditOptions) -> pa.Table:
    """The reading stage over the chunks (:data:`~.tables.CHUNK_SCHEMA` rows): its segments
    (:data:`~.tables.SEGMENT_SCHEMA`) in the order the judging stage reads them, the reading tasks' notes first,
    then the runs ordered by flow, file and record (:data:`FLOW_ORDER`), as Spark's shuffle and sort hand them."""
    chunks = pa.Table.from_pylist(chunk_rows, schema=CHUNK_SCHEMA)
    segments = _table(read_segments(iter(chunks.to_batches()), options), SEGMENT_SCHEMA)
    flows = segments.column("flow")
    notes, runs = segments.filter(pc.is_null(flows)), segments.filter(pc.is_valid(flows)).sort_by(FLOW_ORDER)
    return pa.concat_tables([notes, runs])  # as Spark sorts them: nulls first


def replay(judged: pa.Table, options: AuditOptions) -> list[dict[str, Any]]:
    """The routing replay of every broker of the judged connections, its traffic slice by slice (:mod:`.slicing`):
    its tables written, a row of counts per broker returned (:data:`~.tables.REPLAYED_SCHEMA`)."""
    connections = ({name: row[name] for name in REPLAY_COLUMNS} for row in _replayed_connections(judged))
    return broker_replays(replay_groups(connections, sliced_replayer(options)))


def _table(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema)


def _replayed_connections(judged: pa.Table) -> list[dict[str, Any]]:
    """The connections the routing replay reads (as the Spark engine's ``known``: judged, of a known broker, not a
    copy judged apart)."""
    return [
        row
        for row in rows_of(judged.select(["note", "replayed", *REPLAY_COLUMNS]))
        if row["note"] is None and row["server"] is not None and row["server"] != "unknown" and row["replayed"]
    ]
