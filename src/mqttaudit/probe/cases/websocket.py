"""MQTT in a WebSocket text frame: the recipient must close the Network Connection [MQTT-6.0.0-1].

"MQTT Control Packets MUST be sent in WebSocket binary data frames. If any other type of data frame is received the
recipient MUST close the Network Connection" (MQTT 3.1.1 and 5.0, chapter 6). Each case sends one sound packet in
a text message, on a connection of its own, in one of several shapes: the CONNECT itself, a PINGREQ after an accepted
CONNECT, a QoS 1 PUBLISH that a watcher is subscribed to, and a PINGREQ in a fragmented text message (a text frame
and a continuation frame). The packet is recorded with the violation attached, so the judge decides the statement
as it does for a malformed packet: a close in time keeps it; an answer (CONNACK, PINGRESP, PUBACK) or a delivery of
the message breaks it, and so does staying open.

The cases run over ws:// and wss:// targets only; on any other transport they are not applicable. A PINGREQ's
bytes (C0 00) are no UTF-8, which gives a WebSocket server a second reason to fail the connection (RFC 6455 8.1);
a CONNECT's and a PUBLISH's here are plain ASCII, so for them only MQTT-6.0.0-1 calls for the close.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from mqttaudit.spec.ids import R5, R311

from ...codec import Connect, Pingreq, ProtocolVersion, Publish
from ..case import CaseContext, NotApplicable, case, login
from ..connection import FRAGMENTED_TEXT, NOT_WEBSOCKET, TEXT_FRAME, ProbeConnection

#: The family of every case here.
FAMILY: Final = "websocket/text-frame"
#: The payload of the PUBLISH sent in a text frame: plain ASCII.
PAYLOAD: Final = b"text frame"

Shape = Callable[[CaseContext], Awaitable[None]]


def _websocket(context: CaseContext) -> None:
    if not context.target.websocket:
        raise NotApplicable(NOT_WEBSOCKET)


async def _connect_in_text(context: CaseContext) -> None:
    _websocket(context)
    connection = await context.open()
    connection.client_id = context.client_id()
    username, password = login(context.target)
    connect = Connect(
        protocol_level=context.protocol.level, client_id=connection.client_id, username=username, password=password
    )
    await connection.send(connect, text=TEXT_FRAME)
    await connection.wait_close()


async def _after_connect(context: CaseContext, text: str) -> ProbeConnection:
    _websocket(context)
    connection = await context.connect()
    await connection.send(Pingreq(), text=text)
    await connection.wait_close()
    return connection


async def _pingreq_in_text(context: CaseContext) -> None:
    await _after_connect(context, TEXT_FRAME)


async def _pingreq_fragmented(context: CaseContext) -> None:
    await _after_connect(context, FRAGMENTED_TEXT)


async def _publish_in_text(context: CaseContext) -> None:
    _websocket(context)
    topic = context.topic("text")
    watcher = await context.subscriber("watcher", (topic, 1))
    connection = await context.connect()
    await connection.send(Publish(topic=topic, payload=PAYLOAD, qos=1, packet_id=context.packet_id()), text=TEXT_FRAME)
    await connection.wait_close()
    await context.deliveries(watcher, topic)
    await context.settle(watcher)
    await context.leave(watcher)


#: (id, title, stimulus, expected, script)
SHAPES: Final[tuple[tuple[str, str, str, str, Shape], ...]] = (
    (
        "connect-in-text-frame",
        "A CONNECT in a WebSocket text frame",
        "the first packet of a connection, CONNECT, sent in a WebSocket text frame (opcode 0x1)",
        "close the connection without a CONNACK",
        _connect_in_text,
    ),
    (
        "pingreq-in-text-frame",
        "A PINGREQ in a WebSocket text frame",
        "after an accepted CONNECT (in a binary frame), a PINGREQ in a WebSocket text frame",
        "close the connection without a PINGRESP",
        _pingreq_in_text,
    ),
    (
        "publish-in-text-frame",
        "A QoS 1 PUBLISH in a WebSocket text frame",
        "after an accepted CONNECT, a QoS 1 PUBLISH in a WebSocket text frame to a topic another connection "
        "subscribes to",
        "close the connection without a PUBACK, and deliver the message to no subscriber",
        _publish_in_text,
    ),
    (
        "fragmented-text-frame",
        "A PINGREQ in a fragmented WebSocket text message",
        "after an accepted CONNECT, a PINGREQ in a text frame (FIN 0, its first byte) and a continuation frame "
        "(its second byte)",
        "close the connection without a PINGRESP",
        _pingreq_fragmented,
    ),
)

#: Each version's id of the statement (both number it MQTT-6.0.0-1), with the prefix of its cases.
_VERSIONS = ((ProtocolVersion.V3_1_1, "", R311.MQTT_6_0_0_1), (ProtocolVersion.V5, "v5/", R5.MQTT_6_0_0_1))
for _protocol, _prefix, _statement in _VERSIONS:
    for _shape_id, _title, _stimulus, _expected, _script in SHAPES:
        case(
            f"{_prefix}websocket/{_shape_id}",
            (_statement,),
            f"{_title} (MQTT {_protocol.value})",
            stimulus=f"over a ws:// or wss:// target: {_stimulus}",
            expected=f"{_expected}; act on nothing in it",
            family=FAMILY,
            protocol=_protocol,
        )(_script)
