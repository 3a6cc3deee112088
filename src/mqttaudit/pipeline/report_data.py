"""The bounded data the audit reports are written from, aggregated from the Parquet tables: counts per rule and side,
a time series, the top offending clients and servers (each charged with its own violations only), a few sample rows
per rule (with the packet a missing answer was owed for), routing findings, connections, the connections per MQTT
version, the rule instances not assessable and gaps (each list capped).

Each engine computes the same parts: the Spark engine as named ``(DataFrame) -> DataFrame`` transforms in one Spark
query (:func:`report_data`), the local engine over the rows of the tables in its own process
(:func:`local_report_data`), each transform's local twin beside it, named ``<transform>_rows``; the report data are
built from the parts by one function (:func:`report_of`). Where Spark's order would leave rows tied, both order by
more columns, so that the two engines list the same rows in the same order."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqttaudit import __version__
from mqttaudit.report import AuditReportData
from mqttaudit.report.audit_format import packet_text

from .rows import Rows, ascending, counted, groups, least, ordered, rows_of, total, where
from .table_reading import read_arrow_table, read_table

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

TIME_BUCKETS = 60
#: Rows of the top offending clients and servers.
TOP = 20


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def time_buckets(summary: dict[str, Any]) -> tuple[float | None, float]:
    """Where the violations' time series starts (None: no time span) and the seconds of its buckets."""
    span = summary.get("time_span") or [None, None]
    start, end = span[0], span[1]
    if start is None or end is None:
        return None, 0.0
    return start, max((end - start) / TIME_BUCKETS, 1e-3)


def report_data(
    session: SparkSession, out_dir: Path | str, summary: dict[str, Any], *, samples: int, rows: int
) -> AuditReportData:
    """The report data of the Spark engine: every part from one Spark query (:func:`~.bounded.collect_parts`)."""
    from pyspark.sql import functions as F

    from .bounded import collect_parts

    def table(name: str) -> DataFrame:
        return read_table(session, out_dir, name)

    violations = table("violations")
    connections = table("connections")
    undecided = table("not_assessable")
    lenient = table("lenient")
    routing = table("routing_findings")
    gaps = table("gaps").transform(gaps_only)
    samples_of = violations.transform(first_rows, per=("rule", "actor"), count=samples).orderBy(*SAMPLE_ORDER)
    # Every part is bounded (counts per rule, capped samples): all of them come from one Spark query.
    parts = {
        "by_rule": violations.transform(violations_by_rule),
        "top_clients": connections.transform(offending_clients, violations=violations),
        "top_servers": connections.transform(offending_servers, violations=violations),
        "samples": samples_of,
        "causes": table("packets").transform(causes_of, samples=samples_of),
        "undecided_counts": undecided.transform(not_assessable_counts).limit(rows),
        "undecided_rows": undecided.transform(first_rows, per=UNDECIDED_PER, count=samples)
        .orderBy(*UNDECIDED_ORDER)
        .limit(rows),
        "lenient_counts": lenient.transform(leniency_counts).limit(rows),
        "lenient_rows": lenient.transform(first_rows, per=LENIENT_PER, count=samples)
        .orderBy(*LENIENT_ORDER)
        .limit(rows),
        "routing_findings": routing.orderBy(*ROUTING_ORDER).limit(rows),
        "routing_counts": routing.groupBy("kind").count(),
        "deliveries": table("deliveries").transform(delivery_totals),
        "connections": connections.transform(worst_connections_first).limit(rows),
        "gaps": gaps.orderBy(*GAP_ORDER).limit(rows).select(*GAP_ROW_COLUMNS),
        "gaps_total": gaps.agg(F.count(F.lit(1)).alias("count")),
    }
    start, bucket = time_buckets(summary)
    if start is not None:
        parts["over_time"] = violations.transform(violations_over_time, start=start, bucket=bucket)
    return report_of(collect_parts(parts), summary)


def local_report_data(out_dir: Path | str, summary: dict[str, Any], *, samples: int, rows: int) -> AuditReportData:
    """:func:`report_data` of the local engine: the same parts, from the rows of the tables, in this process."""

    def table(name: str) -> Rows:
        return rows_of(read_arrow_table(out_dir, name))

    violations = table("violations")
    connections = table("connections")
    undecided = table("not_assessable")
    lenient = table("lenient")
    routing = table("routing_findings")
    gaps = gaps_only_rows(table("gaps"))
    samples_of = ordered(first_rows_rows(violations, per=("rule", "actor"), count=samples), *SAMPLE_ORDER)
    parts = {
        "by_rule": violations_by_rule_rows(violations),
        "top_clients": offending_clients_rows(connections, violations=violations),
        "top_servers": offending_servers_rows(connections, violations=violations),
        "samples": samples_of,
        "causes": causes_of_rows(table("packets"), samples=samples_of),
        "undecided_counts": not_assessable_counts_rows(undecided)[:rows],
        "undecided_rows": ordered(first_rows_rows(undecided, per=UNDECIDED_PER, count=samples), *UNDECIDED_ORDER)[
            :rows
        ],
        "lenient_counts": leniency_counts_rows(lenient)[:rows],
        "lenient_rows": ordered(first_rows_rows(lenient, per=LENIENT_PER, count=samples), *LENIENT_ORDER)[:rows],
        "routing_findings": ordered(routing, *ROUTING_ORDER)[:rows],
        "routing_counts": counted(routing, ("kind",)),
        "deliveries": delivery_totals_rows(table("deliveries")),
        "connections": worst_connections_first_rows(connections)[:rows],
        "gaps": [{name: row[name] for name in GAP_ROW_COLUMNS} for row in ordered(gaps, *GAP_ORDER)[:rows]],
        "gaps_total": [{"count": len(gaps)}],
    }
    start, bucket = time_buckets(summary)
    if start is not None:
        parts["over_time"] = violations_over_time_rows(violations, start=start, bucket=bucket)
    return report_of(parts, summary)


def report_of(parts: dict[str, Rows], summary: dict[str, Any]) -> AuditReportData:
    """The report data from their parts, whichever engine computed them, and the summary."""
    span = summary.get("time_span") or [None, None]
    start, end = span[0], span[1]
    _, bucket = time_buckets(summary)
    found = {name: [{k: _clean(v) for k, v in row.items()} for row in got] for name, got in parts.items()}
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
        "spark_master": summary.get("spark_master") or "",
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


# -- the transforms: each a table in, the rows one part of the report shows out; each Spark transform, then its local
# twin (rows in, rows out) -------------------------------------------------------------------------------------------

#: The columns of the gaps the report lists.
GAP_ROW_COLUMNS = ("capture", "flow", "direction", "offset", "length", "time")
#: The orders of the listed parts (``-column``: descending), each down to columns that leave no two rows tied.
SAMPLE_ORDER = ("rule", "actor", "time", "flow", "event", "offset", "detail")
UNDECIDED_PER = ("tag", "rule", "actor")
UNDECIDED_ORDER = ("tag", "rule", "actor", "time", "flow", "event", "reason")
LENIENT_PER = ("rule", "rule_version", "actor")
LENIENT_ORDER = ("rule", "actor", "time", "flow", "event", "rule_version", "offset", "detail")
ROUTING_ORDER = ("time", "broker", "flow", "event", "kind", "rule", "detail", "expected")
GAP_ORDER = ("time", "capture", "flow", "direction", "offset", "kind")
#: The order within each group of :func:`first_rows`.
FIRST_ROWS_ORDER = ("time", "flow", "event", "offset", "detail", "reason")
BY_RULE = ("rule", "rule_version", "level", "section", "actor", "origin")
UNDECIDED_COUNTS = ("tag", "rule", "level", "actor")
LENIENCY_COUNTS = ("rule", "rule_version", "level", "section", "actor")


def _order(*keys: str) -> list[Column]:
    """``keys`` as Spark orderings (``-column``: descending, nulls last; else ascending, nulls first)."""
    from pyspark.sql import functions as F

    return [F.desc(key[1:]) if key.startswith("-") else F.col(key) for key in keys]


def violations_by_rule(violations: DataFrame) -> DataFrame:
    """Violations counted per rule and side (with the time of the first), the most frequent first."""
    from pyspark.sql import functions as F

    return (
        violations.groupBy(*BY_RULE)
        .agg(F.count("*").alias("count"), F.min("time").alias("first_time"))
        .withColumn("summary", F.lit(""))
        .orderBy(*_order("-count", *BY_RULE))
    )


def violations_by_rule_rows(violations: Rows) -> Rows:
    """The local twin of :func:`violations_by_rule`."""
    counts = [
        dict(zip(BY_RULE, key, strict=True))
        | {"count": len(group), "first_time": least(row["time"] for row in group), "summary": ""}
        for key, group in groups(violations, BY_RULE).items()
    ]
    return ordered(counts, "-count", *BY_RULE)


def violations_over_time(violations: DataFrame, *, start: float, bucket: float) -> DataFrame:
    """Violations with a time counted per side in buckets of ``bucket`` seconds from ``start``."""
    from pyspark.sql import functions as F

    return (
        violations.where("time is not null")
        .withColumn("bucket_start", F.floor((F.col("time") - F.lit(start)) / bucket) * bucket + F.lit(start))
        .groupBy("bucket_start", "actor")
        .count()
        .orderBy("bucket_start", "actor")
    )


def violations_over_time_rows(violations: Rows, *, start: float, bucket: float) -> Rows:
    """The local twin of :func:`violations_over_time`."""
    timed = [
        {"bucket_start": math.floor((row["time"] - start) / bucket) * bucket + start, "actor": row["actor"]}
        for row in violations
        if row["time"] is not None
    ]
    return ordered(counted(timed, ("bucket_start", "actor")), "bucket_start", "actor")


def offending_clients(connections: DataFrame, *, violations: DataFrame) -> DataFrame:
    """The :data:`TOP` clients that broke most rules, each charged with its own violations only.

    A client is one per capture: captures of different sites or test runs reuse ClientIds. Its address is that of
    its first connection that broke a rule, never of a clean one."""
    from pyspark.sql import functions as F

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


def offending_clients_rows(connections: Rows, *, violations: Rows) -> Rows:
    """The local twin of :func:`offending_clients`."""
    found = _found_by_rows(violations, "client")
    keyed = [
        row | {"found": found.get(row["flow"], 0), "key": _client_key_of(row["client_id"], row["client"])}
        for row in connections
    ]
    clients = []
    for (capture, key), group in groups(keyed, ("capture", "key")).items():
        first = min(
            group, key=lambda row: (ascending(row["found"] == 0), ascending(row["start"]), ascending(row["client"]))
        )
        clients.append(
            {
                "client": first["client"],
                "client_id": group[0]["client_id"],
                "violations": sum(row["found"] for row in group),
                "connections": len(group),
                "capture": capture,
                "key": key,
            }
        )
    offending = ordered(where(clients, lambda row: row["violations"] > 0), "-violations", "key", "capture")[:TOP]
    return [
        {name: row[name] for name in ("client", "client_id", "violations", "connections", "capture")}
        for row in offending
    ]


def offending_servers(connections: DataFrame, *, violations: DataFrame) -> DataFrame:
    """The :data:`TOP` servers that broke most rules, each charged with its own violations only."""
    from pyspark.sql import functions as F

    return (
        connections.join(_found_by(violations, "server"), "flow", "left")
        .groupBy(F.coalesce("server", F.lit("unknown")).alias("server"))
        .agg(F.sum(F.coalesce("found", F.lit(0))).alias("violations"), F.count("*").alias("connections"))
        .where("violations > 0")
        .orderBy(F.desc("violations"), "server")
        .limit(TOP)
    )


def offending_servers_rows(connections: Rows, *, violations: Rows) -> Rows:
    """The local twin of :func:`offending_servers`."""
    found = _found_by_rows(violations, "server")
    servers = [
        {"server": server, "violations": sum(found.get(row["flow"], 0) for row in group), "connections": len(group)}
        for (server,), group in groups(
            [row | {"server": "unknown" if row["server"] is None else row["server"]} for row in connections],
            ("server",),
        ).items()
    ]
    return ordered(where(servers, lambda row: row["violations"] > 0), "-violations", "server")[:TOP]


def first_rows(rows: DataFrame, *, per: Sequence[str], count: int) -> DataFrame:
    """The first ``count`` rows (by time, flow and event) of each group of ``rows`` with the same ``per`` columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*per).orderBy(*[key for key in FIRST_ROWS_ORDER if key in rows.columns])
    return rows.withColumn("n", F.row_number().over(window)).where(F.col("n") <= count).drop("n")


def first_rows_rows(rows: Rows, *, per: Sequence[str], count: int) -> Rows:
    """The local twin of :func:`first_rows`."""
    keys = [key for key in FIRST_ROWS_ORDER if rows and key in rows[0]]
    return [row for group in groups(rows, per).values() for row in ordered(group, *keys)[:count]]


def not_assessable_counts(undecided: DataFrame) -> DataFrame:
    """Rule instances not assessable counted per reason tag, rule and side, the most frequent first."""
    return undecided.groupBy(*UNDECIDED_COUNTS).count().orderBy(*_order("-count", "tag", "rule", "actor", "level"))


def not_assessable_counts_rows(undecided: Rows) -> Rows:
    """The local twin of :func:`not_assessable_counts`."""
    return ordered(counted(undecided, UNDECIDED_COUNTS), "-count", "tag", "rule", "actor", "level")


def leniency_counts(lenient: DataFrame) -> DataFrame:
    """Leniencies counted per rule and side (with the first time and a basis), the most frequent first."""
    from pyspark.sql import functions as F

    return (
        lenient.groupBy(*LENIENCY_COUNTS)
        .agg(F.count(F.lit(1)).alias("count"), F.min("time").alias("first_time"), F.min("basis").alias("basis"))
        .orderBy(*_order("-count", "rule", "actor", "rule_version", "level", "section"))
    )


def leniency_counts_rows(lenient: Rows) -> Rows:
    """The local twin of :func:`leniency_counts`."""
    counts = [
        dict(zip(LENIENCY_COUNTS, key, strict=True))
        | {
            "count": len(group),
            "first_time": least(row["time"] for row in group),
            "basis": least(row["basis"] for row in group),
        }
        for key, group in groups(lenient, LENIENCY_COUNTS).items()
    ]
    return ordered(counts, "-count", "rule", "actor", "rule_version", "level", "section")


#: What :func:`delivery_totals` counts: (name, expected, observed: None for either).
_DELIVERY_COUNTS = (
    ("owed", "owed", None),
    ("observed", "owed", True),
    ("missing", "owed", False),
    ("leaked", "forbidden", None),
    ("allowed", "allowed", None),
)


def delivery_totals(deliveries: DataFrame) -> DataFrame:
    """One row: the deliveries owed, observed and missing, leaked and allowed."""
    from pyspark.sql import functions as F

    def when(expected: str, observed: bool | None) -> Column:
        test = F.col("expected") == expected
        if observed is not None:
            test = test & (F.col("observed") if observed else ~F.col("observed"))
        return test

    return deliveries.agg(
        *[F.sum(F.when(when(expected, seen), 1).otherwise(0)).alias(name) for name, expected, seen in _DELIVERY_COUNTS]
    )


def delivery_totals_rows(deliveries: Rows) -> Rows:
    """The local twin of :func:`delivery_totals` (a null ``observed`` counts as neither, as in Spark)."""

    def counts(expected: str, observed: bool | None) -> Any:
        return total(
            1 if row["expected"] == expected and (observed is None or row["observed"] is observed) else 0
            for row in deliveries
        )

    return [{name: counts(expected, seen) for name, expected, seen in _DELIVERY_COUNTS}]


def worst_connections_first(connections: DataFrame) -> DataFrame:
    """Connections, those with most violations first, then by start."""
    return connections.orderBy(*_order(*WORST_FIRST))


#: The order of :func:`worst_connections_first`.
WORST_FIRST = ("-violations", "start", "capture", "flow")


def worst_connections_first_rows(connections: Rows) -> Rows:
    """The local twin of :func:`worst_connections_first`."""
    return ordered(connections, *WORST_FIRST)


def gaps_only(gaps: DataFrame) -> DataFrame:
    """The rows of the gaps table that are bytes never captured (not the not-assessable or conflicting ranges)."""
    return gaps.where("kind = 'gap'")


def gaps_only_rows(gaps: Rows) -> Rows:
    """The local twin of :func:`gaps_only`."""
    return where(gaps, lambda row: row["kind"] == "gap")


def _records_of(summary: dict[str, Any], capture: str) -> int:
    return int(summary.get("records_by_capture", {}).get(capture, 0))


def _found_by(violations: DataFrame, actor: str) -> DataFrame:
    """Violations committed by ``actor`` ("client" or "server"), per connection (flow -> ``found``)."""
    from pyspark.sql import functions as F

    return violations.where(F.col("actor") == actor).groupBy("flow").agg(F.count("*").alias("found"))


def _found_by_rows(violations: Rows, actor: str) -> dict[Any, int]:
    """The local twin of :func:`_found_by`: flow -> violations."""
    return {
        key[0]: len(group) for key, group in groups(where(violations, lambda r: r["actor"] == actor), ("flow",)).items()
    }


def _client_key(client_id: Column, address: Column) -> Column:
    """Who a client is: its ClientId when it has one; else its address, apart for an empty ClientId and none seen (a
    blank ClientId would lump every such connection together under an empty label)."""
    from pyspark.sql import functions as F

    return (
        F.when(F.length(client_id) > 0, F.concat(F.lit("id "), client_id))
        .when(client_id.isNull(), F.concat(F.lit("none "), address))
        .otherwise(F.concat(F.lit("empty "), address))
    )


def _client_key_of(client_id: str | None, address: str | None) -> str | None:
    """The local twin of :func:`_client_key` (``concat`` with a null is null)."""
    if client_id:
        return "id " + client_id
    prefix = "none " if client_id is None else "empty "
    return None if address is None else prefix + address


def causes_of(packets: DataFrame, *, samples: DataFrame) -> DataFrame:
    """The packets that the missing answers among ``samples`` (violation rows) were owed for."""
    from pyspark.sql import functions as F

    wanted = samples.where("cause_event is not null").select("flow", F.col("cause_event").alias("event")).distinct()
    return packets.join(wanted, ["flow", "event"], "left_semi")


def causes_of_rows(packets: Rows, *, samples: Rows) -> Rows:
    """The local twin of :func:`causes_of`."""
    wanted = {(row["flow"], row["cause_event"]) for row in samples if row["cause_event"] is not None}
    return [row for row in packets if (row["flow"], row["event"]) in wanted]


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
