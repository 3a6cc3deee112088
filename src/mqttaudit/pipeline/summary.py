"""The audit's ``summary.json`` figures, added up by Spark from what the tasks wrote: the judged connections' totals,
the tables' counts per level, side, kind, version and tag, and the reading tasks' notes (records, skips, errors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mqttaudit.capture.conversation import CONFLICT_POLICY, DEFAULT_MAX_MALFORMED, MALFORMED_CAP_POLICY

from .bounded import collect_parts, read_table


class Figures(NamedTuple):
    """What the driver learns of an audit once its stages ran: the summary, the reading tasks' notes (one per
    chunk) and the judged connections per server port."""

    summary: dict[str, Any]
    notes: list[dict[str, Any]]
    by_port: dict[int, int]


def audit_summary(session: SparkSession, judged: DataFrame, out_dir: Path) -> Figures:
    """The summary of an audit from the judging stage's rows (``judged``, :data:`~.tables.JUDGED_SCHEMA`: judged
    connections and the reading tasks' notes) and the tables in ``out_dir``: counts, the byte account, the versions,
    the limits met. Every figure comes from one Spark query (:func:`~.bounded.collect_parts`)."""

    def table(name: str) -> DataFrame:
        return read_table(session, out_dir, name)

    connections = judged.where("note is null")
    figures = collect_parts(
        {
            "totals": connections.transform(connection_totals),
            "notes": judged.where("note is not null").select("note", "capture"),
            "violations": table("violations").groupBy("level", "actor").count(),
            "routing": table("routing_findings").groupBy("kind").count(),
            "versions": table("connections").transform(connections_per_version),
            "undecided": table("not_assessable").groupBy("tag").count(),
            "lenient": table("lenient").groupBy("actor", "rule").count(),
            "ports": connections.transform(connections_per_port),
        }
    )
    sums = figures["totals"][0]
    notes = [json.loads(row["note"]) | {"capture": row["capture"]} for row in figures["notes"]]
    by_level = _counts_by(figures["violations"], "level")
    by_actor = _counts_by(figures["violations"], "actor")
    by_kind = _counts_by(figures["routing"], "kind")
    versions = {
        row["version"]: {
            "connections": row["connections"],
            "handling": row["handling"],
            "packets": int(row["packets"] or 0),
        }
        for row in figures["versions"]
    }
    by_tag = _counts_by(figures["undecided"], "tag")
    lenient_by = {(row["actor"], row["rule"]): row["count"] for row in figures["lenient"]}
    by_port = {int(row["port"]): int(row["count"]) for row in figures["ports"] if row["port"]}
    skipped: dict[str, int] = {}
    records = segments_kept = 0
    chunk_errors: list[dict[str, Any]] = []
    truncated: list[dict[str, Any]] = []
    records_by_capture: dict[str, int] = {}
    for note in notes:
        records += note.get("records", 0)
        records_by_capture[note["capture"]] = records_by_capture.get(note["capture"], 0) + note.get("records", 0)
        segments_kept += note.get("segments", 0)
        for reason, count in note.get("skipped", {}).items():
            skipped[reason] = skipped.get(reason, 0) + count
        chunk_errors += [{"capture": note["capture"], **corrupt} for corrupt in note.get("corrupt", [])]
        if "error" in note:
            chunk_errors.append({"capture": note["capture"], **note["error"]})
        if "truncated" in note:
            truncated.append({"capture": note["capture"], **note["truncated"]})
    stream = int(sums["stream"] or 0)
    accounted = sum(int(sums[k] or 0) for k in ("packets", "malformed", "gaps", "unassessable"))
    summary = {
        "records": records,
        "records_by_capture": records_by_capture,
        "segments": segments_kept,
        "skipped": skipped,
        "truncated": truncated,
        "chunk_errors": chunk_errors,
        "time_span": [sums["first"], sums["last"]],
        "counts": {
            "flows": int(sums["flows"] or 0),
            "connections": int(sums["connections"] or 0),
            "packets": int(sums["packet_count"] or 0),
            "violations": sum(by_level.values()),
            "violations_must": by_level.get("MUST", 0),
            "violations_by_level": by_level,
            "violations_by_actor": by_actor,
            "routing_findings": sum(by_kind.values()),
            "routing_by_kind": by_kind,
        },
        "versions": dict(sorted(versions.items())),
        "not_assessable": {"rows": sum(by_tag.values()), "by_tag": dict(sorted(by_tag.items()))},
        # Defects accepted by a receiver no statement bound to detect them (5.0, section 4.13.1): not violations.
        "lenient": {
            "rows": sum(lenient_by.values()),
            "by_actor": _summed(lenient_by, 0),
            "by_rule": _summed(lenient_by, 1),
        },
        "bytes": {
            "mqtt_bytes": stream,
            "packet_bytes": int(sums["packets"] or 0),
            "malformed_bytes": int(sums["malformed"] or 0),
            "gap_bytes": int(sums["gaps"] or 0),
            "unsynced_bytes": int(sums["unassessable"] or 0),
            "reconciles": stream == accounted,
        },
        "conflicting_retransmissions": {
            "ranges": int(sums["conflict_ranges"] or 0),
            "bytes": int(sums["conflict_bytes"] or 0),
            "policy": CONFLICT_POLICY,
        },
        "malformed_cap": {
            "per_connection": DEFAULT_MAX_MALFORMED,
            "connections_capped": int(sums["capped_connections"] or 0),
            "bytes_not_decoded": int(sums["capped_bytes"] or 0),
            "policy": MALFORMED_CAP_POLICY,
        },
    }
    return Figures(summary, notes, by_port)


def _counts_by(counts: list[dict[str, Any]], column: str) -> dict[str, int]:
    """Counts of groups (rows with ``column`` and ``count``) added up by the value of ``column``."""
    summed: dict[str, int] = {}
    for row in counts:
        summed[row[column]] = summed.get(row[column], 0) + int(row["count"])
    return summed


def _summed(counts: dict[tuple[str, str], int], part: int) -> dict[str, int]:
    """``counts`` keyed by (actor, rule) added up by the actor (``part`` 0) or by the rule (1), sorted."""
    summed: dict[str, int] = {}
    for key, count in counts.items():
        summed[key[part]] = summed.get(key[part], 0) + count
    return dict(sorted(summed.items()))


def connection_totals(connections: DataFrame) -> DataFrame:
    """One row: the judged connections and flows, their byte account, conflicting and capped bytes, packets, and
    the time span they cover."""
    return connections.agg(
        F.count("*").alias("connections"),
        F.countDistinct(F.split("flow", "@").getItem(0)).alias("flows"),
        F.sum("stream_bytes").alias("stream"),
        F.sum("packet_bytes").alias("packets"),
        F.sum("malformed_bytes").alias("malformed"),
        F.sum("gap_bytes").alias("gaps"),
        F.sum("unassessable_bytes").alias("unassessable"),
        F.sum("conflict_ranges").alias("conflict_ranges"),
        F.sum("conflict_bytes").alias("conflict_bytes"),
        F.sum("capped_bytes").alias("capped_bytes"),
        F.sum(F.when(F.col("capped_bytes") > 0, 1).otherwise(0)).alias("capped_connections"),
        F.sum("packet_count").alias("packet_count"),
        F.min("start").alias("first"),
        F.max("end").alias("last"),
    )


def connections_per_version(connections: DataFrame) -> DataFrame:
    """Connections and their packets counted per MQTT version and how the version was handled."""
    return connections.groupBy("version", "handling").agg(
        F.count("*").alias("connections"), F.sum("packets").alias("packets")
    )


def connections_per_port(connections: DataFrame) -> DataFrame:
    """Judged connections counted per server port (``port``, a string; empty when the server has none), those whose
    roles are unknown left out."""
    port = F.regexp_extract("server", r":(\d+)$", 1)
    return connections.where("server != 'unknown'").groupBy(port.alias("port")).count()
