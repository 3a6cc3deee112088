"""Plain-Python twins of the few Spark SQL operations the summary and the report data use (group and count, sum,
min, sort), for the local engine (:mod:`.local`), which computes them over the rows of small tables: with Spark's
semantics where they matter (a sum of no value is null; an ascending sort puts nulls first, a descending one last),
so that both engines give the same parts."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

#: Rows as ``DataFrame.collect()`` gives them to :func:`~.bounded.collect_parts`: dictionaries by column.
Rows = list[dict[str, Any]]


def rows_of(table: pa.Table) -> Rows:
    return table.to_pylist()  # type: ignore[no-any-return]


def where(rows: Iterable[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> Rows:
    return [row for row in rows if test(row)]


def groups(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> dict[tuple[Any, ...], Rows]:
    """The rows by the values of ``keys`` (``groupBy``), in the order each group first appears."""
    found: dict[tuple[Any, ...], Rows] = {}
    for row in rows:
        found.setdefault(tuple(row[key] for key in keys), []).append(row)
    return found


def counted(rows: Iterable[dict[str, Any]], keys: Sequence[str]) -> Rows:
    """``groupBy(*keys).count()``."""
    return [dict(zip(keys, key, strict=True)) | {"count": len(group)} for key, group in groups(rows, keys).items()]


def total(values: Iterable[Any]) -> Any:
    """``F.sum``: the sum of the values that are not null; null when there is none."""
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def least(values: Iterable[Any]) -> Any:
    """``F.min``: the least value that is not null; null when there is none."""
    present = [value for value in values if value is not None]
    return min(present) if present else None


def greatest(values: Iterable[Any]) -> Any:
    """``F.max``."""
    present = [value for value in values if value is not None]
    return max(present) if present else None


def ascending(value: Any) -> tuple[bool, Any]:
    """A sort key that puts nulls first, as Spark's ascending order does."""
    return (value is not None, value)


def ordered(rows: Iterable[dict[str, Any]], *keys: str) -> Rows:
    """``orderBy(*keys)``: each key a column, ascending (nulls first), or ``-column`` descending (nulls last)."""
    result = list(rows)
    for key in reversed(keys):  # stable sorts, the last key first
        result.sort(key=_by(key.lstrip("-")), reverse=key.startswith("-"))
    return result


def _by(name: str) -> Callable[[dict[str, Any]], tuple[bool, Any]]:
    def key(row: dict[str, Any]) -> tuple[bool, Any]:
        return ascending(row[name])

    return key
