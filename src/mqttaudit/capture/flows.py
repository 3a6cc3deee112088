"""Flows: the segments of one pair of endpoints, split into connections and audited; and, for a whole capture
read in one process, the grouping of its segments into flows.

In a Spark job the grouping is a repartition by :func:`flow_key` and the per-flow step is :func:`flow_events`;
:func:`audit_records` does both in memory, for tests, the command line and small captures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import replace

from .conversation import DEFAULT_OPTIONS, ConnectionAudit, FlowAudit, FlowOptions
from .detect import StartScanner
from .reassembly import Endpoint
from .records import Record
from .segments import ACK, SYN, Segment, format_endpoint, segments

FlowKey = tuple[Endpoint, Endpoint]


def flow_key(segment: Segment) -> FlowKey:
    """The two endpoints of a segment's flow, in a fixed order (the same for both directions)."""
    source, destination = (segment[1], segment[2]), (segment[3], segment[4])
    return (source, destination) if source <= destination else (destination, source)


def is_broker_flow(key: FlowKey, broker_ports: frozenset[int]) -> bool:
    """True when either endpoint uses a broker port."""
    return key[0][1] in broker_ports or key[1][1] in broker_ports


def flow_name(key: FlowKey) -> str:
    """``10.0.0.1:1883|10.0.0.2:50000``: a flow's endpoints in their fixed order."""
    (ip_a, port_a), (ip_b, port_b) = key
    return f"{format_endpoint(ip_a, port_a)}|{format_endpoint(ip_b, port_b)}"


def handshake_port(segment: Segment) -> int:
    """The port a SYN or SYN-ACK says the service listens on (the SYN's receiver, the SYN-ACK's sender); -1 for a
    segment of another kind."""
    flags = segment[7]
    if flags & SYN:
        return segment[2] if flags & ACK else segment[4]
    return -1


class OtherTcp:
    """The TCP flows of a chunk that the audit leaves out (not on an MQTT port): frames and payload bytes per flow,
    then per service port (:meth:`by_service`)."""

    def __init__(self) -> None:
        #: Per flow: [frames, payload bytes, service port (-1 until a SYN or SYN-ACK shows it)].
        self.flows: dict[FlowKey, list[int]] = {}

    def by_service(self) -> dict[str, list[int]]:
        """``[frames, payload bytes, flows]`` per service: its port (``"8080"``) when a handshake showed it or one
        endpoint takes part in more of the chunk's flows than the other (a server's does), else both ports
        (``"36815/59919"``: which side serves is not known)."""
        popularity: Counter[Endpoint] = Counter()
        for first, second in self.flows:
            popularity[first] += 1
            popularity[second] += 1
        out: dict[str, list[int]] = {}
        for (first, second), (frames, payload, shown) in self.flows.items():
            port = shown
            if port < 0 and popularity[first] != popularity[second]:
                port = (first if popularity[first] > popularity[second] else second)[1]
            low, high = sorted((first[1], second[1]))
            label = str(port) if port >= 0 else f"{low}/{high}"
            totals = out.setdefault(label, [0, 0, 0])
            totals[0] += frames
            totals[1] += payload
            totals[2] += 1
        return out


#: A TCP segment of an MQTT flow as the audit's reading tasks hand it on: the flow's name, the index of the record
#: that carried it, then the fields of :data:`Segment` (the payload copied out of the record).
SegmentRow = tuple[str, int, int, bytes, int, bytes, int, int, int, int, bytes]


def broker_segments(
    records: Iterable[Record],
    broker_ports: frozenset[int],
    skipped: Counter[str],
    rows: int,
    other: OtherTcp | None = None,
) -> Iterator[list[SegmentRow]]:
    """The TCP segments of MQTT flows (a broker port on either side) among ``records``, in lists of ``rows`` (the
    last may be shorter); the other records are counted in ``skipped`` by reason, and the other TCP flows in
    ``other``. (The reading tasks' loop over every frame of a capture: each flow's name is formatted once.)

    When reading ``records`` fails (a corrupt record header), the segments before it are handed on first, then
    the error is raised."""
    batch: list[SegmentRow] = []
    try:
        yield from _broker_segments(records, broker_ports, skipped, rows, other, batch)
    except Exception:
        if batch:
            yield batch
        raise
    if batch:
        yield batch


def _broker_segments(
    records: Iterable[Record],
    broker_ports: frozenset[int],
    skipped: Counter[str],
    rows: int,
    other: OtherTcp | None,
    batch: list[SegmentRow],
) -> Iterator[list[SegmentRow]]:
    """:func:`broker_segments`, filling ``batch`` (the caller hands on what is left in it)."""
    names: dict[FlowKey, str | list[int]] = {}  # a flow's name, or the counts of a flow left out
    for index, segment in segments(records, skipped):
        key = flow_key(segment)
        if key in names:
            name = names[key]
        elif is_broker_flow(key, broker_ports):
            name = names[key] = flow_name(key)
        else:
            name = names[key] = [0, 0, -1]
            if other is not None:
                other.flows[key] = name
        if not isinstance(name, str):
            skipped["not a broker port"] += 1
            name[0] += 1
            name[1] += len(segment[8])
            if name[2] < 0:
                name[2] = handshake_port(segment)
            continue
        time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, payload = segment
        batch.append((name, index, time_ns, src_ip, src_port, dst_ip, dst_port, seq, ack, flags, bytes(payload)))
        if len(batch) >= rows:
            yield batch[:]
            batch.clear()


def flow_events(
    flow: Iterable[Segment], *, options: FlowOptions = DEFAULT_OPTIONS, end_time_ns: int | None = None
) -> list[FlowAudit]:
    """Audits the segments of one flow (both directions, in capture order), one :class:`FlowAudit` per
    connection: whatever cannot continue the connection before starts another one between the same endpoints
    (:meth:`~.reassembly.Reassembler.is_new_connection`).

    ``end_time_ns`` is when observation stopped (the end of the capture): the time of the last connection's
    ``Quiet`` when it was not closed. An earlier connection is observed until the next one starts.
    """
    audits: list[FlowAudit] = []
    connection: ConnectionAudit | None = None
    for segment in flow:
        if connection is not None and connection.is_new_connection(segment):
            _numbered(audits, connection.finish(segment[0]))
            connection = None
        if connection is None:
            connection = ConnectionAudit(options)
        connection.feed(segment)
    if connection is not None:
        _numbered(audits, connection.finish(end_time_ns))
    return audits


def _numbered(audits: list[FlowAudit], audit: FlowAudit) -> None:
    """Appends ``audit``, numbered after the connections of the flow that started at the same time (a capture's
    timestamps may repeat), so that every connection keeps an id of its own."""
    previous = audits[-1] if audits else None
    if previous is not None and previous.first_time == audit.first_time:
        audit = replace(audit, ordinal=previous.ordinal + 1)
    audits.append(audit)


def audit_records(
    records: Iterable[Record],
    *,
    options: FlowOptions = DEFAULT_OPTIONS,
    skipped: Counter[str] | None = None,
    detect: bool = False,
) -> list[FlowAudit]:
    """Audits every flow of a capture that uses a broker port, holding all their segments in memory; records
    without a TCP segment are counted in ``skipped`` by reason. Flows come in the order of their first segment.

    With ``detect``, the server ports on which a stream starts with a CONNECT (:mod:`.detect`) are broker ports
    too (and every TCP flow is held until they are known)."""
    flows: dict[FlowKey, list[Segment]] = {}
    end_time_ns: int | None = None
    from .tls import KeyLog

    keylog = options.keylog
    randoms = keylog.client_randoms if isinstance(keylog, KeyLog) else frozenset()
    scanner = StartScanner(randoms) if detect else None
    for _index, segment in segments(records, skipped):
        end_time_ns = segment[0] if end_time_ns is None else max(end_time_ns, segment[0])
        key = flow_key(segment)
        if scanner is not None:
            scanner.feed(segment)
            flows.setdefault(key, []).append(segment)
        elif is_broker_flow(key, options.broker_ports):
            flows.setdefault(key, []).append(segment)
    if scanner is not None:
        options = replace(options, broker_ports=options.broker_ports | scanner.proven_ports())
    audits: list[FlowAudit] = []
    for key, flow in flows.items():
        if is_broker_flow(key, options.broker_ports):
            audits.extend(flow_events(flow, options=options, end_time_ns=end_time_ns))
    return audits
