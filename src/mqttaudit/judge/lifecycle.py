"""A connection's lifecycle as a table: its phase, and what each packet of each side does to it.

:data:`TRANSITIONS` maps (version, phase, sender, input) to the phase that follows and, where the spec forbids that
input in that phase, the rule it breaks. Anything absent from the table is no packet that side can send in that
version (the codec reports those), so :func:`step` refuses it. The order of the packets is judged here alone; what
a packet holds (codes, properties, identifiers) is judged by the modules that read it.

The phases follow sections 3.1, 3.2, 3.14, 3.15 and 4.12 of both versions: a client opens with CONNECT, the server
answers with one CONNACK before anything else (in MQTT 5.0 after any AUTH exchange the CONNECT asked for), a refused
connection is closed, and the side that sent DISCONNECT sends nothing more.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from mqttaudit.codec import Auth, Connack, Connect, Direction, Packet, PacketType
from mqttaudit.codec.properties import first
from mqttaudit.spec import identity, registry
from mqttaudit.spec.ids import R5, R311

from . import rules

CLIENT: Final = Direction.FROM_CLIENT
SERVER: Final = Direction.FROM_SERVER
V3_1_1: Final = identity.V3_1_1
V5: Final = identity.V5
#: The versions the table holds; MQTT 3.1 orders its packets as 3.1.1 does.
VERSIONS: Final = (V3_1_1, V5)

#: Authentication Method (property 0x15): a CONNECT that carries it asks for an AUTH exchange before CONNACK.
AUTHENTICATION_METHOD: Final = 0x15


class Phase(enum.Enum):
    """Where a connection is, as its packets so far show."""

    #: Observation began with the connection: nothing yet from the client.
    AWAITING_CONNECT = "awaiting the client's CONNECT"
    #: Observation began inside the connection: what came before (its CONNECT among it) is unknown.
    UNOBSERVED_START = "observed from inside the connection"
    #: The client's first packet was not a CONNECT.
    NO_CONNECT = "the client's first packet was not CONNECT"
    #: CONNECT sent, no CONNACK yet.
    CONNECTING = "CONNECT sent, awaiting CONNACK"
    #: MQTT 5.0: a CONNECT with an Authentication Method sent, no CONNACK yet (AUTH may go both ways).
    AUTHENTICATING = "CONNECT with an Authentication Method sent, awaiting CONNACK"
    #: The server accepted the CONNECT.
    CONNECTED = "accepted"
    #: The server refused the CONNECT.
    REFUSED = "refused"
    #: The client sent DISCONNECT.
    CLIENT_DISCONNECTED = "DISCONNECT sent by the client"
    #: MQTT 5.0: the server sent DISCONNECT.
    SERVER_DISCONNECTED = "DISCONNECT sent by the server"

    __hash__ = object.__hash__  # singletons compared by identity (see codec's Direction): TRANSITIONS, per packet


class Input(enum.Enum):
    """A packet as the lifecycle sees it: its type, with CONNECT and CONNACK split by what they change."""

    CONNECT = "CONNECT"
    #: MQTT 5.0: a CONNECT with an Authentication Method.
    CONNECT_AUTHENTICATING = "CONNECT with an Authentication Method"
    CONNACK_ACCEPTING = "CONNACK accepting"
    CONNACK_REFUSING = "CONNACK refusing"
    PUBLISH = "PUBLISH"
    PUBACK = "PUBACK"
    PUBREC = "PUBREC"
    PUBREL = "PUBREL"
    PUBCOMP = "PUBCOMP"
    SUBSCRIBE = "SUBSCRIBE"
    SUBACK = "SUBACK"
    UNSUBSCRIBE = "UNSUBSCRIBE"
    UNSUBACK = "UNSUBACK"
    PINGREQ = "PINGREQ"
    PINGRESP = "PINGRESP"
    DISCONNECT = "DISCONNECT"
    AUTH = "AUTH"

    __hash__ = object.__hash__  # singletons compared by identity (see codec's Direction): TRANSITIONS, per packet


@dataclass(frozen=True, slots=True)
class Transition:
    #: The phase after the input.
    next: Phase
    #: The rule (key) the input breaks in the phase it arrived in; None when the spec allows it there.
    rule: str | None = None


_CLIENT_3_1_1: Final = frozenset(
    {
        Input.CONNECT,
        Input.PUBLISH,
        Input.PUBACK,
        Input.PUBREC,
        Input.PUBREL,
        Input.PUBCOMP,
        Input.SUBSCRIBE,
        Input.UNSUBSCRIBE,
        Input.PINGREQ,
        Input.DISCONNECT,
    }
)
_SERVER_3_1_1: Final = frozenset(
    {
        Input.CONNACK_ACCEPTING,
        Input.CONNACK_REFUSING,
        Input.PUBLISH,
        Input.PUBACK,
        Input.PUBREC,
        Input.PUBREL,
        Input.PUBCOMP,
        Input.SUBACK,
        Input.UNSUBACK,
        Input.PINGRESP,
    }
)
#: The inputs each side may send, per version (a packet type the other side sends is the codec's to report).
SENT_BY: Final[Mapping[tuple[str, Direction], frozenset[Input]]] = MappingProxyType(
    {
        (V3_1_1, CLIENT): _CLIENT_3_1_1,
        (V3_1_1, SERVER): _SERVER_3_1_1,
        (V5, CLIENT): _CLIENT_3_1_1 | {Input.CONNECT_AUTHENTICATING, Input.AUTH},
        (V5, SERVER): _SERVER_3_1_1 | {Input.DISCONNECT, Input.AUTH},
    }
)

#: The phases each version has (AUTH and a server's DISCONNECT are MQTT 5.0's).
PHASES: Final[Mapping[str, tuple[Phase, ...]]] = MappingProxyType(
    {
        V3_1_1: tuple(p for p in Phase if p not in (Phase.AUTHENTICATING, Phase.SERVER_DISCONNECTED)),
        V5: tuple(Phase),
    }
)

_CONNECTS: Final = frozenset({Input.CONNECT, Input.CONNECT_AUTHENTICATING})
_CONNACKS: Final = frozenset({Input.CONNACK_ACCEPTING, Input.CONNACK_REFUSING})
#: 5.0 [MQTT-3.1.2-30]: what a client may send while its authentication is under way.
_WHILE_AUTHENTICATING: Final = frozenset({Input.AUTH, Input.DISCONNECT})
#: 5.0 [MQTT-3.2.0-2]: one CONNACK per connection.
ONE_CONNACK: Final[str] = R5.MQTT_3_2_0_2
#: 5.0 [MQTT-3.1.2-30]: only AUTH or DISCONNECT before the CONNACK when authenticating.
AUTHENTICATING_CLIENT_WAITS: Final[str] = R5.MQTT_3_1_2_30
#: 5.0 [MQTT-4.12.0-6]: no AUTH from a server whose client asked for no Authentication Method.
NO_AUTH_WITHOUT_METHOD: Final[str] = R5.MQTT_4_12_0_6
#: 5.0 [MQTT-3.14.0-1]: no DISCONNECT from the server before a CONNACK that accepts (below 0x80).
NO_SERVER_DISCONNECT_BEFORE_ACCEPT: Final[str] = R5.MQTT_3_14_0_1
#: 5.0 [MQTT-3.1.2-29]: with Request Problem Information 0, a Reason String or User Property only in PUBLISH,
#: CONNACK or DISCONNECT.
PROBLEM_INFORMATION_WITHHELD: Final[str] = R5.MQTT_3_1_2_29
#: 5.0 [MQTT-4.12.0-1]: an unsupported Authentication Method (CONNACK 0x8C) is followed by the close.
CLOSE_ON_UNSUPPORTED_METHOD: Final[str] = R5.MQTT_4_12_0_1
#: 5.0 [MQTT-4.12.0-2]: a server AUTH that continues the authentication carries Reason Code 0x18.
SERVER_AUTH_CONTINUES: Final[str] = R5.MQTT_4_12_0_2
#: 5.0 [MQTT-4.12.0-4]: a server that rejects the authentication (CONNACK 0x86 or 0x87) closes the connection.
CLOSE_ON_REJECTED_AUTHENTICATION: Final[str] = R5.MQTT_4_12_0_4
#: 5.0 [MQTT-4.12.0-5]: every AUTH and a CONNACK that accepts repeat the CONNECT's Authentication Method.
SAME_AUTHENTICATION_METHOD: Final[str] = R5.MQTT_4_12_0_5
#: 5.0 [MQTT-4.12.0-3]: the client's AUTH answering the server's AUTH 0x18 carries Reason Code 0x18.
CLIENT_AUTH_CONTINUES: Final[str] = R5.MQTT_4_12_0_3
#: 5.0 [MQTT-4.12.1-1]: a re-authentication (AUTH 0x19) names the Authentication Method of the CONNECT.
REAUTHENTICATION_SAME_METHOD: Final[str] = R5.MQTT_4_12_1_1
#: 5.0 [MQTT-4.12.1-2]: a failed re-authentication ends with the connection closed.
CLOSE_ON_FAILED_REAUTHENTICATION: Final[str] = R5.MQTT_4_12_1_2
#: 5.0 [MQTT-3.2.2-16]: a CONNACK accepting a zero-length Client Identifier carries the Assigned Client Identifier
#: (and [MQTT-3.1.3-7] says the same of the CONNECT's processing).
ASSIGNED_CLIENT_IDENTIFIER: Final[str] = R5.MQTT_3_2_2_16
ASSIGNED_CLIENT_IDENTIFIER_RETURNED: Final[str] = R5.MQTT_3_1_3_7.key
#: 5.0 [MQTT-3.3.2-12]: the server accepts every Topic Alias from 1 to the Topic Alias Maximum it declared.
ALIASES_IN_RANGE_ACCEPTED: Final[str] = R5.MQTT_3_3_2_12
#: 5.0 [MQTT-3.2.2-12]: a Will QoS beyond the server's Maximum QoS is refused (0x9B) and the connection closed.
WILL_QOS_WITHIN_MAXIMUM: Final[str] = R5.MQTT_3_2_2_12
#: 5.0 [MQTT-3.2.2-13]: a Will Retain 1 without Retain Available is refused (0x9A) and the connection closed.
WILL_RETAIN_AVAILABLE: Final[str] = R5.MQTT_3_2_2_13
#: 5.0 [MQTT-4.13.2-1]: after a CONNACK or DISCONNECT of 0x80 or above the connection is closed.
CLOSE_AFTER_ERROR_CODE: Final[str] = R5.MQTT_4_13_2_1
#: 5.0 [MQTT-4.12.0-7]: no AUTH from a client whose CONNECT named no Authentication Method.
NO_CLIENT_AUTH_WITHOUT_METHOD: Final[str] = R5.MQTT_4_12_0_7
#: 5.0 [MQTT-3.1.2-28]: Request Response Information 0 (or absent, which means 0): no Response Information in the
#: CONNACK.
NO_RESPONSE_INFORMATION: Final[str] = R5.MQTT_3_1_2_28
#: 5.0 [MQTT-3.1.3-6]: a server accepting zero-length Client Identifiers assigns each client a unique one.
UNIQUE_ASSIGNED_CLIENT_IDENTIFIER: Final[str] = R311.MQTT_3_1_3_6
#: 5.0 [MQTT-3.1.3-8]: a server rejecting the Client Identifier (CONNACK 0x85) closes the connection.
CLOSE_ON_REJECTED_CLIENT_IDENTIFIER: Final[str] = R5.MQTT_3_1_3_8.key
#: 5.0 [MQTT-3.1.4-2]: a server whose further checks on the CONNECT (content, authentication, authorization) fail
#: closes the connection.
CLOSE_ON_FAILED_CHECK: Final[str] = R5.MQTT_3_1_4_2.key
#: 5.0 [MQTT-3.2.2-22]: without a Server Keep Alive in its CONNACK the server keeps to the client's Keep Alive.
CLIENT_KEEP_ALIVE_APPLIES: Final[str] = R5.MQTT_3_2_2_22
#: The phases in which no CONNACK below 0x80 has been sent yet (a server DISCONNECT there breaks MQTT-3.14.0-1).
BEFORE_ACCEPTANCE: Final = frozenset(
    {Phase.AWAITING_CONNECT, Phase.NO_CONNECT, Phase.CONNECTING, Phase.AUTHENTICATING, Phase.REFUSED}
)


def _client(version: str, phase: Phase, packet: Input) -> Transition:
    """What a client packet does in ``phase``."""
    if phase is Phase.CLIENT_DISCONNECTED:
        return Transition(phase, rules.NOTHING_AFTER_DISCONNECT)
    if phase in (Phase.AWAITING_CONNECT, Phase.NO_CONNECT) and packet not in _CONNECTS:
        return Transition(Phase.NO_CONNECT, rules.CONNECT_FIRST if phase is Phase.AWAITING_CONNECT else None)
    if packet in _CONNECTS:
        if phase is Phase.AWAITING_CONNECT or phase is Phase.UNOBSERVED_START:
            return Transition(Phase.AUTHENTICATING if packet is Input.CONNECT_AUTHENTICATING else Phase.CONNECTING)
        return Transition(phase, rules.SECOND_CONNECT)
    if packet is Input.DISCONNECT:
        return Transition(Phase.CLIENT_DISCONNECTED)
    if phase is Phase.AUTHENTICATING and packet not in _WHILE_AUTHENTICATING:
        return Transition(phase, AUTHENTICATING_CLIENT_WAITS)
    return Transition(phase)


def _server(version: str, phase: Phase, packet: Input) -> Transition:
    """What a server packet does in ``phase``."""
    if phase is Phase.SERVER_DISCONNECTED:
        return Transition(phase, rules.NOTHING_AFTER_DISCONNECT)
    if packet in _CONNACKS:
        after = Phase.CONNECTED if packet is Input.CONNACK_ACCEPTING else Phase.REFUSED
        if phase in (Phase.CONNECTED, Phase.REFUSED, Phase.CLIENT_DISCONNECTED):
            # 3.1.1 states no rule against a second CONNACK; 5.0 does [MQTT-3.2.0-2].
            return Transition(phase, ONE_CONNACK if version == V5 else None)
        if phase is Phase.AWAITING_CONNECT or phase is Phase.NO_CONNECT:
            return Transition(after)  # answering what was no CONNECT is acting on an offence (judged there)
        return Transition(after)
    if packet is Input.DISCONNECT:
        # 5.0 [MQTT-3.2.0-1]: not before a CONNACK 0x00 (a refusal or error before CONNACK is a CONNACK's).
        before_connack = phase in (Phase.AWAITING_CONNECT, Phase.NO_CONNECT, Phase.CONNECTING, Phase.REFUSED)
        return Transition(
            Phase.SERVER_DISCONNECTED,
            rules.CONNACK_FIRST if before_connack or phase is Phase.AUTHENTICATING else None,
        )
    if packet is Input.AUTH:
        if phase is Phase.AUTHENTICATING or phase is Phase.UNOBSERVED_START:
            return Transition(phase)
        if phase is Phase.CONNECTED or phase is Phase.CLIENT_DISCONNECTED:
            return Transition(phase)  # re-authentication; whether one was asked for is judged with its method
        return Transition(phase, NO_AUTH_WITHOUT_METHOD)
    if phase in (Phase.AWAITING_CONNECT, Phase.NO_CONNECT, Phase.CONNECTING, Phase.AUTHENTICATING):
        return Transition(phase, rules.CONNACK_FIRST)
    if phase is Phase.REFUSED and version == V5:
        return Transition(phase, rules.CONNACK_FIRST)  # 5.0 [MQTT-3.2.0-1]: only after a CONNACK 0x00
    return Transition(phase)


def _table() -> dict[tuple[str, Phase, Direction, Input], Transition]:
    table = {}
    for version in VERSIONS:
        for phase in PHASES[version]:
            for sender, judge in ((CLIENT, _client), (SERVER, _server)):
                for packet in SENT_BY[version, sender]:
                    table[version, phase, sender, packet] = judge(version, phase, packet)
    return table


#: (version, phase, sender, input) -> the transition; a key absent is a packet the sender never sends.
TRANSITIONS: Final[Mapping[tuple[str, Phase, Direction, Input], Transition]] = MappingProxyType(_table())

_BY_TYPE: Final = {
    PacketType.PUBLISH: Input.PUBLISH,
    PacketType.PUBACK: Input.PUBACK,
    PacketType.PUBREC: Input.PUBREC,
    PacketType.PUBREL: Input.PUBREL,
    PacketType.PUBCOMP: Input.PUBCOMP,
    PacketType.SUBSCRIBE: Input.SUBSCRIBE,
    PacketType.SUBACK: Input.SUBACK,
    PacketType.UNSUBSCRIBE: Input.UNSUBSCRIBE,
    PacketType.UNSUBACK: Input.UNSUBACK,
    PacketType.PINGREQ: Input.PINGREQ,
    PacketType.PINGRESP: Input.PINGRESP,
    PacketType.DISCONNECT: Input.DISCONNECT,
    PacketType.AUTH: Input.AUTH,
}


def input_of(packet: Packet, version: str) -> Input | None:
    """The lifecycle input ``packet`` is; None for a reserved packet type (no packet of any version)."""
    if isinstance(packet, Connect):
        if version == V5 and first(packet.properties, AUTHENTICATION_METHOD) is not None:
            return Input.CONNECT_AUTHENTICATING
        return Input.CONNECT
    if isinstance(packet, Connack):
        return Input.CONNACK_ACCEPTING if packet.return_code == 0 else Input.CONNACK_REFUSING
    if isinstance(packet, Auth):
        return Input.AUTH
    return _BY_TYPE.get(packet.packet_type)


def table_version(version: str) -> str:
    """The table a version's connections follow (MQTT 3.1 orders packets as 3.1.1 does)."""
    return V5 if version == V5 else V3_1_1


def step(version: str, phase: Phase, sender: Direction, packet: Input) -> Transition | None:
    """The transition ``packet`` from ``sender`` makes in ``phase``; None when ``sender`` never sends it in
    ``version`` (a packet of the wrong direction or version: the codec reports it, the phase stays), or
    ``version`` has no such phase."""
    return TRANSITIONS.get((table_version(version), phase, sender, packet))


def forbidden(version: str) -> Iterable[tuple[Phase, Direction, Input, str]]:
    """Every (phase, sender, input) ``version`` forbids, with the rule it breaks: the table in rows, for the
    documentation and the tests."""
    for (table, phase, sender, packet), transition in TRANSITIONS.items():
        if table == table_version(version) and transition.rule is not None:
            yield phase, sender, packet, transition.rule


# What this module decides, for ``mqttaudit rules``.
registry.refer_names("judge", __name__, dict(globals()))
