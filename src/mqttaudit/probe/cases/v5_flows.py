"""MQTT 5.0 QoS flows (sections 4.3, 4.4, 4.9) and the diagnostics a small Maximum Packet Size leaves out.

The broker as sender: each new message under a Packet Identifier not in use, the packet held until its answer
however long the probe's client waits, never re-sent on the same connection, and a refused message never again
[MQTT-4.3.2-1, -3; MQTT-4.3.3-3, -5, -6; MQTT-4.4.0-1, -2]. At a send quota of zero it sends no more QoS 1 or 2
PUBLISH but still answers PINGREQ, SUBSCRIBE and UNSUBSCRIBE [MQTT-4.9.0-2, -3; MQTT-3.3.4-10]. The broker as
receiver: a repeat before PUBREL gets PUBREC again; an identifier whose flow ended starts a new message
[MQTT-4.3.3-10, -12; MQTT-4.3.2-5]. With a Maximum Packet Size too small for a Reason String or User Property,
the broker's acknowledgements and DISCONNECT leave them out [MQTT-3.4.2-2 ... MQTT-3.14.2-4]; one that never
sends them simply keeps the rules.

The judge (:mod:`mqttaudit.judge.pairing`, :mod:`mqttaudit.judge.omitted_5`) decides every statement a case lists;
the scripts only drive the traffic. A case in which the probe's client re-sends on one connection breaks
[MQTT-4.4.0-1] itself, on purpose: that finding is the client's, and the broker is judged on its answer.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Packet,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    encode,
)
from ...codec import properties as props
from ..case import REPEATS, CaseContext, Inconclusive, NotApplicable
from ..connection import PacketTest, ProbeConnection
from .v5_connect import v5_case

V5: Final = ProtocolVersion.V5
SUCCESS: Final = 0x00
UNSPECIFIED_ERROR: Final = 0x80
#: Messages published toward a subscriber that holds its acknowledgements.
HELD_MESSAGES: Final = 3
#: A Maximum Packet Size that holds every acknowledgement without diagnostics, and few diagnostics besides.
SMALL_PACKET_SIZE: Final = 24

#: The sender statements the broker keeps toward a subscriber that answers late.
QOS1_SENDER: Final = (R5.MQTT_4_3_2_1, R5.MQTT_4_3_2_2, R5.MQTT_4_3_2_3, R5.MQTT_4_4_0_1)
QOS2_SENDER: Final = (
    R5.MQTT_4_3_3_1,
    R5.MQTT_4_3_3_2,
    R5.MQTT_4_3_3_3,
    R5.MQTT_4_3_3_5,
    R5.MQTT_4_3_3_6,
    R5.MQTT_4_4_0_1,
)
REFUSED_NOT_RESENT: Final[str] = R5.MQTT_4_4_0_2
QUOTA: Final = (R5.MQTT_3_3_4_10, R5.MQTT_4_9_0_3)
ZERO_QUOTA_NO_PUBLISH: Final[str] = R5.MQTT_4_9_0_2
REPEAT_ANSWERED: Final[str] = R5.MQTT_4_3_3_10
NEW_AFTER_PUBACK: Final[str] = R5.MQTT_4_3_2_5
NEW_AFTER_PUBCOMP: Final[str] = R5.MQTT_4_3_3_12
NEW_AFTER_REFUSAL: Final[str] = R5.MQTT_4_3_3_9
#: Per packet type, its Reason String and User Property statements.
PUBACK_OMITS: Final = (R5.MQTT_3_4_2_2, R5.MQTT_3_4_2_3)
PUBREC_OMITS: Final = (R5.MQTT_3_5_2_2, R5.MQTT_3_5_2_3)
PUBCOMP_OMITS: Final = (R5.MQTT_3_7_2_2, R5.MQTT_3_7_2_3)
SUBACK_OMITS: Final = (R5.MQTT_3_9_2_1, R5.MQTT_3_9_2_2)
UNSUBACK_OMITS: Final = (R5.MQTT_3_11_2_1, R5.MQTT_3_11_2_2)


def _answers(kind: type[Packet], packet_id: int | None) -> PacketTest:
    return lambda packet: isinstance(packet, kind) and getattr(packet, "packet_id", None) == packet_id


def _deliveries(connection: ProbeConnection, since: int = 0) -> list[Publish]:
    return [p for p in connection.received[since:] if isinstance(p, Publish) and p.packet_id is not None]


async def _late_subscriber(context: CaseContext, qos: int, **limits: int) -> tuple[ProbeConnection, str]:
    """A subscriber that answers nothing by itself, subscribed at ``qos`` to a fresh topic."""
    context.require("qos2" if qos == 2 else "qos1", f"QoS {qos} deliveries")
    subscriber = await context.connect("subscriber", auto_ack=False, properties=props.make(**limits))
    topic = context.topic("t")
    await context.subscribe_granted(subscriber, topic, qos)
    return subscriber, topic


async def _publish_all(context: CaseContext, topic: str, count: int, qos: int, tag: str = "m") -> ProbeConnection:
    publisher = await context.connect("publisher")
    await asyncio.gather(*(context.publish(publisher, topic, f"{tag}{i}".encode(), qos=qos) for i in range(count)))
    return publisher


async def _wait_deliveries(connection: ProbeConnection, count: int, since: int = 0) -> list[Publish]:
    await connection.wait_for(lambda _p: len(_deliveries(connection, since)) >= count, since=since)
    return _deliveries(connection, since)


# The broker as sender [MQTT-4.3.2-1, -3; MQTT-4.3.3-3, -5, -6; MQTT-4.4.0-1] --------------------------------------


@v5_case(
    "v5/flows/qos1-held-until-puback",
    QOS1_SENDER,
    "The broker holds each QoS 1 delivery, under its own Packet Identifier, until its PUBACK",
    stimulus=f"a subscriber at QoS 1 withholds its PUBACKs while {HELD_MESSAGES} QoS 1 messages arrive and for half "
    "the timeout more; then acknowledges them, and one more message is published",
    expected="distinct Packet Identifiers for the held messages, each first sent with DUP 0; no PUBLISH re-sent on "
    "the connection (DUP 1) while the PUBACKs are withheld; a later message may reuse an acknowledged identifier",
)
async def qos1_held_until_puback(context: CaseContext) -> None:
    subscriber, topic = await _late_subscriber(context, 1)
    publisher = await _publish_all(context, topic, HELD_MESSAGES, 1)
    held = await _wait_deliveries(subscriber, HELD_MESSAGES)
    await subscriber.observe(context.timeout / 2)
    for packet in held:
        await subscriber.send(Puback(packet_id=packet.packet_id, reason_code=SUCCESS))
    since = len(subscriber.received)
    await context.publish(publisher, topic, b"after", qos=1)
    for packet in await _wait_deliveries(subscriber, 1, since):
        await subscriber.send(Puback(packet_id=packet.packet_id, reason_code=SUCCESS))
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/flows/qos2-held-until-pubrec-and-pubcomp",
    QOS2_SENDER,
    "The broker holds a QoS 2 delivery until its PUBREC, then its PUBREL until its PUBCOMP",
    stimulus=f"a subscriber at QoS 2 withholds its PUBRECs while {HELD_MESSAGES} QoS 2 messages arrive and for half "
    "the timeout more; then sends the PUBRECs and withholds the PUBCOMPs for half the timeout; then completes",
    expected="distinct Packet Identifiers, DUP 0; PUBREL only after each PUBREC; no PUBLISH after its PUBREL; "
    "nothing re-sent on the connection",
)
async def qos2_held_until_pubrec_and_pubcomp(context: CaseContext) -> None:
    subscriber, topic = await _late_subscriber(context, 2)
    publisher = await _publish_all(context, topic, HELD_MESSAGES, 2)
    held = await _wait_deliveries(subscriber, HELD_MESSAGES)
    await subscriber.observe(context.timeout / 2)
    since = len(subscriber.received)
    for packet in held:
        await subscriber.send(Pubrec(packet_id=packet.packet_id, reason_code=SUCCESS))
    for packet in held:
        await subscriber.wait_for(_answers(Pubrel, packet.packet_id), since=since)
    await subscriber.observe(context.timeout / 2)
    for packet in held:
        await subscriber.send(Pubcomp(packet_id=packet.packet_id, reason_code=SUCCESS))
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


def _refusal_case(qos: int) -> None:
    answer = "PUBACK" if qos == 1 else "PUBREC"

    @v5_case(
        f"v5/flows/refused-qos{qos}-not-re-sent",
        [REFUSED_NOT_RESENT, R5.MQTT_4_4_0_1],
        f"A QoS {qos} delivery the client refuses with {answer} 0x80 is not sent again",
        stimulus=f"a subscriber at QoS {qos} answers the first delivery with {answer} 0x80 (Unspecified error), then "
        "watches for the timeout while a second message is published and acknowledged",
        expected="the refused message is acknowledged: never re-sent (no DUP 1 PUBLISH of it); the second message "
        "arrives as a new PUBLISH",
    )
    async def script(context: CaseContext) -> None:
        subscriber, topic = await _late_subscriber(context, qos)
        publisher = await _publish_all(context, topic, 1, qos, "refused")
        deliveries = await _wait_deliveries(subscriber, 1)
        if not deliveries:
            raise Inconclusive(f"setup: {subscriber.missing('a delivery')}")
        first = deliveries[0]
        refusal = Puback if qos == 1 else Pubrec
        await subscriber.send(refusal(packet_id=first.packet_id, reason_code=UNSPECIFIED_ERROR))
        since = len(subscriber.received)
        await context.publish(publisher, topic, b"second", qos=qos)
        for packet in await _wait_deliveries(subscriber, 1, since):
            await _complete(subscriber, packet)
        await context.settle(subscriber)
        await context.disconnect(publisher)
        await context.disconnect(subscriber)


async def _complete(connection: ProbeConnection, packet: Publish) -> None:
    """Acknowledges one delivery as a conforming client does (QoS 2: PUBREC, then PUBCOMP for its PUBREL)."""
    if packet.qos == 1:
        await connection.send(Puback(packet_id=packet.packet_id, reason_code=SUCCESS))
        return
    since = len(connection.received)
    await connection.send(Pubrec(packet_id=packet.packet_id, reason_code=SUCCESS))
    if isinstance(await connection.wait_for(_answers(Pubrel, packet.packet_id), since=since), Pubrel):
        await connection.send(Pubcomp(packet_id=packet.packet_id, reason_code=SUCCESS))


for _qos in (1, 2):
    _refusal_case(_qos)


# Send quota [MQTT-4.9.0-2, -3; MQTT-3.3.4-10] ----------------------------------------------------------------------


def _quota_case(name: str, qos: int, request: str) -> None:
    @v5_case(
        f"v5/flows/zero-quota-{name}",
        [*QUOTA, ZERO_QUOTA_NO_PUBLISH],
        f"A broker at its send quota toward a client still answers its {request} (QoS {qos})",
        stimulus=f"a subscriber with Receive Maximum 1 subscribes at QoS {qos}; two messages are published to it; it "
        f"withholds its acknowledgement (quota zero) and sends {request}; then it completes every delivery",
        expected=f"the answer to the {request} without waiting for the acknowledgement; no second QoS {qos} PUBLISH "
        "while the first is unacknowledged",
    )
    async def script(context: CaseContext) -> None:
        subscriber, topic = await _late_subscriber(context, qos, receive_maximum=1)
        publisher = await _publish_all(context, topic, 2, qos, "quota")
        deliveries = await _wait_deliveries(subscriber, 1)
        if not deliveries:
            raise Inconclusive(f"setup: {subscriber.missing('a delivery')}")
        first = deliveries[0]
        since = len(subscriber.received)
        if request == "PINGREQ":
            await subscriber.send(Pingreq())
            answer = await subscriber.wait_type(Pingresp, since=since)
        elif request == "SUBSCRIBE":
            packet_id = context.packet_id()
            subscription = Subscription(topic_filter=context.topic("other"), qos=qos)
            await subscriber.send(Subscribe(packet_id=packet_id, subscriptions=(subscription,)))
            answer = await subscriber.wait_for(_answers(Suback, packet_id), since=since)
        else:
            packet_id = context.packet_id()
            await subscriber.send(Unsubscribe(packet_id=packet_id, topic_filters=(context.topic("other"),)))
            answer = await subscriber.wait_for(_answers(Unsuback, packet_id), since=since)
        if answer is None:
            await subscriber.observe(context.timeout)  # the judge reports the missing answer
        await _complete(subscriber, first)
        for packet in (await _wait_deliveries(subscriber, 2))[1:]:
            await _complete(subscriber, packet)
        await context.settle(subscriber)
        await context.disconnect(publisher)
        await context.disconnect(subscriber)


for _name, _qos, _request in (
    ("pingreq-qos1", 1, "PINGREQ"),
    ("pingreq-qos2", 2, "PINGREQ"),
    ("subscribe-qos1", 1, "SUBSCRIBE"),
    ("unsubscribe-qos1", 1, "UNSUBSCRIBE"),
):
    _quota_case(_name, _qos, _request)


# The broker as receiver [MQTT-4.3.3-10, -12; MQTT-4.3.2-5] ---------------------------------------------------------


@v5_case(
    "v5/flows/qos2-repeat-before-pubrel",
    [REPEAT_ANSWERED],
    "A QoS 2 PUBLISH repeated before its PUBREL gets PUBREC again, and is delivered once",
    stimulus=f"a subscriber at QoS 2; a QoS 2 PUBLISH; after its PUBREC the same PUBLISH again with DUP 1, {REPEATS} "
    "times, each after the PUBREC of the one before (the probe's client breaks MQTT-4.4.0-1 on purpose); then PUBREL",
    expected="PUBREC for every repeat too, then PUBCOMP; the subscriber gets the message once",
)
async def qos2_repeat_before_pubrel(context: CaseContext) -> None:
    context.require("qos2", "a QoS 2 flow")
    topic = context.topic("t")
    subscriber = await context.subscriber("subscriber", (topic, 2))
    connection = await context.connect(auto_ack=False)
    packet_id = context.packet_id()
    publish = Publish(topic=topic, payload=b"once", qos=2, packet_id=packet_id)
    await connection.send(publish)
    if not isinstance(await connection.wait_for(_answers(Pubrec, packet_id)), Pubrec):
        raise Inconclusive(f"setup: {connection.missing('PUBREC')}")
    for _ in range(REPEATS):
        since = len(connection.received)
        await connection.send(Publish(topic=publish.topic, payload=b"once", qos=2, packet_id=packet_id, dup=True))
        await connection.wait_for(_answers(Pubrec, packet_id), since=since)
    since = len(connection.received)
    await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
    await connection.wait_for(_answers(Pubcomp, packet_id), since=since)
    await context.settle(subscriber)
    await context.disconnect(connection)
    await context.disconnect(subscriber)


def _reuse_case(name: str, qos: int, statement: str) -> None:
    ended = "PUBACK" if qos == 1 else "PUBCOMP"

    @v5_case(
        f"v5/flows/identifier-reused-after-{name}",
        [statement],
        f"A PUBLISH reusing the Packet Identifier of a flow its {ended} ended is a new message",
        stimulus=f"a QoS {qos} PUBLISH completed with {ended}; then a PUBLISH with the same Packet Identifier, DUP 1 "
        "and another payload",
        expected=f"the second PUBLISH answered as a new message ({'PUBACK' if qos == 1 else 'PUBREC'}), whatever its "
        "DUP flag",
    )
    async def script(context: CaseContext) -> None:
        context.require("qos2" if qos == 2 else "qos1", f"QoS {qos} flows")
        connection = await context.connect()
        topic = context.topic("t")
        packet_id = context.packet_id()
        for payload, dup in ((b"first", False), (b"second", True)):
            since = len(connection.received)
            await connection.send(Publish(topic=topic, payload=payload, qos=qos, packet_id=packet_id, dup=dup))
            if qos == 1:
                await connection.wait_for(_answers(Puback, packet_id), since=since)
                continue
            if not isinstance(await connection.wait_for(_answers(Pubrec, packet_id), since=since), Pubrec):
                break
            await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
            await connection.wait_for(_answers(Pubcomp, packet_id), since=since)
        await context.disconnect(connection)


_reuse_case("puback", 1, NEW_AFTER_PUBACK)
_reuse_case("pubcomp", 2, NEW_AFTER_PUBCOMP)


# Reason String and User Property over the client's Maximum Packet Size [MQTT-3.4.2-2 ... MQTT-3.11.2-2] ------------


async def _small(context: CaseContext) -> ProbeConnection:
    return await context.connect(properties=props.make(maximum_packet_size=SMALL_PACKET_SIZE))


@v5_case(
    "v5/flows/small-maximum-puback-pubrec-pubcomp",
    [*PUBACK_OMITS, *PUBREC_OMITS, *PUBCOMP_OMITS],
    f"Publication acknowledgements keep a client's Maximum Packet Size of {SMALL_PACKET_SIZE} bytes",
    stimulus=f"CONNECT with Maximum Packet Size {SMALL_PACKET_SIZE}; a QoS 1 and a QoS 2 PUBLISH to a topic nobody "
    "subscribes (a broker may answer 0x10 No matching subscribers, with a Reason String); a PUBREL of an identifier "
    "never used (0x92 Packet Identifier not found)",
    expected="PUBACK, PUBREC and PUBCOMP without a Reason String or User Property that would take them over the "
    "maximum",
)
async def small_maximum_publication_acks(context: CaseContext) -> None:
    context.require("qos2", "a QoS 2 flow")
    connection = await _small(context)
    topic = context.topic("nobody")
    await context.publish(connection, topic, b"1", qos=1)
    await context.publish(connection, topic, b"2", qos=2)
    unknown = context.packet_id()
    since = len(connection.received)
    await connection.send(Pubrel(packet_id=unknown, reason_code=SUCCESS))
    await connection.wait_for(_answers(Pubcomp, unknown), since=since)
    await context.disconnect(connection)


@v5_case(
    "v5/flows/small-maximum-suback-unsuback",
    [*SUBACK_OMITS, *UNSUBACK_OMITS],
    f"SUBACK and UNSUBACK keep a client's Maximum Packet Size of {SMALL_PACKET_SIZE} bytes",
    stimulus=f"CONNECT with Maximum Packet Size {SMALL_PACKET_SIZE}; a QoS 2 SUBSCRIBE; a Shared Subscription (which "
    "a broker may refuse, with a Reason String); an UNSUBSCRIBE of a filter never subscribed (0x11 No subscription "
    "existed)",
    expected="SUBACK and UNSUBACK without a Reason String or User Property that would take them over the maximum",
)
async def small_maximum_suback_unsuback(context: CaseContext) -> None:
    connection = await _small(context)
    await context.subscribe(connection, (context.topic("a"), 2))
    try:
        context.require("shared-subscriptions", "a shared subscription the broker may refuse")
        await context.subscribe(connection, ("$share/g/" + context.topic("b"), 1))
    except NotApplicable:
        pass  # the first SUBACK alone still shows the rule
    await context.unsubscribe(connection, context.topic("never"))
    await context.disconnect(connection)


# Across connections: order, replaced subscriptions, an UNSUBSCRIBE in flight --------------------------------------

#: The cases that leave a retained message: they run alone (see :data:`mqttaudit.probe.cases.ALONE`).
ALONE: Final = ("v5/flows/subscribe-again-resends-retained",)
#: [MQTT-4.6.0-5, -6] Order per publisher on non-shared subscriptions.
ORDER: Final = (R5.MQTT_4_6_0_5, R5.MQTT_4_6_0_6)
#: Messages one publisher sends in a row toward a subscriber.
ORDERED_MESSAGES: Final = 10


def _order_case(qos: int) -> None:
    @v5_case(
        f"v5/flows/order-per-publisher-qos{qos}",
        ORDER,
        f"QoS {qos} messages of one publisher arrive in the order it sent them",
        stimulus=f"a subscriber at QoS 2; a publisher sends {ORDERED_MESSAGES} QoS {qos} messages to one topic in one "
        "write",
        expected="the deliveries in the order published",
    )
    async def script(context: CaseContext) -> None:
        if qos == 2:
            context.require("qos2", "QoS 2 deliveries")
        topic = context.topic("t")
        subscriber = await context.subscriber("subscriber", (topic, 2))
        publisher = await context.connect("publisher")
        if qos:
            context.require_in_flight(ORDERED_MESSAGES, f"a burst of {ORDERED_MESSAGES} QoS {qos} messages")
        ids = [context.packet_id() if qos else None for _ in range(ORDERED_MESSAGES)]
        burst = [Publish(topic=topic, payload=f"n{i}".encode(), qos=qos, packet_id=ids[i]) for i in range(len(ids))]
        await publisher.send(b"".join(encode(p, version=V5) for p in burst))
        for packet_id in ids:
            if packet_id is not None:
                await publisher.wait_for(_answers(Puback if qos == 1 else Pubrec, packet_id))
                if qos == 2:
                    await publisher.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
        await subscriber.wait_for(lambda _p: len(_deliveries_of(subscriber, topic)) >= ORDERED_MESSAGES)
        await context.settle(subscriber)
        await context.disconnect(publisher)
        await context.disconnect(subscriber)


def _deliveries_of(connection: ProbeConnection, topic: str) -> list[Publish]:
    return [p for p in connection.received if isinstance(p, Publish) and p.topic == topic]


for _qos in (0, 1, 2):
    _order_case(_qos)


@v5_case(
    "v5/flows/subscribe-same-filter-replaces",
    [R5.MQTT_3_8_4_3],
    "A SUBSCRIBE of a filter the session holds replaces the subscription",
    stimulus="a subscriber subscribes to one filter at QoS 1, then to the same filter again at QoS 2; a message is "
    "published to it",
    expected="one copy of the message (the second SUBSCRIBE replaced the first subscription)",
)
async def subscribe_same_filter_replaces(context: CaseContext) -> None:
    topic = context.topic("t")
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.subscribe(subscriber, (topic, 2))
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"one", qos=1)
    await context.deliveries(subscriber, topic)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/flows/subscribe-again-resends-retained",
    [R5.MQTT_3_8_4_4, R5.MQTT_3_3_1_9],
    "A subscription replaced with Retain Handling 0 gets the retained message again",
    stimulus="a retained QoS 1 message; a subscriber subscribes to its topic (Retain Handling 0), receives it, and "
    "subscribes to the same filter again",
    expected="the retained message after each SUBSCRIBE, with RETAIN 1",
)
async def subscribe_again_resends_retained(context: CaseContext) -> None:
    context.require("retain", "a retained message")
    topic = context.topic("t")
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"kept", qos=1, retain=True)
    subscriber = await context.subscriber("subscriber", (topic, 1))
    await context.deliveries(subscriber, topic)
    since = len(subscriber.received)
    await context.subscribe(subscriber, (topic, 1))
    await subscriber.wait_for(lambda p: isinstance(p, Publish) and p.topic == topic, since=since)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/flows/unsubscribe-completes-qos2-delivery",
    [R5.MQTT_3_10_4_3],
    "A QoS 2 delivery under way when its subscription is deleted is completed",
    stimulus="a subscriber at QoS 2 receives a message and answers PUBREC; before the PUBREL it unsubscribes the "
    "filter; then it answers the PUBREL",
    expected="UNSUBACK, and the PUBREL of the delivery (sent before or after the UNSUBSCRIBE)",
)
async def unsubscribe_completes_qos2_delivery(context: CaseContext) -> None:
    subscriber, topic = await _late_subscriber(context, 2)
    publisher = await _publish_all(context, topic, 1, 2, "inflight")
    deliveries = await _wait_deliveries(subscriber, 1)
    if not deliveries:
        raise Inconclusive(f"setup: {subscriber.missing('a delivery')}")
    packet_id = deliveries[0].packet_id
    await subscriber.send(
        b"".join(
            encode(p, version=V5)
            for p in (
                Pubrec(packet_id=packet_id, reason_code=SUCCESS),
                Unsubscribe(packet_id=context.packet_id(), topic_filters=(topic,)),
            )
        )
    )
    if isinstance(await subscriber.wait_for(_answers(Pubrel, packet_id)), Pubrel):
        await subscriber.send(Pubcomp(packet_id=packet_id, reason_code=SUCCESS))
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/flows/subscribe-several-filters-one-suback",
    [R5.MQTT_3_8_4_5],
    "A SUBSCRIBE of several filters is answered by one SUBACK",
    stimulus="one SUBSCRIBE of three filters (QoS 0, 1 and 2), then the timeout's watch",
    expected="one SUBACK with three Reason Codes; no second SUBACK for the same Packet Identifier",
)
async def subscribe_several_filters_one_suback(context: CaseContext) -> None:
    connection = await context.connect()
    await context.subscribe(connection, *((context.topic(f"f{qos}"), qos) for qos in (0, 1, 2)))
    await context.settle(connection)
    await context.disconnect(connection)


def _unsubscribe_case(name: str, held: str, unsubscribed: str) -> None:
    @v5_case(
        f"v5/flows/unsubscribe-exact-match-{name}",
        [R5.MQTT_3_10_4_1],
        "An UNSUBSCRIBE deletes only the subscription of the same filter, character by character",
        stimulus=f"a subscriber holds '{held}' (under its own topic); it unsubscribes '{unsubscribed}', which matches "
        "it only as a wildcard would; a message is published to the held filter's topic",
        expected="the message is still delivered (nothing was deleted; the UNSUBACK may say 0x11 No subscription "
        "existed)",
    )
    async def script(context: CaseContext) -> None:
        base = context.topic("t")
        held_filter, other = held.replace("T", base), unsubscribed.replace("T", base)
        subscriber = await context.subscriber("subscriber", (held_filter, 1))
        await context.unsubscribe(subscriber, other)
        publisher = await context.connect("publisher")
        topic = f"{base}/x"
        await context.publish(publisher, topic, b"still", qos=1)
        await context.deliveries(subscriber, topic)
        await context.settle(subscriber)
        await context.disconnect(publisher)
        await context.disconnect(subscriber)


for _name, _held, _other in (
    ("plus-covers-level", "T/x", "T/+"),
    ("hash-covers-level", "T/x", "T/#"),
    ("level-inside-plus", "T/+", "T/x"),
):
    _unsubscribe_case(_name, _held, _other)


async def _reused_after_refusal(context: CaseContext, first: Publish, why: str) -> None:
    """Sends ``first`` (a QoS 2 PUBLISH the broker may refuse); after a refusing PUBREC, a valid QoS 2 PUBLISH with
    its Packet Identifier, completed as a new message."""
    context.require("qos2", "QoS 2 flows")
    connection = await context.connect()
    packet_id = first.packet_id
    await connection.send(first, validate=False)
    answer = await connection.wait_for(_answers(Pubrec, packet_id))
    if connection.closed:
        raise NotApplicable(f"the broker closed on {why}: no refusing PUBREC")
    if not isinstance(answer, Pubrec):
        raise Inconclusive(f"setup: {connection.missing('PUBREC')}")
    code = answer.reason_code or 0
    if code < UNSPECIFIED_ERROR:
        await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
        await connection.wait_for(_answers(Pubcomp, packet_id))
        await context.disconnect(connection)
        raise NotApplicable(f"the broker took {why} (PUBREC 0x{code:02x}): no refusal to follow")
    since = len(connection.received)
    await connection.send(Publish(topic=context.topic("t"), payload=b"valid", qos=2, packet_id=packet_id))
    if isinstance(await connection.wait_for(_answers(Pubrec, packet_id), since=since), Pubrec):
        await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
        await connection.wait_for(_answers(Pubcomp, packet_id), since=since)
    await context.disconnect(connection)


def _refusal_reuse_case(name: str, how: str, what: str) -> None:
    @v5_case(
        f"v5/flows/identifier-reused-after-refusing-pubrec-{name}",
        [NEW_AFTER_REFUSAL],
        "A PUBLISH reusing the Packet Identifier of a QoS 2 message the broker refused is a new message",
        stimulus=f"a QoS 2 PUBLISH {how}; after a refusing PUBREC, a valid QoS 2 PUBLISH with the same Packet "
        "Identifier",
        expected="PUBREC for the second PUBLISH, as for any new message (not applicable when the broker takes the "
        "first)",
    )
    async def script(context: CaseContext) -> None:
        packet_id = context.packet_id()
        if name == "sys-topic":
            first = Publish(topic=f"$SYS/{context.topic('t')}", payload=b"x", qos=2, packet_id=packet_id)
        else:
            first = Publish(
                topic=context.topic("t"),
                payload=b"\xff\xfe",
                qos=2,
                packet_id=packet_id,
                properties=props.make(payload_format_indicator=1),
            )
        await _reused_after_refusal(context, first, what)


for _name, _how, _what in (
    (
        "sys-topic",
        "to a '$SYS/' topic (a broker may refuse it with 0x87 Not authorized)",
        "the PUBLISH to a '$SYS/' topic",
    ),
    (
        "invalid-utf8",
        "whose Payload Format Indicator 1 announces UTF-8 but whose payload is not (0x99 may refuse it)",
        "the PUBLISH whose payload is not the UTF-8 it announces",
    ),
):
    _refusal_reuse_case(_name, _how, _what)
