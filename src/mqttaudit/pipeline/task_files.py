"""The files the tasks write themselves: a table's Parquet file per task, and the transcripts the judging tasks hand
to the routing replay.

The tasks write Parquet themselves (one file per task attempt and table, published when the task completes) rather than
returning nested rows for Spark to convert, cache and explode: that conversion cost the JVM more CPU than the
judging itself cost Python, and its cache grew with the capture.
"""

from __future__ import annotations

import posixpath
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from mqttaudit import locations

from .conversations import Columns
from .tables import TRANSCRIPT_SCHEMA, table_schema

if TYPE_CHECKING:
    from pyspark import TaskContext
    from pyspark.accumulators import Accumulator


class FileWriter(Protocol):
    """What a task file writes through: pyarrow's Parquet writer and Arrow IPC file writer alike."""

    def write_table(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


#: What the tasks report of the files they published: (slot, entry), the entry a file's path in the output directory
#: (``violations/part-00003-t17.parquet``), its slot the same without the task attempt (``violations/part-00003``).
Published = list[tuple[str, str]]


class TaskFile:
    """The rows one task writes to one file of a folder of the output directory (a local folder or a URL, see
    :mod:`mqttaudit.locations`), written in batches as they come. The file is written once, under a name unique to
    the task attempt, and reported to ``published`` when complete: a retried task writes a file of its own, and
    the driver keeps the files of the attempts Spark accepted (:func:`accepted_entries`, :func:`remove_unaccepted`).
    On this machine's filesystem the file is written under a hidden name (Spark and pyarrow skip names starting
    with '.') and renamed when complete; an object store has no rename, and shows an object only once its upload
    is complete. ``open_writer`` opens the format (Parquet, Arrow IPC) on a stream for a schema."""

    BATCH = 65536

    def __init__(
        self,
        directory: str,
        folder: str,
        name: str,
        schema: pa.Schema,
        open_writer: Callable[[Any, pa.Schema], FileWriter],
        published: Accumulator[Published] | None = None,
    ) -> None:
        self.schema = schema
        attempt = _attempt()
        stem, dot, suffix = name.rpartition(".")
        self.name = name if attempt is None else f"{stem}-t{attempt}{dot}{suffix}"
        self.rows = 0
        self._slot = (f"{folder}/{name}", f"{folder}/{self.name}")
        self._filesystem, root = locations.resolve(directory)
        self._path = posixpath.join(root, folder, self.name)
        self._renamed = locations.renames(self._filesystem)
        self._written = posixpath.join(root, folder, f".{self.name}.tmp") if self._renamed else self._path
        self._published = published
        self._open_writer = open_writer
        self._pending: list[Columns] = []
        self._pending_rows = 0
        self._stream: Any = None
        self._writer: FileWriter | None = None

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
            self._stream = self._filesystem.open_output_stream(self._written)
            self._writer = self._open_writer(self._stream, self.schema)
        if self._pending:
            self._writer.write_table(columns_table(self._pending, self.schema))
        self._pending, self._pending_rows = [], 0

    def close(self) -> None:
        """Writes what is left and publishes the file (nothing for a task that had no row)."""
        if self.rows:
            self._flush()
        if self._writer is not None:
            self._writer.close()
            self._stream.close()
            if self._renamed:
                self._filesystem.move(self._written, self._path)
            if self._published is not None:
                self._published.add([self._slot])


def _task() -> TaskContext | None:
    """The running Spark task; None outside Spark: in the local engine (:mod:`.local`), which never imports pyspark
    (a Spark worker has always imported it)."""
    pyspark = sys.modules.get("pyspark")
    context: TaskContext | None = None if pyspark is None else pyspark.TaskContext.get()
    return context


def _attempt() -> int | None:
    """The id of the running task attempt (unique in the Spark application), None outside Spark."""
    context = _task()
    return None if context is None else context.taskAttemptId()


class TableWriter(TaskFile):
    """The rows one task adds to one table, as one Parquet file in the table's folder (row groups of
    :attr:`BATCH` rows)."""

    def __init__(self, directory: str, table: str, part: str, published: Accumulator[Published] | None = None) -> None:
        super().__init__(directory, table, f"part-{part}.parquet", table_schema(table), _parquet_writer, published)


def _parquet_writer(stream: Any, schema: pa.Schema) -> FileWriter:
    writer: FileWriter = pq.ParquetWriter(stream, schema, compression="snappy")
    return writer


#: The folder of the output directory where the judging tasks leave the transcripts for the routing replay (the
#: audit removes it when the replay is done). On an object store it is a prefix every executor reaches.
TRANSCRIPTS_DIR = "_transcripts"


#: The key of a transcript file's schema metadata that gives the rows of each of its record batches but the last.
ROWS_PER_BATCH = b"mqttaudit.rows_per_batch"


class TranscriptWriter(TaskFile):
    """The heads and pieces of the transcripts one judging task hands to the sliced routing replay (:mod:`.slicing`),
    as one Arrow IPC file in the output directory that the replay tasks read a record batch at a time
    (:func:`transcript_blobs`, :class:`TranscriptFiles`): the blobs (a large share of the audit's bytes) never pass
    through the JVM. Rows are added one at a time, so every record batch but the last holds exactly :attr:`BATCH`
    rows, few of them, since a piece is read alone; the file's schema says so (:data:`ROWS_PER_BATCH`), and a
    row's batch is found without reading another."""

    BATCH = 16

    def __init__(self, directory: str, part: str, published: Accumulator[Published] | None = None) -> None:
        schema = TRANSCRIPT_SCHEMA.with_metadata({ROWS_PER_BATCH: str(self.BATCH).encode()})
        super().__init__(directory, TRANSCRIPTS_DIR, f"part-{part}.arrow", schema, pa.ipc.new_file, published)

    def add_transcript(self, transcript: bytes) -> int:
        """Adds one blob (a connection's head or one of its pieces); returns its row in the file."""
        row = Columns(tuple(TRANSCRIPT_SCHEMA.names))
        row.add(transcript=transcript)
        self.add(row)
        return self.rows - 1


def transcript_blobs(directory: str, wanted: Sequence[tuple[str, int, str]]) -> list[pa.Buffer]:
    """The blobs ``wanted`` ((file name, row, column) in the transcript files of an audit's output directory), in
    order. Only the record batches that hold a wanted row are read: memory-mapped on this machine's filesystem (the
    blobs are slices of the mapping), through ranged reads from any other (each wanted blob copied out, its batch
    released once read), so a replay task holds what it needs of a file, not the file."""
    filesystem, root = locations.resolve(directory)
    mapped = locations.renames(filesystem)
    by_file: dict[str, list[int]] = {}
    for index, (name, _row, _column) in enumerate(wanted):
        by_file.setdefault(name, []).append(index)
    blobs: list[pa.Buffer] = [pa.py_buffer(b"")] * len(wanted)
    for name, indices in by_file.items():
        path = posixpath.join(root, TRANSCRIPTS_DIR, name)
        rows = [(wanted[index][1], wanted[index][2]) for index in indices]
        if mapped:  # the mapping stays open as long as a blob refers to it
            found = read_rows(pa.memory_map(path), rows, copy=False)
        else:
            with filesystem.open_input_file(path) as source:
                found = read_rows(source, rows, copy=True)
        for index, blob in zip(indices, found, strict=True):
            blobs[index] = blob
    return blobs


def read_rows(source: Any, rows: Sequence[tuple[int, str]], *, copy: bool) -> list[pa.Buffer]:
    """The blobs at ``rows`` ((row, column)) of one transcript file opened as ``source`` (random access), in
    order, reading each record batch that holds one once, and no other; ``copy``: each blob copied out of its
    batch (which is then released), else a slice of it."""
    reader = pa.ipc.open_file(source)
    return _read_rows(reader, _rows_per_batch(reader), rows, copy=copy)


def _read_rows(
    reader: pa.ipc.RecordBatchFileReader, per_batch: int, rows: Sequence[tuple[int, str]], *, copy: bool
) -> list[pa.Buffer]:
    """:func:`read_rows` from a transcript file's open reader, whose record batches hold ``per_batch`` rows."""
    positions: dict[int, list[int]] = {}
    for position, (row, _column) in enumerate(rows):
        positions.setdefault(row // per_batch, []).append(position)
    found: list[pa.Buffer] = [pa.py_buffer(b"")] * len(rows)
    for number in sorted(positions):
        batch = _batch(reader, number, per_batch)
        for position in positions[number]:
            row, column = rows[position]
            blob = batch.column(column)[row - number * per_batch].as_buffer()
            found[position] = pa.py_buffer(blob.to_pybytes()) if copy else blob
    return found


def _rows_per_batch(reader: pa.ipc.RecordBatchFileReader) -> int:
    """The rows of each record batch but the last of a transcript file (:data:`ROWS_PER_BATCH`)."""
    per_batch = int((reader.schema.metadata or {}).get(ROWS_PER_BATCH, 0))
    if per_batch <= 0:
        raise ValueError(f"a transcript file without its rows per record batch ({ROWS_PER_BATCH.decode()})")
    return per_batch


def _batch(reader: pa.ipc.RecordBatchFileReader, number: int, per_batch: int) -> pa.RecordBatch:
    """Record batch ``number`` of a transcript file, checked to hold the rows the file says."""
    batch = reader.get_batch(number)
    if number < reader.num_record_batches - 1 and batch.num_rows != per_batch:
        raise ValueError(f"record batch {number} of a transcript file holds {batch.num_rows} rows, not {per_batch}")
    return batch


class TranscriptFiles:
    """The transcript files of an audit's output directory, each opened once and kept open, read one blob at a
    time (as the sliced replay reads its pieces, one after another from many files): each read reads the record
    batch that holds the blob and copies the blob out (not memory-mapped: what was read is not held)."""

    def __init__(self, directory: str) -> None:
        self._filesystem, self._root = locations.resolve(directory)
        self._open: dict[str, tuple[Any, pa.ipc.RecordBatchFileReader, int]] = {}

    def blob(self, name: str, row: int, column: str) -> bytes:
        """The blob at ``row`` and ``column`` of transcript file ``name``."""
        if name not in self._open:
            source = self._filesystem.open_input_file(posixpath.join(self._root, TRANSCRIPTS_DIR, name))
            reader = pa.ipc.open_file(source)
            self._open[name] = (source, reader, _rows_per_batch(reader))
        _, reader, per_batch = self._open[name]
        (blob,) = _read_rows(reader, per_batch, [(row, column)], copy=False)
        data: bytes = blob.to_pybytes()
        return data

    def close(self) -> None:
        for source, _, _ in self._open.values():
            source.close()
        self._open.clear()


def accepted_entries(published: Published) -> set[str]:
    """The files to keep of those the accepted task attempts published: one attempt per slot (two attempts of one
    task are both accepted when Spark computes a lost partition again; their files hold the same rows)."""
    chosen: dict[str, str] = {}
    for slot, entry in sorted(published):
        chosen.setdefault(slot, entry)
    return set(chosen.values())


def remove_unaccepted(directory: str, folders: Iterable[str], accepted: set[str]) -> list[str]:
    """Removes from ``folders`` of the output directory every file no accepted task attempt published (those of
    failed attempts, written whole or in part) and returns them, so that each table holds each row once."""
    removed = []
    for folder in folders:
        for name in locations.files_under(locations.join(directory, folder)):
            entry = f"{folder}/{name}"
            if entry not in accepted:
                locations.delete_file(locations.join(directory, entry))
                removed.append(entry)
    return removed


def ensure_readable(directory: str, table: str) -> None:
    """A table no task wrote a row to still gets a file with its columns (in ``directory``, the table's folder), so
    that it reads as an empty table."""
    if not any(name.endswith(".parquet") for name in locations.files_under(directory)):
        filesystem, path = locations.resolve(directory)
        pq.write_table(
            table_schema(table).empty_table(), posixpath.join(path, "part-empty.parquet"), filesystem=filesystem
        )


def columns_table(parts: Sequence[Columns], schema: pa.Schema) -> pa.Table:
    """The rows of several column sets, one after the other, as one table, built column by column."""
    arrays = [pa.array([v for part in parts for v in part.data[field.name]], type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def part_name(*keys: object) -> str:
    """A file name part unique to this task's partition (stable across retries of the same task)."""
    return "-".join([f"{partition():05d}", *(str(key) for key in keys)])


def partition() -> int:
    context = _task()
    return 0 if context is None else context.partitionId()
