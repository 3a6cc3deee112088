"""The per-task work of an audit, as Arrow-in, Arrow-out functions Spark runs on its executors.

- :func:`read_segments` (``mapInArrow`` over chunk descriptors): reads one record-aligned chunk of a capture,
  keeps the TCP segments of MQTT flows (a broker port on either side), and reports what it skipped, a truncated
  tail or a corrupt capture as a note row. A task holds one chunk, never a whole file.
- :func:`audit_flow` (``groupBy(flow).applyInArrow``): the segments of one TCP flow (across chunks and rotated
  files), reassembled per connection and direction, decoded, and judged; one row per connection with its packets,
  violations, gaps and byte account nested, and the transcript the routing replay needs.
- :func:`replay_group` (``groupBy(server, shard).applyInArrow``): the routing replay of one broker endpoint, for
  the sessions of one shard of its ClientIds (shards run in parallel; each sees every message).

Times in the tables are seconds since the epoch (float64), as the capture recorded them.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mqttaudit.capture import CaptureError, Chunk, FlowAudit, FlowOptions, Segment, flow_events, read_chunk, segments
from mqttaudit.capture.flows import flow_key, is_broker_flow
from mqttaudit.capture.segments import format_endpoint
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.events import Sent

from . import sources
from .conversations import (
    CONNECTION_COLUMNS,
    PACKET_COLUMNS,
    VIOLATION_COLUMNS,
    Columns,
    Flow,
    judge_flow,
)
from .replay import DELIVERY_COLUMNS, ROUTING_COLUMNS, replay_broker

# -- schemas ------------------------------------------------------------------------------------------------------

#: Arrow types of every table column (Spark needs exact types: int64 for long, int32 for int, float64 for double).
TYPES: dict[str, pa.DataType] = {
    "capture": pa.string(),
    "flow": pa.string(),
    "event": pa.int64(),
    "direction": pa.string(),
    "frame": pa.int64(),
    "offset": pa.int64(),
    "length": pa.int64(),
    "time": pa.float64(),
    "type": pa.string(),
    "packet_id": pa.int64(),
    "qos": pa.int64(),
    "retain": pa.bool_(),
    "dup": pa.bool_(),
    "topic": pa.string(),
    "client_id": pa.string(),
    "summary": pa.string(),
    "rule": pa.string(),
    "level": pa.string(),
    "section": pa.string(),
    "actor": pa.string(),
    "origin": pa.string(),
    "kind": pa.string(),
    "detail": pa.string(),
    "expected": pa.string(),
    "evidence": pa.string(),
    "client": pa.string(),
    "server": pa.string(),
    "protocol_level": pa.int64(),
    "clean_session": pa.bool_(),
    "keep_alive": pa.int64(),
    "connack_code": pa.int64(),
    "start": pa.float64(),
    "end": pa.float64(),
    "ended_by": pa.string(),
    "how": pa.string(),
    "mid_stream": pa.bool_(),
    "roles": pa.string(),
    "packets": pa.int64(),
    "violations": pa.int64(),
    "not_assessable": pa.int64(),
    "broker": pa.string(),
    "publisher_flow": pa.string(),
    "publisher_event": pa.int64(),
    "will": pa.bool_(),
    "subscriber_flow": pa.string(),
    "observed": pa.bool_(),
    "copies_allowed": pa.int64(),
    "copies_observed": pa.int64(),
    "qos_expected": pa.int64(),
    "qos_observed": pa.int64(),
    "side": pa.string(),
    "reason": pa.string(),
}
GAP_COLUMNS = ("capture", "flow", "direction", "offset", "length", "time", "kind", "reason")


def struct_type(columns: Sequence[str]) -> pa.StructType:
    return pa.struct([pa.field(name, TYPES[name]) for name in columns])


_SPARK_NAMES = {
    pa.string(): "string",
    pa.int64(): "bigint",
    pa.int32(): "int",
    pa.float64(): "double",
    pa.bool_(): "boolean",
    pa.binary(): "binary",
}


def spark_type(data_type: pa.DataType) -> str:
    """The Spark DDL of an Arrow type (the few this pipeline uses)."""
    if isinstance(data_type, pa.StructType):
        return "struct<" + ", ".join(f"`{f.name}`: {spark_type(f.type)}" for f in data_type) + ">"
    if isinstance(data_type, pa.ListType):
        return f"array<{spark_type(data_type.value_type)}>"
    return _SPARK_NAMES[data_type]


def ddl(schema: pa.Schema) -> str:
    return ", ".join(f"`{field.name}` {spark_type(field.type)}" for field in schema)


CHUNK_SCHEMA = pa.schema([("capture", pa.string()), ("path", pa.string()), ("chunk", pa.binary())])
SEGMENT_SCHEMA = pa.schema(
    [
        ("flow", pa.string()),
        ("capture", pa.string()),
        ("record", pa.int64()),
        ("time_ns", pa.int64()),
        ("src_ip", pa.binary()),
        ("src_port", pa.int32()),
        ("dst_ip", pa.binary()),
        ("dst_port", pa.int32()),
        ("seq", pa.int64()),
        ("ack", pa.int64()),
        ("flags", pa.int32()),
        ("payload", pa.binary()),
        ("note", pa.string()),
    ]
)
COUNT_COLUMNS = ("stream_bytes", "packet_bytes", "malformed_bytes", "gap_bytes", "unassessable_bytes")
CONNECTION_SCHEMA = pa.schema(
    [
        ("flow", pa.string()),
        ("server", pa.string()),
        ("transcript", pa.binary()),
        ("sources", pa.binary()),
        *[(name, pa.int64()) for name in COUNT_COLUMNS],
        ("connection", struct_type(CONNECTION_COLUMNS)),
        ("packets", pa.list_(struct_type(PACKET_COLUMNS))),
        ("violations", pa.list_(struct_type(VIOLATION_COLUMNS))),
        ("gaps", pa.list_(struct_type(GAP_COLUMNS))),
    ]
)
BROKER_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("not_assessable", pa.string()),
        ("deliveries", pa.list_(struct_type(DELIVERY_COLUMNS))),
        ("routing_findings", pa.list_(struct_type(ROUTING_COLUMNS))),
    ]
)


@dataclass(frozen=True)
class AuditOptions:
    broker_ports: frozenset[int] = frozenset({1883})
    #: Seconds a receiver may take to answer or close, and the broker to deliver (the routing tolerance).
    tolerance: float = 5.0
    #: Where observation of each capture ended (ns), by capture name: an open connection is quiet until the end of
    #: the last capture that holds it (rotated captures continue each other).
    end_times: tuple[tuple[str, int], ...] = ()

    @property
    def judge_config(self) -> JudgeConfig:
        # A broker seen accepting MQTT 5.0 supports it: those connections follow another specification and are
        # not judged against 3.1.1 (rather than blaming the broker for not refusing them).
        return JudgeConfig(
            close_grace=self.tolerance, answer_timeout=self.tolerance, supported_protocol_levels=frozenset({4, 5})
        )

    @property
    def flow_options(self) -> FlowOptions:
        return FlowOptions(broker_ports=self.broker_ports)


# -- stage 1: chunks -> segments ---------------------------------------------------------------------------------

BATCH_ROWS = 8192


def _segment_columns() -> dict[str, list[Any]]:
    return {name: [] for name in SEGMENT_SCHEMA.names}


def _batch(columns: dict[str, list[Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns, schema=SEGMENT_SCHEMA)


def _note(capture: str, **fields: Any) -> dict[str, list[Any]]:
    columns = _segment_columns()
    for name in SEGMENT_SCHEMA.names:
        columns[name].append(None)
    columns["capture"][0] = capture
    columns["note"][0] = json.dumps(fields, sort_keys=True)
    return columns


def flow_id(key: tuple[tuple[bytes, int], tuple[bytes, int]]) -> str:
    (ip_a, port_a), (ip_b, port_b) = key
    return f"{format_endpoint(ip_a, port_a)}|{format_endpoint(ip_b, port_b)}"


def read_segments(batches: Iterator[pa.RecordBatch], options: AuditOptions) -> Iterator[pa.RecordBatch]:
    """Chunk descriptors in, TCP segments of MQTT flows out (plus one note row per chunk with its counts)."""
    for batch in batches:
        for capture, path, blob in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            chunk: Chunk = pickle.loads(blob)
            yield from _chunk_segments(capture, path, chunk, options)


def _chunk_segments(capture: str, path: str, chunk: Chunk, options: AuditOptions) -> Iterator[pa.RecordBatch]:
    columns = _segment_columns()
    skipped: Counter[str] = Counter()
    records = kept = 0
    reader = read_chunk(sources.opener(path), chunk)
    error = None

    def counted() -> Iterator[Any]:
        nonlocal records
        for record in reader:
            records += 1
            yield record

    try:
        for index, segment in segments(counted(), skipped):
            key = flow_key(segment)
            if not is_broker_flow(key, options.broker_ports):
                skipped["not a broker port"] += 1
                continue
            kept += 1
            _add_segment(columns, flow_id(key), capture, index, segment)
            if len(columns["flow"]) >= BATCH_ROWS:
                yield _batch(columns)
                columns = _segment_columns()
    except CaptureError as exc:
        error = {"offset": exc.offset, "detail": exc.detail}
    except (OSError, sources.AuditInputError) as exc:
        error = {"offset": chunk.start, "detail": f"cannot read: {exc}"}
    if columns["flow"]:
        yield _batch(columns)
    truncation = getattr(reader, "truncation", None)
    note: dict[str, Any] = {
        "chunk_start": chunk.start,
        "chunk_end": chunk.end,
        "records": records,
        "segments": kept,
        "skipped": dict(skipped),
    }
    if truncation is not None:
        note["truncated"] = {
            "offset": truncation.offset,
            "record": truncation.index,
            "needed": truncation.needed,
            "available": truncation.available,
        }
    if error is not None:
        note["error"] = error
    yield _batch(_note(capture, **note))


def _add_segment(columns: dict[str, list[Any]], flow: str, capture: str, index: int, segment: Segment) -> None:
    time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload = segment
    for name, value in (
        ("flow", flow),
        ("capture", capture),
        ("record", index),
        ("time_ns", time_ns),
        ("src_ip", src_ip),
        ("src_port", src_port),
        ("dst_ip", dst_ip),
        ("dst_port", dst_port),
        ("seq", seq),
        ("ack", ack),
        ("flags", flags),
        ("payload", bytes(payload)),
        ("note", None),
    ):
        columns[name].append(value)


# -- stage 2: one flow -> connection rows ------------------------------------------------------------------------


def audit_flow(table: pa.Table, options: AuditOptions) -> pa.Table:
    """All segments of one flow (any order) in; one row per connection out."""
    order = pc.sort_indices(
        table, sort_keys=[("time_ns", "ascending"), ("capture", "ascending"), ("record", "ascending")]
    )
    table = table.take(order)
    data = {name: table.column(name).to_pylist() for name in table.column_names}
    rows = range(table.num_rows)
    flow_segments: list[Segment] = [
        (
            data["time_ns"][i],
            data["src_ip"][i],
            data["src_port"][i],
            data["dst_ip"][i],
            data["dst_port"][i],
            data["seq"][i],
            data["ack"][i],
            data["flags"][i],
            data["payload"][i],
        )
        for i in rows
    ]
    # The capture record that carried each segment, by time (first wins), to name frames in the evidence.
    record_at: dict[int, tuple[str, int]] = {}
    for i in rows:
        record_at.setdefault(data["time_ns"][i], (data["capture"][i], data["record"][i]))
    ends = dict(options.end_times)
    known = [ends[capture] for capture in set(data["capture"]) if capture in ends]
    end = max(known) if known else (data["time_ns"][-1] if rows else None)
    audits = flow_events(flow_segments, options=options.flow_options, end_time_ns=end)
    # A connection that carried no payload byte (the last ACKs of one that ended before the capture began) is no
    # MQTT connection: nothing in it can be judged.
    out = [_connection(audit, data["flow"][0], record_at, options) for audit in audits if audit.total.stream]
    return _table(out, CONNECTION_SCHEMA)


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows as one Arrow table, built column by column: a nested value is a :class:`Columns` (a list of structs,
    one struct per row of it) or a one-row :class:`Columns` (a struct), never a dict per row."""
    arrays: list[pa.Array] = []
    for field in schema:
        values = [row[field.name] for row in rows]
        if isinstance(field.type, pa.ListType):
            arrays.append(_list_of_structs(values, field.type))
        elif isinstance(field.type, pa.StructType):
            arrays.append(_structs(values, field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _structs(parts: Sequence[Columns], data_type: pa.StructType) -> pa.StructArray:
    """The rows of several column sets, one after the other, as one struct array."""
    children = [
        pa.array([value for part in parts for value in part.data[field.name]], type=field.type) for field in data_type
    ]
    return pa.StructArray.from_arrays(children, fields=list(data_type))


def _list_of_structs(parts: Sequence[Columns], data_type: pa.ListType) -> pa.ListArray:
    """One list per column set (one per connection), each holding that set's rows."""
    offsets = [0]
    for part in parts:
        offsets.append(offsets[-1] + len(part))
    values = _structs(parts, data_type.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, type=data_type)


def _connection(
    audit: FlowAudit, flow: str, record_at: dict[int, tuple[str, int]], options: AuditOptions
) -> dict[str, Any]:
    endpoints = [format_endpoint(*endpoint) for endpoint in audit.endpoints]
    client = None if audit.client is None else endpoints[audit.client]
    server = None if audit.client is None else endpoints[1 - audit.client]
    capture, _ = record_at.get(audit.first_time, ("", 0))
    connection_id = f"{flow}@{audit.first_time}"
    # Each Sent event is the next decoded frame of the connection; the frame's time names its capture record.
    frame_times = iter([side_frame.time for side_frame in audit.frames])
    frames: list[int | None] = [
        record_at.get(next(frame_times, -1), (capture, None))[1] if isinstance(event, Sent) else None
        for event in audit.events
    ]
    judged = judge_flow(
        Flow(
            capture,
            connection_id,
            client or endpoints[0],
            server or endpoints[1],
            audit.events,
            frames,
            mid_stream=audit.mid_stream,
            roles=audit.direction_reason,
        ),
        options.judge_config,
    )
    gaps = Columns(GAP_COLUMNS)
    for gap in audit.gaps:
        gaps.add(
            capture=capture,
            flow=connection_id,
            direction=_side(audit, gap.side),
            offset=gap.offset,
            length=gap.length,
            time=gap.time / 1e9,
            kind="gap",
            reason="bytes sent but not captured",
        )
    for hole in audit.unassessable:
        gaps.add(
            capture=capture,
            flow=connection_id,
            direction=_side(audit, hole.side),
            offset=hole.offset,
            length=hole.length,
            time=None,
            kind="not-assessable",
            reason=hole.reason,
        )
    total = audit.total
    return {
        "flow": connection_id,
        "server": server or "unknown",
        "transcript": judged.transcript,
        "sources": judged.sources,
        "stream_bytes": total.stream,
        "packet_bytes": total.packets,
        "malformed_bytes": total.malformed,
        "gap_bytes": total.gaps,
        "unassessable_bytes": total.unassessable,
        "connection": judged.connection,
        "packets": judged.packets,
        "violations": judged.violations,
        "gaps": gaps,
    }


def _side(audit: FlowAudit, side: int) -> str:
    direction = audit.direction(side)
    return "unknown" if direction is None else direction.value


# -- stage 3: one broker -> deliveries and routing findings ------------------------------------------------------


def replay_group(table: pa.Table, options: AuditOptions) -> pa.Table:
    """One shard of one broker: every connection's transcript, whole for the flows of the shard's ClientIds
    (``own``), as message sources for the others."""
    broker = table.column("server")[0].as_py()
    flows = table.column("flow").to_pylist()
    blobs = table.column("transcript").to_pylist()
    own = [flow for flow, mine in zip(flows, table.column("own").to_pylist(), strict=True) if mine]
    deliveries, findings, undecided = replay_broker(broker, zip(flows, blobs, strict=True), options.judge_config, own)
    row = {
        "broker": broker,
        "not_assessable": json.dumps(undecided, sort_keys=True),
        "deliveries": deliveries,
        "routing_findings": findings,
    }
    return _table([row], BROKER_SCHEMA)


def flow_auditor(options: AuditOptions) -> Callable[[pa.Table], pa.Table]:
    """:func:`audit_flow` bound to ``options``, with the type hints Spark reads to pick the grouped Arrow API."""

    def run(table: pa.Table) -> pa.Table:
        return audit_flow(table, options)

    return run


def broker_replayer(options: AuditOptions) -> Callable[[pa.Table], pa.Table]:
    """:func:`replay_group` bound to ``options``, typed for Spark like :func:`flow_auditor`."""

    def run(table: pa.Table) -> pa.Table:
        return replay_group(table, options)

    return run
