"""The audit's ``summary.json`` figures, added up from what the tasks wrote: the judged connections' totals, the
tables' counts per level, side, kind, version and tag, and the reading tasks' notes (records, skips, errors).

Each engine adds up the same parts (:data:`PARTS`): the Spark engine with one Spark query (:func:`audit_summary`),
the local engine over the rows of the tables in its own process (:func:`local_audit_summary`); the summary is built
from the parts by one function (:func:`summary_of`). Each Spark transform has its local twin beside it, named
``<transform>_rows``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from mqttaudit.capture.budgets import (
    DEFAULT_BUDGETS,
    FLOW_POLICY,
    MESSAGE_POLICY,
    OUT_OF_ORDER_POLICY,
    PIECE_COST,
    Budgets,
)
from mqttaudit.capture.conversation import CONFLICT_POLICY, DEFAULT_MAX_MALFORMED, MALFORMED_CAP_POLICY

from .rows import Rows, counted, greatest, groups, least, rows_of, total, where
from .table_reading import read_arrow_table, read_table
from .tables import BUDGET_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Figures(NamedTuple):
    """What the driver learns of an audit once its stages ran: the summary, the reading tasks' notes (one per
    chunk) and the judged connections per server port."""

    summary: dict[str, Any]
    notes: list[dict[str, Any]]
    by_port: dict[int, int]


#: The parts the summary is built from, each the rows of a bounded result (an aggregate): see :func:`summary_of`.
PARTS = ("totals", "notes", "violations", "routing", "versions", "undecided", "lenient", "ports")


def audit_summary(
    session: SparkSession, judged: DataFrame, out_dir: Path | str, budgets: Budgets = DEFAULT_BUDGETS
) -> Figures:
    """The summary of an audit from the judging stage's rows (``judged``, :data:`~.tables.JUDGED_SCHEMA`: judged
    connections and the reading tasks' notes) and the tables in ``out_dir``: counts, the byte account, the versions,
    the limits met (each budget with its bound, its policy and what it did), the copies several files hold. Every
    figure comes from one Spark query (:func:`~.bounded.collect_parts`)."""
    from pyspark.sql import functions as F

    from .bounded import collect_parts

    def table(name: str) -> DataFrame:
        return read_table(session, out_dir, name)

    connections = judged.where("note is null")
    notes_of = judged.where("note is not null")
    # The records of a flow held by several files (:func:`~.judging.fleet_rows`), apart from the chunks' notes.
    conflicting = F.get_json_object("note", "$.conflicting_copy")
    duplicate = F.get_json_object("note", "$.duplicate_copy")
    figures = collect_parts(
        {
            "totals": connections.transform(connection_totals),
            "notes": notes_of.where(conflicting.isNull() & duplicate.isNull()).select("note", "capture"),
            **fleet_parts(notes_of.where(conflicting.isNotNull() | duplicate.isNotNull())),
            "violations": table("violations").groupBy("level", "actor").count(),
            "routing": table("routing_findings").groupBy("kind").count(),
            "versions": table("connections").transform(connections_per_version),
            "undecided": table("not_assessable").groupBy("tag").count(),
            "lenient": table("lenient").groupBy("actor", "rule").count(),
            "ports": connections.transform(connections_per_port),
        }
    )
    return summary_of(figures, budgets)


def local_audit_summary(judged: pa.Table, out_dir: Path | str, budgets: Budgets = DEFAULT_BUDGETS) -> Figures:
    """:func:`audit_summary` of the local engine: the same parts, from the rows of ``judged`` and of the tables,
    in this process."""

    def table(name: str) -> Rows:
        return rows_of(read_arrow_table(out_dir, name))

    rows = rows_of(judged)
    connections = where(rows, lambda row: row["note"] is None)
    notes = [(row, json.loads(row["note"])) for row in rows if row["note"] is not None]
    fleet = [(row, note) for row, note in notes if _fleet_note(note)]
    figures = {
        "totals": connection_totals_rows(connections),
        "notes": [{"note": row["note"], "capture": row["capture"]} for row, note in notes if not _fleet_note(note)],
        **fleet_parts_rows(fleet),
        "violations": counted(table("violations"), ("level", "actor")),
        "routing": counted(table("routing_findings"), ("kind",)),
        "versions": connections_per_version_rows(table("connections")),
        "undecided": counted(table("not_assessable"), ("tag",)),
        "lenient": counted(table("lenient"), ("actor", "rule")),
        "ports": connections_per_port_rows(connections),
    }
    return summary_of(figures, budgets)


def summary_of(figures: dict[str, Rows], budgets: Budgets) -> Figures:
    """The summary from its parts (:data:`PARTS`), whichever engine added them up."""
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
    copies = fleet_summary(figures)
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
        **copies,
        "malformed_cap": {
            "per_connection": DEFAULT_MAX_MALFORMED,
            "connections_capped": int(sums["capped_connections"] or 0),
            "bytes_not_decoded": int(sums["capped_bytes"] or 0),
            "policy": MALFORMED_CAP_POLICY,
        },
        "budgets": budget_counters(sums, budgets),
    }
    return Figures(summary, notes, by_port)


def budget_counters(sums: Any, budgets: Budgets) -> dict[str, Any]:
    """Each budget of the audit: its bound, its policy, and how often it applied (from :func:`connection_totals`)."""

    def total(name: str) -> int:
        return int(sums[name] or 0)

    return {
        "message": {
            "max_bytes": budgets.max_message_bytes,
            "messages_skipped": total("oversized_messages"),
            "bytes_skipped": total("oversized_bytes"),
            "connections": total("oversized_connections"),
            "policy": MESSAGE_POLICY,
        },
        "out_of_order": {
            "max_bytes": budgets.max_out_of_order_bytes,
            "piece_cost": PIECE_COST,
            "gaps_declared": total("budget_gaps"),
            "gap_bytes": total("budget_gap_bytes"),
            "connections": total("budget_gap_connections"),
            "policy": OUT_OF_ORDER_POLICY,
        },
        "flow": {
            "max_bytes": budgets.max_flow_bytes,
            "flows_stopped": total("unheld_connections"),
            "segments_not_held": total("unheld_segments"),
            "bytes_not_held": total("unheld_bytes"),
            "policy": FLOW_POLICY,
        },
    }


#: Conflicting copies and duplicates the summary lists at most (the rest are counted).
LISTED_COPIES = 100
#: What the audit does with two files that hold the same bytes of a connection, as the summary and reports name it.
COPIES_POLICY = (
    "a connection is one connection across files, by its endpoints and its continuity (sequence numbers, SYN, FIN, "
    "reset); a file whose bytes of it another file holds with the same content is left out (deduplicated); when "
    "the copies disagree, neither is dropped: each file's copy is judged apart as a connection of its own, named "
    "by its file (the routing replay reads the copy of the file first by name), and the audit is incomplete"
)
#: The fields of a ``conflicting_copy`` record that order the listed ones, and of a ``duplicate_copy`` record.
_CONFLICT_KEYS = "struct<captures: array<string>, connections: array<string>, offset: bigint>"
_DUPLICATE_SIZES = "struct<bytes: bigint, segments: bigint>"


def fleet_parts(notes: DataFrame) -> dict[str, DataFrame]:
    """The parts of the summary query (:func:`~.bounded.collect_parts`) that :func:`fleet_summary` reads, from the
    judging stage's fleet notes: one row of counts, and at most :data:`LISTED_COPIES` notes of each kind, in the
    order the summary lists them (conflicts by their files, first connection and offset; duplicates by file and
    the file holding them). Nothing per note reaches the driver past those."""
    from pyspark.sql import functions as F

    conflict = F.from_json(F.get_json_object("note", "$.conflicting_copy"), _CONFLICT_KEYS)
    duplicate = F.from_json(F.get_json_object("note", "$.duplicate_copy"), _DUPLICATE_SIZES)
    is_conflict = F.get_json_object("note", "$.conflicting_copy").isNotNull()
    conflicts = notes.where(is_conflict)
    duplicates = notes.where(~is_conflict)
    of = F.get_json_object("note", "$.duplicate_copy.of")
    return {
        "fleet_counts": notes.agg(
            F.sum(F.when(is_conflict, 1).otherwise(0)).alias("conflicts"),
            F.sum(F.when(is_conflict, 0).otherwise(1)).alias("duplicates"),
            F.sum(duplicate.getField("bytes")).alias("duplicate_bytes"),
            F.sum(duplicate.getField("segments")).alias("duplicate_segments"),
        ),
        "conflicting_copies": conflicts.orderBy(
            conflict.getField("captures"),
            F.coalesce(conflict.getField("connections").getItem(0), F.lit("")),
            conflict.getField("offset"),
        )
        .limit(LISTED_COPIES)
        .select("note"),
        "duplicate_copies": duplicates.orderBy("capture", of).limit(LISTED_COPIES).select("note", "capture"),
    }


def fleet_parts_rows(notes: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Rows]:
    """:func:`fleet_parts` of the local engine, over the fleet notes' rows, each with its note parsed."""
    conflicts = [(row, note["conflicting_copy"]) for row, note in notes if note.get("conflicting_copy") is not None]
    duplicates = [(row, note["duplicate_copy"]) for row, note in notes if note.get("conflicting_copy") is None]
    conflicts.sort(key=lambda item: (item[1]["captures"], (item[1]["connections"] or [""])[0] or "", item[1]["offset"]))
    duplicates.sort(key=lambda item: (item[0]["capture"], item[1]["of"]))
    sizes = [copy for _, copy in duplicates]
    return {
        "fleet_counts": [
            {
                "conflicts": len(conflicts),
                "duplicates": len(duplicates),
                "duplicate_bytes": sum(int(copy["bytes"]) for copy in sizes),
                "duplicate_segments": sum(int(copy["segments"]) for copy in sizes),
            }
        ],
        "conflicting_copies": [{"note": row["note"]} for row, _ in conflicts[:LISTED_COPIES]],
        "duplicate_copies": [{"note": row["note"], "capture": row["capture"]} for row, _ in duplicates[:LISTED_COPIES]],
    }


def _fleet_note(note: dict[str, Any]) -> bool:
    """One of the fleet's records (:func:`fleet_parts`), not a reading task's note (records, skips, errors)."""
    return note.get("conflicting_copy") is not None or note.get("duplicate_copy") is not None


def fleet_summary(figures: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The summary's ``conflicting_copies`` and ``duplicate_copies`` from the parts :func:`fleet_parts` made: the
    copies of connections that several files hold, those that disagree (the files, the connection, the copies
    judged apart, the side and the first stream offset where they differ) and those left out as duplicates."""
    counts = figures["fleet_counts"][0]
    conflicts = [json.loads(row["note"])["conflicting_copy"] for row in figures["conflicting_copies"]]
    duplicates = [
        json.loads(row["note"])["duplicate_copy"] | {"capture": row["capture"]} for row in figures["duplicate_copies"]
    ]
    return {
        "conflicting_copies": {"count": int(counts["conflicts"] or 0), "copies": conflicts, "policy": COPIES_POLICY},
        "duplicate_copies": {
            "count": int(counts["duplicates"] or 0),
            "bytes": int(counts["duplicate_bytes"] or 0),
            "segments": int(counts["duplicate_segments"] or 0),
            "copies": duplicates,
        },
    }


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
    from pyspark.sql import functions as F

    return connections.agg(
        F.count("*").alias("connections"),
        F.countDistinct(F.split("flow", "@").getItem(0)).alias("flows"),
        *[F.sum(column).alias(name) for name, column in _SUMMED.items()],
        F.sum(F.when(F.col("capped_bytes") > 0, 1).otherwise(0)).alias("capped_connections"),
        *[F.sum(name).alias(name) for name in BUDGET_COLUMNS],
        *[F.sum(F.when(F.col(name) > 0, 1).otherwise(0)).alias(alias) for name, alias in BUDGET_CONNECTIONS.items()],
        F.sum("packet_count").alias("packet_count"),
        F.min("start").alias("first"),
        F.max("end").alias("last"),
    )


def connection_totals_rows(connections: Rows) -> Rows:
    """The local twin of :func:`connection_totals`."""

    def summed(name: str) -> Any:
        return total(row[name] for row in connections)

    def positive(name: str) -> Any:
        return total(1 if (row[name] is not None and row[name] > 0) else 0 for row in connections)

    return [
        {
            "connections": len(connections),
            "flows": len({row["flow"].split("@")[0] for row in connections if row["flow"] is not None}),
            **{name: summed(column) for name, column in _SUMMED.items()},
            "capped_connections": positive("capped_bytes"),
            **{name: summed(name) for name in BUDGET_COLUMNS},
            **{alias: positive(name) for name, alias in BUDGET_CONNECTIONS.items()},
            "packet_count": summed("packet_count"),
            "first": least(row["start"] for row in connections),
            "last": greatest(row["end"] for row in connections),
        }
    ]


#: The sums of :func:`connection_totals` (and its twin), by the column summed.
_SUMMED = {
    "stream": "stream_bytes",
    "packets": "packet_bytes",
    "malformed": "malformed_bytes",
    "gaps": "gap_bytes",
    "unassessable": "unassessable_bytes",
    "conflict_ranges": "conflict_ranges",
    "conflict_bytes": "conflict_bytes",
    "capped_bytes": "capped_bytes",
}


#: The connections each budget applied to, counted by a column that is positive for them.
BUDGET_CONNECTIONS = {
    "oversized_messages": "oversized_connections",
    "budget_gaps": "budget_gap_connections",
    "unheld_segments": "unheld_connections",
}


def connections_per_version(connections: DataFrame) -> DataFrame:
    """Connections and their packets counted per MQTT version and how the version was handled."""
    from pyspark.sql import functions as F

    return connections.groupBy("version", "handling").agg(
        F.count("*").alias("connections"), F.sum("packets").alias("packets")
    )


def connections_per_version_rows(connections: Rows) -> Rows:
    """The local twin of :func:`connections_per_version`."""
    return [
        {
            "version": version,
            "handling": handling,
            "connections": len(group),
            "packets": total(r["packets"] for r in group),
        }
        for (version, handling), group in groups(connections, ("version", "handling")).items()
    ]


def connections_per_port(connections: DataFrame) -> DataFrame:
    """Judged connections counted per server port (``port``, a string; empty when the server has none), those whose
    roles are unknown left out."""
    from pyspark.sql import functions as F

    port = F.regexp_extract("server", r":(\d+)$", 1)
    return connections.where("server != 'unknown'").groupBy(port.alias("port")).count()


def connections_per_port_rows(connections: Rows) -> Rows:
    """The local twin of :func:`connections_per_port`."""

    def port(server: str) -> str:
        found = _PORT.search(server)
        return "" if found is None else found.group(1)

    known = [
        {"port": port(row["server"])} for row in connections if row["server"] is not None and row["server"] != "unknown"
    ]
    return counted(known, ("port",))


_PORT = re.compile(r":(\d+)$")
