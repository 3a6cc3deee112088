"""MQTT 5.0: the valid flows of a connection (sections 3.1, 3.2, 3.8 to 3.12, 3.14, 4.3): CONNECT and CONNACK with
properties and an Assigned Client Identifier, PINGREQ, SUBSCRIBE and UNSUBSCRIBE with a Reason Code per filter,
QoS 1 and 2 round trips with Reason Codes, and DISCONNECT with and without the Will. The statement ids are those of
MQTT 5.0 (5.0 renumbers: ``MQTT-3.2.2-16`` here is the Assigned Client Identifier)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import Connack, Connect, Pingreq, Pingresp, ProtocolVersion, Subscription, Will
from ...codec import properties as props
from ..case import CaseContext, NotApplicable, Script, case

V5: Final = ProtocolVersion.V5
#: Disconnect with Will Message (Table 3.10).
WITH_WILL: Final = 0x04
#: Client Identifier not valid (Table 3.1): a server may refuse an empty one with it [MQTT-3.1.3-8].
CLIENT_ID_NOT_VALID: Final = 0x85
#: The Session Expiry Interval of the cases that keep a session: long enough to reconnect, short if left behind.
SESSION_SECONDS: Final = 60


def v5_case(
    case_id: str,
    statements: Iterable[str],
    title: str,
    *,
    stimulus: str,
    expected: str,
    timing: bool = False,
    provokes: Iterable[str] = (),
) -> Callable[[Script], Script]:
    """Registers an MQTT 5.0 case ``v5/<family>/<name>`` in the family ``v5/<family>`` (``provokes``: the Client's
    statements its stimulus breaks, see :attr:`~mqttaudit.probe.case.Case.provokes`)."""
    family = "/".join(case_id.split("/")[:2])
    return case(
        case_id,
        statements,
        title,
        stimulus=stimulus,
        expected=expected,
        timing=timing,
        family=family,
        protocol=V5,
        provokes=provokes,
    )


@v5_case(
    "v5/connect/accepted",
    [R5.MQTT_3_1_4_5, R5.MQTT_3_2_0_1, R5.MQTT_3_2_2_2, R5.MQTT_3_1_3_5],
    "A valid MQTT 5.0 CONNECT is accepted",
    stimulus="5.0 CONNECT, Clean Start 1, a 23-character alphanumeric Client Identifier, no properties",
    expected="CONNACK first, Reason Code 0x00, Session Present 0, Acknowledge Flags bits 7-1 zero",
)
async def connect_accepted(context: CaseContext) -> None:
    connection = await context.connect()
    await context.disconnect(connection)


@v5_case(
    "v5/connect/assigned-client-identifier",
    [R5.MQTT_3_2_2_16, R5.MQTT_3_1_3_7],
    "An empty Client Identifier gets an Assigned Client Identifier",
    stimulus="5.0 CONNECT with a zero-length Client Identifier and Clean Start 1, then PINGREQ",
    expected="CONNACK 0x00 carrying an Assigned Client Identifier (or CONNACK 0x85 and close: not applicable)",
)
async def assigned_client_identifier(context: CaseContext) -> None:
    connection = await context.open()
    await connection.send(Connect(protocol_level=V5.level, client_id=""))
    ack = await connection.wait_type(Connack)
    if isinstance(ack, Connack) and ack.return_code == CLIENT_ID_NOT_VALID:
        raise NotApplicable("the broker refuses a zero-length Client Identifier (CONNACK 0x85) [MQTT-3.1.3-8]")
    if isinstance(ack, Connack) and ack.return_code == 0:
        await connection.send(Pingreq())
        await connection.wait_type(Pingresp)
        await context.disconnect(connection)


@v5_case(
    "v5/connect/properties-honoured",
    [R5.MQTT_3_1_4_5, R5.MQTT_3_1_2_24, R5.MQTT_3_1_2_27],
    "CONNECT properties are honoured on the deliveries that follow",
    stimulus="5.0 CONNECT with Receive Maximum 10, Maximum Packet Size 4096, Topic Alias Maximum 0, Request "
    "Response Information 0 and a User Property; subscribe to a topic of the case and publish QoS 1 to it",
    expected="CONNACK 0x00 without Response Information; the delivery carries no Topic Alias; no packet from the "
    "broker exceeds 4096 bytes",
)
async def properties_honoured(context: CaseContext) -> None:
    connection = await context.connect(
        properties=props.make(
            receive_maximum=10,
            maximum_packet_size=4096,
            topic_alias_maximum=0,
            request_response_information=0,
            user_property=[("mqttaudit", "probe")],
        )
    )
    topic = context.topic("t")
    await context.subscribe_granted(connection, topic, 1)
    await context.publish(connection, topic, b"properties", qos=1)
    await context.deliveries(connection, topic)
    await context.disconnect(connection)


@v5_case(
    "v5/connect/session-resumed",
    [R5.MQTT_3_1_2_5],
    "Clean Start 0 resumes a session that has not expired",
    stimulus=f"5.0 CONNECT, Clean Start 0, Session Expiry Interval {SESSION_SECONDS}; SUBSCRIBE; DISCONNECT; the "
    "same CONNECT again, then a message to the subscribed topic",
    expected="second CONNACK 0x00 with Session Present 1; the subscription delivers the message",
)
async def session_resumed(context: CaseContext) -> None:
    client_id = context.client_id()
    keep = props.make(session_expiry_interval=SESSION_SECONDS)
    first = await context.connect("first", client_id=client_id, clean_session=False, properties=keep)
    topic = context.topic("t")
    await context.subscribe_granted(first, topic, 1)
    await context.disconnect(first)
    again = await context.connect("again", client_id=client_id, clean_session=False, properties=keep)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"resumed", qos=1)
    await context.deliveries(again, topic)
    # the session ends with this connection: DISCONNECT may lower the interval to 0 (3.14.2.2.2)
    await context.disconnect(again, properties=props.make(session_expiry_interval=0))
    await context.disconnect(publisher)


@v5_case(
    "v5/ping/pingresp",
    [R5.MQTT_3_12_4_1],
    "PINGREQ is answered with PINGRESP",
    stimulus="5.0 CONNECT, then PINGREQ",
    expected="PINGRESP",
)
async def pingresp(context: CaseContext) -> None:
    connection = await context.connect()
    await connection.send(Pingreq())
    await connection.wait_type(Pingresp)
    await context.disconnect(connection)


@v5_case(
    "v5/subscribe/reason-code-per-filter",
    [R5.MQTT_3_8_4_1, R5.MQTT_3_8_4_2, R5.MQTT_3_8_4_6, R5.MQTT_3_9_3_1],
    "SUBACK carries one Reason Code per Topic Filter, in order",
    stimulus="5.0 SUBSCRIBE with three filters of the case, requesting QoS 2, 0 and 1",
    expected="SUBACK with the SUBSCRIBE's Packet Identifier and three Reason Codes in filter order, each a granted "
    "QoS (at most the one requested) or a failure code",
)
async def subscribe_reason_codes(context: CaseContext) -> None:
    connection = await context.connect()
    await context.subscribe(
        connection, (context.topic("two"), 2), (context.topic("zero"), 0), (context.topic("one"), 1)
    )
    await context.disconnect(connection)


@v5_case(
    "v5/subscribe/no-local",
    [R5.MQTT_3_8_4_1, R5.MQTT_3_8_3_3],
    "No Local keeps a client's own messages from it",
    stimulus="5.0 SUBSCRIBE QoS 1 with No Local 1, Retain As Published 1 and Retain Handling 2, then a QoS 1 "
    "PUBLISH to that topic on the same connection",
    expected="SUBACK granting the subscription; the message is not sent back to the publishing connection",
)
async def no_local(context: CaseContext) -> None:
    connection = await context.connect()
    topic = context.topic("t")
    options = Subscription(topic_filter=topic, qos=1, no_local=True, retain_as_published=True, retain_handling=2)
    await context.subscribe_granted(connection, options)
    await context.publish(connection, topic, b"no-local", qos=1)
    await context.settle(connection)
    await context.disconnect(connection)


@v5_case(
    "v5/unsubscribe/reason-code-per-filter",
    [R5.MQTT_3_10_4_4, R5.MQTT_3_11_3_1, R5.MQTT_3_11_3_2],
    "UNSUBACK carries one Reason Code per Topic Filter, in order",
    stimulus="5.0 SUBSCRIBE to two filters of the case, then one UNSUBSCRIBE of those two and a third filter never "
    "subscribed",
    expected="UNSUBACK with the UNSUBSCRIBE's Packet Identifier and three Reason Codes in filter order (0x00, "
    "0x00, then 0x11 No subscription existed)",
)
async def unsubscribe_reason_codes(context: CaseContext) -> None:
    connection = await context.connect()
    first, second, never = context.topic("a"), context.topic("b"), context.topic("never")
    await context.subscribe(connection, (first, 0), (second, 1))
    await context.unsubscribe(connection, first, never, second)
    await context.disconnect(connection)


@v5_case(
    "v5/publish/qos1-round-trip",
    [R5.MQTT_3_3_4_1, R5.MQTT_4_3_2_4, R5.MQTT_3_8_4_8],
    "A QoS 1 message is acknowledged and delivered at QoS 1",
    stimulus="a 5.0 subscriber at QoS 1; a 5.0 publisher sends a QoS 1 PUBLISH to its topic",
    expected="PUBACK to the publisher with its Packet Identifier and a PUBACK Reason Code; the subscriber gets "
    "the message at QoS 1",
)
async def qos1_round_trip(context: CaseContext) -> None:
    topic = context.topic("t")
    subscriber = await context.connect("subscriber")
    context.require("qos1", "a QoS 1 round trip")
    await context.subscribe_granted(subscriber, topic, 1)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"qos1", qos=1)
    await context.deliveries(subscriber, topic)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/publish/qos2-round-trip",
    [R5.MQTT_3_3_4_1, R5.MQTT_4_3_3_11, R5.MQTT_4_3_3_4],
    "A QoS 2 message completes both exchanges with Reason Codes",
    stimulus="a 5.0 subscriber at QoS 2; a 5.0 publisher sends a QoS 2 PUBLISH to its topic and answers PUBREC "
    "with PUBREL",
    expected="PUBREC then PUBCOMP to the publisher with its Packet Identifier and valid Reason Codes; the "
    "subscriber gets the message at QoS 2, and PUBREL after its PUBREC",
)
async def qos2_round_trip(context: CaseContext) -> None:
    topic = context.topic("t")
    subscriber = await context.connect("subscriber")
    context.require("qos2", "a QoS 2 round trip")
    await context.subscribe_granted(subscriber, topic, 2)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"qos2", qos=2)
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)  # the PUBREL for the subscriber's PUBREC, and its PUBCOMP
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/publish/qos1-no-subscribers",
    [R5.MQTT_4_3_2_4],
    "A QoS 1 message nobody subscribed to is still acknowledged",
    stimulus="a 5.0 QoS 1 PUBLISH to a topic of the case no client subscribes to",
    expected="PUBACK with the Packet Identifier; Reason Code 0x00 or 0x10 No matching subscribers",
)
async def qos1_no_subscribers(context: CaseContext) -> None:
    publisher = await context.connect()
    await context.publish(publisher, context.topic("nobody"), b"alone", qos=1)
    await context.disconnect(publisher)


def _will(context: CaseContext, topic: str) -> Will:
    return Will(topic=topic, message=b"will of " + context.case.id.encode(), qos=1)


@v5_case(
    "v5/disconnect/normal-discards-will",
    [R5.MQTT_3_14_4_3],
    "DISCONNECT 0x00 discards the Will",
    stimulus="a 5.0 client with a Will (QoS 1, no Will Delay) sends DISCONNECT with Reason Code 0x00 and closes; a "
    "subscriber to the Will Topic watches",
    expected="the Will is not published",
)
async def normal_disconnect(context: CaseContext) -> None:
    topic = context.topic("will")
    watcher = await context.subscriber("watcher", (topic, 1))
    leaving = await context.connect("leaving", will=_will(context, topic))
    await context.disconnect(leaving, 0x00)
    await context.settle(watcher)
    await context.disconnect(watcher)


@v5_case(
    "v5/disconnect/with-will-message",
    [R5.MQTT_3_1_2_8],
    "DISCONNECT 0x04 publishes the Will",
    stimulus="a 5.0 client with a Will (QoS 1, not retained, no Will Delay) sends DISCONNECT with Reason Code 0x04 "
    "Disconnect with Will Message and closes; a subscriber to the Will Topic watches",
    expected="the Will is published, not retained, to the subscriber",
    timing=True,
)
async def disconnect_with_will(context: CaseContext) -> None:
    topic = context.topic("will")
    watcher = await context.subscriber("watcher", (topic, 1))
    leaving = await context.connect("leaving", will=_will(context, topic))
    await context.disconnect(leaving, WITH_WILL)
    await context.deliveries(watcher, topic)
    await context.disconnect(watcher)
