"""The rows of an audit's ``violations`` and ``routing_findings`` Parquet tables (in a local folder or at a URL),
read batch by batch with pyarrow (never a whole table, never through Spark's driver), each with the capture it was
found in and the endpoints of its connection."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import locations

if TYPE_CHECKING:  # pyarrow comes with the spark extra; the base install imports this package without it
    import pyarrow as pa
    import pyarrow.compute as pc

#: Rows turned into Python values at a time.
BATCH_ROWS = 8192
VIOLATION = "violation"
ROUTING = "routing"


def tables_present(out_dir: Path | str) -> bool:
    """Whether ``out_dir`` (a local folder or a URL) holds the finding tables an audit writes."""
    return _is_folder(locations.join(out_dir, "violations")) and _is_folder(locations.join(out_dir, "routing_findings"))


def _is_folder(location: str) -> bool:
    import pyarrow.fs as pafs

    filesystem, path = locations.resolve(location)
    return bool(filesystem.get_file_info(path).type == pafs.FileType.Directory)


def batch_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of one batch of a table, as dicts."""
    names = batch.schema.names
    values = [column_values(batch.column(i)) for i in range(batch.num_columns)]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


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


def connections_of_flows(directory: Path | str, flows: Iterable[str]) -> dict[str, tuple[str | None, str, str]]:
    """Flow id -> (capture, client, server), from the ``connections`` table, for the given flows only (the table is
    scanned, not held)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(sorted(set(flows)), pa.string())
    if not len(wanted) or not _is_folder(str(directory)):
        return {}
    found: dict[str, tuple[str | None, str, str]] = {}
    for batch in _batches(directory, ["flow", "capture", "client", "server"], pc.field("flow").isin(wanted)):
        columns = [column_values(batch.column(i)) for i in range(4)]
        for flow, capture, client, server in zip(*columns, strict=True):
            if flow is not None:
                found.setdefault(flow, (capture, client, server))
    return found


def finding_rows(out_dir: Path | str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event type, row)`` for every violation, then every routing finding, each with the ``client`` and
    ``server`` endpoints of its connection from the connections table (None when the table does not name it); a
    routing finding (which names the subscriber's connection) with that connection's ``capture`` too."""
    connections = locations.join(out_dir, "connections")
    for event_type, table in ((VIOLATION, "violations"), (ROUTING, "routing_findings")):
        for batch in _batches(locations.join(out_dir, table), None):
            rows = batch_rows(batch)
            known = connections_of_flows(connections, (r["flow"] for r in rows if r.get("flow") is not None))
            for row in rows:
                capture, client, server = known.get(row.get("flow") or "", (None, None, None))
                found = {"capture": capture} if event_type == ROUTING else {}  # a violation row names its own
                yield event_type, {**found, **row, "client": client, "server": server}


def _batches(
    directory: Path | str, columns: list[str] | None, where: pc.Expression | None = None
) -> Iterator[pa.RecordBatch]:
    import pyarrow.dataset as ds

    if not _is_folder(str(directory)):
        return
    filesystem, path = locations.resolve(directory)
    dataset = ds.dataset(path, filesystem=filesystem, format="parquet")
    if columns is not None and not set(columns) <= set(dataset.schema.names):
        return  # an empty folder (no file, so no columns) holds no rows
    yield from dataset.to_batches(columns=columns, filter=where, batch_size=BATCH_ROWS)
