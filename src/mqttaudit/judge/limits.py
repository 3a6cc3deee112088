"""MQTT 5.0 limits each side declares for what it receives, and the peer's duty to keep within them: Topic Alias
Maximum (3.3.2.3.4), Receive Maximum (3.3.4) and Maximum Packet Size (3.1.2.11.4, 3.2.2.3.6).

The client declares its limits in CONNECT (they bind the server), the server in CONNACK (they bind the client).
Topic Alias mappings are kept per direction and per connection, so the topic an aliased PUBLISH stands for is
known here: :meth:`Limits.topic_of`.

A limit the client breaks is a Protocol Error the server must close on: "When a Server detects a Malformed Packet
or Protocol Error, and a Reason Code is given in the specification, it MUST close the Network Connection"
[MQTT-4.13.1-1]; each check below quotes the sentence that gives the Reason Code. A client that sees the server
break a limit only SHOULD close (4.13.1), so the server's breaches are findings and nothing more.
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import (
    Connack,
    Connect,
    Direction,
    Frame,
    Packet,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    read_remaining_length,
)
from mqttaudit.codec.packets import Properties
from mqttaudit.codec.properties import BY_KEYWORD as _PROPERTIES
from mqttaudit.codec.properties import (
    MAXIMUM_PACKET_SIZE,
    MAXIMUM_QOS,
    RECEIVE_MAXIMUM,
    TOPIC_ALIAS,
    TOPIC_ALIAS_MAXIMUM,
    first,
)
from mqttaudit.spec import identity, registry
from mqttaudit.spec.ids import R5

from ..codec.describe import quoted
from . import reasons
from .connection import Connection
from .context import Context, Seen
from .discarded_5 import DISCARD_TOO_LARGE
from .sides import side_name
from .violations import Offences

CLIENT: Final = Direction.FROM_CLIENT
SERVER: Final = Direction.FROM_SERVER

# Rule keys. Rules only 5.0 states are keyed by their 5.0 id (R5), even where 3.1.1 numbers another rule the same
# (3.1.1's MQTT-3.1.2-24 is the Keep Alive timer).
#: [MQTT-3.3.2-9] The Client uses no Topic Alias above the Topic Alias Maximum of the Server's CONNACK.
CLIENT_ALIAS_WITHIN_MAXIMUM: Final[str] = R5.MQTT_3_3_2_9
#: [MQTT-3.2.2-17] The same, as 3.2.2.3.8 states it for a Topic Alias Maximum above 0.
CLIENT_ALIAS_WITHIN_DECLARED: Final[str] = R5.MQTT_3_2_2_17
#: [MQTT-3.2.2-18] With no Topic Alias Maximum (or 0) in CONNACK the Client sends no Topic Alias.
CLIENT_NO_ALIAS_WITHOUT_MAXIMUM: Final[str] = R5.MQTT_3_2_2_18
#: [MQTT-3.3.2-11] The Server uses no Topic Alias above the Topic Alias Maximum of the Client's CONNECT.
SERVER_ALIAS_WITHIN_MAXIMUM: Final[str] = R5.MQTT_3_3_2_11
#: [MQTT-3.1.2-26] The same, as 3.1.2.11.5 states it for a Topic Alias Maximum above 0.
SERVER_ALIAS_WITHIN_DECLARED: Final[str] = R5.MQTT_3_1_2_26
#: [MQTT-3.1.2-27] With no Topic Alias Maximum (or 0) in CONNECT the Server sends no Topic Alias.
SERVER_NO_ALIAS_WITHOUT_MAXIMUM: Final[str] = R5.MQTT_3_1_2_27
#: 3.3.4 (no statement id): a zero-length Topic Name with a Topic Alias the sender never mapped on this connection
#: is a Protocol Error. A derived rule.
ALIAS_MAPPED: Final[str] = R5.MQTT_3_3_4_TOPIC_ALIAS_UNMAPPED
#: [MQTT-3.3.2-7] Topic Alias mappings last only for the Network Connection they were made on: a receiver carries
#: none forward to another. An alias-only PUBLISH whose alias its sender never mapped on this connection relies on
#: a mapping from elsewhere (the sender's, when it comes from the server; the receiver acting on one from the
#: client carries it forward), so the rule is decided with :data:`ALIAS_MAPPED`.
ALIAS_PER_CONNECTION: Final[str] = R5.MQTT_3_3_2_7
#: [MQTT-3.3.4-7] The Client keeps at most the Server's Receive Maximum of QoS 1 and 2 PUBLISHes unacknowledged.
CLIENT_RECEIVE_MAXIMUM: Final[str] = R5.MQTT_3_3_4_7
#: [MQTT-3.3.4-9] The Server keeps at most the Client's Receive Maximum of QoS 1 and 2 PUBLISHes unacknowledged.
SERVER_RECEIVE_MAXIMUM: Final[str] = R5.MQTT_3_3_4_9
#: [MQTT-3.1.2-24] The Server sends no packet larger than the Client's Maximum Packet Size.
SERVER_PACKET_SIZE: Final[str] = R5.MQTT_3_1_2_24.key
#: [MQTT-3.2.2-15] The Client sends no packet larger than the Server's Maximum Packet Size.
CLIENT_PACKET_SIZE: Final[str] = R5.MQTT_3_2_2_15
#: [MQTT-3.2.2-11] The Client sends no PUBLISH above the Maximum QoS of the Server's CONNACK.
CLIENT_WITHIN_MAXIMUM_QOS: Final[str] = R5.MQTT_3_2_2_11
#: [MQTT-3.2.2-14] After CONNACK Retain Available 0 the Client sends no PUBLISH with RETAIN set.
CLIENT_NO_RETAIN_UNAVAILABLE: Final[str] = R5.MQTT_3_2_2_14

#: Every rule this module decides.
LIMIT_RULES: Final = frozenset(
    {
        CLIENT_ALIAS_WITHIN_MAXIMUM,
        CLIENT_ALIAS_WITHIN_DECLARED,
        CLIENT_NO_ALIAS_WITHOUT_MAXIMUM,
        SERVER_ALIAS_WITHIN_MAXIMUM,
        SERVER_ALIAS_WITHIN_DECLARED,
        SERVER_NO_ALIAS_WITHOUT_MAXIMUM,
        ALIAS_MAPPED,
        ALIAS_PER_CONNECTION,
        CLIENT_RECEIVE_MAXIMUM,
        SERVER_RECEIVE_MAXIMUM,
        SERVER_PACKET_SIZE,
        CLIENT_PACKET_SIZE,
        CLIENT_WITHIN_MAXIMUM_QOS,
        CLIENT_NO_RETAIN_UNAVAILABLE,
        DISCARD_TOO_LARGE,
    }
)

RETAIN_AVAILABLE: Final = _PROPERTIES["retain_available"].identifier
#: Property defaults when absent: Topic Alias Maximum 0 (3.1.2.11.5, 3.2.2.3.8), Receive Maximum 65,535
#: (3.1.2.11.3, 3.2.2.3.3); an absent Maximum Packet Size sets no limit beyond the protocol's (3.1.2.11.4).
DEFAULT_TOPIC_ALIAS_MAXIMUM: Final = 0
DEFAULT_RECEIVE_MAXIMUM: Final = 65_535
#: A PUBREC with a Reason Code of 0x80 or above ends a QoS 2 flow (4.3.3, 3.3.4).
FAILURE: Final = 0x80


def packet_size(frame: Frame) -> int | None:
    """The size of the packet a frame holds, fixed header included, as its Remaining Length declares it (so an
    oversized packet skipped undecoded, or one cut off by the close, counts whole); None when no Remaining Length
    can be read."""
    raw = frame.raw
    remaining, body = read_remaining_length(raw, 1, len(raw))
    if body < 0:
        return None
    return body + remaining


def _integer(properties: Properties, identifier: int, default: int) -> int:
    value = first(properties, identifier)
    return value if isinstance(value, int) else default


class Declaration:
    """The limits one side declared for what it receives, and the event that declared them."""

    def __init__(self, side: Direction, event: int, properties: Properties) -> None:
        self.side = side
        self.event = event
        self.topic_alias_maximum = _integer(properties, TOPIC_ALIAS_MAXIMUM, DEFAULT_TOPIC_ALIAS_MAXIMUM)
        self.receive_maximum = _integer(properties, RECEIVE_MAXIMUM, DEFAULT_RECEIVE_MAXIMUM)
        size = first(properties, MAXIMUM_PACKET_SIZE)
        #: None: no Maximum Packet Size declared.
        self.maximum_packet_size: int | None = size if isinstance(size, int) else None
        #: What a CONNACK declares of the Server's capabilities: Maximum QoS (2 when absent) and Retain Available.
        self.maximum_qos = _integer(properties, MAXIMUM_QOS, 2)
        self.retain_available = _integer(properties, RETAIN_AVAILABLE, 1) != 0

    def where(self) -> str:
        """``the client's CONNECT (event 0)``."""
        packet = "CONNECT" if self.side is CLIENT else "CONNACK"
        return f"the {side_name(self.side)}'s {packet} (event {self.event})"


class Sender:
    """What one side sent that the peer's limits bind."""

    def __init__(self, side: Direction) -> None:
        self.side = side
        #: Topic Alias -> Topic Name, as this side mapped them on this connection.
        self.aliases: dict[int, str] = {}
        #: Packet Identifier -> QoS of its QoS 1 and 2 PUBLISHes the peer has not acknowledged yet.
        self.in_flight: dict[int, int] = {}
        #: The in-flight count is above the peer's Receive Maximum (reported once per excess).
        self.over_quota = False
        #: Why some of this side's bytes went unobserved (first reason), if any.
        self.lost: str | None = None
        #: Rules already noted undecided because the peer's declaration is unknown.
        self.noted: set[str] = set()
        #: Before the CONNACK (client only): its largest packet, judged once the server's maximum is known.
        self.early_largest: Seen | None = None
        self.early_size = 0


class Limits:
    """Topic Aliases, Receive Maximum and Maximum Packet Size on one MQTT 5.0 connection, both directions."""

    def __init__(self, ctx: Context, connection: Connection, offences: Offences) -> None:
        self._ctx = ctx
        self._connection = connection
        self._offences = offences
        self._senders: dict[Direction, Sender] = {CLIENT: Sender(CLIENT), SERVER: Sender(SERVER)}
        #: By the side that declared them: CLIENT in CONNECT, SERVER in CONNACK.
        self._declared: dict[Direction, Declaration] = {}
        #: The PUBLISH judged last, and the topic it stands for (None: not known).
        self._last_event = -1
        self._last_topic: str | None = None

    # Entry points --------------------------------------------------------------------------------------------

    def topic_of(self, seen: Seen) -> str | None:
        """The Topic Name a PUBLISH stands for: its own when it has one, else the one its Topic Alias was mapped
        to in its direction (call it for the packet just judged). None for another packet, or when the mapping
        is unknown (never made, or made in bytes not observed)."""
        packet = seen.packet
        if not isinstance(packet, Publish):
            return None
        if packet.topic:
            return packet.topic
        return self._last_topic if seen.event == self._last_event else None

    def lost(self, sender: Direction, reason: str) -> None:
        """Bytes of ``sender`` went unobserved: mappings, PUBLISHes and acknowledgements may be among them."""
        state = self._senders[sender]
        if state.lost is None:
            state.lost = reason

    def on_packet(self, seen: Seen) -> None:
        """Judges one frame of a 5.0 connection after the connection has taken it in (the CONNECT and CONNACK
        that declare the limits included)."""
        if self._connection.version != identity.V5:
            return
        packet = seen.packet
        self._declare(seen, packet)
        self._packet_size(seen)
        if packet is None:
            return
        if isinstance(packet, Publish):
            self._last_event, self._last_topic = seen.event, packet.topic or None
            if not seen.offends:  # a malformed PUBLISH (Topic Alias 0 included) is the codec's finding
                self._topic_alias(seen, packet)
                self._publish_in_flight(seen, packet)
                if seen.sender is CLIENT:
                    self._capabilities(seen, packet)
        elif isinstance(packet, (Puback, Pubrec, Pubcomp)):
            self._acknowledged(seen, packet)
        elif isinstance(packet, Pubrel):
            self._released(seen, packet)

    # Declarations --------------------------------------------------------------------------------------------

    def _declare(self, seen: Seen, packet: Packet | None) -> None:
        connection = self._connection
        if isinstance(packet, Connect) and seen is connection.connect_seen and CLIENT not in self._declared:
            self._declared[CLIENT] = Declaration(CLIENT, seen.event, packet.properties)
        elif isinstance(packet, Connack) and packet is connection.connack and SERVER not in self._declared:
            declaration = self._declared[SERVER] = Declaration(SERVER, seen.event, packet.properties)
            self._early_packets(declaration)

    def _unknown(self, declarer: Direction) -> str:
        """Why the limits ``declarer`` set are not known."""
        connection = self._connection
        packet = "CONNECT" if declarer is CLIENT else "CONNACK"
        side = side_name(declarer)
        if connection.mid_stream:
            return reasons.reason(reasons.MID_STREAM, f"the {side}'s {packet}, which declares its limits, was not seen")
        lost = self._senders[declarer].lost
        if lost is not None:
            return f"{lost}; the {side}'s {packet}, which declares its limits, may be among them"
        return reasons.reason(reasons.NO_ANSWER, f"no {packet} had declared the {side}'s limits yet")

    def _undecided(self, seen: Seen, rule: str) -> None:
        """``rule`` binds ``seen``'s sender to limits not observed: noted once per rule."""
        state = self._senders[seen.sender]
        if rule in state.noted:
            return
        state.noted.add(rule)
        why = f"{self._unknown(seen.receiver)} (first at {seen.describe()})"
        self._ctx.ledger.undecided(rule, why, side=seen.sender, event=seen.event, time=seen.time)

    def _offend(self, seen: Seen, what: str, broken: tuple[str, ...]) -> None:
        """A client breach the server must close on (a Protocol Error with a Reason Code [MQTT-4.13.1-1]): the
        server upholds the ``broken`` limit rules by closing and fails them by acting on the packet, as it does
        the rule a malformed packet broke. A refusal of the PUBLISH (PUBACK or PUBREC of 0x80 or above) acts on
        nothing: only the close is then owed."""
        if seen.sender is CLIENT:
            what = f"{seen.describe()} {what} ({', '.join(identity.statement_id(r, identity.V5) or r for r in broken)})"
            self._offences.offend(seen, broken, what, refusable=True)

    # Topic Alias (3.3.2.3.4) -----------------------------------------------------------------------------------

    def _topic_alias(self, seen: Seen, packet: Publish) -> None:
        alias = first(packet.properties, TOPIC_ALIAS)
        declared = self._declared.get(seen.receiver)
        client = seen.sender is CLIENT
        within, within_declared, none_without = (
            (CLIENT_ALIAS_WITHIN_MAXIMUM, CLIENT_ALIAS_WITHIN_DECLARED, CLIENT_NO_ALIAS_WITHOUT_MAXIMUM)
            if client
            else (SERVER_ALIAS_WITHIN_MAXIMUM, SERVER_ALIAS_WITHIN_DECLARED, SERVER_NO_ALIAS_WITHOUT_MAXIMUM)
        )
        if not isinstance(alias, int):
            if declared is not None and declared.topic_alias_maximum == 0:
                self._ctx.ledger.held(none_without)
            return
        if alias == 0:
            return  # [MQTT-3.3.2-8] the codec's finding
        if declared is None:
            for rule in (within, within_declared, none_without):
                self._undecided(seen, rule)
            self._resolve(seen, packet, alias, mapped=True)
            return
        maximum = declared.topic_alias_maximum
        keyed = (within, within_declared if maximum else none_without)
        if alias <= maximum:
            for rule in keyed:
                self._ctx.ledger.held(rule)
            self._resolve(seen, packet, alias, mapped=True)
            return
        # 3.3.4: "A Topic Alias value of 0 or greater than the Maximum Topic Alias is a Protocol Error, the receiver
        # uses DISCONNECT with Reason Code of 0x94 (Topic Alias invalid) as described in section 4.13."
        receiver = side_name(seen.receiver)
        limit = f"Topic Alias Maximum {maximum}" if maximum else "no Topic Alias Maximum (0: no aliases)"
        detail = f"{seen.describe()} carries Topic Alias {alias}; {declared.where()} declared {limit}"
        expected = (
            f"the {side_name(seen.sender)} uses Topic Aliases from 1 to the Topic Alias Maximum the {receiver} "
            "declared, none when it declared 0 or none"
        )
        self._ctx.ledger.fail(keyed[0], seen.sender, seen.time, seen.event, detail, expected, also=keyed[1:])
        self._offend(seen, f"uses Topic Alias {alias} above the {receiver}'s maximum {maximum}", keyed)

    def _resolve(self, seen: Seen, packet: Publish, alias: int, *, mapped: bool) -> None:
        """Maps ``alias`` (a Topic Name with it sets the mapping) or reads the topic it stands for. ``mapped``: the
        alias is within the receiver's maximum (an alias beyond it maps nothing)."""
        state = self._senders[seen.sender]
        if packet.topic:
            if mapped:
                state.aliases[alias] = packet.topic
            return
        topic = state.aliases.get(alias)
        unobserved = state.lost is not None or self._connection.mid_stream
        # A mapping may have been changed in bytes not observed: the topic is then not known for sure.
        self._last_topic = None if unobserved else topic
        if topic is not None:
            self._ctx.ledger.held(ALIAS_MAPPED)
            self._ctx.ledger.held(ALIAS_PER_CONNECTION)
            return
        if unobserved:
            why = state.lost or reasons.reason(reasons.MID_STREAM, "the PUBLISH that mapped it may have come before")
            for rule in (ALIAS_MAPPED, ALIAS_PER_CONNECTION):
                self._ctx.ledger.undecided(
                    rule,
                    f"{why}: Topic Alias {alias} may have been mapped there",
                    side=seen.sender,
                    event=seen.event,
                    time=seen.time,
                )
            return
        # 3.3.4: "If the packet has a zero length Topic Name field it is a Protocol Error and the receiver uses
        # DISCONNECT with Reason Code of 0x82 (Protocol Error) as described in section 4.13."
        sender = side_name(seen.sender)
        known = ", ".join(f"{a} -> {quoted(t)}" for a, t in sorted(state.aliases.items())) or "none"
        detail = (
            f"{seen.describe()} has an empty Topic Name and Topic Alias {alias}, which the {sender} never mapped on "
            f"this connection (its mappings: {known})"
        )
        self._ctx.ledger.fail(
            ALIAS_MAPPED,
            seen.sender,
            seen.time,
            seen.event,
            detail,
            "a PUBLISH with an empty Topic Name uses a Topic Alias its sender mapped earlier on the same connection",
        )
        if seen.sender is SERVER:
            # [MQTT-3.3.2-7] The server relies on a mapping not made on this connection (one of an earlier
            # connection of the session, which ended with it). The client's is the stimulus of a case: the server
            # upholds the rule by not carrying a mapping forward (closing on it), below.
            self._ctx.ledger.fail(
                ALIAS_PER_CONNECTION,
                seen.sender,
                seen.time,
                seen.event,
                detail,
                "Topic Alias mappings last only as long as the connection they were made on: after a reconnection "
                "the server maps a Topic Alias again (a PUBLISH with its Topic Name) before using it alone",
            )
        self._offend(seen, f"uses Topic Alias {alias} it never mapped", (ALIAS_MAPPED, ALIAS_PER_CONNECTION))

    # Receive Maximum (3.3.4, 4.9) ------------------------------------------------------------------------------

    def _publish_in_flight(self, seen: Seen, packet: Publish) -> None:
        if packet.qos not in (1, 2) or packet.packet_id is None:
            return
        state = self._senders[seen.sender]
        state.in_flight[packet.packet_id] = packet.qos  # a resent PUBLISH (same identifier) counts once
        self._check_quota(seen)

    def _released(self, seen: Seen, packet: Pubrel) -> None:
        """A PUBREL of a QoS 2 message this connection never showed (sent on an earlier connection of a resumed
        session) is in flight until its PUBCOMP."""
        state = self._senders[seen.sender]
        if packet.packet_id is not None and packet.packet_id not in state.in_flight and self._connection.may_resume:
            state.in_flight[packet.packet_id] = 2

    def _acknowledged(self, seen: Seen, packet: Puback | Pubrec | Pubcomp) -> None:
        """The receiver's PUBACK, PUBCOMP, or PUBREC of 0x80 or above ends a flow of the other side."""
        if isinstance(packet, Pubrec) and (packet.reason_code is None or packet.reason_code < FAILURE):
            return
        if packet.packet_id is None:
            return
        state = self._senders[seen.receiver]
        state.in_flight.pop(packet.packet_id, None)
        if len(state.in_flight) <= self._receive_maximum(seen.receiver):
            state.over_quota = False

    def _receive_maximum(self, sender: Direction) -> int:
        declared = self._declared.get(Direction.FROM_SERVER if sender is CLIENT else CLIENT)
        return DEFAULT_RECEIVE_MAXIMUM if declared is None else declared.receive_maximum

    def _check_quota(self, seen: Seen) -> None:
        """[MQTT-3.3.4-7] / [MQTT-3.3.4-9] The sender has at most the receiver's Receive Maximum of QoS 1 and 2
        PUBLISHes unacknowledged (a QoS 1 until its PUBACK, a QoS 2 until its PUBCOMP or a PUBREC of 0x80 or
        above)."""
        rule = CLIENT_RECEIVE_MAXIMUM if seen.sender is CLIENT else SERVER_RECEIVE_MAXIMUM
        declared = self._declared.get(seen.receiver)
        state = self._senders[seen.sender]
        if declared is None:
            # Receive Maximum is never 0 (3.1.2.11.3, 3.2.2.3.3): one message in flight keeps any declaration
            if len(state.in_flight) <= 1 and state.lost is None and not self._connection.mid_stream:
                self._ctx.ledger.held(rule)
            else:
                self._undecided(seen, rule)
            return
        count, maximum = len(state.in_flight), declared.receive_maximum
        exceeded = count > maximum
        # Unobserved sender bytes may hold more PUBLISHes (the count is a floor), unobserved receiver bytes more
        # acknowledgements (the count is a ceiling).
        floor_only = state.lost is not None or self._connection.mid_stream
        ceiling_only = self._senders[seen.receiver].lost is not None or self._connection.mid_stream
        if (exceeded and ceiling_only) or (not exceeded and floor_only):
            lost = self._senders[seen.receiver if exceeded else seen.sender].lost or reasons.reason(
                reasons.MID_STREAM, "flows begun before it are unknown"
            )
            why = f"{lost}: {count} unacknowledged QoS 1 and 2 PUBLISHes observed, Receive Maximum {maximum}"
            self._ctx.ledger.undecided(rule, why, side=seen.sender, event=seen.event, time=seen.time)
            return
        if not exceeded:
            self._ctx.ledger.held(rule)
            return
        if state.over_quota:
            return  # this excess was reported at the PUBLISH that began it
        state.over_quota = True
        receiver = side_name(seen.receiver)
        ids = ", ".join(str(packet_id) for packet_id in sorted(state.in_flight))
        self._ctx.ledger.fail(
            rule,
            seen.sender,
            seen.time,
            seen.event,
            f"{seen.describe()} makes {count} QoS 1 and 2 PUBLISHes unacknowledged (Packet Identifiers {ids}); "
            f"{declared.where()} declared Receive Maximum {maximum}",
            f"the {side_name(seen.sender)} keeps at most the {receiver}'s Receive Maximum of QoS 1 and 2 PUBLISHes "
            "unacknowledged (until PUBACK, PUBCOMP, or PUBREC of 0x80 or above)",
        )
        # 3.3.4: "If it receives more than Receive Maximum QoS 1 and QoS 2 PUBLISH packets where it has not sent a
        # PUBACK or PUBCOMP in response, the Server uses a DISCONNECT packet with Reason Code 0x93 (Receive Maximum
        # exceeded) as described in section 4.13 Handling errors."
        self._offend(seen, f"exceeds the server's Receive Maximum {maximum}", (rule,))

    # Maximum QoS and Retain Available (3.2.2.3.4, 3.2.2.3.5) ----------------------------------------------------

    def _capabilities(self, seen: Seen, packet: Publish) -> None:
        """[MQTT-3.2.2-11] no PUBLISH above the Server's Maximum QoS; [MQTT-3.2.2-14] no RETAIN after Retain
        Available 0. Each breach is a Protocol Error the Server closes on (DISCONNECT 0x9B, 0x9A)."""
        declared = self._declared.get(SERVER)
        if declared is None:
            for rule in (CLIENT_WITHIN_MAXIMUM_QOS, CLIENT_NO_RETAIN_UNAVAILABLE):
                self._undecided(seen, rule)
            return
        checks = (
            (
                CLIENT_WITHIN_MAXIMUM_QOS,
                packet.qos > declared.maximum_qos,
                f"is QoS {packet.qos}; {declared.where()} declared Maximum QoS {declared.maximum_qos}",
                "the client sends no PUBLISH above the Maximum QoS of the server's CONNACK",
            ),
            (
                CLIENT_NO_RETAIN_UNAVAILABLE,
                packet.retain and not declared.retain_available,
                f"has RETAIN set; {declared.where()} declared Retain Available 0",
                "after Retain Available 0 the client sends no PUBLISH with RETAIN set",
            ),
        )
        for rule, broken, what, expected in checks:
            if not broken:
                self._ctx.ledger.held(rule, CLIENT)
                continue
            self._ctx.ledger.fail(rule, CLIENT, seen.time, seen.event, f"{seen.describe()} {what}", expected)
            self._offend(seen, what, (rule,))

    # Maximum Packet Size (3.1.2.11.4, 3.2.2.3.6) ---------------------------------------------------------------

    def _packet_size(self, seen: Seen) -> None:
        """[MQTT-3.1.2-24] / [MQTT-3.2.2-15] No packet larger than the receiver's Maximum Packet Size, counted
        whole (fixed header included)."""
        if seen.packet is None and not seen.undecoded:
            return  # bytes that frame no packet have no size to judge
        if isinstance(seen.packet, Connect):
            return  # nothing is declared to the client before its CONNECT
        size = packet_size(seen.frame)
        if size is None:
            return
        rule = CLIENT_PACKET_SIZE if seen.sender is CLIENT else SERVER_PACKET_SIZE
        declared = self._declared.get(seen.receiver)
        if declared is None:
            state = self._senders[seen.sender]
            # Sent before the CONNACK (none lost): judged when it tells the server's maximum.
            if seen.sender is CLIENT and not self._connection.mid_stream and self._senders[SERVER].lost is None:
                if size > state.early_size:
                    state.early_largest, state.early_size = seen, size
            else:
                self._undecided(seen, rule)
            return
        maximum = declared.maximum_packet_size
        if maximum is None:
            return
        if size <= maximum:
            self._ctx.ledger.held(rule)
            return
        detail = f"{seen.describe()} is {size} bytes; {declared.where()} declared Maximum Packet Size {maximum}"
        self._ctx.ledger.fail(
            rule,
            seen.sender,
            seen.time,
            seen.event,
            detail,
            f"the {side_name(seen.sender)} sends no packet larger than the Maximum Packet Size the "
            f"{side_name(seen.receiver)} declared (the whole packet, fixed header included)",
        )
        if seen.sender is SERVER:
            # [MQTT-3.1.2-25] A packet too large for the client is discarded, never sent.
            self._ctx.ledger.fail(
                DISCARD_TOO_LARGE,
                seen.sender,
                seen.time,
                seen.event,
                detail,
                "the server discards a packet too large for the client without sending it",
            )
        # 3.2.2.3.6: "If a Server receives a packet whose size exceeds this limit, this is a Protocol Error, the
        # Server uses DISCONNECT with Reason Code 0x95 (Packet too large), as described in section 4.13."
        self._offend(seen, f"is {size} bytes, above the server's Maximum Packet Size {maximum}", (rule,))

    def _early_packets(self, declaration: Declaration) -> None:
        """The client's packets sent before the CONNACK could not know the server's maximum: within it they kept
        the rule, beyond it the client could not have known."""
        state = self._senders[CLIENT]
        early, maximum = state.early_largest, declaration.maximum_packet_size
        state.early_largest = None
        if early is None or maximum is None:
            return
        if state.early_size <= maximum:
            self._ctx.ledger.held(CLIENT_PACKET_SIZE)
            return
        why = reasons.reason(
            reasons.NO_ANSWER,
            f"{early.describe()} ({state.early_size} bytes) was sent before {declaration.where()} declared Maximum "
            f"Packet Size {maximum}",
        )
        self._ctx.ledger.undecided(CLIENT_PACKET_SIZE, why, side=CLIENT, event=early.event, time=early.time)


# What this module decides, for ``mqttaudit rules``.
registry.refer_names("judge", __name__, dict(globals()))
