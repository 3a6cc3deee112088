"""Stage 1, reading: :func:`read_segments` (``mapInArrow`` over chunk descriptors) reads one record-aligned chunk of a
capture, keeps the TCP segments of MQTT flows (a broker port on either side), gathered in runs per flow, and reports
what it skipped (the other TCP flows counted per port), a truncated tail, records skipped as corrupt and the corrupt
header it stopped at (with their offsets) as a note row.

A task holds one chunk, never a whole file. (Which ports are MQTT ports: :mod:`.detection`.)
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mqttaudit.capture import CaptureError, Chunk, ChunkReader, frame_number, native, read_chunk
from mqttaudit.capture.flows import OtherTcp, SegmentRow, broker_segments
from mqttaudit.capture.native import Columns, NativeChunk
from mqttaudit.capture.reader import READ_SIZE

from . import sources
from .options import AuditOptions
from .tables import RUN_SCHEMA, SEGMENT_SCHEMA
from .worker_gc import tune_gc

BATCH_ROWS = 8192
#: Segments and payload bytes of one run at most (a longer stretch of one flow in one chunk becomes several runs;
#: loopback captures hold segments of up to 64 KB).
RUN_SEGMENTS = 16384
RUN_BYTES = 8 * 1024 * 1024
#: Bytes of runs per batch handed to Spark at most.
BATCH_BYTES = 16 * 1024 * 1024
#: The segments of a chunk as the reading task gathers them: the run columns and the id of each one's flow (an
#: index into :attr:`Runs.names`).
ID_PIECE_SCHEMA = pa.schema([("flow", pa.int32()), *RUN_SCHEMA])


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
            yield from chunk_segments(capture, path, chunk, options)


class Runs:
    """The segments of one chunk gathered per flow into runs (:data:`SEGMENT_SCHEMA` rows).

    Segments are turned into Arrow data every :data:`BATCH_ROWS` (so that the chunk's segments do not stay alive
    as Python objects for the collector to walk); when the chunk ends they are ordered by flow and record, and
    each flow's segments become runs of at most :data:`RUN_SEGMENTS` and :data:`RUN_BYTES`, one serialized record
    batch each.

    Pieces carry a flow id (an index into :attr:`names`) rather than the flow's name: ordering by the names' rank
    and the record sorts integers, and a name is written once per run."""

    def __init__(self, capture: str, names: list[str] | None = None) -> None:
        self.capture = capture
        #: The flows' names by id: the native chunk's (:attr:`~mqttaudit.capture.native.NativeChunk.names`), or
        #: those :meth:`extend` met.
        self.names: list[str] = [] if names is None else names
        self._ids: dict[str, int] = {}
        self._rows: list[SegmentRow] = []
        self._pieces: list[pa.RecordBatch] = []

    def extend(self, rows: list[SegmentRow]) -> None:
        """Adds segments as :func:`~mqttaudit.capture.flows.broker_segments` hands them on."""
        self._rows += rows
        if len(self._rows) >= BATCH_ROWS:
            self._piece()

    def _piece(self) -> None:
        columns = list(zip(*self._rows, strict=True))
        ids = self._ids
        for name in dict.fromkeys(columns[0]):
            if name not in ids:
                ids[name] = len(self.names)
                self.names.append(name)
        columns[0] = tuple(ids[name] for name in columns[0])
        arrays = [pa.array(values, type=field.type) for values, field in zip(columns, ID_PIECE_SCHEMA, strict=True)]
        self._pieces.append(pa.RecordBatch.from_arrays(arrays, schema=ID_PIECE_SCHEMA))
        self._rows = []

    def add(self, piece: pa.RecordBatch) -> None:
        """Adds segments already in Arrow form (:data:`ID_PIECE_SCHEMA`), as the native path reads them."""
        if piece.num_rows:
            self._pieces.append(piece)

    def finish(self) -> Iterator[pa.RecordBatch]:
        """The chunk's runs, in batches of at most :data:`BATCH_BYTES` (nothing when it had no segment)."""
        if self._rows:
            self._piece()
        if not self._pieces:
            return
        table = pa.Table.from_batches(self._pieces, schema=ID_PIECE_SCHEMA)
        self._pieces = []
        rank = [0] * len(self.names)
        for position, flow in enumerate(sorted(range(len(self.names)), key=self.names.__getitem__)):
            rank[flow] = position
        order = pa.table({"rank": pa.array(rank, pa.int32()).take(table.column("flow")), "record": table["record"]})
        table = table.take(pc.sort_indices(order, sort_keys=[("rank", "ascending"), ("record", "ascending")]))
        flows = pc.run_end_encode(table.column("flow").combine_chunks())
        segments = table.select(RUN_SCHEMA.names).combine_chunks()
        lengths = pc.binary_length(segments.column("payload"))
        totals = pc.cumulative_sum(lengths).to_pylist()
        done = _segment_columns()
        size = start = 0
        for flow, end in zip(flows.values.to_pylist(), flows.run_ends.to_pylist(), strict=True):
            payload = totals[end - 1] - (totals[start - 1] if start else 0)
            if end - start <= RUN_SEGMENTS and payload <= RUN_BYTES:
                pieces: Iterable[tuple[int, int]] = ((start, end),)  # the whole flow is one run
            else:
                pieces = cuts(lengths.slice(start, end - start).to_pylist(), 0, end - start, start)
            for first, last in pieces:
                run = segments.slice(first, last - first).to_batches()[0]
                blob = run.serialize().to_pybytes()
                done["flow"].append(self.names[flow])
                done["capture"].append(self.capture)
                done["first_record"].append(run.column("record")[0].as_py())
                done["first_time_ns"].append(run.column("time_ns")[0].as_py())
                done["segments"].append(blob)
                done["note"].append(None)
                size += len(blob)
                if size >= BATCH_BYTES:
                    yield _batch(done)
                    done, size = _segment_columns(), 0
            start = end
        if done["flow"]:
            yield _batch(done)


def cuts(lengths: list[int], start: int, end: int, shift: int = 0) -> Iterator[tuple[int, int]]:
    """Segments ``[start, end)`` of one flow cut into runs of at most :data:`RUN_SEGMENTS` segments and
    :data:`RUN_BYTES` of payload (a longer segment is a run of its own); each run's bounds plus ``shift``."""
    first, size = start, 0
    for index in range(start, end):
        if index > first and (index - first >= RUN_SEGMENTS or size + lengths[index] > RUN_BYTES):
            yield first + shift, index + shift
            first, size = index, 0
        size += lengths[index]
    yield first + shift, end + shift


def decode_run(capture: str, blob: pa.Buffer) -> pa.RecordBatch:
    """One run's segments (:data:`RUN_SCHEMA`) with the capture that holds them as a last column."""
    batch = pa.ipc.read_record_batch(blob, RUN_SCHEMA)
    return batch.append_column("capture", pa.array([capture] * batch.num_rows, type=pa.string()))


def chunk_segments(
    capture: str,
    path: str,
    chunk: Chunk,
    options: AuditOptions,
    read_size: int = READ_SIZE,
    native_path: bool | None = None,
) -> Iterator[pa.RecordBatch]:
    """The runs of MQTT segments of one chunk, then its note. ``native_path`` picks the path (None: the native one
    when :func:`~mqttaudit.capture.native.available`); both give the same batches."""
    if native_path is None:
        native_path = native.available()
    skipped: Counter[str] = Counter()
    other = OtherTcp()
    kept = 0
    opener = sources.opener(path)
    native_chunk = NativeChunk(opener, chunk, options.broker_ports, read_size=read_size) if native_path else None
    reader = read_chunk(opener, chunk, read_size=read_size) if native_chunk is None else native_chunk.reader
    runs = Runs(capture, None if native_chunk is None else native_chunk.names)
    error = None
    try:
        if native_chunk is None:
            for rows in broker_segments(reader, options.broker_ports, skipped, BATCH_ROWS, other):
                kept += len(rows)
                runs.extend(rows)
        else:
            for columns in native_chunk.columns():
                kept += columns.rows
                runs.add(native_piece(columns))
    except CaptureError as exc:
        error = {"offset": exc.offset, "reason": exc.detail}
    except (OSError, sources.AuditInputError) as exc:
        error = {"offset": chunk.start, "reason": f"cannot read: {exc}"}
    if native_chunk is not None:
        skipped.update(native_chunk.skipped())
        other = native_chunk.other_tcp()
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


def native_piece(columns: Columns) -> pa.RecordBatch:
    """The segments of one native read as an :data:`ID_PIECE_SCHEMA` batch, built on the extension's buffers."""
    rows = columns.rows

    def fixed(kind: pa.DataType, data: bytes) -> pa.Array:
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)])

    def binary(offsets: bytes, values: bytes) -> pa.Array:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(values)])

    arrays = [
        fixed(pa.int32(), columns.flow),
        fixed(pa.int64(), columns.record),
        fixed(pa.int64(), columns.time_ns),
        binary(columns.src_ip_offsets, columns.src_ip),
        fixed(pa.int32(), columns.src_port),
        binary(columns.dst_ip_offsets, columns.dst_ip),
        fixed(pa.int32(), columns.dst_port),
        fixed(pa.int64(), columns.seq),
        fixed(pa.int64(), columns.ack),
        fixed(pa.int32(), columns.flags),
        binary(columns.payload_offsets, columns.payload),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ID_PIECE_SCHEMA)


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
