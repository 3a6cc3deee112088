"""Each captured connection is decoded with its own version: the client's CONNECT names it, the server's stream
follows, decoders started after a gap read as the version learned; MQTT 5.0 connections are decoded and judged as
5.0, MQTT 3.1 connections decoded and not judged; their bytes are accounted for like any other (a packet breaking a
MUST is malformed)."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.capture import FlowAudit, flow_events, writer
from mqttaudit.capture.conversation import AFTER_GAP, CUT_BY_GAP, NOT_JUDGED, handling
from mqttaudit.codec import Direction, properties
from mqttaudit.judge import JudgeConfig, Sent
from mqttaudit.pipeline.conversations import connection_flow, judge_flow
from mqttaudit.pipeline.options import AuditOptions

from .test_capture_flows import assert_accounted, only, timed

V5 = codec.ProtocolVersion.V5
CLIENT, SERVER = Direction.FROM_CLIENT, Direction.FROM_SERVER
#: The judge configuration of an audit (MQTT 5.0 among the supported Protocol Levels).
AUDIT_CONFIG = AuditOptions().judge_config


def v5(packet: codec.Packet) -> bytes:
    return codec.encode(packet, version=V5)


CONNECT_5 = v5(
    codec.Connect(client_id="meter-5", protocol_level=5, properties=properties.make(session_expiry_interval=300))
)
CONNACK_5 = v5(codec.Connack(properties=properties.make(topic_alias_maximum=10, receive_maximum=20)))


def publish_5(index: int, alias: int) -> bytes:
    message = codec.Publish(
        topic=f"m/{index}",
        payload=b"x" * 30,
        qos=1,
        retain=False,
        dup=False,
        packet_id=index,
        properties=properties.make(topic_alias=alias, content_type="text/plain", user_property=[("k", f"v{index}")]),
    )
    return v5(message)


def puback_5(index: int) -> bytes:
    return v5(codec.Puback(packet_id=index, reason_code=0x10, properties=properties.make(reason_string="none")))


def sent(audit: FlowAudit) -> list[tuple[Direction, codec.Packet | None]]:
    return [(event.sender, event.frame.packet) for event in audit.events if isinstance(event, Sent)]


def test_an_mqtt_5_connection_is_decoded_as_5_0_on_both_sides_and_judged_as_5_0() -> None:
    session = writer.TcpSession()
    packets = [
        *session.handshake(),
        session.send(0, CONNECT_5),
        session.send(1, CONNACK_5),
        session.send(0, publish_5(1, 3)),
        session.send(1, puback_5(1)),
    ]
    audit = only(flow_events(timed(packets)))
    assert audit.version == "5.0" and audit.judged and "5.0" not in NOT_JUDGED
    # Read as 3.1.1, the CONNACK's properties and the PUBACK's reason code would each break a length rule.
    assert all(not side_frame.frame.violations for side_frame in audit.frames)
    kinds = [(sender, type(packet).__name__) for sender, packet in sent(audit)]
    assert kinds == [(CLIENT, "Connect"), (SERVER, "Connack"), (CLIENT, "Publish"), (SERVER, "Puback")]
    puback = sent(audit)[-1][1]
    assert isinstance(puback, codec.Puback) and puback.reason_code == 0x10
    assert audit.total.packets == audit.total.stream and audit.total.malformed == 0
    assert_accounted(audit)
    # CONNACK 0x00 to a valid CONNECT, PUBACK 0x10 (No matching subscribers) to the QoS 1 PUBLISH: nothing owed.
    result = judge_flow(connection_flow("c.pcap", audit), AUDIT_CONFIG)
    assert result.violations.data["rule"] == [] and result.not_assessable.data["rule"] == []
    assert result.connection.data["handling"] == [handling("5.0")]


def test_after_a_gap_both_sides_read_as_the_version_their_connect_named() -> None:
    # Each side loses bytes; the decoders that take over after the proven boundary are new ones, and still read
    # MQTT 5.0: PUBLISHes with properties for the client, PUBACKs with a reason code for the server. (The boundary
    # proof reads MQTT 3.1.1: the server's first PUBACKs after its gap are in the short form both versions share.)
    session = writer.TcpSession()
    captured = [*session.handshake(), session.send(0, CONNECT_5), session.send(1, CONNACK_5)]
    for index in range(1, 9):
        packet = publish_5(index, index)
        if index == 3:
            captured.append(session.send(0, packet[:8]))
            session.send(0, packet[8:20])  # lost
            captured.append(session.send(0, packet[20:]))
        else:
            captured.append(session.send(0, packet))
    for index in range(1, 9):
        packet = puback_5(index) if index in (1, 6, 7, 8) else v5(codec.Puback(packet_id=index))
        if index == 2:
            session.send(1, packet)  # lost whole
        else:
            captured.append(session.send(1, packet))
    audit = only(flow_events(timed(captured)))
    assert audit.version == "5.0" and [gap.side for gap in audit.gaps] == [0, 1]
    assert all(not side_frame.frame.violations for side_frame in audit.frames)
    publishes = [p for sender, p in sent(audit) if sender is CLIENT and isinstance(p, codec.Publish)]
    assert [p.packet_id for p in publishes] == [1, 2, 4, 5, 6, 7, 8]
    assert all(properties.first(p.properties, properties.TOPIC_ALIAS) == p.packet_id for p in publishes)
    pubacks = [p for sender, p in sent(audit) if sender is SERVER and isinstance(p, codec.Puback)]
    assert [(p.packet_id, p.reason_code) for p in pubacks] == [
        (1, 0x10),
        *((index, None) for index in (3, 4, 5)),
        *((index, 0x10) for index in (6, 7, 8)),
    ]
    # The client's third PUBLISH, cut by the gap, is set aside; nothing of the server's stream is.
    assert [(u.side, u.reason) for u in audit.unassessable] == [(0, CUT_BY_GAP), (0, AFTER_GAP)]
    assert_accounted(audit)


def test_a_5_0_packet_breaking_a_must_is_malformed_and_reported_with_its_5_0_id_and_level() -> None:
    # A PUBLISH whose Topic Alias is 0: [MQTT-3.3.2-8] in MQTT 5.0, a MUST. Its bytes are malformed, the others
    # packets; the codec reports it, and the judge asks the server to close on it [MQTT-4.13.1-1], which the
    # capture cannot show: it ends before the server's TCP acknowledged the PUBLISH.
    bad = codec.Publish(
        topic="t",
        payload=b"p",
        qos=0,
        retain=False,
        dup=False,
        packet_id=None,
        properties=properties.make(topic_alias=0),
    )
    bad_bytes = codec.encode(bad, version=V5, validate=False)
    session = writer.TcpSession()
    packets = [*session.handshake(), session.send(0, CONNECT_5), session.send(1, CONNACK_5), session.send(0, bad_bytes)]
    audit = only(flow_events(timed(packets)))
    assert audit.total.malformed == len(bad_bytes)
    assert audit.total.packets == len(CONNECT_5) + len(CONNACK_5)
    result = judge_flow(connection_flow("c.pcap", audit), AUDIT_CONFIG)
    rows = result.violations.data
    assert list(zip(rows["rule"], rows["level"], rows["origin"], rows["actor"], rows["rule_version"], strict=True)) == [
        ("MQTT-3.3.2-8", "MUST", "codec", "client", "5.0")
    ]
    undecided = result.not_assessable.data
    assert sorted(zip(undecided["rule"], undecided["actor"], undecided["tag"], undecided["section"], strict=True)) == [
        ("MQTT-3.3.2-8", "server", "receiver never acknowledged the bytes", "3.3.2.3.4"),
        ("MQTT-4.13.1-1", "server", "receiver never acknowledged the bytes", "4.13.1"),
    ]
    assert result.connection.data["handling"] == [handling("5.0")]
    assert handling("5.0") == "judged against MQTT 5.0"
    packets_rows = result.packets.data
    assert packets_rows["version"] == ["5.0"] * 3
    assert packets_rows["topic_alias"] == [None, None, 0]
    assert packets_rows["topic_alias_maximum"] == [None, 10, None]
    assert packets_rows["session_expiry_interval"] == [300, None, None]


def test_an_mqtt_3_1_connection_is_decoded_with_the_rules_3_1_shares_and_not_judged() -> None:
    # MQTT 3.1 leaves the DISCONNECT's flags unspecified: e2 00 is no finding there, unlike in 3.1.1 [MQTT-3.14.1-1].
    connect = codec.encode(codec.Connect(client_id="old", protocol_name="MQIsdp", protocol_level=3), version="3.1")
    session = writer.TcpSession()
    packets = [*session.handshake(), session.send(0, connect), session.send(1, bytes.fromhex("20020000"))]
    packets.append(session.send(0, bytes.fromhex("e200")))
    audit = only(flow_events(timed(packets)))
    assert audit.version == "3.1" and not audit.judged
    assert all(not side_frame.frame.violations for side_frame in audit.frames)
    assert [type(p).__name__ for _sender, p in sent(audit)] == ["Connect", "Connack", "Disconnect"]
    result = judge_flow(connection_flow("c.pcap", audit), JudgeConfig())
    assert result.connection.data["handling"] == [handling("3.1")] and result.violations.data["rule"] == []
    assert result.connection.data["protocol_level"] == [3] and result.connection.data["client_id"] == ["old"]


def test_a_connect_of_another_name_and_level_pair_is_read_as_its_level_says() -> None:
    # "MQIsdp" with level 4 names no version: read as 3.1.1 (its level), labelled "other", and judged. "MQTT" with
    # level 5 but... level 5 with the name "MQIsdp" is read as 5.0 (the level decides the layout) and labelled so.
    other = codec.encode(codec.Connect(client_id="x", protocol_name="MQIsdp", protocol_level=4), validate=False)
    session = writer.TcpSession()
    audit = only(flow_events(timed([*session.handshake(), session.send(0, other)])))
    assert audit.version == "other" and audit.judged
    odd = codec.encode(
        codec.Connect(client_id="y", protocol_name="MQIsdp", protocol_level=5), version=V5, validate=False
    )
    session = writer.TcpSession()
    audit = only(flow_events(timed([*session.handshake(), session.send(0, odd)])))
    assert audit.version == "5.0" and audit.judged
    [frame] = [side_frame.frame for side_frame in audit.frames]
    assert isinstance(frame.packet, codec.Connect) and frame.packet.client_id == "y"
