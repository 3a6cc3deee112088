"""What every check of a conversation shares: the configuration, the ledger, the open obligations, and the
observed packet being judged."""

from __future__ import annotations

from dataclasses import dataclass

from mqttaudit.codec import Direction, Frame, Packet, Publish, Violation
from mqttaudit.codec import rules as codec_rules

from ..codec.describe import quoted
from . import reasons
from .config import JudgeConfig
from .obligations import Obligations
from .sides import peer, side_name
from .transcript import Transcript
from .verdict import Ledger


@dataclass(frozen=True, slots=True)
class Context:
    config: JudgeConfig
    ledger: Ledger
    obligations: Obligations
    #: What the conversation did, for the broker model.
    transcript: Transcript


@dataclass(frozen=True, slots=True)
class Seen:
    """One frame as the checks see it: where it is, who sent it, and the MUST-level violations it carries."""

    event: int
    time: float
    sender: Direction
    frame: Frame
    #: MUST-level codec violations, except a truncation at the end of the stream (bytes cut off by the close,
    #: which nobody could have answered).
    errors: tuple[Violation, ...]
    #: False when the receiver's TCP never acknowledged the frame (a capture shows it): it may never have had it.
    received: bool = True

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        event: int,
        time: float,
        sender: Direction,
        frame: Frame,
        errors: tuple[Violation, ...],
        received: bool = True,
    ) -> None:
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "sender", sender)
        object.__setattr__(self, "frame", frame)
        object.__setattr__(self, "errors", errors)
        object.__setattr__(self, "received", received)

    @classmethod
    def of(cls, event: int, time: float, sender: Direction, frame: Frame, *, received: bool = True) -> Seen:
        violations = frame.violations
        errors = (  # most frames have none: no generator to run then
            tuple(v for v in violations if not codec_rules.is_advisory(v.rule) and v.rule_key != codec_rules.TRUNCATED)
            if violations
            else ()
        )
        return cls(event, time, sender, frame, errors, received)

    @property
    def packet(self) -> Packet | None:
        return self.frame.packet

    @property
    def receiver(self) -> Direction:
        return peer(self.sender)

    @property
    def offends(self) -> bool:
        """The frame breaks a MUST-level rule (an unframeable run always does)."""
        return bool(self.errors)

    @property
    def undecoded(self) -> bool:
        """A packet skipped without decoding (above the size bound), so nothing is known of it."""
        return self.packet is None and not self.errors

    def describe(self) -> str:
        return f"{side_name(self.sender)} {describe(self.packet)} (event {self.event})"


def undecided_at(ctx: Context, seen: Seen, rule: str, tag: str, detail: str) -> None:
    """The instance of ``rule`` that ``seen`` (a packet of the side it concerns) calls for is not assessable, for
    the reason ``tag: detail``."""
    ctx.ledger.undecided(rule, reasons.reason(tag, detail), side=seen.sender, event=seen.event, time=seen.time)


def describe(packet: Packet | None) -> str:
    """A short name of a packet for details: type, Packet Identifier and what sets it apart."""
    if packet is None:
        return "bytes that could not be framed"
    name = packet.packet_type.name
    if isinstance(packet, Publish):
        ident = "" if packet.packet_id is None else f" id {packet.packet_id}"
        return f"{name}{ident} (QoS {packet.qos}, retain {int(packet.retain)}) to {quoted(packet.topic)}"
    packet_id = getattr(packet, "packet_id", None)
    return name if packet_id is None else f"{name} id {packet_id}"
