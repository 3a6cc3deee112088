"""Protocol violations: the receiver must close the connection and must not act on the offending packet.

The first violation each side commits opens an obligation on the other side to close within the grace
[MQTT-4.8.0-1], under the more specific statement where the spec names one (a malformed SUBSCRIBE is
[MQTT-3.8.1-1]). Answering the offending packet, or anything sent after it, is acting on it (a CONNACK 0, SUBACK,
UNSUBACK, PUBACK, PUBREC, PINGRESP, or a delivery of the offending message): it fails every rule of the offence,
the duty to close included, and no later close undoes that, whoever closes. A CONNACK that refuses a malformed
CONNECT does not act on it but still breaks the duty to close without any CONNACK [MQTT-3.1.4-1].
"""

from __future__ import annotations

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
from mqttaudit.codec import rules as codec_rules
from mqttaudit.spec import identity

from . import reasons, rules
from .context import Context, Seen, describe
from .obligations import Obligation, OnClose
from .sides import side_name
from .subscriptions import FAILURE

#: The statement obliging the receiver to close, per codec rule, most specific first: (when the server receives
#: it, when the client receives it); None where the statement binds the other side only. Anything else falls
#: back to [MQTT-4.8.0-1].
CLOSE_RULES: Final[dict[str, tuple[str | None, str | None]]] = {
    codec_rules.PUBREL_FLAGS: (rules.CLOSE_ON_BAD_PUBREL_FLAGS, None),
    codec_rules.SUBSCRIBE_FLAGS: (rules.CLOSE_ON_BAD_SUBSCRIBE_FLAGS, None),
    codec_rules.UNSUBSCRIBE_FLAGS: (rules.CLOSE_ON_BAD_UNSUBSCRIBE_FLAGS, None),
    codec_rules.DISCONNECT_FLAGS: (rules.CLOSE_ON_BAD_DISCONNECT_FLAGS, None),
    codec_rules.CONNECT_RESERVED_FLAG: (rules.CLOSE_ON_CONNECT_RESERVED_FLAG, None),
    codec_rules.SUBSCRIBE_OPTIONS: (rules.CLOSE_ON_BAD_REQUESTED_QOS, None),
    codec_rules.QOS_3: (rules.CLOSE_ON_QOS_3, rules.CLOSE_ON_QOS_3),
    codec_rules.RESERVED_FLAGS: (rules.CLOSE_ON_BAD_FLAGS, rules.CLOSE_ON_BAD_FLAGS),
    codec_rules.UTF8_WELL_FORMED: (rules.CLOSE_ON_BAD_UTF8, rules.CLOSE_ON_BAD_UTF8),
    codec_rules.UTF8_NO_NULL: (rules.CLOSE_ON_NULL_CHARACTER, rules.CLOSE_ON_NULL_CHARACTER),
    # [MQTT-6.0.0-1] binds either recipient of a packet in a WebSocket text frame, in 3.1.1 and 5.0 alike.
    rules.BINARY_FRAMES: (rules.BINARY_FRAMES, rules.BINARY_FRAMES),
}


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


def close_rule(seen: Seen, default: str = rules.CLOSE_ON_VIOLATION) -> tuple[str, Violation]:
    """The statement that obliges the receiver of ``seen`` to close the connection, and the violation that
    calls for it (``seen`` must carry at least one)."""
    column = 0 if seen.receiver is Direction.FROM_SERVER else 1
    for codec_rule, by_receiver in CLOSE_RULES.items():
        rule = by_receiver[column]
        for violation in seen.errors:
            if violation.rule_key == codec_rule and rule is not None:
                return rule, violation
    return default, seen.errors[0]


@dataclass(frozen=True, slots=True)
class Offence:
    """A protocol violation its receiver must close the connection on."""

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

    @classmethod
    def of_frame(
        cls,
        seen: Seen,
        default: str = rules.CLOSE_ON_VIOLATION,
        act_rule: str | None = None,
        enforced: frozenset[str] = rules.ENFORCED_CODEC_RULES,
    ) -> Offence:
        rule, violation = close_rule(seen, default)
        what = f"{seen.describe()} breaking {violation.rule}: {violation.detail}"
        broken = tuple(
            dict.fromkeys(
                v.rule_key for v in seen.errors if v.rule_key in enforced and v.rule_key not in (rule, act_rule)
            )
        )
        return cls(seen, rule, act_rule or rule, what, broken)

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

    def by(self, side: Direction) -> Offence | None:
        """The first violation ``side`` committed, if any."""
        return self._first.get(side)

    def on_frame(self, seen: Seen) -> None:
        """A frame with MUST-level violations is an offence (CONNECT is the connection's to judge)."""
        if seen.offends:
            enforced = rules.enforced_codec_rules(self._ctx.ledger.version) | rules.TRANSPORT_RULES
            if self._ctx.ledger.version != identity.V5 or any(v.rule_key in enforced for v in seen.errors):
                self.record(Offence.of_frame(seen, enforced=enforced))

    def record(self, offence: Offence) -> None:
        """Opens the receiver's obligation to close, for the sender's first violation only: after it, the
        receiver should no longer be listening."""
        seen = offence.seen
        if seen.sender in self._first:
            return
        if (
            seen.sender is Direction.FROM_SERVER
            and self._ctx.ledger.version == identity.V5
            and offence.close_rule != rules.BINARY_FRAMES  # [MQTT-6.0.0-1] binds the Client too
        ):
            # 5.0 binds only the Server to close on a Malformed Packet or Protocol Error [MQTT-4.13.1-1]; a
            # Client SHOULD: the server's own violation stands as the codec's finding.
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
        grace = self._ctx.config.close_grace
        self._ctx.obligations.open(
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
            )
        )

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
        # Acting on it breaks the duty to close too: a close that comes later does not undo the answer. One act,
        # one finding: it cites the receiver's duty (the close rule, which binds the receiver), the rules the
        # packet broke are failed by the same act.
        self._acted.add(seen.event)
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
