"""The files the tasks write themselves: a table's Parquet file per task, and the transcripts the judging tasks hand
to the routing replay.

The tasks write Parquet themselves (one file per task and table, published when the task completes) rather than
returning nested rows for Spark to convert, cache and explode: that conversion cost the JVM more CPU than the
judging itself cost Python, and its cache grew with the capture.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import TaskContext

from .conversations import Columns
from .tables import TRANSCRIPT_SCHEMA, table_schema


class FileWriter(Protocol):
    """What a task file writes through: pyarrow's Parquet writer and Arrow IPC file writer alike."""

    def write_table(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


class TaskFile:
    """The rows one task writes to one file of a folder of the output directory: written in batches as they
    come, under a hidden name until the task completes (Spark and pyarrow skip names starting with '.'), then
    renamed; a retried task overwrites its own file, so a row is never there twice. ``open_writer`` opens the
    format (Parquet, Arrow IPC) at a path for a schema."""

    BATCH = 65536

    def __init__(
        self,
        directory: str,
        folder: str,
        name: str,
        schema: pa.Schema,
        open_writer: Callable[[str, pa.Schema], FileWriter],
    ) -> None:
        self.schema = schema
        self.name = name
        self.rows = 0
        self._path = posixpath.join(directory, folder, name)
        self._hidden = posixpath.join(directory, folder, f".{name}.tmp")
        self._open_writer = open_writer
        self._pending: list[Columns] = []
        self._pending_rows = 0
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


def _parquet_writer(path: str, schema: pa.Schema) -> FileWriter:
    writer: FileWriter = pq.ParquetWriter(path, schema, compression="snappy")
    return writer


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


def part_name(*keys: object) -> str:
    """A file name part unique to this task's partition (stable across retries of the same task)."""
    return "-".join([f"{partition():05d}", *(str(key) for key in keys)])


def partition() -> int:
    context = TaskContext.get()
    return 0 if context is None else context.partitionId()
