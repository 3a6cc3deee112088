"""Captures: pcap/pcapng reading, link/IP/TCP parsing, sans-I/O TCP reassembly per connection, and the judge's
events per connection, with gaps, overlaps and unframeable bytes recorded, never hidden.

- ``records``, ``pcap``, ``pcapng``: the records of a capture, parsed from bytes handed in.
- ``chunks``, ``reader``: record-aligned chunks of a file (each decodable alone) and the only code that reads files.
- ``link``, ``segments``: from a captured frame to a TCP segment, or the reason there is none.
- ``reassembly``: one connection's byte streams, with gaps, duplicates and conflicts.
- ``resync``, ``conversation``, ``flows``: framing the streams with the codec, proving packet boundaries after gaps
  and mid-stream starts, and accounting for every byte.
- ``writer``: deterministic pcap/pcapng and frame writing, for tests and benchmarks.

>>> import io
>>> from mqttaudit import codec
>>> from mqttaudit.capture import audit_records, read_records, writer
>>> session = writer.TcpSession()
>>> packets = session.handshake() + [session.send(0, codec.encode(codec.Connect(client_id="probe")))]
>>> packets += [session.send(1, codec.encode(codec.Connack())), session.fin(0), session.fin(1)]
>>> data = writer.pcap_bytes([(i * 1000, p) for i, p in enumerate(packets)], linktype=101)
>>> [flow] = audit_records(read_records(lambda: io.BytesIO(data)))
>>> [type(event).__name__ for event in flow.events], flow.total.packets
(['Sent', 'Sent', 'Closed'], 23)
"""

from .chunks import Chunk, Opener, plan_chunks, whole_file
from .conversation import ByteCounts, ConnectionAudit, FlowAudit, FlowOptions, SideFrame, Unassessable
from .errors import CaptureError
from .flows import FlowKey, audit_records, flow_events, flow_key
from .link import Skip
from .reader import ChunkReader, read_chunk, read_records
from .reassembly import Conflict, Data, End, Endpoint, Gap, Reassembler, SideStats
from .records import Interface, Record, Truncation, frame_number
from .resync import BoundaryHunt, ResyncRule
from .segments import Segment, decode_segment, segments

__all__ = [
    "BoundaryHunt",
    "ByteCounts",
    "CaptureError",
    "Chunk",
    "ChunkReader",
    "Conflict",
    "ConnectionAudit",
    "Data",
    "End",
    "Endpoint",
    "FlowAudit",
    "FlowKey",
    "FlowOptions",
    "Gap",
    "Interface",
    "Opener",
    "Reassembler",
    "Record",
    "ResyncRule",
    "Segment",
    "SideFrame",
    "SideStats",
    "Skip",
    "Truncation",
    "Unassessable",
    "audit_records",
    "decode_segment",
    "flow_events",
    "flow_key",
    "frame_number",
    "plan_chunks",
    "read_chunk",
    "read_records",
    "segments",
    "whole_file",
]
