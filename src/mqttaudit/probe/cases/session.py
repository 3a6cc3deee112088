"""CONNECT and CONNACK, sessions, Will messages, keep-alive, PINGREQ, takeover (sections 3.1, 3.2, 3.12, 3.14, 4.1)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from mqttaudit.spec.ids import R311

from ...codec import (
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Suback,
    Subscribe,
    Subscription,
    Will,
    encode,
)
from ...judge import rules
from ..case import CaseContext, Script, case, login

DISCONNECT = encode(Disconnect())


@case(
    "connect/accepted",
    [R311.MQTT_3_1_4_4, R311.MQTT_3_2_0_1, R311.MQTT_3_2_2_1, R311.MQTT_3_1_3_5],
    "A valid CONNECT is accepted",
    stimulus="CONNECT, CleanSession 1, a 23-character alphanumeric Client Identifier",
    expected="CONNACK first, return code 0, Session Present 0",
)
async def connect_accepted(context: CaseContext) -> None:
    connection = await context.open()
    await connection.send(Connect(client_id=context.client_id()))
    await connection.wait_type(Connack)
    await connection.send(DISCONNECT)


@case(
    "connect/protocol-level-unsupported",
    [R311.MQTT_3_1_2_2, R311.MQTT_3_1_4_5],
    "CONNECT with an unsupported protocol level",
    stimulus="CONNECT with Protocol Level 9, followed in the same write by a SUBSCRIBE",
    expected="CONNACK return code 0x01 with Session Present 0 (a broker that speaks 5.0: CONNACK 0x84 in 5.0's form "
    "may answer instead), then close; the SUBSCRIBE is not processed",
)
async def protocol_level_unsupported(context: CaseContext) -> None:
    """Level 9 names neither 3.1.1 nor 5.0: 3.1.1 asks for CONNACK 0x01 and the close [MQTT-3.1.2-2 of 3.1.1]; a
    broker that also speaks 5.0 may refuse a version it does not accept as 5.0 does, with CONNACK 0x84 in 5.0's form
    and the close [MQTT-3.1.2-2 of 5.0]. The judge takes either (see ``judge.connection.REFUSE_PROTOCOL_LEVEL``)."""
    connection = await context.open()
    connect = encode(Connect(client_id=context.client_id(), protocol_level=9), validate=False)
    subscribe = encode(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter=context.topic("x"))]))
    await connection.send(connect + subscribe)
    await connection.wait_close()


#: Requests a client may send right after its CONNECT, before the CONNACK (section 3.1.4), that every server answers
#: (a PUBLISH is left out: a 5.0 server may declare in the CONNACK a Maximum QoS the PUBLISH exceeds): (id word, in
#: words, the request for the case's topic prefix, its answer, the rule key of the answer).
PIPELINED: Final[tuple[tuple[str, str, Callable[[str], Packet], type[Packet], str], ...]] = (
    (
        "subscribe",
        "SUBSCRIBE",
        lambda prefix: Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter=f"{prefix}/early")]),
        Suback,
        rules.SUBACK_SENT,
    ),
    ("pingreq", "PINGREQ", lambda _prefix: Pingreq(), Pingresp, rules.PINGRESP_SENT),
)


def pipelined(request: Callable[[str], Packet], answer: type[Packet]) -> Script:
    """CONNECT and at once, without waiting for the CONNACK, ``request`` (the client need not wait, section 3.1.4):
    the server sends the CONNACK before any other packet [MQTT-3.2.0-1] and answers the request after it. Two
    writes back to back (a CONNECT written whole keeps the target's password out of the evidence)."""

    async def script(context: CaseContext) -> None:
        connection = await context.open()
        connection.client_id = context.client_id()
        username, password = login(context.target)
        level = context.protocol.level
        await connection.send(
            Connect(protocol_level=level, client_id=connection.client_id, username=username, password=password)
        )
        await connection.send(request(context.topic()))
        await connection.wait_type(answer)
        await connection.wait_type(Connack)
        await context.leave(connection)

    return script


for _word, _name, _request, _answer, _rule in PIPELINED:
    case(
        f"connect/pipelined-{_word}",
        [R311.MQTT_3_2_0_1, _rule],
        f"A {_name} sent right after CONNECT is answered after the CONNACK",
        stimulus=f"CONNECT and, without waiting for the CONNACK, a {_name} on a topic of the case",
        expected=f"CONNACK first, then the {_answer.__name__.upper()}",
    )(pipelined(_request, _answer))


@case(
    "connect/protocol-level-5",
    [R311.MQTT_3_1_2_2],
    "A broker that does not speak MQTT 5.0 refuses a 5.0 CONNECT with CONNACK 0x01",
    stimulus="a plain MQTT 5.0 CONNECT (Protocol Level 5, no properties), as every 5.0 client opens",
    expected="CONNACK 20 02 00 01 (unacceptable protocol level), then close; not applicable when the broker answers "
    "with a 5.0 CONNACK (it speaks 5.0)",
)
async def protocol_level_5(context: CaseContext) -> None:
    connection = await context.open()
    username, password = login(context.target)
    connect = Connect(protocol_level=5, client_id=context.client_id(), username=username, password=password)
    await connection.send(encode(connect, version=ProtocolVersion.V5))
    await connection.wait_close()
    if not connection.closed:
        await connection.send(DISCONNECT)  # a broker that took it leaves nothing more to see


@case(
    "connect/empty-client-id-persistent-session",
    [R311.MQTT_3_1_3_8],
    "Empty Client Identifier with CleanSession 0",
    stimulus="CONNECT with a zero-length Client Identifier and CleanSession 0",
    expected="CONNACK return code 0x02, then close",
)
async def empty_client_id_persistent(context: CaseContext) -> None:
    connection = await context.open()
    await connection.send(Connect(client_id="", clean_session=False), validate=False)
    await connection.wait_close()


@case(
    "connect/second-connect",
    [R311.MQTT_3_1_0_2],
    "A second CONNECT on the same connection",
    stimulus="CONNECT, then another CONNECT after the CONNACK",
    expected="close the connection; no second CONNACK",
)
async def second_connect(context: CaseContext) -> None:
    connection = await context.connect()
    await connection.send(Connect(client_id=connection.client_id))
    await connection.wait_close()


@case(
    "connect/takeover",
    [R311.MQTT_3_1_4_2],
    "A second connection with the same Client Identifier",
    stimulus="two connections with the same Client Identifier, one after the other",
    expected="the broker disconnects the first connection",
)
async def takeover(context: CaseContext) -> None:
    client_id = context.client_id()
    first = await context.connect("first", client_id=client_id)
    second = await context.connect("second", client_id=client_id)
    await first.wait_close()
    await second.send(DISCONNECT)


@case(
    "session/present-flag",
    [R311.MQTT_3_2_2_2, R311.MQTT_3_2_2_3, R311.MQTT_3_1_2_4],
    "Session Present reflects stored session state",
    stimulus="CleanSession 1 connect and disconnect; CleanSession 0 connect, subscribe, disconnect; reconnect with "
    "CleanSession 0 and the same Client Identifier",
    expected="Session Present 0 on the first CONNACK, 1 on the second, and the subscription still delivers",
)
async def session_present(context: CaseContext) -> None:
    client_id = context.client_id()
    # CleanSession 1 first: whatever the broker held for this Client Identifier is gone when it ends.
    fresh = await context.connect("fresh", client_id=client_id, clean_session=True)
    await fresh.send(DISCONNECT)
    await fresh.close()
    first = await context.connect("first", client_id=client_id, clean_session=False)
    await context.subscribe(first, (context.topic("s"), 1))
    await first.send(DISCONNECT)
    await first.close()
    second = await context.connect("second", client_id=client_id, clean_session=False)
    # The resumed session keeps the subscription made on the first connection [MQTT-3.1.2-4].
    publisher = await context.connect("publisher")
    await context.publish(publisher, context.topic("s"), b"resumed", qos=1)
    await context.deliveries(second, context.topic("s"))
    await context.leave(publisher, second)
    # leave no session behind: a clean connection discards it
    third = await context.connect("cleanup", client_id=client_id, clean_session=True)
    await third.send(DISCONNECT)


@case(
    "session/queued-while-offline",
    [R311.MQTT_3_1_2_5],
    "QoS 1 messages are stored for a disconnected persistent session",
    stimulus="CleanSession 0 subscriber disconnects; a QoS 1 message is published; the subscriber reconnects",
    expected="the stored message is delivered after the reconnect",
)
async def queued_while_offline(context: CaseContext) -> None:
    client_id = context.client_id()
    topic = context.topic("q")
    subscriber = await context.connect("subscriber", client_id=client_id, clean_session=False)
    await context.subscribe_granted(subscriber, topic, 1)
    await subscriber.send(DISCONNECT)
    await subscriber.close()
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"while-offline", qos=1)
    await publisher.send(DISCONNECT)
    again = await context.connect("subscriber-again", client_id=client_id, clean_session=False)
    await context.deliveries(again, topic)
    await again.send(DISCONNECT)
    cleanup = await context.connect("cleanup", client_id=client_id, clean_session=True)
    await cleanup.send(DISCONNECT)


@case(
    "session/clean-session-discards",
    [R311.MQTT_3_1_2_6],
    "CleanSession 1 discards the previous session",
    stimulus="CleanSession 0 subscribe, disconnect, reconnect with CleanSession 1, publish to the old topic",
    expected="Session Present 0 and no delivery under the discarded subscription",
)
async def clean_session_discards(context: CaseContext) -> None:
    client_id = context.client_id()
    topic = context.topic("c")
    first = await context.connect("first", client_id=client_id, clean_session=False)
    await context.subscribe(first, (topic, 1))
    await first.send(DISCONNECT)
    await first.close()
    second = await context.connect("second", client_id=client_id, clean_session=True)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"after-clean", qos=1)
    await context.settle(second)
    await context.leave(second, publisher)


def _will(context: CaseContext, *, retain: bool = False) -> Will:
    return Will(topic=context.topic("will"), message=b"gone", qos=1, retain=retain)


async def _watch_will(context: CaseContext, *, retain: bool, graceful: bool) -> None:
    will = _will(context, retain=retain)
    if retain:
        context.retained.add(will.topic)
    watcher = await context.subscriber("watcher", (will.topic, 1))
    dying = await context.connect("dying", will=will)
    if graceful:
        await dying.send(DISCONNECT)
        await dying.close()
    else:
        await dying.close(abrupt=True)
    await context.deliveries(watcher, will.topic)
    if graceful:
        await context.settle(watcher)
    else:
        # a broker may store a retained Will just after it delivers it: the later subscriber comes a moment later
        await watcher.observe(context.timeout / 4)
    # A later subscriber gets the Will as a retained message only when Will Retain was 1.
    late = await context.subscriber("late-subscriber", (will.topic, 1))
    if retain:
        await context.deliveries(late, will.topic)
    else:
        await context.settle(late)
    await context.leave(late, watcher)


@case(
    "will/published-on-abnormal-close",
    [R311.MQTT_3_1_2_8, R311.MQTT_3_1_2_16],
    "The Will Message is published when the connection drops",
    stimulus="CONNECT with a Will (QoS 1, Retain 0), then the TCP connection is reset",
    expected="subscribers of the Will Topic get the Will Message, not retained",
)
async def will_on_abnormal_close(context: CaseContext) -> None:
    await _watch_will(context, retain=False, graceful=False)


@case(
    "will/retained",
    [R311.MQTT_3_1_2_17],
    "A Will with Will Retain 1 is published as a retained message",
    stimulus="CONNECT with a Will (Retain 1), reset; then a new subscriber to the Will Topic",
    expected="the Will Message is retained: a later subscriber gets it with RETAIN 1",
)
async def will_retained(context: CaseContext) -> None:
    await _watch_will(context, retain=True, graceful=False)


@case(
    "will/not-after-disconnect",
    [R311.MQTT_3_14_4_3],
    "No Will Message after DISCONNECT",
    stimulus="CONNECT with a Will, DISCONNECT, close",
    expected="the Will Message is discarded, never published",
)
async def will_not_after_disconnect(context: CaseContext) -> None:
    await _watch_will(context, retain=False, graceful=True)


#: Silent clients of the Keep Alive case, each connected this many seconds after the one before: a broker that
#: checks Keep Alive only every few seconds, for all clients at once (mosquitto 2.0.11 checks every 5 s), meets one
#: client's deadline by chance but never all of theirs, so its verdict does not hang on when the case started.
SILENT_CLIENTS = 3
SILENT_STAGGER = 1.2


@case(
    "keep-alive/server-disconnects-silent-client",
    [R311.MQTT_3_1_2_24],
    "A silent client is disconnected after 1.5 times its Keep Alive",
    stimulus=f"{SILENT_CLIENTS} clients, each CONNECT with Keep Alive 1 s {SILENT_STAGGER:g} s after the one before, "
    "then silence",
    expected="the broker closes each connection within 1.5 s of its last packet (plus the probe's grace)",
)
async def keep_alive(context: CaseContext) -> None:
    async def silent(index: int) -> None:
        await asyncio.sleep(index * SILENT_STAGGER)
        connection = await context.connect(f"silent{index + 1}", keep_alive=1)
        await connection.wait_close(1.5 + context.timeout)

    await asyncio.gather(*(silent(index) for index in range(SILENT_CLIENTS)))


@case(
    "ping/pingresp",
    [R311.MQTT_3_12_4_1],
    "PINGREQ is answered with PINGRESP",
    stimulus="PINGREQ after CONNECT",
    expected="PINGRESP",
)
async def ping(context: CaseContext) -> None:
    connection = await context.connect()
    await connection.send(Pingreq())
    await connection.wait_type(Pingresp)
    await connection.send(DISCONNECT)
