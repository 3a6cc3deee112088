"""Every rule check of the codec, one function or table per rule, shared by the decoder and the encoder.

Checks work on wire values (bytes, flag bits, integers) and append :class:`Violation` records to ``out``; they
never raise. The encoder validates by decoding what it wrote, so one set of checks serves both directions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from . import rules
from .errors import Violation
from .packets import Direction, PacketType

_FROM_CLIENT: Final = Direction.FROM_CLIENT
_CLIENT = frozenset({Direction.FROM_CLIENT})
_SERVER = frozenset({Direction.FROM_SERVER})
_BOTH = frozenset({Direction.FROM_CLIENT, Direction.FROM_SERVER})

#: Who may send each packet type (Table 2.1, "Direction of flow").
SENDERS: Final[dict[int, frozenset[Direction]]] = {
    PacketType.CONNECT: _CLIENT,
    PacketType.CONNACK: _SERVER,
    PacketType.PUBLISH: _BOTH,
    PacketType.PUBACK: _BOTH,
    PacketType.PUBREC: _BOTH,
    PacketType.PUBREL: _BOTH,
    PacketType.PUBCOMP: _BOTH,
    PacketType.SUBSCRIBE: _CLIENT,
    PacketType.SUBACK: _SERVER,
    PacketType.UNSUBSCRIBE: _CLIENT,
    PacketType.UNSUBACK: _SERVER,
    PacketType.PINGREQ: _CLIENT,
    PacketType.PINGRESP: _SERVER,
    PacketType.DISCONNECT: _CLIENT,
}

#: MQTT 5.0 adds AUTH (type 15), and lets the server send DISCONNECT too.
SENDERS_5: Final[dict[int, frozenset[Direction]]] = {**SENDERS, PacketType.DISCONNECT: _BOTH, PacketType.AUTH: _BOTH}

# The same tables as sets of plain ints: membership by identity of the direction, no enum hashing per packet.
_CLIENT_SENDS: Final = frozenset(int(t) for t, senders in SENDERS.items() if Direction.FROM_CLIENT in senders)
_SERVER_SENDS: Final = frozenset(int(t) for t, senders in SENDERS.items() if Direction.FROM_SERVER in senders)
_CLIENT_SENDS_5: Final = frozenset(int(t) for t, senders in SENDERS_5.items() if Direction.FROM_CLIENT in senders)
_SERVER_SENDS_5: Final = frozenset(int(t) for t, senders in SENDERS_5.items() if Direction.FROM_SERVER in senders)

#: Required fixed-header flag bits (Table 2.2); PUBLISH is absent because its flags carry DUP, QoS and RETAIN.
REQUIRED_FLAGS: Final[dict[int, int]] = {
    PacketType.CONNECT: 0,
    PacketType.CONNACK: 0,
    PacketType.PUBACK: 0,
    PacketType.PUBREC: 0,
    PacketType.PUBREL: 0b0010,
    PacketType.PUBCOMP: 0,
    PacketType.SUBSCRIBE: 0b0010,
    PacketType.SUBACK: 0,
    PacketType.UNSUBSCRIBE: 0b0010,
    PacketType.UNSUBACK: 0,
    PacketType.PINGREQ: 0,
    PacketType.PINGRESP: 0,
    PacketType.DISCONNECT: 0,
    PacketType.AUTH: 0,  # MQTT 5.0 (type 15 is reserved in 3.1.1, so 3.1.1 bytes never reach this entry)
}

#: Statements broken by wrong fixed-header flags, beyond the general [MQTT-2.2.2-1].
_FLAG_RULES: Final[dict[int, tuple[str, ...]]] = {
    PacketType.PUBREL: (rules.RESERVED_FLAGS, rules.PUBREL_FLAGS),
    PacketType.SUBSCRIBE: (rules.RESERVED_FLAGS, rules.SUBSCRIBE_FLAGS),
    PacketType.UNSUBSCRIBE: (rules.RESERVED_FLAGS, rules.UNSUBSCRIBE_FLAGS),
    PacketType.DISCONNECT: (rules.RESERVED_FLAGS, rules.DISCONNECT_FLAGS),
    PacketType.AUTH: (rules.RESERVED_FLAGS, rules.AUTH_FLAGS),
}

#: Packets whose Remaining Length is fixed by the spec, with the rule that fixes it.
FIXED_LENGTH: Final[dict[int, tuple[int, str]]] = {
    PacketType.CONNACK: (2, rules.CONNACK_LENGTH),
    PacketType.PUBACK: (2, rules.PUBACK_LENGTH),
    PacketType.PUBREC: (2, rules.PUBREC_LENGTH),
    PacketType.PUBREL: (2, rules.PUBREL_LENGTH),
    PacketType.PUBCOMP: (2, rules.PUBCOMP_LENGTH),
    PacketType.UNSUBACK: (2, rules.UNSUBACK_LENGTH),
    PacketType.PINGREQ: (0, rules.PINGREQ_LENGTH),
    PacketType.PINGRESP: (0, rules.PINGRESP_LENGTH),
    PacketType.DISCONNECT: (0, rules.DISCONNECT_LENGTH),
}
#: In MQTT 5.0 only PINGREQ and PINGRESP keep a fixed length: the other acknowledgements may carry a Reason Code
#: and properties.
FIXED_LENGTH_5: Final[dict[int, tuple[int, str]]] = {
    PacketType.PINGREQ: FIXED_LENGTH[PacketType.PINGREQ],
    PacketType.PINGRESP: FIXED_LENGTH[PacketType.PINGRESP],
}

#: The statement a Packet Identifier of 0 breaks, per packet type: the packet itself must carry a non-zero id
#: [MQTT-2.3.1-1], or it answers a packet that had to [MQTT-2.3.1-6/7, MQTT-4.3.3-2], so 0 answers nothing.
PACKET_ID_RULES: Final[dict[int, str]] = {
    PacketType.PUBLISH: rules.PACKET_ID_NONZERO,
    PacketType.SUBSCRIBE: rules.PACKET_ID_NONZERO,
    PacketType.UNSUBSCRIBE: rules.PACKET_ID_NONZERO,
    PacketType.PUBACK: rules.PUBLISH_ACK_SAME_ID,
    PacketType.PUBREC: rules.PUBLISH_ACK_SAME_ID,
    PacketType.PUBREL: rules.PUBLISH_ACK_SAME_ID,
    PacketType.PUBCOMP: rules.PUBCOMP_SAME_ID,
    PacketType.SUBACK: rules.SUBSCRIBE_ACK_SAME_ID,
    PacketType.UNSUBACK: rules.SUBSCRIBE_ACK_SAME_ID,
}

#: Allowed SUBACK return codes [MQTT-3.9.3-2] and CONNACK return codes (Table 3.1; 6-255 are reserved).
SUBACK_RETURN_CODES: Final = frozenset({0x00, 0x01, 0x02, 0x80})
CONNACK_RETURN_CODES: Final = frozenset(range(6))
PROTOCOL_NAME: Final = "MQTT"
PROTOCOL_LEVEL: Final = 4
_PLUS: Final = ord("+")
_HASH: Final = ord("#")


@dataclass(frozen=True, slots=True)
class StringField:
    """How one UTF-8 string field is checked: its name in findings, its kind, and the field's own statements."""

    name: str
    #: "text", "topic-name", "topic-filter", or "topic-filter-5" (a 5.0 filter, which may be a Shared Subscription)
    kind: str
    utf8_rules: tuple[str, ...] = ()
    wildcard_rules: tuple[str, ...] = ()
    #: The field's own statements a U+0000 breaks as well as [MQTT-1.5.4-2]: those that bind the field to every
    #: rule of a UTF-8 Encoded String, not to its well-formedness alone.
    null_rules: tuple[str, ...] = ()


PROTOCOL_NAME_FIELD: Final = StringField("Protocol Name", "text")
CLIENT_ID_FIELD: Final = StringField("Client Identifier", "text", (rules.CLIENT_ID_UTF8,))
WILL_TOPIC_FIELD: Final = StringField("Will Topic", "topic-name", (rules.WILL_TOPIC_UTF8,))
USERNAME_FIELD: Final = StringField("User Name", "text", (rules.USERNAME_UTF8,))
PUBLISH_TOPIC_FIELD: Final = StringField(
    "Topic Name", "topic-name", (rules.TOPIC_NAME_UTF8,), (rules.TOPIC_NAME_NO_WILDCARDS,)
)
SUBSCRIBE_FILTER_FIELD: Final = StringField("Topic Filter", "topic-filter", (rules.SUBSCRIBE_FILTER_UTF8,))
UNSUBSCRIBE_FILTER_FIELD: Final = StringField("Topic Filter", "topic-filter", (rules.UNSUBSCRIBE_FILTER_UTF8,))
#: The same in MQTT 5.0, where a filter may name a Shared Subscription (4.8.2).
SUBSCRIBE_FILTER_FIELD_5: Final = StringField("Topic Filter", "topic-filter-5", (rules.SUBSCRIBE_FILTER_UTF8,))
UNSUBSCRIBE_FILTER_FIELD_5: Final = StringField("Topic Filter", "topic-filter-5", (rules.UNSUBSCRIBE_FILTER_UTF8,))
#: The prefix of a Shared Subscription's Topic Filter (4.8.2).
SHARE_PREFIX: Final = b"$share/"

# One pass finds U+0000, the control characters U+0001..U+001F and U+007F..U+009F, and the non-characters
# U+FDD0..U+FDEF and U+nFFFE/U+nFFFF, all of which 1.5.3 names; a clean string costs a single regex scan.
_SUSPECT = re.compile(
    rb"[\x00-\x1f\x7f]|\xc2[\x80-\x9f]|\xef\xb7[\x90-\xaf]|\xef\xbf[\xbe\xbf]|[\xf0-\xf4][\x8f\x9f\xaf\xbf]\xbf[\xbe\xbf]"
)


def check_packet_type(packet_type: int, offset: int, out: list[Violation], v5: bool = False) -> bool:
    """Types 0 and 15 are reserved and forbidden (Table 2.1; in 5.0, 15 is AUTH). Returns True when the type is
    usable."""
    if packet_type in (SENDERS_5 if v5 else SENDERS):
        return True
    out.append(Violation(rules.RESERVED_PACKET_TYPE, offset, f"packet type {packet_type} is reserved"))
    return False


def check_direction(
    packet_type: int, direction: Direction, offset: int, out: list[Violation], v5: bool = False
) -> None:
    """A packet may only flow the way Table 2.1 says (a server never sends SUBSCRIBE, a client never CONNACK)."""
    if direction is _FROM_CLIENT:
        sends = _CLIENT_SENDS_5 if v5 else _CLIENT_SENDS
    else:
        sends = _SERVER_SENDS_5 if v5 else _SERVER_SENDS
    if packet_type in sends:
        return
    sender = "client" if direction is _FROM_CLIENT else "server"
    out.append(
        Violation(
            rules.PACKET_DIRECTION,
            offset,
            f"{packet_name(packet_type, v5)} sent by the {sender}, which never sends it",
        )
    )


def packet_name(packet_type: int, v5: bool = False) -> str:
    """``PUBLISH``; type 15 is ``AUTH`` in MQTT 5.0 and ``RESERVED_15`` before."""
    return "AUTH" if v5 and packet_type == PacketType.AUTH else PacketType(packet_type).name


def check_fixed_flags(packet_type: int, flags: int, offset: int, out: list[Violation]) -> None:
    """Reserved fixed-header flag bits must hold the values of Table 2.2 [MQTT-2.2.2-1]."""
    required = REQUIRED_FLAGS[packet_type]
    if flags != required:
        detail = (
            f"{packet_name(packet_type, packet_type == PacketType.AUTH)} flags are {flags:04b}, must be {required:04b}"
        )
        out.extend(Violation(rule, offset, detail) for rule in _FLAG_RULES.get(packet_type, (rules.RESERVED_FLAGS,)))


def check_publish_flags(qos: int, dup: bool, offset: int, out: list[Violation]) -> None:
    if qos == 3:
        out.append(Violation(rules.QOS_3, offset, "PUBLISH with both QoS bits set (QoS 3)"))
    elif qos == 0 and dup:
        detail = "PUBLISH with QoS 0 has DUP set"
        out.append(Violation(rules.DUP_ON_QOS0, offset, detail))
        out.append(Violation(rules.QOS0_SENDER_FLAGS, offset, detail))


def check_fixed_length(packet_type: int, length: int, offset: int, out: list[Violation], v5: bool = False) -> bool:
    """Returns False (after reporting) when a fixed-size packet has another Remaining Length."""
    expected = (FIXED_LENGTH_5 if v5 else FIXED_LENGTH).get(packet_type)
    if expected is None or expected[0] == length:
        return True
    out.append(
        Violation(
            expected[1],
            offset,
            f"{PacketType(packet_type).name} Remaining Length is {length}, must be {expected[0]}",
        )
    )
    return False


def check_packet_id(packet_type: int, packet_id: int, offset: int, out: list[Violation]) -> None:
    if packet_id == 0:
        out.append(
            Violation(PACKET_ID_RULES[packet_type], offset, f"{PacketType(packet_type).name} Packet Identifier is 0")
        )


def string_too_long(raw: bytes, what: str, rule: str) -> Violation | None:
    """A string field holds at most 65,535 bytes: its length prefix has two bytes [MQTT-4.7.3-3 for topics]."""
    if len(raw) <= 0xFFFF:
        return None
    return Violation(rule, 0, f"{what} is {len(raw)} bytes of UTF-8; a string field holds at most 65,535")


def check_string(raw: bytes, offset: int, field: StringField, out: list[Violation]) -> str:
    """Checks one string field's bytes (``offset`` is where its first byte lies) and returns its text.

    Ill-formed bytes are kept, not lost: they decode to lone surrogates U+DC80..U+DCFF (PEP 383), which the
    encoder writes back as the original bytes.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", "surrogateescape")
        seen = raw[exc.start : exc.start + 4].hex(" ")
        detail = f"{field.name} is not well-formed UTF-8: {exc.reason} at byte {exc.start} ({seen})"
        out.append(Violation(rules.UTF8_WELL_FORMED, offset + exc.start, detail))
        out.extend(Violation(rule, offset + exc.start, detail) for rule in field.utf8_rules)
    # Printable text holds none of the characters 1.5.3 names (they are all non-printable): one C-level pass.
    if not text.isprintable() and _SUSPECT.search(raw) is not None:
        _check_suspect_characters(raw, offset, field, out)
    if field.kind == "topic-name":
        check_topic_name(raw, offset, field, out)
    elif field.kind == "topic-filter":
        check_topic_filter(raw, offset, field, out)
    elif field.kind == "topic-filter-5":
        check_topic_filter_5(raw, offset, field, out)
    return text


def _check_suspect_characters(raw: bytes, offset: int, field: StringField, out: list[Violation]) -> None:
    nul = raw.find(b"\x00")
    if nul >= 0:
        detail = f"{field.name} contains U+0000 at byte {nul}"
        out.append(Violation(rules.UTF8_NO_NULL, offset + nul, detail))
        out.extend(Violation(rule, offset + nul, detail) for rule in field.null_rules)
        if field.kind != "text":
            out.append(Violation(rules.TOPIC_NO_NULL, offset + nul, detail))
    for match in _SUSPECT.finditer(raw):
        if match.group() != b"\x00":
            char = match.group().decode("utf-8", "surrogateescape")
            out.append(
                Violation(
                    rules.UTF8_CONTROL_CHARACTERS,
                    offset + match.start(),
                    f"{field.name} contains U+{ord(char[0]):04X}, which should not be used",
                )
            )
            break


def check_topic_name(raw: bytes, offset: int, field: StringField, out: list[Violation]) -> None:
    """Topic Names are non-empty [MQTT-4.7.3-1] and hold no wildcard [MQTT-4.7.1-1] (and, in PUBLISH, 3.3.2-2)."""
    if not raw:
        out.append(Violation(rules.TOPIC_NOT_EMPTY, offset - 2, f"{field.name} is empty (length 0x0000)"))
        return
    if _PLUS not in raw and _HASH not in raw:  # byte values: memchr, no substring search
        return
    for wildcard in (b"+", b"#"):
        pos = raw.find(wildcard)
        if pos >= 0:
            detail = f"{field.name} {_show(raw)} contains the wildcard {wildcard.decode()!r}"
            out.extend(Violation(rule, offset + pos, detail) for rule in field.wildcard_rules)
            out.append(Violation(rules.TOPIC_NAME_WILDCARDS, offset + pos, detail))
            return


def check_topic_filter(raw: bytes, offset: int, field: StringField, out: list[Violation]) -> None:
    """Topic Filters are non-empty [MQTT-4.7.3-1]; '#' is alone in the last level [MQTT-4.7.1-2]; '+' fills its
    level [MQTT-4.7.1-3]."""
    if not raw:
        out.append(Violation(rules.TOPIC_NOT_EMPTY, offset - 2, f"{field.name} is empty (length 0x0000)"))
        return
    if _PLUS not in raw and _HASH not in raw:  # byte values: memchr, no substring search
        return
    levels = raw.split(b"/")
    last = len(levels) - 1
    pos = offset
    for index, level in enumerate(levels):
        hash_at = level.find(b"#")
        if hash_at >= 0 and (level != b"#" or index != last):
            where = "not the last level" if level == b"#" else "not alone in its level"
            out.append(
                Violation(rules.MULTI_LEVEL_WILDCARD, pos + hash_at, f"{field.name} {_show(raw)}: '#' is {where}")
            )
        plus_at = level.find(b"+")
        if plus_at >= 0 and level != b"+":
            out.append(
                Violation(
                    rules.SINGLE_LEVEL_WILDCARD,
                    pos + plus_at,
                    f"{field.name} {_show(raw)}: '+' does not fill its level",
                )
            )
        pos += len(level) + 1


def check_subscription_options_5(options: int, shared: bool, offset: int, out: list[Violation]) -> None:
    """MQTT 5.0 Subscription Options: bits 7-6 reserved [MQTT-3.8.3-5], Maximum QoS not 3, Retain Handling not 3
    (3.8.3.1), and No Local not on a Shared Subscription [MQTT-3.8.3-4]."""
    if options & 0xC0:
        detail = f"Subscription Options 0x{options:02x} set the reserved bits 7-6 ({options >> 6:02b})"
        out.append(Violation(rules.SUBSCRIBE_OPTIONS, offset, detail))
    if options & 0x03 == 3:
        out.append(Violation(rules.SUBSCRIBE_OPTIONS_QOS, offset, f"Subscription Options 0x{options:02x}: QoS 3"))
    if (options >> 4) & 0x03 == 3:
        detail = f"Subscription Options 0x{options:02x}: Retain Handling 3"
        out.append(Violation(rules.RETAIN_HANDLING, offset, detail))
    if shared and options & 0x04:
        detail = f"Subscription Options 0x{options:02x} set No Local on a Shared Subscription"
        out.append(Violation(rules.NO_LOCAL_SHARED, offset, detail))


def is_shared_filter(raw: bytes) -> bool:
    """A 5.0 Topic Filter starting ``$share/`` names a Shared Subscription (4.8.2)."""
    return raw.startswith(SHARE_PREFIX)


def check_topic_filter_5(raw: bytes, offset: int, field: StringField, out: list[Violation]) -> None:
    """An MQTT 5.0 Topic Filter. A Shared Subscription's ``$share/{ShareName}/{filter}`` has a ShareName of one
    character or more [MQTT-4.8.2-1], without '/', '+' or '#', followed by '/' and a Topic Filter [MQTT-4.8.2-2];
    the Topic Filter rules judge the filter after the ShareName alone (the ShareName is no topic level: a wildcard
    in it breaks 4.8.2-2, not the wildcard placement rules). Any other filter is judged whole."""
    if not is_shared_filter(raw):
        check_topic_filter(raw, offset, field, out)
        return
    start = len(SHARE_PREFIX)
    name, slash, inner = raw[start:].partition(b"/")
    shown = _show(raw)
    if not name:  # [MQTT-4.8.2-1] a ShareName of at least one character
        out.append(Violation(rules.SHARE_NAME_PRESENT, offset + start, f"Shared Subscription {shown} has no ShareName"))
    wildcard = min((at for at in (name.find(b"+"), name.find(b"#")) if at >= 0), default=-1)
    if wildcard >= 0:  # [MQTT-4.8.2-2] no '+' or '#' in the ShareName ('/' ends it)
        detail = f"Shared Subscription {shown}: the ShareName holds the wildcard {chr(name[wildcard])!r}"
        out.append(Violation(rules.SHARE_NAME_FORM, offset + start + wildcard, detail))
    if not slash or not inner:  # [MQTT-4.8.2-2] the ShareName is followed by '/' and a Topic Filter
        what = "no '/' follows the ShareName" if not slash else "no Topic Filter follows the ShareName"
        out.append(Violation(rules.SHARE_NAME_FORM, offset + len(raw), f"Shared Subscription {shown}: {what}"))
        return
    check_topic_filter(inner, offset + start + len(name) + 1, field, out)


def check_subscription_options(options: int, offset: int, out: list[Violation]) -> None:
    """Requested QoS is 0, 1 or 2 and bits 7-2 are reserved zero [MQTT-3.8.3-4]."""
    if options & 0xFC or options & 0x03 == 3:
        out.append(
            Violation(
                rules.SUBSCRIBE_OPTIONS,
                offset,
                f"requested QoS byte is 0x{options:02x}: QoS {options & 3}, reserved bits {options >> 2:06b}",
            )
        )


def check_suback_code(code: int, offset: int, out: list[Violation]) -> None:
    if code not in SUBACK_RETURN_CODES:
        out.append(Violation(rules.SUBACK_RETURN_CODES, offset, f"SUBACK return code 0x{code:02x} is reserved"))


def check_connack(ack_flags: int, return_code: int, offset: int, out: list[Violation], v5: bool = False) -> None:
    """Bits 7-1 of the acknowledge flags are zero (3.2.2.1); codes 6-255 are reserved (Table 3.1; 5.0 has its
    own table, checked by the reader); a refusal carries Session Present 0 [MQTT-3.2.2-4]."""
    if ack_flags & 0xFE:
        out.append(
            Violation(rules.CONNACK_RESERVED_FLAGS, offset, f"acknowledge flags 0x{ack_flags:02x} set reserved bits")
        )
    if not v5 and return_code not in CONNACK_RETURN_CODES:
        out.append(Violation(rules.CONNACK_RETURN_CODE, offset + 1, f"CONNACK return code {return_code} is reserved"))
    if return_code != 0 and ack_flags & 0x01:
        out.append(
            Violation(
                rules.CONNACK_SESSION_PRESENT_ON_FAILURE,
                offset,
                f"Session Present is 1 with the non-zero return code {return_code}",
            )
        )


def check_protocol(
    name: str, level: int, name_offset: int, level_offset: int, out: list[Violation], version: str = "3.1.1"
) -> None:
    """The Protocol Name and Level the version being read uses: 'MQTT' 4 (3.1.1), 'MQTT' 5 (5.0), 'MQIsdp' 3."""
    expected_name, expected_level = _PROTOCOLS[version]
    if name != expected_name:
        detail = f"protocol name is {name!r}, MQTT {version} uses {expected_name!r}"
        out.append(Violation(rules.PROTOCOL_NAME, name_offset, detail))
    if level != expected_level:
        detail = f"protocol level is {level}, MQTT {version} uses {expected_level}"
        out.append(Violation(rules.PROTOCOL_LEVEL, level_offset, detail))


_PROTOCOLS: Final = {"3.1": ("MQIsdp", 3), "3.1.1": (PROTOCOL_NAME, PROTOCOL_LEVEL), "5.0": (PROTOCOL_NAME, 5)}


def check_connect_flags(flags: int, offset: int, out: list[Violation]) -> None:
    """The reserved bit is 0 [MQTT-3.1.2-3]; Will QoS/Retain need the Will flag [MQTT-3.1.2-11, -13, -15]; Will QoS
    is never 3 [MQTT-3.1.2-14]; a password needs a user name [MQTT-3.1.2-22]."""
    if flags & 0x01:
        out.append(Violation(rules.CONNECT_RESERVED_FLAG, offset, "CONNECT reserved flag (bit 0) is 1"))
    will_flag = flags & 0x04
    will_qos = (flags >> 3) & 0x03
    will_retain = flags & 0x20
    if not will_flag:
        if will_qos:
            detail = f"Will QoS is {will_qos} but the Will flag is 0"
            out.append(Violation(rules.WILL_QOS_WITHOUT_WILL, offset, detail))
            out.append(Violation(rules.WILL_FLAG_ZERO_FIELDS, offset, detail))
        if will_retain:
            detail = "Will Retain is 1 but the Will flag is 0"
            out.append(Violation(rules.WILL_RETAIN_WITHOUT_WILL, offset, detail))
            out.append(Violation(rules.WILL_FLAG_ZERO_FIELDS, offset, detail))
    elif will_qos == 3:
        out.append(Violation(rules.WILL_QOS_3, offset, "Will QoS is 3"))
    if flags & 0x40 and not flags & 0x80:
        out.append(Violation(rules.PASSWORD_WITHOUT_USERNAME, offset, "Password flag is 1 but User Name flag is 0"))


def check_client_id(client_id: bytes, clean_session: bool, offset: int, out: list[Violation]) -> None:
    if not client_id and not clean_session:
        out.append(
            Violation(
                rules.CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION,
                offset,
                "zero-length Client Identifier with CleanSession 0",
            )
        )


def _show(raw: bytes) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= 60 else text[:57] + "...")
