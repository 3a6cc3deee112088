"""The audit's tables read back (for the summary and the report data). Into Spark: Spark's own Parquet reader on this
machine's filesystem; on any other filesystem the tasks read the files through ``pyarrow.fs``, one task per file
(pyspark ships no Hadoop connector for ``s3a://``, and nothing of a table passes through the driver). In the local
engine's process (:func:`read_arrow_table`): pyarrow, on any filesystem."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from mqttaudit import locations

from .tables import PATH_SCHEMA, ddl, table_schema

#: Rows read from a file at a time.
READ_BATCH_ROWS = 8192

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_table(session: SparkSession, out_dir: str | os.PathLike[str], table: str) -> DataFrame:
    """The rows of ``table`` of the audit whose output is ``out_dir`` (a local folder or a URL)."""
    schema = table_schema(table)
    if not locations.is_remote(out_dir):
        # With its declared schema: Spark need not infer it from the files' footers first.
        return session.read.schema(ddl(schema)).parquet(str(locations.local_path(out_dir) / table))
    folder = locations.join(out_dir, table)
    files = [locations.join(folder, name) for name in locations.files_under(folder) if _is_part(name)]
    paths = session.createDataFrame(
        session.sparkContext.parallelize([(path,) for path in files], max(len(files), 1)), ddl(PATH_SCHEMA)
    )
    return paths.mapInArrow(partial(read_parquet_files, columns=schema.names), ddl(schema))


def read_arrow_table(out_dir: str | os.PathLike[str], table: str) -> pa.Table:
    """The rows of ``table`` of the audit whose output is ``out_dir``, as one Arrow table (the local engine: a small
    audit's tables), its files read in the order of their names."""
    folder = locations.join(out_dir, table)
    filesystem, path = locations.resolve(folder)
    schema = table_schema(table)
    parts = [
        pq.read_table(posixpath.join(path, name), filesystem=filesystem, schema=schema)
        for name in locations.files_under(folder)
        if _is_part(name)
    ]
    return pa.concat_tables(parts) if parts else table_schema(table).empty_table()


def _is_part(name: str) -> bool:
    """A table's file: a Parquet file directly in its folder, not hidden (as Spark and pyarrow read a folder)."""
    return "/" not in name and not name.startswith((".", "_")) and name.endswith(".parquet")


def read_parquet_files(batches: Iterator[pa.RecordBatch], *, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The rows of the Parquet files named in ``batches`` (:data:`~.tables.PATH_SCHEMA`), batch by batch."""
    for batch in batches:
        for path in batch.column("path").to_pylist():
            filesystem, inside = locations.resolve(path)
            with filesystem.open_input_file(inside) as source:
                yield from pq.ParquetFile(source).iter_batches(batch_size=READ_BATCH_ROWS, columns=columns)
