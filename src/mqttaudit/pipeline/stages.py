"""The per-task work of an audit, as Arrow-in, Arrow-out functions Spark runs on its executors.

- :func:`read_segments` (``mapInArrow`` over chunk descriptors): reads one record-aligned chunk of a capture,
  keeps the TCP segments of MQTT flows (a broker port on either side), gathered in runs per flow, and reports
  what it skipped (the other TCP flows counted per port), a truncated tail, records skipped as corrupt and the
  corrupt header it stopped at (with their offsets) as a note row.
  A task holds one chunk, never a whole file. (Which ports are MQTT ports: :mod:`.detection`.)
- :func:`judge_partition` (``mapInArrow`` over runs of segments partitioned and sorted by flow): one TCP flow at
  a time (across chunks and rotated files), reassembled per connection and direction, decoded and judged; the
  task writes the packets, violations, gaps and connections tables itself and hands back one small row per
  connection, with the transcript the routing replay needs.
- :func:`replay_group` (``groupBy(server, shard).applyInArrow``): the routing replay of one broker endpoint, for
  the sessions of one shard of its ClientIds (shards run in parallel; each sees every message); it writes the
  deliveries and routing findings tables.

The tasks write Parquet themselves (one file per task and table, published when the task completes) rather than
returning nested rows for Spark to convert, cache and explode: that conversion cost the JVM more CPU than the
judging itself cost Python, and its cache grew with the capture.

Times in the tables are seconds since the epoch (float64), as the capture recorded them.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import pickle
import posixpath
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext

from mqttaudit.capture import (
    CaptureError,
    Chunk,
    ChunkReader,
    FlowAudit,
    FlowOptions,
    Segment,
    flow_events,
    frame_number,
    read_chunk,
)
from mqttaudit.capture.detect import KNOWN_MQTT_PORTS
from mqttaudit.capture.flows import OtherTcp, SegmentRow, broker_segments
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge import reasons as reason_tags

from . import sources
from .conversations import Columns, connection_flow, judge_flow
from .keylog import KeyLogFile
from .replay import replay_batches
from .sealed import keyed_name, seal, unseal
from .tables import (
    GAP_COLUMNS,
    GAP_KINDS,
    JUDGED_SCHEMA,
    PIECE_SCHEMA,
    REPLAYED_SCHEMA,
    RUN_SCHEMA,
    SEGMENT_FIELDS,
    SEGMENT_SCHEMA,
    TRANSCRIPT_SCHEMA,
    table_schema,
)


@dataclass(frozen=True)
class AuditOptions:
    #: The ports whose flows are MQTT: ``--ports``, or the known MQTT port and the proven ones.
    broker_ports: frozenset[int] = KNOWN_MQTT_PORTS
    #: Seconds a receiver may take to answer or close, and the broker to deliver (the routing tolerance).
    tolerance: float = 5.0
    #: Where observation of each capture ended (ns), by capture name: an open connection is quiet until the end of
    #: the last capture that holds it (rotated captures continue each other).
    end_times: tuple[tuple[str, int], ...] = ()
    #: Where the tasks write the tables (a local directory; each table is a folder of Parquet files).
    out_dir: str = ""
    #: The ports ``--ports`` restricts the audit to; None: MQTT is recognised on any port.
    requested_ports: frozenset[int] | None = None
    #: Server ports on which a stream started with a CONNECT (found when ``requested_ports`` is None).
    proven_ports: frozenset[int] = frozenset()
    #: How each proven port was proven, (port, proof), the proofs named in :mod:`mqttaudit.capture.detect`.
    port_proofs: tuple[tuple[int, str], ...] = ()
    #: The key log of ``--keylog``: where each executor reads it, never its secrets (see :mod:`.keylog`).
    keylog: KeyLogFile | None = None
    #: With a key log, the run's key that seals what the tasks hand each other (see :mod:`.sealed`); never written.
    seal_key: bytes | None = field(default=None, repr=False)

    @property
    def judge_config(self) -> JudgeConfig:
        # A broker seen accepting MQTT 5.0 supports it: those connections follow another specification and are
        # not judged against 3.1.1 (rather than blaming the broker for not refusing them).
        return JudgeConfig(
            close_grace=self.tolerance,
            answer_timeout=self.tolerance,
            supported_protocol_levels=frozenset({4, 5}),
            wall_clock=True,  # a capture's times are seconds since the epoch
        )

    @property
    def flow_options(self) -> FlowOptions:
        return FlowOptions(
            broker_ports=self.broker_ports, keylog=self.keylog, mqtt_ports_named=self.requested_ports is not None
        )


# -- the Python workers -------------------------------------------------------------------------------------------

#: Allocations between two young-generation collections in a task (Python's default is 700).
GC_THRESHOLD = 50_000


def tune_gc() -> None:
    """Tunes the cyclic garbage collector of this worker process for the tasks' work, once per process.

    A task builds millions of small objects that stay alive until it ends (decoded packets, events, a broker's
    transcripts); with the default thresholds the collector walks them again and again, which measured 40-60% of
    a task's time. What was imported is frozen out of its walks; collections become rarer, not disabled, so the
    few reference cycles are still freed."""
    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 20, 100)


# -- stage 1: chunks -> runs of segments --------------------------------------------------------------------------

BATCH_ROWS = 8192
#: Segments and payload bytes of one run at most (a longer stretch of one flow in one chunk becomes several runs;
#: loopback captures hold segments of up to 64 KB).
RUN_SEGMENTS = 16384
RUN_BYTES = 8 * 1024 * 1024
#: Bytes of runs per batch handed to Spark at most.
BATCH_BYTES = 16 * 1024 * 1024


def _segment_columns() -> dict[str, list[Any]]:
    return {name: [] for name in SEGMENT_SCHEMA.names}


def _batch(columns: dict[str, list[Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns, schema=SEGMENT_SCHEMA)


def _note(capture: str, **fields: Any) -> dict[str, list[Any]]:
    columns = _segment_columns()
    for name in SEGMENT_SCHEMA.names:
        columns[name].append(None)
    columns["capture"][0] = capture
    columns["note"][0] = json.dumps(fields, sort_keys=True)
    return columns


def read_segments(batches: Iterator[pa.RecordBatch], options: AuditOptions) -> Iterator[pa.RecordBatch]:
    """Chunk descriptors in, runs of TCP segments of MQTT flows out (plus one note row per chunk with its
    counts)."""
    tune_gc()
    for batch in batches:
        for capture, path, blob in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            chunk: Chunk = pickle.loads(blob)
            yield from _chunk_segments(capture, path, chunk, options)


class Runs:
    """The segments of one chunk gathered per flow into runs (:data:`SEGMENT_SCHEMA` rows).

    Segments are turned into Arrow data every :data:`BATCH_ROWS` (so that the chunk's segments do not stay alive
    as Python objects for the collector to walk); when the chunk ends they are ordered by flow and record, and
    each flow's segments become runs of at most :data:`RUN_SEGMENTS` and :data:`RUN_BYTES`, one serialized record
    batch each."""

    def __init__(self, capture: str) -> None:
        self.capture = capture
        self._rows: list[SegmentRow] = []
        self._pieces: list[pa.RecordBatch] = []

    def extend(self, rows: list[SegmentRow]) -> None:
        """Adds segments as :func:`~mqttaudit.capture.flows.broker_segments` hands them on."""
        self._rows += rows
        if len(self._rows) >= BATCH_ROWS:
            self._piece()

    def _piece(self) -> None:
        columns = zip(*self._rows, strict=True)
        arrays = [pa.array(values, type=field.type) for values, field in zip(columns, PIECE_SCHEMA, strict=True)]
        self._pieces.append(pa.RecordBatch.from_arrays(arrays, schema=PIECE_SCHEMA))
        self._rows = []

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The chunk's runs, in batches of at most :data:`BATCH_BYTES` (nothing when it had no segment)."""
        if self._rows:
            self._piece()
        if not self._pieces:
            return
        table = pa.Table.from_batches(self._pieces, schema=PIECE_SCHEMA)
        self._pieces = []
        table = table.take(pc.sort_indices(table, sort_keys=[("flow", "ascending"), ("record", "ascending")]))
        flows = pc.run_end_encode(table.column("flow").combine_chunks())
        segments = table.select(RUN_SCHEMA.names).combine_chunks()
        lengths = pc.binary_length(segments.column("payload")).to_pylist()
        done = _segment_columns()
        size = start = 0
        for flow, end in zip(flows.values.to_pylist(), flows.run_ends.to_pylist(), strict=True):
            for first, last in _cuts(lengths, start, end):
                run = segments.slice(first, last - first).to_batches()[0]
                blob = run.serialize().to_pybytes()
                done["flow"].append(flow)
                done["capture"].append(self.capture)
                done["first_record"].append(run.column("record")[0].as_py())
                done["segments"].append(blob)
                done["note"].append(None)
                size += len(blob)
                if size >= BATCH_BYTES:
                    yield _batch(done)
                    done, size = _segment_columns(), 0
            start = end
        if done["flow"]:
            yield _batch(done)


def _cuts(lengths: list[int], start: int, end: int) -> Iterator[tuple[int, int]]:
    """Segments ``[start, end)`` of one flow cut into runs of at most :data:`RUN_SEGMENTS` segments and
    :data:`RUN_BYTES` of payload (a longer segment is a run of its own)."""
    first, size = start, 0
    for index in range(start, end):
        if index > first and (index - first >= RUN_SEGMENTS or size + lengths[index] > RUN_BYTES):
            yield first, index
            first, size = index, 0
        size += lengths[index]
    yield first, end


def decode_run(capture: str, blob: pa.Buffer) -> pa.RecordBatch:
    """One run's segments (:data:`RUN_SCHEMA`) with the capture that holds them as a last column."""
    batch = pa.ipc.read_record_batch(blob, RUN_SCHEMA)
    return batch.append_column("capture", pa.array([capture] * batch.num_rows, type=pa.string()))


def _chunk_segments(capture: str, path: str, chunk: Chunk, options: AuditOptions) -> Iterator[pa.RecordBatch]:
    runs = Runs(capture)
    skipped: Counter[str] = Counter()
    other = OtherTcp()
    kept = 0
    reader = read_chunk(sources.opener(path), chunk)
    error = None
    try:
        for rows in broker_segments(reader, options.broker_ports, skipped, BATCH_ROWS, other):
            kept += len(rows)
            runs.extend(rows)
    except CaptureError as exc:
        error = {"offset": exc.offset, "reason": exc.detail}
    except (OSError, sources.AuditInputError) as exc:
        error = {"offset": chunk.start, "reason": f"cannot read: {exc}"}
    yield from runs.finish()
    truncation = getattr(reader, "truncation", None)
    note: dict[str, Any] = {
        "chunk_start": chunk.start,
        "chunk_end": chunk.end,
        "records": reader.records,
        "segments": kept,
        "skipped": dict(skipped),
        "other_tcp": other_tcp_note(other),
    }
    if truncation is not None:
        note["truncated"] = {
            "offset": truncation.offset,
            "frame": frame_number(truncation.index),  # the number the cut record would have had
            "needed": truncation.needed,
            "available": truncation.available,
        }
    if error is not None:
        note["error"] = error
    if reader.corrupt_count:
        note["corrupt"] = corrupt_note(reader)
    yield _batch(_note(capture, **note))


def corrupt_note(reader: ChunkReader) -> list[dict[str, Any]]:
    """The records of a chunk skipped as corrupt, as its note lists them (``offset``, ``frame``, ``reason``): the
    first few the reader describes, then one line counting the others."""
    kept = [{"offset": c.offset, "frame": frame_number(c.index), "reason": c.reason} for c in reader.corrupt]
    more = reader.corrupt_count - len(kept)
    if more > 0 and kept:
        last = kept[-1]["offset"]
        kept.append({"offset": last, "frame": None, "reason": f"{more:,} more corrupt record(s) after this one"})
    return kept


#: Ports a reading task's note lists at most for the TCP flows it left out (the rest are in its totals only).
NOTE_PORTS = 64


def other_tcp_note(other: OtherTcp) -> dict[str, Any]:
    """A reading task's count of the TCP flows it left out, for its note: totals, and ``[frames, payload bytes,
    flows]`` per service (:meth:`~mqttaudit.capture.flows.OtherTcp.by_service`), the :data:`NOTE_PORTS` with most
    frames."""
    services = other.by_service()
    top = sorted(services.items(), key=lambda item: -item[1][0])[:NOTE_PORTS]
    return {
        "frames": sum(counts[0] for counts in services.values()),
        "bytes": sum(counts[1] for counts in services.values()),
        "flows": len(other.flows),
        "ports": dict(top),
    }


# -- writing tables from the tasks --------------------------------------------------------------------------------


class TaskFile:
    """The rows one task writes to one file of a folder of the output directory: written in batches as they
    come, under a hidden name until the task completes (Spark and pyarrow skip names starting with '.'), then
    renamed; a retried task overwrites its own file, so a row is never there twice. ``open_writer`` opens the
    format (Parquet, Arrow IPC) at a path for a schema."""

    BATCH = 65536

    def __init__(
        self, directory: str, folder: str, name: str, schema: pa.Schema, open_writer: Callable[[str, pa.Schema], Any]
    ) -> None:
        self.schema = schema
        self.name = name
        self.rows = 0
        self._path = posixpath.join(directory, folder, name)
        self._hidden = posixpath.join(directory, folder, f".{name}.tmp")
        self._open_writer = open_writer
        self._pending: list[Columns] = []
        self._pending_rows = 0
        self._writer: Any = None

    def add(self, columns: Columns) -> None:
        if not len(columns):
            return
        self._pending.append(columns)
        self._pending_rows += len(columns)
        self.rows += len(columns)
        if self._pending_rows >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._writer is None:
            self._writer = self._open_writer(self._hidden, self.schema)
        if self._pending:
            self._writer.write_table(columns_table(self._pending, self.schema))
        self._pending, self._pending_rows = [], 0

    def close(self) -> None:
        """Writes what is left and publishes the file (nothing for a task that had no row)."""
        if self.rows:
            self._flush()
        if self._writer is not None:
            self._writer.close()
            os.replace(self._hidden, self._path)


class TableWriter(TaskFile):
    """The rows one task adds to one table, as one Parquet file in the table's folder (row groups of
    :attr:`BATCH` rows)."""

    def __init__(self, directory: str, table: str, part: str) -> None:
        super().__init__(directory, table, f"part-{part}.parquet", table_schema(table), _parquet_writer)


def _parquet_writer(path: str, schema: pa.Schema) -> pq.ParquetWriter:
    return pq.ParquetWriter(path, schema, compression="snappy")


#: The folder of the output directory where the judging tasks leave the transcripts for the routing replay (the
#: audit removes it when the replay is done).
TRANSCRIPTS_DIR = "_transcripts"


class TranscriptWriter(TaskFile):
    """The transcripts one judging task hands to the routing replay, as one Arrow IPC file in the output directory
    that the replay tasks read memory-mapped: the blobs (a large share of the audit's bytes) never pass through
    the JVM."""

    BATCH = 1024

    def __init__(self, directory: str, part: str) -> None:
        super().__init__(directory, TRANSCRIPTS_DIR, f"part-{part}.arrow", TRANSCRIPT_SCHEMA, pa.ipc.new_file)

    def add_transcript(self, transcript: bytes, sources: bytes) -> int:
        """Adds one connection's transcript; returns its row in the file."""
        row = Columns(tuple(TRANSCRIPT_SCHEMA.names))
        row.add(transcript=transcript, sources=sources)
        self.add(row)
        return self.rows - 1


def read_transcripts(directory: str, names: Iterable[str]) -> dict[str, pa.Table]:
    """The transcript files ``names`` of an audit's output directory, memory-mapped."""
    return {
        name: pa.ipc.open_file(pa.memory_map(posixpath.join(directory, TRANSCRIPTS_DIR, name))).read_all()
        for name in set(names)
    }


def columns_table(parts: Sequence[Columns], schema: pa.Schema) -> pa.Table:
    """The rows of several column sets, one after the other, as one table, built column by column."""
    arrays = [pa.array([v for part in parts for v in part.data[field.name]], type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _part_name(*keys: object) -> str:
    """A file name part unique to this task's partition (stable across retries of the same task)."""
    return "-".join([f"{_partition():05d}", *(str(key) for key in keys)])


def _partition() -> int:
    context = TaskContext.get()
    return 0 if context is None else context.partitionId()


# -- stage 2: the flows of a partition -> judged connections -----------------------------------------------------


def judge_partition(batches: Iterator[pa.RecordBatch], options: AuditOptions) -> Iterator[pa.RecordBatch]:
    """Runs of segments sorted by flow in (``mapInArrow`` after ``repartition(flow)`` and ``sortWithinPartitions``),
    one flow at a time: each is reassembled, decoded and judged, its packets, violations, gaps and connections written
    to their tables here, and one small row per connection handed back (chunk notes pass through). Only one flow
    is held at a time."""
    tune_gc()
    part = _part_name()
    writers = {
        table: TableWriter(options.out_dir, table, part)
        for table in ("packets", "violations", "connections", "gaps", "not_assessable", "lenient")
    }
    transcripts = TranscriptWriter(options.out_dir, part)
    judged = Columns(tuple(JUDGED_SCHEMA.names))
    for flow, table in _flow_groups(batches):
        if flow is None:
            for capture, note in zip(
                table.column("capture").to_pylist(), table.column("note").to_pylist(), strict=True
            ):
                judged.add(capture=capture, note=note)
            continue
        for row in judge_segments(table, options):
            for name, writer in writers.items():
                writer.add(row[name])
            transcript, source = row.pop("transcript"), row.pop("sources")
            key = options.seal_key
            judged.add(
                **(row | {"client_id": keyed_name(key, row["client_id"])}),
                transcripts=transcripts.name,
                transcript_row=transcripts.add_transcript(seal(key, transcript), seal(key, source)),
                transcript_bytes=len(transcript),
                sources_bytes=len(source),
            )
        if len(judged) >= BATCH_ROWS:
            yield columns_table([judged], JUDGED_SCHEMA).to_batches()[0]
            judged = Columns(tuple(JUDGED_SCHEMA.names))
    for writer in writers.values():
        writer.close()
    transcripts.close()
    if len(judged):
        yield columns_table([judged], JUDGED_SCHEMA).to_batches()[0]


def _flow_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[str | None, pa.Table]]:
    """The runs of consecutive rows with the same flow, across batch boundaries, each as one table."""
    pending: list[pa.RecordBatch] = []
    current: str | None = None
    for batch in batches:
        flows = batch.column("flow").to_pylist()
        start = 0
        for index in range(1, len(flows) + 1):
            if index < len(flows) and flows[index] == flows[start]:
                continue
            piece = batch.slice(start, index - start)
            if pending and flows[start] != current:
                yield current, pa.Table.from_batches(pending)
                pending = []
            pending.append(piece)
            current = flows[start]
            start = index
    if pending:
        yield current, pa.Table.from_batches(pending)


def judge_segments(table: pa.Table, options: AuditOptions) -> list[dict[str, Any]]:
    """All runs of segments of one flow (:data:`SEGMENT_SCHEMA` rows, any order) in; per connection, its table
    rows and its judged row."""
    runs = [
        decode_run(capture, blob.as_buffer())
        for capture, blob in zip(table.column("capture").to_pylist(), table.column("segments"), strict=True)
    ]
    table = pa.Table.from_batches(runs)
    order = pc.sort_indices(
        table, sort_keys=[("time_ns", "ascending"), ("capture", "ascending"), ("record", "ascending")]
    )
    # Runs already in order (the usual case) are not copied. (Signed: a step back is negative, not an overflow.)
    if not pc.all(pc.equal(pc.pairwise_diff(order.cast(pa.int64())), 1)).as_py():
        table = table.take(order)
    times, captures = table.column("time_ns").to_pylist(), table.column("capture").to_pylist()
    # The capture record that carried each segment, by time (first wins), to name frames in the evidence.
    record_at: dict[int, tuple[str, int]] = {}
    for time_ns, capture, record in zip(times, captures, table.column("record").to_pylist(), strict=True):
        record_at.setdefault(time_ns, (capture, record))
    ends = dict(options.end_times)
    known = [ends[capture] for capture in set(captures) if capture in ends]
    end = max(known) if known else (times[-1] if times else None)
    audits = flow_events(flow_segments(table), options=options.flow_options, end_time_ns=end)
    # A connection that carried no payload byte (the last ACKs of one that ended before the capture began) is no
    # MQTT connection: nothing in it can be judged.
    return [_connection(audit, record_at, options) for audit in audits if audit.total.stream]


def flow_segments(table: pa.Table) -> Iterator[Segment]:
    """A flow's segments (:data:`RUN_SCHEMA` rows, in order) as Python objects, made a slice of at most
    :data:`RUN_BYTES` at a time as the reassembly takes them: a flow's payload is never held twice over whole
    (the TLS layer holds a bounded part of it, see :data:`~mqttaudit.capture.tls.MAX_WAITING`)."""
    lengths = pc.binary_length(table.column("payload")).to_pylist()
    for first, last in _cuts(lengths, 0, len(lengths)) if lengths else ():
        part = table.slice(first, last - first)
        yield from cast(
            Iterator[Segment], zip(*(part.column(name).to_pylist() for name in SEGMENT_FIELDS), strict=True)
        )


#: Why the bytes of a ``conflict`` row of the gaps table are not judged.
CONFLICT_REASON = reason_tags.reason(
    reason_tags.CONFLICTING,
    "these bytes arrived again with different content; the first copy was kept, and no packet decoded from them is "
    "judged",
)


def _connection(audit: FlowAudit, record_at: dict[int, tuple[str, int]], options: AuditOptions) -> dict[str, Any]:
    capture, _ = record_at.get(audit.first_time, ("", 0))

    def record_of(time: int) -> int | None:
        """The frame number (Wireshark's: 1 for the capture's first record) of the record at ``time``."""
        record = record_at.get(time, (capture, None))[1]
        return None if record is None else frame_number(record)

    judged_flow = connection_flow(capture, audit, record_of)
    connection_id = judged_flow.flow
    server = None if audit.client is None else judged_flow.server
    judged = judge_flow(judged_flow, options.judge_config)
    gaps = Columns(GAP_COLUMNS)

    def add(kind: str, side: int, offset: int, length: int, time_ns: int | None, reason: str) -> None:
        """One row of the gaps table: a byte range of one side, what kind of range it is and why."""
        gaps.add(
            capture=capture,
            flow=connection_id,
            direction=_side(audit, side),
            offset=offset,
            length=length,
            time=None if time_ns is None else time_ns / 1e9,
            kind=GAP_KINDS[kind],
            reason=reason,
        )

    for gap in audit.gaps:
        add("gap", gap.side, gap.offset, gap.length, gap.time, "bytes sent but not captured")
    for conflict in audit.conflicts:
        add("conflict", conflict.side, conflict.offset, conflict.length, conflict.time, CONFLICT_REASON)
    for hole in audit.unassessable:
        add("not_assessable", hole.side, hole.offset, hole.length, None, hole.reason)
    total = audit.total
    connection = judged.connection.data
    return {
        "flow": connection_id,
        "capture": capture,
        "server": server or "unknown",
        "client_id": connection["client_id"][0],
        "transcript": judged.transcript,
        "sources": judged.sources,
        "stream_bytes": total.stream,
        "packet_bytes": total.packets,
        "malformed_bytes": total.malformed,
        "gap_bytes": total.gaps,
        "unassessable_bytes": total.unassessable,
        "conflict_ranges": len(audit.conflicts),
        "conflict_bytes": sum(conflict.length for conflict in audit.conflicts),
        "capped_bytes": audit.capped_bytes,
        "packet_count": len(judged.packets),
        "packets": judged.packets,
        "start": connection["start"][0],
        "end": connection["end"][0],
        "violations": judged.violations,
        "connections": judged.connection,
        "gaps": gaps,
        "not_assessable": judged.not_assessable,
        "lenient": judged.lenient,
    }


def _side(audit: FlowAudit, side: int) -> str:
    direction = audit.direction(side)
    return "unknown" if direction is None else direction.value


# -- stage 3: one shard of one broker -> deliveries and routing findings -----------------------------------------


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
    opened = read_transcripts(options.out_dir, files)
    # Each transcript's bytes are copied out of the mapped file only while it is unpickled.
    key = options.seal_key
    blobs = (
        unseal(key, opened[name].column("transcript" if owned else "sources")[row].as_buffer().to_pybytes())
        for name, row, owned in zip(files, table.column("transcript_row").to_pylist(), mine, strict=True)
    )
    captures = dict(zip(flows, table.column("capture").to_pylist(), strict=True))
    batches, findings, undecided = replay_batches(
        broker, zip(flows, blobs, strict=True), options.judge_config, own, captures=captures
    )
    part = _part_name(hashlib.blake2b(broker.encode(), digest_size=6).hexdigest(), shard)
    names = ("deliveries", "routing_findings", "not_assessable")
    writers = {name: TableWriter(options.out_dir, name, f"{part}-routing") for name in names}
    for batch in batches:
        writers["deliveries"].add(batch)
    writers["routing_findings"].add(findings)
    writers["not_assessable"].add(undecided)
    for writer in writers.values():
        writer.close()
    row = Columns(tuple(REPLAYED_SCHEMA.names))
    row.add(
        broker=broker,
        shard=shard,
        partition=_partition(),
        deliveries=writers["deliveries"].rows,
        routing_findings=len(findings),
        not_assessable=json.dumps(first_reasons(undecided), sort_keys=True),
    )
    return columns_table([row], REPLAYED_SCHEMA)


def first_reasons(rows: Columns) -> dict[str, str]:
    """Rule -> the first reason of the ``not_assessable`` rows."""
    reasons: dict[str, str] = {}
    for rule, reason in zip(rows.data["rule"], rows.data["reason"], strict=True):
        reasons.setdefault(rule, reason)
    return reasons


def flow_judge(options: AuditOptions) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`judge_partition` bound to ``options``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return judge_partition(batches, options)

    return run


def broker_replayer(options: AuditOptions) -> Callable[[pa.Table], pa.Table]:
    """:func:`replay_group` bound to ``options``, with the type hints Spark reads to pick the grouped Arrow API."""

    def run(table: pa.Table) -> pa.Table:
        return replay_group(table, options)

    return run
