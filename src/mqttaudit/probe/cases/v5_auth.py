"""MQTT 5.0 enhanced authentication (section 4.12, AUTH 3.15) against a broker that supports a method.

A prober cannot compute the answers of a method it does not know, so these cases follow the exchange the broker
profile scripts (``[authentication]``, see :mod:`mqttaudit.probe.profile`): the CONNECT's Authentication Method and
Data, then the client's answer to each AUTH 0x18 of the server. Without a script every case is not applicable.

What the server owes: an AUTH that continues the exchange has Reason Code 0x18 [MQTT-4.12.0-2]; every AUTH and the
accepting CONNACK carry the CONNECT's method [MQTT-4.12.0-5]; a refused exchange ends with the close
[MQTT-4.12.0-4]; a failed re-authentication too [MQTT-4.12.1-2]; the Reason String and User Properties of an AUTH
stay out of it where they would exceed the client's Maximum Packet Size [MQTT-3.15.2-2, -3]. What the probe breaks
on purpose, for the server to close on without going on: a packet other than AUTH or DISCONNECT before the CONNACK
[MQTT-3.1.2-30], an answer to AUTH 0x18 with another Reason Code [MQTT-4.12.0-3], a re-authentication under another
method or none [MQTT-4.12.1-1]. The judge decides each (judge/handshake_5.py, judge/connection.py,
judge/omitted_5.py)."""

from __future__ import annotations

from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
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
from ..profile import AuthenticationScript
from .v5_connect import v5_case

V5: Final = ProtocolVersion.V5
#: [MQTT-4.12.0-2] A server AUTH continuing the authentication has Reason Code 0x18.
SERVER_CONTINUES: Final[str] = R5.MQTT_4_12_0_2
#: [MQTT-4.12.0-3] The client's AUTH answering the server's AUTH 0x18 has Reason Code 0x18.
CLIENT_CONTINUES: Final[str] = R5.MQTT_4_12_0_3
#: [MQTT-4.12.0-4] A server that refuses the authentication closes the connection.
CLOSE_ON_REFUSAL: Final[str] = R5.MQTT_4_12_0_4
#: [MQTT-4.12.0-5] Every AUTH and the accepting CONNACK carry the CONNECT's Authentication Method.
SAME_METHOD: Final[str] = R5.MQTT_4_12_0_5
#: [MQTT-4.12.1-1] A re-authentication (AUTH 0x19) names the connection's Authentication Method.
REAUTH_SAME_METHOD: Final[str] = R5.MQTT_4_12_1_1
#: [MQTT-4.12.1-2] A failed re-authentication ends with the close.
CLOSE_ON_FAILED_REAUTH: Final[str] = R5.MQTT_4_12_1_2
#: [MQTT-3.1.2-30] Until the CONNACK an authenticating client sends only AUTH or DISCONNECT.
ONLY_AUTH_UNTIL_CONNACK: Final[str] = R5.MQTT_3_1_2_30
#: [MQTT-4.13.1-1] The server closes on a Protocol Error it detects (the Client's rules above, broken on purpose:
#: they bind the Client, and are what the cases provoke, not what they judge).
CLOSE_ON_ERROR: Final[str] = R5.MQTT_4_13_1_1
#: [MQTT-3.14.0-1] No server DISCONNECT before a CONNACK below 0x80 (a refusal mid-exchange is a CONNACK, or the
#: close alone).
NO_EARLY_DISCONNECT: Final[str] = R5.MQTT_3_14_0_1
#: [MQTT-3.15.2-2] / [MQTT-3.15.2-3] An AUTH's Reason String / User Properties within the receiver's Maximum Packet
#: Size.
AUTH_REASON_STRING: Final[str] = R5.MQTT_3_15_2_2
AUTH_USER_PROPERTY: Final[str] = R5.MQTT_3_15_2_3

#: AUTH Reason Codes (Table 3-11).
SUCCESS: Final = 0x00
CONTINUE: Final = 0x18
REAUTHENTICATE: Final = 0x19
#: A method no broker takes, for a re-authentication under another method.
OTHER_METHOD: Final = "mqttaudit-other-method"
#: Authentication Data no script sends (a wrong start, a wrong answer).
WRONG_DATA: Final = b"mqttaudit-wrong-data"
#: Properties the judge weighs against a Maximum Packet Size: Reason String, User Property.
PROBLEM_PROPERTIES: Final = (0x1F, 0x26)


def exchange_script(context: CaseContext) -> AuthenticationScript:
    script = context.declared("authentication", "an authentication exchange the broker accepts")
    assert isinstance(script, AuthenticationScript)
    return script


def _method(script: AuthenticationScript, data: bytes | None = None, method: str | None = None) -> tuple[Property, ...]:
    """Authentication Method (the script's unless ``method``) and, when given, Authentication Data."""
    chosen = script.method if method is None else method
    if data is None:
        return props.make(authentication_method=chosen)
    return props.make(authentication_method=chosen, authentication_data=data)


def _wrong(script: AuthenticationScript) -> bytes:
    """Authentication Data the script never sends."""
    return WRONG_DATA if WRONG_DATA not in (script.first, *script.answers) else WRONG_DATA + b"!"


async def _next(connection: ProbeConnection, since: int) -> Packet | None:
    """The server's next AUTH or CONNACK (or DISCONNECT), from index ``since`` of what it sent."""
    return await connection.wait_for(lambda p: isinstance(p, Auth | Connack | Disconnect), since=since)


def _code(auth: Auth) -> int:
    return SUCCESS if auth.reason_code is None else auth.reason_code


async def _begin(
    context: CaseContext,
    script: AuthenticationScript,
    name: str | None = None,
    *,
    properties: tuple[Property, ...] = (),
) -> tuple[ProbeConnection, Packet | None]:
    """Opens a connection and sends the script's CONNECT (with ``properties`` besides); returns it and the server's
    first answer (AUTH, CONNACK, DISCONNECT or None)."""
    connection = await context.open(name)
    connection.client_id = context.client_id()
    connect = Connect(
        protocol_level=V5.level,
        client_id=connection.client_id,
        properties=(*_method(script, script.first), *properties),
    )
    await connection.send(connect)
    return connection, await _next(connection, 0)


async def _complete(
    context: CaseContext, connection: ProbeConnection, script: AuthenticationScript, answer: Packet | None
) -> Connack:
    """Answers each AUTH 0x18 with the script's next data until the CONNACK; :class:`Inconclusive` unless the server
    accepts the scripted exchange."""
    answers = list(script.answers)
    while isinstance(answer, Auth) and _code(answer) == CONTINUE:
        if not answers:
            raise Inconclusive("setup: the server continued the authentication past the profile's script")
        since = len(connection.received)
        await connection.send(Auth(reason_code=CONTINUE, properties=_method(script, answers.pop(0))))
        answer = await _next(connection, since)
    if not isinstance(answer, Connack) or answer.return_code != 0:
        got = "nothing" if answer is None else type(answer).__name__
        if isinstance(answer, Connack):
            got = f"CONNACK 0x{answer.return_code:02x}"
        raise Inconclusive(f"setup: the scripted authentication ({script.method!r}) ended with {got}, not CONNACK 0x00")
    connection.connack = answer
    return answer


async def authenticated(context: CaseContext, script: AuthenticationScript) -> ProbeConnection:
    """A connection the scripted exchange authenticated (CONNACK 0x00)."""
    connection, answer = await _begin(context, script)
    await _complete(context, connection, script, answer)
    return connection


async def _challenged(context: CaseContext, script: AuthenticationScript) -> tuple[ProbeConnection, Auth]:
    """A connection whose CONNECT the server answered with AUTH 0x18; :class:`NotApplicable` when the method needs
    no exchange (CONNACK at once)."""
    connection, answer = await _begin(context, script)
    if isinstance(answer, Connack) and answer.return_code == 0:
        await context.disconnect(connection)
        raise NotApplicable(f"the broker accepts {script.method!r} at once: no AUTH exchange to take part in")
    if not isinstance(answer, Auth) or _code(answer) != CONTINUE:
        raise Inconclusive(f"setup: the scripted CONNECT got {type(answer).__name__ if answer else 'nothing'}")
    return connection, answer


async def _alive(connection: ProbeConnection) -> None:
    since = len(connection.received)
    await connection.send(Pingreq())
    await connection.wait_type(Pingresp, since=since)


async def _reauthenticate(
    connection: ProbeConnection, script: AuthenticationScript, first: bytes, answer: bytes | None
) -> Packet | None:
    """AUTH 0x19 with ``first``; an AUTH 0x18 in return is answered with ``answer`` (the script's own answers when
    None). Returns the server's last AUTH, CONNACK or DISCONNECT (None: nothing, or the close)."""
    answers = list(script.answers) if answer is None else [answer]
    since = len(connection.received)
    await connection.send(Auth(reason_code=REAUTHENTICATE, properties=_method(script, first)))
    reply = await _next(connection, since)
    while isinstance(reply, Auth) and _code(reply) == CONTINUE and answers:
        since = len(connection.received)
        await connection.send(Auth(reason_code=CONTINUE, properties=_method(script, answers.pop(0))))
        reply = await _next(connection, since)
    return reply


# The exchange [MQTT-4.12.0-2, -5] -----------------------------------------------------------------------------


@v5_case(
    "v5/auth/exchange",
    [SERVER_CONTINUES, SAME_METHOD],
    "The scripted authentication: AUTH 0x18 with the method, then CONNACK 0x00 with the method",
    stimulus="5.0 CONNECT with the profile's Authentication Method and first Authentication Data; each AUTH 0x18 "
    "answered with AUTH 0x18 and the script's next data; then PINGREQ",
    expected="every server AUTH before the CONNACK has Reason Code 0x18 and the CONNECT's method; CONNACK 0x00 with "
    "the method; PINGRESP. A method accepted at once (no AUTH) makes the case not applicable",
)
async def exchange(context: CaseContext) -> None:
    script = exchange_script(context)
    connection, answer = await _challenged(context, script)
    await _complete(context, connection, script, answer)
    await _alive(connection)
    await context.disconnect(connection)


@v5_case(
    "v5/auth/reauthenticate",
    [SAME_METHOD],
    "A re-authentication with the scripted exchange: every AUTH of the server carries the method, then AUTH 0x00",
    stimulus="the scripted authentication; then AUTH 0x19 with the method and the first data, each AUTH 0x18 "
    "answered from the script; then PINGREQ",
    expected="AUTH 0x18 and AUTH 0x00, each with the CONNECT's Authentication Method; PINGRESP",
)
async def reauthenticate(context: CaseContext) -> None:
    script = exchange_script(context)
    connection = await authenticated(context, script)
    reply = await _reauthenticate(connection, script, script.first, None)
    if not isinstance(reply, Auth) or _code(reply) != SUCCESS:
        got = type(reply).__name__ if reply is not None else "nothing"
        raise Inconclusive(f"the scripted re-authentication ended with {got}, not AUTH 0x00")
    await _alive(connection)
    await context.disconnect(connection)


# Refusals [MQTT-4.12.0-4, MQTT-4.12.1-2] --------------------------------------------------------------------------


@v5_case(
    "v5/auth/wrong-answer",
    [SERVER_CONTINUES, CLOSE_ON_REFUSAL],
    "A wrong answer to the server's AUTH 0x18 is refused, then the close",
    stimulus="5.0 CONNECT with the script's method and first data; the server's AUTH 0x18 answered with AUTH 0x18 "
    "and data the script never sends",
    expected="a CONNACK of 0x80 or above (0x87 Not authorized, 0x86 ...) or none, then the close; a method that "
    "accepts the wrong answer makes the case not applicable",
)
async def wrong_answer(context: CaseContext) -> None:
    script = exchange_script(context)
    connection, _challenge = await _challenged(context, script)
    since = len(connection.received)
    await connection.send(Auth(reason_code=CONTINUE, properties=_method(script, _wrong(script))))
    reply = await _next(connection, since)
    if isinstance(reply, Connack) and reply.return_code == 0:
        await context.disconnect(connection)
        raise NotApplicable(f"the broker accepted data the script never sends as an answer of {script.method!r}")
    if isinstance(reply, Auth):
        await context.disconnect(connection)
        raise NotApplicable("the broker continued the authentication after a wrong answer")
    await connection.wait_close()


async def _failed_reauthentication(context: CaseContext, wrong_first: bool) -> None:
    script = exchange_script(context)
    connection = await authenticated(context, script)
    first, answer = (_wrong(script), _wrong(script)) if wrong_first else (script.first, _wrong(script))
    reply = await _reauthenticate(connection, script, first, answer)
    if isinstance(reply, Auth):
        await context.disconnect(connection)
        code = _code(reply)
        raise NotApplicable(f"the broker answered the wrong re-authentication with AUTH 0x{code:02x}: it did not fail")
    if reply is None and not connection.closed:
        await context.disconnect(connection)
        raise Inconclusive("the broker neither answered the wrong re-authentication nor closed the connection")
    await connection.wait_close()


@v5_case(
    "v5/auth/reauthentication-fails-at-start",
    [CLOSE_ON_FAILED_REAUTH],
    "A re-authentication with wrong first data fails, then the close",
    stimulus="the scripted authentication; then AUTH 0x19 with the method and data the script never sends (an AUTH "
    "0x18 in return answered with wrong data too)",
    expected="the close, after a DISCONNECT with a Reason Code (recommended) or without; a broker that accepts the "
    "data makes the case not applicable",
)
async def reauthentication_fails_at_start(context: CaseContext) -> None:
    await _failed_reauthentication(context, wrong_first=True)


@v5_case(
    "v5/auth/reauthentication-fails-answer",
    [CLOSE_ON_FAILED_REAUTH],
    "A re-authentication whose answer is wrong fails, then the close",
    stimulus="the scripted authentication; then AUTH 0x19 with the method and the script's first data, the server's "
    "AUTH 0x18 answered with data the script never sends",
    expected="the close, after a DISCONNECT with a Reason Code (recommended) or without; a broker that accepts the "
    "answer makes the case not applicable",
)
async def reauthentication_fails_answer(context: CaseContext) -> None:
    script = exchange_script(context)
    if not script.answers:
        raise NotApplicable(f"the profile's {script.method!r} needs no answer: no answer to get wrong")
    await _failed_reauthentication(context, wrong_first=False)


# What the probe breaks on purpose [MQTT-3.1.2-30, MQTT-4.12.0-3, MQTT-4.12.1-1] -----------------------------------


async def _interrupt(context: CaseContext, packet: Packet | bytes, *, validate: bool = True) -> None:
    """The scripted CONNECT, then ``packet`` instead of the answer to the server's AUTH 0x18: the server closes."""
    script = exchange_script(context)
    connection, _challenge = await _challenged(context, script)
    await connection.send(packet, validate=validate)
    reply = await connection.wait_for(lambda p: isinstance(p, Connack) and p.return_code == 0)
    if isinstance(reply, Connack):
        await context.disconnect(connection)
        return  # the judge finds the acceptance
    await connection.wait_close()


@v5_case(
    "v5/auth/publish-while-authenticating",
    [CLOSE_ON_ERROR, NO_EARLY_DISCONNECT],
    "A PUBLISH in the middle of the authentication is a Protocol Error: the close",
    stimulus="the scripted CONNECT; after the server's AUTH 0x18, a QoS 1 PUBLISH to a topic of the case",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "PUBACK, no CONNACK 0x00",
    provokes=[ONLY_AUTH_UNTIL_CONNACK],
)
async def publish_while_authenticating(context: CaseContext) -> None:
    await _interrupt(context, Publish(topic=context.topic("early"), payload=b"x", qos=1, packet_id=1))


@v5_case(
    "v5/auth/pingreq-while-authenticating",
    [CLOSE_ON_ERROR, NO_EARLY_DISCONNECT],
    "A PINGREQ in the middle of the authentication is a Protocol Error: the close",
    stimulus="the scripted CONNECT; after the server's AUTH 0x18, PINGREQ",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "PINGRESP, no CONNACK 0x00",
    provokes=[ONLY_AUTH_UNTIL_CONNACK],
)
async def pingreq_while_authenticating(context: CaseContext) -> None:
    await _interrupt(context, Pingreq())


@v5_case(
    "v5/auth/subscribe-while-authenticating",
    [CLOSE_ON_ERROR, NO_EARLY_DISCONNECT],
    "A SUBSCRIBE in the middle of the authentication is a Protocol Error: the close",
    stimulus="the scripted CONNECT; after the server's AUTH 0x18, SUBSCRIBE to a topic of the case",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "SUBACK, no CONNACK 0x00",
    provokes=[ONLY_AUTH_UNTIL_CONNACK],
)
async def subscribe_while_authenticating(context: CaseContext) -> None:
    subscription = Subscription(topic_filter=context.topic("early"), qos=0)
    await _interrupt(context, Subscribe(packet_id=1, subscriptions=[subscription]))


@v5_case(
    "v5/auth/answer-with-success",
    [CLOSE_ON_ERROR, NO_EARLY_DISCONNECT],
    "The server's AUTH 0x18 answered with AUTH 0x00 (Success) is a Protocol Error: the close",
    stimulus="the scripted CONNECT; the server's AUTH 0x18 answered with the script's data in an AUTH of Reason Code "
    "0x00",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "CONNACK 0x00",
    provokes=[CLIENT_CONTINUES],
)
async def answer_with_success(context: CaseContext) -> None:
    script = exchange_script(context)
    data = script.answers[0] if script.answers else script.first
    await _interrupt(context, Auth(reason_code=SUCCESS, properties=_method(script, data)))


@v5_case(
    "v5/auth/answer-with-reauthenticate",
    [CLOSE_ON_ERROR, NO_EARLY_DISCONNECT],
    "The server's AUTH 0x18 answered with AUTH 0x19 (Re-authenticate) is a Protocol Error: the close",
    stimulus="the scripted CONNECT; the server's AUTH 0x18 answered with the script's data in an AUTH of Reason Code "
    "0x19",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "CONNACK 0x00",
    provokes=[CLIENT_CONTINUES],
)
async def answer_with_reauthenticate(context: CaseContext) -> None:
    script = exchange_script(context)
    data = script.answers[0] if script.answers else script.first
    await _interrupt(context, Auth(reason_code=REAUTHENTICATE, properties=_method(script, data)))


@v5_case(
    "v5/auth/answer-short-form",
    [CLOSE_ON_ERROR, SAME_METHOD, NO_EARLY_DISCONNECT],
    "The server's AUTH 0x18 answered with a bare AUTH (Reason Code 0x00 and no method by omission): the close",
    stimulus="the scripted CONNECT; the server's AUTH 0x18 answered with the two bytes f0 00 (Remaining Length 0: "
    "Reason Code 0x00, no properties, 3.15.2.1)",
    expected="the close, with or without a CONNACK of 0x80 or above first; no DISCONNECT before a CONNACK, no "
    "CONNACK 0x00",
    provokes=[CLIENT_CONTINUES],
)
async def answer_short_form(context: CaseContext) -> None:
    await _interrupt(context, bytes((0xF0, 0x00)))


async def _reauthenticate_under(context: CaseContext, method: str | None) -> None:
    """After the scripted authentication, AUTH 0x19 naming ``method`` (None: no method at all): the server closes."""
    script = exchange_script(context)
    connection = await authenticated(context, script)
    # Without a method, no data either: Authentication Data without a method is a codec finding of its own.
    properties = () if method is None else _method(script, script.first, method=method)
    since = len(connection.received)
    await connection.send(Auth(reason_code=REAUTHENTICATE, properties=properties))
    reply = await connection.wait_for(lambda p: isinstance(p, Auth) and _code(p) == SUCCESS, since=since)
    if isinstance(reply, Auth):
        await context.disconnect(connection)
        return  # the judge finds it went on
    await connection.wait_close()


@v5_case(
    "v5/auth/reauthenticate-other-method",
    [CLOSE_ON_ERROR, SAME_METHOD],
    "A re-authentication under another Authentication Method is a Protocol Error: the close",
    stimulus=f"the scripted authentication; then AUTH 0x19 with Authentication Method {OTHER_METHOD!r} and the "
    "script's first data",
    expected="the close, after a DISCONNECT (0x82 Protocol Error, 0x8C Bad authentication method) or without",
    provokes=[REAUTH_SAME_METHOD],
)
async def reauthenticate_other_method(context: CaseContext) -> None:
    await _reauthenticate_under(context, OTHER_METHOD)


@v5_case(
    "v5/auth/reauthenticate-without-method",
    [CLOSE_ON_ERROR, SAME_METHOD],
    "A re-authentication without an Authentication Method is a Protocol Error: the close",
    stimulus="the scripted authentication; then AUTH 0x19 without properties: no Authentication Method (a Protocol "
    "Error, 3.15.2.2.2)",
    expected="the close, after a DISCONNECT (0x82 Protocol Error) or without",
    provokes=[REAUTH_SAME_METHOD],
)
async def reauthenticate_without_method(context: CaseContext) -> None:
    await _reauthenticate_under(context, None)


# Reason String and User Properties within the client's Maximum Packet Size [MQTT-3.15.2-2, -3] --------------------


def _stripped_size(packet: Packet) -> int:
    """The size of ``packet`` without Reason String and User Properties (what the server can always send)."""
    kept = tuple(p for p in getattr(packet, "properties", None) or () if p.identifier not in PROBLEM_PROPERTIES)
    if isinstance(packet, Auth):
        smaller: Packet = Auth(reason_code=_code(packet), properties=kept)
    elif isinstance(packet, Connack):
        smaller = Connack(session_present=packet.session_present, return_code=packet.return_code, properties=kept)
    else:
        return 0
    return len(encode(smaller, validate=False, version=V5))


@v5_case(
    "v5/auth/small-maximum-packet-size",
    [AUTH_REASON_STRING, AUTH_USER_PROPERTY],
    "Under a Maximum Packet Size just above the exchange's packets, the AUTHs leave out what would exceed it",
    stimulus="the scripted authentication once without a limit, to see the size of the server's AUTH and CONNACK "
    "without Reason String and User Properties; then again with that largest size as the CONNECT's Maximum Packet "
    "Size, and a re-authentication",
    expected="every AUTH within the Maximum Packet Size: a Reason String or User Property that would exceed it left "
    "out",
)
async def small_maximum_packet_size(context: CaseContext) -> None:
    script = exchange_script(context)
    measuring = await authenticated(context, script)
    reply = await _reauthenticate(measuring, script, script.first, None)
    await context.disconnect(measuring)
    sizes = [_stripped_size(p) for p in measuring.received if isinstance(p, Auth | Connack)]
    if not any(isinstance(p, Auth) for p in measuring.received):
        raise NotApplicable(f"the broker sent no AUTH in the exchange of {script.method!r}")
    limit = props.make(maximum_packet_size=max(sizes))
    connection, answer = await _begin(context, script, "limited", properties=limit)
    await _complete(context, connection, script, answer)
    if isinstance(reply, Auth) and _code(reply) == SUCCESS:
        await _reauthenticate(connection, script, script.first, None)
    await _alive(connection)
    await context.disconnect(connection)
