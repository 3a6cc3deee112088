"""Stage 2, judging: :func:`judge_partition` (``mapInArrow`` over runs of segments partitioned and sorted by flow)
takes one TCP flow at a time (across chunks and rotated files), reassembled per connection and direction, decoded
and judged; the task writes the packets, violations, gaps and connections tables itself and hands back one small row
per connection, with the transcript the routing replay needs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from mqttaudit.capture import Endpoint, FlowAudit, Segment, fleet, flow_events, frame_number
from mqttaudit.capture.budgets import out_of_order_reason
from mqttaudit.capture.conversation import stopped_at_flow_budget
from mqttaudit.capture.segments import FIN, SYN
from mqttaudit.judge import reasons as reason_tags
from mqttaudit.judge.transcript import Transcript

from .conversations import Columns, connection_flow, connection_id, judge_flow
from .options import AuditOptions
from .segments import BATCH_ROWS, cuts, decode_run
from .slicing import write_pieces
from .tables import GAP_COLUMNS, GAP_KINDS, JUDGED_SCHEMA, SEGMENT_FIELDS
from .task_files import TableWriter, TranscriptWriter, columns_table, part_name
from .worker_gc import tune_gc


def judge_partition(batches: Iterator[pa.RecordBatch], options: AuditOptions) -> Iterator[pa.RecordBatch]:
    """Runs of segments sorted by flow in (``mapInArrow`` after ``repartition(flow)`` and ``sortWithinPartitions``),
    one flow at a time: each is reassembled, decoded and judged, its packets, violations, gaps and connections written
    to their tables here, and one small row per connection handed back (chunk notes pass through). Only one flow
    is held at a time."""
    tune_gc()
    part = part_name()
    writers = {
        table: TableWriter(options.out_dir, table, part, options.published)
        for table in ("packets", "violations", "connections", "gaps", "not_assessable", "lenient")
    }
    transcripts = TranscriptWriter(options.out_dir, part, options.published)
    judged = Columns(tuple(JUDGED_SCHEMA.names))
    for flow, table, cut in _flow_groups(batches, options.budgets.max_flow_bytes):
        if flow is None:
            for capture, note in zip(
                table.column("capture").to_pylist(), table.column("note").to_pylist(), strict=True
            ):
                judged.add(capture=capture, note=note)
            continue
        for row in judge_segments(table, options, cut):
            if "note" in row:  # a record of the flow's files (a conflicting copy, a duplicate left out)
                judged.add(capture=row["capture"], note=row["note"])
                continue
            for name, writer in writers.items():
                writer.add(row[name])
            transcript: Transcript = row.pop("transcript")
            # The connection's head (its skeleton), then its pieces, on the rows after it (see .slicing).
            at = write_pieces(transcripts, transcript, options.seal_key)
            judged.add(**row, transcripts=transcripts.name, transcript_row=at)
        if len(judged) >= BATCH_ROWS:
            yield columns_table([judged], JUDGED_SCHEMA).to_batches()[0]
            judged = Columns(tuple(JUDGED_SCHEMA.names))
    for writer in writers.values():
        writer.close()
    transcripts.close()
    if len(judged):
        yield columns_table([judged], JUDGED_SCHEMA).to_batches()[0]


@dataclass
class FlowCut:
    """What a flow carried past the per-flow budget: its segments counted, their payload bytes by sending endpoint,
    none of them held; and per sender, the sequence number just past the furthest payload byte they carried."""

    segments: int = 0
    payload: dict[Endpoint, int] = field(default_factory=dict)
    reach: dict[Endpoint, int] = field(default_factory=dict)

    def count(self, run: pa.RecordBatch | pa.Table) -> None:
        self.segments += run.num_rows
        lengths = pc.binary_length(run.column("payload")).to_pylist()
        senders = zip(run.column("src_ip").to_pylist(), run.column("src_port").to_pylist(), strict=True)
        for sender, length, seq in zip(senders, lengths, run.column("seq").to_pylist(), strict=True):
            self.payload[sender] = self.payload.get(sender, 0) + length
            end = (seq + length) & 0xFFFFFFFF
            if length and (sender not in self.reach or fleet.sequence_distance(end - self.reach[sender]) > 0):
                self.reach[sender] = end

    def beyond(self, sender: Endpoint, held_end: int | None) -> int:
        """The payload bytes ``sender`` sent past the budget that lie beyond ``held_end`` (the sequence number just
        past the bytes held of it; None: nothing held), at most all it sent: the bytes of another file's copy of
        what was held are not new bytes of the connection."""
        payload = self.payload.get(sender, 0)
        if held_end is None or sender not in self.reach:
            return payload
        return max(0, min(payload, fleet.sequence_distance(self.reach[sender] - held_end)))


def _flow_groups(
    batches: Iterator[pa.RecordBatch], budget: int
) -> Iterator[tuple[str | None, pa.Table, FlowCut | None]]:
    """The runs of consecutive rows with the same flow, across batch boundaries, each as one table, holding at most
    ``budget`` payload bytes of the flow's segments (the first segment always; a run that fits whole is weighed by
    its serialized size, which exceeds its payload): the runs past it are counted in the flow's :class:`FlowCut`,
    not held (the run that crosses it is cut at a segment)."""
    pending: list[pa.RecordBatch] = []
    current: str | None = None
    held = 0
    cut: FlowCut | None = None
    for batch in batches:
        flows = batch.column("flow").to_pylist()
        start = 0
        for index in range(1, len(flows) + 1):
            if index < len(flows) and flows[index] == flows[start]:
                continue
            piece = batch.slice(start, index - start)
            if pending and flows[start] != current:
                yield current, pa.Table.from_batches(pending), cut
                pending, held, cut = [], 0, None
            current = flows[start]
            start = index
            if current is None:
                pending.append(piece)
                continue
            blobs = pc.binary_length(piece.column("segments")).to_pylist()
            for row, blob in enumerate(blobs):
                one = piece.slice(row, 1)
                if cut is not None:
                    cut.count(_run_of(one))
                    continue
                if held + blob <= budget:  # the usual case, read no further: a run's payload is less than its blob
                    held += blob
                    pending.append(one)
                    continue
                run = _run_of(one)
                sizes = pc.binary_length(run.column("payload")).to_numpy(zero_copy_only=False)
                if held + int(sizes.sum()) <= budget:
                    held += int(sizes.sum())
                    pending.append(one)
                    continue
                # The crossing run: the segments that still fit are held (the flow's first one always).
                fits = int((held + sizes.cumsum() <= budget).sum()) or (0 if held else 1)
                if fits:
                    pending.append(_with_run(one, run.slice(0, fits)))
                    held += int(sizes[:fits].sum())
                cut = FlowCut()
                cut.count(run.slice(fits))
    if pending:
        yield current, pa.Table.from_batches(pending), cut


def _run_of(row: pa.RecordBatch) -> pa.RecordBatch:
    """The segments of a one-row batch of runs (:data:`SEGMENT_SCHEMA`)."""
    return decode_run(row.column("capture")[0].as_py(), row.column("segments")[0].as_buffer())


def _with_run(row: pa.RecordBatch, run: pa.RecordBatch) -> pa.RecordBatch:
    """The one-row batch of runs ``row`` holding ``run`` (its first segments) instead."""
    segments = pa.array([run.drop_columns(["capture"]).serialize().to_pybytes()], type=pa.binary())
    return row.set_column(row.schema.get_field_index("segments"), "segments", segments)


def judge_segments(table: pa.Table, options: AuditOptions, cut: FlowCut | None = None) -> list[dict[str, Any]]:
    """All runs of segments of one flow (:data:`SEGMENT_SCHEMA` rows, any order) in; per connection, its table
    rows and its judged row. Runs of several files that may hold copies (some sequence number in two files:
    :func:`~mqttaudit.capture.fleet.files_apart`) go through :func:`fleet_rows` (copies deduplicated, copies that
    disagree judged apart); each of the plan's records (a conflicting copy, a duplicate left out) is a row with
    ``note`` set; files apart (a rotation) are merged in time order as one file. ``cut``: the flow reached the
    per-flow budget, and what its later segments carried past the bytes held goes to its last connection (of the
    first copy when files hold copies; :func:`_stopped`)."""
    runs = [
        decode_run(capture, blob.as_buffer())
        for capture, blob in zip(table.column("capture").to_pylist(), table.column("segments"), strict=True)
    ]
    table = pa.Table.from_batches(runs)
    order = pc.sort_indices(
        table, sort_keys=[("time_ns", "ascending"), ("capture", "ascending"), ("record", "ascending")]
    )
    # Runs already in order (the usual case) are not copied. (Signed: a step back is negative, not an overflow.)
    if not pc.all(pc.equal(pc.pairwise_diff(order.cast(pa.int64())), 1)).as_py():
        table = table.take(order)
    captures = table.column("capture").to_pylist()
    ends = dict(options.end_times)
    known = [ends[capture] for capture in set(captures) if capture in ends]
    times = table.column("time_ns")
    end = max(known) if known else (times[-1].as_py() if len(times) else None)
    if len(set(captures)) == 1 or fleet.files_apart(_sequence_ranges(table, captures)):
        audits = _stopped(
            flow_events(flow_segments(table), options=options.flow_options, end_time_ns=end), cut, table, options
        )
        record_at = _records_by_time(table)
        # A connection that carried no payload byte (the last ACKs of one that ended before the capture began) is
        # no MQTT connection: nothing in it can be judged.
        return [_connection(audit, record_at, options) for audit in audits if audit.total.stream]
    return fleet_rows(table, captures, end, options, cut)


def _sequence_ranges(table: pa.Table, captures: list[str]) -> Iterator[tuple[str, Endpoint, int, int]]:
    """Each segment of a flow (``captures``: the file of each) as :func:`~mqttaudit.capture.fleet.files_apart`
    takes it: its file, its sender, its sequence number and the sequence numbers it takes (payload, SYN, FIN)."""
    flags = table.column("flags").to_numpy()
    payload = pc.binary_length(table.column("payload")).to_numpy(zero_copy_only=False)
    takes = payload + ((flags & SYN) != 0) + ((flags & FIN) != 0)
    columns = (table.column(name).to_pylist() for name in ("src_ip", "src_port", "seq"))
    for capture, ip, port, seq, length in zip(captures, *columns, takes.tolist(), strict=True):
        yield capture, (ip, port), seq, length


def _records_by_time(table: pa.Table) -> dict[int, tuple[str, int]]:
    """The capture record that carried each segment, by time (first wins), to name frames in the evidence."""
    record_at: dict[int, tuple[str, int]] = {}
    columns = (table.column(name).to_pylist() for name in ("time_ns", "capture", "record"))
    for time_ns, capture, record in zip(*columns, strict=True):
        record_at.setdefault(time_ns, (capture, record))
    return record_at


def _stopped(audits: list[FlowAudit], cut: FlowCut | None, table: pa.Table, options: AuditOptions) -> list[FlowAudit]:
    """``audits`` (judged from the segments held, ``table``), with what the flow's segments past the per-flow budget
    carried given to the last one (``cut``: the flow reached the budget): each sender's bytes beyond the furthest
    byte held of it. Bytes within it (a file's copy of bytes another file held, a retransmission) are counted as
    not held and added to no stream. A connection that reuses the flow's 4-tuple wholly past the budget is not
    seen: its bytes go to the last connection held."""
    if cut is None or not audits:
        return audits
    last = audits[-1]
    held = FlowCut()
    held.count(table)
    unheld = tuple(cut.beyond(endpoint, held.reach.get(endpoint)) for endpoint in last.endpoints)
    budget = options.budgets.max_flow_bytes
    payload = sum(cut.payload.values())
    return [*audits[:-1], stopped_at_flow_budget(last, (unheld[0], unheld[1]), cut.segments, budget, payload)]


def fleet_rows(
    table: pa.Table, captures: list[str], end: int | None, options: AuditOptions, cut: FlowCut | None = None
) -> list[dict[str, Any]]:
    """The connections of one flow held by several files (``table`` in capture-time order, ``captures`` the file
    of each segment), judged as :func:`~mqttaudit.capture.fleet.plan` says: one judging per copy, each connection
    of a copy judged apart named by its file (and left out of the routing replay unless it is in the first copy);
    then a note row per conflicting copy and per duplicate left out."""
    flow_options = options.flow_options
    found = fleet.pieces(captures, flow_segments(table), flow_options.broker_ports)
    plan = fleet.plan(lambda rows: flow_segments(table.take(rows)), found)
    rows: list[dict[str, Any]] = []
    # (copy, a time inside the connection) -> the connection's id and the id it has when not judged apart
    named: dict[tuple[int, int], tuple[str, str]] = {}
    spans: list[tuple[int, int, int, tuple[str, str]]] = []
    for copy, indices in enumerate(plan.copies):
        # The usual plan (a rotation: one copy of every segment) judges the table as it is, without a copy of it.
        part = table if len(indices) == table.num_rows else table.take(indices)
        record_at = _records_by_time(part)
        audits = flow_events(flow_segments(part), options=flow_options, end_time_ns=end)
        for audit in _stopped(audits, cut, table, options) if copy == 0 else audits:
            if not audit.total.stream:
                continue
            label = plan.label(copy, audit.first_time, audit.last_time)
            row = _connection(audit, record_at, options, label)
            row["replayed"] = copy == 0 or label is None
            rows.append(row)
            spans.append((copy, audit.first_time, audit.last_time, (row["flow"], connection_id(audit))))
    for copy, first, last, ids in spans:
        for conflict in plan.conflicts:
            for side in (0, 1):
                if conflict.copies[side] == copy and first <= conflict.times[side] <= last:
                    named.setdefault((copy, conflict.times[side]), ids)
    notes: list[dict[str, Any]] = []
    for conflict in plan.conflicts:
        copy_ids = [named.get((conflict.copies[side], conflict.times[side])) for side in (0, 1)]
        record = {
            "captures": list(conflict.captures),
            # The connection as the first file's copy names it without its file (each copy's own id has it).
            "connection": next((ids[1] for ids in copy_ids if ids is not None), None),
            "connections": [None if ids is None else ids[0] for ids in copy_ids],
            "sender": conflict.sender,
            "side": conflict.side,
            "offset": conflict.offset,
        }
        notes.append({"capture": conflict.captures[1], "note": json.dumps({"conflicting_copy": record})})
    for duplicate in plan.duplicates:
        record = {"of": duplicate.of, "bytes": duplicate.bytes, "segments": duplicate.segments}
        notes.append({"capture": duplicate.capture, "note": json.dumps({"duplicate_copy": record})})
    return rows + notes


def flow_segments(table: pa.Table) -> Iterator[Segment]:
    """A flow's segments (:data:`RUN_SCHEMA` rows, in order) as Python objects, made a slice of at most
    :data:`RUN_BYTES` at a time as the reassembly takes them: a flow's payload is never held twice over whole
    (the TLS layer holds a bounded part of it, see :data:`~mqttaudit.capture.tls.MAX_WAITING`)."""
    lengths = pc.binary_length(table.column("payload")).to_pylist()
    for first, last in cuts(lengths, 0, len(lengths)) if lengths else ():
        part = table.slice(first, last - first)
        yield from cast(
            Iterator[Segment], zip(*(part.column(name).to_pylist() for name in SEGMENT_FIELDS), strict=True)
        )


#: Why the bytes of a ``conflict`` row of the gaps table are not judged.
CONFLICT_REASON = reason_tags.reason(
    reason_tags.CONFLICTING,
    "these bytes arrived again with different content; the first copy was kept, and no packet decoded from them is "
    "judged",
)


def _connection(
    audit: FlowAudit, record_at: dict[int, tuple[str, int]], options: AuditOptions, copy: str | None = None
) -> dict[str, Any]:
    """One connection's rows; ``copy`` names the file of a copy judged apart (its id says so, and it is that
    file's connection)."""
    capture, _ = record_at.get(audit.first_time, ("", 0))
    capture = capture if copy is None else copy

    def record_of(time: int) -> int | None:
        """The frame number (Wireshark's: 1 for the capture's first record) of the record at ``time``."""
        record = record_at.get(time, (capture, None))[1]
        return None if record is None else frame_number(record)

    def capture_of(time: int) -> str:
        """The file that holds the record at ``time`` (a copy judged apart: its own file)."""
        return capture if copy is not None else record_at.get(time, (capture, None))[0]

    judged_flow = connection_flow(capture, audit, record_of, capture_of)
    if copy is not None:
        judged_flow = replace(judged_flow, flow=f"{judged_flow.flow}~{copy}")
    connection_id = judged_flow.flow
    server = None if audit.client is None else judged_flow.server
    judged = judge_flow(judged_flow, options.judge_config)
    gaps = Columns(GAP_COLUMNS)

    def add(kind: str, side: int, offset: int, length: int, time_ns: int | None, reason: str) -> None:
        """One row of the gaps table: a byte range of one side, what kind of range it is and why."""
        gaps.add(
            capture=capture,
            flow=connection_id,
            direction=_side(audit, side),
            offset=offset,
            length=length,
            time=None if time_ns is None else time_ns / 1e9,
            kind=GAP_KINDS[kind],
            reason=reason,
        )

    budgets = options.budgets
    for gap in audit.gaps:
        why = out_of_order_reason(budgets.max_out_of_order_bytes) if gap.budget else "bytes sent but not captured"
        add("gap", gap.side, gap.offset, gap.length, gap.time, why)
    for conflict in audit.conflicts:
        add("conflict", conflict.side, conflict.offset, conflict.length, conflict.time, CONFLICT_REASON)
    for hole in audit.unassessable:
        add("not_assessable", hole.side, hole.offset, hole.length, None, hole.reason)
    total = audit.total
    connection = judged.connection.data
    return {
        "flow": connection_id,
        "capture": capture,
        "server": server or "unknown",
        "transcript": judged.replayed,
        "stream_bytes": total.stream,
        "packet_bytes": total.packets,
        "malformed_bytes": total.malformed,
        "gap_bytes": total.gaps,
        "unassessable_bytes": total.unassessable,
        "conflict_ranges": len(audit.conflicts),
        "conflict_bytes": sum(conflict.length for conflict in audit.conflicts),
        "capped_bytes": audit.capped_bytes,
        "oversized_messages": audit.oversized_messages,
        "oversized_bytes": audit.oversized_bytes,
        "budget_gaps": sum(1 for gap in audit.gaps if gap.budget),
        "budget_gap_bytes": sum(gap.length for gap in audit.gaps if gap.budget),
        "unheld_segments": audit.unheld_segments,
        "unheld_bytes": audit.unheld_bytes,
        "packet_count": len(judged.packets),
        "packets": judged.packets,
        "start": connection["start"][0],
        "end": connection["end"][0],
        "violations": judged.violations,
        "connections": judged.connection,
        "gaps": gaps,
        "not_assessable": judged.not_assessable,
        "lenient": judged.lenient,
        "replayed": True,
    }


def _side(audit: FlowAudit, side: int) -> str:
    direction = audit.direction(side)
    return "unknown" if direction is None else direction.value


def flow_judge(options: AuditOptions) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`judge_partition` bound to ``options``."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return judge_partition(batches, options)

    return run
