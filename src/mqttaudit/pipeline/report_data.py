"""The bounded data the audit reports are written from, aggregated by Spark from the Parquet tables: counts per
rule and side, a time series, the top offending clients, a few sample rows per rule, routing findings, connections
and gaps (each list capped)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mqttaudit import __version__
from mqttaudit.report import AuditReportData

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TIME_BUCKETS = 60


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [{k: _clean(v) for k, v in row.asDict().items()} for row in frame.collect()]


def report_data(
    session: SparkSession, out_dir: Path, summary: dict[str, Any], *, samples: int, rows: int
) -> AuditReportData:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def table(name: str) -> DataFrame:
        return session.read.parquet(str(out_dir / name))

    violations = table("violations")
    by_rule = _rows(
        violations.groupBy("rule", "level", "section", "actor", "origin")
        .agg(F.count("*").alias("count"), F.min("time").alias("first_time"))
        .withColumn("summary", F.lit(""))
        .orderBy(F.desc("count"), "rule")
    )
    span = summary.get("time_span") or [None, None]
    start, end = span[0], span[1]
    bucket = 0.0
    over_time: list[dict[str, Any]] = []
    if start is not None and end is not None:
        bucket = max((end - start) / TIME_BUCKETS, 1e-3)
        over_time = _rows(
            violations.where("time is not null")
            .withColumn("bucket_start", F.floor((F.col("time") - F.lit(start)) / bucket) * bucket + F.lit(start))
            .groupBy("bucket_start", "actor")
            .count()
            .orderBy("bucket_start", "actor")
        )
    connections = table("connections")
    per_connection = violations.groupBy("flow").agg(F.count("*").alias("found"))
    top_clients = _rows(
        connections.join(per_connection, "flow", "left")
        .withColumn("client_key", F.coalesce("client_id", "client"))
        .groupBy(F.col("client_key").alias("client"))
        .agg(
            F.first("client_id", ignorenulls=True).alias("client_id"),
            F.sum(F.coalesce("found", F.lit(0))).alias("violations"),
            F.count("*").alias("connections"),
        )
        .where("violations > 0")
        .orderBy(F.desc("violations"))
        .limit(20)
    )
    ranked = violations.withColumn(
        "n", F.row_number().over(Window.partitionBy("rule", "actor").orderBy("time", "flow", "event"))
    )
    violation_samples = _rows(ranked.where(F.col("n") <= samples).drop("n").orderBy("rule", "actor", "time"))
    routing = table("routing_findings")
    routing_findings = _rows(routing.orderBy("time").limit(rows))
    routing_counts = {r["kind"]: r["count"] for r in _rows(routing.groupBy("kind").count())}
    deliveries = table("deliveries")
    delivery_counts = _rows(
        deliveries.agg(
            F.sum(F.when(F.col("expected") == "owed", 1).otherwise(0)).alias("owed"),
            F.sum(F.when((F.col("expected") == "owed") & F.col("observed"), 1).otherwise(0)).alias("observed"),
            F.sum(F.when((F.col("expected") == "owed") & ~F.col("observed"), 1).otherwise(0)).alias("missing"),
            F.sum(F.when(F.col("expected") == "forbidden", 1).otherwise(0)).alias("leaked"),
            F.sum(F.when(F.col("expected") == "allowed", 1).otherwise(0)).alias("allowed"),
        )
    )[0]
    connections_sample = _rows(connections.orderBy(F.desc("violations"), "start").limit(rows))
    gaps = table("gaps")
    gap_rows = _rows(
        gaps.where("kind = 'gap'")
        .orderBy("time")
        .limit(rows)
        .select("capture", "flow", "direction", "offset", "length", "time")
    )
    gaps_total = gaps.where("kind = 'gap'").count()
    counts = summary["counts"]
    report_summary = {
        "captures": [
            {"file": c["capture"], "bytes": c["bytes"], "records": _records_of(summary, c["capture"])}
            for c in summary.get("captures", [])
        ],
        "flows": counts["flows"],
        "connections": counts["connections"],
        "packets": counts["packets"],
        "bytes": {k: v for k, v in summary["bytes"].items() if k != "reconciles"},
        "time_span": {"start": start, "end": end},
        "spark_master": summary.get("spark_master", ""),
        "skipped": summary.get("skipped", {}),
        "errors": [
            {"file": e["capture"], "offset": e.get("offset"), "reason": e.get("reason") or e.get("detail", "")}
            for e in summary.get("errors", [])
        ]
        + [
            {"file": t["capture"], "offset": t.get("offset"), "reason": "the capture ends inside a record (truncated)"}
            for t in summary.get("truncated", [])
        ],
    }
    return AuditReportData.from_dict(
        {
            "summary": report_summary,
            "violations_by_rule": by_rule,
            "violations_over_time": over_time,
            "bucket_seconds": bucket,
            "top_clients": top_clients,
            "violation_samples": violation_samples,
            "routing_findings": routing_findings,
            "routing_counts": routing_counts,
            "deliveries_summary": {k: int(v or 0) for k, v in delivery_counts.items()},
            "connections_sample": connections_sample,
            "gaps": gap_rows,
            "gaps_total": gaps_total,
            "mqttaudit_version": __version__,
        }
    )


def _records_of(summary: dict[str, Any], capture: str) -> int:
    return cast(int, summary.get("records_by_capture", {}).get(capture, 0))
