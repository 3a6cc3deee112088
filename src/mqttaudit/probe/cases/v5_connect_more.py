"""MQTT 5.0: what the CONNECT asks of the server for the rest of the connection, and what the server may not do
before it accepts. Request Problem Information 0 keeps Reason Strings and User Properties out of every
acknowledgement [MQTT-3.1.2-29]; every Topic Alias from 1 to the declared maximum is taken [MQTT-3.3.2-12]; no
DISCONNECT comes before a CONNACK that accepts [MQTT-3.14.0-1]; an Authentication Method the server does not
support is refused and the connection closed [MQTT-4.12.0-1]. The judge decides each (judge/handshake_5.py)."""

from __future__ import annotations

from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Pingreq,
    Pingresp,
    Property,
    ProtocolVersion,
    Will,
    encode,
)
from ...codec import properties as props
from ..case import CaseContext, Inconclusive, NotApplicable
from ..connection import ProbeConnection
from .v5_connect import v5_case

V5: Final = ProtocolVersion.V5
#: [MQTT-3.1.2-29] Request Problem Information 0: no Reason String or User Property outside PUBLISH, CONNACK and
#: DISCONNECT.
PROBLEM_INFORMATION: Final[str] = R5.MQTT_3_1_2_29
#: [MQTT-3.3.2-12] Every Topic Alias from 1 to the server's Topic Alias Maximum is accepted.
ALIASES_ACCEPTED: Final[str] = R5.MQTT_3_3_2_12
#: [MQTT-3.14.0-1] No server DISCONNECT before a CONNACK below 0x80.
NO_EARLY_DISCONNECT: Final[str] = R5.MQTT_3_14_0_1
#: [MQTT-3.2.2-12] / [MQTT-3.2.2-13] A Will beyond the Maximum QoS, or retained without Retain Available, is refused
#: and the connection closed.
WILL_QOS: Final[str] = R5.MQTT_3_2_2_12
WILL_RETAIN: Final[str] = R5.MQTT_3_2_2_13
#: [MQTT-4.13.2-1] After a CONNACK or DISCONNECT of 0x80 or above the connection is closed.
CLOSE_AFTER_ERROR: Final[str] = R5.MQTT_4_13_2_1
#: [MQTT-4.12.0-1] An unsupported Authentication Method: CONNACK 0x8C or 0x87, then the close.
UNSUPPORTED_METHOD: Final[str] = R5.MQTT_4_12_0_1
#: An Authentication Method no server implements.
UNKNOWN_METHOD: Final = "mqttaudit-no-such-method"
#: At most this many aliases are mapped one by one (a broker may declare up to 65,535).
MAX_ALIASES: Final = 32
#: Session Expiry Interval (Table 2.4): twice in one CONNECT is a Protocol Error (2.2.2.2).
SESSION_EXPIRY_INTERVAL: Final = 0x11


def _withholding() -> tuple[Property, ...]:
    return props.make(request_problem_information=0)


def _levels(context: CaseContext) -> tuple[int, ...]:
    """QoS 1 and 2, as far as the broker's Maximum QoS goes (a PUBLISH above it is a Protocol Error)."""
    maximum = context.capabilities.maximum_qos if context.capabilities else 2
    return tuple(qos for qos in (1, 2) if qos <= maximum)


async def _alive(connection: ProbeConnection) -> None:
    """PINGREQ and its PINGRESP: the broker read everything sent before it (or closed instead)."""
    since = len(connection.received)
    await connection.send(Pingreq())
    await connection.wait_type(Pingresp, since=since)


# Request Problem Information 0 [MQTT-3.1.2-29] ----------------------------------------------------------------


@v5_case(
    "v5/problem-information/acknowledgements",
    [PROBLEM_INFORMATION],
    "Request Problem Information 0: plain acknowledgements carry no Reason String or User Property",
    stimulus="5.0 CONNECT with Request Problem Information 0; SUBSCRIBE QoS 2 to a topic of the case, PUBLISH QoS 1 "
    "and QoS 2 to it (as far as its Maximum QoS goes; the deliveries acknowledged), UNSUBSCRIBE it",
    expected="SUBACK, PUBACK, PUBREC, PUBCOMP, PUBREL and UNSUBACK without a Reason String or User Property",
)
async def problem_information_acknowledgements(context: CaseContext) -> None:
    connection = await context.connect(properties=_withholding())
    topic = context.topic("t")
    await context.subscribe(connection, (topic, 2))
    for qos in _levels(context):
        await context.publish(connection, topic, f"qos{qos}".encode(), qos=qos)
    await context.settle(connection)
    await context.unsubscribe(connection, topic)
    await context.disconnect(connection)


@v5_case(
    "v5/problem-information/refusals",
    [PROBLEM_INFORMATION],
    "Request Problem Information 0: acknowledgements that refuse or report carry no Reason String either",
    stimulus="5.0 CONNECT with Request Problem Information 0; PUBLISH QoS 1 and QoS 2 to a topic nobody subscribes "
    "to and to a '$SYS/' topic (as far as its Maximum QoS goes), UNSUBSCRIBE a filter never subscribed",
    expected="each acknowledgement, whatever its Reason Code (0x10, 0x11, 0x87, ...), without a Reason String or "
    "User Property",
)
async def problem_information_refusals(context: CaseContext) -> None:
    connection = await context.connect(properties=_withholding())
    for topic in (context.topic("nobody"), "$SYS/" + context.topic("sys")):
        for qos in _levels(context):
            await context.publish(connection, topic, b"x", qos=qos)
    await context.unsubscribe(connection, context.topic("never"))
    await context.disconnect(connection)


# Topic Aliases within the maximum [MQTT-3.3.2-12] -------------------------------------------------------------


async def _aliases(context: CaseContext, aliases: list[int], qos: int) -> None:
    """Maps each alias to a topic of its own, then maps it again to a second one (every PUBLISH names a topic of the
    case: an alias-only PUBLISH is v5/topic-alias/remapped's), then checks the connection is still served and
    leaves."""
    connection = await context.connect()
    context.require("topic-aliases", "Topic Aliases within the broker's Topic Alias Maximum")
    maximum = context.capabilities.topic_alias_maximum if context.capabilities else 0
    chosen = sorted({alias for alias in aliases if 1 <= alias <= maximum} or {maximum})
    for alias in chosen:
        await context.publish(connection, context.topic(f"a{alias}"), b"mapped", qos=qos, properties=_alias(alias))
    for alias in chosen:
        await context.publish(connection, context.topic(f"b{alias}"), b"remapped", qos=qos, properties=_alias(alias))
    await _alive(connection)
    if connection.closed_by_server:
        return  # the judge decides whether a DISCONNECT named the alias
    await context.disconnect(connection)


def _alias(alias: int) -> tuple[Property, ...]:
    return props.make(topic_alias=alias)


@v5_case(
    "v5/alias-accepted/first",
    [ALIASES_ACCEPTED],
    "Topic Alias 1 is accepted, mapped and mapped again",
    stimulus="a QoS 0 PUBLISH with a Topic Name and Topic Alias 1, then one with another Topic Name and Topic Alias "
    "1, then PINGREQ",
    expected="no DISCONNECT 0x94 (Topic Alias invalid); PINGRESP",
)
async def alias_first(context: CaseContext) -> None:
    await _aliases(context, [1], 0)


@v5_case(
    "v5/alias-accepted/maximum",
    [ALIASES_ACCEPTED],
    "The Topic Alias Maximum itself is accepted (QoS 1)",
    stimulus="a QoS 1 PUBLISH with a Topic Name and the Topic Alias the broker's CONNACK declared as its maximum, "
    "then one with another Topic Name and that alias, then PINGREQ",
    expected="PUBACKs, no DISCONNECT 0x94 (Topic Alias invalid); PINGRESP",
)
async def alias_maximum(context: CaseContext) -> None:
    maximum = context.capabilities.topic_alias_maximum if context.capabilities else 0
    await _aliases(context, [maximum or 0xFFFF], 1)


@v5_case(
    "v5/alias-accepted/every",
    [ALIASES_ACCEPTED],
    f"Every Topic Alias from 1 to the maximum (at most {MAX_ALIASES}) is accepted at once",
    stimulus=f"QoS 0 PUBLISHes mapping Topic Alias 1, 2, ... up to the broker's maximum (at most {MAX_ALIASES}) each "
    "to a topic of its own, then each to a second topic, then PINGREQ",
    expected="no DISCONNECT 0x94 (Topic Alias invalid); PINGRESP",
)
async def alias_every(context: CaseContext) -> None:
    await _aliases(context, list(range(1, MAX_ALIASES + 1)), 0)


# No DISCONNECT before a CONNACK that accepts [MQTT-3.14.0-1] ---------------------------------------------------


async def _refused_or_closed(context: CaseContext, connect: bytes) -> Connack | None:
    """Sends a CONNECT as bytes and waits for the answer and the close; returns the CONNACK, if one came."""
    connection = await context.open()
    await connection.send(connect)
    answer = await connection.wait_for(lambda p: isinstance(p, Connack | Auth))
    if isinstance(answer, Auth):
        raise NotApplicable("the broker continues an authentication (AUTH) instead of answering with a CONNACK")
    connack = answer if isinstance(answer, Connack) else None
    if connack is not None and connack.return_code == 0:
        await context.disconnect(connection)
        return connack
    await connection.wait_close()
    return connack


def _connect_bytes(context: CaseContext, properties: tuple[Property, ...]) -> bytes:
    connect = Connect(protocol_level=V5.level, client_id=context.client_id(), properties=properties)
    return encode(connect, validate=False, direction=Direction.FROM_CLIENT, version=V5)


@v5_case(
    "v5/no-early-disconnect/duplicate-property",
    [NO_EARLY_DISCONNECT],
    "A CONNECT with a property twice is refused without a DISCONNECT",
    stimulus="5.0 CONNECT with the Session Expiry Interval twice (a Protocol Error, 2.2.2.2)",
    expected="CONNACK 0x82 (Protocol Error) or none, then the close; no DISCONNECT before a CONNACK that accepts",
)
async def early_disconnect_duplicate(context: CaseContext) -> None:
    twice = (Property(SESSION_EXPIRY_INTERVAL, 10), Property(SESSION_EXPIRY_INTERVAL, 10))
    await _refused_or_closed(context, _connect_bytes(context, twice))


@v5_case(
    "v5/no-early-disconnect/after-acceptance",
    [NO_EARLY_DISCONNECT],
    "A DISCONNECT after a CONNACK that accepts is allowed (a second CONNECT)",
    stimulus="5.0 CONNECT, then after CONNACK 0x00 a second CONNECT (a Protocol Error [MQTT-3.1.0-2])",
    expected="the close, with or without DISCONNECT 0x82: either keeps MQTT-3.14.0-1",
)
async def early_disconnect_after_acceptance(context: CaseContext) -> None:
    connection = await context.connect()
    await connection.send(Connect(protocol_level=V5.level, client_id=connection.client_id))
    if not await connection.wait_close():
        await context.disconnect(connection)


@v5_case(
    "v5/no-early-disconnect/unknown-authentication-method",
    [NO_EARLY_DISCONNECT, UNSUPPORTED_METHOD, CLOSE_AFTER_ERROR],
    "An unknown Authentication Method is refused with a CONNACK, then the close",
    stimulus=f"5.0 CONNECT with Authentication Method {UNKNOWN_METHOD!r} and no Authentication Data",
    expected="CONNACK 0x8C (Bad authentication method) or 0x87 (Not authorized), then the close; no DISCONNECT "
    "before it; a CONNACK 0x00 naming no method fails MQTT-4.12.0-1; an AUTH continuing the method makes the case "
    "not applicable",
)
async def unknown_authentication_method(context: CaseContext) -> None:
    method = props.make(authentication_method=UNKNOWN_METHOD)
    connack = await _refused_or_closed(context, _connect_bytes(context, method))
    if connack is not None and connack.return_code == 0:
        raise Inconclusive(f"the broker accepted the CONNECT with the Authentication Method {UNKNOWN_METHOD!r}")


# A Will beyond the server's capabilities [MQTT-3.2.2-12, -13] ---------------------------------------------------


async def _will_beyond(context: CaseContext, will: Will) -> None:
    """Sends a CONNECT with ``will`` (beyond what the broker's first CONNACK declared): a refusal is followed by
    the close; a CONNACK 0x00 is left with DISCONNECT 0x00, which discards the Will."""
    connection = await context.open("willing")
    connect = Connect(protocol_level=V5.level, client_id=context.client_id(), will=will)
    await connection.send(encode(connect, validate=False, direction=Direction.FROM_CLIENT, version=V5))
    connack = await connection.wait_type(Connack)
    if isinstance(connack, Connack) and connack.return_code == 0:
        await context.disconnect(connection)
        return
    await connection.wait_close()


async def _capabilities(context: CaseContext) -> tuple[int, bool]:
    """The broker's Maximum QoS and Retain Available, from the CONNACK of a plain connection."""
    probe = await context.connect("capabilities")
    await context.disconnect(probe)
    known = context.capabilities
    return (2, True) if known is None else (known.maximum_qos, known.retain_available)


@v5_case(
    "v5/will-beyond-capabilities/qos-one-above",
    [WILL_QOS],
    "A Will QoS one above the broker's Maximum QoS is refused",
    stimulus="a plain CONNECT to read the Maximum QoS; then a CONNECT whose Will has QoS one above it",
    expected="CONNACK 0x9B (QoS not supported), then the close; a broker with Maximum QoS 2 makes it not applicable",
)
async def will_qos_one_above(context: CaseContext) -> None:
    maximum, _retain = await _capabilities(context)
    if maximum >= 2:
        raise NotApplicable("the broker supports QoS 2 (no Maximum QoS below 2 in its CONNACK): no Will QoS exceeds it")
    await _will_beyond(context, Will(topic=context.topic("will"), message=b"gone", qos=maximum + 1))


@v5_case(
    "v5/will-beyond-capabilities/qos2",
    [WILL_QOS],
    "A Will of QoS 2 is refused by a broker whose Maximum QoS is lower",
    stimulus="a plain CONNECT to read the Maximum QoS; then a CONNECT whose Will has QoS 2",
    expected="CONNACK 0x9B (QoS not supported), then the close; a broker with Maximum QoS 2 makes it not applicable",
)
async def will_qos2(context: CaseContext) -> None:
    maximum, _retain = await _capabilities(context)
    if maximum >= 2:
        raise NotApplicable("the broker supports QoS 2 (no Maximum QoS below 2 in its CONNACK): no Will QoS exceeds it")
    await _will_beyond(context, Will(topic=context.topic("will"), message=b"gone", qos=2))


@v5_case(
    "v5/will-beyond-capabilities/retain",
    [WILL_RETAIN],
    "A retained Will is refused by a broker without retained messages",
    stimulus="a plain CONNECT to read Retain Available; then a CONNECT whose Will has QoS 0 and Will Retain 1",
    expected="CONNACK 0x9A (Retain not supported), then the close; a broker with retained messages makes it not "
    "applicable",
)
async def will_retain(context: CaseContext) -> None:
    _maximum, retain = await _capabilities(context)
    if retain:
        raise NotApplicable("the broker declares no Retain Available 0: a retained Will is within its capabilities")
    await _will_beyond(context, Will(topic=context.topic("will"), message=b"gone", retain=True))
