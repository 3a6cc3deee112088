"""Protocol violations: the receiver must close the connection and must not act on the offending packet.

The first violation each side commits opens an obligation on the other side to close within the grace, under the
statement that binds that receiver to detect it (:mod:`mqttaudit.spec.duties`: in 3.1.1 [MQTT-4.8.0-1] or a more
specific statement, such as [MQTT-3.8.1-1] for a malformed SUBSCRIBE). Answering the offending packet, or anything
sent after it, is acting on it (a CONNACK 0, SUBACK, UNSUBACK, PUBACK, PUBREC, PINGRESP, or a delivery of the
offending message): it fails every rule of the offence, the duty to close included, and no later close undoes that,
whoever closes. A CONNACK that refuses a malformed CONNECT does not act on it but still breaks the duty to close
without any CONNACK [MQTT-3.1.4-1].

MQTT 5.0 binds a receiver to detect only what a statement names for it (section 4.13.1; a Server closes on what it
detects [MQTT-4.13.1-1]): a 5.0 receiver that does not close on, or acts on, a defect nothing binds it to detect is
lenient (:class:`~mqttaudit.judge.verdict.Leniency`, one entry per offence), not failing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mqttaudit.codec import (
    Connack,
    Direction,
    Frame,
    Packet,
    PacketType,
    Puback,
    Publish,
    Pubrec,
    Suback,
    Violation,
)
from mqttaudit.spec import duties, identity
from mqttaudit.spec.duties import Duty

from . import reasons, rules
from .context import Context, Seen, describe
from .obligations import Lenient, Obligation, OnClose
from .sides import side_name
from .subscriptions import FAILURE


def in_text_frame(frame: Frame) -> Frame:
    """``frame`` as it was carried in a WebSocket text frame: with the violation of [MQTT-6.0.0-1] added (at its
    first byte), which makes it an offence its receiver must close on, and must not act on, like a malformed one."""
    violation = Violation(
        rules.BINARY_FRAMES,
        frame.offset,
        "an MQTT packet sent in a WebSocket text frame (opcode 0x1), not a binary one",
    )
    if violation in frame.violations:
        return frame
    return Frame(frame.offset, frame.length, frame.raw, frame.packet, (*frame.violations, violation))


#: The acknowledgement that accepts each request (a PUBLISH by its QoS): sending it for an offending request whose
#: Packet Identifier is 0 (the defect itself, so no flow pairs them) is acting on it.
ACKNOWLEDGEMENTS: Final[dict[PacketType, PacketType]] = {
    PacketType.SUBSCRIBE: PacketType.SUBACK,
    PacketType.UNSUBSCRIBE: PacketType.UNSUBACK,
    PacketType.PUBREL: PacketType.PUBCOMP,
}
PUBLISH_ACKNOWLEDGEMENTS: Final[dict[int, PacketType]] = {1: PacketType.PUBACK, 2: PacketType.PUBREC}


#: Names of packet types for :mod:`mqttaudit.spec.duties` (type 15 is AUTH in 5.0, reserved in 3.1.1).
_PACKET_NAMES: Final = {packet_type: packet_type.name for packet_type in PacketType} | {PacketType.AUTH: "AUTH"}


def packet_name(seen: Seen) -> str | None:
    """The type of the offending packet, None when it was not decoded (bytes that frame no packet are judged by
    the rules they break alone)."""
    packet = seen.packet
    return None if packet is None else _PACKET_NAMES[packet.packet_type]


def receiver_duty(seen: Seen, broken: Sequence[str], version: str) -> Duty:
    """The duty of the receiver of ``seen``, a packet breaking the rules ``broken`` (keys), in ``version``: the
    statement that binds it to detect the defect and close, or none (see :func:`mqttaudit.spec.duties.governing`)."""
    return duties.governing(broken, version, side_name(seen.receiver), packet_name(seen))


@dataclass(frozen=True, slots=True)
class Offence:
    """A protocol violation its receiver must close the connection on, or (MQTT 5.0) may accept leniently."""

    seen: Seen
    #: The statement that obliges the receiver to close.
    close_rule: str
    #: The statement broken by answering it (usually the same).
    act_rule: str
    #: What was wrong, for details.
    what: str
    #: The rules the offending frame broke, which its receiver upholds by closing and fails by accepting.
    broken: tuple[str, ...] = ()
    #: A refusal of it (a PUBACK or PUBREC of 0x80 or above) acts on nothing: the packet is well formed and only
    #: beyond a limit the receiver declared, so its Packet Identifier is sound and a refusal (0x97 Quota exceeded)
    #: accepts nothing of it. The close is still owed.
    refusable: bool = False
    #: MQTT 5.0: no statement binds the receiver to detect the defect (the duty's row says why). Not closing on it,
    #: or acting on it, is leniency under ``unbound.rule``, the statement the packet broke, not a failure.
    unbound: Duty | None = None

    @classmethod
    def of(
        cls,
        seen: Seen,
        broken: Sequence[str],
        what: str,
        version: str,
        *,
        act_rule: str | None = None,
        refusable: bool = False,
    ) -> Offence:
        """The offence of ``seen``, a packet breaking ``broken`` (keys: the sender's rules), under the duty
        :mod:`mqttaudit.spec.duties` gives its receiver in ``version``. A 5.0 Server bound to detect it also closes
        on it under [MQTT-4.13.1-1] (for a CONNECT, [MQTT-3.1.4-1] says so itself); one not bound to is watched for
        leniency, and its close still upholds [MQTT-4.13.1-1] and the rules broken (it detected them)."""
        duty = receiver_duty(seen, broken, version)
        key = duty.binding_key
        kept: tuple[str, ...] = ()
        if key is not None:
            close, unbound = key, None
            if version == identity.V5 and seen.receiver is Direction.FROM_SERVER and packet_name(seen) != "CONNECT":
                kept = (rules.CLOSE_ON_VIOLATION,)  # a Server bound to detect it closes on it [MQTT-4.13.1-1]
        else:
            close, unbound = rules.CLOSE_ON_VIOLATION, duty
        act = act_rule or close
        rest = tuple(dict.fromkeys(rule for rule in (*kept, *broken) if rule not in (close, act)))
        return cls(seen, close, act, what, rest, refusable, unbound)

    @classmethod
    def of_frame(
        cls,
        seen: Seen,
        version: str,
        act_rule: str | None = None,
        enforced: frozenset[str] = rules.ENFORCED_CODEC_RULES,
    ) -> Offence:
        """The offence of a frame with MUST-level violations: the rules of ``enforced`` it breaks."""
        broken = tuple(dict.fromkeys(v.rule_key for v in seen.errors if v.rule_key in enforced))
        duty = receiver_duty(seen, broken, version)
        named = duty.rule
        violation = next(
            (v for v in seen.errors if identity.statement_id(v.rule_key, version) == named), seen.errors[0]
        )
        what = f"{seen.describe()} breaking {violation.rule}: {violation.detail}"
        return cls.of(seen, broken, what, version, act_rule=act_rule)

    @property
    def upheld(self) -> tuple[str, ...]:
        """Every rule the receiver keeps by closing and breaks by acting on the packet: the duty to close first."""
        return tuple(dict.fromkeys((self.close_rule, self.act_rule, *self.broken)))


class Offences:
    """The first protocol violation of each side, and the receiver's duty to close on it."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._first: dict[Direction, Offence] = {}
        self._acted: set[int] = set()  # events already judged as acting on an offence
        #: Per receiver, the watch on a close it is not bound to make (5.0): open until it closes, acts or the
        #: grace ends, whichever settles the one leniency entry of the offence.
        self._watches: dict[Direction, Obligation] = {}

    def by(self, side: Direction) -> Offence | None:
        """The first violation ``side`` committed, if any."""
        return self._first.get(side)

    def on_frame(self, seen: Seen) -> None:
        """A frame with MUST-level violations is an offence (CONNECT is the connection's to judge)."""
        if seen.offends:
            version = self._ctx.ledger.version
            enforced = rules.enforced_codec_rules(version) | rules.TRANSPORT_RULES
            if version != identity.V5 or any(v.rule_key in enforced for v in seen.errors):
                self.record(Offence.of_frame(seen, version, enforced=enforced))

    def offend(self, seen: Seen, broken: Sequence[str], what: str, *, refusable: bool = False) -> Offence:
        """Records that ``seen`` breaks the judge's own rules ``broken`` (a packet out of place, beyond a limit):
        an offence its receiver owes the duty :mod:`mqttaudit.spec.duties` gives it."""
        offence = Offence.of(seen, broken, what, self._ctx.ledger.version, refusable=refusable)
        self.record(offence)
        return offence

    def record(self, offence: Offence) -> None:
        """Opens the receiver's obligation to close, for the sender's first violation only: after it, the
        receiver should no longer be listening. A close the receiver is not bound to make is watched instead: the
        grace passing is leniency, not a failure."""
        seen = offence.seen
        if seen.sender in self._first:
            return
        self._first[seen.sender] = offence
        self._ctx.obligations.excuse_close(
            seen.receiver,
            reasons.reason(
                reasons.CLOSED_INSTEAD,
                f"the {side_name(seen.receiver)} closed the connection after {offence.what} (event {seen.event}), "
                "which it must close on",
            ),
        )
        unbound = offence.unbound
        lenient = None
        if unbound is not None:
            # A Server's close still keeps [MQTT-4.13.1-1] and the rules broken; a Client's keeps nothing it is
            # bound to (4.13.1 asks it only to close, with a SHOULD).
            lenient = Lenient(
                unbound.rule or offence.close_rule,
                unbound.basis,
                offence.what,
                offence.broken,
                upholds=seen.receiver is Direction.FROM_SERVER,
            )
        grace = self._ctx.config.close_grace
        obligation = self._ctx.obligations.open(
            Obligation(
                offence.close_rule,
                seen.receiver,
                seen.event,
                seen.time,
                seen.time + grace,
                (
                    "close the connection",
                    f"the {side_name(seen.receiver)} closes the connection within {grace:g} s of {offence.what}",
                ),
                OnClose.FULFILS,
                enforces=offence.upheld[1:],
                lenient=lenient,
            )
        )
        if lenient is not None:
            self._watches[seen.receiver] = obligation

    def check_answer(self, seen: Seen, answered: int | None) -> None:
        """``seen`` answers event ``answered``: acting on an offence, or on what followed it, breaks the rule."""
        offence = self._first.get(seen.receiver)
        if offence is None or answered is None or answered < offence.seen.event:
            return
        target = "the offending packet" if answered == offence.seen.event else f"event {answered}, sent after it"
        if offence.refusable and answered == offence.seen.event and _refuses_publication(seen):
            return  # it accepts nothing; whether the close came is the obligation's to judge
        if answered == offence.seen.event and offence.act_rule == rules.MALFORMED_CONNECT and _refuses(seen):
            if self._ctx.ledger.version == identity.V5:
                return  # 5.0 [MQTT-3.1.4-1]: a CONNACK of 0x80 or above may come before the close (section 4.13)
            # [MQTT-3.1.4-1] A refusal accepts nothing, but the server had to close without any CONNACK.
            self._ctx.ledger.fail(
                offence.act_rule,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} refuses the offending packet instead of closing without CONNACK: {offence.what}",
                f"the {side_name(seen.sender)} closes the connection on {describe(offence.seen.packet)} without "
                "sending CONNACK",
            )
            return
        if _refuses(seen):  # it grants nothing, but it answers where it had to close
            self._act(offence, seen, f"{seen.describe()} refuses {target} instead of closing: {offence.what}")
            return
        self._act(offence, seen, f"{seen.describe()} answers {target}: {offence.what}")

    def check_echo(self, seen: Seen, *, paired: bool = False) -> None:
        """A delivery of the offending PUBLISH itself is acting on it, and so is an acknowledgement of the offending
        packet: one with its Packet Identifier that answers no flow (``paired`` False; the offending packet opened
        none), or one with Packet Identifier 0, which no flow has."""
        offence = self._first.get(seen.receiver)
        bad = None if offence is None else offence.seen.packet
        if offence is None or bad is None or seen.packet is None or seen.event in self._acted:
            return
        packet = seen.packet
        if isinstance(packet, Publish) and isinstance(bad, Publish) and _same_message(packet, bad):
            self._act(offence, seen, f"{seen.describe()} delivers the message of {offence.what}")
        elif _acknowledges(packet, bad, any_id=not paired):
            if offence.refusable and _refuses_publication(seen):
                return
            verb = (
                "refuses the offending packet instead of closing" if _refuses(seen) else "answers the offending packet"
            )
            self._act(offence, seen, f"{seen.describe()} {verb}: {offence.what}")

    def _act(self, offence: Offence, seen: Seen, detail: str) -> None:
        expected = (
            f"the {side_name(seen.sender)} closes the connection on {describe(offence.seen.packet)} "
            "without acting on it"
        )
        self.acted_on(offence, seen, detail, expected)

    def acted_on(self, offence: Offence, seen: Seen, detail: str, expected: str) -> None:
        """``seen`` acts on ``offence`` (answers or accepts it): every rule its receiver upholds by closing fails,
        or, where nothing bound it to detect the defect (5.0), one leniency entry."""
        self._acted.add(seen.event)
        unbound = offence.unbound
        if unbound is not None:
            # Not bound to detect it: accepting it is leniency, one entry per offence (the grace may have ended it
            # already; then the watch is gone).
            watch = self._watches.pop(seen.sender, None)
            if watch is not None and self._ctx.obligations.drop(watch):
                rule = unbound.rule or offence.close_rule
                ledger = self._ctx.ledger
                cause = offence.seen.event
                ledger.lenient(rule, seen.sender, seen.time, seen.event, detail, unbound.basis, cause, offence.broken)
            return
        # Acting on it breaks the duty to close too: a close that comes later does not undo the answer. One act,
        # one finding: it cites the receiver's duty (the close rule, which binds the receiver), the other rules it
        # upholds by closing are failed by the same act (those binding the receiver: see Ledger.fail).
        duty, *broken = offence.upheld
        self._ctx.ledger.fail(duty, seen.sender, seen.time, seen.event, detail, expected, also=broken)


def _refuses(seen: Seen) -> bool:
    """A CONNACK with a non-zero return code, or a SUBACK that fails every filter (0x80): it accepts nothing."""
    packet = seen.packet
    if isinstance(packet, Suback):
        return bool(packet.return_codes) and all(code == FAILURE for code in packet.return_codes)
    return isinstance(packet, Connack) and packet.return_code != 0


def _refuses_publication(seen: Seen) -> bool:
    """A 5.0 PUBACK or PUBREC with a Reason Code of 0x80 or above: the PUBLISH is refused, nothing of it taken."""
    packet = seen.packet
    return isinstance(packet, (Puback, Pubrec)) and (packet.reason_code or 0) >= FAILURE


def _same_message(delivered: Publish, offending: Publish) -> bool:
    return (delivered.topic, delivered.payload) == (offending.topic, offending.payload)


def _acknowledges(answer: Packet, request: Packet, *, any_id: bool) -> bool:
    """``answer`` is the acknowledgement of ``request``, with its Packet Identifier: 0 (which no flow pairs), or
    any (``any_id``: the answer paired no flow, and the offending request opened none)."""
    if isinstance(request, Publish):
        wanted = PUBLISH_ACKNOWLEDGEMENTS.get(request.qos)
    else:
        wanted = ACKNOWLEDGEMENTS.get(request.packet_type)
    request_id = getattr(request, "packet_id", None)
    return (
        wanted is not None
        and answer.packet_type is wanted
        and request_id is not None
        and request_id == getattr(answer, "packet_id", None)
        and (any_id or request_id == 0)
    )
