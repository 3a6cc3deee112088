"""``mqttaudit audit``: captures -> record-aligned chunks -> TCP segments -> connections judged -> routing replay
per broker -> Parquet tables, ``summary.json``, ``report.html`` and ``findings.md``.

The driver plans chunks (one pass over record headers) and collects only aggregates and bounded samples for the
reports; every row of every table is written by the executors. Small inputs on a local master run the same stages
in the driver's own process instead (the local engine, :mod:`.local`; which engine: :mod:`.engines`): only the
engine differs, the planning here is shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import posixpath
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqttaudit import __version__, locations
from mqttaudit.capture import CaptureError, Chunk, plan_chunks, read_chunk
from mqttaudit.capture.budgets import DEFAULT_BUDGETS, Budgets
from mqttaudit.capture.conversation import NOT_DECODED
from mqttaudit.capture.detect import KNOWN_MQTT_PORTS
from mqttaudit.report.budget_texts import BudgetText, applied_budgets
from mqttaudit.report.output_dir import staged_output
from mqttaudit.report.remote_output import check_output, remote_output
from mqttaudit.spec import load_catalogue
from mqttaudit.status import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_OK

from . import sources
from .detection import detection_summary, port_proofs
from .engines import AUTO, LOCAL, LOCAL_LIMIT_BYTES, LOCAL_MAX_BYTES, SPARK, Engine, Job, choose_engine
from .judging import flow_judge
from .keylog import KeyLogFile
from .options import SLICE_BYTES, AuditOptions
from .replaying import SHARD, broker_replays
from .sealed import new_key
from .segments import read_segments
from .slicing import sliced_replayer
from .spark import DEFAULT_MASTER, check_environment, check_master_reachable, spark_session
from .summary import audit_summary
from .tables import (
    CHUNK_SCHEMA,
    FLOW_ORDER,
    JUDGED_SCHEMA,
    REPLAYED_SCHEMA,
    SEGMENT_SCHEMA,
    TABLES,
    ddl,
)
from .task_files import TRANSCRIPTS_DIR, accepted_entries, ensure_readable, remove_unaccepted

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession

    from mqttaudit.report import AuditReportData

    from .task_files import Published

DEFAULT_CHUNK_BYTES = 64 * 1024 * 1024
MIN_CHUNK_BYTES = 1024 * 1024
#: Tasks per core of the reading stage (a few, so that unequal chunks even out).
CHUNKS_PER_CORE = 4
#: Tasks per core of the judging stage: flows differ widely in length, so more, smaller shares even out better.
FLOW_PARTITIONS_PER_CORE = 8
#: Capture bytes per task of the judging stage at least: a small capture is judged in few tasks (each task costs
#: its scheduling and a Python worker's set-up, far more than judging a few kilobytes).
FLOW_PARTITION_BYTES = 4 * 1024 * 1024
#: The column that places a broker's shard in a partition of its own (see :func:`_replay`).
SLOT = "slot"
#: Replay tasks per broker at most (one per core up to this): each reads every message of the broker and decides
#: the routing verdicts of its shard of the connections, so that more shards repeat the reading for less work each.
MAX_REPLAY_SHARDS = 4
#: Every entry an audit writes into its folder: a file of someone else's by one of these names is never replaced.
OUTPUTS = (*TABLES, "summary.json", "report_data.json", "report.html", "findings.md", "findings.jsonl", "junit.xml")
SAMPLES_PER_RULE = 5
REPORT_ROWS = 200


@dataclass
class AuditResult:
    #: A local folder, or the URL of a remote one.
    out_dir: Path | str
    summary: dict[str, Any]
    written: list[Path | str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """There are MUST-level violations or routing findings."""
        counts = self.summary["counts"]
        return bool(counts["violations_must"] or counts["routing_findings"])

    @property
    def incomplete(self) -> bool:
        """Nothing was judged: no MQTT connection was found, or every one found was encrypted."""
        return not readable_connections(self.summary)

    @property
    def cut_short(self) -> bool:
        """A capture was not read whole: it ends inside a record (truncated), a header stopped the reading, records
        were skipped as corrupt, or a file given was not a capture. What was lost was not judged."""
        return bool(self.summary.get("truncated") or self.summary.get("errors"))

    @property
    def conflicting_copies(self) -> int:
        """Connections that two files hold with different bytes: which copy was on the wire is unknown."""
        return int((self.summary.get("conflicting_copies") or {}).get("count", 0))

    @property
    def budgets_applied(self) -> list[BudgetText]:
        """The budgets that left bytes unjudged: a packet above the per-message budget skipped, gaps declared at the
        out-of-order budget, a flow stopped at the per-flow budget."""
        return applied_budgets(self.summary)

    @property
    def exit_status(self) -> int:
        """As ``mqttaudit audit`` exits: 1 findings; else 4 when nothing was judged, a capture was not read whole
        (the run cannot vouch for what it did not read), two files disagree on a connection's bytes (nor for
        which copy was on the wire) or a budget left bytes unjudged (nor for what it did not judge); else 0
        conformant."""
        if self.failed:
            return EXIT_FINDINGS
        unvouched = self.incomplete or self.cut_short or self.conflicting_copies or self.budgets_applied
        return EXIT_INCOMPLETE if unvouched else EXIT_OK


def readable_connections(summary: dict[str, Any]) -> int:
    """The connections whose bytes could be read (all but the encrypted ones, whose bytes are not assessable)."""
    versions = summary.get("versions") or {}
    unreadable = sum(int(versions.get(version, {}).get("connections", 0)) for version in NOT_DECODED)
    return int(summary["counts"]["connections"]) - unreadable


def _end_time_ns(path: str, chunks: list[Chunk]) -> int | None:
    """When observation of a capture ended: the time of its last record (only the last chunk is read)."""
    if not chunks:
        return None
    last = None
    try:
        for record in read_chunk(sources.opener(path), chunks[-1]):
            last = record[0] if last is None else max(last, record[0])
    except CaptureError:
        return last
    return last


def chunk_size(total: int, largest: int, parallelism: int) -> int:
    """The chunk size for ``total`` bytes of captures: at most ``largest``, at least :data:`MIN_CHUNK_BYTES`, and
    such that every core gets as many chunks, at least :data:`CHUNKS_PER_CORE` (the reading stage runs one task
    per chunk: equal shares keep every core busy until the stage ends)."""
    per_core = max(CHUNKS_PER_CORE, -(-total // (largest * parallelism)))
    return max(min(largest, -(-total // (parallelism * per_core))), MIN_CHUNK_BYTES)


def flow_partitions(input_bytes: int, parallelism: int) -> int:
    """Tasks of the judging stage for ``input_bytes`` of captures: :data:`FLOW_PARTITIONS_PER_CORE` per core, fewer
    for a small input (one per :data:`FLOW_PARTITION_BYTES`, at least one)."""
    return max(1, min(parallelism * FLOW_PARTITIONS_PER_CORE, -(-input_bytes // FLOW_PARTITION_BYTES)))


def run_audit(
    paths: Sequence[str],
    out_dir: Path | str,
    *,
    master: str = DEFAULT_MASTER,
    ports: Iterable[int] | None = None,
    tolerance: float = 5.0,
    late_window: float = 60.0,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: Callable[[str], None] = lambda message: None,
    tasks: Callable[[int, int], None] | None = None,
    spark: SparkSession | None = None,
    verbose: bool = False,
    force: bool = False,
    keylog: KeyLogFile | None = None,
    budgets: Budgets = DEFAULT_BUDGETS,
    engine: str = AUTO,
    local_max_bytes: int = LOCAL_MAX_BYTES,
    local_limit_bytes: int = LOCAL_LIMIT_BYTES,
    slice_bytes: int = SLICE_BYTES,
    slice_span: float | None = None,
) -> AuditResult:
    """Audits the captures at ``paths`` (local paths or URLs, see :mod:`.sources`) into ``out_dir`` (a local folder,
    or a URL of any filesystem pyarrow.fs reaches: see :mod:`mqttaudit.report.remote_output` for what publishing
    there guarantees), published only when the whole audit completes.

    Raises :class:`sources.AuditInputError` (nothing to audit, a named file that is not a capture),
    :class:`OutputDirError` (``out_dir`` holds files mqttaudit did not write, unless ``force``) and
    :class:`SparkEnvironmentError` (no Java, no pyspark, a bad master) and :class:`SparkMasterUnreachable` (a
    ``spark://`` master nobody answers at) before Spark starts. ``progress`` hears each
    phase; ``tasks``, when given, hears ``(done, total)`` Spark tasks of the running stages every second.
    ``budgets`` bounds what one connection may make a task hold (:mod:`mqttaudit.capture.budgets`).
    ``keylog`` names the TLS key log the executors read and decrypt with (its secrets are shipped nowhere and
    written nowhere; what the tasks hand each other is sealed, see :mod:`.sealed`).
    ``engine`` (:data:`ENGINES`) runs the stages on Spark, or in this process (:mod:`.local`; ``master``, ``verbose``
    and ``tasks`` then unused); ``auto`` chooses (:func:`choose_engine`, with ``local_max_bytes``). The local
    engine holds the captures' segments at once: past ``local_limit_bytes`` of captures it refuses
    (:class:`~.engines.LocalEngineLimit`, before any capture is read) and ``auto`` picks Spark.
    ``slice_bytes`` and ``slice_span``: the slices of each broker's routing replay (:mod:`.slicing`,
    :class:`.AuditOptions`).
    """
    started = time.time()
    out = locations.as_output(out_dir)
    check_output(out, force=force, writes=OUTPUTS)  # before any capture is read
    files = sources.expand(list(paths))
    rejected = dict(sources.check_captures(list(paths), files))
    sizes = _sizes([path for path in files if path not in rejected])
    runner: Engine
    chosen = choose_engine(engine, master, sum(sizes.values()), local_max_bytes, spark, local_limit_bytes)
    if chosen == LOCAL:
        from .local import LocalEngine

        runner = LocalEngine()
    else:
        if spark is None:
            check_environment(master)
            check_master_reachable(master)
        runner = SparkEngine(spark or spark_session(master, verbose=verbose))
    with _published(out, force) as (tables, staging):
        summary, written = _audit(
            runner,
            files,
            sizes,
            rejected,
            tables,
            staging,
            ports=ports,
            tolerance=tolerance,
            late_window=late_window,
            chunk_bytes=chunk_bytes,
            progress=progress,
            tasks=tasks,
            keylog=keylog,
            budgets=budgets,
            slice_bytes=slice_bytes,
            slice_span=slice_span,
        )
        summary["duration"] = round(time.time() - started, 3)
        summary["mqttaudit_version"] = __version__
        (staging / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    located: list[Path | str] = [out / name if isinstance(out, Path) else locations.join(out, name) for name in written]
    return AuditResult(out, summary, located)


@contextmanager
def _published(out: Path | str, force: bool) -> Iterator[tuple[Path | str, Path]]:
    """Where the tasks write the tables, and the local folder the driver writes its files into: a staging folder
    for both, published by renames (:func:`~mqttaudit.report.output_dir.staged_output`), for a local ``out``; ``out``
    itself and a local folder uploaded at the end, published by the marker, for a remote one."""
    if isinstance(out, Path):
        with staged_output(out, force=force, writes=OUTPUTS) as staging:
            yield staging, staging
    else:
        with remote_output(out, force=force, writes=(*OUTPUTS, TRANSCRIPTS_DIR)) as local:
            yield out, local


def _sizes(files: list[str]) -> dict[str, int]:
    """The size of each capture that can be asked (one that cannot is reported when it is read)."""
    sizes: dict[str, int] = {}
    for path in files:
        try:
            sizes[path] = sources.size(path)
        except (OSError, sources.AuditInputError):
            continue
    return sizes


class SparkEngine:
    """Runs an audit's stages as Spark jobs of ``session``."""

    name = SPARK

    def __init__(self, session: SparkSession) -> None:
        self.session = session

    @property
    def parallelism(self) -> int:
        return max(self.session.sparkContext.defaultParallelism, 1)

    @property
    def master(self) -> str | None:
        return self.session.sparkContext.master

    def accumulator(self) -> Accumulator[Published] | None:
        from .accumulators import PublishedFiles

        return self.session.sparkContext.accumulator([], PublishedFiles())

    def port_proofs(self, chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes]) -> dict[int, str]:
        return port_proofs(self.session, chunk_rows, tls_randoms)

    @contextmanager
    def watching(self, progress: Callable[[str], None], tasks: Callable[[int, int], None] | None) -> Iterator[None]:
        watcher = _Progress(self.session, progress, tasks)
        watcher.start()
        try:
            yield
        finally:
            watcher.stop()

    def run(self, job: Job) -> dict[str, Any]:
        return _run(self.session, job)

    def report_data(self, job: Job, summary: dict[str, Any]) -> AuditReportData:
        from .report_data import report_data

        return report_data(self.session, job.out_dir, summary, samples=job.samples, rows=job.rows)


def _audit(
    engine: Engine,
    files: list[str],
    sizes: dict[str, int],
    rejected: dict[str, str],
    out_dir: Path | str,
    reports_dir: Path,
    *,
    ports: Iterable[int] | None,
    tolerance: float,
    late_window: float,
    chunk_bytes: int,
    progress: Callable[[str], None],
    tasks: Callable[[int, int], None] | None,
    keylog: KeyLogFile | None = None,
    budgets: Budgets = DEFAULT_BUDGETS,
    slice_bytes: int = SLICE_BYTES,
    slice_span: float | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Audits ``files`` into ``out_dir`` (the tables: a local folder or a URL) and ``reports_dir`` (the driver's
    files); returns the summary and the names of the entries written."""
    # Captures are named by file name, or by their whole location when two files share a name.
    basenames = [posixpath.basename(path) for path in files]
    unique = len(set(basenames)) == len(basenames)
    names = {path: base if unique else path for path, base in zip(files, basenames, strict=True)}
    parallelism = engine.parallelism
    errors: list[dict[str, Any]] = [
        {"capture": names[path], "offset": 0, "reason": why} for path, why in rejected.items()
    ]
    files = [path for path in files if path not in rejected]
    chunk_bytes = chunk_size(sum(sizes.values()), chunk_bytes, parallelism)
    progress(f"planning chunks of {len(files)} capture(s) ({chunk_bytes:,} bytes at most each)")
    chunk_rows: list[dict[str, Any]] = []
    captures: list[dict[str, Any]] = []
    end_times: list[tuple[str, int]] = []
    for path in files:
        name = names[path]
        try:
            size = sizes[path] if path in sizes else sources.size(path)
            chunks = plan_chunks(sources.opener(path), chunk_bytes, name=name, size=size)
        except CaptureError as exc:
            errors.append({"capture": name, "offset": exc.offset, "reason": exc.detail})
            captures.append({"capture": name, "path": path, "bytes": size, "chunks": 0})
            continue
        except (OSError, sources.AuditInputError) as exc:
            errors.append({"capture": name, "offset": 0, "reason": f"cannot read: {exc}"})
            continue
        captures.append({"capture": name, "path": path, "bytes": size, "chunks": len(chunks)})
        # Executors open the file themselves, from their own working folder: a local path goes to them absolute.
        located = path if sources.is_url(path) else os.path.abspath(path)
        chunk_rows += [{"capture": name, "path": located, "chunk": pickle.dumps(chunk)} for chunk in chunks]
        last = _end_time_ns(path, chunks)
        if last is not None:
            end_times.append((name, last))
    # --ports restricts the audit to those ports; without it, MQTT is recognised on any port (see .detection).
    requested = None if ports is None else frozenset(ports)
    options = AuditOptions(
        KNOWN_MQTT_PORTS if requested is None else requested,
        tolerance,
        tuple(end_times),
        str(out_dir.resolve()) if isinstance(out_dir, Path) else out_dir,
        published=engine.accumulator(),
        requested_ports=requested,
        keylog=keylog,
        seal_key=None if keylog is None else new_key(),
        budgets=budgets,
        late_window=late_window,
        slice_bytes=slice_bytes,
        slice_span=slice_span,
    )
    if requested is None:
        progress(
            "looking for TCP streams that start with an MQTT CONNECT or a WebSocket Upgrade offering mqtt"
            + (", or a TLS session of the key log" if keylog is not None else "")
            + ", on any port"
        )
        proofs = engine.port_proofs(chunk_rows, frozenset() if keylog is None else keylog)
        proven = frozenset(proofs)
        options = replace(
            options,
            broker_ports=KNOWN_MQTT_PORTS | proven,
            proven_ports=proven,
            port_proofs=tuple(sorted(proofs.items())),
        )
    job = Job(chunk_rows, options, out_dir, progress, sum(sizes.values()), SAMPLES_PER_RULE, REPORT_ROWS)
    with engine.watching(progress, tasks), _output_folders(out_dir):
        summary = engine.run(job)
    summary["captures"] = captures
    summary["errors"] = errors + summary.pop("chunk_errors")
    summary["engine"] = engine.name
    summary["spark_master"] = engine.master
    summary["tolerance_s"] = tolerance
    summary["late_window_s"] = late_window
    summary["broker_ports"] = sorted(options.broker_ports)
    written = [*TABLES, "summary.json"]
    progress("writing report.html and findings.md")
    written += [path.name for path in _reports(engine, job, reports_dir, summary)]
    return summary, written


@contextmanager
def _output_folders(out_dir: Path | str) -> Iterator[None]:
    """Empty folders for the tables the tasks write, and for the transcripts they hand to the routing replay,
    which serve the replay only: nothing of them stays in the output, whatever happens."""
    for table in (*TABLES, TRANSCRIPTS_DIR):
        folder = locations.join(out_dir, table)
        locations.delete_tree(folder)
        filesystem, path = locations.resolve(folder)
        filesystem.create_dir(path, recursive=True)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            locations.delete_tree(locations.join(out_dir, TRANSCRIPTS_DIR))


def _run(session: SparkSession, job: Job) -> dict[str, Any]:
    from pyspark import StorageLevel

    chunk_rows, options, out_dir, progress = job.chunk_rows, job.options, job.out_dir, job.progress
    parallelism = max(session.sparkContext.defaultParallelism, 1)
    # One chunk per task (the scheduler hands the next chunk to whichever core is free).
    chunks = session.createDataFrame(
        session.sparkContext.parallelize(
            [tuple(row[name] for name in CHUNK_SCHEMA.names) for row in chunk_rows], max(len(chunk_rows), 1)
        ),
        schema=ddl(CHUNK_SCHEMA),
    )
    progress(f"reading {len(chunk_rows)} chunk(s), then reassembling and judging connections")
    segments = chunks.mapInArrow(partial(read_segments, options=options), ddl(SEGMENT_SCHEMA))
    # Every flow's runs of segments together in one task; the chunk notes (no flow) come through as they are.
    judged = (
        segments.repartition(flow_partitions(job.input_bytes, parallelism), "flow")
        .sortWithinPartitions(*FLOW_ORDER)
        .mapInArrow(flow_judge(options), ddl(JUDGED_SCHEMA))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    connections = judged.where("note is null")
    # A copy judged apart because another file holds its bytes with other content is not replayed: the first
    # file's copy stands for the connection (summary.json's conflicting_copies names both).
    known = connections.where("server != 'unknown' and replayed")
    progress("replaying routing per broker")
    replayed = _replay(known, options, min(parallelism, MAX_REPLAY_SHARDS), parallelism)
    progress("adding up the summary")
    _commit_tables(out_dir, options)
    summary, notes, by_port = audit_summary(session, judged, out_dir, options.budgets)
    summary["detection"] = detection_summary(options, by_port, notes)
    summary["routing_replays"] = broker_replays(replayed)
    judged.unpersist()
    return summary


def _replay(known: DataFrame, options: AuditOptions, shards: int, parallelism: int) -> list[dict[str, Any]]:
    """The routing replay of each broker in ``shards`` tasks side by side, each walking the broker's traffic slice
    by slice (:mod:`.slicing`) and deciding the routing verdicts of its shard of the connections (every connection
    of a ClientId and of a share group together: :func:`~mqttaudit.judge.stream.shard_connections`). A task is
    handed a row per connection of its broker (where its head and pieces are), never the traffic. Returns each
    task's row (:data:`~.tables.REPLAYED_SCHEMA`).

    Each broker's shard gets a partition of its own (its shard among its broker's, its broker's bucket among
    ``parallelism / shards`` by a hash of its name), named by a slot value that Spark's hash partitioning places
    there (:func:`_slot_values`): grouped by broker and shard alone, Spark's adaptive execution merged the few
    thousand rows into one partition, and range partitioning by slot put both shards of the bench capture's broker
    in one partition (its bounds come from a sample), so one task ran them one after the other."""
    from pyspark.sql import functions as F

    buckets = max(1, -(-parallelism // shards))
    values = _slot_values(known.sparkSession, buckets * shards)
    rows = known.select("server", "flow", "capture", "transcripts", "transcript_row")
    if shards == 1:
        rows = rows.withColumn(SHARD, F.lit(0).cast("long"))
    else:
        rows = rows.crossJoin(known.sparkSession.range(shards).withColumnRenamed("id", SHARD))
    index = F.pmod(F.crc32(F.col("server")), F.lit(buckets)) * shards + F.col(SHARD)
    slot = F.element_at(F.array(*(F.lit(value) for value in values)), (index + 1).cast("int"))
    replayed = (
        rows.withColumn(SLOT, slot)
        .repartition(buckets * shards, SLOT)
        .groupBy(SLOT, "server", SHARD)
        .applyInArrow(sliced_replayer(options, shards), ddl(REPLAYED_SCHEMA))
        .collect()
    )
    return [row.asDict() for row in replayed]


def _slot_values(session: SparkSession, slots: int) -> list[int]:
    """For each of ``slots`` partitions, a value that Spark's hash partitioning (``repartition(slots, column)``:
    the Murmur3 hash Spark's ``hash`` computes, modulo ``slots``) places in it, found among the first integers by
    one query of Spark's own hash (a partition none of them reaches keeps its own number)."""
    from pyspark.sql import functions as F

    if slots == 1:
        return [0]  # one partition: no query (an audit on one core pays for no Spark job of its own here)
    found: dict[int, int] = {}
    for row in session.range(64 * slots).select("id", F.pmod(F.hash("id"), F.lit(slots)).alias("at")).collect():
        found.setdefault(row["at"], row["id"])
    return [found.get(partition, partition) for partition in range(slots)]


def _commit_tables(out_dir: Path | str, options: AuditOptions) -> None:
    """Keeps in each table's folder the files of the task attempts Spark accepted, one attempt per task (a failed
    attempt's files, whole or in part, are removed: no row is read twice or from a failed attempt)."""
    assert options.published is not None
    remove_unaccepted(str(out_dir), TABLES, accepted_entries(options.published.value))
    for table in TABLES:
        ensure_readable(locations.join(out_dir, table), table)


def _reports(engine: Engine, job: Job, reports_dir: Path, summary: dict[str, Any]) -> list[Path]:
    """The reports, written into ``reports_dir`` from the tables ``job`` wrote."""
    from mqttaudit.report import write_audit_reports

    data = engine.report_data(job, summary)
    (reports_dir / "report_data.json").write_text(data.to_json())
    written = write_audit_reports(reports_dir, data, load_catalogue("3.1.1"), tables=job.out_dir)
    return [*written, reports_dir / "report_data.json"]


class _Progress:
    """Reports how far the running Spark stages are while the audit runs: ``tasks(done, total)`` every second when
    given (a progress bar), else a line through ``say`` every few seconds when the figures change."""

    def __init__(
        self,
        session: SparkSession,
        say: Callable[[str], None],
        tasks: Callable[[int, int], None] | None = None,
    ) -> None:
        self._tracker = session.sparkContext.statusTracker()
        self._say = say
        self._tasks = tasks
        self._every = 1.0 if tasks is not None else 3.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        # The JVM may go away under this thread (an interrupted audit stops it): progress is not worth a traceback.
        with contextlib.suppress(Exception):
            self._watch()

    def _watch(self) -> None:
        last = ""
        while not self._stop.wait(self._every):
            stages = [self._tracker.getStageInfo(stage_id) for stage_id in self._tracker.getActiveStageIds()]
            active = [info for info in stages if info is not None]
            if self._tasks is not None:
                if active:
                    self._tasks(sum(i.numCompletedTasks for i in active), sum(i.numTasks for i in active))
                continue
            line = "; ".join(f"stage {i.stageId}: {i.numCompletedTasks}/{i.numTasks} tasks" for i in active)
            if line and line != last:
                self._say(line)
                last = line


def iter_tables(out_dir: Path) -> Iterator[Path]:
    for name in TABLES:
        yield out_dir / name
