"""Several small results of Spark in one query: the summary's figures and the report's data are each a handful of
aggregates and capped samples (a few rows each, whatever the size of the fleet), so they are computed together in
one Spark query rather than one query (and a Spark job or more) each, which is what an audit of a small capture
spent most of its time on.

Each part's rows cross to the driver as JSON text in one column of a union, numbered in the part's own order.
"""

from __future__ import annotations

import json
import math
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

#: What Spark's JSON writer makes of a float that JSON cannot hold.
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def collect_parts(parts: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each of ``parts`` (each a bounded result: an aggregate, a capped sample) as
    ``DataFrame.collect()`` gives them, as dictionaries by column, in the part's order; from one Spark query."""
    if not parts:
        return {}
    names = list(parts)
    numbered = [
        frame.select(
            F.lit(index).alias("part"),
            # After the part's own sort, the ids rise with the order the part's rows would be collected in.
            F.monotonically_increasing_id().alias("n"),
            F.to_json(F.struct(*[F.col(f"`{name}`") for name in frame.columns]), {"ignoreNullFields": "false"}).alias(
                "row"
            ),
        )
        for index, frame in enumerate(parts[name] for name in names)
    ]
    union = reduce(DataFrame.unionByName, numbered)
    floats = [
        {field.name for field in parts[name].schema.fields if isinstance(field.dataType, DoubleType | FloatType)}
        for name in names
    ]
    rows: dict[str, list[tuple[int, dict[str, Any]]]] = {name: [] for name in names}
    for row in union.collect():
        part = int(row["part"])
        values: dict[str, Any] = json.loads(row["row"])
        for column in floats[part]:
            value = values.get(column)
            if isinstance(value, str):
                values[column] = _NON_FINITE.get(value, value)
        rows[names[part]].append((int(row["n"]), values))
    return {name: [values for _, values in sorted(found, key=lambda item: item[0])] for name, found in rows.items()}
