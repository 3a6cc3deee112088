"""MQTT 5.0 limits each side declares for what it receives (sections 3.1.2.11, 3.2.2.3, 3.3.2.3.4, 3.3.4, 4.9):
Topic Alias Maximum and alias mappings, Receive Maximum and Maximum Packet Size, in both directions.

Brokers check one shape of a limit and miss the next, so each limit has several: an alias one above the maximum,
the largest alias, an alias where none is allowed, an alias never mapped (on this connection or only on another);
a window overrun by a burst and by one more PUBLISH after a held window; a packet one byte over the limit next to
one exactly at it. A client breach is a Protocol Error the broker must close on [MQTT-4.13.1-1]; a limit the
client declares binds the broker, whose breaches are findings of their own. The judge (:mod:`mqttaudit.judge.
limits`) decides every statement a case lists; the scripts only drive the traffic. Topic Alias 0 is a malformed
property, in :mod:`.v5_malformed`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    MAX_REMAINING_LENGTH,
    Direction,
    Packet,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    encode,
)
from ...codec import properties as props
from ...codec.packets import Properties
from ..case import CaseContext, Inconclusive, NotApplicable, Script
from ..connection import ProbeConnection, padded
from .v5_connect import v5_case

V5: Final = ProtocolVersion.V5
#: [MQTT-4.13.1-1] The Server closes the connection on a client's Protocol Error.
CLOSE: Final[str] = R5.MQTT_4_13_1_1
#: The client limits the probe breaks on purpose (what its cases provoke: they bind the Client, and the broker owes
#: the close [MQTT-4.13.1-1], judge/limits.py puts them on the offence): [MQTT-3.3.2-9] no Topic Alias above the
#: server's Topic Alias Maximum, [MQTT-3.2.2-17] the same for a maximum above 0, [MQTT-3.2.2-18] none when it
#: declared 0.
ALIAS_WITHIN: Final[str] = R5.MQTT_3_3_2_9
ALIAS_WITHIN_DECLARED: Final[str] = R5.MQTT_3_2_2_17
NO_ALIAS_WITHOUT_MAXIMUM: Final[str] = R5.MQTT_3_2_2_18
#: 3.3.4 (derived): an alias-only PUBLISH uses an alias its sender mapped on this connection; [MQTT-3.3.2-7] no
#: mapping outlives its connection (a receiver carries none forward to another).
ALIAS_MAPPED: Final[str] = R5.MQTT_3_3_4_TOPIC_ALIAS_UNMAPPED
ALIAS_PER_CONNECTION: Final[str] = R5.MQTT_3_3_2_7
#: [MQTT-3.3.4-7] No more unacknowledged QoS 1 and 2 PUBLISHes than the server's Receive Maximum.
WITHIN_RECEIVE_MAXIMUM: Final[str] = R5.MQTT_3_3_4_7
#: [MQTT-3.2.2-15] No packet larger than the server's Maximum Packet Size.
WITHIN_PACKET_SIZE: Final[str] = R5.MQTT_3_2_2_15
#: [MQTT-3.1.2-26] / [MQTT-3.3.2-11] No server Topic Alias above the client's Topic Alias Maximum.
SERVER_ALIAS_WITHIN: Final = (R5.MQTT_3_1_2_26, R5.MQTT_3_3_2_11)
#: [MQTT-3.1.2-27] No server Topic Alias when the client declared none (or 0).
SERVER_NO_ALIAS: Final[str] = R5.MQTT_3_1_2_27
#: [MQTT-3.3.2-3] A delivered Topic Name matches a subscription of the receiving client.
DELIVERY_MATCHES: Final[str] = R5.MQTT_3_3_2_3
#: [MQTT-3.3.4-9] The Server keeps at most the client's Receive Maximum of QoS 1 and 2 PUBLISHes unacknowledged.
SERVER_RECEIVE_MAXIMUM: Final[str] = R5.MQTT_3_3_4_9
#: [MQTT-3.1.2-24] The Server sends no packet larger than the client's Maximum Packet Size (5.0's id).
SERVER_PACKET_SIZE: Final[str] = R5.MQTT_3_1_2_24
#: [MQTT-3.1.2-25] It discards a packet too large for the client and carries on as if it had sent it.
DISCARD_TOO_LARGE: Final[str] = R5.MQTT_3_1_2_25

#: The largest Topic Alias a Topic Alias Maximum can declare (a Two Byte Integer, 3.2.2.3.8).
LARGEST_ALIAS: Final = 0xFFFF
#: A Receive Maximum above this is too large to overrun in reasonable time: a profile may declare a smaller one.
MAX_RECEIVE_MAXIMUM: Final = 1000
#: The largest packet MQTT can frame: a Remaining Length of 268,435,455 after a five-byte fixed header. A Maximum
#: Packet Size of this or more can be exceeded by no packet.
LARGEST_PACKET: Final = 1 + 4 + MAX_REMAINING_LENGTH
#: Messages published to the subscriber whose Receive Maximum the broker must keep within.
WINDOW_MESSAGES: Final = 5
#: Topics, and messages to each, published toward a subscriber whose Topic Alias Maximum binds the broker.
ALIAS_TOPICS: Final = 8
ALIAS_ROUNDS: Final = 2
SUCCESS: Final = 0x00


async def _stimulus(connection: ProbeConnection, *packets: Packet) -> None:
    """Sends ``packets`` in one write, unvalidated (the limit they break is the peer's, not the codec's): a broker
    reads them all before it can answer any. Each within the broker's Maximum Packet Size: a breach of another
    limit is not also one of that."""
    written = [encode(p, validate=False, direction=Direction.FROM_CLIENT, version=V5) for p in packets]
    for packet, raw in zip(packets, written, strict=True):
        connection.check_size(packet, raw)
    await connection.send(b"".join(written))


def _answer(kind: type[Packet], packet_id: int) -> Callable[[Packet], bool]:
    return lambda packet: isinstance(packet, kind) and getattr(packet, "packet_id", None) == packet_id


def _aliased(topic: str, alias: int, *, qos: int = 0, packet_id: int | None = None, payload: bytes = b"x") -> Publish:
    return Publish(topic=topic, payload=payload, qos=qos, packet_id=packet_id, properties=props.make(topic_alias=alias))


def _broker_alias_maximum(context: CaseContext) -> int:
    return context.capabilities.topic_alias_maximum if context.capabilities is not None else 0


def _alias_above(maximum: int) -> int:
    """The Topic Alias one above the broker's Topic Alias Maximum; :class:`NotApplicable` when that maximum is the
    largest a Two Byte Integer holds (65,535, a legal declaration): no Topic Alias above it can be written."""
    if maximum >= LARGEST_ALIAS:
        raise NotApplicable(
            f"the broker's Topic Alias Maximum is {maximum}, the largest a Two Byte Integer holds: Topic Alias "
            f"{maximum + 1} cannot exist, so no alias above the maximum can be sent"
        )
    return maximum + 1


def _breach(
    case_id: str,
    title: str,
    *,
    stimulus: str,
    expected: str = "",
    statements: Iterable[str] = (CLOSE,),
    provokes: Iterable[str] = (),
) -> Callable[[Script], Script]:
    """A case in which the probe's client breaks a limit the broker declared (``provokes``: the Client's statements
    that say so): the broker must close (``statements``)."""
    return v5_case(
        case_id,
        list(statements),
        title,
        stimulus=stimulus,
        expected=expected
        or "close the connection (a DISCONNECT with the Reason Code 3.3.4 names may come first); act on nothing in "
        "it: no PUBACK, PUBREC or delivery",
        provokes=provokes,
    )


# Topic Alias, the client's (3.2.2.3.8, 3.3.2.3.4) ----------------------------------------------------------------


async def _alias_beyond(
    context: CaseContext, alias_of: Callable[[int], int], qos: int, *, declared: bool | None = None
) -> None:
    """``declared``: the case needs a Topic Alias Maximum above 0 (True) or none (False) in the CONNACK, as the
    statement it lists binds the client in that case only ([MQTT-3.2.2-17] or [MQTT-3.2.2-18])."""
    connection = await context.connect()
    maximum = _broker_alias_maximum(context)
    if declared is True and maximum == 0:
        raise NotApplicable("the broker declares no Topic Alias Maximum: v5/topic-alias/without-maximum covers it")
    if declared is False and maximum > 0:
        raise NotApplicable(f"the broker declares Topic Alias Maximum {maximum}: the other alias cases exceed it")
    alias = alias_of(maximum)
    if alias <= maximum:
        raise NotApplicable(f"the broker's Topic Alias Maximum {maximum} allows Topic Alias {alias}")
    if qos == 2:
        context.require("qos2", "a QoS 2 PUBLISH with a Topic Alias above the maximum")
    packet_id = context.packet_id() if qos else None
    await _stimulus(connection, _aliased(context.topic("t"), alias, qos=qos, packet_id=packet_id))
    await connection.wait_close()


@_breach(
    "v5/topic-alias/maximum-plus-one",
    "A Topic Alias one above the broker's Topic Alias Maximum is a Protocol Error",
    stimulus="a QoS 0 PUBLISH with a Topic Name and Topic Alias = the CONNACK's Topic Alias Maximum + 1 (1 when it "
    "declared none) [MQTT-3.3.2-9, MQTT-3.2.2-17/-18]",
    expected="close the connection (DISCONNECT 0x94 Topic Alias invalid may come first); deliver nothing of it",
    provokes=(ALIAS_WITHIN,),
)
async def alias_maximum_plus_one(context: CaseContext) -> None:
    await _alias_beyond(context, _alias_above, 0)


@_breach(
    "v5/topic-alias/maximum-plus-one-qos2",
    "A QoS 2 PUBLISH with a Topic Alias one above the maximum is a Protocol Error",
    stimulus="a QoS 2 PUBLISH with a Topic Name and Topic Alias = the CONNACK's Topic Alias Maximum + 1 (1 when it "
    "declared none) [MQTT-3.3.2-9, MQTT-3.2.2-17/-18]",
    expected="close the connection (DISCONNECT 0x94 may come first); no PUBREC (not applicable when the broker "
    "declares no Topic Alias Maximum)",
    provokes=(ALIAS_WITHIN, ALIAS_WITHIN_DECLARED),
)
async def alias_maximum_plus_one_qos2(context: CaseContext) -> None:
    await _alias_beyond(context, _alias_above, 2, declared=True)


@_breach(
    "v5/topic-alias/largest",
    "Topic Alias 65535 above the broker's Topic Alias Maximum is a Protocol Error",
    stimulus="a QoS 0 PUBLISH with a Topic Name and Topic Alias 65535, the largest a Two Byte Integer holds, while "
    "the CONNACK declared a smaller Topic Alias Maximum [MQTT-3.3.2-9]",
    expected="close the connection (DISCONNECT 0x94 may come first); deliver nothing of it (not applicable when the "
    "broker declares no Topic Alias Maximum)",
    provokes=(ALIAS_WITHIN, ALIAS_WITHIN_DECLARED),
)
async def alias_largest(context: CaseContext) -> None:
    await _alias_beyond(context, lambda _maximum: LARGEST_ALIAS, 0, declared=True)


@_breach(
    "v5/topic-alias/without-maximum",
    "A Topic Alias where the broker allows none is a Protocol Error",
    stimulus="a QoS 1 PUBLISH with a Topic Name and Topic Alias 1 when the CONNACK declared no Topic Alias Maximum "
    "(or 0) [MQTT-3.2.2-18]",
    expected="close the connection (DISCONNECT 0x94 may come first); no PUBACK (not applicable when the broker "
    "declares a Topic Alias Maximum)",
    provokes=(ALIAS_WITHIN, NO_ALIAS_WITHOUT_MAXIMUM),
)
async def alias_without_maximum(context: CaseContext) -> None:
    await _alias_beyond(context, lambda _maximum: 1, 1, declared=False)


async def _alias_unmapped(context: CaseContext, qos: int, *, mapped_elsewhere: bool = False) -> None:
    if mapped_elsewhere:
        mapper = await context.connect("mapper")
        _needs_aliases(context)
        await context.publish(mapper, context.topic("mapped"), b"maps alias 1", properties=props.make(topic_alias=1))
    connection = await context.connect("unmapped")
    _needs_aliases(context)
    packet_id = context.packet_id() if qos else None
    await _stimulus(connection, _aliased("", 1, qos=qos, packet_id=packet_id))
    await connection.wait_close()
    if mapped_elsewhere:
        await context.disconnect(mapper)


def _needs_aliases(context: CaseContext) -> None:
    """An unmapped alias can be told from one above the maximum only where the broker allows aliases."""
    context.require("topic-aliases", "an alias within the broker's Topic Alias Maximum, never mapped")


@_breach(
    "v5/topic-alias/unmapped-qos0",
    "An alias-only PUBLISH whose Topic Alias was never mapped is a Protocol Error",
    stimulus="a QoS 0 PUBLISH with a zero-length Topic Name and Topic Alias 1 (within the broker's maximum), the "
    "first PUBLISH of the connection (3.3.4)",
    expected="close the connection (DISCONNECT 0x82 Protocol Error may come first); deliver nothing of it",
    statements=(CLOSE, ALIAS_MAPPED),
)
async def alias_unmapped_qos0(context: CaseContext) -> None:
    await _alias_unmapped(context, 0)


@_breach(
    "v5/topic-alias/unmapped-qos1",
    "A QoS 1 alias-only PUBLISH whose Topic Alias was never mapped is a Protocol Error",
    stimulus="a QoS 1 PUBLISH with a zero-length Topic Name and Topic Alias 1 (within the broker's maximum), the "
    "first PUBLISH of the connection (3.3.4)",
    expected="close the connection (DISCONNECT 0x82 may come first); no PUBACK",
    statements=(CLOSE, ALIAS_MAPPED),
)
async def alias_unmapped_qos1(context: CaseContext) -> None:
    await _alias_unmapped(context, 1)


@_breach(
    "v5/topic-alias/mapped-on-another-connection",
    "A Topic Alias mapped on one connection is unmapped on another",
    stimulus="connection 1 maps Topic Alias 1 to a topic (QoS 0 PUBLISH with both) and stays open; connection 2 "
    "then sends a QoS 0 PUBLISH with a zero-length Topic Name and Topic Alias 1 (mappings are per connection, "
    "3.3.2.3.4)",
    expected="close connection 2 (DISCONNECT 0x82 may come first): the broker carries no mapping of connection 1 "
    "over to it; deliver nothing of it",
    statements=(CLOSE, ALIAS_MAPPED, ALIAS_PER_CONNECTION),
)
async def alias_mapped_elsewhere(context: CaseContext) -> None:
    await _alias_unmapped(context, 0, mapped_elsewhere=True)


@v5_case(
    "v5/topic-alias/remapped",
    [DELIVERY_MATCHES, SERVER_NO_ALIAS],
    "A Topic Alias mapped again stands for its new topic",
    stimulus="a subscriber (no Topic Alias Maximum) to topic B; a publisher maps Topic Alias 1 to topic A, then to "
    "topic B (a PUBLISH with Topic Name and alias each), then sends a PUBLISH with alias 1 alone",
    expected="the publisher's connection stays open; the subscriber gets the second and third messages on topic B, "
    "with no Topic Alias",
)
async def alias_remapped(context: CaseContext) -> None:
    first, second = context.topic("a"), context.topic("b")
    subscriber = await context.subscriber("subscriber", (second, 0))
    publisher = await context.connect("publisher")
    context.require("topic-aliases", "mapping a Topic Alias twice")
    await context.publish(publisher, first, b"first", properties=props.make(topic_alias=1))
    await context.publish(publisher, second, b"second", properties=props.make(topic_alias=1))
    await context.publish(publisher, "", b"third", properties=props.make(topic_alias=1))
    await context.settle(subscriber)
    if publisher.closed_by_server:
        raise Inconclusive("the broker closed the publisher's connection on a valid remapping (no rule decides it)")
    if not any(isinstance(p, Publish) and p.payload == b"third" for p in subscriber.received):
        raise Inconclusive(
            "the subscriber got no message for the alias-only PUBLISH; a 5.0 delivery that never comes is not "
            "judged (the routing replay follows 3.1.1)"
        )
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


# Topic Alias, the broker's (3.1.2.11.5) -------------------------------------------------------------------------


async def _alias_traffic(context: CaseContext, subscriber_properties: Properties) -> ProbeConnection:
    """A subscriber to every topic of the case, declaring ``subscriber_properties``; a publisher sends
    ``ALIAS_ROUNDS`` messages to each of ``ALIAS_TOPICS`` topics, with Topic Aliases of its own where the broker
    allows them (a broker that passes a publisher's alias on, or picks its own, shows it)."""
    subscriber = await context.connect("subscriber", properties=subscriber_properties)
    await context.subscribe_granted(subscriber, context.topic("#"), 0)
    publisher = await context.connect("publisher")
    maximum = _broker_alias_maximum(context)
    for round_ in range(ALIAS_ROUNDS):
        for index in range(ALIAS_TOPICS):
            topic, alias = context.topic(f"t{index}"), index + 1
            payload = f"r{round_}t{index}".encode()
            if alias > maximum:
                await context.publish(publisher, topic, payload)
            else:  # mapped in the first round, used alone after it
                used = props.make(topic_alias=alias)
                await context.publish(publisher, topic if round_ == 0 else "", payload, properties=used)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    return subscriber


@v5_case(
    "v5/topic-alias/to-client-without-maximum",
    [SERVER_NO_ALIAS],
    "No Topic Alias toward a client that declared no Topic Alias Maximum",
    stimulus=f"a subscriber whose CONNECT has no Topic Alias Maximum subscribes to the case's topics; a publisher "
    f"sends {ALIAS_ROUNDS} messages to each of {ALIAS_TOPICS} topics, with its own Topic Aliases where the broker "
    "allows them",
    expected="every delivery has its Topic Name and no Topic Alias",
)
async def alias_to_client_without_maximum(context: CaseContext) -> None:
    await context.disconnect(await _alias_traffic(context, ()))


@v5_case(
    "v5/topic-alias/to-client-maximum-0",
    [SERVER_NO_ALIAS],
    "No Topic Alias toward a client that declared Topic Alias Maximum 0",
    stimulus=f"a subscriber whose CONNECT declares Topic Alias Maximum 0 subscribes to the case's topics; a "
    f"publisher sends {ALIAS_ROUNDS} messages to each of {ALIAS_TOPICS} topics, with its own Topic Aliases where "
    "the broker allows them",
    expected="every delivery has its Topic Name and no Topic Alias",
)
async def alias_to_client_maximum_0(context: CaseContext) -> None:
    await context.disconnect(await _alias_traffic(context, props.make(topic_alias_maximum=0)))


@v5_case(
    "v5/topic-alias/to-client-maximum-2",
    SERVER_ALIAS_WITHIN,
    "Topic Aliases toward a client stay within its Topic Alias Maximum",
    stimulus=f"a subscriber whose CONNECT declares Topic Alias Maximum 2 subscribes to the case's topics; a "
    f"publisher sends {ALIAS_ROUNDS} messages to each of {ALIAS_TOPICS} topics, with its own Topic Aliases where "
    "the broker allows them",
    expected="no delivery carries a Topic Alias above 2 (not applicable when the broker uses no alias toward the "
    "client: aliases are optional)",
)
async def alias_to_client_maximum_2(context: CaseContext) -> None:
    subscriber = await _alias_traffic(context, props.make(topic_alias_maximum=2))
    aliased = [
        p for p in subscriber.received if isinstance(p, Publish) and props.first(p.properties, props.TOPIC_ALIAS)
    ]
    await context.disconnect(subscriber)
    if not aliased:
        raise NotApplicable("the broker used no Topic Alias toward the client (it need not): no alias to keep within 2")


# Receive Maximum, the client's (3.1.2.11.3, 4.9) ------------------------------------------------------------------


async def _acknowledge_held(connection: ProbeConnection, done: set[int]) -> None:
    """Acknowledges every delivery not acknowledged yet (PUBACK; PUBREC, then PUBCOMP for its PUBREL)."""
    released: list[int] = []
    for packet in connection.received:
        if not isinstance(packet, Publish) or packet.packet_id is None or packet.packet_id in done:
            continue
        done.add(packet.packet_id)
        if packet.qos == 1:
            await connection.send(Puback(packet_id=packet.packet_id, reason_code=SUCCESS))
        elif packet.qos == 2:
            await connection.send(Pubrec(packet_id=packet.packet_id, reason_code=SUCCESS))
            released.append(packet.packet_id)
    for packet_id in released:
        pubrel = await connection.wait_for(_answer(Pubrel, packet_id))
        if isinstance(pubrel, Pubrel):
            await connection.send(Pubcomp(packet_id=packet_id, reason_code=SUCCESS))


async def _window(context: CaseContext, receive_maximum: int, qos: int) -> None:
    subscriber = await context.connect(
        "subscriber", auto_ack=False, properties=props.make(receive_maximum=receive_maximum)
    )
    context.require("qos2" if qos == 2 else "qos1", f"QoS {qos} deliveries")
    topic = context.topic("t")
    await context.subscribe_granted(subscriber, topic, qos)
    publisher = await context.connect("publisher")
    await asyncio.gather(
        *(context.publish(publisher, topic, f"m{i}".encode(), qos=qos) for i in range(WINDOW_MESSAGES))
    )
    # Held a while unacknowledged, so a broker that sends past the window shows it; then one window at a time.
    hold = context.timeout / 2
    done: set[int] = set()
    for _ in range(WINDOW_MESSAGES + 1):
        await subscriber.observe(hold)
        before = len(done)
        await _acknowledge_held(subscriber, done)
        if len(done) >= WINDOW_MESSAGES or (len(done) == before and before) or subscriber.closed:
            break
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


def _window_case(receive_maximum: int, qos: int) -> None:
    @v5_case(
        f"v5/receive-maximum/to-client-{receive_maximum}-qos{qos}",
        [SERVER_RECEIVE_MAXIMUM],
        f"The broker keeps to a client's Receive Maximum {receive_maximum} (QoS {qos})",
        stimulus=f"a subscriber whose CONNECT declares Receive Maximum {receive_maximum} subscribes at QoS {qos}; a "
        f"publisher sends {WINDOW_MESSAGES} QoS {qos} messages at once; the subscriber withholds its "
        f"{'PUBACK' if qos == 1 else 'PUBREC'} for half the timeout, then acknowledges what it holds, and again",
        expected=f"never more than {receive_maximum} QoS 1/2 PUBLISHes unacknowledged toward the subscriber (until "
        f"its {'PUBACK' if qos == 1 else 'PUBCOMP'}); the rest follow as the window opens",
    )
    async def script(context: CaseContext) -> None:
        await _window(context, receive_maximum, qos)


for _maximum in (1, 2):
    for _qos in (1, 2):
        _window_case(_maximum, _qos)


# Receive Maximum, the broker's (3.2.2.3.3, 3.3.4) -----------------------------------------------------------------


def _broker_receive_maximum(context: CaseContext) -> int:
    assert context.capabilities is not None
    maximum = context.capabilities.receive_maximum
    if maximum > MAX_RECEIVE_MAXIMUM:
        by = context.capabilities.source("receive_maximum")
        raise NotApplicable(
            f"the broker's Receive Maximum is {maximum} ({by}): more than {MAX_RECEIVE_MAXIMUM} PUBLISHes to overrun "
            "it; a --profile may declare a smaller receive_maximum"
        )
    return maximum


def _publishes(context: CaseContext, count: int, qos: int) -> list[Packet]:
    topic = context.topic("t")
    return [
        Publish(topic=topic, payload=f"m{i}".encode(), qos=qos, packet_id=context.packet_id()) for i in range(count)
    ]


@_breach(
    "v5/receive-maximum/from-client-qos2-burst",
    "QoS 2 PUBLISHes beyond the broker's Receive Maximum are a Protocol Error",
    stimulus="Receive Maximum (from the CONNACK or the profile) + 1 QoS 2 PUBLISHes in one write, no PUBREL ever "
    "(so none can have had its PUBCOMP) [MQTT-3.3.4-7]",
    expected="close the connection (DISCONNECT 0x93 Receive Maximum exceeded may come first, 3.3.4); no PUBREC that "
    "accepts the PUBLISH beyond the window (a refusal, 0x80 or above, accepts nothing)",
    provokes=(WITHIN_RECEIVE_MAXIMUM,),
)
async def receive_maximum_qos2_burst(context: CaseContext) -> None:
    connection = await context.connect()
    context.require("qos2", "QoS 2 flows held open")
    maximum = _broker_receive_maximum(context)
    await _stimulus(connection, *_publishes(context, maximum + 1, 2))
    await connection.wait_close()


@_breach(
    "v5/receive-maximum/from-client-qos1-after-held-window",
    "A QoS 1 PUBLISH while the broker's Receive Maximum of QoS 2 flows is held open is a Protocol Error",
    stimulus="Receive Maximum QoS 2 PUBLISHes in one write; once every PUBREC came (no PUBREL sent, so the broker "
    "has sent no PUBCOMP), one QoS 1 PUBLISH [MQTT-3.3.4-7]",
    expected="close the connection (DISCONNECT 0x93 may come first); no PUBACK that accepts it (a refusal, 0x80 or "
    "above, accepts nothing)",
    provokes=(WITHIN_RECEIVE_MAXIMUM,),
)
async def receive_maximum_qos1_after_window(context: CaseContext) -> None:
    connection = await context.connect()
    context.require("qos2", "QoS 2 flows held open")
    maximum = _broker_receive_maximum(context)
    held = _publishes(context, maximum, 2)
    since = len(connection.received)
    await _stimulus(connection, *held)
    wanted = {p.packet_id for p in held if isinstance(p, Publish)}
    for packet_id in sorted(i for i in wanted if i is not None):
        pubrec = await connection.wait_for(_answer(Pubrec, packet_id), since=since)
        if not isinstance(pubrec, Pubrec) or (pubrec.reason_code or 0) >= 0x80:
            raise Inconclusive(
                f"setup: the window of {maximum} QoS 2 PUBLISHes was not accepted: {connection.missing('PUBREC')}"
            )
    await _stimulus(connection, *_publishes(context, 1, 1))
    await connection.wait_close()


# Maximum Packet Size, the client's (3.1.2.11.4) -------------------------------------------------------------------


def _sized(topic: str, size: int, qos: int) -> bytes | None:
    """A payload that makes the PUBLISH of ``topic`` at ``qos`` (no properties) ``size`` bytes long, fixed header
    included; None when even an empty payload is longer."""
    shape = padded(Publish(topic=topic, qos=qos, packet_id=1 if qos else None), size, V5)
    return None if shape is None else b"p" * shape[1]


def _short_topic(context: CaseContext) -> str:
    """A topic of this case alone, short enough for a 64-byte PUBLISH: ``mqttaudit/<run>/<8 hex digits>``."""
    return "/".join(("mqttaudit", context.run_id, hashlib.blake2b(context.case.id.encode(), digest_size=4).hexdigest()))


async def _packet_size(context: CaseContext, maximum: int, qos: int) -> None:
    subscriber = await context.connect("subscriber", properties=props.make(maximum_packet_size=maximum))
    if qos:
        context.require("qos1", "QoS 1 deliveries")
    topic = _short_topic(context)
    await context.subscribe_granted(subscriber, topic, qos)
    publisher = await context.connect("publisher")
    over, exact = _sized(topic, maximum + 1, qos), _sized(topic, maximum, qos)
    if over is None or exact is None:
        raise Inconclusive(f"setup: the topic {topic!r} alone makes a PUBLISH longer than {maximum} bytes")
    await context.publish(publisher, topic, over, qos=qos)
    await context.publish(publisher, topic, exact, qos=qos)
    await context.settle(subscriber)
    await context.disconnect(publisher)
    await context.disconnect(subscriber)


def _packet_size_case(maximum: int, qos: int) -> None:
    @v5_case(
        f"v5/maximum-packet-size/to-client-{maximum}-qos{qos}",
        [SERVER_PACKET_SIZE, DISCARD_TOO_LARGE],
        f"Nothing larger than a client's Maximum Packet Size {maximum} reaches it (QoS {qos})",
        stimulus=f"a subscriber whose CONNECT declares Maximum Packet Size {maximum} subscribes at QoS {qos}; a "
        f"publisher sends a QoS {qos} message whose forwarded PUBLISH (no properties) is {maximum + 1} bytes, "
        f"then one of exactly {maximum} bytes (fixed header included)",
        expected=f"the {maximum + 1}-byte PUBLISH is discarded, never sent, and the server carries on [MQTT-3.1.2-25]: "
        f"the {maximum}-byte one is delivered on the same connection; no packet to the subscriber exceeds the limit",
    )
    async def script(context: CaseContext) -> None:
        await _packet_size(context, maximum, qos)


for _maximum, _qos in ((64, 0), (128, 0), (128, 1)):
    _packet_size_case(_maximum, _qos)


# Maximum Packet Size, the broker's (3.2.2.3.6) --------------------------------------------------------------------


async def _over_broker_maximum(context: CaseContext, qos: int) -> None:
    connection = await context.connect()
    assert context.capabilities is not None
    if qos:
        context.require("qos1", "a QoS 1 PUBLISH")
    packet_id = context.packet_id() if qos else None
    await _send_over_maximum(context, connection, Publish(topic=_short_topic(context), qos=qos, packet_id=packet_id))
    await connection.wait_close()


async def _send_over_maximum(context: CaseContext, connection: ProbeConnection, packet: Publish) -> None:
    """Sends ``packet`` one byte over the broker's Maximum Packet Size, whatever that is: streamed when large, so
    the prober never holds it whole (:meth:`ProbeConnection.send_publish`). :class:`NotApplicable` when the
    broker declares none, or one no PUBLISH can exceed by exactly one byte."""
    assert context.capabilities is not None
    maximum = context.capabilities.maximum_packet_size
    if maximum is None:
        raise NotApplicable("the broker declares no Maximum Packet Size (nor does a --profile): nothing to exceed")
    if maximum >= LARGEST_PACKET:
        raise NotApplicable(
            f"the broker's Maximum Packet Size {maximum:,} is at least the largest packet MQTT can frame "
            f"({LARGEST_PACKET:,} bytes: a Remaining Length of {MAX_REMAINING_LENGTH:,} after a five-byte fixed "
            "header): no packet can exceed it"
        )
    if padded(packet, maximum + 1, V5) is None:
        raise NotApplicable(
            f"the broker's Maximum Packet Size {maximum} is smaller than any PUBLISH to {packet.topic!r}: no "
            f"PUBLISH of {maximum + 1} bytes can be built"
        )
    await connection.send_publish(packet, maximum + 1)


@_breach(
    "v5/maximum-packet-size/from-client-qos0",
    "A PUBLISH one byte over the broker's Maximum Packet Size is a Protocol Error",
    stimulus="a QoS 0 PUBLISH of the broker's Maximum Packet Size + 1 bytes, fixed header included [MQTT-3.2.2-15]",
    expected="close the connection (DISCONNECT 0x95 Packet too large may come first); deliver nothing of it",
    provokes=(WITHIN_PACKET_SIZE,),
)
async def over_broker_maximum_qos0(context: CaseContext) -> None:
    await _over_broker_maximum(context, 0)


@_breach(
    "v5/maximum-packet-size/from-client-qos1",
    "A QoS 1 PUBLISH one byte over the broker's Maximum Packet Size is a Protocol Error",
    stimulus="a QoS 1 PUBLISH of the broker's Maximum Packet Size + 1 bytes, fixed header included [MQTT-3.2.2-15]",
    expected="close the connection (DISCONNECT 0x95 may come first); no PUBACK",
    provokes=(WITHIN_PACKET_SIZE,),
)
async def over_broker_maximum_qos1(context: CaseContext) -> None:
    await _over_broker_maximum(context, 1)
