"""MQTT 5.0 forbidden packets and Reason-Code precision: what a client may not send on a 5.0 connection, and the
answers 5.0 leaves to the server's choice.

Four families beside the property defects of :mod:`.v5_malformed` and the valid flows of :mod:`.v5_connect`:

- ``reason-code``: an acknowledgement, DISCONNECT or AUTH with a Reason Code its packet does not define, or a
  DISCONNECT code only a server may send (Table 2.6, Table 3.10). Each acknowledgement answers a real flow (a
  delivery to the case's subscription, or the client's own QoS 2 PUBLISH), so only its code is wrong.
- ``fixed-flags``: every reserved fixed-header flag bit of every packet a 5.0 client sends with fixed flags, AUTH
  included, one bit flipped at a time [MQTT-2.1.3-1].
- ``protocol-error``: a second CONNECT [MQTT-3.1.0-2], PUBLISH with QoS 3 [MQTT-3.3.1-4], SUBSCRIBE with Retain
  Handling 3 (3.8.3.1), reserved Subscription Options bits [MQTT-3.8.3-5], No Local on a Shared Subscription
  [MQTT-3.8.3-4].
- ``authentication`` and ``allowed-outcomes`` (cases of their own): a CONNECT naming an Authentication Method no
  broker supports (CONNACK 0x8C or 0x87, then close), an UNSUBSCRIBE of filters never subscribed, and QoS 1 and 2
  PUBLISHes nobody receives: each passes on every answer 5.0 allows there (see :mod:`mqttaudit.judge.outcomes`).

As in :mod:`.malformed`, a stimulus's statements are the ones the judge decides on it (:func:`targeted`): the
rule the packet breaks (the codec's, MQTT-3.4.2-1 ... MQTT-3.15.2-1 for the Reason Codes), which the receiver
upholds by closing, and the duty to close [MQTT-4.13.1-1]; the stimulus bytes and the judge are the single source of
both. Not here, because the judge decides nothing of them (a case would stay inconclusive on every broker): a client
AUTH without an Authentication Method [MQTT-4.12.0-7], a server AUTH after CONNACK without one [MQTT-4.12.0-6], a
shared or wildcard SUBSCRIBE to a broker that declared them unavailable (3.2.2.3.11, 3.2.2.3.13: no numbered
statement).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from mqttaudit.spec.ids import R5

from ...codec import (
    Auth,
    Connack,
    Connect,
    PacketType,
    ProtocolVersion,
    Publish,
    Pubrec,
    Pubrel,
    Subscription,
    encode,
    reason_codes,
)
from ...codec import properties as props
from ...codec import rules as codec_rules
from ...codec.remaining_length import encode_remaining_length, read_remaining_length
from ...codec.validators import REQUIRED_FLAGS
from ...judge.outcomes import ALLOWED_OUTCOMES
from ...judge.rules import ACK_MATCHES_QOS, PUBLISH_ACK_SAME_ID
from ...spec import identity
from ..case import CaseContext, Inconclusive, NotApplicable, case, is_refusal
from ..connection import ProbeConnection
from .malformed import EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX, Shape, Stimulus, field, provoked
from .v5_malformed import decoded_rules, targeted

V5: Final = ProtocolVersion.V5

#: The flows an acknowledgement answers: the client's own QoS 2 PUBLISH (a PUBREL after the broker's PUBREC), or
#: a delivery to the case's subscription (a PUBACK for QoS 1, a PUBREC for QoS 2, a PUBCOMP for the broker's
#: PUBREL); "" for a packet sent straight after CONNACK.
OWN_QOS2: Final = "own-qos2"
DELIVERY_QOS1: Final = "delivery-qos1"
DELIVERY_QOS2: Final = "delivery-qos2"
DELIVERY_PUBREL: Final = "delivery-pubrel"
ANSWERED_FLOW: Final[dict[PacketType, str]] = {
    PacketType.PUBACK: DELIVERY_QOS1,
    PacketType.PUBREC: DELIVERY_QOS2,
    PacketType.PUBREL: OWN_QOS2,
    PacketType.PUBCOMP: DELIVERY_PUBREL,
}


@dataclass(frozen=True)
class ForbiddenStimulus(Stimulus):
    #: The rule the 5.0 decoder finds the packet breaking ("" when the packet is well-formed and its place is the
    #: defect: a second CONNECT).
    breaks: str = ""
    #: The flow the packet answers (see :data:`ANSWERED_FLOW`); its Packet Identifier is the flow's.
    answers: str = ""
    #: For an answer: its first byte and Reason Code (None: left out), written with the flow's Packet Identifier
    #: at run time.
    ack: tuple[int, int | None] | None = None
    #: A feature of :data:`mqttaudit.probe.capabilities.FEATURES` the stimulus needs the broker to support.
    needs: str = ""


def _frame(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_remaining_length(len(body)) + body


def ack_bytes(first_byte: int, code: int | None, packet_id: int) -> bytes:
    """A 5.0 acknowledgement with ``code`` (None: left out, Success) and no properties (the Property Length left
    out)."""
    return _frame(first_byte, packet_id.to_bytes(2, "big") + (b"" if code is None else bytes((code,))))


def _first_byte(packet_type: PacketType) -> int:
    return (packet_type << 4) | REQUIRED_FLAGS[packet_type]


def _needs(packet_type: PacketType) -> str:
    """The QoS the flow an acknowledgement answers needs."""
    return "qos1" if packet_type is PacketType.PUBACK else "qos2"


def _body(data: bytes) -> bytes:
    """The bytes after a packet's fixed header."""
    _length, start = read_remaining_length(data, 1, len(data))
    return data[start:]


def _v5_connect(client_id: str, **fields: object) -> bytes:
    return encode(Connect(protocol_level=V5.level, client_id=client_id, **fields), version="5")  # type: ignore[arg-type]


# --- reason codes a client may not send ----------------------------------------------------------------------

#: Acknowledgements with a Reason Code their packet does not define (Table 2.6): (packet, code).
ACK_CODES: Final = (
    (PacketType.PUBACK, 0x11),  # No subscription existed: UNSUBACK's
    (PacketType.PUBACK, 0x92),  # Packet Identifier not found: PUBREL's and PUBCOMP's
    (PacketType.PUBACK, 0x18),  # Continue authentication: AUTH's
    (PacketType.PUBREC, 0x11),
    (PacketType.PUBREC, 0x92),
    (PacketType.PUBREC, 0x18),
    (PacketType.PUBREL, 0x10),  # No matching subscribers: PUBACK's and PUBREC's
    (PacketType.PUBREL, 0x80),  # a PUBREL has no failure code but 0x92
    (PacketType.PUBREL, 0x87),
    (PacketType.PUBCOMP, 0x87),  # Not authorized
    (PacketType.PUBCOMP, 0x10),
    (PacketType.PUBCOMP, 0x80),
)
#: DISCONNECT Reason Codes a client may not send: the server's own (Table 3.10), and one no DISCONNECT has.
DISCONNECT_CODES: Final = (0x8B, 0x8E, 0x8D, 0x9E, 0x11)
#: AUTH Reason Codes outside 0x00, 0x18, 0x19 (Table 3.13).
AUTH_CODES: Final = (0x01, 0x10, 0x80)


def _code_name(code: int) -> str:
    known = reason_codes.BY_VALUE.get(code)
    return f"0x{code:02x} ({known.name})" if known else f"0x{code:02x}"


def _reason_code_family() -> tuple[ForbiddenStimulus, ...]:
    rows = [
        ForbiddenStimulus(
            f"{packet_type.name.lower()}-reason-code-0x{code:02x}",
            f"{packet_type.name} with Reason Code {_code_name(code)}, which {packet_type.name} does not define",
            ack_bytes(_first_byte(packet_type), code, 1),
            breaks=reason_codes.RULES[packet_type],
            answers=ANSWERED_FLOW[packet_type],
            ack=(_first_byte(packet_type), code),
            needs=_needs(packet_type),
        )
        for packet_type, code in ACK_CODES
    ]
    rows += [
        ForbiddenStimulus(
            f"disconnect-reason-code-0x{code:02x}",
            f"A client DISCONNECT with Reason Code {_code_name(code)}, "
            + ("which only a server may send" if code in reason_codes.BY_VALUE else "which DISCONNECT does not define"),
            _frame(0xE0, bytes((code, 0))),
            breaks=reason_codes.RULES[PacketType.DISCONNECT],
        )
        for code in DISCONNECT_CODES
    ]
    rows += [
        ForbiddenStimulus(
            f"auth-reason-code-0x{code:02x}",
            f"AUTH with Reason Code {_code_name(code)}, which AUTH does not define",
            _frame(0xF0, bytes((code, 0))),
            breaks=reason_codes.RULES[PacketType.AUTH],
        )
        for code in AUTH_CODES
    ]
    return tuple(rows)


# --- reserved fixed-header flags -----------------------------------------------------------------------------

#: The packets a 5.0 client sends with fixed flags (Table 2.2), AUTH included.
FLAGGED_PACKETS: Final = (
    PacketType.CONNECT,
    PacketType.PUBACK,
    PacketType.PUBREC,
    PacketType.PUBREL,
    PacketType.PUBCOMP,
    PacketType.SUBSCRIBE,
    PacketType.UNSUBSCRIBE,
    PacketType.PINGREQ,
    PacketType.DISCONNECT,
    PacketType.AUTH,
)


def _flag_body(packet_type: PacketType) -> bytes | Callable[[str, str], bytes]:
    """A well-formed 5.0 body for ``packet_type`` (the case's own Client Identifier or filter): only the flags
    will be wrong."""
    if packet_type is PacketType.CONNECT:
        return lambda client_id, _prefix: _body(_v5_connect(client_id))
    if packet_type is PacketType.SUBSCRIBE:
        return lambda _client_id, prefix: b"\x00\x01\x00" + field(f"{prefix}/a".encode()) + b"\x00"
    if packet_type is PacketType.UNSUBSCRIBE:
        return lambda _client_id, prefix: b"\x00\x02\x00" + field(f"{prefix}/a".encode())
    if packet_type in ANSWERED_FLOW:
        return b"\x00\x01"  # Packet Identifier 1, Reason Code left out (Success)
    return b""  # PINGREQ; DISCONNECT and AUTH with their Reason Code left out (0x00)


def _flagged(first_byte: int, body: bytes | Callable[[str, str], bytes]) -> bytes | Shape:
    if isinstance(body, bytes):
        return _frame(first_byte, body)
    return lambda client_id, prefix: _frame(first_byte, body(client_id, prefix))


def _flag_family() -> tuple[ForbiddenStimulus, ...]:
    rows = []
    for packet_type in FLAGGED_PACKETS:
        required = REQUIRED_FLAGS[packet_type]
        name = "AUTH" if packet_type is PacketType.AUTH else packet_type.name
        for bit in range(4):
            flags = required ^ (1 << bit)
            first_byte = (packet_type << 4) | flags
            answers = ANSWERED_FLOW.get(packet_type, "")  # an acknowledgement answers a real flow
            rows.append(
                ForbiddenStimulus(
                    f"{name.lower()}-flag-bit-{bit}",
                    f"{name} with flag bit {bit} flipped (flags {flags:04b}, not {required:04b})",
                    _flagged(first_byte, _flag_body(packet_type)),
                    as_connect=packet_type is PacketType.CONNECT,
                    breaks=identity.statement_id(codec_rules.RESERVED_FLAGS, identity.V5) or "",
                    answers=answers,
                    ack=(first_byte, None) if answers else None,
                    needs=_needs(packet_type) if answers else "",
                )
            )
    return tuple(rows)


# --- protocol errors -----------------------------------------------------------------------------------------


def _second_connect(**fields: object) -> Shape:
    return lambda client_id, _prefix: _v5_connect(client_id, **fields)


def _publish_qos3(first_byte: int) -> Shape:
    """A PUBLISH with both QoS bits set, a Packet Identifier and an empty Property Length."""
    return lambda _client_id, prefix: _frame(first_byte, field(f"{prefix}/q3".encode()) + b"\x00\x01\x00x")


def _subscribe(*filters: tuple[str, int]) -> Shape:
    """A 5.0 SUBSCRIBE (Packet Identifier 1, no properties) of ``(filter, options byte)`` pairs; a filter is
    formatted with the case's prefix as ``p``."""

    def shape(_client_id: str, prefix: str) -> bytes:
        payload = b"".join(field(f.format(p=prefix).encode()) + bytes((options,)) for f, options in filters)
        return _frame(0x82, b"\x00\x01\x00" + payload)

    return shape


#: The Share Name of the shared filters a case uses.
SHARE: Final = "$share/mqttaudit/{p}"


def _protocol_error_family() -> tuple[ForbiddenStimulus, ...]:
    second = "A second CONNECT on an accepted connection"
    rows = [
        ForbiddenStimulus("second-connect-same", f"{second}, the same as the first", _second_connect()),
        ForbiddenStimulus(
            "second-connect-clean-start-0", f"{second}, with Clean Start 0", _second_connect(clean_session=False)
        ),
        ForbiddenStimulus(
            "second-connect-session-expiry",
            f"{second}, with a Session Expiry Interval",
            _second_connect(properties=props.make(session_expiry_interval=10)),
        ),
        ForbiddenStimulus(
            "second-connect-other-client-id",
            f"{second}, with another Client Identifier",
            lambda client_id, _prefix: _v5_connect(client_id[:-1] + ("1" if client_id[-1] == "0" else "0")),
        ),
    ]
    rows += [
        ForbiddenStimulus(
            f"publish-qos-3{suffix}", f"PUBLISH with QoS 3{title}", _publish_qos3(first), breaks=R5.MQTT_3_3_1_4
        )
        for suffix, title, first in (("", "", 0x36), ("-retain", " and RETAIN", 0x37), ("-dup", " and DUP", 0x3E))
    ]
    rows += [
        ForbiddenStimulus(
            f"subscribe-retain-handling-3{suffix}",
            f"SUBSCRIBE with Retain Handling 3{title}",
            _subscribe(*filters),
            breaks=R5.MQTT_3_8_3_RETAIN_HANDLING,
        )
        for suffix, title, filters in (
            ("", "", (("{p}/rh", 0x30),)),
            ("-qos-2", " and QoS 2", (("{p}/rh", 0x32),)),
            ("-after-a-good-filter", " on a filter after a good one", (("{p}/good", 0x00), ("{p}/rh", 0x30))),
        )
    ]
    rows += [
        ForbiddenStimulus(
            f"subscribe-reserved-option-bits-0x{options:02x}{suffix}",
            f"SUBSCRIBE with Subscription Options 0x{options:02x} (reserved bits 7-6 set){title}",
            _subscribe(*((("{p}/good", 0x00),) if suffix else ()), ("{p}/opt", options)),
            breaks=R5.MQTT_3_8_3_5,
        )
        for options, suffix, title in (
            (0x40, "", ""),
            (0x80, "", ""),
            (0xC0, "", ""),
            (0x41, "-after-a-good-filter", " on a filter after a good one"),
        )
    ]
    rows += [
        ForbiddenStimulus(
            f"subscribe-no-local-shared{suffix}",
            f"SUBSCRIBE with No Local on a Shared Subscription{title}",
            _subscribe(*filters),
            breaks=R5.MQTT_3_8_3_4,
            needs="shared-subscriptions",
        )
        for suffix, title, filters in (
            ("", "", ((SHARE + "/nl", 0x04),)),
            ("-qos-1", " at QoS 1", ((SHARE + "/nl", 0x05),)),
            ("-after-a-good-filter", " after a good filter", (("{p}/good", 0x00), (SHARE + "/nl", 0x04))),
        )
    ]
    return tuple(rows)


#: The families of single packets, in the order the library lists them: (name, what it covers, its shapes).
FAMILIES: Final[tuple[tuple[str, str, tuple[ForbiddenStimulus, ...]], ...]] = (
    ("reason-code", "Reason Codes a client may not send", _reason_code_family()),
    ("fixed-flags", "every reserved fixed-header flag bit of every packet a 5.0 client sends", _flag_family()),
    ("protocol-error", "second CONNECT, QoS 3, Subscription Options a client may not send", _protocol_error_family()),
)

STIMULI: Final[tuple[ForbiddenStimulus, ...]] = tuple(
    replace(stimulus, family=family) for family, _title, stimuli in FAMILIES for stimulus in stimuli
)

_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID}, topic prefix <p> = {EXAMPLE_PREFIX} and Packet Identifier"
    " 1: each run and case has its own)"
)
#: What a flow an acknowledgement answers is, in words.
FLOW_WORDS: Final = {
    "": "after an accepted 5.0 CONNECT",
    OWN_QOS2: "as the PUBREL of the client's own QoS 2 PUBLISH, after the broker's PUBREC",
    DELIVERY_QOS1: "answering a QoS 1 delivery to the case's subscription",
    DELIVERY_QOS2: "answering a QoS 2 delivery to the case's subscription",
    DELIVERY_PUBREL: "answering the broker's PUBREL of a QoS 2 delivery (after the client's PUBREC 0x00)",
}


async def answered_flow(context: CaseContext, answers: str) -> tuple[ProbeConnection, int]:
    """Sets up the flow an acknowledgement answers (``answers``, see :data:`ANSWERED_FLOW`); returns the connection
    to send it on and the flow's Packet Identifier."""
    if answers == OWN_QOS2:
        connection = await context.connect()
        context.require("qos2", "a QoS 2 PUBLISH of the client's own")  # as its CONNACK declares
        packet_id = context.packet_id()
        await connection.send(Publish(topic=context.topic("own"), payload=b"q2", qos=2, packet_id=packet_id))
        ack = await connection.wait_for(lambda p: isinstance(p, Pubrec) and p.packet_id == packet_id)
        if not isinstance(ack, Pubrec) or is_refusal(ack.reason_code or 0, V5):
            raise Inconclusive(f"setup: {connection.missing(f'a PUBREC below 0x80 for packet id {packet_id}')}")
        return connection, packet_id
    qos = 1 if answers == DELIVERY_QOS1 else 2
    topic = context.topic("t")
    receiver = await context.connect("receiver", auto_ack=False)
    await context.subscribe_granted(receiver, topic, qos)
    publisher = await context.connect("publisher")
    await context.publish(publisher, topic, b"answered", qos=qos)
    since = receiver.subscribed_from or 0
    delivery = await receiver.wait_for(lambda p: isinstance(p, Publish) and p.topic == topic, since=since)
    await context.disconnect(publisher)
    if not isinstance(delivery, Publish) or delivery.packet_id is None or delivery.qos != qos:
        raise Inconclusive(f"setup: {receiver.missing(f'a QoS {qos} delivery on {topic}')}")
    if answers == DELIVERY_PUBREL:
        await receiver.send(Pubrec(packet_id=delivery.packet_id, reason_code=0x00))
        pubrel = await receiver.wait_for(lambda p: isinstance(p, Pubrel) and p.packet_id == delivery.packet_id)
        if pubrel is None:
            raise Inconclusive(f"setup: {receiver.missing(f'PUBREL for packet id {delivery.packet_id}')}")
    return receiver, delivery.packet_id


def _register(stimulus: ForbiddenStimulus) -> None:
    async def script(context: CaseContext) -> None:
        if stimulus.needs:
            context.require(stimulus.needs, stimulus.title)
        if stimulus.as_connect:
            connection = await context.open()
            connection.client_id = context.client_id()
            data = stimulus.build(connection.client_id, context.topic())
        elif stimulus.ack is not None:
            connection, packet_id = await answered_flow(context, stimulus.answers)
            data = ack_bytes(*stimulus.ack, packet_id)
        else:
            connection = await context.connect()
            # built now: the case's own identifier and topics, never another case's or another run's
            data = stimulus.build(connection.client_id, context.topic())
        await connection.send(data)
        await connection.wait_close()

    where = "as the first packet of a connection" if stimulus.as_connect else FLOW_WORDS[stimulus.answers]
    breaks = f" (breaks {stimulus.breaks})" if stimulus.breaks else ""
    case(
        f"v5/forbidden/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title}{breaks}, {where}: {stimulus.data.hex(' ')}{_SHOWN_WITH}",
        expected="close the connection (a DISCONNECT or CONNACK with Reason Code 0x81 or 0x82 may come first); "
        "act on nothing in it",
        family=f"v5/forbidden-{stimulus.family}",
        protocol=V5,
        provokes=provoked(stimulus, V5),
    )(script)


for _stimulus in STIMULI:
    _register(_stimulus)


# --- enhanced authentication ---------------------------------------------------------------------------------

#: [MQTT-3.2.2-7] A CONNACK of 0x80 or above is followed by the close: what the judge decides of a refusal.
CLOSE_AFTER_REFUSAL: Final[str] = R5.MQTT_3_2_2_7
#: Authentication Methods no broker implements (the profile's ``authentication_methods`` may not list them).
UNKNOWN_METHODS: Final = (
    ("method", "X-MQTTAUDIT-UNSUPPORTED", None),
    ("method-with-data", "X-MQTTAUDIT-UNSUPPORTED-DATA", b"\x00\x01challenge"),
    ("method-with-empty-data", "X-MQTTAUDIT-UNSUPPORTED-EMPTY", b""),
)
#: The CONNACK codes 4.12 names for a method the server does not support.
BAD_METHOD_CODES: Final = (0x8C, 0x87)


def _register_unknown_method(word: str, method: str, data: bytes | None) -> None:
    with_data = "" if data is None else f" and {len(data)} byte(s) of Authentication Data"

    async def script(context: CaseContext) -> None:
        if method in (context.profile.authentication_methods or ()):
            raise NotApplicable(f"the profile declares the broker supports the Authentication Method {method!r}")
        connection = await context.open()
        extra = {} if data is None else {"authentication_data": data}
        properties = props.make(authentication_method=method, **extra)
        await connection.send(Connect(protocol_level=V5.level, client_id=context.client_id(), properties=properties))
        answer = await connection.wait_for(lambda p: isinstance(p, Connack | Auth))
        if isinstance(answer, Auth):
            raise NotApplicable(f"the broker continues an authentication with the method {method!r} (AUTH)")
        if isinstance(answer, Connack) and answer.return_code == 0:
            # A CONNACK 0x00 naming no method breaks [MQTT-4.12.0-1] (the judge's finding fails the case); one naming
            # it says the broker supports the method after all
            raise Inconclusive(f"the broker accepted the CONNECT with the Authentication Method {method!r}")
        await connection.wait_close()

    case(
        f"v5/forbidden/connect-unsupported-authentication-{word}",
        (CLOSE_AFTER_REFUSAL,),
        f"A CONNECT with an Authentication Method the broker does not support{with_data}",
        stimulus=f"5.0 CONNECT with Authentication Method {method!r}{with_data}, as the first packet",
        expected="CONNACK 0x8C (Bad authentication method) or 0x87 (Not authorized), or any refusal, then the "
        "close [MQTT-4.12.0-1, MQTT-3.2.2-7]; a CONNACK 0x00 naming no method fails MQTT-4.12.0-1; an AUTH "
        "continuing the method makes the case not applicable",
        family="v5/forbidden-authentication",
        protocol=V5,
    )(script)


for _word, _method, _data in UNKNOWN_METHODS:
    _register_unknown_method(_word, _method, _data)


# --- allowed outcomes ----------------------------------------------------------------------------------------


def outcome_statement(situation: str) -> str:
    """The 5.0 id of the statement the judge holds a situation's Reason Codes to (:data:`ALLOWED_OUTCOMES`)."""
    return identity.statement_id(ALLOWED_OUTCOMES[situation].rule, identity.V5) or ""


#: [MQTT-3.10.4-4] UNSUBACK with the UNSUBSCRIBE's Packet Identifier, [MQTT-3.10.4-5] sent even when nothing was
#: deleted, [MQTT-3.11.3-2] a valid Unsubscribe Reason Code per filter. Not [MQTT-3.11.3-1]: the judge takes
#: 0x00 for a filter never held as out of place, where no MUST of 3.11 asks for 0x11 over 0x00.
UNSUBSCRIBE_STATEMENTS: Final = (R5.MQTT_3_10_4_4, R5.MQTT_3_10_4_5, R5.MQTT_3_11_3_2)
#: The filters never subscribed that one UNSUBSCRIBE names: (id word, title, the filters under the prefix p).
NEVER_SUBSCRIBED: Final = (
    ("one-filter", "a filter", ("{p}/never",)),
    ("wildcard-filter", "a wildcard filter", ("{p}/+/never/#",)),
    ("shared-filter", "a shared filter", (SHARE + "/never",)),
    ("two-filters", "two filters", ("{p}/never", "{p}/never/either")),
)


def _register_unsubscribe(word: str, title: str, filters: tuple[str, ...]) -> None:
    async def script(context: CaseContext) -> None:
        connection = await context.connect()
        await context.unsubscribe(connection, *(f.format(p=context.topic()) for f in filters))
        await context.disconnect(connection)

    accepted = ALLOWED_OUTCOMES["unsuback-not-held"].quoted(frozenset({0x00}))
    case(
        f"v5/forbidden/unsubscribe-never-subscribed-{word}",
        UNSUBSCRIBE_STATEMENTS,
        f"UNSUBSCRIBE of {title} never subscribed is answered",
        stimulus=f"5.0 UNSUBSCRIBE of {title} the session never subscribed ({', '.join(filters)} under the case's "
        "prefix p), on a fresh session",
        expected=f"UNSUBACK with its Packet Identifier and one Reason Code per filter, any of {accepted}",
        family="v5/forbidden-allowed-outcomes",
        protocol=V5,
    )(script)


for _word, _title, _filters in NEVER_SUBSCRIBED:
    _register_unsubscribe(_word, _title, _filters)


#: QoS 1 and 2 PUBLISHes nobody receives: (id word, QoS, subscribe then unsubscribe the topic first).
NOBODY_RECEIVES: Final = (
    ("qos2-no-subscribers", 2, False),
    ("qos1-after-unsubscribe", 1, True),
    ("qos2-after-unsubscribe", 2, True),
)


def publish_statements(qos: int) -> tuple[str, ...]:
    """The answer to a QoS ``qos`` PUBLISH is of the right type [MQTT-3.3.4-1], carries its Packet Identifier
    [MQTT-2.2.1-5] and a code the judge's table allows: PUBACK (0x00, 0x10 or a refusal), or the PUBCOMP completing
    a PUBREC that took the message."""
    keys = (ACK_MATCHES_QOS, PUBLISH_ACK_SAME_ID)
    answer = tuple(identity.statement_id(key, identity.V5) or "" for key in keys)
    return (*answer, outcome_statement("puback" if qos == 1 else "pubcomp-known"))


def _register_nobody(word: str, qos: int, unsubscribed: bool) -> None:
    async def script(context: CaseContext) -> None:
        if qos == 2:
            context.require("qos2", "a QoS 2 PUBLISH")
        connection = await context.connect()
        topic = context.topic("nobody")
        if unsubscribed:
            await context.subscribe(connection, Subscription(topic_filter=topic, qos=qos))
            await context.unsubscribe(connection, topic)
        await context.publish(connection, topic, b"nobody", qos=qos)
        await context.disconnect(connection)

    answer = "PUBACK" if qos == 1 else "PUBREC, then PUBCOMP 0x00 for the PUBREL"
    before = "after subscribing to it and unsubscribing again, " if unsubscribed else ""
    case(
        f"v5/forbidden/publish-{word}",
        publish_statements(qos),
        f"A QoS {qos} message nobody receives is still acknowledged" + (" (after an unsubscribe)" if before else ""),
        stimulus=f"5.0 QoS {qos} PUBLISH, {before}to a topic of the case no client subscribes to",
        expected=f"{answer} with the Packet Identifier; Reason Code 0x00 or 0x10 (No matching subscribers), or a "
        "refusal of 0x80 and above",
        family="v5/forbidden-allowed-outcomes",
        protocol=V5,
    )(script)


for _word, _qos, _unsubscribed in NOBODY_RECEIVES:
    _register_nobody(_word, _qos, _unsubscribed)

__all__ = ["STIMULI", "ForbiddenStimulus", "ack_bytes", "decoded_rules", "targeted"]
