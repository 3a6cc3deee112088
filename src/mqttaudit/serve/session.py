"""What the reference broker keeps per session: subscriptions, messages on their way to the client (queued and in
flight, with their Packet Identifiers), and the QoS 2 messages received and not yet released.

Sans-I/O: nothing here reads a clock or touches a socket; times are passed in, in seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from ..codec import Property, Publish, Subscription, Will
from ..codec.properties import MESSAGE_EXPIRY_INTERVAL, SUBSCRIPTION_IDENTIFIER

#: Packet Identifiers are 1..65535 [MQTT-2.3.1-1].
LARGEST_PACKET_ID: Final = 0xFFFF
#: A session that never expires (3.1.1 CleanSession 0; 5.0 Session Expiry Interval 0xFFFFFFFF).
NEVER: Final = math.inf


@dataclass(frozen=True, slots=True)
class Message:
    """An Application Message the broker accepted: from a PUBLISH or a Will."""

    topic: str
    payload: bytes
    qos: int
    retain: bool
    #: The client that published it (No Local compares with it).
    publisher: str
    #: When the broker took it, on the broker's clock.
    received: float
    #: The properties forwarded with it (5.0): all but Topic Alias, Subscription Identifier and Message Expiry.
    properties: tuple[Property, ...] = ()
    #: Message Expiry Interval in seconds, None when it never expires.
    expiry: int | None = None

    def remaining(self, now: float) -> int | None:
        """Seconds of life left (rounded up), None when it never expires; 0 or less: expired."""
        if self.expiry is None:
            return None
        return math.ceil(self.expiry - (now - self.received))

    def expired(self, now: float) -> bool:
        left = self.remaining(now)
        return left is not None and left <= 0


@dataclass(slots=True)
class Outgoing:
    """One copy of a message owed to a session, at the QoS and with the flags its subscriptions give it."""

    message: Message
    qos: int
    retain: bool
    subscription_ids: tuple[int, ...] = ()
    packet_id: int | None = None
    #: Sent at least once (a re-send carries DUP [MQTT-3.3.1-1]).
    sent: bool = False
    #: QoS 2: PUBREC received, PUBREL owed until PUBCOMP.
    released: bool = False


@dataclass(slots=True)
class Granted:
    """A subscription the session holds: the filter as subscribed, its options and its Subscription Identifier."""

    subscription: Subscription
    identifier: int | None = None


@dataclass(slots=True)
class Session:
    client_id: str
    #: The version the session was made with (4 or 5); its subscriptions live in that version's trie.
    level: int
    expiry: float = 0.0
    subscriptions: dict[str, Granted] = field(default_factory=dict)
    #: Messages waiting for a connection or for room in the client's Receive Maximum, oldest first.
    queue: deque[Outgoing] = field(default_factory=deque)
    #: Packet Identifier -> message in flight to the client, in the order they were first sent.
    inflight: dict[int, Outgoing] = field(default_factory=dict)
    #: QoS 2 Packet Identifiers received from the client and not released yet [MQTT-4.3.3-2].
    unreleased: set[int] = field(default_factory=set)
    #: Messages dropped because the queue was full (bounded: :attr:`Limits.queued_messages`).
    dropped: int = 0
    #: When the session ends while no connection holds it (None: a connection holds it).
    ends_at: float | None = None
    will: Will | None = None
    will_at: float | None = None
    _next_id: int = 1

    def packet_id(self) -> int | None:
        """An identifier not in use by a message in flight [MQTT-2.3.1-2]; None when all 65,535 are."""
        if len(self.inflight) >= LARGEST_PACKET_ID:
            return None
        candidate = self._next_id
        while candidate in self.inflight:
            candidate = candidate % LARGEST_PACKET_ID + 1
        self._next_id = candidate % LARGEST_PACKET_ID + 1
        return candidate

    def enqueue(self, outgoing: Outgoing, bound: int) -> bool:
        """Queues a copy; False (and counted) when the queue already holds ``bound`` messages."""
        if len(self.queue) >= bound:
            self.dropped += 1
            return False
        self.queue.append(outgoing)
        return True


def publish_of(outgoing: Outgoing, now: float, v5: bool, extra: tuple[Property, ...] = ()) -> Publish:
    """The PUBLISH that carries ``outgoing``: DUP on a re-send of QoS 1 or 2 [MQTT-3.3.1-1], never on QoS 0
    [MQTT-3.3.1-2]; in 5.0 the forwarded properties, the remaining Message Expiry Interval [MQTT-3.3.2-6] and the
    Subscription Identifiers of the matching subscriptions [MQTT-3.3.4-3]; then ``extra``."""
    message = outgoing.message
    properties: tuple[Property, ...] = ()
    if v5:
        more: list[Property] = []
        left = message.remaining(now)
        if left is not None:
            more.append(Property(MESSAGE_EXPIRY_INTERVAL, max(left, 1)))
        more += [Property(SUBSCRIPTION_IDENTIFIER, identifier) for identifier in outgoing.subscription_ids]
        properties = (*message.properties, *more, *extra)
    return Publish(
        topic=message.topic,
        payload=message.payload,
        qos=outgoing.qos,
        retain=outgoing.retain,
        dup=outgoing.sent and outgoing.qos > 0,
        packet_id=outgoing.packet_id if outgoing.qos > 0 else None,
        properties=properties,
    )
