"""MQTT 5.0: the opening handshake as the server must keep it. A connection that does not open with CONNECT (the
Client's [MQTT-3.1.0-1]) is closed [MQTT-4.13.1-1], unanswered [MQTT-3.2.0-1]; a CONNECT with another Protocol Name
at version 5 is accepted as another protocol's or refused by closing [MQTT-3.1.2-1], one with a Protocol Version the
server does not speak is refused (a CONNACK 0x84 allowed first) and closed [MQTT-3.1.2-2]; every CONNACK keeps its
own bytes [MQTT-3.2.2-1, -6, -8], comes once [MQTT-3.2.0-2], and carries no Response Information [MQTT-3.1.2-28] or
Authentication Method [MQTT-4.12.0-6] nobody asked for; a refused CONNECT is closed [MQTT-3.1.4-2, MQTT-3.1.3-8] and
nothing sent after it is processed [MQTT-3.1.4-6]; an AUTH without an Authentication Method (the Client's
[MQTT-4.12.0-7]) is a Protocol Error the server closes on [MQTT-4.13.1-1], with no AUTH in answer [MQTT-4.12.0-6];
zero-length Client Identifiers get unique Assigned Client Identifiers [MQTT-3.1.3-6]; a silent client is dropped
after one and a half Keep Alive periods [MQTT-3.1.2-22, MQTT-3.2.2-22]. The judge decides each (judge/connection.py,
judge/handshake_5.py, judge/keepalive.py)."""

from __future__ import annotations

import asyncio
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Auth,
    Connack,
    Connect,
    Direction,
    Packet,
    Pingreq,
    Property,
    ProtocolVersion,
    Publish,
    Subscribe,
    Subscription,
    encode,
)
from ...codec import properties as props
from ..case import CaseContext, Inconclusive, NotApplicable
from ..connection import ProbeConnection
from .v5_connect import v5_case

V5: Final = ProtocolVersion.V5
CLIENT: Final = Direction.FROM_CLIENT
#: [MQTT-3.1.0-1] The first packet of a connection is CONNECT: the Client's, which the connect-first cases break
#: on purpose. What the server owes them: no packet before a CONNACK that accepts [MQTT-3.2.0-1], and the close on
#: the Protocol Error [MQTT-4.13.1-1].
CONNECT_FIRST: Final[str] = R5.MQTT_3_1_0_1
CONNACK_FIRST: Final[str] = R5.MQTT_3_2_0_1
CLOSE_ON_ERROR: Final[str] = R5.MQTT_4_13_1_1
#: [MQTT-3.1.2-1] The Protocol Name is "MQTT" (the Client's part); a server that does not accept another closes, a
#: CONNACK 0x84 allowed first (the server's part: one that supports several protocols may accept it as another's).
PROTOCOL_NAME: Final[str] = R5.MQTT_3_1_2_1
#: [MQTT-3.1.2-2] A Protocol Version other than 5 the server refuses: CONNACK 0x84 allowed, then the close.
PROTOCOL_VERSION: Final[str] = R5.MQTT_3_1_2_2
#: [MQTT-3.2.0-2] One CONNACK per connection.
ONE_CONNACK: Final[str] = R5.MQTT_3_2_0_2
#: [MQTT-3.2.2-1] CONNACK Acknowledge Flags bits 7-1 are 0; [MQTT-3.2.2-6] a non-zero Reason Code has Session
#: Present 0; [MQTT-3.2.2-8] the Reason Code is one of Table 3-1.
CONNACK_FLAGS: Final[str] = R5.MQTT_3_2_2_1
REFUSAL_SESSION_PRESENT: Final[str] = R5.MQTT_3_2_2_6
CONNACK_CODE: Final[str] = R5.MQTT_3_2_2_8
#: [MQTT-3.1.2-28] Request Response Information 0 (or absent): no Response Information.
NO_RESPONSE_INFORMATION: Final[str] = R5.MQTT_3_1_2_28
#: [MQTT-4.12.0-6] No Authentication Method in the CONNECT: no AUTH and no Authentication Method in the CONNACK.
NO_SERVER_METHOD: Final[str] = R5.MQTT_4_12_0_6
#: [MQTT-3.1.4-2] A further check on the CONNECT fails: the close.
FAILED_CHECK: Final[str] = R5.MQTT_3_1_4_2
#: [MQTT-3.1.4-6] Nothing sent after a refused CONNECT is processed (AUTH aside).
NOTHING_AFTER_REFUSAL: Final[str] = R5.MQTT_3_1_4_6
#: [MQTT-3.1.3-8] A rejected Client Identifier: CONNACK 0x85 allowed, then the close.
CLIENT_ID_REJECTED: Final[str] = R5.MQTT_3_1_3_8
#: [MQTT-3.1.3-6] Zero-length Client Identifiers get unique ones.
UNIQUE_ASSIGNED: Final[str] = R5.MQTT_3_1_3_6
#: [MQTT-4.12.0-7] No client AUTH without an Authentication Method in its CONNECT: the Client's, which the
#: auth-unrequested cases break on purpose; the server closes on the Protocol Error [MQTT-4.13.1-1] and sends no AUTH
#: in answer [MQTT-4.12.0-6].
NO_CLIENT_AUTH: Final[str] = R5.MQTT_4_12_0_7
#: [MQTT-3.1.2-22] The server closes a connection silent for 1.5 times the Keep Alive; [MQTT-3.2.2-22] without a
#: Server Keep Alive it is the client's.
KEEP_ALIVE: Final[str] = R5.MQTT_3_1_2_22
CLIENT_KEEP_ALIVE: Final[str] = R5.MQTT_3_2_2_22
#: An Authentication Method no server implements: the CONNECT naming it is refused (0x8C or 0x87).
UNKNOWN_METHOD: Final = "X-MQTTAUDIT-HANDSHAKE-UNKNOWN"
#: CONNACK Reason Code 0x85 (Client Identifier not valid).
CLIENT_ID_NOT_VALID: Final = 0x85
#: Server Keep Alive and Assigned Client Identifier (properties 0x13 and 0x12 of a CONNACK).
SERVER_KEEP_ALIVE: Final = 0x13
ASSIGNED_CLIENT_IDENTIFIER: Final = 0x12


def _bytes(packet: Packet) -> bytes:
    """A 5.0 client packet as bytes, unchecked (the defects are the point)."""
    return encode(packet, validate=False, direction=CLIENT, version=V5)


def _connect(
    context: CaseContext, *, name: str = "MQTT", level: int = V5.level, properties: tuple[Property, ...] = ()
) -> Connect:
    return Connect(protocol_name=name, protocol_level=level, client_id=context.client_id(), properties=properties)


async def _answer(connection: ProbeConnection) -> Connack | None:
    """The CONNACK (or none) the broker answers the CONNECT with; :class:`NotApplicable` when it continues an
    authentication instead."""
    answer = await connection.wait_for(lambda p: isinstance(p, Connack | Auth))
    if isinstance(answer, Auth):
        raise NotApplicable("the broker continues an authentication (AUTH) instead of answering with a CONNACK")
    return answer if isinstance(answer, Connack) else None


async def _refused(context: CaseContext, data: bytes, name: str | None = None) -> Connack | None:
    """Sends ``data`` (a CONNECT first) on a fresh connection and waits for the refusal and the close; a CONNACK
    0x00 is left with DISCONNECT (the judge decides whether it had to refuse)."""
    connection = await context.open(name)
    await connection.send(data)
    connack = await _answer(connection)
    if connack is not None and connack.return_code == 0:
        await context.disconnect(connection)
    else:
        await connection.wait_close()
    return connack


# The first packet is CONNECT [MQTT-3.1.0-1] -----------------------------------------------------------------

#: The packets sent instead of a CONNECT: (case word, title, the packet).
NOT_CONNECT: Final = (
    ("pingreq", "PINGREQ", lambda topic: Pingreq()),
    (
        "subscribe",
        "SUBSCRIBE (QoS 1 to a topic of the case)",
        lambda topic: Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter=topic, qos=1)]),
    ),
    ("publish", "PUBLISH QoS 1", lambda topic: Publish(topic=topic, payload=b"first", qos=1, packet_id=1)),
)


def _register_not_connect(word: str, title: str, build: object) -> None:
    async def script(context: CaseContext) -> None:
        connection = await context.open()
        await connection.send(_bytes(build(context.topic("first"))))  # type: ignore[operator]
        await connection.wait_close()

    v5_case(
        f"v5/connect-first/{word}",
        [CONNACK_FIRST, CLOSE_ON_ERROR],
        f"A connection that opens with {title.split(' (', maxsplit=1)[0]} instead of CONNECT is closed",
        stimulus=f"a 5.0 {title} as the first packet of a connection",
        expected="the close, without answering it (no CONNACK, SUBACK, PUBACK or PINGRESP)",
        provokes=[CONNECT_FIRST],
    )(script)


for _word, _title, _build in NOT_CONNECT:
    _register_not_connect(_word, _title, _build)


# Another Protocol Name at version 5 [MQTT-3.1.2-1] ----------------------------------------------------------

#: Protocol Names other than "MQTT", each in a CONNECT of Protocol Version 5: (case word, the name).
OTHER_NAMES: Final = (("mqtx", "MQTX"), ("lowercase", "mqtt"), ("mqisdp", "MQIsdp"), ("empty", ""))


def _register_name(word: str, name: str) -> None:
    async def script(context: CaseContext) -> None:
        connack = await _refused(context, _bytes(_connect(context, name=name)))
        if connack is not None and connack.return_code == 0:
            raise NotApplicable(
                f"the broker accepted the Protocol Name {name!r} (CONNACK 0x00): a server that supports several "
                f"protocols tells them apart by the name, and {PROTOCOL_NAME} binds it only when it does not accept"
            )

    v5_case(
        f"v5/connect-refused/protocol-name-{word}",
        [PROTOCOL_NAME],
        f"A CONNECT of Protocol Version 5 with the Protocol Name {name!r} is accepted as another protocol's or "
        "refused by closing",
        stimulus=f"5.0 CONNECT (Protocol Version 5) whose Protocol Name is {name!r}",
        expected="the close, with or without CONNACK 0x84 (Unsupported Protocol Version) or another refusal first; "
        "a CONNACK 0x00 (the name taken for another protocol's) makes the case not applicable",
    )(script)


for _word, _name in OTHER_NAMES:
    _register_name(_word, _name)


# A Protocol Version the server does not speak [MQTT-3.1.2-2] --------------------------------------------------

#: Protocol Versions no MQTT specification defines (3 and 4 are 3.1 and 3.1.1, which a server may speak).
UNSUPPORTED_VERSIONS: Final = (6, 0, 255)


def _register_version(version: int) -> None:
    async def script(context: CaseContext) -> None:
        connack = await _refused(context, _bytes(_connect(context, level=version)))
        if connack is not None and connack.return_code == 0:
            raise Inconclusive(f"the broker accepted Protocol Version {version}: it speaks it")

    v5_case(
        f"v5/connect-refused/protocol-version-{version}",
        [PROTOCOL_VERSION],
        f"A CONNECT with Protocol Version {version} is refused and closed",
        stimulus=f"CONNECT 'MQTT' with Protocol Version {version}, written as 5.0 (properties after Keep Alive)",
        expected="the close, with or without CONNACK 0x84 (Unsupported Protocol Version) or, as 3.1.1 asks, 0x01 first",
    )(script)


for _version in UNSUPPORTED_VERSIONS:
    _register_version(_version)


async def _refused_method(context: CaseContext, data: bytes = b"", name: str | None = None) -> Connack:
    """A CONNECT naming :data:`UNKNOWN_METHOD`, with ``data`` in the same write; the broker's refusal (a broker that
    supports the method, or accepts the CONNECT, leaves nothing to judge)."""
    if UNKNOWN_METHOD in (context.profile.authentication_methods or ()):
        raise NotApplicable(f"the profile declares the broker supports the Authentication Method {UNKNOWN_METHOD!r}")
    connect = _connect(context, properties=props.make(authentication_method=UNKNOWN_METHOD))
    connack = await _refused(context, _bytes(connect) + data, name)
    if connack is None:
        raise NotApplicable("the broker closed without a CONNACK: no refusal to judge")
    if connack.return_code == 0:
        raise Inconclusive(f"the broker accepted the CONNECT with the Authentication Method {UNKNOWN_METHOD!r}")
    return connack


# Nothing after a refused CONNECT is processed [MQTT-3.1.4-6] ------------------------------------------------


@v5_case(
    "v5/connect-refused/nothing-processed-after",
    [NOTHING_AFTER_REFUSAL, FAILED_CHECK],
    "Nothing sent after a refused CONNECT is processed",
    stimulus=f"a watcher subscribes to a topic of the case; then, in one write, a 5.0 CONNECT with the "
    f"Authentication Method {UNKNOWN_METHOD!r}, a QoS 1 PUBLISH to the watched topic, a SUBSCRIBE and a PINGREQ",
    expected="the refusal (CONNACK 0x8C or 0x87) and the close; no PUBACK, SUBACK or PINGRESP; the watcher gets "
    "nothing",
)
async def nothing_processed_after(context: CaseContext) -> None:
    topic = context.topic("watched")
    watcher = await context.subscriber("watcher", (topic, 1))
    followers = (
        Publish(topic=topic, payload=b"after-refusal", qos=1, packet_id=1),
        Subscribe(packet_id=2, subscriptions=[Subscription(topic_filter=context.topic("other"), qos=1)]),
        Pingreq(),
    )
    await _refused_method(context, b"".join(_bytes(p) for p in followers), "refused")
    # a message the broker never acknowledged may be taken up to a timeout late, and delivered a timeout after that
    await context.settle(watcher)
    await context.settle(watcher)
    await context.disconnect(watcher)


# The CONNACK itself [MQTT-3.2.0-2, MQTT-3.2.2-1, -6, -8, MQTT-3.1.2-28, MQTT-4.12.0-6] ------------------------


@v5_case(
    "v5/connack/accepting",
    [ONE_CONNACK, CONNACK_FLAGS, CONNACK_CODE, NO_RESPONSE_INFORMATION, NO_SERVER_METHOD],
    "The CONNACK that accepts a CONNECT with Request Response Information 0",
    stimulus="5.0 CONNECT with Request Response Information 0 and no Authentication Method; PINGREQ; DISCONNECT",
    expected="one CONNACK 0x00, Acknowledge Flags bits 7-1 zero, without Response Information or Authentication "
    "Method; no AUTH",
)
async def connack_accepting(context: CaseContext) -> None:
    connection = await context.connect(properties=props.make(request_response_information=0))
    await connection.send(Pingreq())
    await connection.observe(context.timeout / 4)
    await context.disconnect(connection)


@v5_case(
    "v5/connack/response-information-absent",
    [ONE_CONNACK, CONNACK_FLAGS, CONNACK_CODE, NO_RESPONSE_INFORMATION, NO_SERVER_METHOD],
    "The CONNACK to a CONNECT without properties carries no Response Information",
    stimulus="5.0 CONNECT without properties (Request Response Information absent: 0); DISCONNECT",
    expected="one CONNACK 0x00, Acknowledge Flags bits 7-1 zero, without Response Information or Authentication Method",
)
async def connack_without_request(context: CaseContext) -> None:
    connection = await context.connect()
    await context.disconnect(connection)


@v5_case(
    "v5/connack/refusing",
    [ONE_CONNACK, CONNACK_FLAGS, CONNACK_CODE, REFUSAL_SESSION_PRESENT, FAILED_CHECK],
    "The CONNACK that refuses an unknown Authentication Method, then the close",
    stimulus=f"5.0 CONNECT with the Authentication Method {UNKNOWN_METHOD!r}, Clean Start 1",
    expected="one CONNACK 0x8C (Bad authentication method) or 0x87 (Not authorized) with Session Present 0 and "
    "Acknowledge Flags bits 7-1 zero, then the close; a broker that closes without a CONNACK makes it not applicable",
)
async def connack_refusing(context: CaseContext) -> None:
    await _refused_method(context)


# A rejected Client Identifier [MQTT-3.1.3-8] -----------------------------------------------------------------


@v5_case(
    "v5/client-identifier/rejected",
    [CLIENT_ID_REJECTED, FAILED_CHECK],
    "A zero-length Client Identifier the broker rejects with CONNACK 0x85 is followed by the close",
    stimulus="5.0 CONNECT with a zero-length Client Identifier, Clean Start 1",
    expected="CONNACK 0x85 (Client Identifier not valid), then the close; a broker that accepts it, or refuses it "
    "otherwise, makes the case not applicable",
)
async def client_identifier_rejected(context: CaseContext) -> None:
    connack = await _refused(context, _bytes(Connect(protocol_level=V5.level, client_id="")))
    if connack is None or connack.return_code != CLIENT_ID_NOT_VALID:
        what = "closed without a CONNACK" if connack is None else f"answered CONNACK 0x{connack.return_code:02x}"
        raise NotApplicable(f"the broker {what}: it did not reject the Client Identifier with 0x85")


# Unique Assigned Client Identifiers [MQTT-3.1.3-6] -----------------------------------------------------------


@v5_case(
    "v5/client-identifier/assigned-unique",
    [UNIQUE_ASSIGNED],
    "Two clients with zero-length Client Identifiers at once are assigned different ones",
    stimulus="two 5.0 CONNECTs with a zero-length Client Identifier, each on its own connection; both stay open "
    "while each sends PINGREQ",
    expected="two CONNACK 0x00 with different Assigned Client Identifiers, both connections served (PINGRESP); a "
    "broker that refuses zero-length identifiers makes the case not applicable",
)
async def assigned_identifiers_unique(context: CaseContext) -> None:
    pair: list[ProbeConnection] = []
    for name in ("first", "second"):
        connection = await context.open(name)
        await connection.send(Connect(protocol_level=V5.level, client_id=""))
        connack = await _answer(connection)
        if connack is None or connack.return_code != 0:
            what = "closed without a CONNACK" if connack is None else f"answered CONNACK 0x{connack.return_code:02x}"
            raise NotApplicable(f"the broker {what} for a zero-length Client Identifier")
        if not props.first(connack.properties, ASSIGNED_CLIENT_IDENTIFIER):
            raise NotApplicable("the CONNACK names no Assigned Client Identifier (MQTT-3.2.2-16's finding)")
        pair.append(connection)
    for connection in pair:
        await connection.send(Pingreq())
    for connection in pair:
        await connection.observe(context.timeout / 4)
        if not connection.closed:
            await context.disconnect(connection)


# An AUTH without an Authentication Method [MQTT-4.12.0-7] ----------------------------------------------------

#: AUTH packets a client whose CONNECT named no Authentication Method sends: (case word, title, the bytes).
UNASKED_AUTH: Final = (
    ("continue", "AUTH 0x18 (Continue authentication) without properties", "f0 02 18 00"),
    ("reauthenticate", "AUTH 0x19 (Re-authenticate) without properties", "f0 02 19 00"),
    ("success-short", "AUTH 0x00 written as two bytes (no Reason Code, no properties)", "f0 00"),
    ("success", "AUTH 0x00 with an empty property set", "f0 02 00 00"),
    (
        "continue-with-method",
        f"AUTH 0x18 with the Authentication Method {UNKNOWN_METHOD!r}",
        _bytes(Auth(reason_code=0x18, properties=props.make(authentication_method=UNKNOWN_METHOD))).hex(" "),
    ),
    (
        "reauthenticate-with-data",
        f"AUTH 0x19 with the Authentication Method {UNKNOWN_METHOD!r} and Authentication Data",
        _bytes(
            Auth(
                reason_code=0x19,
                properties=props.make(authentication_method=UNKNOWN_METHOD, authentication_data=b"\x00\x01"),
            )
        ).hex(" "),
    ),
)


def _register_unasked_auth(word: str, title: str, data: str) -> None:
    async def script(context: CaseContext) -> None:
        connection = await context.connect()
        await connection.send(bytes.fromhex(data))
        await connection.wait_close()

    v5_case(
        f"v5/auth-unrequested/without-method-{word}",
        [CLOSE_ON_ERROR, NO_SERVER_METHOD],
        f"{title} on a connection whose CONNECT named no Authentication Method is closed on",
        stimulus=f"5.0 CONNECT without an Authentication Method, CONNACK 0x00; then {title}: {data}",
        expected="the close (a DISCONNECT 0x82 Protocol Error may come first); no AUTH in answer",
        provokes=[NO_CLIENT_AUTH],
    )(script)


for _word, _title, _data in UNASKED_AUTH:
    _register_unasked_auth(_word, _title, _data)


# Keep Alive [MQTT-3.1.2-22, MQTT-3.2.2-22] -------------------------------------------------------------------

#: Silent clients, each connected this many seconds after the one before (see the 3.1.1 Keep Alive case): a broker
#: that checks Keep Alive every few seconds, for all clients at once, meets one client's deadline by chance but
#: never all of theirs.
SILENT_CLIENTS: Final = 3
SILENT_STAGGER: Final = 1.2


#: The longest Server Keep Alive the case waits out (seconds): a longer one makes it not applicable.
LONGEST_KEEP_ALIVE: Final = 10


async def _silent_clients(context: CaseContext, *, own_only: bool) -> None:
    """Connects :data:`SILENT_CLIENTS` clients with Keep Alive 1 s, :data:`SILENT_STAGGER` s apart, and waits for
    the broker to close each within 1.5 times the Keep Alive in force (the Server Keep Alive of its CONNACK, else
    1 s) plus the timeout. ``own_only``: the case is about the client's own Keep Alive, which a Server Keep Alive
    replaces."""

    async def silent(index: int) -> None:
        await asyncio.sleep(index * SILENT_STAGGER)
        connection = await context.connect(f"silent{index + 1}", keep_alive=1)
        declared = props.first(connection.connack.properties if connection.connack else (), SERVER_KEEP_ALIVE)
        if isinstance(declared, int) and own_only:
            raise NotApplicable(f"the broker's CONNACK sets Server Keep Alive {declared}: the client's is not used")
        period = declared if isinstance(declared, int) else 1
        if not 0 < period <= LONGEST_KEEP_ALIVE:
            raise NotApplicable(f"the broker's CONNACK sets Server Keep Alive {period} s")
        await connection.wait_close(1.5 * period + context.timeout)

    await asyncio.gather(*(silent(index) for index in range(SILENT_CLIENTS)))


@v5_case(
    "v5/keep-alive/server-disconnects-silent-client",
    [KEEP_ALIVE],
    "A silent client is disconnected after 1.5 times the Keep Alive",
    stimulus=f"{SILENT_CLIENTS} clients, each a 5.0 CONNECT with Keep Alive 1 s {SILENT_STAGGER:g} s after the one "
    "before, then silence",
    expected="the broker closes each connection within 1.5 times the Keep Alive in force (the CONNACK's Server Keep "
    f"Alive, up to {LONGEST_KEEP_ALIVE} s, else the client's 1 s) of its CONNECT, plus the probe's grace",
    timing=True,
)
async def keep_alive(context: CaseContext) -> None:
    await _silent_clients(context, own_only=False)


@v5_case(
    "v5/keep-alive/client-value-applies",
    [KEEP_ALIVE, CLIENT_KEEP_ALIVE],
    "Without a Server Keep Alive the broker keeps to the client's Keep Alive",
    stimulus=f"{SILENT_CLIENTS} clients, each a 5.0 CONNECT with Keep Alive 1 s {SILENT_STAGGER:g} s after the one "
    "before, then silence",
    expected="CONNACKs without Server Keep Alive, and the close of each connection within 1.5 s of its CONNECT, plus "
    "the probe's grace; a Server Keep Alive in a CONNACK makes the case not applicable",
    timing=True,
)
async def client_keep_alive(context: CaseContext) -> None:
    await _silent_clients(context, own_only=True)
