"""MQTT 5.0: a message too large for a subscriber's Maximum Packet Size is discarded and the server carries on
(3.1.2.11.4: "Where a Packet is too large to send, the Server MUST discard it without sending it and then behave as
if it had completed sending that Application Message" [MQTT-3.1.2-25]).

Pure, across connections: a publication that matches a subscription of a 5.0 subscriber whose CONNECT declared a
Maximum Packet Size, and whose forwarded PUBLISH could not be within it however the server wrote it (Topic Name,
or none where the subscriber allows Topic Aliases; Packet Identifier at the QoS it would go at; no property; the
payload), is one the server must discard. It carried on when a later message of the same publisher reaches the
subscriber on the same connection; it did not when it closed that connection (or sent DISCONNECT) first while the
subscriber gave no cause. A copy of it that was sent anyway is :mod:`.limits`' finding (the packet is over the
maximum, [MQTT-3.1.2-24] and this rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from mqttaudit.codec import Direction, Publish
from mqttaudit.codec.properties import MAXIMUM_PACKET_SIZE, TOPIC_ALIAS_MAXIMUM, first
from mqttaudit.codec.remaining_length import encoded_size
from mqttaudit.spec.ids import R5
from mqttaudit.topics import matches

from . import reasons
from .transcript import Published, Subscribed, Transcript
from .verdict import Judgement, Ledger, combine

#: [MQTT-3.1.2-25] The Server discards a packet too large for the Client and carries on as if it had been sent.
DISCARD_TOO_LARGE: Final[str] = R5.MQTT_3_1_2_25
V5: Final = "5.0"


def smallest_forwarded(message: Publish, qos: int, *, aliases: bool) -> int:
    """The fewest bytes a PUBLISH forwarding ``message`` at ``qos`` can take, fixed header included: its Topic Name
    (none when the receiver allows Topic Aliases), its Packet Identifier, an empty Property Length, its payload."""
    topic = 0 if aliases else len(message.topic.encode("utf-8"))
    body = 2 + topic + (2 if qos else 0) + 1 + len(message.payload)
    return 1 + encoded_size(body) + body


def _granted(subscriber: Transcript, publication: Published) -> Subscribed | None:
    """The subscription of ``subscriber``, acknowledged before the message was published, that it matches (the
    highest granted QoS first)."""
    topic = publication.message.topic
    live = [
        s
        for s in subscriber.subscribed
        if s.granted is not None and s.granted < 0x80 and s.acked is not None and s.acked < publication.sent
    ]
    live = [s for s in live if not s.topic_filter.startswith("$share/") and matches(s.topic_filter, topic)]
    return max(live, key=lambda s: s.granted or 0, default=None)


def _same(delivered: Publish, message: Publish) -> bool:
    return (delivered.topic, delivered.payload) == (message.topic, message.payload)


def judge_discarded(transcripts: Mapping[str, Transcript]) -> Judgement:
    """[MQTT-3.1.2-25] on every 5.0 subscriber that declared a Maximum Packet Size (see the module's text)."""
    ledgers: list[Ledger] = []
    for name, subscriber in transcripts.items():
        limit = _limit(subscriber)
        if limit is None:
            continue
        ledger = Ledger(conversation=name, version=V5)
        for publisher_name, publisher in transcripts.items():
            if publisher_name == name or publisher.lost:
                continue
            _judge_publisher(ledger, subscriber, publisher, *limit)
        ledgers.append(ledger)
    return combine([ledger.judgement() for ledger in ledgers])


def too_large_for(subscribers: Mapping[str, Transcript], name: str, publisher: Transcript) -> set[str]:
    """The subscribers (by name; their CONNECT, CONNACK and subscriptions are all it reads, so skeletons do) to which
    the whole transcript ``publisher`` (connection ``name``) published a message this rule judges: the only pairs
    of connections :func:`judge_discarded` says anything about, so that it may be given those connections alone."""
    if publisher.lost:
        return set()
    found = set()
    for subscriber_name, subscriber in subscribers.items():
        limit = _limit(subscriber)
        if subscriber_name != name and limit is not None and next(_too_large(subscriber, publisher, *limit), None):
            found.add(subscriber_name)
    return found


def _limit(subscriber: Transcript) -> tuple[int, bool] | None:
    """The subscriber's Maximum Packet Size and whether it allows Topic Aliases, if this rule judges it."""
    maximum = declared_maximum(subscriber)
    if maximum is None or subscriber.connect is None:
        return None
    return maximum, (first(subscriber.connect.properties, TOPIC_ALIAS_MAXIMUM) or 0) != 0


def declared_maximum(subscriber: Transcript) -> int | None:
    """The Maximum Packet Size of a 5.0 subscriber this rule judges (accepted, no bytes lost), None for any other
    connection: a server whose connections declare none has nothing to judge here."""
    connect = subscriber.connect
    if connect is None or not subscriber.speaks_5_0 or not subscriber.accepted or subscriber.lost:
        return None
    maximum = first(connect.properties, MAXIMUM_PACKET_SIZE)
    return maximum if isinstance(maximum, int) else None


def _too_large(
    subscriber: Transcript, publisher: Transcript, maximum: int, aliases: bool
) -> Iterator[tuple[int, Published, list[Published], int]]:
    """Each message of ``publisher`` too large for ``subscriber`` to get: its index among the publisher's messages
    the subscriber could get, the message, those messages, and the fewest bytes its PUBLISH could take."""
    published = [p for p in publisher.published if p.message.topic and p.sent > subscriber.connack_time]
    for index, publication in enumerate(published):
        message = publication.message
        subscription = _granted(subscriber, publication)
        if subscription is None or message.topic.startswith("$"):
            continue
        size = smallest_forwarded(message, min(message.qos, subscription.granted or 0), aliases=aliases)
        if size > maximum:
            yield index, publication, published, size


def _judge_publisher(
    ledger: Ledger, subscriber: Transcript, publisher: Transcript, maximum: int, aliases: bool
) -> None:
    for index, publication, published, size in _too_large(subscriber, publisher, maximum, aliases):
        message = publication.message
        if any(_same(d.message, message) for d in subscriber.delivered):
            continue  # sent after all: the packet over the maximum is limits' finding
        later = {(p.message.topic, p.message.payload) for p in published[index + 1 :]}
        carried_on = next(
            (
                d
                for d in subscriber.delivered
                if d.time > publication.sent and (d.message.topic, d.message.payload) in later
            ),
            None,
        )
        closed = subscriber.closed
        cut_short = (
            closed is not None
            and closed.by is Direction.FROM_SERVER
            and closed.time > publication.sent
            and (carried_on is None or closed.time < carried_on.time)
        )
        what = f"the message published at event {publication.event} to {message.topic!r}"
        if carried_on is not None and not cut_short:
            ledger.held(DISCARD_TOO_LARGE)
        elif cut_short and subscriber.client_offence is None and not subscriber.disconnected:
            assert closed is not None
            ledger.fail(
                DISCARD_TOO_LARGE,
                Direction.FROM_SERVER,
                closed.time,
                subscriber.end_event,
                f"{what} would make a PUBLISH of at least {size} bytes, over the subscriber's Maximum Packet Size "
                f"{maximum}; the server closed the subscriber's connection instead of carrying on",
                "the server discards a packet too large for the client and carries on as if it had sent it",
            )
        else:
            ledger.undecided(
                DISCARD_TOO_LARGE,
                reasons.reason(
                    reasons.TOO_SHORT,
                    f"{what} was too large for the subscriber; no later message of its publisher reached it",
                ),
                side=Direction.FROM_SERVER,
                event=subscriber.end_event,
                time=subscriber.end,
            )
