"""Opening and closing a connection: CONNECT first and once, the CONNACK the server owes each CONNECT, the close
after a refusal, and the client's DISCONNECT."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from mqttaudit.codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Packet,
    PacketType,
    ProtocolVersion,
    Publish,
    StreamDecoder,
    reason_codes,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.properties import first
from mqttaudit.spec import identity
from mqttaudit.spec.ids import R5

from ..codec.describe import quoted
from ..codec.remaining_length import read_remaining_length
from . import lifecycle, reasons, rules
from .context import Context, Seen, describe
from .events import Closed, Lost
from .handshake_5 import Handshake5
from .lifecycle import Phase, Transition, input_of, step
from .obligations import Obligation, OnClose
from .sides import side_name
from .violations import Offence, Offences

SERVER: Final = Direction.FROM_SERVER
CLIENT: Final = Direction.FROM_CLIENT
#: Client packets the server answers; processing one after a refusal would show.
ANSWERED_TYPES: Final = frozenset({PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE, PacketType.PINGREQ, PacketType.PUBREL})


#: The ClientIds every server must allow [MQTT-3.1.3-5].
PLAIN_CLIENT_ID: Final = re.compile("[0-9a-zA-Z]{1,23}")
#: CONNACK return code 0x02.
IDENTIFIER_REJECTED: Final = 0x02
#: Bytes of the MQTT 3.1.1 CONNECT variable header: Protocol Name "MQTT" (6), Level, Connect Flags, Keep Alive (2).
VARIABLE_HEADER_LENGTH: Final = 10


def is_answered(packet: Packet | None) -> bool:
    """The server answers this client packet (QoS 0 PUBLISH, PUBACK, PUBCOMP and DISCONNECT get no answer)."""
    if isinstance(packet, Publish):
        return packet.qos in (1, 2)
    return packet is not None and packet.packet_type in ANSWERED_TYPES


@dataclass(frozen=True, slots=True)
class Reaction:
    """How the server must answer one CONNECT."""

    #: The statement that fixes the reaction.
    rule: str
    #: CONNACK return codes the server may send; empty: it must close without any CONNACK.
    codes: frozenset[int]
    #: It must close the connection after its CONNACK.
    must_close: bool
    #: It may close without sending a CONNACK at all (none of the codes fits [MQTT-3.2.2-6]).
    close_excuses: bool
    why: str
    #: Closing without any CONNACK is itself a conforming answer (the CONNACK is a MAY): the close keeps the rule.
    close_answers: bool = False
    #: CONNACK codes the server may send instead in MQTT 5.0's form, which shows it speaks 5.0 (see
    #: :data:`REFUSE_PROTOCOL_LEVEL`).
    codes_5: frozenset[int] = frozenset()
    #: The statement the close after a refusing CONNACK answers to, when it is the reaction's own rather than the
    #: general one (3.1.1 [MQTT-3.2.2-5], 5.0 [MQTT-3.2.2-7]).
    refusal_rule: str | None = None
    #: An accepting CONNACK (0x00) takes the connection out of this specification: the server follows another
    #: protocol, and nothing after it is judged.
    accepting_leaves: bool = False


ACCEPT_OR_REFUSE: Final = Reaction(
    rules.CONNACK_FOR_VALID_CONNECT, frozenset(range(6)), False, True, "a valid CONNECT gets a CONNACK"
)
#: An unsupported Protocol Level, judged as 3.1.1 asks: "The Server MUST respond to the CONNECT Packet with a CONNACK
#: return code 0x01 (unacceptable protocol level) and then disconnect the Client if the Protocol Level is not supported
#: by the Server" [MQTT-3.1.2-2 of 3.1.1]. A level that is neither 4 nor 5 names neither version, and a server that
#: also speaks 5.0 is held to 5.0's text for a version it does not accept: "the Server MAY send a CONNACK packet with
#: Reason Code 0x84 (Unsupported Protocol Version) and then MUST close the Network Connection" [MQTT-3.1.2-2 of 5.0].
#: So a CONNACK 0x84 written in 5.0's form (``20 03 00 84 00``, properties allowed), which only a server that speaks
#: 5.0 sends, is a conforming refusal too, followed by the close like 0x01. The same code in 3.1.1's two bytes
#: (``20 02 00 84``) is well formed in neither version and stays a failure; so does a close without any CONNACK,
#: which 5.0 allows but which nothing on the connection shows to come from a server that speaks 5.0 (when the judge
#: knows it does, :data:`REFUSE_PROTOCOL_LEVEL_5` applies).
REFUSE_PROTOCOL_LEVEL: Final = Reaction(
    rules.UNSUPPORTED_PROTOCOL_LEVEL,
    frozenset({1}),
    True,
    False,
    "an unsupported Protocol Level is refused with CONNACK 0x01 (a server that speaks 5.0: 0x84 in 5.0's form), then "
    "the connection is closed",
    codes_5=frozenset({0x84}),
)
REFUSE_CLIENT_ID: Final = Reaction(
    rules.EMPTY_CLIENT_ID_WITHOUT_CLEAN_SESSION,
    frozenset({2}),
    True,
    False,
    "a zero-length ClientId with CleanSession 0 is refused with CONNACK 0x02, then the connection is closed",
)
#: 5.0 [MQTT-3.1.2-2]: a server that also speaks 5.0 may refuse an unsupported Protocol Version with CONNACK 0x84
#: (or, as 3.1.1 asks, 0x01) or close without one; it closes either way.
REFUSE_PROTOCOL_LEVEL_5: Final = Reaction(
    rules.UNSUPPORTED_PROTOCOL_LEVEL,
    frozenset({1, 0x84}),
    True,
    False,
    "an unsupported Protocol Version is refused, with CONNACK 0x84 (5.0) or 0x01 (3.1.1) or without a CONNACK, "
    "then the connection is closed",
    close_answers=True,
)
CLOSE_WITHOUT_CONNACK: Final = Reaction(
    rules.MALFORMED_CONNECT,
    frozenset(),
    True,
    False,
    "a CONNECT that breaks section 3.1 is answered by closing the connection, without CONNACK",
)

#: [MQTT-6.0.0-1] A CONNECT sent in a WebSocket text frame, sound otherwise, is closed on without a CONNACK: the
#: recipient of a packet in any data frame but a binary one closes the connection, and acts on nothing in it.
CLOSE_ON_TEXT_FRAME: Final = Reaction(
    rules.BINARY_FRAMES,
    frozenset(),
    True,
    False,
    "a CONNECT in a WebSocket text frame is answered by closing the connection, without CONNACK",
)

#: MQTT 5.0 CONNACK Reason Codes that refuse (0x80 and above, Table 3.1).
REFUSALS_5: Final = frozenset(code for code in reason_codes.ALLOWED[PacketType.CONNACK] if code >= 0x80)
ACCEPT_OR_REFUSE_5: Final = Reaction(
    rules.CONNACK_FOR_VALID_CONNECT,
    frozenset({0x00}) | REFUSALS_5,
    False,
    True,
    "a valid CONNECT gets a CONNACK: 0x00 (Success) or a refusal of 0x80 or above",
)
#: 5.0 [MQTT-3.1.4-1]: close on a malformed CONNECT; a CONNACK of 0x80 or above may come first (section 4.13).
CLOSE_ON_MALFORMED_5: Final = Reaction(
    rules.MALFORMED_CONNECT,
    frozenset(),
    True,
    False,
    "a CONNECT that breaks section 3.1 is answered by closing the connection (a CONNACK of 0x80 or above may "
    "come first)",
)
#: 5.0 [MQTT-3.1.2-1]: a CONNECT of Protocol Version 5 whose only defect is another Protocol Name. "A Server which
#: supports multiple protocols uses the Protocol Name to determine whether the data is MQTT": it may accept the
#: CONNECT as another protocol's (nothing after is judged); a server that does not accept it closes the connection,
#: a CONNACK 0x84 allowed first (or a refusal in the form of the protocol it took the name for: 3.1's 0x01 to
#: "MQIsdp"). The statement binds the server only when it does not accept.
REFUSE_OR_FOLLOW_NAME_5: Final = Reaction(
    codec_rules.PROTOCOL_NAME,
    frozenset(range(0x100)),
    False,
    True,
    "a CONNECT with another Protocol Name is accepted as another protocol's, or refused by closing the connection "
    "(a CONNACK 0x84 allowed first)",
    close_answers=True,
    refusal_rule=codec_rules.PROTOCOL_NAME,
    accepting_leaves=True,
)
#: The CONNACK code that rejects a Client Identifier, per version (3.1.1 0x02 "identifier rejected", 5.0 0x85
#: "Client Identifier not valid").
CLIENT_ID_REJECTED: Final = {identity.V3_1_1: IDENTIFIER_REJECTED, identity.V5: 0x85}


def in_5_0_form(seen: Seen) -> bool:
    """The server's CONNACK of ``seen``, read as MQTT 5.0, is a well-formed 5.0 CONNACK (Property Length and all)."""
    frames = StreamDecoder(Direction.FROM_SERVER, version=ProtocolVersion.V5).feed(seen.frame.raw)
    return (
        len(frames) == 1
        and isinstance(frames[0].packet, Connack)
        and not any(not codec_rules.is_advisory(v.rule) for v in frames[0].violations)
    )


def header_cut(seen: Seen) -> bool:
    """The CONNECT ends inside its variable header (a Remaining Length shorter than it): the name, level or flags it
    would be judged by were never sent, so it is malformed, not another protocol or an unsupported level."""
    raw, frame_start = seen.frame.raw, seen.frame.offset
    _remaining, body = read_remaining_length(raw, 1, len(raw))
    if body < 0:
        return False
    header_end = body + VARIABLE_HEADER_LENGTH
    return any(v.rule_key == codec_rules.FIELD_OVERRUN and v.offset - frame_start < header_end for v in seen.errors)


#: Server Keep Alive (property 0x13 of a 5.0 CONNACK).
SERVER_KEEP_ALIVE: Final = 0x13
#: The versions the judge judges, by Protocol Level.
JUDGED_LEVELS: Final = frozenset({4, 5})


def foreign_protocol(connect: Connect, supported_levels: frozenset[int]) -> str | None:
    """Why a CONNECT is outside the versions the judge knows for this server (so its reaction is not judged), or
    None."""
    speaks_5 = connect.protocol_level == ProtocolVersion.V5.level and connect.protocol_level in supported_levels
    if connect.protocol_name != "MQTT" and not speaks_5:  # 5.0 refuses another name at its level [MQTT-3.1.2-1]
        return (
            f"protocol name {quoted(connect.protocol_name)}: the server may follow another specification (MQTT-3.1.2-1)"
        )
    if connect.protocol_level not in JUDGED_LEVELS and connect.protocol_level in supported_levels:
        return f"protocol level {connect.protocol_level} is supported by the server and is not judged"
    return None


def connect_version(connect: Connect, supported_levels: frozenset[int]) -> str:
    """The version a CONNECT opens the connection in: its level's, when the server supports that level; else
    3.1.1 (the server answers a level it does not support as 3.1.1 says [MQTT-3.1.2-2])."""
    version = ProtocolVersion.from_level(connect.protocol_level)
    if version is None or connect.protocol_level not in supported_levels & JUDGED_LEVELS:
        return identity.V3_1_1
    return version.value


def connect_reaction(
    seen: Seen, connect: Connect, supported_levels: frozenset[int], version: str = identity.V3_1_1
) -> Reaction:
    """The reaction the server owes ``connect`` (a cut variable header first: its level was never sent; then an
    unknown level: nothing after it can be read)."""
    v5 = version == identity.V5
    if header_cut(seen):
        return CLOSE_ON_MALFORMED_5 if v5 else CLOSE_WITHOUT_CONNACK
    if connect.protocol_level not in supported_levels:
        return REFUSE_PROTOCOL_LEVEL_5 if ProtocolVersion.V5.level in supported_levels else REFUSE_PROTOCOL_LEVEL
    broken = {violation.rule_key for violation in seen.errors}
    if broken and broken <= rules.TRANSPORT_RULES:
        return CLOSE_ON_TEXT_FRAME
    if v5:
        if broken == {codec_rules.PROTOCOL_NAME}:
            return REFUSE_OR_FOLLOW_NAME_5
        # Only a defect the receiver must close on makes the CONNECT one it must not accept: an undefined Will
        # Payload Format Indicator names no error (3.1.3.2.3), so it stays the client's fault alone.
        return CLOSE_ON_MALFORMED_5 if broken & rules.enforced_codec_rules(version) else ACCEPT_OR_REFUSE_5
    if not broken:
        return ACCEPT_OR_REFUSE
    if broken == {codec_rules.CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION}:
        return REFUSE_CLIENT_ID
    return CLOSE_WITHOUT_CONNACK


#: What each order rule asks, for findings.
ORDER_EXPECTED: Final[dict[str, str]] = {
    rules.CONNACK_FIRST: "the server sends nothing but CONNACK (or, in MQTT 5.0, AUTH) before a CONNACK that accepts",
    rules.NOTHING_AFTER_DISCONNECT: "after DISCONNECT its sender sends nothing more on the connection",
    lifecycle.ONE_CONNACK: "the server sends one CONNACK per connection",
    lifecycle.AUTHENTICATING_CLIENT_WAITS: (
        "a client that sent an Authentication Method sends only AUTH or DISCONNECT until the CONNACK"
    ),
    lifecycle.NO_AUTH_WITHOUT_METHOD: "without an Authentication Method in the CONNECT the server sends no AUTH",
    lifecycle.NO_CLIENT_AUTH_WITHOUT_METHOD: "without an Authentication Method in its CONNECT the client sends no AUTH",
}


class Connection:
    """CONNECT, CONNACK and DISCONNECT on one connection."""

    def __init__(self, ctx: Context, offences: Offences, *, mid_stream: bool = False) -> None:
        self._ctx = ctx
        self._offences = offences
        #: Observation began inside the connection: its CONNECT (and so the version, the session and the packets in
        #: flight) may never be seen.
        self.mid_stream = mid_stream
        #: Why the connection follows another specification (a CONNECT of another protocol name or of a level
        #: the server supports besides 4): nothing after that CONNECT is judged against MQTT 3.1.1.
        self.foreign: str | None = None
        #: Sides some of whose bytes went unobserved (gaps in a capture, or bytes no packet was framed from), with
        #: the first such reason.
        self.lost: dict[Direction, str] = {}
        self.connect: Connect | None = None
        self.connect_seen: Seen | None = None
        self.reaction: Reaction | None = None
        self.connack: Connack | None = None
        self.refused_at: Seen | None = None
        self.disconnect_seen: Seen | None = None
        #: The server's DISCONNECT (5.0), after which it sends nothing more [MQTT-3.14.4-1].
        self.server_disconnect_seen: Seen | None = None
        #: Where the connection is (see :mod:`.lifecycle`), and the version it speaks.
        self.phase = Phase.UNOBSERVED_START if mid_stream else Phase.AWAITING_CONNECT
        self.version = ctx.config.opening_version
        #: Order rules (keys) a packet already broke here: each is reported once per connection.
        self._out_of_order: set[str] = set()
        self._client_spoke = False
        self._server_spoke = False
        self._unanswered: list[Seen] = []  # CONNECTs waiting for their CONNACK, oldest first
        #: The client's first packet, when nothing it sent before could have been missed.
        self._first_seen: Seen | None = None
        #: Why the client's first packet may not be the first it sent (bytes before it were not captured).
        self._gap_before_connect: str | None = None
        if mid_stream:
            self._not_accepted("the capture began inside the connection and no server packet shows it was accepted")
        self._connack_due: Obligation | None = None
        self._followups = False  # client packets the server must not process after a refusal
        self._acted_after_refusal = False
        self._handshake = Handshake5(ctx, offences)

    @property
    def accepted(self) -> bool:
        return self.connack is not None and self.connack.return_code == 0

    @property
    def connect_valid(self) -> bool:
        """The CONNECT was one the server may accept (no defect it must close on, a supported level)."""
        return self.reaction is ACCEPT_OR_REFUSE or self.reaction is ACCEPT_OR_REFUSE_5

    @property
    def keep_alive(self) -> int:
        """The Keep Alive in force (seconds): the CONNECT's, or in MQTT 5.0 the Server Keep Alive of the CONNACK,
        which the client must use instead [MQTT-3.2.2-21]."""
        connect = self.connect
        if connect is None:
            return 0
        if self.version == identity.V5 and self.connack is not None:
            declared = first(self.connack.properties, SERVER_KEEP_ALIVE)
            if isinstance(declared, int):
                return declared
        return connect.keep_alive

    @property
    def session_known(self) -> bool:
        """The session started empty on this connection, so everything in it was seen here."""
        if self.connect is None:
            return False
        return self.connect.clean_session or (self.connack is not None and not self.connack.session_present)

    @property
    def may_resume(self) -> bool:
        """The server may hold state from an earlier connection of this client (CleanSession 0, Session Present
        1 or not yet known)."""
        return self.connect is not None and not self.connect.clean_session and not self.session_known

    def _not_accepted(self, why: str | None) -> None:
        """Whether the server is known to have accepted the connection: the answers it owes wait on that."""
        self._ctx.obligations.not_accepted = None if why is None else reasons.reason(reasons.NOT_ACCEPTED, why)

    def on_lost(self, lost: Lost, event: int, reason: str) -> None:
        """Bytes of one side were not captured (or not framed); client bytes before its first packet may have held
        its CONNECT."""
        self.lost.setdefault(lost.sender, reason)
        if lost.sender is CLIENT and not self._client_spoke and self._gap_before_connect is None:
            what = "could not be framed" if lost.undecoded else "were not captured"
            self._gap_before_connect = reasons.reason(
                reasons.GAP_BEFORE_CONNECT,
                f"{lost.length} bytes the client sent first (event {event}) {what}; its CONNECT may be among them",
            )
            if self.connack is None:
                self._not_accepted("the client's first bytes were not captured and no server packet shows it was")

    # Client packets -----------------------------------------------------------------------------------------

    def _step(self, seen: Seen) -> Transition | None:
        """Moves the lifecycle on ``seen``; returns the transition (None: no packet the lifecycle knows)."""
        packet = seen.packet
        if packet is None:
            return None
        if isinstance(packet, Connect) and self.phase in (Phase.AWAITING_CONNECT, Phase.UNOBSERVED_START):
            self.version = connect_version(packet, self._ctx.config.supported_protocol_levels)
            self._ctx.ledger.version = self.version
        kind = input_of(packet, self.version)
        transition = None if kind is None else step(self.version, self.phase, seen.sender, kind)
        if transition is not None:
            self.phase = transition.next
        return transition

    @property
    def handshake_5(self) -> Connect | None:
        """The CONNECT the 5.0 handshake checks read, when they apply (a 5.0 CONNECT judged from its start)."""
        if self.version != identity.V5 or self.foreign is not None or self.mid_stream:
            return None
        return self.connect

    def on_client(self, seen: Seen) -> None:
        packet = seen.packet
        first = not self._client_spoke
        self._client_spoke = True
        if first and not self.mid_stream and self._gap_before_connect is None:
            self._first_seen = seen
        after_disconnect = self.phase is Phase.CLIENT_DISCONNECTED
        transition = self._step(seen)
        connect_5 = self.handshake_5
        if connect_5 is not None and not isinstance(packet, Connect):
            self._handshake.on_client(seen, connect_5, self.connack)
        if after_disconnect and self.disconnect_seen is not None:
            # [MQTT-3.14.4-2] whatever the client sends after its DISCONNECT, framed or not
            self._out_of_order.add(rules.NOTHING_AFTER_DISCONNECT)
            self._ctx.ledger.fail(
                rules.NOTHING_AFTER_DISCONNECT,
                CLIENT,
                seen.time,
                seen.event,
                f"{seen.describe()} follows DISCONNECT (event {self.disconnect_seen.event})",
                "after DISCONNECT the client sends nothing more on the connection",
            )
        elif transition is not None and transition.rule not in (None, rules.CONNECT_FIRST, rules.SECOND_CONNECT):
            self._out_of_order_fail(seen, transition.rule)
            if transition.rule == lifecycle.AUTHENTICATING_CLIENT_WAITS:
                # [MQTT-3.1.2-30] a Protocol Error the server closes on without acting on it (4.13.1)
                what = f"{seen.describe()} before the CONNACK of an authentication under way"
                rule = transition.rule
                self._offences.offend(seen, (rule,), what)
        if isinstance(packet, Auth):
            self._on_auth(seen)
        if isinstance(packet, Connect):
            self._on_connect(seen, packet, first)
        elif (first and self.mid_stream) or (first and self._gap_before_connect is not None):
            self._connect_first_unknown(seen)
        elif first and packet is None:
            self._ctx.ledger.undecided(
                rules.CONNECT_FIRST,
                reasons.reason(reasons.UNDECODED, f"the client's first bytes (event {seen.event})"),
                side=CLIENT,
                event=seen.event,
                time=seen.time,
            )
        elif first:
            self._not_connect_first(seen)
        elif self.phase is Phase.CLIENT_DISCONNECTED and self.disconnect_seen is None:
            self._on_disconnect(seen)
        if is_answered(packet) and self.connect_seen is not None:
            self._followups = True

    def _out_of_order_fail(self, seen: Seen, rule: str) -> None:
        """``seen`` came in a phase that forbids it (see :mod:`.lifecycle`): a finding, once per rule."""
        if rule in self._out_of_order:
            return
        self._out_of_order.add(rule)
        self._ctx.ledger.fail(
            rule,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} while the connection is {self.phase.value}",
            ORDER_EXPECTED.get(rule, "the packets of a connection follow the order sections 3.1, 3.2 and 3.14 set"),
        )

    def _connect_first_unknown(self, seen: Seen) -> None:
        """[MQTT-3.1.0-1] cannot be judged when what the client sent first was not seen."""
        if self.mid_stream:
            why = reasons.reason(reasons.MID_STREAM, "the client's first packets were sent before it")
        else:
            why = self._gap_before_connect or ""
        self._ctx.ledger.undecided(rules.CONNECT_FIRST, why, side=CLIENT, event=seen.event, time=seen.time)

    def _not_connect_first(self, seen: Seen) -> None:
        """[MQTT-3.1.0-1] The client's first packet is CONNECT; the server closes on anything else."""
        self._ctx.ledger.fail(
            rules.CONNECT_FIRST,
            CLIENT,
            seen.time,
            seen.event,
            f"the client's first packet is {describe(seen.packet)}",
            "the first packet a client sends is CONNECT",
        )
        self._offences.offend(seen, (rules.CONNECT_FIRST,), f"{seen.describe()} before CONNECT")

    def _on_connect(self, seen: Seen, connect: Connect, first: bool) -> None:
        self._unanswered.append(seen)
        if not first:
            # [MQTT-3.1.0-2] A second CONNECT is a protocol violation the server disconnects on.
            what = f"a second CONNECT ({seen.describe()})"
            self._offences.offend(seen, (rules.SECOND_CONNECT,), what)
            return
        if self.mid_stream or self._gap_before_connect is not None:
            self._connect_first_unknown(seen)
        else:
            self._ctx.ledger.held(rules.CONNECT_FIRST)
        if self.connack is None:
            self._not_accepted(f"no CONNACK accepted the CONNECT (event {seen.event})")
        self.connect, self.connect_seen = connect, seen
        self._ctx.transcript.connect, self._ctx.transcript.connect_time = connect, seen.time
        config = self._ctx.config
        reason = None if header_cut(seen) else foreign_protocol(connect, config.supported_protocol_levels)
        if reason is not None:
            self.foreign = reason
            self._ctx.ledger.undecided(
                rules.CONNACK_FOR_VALID_CONNECT,
                reasons.reason(reasons.ANOTHER_SPECIFICATION, reason),
                side=SERVER,
                event=seen.event,
                time=seen.time,
            )
            return
        self.reaction = reaction = connect_reaction(seen, connect, config.supported_protocol_levels, self.version)
        if not reaction.codes:
            enforced = rules.enforced_codec_rules(self.version) | rules.TRANSPORT_RULES
            self._offences.record(Offence.of_frame(seen, self.version, act_rule=reaction.rule, enforced=enforced))
            return
        self._owe_connack(seen.time)

    def _owe_connack(self, since: float) -> None:
        """The server owes the CONNECT its CONNACK within the answer timeout from ``since`` (the CONNECT, or the
        client's latest AUTH of an authentication exchange)."""
        connect, connect_seen, reaction = self.connect, self.connect_seen, self.reaction
        if connect is None or connect_seen is None or reaction is None:
            return
        self._connack_due = self._ctx.obligations.open(
            Obligation(
                reaction.rule,
                SERVER,
                connect_seen.event,
                connect_seen.time,
                since + self._ctx.config.answer_timeout,
                ("send CONNACK", reaction.why),
                OnClose.FULFILS
                if reaction.close_answers
                else OnClose.EXCUSES
                if reaction.close_excuses
                else OnClose.BREAKS,
                informs=(rules.PLAIN_CLIENT_ID_ALLOWED,) if PLAIN_CLIENT_ID.fullmatch(connect.client_id) else (),
            )
        )

    @property
    def authenticates(self) -> bool:
        """The CONNECT named an Authentication Method (MQTT 5.0 enhanced authentication)."""
        connect = self.connect
        return connect is not None and first(connect.properties, lifecycle.AUTHENTICATION_METHOD) is not None

    def _on_auth(self, seen: Seen) -> None:
        """MQTT 5.0 AUTH: an exchange the CONNECT asked for holds the CONNACK back while the server waits for the
        client; one nobody asked for is a finding [MQTT-4.12.0-6, -7]."""
        if self.connect is None or self.version != identity.V5 or self.foreign is not None:
            return
        if not self.authenticates:
            client = seen.sender is CLIENT
            rule = lifecycle.NO_CLIENT_AUTH_WITHOUT_METHOD if client else lifecycle.NO_AUTH_WITHOUT_METHOD
            self._no_method(seen, rule)
            return
        due = self._connack_due
        if seen.sender is SERVER and self.connack is None and due is not None:
            self._ctx.obligations.drop(due)  # the server waits for the client's answer now
            self._connack_due = None
        elif seen.sender is CLIENT and self.connack is None and self._connack_due is None and self.reaction:
            self._owe_connack(seen.time)

    def _no_method(self, seen: Seen, rule: str) -> None:
        """An AUTH on a connection whose CONNECT named no Authentication Method; from the client it is a Protocol
        Error the server must close on [MQTT-4.13.1-1]."""
        if rule in self._out_of_order:
            return
        self._out_of_order.add(rule)
        self._ctx.ledger.fail(
            rule,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} on a connection whose CONNECT (event {self.connect_seen_event}) named no "
            "Authentication Method",
            ORDER_EXPECTED[rule],
        )
        if seen.sender is CLIENT:
            what = f"{seen.describe()} without an Authentication Method in the CONNECT"
            self._offences.offend(seen, (rule,), what)

    def _on_disconnect(self, seen: Seen) -> None:
        """[MQTT-3.14.4-1] After DISCONNECT the client closes the connection."""
        self.disconnect_seen = seen
        self._ctx.transcript.disconnected = True
        self._close_after_disconnect(seen)

    def _close_after_disconnect(self, seen: Seen) -> None:
        """The sender of a DISCONNECT closes the connection after it (3.1.1 [MQTT-3.14.4-1] binds the client, 5.0
        [MQTT-3.14.4-2] either side)."""
        grace = self._ctx.config.close_grace
        side = side_name(seen.sender)
        self._ctx.obligations.open(
            Obligation(
                rules.CLOSE_AFTER_DISCONNECT,
                seen.sender,
                seen.event,
                seen.time,
                seen.time + grace,
                (
                    "close the connection after DISCONNECT",
                    f"the {side} closes the connection after sending DISCONNECT (within {grace:g} s)",
                ),
                OnClose.FULFILS,
            )
        )

    # Server packets -----------------------------------------------------------------------------------------

    def on_server(self, seen: Seen) -> int | None:
        """Judges a server packet; returns the event of the CONNECT it answers, if it is a CONNACK."""
        packet = seen.packet
        first = not self._server_spoke
        before = self.phase
        transition = self._step(seen)
        connect_5 = self.handshake_5
        if connect_5 is not None:
            self._handshake.on_server(seen, before, connect_5, self.connack)
        if self.phase is Phase.SERVER_DISCONNECTED and before is not Phase.SERVER_DISCONNECTED:
            self.server_disconnect_seen = seen
            self._close_after_disconnect(seen)  # 5.0 [MQTT-3.14.4-2]
        if first and not isinstance(packet, Auth):
            self._server_spoke = True
            self._connack_first(seen)
        elif transition is not None and transition.rule is not None:
            # (an AUTH may come before the CONNACK [MQTT-3.2.0-1]: the CONNACK's place is judged on what follows)
            self._out_of_order_fail(seen, transition.rule)
        if isinstance(packet, Auth):
            self._on_auth(seen)
        instead = self._offence_instead_of_connect()
        if isinstance(packet, Connack) and not self._unanswered and instead is not None:
            return instead.event  # a CONNACK to what the client sent instead of a CONNECT acts on it
        if self.connect_seen is None and self.connack is None and packet is not None and not seen.offends:
            self._unseen_connect_answered(seen, packet)
        if not isinstance(packet, Connack) or not self._unanswered:
            return None
        connect_seen = self._unanswered.pop(0)
        if connect_seen is self.connect_seen and self.connack is None:
            self.connack = packet
            transcript = self._ctx.transcript
            transcript.connack, transcript.connack_time, transcript.connack_event = packet, seen.time, seen.event
            code = packet.return_code
            self._not_accepted(None if code == 0 else f"CONNACK 0x{code:02x} (event {seen.event}) refused it")
            if self.version == identity.V5 and not self.authenticates:
                self._ctx.ledger.held(lifecycle.NO_AUTH_WITHOUT_METHOD)  # none came before the CONNACK
            self._judge_connack(seen, packet)
            if connect_5 is not None and self.foreign is None:  # a CONNACK of another protocol is not 5.0's
                self._handshake.on_connack(seen, connect_5, packet, valid=self.connect_valid)
        return connect_seen.event

    def _offence_instead_of_connect(self) -> Seen | None:
        """The client's first packet, when it was seen whole, was not a CONNECT the judge could read and was a
        protocol violation (another packet type [MQTT-3.1.0-1], or bytes that frame no packet)."""
        first = self._first_seen
        offence = self._offences.by(CLIENT)
        if first is None or offence is None or offence.seen is not first or isinstance(first.packet, Connect):
            return None
        return first

    def _unseen_connect_answered(self, seen: Seen, packet: Packet) -> None:
        """The CONNECT was not captured: a CONNACK 0 proves one was accepted (and a refusal one refused); any other
        server packet shows a session in progress."""
        if not isinstance(packet, Connack):
            self._not_accepted(None)
            return
        self.connack = packet
        transcript = self._ctx.transcript
        transcript.connack, transcript.connack_time, transcript.connack_event = packet, seen.time, seen.event
        if packet.return_code == 0:
            self._not_accepted(None)
        else:
            self.refused_at = seen
            self._not_accepted(f"CONNACK 0x{packet.return_code:02x} (event {seen.event}) refused the connection")

    def _connack_first(self, seen: Seen) -> None:
        """[MQTT-3.2.0-1] The first packet the server sends is CONNACK."""
        if isinstance(seen.packet, Connack) and not self.mid_stream and SERVER not in self.lost:
            self._ctx.ledger.held(rules.CONNACK_FIRST)
            return
        self._out_of_order.add(rules.CONNACK_FIRST)  # decided here, on the first packet, whatever follows
        if seen.packet is None or self.mid_stream or SERVER in self.lost:
            if self.mid_stream:
                reason = reasons.reason(reasons.MID_STREAM, "the server's first packets were sent before it")
            elif SERVER in self.lost:
                reason = self.lost[SERVER]
            else:
                reason = reasons.reason(reasons.UNDECODED, f"the server's first bytes (event {seen.event})")
            self._ctx.ledger.undecided(rules.CONNACK_FIRST, reason, side=SERVER, event=seen.event, time=seen.time)
            return
        self._ctx.ledger.fail(
            rules.CONNACK_FIRST,
            SERVER,
            seen.time,
            seen.event,
            f"the server's first packet is {describe(seen.packet)}",
            "the first packet the server sends is CONNACK",
        )

    def _judge_connack(self, seen: Seen, connack: Connack) -> None:
        reaction = self.reaction
        connect = self.connect
        if reaction is None or connect is None or not reaction.codes:
            return  # not judged, or an offence: answering it is judged as acting on it
        obligations = self._ctx.obligations
        code = connack.return_code
        if reaction.accepting_leaves and code == 0:
            self.foreign = (
                f"protocol name {quoted(connect.protocol_name)} accepted (CONNACK 0x00, event {seen.event}): the "
                f"server follows another protocol, which {R5.MQTT_3_1_2_1} allows a server that supports several"
            )
            if self._connack_due is not None:
                obligations.drop(self._connack_due, reasons.reason(reasons.ANOTHER_SPECIFICATION, self.foreign))
            return
        if self._connack_due is not None:
            obligations.fulfil(self._connack_due)
        if code not in reaction.codes and not (code in reaction.codes_5 and in_5_0_form(seen)):
            allowed = ", ".join(f"0x{c:02x}" for c in sorted(reaction.codes))
            self._ctx.ledger.fail(
                reaction.rule,
                SERVER,
                seen.time,
                seen.event,
                f"CONNACK return code 0x{code:02x} answers CONNECT (event {self.connect_seen_event})",
                f"{reaction.why} (return code {allowed})",
            )
        self._plain_client_id_allowed(seen, connect, code)
        if code == 0:
            self._session_present_with_clean_session(seen, connect, connack)
        else:
            self.refused_at = seen
            # [MQTT-3.1.4-5] Nothing the client sent after the refused CONNECT may be answered (a close it owes on a
            # violation among it is no answer: the refusal's own close settles it).
            after = self.connect_seen_event
            obligations.drop_where(lambda o: o.side is SERVER and o.event > after and o.on_close is not OnClose.FULFILS)
        if code != 0 or reaction.must_close:
            grace = self._ctx.config.close_grace
            rule = reaction.rule if reaction.must_close else reaction.refusal_rule or rules.CLOSE_AFTER_REFUSAL
            obligations.open(
                Obligation(
                    rule,
                    SERVER,
                    seen.event,
                    seen.time,
                    seen.time + grace,
                    (
                        "close the connection after refusing it",
                        f"after CONNACK with return code 0x{code:02x} the server closes the connection (within "
                        f"{grace:g} s)",
                    ),
                    OnClose.FULFILS,
                )
            )

    def _plain_client_id_allowed(self, seen: Seen, connect: Connect, code: int) -> None:
        """[MQTT-3.1.3-5] A ClientId of 1 to 23 of the characters 0-9, a-z, A-Z is never refused as
        "identifier rejected" (0x02)."""
        if PLAIN_CLIENT_ID.fullmatch(connect.client_id) is None:
            return
        if code != CLIENT_ID_REJECTED.get(self.version, IDENTIFIER_REJECTED):
            self._ctx.ledger.held(rules.PLAIN_CLIENT_ID_ALLOWED)
            return
        self._ctx.ledger.fail(
            rules.PLAIN_CLIENT_ID_ALLOWED,
            SERVER,
            seen.time,
            seen.event,
            f"CONNACK 0x{code:02x} (identifier rejected) refuses ClientId {quoted(connect.client_id)}",
            "the server allows every ClientId of 1 to 23 bytes drawn from 0-9, a-z and A-Z",
        )

    @property
    def connect_seen_event(self) -> int:
        return -1 if self.connect_seen is None else self.connect_seen.event

    def _session_present_with_clean_session(self, seen: Seen, connect: Connect, connack: Connack) -> None:
        """[MQTT-3.2.2-1] Accepting a CleanSession 1 connection, the server sets Session Present 0."""
        if not connect.clean_session:
            return
        if not connack.session_present:
            self._ctx.ledger.held(rules.NO_SESSION_PRESENT_WITH_CLEAN_SESSION)
            return
        self._ctx.ledger.fail(
            rules.NO_SESSION_PRESENT_WITH_CLEAN_SESSION,
            SERVER,
            seen.time,
            seen.event,
            f"CONNACK sets Session Present 1 for a CleanSession 1 CONNECT (event {self.connect_seen_event})",
            "a server accepting CleanSession 1 answers Session Present 0",
        )

    def check_answer(self, seen: Seen, answered: int | None) -> None:
        """[MQTT-3.1.4-5] After refusing a CONNECT the server processes nothing the client sent after it."""
        refused = self.refused_at
        if refused is None or answered is None or answered <= self.connect_seen_event:
            return
        self._acted_after_refusal = True
        self._ctx.ledger.fail(
            rules.NOTHING_PROCESSED_AFTER_REFUSAL,
            SERVER,
            seen.time,
            seen.event,
            f"{seen.describe()} answers event {answered}, sent after the CONNECT the server refused "
            f"(CONNACK at event {refused.event})",
            "a server that refuses a CONNECT processes nothing the client sent after it",
        )

    # The end ------------------------------------------------------------------------------------------------

    def on_end(self, end: float, closed: Closed | None) -> None:
        """Settles what only the end of the conversation decides."""
        ledger = self._ctx.ledger
        connect_5 = self.handshake_5
        if connect_5 is not None and self.reaction is not None:
            self._handshake.on_end(closed, self.connack)
        if (
            closed is not None
            and closed.by is SERVER
            and not self._server_spoke
            and self._client_spoke
            and not self.mid_stream
            and SERVER not in self.lost
        ):
            ledger.held(rules.CONNACK_FIRST)  # [MQTT-3.2.0-1] the server closed having sent nothing before a CONNACK
        one_connack = self.connack is not None and lifecycle.ONE_CONNACK not in self._out_of_order
        if connect_5 is not None and one_connack and closed is not None:
            ledger.held(lifecycle.ONE_CONNACK)  # [MQTT-3.2.0-2] one CONNACK, and the connection is over
        server_disconnect = self.server_disconnect_seen
        if server_disconnect is not None and rules.NOTHING_AFTER_DISCONNECT not in self._out_of_order:
            # 5.0 [MQTT-3.14.4-1] Nothing came from the server between its DISCONNECT and the close (a packet after
            # it fails the rule as it arrives, see lifecycle); still open at the end, more might have come.
            if closed is not None:
                ledger.held(rules.NOTHING_AFTER_DISCONNECT)
            else:
                ledger.undecided(
                    rules.NOTHING_AFTER_DISCONNECT,
                    reasons.reason(reasons.TOO_SHORT, "observation ended with the connection still open"),
                    side=SERVER,
                    event=server_disconnect.event,
                    time=server_disconnect.time,
                )
        if self.disconnect_seen is not None and rules.NOTHING_AFTER_DISCONNECT not in self._out_of_order:
            if closed is not None:
                ledger.held(rules.NOTHING_AFTER_DISCONNECT)
            else:
                ledger.undecided(
                    rules.NOTHING_AFTER_DISCONNECT,
                    reasons.reason(reasons.TOO_SHORT, "observation ended with the connection still open"),
                    side=CLIENT,
                    event=self.disconnect_seen.event,
                    time=self.disconnect_seen.time,
                )
        if (
            self.reaction in (ACCEPT_OR_REFUSE, ACCEPT_OR_REFUSE_5)
            and self.connack is None
            and self.connect
            and self.connect.clean_session
        ):
            ledger.undecided(
                rules.NO_SESSION_PRESENT_WITH_CLEAN_SESSION,
                reasons.reason(reasons.NO_ANSWER, "no CONNACK seen"),
                side=SERVER,
                event=self.connect_seen_event,
                time=None if self.connect_seen is None else self.connect_seen.time,
            )
        refused = self.refused_at
        if refused is None or not self._followups or self._acted_after_refusal:
            return
        if (closed is not None and closed.by is SERVER) or end - refused.time >= self._ctx.config.answer_timeout:
            self._ctx.ledger.held(rules.NOTHING_PROCESSED_AFTER_REFUSAL)
        else:
            self._ctx.ledger.undecided(
                rules.NOTHING_PROCESSED_AFTER_REFUSAL,
                reasons.reason(
                    reasons.TOO_SHORT,
                    f"observation ended {reasons.elapsed(end - refused.time)} after the refusal, before an answer "
                    "would show",
                ),
                side=SERVER,
                event=refused.event,
                time=refused.time,
            )
