"""What the judge consumes: the timed events of one connection, in both directions, however they were observed.

The live prober and the capture pipeline both turn what they saw into these events; the judge never learns which
one fed it. Times are seconds from any origin and never decrease along a conversation.

The events pickle by position (``__reduce__``), as the transcripts' records do: the compiled build's frozen classes
have no settable state to restore.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mqttaudit.codec import Connect, Direction, Frame
from mqttaudit.codec.masking import mask_password, mask_password_bytes


@dataclass(frozen=True, slots=True)
class Sent:
    """One frame sent by ``sender``, as framed by the ``codec.StreamDecoder`` of that direction."""

    time: float
    sender: Direction
    frame: Frame
    #: Whether the receiver's TCP acknowledged the frame's bytes (a capture shows it); None when not known (the
    #: live prober's own sends). False: the frame may never have reached the receiver, which then owed it nothing.
    acked: bool | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, time: float, sender: Direction, frame: Frame, acked: bool | None = None
    ) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "sender", sender)
        object.__setattr__(self, "frame", frame)
        object.__setattr__(self, "acked", acked)

    def __reduce__(self) -> tuple[type[Sent], tuple[object, ...]]:
        return Sent, (self.time, self.sender, self.frame, self.acked)


@dataclass(frozen=True, slots=True)
class Closed:
    """The TCP connection ended: ``by`` who (None when unknown), ``abrupt`` for a reset rather than a FIN."""

    time: float
    by: Direction | None
    abrupt: bool

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, time: float, by: Direction | None, abrupt: bool
    ) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "by", by)
        object.__setattr__(self, "abrupt", abrupt)

    def __reduce__(self) -> tuple[type[Closed], tuple[object, ...]]:
        return Closed, (self.time, self.by, self.abrupt)


@dataclass(frozen=True, slots=True)
class Quiet:
    """Observation stopped at ``time`` with the connection still open: silence until then (a deadline).

    From a capture, ``time`` is the connection's last captured segment and ``capture_end`` the end of the capture:
    between the two the connection was not seen, so a silence there proves nothing. None: observation was
    continuous until ``time`` (a live conversation)."""

    time: float
    capture_end: float | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, time: float, capture_end: float | None = None
    ) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "capture_end", capture_end)

    def __reduce__(self) -> tuple[type[Quiet], tuple[object, ...]]:
        return Quiet, (self.time, self.capture_end)


@dataclass(frozen=True, slots=True)
class Lost:
    """``length`` bytes ``sender`` sent were not observed (a gap in a capture): whatever they held is unknown, so
    nothing that depends on them is judged."""

    time: float
    sender: Direction
    length: int
    #: The bytes were captured but no packet could be framed from them (a stream seen from its middle, or after a
    #: gap, before a packet boundary was proven): as unknown as bytes never captured.
    undecoded: bool = False

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self, time: float, sender: Direction, length: int, undecoded: bool = False
    ) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "sender", sender)
        object.__setattr__(self, "length", length)
        object.__setattr__(self, "undecoded", undecoded)

    def __reduce__(self) -> tuple[type[Lost], tuple[object, ...]]:
        return Lost, (self.time, self.sender, self.length, self.undecoded)


Event = Sent | Closed | Quiet | Lost


def masked_password(event: Event) -> Event:
    """The event with its CONNECT's password masked (:func:`password_masked`); any other event as it is."""
    if not isinstance(event, Sent):
        return event
    frame = password_masked(event.frame)
    return event if frame is event.frame else replace(event, frame=frame)


def password_masked(frame: Frame) -> Frame:
    """A CONNECT's password as the reports show it, asterisks of its length, in the packet and its bytes: what the
    judge, the tables, the evidence and the routing replay's transcripts see (the password is never written). The
    audit masks what it decoded, serve what its clients sent. Any other frame is returned as it is."""
    connect = frame.packet
    if not isinstance(connect, Connect) or not connect.password:
        return frame
    raw = mask_password_bytes(frame.raw, connect.password)
    return Frame(frame.offset, frame.length, raw, mask_password(connect), frame.violations)
