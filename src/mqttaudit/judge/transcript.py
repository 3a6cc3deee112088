"""What one conversation did, as the broker model needs it: the session it opened, the subscriptions it made,
the messages the server accepted from it and the deliveries it received, each with its times.

The records pickle by position (``__reduce__``): a slotted dataclass's default state costs a ``fields()`` walk
per object, which dominated the hand-over of transcripts from the judging stage to the routing replay."""

from __future__ import annotations

from dataclasses import dataclass, field

from mqttaudit.codec import Connack, Connect, Direction, Publish

from .events import Closed


@dataclass(slots=True)
class Subscribed:
    """One Topic Filter of a SUBSCRIBE; ``granted`` and ``acked`` are filled by its SUBACK (None: refused or
    never answered)."""

    event: int
    topic_filter: str
    requested: int
    sent: float
    granted: int | None = None
    acked: float | None = None

    def __reduce__(self) -> tuple[type[Subscribed], tuple[object, ...]]:
        return Subscribed, (self.event, self.topic_filter, self.requested, self.sent, self.granted, self.acked)


@dataclass(slots=True)
class Unsubscribed:
    event: int
    topic_filter: str
    sent: float
    acked: float | None = None

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

    def __reduce__(self) -> tuple[type[Published], tuple[object, ...]]:
        return Published, (self.event, self.message, self.sent, self.accepted, self.certain)


@dataclass(frozen=True, slots=True)
class Delivered:
    """A PUBLISH from the server."""

    event: int
    time: float
    message: Publish

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
    #: The client sent DISCONNECT (so the Will is discarded).
    disconnected: bool = False
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
