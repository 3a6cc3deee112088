"""Packet bodies to bytes, written as the fields say, valid or not. Validation lives in :mod:`.encoder`."""

from __future__ import annotations

import struct

from . import rules
from .errors import EncodeError, ProtocolViolation
from .packets import (
    Connack,
    Connect,
    Packet,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    ReservedPacket,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
)
from .validators import REQUIRED_FLAGS, string_too_long

_U16 = struct.Struct(">H")


def wire_string(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates U+DC80..U+DCFF stand for the raw bytes they escaped (PEP 383)
    and other lone surrogates are written as their (ill-formed) three-byte forms, so invalid strings survive."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        out = bytearray()
        for char in text:
            code = ord(char)
            if 0xDC80 <= code <= 0xDCFF:
                out.append(code - 0xDC00)
            else:
                out += char.encode("utf-8", "surrogatepass")
        return bytes(out)


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


def _connect(packet: Connect) -> bytes:
    if packet.will is not None:
        _qos(packet.will.qos, "Will QoS")
    parts = [
        _string(packet.protocol_name, "Protocol Name"),
        _u8(packet.protocol_level, "Protocol Level"),
        _u8(packet.connect_flags, "Connect Flags"),
        _u16(packet.keep_alive, "Keep Alive"),
        _string(packet.client_id, "Client Identifier"),
    ]
    if packet.will is not None:
        parts.append(_string(packet.will.topic, "Will Topic", rules.TOPIC_MAX_LENGTH))
        parts.append(_binary(packet.will.message, "Will Message"))
    if packet.username is not None:
        parts.append(_string(packet.username, "User Name"))
    if packet.password is not None:
        parts.append(_binary(packet.password, "Password"))
    return b"".join(parts)


def _connack(packet: Connack) -> bytes:
    ack_flags = packet.raw_ack_flags if packet.raw_ack_flags is not None else int(packet.session_present)
    return _u8(ack_flags, "Connect Acknowledge Flags") + _u8(packet.return_code, "return code")


def _publish(packet: Publish) -> bytes:
    return _string(packet.topic, "Topic Name", rules.TOPIC_MAX_LENGTH) + _packet_id(packet.packet_id) + packet.payload


def _subscribe(packet: Subscribe) -> bytes:
    parts = [_packet_id(packet.packet_id)]
    for sub in packet.subscriptions:
        options = sub.raw_options if sub.raw_options is not None else _qos(sub.qos, "requested QoS")
        parts.append(
            _string(sub.topic_filter, "Topic Filter", rules.TOPIC_MAX_LENGTH) + _u8(options, "requested QoS byte")
        )
    return b"".join(parts)


def _suback(packet: Suback) -> bytes:
    return _packet_id(packet.packet_id) + b"".join(_u8(code, "SUBACK return code") for code in packet.return_codes)


def _unsubscribe(packet: Unsubscribe) -> bytes:
    return _packet_id(packet.packet_id) + b"".join(
        _string(f, "Topic Filter", rules.TOPIC_MAX_LENGTH) for f in packet.topic_filters
    )


def write_body(packet: Packet) -> bytes:
    match packet:
        case Publish():
            return _publish(packet)
        case Puback() | Pubrec() | Pubrel() | Pubcomp() | Unsuback():
            return _packet_id(packet.packet_id)
        case Connect():
            return _connect(packet)
        case Connack():
            return _connack(packet)
        case Subscribe():
            return _subscribe(packet)
        case Suback():
            return _suback(packet)
        case Unsubscribe():
            return _unsubscribe(packet)
        case ReservedPacket():
            return packet.body
        case _:  # PINGREQ, PINGRESP and DISCONNECT carry nothing
            return b""
