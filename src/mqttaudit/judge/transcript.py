"""What one conversation did, as the broker model needs it: the session it opened, the subscriptions it made,
the messages the server accepted from it and the deliveries it received, each with its times.

The records pickle by position (``__reduce__``): a slotted dataclass's default state costs a ``fields()`` walk
per object, which dominated the hand-over of transcripts from the judging stage to the routing replay."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqttaudit.codec import Connack, Connect, Direction, Disconnect, Packet, Puback, Publish, Pubrec, Subscribe
from mqttaudit.codec.properties import SESSION_EXPIRY_INTERVAL, SUBSCRIPTION_IDENTIFIER, first

from .events import Closed


@dataclass(slots=True)
class Subscribed:
    """One Topic Filter of a SUBSCRIBE; ``granted`` and ``acked`` are filled by its SUBACK (None: refused or
    never answered). The MQTT 5.0 Subscription Options and Subscription Identifier are 3.1.1's defaults (off, 0,
    none) on a 3.1.1 connection."""

    event: int
    topic_filter: str
    requested: int
    sent: float
    granted: int | None = None
    acked: float | None = None
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    identifier: int | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        event: int,
        topic_filter: str,
        requested: int,
        sent: float,
        granted: int | None = None,
        acked: float | None = None,
        no_local: bool = False,
        retain_as_published: bool = False,
        retain_handling: int = 0,
        identifier: int | None = None,
    ) -> None:
        self.event = event
        self.topic_filter = topic_filter
        self.requested = requested
        self.sent = sent
        self.granted = granted
        self.acked = acked
        self.no_local = no_local
        self.retain_as_published = retain_as_published
        self.retain_handling = retain_handling
        self.identifier = identifier

    def __reduce__(self) -> tuple[type[Subscribed], tuple[object, ...]]:
        return Subscribed, (
            self.event,
            self.topic_filter,
            self.requested,
            self.sent,
            self.granted,
            self.acked,
            self.no_local,
            self.retain_as_published,
            self.retain_handling,
            self.identifier,
        )


@dataclass(slots=True)
class Unsubscribed:
    event: int
    topic_filter: str
    sent: float
    acked: float | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, event: int, topic_filter: str, sent: float, acked: float | None = None
    ) -> None:
        self.event = event
        self.topic_filter = topic_filter
        self.sent = sent
        self.acked = acked

    def __reduce__(self) -> tuple[type[Unsubscribed], tuple[object, ...]]:
        return Unsubscribed, (self.event, self.topic_filter, self.sent, self.acked)


@dataclass(slots=True)
class Published:
    """A PUBLISH from the client. ``accepted`` is the time by which the server surely had processed it (its
    PUBACK or PUBREC, or the answer to a later request); ``certain`` tells whether it surely took it at all."""

    event: int
    message: Publish
    sent: float
    accepted: float | None = None
    certain: bool = False

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, event: int, message: Publish, sent: float, accepted: float | None = None, certain: bool = False
    ) -> None:
        self.event = event
        self.message = message
        self.sent = sent
        self.accepted = accepted
        self.certain = certain

    def __reduce__(self) -> tuple[type[Published], tuple[object, ...]]:
        return Published, (self.event, self.message, self.sent, self.accepted, self.certain)


@dataclass(frozen=True, slots=True)
class Delivered:
    """A PUBLISH from the server."""

    event: int
    time: float
    message: Publish

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, event: int, time: float, message: Publish
    ) -> None:
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "message", message)

    def __reduce__(self) -> tuple[type[Delivered], tuple[object, ...]]:
        return Delivered, (self.event, self.time, self.message)


@dataclass
class Transcript:
    connect: Connect | None = None
    connect_time: float = 0.0
    connack: Connack | None = None
    connack_time: float = 0.0
    connack_event: int = -1
    subscribed: list[Subscribed] = field(default_factory=list)
    unsubscribed: list[Unsubscribed] = field(default_factory=list)
    published: list[Published] = field(default_factory=list)
    delivered: list[Delivered] = field(default_factory=list)
    #: The client sent DISCONNECT (so the Will is discarded; in MQTT 5.0 only with Reason Code 0x00).
    disconnected: bool = False
    #: MQTT 5.0: the Reason Code of the client's DISCONNECT (None: none seen) and the Session Expiry Interval it
    #: set (None: left as CONNECT set it).
    disconnect_reason: int | None = None
    disconnect_expiry: int | None = None
    #: First event of a client protocol violation, if any (the server must close; nothing after it counts).
    client_offence: int | None = None
    #: The statement a server breaks by acting on that violation or on what followed it (delivering its message).
    client_offence_rule: str = ""
    #: Time and event of the last observation, and the close if one was seen.
    end: float = 0.0
    end_event: int = -1
    closed: Closed | None = None
    #: When bytes of each side went unobserved (gaps in a capture): deliveries may be among the server's.
    lost: list[tuple[Direction, float]] = field(default_factory=list)
    #: How many publications :meth:`processed_by` has settled.
    settled_upto: int = 0
    #: The client's PUBACK (QoS 1) or PUBREC (QoS 2) to each delivery it answered: delivery event -> (Reason Code,
    #: time). A QoS 1 or 2 delivery absent here was never answered on this connection.
    answers: dict[int, tuple[int, float]] = field(default_factory=dict)

    @property
    def speaks_5_0(self) -> bool:
        """The connection opened with an MQTT 5.0 CONNECT (Protocol Level 5)."""
        return self.connect is not None and self.connect.protocol_level == 5

    @property
    def accepted(self) -> bool:
        return self.connect is not None and self.connack is not None and self.connack.return_code == 0

    def processed_by(self, answered: int, time: float) -> None:
        """The server answered client event ``answered`` at ``time``: it processes in order, so it had
        processed every QoS 0 PUBLISH sent before that event by then. (Publications are in event order: those
        before an earlier answer were settled then, so each is visited once.)"""
        published = self.published
        index = self.settled_upto
        while index < len(published) and published[index].event < answered:
            publication = published[index]
            if publication.accepted is None and publication.message.qos == 0:
                publication.accepted = time
            index += 1
        self.settled_upto = index

    def note(self, event: int, sender: Direction, packet: Packet | None, topic: str | None, time: float = 0.0) -> None:
        """What the broker model needs of a packet beyond what the other checks recorded (call it last for each
        packet): the Topic Name an aliased PUBLISH stands for (``topic``, from the connection's Topic Alias
        mappings; None when unknown), the Subscription Options of a SUBSCRIBE, and what a 5.0 DISCONNECT says."""
        if isinstance(packet, Publish):
            if not packet.topic and topic:
                self._resolve(event, sender, named(packet, topic))
        elif isinstance(packet, Puback | Pubrec) and sender is Direction.FROM_CLIENT:
            self._answered(packet, 1 if isinstance(packet, Puback) else 2, time)
        elif isinstance(packet, Subscribe) and sender is Direction.FROM_CLIENT:
            identifier = first(packet.properties, SUBSCRIPTION_IDENTIFIER)
            records = [record for record in self.subscribed[-len(packet.subscriptions) :] if record.event == event]
            for record, option in zip(records, packet.subscriptions, strict=False):
                record.no_local, record.retain_as_published = option.no_local, option.retain_as_published
                record.retain_handling = option.retain_handling
                record.identifier = identifier if isinstance(identifier, int) else None
        elif isinstance(packet, Disconnect) and sender is Direction.FROM_CLIENT and self.speaks_5_0:
            self.disconnect_reason = packet.reason_code or 0
            expiry = first(packet.properties, SESSION_EXPIRY_INTERVAL)
            if isinstance(expiry, int):
                self.disconnect_expiry = expiry

    def _answered(self, packet: Puback | Pubrec, qos: int, time: float) -> None:
        """Notes the client's answer to its latest unanswered delivery of ``qos`` with the packet's identifier."""
        for delivered in reversed(self.delivered):
            message = delivered.message
            if message.qos == qos and message.packet_id == packet.packet_id:
                if delivered.event not in self.answers:
                    self.answers[delivered.event] = (packet.reason_code or 0, time)
                return

    def _resolve(self, event: int, sender: Direction, resolved: Publish) -> None:
        """The record of PUBLISH ``event`` names the topic its alias stands for."""
        if sender is Direction.FROM_CLIENT:
            if self.published and self.published[-1].event == event:
                self.published[-1].message = resolved
        elif self.delivered and self.delivered[-1].event == event:
            last = self.delivered[-1]
            self.delivered[-1] = Delivered(last.event, last.time, resolved)


def named(packet: Publish, topic: str) -> Publish:
    """``packet`` with the Topic Name ``topic`` (the one its Topic Alias stands for)."""
    return Publish(
        topic=topic,
        payload=packet.payload,
        qos=packet.qos,
        retain=packet.retain,
        dup=packet.dup,
        packet_id=packet.packet_id,
        properties=packet.properties,
    )
