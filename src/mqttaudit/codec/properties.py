"""MQTT 5.0 properties (section 2.2.2): one table of the 27 properties drives reading, writing and validation.

For each identifier the table holds its name, its data type, the packets (and the Will Properties) where it may
appear, where it may repeat, and the values its definition allows. A property in the wrong packet, a repeat, an
unknown identifier, a value out of range and a Property Length that runs past the packet are reported with the
rule they break; readers never raise.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from . import rules
from . import validators as check
from .buffer import wire_string
from .errors import BufferUnderrun, EncodeError, Violation
from .packets import Direction, PacketType, Properties, Property, PropertyValue
from .remaining_length import NEED_MORE, TOO_LONG, encode_remaining_length, is_shortest, read_remaining_length


class DataType(enum.Enum):
    """The data types of section 1.5."""

    BYTE = "Byte"
    TWO_BYTE = "Two Byte Integer"
    FOUR_BYTE = "Four Byte Integer"
    VARIABLE = "Variable Byte Integer"
    UTF8 = "UTF-8 Encoded String"
    PAIR = "UTF-8 String Pair"
    BINARY = "Binary Data"

    __hash__ = object.__hash__


#: Where a property may appear besides the packet types: the Will Properties of a CONNECT.
WILL: Final = 16
_LARGEST: Final = {DataType.BYTE: 0xFF, DataType.TWO_BYTE: 0xFFFF, DataType.FOUR_BYTE: 0xFFFFFFFF}


@dataclass(frozen=True, slots=True)
class PropertyDefinition:
    """One row of Table 2.4: identifier, name, data type, where it may appear, and the values it may hold."""

    identifier: int
    name: str
    data_type: DataType
    packets: frozenset[int]
    #: Where it may appear more than once (User Property everywhere; Subscription Identifier in PUBLISH).
    repeatable: frozenset[int] = frozenset()
    minimum: int = 0
    maximum: int | None = None  # None: whatever the data type holds
    #: The statement a value out of range breaks.
    value_rule: str = rules.PROPERTY_VALUE
    #: How a string value is checked (its UTF-8 and topic statements).
    field: check.StringField | None = None

    @property
    def keyword(self) -> str:
        """The name as a Python keyword for :func:`make` and the packets table: ``topic_alias``."""
        return self.name.lower().replace(" ", "_").replace("-", "_")


_CONNECT, _CONNACK, _PUBLISH = int(PacketType.CONNECT), int(PacketType.CONNACK), int(PacketType.PUBLISH)
_ACKS = frozenset({int(PacketType.PUBACK), int(PacketType.PUBREC), int(PacketType.PUBREL), int(PacketType.PUBCOMP)})
_SUBSCRIBE, _SUBACK = int(PacketType.SUBSCRIBE), int(PacketType.SUBACK)
_UNSUBSCRIBE, _UNSUBACK = int(PacketType.UNSUBSCRIBE), int(PacketType.UNSUBACK)
_DISCONNECT, _AUTH = int(PacketType.DISCONNECT), int(PacketType.AUTH)
_MESSAGE = frozenset({_PUBLISH, WILL})  # the properties of an application message
_ALL = frozenset({_CONNECT, _CONNACK, _PUBLISH, WILL, *_ACKS, _SUBSCRIBE, _SUBACK, _UNSUBSCRIBE, _UNSUBACK})
_ALL |= {_DISCONNECT, _AUTH}


def _define(
    identifier: int,
    name: str,
    data_type: DataType,
    packets: Iterable[int],
    *,
    repeatable: frozenset[int] = frozenset(),
    minimum: int = 0,
    maximum: int | None = None,
    value_rule: str = rules.PROPERTY_VALUE,
    field: check.StringField | None = None,
) -> PropertyDefinition:
    return PropertyDefinition(
        identifier, name, data_type, frozenset(packets), repeatable, minimum, maximum, value_rule, field
    )


def _flag(identifier: int, name: str, *packets: int) -> PropertyDefinition:
    """A Byte that is 0 or 1 (each such property's definition calls any other value a Protocol Error)."""
    return _define(identifier, name, DataType.BYTE, packets, maximum=1)


def _text(name: str, *utf8_rules: str) -> check.StringField:
    return check.StringField(name, "text", utf8_rules)


_BYTE, _TWO, _FOUR = DataType.BYTE, DataType.TWO_BYTE, DataType.FOUR_BYTE
_VAR, _UTF8, _PAIR, _BINARY = DataType.VARIABLE, DataType.UTF8, DataType.PAIR, DataType.BINARY

#: Table 2.4, in identifier order.
PROPERTIES: Final[tuple[PropertyDefinition, ...]] = (
    _define(0x01, "Payload Format Indicator", _BYTE, _MESSAGE, maximum=1, value_rule=rules.PAYLOAD_FORMAT_VALUE),
    _define(0x02, "Message Expiry Interval", _FOUR, _MESSAGE),
    _define(0x03, "Content Type", _UTF8, _MESSAGE, field=_text("Content Type", rules.CONTENT_TYPE_UTF8)),
    _define(
        0x08,
        "Response Topic",
        _UTF8,
        _MESSAGE,
        field=check.StringField(
            "Response Topic", "topic-name", (rules.RESPONSE_TOPIC_UTF8,), (rules.RESPONSE_TOPIC_NO_WILDCARDS,)
        ),
    ),
    _define(0x09, "Correlation Data", _BINARY, _MESSAGE),
    _define(
        0x0B,
        "Subscription Identifier",
        _VAR,
        (_PUBLISH, _SUBSCRIBE),
        repeatable=frozenset({_PUBLISH}),
        minimum=1,
        maximum=268_435_455,
    ),
    _define(0x11, "Session Expiry Interval", _FOUR, (_CONNECT, _CONNACK, _DISCONNECT)),
    _define(0x12, "Assigned Client Identifier", _UTF8, (_CONNACK,)),
    _define(0x13, "Server Keep Alive", _TWO, (_CONNACK,)),
    _define(0x15, "Authentication Method", _UTF8, (_CONNECT, _CONNACK, _AUTH)),
    _define(0x16, "Authentication Data", _BINARY, (_CONNECT, _CONNACK, _AUTH)),
    _flag(0x17, "Request Problem Information", _CONNECT),
    _define(0x18, "Will Delay Interval", _FOUR, (WILL,)),
    _flag(0x19, "Request Response Information", _CONNECT),
    _define(0x1A, "Response Information", _UTF8, (_CONNACK,)),
    _define(0x1C, "Server Reference", _UTF8, (_CONNACK, _DISCONNECT)),
    _define(0x1F, "Reason String", _UTF8, _ALL - {_CONNECT, _PUBLISH, WILL, _SUBSCRIBE, _UNSUBSCRIBE}),
    _define(0x21, "Receive Maximum", _TWO, (_CONNECT, _CONNACK), minimum=1),
    _define(0x22, "Topic Alias Maximum", _TWO, (_CONNECT, _CONNACK)),
    _define(0x23, "Topic Alias", _TWO, (_PUBLISH,), minimum=1, value_rule=rules.TOPIC_ALIAS_ZERO),
    _flag(0x24, "Maximum QoS", _CONNACK),
    _flag(0x25, "Retain Available", _CONNACK),
    _define(0x26, "User Property", _PAIR, _ALL, repeatable=_ALL),
    _define(0x27, "Maximum Packet Size", _FOUR, (_CONNECT, _CONNACK), minimum=1),
    _flag(0x28, "Wildcard Subscription Available", _CONNACK),
    _flag(0x29, "Subscription Identifier Available", _CONNACK),
    _flag(0x2A, "Shared Subscription Available", _CONNACK),
)

BY_ID: Final[dict[int, PropertyDefinition]] = {p.identifier: p for p in PROPERTIES}
BY_KEYWORD: Final[dict[str, PropertyDefinition]] = {p.keyword: p for p in PROPERTIES}

PAYLOAD_FORMAT_INDICATOR: Final = 0x01
MESSAGE_EXPIRY_INTERVAL: Final = 0x02
CONTENT_TYPE: Final = 0x03
RESPONSE_TOPIC: Final = 0x08
CORRELATION_DATA: Final = 0x09
SUBSCRIPTION_IDENTIFIER: Final = 0x0B
SESSION_EXPIRY_INTERVAL: Final = 0x11
AUTHENTICATION_METHOD: Final = 0x15
AUTHENTICATION_DATA: Final = 0x16
REASON_STRING: Final = 0x1F
RECEIVE_MAXIMUM: Final = 0x21
TOPIC_ALIAS_MAXIMUM: Final = 0x22
TOPIC_ALIAS: Final = 0x23
MAXIMUM_QOS: Final = 0x24
USER_PROPERTY: Final = 0x26
MAXIMUM_PACKET_SIZE: Final = 0x27

#: Where Authentication Method and Data may appear.
_AUTHENTICATING: Final = frozenset({_CONNECT, _CONNACK, _AUTH})
#: Properties a side may not send in a packet it may otherwise carry: (identifier, packet) -> (sender, rule).
_FORBIDDEN_SENDER: Final[dict[tuple[int, int], tuple[Direction, str]]] = {
    (SUBSCRIPTION_IDENTIFIER, _PUBLISH): (Direction.FROM_CLIENT, rules.SUBSCRIPTION_ID_FROM_CLIENT),
    (SESSION_EXPIRY_INTERVAL, _DISCONNECT): (Direction.FROM_SERVER, rules.SESSION_EXPIRY_FROM_SERVER),
}
#: The identifiers some side may not send somewhere.
_SENDER_BOUND: Final = sum({1 << identifier for identifier, _packet in _FORBIDDEN_SENDER})
#: [MQTT-1.5.7-1] Both strings of a pair comply with every requirement of a UTF-8 Encoded String: U+0000 included.
_PAIR_NAME: Final = check.StringField(
    "User Property name", "text", (rules.STRING_PAIR_UTF8,), null_rules=(rules.STRING_PAIR_UTF8,)
)
_PAIR_VALUE: Final = check.StringField(
    "User Property value", "text", (rules.STRING_PAIR_UTF8,), null_rules=(rules.STRING_PAIR_UTF8,)
)
_PLAIN_FIELDS: Final = {p.identifier: p.field or _text(p.name) for p in PROPERTIES if p.data_type is _UTF8}
_WHERE: Final = {_CONNECT: "CONNECT", WILL: "Will Properties", _AUTH: "AUTH"}


def where(packet: int) -> str:
    """How findings name a place properties appear: ``PUBLISH``, ``Will Properties``."""
    return _WHERE.get(packet) or PacketType(packet).name


def make(**values: PropertyValue | Iterable[tuple[str, str]] | Iterable[int]) -> Properties:
    """Properties by keyword, in the order given: ``make(topic_alias=3, user_property=[("k", "v")])``; a list
    for User Property (pairs) or Subscription Identifier (integers) makes one property per item."""
    out: list[Property] = []
    for keyword, value in values.items():
        definition = BY_KEYWORD.get(keyword)
        if definition is None:
            raise TypeError(f"no MQTT 5.0 property is called {keyword!r}")
        if isinstance(value, list):
            out.extend(Property(definition.identifier, item) for item in value)
        else:
            out.append(Property(definition.identifier, value))  # type: ignore[arg-type]
    return tuple(out)


def first(properties: Properties | None, identifier: int) -> PropertyValue | None:
    """The first value of ``identifier`` among ``properties``, or None."""
    for prop in properties or ():
        if prop.identifier == identifier:
            return prop.value
    return None


def as_mapping(properties: Properties | None) -> Mapping[str, object]:
    """Properties by keyword: a list for repeatable ones, the value for the others (the last one if repeated)."""
    out: dict[str, object] = {}
    for prop in properties or ():
        definition = BY_ID.get(prop.identifier)
        keyword = definition.keyword if definition else f"property_0x{prop.identifier:02x}"
        if definition is not None and definition.repeatable:
            existing = out.setdefault(keyword, [])
            assert isinstance(existing, list)
            existing.append(prop.value)
        else:
            out[keyword] = prop.value
    return out


# Reading.


def read_properties(
    data: bytes, pos: int, end: int, packet: int, direction: Direction | None, out: list[Violation]
) -> tuple[Properties, int]:
    """The Property Length at ``data[pos]`` and the properties it covers within ``data[:end]``, reported into
    ``out``; returns them and the position after them. Raises :class:`BufferUnderrun` when the Property Length is
    cut off, or runs past ``end`` (reported here already: ``reported`` is set)."""
    if pos < end and data[pos] < 0x80:  # the common case: a one-byte Property Length
        length, start = data[pos], pos + 1
        if not length:
            return (), start
    else:
        length, start = read_remaining_length(data, pos, end)
    if start == NEED_MORE:
        raise BufferUnderrun(pos, 1, end - pos, "Property Length")
    if start == TOO_LONG:
        detail = f"Property Length has a fifth byte ({data[pos : pos + 5].hex(' ')})"
        out.append(Violation(rules.VBI_FOUR_BYTES, pos + 4, detail))
        return (), end
    if start - pos > 1 and not is_shortest(length, start - pos):
        detail = f"Property Length {length} written in {start - pos} bytes; fewer suffice"
        out.append(Violation(rules.REMAINING_LENGTH_SHORTEST, pos, detail))
    stop = start + length
    if stop > end:
        detail = f"{where(packet)} Property Length is {length}, but only {end - start} byte(s) of the packet follow it"
        out.append(Violation(rules.PROPERTY_LENGTH, pos, detail))
        # The rest of the packet went into the properties: the fields after them are not missing on their own.
        raise BufferUnderrun(pos, length, end - start, f"{where(packet)} properties", reported=True)
    return _read_all(data, start, stop, packet, direction, out), stop


# The table as flat look-ups for the reading loop (identifiers are below 0x80, one byte each): the data type, the
# allowed range, and per place bit masks of the identifiers allowed and of those that may repeat.
_FIXED, _VARIABLE, _STRING, _STRING_PAIR, _BLOB = 0, 5, 6, 7, 8
_KIND_CODES: Final = {_VAR: _VARIABLE, _UTF8: _STRING, _PAIR: _STRING_PAIR, _BINARY: _BLOB}
_SIZES: Final = {_BYTE: 1, _TWO: 2, _FOUR: 4}
_KIND: Final[list[int]] = [-1] * 0x80  # -1: unknown; 1, 2, 4: an integer of that many bytes; else a code above
_MINIMUM: Final[list[int]] = [0] * 0x80
_MAXIMUM: Final[list[int]] = [-1] * 0x80  # -1: what the data type holds
for _definition in PROPERTIES:
    _KIND[_definition.identifier] = _SIZES.get(_definition.data_type) or _KIND_CODES[_definition.data_type]
    _MINIMUM[_definition.identifier] = _definition.minimum
    _MAXIMUM[_definition.identifier] = -1 if _definition.maximum is None else _definition.maximum
_ALLOWED_IN: Final[dict[int, int]] = {
    place: sum(1 << p.identifier for p in PROPERTIES if place in p.packets) for place in _ALL
}
_REPEATABLE_IN: Final[dict[int, int]] = {
    place: sum(1 << p.identifier for p in PROPERTIES if place in p.repeatable) for place in _ALL
}
_AUTHENTICATION_DATA_BIT: Final = 1 << AUTHENTICATION_DATA
_AUTHENTICATION_METHOD_BIT: Final = 1 << AUTHENTICATION_METHOD


def _read_all(
    data: bytes, start: int, stop: int, packet: int, direction: Direction | None, out: list[Violation]
) -> Properties:
    """The properties in ``data[start:stop]``, as far as they can be read."""
    found: list[Property] = []
    allowed, repeatable = _ALLOWED_IN[packet], _REPEATABLE_IN[packet]
    seen = 0  # bit mask of the identifiers read so far
    position = start
    data_at = -1  # where Authentication Data starts, if any
    while position < stop:
        prop_start = position
        value: PropertyValue
        try:
            identifier = data[position]
            if identifier < 0x80:
                position += 1
            else:  # a Variable Byte Integer of more than one byte: overlong, or no identifier the table has
                identifier, position = _read_variable(data, position, stop, "property identifier", out)
            kind = _KIND[identifier] if identifier < 0x80 else -1
            if kind < 0:  # unknown: its length cannot be known, the rest is unreadable
                detail = f"{where(packet)} holds the unknown property identifier 0x{identifier:02x}"
                out.append(Violation(rules.PROPERTY_IDENTIFIER, prop_start, detail))
                break
            value_at = position
            if kind <= 4:
                if position + kind > stop:
                    raise BufferUnderrun(position, kind, stop - position, BY_ID[identifier].name)
                if kind == 1:
                    value = data[position]
                elif kind == 2:
                    value = (data[position] << 8) | data[position + 1]
                else:
                    value = (
                        (data[position] << 24)
                        | (data[position + 1] << 16)
                        | (data[position + 2] << 8)
                        | data[position + 3]
                    )
                position += kind
            else:
                value, position = _read_value(data, position, stop, identifier, kind, out)
        except BufferUnderrun as exc:
            detail = f"{where(packet)} property runs past the Property Length: {exc}"
            out.append(Violation(rules.PROPERTY_LENGTH, exc.offset, detail))
            break
        except _Unreadable:
            break
        if isinstance(value, int) and (
            value < _MINIMUM[identifier] or (_MAXIMUM[identifier] >= 0 and value > _MAXIMUM[identifier])
        ):
            _out_of_range(identifier, value, packet, value_at, out)
        bit = 1 << identifier
        if not allowed & bit or (seen & bit and not repeatable & bit) or bit & _SENDER_BOUND:
            _check_placement(identifier, packet, direction, seen, prop_start, out)
        if bit == _AUTHENTICATION_DATA_BIT and data_at < 0:
            data_at = prop_start
        seen |= bit
        found.append(Property(identifier, value))
    if data_at >= 0 and not seen & _AUTHENTICATION_METHOD_BIT and packet in _AUTHENTICATING:
        # Authentication Data needs an Authentication Method beside it (3.1.2.11.10, 3.2.2.3.18, 3.15.2.2.3).
        detail = f"{where(packet)} holds Authentication Data without an Authentication Method"
        out.append(Violation(rules.AUTHENTICATION_DATA_WITHOUT_METHOD, data_at, detail))
    return tuple(found)


def _read_value(
    data: bytes, pos: int, stop: int, identifier: int, kind: int, out: list[Violation]
) -> tuple[PropertyValue, int]:
    """A value that is no fixed-size integer: a Variable Byte Integer, a string, a string pair or binary data."""
    name = BY_ID[identifier].name
    if kind == _VARIABLE:
        return _read_variable(data, pos, stop, name, out)
    if kind == _BLOB:
        return _read_length_prefixed(data, pos, stop, name)
    if kind == _STRING:
        raw, after = _read_length_prefixed(data, pos, stop, name)
        return check.check_string(raw, pos + 2, _PLAIN_FIELDS[identifier], out), after
    raw_name, middle = _read_length_prefixed(data, pos, stop, "User Property name")
    raw_value, after = _read_length_prefixed(data, middle, stop, "User Property value")
    pair = (
        check.check_string(raw_name, pos + 2, _PAIR_NAME, out),
        check.check_string(raw_value, middle + 2, _PAIR_VALUE, out),
    )
    return pair, after


def _out_of_range(identifier: int, value: int, packet: int, offset: int, out: list[Violation]) -> None:
    definition = BY_ID[identifier]
    if definition.maximum == 1:
        allowed = "must be 0 or 1"
    elif definition.maximum is not None:
        allowed = f"must be {definition.minimum} to {definition.maximum}"
    else:
        allowed = "must not be 0"
    detail = f"{where(packet)} {definition.name} is {value}; it {allowed}"
    out.append(Violation(definition.value_rule, offset, detail))


class _Unreadable(Exception):
    """A property whose end cannot be known (reported already): the rest of the properties cannot be read."""


def _read_variable(data: bytes, pos: int, stop: int, what: str, out: list[Violation]) -> tuple[int, int]:
    if pos < stop and data[pos] < 0x80:  # one byte: the common case
        return data[pos], pos + 1
    value, after = read_remaining_length(data, pos, stop)
    if after == NEED_MORE:
        raise BufferUnderrun(pos, 1, stop - pos, what)
    if after == TOO_LONG:
        detail = f"{what} has a fifth Variable Byte Integer byte ({data[pos : pos + 5].hex(' ')})"
        out.append(Violation(rules.VBI_FOUR_BYTES, pos + 4, detail))
        raise _Unreadable
    if after - pos > 1 and not is_shortest(value, after - pos):
        detail = f"{what} {value} written in {after - pos} bytes; fewer suffice"
        out.append(Violation(rules.REMAINING_LENGTH_SHORTEST, pos, detail))
    return value, after


def _read_length_prefixed(data: bytes, pos: int, stop: int, what: str) -> tuple[bytes, int]:
    if pos + 2 > stop:
        raise BufferUnderrun(pos, 2, stop - pos, what)
    end = pos + 2 + ((data[pos] << 8) | data[pos + 1])
    if end > stop:
        raise BufferUnderrun(pos + 2, end - pos - 2, stop - pos - 2, what)
    return data[pos + 2 : end], end


def _check_placement(
    identifier: int, packet: int, direction: Direction | None, seen: int, offset: int, out: list[Violation]
) -> None:
    """The property's place: allowed in this packet, not repeated unless it may be, sent by a side that may."""
    definition = BY_ID[identifier]
    if packet not in definition.packets:
        detail = f"{definition.name} (0x{identifier:02x}) may not appear in {where(packet)}"
        out.append(Violation(rules.PROPERTY_PACKET, offset, detail))
    elif seen & (1 << identifier) and packet not in definition.repeatable:
        detail = f"{where(packet)} holds {definition.name} (0x{identifier:02x}) more than once"
        out.append(Violation(rules.PROPERTY_DUPLICATE, offset, detail))
    forbidden = _FORBIDDEN_SENDER.get((identifier, packet))
    if forbidden is not None and direction is forbidden[0]:
        side = "client" if direction is Direction.FROM_CLIENT else "server"
        out.append(Violation(forbidden[1], offset, f"{where(packet)} from the {side} holds {definition.name}"))


# Writing.

_U16: Final = struct.Struct(">H")


def write_properties(properties: Properties) -> bytes:
    """The Property Length and the properties, written as they are (valid or not). A property whose identifier
    the table does not know is written with its value as raw bytes (for negative tests)."""
    body = b"".join([_write_one(prop) for prop in properties])
    return encode_remaining_length(len(body)) + body


def _write_one(prop: Property) -> bytes:
    identifier, value = prop.identifier, prop.value
    head = encode_remaining_length(identifier) if identifier >= 0 else b""
    definition = BY_ID.get(identifier)
    if definition is None:
        if not isinstance(value, bytes):
            raise EncodeError(f"unknown property identifier 0x{identifier:02x} needs its value as raw bytes")
        return head + value
    kind = definition.data_type
    if kind is _UTF8 and isinstance(value, str):
        return head + _string(value, definition.name)
    if kind is _BINARY and isinstance(value, bytes):
        return head + _blob(value, definition.name)
    if kind is _PAIR and isinstance(value, tuple) and len(value) == 2:
        return head + _string(value[0], "User Property name") + _string(value[1], "User Property value")
    if isinstance(value, int):
        number = int(value)
        if kind is _VAR:
            return head + encode_remaining_length(number)
        largest = _LARGEST.get(kind)
        if largest is not None:
            if not 0 <= number <= largest:
                raise EncodeError(f"{definition.name} {number} does not fit in a {kind.value}")
            return head + number.to_bytes(largest.bit_length() // 8, "big")
    raise EncodeError(f"{definition.name} is a {kind.value}, not {type(value).__name__} {value!r}")


def _string(text: str, what: str) -> bytes:
    return _blob(wire_string(text), what)


def _blob(raw: bytes, what: str) -> bytes:
    if len(raw) > 0xFFFF:
        raise EncodeError(f"{what} is {len(raw)} bytes; a length-prefixed field holds at most 65,535")
    return _U16.pack(len(raw)) + raw
