"""The rows of an audit's ``violations`` and ``routing_findings`` Parquet tables, read batch by batch with pyarrow
(never a whole table, never through Spark's driver), each with the capture it was found in."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyarrow comes with the spark extra; the base install imports this package without it
    import pyarrow as pa
    import pyarrow.compute as pc

#: Rows turned into Python values at a time.
BATCH_ROWS = 8192
VIOLATION = "violation"
ROUTING = "routing"


def tables_present(out_dir: Path | str) -> bool:
    """Whether ``out_dir`` holds the finding tables an audit writes."""
    out = Path(out_dir)
    return (out / "violations").is_dir() and (out / "routing_findings").is_dir()


def table_rows(directory: Path, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The rows of the Parquet files under ``directory`` (hidden and ``_`` names skipped, as Spark writes them),
    as dicts, :data:`BATCH_ROWS` at a time."""
    for batch in _batches(directory, columns):
        names = batch.schema.names
        values = [column_values(batch.column(i)) for i in range(batch.num_columns)]
        for row in zip(*values, strict=True):
            yield dict(zip(names, row, strict=True))


def column_values(column: pa.Array) -> list[Any]:
    """The column as Python values. A string column holding bytes that are not UTF-8 (a writer that kept the wire's
    bytes) is read with each ill-formed byte as ``\\xNN``, the rule of the audit's own writers, rather than failing."""
    import pyarrow as pa

    try:
        values: list[Any] = column.to_pylist()
        return values
    except UnicodeDecodeError:
        raw = column.cast(pa.binary()).to_pylist()
        return [None if value is None else value.decode("utf-8", "backslashreplace") for value in raw]


def captures_of_flows(directory: Path, flows: Iterable[str]) -> dict[str, str]:
    """Flow id -> capture, from the ``connections`` table, for the given flows only (the table is scanned, not
    held)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(sorted(set(flows)), pa.string())
    if not len(wanted) or not directory.is_dir():
        return {}
    found: dict[str, str] = {}
    for batch in _batches(directory, ["flow", "capture"], pc.field("flow").isin(wanted)):
        for flow, capture in zip(column_values(batch.column(0)), column_values(batch.column(1)), strict=True):
            if flow is not None and capture is not None:
                found.setdefault(flow, capture)
    return found


def finding_rows(out_dir: Path | str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event type, row)`` for every violation, then every routing finding (with the ``capture`` of its flow,
    None when the connections table does not name it)."""
    out = Path(out_dir)
    for row in table_rows(out / "violations"):
        yield VIOLATION, row
    # A routing finding names the subscriber's connection; its capture is in the connections table.
    flows = {row["flow"] for row in table_rows(out / "routing_findings", ["flow"]) if row["flow"] is not None}
    captures = captures_of_flows(out / "connections", flows)
    for row in table_rows(out / "routing_findings"):
        yield ROUTING, {"capture": captures.get(row.get("flow") or ""), **row}


def _batches(
    directory: Path, columns: list[str] | None, where: pc.Expression | None = None
) -> Iterator[pa.RecordBatch]:
    import pyarrow.dataset as ds

    if not directory.is_dir():
        return
    dataset = ds.dataset(str(directory), format="parquet")
    if columns is not None and not set(columns) <= set(dataset.schema.names):
        return  # an empty folder (no file, so no columns) holds no rows
    yield from dataset.to_batches(columns=columns, filter=where, batch_size=BATCH_ROWS)
