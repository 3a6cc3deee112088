"""PUBLISH flows, retained messages, subscriptions and topic matching (sections 3.3-3.11, 4.3-4.7).

Every case publishes on topics of its own; the judge compares what each connection received with what the broker
model says it should have received.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from mqttaudit.spec.ids import R311

from ...codec import (
    Disconnect,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Unsubscribe,
    encode,
)
from ...codec.properties import make
from ..case import BEFORE_SUBSCRIBE, REPEATS, SETTLE_MARGIN, CaseContext, NotApplicable, Script, case

DISCONNECT = encode(Disconnect())


@case(
    "publish/qos1-puback",
    [R311.MQTT_3_3_4_1, R311.MQTT_4_3_2_2, R311.MQTT_2_3_1_6],
    "QoS 1 PUBLISH is acknowledged with PUBACK",
    stimulus="PUBLISH QoS 1",
    expected="PUBACK with the same Packet Identifier",
)
async def qos1_puback(context: CaseContext) -> None:
    connection = await context.connect()
    await context.publish(connection, context.topic("q1"), b"one", qos=1)
    await connection.send(DISCONNECT)


@case(
    "publish/qos2-flow",
    [R311.MQTT_4_3_3_2, R311.MQTT_3_3_4_1],
    "QoS 2 PUBLISH: PUBREC, then PUBCOMP for PUBREL",
    stimulus="PUBLISH QoS 2, then PUBREL for its PUBREC",
    expected="PUBREC and PUBCOMP with the same Packet Identifier",
)
async def qos2_flow(context: CaseContext) -> None:
    connection = await context.connect()
    await context.publish(connection, context.topic("q2"), b"two", qos=2)
    await connection.send(DISCONNECT)


def pubrel_unknown_id(*, short: bool = False) -> Script:
    """A PUBREL whose Packet Identifier no flow holds, on a resumed session (CleanSession 0, Session Present 1): the
    resend of a PUBREL whose PUBCOMP was lost, which a client makes on reconnecting [MQTT-4.4.0-1] and a server
    that completed the flow no longer knows; then PINGREQ at once. The server answers the PUBREL with PUBCOMP
    [MQTT-4.3.3-2 in 3.1.1, MQTT-4.3.3-11 in 5.0, with 0x92 Packet Identifier not found or 0x00] and the PINGREQ
    with PINGRESP [MQTT-3.12.4-1]. In 5.0 the PUBREL carries Reason Code 0x00 unless ``short`` (Remaining Length 2,
    the code left out); a 5.0 broker that declares no QoS 2 makes the case not applicable."""

    async def script(context: CaseContext) -> None:
        v5 = context.protocol is ProtocolVersion.V5
        kept = make(session_expiry_interval=60) if v5 else ()
        client_id = context.client_id()
        first = await context.connect("first", client_id=client_id, clean_session=False, properties=kept)
        try:
            if v5:
                # [MQTT-4.3.3-11] binds a QoS 2 receiver: a broker that declares no QoS 2 takes part in no such flow
                context.require("qos2", "a PUBREL, which only a QoS 2 flow has")
            # a subscription, so that the session holds state a broker keeps (some keep none for an empty one)
            await context.subscribe(first, (context.topic("kept"), 1))
            await context.leave(first)
            await first.close()
            again = await context.connect("again", client_id=client_id, clean_session=False, properties=kept)
            if again.connack is None or not again.connack.session_present:
                raise NotApplicable("the broker kept no session for a CleanSession 0 client (Session Present 0)")
            unknown = context.packet_id()
            since = len(again.received)
            await again.send(Pubrel(packet_id=unknown, reason_code=0x00 if v5 and not short else None))
            await again.send(Pingreq())
            await again.wait_type(Pingresp, since=since)
            await again.wait_for(lambda p: isinstance(p, Pubcomp) and p.packet_id == unknown, since=since)
            await context.leave(again)
            await again.close()
        finally:  # the session ends with a CleanSession 1 connection of its Client Identifier
            await context.leave(await context.connect("end", client_id=client_id))

    return script


case(
    "publish/pubrel-unknown-id-then-pingreq",
    [R311.MQTT_4_3_3_2, R311.MQTT_3_12_4_1],
    "A resent PUBREL the server no longer knows is answered, and so is the PINGREQ after it",
    stimulus="CONNECT with CleanSession 0, SUBSCRIBE, DISCONNECT; CONNECT again with CleanSession 0 (Session Present "
    "1); a PUBREL of a Packet Identifier never used, as a client resends one whose PUBCOMP it lost, then PINGREQ at "
    "once",
    expected="PUBCOMP with the PUBREL's Packet Identifier and PINGRESP; the connection stays open",
)(pubrel_unknown_id())


@case(
    "publish/qos2-no-duplicate-delivery",
    [R311.MQTT_4_3_3_2, R311.MQTT_4_3_3_1, R311.MQTT_2_3_1_4],
    "A repeated QoS 2 PUBLISH before PUBREL is delivered once",
    stimulus=f"PUBLISH QoS 2, the same PUBLISH again with DUP 1, {REPEATS} times, each after the PUBREC of the one "
    "before, then PUBREL",
    expected="PUBREC for each, one delivery to subscribers, PUBCOMP",
)
async def qos2_duplicate(context: CaseContext) -> None:
    topic = context.topic("q2dup")
    subscriber = await context.subscriber("subscriber", (topic, 2))
    publisher = await context.connect("publisher")
    packet_id = context.packet_id()
    for repeat in range(1 + REPEATS):
        since = len(publisher.received)
        await publisher.send(Publish(topic=topic, payload=b"once", qos=2, packet_id=packet_id, dup=repeat > 0))
        await publisher.wait_for(lambda p: isinstance(p, Pubrec) and p.packet_id == packet_id, since=since)
    await publisher.send(Pubrel(packet_id=packet_id))
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "publish/dup-not-propagated",
    [R311.MQTT_3_3_1_3],
    "The incoming DUP flag is not copied to subscribers",
    stimulus="PUBLISH QoS 1 with DUP 1 to a topic with a subscriber",
    expected="the subscriber's copy has DUP 0",
)
async def dup_not_propagated(context: CaseContext) -> None:
    topic = context.topic("dup")
    subscriber = await context.subscriber("subscriber", (topic, 1))
    publisher = await context.connect("publisher")
    await publisher.send(Publish(topic=topic, payload=b"d", qos=1, packet_id=context.packet_id(), dup=True))
    await context.deliveries(subscriber, topic)
    await context.leave(publisher, subscriber)


@case(
    "subscribe/delivery-matches-filter",
    [R311.MQTT_3_3_2_3, R311.MQTT_4_5_0_1, R311.MQTT_3_3_1_9],
    "Deliveries match the subscription, with RETAIN 0",
    stimulus="subscribe to '<case>/+/t'; publish to '<case>/a/t' (RETAIN 1) and '<case>/a/u'",
    expected="only '<case>/a/t' is delivered, with RETAIN 0",
)
async def delivery_matches(context: CaseContext) -> None:
    subscriber = await context.subscriber("subscriber", (context.topic("+", "t"), 1))
    publisher = await context.connect("publisher")
    await context.publish(publisher, context.topic("a", "t"), b"match", qos=1, retain=True)
    await context.publish(publisher, context.topic("a", "u"), b"no-match", qos=1)
    await context.deliveries(subscriber, context.topic("a", "t"))
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "subscribe/suback",
    [R311.MQTT_3_8_4_1, R311.MQTT_3_8_4_2],
    "SUBSCRIBE is answered with SUBACK",
    stimulus="SUBSCRIBE with one filter",
    expected="SUBACK with the same Packet Identifier and a valid return code",
)
async def suback(context: CaseContext) -> None:
    connection = await context.connect()
    await context.subscribe(connection, (context.topic("s"), 1))
    await connection.send(DISCONNECT)


@case(
    "subscribe/multiple-filters",
    [R311.MQTT_3_8_4_5, R311.MQTT_3_9_3_1],
    "A SUBSCRIBE with three filters gets one SUBACK with three codes in order",
    stimulus="SUBSCRIBE to three filters at QoS 0, 1 and 2",
    expected="one SUBACK with three return codes, in the order of the filters",
)
async def multiple_filters(context: CaseContext) -> None:
    connection = await context.connect()
    await context.subscribe(connection, (context.topic("m0"), 0), (context.topic("m1"), 1), (context.topic("m2"), 2))
    await connection.observe(context.timeout / 4)
    await connection.send(DISCONNECT)


@case(
    "subscribe/granted-qos-caps-delivery",
    [R311.MQTT_3_8_4_6],
    "Delivery QoS is the lower of publish QoS and granted QoS",
    stimulus="subscribe at QoS 0; publish at QoS 1",
    expected="delivered at QoS 0",
)
async def granted_qos_caps(context: CaseContext) -> None:
    topic = context.topic("g")
    subscriber = await context.subscriber("subscriber", (topic, 0))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"g", qos=1)
    await context.deliveries(subscriber, topic)
    await context.leave(publisher, subscriber)


@case(
    "subscribe/overlapping-subscriptions",
    [R311.MQTT_3_3_5_1],
    "Overlapping subscriptions: delivered at the highest granted QoS",
    stimulus="subscribe to '<case>/#' at QoS 0 and '<case>/o' at QoS 1; publish QoS 1 to '<case>/o'",
    expected="delivered honouring QoS 1 (once at QoS 1, or once per subscription with one at QoS 1)",
)
async def overlapping(context: CaseContext) -> None:
    topic = context.topic("o")
    subscriber = await context.subscriber("subscriber", (context.topic("#"), 0), (topic, 1))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"o", qos=1)
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "subscribe/resubscribe-replaces",
    [R311.MQTT_3_8_4_6],
    "Subscribing again to the same filter replaces the subscription",
    stimulus="subscribe to a filter twice (QoS 1 then QoS 0); publish once at QoS 1",
    expected="one delivery, at QoS 0",
)
async def resubscribe(context: CaseContext) -> None:
    topic = context.topic("r")
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.subscribe(subscriber, (topic, 0))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"r", qos=1)
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "unsubscribe/unsuback",
    [R311.MQTT_3_10_4_4, R311.MQTT_3_10_4_5],
    "UNSUBSCRIBE is answered with UNSUBACK, even for an unknown filter",
    stimulus="UNSUBSCRIBE from a filter never subscribed",
    expected="UNSUBACK with the same Packet Identifier",
)
async def unsuback(context: CaseContext) -> None:
    connection = await context.connect()
    await context.unsubscribe(connection, context.topic("never"))
    await connection.send(DISCONNECT)


@case(
    "unsubscribe/multiple-filters",
    [R311.MQTT_3_10_4_4],
    "An UNSUBSCRIBE with two filters gets one UNSUBACK",
    stimulus="subscribe to two filters; UNSUBSCRIBE both in one packet",
    expected="exactly one UNSUBACK",
)
async def unsubscribe_multiple(context: CaseContext) -> None:
    connection = await context.connect()
    await context.subscribe(connection, (context.topic("u1"), 0), (context.topic("u2"), 0))
    await connection.send(
        Unsubscribe(packet_id=context.packet_id(), topic_filters=[context.topic("u1"), context.topic("u2")])
    )
    await connection.observe(context.timeout / 2)
    await connection.send(DISCONNECT)


@case(
    "unsubscribe/stops-delivery",
    [R311.MQTT_3_10_4_2],
    "No delivery after UNSUBACK",
    stimulus="subscribe, unsubscribe, publish",
    expected="nothing delivered",
)
async def unsubscribe_stops(context: CaseContext) -> None:
    topic = context.topic("stop")
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.unsubscribe(subscriber, topic)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"late", qos=1)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "unsubscribe/exact-filter-only",
    [R311.MQTT_3_10_4_5, R311.MQTT_4_5_0_1],
    "UNSUBSCRIBE compares filters character by character",
    stimulus="subscribe to '<case>/+'; UNSUBSCRIBE '<case>/x'; publish to '<case>/x'",
    expected="the '+' subscription stays: the message is delivered",
)
async def unsubscribe_exact(context: CaseContext) -> None:
    subscriber = await context.subscriber("subscriber", (context.topic("+"), 1))
    await context.unsubscribe(subscriber, context.topic("x"))
    publisher = await context.connect("publisher")
    await context.publish(publisher, context.topic("x"), b"still", qos=1)
    await context.deliveries(subscriber, context.topic("x"))
    await context.leave(publisher, subscriber)


@case(
    "retain/delivered-on-subscribe",
    [R311.MQTT_3_3_1_6, R311.MQTT_3_3_1_8],
    "A retained message is sent to a new subscriber with RETAIN 1",
    stimulus="retained PUBLISH QoS 1, then a new subscription matching it",
    expected="the new subscriber gets the message with RETAIN 1",
)
async def retained_on_subscribe(context: CaseContext) -> None:
    topic = context.topic("kept")
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"kept", qos=1, retain=True)
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.deliveries(subscriber, topic)
    await context.leave(publisher, subscriber)


@case(
    "retain/qos0-replaces",
    [R311.MQTT_3_3_1_7],
    "A retained QoS 0 message replaces the previous retained message",
    stimulus="retained PUBLISH 'old' at QoS 1, then retained 'new' at QoS 0; once the server has forwarded 'new' to "
    "a live subscription, a new subscription",
    expected="the new subscriber gets 'new' only",
)
async def retained_qos0_replaces(context: CaseContext) -> None:
    topic = context.topic("replace")
    watcher = await context.subscriber("watcher", (topic, 0))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"old", qos=1, retain=True)
    await context.publish(publisher, topic, b"new", qos=0, retain=True)
    # A QoS 0 PUBLISH has no acknowledgement: only its copy to a live subscription shows that the server has acted
    # on it (a server that handles connections apart may see the new SUBSCRIBE first, which no rule forbids).
    await watcher.wait_for(
        lambda p: isinstance(p, Publish) and p.payload == b"new",
        context.timeout + SETTLE_MARGIN,
        since=watcher.subscribed_from or 0,
    )
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber, watcher)
    await context.leave(publisher, subscriber, watcher)


#: Rounds of a retained QoS 1 message replaced at once by a retained QoS 0 one: a broker that stores a retained
#: message apart from reading the next packet may let the QoS 1 one win the race in some rounds only.
ROUNDS: Final = 10


def qos0_replaces_qos1_rounds(rounds: int = ROUNDS) -> Script:
    """``rounds`` times, each on a topic and a connection of its own: a retained QoS 1 message, its PUBACK, then at
    once a retained QoS 0 message to the same topic, until a live subscription got both; then a new subscription to
    every round's topic. The judge decides each round: the QoS 1 message may never come back as the retained one
    [MQTT-3.3.1-7 in 3.1.1, MQTT-3.3.1-5 in 5.0]; one round that shows it fails the case, with each such round
    listed, so a race the broker loses now and then still fails it (aedes 1.2.0 stores the QoS 1 message after
    forwarding the QoS 0 one)."""

    async def script(context: CaseContext) -> None:
        topics = [context.topic("round", str(number)) for number in range(rounds)]
        watcher = await context.connect("watcher")
        context.require("retain", "retained messages")  # as its CONNACK declares (5.0)
        context.require("qos1", "retained QoS 1 messages")
        await watcher.observe(BEFORE_SUBSCRIBE)  # as CaseContext.subscriber does
        await context.subscribe(watcher, *((topic, 0) for topic in topics))
        for number, topic in enumerate(topics):
            old, new = f"old-{number}".encode(), f"new-{number}".encode()
            # a connection of its own each round: the race shows on the first PUBLISHes of a connection
            publisher = await context.connect(f"publisher{number}")
            await context.publish(publisher, topic, old, qos=1, retain=True)
            await context.publish(publisher, topic, new, qos=0, retain=True)
            # only their copies to a live subscription show the server acted on both PUBLISHes (see above), in
            # whichever order it forwards them (aedes 1.2.0 forwards 'new' first, then stores 'old' over it)
            for payload in (new, old):
                await watcher.wait_for(_message(topic, payload), context.timeout, since=watcher.subscribed_from or 0)
            await context.leave(publisher)
        # what each topic holds once every round is over: the retained message a race left there
        late = await context.subscriber("late", *((topic, 1) for topic in topics))
        await context.settle(late, watcher)
        await context.leave(late, watcher)

    return script


def _message(topic: str, payload: bytes | None = None) -> Callable[[object], bool]:
    return lambda p: isinstance(p, Publish) and p.topic == topic and payload in (None, p.payload)


case(
    "retain/qos0-replaces-qos1-rounds",
    [R311.MQTT_3_3_1_7],
    f"A retained QoS 0 message replaces the retained QoS 1 message published just before it, in each of {ROUNDS} "
    "rounds",
    stimulus=f"{ROUNDS} rounds, each on its own topic and connection: retained PUBLISH 'old-N' at QoS 1, its "
    "PUBACK, at once retained 'new-N' at QoS 0, until a live subscription got both; then a new subscription to every "
    "round's topic",
    expected="no new subscription gets 'old-N' in any round (it gets 'new-N', or nothing: a QoS 0 retained message "
    "may be discarded); a fail lists every round that got 'old-N'",
)(qos0_replaces_qos1_rounds())


@case(
    "retain/zero-byte-clears",
    [R311.MQTT_3_3_1_10, R311.MQTT_3_3_1_11],
    "A zero-byte retained message clears the retained message and is not stored",
    stimulus="retained PUBLISH, then a zero-byte retained PUBLISH, then subscribe",
    expected="the new subscriber gets no retained message",
)
async def retained_cleared(context: CaseContext) -> None:
    topic = context.topic("clear")
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"x", qos=1, retain=True)
    await context.publish(publisher, topic, b"", qos=1, retain=True)
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "retain/non-retained-leaves-retained",
    [R311.MQTT_3_3_1_12],
    "A RETAIN 0 PUBLISH does not touch the retained message",
    stimulus="retained PUBLISH 'kept', then a non-retained PUBLISH 'live', then subscribe",
    expected="the new subscriber gets 'kept'",
)
async def non_retained_leaves(context: CaseContext) -> None:
    topic = context.topic("leave")
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"kept", qos=1, retain=True)
    await context.publish(publisher, topic, b"live", qos=1)
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


@case(
    "retain/survives-session-end",
    [R311.MQTT_3_3_1_6],
    "Retained messages outlive the session that published them",
    stimulus="a CleanSession 1 client publishes a retained message and disconnects; a new client subscribes",
    expected="the new subscriber gets the retained message",
)
async def retained_survives(context: CaseContext) -> None:
    topic = context.topic("outlive")
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"outlive", qos=1, retain=True)
    await publisher.send(DISCONNECT)
    await publisher.close()
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.deliveries(subscriber, topic)
    await subscriber.send(DISCONNECT)


@case(
    "topics/dollar-not-matched-by-wildcards",
    [R311.MQTT_4_7_2_1],
    "Filters starting with a wildcard do not match '$' topics",
    stimulus="subscribe to '#' and '+/<run>/#'; publish to '$mqttaudit/<run>/<case>'",
    expected="no delivery of the '$' topic to either subscription",
)
async def dollar_topics(context: CaseContext) -> None:
    topic = "$" + context.topic("d")
    subscriber = await context.subscriber("subscriber", ("#", 0), ("+/" + context.run_id + "/#", 0))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"dollar", qos=1)
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)


#: Where a '$' topic's PUBLISH goes before a normal one on the same connection: (id word, the level put before the
#: case's topic, its QoS).
DOLLAR_FIRST: Final = (("qos0", "$", 0), ("qos1", "$", 1), ("sys", "$SYS/", 0))


def normal_after_dollar(before: str, qos: int) -> Script:
    """A PUBLISH to a '$' topic (``before`` the case's topic) at ``qos``, then on the same connection a QoS 1 PUBLISH
    to the topic a subscriber holds: the server may keep clients from using '$' topics (section 4.7.2), but the
    message after it is routed like any other [MQTT-4.5.0-1]."""

    async def script(context: CaseContext) -> None:
        topic = context.topic("after")
        publisher = await context.connect("publisher")
        context.require("qos1", "a QoS 1 PUBLISH")  # as its CONNACK declares (5.0)
        subscriber = await context.subscriber("subscriber", (topic, 1))
        await context.publish(publisher, before + context.topic("dollar"), b"dollar", qos=qos)
        if qos == 0 and not publisher.closed:
            # nothing answers a QoS 0 PUBLISH: a PINGRESP shows the broker read it and kept the connection (a broker
            # reads in order), a close that it did not
            since = len(publisher.events)
            await publisher.send(Pingreq())
            await publisher.wait_type(Pingresp, since=since)
        if publisher.closed:
            # [MQTT-3.3.5-2] a server that does not authorize a PUBLISH may close the connection instead
            raise NotApplicable("the broker closed the connection after the PUBLISH to a '$' topic")
        await context.publish(publisher, topic, b"after", qos=1)
        await context.deliveries(subscriber, topic)
        await context.leave(publisher, subscriber)

    return script


for _word, _before, _qos in DOLLAR_FIRST:
    case(
        f"topics/normal-after-dollar-{_word}",
        [R311.MQTT_4_5_0_1],
        f"A normal PUBLISH after a QoS {_qos} PUBLISH to '{_before}...' on the same connection is still routed",
        stimulus=f"a subscriber to '<case>/after' (QoS 1); a publisher sends a QoS {_qos} PUBLISH to "
        f"'{_before}mqttaudit/<run>/<case>/dollar', then a QoS 1 PUBLISH to '<case>/after'",
        expected="the subscriber gets the second message (the '$' one is the broker's to refuse or drop; a close "
        "after it makes the case not applicable)",
    )(normal_after_dollar(_before, _qos))


@case(
    "topics/no-normalisation",
    [R311.MQTT_3_3_2_3, R311.MQTT_4_7_3_4, R311.MQTT_1_5_3_3],
    "Topics are matched byte for byte: no normalisation, a BOM is kept",
    stimulus="subscribe to '<case>//a' and '<case>/\\ufeffb'; publish to '<case>/a', '<case>/b' and '<case>/\\ufeffb'",
    expected="only '<case>/\\ufeffb' is delivered, with its BOM",
)
async def no_normalisation(context: CaseContext) -> None:
    subscriber = await context.subscriber("subscriber", (context.topic("", "a"), 1), (context.topic("\ufeffb"), 1))
    publisher = await context.connect("publisher")
    await context.publish(publisher, context.topic("a"), b"a", qos=1)
    await context.publish(publisher, context.topic("b"), b"b", qos=1)
    await context.publish(publisher, context.topic("\ufeffb"), b"bom", qos=1)
    await context.deliveries(subscriber, context.topic("\ufeffb"))
    await context.settle(subscriber)
    await context.leave(publisher, subscriber)
