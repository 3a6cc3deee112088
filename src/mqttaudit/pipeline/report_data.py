"""The bounded data the audit reports are written from, aggregated by Spark from the Parquet tables: counts per
rule and side, a time series, the top offending clients and servers (each charged with its own violations only), a
few sample rows per rule (with the packet a missing answer was owed for), routing findings, connections, the
connections per MQTT version, the rule instances not assessable and gaps (each list capped)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from mqttaudit import __version__
from mqttaudit.report import AuditReportData
from mqttaudit.report.audit_format import packet_text

from .bounded import collect_parts as _collect
from .table_reading import read_table

TIME_BUCKETS = 60
#: Rows of the top offending clients and servers.
TOP = 20


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def report_data(
    session: SparkSession, out_dir: Path | str, summary: dict[str, Any], *, samples: int, rows: int
) -> AuditReportData:
    def table(name: str) -> DataFrame:
        return read_table(session, out_dir, name)

    violations = table("violations")
    span = summary.get("time_span") or [None, None]
    start, end = span[0], span[1]
    bucket = 0.0
    connections = table("connections")
    undecided = table("not_assessable")
    lenient = table("lenient")
    routing = table("routing_findings")
    gaps = table("gaps").transform(gaps_only)
    samples_of = violations.transform(first_rows, per=("rule", "actor"), count=samples).orderBy("rule", "actor", "time")
    # Every part is bounded (counts per rule, capped samples): all of them come from one Spark query.
    parts = {
        "by_rule": violations.transform(violations_by_rule),
        "top_clients": connections.transform(offending_clients, violations=violations),
        "top_servers": connections.transform(offending_servers, violations=violations),
        "samples": samples_of,
        "causes": table("packets").transform(causes_of, samples=samples_of),
        "undecided_counts": undecided.transform(not_assessable_counts).limit(rows),
        "undecided_rows": undecided.transform(first_rows, per=("tag", "rule", "actor"), count=samples)
        .orderBy("tag", "rule", "actor", "time")
        .limit(rows),
        "lenient_counts": lenient.transform(leniency_counts).limit(rows),
        "lenient_rows": lenient.transform(first_rows, per=("rule", "rule_version", "actor"), count=samples)
        .orderBy("rule", "actor", "time")
        .limit(rows),
        "routing_findings": routing.orderBy("time").limit(rows),
        "routing_counts": routing.groupBy("kind").count(),
        "deliveries": table("deliveries").transform(delivery_totals),
        "connections": connections.transform(worst_connections_first).limit(rows),
        "gaps": gaps.orderBy("time").limit(rows).select(*GAP_ROW_COLUMNS),
        "gaps_total": gaps.agg(F.count(F.lit(1)).alias("count")),
    }
    if start is not None and end is not None:
        bucket = max((end - start) / TIME_BUCKETS, 1e-3)
        parts["over_time"] = violations.transform(violations_over_time, start=start, bucket=bucket)
    found = {name: [{k: _clean(v) for k, v in row.items()} for row in got] for name, got in _collect(parts).items()}
    by_rule = found["by_rule"]
    over_time = found.get("over_time", [])
    top_clients, top_servers = found["top_clients"], found["top_servers"]
    violation_samples = _with_causes(found["causes"], found["samples"])
    undecided_counts = found["undecided_counts"]
    # The summary counted them by tag; the report shows the largest first.
    by_tag = dict(sorted(summary["not_assessable"]["by_tag"].items(), key=lambda item: (-item[1], item[0])))
    undecided_rows = found["undecided_rows"]
    lenient_counts, lenient_rows = found["lenient_counts"], found["lenient_rows"]
    routing_findings = found["routing_findings"]
    routing_counts = {r["kind"]: r["count"] for r in found["routing_counts"]}
    delivery_counts = found["deliveries"][0]
    connections_sample = found["connections"]
    gap_rows = found["gaps"]
    gaps_total = int(found["gaps_total"][0]["count"])
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
        "versions": summary["versions"],
        "malformed_cap": summary.get("malformed_cap", {}),
        "conflicting_retransmissions": summary.get("conflicting_retransmissions", {}),
        "budgets": summary.get("budgets", {}),
        "conflicting_copies": summary.get("conflicting_copies", {}),
        "not_assessable": summary["not_assessable"]["rows"],
        "not_assessable_by_tag": by_tag,
        "lenient": summary.get("lenient", {}).get("rows", 0),
        "spark_master": summary.get("spark_master", ""),
        "skipped": summary.get("skipped", {}),
        "errors": [
            {
                "file": e["capture"],
                "offset": e.get("offset"),
                "frame": e.get("frame"),
                "reason": e.get("reason") or e.get("detail", ""),
            }
            for e in summary.get("errors", [])
        ]
        + [
            {
                "file": t["capture"],
                "offset": t.get("offset"),
                "frame": t.get("frame"),
                "reason": f"the capture ends inside this record (truncated: {t.get('available')} of its "
                f"{t.get('needed')} bytes present); it and whatever the capture would have held after it are lost",
            }
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
            "top_servers": top_servers,
            "violation_samples": violation_samples,
            "routing_findings": routing_findings,
            "routing_counts": routing_counts,
            "deliveries_summary": {k: int(v or 0) for k, v in delivery_counts.items()},
            "connections_sample": connections_sample,
            "gaps": gap_rows,
            "gaps_total": gaps_total,
            "not_assessable_counts": undecided_counts,
            "not_assessable_rows": undecided_rows,
            "lenient_counts": lenient_counts,
            "lenient_rows": lenient_rows,
            "mqttaudit_version": __version__,
        }
    )


# -- the transforms: each a table in, the rows one part of the report shows out ------------------------------------

#: The columns of the gaps the report lists.
GAP_ROW_COLUMNS = ("capture", "flow", "direction", "offset", "length", "time")


def violations_by_rule(violations: DataFrame) -> DataFrame:
    """Violations counted per rule and side (with the time of the first), the most frequent first."""
    return (
        violations.groupBy("rule", "rule_version", "level", "section", "actor", "origin")
        .agg(F.count("*").alias("count"), F.min("time").alias("first_time"))
        .withColumn("summary", F.lit(""))
        .orderBy(F.desc("count"), "rule")
    )


def violations_over_time(violations: DataFrame, *, start: float, bucket: float) -> DataFrame:
    """Violations with a time counted per side in buckets of ``bucket`` seconds from ``start``."""
    return (
        violations.where("time is not null")
        .withColumn("bucket_start", F.floor((F.col("time") - F.lit(start)) / bucket) * bucket + F.lit(start))
        .groupBy("bucket_start", "actor")
        .count()
        .orderBy("bucket_start", "actor")
    )


def offending_clients(connections: DataFrame, *, violations: DataFrame) -> DataFrame:
    """The :data:`TOP` clients that broke most rules, each charged with its own violations only.

    A client is one per capture: captures of different sites or test runs reuse ClientIds. Its address is that of
    its first connection that broke a rule, never of a clean one."""
    return (
        connections.join(_found_by(violations, "client"), "flow", "left")
        .withColumn("found", F.coalesce("found", F.lit(0)))
        .groupBy("capture", _client_key(F.col("client_id"), F.col("client")).alias("key"))
        .agg(
            F.min_by("client", F.struct((F.col("found") == 0).alias("clean"), "start", "client")).alias("client"),
            F.first("client_id").alias("client_id"),
            F.sum("found").alias("violations"),
            F.count("*").alias("connections"),
        )
        .where("violations > 0")
        .orderBy(F.desc("violations"), "key", "capture")
        .limit(TOP)
        .select("client", "client_id", "violations", "connections", "capture")
    )


def offending_servers(connections: DataFrame, *, violations: DataFrame) -> DataFrame:
    """The :data:`TOP` servers that broke most rules, each charged with its own violations only."""
    return (
        connections.join(_found_by(violations, "server"), "flow", "left")
        .groupBy(F.coalesce("server", F.lit("unknown")).alias("server"))
        .agg(F.sum(F.coalesce("found", F.lit(0))).alias("violations"), F.count("*").alias("connections"))
        .where("violations > 0")
        .orderBy(F.desc("violations"), "server")
        .limit(TOP)
    )


def first_rows(rows: DataFrame, *, per: Sequence[str], count: int) -> DataFrame:
    """The first ``count`` rows (by time, flow and event) of each group of ``rows`` with the same ``per`` columns."""
    window = Window.partitionBy(*per).orderBy("time", "flow", "event")
    return rows.withColumn("n", F.row_number().over(window)).where(F.col("n") <= count).drop("n")


def not_assessable_counts(undecided: DataFrame) -> DataFrame:
    """Rule instances not assessable counted per reason tag, rule and side, the most frequent first."""
    return undecided.groupBy("tag", "rule", "level", "actor").count().orderBy(F.desc("count"), "tag", "rule", "actor")


def leniency_counts(lenient: DataFrame) -> DataFrame:
    """Leniencies counted per rule and side (with the first time and a basis), the most frequent first."""
    return (
        lenient.groupBy("rule", "rule_version", "level", "section", "actor")
        .agg(F.count(F.lit(1)).alias("count"), F.min("time").alias("first_time"), F.first("basis").alias("basis"))
        .orderBy(F.desc("count"), "rule", "actor")
    )


def delivery_totals(deliveries: DataFrame) -> DataFrame:
    """One row: the deliveries owed, observed and missing, leaked and allowed."""
    owed = F.col("expected") == "owed"
    return deliveries.agg(
        F.sum(F.when(owed, 1).otherwise(0)).alias("owed"),
        F.sum(F.when(owed & F.col("observed"), 1).otherwise(0)).alias("observed"),
        F.sum(F.when(owed & ~F.col("observed"), 1).otherwise(0)).alias("missing"),
        F.sum(F.when(F.col("expected") == "forbidden", 1).otherwise(0)).alias("leaked"),
        F.sum(F.when(F.col("expected") == "allowed", 1).otherwise(0)).alias("allowed"),
    )


def worst_connections_first(connections: DataFrame) -> DataFrame:
    """Connections, those with most violations first, then by start."""
    return connections.orderBy(F.desc("violations"), "start")


def gaps_only(gaps: DataFrame) -> DataFrame:
    """The rows of the gaps table that are bytes never captured (not the not-assessable or conflicting ranges)."""
    return gaps.where("kind = 'gap'")


def _records_of(summary: dict[str, Any], capture: str) -> int:
    return int(summary.get("records_by_capture", {}).get(capture, 0))


def _found_by(violations: DataFrame, actor: str) -> DataFrame:
    """Violations committed by ``actor`` ("client" or "server"), per connection (flow -> ``found``)."""
    return violations.where(F.col("actor") == actor).groupBy("flow").agg(F.count("*").alias("found"))


def _client_key(client_id: Column, address: Column) -> Column:
    """Who a client is: its ClientId when it has one; else its address, apart for an empty ClientId and none seen (a
    blank ClientId would lump every such connection together under an empty label)."""
    return (
        F.when(F.length(client_id) > 0, F.concat(F.lit("id "), client_id))
        .when(client_id.isNull(), F.concat(F.lit("none "), address))
        .otherwise(F.concat(F.lit("empty "), address))
    )


def causes_of(packets: DataFrame, *, samples: DataFrame) -> DataFrame:
    """The packets that the missing answers among ``samples`` (violation rows) were owed for."""
    wanted = samples.where("cause_event is not null").select("flow", F.col("cause_event").alias("event")).distinct()
    return packets.join(wanted, ["flow", "event"], "left_semi")


def _with_causes(causes: list[dict[str, Any]], samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sample rows, each missing-answer finding with ``cause_packet``: the unanswered packet as the packets table
    describes it (``causes``: the packets table's rows of the samples' causes, :func:`causes_of`)."""
    found = {(row["flow"], row["event"]): packet_text(row) for row in causes}
    return [
        {
            **row,
            "cause_packet": None if row.get("cause_event") is None else found.get((row["flow"], row["cause_event"])),
        }
        for row in samples
    ]
