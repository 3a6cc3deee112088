"""More MQTT 5.0 limits: the server's DISCONNECT (3.14), packets kept within a small client Maximum Packet Size
that :mod:`.v5_flows` does not reach (the CONNACK and the PUBREL), and Topic Alias mappings that end with their
connection (3.3.2.3.4).

A server DISCONNECT is optional: on an error it SHOULD come before the close (4.13.1), on a session takeover it
MAY (3.1.4). Each server-disconnect case provokes one with a different Reason Code (Topic Alias invalid 0x94,
Packet too large 0x95, Session taken over 0x8E, Receive Maximum exceeded 0x93, Protocol Error 0x82); a broker that
closes without one leaves the case not applicable, never passed on nothing. The client of each declares a small
Maximum Packet Size, so the DISCONNECT also shows whether its Reason String and User Properties are left out when
they would not fit [MQTT-3.14.2-3, -4]. The judge (:mod:`mqttaudit.judge.handshake_5`, :mod:`mqttaudit.judge.
connection`, :mod:`mqttaudit.judge.omitted_5`, :mod:`mqttaudit.judge.limits`) decides every statement a case lists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import Connack, Connect, Direction, Disconnect, Property, Publish, Pubrel, encode
from ...codec import properties as props
from ..case import CaseContext, NotApplicable
from ..connection import ProbeConnection
from .v5_connect import v5_case
from .v5_limits import (
    ALIAS_MAPPED,
    ALIAS_PER_CONNECTION,
    CLOSE,
    V5,
    _alias_above,
    _aliased,
    _broker_alias_maximum,
    _broker_receive_maximum,
    _publishes,
    _send_over_maximum,
    _short_topic,
    _stimulus,
)

#: [MQTT-3.14.2-2] No Session Expiry Interval in a server DISCONNECT; [MQTT-3.14.2-3, -4] its Reason String and
#: User Properties left out where they would exceed the client's Maximum Packet Size; [MQTT-3.14.4-1] nothing sent
#: after it; [MQTT-3.14.4-2] the close after it.
SERVER_DISCONNECT: Final = (R5.MQTT_3_14_2_2, R5.MQTT_3_14_2_3, R5.MQTT_3_14_2_4, R5.MQTT_3_14_4_1, R5.MQTT_3_14_4_2)
#: [MQTT-3.2.2-19, -20] The same of a CONNACK.
CONNACK_OMITS: Final = (R5.MQTT_3_2_2_19, R5.MQTT_3_2_2_20)
#: [MQTT-3.6.2-2, -3] The same of a PUBREL.
PUBREL_OMITS: Final = (R5.MQTT_3_6_2_2, R5.MQTT_3_6_2_3)
#: A Maximum Packet Size that holds a bare DISCONNECT, CONNACK or acknowledgement, and little of a Reason String.
SMALL_PACKET_SIZE: Final = 24
#: Room for a QoS 2 PUBLISH to the case's short topic, and little more.
PUBREL_PACKET_SIZE: Final = 64
#: The Authentication Method no broker supports: its CONNACK refuses it (0x8C), perhaps with a Reason String.
UNKNOWN_METHOD: Final = "mqttaudit-no-such-method"
#: Session Expiry Interval of a session kept across a reconnection.
KEPT_SESSION: Final = 60


def _small() -> tuple[Property, ...]:
    return props.make(maximum_packet_size=SMALL_PACKET_SIZE)


async def _disconnected(connection: ProbeConnection, why: str) -> None:
    """The broker sent a DISCONNECT: the case judges it, once the close it owes after it is due (a connection
    still open is watched for another timeout, past the judge's grace); without one the case is not applicable."""
    if not any(isinstance(p, Disconnect) for p in connection.received):
        closed = "closed the connection" if connection.closed_by_server else "left the connection open"
        raise NotApplicable(f"the broker {closed} without a DISCONNECT on {why} (a DISCONNECT there is optional)")
    if not connection.closed:
        await connection.wait_close()


def _server_disconnect(case_id: str, title: str, *, stimulus: str, code: str) -> Callable[[Script], Script]:
    return v5_case(
        f"v5/server-disconnect/{case_id}",
        list(SERVER_DISCONNECT),
        title,
        stimulus=f"{stimulus}; the client's CONNECT declares Maximum Packet Size {SMALL_PACKET_SIZE}",
        expected=f"a DISCONNECT ({code} or another error code) with no Session Expiry Interval and no Reason String "
        "or User Property that would take it over the client's maximum, then nothing more and the close (not "
        "applicable when the broker closes without DISCONNECT)",
    )


Script = Callable[[CaseContext], Awaitable[None]]


@_server_disconnect(
    "topic-alias-invalid",
    "A server DISCONNECT for a Topic Alias above the maximum is the last packet before the close",
    stimulus="a QoS 0 PUBLISH with a Topic Name and Topic Alias one above the CONNACK's Topic Alias Maximum (1 when "
    "it declared none)",
    code="0x94 Topic Alias invalid",
)
async def disconnect_topic_alias_invalid(context: CaseContext) -> None:
    connection = await context.connect(properties=_small())
    alias = _alias_above(_broker_alias_maximum(context))
    await _stimulus(connection, _aliased(context.topic("t"), alias))
    await connection.wait_close()
    await _disconnected(connection, f"a Topic Alias of {alias}")


@_server_disconnect(
    "packet-too-large",
    "A server DISCONNECT for a packet over its Maximum Packet Size is the last packet before the close",
    stimulus="a QoS 0 PUBLISH one byte over the broker's Maximum Packet Size (not applicable when it declares none)",
    code="0x95 Packet too large",
)
async def disconnect_packet_too_large(context: CaseContext) -> None:
    connection = await context.connect(properties=_small())
    await _send_over_maximum(context, connection, Publish(topic=_short_topic(context)))
    await connection.wait_close()
    await _disconnected(connection, "a packet over its Maximum Packet Size")


@_server_disconnect(
    "session-taken-over",
    "A server DISCONNECT for a session taken over is the last packet before the close",
    stimulus="a second connection with the same Client Identifier",
    code="0x8E Session taken over",
)
async def disconnect_session_taken_over(context: CaseContext) -> None:
    client_id = context.client_id()
    first = await context.connect("first", client_id=client_id, properties=_small())
    second = await context.connect("second", client_id=client_id)
    await first.wait_close()
    await context.disconnect(second)
    await _disconnected(first, "the session taken over")


@_server_disconnect(
    "receive-maximum-exceeded",
    "A server DISCONNECT for a Receive Maximum exceeded is the last packet before the close",
    stimulus="Receive Maximum + 1 QoS 2 PUBLISHes in one write, no PUBREL (not applicable beyond a Receive Maximum "
    "of 1000 or without QoS 2)",
    code="0x93 Receive Maximum exceeded",
)
async def disconnect_receive_maximum_exceeded(context: CaseContext) -> None:
    connection = await context.connect(properties=_small())
    context.require("qos2", "QoS 2 flows held open")
    maximum = _broker_receive_maximum(context)
    await _stimulus(connection, *_publishes(context, maximum + 1, 2))
    await connection.wait_close()
    await _disconnected(connection, "a Receive Maximum exceeded")


@_server_disconnect(
    "protocol-error",
    "A server DISCONNECT for a second CONNECT is the last packet before the close",
    stimulus="a second CONNECT on the accepted connection (a Protocol Error, 3.1)",
    code="0x82 Protocol Error",
)
async def disconnect_protocol_error(context: CaseContext) -> None:
    connection = await context.connect(properties=_small())
    again = Connect(protocol_level=V5.level, client_id=connection.client_id, properties=_small())
    await connection.send(encode(again, validate=False, direction=Direction.FROM_CLIENT, version=V5))
    await connection.wait_close()
    await _disconnected(connection, "a second CONNECT")


# Reason String and User Property left out of a CONNACK and a PUBREL [MQTT-3.2.2-19, -20, MQTT-3.6.2-2, -3] -----


@v5_case(
    "v5/small-maximum/connack",
    list(CONNACK_OMITS),
    f"CONNACKs keep a client's Maximum Packet Size of {SMALL_PACKET_SIZE} bytes",
    stimulus=f"a CONNECT with Maximum Packet Size {SMALL_PACKET_SIZE}; another that also names the Authentication "
    f"Method {UNKNOWN_METHOD!r} (a broker refuses it, 0x8C, and may say why in a Reason String)",
    expected="each CONNACK without a Reason String or User Property that would take it over the maximum",
)
async def small_maximum_connack(context: CaseContext) -> None:
    accepted = await context.connect("accepted", properties=_small())
    await context.disconnect(accepted)
    refused = await context.open("refused")
    method = props.make(maximum_packet_size=SMALL_PACKET_SIZE, authentication_method=UNKNOWN_METHOD)
    connect = Connect(protocol_level=V5.level, client_id=context.client_id(), properties=method)
    await refused.send(encode(connect, validate=False, direction=Direction.FROM_CLIENT, version=V5))
    connack = await refused.wait_type(Connack)
    if isinstance(connack, Connack) and connack.return_code == 0:
        await context.disconnect(refused)
    else:
        await refused.wait_close()


@v5_case(
    "v5/small-maximum/pubrel",
    list(PUBREL_OMITS),
    f"A PUBREL keeps a client's Maximum Packet Size of {PUBREL_PACKET_SIZE} bytes",
    stimulus=f"a subscriber whose CONNECT declares Maximum Packet Size {PUBREL_PACKET_SIZE} subscribes at QoS 2; a "
    "publisher sends a QoS 2 message; the subscriber answers its delivery with PUBREC, so the broker sends PUBREL",
    expected="the PUBREL without a Reason String or User Property that would take it over the maximum",
)
async def small_maximum_pubrel(context: CaseContext) -> None:
    subscriber = await context.connect("subscriber", properties=props.make(maximum_packet_size=PUBREL_PACKET_SIZE))
    context.require("qos2", "a QoS 2 delivery")
    topic = _short_topic(context)
    await context.subscribe_granted(subscriber, topic, 2)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"m", qos=2)
    await subscriber.wait_for(lambda packet: isinstance(packet, Pubrel))
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


# Topic Alias mappings end with their connection [MQTT-3.3.2-7] ------------------------------------------------


@v5_case(
    "v5/topic-alias/mapped-before-reconnecting",
    [CLOSE, ALIAS_MAPPED, ALIAS_PER_CONNECTION],
    "A Topic Alias mapped on an earlier connection of the session is unmapped on the next",
    stimulus=f"a client (Session Expiry Interval {KEPT_SESSION}) maps Topic Alias 1 to a topic and disconnects; it "
    "reconnects with Clean Start 0 (the session resumed) and sends a QoS 0 PUBLISH with a zero-length Topic Name "
    "and Topic Alias 1",
    expected="close the connection (DISCONNECT 0x82 Protocol Error may come first): the broker carries no mapping "
    "over from the earlier connection; deliver nothing of it",
)
async def alias_mapped_before_reconnecting(context: CaseContext) -> None:
    client_id = context.client_id()
    kept = props.make(session_expiry_interval=KEPT_SESSION)
    first = await context.connect("first", client_id=client_id, properties=kept)
    context.require("topic-aliases", "an alias within the broker's Topic Alias Maximum, mapped on another connection")
    await context.publish(first, context.topic("mapped"), b"maps alias 1", properties=props.make(topic_alias=1))
    await context.disconnect(first)
    again = await context.connect("again", client_id=client_id, clean_session=False, properties=kept)
    await _stimulus(again, _aliased("", 1))
    await again.wait_close()
    await context.disconnect(await context.connect("ending", client_id=client_id))  # Clean Start 1, no session kept


@v5_case(
    "v5/topic-alias/to-client-after-reconnecting",
    [ALIAS_PER_CONNECTION],
    "Topic Aliases toward a client are mapped again after it reconnects",
    stimulus=f"a subscriber (Topic Alias Maximum 2, Session Expiry Interval {KEPT_SESSION}) gets two messages on "
    "each of two topics, disconnects and reconnects with Clean Start 0; two more messages on each topic follow",
    expected="on the resumed connection every PUBLISH with a Topic Alias alone uses an alias the broker mapped on "
    "that connection (not applicable when it sends none: aliases are optional)",
)
async def alias_to_client_after_reconnecting(context: CaseContext) -> None:
    client_id = context.client_id()
    declared = props.make(topic_alias_maximum=2, session_expiry_interval=KEPT_SESSION)
    topics = [context.topic("a"), context.topic("b")]
    subscriber = await context.connect("subscriber", client_id=client_id, properties=declared)
    await context.subscribe_granted(subscriber, context.topic("#"), 0)
    publisher = await context.connect("publisher")

    async def round_of(label: str) -> None:
        for topic in topics:
            for index in range(2):
                await context.publish(publisher, topic, f"{label}{index}".encode())

    await round_of("before")
    await context.settle(subscriber)
    await context.disconnect(subscriber)
    again = await context.connect("again", client_id=client_id, clean_session=False, properties=declared)
    await round_of("after")
    await context.settle(again)
    await context.disconnect(publisher)
    await context.disconnect(again, properties=props.make(session_expiry_interval=0))  # the session ends with it
    alone = [p for p in again.received if isinstance(p, Publish) and not p.topic]
    if not alone:
        raise NotApplicable("the broker sent no PUBLISH with a Topic Alias alone on the resumed connection")
