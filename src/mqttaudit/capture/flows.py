"""Flows: the segments of one pair of endpoints, split into connections and audited; and, for a whole capture
read in one process, the grouping of its segments into flows.

In a Spark job the grouping is a repartition by :func:`flow_key` and the per-flow step is :func:`flow_events`;
:func:`audit_records` does both in memory, for tests, the command line and small captures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .conversation import DEFAULT_OPTIONS, ConnectionAudit, FlowAudit, FlowOptions
from .reassembly import Endpoint
from .records import Record
from .segments import Segment, segments

FlowKey = tuple[Endpoint, Endpoint]


def flow_key(segment: Segment) -> FlowKey:
    """The two endpoints of a segment's flow, in a fixed order (the same for both directions)."""
    source, destination = (segment[1], segment[2]), (segment[3], segment[4])
    return (source, destination) if source <= destination else (destination, source)


def is_broker_flow(key: FlowKey, broker_ports: frozenset[int]) -> bool:
    """True when either endpoint uses a broker port."""
    return key[0][1] in broker_ports or key[1][1] in broker_ports


def flow_events(
    flow: Iterable[Segment], *, options: FlowOptions = DEFAULT_OPTIONS, end_time_ns: int | None = None
) -> list[FlowAudit]:
    """Audits the segments of one flow (both directions, in capture order), one :class:`FlowAudit` per
    connection: a SYN that is not a retransmission starts a new connection between the same endpoints.

    ``end_time_ns`` is when observation stopped (the end of the capture): the time of the last connection's
    ``Quiet`` when it was not closed. An earlier connection is observed until the next one starts.
    """
    audits: list[FlowAudit] = []
    connection: ConnectionAudit | None = None
    for segment in flow:
        if connection is not None and connection.is_new_connection(segment):
            audits.append(connection.finish(segment[0]))
            connection = None
        if connection is None:
            connection = ConnectionAudit(options)
        connection.feed(segment)
    if connection is not None:
        audits.append(connection.finish(end_time_ns))
    return audits


def audit_records(
    records: Iterable[Record], *, options: FlowOptions = DEFAULT_OPTIONS, skipped: Counter[str] | None = None
) -> list[FlowAudit]:
    """Audits every flow of a capture that uses a broker port, holding all their segments in memory; records
    without a TCP segment are counted in ``skipped`` by reason. Flows come in the order of their first segment."""
    flows: dict[FlowKey, list[Segment]] = {}
    end_time_ns: int | None = None
    for _index, segment in segments(records, skipped):
        end_time_ns = segment[0] if end_time_ns is None else max(end_time_ns, segment[0])
        key = flow_key(segment)
        if is_broker_flow(key, options.broker_ports):
            flows.setdefault(key, []).append(segment)
    audits: list[FlowAudit] = []
    for flow in flows.values():
        audits.extend(flow_events(flow, options=options, end_time_ns=end_time_ns))
    return audits
