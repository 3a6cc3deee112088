"""Packet Identifiers: every request gets its answers, with its identifier, in the right order.

One table drives the flows (section 4.3 and 3.8-3.11): a QoS 1 PUBLISH awaits PUBACK; a QoS 2 PUBLISH awaits
PUBREC, then its sender's PUBREL, then PUBCOMP; SUBSCRIBE awaits SUBACK; UNSUBSCRIBE awaits UNSUBACK. An answer
that fits no flow in flight is a finding; so is a new request reusing an identifier still in flight.

In MQTT 5.0 acknowledgements carry Reason Codes: a PUBACK or PUBREC from 0x80 up refuses the message and ends its
flow (no PUBREL follows [MQTT-4.3.3-4]), UNSUBACK holds one code per Topic Filter [MQTT-3.11.3-1, -2], and where
several codes are right :mod:`.outcomes` lists them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from mqttaudit.codec import (
    Direction,
    Disconnect,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
    Publish,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.spec import identity
from mqttaudit.spec.ids import R5
from mqttaudit.topics import matches

from ..codec.describe import quoted
from ..codec.properties import MAXIMUM_QOS, RECEIVE_MAXIMUM, first
from ..codec.reason_codes import name as code_name
from . import model_rules_5 as rules_5
from . import reasons, rules
from .connection import Connection
from .context import Context, Seen, describe, undecided_at
from .expiry_5 import EXPIRED, message_expiry, state_at
from .obligations import Obligation, OnClose
from .omitted_5 import check_omitted
from .outcomes import ALLOWED_OUTCOMES, PACKET_ID_NOT_FOUND, Outcomes, refuses
from .sides import peer, side_name
from .subscriptions import Subscriptions, refused
from .topic_alias import TopicSource, topic_of
from .transcript import Published, Subscribed, Unsubscribed
from .violations import Offences

CLIENT: Final = Direction.FROM_CLIENT
SERVER: Final = Direction.FROM_SERVER
#: MQTT 5.0 only: [MQTT-3.11.3-1] UNSUBACK Reason Codes follow the order of the Topic Filters (each fits its
#: filter); [MQTT-3.11.3-2] one per Topic Filter.
UNSUBACK_CODES_IN_ORDER: Final[str] = R5.MQTT_3_11_3_1
UNSUBACK_CODE_PER_FILTER: Final[str] = R5.MQTT_3_11_3_2
#: MQTT 5.0 SUBACK codes a server without the requested QoS might refuse with for want of it: a refusal that
#: says nothing more precise (0x80 Unspecified error, 0x83 Implementation specific error) [MQTT-3.2.2-10].
QOS_REFUSALS: Final = frozenset({0x80, 0x83})
#: MQTT 5.0 DISCONNECT Reason Code 0x9B: QoS not supported.
QOS_NOT_SUPPORTED: Final = 0x9B


class Stage(enum.Enum):
    """What a flow in flight awaits: the packet type named."""

    PUBACK = PacketType.PUBACK
    PUBREC = PacketType.PUBREC
    PUBREL = PacketType.PUBREL
    PUBCOMP = PacketType.PUBCOMP
    SUBACK = PacketType.SUBACK
    UNSUBACK = PacketType.UNSUBACK

    __hash__ = object.__hash__  # singletons compared by identity (see Direction)


#: MQTT 5.0: the codes a step of a QoS 2 flow begun on this connection may carry (keys of ALLOWED_OUTCOMES).
KNOWN_OUTCOMES: Final[dict[Stage, str]] = {Stage.PUBREL: "pubrel-known", Stage.PUBCOMP: "pubcomp-known"}
#: MQTT 5.0 [MQTT-4.3.2-3, MQTT-4.3.3-3, -5]: the packet a sender holds unacknowledged at each stage, until the
#: answer the stage awaits: reusing its identifier before then treats it as acknowledged.
HELD_UNTIL: Final[dict[Stage, tuple[str, str]]] = {
    Stage.PUBACK: (rules_5.QOS1_HELD_UNTIL_PUBACK, "a QoS 1 PUBLISH stays unacknowledged until its PUBACK"),
    Stage.PUBREC: (rules_5.QOS2_HELD_UNTIL_PUBREC, "a QoS 2 PUBLISH stays unacknowledged until its PUBREC"),
    Stage.PUBCOMP: (rules_5.QOS2_PUBREL_HELD_UNTIL_PUBCOMP, "a PUBREL stays unacknowledged until its PUBCOMP"),
}
#: MQTT 5.0: the statement that makes a PUBLISH reusing the identifier of a flow that ended at a stage a new
#: message [MQTT-4.3.2-5, MQTT-4.3.3-12], [MQTT-4.3.3-9] after a refusing PUBREC (keyed by refusal).
REUSED_AFTER: Final[dict[tuple[Stage, bool], str]] = {
    (Stage.PUBACK, False): rules_5.QOS1_REUSED_ID_IS_NEW,
    (Stage.PUBACK, True): rules_5.QOS1_REUSED_ID_IS_NEW,
    (Stage.PUBREC, True): rules_5.QOS2_NEW_AFTER_REFUSAL,
    (Stage.PUBCOMP, False): rules_5.QOS2_NEW_AFTER_PUBCOMP,
}

#: The packet type each stage awaits (Enum's ``value`` property costs a Python call per answer).
AWAITED: Final[dict[Stage, PacketType]] = {stage: stage.value for stage in Stage}


@dataclass(frozen=True, slots=True)
class Step:
    #: The requester sends it (PUBREL), not its peer.
    by_owner: bool
    then: Stage | None
    #: The rule broken when it never comes.
    missing: str
    #: What the owing side closing the connection instead means: by default it may (a PUBLISH receiver may close
    #: on what it does not authorise [MQTT-3.3.5-2], and the rule is not assessable).
    on_close: OnClose = OnClose.EXCUSES


STEPS: Final[dict[Stage, Step]] = {
    Stage.PUBACK: Step(False, None, rules.QOS1_RECEIVER_PUBACK),
    Stage.PUBREC: Step(False, Stage.PUBREL, rules.QOS2_RECEIVER),
    Stage.PUBREL: Step(True, Stage.PUBCOMP, rules.QOS2_SENDER),
    Stage.PUBCOMP: Step(False, None, rules.QOS2_RECEIVER),
    # The server MUST answer every well-formed SUBSCRIBE and UNSUBSCRIBE [MQTT-3.8.4-1, MQTT-3.10.4-4]; unlike a
    # PUBLISH it does not authorise [MQTT-3.3.5-2], nothing lets it close instead: a close is treating a
    # well-formed request as malformed.
    Stage.SUBACK: Step(False, None, rules.SUBACK_SENT, OnClose.BREAKS),
    Stage.UNSUBACK: Step(False, None, rules.UNSUBACK_SAME_ID, OnClose.BREAKS),
}


@dataclass(frozen=True, slots=True)
class Stray:
    """An answer whose Packet Identifier matches no flow awaiting it."""

    rule: str
    awaited: str
    expected: str


STRAYS: Final[dict[PacketType, Stray]] = {
    PacketType.PUBACK: Stray(
        rules.PUBLISH_ACK_SAME_ID, "QoS 1 PUBLISH", "PUBACK carries the Packet Identifier of the PUBLISH it answers"
    ),
    PacketType.PUBREC: Stray(
        rules.PUBLISH_ACK_SAME_ID, "QoS 2 PUBLISH", "PUBREC carries the Packet Identifier of the PUBLISH it answers"
    ),
    PacketType.PUBREL: Stray(
        rules.PUBLISH_ACK_SAME_ID,
        "QoS 2 PUBLISH acknowledged by PUBREC",
        "PUBREL carries the Packet Identifier of the PUBLISH whose PUBREC it answers",
    ),
    PacketType.PUBCOMP: Stray(
        rules.QOS2_RECEIVER, "PUBREL", "PUBCOMP carries the Packet Identifier of the PUBREL it answers"
    ),
    PacketType.SUBACK: Stray(
        rules.SUBACK_SAME_ID, "SUBSCRIBE", "SUBACK carries the Packet Identifier of the SUBSCRIBE it acknowledges"
    ),
    PacketType.UNSUBACK: Stray(
        rules.UNSUBACK_SAME_ID,
        "UNSUBSCRIBE",
        "UNSUBACK carries the Packet Identifier of the UNSUBSCRIBE it acknowledges",
    ),
}

#: Answers of a known flow at the wrong step: the rule broken, or None where a repeat is harmless.
OUT_OF_STEP: Final[dict[tuple[Stage, PacketType], tuple[str, str] | None]] = {
    (Stage.PUBACK, PacketType.PUBREC): (rules.ACK_MATCHES_QOS, "a QoS 1 PUBLISH is answered with PUBACK"),
    (Stage.PUBREC, PacketType.PUBACK): (rules.ACK_MATCHES_QOS, "a QoS 2 PUBLISH is answered with PUBREC"),
    (Stage.PUBREC, PacketType.PUBREL): (rules.QOS2_SENDER, "the sender sends PUBREL only after receiving PUBREC"),
    (Stage.PUBREC, PacketType.PUBCOMP): (rules.QOS2_RECEIVER, "the receiver sends PUBCOMP only in answer to PUBREL"),
    (Stage.PUBREL, PacketType.PUBCOMP): (rules.QOS2_RECEIVER, "the receiver sends PUBCOMP only in answer to PUBREL"),
    (Stage.PUBREL, PacketType.PUBREC): None,
    (Stage.PUBCOMP, PacketType.PUBREC): None,
    (Stage.PUBCOMP, PacketType.PUBREL): None,
}

#: The client acknowledges in the order the packets arrived [MQTT-4.6.0-2, -3, -4].
ORDER_RULES: Final[dict[PacketType, str]] = {
    PacketType.PUBACK: rules.PUBACK_ORDER,
    PacketType.PUBREC: rules.PUBREC_ORDER,
    PacketType.PUBREL: rules.PUBREL_ORDER,
}

#: A new request reuses an identifier still in flight [MQTT-2.3.1-2] (client), [MQTT-2.3.1-4] (server).
ID_IN_USE: Final[dict[Direction, str]] = {
    Direction.FROM_CLIENT: rules.CLIENT_PACKET_ID_IN_USE,
    Direction.FROM_SERVER: rules.SERVER_PACKET_ID_IN_USE,
}


#: The answers a 5.0 server DISCONNECT may stand in for, by the refusals they could carry (ALLOWED_OUTCOMES).
DISCONNECT_INSTEAD: Final = {
    Stage.SUBACK: "suback",
    Stage.UNSUBACK: "unsuback-held",
    Stage.PUBACK: "puback",
    Stage.PUBREC: "pubrec",
}


@dataclass(eq=False, slots=True)
class Flow:
    """One request in flight: who sent it, its identifier, and what it awaits next."""

    owner: Direction
    packet_id: int
    request: Seen
    stage: Stage
    #: The packet the next step answers.
    last: Seen
    #: The rule broken when the first answer never comes, where it is not the step's own.
    missing: str | None = None
    due: Obligation | None = None
    #: What the broker model learns when the flow completes.
    subscribed: list[Subscribed] = field(default_factory=list)
    unsubscribed: list[Unsubscribed] = field(default_factory=list)
    published: Published | None = None
    #: MQTT 5.0: the codes the next answer may carry (a key of ALLOWED_OUTCOMES), None: not judged here.
    outcomes: str | None = None
    #: MQTT 5.0 UNSUBSCRIBE: whether the session held each filter when it was sent (None: cannot tell).
    held: list[bool | None] = field(default_factory=list)
    #: MQTT 5.0 server PUBLISH: its topic (aliases resolved; None: unknown), and whether an UNSUBSCRIBE of a filter
    #: matching it came while it was in flight (its delivery must still complete [MQTT-3.10.4-3]).
    topic: str | None = None
    unsubscribed_in_flight: bool = False
    #: MQTT 5.0 QoS 2: the message's Message Expiry Interval had passed when the packet the next step answers
    #: came; the statement that makes the flow go on all the same ([MQTT-4.3.3-7] for the sender's PUBREL,
    #: [MQTT-4.3.3-13] for the receiver's PUBCOMP).
    expired: str | None = None
    #: MQTT 5.0 SUBSCRIBE: it requests a QoS above the Maximum QoS the server declared [MQTT-3.2.2-10].
    above_maximum: bool = False

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        owner: Direction,
        packet_id: int,
        request: Seen,
        stage: Stage,
        last: Seen,
        missing: str | None = None,
        due: Obligation | None = None,
        subscribed: list[Subscribed] | None = None,
        unsubscribed: list[Unsubscribed] | None = None,
        published: Published | None = None,
        outcomes: str | None = None,
        held: list[bool | None] | None = None,
        topic: str | None = None,
        unsubscribed_in_flight: bool = False,
        expired: str | None = None,
        above_maximum: bool = False,
    ) -> None:
        self.owner = owner
        self.packet_id = packet_id
        self.request = request
        self.stage = stage
        self.last = last
        self.missing = missing
        self.due = due
        self.subscribed = [] if subscribed is None else subscribed
        self.unsubscribed = [] if unsubscribed is None else unsubscribed
        self.published = published
        self.outcomes = outcomes
        self.held = [] if held is None else held
        self.topic = topic
        self.unsubscribed_in_flight = unsubscribed_in_flight
        self.expired = expired
        self.above_maximum = above_maximum


class Pairing:
    def __init__(
        self,
        ctx: Context,
        offences: Offences,
        connection: Connection,
        subscriptions: Subscriptions,
        topics: TopicSource | None = None,
    ) -> None:
        """``topics`` resolves the topic of a 5.0 PUBLISH named only by its Topic Alias (without it, or when it
        cannot, nobody is owed that message: its topic is unknown)."""
        self._ctx = ctx
        self._topics = topics
        self._offences = offences
        self._connection = connection
        self._subscriptions = subscriptions
        self._flows: dict[Direction, dict[int, Flow]] = {side: {} for side in Direction}
        self._pings: list[tuple[Seen, Obligation | None]] = []
        self._blind: set[Direction] = set()
        #: The event of the last bytes of each side that went unobserved (lost, or captured but not framed).
        self._lost_at: dict[Direction, int] = {}
        #: MQTT 5.0: QoS 2 flows a PUBREC from 0x80 up ended, by owner and Packet Identifier.
        self._ended: dict[Direction, dict[int, Seen]] = {side: {} for side in Direction}
        #: 5.0: PUBRECs of an identifier no flow of the peer held, by that peer: a PUBREL answers each, "Packet
        #: Identifier not found" (0x92, section 3.6.2.1) or 0x00 (see :meth:`_answers_unknown_pubrec`).
        self._unknown_pubrecs: dict[Direction, dict[int, Seen]] = {side: {} for side in Direction}
        #: Client PUBLISH events named only by a Topic Alias not resolved: nobody is owed them.
        self._unknown_topics: set[int] = set()
        #: MQTT 5.0: Packet Identifiers of QoS 1 and 2 flows that ended here, by owner: the statement that makes a
        #: PUBLISH reusing one a new message, the PUBLISH if its answer refused it, and that answer.
        self._done: dict[Direction, dict[int, tuple[str, Seen | None, Seen]]] = {side: {} for side in Direction}
        #: MQTT 5.0: multi-filter SUBSCRIBEs answered here, by Packet Identifier: a second SUBACK for one shows it
        #: answered filter by filter, not as one sequence [MQTT-3.8.4-5].
        self._answered_subscribes: dict[int, Seen] = {}
        #: MQTT 5.0: the same for multi-filter UNSUBSCRIBEs and their UNSUBACK [MQTT-3.10.4-6].
        self._answered_unsubscribes: dict[int, Seen] = {}

    @property
    def _v5(self) -> bool:
        return self._connection.version == identity.V5

    def on_packet(self, seen: Seen) -> int | None:
        """Pairs one packet with the flows in flight; returns the event it answers, if any."""
        packet = seen.packet
        if packet is None:
            if seen.undecoded:
                self.lost(seen.sender, seen.event)
            return None
        if any(v.rule_key == codec_rules.PACKET_DIRECTION for v in seen.errors):
            return None
        if self._v5:
            check_omitted(self._ctx, self._connection, seen)
        if isinstance(packet, Publish):
            # MQTT 5.0: a re-sent PUBLISH is the message in flight, not another one to route [MQTT-4.3.3-10].
            publication = None if self._v5 and self._resent(seen, packet) else self._note_publication(seen, packet)
            if packet.qos in (1, 2) and packet.packet_id:
                flow = self._request(seen, packet.packet_id, Stage.PUBACK if packet.qos == 1 else Stage.PUBREC)
                if flow is not None:
                    flow.published = publication
            return None
        if isinstance(packet, Subscribe | Unsubscribe):
            if isinstance(packet, Unsubscribe) and self._v5 and not seen.offends:
                self._in_flight_unsubscribed(packet)
            if packet.packet_id:
                self._request(seen, packet.packet_id, Stage.SUBACK if isinstance(packet, Subscribe) else Stage.UNSUBACK)
            return None
        if isinstance(packet, Pingreq):
            self._ping(seen)
            return None
        if isinstance(packet, Pingresp):
            return self._pong()
        if packet.packet_type in STRAYS:
            packet_id = getattr(packet, "packet_id", None)
            return self._answer(seen, packet.packet_type, packet_id) if packet_id else None
        if isinstance(packet, Disconnect) and self._v5 and seen.sender is SERVER:
            if packet.reason_code == QOS_NOT_SUPPORTED:
                self._qos_refused(seen)
            self._refused_by_disconnect(seen, packet.reason_code)
        return None

    def _maximum_qos(self) -> int | None:
        """The Maximum QoS the server's CONNACK declared (2 when it left it out); None: no CONNACK seen."""
        connack = self._connection.connack
        if connack is None:
            return None
        value = first(connack.properties, MAXIMUM_QOS)
        return value if isinstance(value, int) else 2

    def _qos_refused(self, seen: Seen) -> None:
        """[MQTT-3.2.2-9] A server DISCONNECT 0x9B (QoS not supported) while a client PUBLISH within the Maximum QoS
        its CONNACK declared awaits its answer: the server does not support a QoS it did not declare beyond it."""
        maximum = self._maximum_qos()
        if maximum is None:
            return
        within = [
            flow
            for flow in self._flows[CLIENT].values()
            if isinstance(flow.request.packet, Publish)
            and flow.stage in (Stage.PUBACK, Stage.PUBREC)
            and flow.request.packet.qos <= maximum
            and not flow.request.offends
        ]
        if not within:
            return
        self._ctx.ledger.fail(
            rules_5.MAXIMUM_QOS_DECLARED,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} refuses {within[0].request.describe()} as QoS not supported, after a CONNACK that "
            f"declared Maximum QoS {maximum}" + (" (by leaving it out)" if maximum == 2 else ""),
            "a server without QoS 1 or QoS 2 declares the highest QoS it supports as Maximum QoS in its CONNACK",
        )

    def _refused_by_disconnect(self, seen: Seen, code: int | None) -> None:
        """MQTT 5.0: a server DISCONNECT with a Reason Code the owed answer could itself carry as a refusal (0x87
        Not authorized, 0x9E Shared Subscriptions not supported, ...) refuses the request instead of that answer
        (section 4.13): the answer's duty is kept, and nothing more is owed on it."""
        if code is None or code < 0x80:
            return
        flows = self._flows[CLIENT]
        for packet_id, flow in list(flows.items()):
            refusals = DISCONNECT_INSTEAD.get(flow.stage)
            due = flow.due
            if refusals is None or due is None or code not in ALLOWED_OUTCOMES[refusals].codes:
                continue
            self._ctx.obligations.drop(due)
            self._ctx.ledger.held(due.rule)
            del flows[packet_id]

    # Requests ---------------------------------------------------------------------------------------------------

    def _request(self, seen: Seen, packet_id: int, stage: Stage) -> Flow | None:
        """Starts a flow for a new request (None when it re-sends one in flight, or breaks the QoS 2 flow)."""
        flows = self._flows[seen.sender]
        current = flows.get(packet_id)
        if current is not None and _resends(current, seen):
            if current.due is not None:
                self._ctx.obligations.drop(current.due)  # one answer settles the message and its re-send
            if self._v5:
                self._resent_here(seen, current)
                if current.stage is Stage.PUBREL:
                    # [MQTT-4.3.3-10] The receiver sent PUBREC: until the PUBREL, a repeat gets PUBREC again.
                    current.missing = rules_5.QOS2_REPEAT_ANSWERED
            current.stage, current.last = stage, seen
            self._expect(current)
            return None
        if current is not None and current.stage is Stage.PUBCOMP and _same_message(current.request, seen):
            # [MQTT-4.3.3-6] in 5.0 (its 3.1.1 key names the PUBREL in 5.0).
            self._ctx.ledger.fail(
                rules_5.QOS2_NO_PUBLISH_AFTER_PUBREL if self._v5 else rules.QOS2_SENDER,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} re-sends the PUBLISH of event {current.request.event} after its PUBREL",
                "a QoS 2 sender never re-sends the PUBLISH once it has sent PUBREL",
            )
            return None
        reused: str | None = None
        resent_refused = False
        if self._v5 and isinstance(seen.packet, Publish):
            reused, resent_refused = self._reused(seen, seen.packet)
            self._new_message(seen, seen.packet, current, resent_refused)
        rule = ID_IN_USE[seen.sender]
        if current is None and self._connection.may_resume:
            undecided_at(
                self._ctx,
                seen,
                rule,
                reasons.EARLIER_SESSION,
                "the session may hold identifiers in flight from an earlier connection",
            )
        elif current is None:
            self._ctx.ledger.held(rule)
        else:
            self._reuses_in_flight(seen, current, resent_refused)
        held = self._held_before(seen)
        flow = Flow(seen.sender, packet_id, seen, stage, seen, self._note_subscriptions(seen) or reused, held=held)
        if self._v5 and isinstance(seen.packet, Publish):
            flow.topic = topic_of(seen, seen.packet, self._topics)
            if stage is Stage.PUBREC:
                flow.outcomes = "pubrec"  # [MQTT-4.3.3-8]
        if self._v5 and isinstance(seen.packet, Subscribe) and seen.sender is CLIENT and not seen.offends:
            maximum = self._maximum_qos()
            flow.above_maximum = maximum is not None and any(s.qos > maximum for s in seen.packet.subscriptions)
        self._ended[seen.sender].pop(packet_id, None)  # [MQTT-4.3.3-9] a new message after a refusing PUBREC
        if seen.sender is CLIENT:
            self._answered_subscribes.pop(packet_id, None)
            self._answered_unsubscribes.pop(packet_id, None)
        self._note_requests(flow)
        flows[packet_id] = flow
        self._expect(flow)
        return flow

    # MQTT 5.0 QoS flows (4.3, 4.4) and send quota (4.9) ----------------------------------------------------------

    def _resent(self, seen: Seen, packet: Publish) -> bool:
        """``packet`` re-sends a PUBLISH of its sender still in flight here (same identifier, DUP 1)."""
        if packet.qos not in (1, 2) or not packet.packet_id:
            return False
        current = self._flows[seen.sender].get(packet.packet_id)
        return current is not None and _resends(current, seen)

    def _resent_here(self, seen: Seen, flow: Flow) -> None:
        """[MQTT-4.4.0-1] A PUBLISH or PUBREL is re-sent only on a resumed session, "at no other time": never on
        the connection that sent it first."""
        self._ctx.ledger.fail(
            rules_5.RESEND_ONLY_ON_RESUME,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} re-sends {flow.last.describe()} on the same connection",
            "unacknowledged PUBLISH and PUBREL packets are re-sent when a session resumes (Clean Start 0), at no "
            "other time",
        )

    def _new_message(self, seen: Seen, packet: Publish, current: Flow | None, resent_refused: bool) -> None:
        """A new QoS 1 or 2 message: [MQTT-4.3.2-1, MQTT-4.3.3-1] it gets an identifier not in use, and
        [MQTT-4.3.2-2, MQTT-4.3.3-2] its first PUBLISH has DUP 0; [MQTT-4.9.0-2] none is sent at a send quota of
        zero. One under an identifier in flight is :meth:`_reuses_in_flight`'s act."""
        new_id = rules_5.QOS1_NEW_ID if packet.qos == 1 else rules_5.QOS2_NEW_ID
        first_dup = rules_5.QOS1_FIRST_DUP_0 if packet.qos == 1 else rules_5.QOS2_FIRST_DUP_0
        earlier = self._connection.may_resume or self._connection.mid_stream
        if current is None and earlier:
            why = "the session may hold identifiers in flight from an earlier connection"
            undecided_at(self._ctx, seen, new_id, reasons.EARLIER_SESSION, why)
        elif current is None:
            self._ctx.ledger.held(new_id)
        if resent_refused:
            pass  # a re-send of a refused message: [MQTT-4.4.0-2]'s finding, not a new message's DUP flag
        elif not packet.dup:
            self._ctx.ledger.held(first_dup)
        elif earlier and current is None:
            why = f"{seen.describe()} may re-send a message of an earlier connection (DUP 1 is right then)"
            undecided_at(self._ctx, seen, first_dup, reasons.EARLIER_SESSION, why)
        elif current is None:
            self._ctx.ledger.fail(
                first_dup,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} has DUP 1, yet no PUBLISH with its Packet Identifier is in flight to re-send",
                f"the first PUBLISH of a new QoS {packet.qos} message has DUP 0",
            )
        self._check_send_quota(seen, current)

    def _reuses_in_flight(self, seen: Seen, current: Flow, resent_refused: bool) -> None:
        """A new request under a Packet Identifier still in flight: one act, one finding. In 5.0 a PUBLISH cites its
        QoS delivery protocol's statement, the most specific (a new QoS 1 / QoS 2 message gets an unused identifier,
        [MQTT-4.3.2-1, MQTT-4.3.3-1], either sender); the same act breaks the identifier statement of section 2.2.1
        ([MQTT-2.2.1-3] client, [MQTT-2.2.1-4] server), treats the packet in flight as acknowledged early
        ([MQTT-4.3.2-3, MQTT-4.3.3-3, -5]) and, with DUP 1, gives the new message's first PUBLISH DUP 1
        ([MQTT-4.3.2-2, MQTT-4.3.3-2]). Anything else, and every request in 3.1.1, cites [MQTT-2.3.1-2] (client)
        or [MQTT-2.3.1-4] (server): 3.1.1's MQTT-4.3.2-1 and -4.3.3-1 join the identifier, DUP and unacknowledged
        duties of a sender in one statement, which the judge does not hold as a whole."""
        packet = seen.packet
        statements = [ID_IN_USE[seen.sender]]
        expected = "each new SUBSCRIBE, UNSUBSCRIBE or QoS 1/2 PUBLISH gets a Packet Identifier not in use"
        if self._v5 and isinstance(packet, Publish) and packet.qos in (1, 2):
            statements.insert(0, rules_5.QOS1_NEW_ID if packet.qos == 1 else rules_5.QOS2_NEW_ID)
            expected = f"each new QoS {packet.qos} message gets a Packet Identifier not in use"
            held = HELD_UNTIL.get(current.stage)
            if held is not None and isinstance(current.request.packet, Publish):
                statements.append(held[0])
                expected += f"; {held[1]}"
            if packet.dup and not resent_refused:
                statements.append(rules_5.QOS1_FIRST_DUP_0 if packet.qos == 1 else rules_5.QOS2_FIRST_DUP_0)
                expected += f"; the first PUBLISH of a new QoS {packet.qos} message has DUP 0"
        cited, *also = statements
        self._ctx.ledger.fail(
            cited,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} reuses Packet Identifier {current.packet_id}, still in flight for "
            f"{current.request.describe()} (awaiting {current.stage.name})",
            expected,
            also=also,
        )
        if current.due is not None:
            self._ctx.obligations.drop(
                current.due, f"Packet Identifier {current.packet_id} was reused (event {seen.event})"
            )

    def _in_flight_unsubscribed(self, packet: Unsubscribe) -> None:
        """[MQTT-3.10.4-3] The server completes the QoS 2 deliveries it started under a filter the client
        unsubscribes: its PUBREL, still owed, now keeps this rule too (a QoS 1 delivery needs nothing more of it)."""
        for flow in self._flows[SERVER].values():
            topic = flow.topic
            if topic is None or not any(matches(name, topic) for name in packet.topic_filters):
                continue
            flow.unsubscribed_in_flight = True
            if flow.stage is Stage.PUBREL and flow.due is not None:
                flow.due.enforces = (*flow.due.enforces, rules_5.UNSUBSCRIBED_IN_FLIGHT_COMPLETED)

    def _in_flight(self, sender: Direction) -> int:
        """QoS 1 and 2 PUBLISHes of ``sender`` unacknowledged here (a QoS 2 until its PUBCOMP)."""
        return sum(1 for flow in self._flows[sender].values() if isinstance(flow.request.packet, Publish))

    def _receive_maximum(self, receiver: Direction) -> int | None:
        """The Receive Maximum ``receiver`` declared (65,535 when left out); None: its CONNECT or CONNACK unseen."""
        declaring = self._connection.connect if receiver is CLIENT else self._connection.connack
        if declaring is None:
            return None
        value = first(declaring.properties, RECEIVE_MAXIMUM)
        return value if isinstance(value, int) else 65_535

    def _at_zero_quota(self, sender: Direction) -> bool | None:
        """``sender`` has as many PUBLISHes unacknowledged as its receiver's Receive Maximum; None: cannot tell
        (flows of an earlier connection make the count a floor, lost answers a ceiling)."""
        maximum = self._receive_maximum(peer(sender))
        if maximum is None or peer(sender) in self._blind:
            return None
        at_zero = self._in_flight(sender) >= maximum
        if not at_zero and (self._connection.may_resume or self._connection.mid_stream or sender in self._blind):
            return None
        return at_zero

    def _check_send_quota(self, seen: Seen, current: Flow | None) -> None:
        """[MQTT-4.9.0-2] No new QoS 1 or 2 PUBLISH at a send quota of zero (the Receive Maximum check of
        :mod:`.limits`, as the flow control of 4.9 states it)."""
        replaced = current is not None and isinstance(current.request.packet, Publish)
        maximum = self._receive_maximum(seen.receiver)
        at_zero = self._at_zero_quota(seen.sender)
        if replaced and at_zero:
            at_zero = None  # the reused identifier's flow may have ended unobserved
        if at_zero is None or maximum is None:
            tag, why = self._quota_unknown(seen, replaced)
            undecided_at(self._ctx, seen, rules_5.ZERO_QUOTA_NO_PUBLISH, tag, why)
            return
        if not at_zero:
            self._ctx.ledger.held(rules_5.ZERO_QUOTA_NO_PUBLISH)
            return
        self._ctx.ledger.fail(
            rules_5.ZERO_QUOTA_NO_PUBLISH,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} is sent with {self._in_flight(seen.sender)} QoS 1 and 2 PUBLISHes unacknowledged; "
            f"the {side_name(seen.receiver)} declared Receive Maximum {maximum}",
            "at a send quota of zero (Receive Maximum PUBLISHes unacknowledged) no QoS 1 or 2 PUBLISH is sent",
        )

    def _quota_unknown(self, seen: Seen, replaced: bool) -> tuple[str, str]:
        """Why the send quota at ``seen`` is not known: a tag of :mod:`.reasons` and a detail."""
        if self._receive_maximum(seen.receiver) is None:
            return reasons.NO_ANSWER, f"the {side_name(seen.receiver)}'s Receive Maximum was not observed"
        if seen.receiver in self._blind or seen.sender in self._blind:
            return reasons.LOST_BYTES, "bytes of the connection were not observed: acknowledgements may be among them"
        if replaced:
            return reasons.AMBIGUOUS, "the flow of the reused Packet Identifier may have ended unobserved"
        if self._connection.mid_stream:
            return reasons.MID_STREAM, "flows begun before the capture are unknown"
        return reasons.EARLIER_SESSION, "the session may hold PUBLISHes in flight from an earlier connection"

    def _reused(self, seen: Seen, packet: Publish) -> tuple[str | None, bool]:
        """A PUBLISH under the identifier of a flow that ended here: a new message, whatever its DUP flag, which
        the receiver answers [MQTT-4.3.2-5, MQTT-4.3.3-9, -12] (the rule its missing answer breaks); re-sending
        a refused message breaks [MQTT-4.4.0-2]."""
        if packet.qos not in (1, 2) or not packet.packet_id:
            return None, False
        done = self._done[seen.sender].pop(packet.packet_id, None)
        if done is None:
            return None, False
        rule, refused_by, answer = done
        if refused_by is not None and packet.dup and _same_message(refused_by, seen):
            self._ctx.ledger.fail(
                rules_5.REFUSED_NOT_RESENT,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} re-sends {refused_by.describe()}, which {answer.describe()} refused with Reason "
                f"Code {_reason_code(answer.packet) or 0:#04x}",
                "a PUBLISH answered with a Reason Code of 0x80 or above counts as acknowledged and is not re-sent",
            )
            return rule, True
        return rule, False

    def _held_before(self, seen: Seen) -> list[bool | None]:
        """Whether the session held each filter of a valid 5.0 UNSUBSCRIBE when it was sent (its UNSUBACK codes
        depend on it)."""
        packet = seen.packet
        if not self._v5 or seen.offends or not isinstance(packet, Unsubscribe):
            return []
        if not self._connection.session_known:
            return [None] * len(packet.topic_filters)
        return [self._subscriptions.holds(name) for name in packet.topic_filters]

    def _note_publication(self, seen: Seen, packet: Publish) -> Published | None:
        """A client PUBLISH the server may route; QoS 0 is surely taken unless it breaks a rule, comes after a
        violation or DISCONNECT, or the server's TCP never acknowledged it (a refusal is the model's to weigh)."""
        if seen.sender is not CLIENT:
            return None
        if seen.offends:
            # Not to be routed: recorded so that the model forbids its delivery (acting on the violation).
            self._ctx.transcript.published.append(Published(seen.event, packet, seen.time))
            return None
        known = not self._v5 or topic_of(seen, packet, self._topics) is not None
        surely = packet.qos == 0 and self._owes_answer(seen) and seen.received and known
        publication = Published(seen.event, packet, seen.time, certain=surely)
        if not known:
            self._unknown_topics.add(seen.event)
        self._ctx.transcript.published.append(publication)
        return publication

    def _note_requests(self, flow: Flow) -> None:
        packet, seen = flow.request.packet, flow.request
        if seen.offends:
            return
        if isinstance(packet, Subscribe):
            flow.subscribed = [Subscribed(seen.event, s.topic_filter, s.qos, seen.time) for s in packet.subscriptions]
            self._ctx.transcript.subscribed.extend(flow.subscribed)
        elif isinstance(packet, Unsubscribe):
            flow.unsubscribed = [Unsubscribed(seen.event, name, seen.time) for name in packet.topic_filters]
            self._ctx.transcript.unsubscribed.extend(flow.unsubscribed)

    def _note_subscriptions(self, seen: Seen) -> str | None:
        """Updates the subscriptions a valid SUBSCRIBE or UNSUBSCRIBE asks to change; an UNSUBSCRIBE that holds no
        filter of the session is [MQTT-3.10.4-5] when its UNSUBACK never comes."""
        packet = seen.packet
        if seen.offends:
            return None
        version = self._connection.version
        if isinstance(packet, Subscribe):
            self._subscriptions.asked(packet, version)
        if not isinstance(packet, Unsubscribe):
            return None
        deletes = self._subscriptions.holds_any(packet.topic_filters)
        self._subscriptions.removed(packet.topic_filters, version)
        return rules.UNSUBACK_WITHOUT_DELETION if self._connection.session_known and not deletes else None

    def _expect(self, flow: Flow) -> None:
        """Opens the obligation of the flow's next step, unless the packet it answers must not be answered."""
        stage, last = flow.stage, flow.last
        step = STEPS[stage]
        owing = flow.owner if step.by_owner else peer(flow.owner)
        rule = flow.missing or step.missing
        request = flow.request.packet
        if not self._owes_answer(last):
            return
        limit = self._ctx.config.answer_timeout
        enforces = self._quota_answers(owing, last)
        if flow.unsubscribed_in_flight and stage is Stage.PUBREL:
            enforces = (*enforces, rules_5.UNSUBSCRIBED_IN_FLIGHT_COMPLETED)
        if self._v5:
            enforces = (*enforces, *self._flow_enforces(flow))
        flow.due = self._ctx.obligations.open(
            Obligation(
                rule,
                owing,
                last.event,
                last.time,
                last.time + limit,
                lambda: (
                    f"send {stage.name} for {describe(request)}",
                    f"the {side_name(owing)} answers {describe(last.packet)} with {stage.name} (within {limit:g} s)",
                ),
                step.on_close,
                informs=_informs(stage, owing, rule, self._v5),
                enforces=enforces,
                needs_acceptance=owing is not CLIENT,
            )
        )

    @staticmethod
    def _flow_enforces(flow: Flow) -> tuple[str, ...]:
        """The 5.0 statements the answer a flow awaits keeps besides its own: [MQTT-4.3.3-8] a PUBREC at all;
        [MQTT-4.3.3-7, -13] a PUBREL or PUBCOMP after the message expired; [MQTT-3.2.2-10] a SUBACK for a SUBSCRIBE
        above the declared Maximum QoS."""
        found: list[str] = []
        if flow.stage is Stage.PUBREC:
            found.append(rules_5.QOS2_PUBREC_SAME_ID)
        if flow.expired is not None and flow.stage in (Stage.PUBREL, Stage.PUBCOMP):
            found.append(flow.expired)
        if flow.above_maximum and flow.stage is Stage.SUBACK:
            found.append(rules_5.SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED)
        return tuple(found)

    def _quota_answers(self, owing: Direction, request: Seen) -> tuple[str, ...]:
        """[MQTT-3.3.4-10, MQTT-4.9.0-3] A 5.0 server at a send quota of zero still sends what is not a PUBLISH
        (PINGRESP, SUBACK, PUBACK, PUBREL, ...) without delay: the rules its answer to ``request`` also keeps."""
        if not self._v5 or owing is CLIENT:
            return ()
        if self._at_zero_quota(owing):
            return (rules_5.QUOTA_HOLDS_ONLY_PUBLISH, rules_5.ZERO_QUOTA_ANSWERS)
        return ()

    def _owes_answer(self, seen: Seen) -> bool:
        """The receiver of ``seen`` owes it an answer: not when it breaks a rule or follows a violation of its
        sender, nor when the client sent it after DISCONNECT, after the server's own DISCONNECT (5.0: the server
        sends nothing after it) or on a refused connection."""
        if seen.offends or self._offences.by(seen.sender) is not None:
            return False
        connection = self._connection
        return seen.sender is not CLIENT or (
            connection.disconnect_seen is None
            and connection.server_disconnect_seen is None
            and connection.refused_at is None
        )

    # Answers ----------------------------------------------------------------------------------------------------

    def _answer(self, seen: Seen, packet_type: PacketType, packet_id: int) -> int | None:
        owner = seen.sender if packet_type is PacketType.PUBREL else seen.receiver
        flow = self._flows[owner].get(packet_id)
        if flow is not None and AWAITED[flow.stage] == packet_type:
            return self._advance(flow, seen, packet_type)
        if flow is not None and (flow.stage, packet_type) in OUT_OF_STEP:
            broken = OUT_OF_STEP[(flow.stage, packet_type)]
            if self._v5 and flow.stage is Stage.PUBCOMP and packet_type is PacketType.PUBREL:
                self._resent_here(seen, flow)
            if broken is not None:
                self._ctx.ledger.fail(
                    broken[0],
                    seen.sender,
                    seen.time,
                    seen.event,
                    f"{seen.describe()} answers {flow.last.describe()}, which awaits {flow.stage.name}",
                    broken[1],
                )
            return flow.last.event
        if packet_type is PacketType.PUBREL and self._answers_unknown_pubrec(seen, owner, packet_id):
            return self._unknown_pubrecs[owner].pop(packet_id).event
        self._stray(seen, packet_type, packet_id, owner)
        return None

    def _answers_unknown_pubrec(self, seen: Seen, owner: Direction, packet_id: int) -> bool:
        """5.0: the PUBREL ``seen`` answers a PUBREC that named no flow of its sender. A sender "MUST send a PUBREL
        packet when it receives a PUBREC packet ... with a Reason Code value less than 0x80" [MQTT-4.3.3-4], and no
        statement binds the code of one that finds no flow: 0x92 "Packet Identifier not found" says so, 0x00 (or
        left out) is what mosquitto 2 sends, as the PUBCOMP of an unknown PUBREL may be either ("pubcomp-unknown")."""
        unknown = self._unknown_pubrecs[owner].get(packet_id)
        if unknown is None:
            return False
        code = _reason_code(seen.packet) or 0x00
        return code == PACKET_ID_NOT_FOUND or (code == 0x00 and (_reason_code(unknown.packet) or 0x00) < 0x80)

    def _advance(self, flow: Flow, seen: Seen, packet_type: PacketType) -> int:
        if flow.due is not None:
            self._ctx.obligations.fulfil(flow.due)
            flow.due = None
        refusal = self._refusal(seen)
        if not flow.request.offends:  # answering an offending request is judged as acting on it, nothing else
            self._check_order(flow, seen, packet_type)
            self._note_answer(flow, seen, refusal)
            self._check_outcome(flow, seen)
        answered = flow.last.event
        if self._v5 and isinstance(flow.request.packet, Publish):
            self._answered_in_turn(flow, seen, refusal)
        flow.last = seen
        step = STEPS[flow.stage]
        if step.then is None or refusal:
            del self._flows[flow.owner][flow.packet_id]
            if refusal and flow.stage is Stage.PUBREC:
                self._ended[flow.owner][flow.packet_id] = seen
        else:
            flow.stage, flow.missing = step.then, None
            flow.outcomes = KNOWN_OUTCOMES.get(flow.stage) if self._v5 else None
            flow.expired = self._expired_by(flow, seen) if self._v5 else None
            self._expect(flow)
        return answered

    @staticmethod
    def _expired_by(flow: Flow, seen: Seen) -> str | None:
        """The statement that keeps a QoS 2 flow going when its message's Message Expiry Interval had surely passed
        by ``seen`` (a PUBREC: the sender still sends PUBREL [MQTT-4.3.3-7]; a PUBREL: the receiver still sends
        PUBCOMP [MQTT-4.3.3-13]); None when it had not, or may not have."""
        request = flow.request
        packet = request.packet
        if not isinstance(packet, Publish) or packet.qos != 2 or request.offends:
            return None
        interval = message_expiry(packet.properties)
        if interval is None or state_at((request.time, request.time), interval, seen.time) != EXPIRED:
            return None
        if flow.stage is Stage.PUBREL:
            return rules_5.QOS2_SENT_NOT_EXPIRED
        if flow.stage is Stage.PUBCOMP:
            return rules_5.QOS2_EXPIRED_COMPLETED
        return None

    def _answered_in_turn(self, flow: Flow, seen: Seen, refusal: bool) -> None:
        """A 5.0 QoS flow's step answered: its sender held the packet until then [MQTT-4.3.2-3, MQTT-4.3.3-3, -5]
        without re-sending it on this connection [MQTT-4.4.0-1] (nor the PUBLISH after its PUBREL
        [MQTT-4.3.3-6]); a flow that ends frees its identifier for a new message [MQTT-4.3.2-5, MQTT-4.3.3-9, -12],
        and one refused is acknowledged: a re-send of it is [MQTT-4.4.0-2]'s finding later."""
        held = HELD_UNTIL.get(flow.stage)
        if held is not None:
            self._ctx.ledger.held(held[0])
            self._ctx.ledger.held(rules_5.RESEND_ONLY_ON_RESUME)
        if refusal:
            self._ctx.ledger.held(rules_5.REFUSED_NOT_RESENT)
        elif flow.owner is CLIENT and flow.stage in (Stage.PUBACK, Stage.PUBREC) and not flow.request.offends:
            self._qos_accepted(flow)
        if flow.stage is Stage.PUBCOMP:
            self._ctx.ledger.held(rules_5.QOS2_NO_PUBLISH_AFTER_PUBREL)
        reused = REUSED_AFTER.get((flow.stage, refusal))
        if reused is not None:
            self._done[flow.owner][flow.packet_id] = (reused, flow.request if refusal else None, seen)

    def _qos_accepted(self, flow: Flow) -> None:
        """[MQTT-3.2.2-9] A client PUBLISH within the declared Maximum QoS taken: the server supports that QoS, as
        its CONNACK said."""
        maximum = self._maximum_qos()
        packet = flow.request.packet
        if maximum is not None and isinstance(packet, Publish) and packet.qos <= maximum:
            self._ctx.ledger.held(rules_5.MAXIMUM_QOS_DECLARED)

    def _refusal(self, seen: Seen) -> bool:
        """A 5.0 PUBACK or PUBREC from 0x80 up: the receiver refused the message, its flow ends there (no delivery
        is owed, and no PUBREL follows a refusing PUBREC [MQTT-4.3.3-4])."""
        packet = seen.packet
        return (
            self._v5
            and packet is not None
            and packet.packet_type in (PacketType.PUBACK, PacketType.PUBREC)
            and refuses(_reason_code(packet))
        )

    def _note_answer(self, flow: Flow, seen: Seen, refusal: bool) -> None:
        request, answer = flow.request.packet, seen.packet
        version = self._connection.version
        if isinstance(request, Subscribe) and isinstance(answer, Suback):
            self._check_suback(seen, request, answer)
            if flow.above_maximum:
                self._check_above_maximum(seen, request, answer)
            for record, code in zip(flow.subscribed, answer.return_codes, strict=False):
                record.granted, record.acked = (None if refused(code, version) else code), seen.time
        if isinstance(request, Unsubscribe) and isinstance(answer, Unsuback) and self._v5:
            self._subscriptions.unsubscribed(request.topic_filters)
            self._check_unsuback(flow, seen, request, answer)
        for unsubscribed in flow.unsubscribed:
            unsubscribed.acked = seen.time
        if flow.published is not None and flow.stage in (Stage.PUBACK, Stage.PUBREC) and not refusal:
            # 0x10 "No matching subscribers" is a success: the server took the message (to a topic known here).
            flow.published.accepted = seen.time
            flow.published.certain = flow.published.event not in self._unknown_topics

    def _check_outcome(self, flow: Flow, seen: Seen) -> None:
        """A 5.0 answer whose Reason Code the situation fixes (see :data:`ALLOWED_OUTCOMES`)."""
        if flow.outcomes is None or not self._v5:
            return
        outcomes = ALLOWED_OUTCOMES[flow.outcomes]
        code = _reason_code(seen.packet) or 0
        # [MQTT-4.3.3-7, -13] After the message expired the flow goes on as before: the same codes are right.
        judged = (outcomes.rule,) if flow.expired is None else (outcomes.rule, flow.expired)
        if outcomes.allows(code):
            for rule in judged:
                self._ctx.ledger.held(rule)
            return
        self._ctx.ledger.fail(
            outcomes.rule,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} carries Reason Code {_code_name(outcomes, code)} in answer to "
            f"{flow.last.describe()}"
            + ("" if flow.expired is None else " (sent after the message's Message Expiry Interval passed)"),
            outcomes.expected(),
            also=judged[1:],
        )

    def lost(self, sender: Direction, event: int) -> None:
        """Bytes ``sender`` sent were not observed (event ``event``): its answers may be among them."""
        self._blind.add(sender)
        self._lost_at[sender] = max(event, self._lost_at.get(sender, event))

    def _check_order(self, flow: Flow, seen: Seen, packet_type: PacketType) -> None:
        """[MQTT-4.6.0-2, -3, -4] The client acknowledges in the order the packets it answers arrived."""
        rule = ORDER_RULES.get(packet_type)
        if rule is None or seen.sender is not CLIENT:
            return
        earlier = [
            other
            for other in self._flows[flow.owner].values()
            if other.stage is flow.stage and other.last.event < flow.last.event
        ]
        # Client bytes unobserved before the first packet the order concerns cannot hold an answer to any of them
        # (the client sent them before that packet reached it): only a loss from there on leaves the order open.
        lost_at = self._lost_at.get(CLIENT)
        if lost_at is not None and lost_at > min(other.last.event for other in (flow, *earlier)):
            undecided_at(
                self._ctx,
                seen,
                rule,
                reasons.LOST_BYTES,
                "bytes the client sent were not captured: an answer may be among them",
            )
            return
        if not earlier:
            return
        first = min(earlier, key=lambda other: other.last.event)
        self._ctx.ledger.fail(
            rule,
            CLIENT,
            seen.time,
            seen.event,
            f"{seen.describe()} answers {flow.last.describe()} before {first.last.describe()}, which arrived first",
            f"the client sends {packet_type.name} packets in the order the packets they answer arrived",
        )

    def _check_suback(self, seen: Seen, subscribe: Subscribe, suback: Suback) -> None:
        """[MQTT-3.8.4-5] One return code per Topic Filter of the SUBSCRIBE."""
        self._subscriptions.answered(subscribe, suback, self._connection.version, seen.event)
        if self._v5 and len(subscribe.subscriptions) > 1 and subscribe.packet_id:
            self._answered_subscribes[subscribe.packet_id] = seen
            if len(suback.return_codes) == len(subscribe.subscriptions):
                self._ctx.ledger.held(rules_5.SUBSCRIBE_AS_SEQUENCE)
        if len(suback.return_codes) == len(subscribe.subscriptions):
            # [MQTT-3.9.3-2] One code for each filter; the codec holds each to the table (a reserved one is its).
            if not any(v.rule_key == codec_rules.SUBACK_RETURN_CODES for v in seen.errors):
                self._ctx.ledger.held(rules_5.SUBACK_CODE_FOR_EACH_FILTER)
            self._check_suback_order(seen, subscribe, suback)
            return
        broken = [rules.SUBACK_CODE_PER_FILTER]
        if self._v5:
            broken.append(rules_5.SUBACK_CODE_FOR_EACH_FILTER)  # [MQTT-3.9.3-2] "for each Topic Filter received"
        self._ctx.ledger.fail(
            broken[0],
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} holds {len(suback.return_codes)} return code(s) for the "
            f"{len(subscribe.subscriptions)} Topic Filter(s) of SUBSCRIBE id {subscribe.packet_id}",
            "a SUBACK holds one return code per Topic Filter of the SUBSCRIBE it answers",
            also=broken[1:],
        )

    def _check_above_maximum(self, seen: Seen, subscribe: Subscribe, suback: Suback) -> None:
        """[MQTT-3.2.2-10] A server that declared a Maximum QoS below a filter's requested QoS still accepts the
        subscription (granting what it supports): refusing it with a code that says nothing more precise (0x80,
        0x83) breaks the rule; a refusal of its own (0x87 Not authorized, 0x97 Quota exceeded, ...) decides
        nothing."""
        maximum = self._maximum_qos()
        if maximum is None:
            return
        above = [
            (sub, code)
            for sub, code in zip(subscribe.subscriptions, suback.return_codes, strict=False)
            if sub.qos > maximum
        ]
        wrong = [
            f"{code:#04x} for {quoted(sub.topic_filter)} (QoS {sub.qos})" for sub, code in above if code in QOS_REFUSALS
        ]
        other = [
            f"{code:#04x} for {quoted(sub.topic_filter)}"
            for sub, code in above
            if refuses(code) and code not in QOS_REFUSALS
        ]
        if wrong:
            self._ctx.ledger.fail(
                rules_5.SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} refuses {', '.join(wrong)}, above the Maximum QoS {maximum} its CONNACK declared",
                "a server without QoS 1 or QoS 2 still accepts a SUBSCRIBE requesting them, granting a QoS it supports",
            )
        elif other:
            undecided_at(
                self._ctx,
                seen,
                rules_5.SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED,
                reasons.AMBIGUOUS,
                f"{seen.describe()} refuses {', '.join(other)} for a reason the QoS need not be",
            )
        elif above:
            self._ctx.ledger.held(rules_5.SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED)

    def _check_suback_order(self, seen: Seen, subscribe: Subscribe, suback: Suback) -> None:
        """[MQTT-3.9.3-1] The return codes follow the order of the Topic Filters: a code granting more than the
        filter in its place requested shows them out of order (the server may grant less, never more). In 5.0
        [MQTT-3.8.4-7] any refusal of ALLOWED_OUTCOMES["suback"] may stand in a filter's place."""
        version = self._connection.version
        wrong = [
            f"code {code:#04x} for {quoted(sub.topic_filter)}, which requested QoS {sub.qos}"
            for code, sub in zip(suback.return_codes, subscribe.subscriptions, strict=True)
            if not refused(code, version) and code > sub.qos
        ]
        if not wrong:
            self._ctx.ledger.held(rules.SUBACK_CODES_IN_ORDER)
            return
        expected = (
            "the SUBACK return codes follow the order of the Topic Filters, each at most the QoS its filter requested"
        )
        if self._v5:
            expected = f"{ALLOWED_OUTCOMES['suback'].expected()} (or a QoS up to the one requested)"
        self._ctx.ledger.fail(
            rules.SUBACK_CODES_IN_ORDER,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} grants more than requested: {'; '.join(wrong)}",
            expected,
        )

    def _check_unsuback(self, flow: Flow, seen: Seen, unsubscribe: Unsubscribe, unsuback: Unsuback) -> None:
        """[MQTT-3.11.3-2] A 5.0 UNSUBACK holds one Reason Code per Topic Filter; [MQTT-3.11.3-1] in their order:
        a filter the session held is deleted or refused, one it did not hold gets 0x11 "No subscription existed",
        0x00 or a refusal (ALLOWED_OUTCOMES)."""
        filters, codes = unsubscribe.topic_filters, unsuback.reason_codes
        several = len(filters) > 1
        if several and unsubscribe.packet_id:
            self._answered_unsubscribes[unsubscribe.packet_id] = seen
        if len(codes) != len(filters):
            # [MQTT-3.10.4-6] One UNSUBACK answers all the filters of the sequence.
            self._ctx.ledger.fail(
                UNSUBACK_CODE_PER_FILTER,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} holds {len(codes)} Reason Code(s) for the {len(filters)} Topic Filter(s) of "
                f"UNSUBSCRIBE id {unsubscribe.packet_id}",
                "an UNSUBACK holds one Reason Code per Topic Filter of the UNSUBSCRIBE it answers",
                also=(rules_5.UNSUBSCRIBE_AS_SEQUENCE,) if several else (),
            )
            return
        self._ctx.ledger.held(UNSUBACK_CODE_PER_FILTER)
        if several:
            self._ctx.ledger.held(rules_5.UNSUBSCRIBE_AS_SEQUENCE)
        held = flow.held or [None] * len(filters)
        wrong: list[str] = []
        unknown: list[str] = []
        expected: list[str] = []
        for name, code, holds in zip(filters, codes, held, strict=True):
            if holds is None:
                unknown.append(quoted(name))
                continue
            outcomes = ALLOWED_OUTCOMES["unsuback-held" if holds else "unsuback-not-held"]
            if not outcomes.allows(code):
                state = "held" if holds else "did not hold"
                wrong.append(f"{_code_name(outcomes, code)} for {quoted(name)}, which the session {state}")
                expected.append(outcomes.expected())
        if wrong:
            self._ctx.ledger.fail(
                UNSUBACK_CODES_IN_ORDER,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} answers out of place: {'; '.join(wrong)}",
                "; ".join(dict.fromkeys(expected)),
            )
        elif unknown:
            why = (
                "the session may hold subscriptions of an earlier connection"
                if not self._connection.session_known
                else "a SUBSCRIBE or UNSUBSCRIBE of the filter was still unanswered"
            )
            undecided_at(
                self._ctx,
                seen,
                UNSUBACK_CODES_IN_ORDER,
                reasons.EARLIER_SESSION if not self._connection.session_known else reasons.AMBIGUOUS,
                f"whether the session held {', '.join(unknown)} is unknown ({why})",
            )
        else:
            self._ctx.ledger.held(UNSUBACK_CODES_IN_ORDER)

    def _stray(self, seen: Seen, packet_type: PacketType, packet_id: int, owner: Direction) -> None:
        stray = STRAYS[packet_type]
        if seen.offends:
            return  # a malformed answer is the codec's finding; its identifier proves nothing
        if packet_type is PacketType.SUBACK and packet_id in self._answered_subscribes:
            self._second_suback(seen, self._answered_subscribes[packet_id])
        if packet_type is PacketType.UNSUBACK and packet_id in self._answered_unsubscribes:
            self._second_unsuback(seen, self._answered_unsubscribes[packet_id])
        also = self._stray_also(packet_type)
        if owner in self._blind:
            reason = reasons.reason(
                reasons.LOST_BYTES, f"bytes from the {side_name(owner)} were skipped undecoded or not captured"
            )
            for rule in (stray.rule, *also):
                self._ctx.ledger.undecided(rule, reason, side=seen.sender, event=seen.event, time=seen.time)
            return
        if self._connection.mid_stream:
            for rule in (stray.rule, *also):
                undecided_at(
                    self._ctx, seen, rule, reasons.MID_STREAM, f"{seen.describe()} may answer a packet sent before it"
                )
            return
        if packet_type is PacketType.PUBREL and self._connection.may_resume:
            # [MQTT-4.4.0-1] On a resumed session a PUBREL may finish a flow begun on an earlier connection.
            undecided_at(
                self._ctx,
                seen,
                stray.rule,
                reasons.EARLIER_SESSION,
                f"{seen.describe()} may continue a QoS 2 flow of an earlier connection (session resumed)",
            )
            self._await_pubcomp(seen, packet_id, "pubcomp-unknown")
            return
        ended = self._ended[owner].get(packet_id) if packet_type is PacketType.PUBREL else None
        if ended is not None:
            # [MQTT-4.3.3-4] A PUBREL answers only a PUBREC below 0x80: a refusing PUBREC ended the flow.
            self._ctx.ledger.fail(
                rules.QOS2_SENDER,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} follows {ended.describe()} with Reason Code "
                f"{_reason_code(ended.packet) or 0:#04x}, which refused the message and ended its flow",
                "a QoS 2 sender sends PUBREL only for a PUBREC with a Reason Code below 0x80",
            )
        else:
            self._ctx.ledger.fail(
                stray.rule,
                seen.sender,
                seen.time,
                seen.event,
                f"{seen.describe()} matches no {stray.awaited} of the {side_name(owner)} in flight",
                stray.expected,
                also=also,
            )
        if packet_type is PacketType.PUBREL:
            # Every PUBREL gets its PUBCOMP: [MQTT-4.3.3-11], here "Packet Identifier not found" or Success; 3.1.1's
            # receiver "MUST respond to a PUBREL packet by sending a PUBCOMP packet" [MQTT-4.3.3-2] whatever it holds.
            self._await_pubcomp(seen, packet_id, "pubcomp-unknown")
        if packet_type is PacketType.PUBREC and self._v5:
            self._unknown_pubrecs[owner][packet_id] = seen

    def _stray_also(self, packet_type: PacketType) -> tuple[str, ...]:
        """The statements an answer with an identifier nothing awaits breaks besides its own: [MQTT-2.2.1-6] for
        SUBACK and UNSUBACK; in 5.0 [MQTT-4.3.3-8] for PUBREC."""
        if packet_type in (PacketType.SUBACK, PacketType.UNSUBACK):
            return (rules_5.SUBSCRIBE_ACK_SAME_ID,)
        if packet_type is PacketType.PUBREC and self._v5:
            return (rules_5.QOS2_PUBREC_SAME_ID,)
        return ()

    def _second_unsuback(self, seen: Seen, first: Seen) -> None:
        """[MQTT-3.10.4-6] An UNSUBSCRIBE of several filters gets one UNSUBACK, not one per filter."""
        self._ctx.ledger.fail(
            rules_5.UNSUBSCRIBE_AS_SEQUENCE,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} answers again the UNSUBSCRIBE of several filters that {first.describe()} answered",
            "an UNSUBSCRIBE of several Topic Filters is handled as a sequence of UNSUBSCRIBEs answered by one UNSUBACK",
        )

    def _second_suback(self, seen: Seen, first: Seen) -> None:
        """[MQTT-3.8.4-5] A SUBSCRIBE of several filters gets one combined SUBACK, not one per filter."""
        self._ctx.ledger.fail(
            rules_5.SUBSCRIBE_AS_SEQUENCE,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} answers again the SUBSCRIBE of several filters that {first.describe()} answered",
            "a SUBSCRIBE of several Topic Filters is handled as a sequence of SUBSCRIBEs answered by one SUBACK",
        )

    def _await_pubcomp(self, seen: Seen, packet_id: int, outcomes: str) -> None:
        """A PUBREL no flow here awaited still gets its PUBCOMP; in 5.0 with the codes ``outcomes`` names."""
        flow = Flow(seen.sender, packet_id, seen, Stage.PUBCOMP, seen)
        if self._v5:
            flow.outcomes, flow.missing = outcomes, ALLOWED_OUTCOMES[outcomes].rule
        self._flows[seen.sender][packet_id] = flow
        self._expect(flow)

    # PINGREQ / PINGRESP -----------------------------------------------------------------------------------------

    def _ping(self, seen: Seen) -> None:
        """[MQTT-3.12.4-1] The server answers each PINGREQ with a PINGRESP."""
        if seen.sender is not CLIENT:
            return
        due = None
        if self._owes_answer(seen):
            limit = self._ctx.config.answer_timeout
            due = self._ctx.obligations.open(
                Obligation(
                    rules.PINGRESP_SENT,
                    seen.receiver,
                    seen.event,
                    seen.time,
                    seen.time + limit,
                    lambda: ("send PINGRESP", f"the server answers PINGREQ with PINGRESP (within {limit:g} s)"),
                    OnClose.BREAKS,  # a MUST with no exception [MQTT-3.12.4-1]: closing instead is not an answer
                    enforces=self._quota_answers(seen.receiver, seen),
                    needs_acceptance=True,
                )
            )
        self._pings.append((seen, due))

    def _pong(self) -> int | None:
        if not self._pings:
            return None
        seen, due = self._pings.pop(0)
        if due is not None:
            self._ctx.obligations.fulfil(due)
        return seen.event


def _informs(stage: Stage, owing: Direction, rule: str, v5: bool) -> tuple[str, ...]:
    """The rules the answer a flow awaits also decides: its identifier, its type (the first answer to a
    PUBLISH), its return codes (SUBACK; UNSUBACK in 5.0), and the client's acknowledgement order."""
    informs = [STRAYS[AWAITED[stage]].rule]
    if stage in (Stage.PUBACK, Stage.PUBREC):
        informs.append(rules.ACK_MATCHES_QOS)
    if stage is Stage.SUBACK:
        informs += [rules.SUBACK_CODE_PER_FILTER, rules.SUBACK_CODES_IN_ORDER]
    if stage in (Stage.SUBACK, Stage.UNSUBACK):
        informs.append(rules_5.SUBSCRIBE_ACK_SAME_ID)  # [MQTT-2.2.1-6]
    if stage is Stage.UNSUBACK and v5:
        informs += [UNSUBACK_CODES_IN_ORDER, UNSUBACK_CODE_PER_FILTER]
    order = ORDER_RULES.get(AWAITED[stage])
    if order is not None and owing is CLIENT:
        informs.append(order)
    return tuple(r for r in dict.fromkeys(informs) if r != rule)


def _resends(flow: Flow, seen: Seen) -> bool:
    """A DUP PUBLISH of the same QoS before its PUBREL re-sends the message in flight."""
    packet, original = seen.packet, flow.request.packet
    return (
        isinstance(packet, Publish)
        and isinstance(original, Publish)
        and packet.dup
        and packet.qos == original.qos
        and flow.stage in (Stage.PUBACK, Stage.PUBREC, Stage.PUBREL)
    )


def _same_message(first: Seen, second: Seen) -> bool:
    a, b = first.packet, second.packet
    return (
        isinstance(a, Publish) and isinstance(b, Publish) and (a.topic, a.payload, a.qos) == (b.topic, b.payload, b.qos)
    )


def _reason_code(packet: Packet | None) -> int | None:
    """The Reason Code of a 5.0 PUBACK, PUBREC, PUBREL or PUBCOMP (None: left out, which means Success)."""
    code = getattr(packet, "reason_code", None)
    return code if isinstance(code, int) else None


def _code_name(outcomes: Outcomes, code: int) -> str:
    return f"{code:#04x} ({code_name(code, outcomes.packet_type)})"
