"""MQTT 5.0 acknowledgements under load and QoS 2 flows under Message Expiry (sections 2.2.1, 3.2.2.3.4, 3.8.4,
3.9.3, 3.10.4, 4.3.3).

Several requests in flight at once: two SUBSCRIBEs sent back to back, each answered by a SUBACK with its own
Packet Identifier and one Reason Code per filter [MQTT-2.2.1-6, MQTT-3.9.3-2], whose granted QoS no delivery
exceeds [MQTT-3.8.4-7]; an UNSUBSCRIBE of several filters answered by one UNSUBACK [MQTT-3.10.4-6]; QoS 1 and QoS 2
deliveries held unacknowledged together, each under an identifier not in use [MQTT-2.2.1-4]; QoS 2 PUBLISHes sent
back to back, each answered by a PUBREC of its identifier [MQTT-4.3.3-8].

Message Expiry does not end a QoS 2 flow once it started: a PUBREL sent after the message expired still gets PUBCOMP
0x00 [MQTT-4.3.3-13], and a PUBREC sent after a delivered message expired still gets its PUBREL [MQTT-4.3.3-7].
Both wait :data:`PAST_EXPIRY` seconds, beyond the interval and a server's one-second timer resolution.

Maximum QoS: a broker that declares one below 2 still accepts a SUBSCRIBE above it [MQTT-3.2.2-10]; a broker
that takes a QoS within what it declared supports it, and one that refuses it as "QoS not supported" should have
declared less [MQTT-3.2.2-9].

The judge (:mod:`mqttaudit.judge.pairing`, :mod:`mqttaudit.judge.deliveries`) decides every statement a case lists;
the scripts only drive the traffic.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
)
from ...codec import properties as props
from ..case import CaseContext, Inconclusive, NotApplicable, Script
from ..connection import PacketTest, ProbeConnection
from .v5_connect import v5_case

SUCCESS: Final = 0x00
SERVER_NEW_ID: Final[str] = R5.MQTT_2_2_1_4
SUBSCRIBE_ACK_SAME_ID: Final[str] = R5.MQTT_2_2_1_6
SUBACK_CODE_FOR_EACH_FILTER: Final[str] = R5.MQTT_3_9_3_2
SUBACK_CODE_IS_GRANT: Final[str] = R5.MQTT_3_8_4_7
UNSUBSCRIBE_AS_SEQUENCE: Final[str] = R5.MQTT_3_10_4_6
QOS2_SENT_NOT_EXPIRED: Final[str] = R5.MQTT_4_3_3_7
QOS2_PUBREC_SAME_ID: Final[str] = R5.MQTT_4_3_3_8
QOS2_EXPIRED_COMPLETED: Final[str] = R5.MQTT_4_3_3_13
MAXIMUM_QOS_DECLARED: Final[str] = R5.MQTT_3_2_2_9
SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED: Final[str] = R5.MQTT_3_2_2_10
PINGRESP_SENT: Final[str] = R5.MQTT_3_12_4_1
#: Every statement a case of this module lists.
STATEMENTS: Final = frozenset(
    {
        SERVER_NEW_ID,
        SUBSCRIBE_ACK_SAME_ID,
        SUBACK_CODE_FOR_EACH_FILTER,
        SUBACK_CODE_IS_GRANT,
        UNSUBSCRIBE_AS_SEQUENCE,
        QOS2_SENT_NOT_EXPIRED,
        QOS2_PUBREC_SAME_ID,
        QOS2_EXPIRED_COMPLETED,
        MAXIMUM_QOS_DECLARED,
        SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED,
        PINGRESP_SENT,
    }
)
#: The Message Expiry Interval of the expiring messages (seconds).
EXPIRY: Final = 1
#: How long after the PUBLISH the expiring flows wait: past the interval and a one-second timer resolution
#: (the judge decides nothing within a second of an interval's end), with half a second to spare.
PAST_EXPIRY: Final = 2.5
#: Messages held unacknowledged at once, per QoS.
IN_FLIGHT: Final = 3


def _answers(kind: type[Packet], packet_id: int | None) -> PacketTest:
    return lambda packet: isinstance(packet, kind) and getattr(packet, "packet_id", None) == packet_id


def _maximum_qos(context: CaseContext) -> int:
    """The Maximum QoS the broker's last CONNACK declared (with the profile over it; 2 when left out)."""
    return context.capabilities.maximum_qos if context.capabilities is not None else 2


async def _deliveries(connection: ProbeConnection, count: int, since: int = 0) -> list[Publish]:
    def enough(_packet: Packet) -> bool:
        return len(_published(connection, since)) >= count

    await connection.wait_for(enough, since=since)
    return _published(connection, since)


def _published(connection: ProbeConnection, since: int) -> list[Publish]:
    return [p for p in connection.received[since:] if isinstance(p, Publish)]


# Identifiers in flight [MQTT-2.2.1-4, MQTT-4.3.3-8] ------------------------------------------------------------------


@v5_case(
    "v5/flows/deliveries-in-flight",
    [SERVER_NEW_ID],
    f"{IN_FLIGHT} QoS 1 and {IN_FLIGHT} QoS 2 deliveries held together each get a Packet Identifier not in use",
    stimulus="a subscriber at QoS 1 to one topic and QoS 2 to another withholds every acknowledgement while "
    f"{IN_FLIGHT} messages are published to each; then acknowledges them all",
    expected="every new QoS 1 and QoS 2 PUBLISH under a non-zero Packet Identifier no other delivery in flight holds",
)
async def deliveries_in_flight(context: CaseContext) -> None:
    subscriber = await context.connect("subscriber", auto_ack=False)
    context.require("qos1", "QoS 1 deliveries")
    # QoS 2 too where the broker declares it (a broker without QoS 2 holds QoS 1 deliveries alone).
    topics = {qos: context.topic(f"q{qos}") for qos in range(1, min(_maximum_qos(context), 2) + 1)}
    for qos, topic in topics.items():
        await context.subscribe_granted(subscriber, topic, qos)
    publisher = await context.connect("publisher")
    since = len(subscriber.received)
    await asyncio.gather(
        *(
            context.publish(publisher, topic, f"m{i}".encode(), qos=qos)
            for qos, topic in topics.items()
            for i in range(IN_FLIGHT)
        )
    )
    held = await _deliveries(subscriber, len(topics) * IN_FLIGHT, since)
    for packet in held:
        await _complete(subscriber, packet)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


async def _complete(connection: ProbeConnection, packet: Publish) -> None:
    """Acknowledges one delivery as a conforming client does (QoS 2: PUBREC, then PUBCOMP for its PUBREL)."""
    if packet.qos == 0 or packet.packet_id is None:
        return
    if packet.qos == 1:
        await connection.send(Puback(packet_id=packet.packet_id, reason_code=SUCCESS))
        return
    since = len(connection.received)
    await connection.send(Pubrec(packet_id=packet.packet_id, reason_code=SUCCESS))
    if isinstance(await connection.wait_for(_answers(Pubrel, packet.packet_id), since=since), Pubrel):
        await connection.send(Pubcomp(packet_id=packet.packet_id, reason_code=SUCCESS))


@v5_case(
    "v5/flows/pubrecs-in-flight",
    [QOS2_PUBREC_SAME_ID],
    f"{IN_FLIGHT} QoS 2 PUBLISHes sent back to back each get a PUBREC with their own Packet Identifier",
    stimulus=f"{IN_FLIGHT} QoS 2 PUBLISHes under distinct Packet Identifiers, sent without waiting; then the PUBREL of "
    "each PUBREC",
    expected="a PUBREC for each PUBLISH, with its Packet Identifier; a PUBCOMP for each PUBREL",
)
async def pubrecs_in_flight(context: CaseContext) -> None:
    connection = await context.connect(auto_ack=False)
    context.require("qos2", "QoS 2 PUBLISHes")
    context.require_in_flight(IN_FLIGHT, f"{IN_FLIGHT} QoS 2 PUBLISHes sent back to back")
    topic = context.topic("t")
    ids = [context.packet_id() for _ in range(IN_FLIGHT)]
    since = len(connection.received)
    for i, packet_id in enumerate(ids):
        await connection.send(Publish(topic=topic, payload=f"m{i}".encode(), qos=2, packet_id=packet_id))
    for packet_id in ids:
        if isinstance(await connection.wait_for(_answers(Pubrec, packet_id), since=since), Pubrec):
            await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
    for packet_id in ids:
        await connection.wait_for(_answers(Pubcomp, packet_id), since=since)
    await context.disconnect(connection)


# QoS 2 under Message Expiry [MQTT-4.3.3-7, -13] ----------------------------------------------------------------------


@v5_case(
    "v5/flows/qos2-pubrel-after-expiry",
    [QOS2_EXPIRED_COMPLETED],
    "A QoS 2 PUBLISH whose Message Expiry Interval passed before its PUBREL still gets PUBCOMP 0x00",
    stimulus=f"a QoS 2 PUBLISH with Message Expiry Interval {EXPIRY}; after its PUBREC the PUBREL is withheld for "
    f"{PAST_EXPIRY:g} s from the PUBLISH, then sent",
    expected="PUBCOMP with the PUBREL's Packet Identifier and Reason Code 0x00 (not 0x92 Packet Identifier not "
    "found): the receiver completes the sequence though it may have let the message expire",
    timing=True,
)
async def qos2_pubrel_after_expiry(context: CaseContext) -> None:
    connection = await context.connect(auto_ack=False)
    context.require("qos2", "a QoS 2 PUBLISH")
    packet_id = context.packet_id()
    expiring = props.make(message_expiry_interval=EXPIRY)
    sent = context.clock()
    await connection.send(
        Publish(topic=context.topic("t"), payload=b"expiring", qos=2, packet_id=packet_id, properties=expiring)
    )
    if not isinstance(await connection.wait_for(_answers(Pubrec, packet_id)), Pubrec):
        raise Inconclusive(f"setup: {connection.missing('PUBREC')}")
    await connection.observe(max(PAST_EXPIRY - (context.clock() - sent), 0.0))
    since = len(connection.received)
    await connection.send(Pubrel(packet_id=packet_id, reason_code=SUCCESS))
    await connection.wait_for(_answers(Pubcomp, packet_id), since=since)
    await context.disconnect(connection)


@v5_case(
    "v5/flows/qos2-pubrec-after-expiry",
    [QOS2_SENT_NOT_EXPIRED],
    "A QoS 2 delivery whose Message Expiry Interval passed before its PUBREC still gets its PUBREL",
    stimulus=f"a subscriber at QoS 2 withholds the PUBREC of a delivery published with Message Expiry Interval "
    f"{EXPIRY} for {PAST_EXPIRY:g} s from the delivery, then sends it",
    expected="PUBREL 0x00 with the delivery's Packet Identifier: the broker applies no expiry to a PUBLISH it sent",
    timing=True,
)
async def qos2_pubrec_after_expiry(context: CaseContext) -> None:
    subscriber = await context.connect("subscriber", auto_ack=False)
    context.require("qos2", "a QoS 2 delivery")
    topic = context.topic("t")
    await context.subscribe_granted(subscriber, topic, 2)
    publisher = await context.connect("publisher")
    since = len(subscriber.received)
    await context.publish(publisher, topic, b"expiring", qos=2, properties=props.make(message_expiry_interval=EXPIRY))
    deliveries = await _deliveries(subscriber, 1, since)
    if not deliveries or deliveries[0].packet_id is None:
        raise Inconclusive(f"setup: {subscriber.missing('a QoS 2 delivery')}")
    delivery = deliveries[0]
    await subscriber.observe(PAST_EXPIRY)  # from the delivery, which the broker sent after the PUBLISH it received
    since = len(subscriber.received)
    await subscriber.send(Pubrec(packet_id=delivery.packet_id, reason_code=SUCCESS))
    if isinstance(await subscriber.wait_for(_answers(Pubrel, delivery.packet_id), since=since), Pubrel):
        await subscriber.send(Pubcomp(packet_id=delivery.packet_id, reason_code=SUCCESS))
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


# SUBACK and UNSUBACK [MQTT-2.2.1-6, MQTT-3.9.3-2, MQTT-3.8.4-7, MQTT-3.10.4-6] -------------------------------------


@v5_case(
    "v5/acknowledgements/subscribes-in-flight",
    [SUBSCRIBE_ACK_SAME_ID, SUBACK_CODE_FOR_EACH_FILTER, SUBACK_CODE_IS_GRANT],
    "Two SUBSCRIBEs in flight get a SUBACK each, with their identifiers, one code per filter, grants kept",
    stimulus="a SUBSCRIBE of three filters (QoS 0, 1 and 2) and a SUBSCRIBE of one (QoS 2) sent back to back; then "
    "one message to each filter's topic at the highest QoS the broker declares; then an UNSUBSCRIBE of all four",
    expected="a SUBACK per SUBSCRIBE, each with its request's Packet Identifier and one Reason Code of Table 3-8 per "
    "filter; no delivery above the QoS its SUBACK granted; an UNSUBACK with the UNSUBSCRIBE's identifier",
)
async def subscribes_in_flight(context: CaseContext) -> None:
    subscriber = await context.connect("subscriber")
    topics = [context.topic(f"q{qos}") for qos in (0, 1, 2)] + [context.topic("single")]
    requests = (
        Subscribe(
            packet_id=context.packet_id(),
            subscriptions=tuple(Subscription(topic_filter=t, qos=q) for t, q in zip(topics, (0, 1, 2), strict=False)),
        ),
        Subscribe(packet_id=context.packet_id(), subscriptions=(Subscription(topic_filter=topics[3], qos=2),)),
    )
    since = len(subscriber.received)
    subscriber.subscribed_from = since
    for request in requests:
        await subscriber.send(request)
    for request in requests:
        if not isinstance(await subscriber.wait_for(_answers(Suback, request.packet_id), since=since), Suback):
            raise Inconclusive(f"setup: {subscriber.missing(f'SUBACK for packet id {request.packet_id}')}")
    publisher = await context.connect("publisher")
    qos = _maximum_qos(context)
    for topic in topics:
        await context.publish(publisher, topic, b"granted", qos=qos)
    await _deliveries(subscriber, len(topics), since)
    await context.settle(subscriber)
    await context.unsubscribe(subscriber, *topics)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


@v5_case(
    "v5/acknowledgements/unsubscribe-several-filters",
    [UNSUBSCRIBE_AS_SEQUENCE, SUBSCRIBE_ACK_SAME_ID],
    "An UNSUBSCRIBE of three filters gets one UNSUBACK with a code for each, and ends all three",
    stimulus="a subscriber to three topics unsubscribes from all three in one UNSUBSCRIBE; then one message is "
    "published to each topic",
    expected="one UNSUBACK with the UNSUBSCRIBE's Packet Identifier and three Reason Codes; no second UNSUBACK; none "
    "of the three messages delivered",
)
async def unsubscribe_several_filters(context: CaseContext) -> None:
    topics = [context.topic(name) for name in ("a", "b", "c")]
    subscriber = await context.subscriber("subscriber", *((topic, 0) for topic in topics))
    await context.unsubscribe(subscriber, *topics)
    publisher = await context.connect("publisher")
    for topic in topics:
        await context.publish(publisher, topic, b"after", qos=0)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


# Maximum QoS [MQTT-3.2.2-9, -10] -------------------------------------------------------------------------------------


@v5_case(
    "v5/maximum-qos/subscribe-above-maximum",
    [SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED],
    "A broker declaring a Maximum QoS below 2 still accepts a SUBSCRIBE requesting more",
    stimulus="a SUBSCRIBE of a filter at QoS 0 and one at each QoS above the Maximum QoS the CONNACK declared",
    expected="a SUBACK granting every filter (at a QoS the broker supports), none refused for its QoS (0x80, 0x83)",
)
async def subscribe_above_maximum(context: CaseContext) -> None:
    connection = await context.connect()
    maximum = _maximum_qos(context)
    if maximum >= 2:
        raise NotApplicable("the broker declares Maximum QoS 2 (by leaving it out): no QoS is above it")
    above = [(context.topic(f"q{qos}"), qos) for qos in range(maximum + 1, 3)]
    await context.subscribe(connection, (context.topic("q0"), 0), *above)
    await context.disconnect(connection)


@v5_case(
    "v5/maximum-qos/publish-within-maximum",
    [MAXIMUM_QOS_DECLARED],
    "A broker takes a QoS 1 or 2 PUBLISH within the Maximum QoS it declared",
    stimulus="a QoS 1 PUBLISH, and a QoS 2 one where the CONNACK declared no Maximum QoS below 2, to a topic nobody "
    "subscribes",
    expected="PUBACK / PUBREC below 0x80; not a DISCONNECT 0x9B (QoS not supported), which would show a Maximum QoS "
    "the CONNACK should have declared",
)
async def publish_within_maximum(context: CaseContext) -> None:
    connection = await context.connect()
    maximum = _maximum_qos(context)
    if maximum == 0:
        raise NotApplicable("the broker declares Maximum QoS 0: every QoS 1 or 2 PUBLISH is beyond it")
    for qos in range(1, maximum + 1):
        if await context.publish(connection, context.topic(f"q{qos}"), b"within", qos=qos) is None:
            await connection.wait_close()  # refused (DISCONNECT 0x9B) or unanswered: the judge says which
            return
    await context.disconnect(connection)


# A PUBREC of a Packet Identifier not in use [MQTT-3.12.4-1] ------------------------------------------------------

#: How long the client watches for the server's reaction to the PUBREC before its PINGREQ, in timeouts.
REACTION: Final = 0.25


def _unknown_pubrec(code: int | None) -> Script:
    """A PUBREC of a Packet Identifier the server never used (the client breaks [MQTT-2.2.1-5]): the server may answer
    PUBREL 0x92 "Packet Identifier not found" (3.6.2.1) or end the connection with a DISCONNECT for the Protocol
    Error, which makes the case not applicable; what it may not do is stay open and stop answering. A PINGREQ
    shows which: it is owed its PINGRESP [MQTT-3.12.4-1]."""

    async def script(context: CaseContext) -> None:
        connection = await context.connect()
        unknown = context.packet_id()
        since = len(connection.received)
        await connection.send(Pubrec(packet_id=unknown, reason_code=code))
        ended = await connection.wait_for(lambda p: isinstance(p, Disconnect), context.timeout * REACTION, since=since)
        if ended is not None or connection.closed:
            how = "a DISCONNECT" if isinstance(ended, Disconnect) else "the close"
            raise NotApplicable(
                f"the broker ended the connection with {how} for the PUBREC of an identifier not in use"
            )
        await connection.send(Pingreq())
        await connection.wait_type(Pingresp, since=since)
        await context.disconnect(connection)

    return script


for _form, _words, _code in (
    ("", "Reason Code 0x00 written out", SUCCESS),
    ("-short", "the Reason Code left out", None),
):
    v5_case(
        f"v5/flows/pubrec-unknown-id{_form}-then-pingreq",
        [PINGRESP_SENT],
        f"A PUBREC ({_words}) of a Packet Identifier not in use leaves the connection answering: the PINGREQ after it "
        "gets its PINGRESP",
        stimulus=f"PUBREC ({_words}) of a Packet Identifier the server never used; {REACTION:g} timeouts later, if "
        "the connection is still open, PINGREQ",
        expected="PINGRESP (a PUBREL 0x92 Packet Identifier not found may come first); a DISCONNECT for the Protocol "
        "Error makes the case not applicable; never an open connection that answers nothing",
    )(_unknown_pubrec(_code))
