"""Packet bodies to bytes, written as the fields say, valid or not. Validation lives in :mod:`.encoder`."""

from __future__ import annotations

import struct

from . import rules
from .buffer import wire_string
from .errors import EncodeError, ProtocolViolation
from .packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    ReservedPacket,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
)
from .properties import write_properties
from .validators import REQUIRED_FLAGS, string_too_long

_U16 = struct.Struct(">H")


def _string(text: str, what: str, rule: str = rules.STRING_MAX_LENGTH) -> bytes:
    raw = wire_string(text)
    too_long = string_too_long(raw, what, rule)
    if too_long is not None:  # refused even with validate=False: no two-byte length prefix can describe it
        raise ProtocolViolation(too_long)
    return _U16.pack(len(raw)) + raw


def _binary(raw: bytes, what: str) -> bytes:
    if len(raw) > 0xFFFF:
        raise EncodeError(f"{what} is {len(raw)} bytes; a length-prefixed field holds at most 65,535")
    return _U16.pack(len(raw)) + raw


def _u16(value: int, what: str) -> bytes:
    if not 0 <= value <= 0xFFFF:
        raise EncodeError(f"{what} {value} does not fit in two bytes")
    return _U16.pack(value)


def _u8(value: int, what: str) -> bytes:
    if not 0 <= value <= 0xFF:
        raise EncodeError(f"{what} {value} does not fit in one byte")
    return bytes((value,))


def _packet_id(packet_id: int | None) -> bytes:
    return b"" if packet_id is None else _u16(packet_id, "Packet Identifier")


def _qos(qos: int, what: str) -> int:
    if not 0 <= qos <= 3:
        raise EncodeError(f"{what} {qos} does not fit in two bits")
    return qos


def first_byte(packet: Packet) -> int:
    """The fixed header's first byte: packet type in the high nibble, flags in the low one."""
    if isinstance(packet, ReservedPacket) and not 0 <= packet.packet_type_value <= 0x0F:
        raise EncodeError(f"packet type {packet.packet_type_value} does not fit in four bits")
    return (int(packet.packet_type) << 4) | fixed_header_flags(packet)


def fixed_header_flags(packet: Packet) -> int:
    if isinstance(packet, Publish):
        qos = _qos(packet.qos, "QoS")
        return (0x08 if packet.dup else 0) | (qos << 1) | (0x01 if packet.retain else 0)
    if isinstance(packet, ReservedPacket):
        return packet.flags & 0x0F
    if packet.raw_flags is not None:
        return packet.raw_flags & 0x0F
    return REQUIRED_FLAGS[packet.packet_type]


def _properties(properties: Properties | None, v5: bool) -> bytes:
    """The Property Length and properties in MQTT 5.0 (None: left out, for the packets that may); nothing before."""
    return write_properties(properties) if v5 and properties is not None else b""


def _connect(packet: Connect, v5: bool) -> bytes:
    if packet.will is not None:
        _qos(packet.will.qos, "Will QoS")
    parts = [
        _string(packet.protocol_name, "Protocol Name"),
        _u8(packet.protocol_level, "Protocol Level"),
        _u8(packet.connect_flags, "Connect Flags"),
        _u16(packet.keep_alive, "Keep Alive"),
        _properties(packet.properties, v5),
        _string(packet.client_id, "Client Identifier"),
    ]
    if packet.will is not None:
        parts.append(_properties(packet.will.properties, v5))
        parts.append(_string(packet.will.topic, "Will Topic", rules.TOPIC_MAX_LENGTH))
        parts.append(_binary(packet.will.message, "Will Message"))
    if packet.username is not None:
        parts.append(_string(packet.username, "User Name"))
    if packet.password is not None:
        parts.append(_binary(packet.password, "Password"))
    return b"".join(parts)


def _connack(packet: Connack, v5: bool) -> bytes:
    ack_flags = packet.raw_ack_flags if packet.raw_ack_flags is not None else int(packet.session_present)
    return (
        _u8(ack_flags, "Connect Acknowledge Flags")
        + _u8(packet.return_code, "return code")
        + _properties(packet.properties, v5)
    )


def _publish(packet: Publish, v5: bool) -> bytes:
    return b"".join(
        (
            _string(packet.topic, "Topic Name", rules.TOPIC_MAX_LENGTH),
            _packet_id(packet.packet_id),
            _properties(packet.properties, v5),
            packet.payload,
        )
    )


def _options(sub: Subscription) -> int:
    if sub.raw_options is not None:
        return sub.raw_options
    _qos(sub.qos, "requested QoS")
    _qos(sub.retain_handling, "Retain Handling")
    return sub.options


def _subscribe(packet: Subscribe, v5: bool) -> bytes:
    parts = [_packet_id(packet.packet_id), _properties(packet.properties, v5)]
    parts += [
        _string(sub.topic_filter, "Topic Filter", rules.TOPIC_MAX_LENGTH) + _u8(_options(sub), "options byte")
        for sub in packet.subscriptions
    ]
    return b"".join(parts)


def _codes(codes: tuple[int, ...], what: str) -> bytes:
    return b"".join([_u8(code, what) for code in codes])


def _suback(packet: Suback, v5: bool) -> bytes:
    return _packet_id(packet.packet_id) + _properties(packet.properties, v5) + _codes(packet.return_codes, "code")


def _unsubscribe(packet: Unsubscribe, v5: bool) -> bytes:
    return (
        _packet_id(packet.packet_id)
        + _properties(packet.properties, v5)
        + b"".join(_string(f, "Topic Filter", rules.TOPIC_MAX_LENGTH) for f in packet.topic_filters)
    )


def _unsuback(packet: Unsuback, v5: bool) -> bytes:
    if not v5:
        return _packet_id(packet.packet_id)
    return _packet_id(packet.packet_id) + _properties(packet.properties, v5) + _codes(packet.reason_codes, "code")


def _reason_and_properties(reason_code: int | None, properties: Properties | None, v5: bool) -> bytes:
    """The optional tail of a 5.0 acknowledgement, DISCONNECT or AUTH: a Reason Code, then properties."""
    if not v5 or reason_code is None:
        if v5 and properties is not None:
            raise EncodeError("properties need a Reason Code before them (the bytes cannot leave it out)")
        return b""
    return _u8(reason_code, "Reason Code") + _properties(properties, v5)


def write_body(packet: Packet, v5: bool = False) -> bytes:
    """The bytes after the fixed header; ``v5`` writes the MQTT 5.0 form (properties, reason codes)."""
    match packet:
        case Publish():
            return _publish(packet, v5)
        case Puback() | Pubrec() | Pubrel() | Pubcomp():
            return _packet_id(packet.packet_id) + _reason_and_properties(packet.reason_code, packet.properties, v5)
        case Connect():
            return _connect(packet, v5)
        case Connack():
            return _connack(packet, v5)
        case Subscribe():
            return _subscribe(packet, v5)
        case Suback():
            return _suback(packet, v5)
        case Unsubscribe():
            return _unsubscribe(packet, v5)
        case Unsuback():
            return _unsuback(packet, v5)
        case Disconnect() | Auth():
            return _reason_and_properties(packet.reason_code, packet.properties, v5)
        case ReservedPacket():
            return packet.body
        case _:  # PINGREQ and PINGRESP carry nothing
            return b""
