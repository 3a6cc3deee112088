"""Every table of an audit, in one place: the Parquet tables the tasks write, and what the stages hand each other
(chunk descriptors, runs of segments, judged connections, each broker's replay, transcripts, the first pass's stream
starts). Each is an Arrow schema (a Parquet table's columns are a tuple of names, typed by :data:`TYPES`); the DDL
Spark is given is derived from it (:func:`ddl`), never written out.

Times in the tables are seconds since the epoch (float64), as the capture recorded them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mqttaudit.codec import properties

# -- the Parquet tables -------------------------------------------------------------------------------------------

#: The MQTT 5.0 properties the packets table has a column for (by the table's keyword, :data:`properties.PROPERTIES`):
#: the ones people filter on. A column is null when the packet does not carry the property.
PROPERTY_IDS: dict[str, int] = {
    "topic_alias": properties.TOPIC_ALIAS,
    "message_expiry_interval": properties.MESSAGE_EXPIRY_INTERVAL,
    "content_type": properties.CONTENT_TYPE,
    "response_topic": properties.RESPONSE_TOPIC,
    "payload_format_indicator": properties.PAYLOAD_FORMAT_INDICATOR,
    "subscription_identifiers": properties.SUBSCRIPTION_IDENTIFIER,
    "session_expiry_interval": properties.SESSION_EXPIRY_INTERVAL,
    "reason_string": properties.REASON_STRING,
    "user_properties": properties.USER_PROPERTY,
    "receive_maximum": properties.RECEIVE_MAXIMUM,
    "maximum_packet_size": properties.MAXIMUM_PACKET_SIZE,
    "topic_alias_maximum": properties.TOPIC_ALIAS_MAXIMUM,
    "assigned_client_identifier": properties.BY_KEYWORD["assigned_client_identifier"].identifier,
    "authentication_method": properties.AUTHENTICATION_METHOD,
}
PROPERTY_COLUMNS = tuple(PROPERTY_IDS)
PACKET_COLUMNS = (
    "capture",
    "flow",
    "event",
    "direction",
    "frame",
    "offset",
    "length",
    "time",
    "type",
    "packet_id",
    "qos",
    "retain",
    "dup",
    "topic",
    "client_id",
    "version",
    "reason_code",
    *PROPERTY_COLUMNS,
)
VIOLATION_COLUMNS = (
    "capture",
    "flow",
    "event",
    "rule",
    "level",
    "section",
    "actor",
    "origin",
    "kind",
    "frame",
    "offset",
    "time",
    "detail",
    "expected",
    "evidence",
    "cause_event",
    "cause_frame",
    "rule_version",
    "also",
)
CONNECTION_COLUMNS = (
    "capture",
    "flow",
    "client",
    "server",
    "client_id",
    "protocol_level",
    "clean_session",
    "keep_alive",
    "connack_code",
    "start",
    "end",
    "ended_by",
    "how",
    "mid_stream",
    "roles",
    "transport",
    "version",
    "handling",
    "packets",
    "violations",
    "not_assessable",
    "lenient",
)
#: The columns that place an instance of a rule, first in the not-assessable and leniency tables: where (capture,
#: connection and its endpoints), whose statement, and which packet.
_RULE_INSTANCE_COLUMNS = (
    "capture",
    "flow",
    "client",
    "server",
    "client_id",
    "rule",
    "level",
    "section",
    "actor",
    "event",
    "frame",
)
#: One row per instance of a rule the audit could not decide, with the reason (its tag first, for grouping).
NOT_ASSESSABLE_COLUMNS = (
    *_RULE_INSTANCE_COLUMNS,
    "time",
    "origin",
    "tag",
    "reason",
)


#: One row per leniency: a defect the receiver (the ``actor``) accepted, which no statement bound it to detect (MQTT
#: 5.0, section 4.13.1): the rule the packet broke (its sender's), the others it broke (``also``, as in the
#: violations table), what was accepted and how, the basis, and the bytes that show it. Not a violation: counted
#: apart.
LENIENT_COLUMNS = (
    *_RULE_INSTANCE_COLUMNS,
    "offset",
    "time",
    "detail",
    "basis",
    "also",
    "evidence",
    "cause_event",
    "cause_frame",
    "rule_version",
)
GAP_COLUMNS = ("capture", "flow", "direction", "offset", "length", "time", "kind", "reason")
#: The ``kind`` of a gaps row: bytes never captured, bytes captured but not framed with confidence, and bytes that
#: arrived twice with different content (a record beside the byte account: the first copy's bytes are counted
#: where its frame went).
GAP_KINDS = {"gap": "gap", "not_assessable": "not-assessable", "conflict": "conflict"}
DELIVERY_COLUMNS = (
    "broker",
    "publisher_flow",
    "publisher_event",
    "topic",
    "will",
    "subscriber_flow",
    "client_id",
    "expected",
    "rule",
    "retain",
    "observed",
    "copies_allowed",
    "copies_observed",
    "qos_expected",
    "qos_observed",
)
ROUTING_COLUMNS = (
    "broker",
    "flow",
    "event",
    "kind",
    "rule",
    "level",
    "section",
    "time",
    "detail",
    "expected",
    "rule_version",
)
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
    "transport": pa.string(),
    "packets": pa.int64(),
    "violations": pa.int64(),
    "not_assessable": pa.int64(),
    "lenient": pa.int64(),
    "basis": pa.string(),
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
    "version": pa.string(),
    "handling": pa.string(),
    "cause_event": pa.int64(),
    "cause_frame": pa.int64(),
    "tag": pa.string(),
    "rule_version": pa.string(),
    #: The other statements the act of a violation row breaks (one act, one row: see ``Finding.also``).
    "also": pa.list_(pa.string()),
    # The packets table's reason code and MQTT 5.0 properties (null when the packet carries none).
    "reason_code": pa.int64(),
    "topic_alias": pa.int64(),
    "message_expiry_interval": pa.int64(),
    "content_type": pa.string(),
    "response_topic": pa.string(),
    "payload_format_indicator": pa.int64(),
    "subscription_identifiers": pa.list_(pa.int64()),
    "session_expiry_interval": pa.int64(),
    "reason_string": pa.string(),
    "user_properties": pa.list_(pa.string()),
    "receive_maximum": pa.int64(),
    "maximum_packet_size": pa.int64(),
    "topic_alias_maximum": pa.int64(),
    "assigned_client_identifier": pa.string(),
    "authentication_method": pa.string(),
}
#: Property columns that hold a list (every value, in wire order), whether or not the property repeats.
LIST_PROPERTIES = frozenset(name for name in PROPERTY_IDS if pa.types.is_list(TYPES[name]))


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
    """The Spark DDL of an Arrow type (the few flat ones the stages hand to Spark, and lists of them in the tables)."""
    if pa.types.is_list(data_type):
        return f"array<{spark_type(data_type.value_type)}>"
    return _SPARK_NAMES[data_type]


def ddl(schema: pa.Schema) -> str:
    return ", ".join(f"`{field.name}` {spark_type(field.type)}" for field in schema)


#: The Parquet tables of an audit and the columns of each, in the order the audit names them.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "packets": PACKET_COLUMNS,
    "violations": VIOLATION_COLUMNS,
    "connections": CONNECTION_COLUMNS,
    "not_assessable": NOT_ASSESSABLE_COLUMNS,
    "lenient": LENIENT_COLUMNS,
    "deliveries": DELIVERY_COLUMNS,
    "routing_findings": ROUTING_COLUMNS,
    "gaps": GAP_COLUMNS,
}
TABLES = tuple(TABLE_COLUMNS)


def table_schema(table: str) -> pa.Schema:
    return pa.schema(list(struct_type(TABLE_COLUMNS[table])))


# -- what the stages hand each other ----------------------------------------------------------------------------

#: A file to read back (a table's Parquet file on a filesystem Spark cannot read, see :mod:`.table_reading`).
PATH_SCHEMA = pa.schema([("path", pa.string())])
#: A chunk of a capture to read: the capture's name, where the task opens it, and the pickled chunk descriptor.
CHUNK_SCHEMA = pa.schema([("capture", pa.string()), ("path", pa.string()), ("chunk", pa.binary())])
#: The columns of one TCP segment, in a run of segments (:data:`SEGMENT_SCHEMA`).
RUN_SCHEMA = pa.schema(
    [
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
    ]
)
#: The columns of a run that make a :data:`~mqttaudit.capture.segments.Segment`, in its order.
SEGMENT_FIELDS = RUN_SCHEMA.names[1:]
#: What the reading stage hands on: runs of one flow's TCP segments from one chunk, each row carrying its segments
#: as one serialized Arrow record batch (:data:`RUN_SCHEMA`), which the JVM shuffles and sorts as one opaque value
#: (with a row per segment, converting, shuffling and sorting them cost the JVM about half the audit's CPU); or a
#: chunk's note (no flow).
SEGMENT_SCHEMA = pa.schema(
    [
        ("flow", pa.string()),
        ("capture", pa.string()),
        ("first_record", pa.int64()),
        ("first_time_ns", pa.int64()),
        ("segments", pa.binary()),
        ("note", pa.string()),
    ]
)
#: The order the judging stage takes a flow's runs of segments in: by flow, then by the time of each run's first
#: segment (the files of a rotation in the order they were written, whatever their names: ``r.pcap10`` after
#: ``r.pcap9``), then by file and record. The per-flow budget holds a flow's first runs in this order.
FLOW_ORDER = ("flow", "first_time_ns", "capture", "first_record")
COUNT_COLUMNS = ("stream_bytes", "packet_bytes", "malformed_bytes", "gap_bytes", "unassessable_bytes")
#: Per connection, what the summary names beside the byte account: the ranges of conflicting retransmissions
#: (``conflict`` rows of the gaps table) and their bytes, and the bytes left undecoded
#: past the cap of malformed frames (:data:`~mqttaudit.capture.conversation.DEFAULT_MAX_MALFORMED`); what each budget
#: (:mod:`mqttaudit.capture.budgets`) left out: packets above the per-message budget and their bytes, gaps declared
#: at the out-of-order budget and their bytes, and the segments and payload bytes of a flow past the per-flow budget.
BUDGET_COLUMNS = (
    "oversized_messages",
    "oversized_bytes",
    "budget_gaps",
    "budget_gap_bytes",
    "unheld_segments",
    "unheld_bytes",
)
RECORD_COLUMNS = ("conflict_ranges", "conflict_bytes", "capped_bytes", *BUDGET_COLUMNS)
#: What the judging stage hands back to Spark per connection (the tables it writes itself): what the summary
#: adds up, and where the routing replay finds the connection's transcript
#: (:class:`~.task_files.TranscriptWriter`). A row with ``note`` set carries a chunk's note instead, or a record of a
#: flow held by several files (``conflicting_copy``, ``duplicate_copy``: :func:`~.judging.fleet_rows`).
JUDGED_SCHEMA = pa.schema(
    [
        ("flow", pa.string()),
        ("capture", pa.string()),
        ("server", pa.string()),
        ("transcripts", pa.string()),
        ("transcript_row", pa.int64()),
        *[(name, pa.int64()) for name in COUNT_COLUMNS],
        *[(name, pa.int64()) for name in RECORD_COLUMNS],
        ("packet_count", pa.int64()),
        ("start", pa.float64()),
        ("end", pa.float64()),
        # False for a copy judged apart that the routing replay leaves out (another file's copy stands for it).
        ("replayed", pa.bool_()),
        ("note", pa.string()),
    ]
)
#: What the judging stage hands the routing replay: each connection's head, then its pieces, a row each
#: (:func:`~.slicing.connection_pieces`).
TRANSCRIPT_SCHEMA = pa.schema([("transcript", pa.binary())])
#: What the routing replay of one broker hands back (the tables it writes itself): ``summary.json``'s
#: ``routing_replays``.
REPLAYED_SCHEMA = pa.schema(
    [
        ("broker", pa.string()),
        ("partition", pa.int64()),
        ("deliveries", pa.int64()),
        ("routing_findings", pa.int64()),
        ("not_assessable", pa.string()),
    ]
)
#: What the first pass hands back per chunk: a proven server port (``kind`` "proven", ``how`` the proof), or what
#: the chunk could not decide alone (a stream start, "start", or a proving start, "connect", matched across chunks
#: by direction and seq).
STARTS_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("direction", pa.string()),
        ("seq", pa.int64()),
        ("port", pa.int32()),
        ("how", pa.string()),
    ]
)
#: A stream start of the first pass not matched within its chunk (:data:`STARTS_SCHEMA`'s ``direction`` and ``seq``).
LOOSE_STARTS_SCHEMA = pa.schema([STARTS_SCHEMA.field("direction"), STARTS_SCHEMA.field("seq")])
