"""Packet bodies from bytes: one reader per packet type, each reporting what it finds through the validators.

Readers never raise: a field that runs past the packet is reported as [MQTT-2.2.3-overrun] and the packet is
returned with the fields read so far.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final

from . import rules
from . import validators as check
from .buffer import Buffer
from .errors import BufferUnderrun, Violation
from .packets import (
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
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
    Will,
    derive_connect_flags,
)

Reader = Callable[[Buffer, int, int, list[Violation]], Packet]


def read_string(buf: Buffer, field: check.StringField, out: list[Violation]) -> str:
    start = buf.tell()
    try:
        length = buf.pull_uint16()
        raw = buf.pull_bytes(length)
    except BufferUnderrun as exc:
        buf.seek(start)
        raise BufferUnderrun(exc.offset, exc.needed, exc.available, field.name) from None
    return check.check_string(raw, start + 2, field, out)


def read_binary(buf: Buffer, what: str) -> bytes:
    start = buf.tell()
    try:
        return buf.pull_bytes(buf.pull_uint16())
    except BufferUnderrun as exc:
        buf.seek(start)
        raise BufferUnderrun(exc.offset, exc.needed, exc.available, what) from None


def _overrun(exc: BufferUnderrun, out: list[Violation]) -> None:
    out.append(Violation(rules.FIELD_OVERRUN, exc.offset, f"packet ends inside a field: {exc}"))


def _raw_flags(packet_type: int, flags: int) -> int | None:
    return None if flags == check.REQUIRED_FLAGS[packet_type] else flags


def _read_packet_id(buf: Buffer, packet_type: int, out: list[Violation]) -> int:
    offset = buf.tell()
    try:
        packet_id = buf.pull_uint16()
    except BufferUnderrun as exc:
        raise BufferUnderrun(exc.offset, exc.needed, exc.available, "Packet Identifier") from None
    check.check_packet_id(packet_type, packet_id, offset, out)
    return packet_id


def read_connect(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
    name, level, connect_flags, keep_alive, client_id = "", 0, 0, 0, ""
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    try:
        name_offset = buf.tell()
        name = read_string(buf, check.PROTOCOL_NAME_FIELD, out)
        level_offset = buf.tell()
        level = buf.pull_uint8()
        check.check_protocol(name, level, name_offset, level_offset, out)
        flags_offset = buf.tell()
        connect_flags = buf.pull_uint8()
        check.check_connect_flags(connect_flags, flags_offset, out)
        keep_alive = buf.pull_uint16()
        if buf.eof():
            out.append(Violation(rules.CLIENT_ID_PRESENT, buf.tell(), "CONNECT payload has no Client Identifier"))
        else:
            id_offset = buf.tell()
            client_id = read_string(buf, check.CLIENT_ID_FIELD, out)
            check.check_client_id(
                client_id.encode("utf-8", "surrogateescape"), bool(connect_flags & 0x02), id_offset, out
            )
            if connect_flags & 0x04:
                if buf.eof():
                    out.append(
                        Violation(rules.WILL_FIELDS_PRESENT, buf.tell(), "Will flag is 1 but no Will Topic follows")
                    )
                else:
                    topic = read_string(buf, check.WILL_TOPIC_FIELD, out)
                    message = read_binary(buf, "Will Message")
                    will = Will(
                        topic=topic,
                        message=message,
                        qos=(connect_flags >> 3) & 3,
                        retain=bool(connect_flags & 0x20),
                    )
            if connect_flags & 0x80:
                if buf.eof():
                    out.append(
                        Violation(rules.USERNAME_PRESENT, buf.tell(), "User Name flag is 1 but no User Name follows")
                    )
                else:
                    username = read_string(buf, check.USERNAME_FIELD, out)
            if connect_flags & 0x40:
                if buf.eof():
                    out.append(
                        Violation(rules.PASSWORD_PRESENT, buf.tell(), "Password flag is 1 but no Password follows")
                    )
                else:
                    password = read_binary(buf, "Password")
            if not buf.eof():
                out.append(
                    Violation(
                        rules.LEFTOVER_BYTES,
                        buf.tell(),
                        f"{buf.remaining()} byte(s) follow the last CONNECT field",
                    )
                )
    except BufferUnderrun as exc:
        _overrun(exc, out)
    clean_session = bool(connect_flags & 0x02)
    derived = derive_connect_flags(clean_session, will, username, password)
    return Connect(
        protocol_name=name,
        protocol_level=level,
        clean_session=clean_session,
        keep_alive=keep_alive,
        client_id=client_id,
        will=will,
        username=username,
        password=password,
        raw_connect_flags=None if connect_flags == derived else connect_flags,
        raw_flags=_raw_flags(PacketType.CONNECT, flags),
    )


def read_connack(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
    ack_flags = return_code = 0
    try:
        offset = buf.tell()
        ack_flags = buf.pull_uint8()
        return_code = buf.pull_uint8()
        check.check_connack(ack_flags, return_code, offset, out)
    except BufferUnderrun:
        pass  # the fixed-length rule has reported it
    return Connack(
        session_present=bool(ack_flags & 0x01),
        return_code=return_code,
        raw_ack_flags=ack_flags if ack_flags & 0xFE else None,
        raw_flags=_raw_flags(PacketType.CONNACK, flags),
    )


def _field_end(start: int, end: int, needed: int, what: str) -> int:
    """Where a field of ``needed`` bytes at ``start`` ends; raises like a Buffer read when it passes ``end``."""
    if start + needed > end:
        raise BufferUnderrun(start, needed, end - start, what)
    return start + needed


def read_publish(data: bytes, offset: int, body: int, end: int, out: list[Violation]) -> Publish:
    """PUBLISH, the packet of the hot path: read by index rather than through a Buffer, with the shared checks."""
    flags = data[offset] & 0x0F
    qos = (flags >> 1) & 0x03
    dup = flags & 0x08 != 0
    check.check_publish_flags(qos, dup, offset, out)
    topic = ""
    packet_id: int | None = None
    payload = b""
    try:
        topic_start = _field_end(body, end, 2, "Topic Name")
        topic_end = _field_end(topic_start, end, (data[body] << 8) | data[body + 1], "Topic Name")
        # Topic Names repeat: one string per distinct name keeps decoded traffic (and its pickles, which
        # memoize a repeated object) smaller.
        topic = sys.intern(check.check_string(data[topic_start:topic_end], topic_start, check.PUBLISH_TOPIC_FIELD, out))
        payload_start = topic_end
        if qos:
            payload_start = _field_end(topic_end, end, 2, "Packet Identifier")
            packet_id = (data[topic_end] << 8) | data[topic_end + 1]
            check.check_packet_id(_PUBLISH, packet_id, topic_end, out)
        payload = data[payload_start:end]
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Publish(topic=topic, payload=payload, qos=qos, retain=flags & 0x01 != 0, dup=dup, packet_id=packet_id)


def _ack_reader(cls: type[Puback | Pubrec | Pubrel | Pubcomp | Unsuback], packet_type: PacketType) -> Reader:

    def read_ack(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
        # A short body has been reported by the fixed-length rule; the id is then unknown.
        packet_id = _read_packet_id(buf, packet_type, out) if buf.remaining() >= 2 else None
        return cls(packet_id=packet_id, raw_flags=_raw_flags(packet_type, flags))

    return read_ack


def read_subscribe(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
    packet_id: int | None = None
    subscriptions: list[Subscription] = []
    try:
        packet_id = _read_packet_id(buf, PacketType.SUBSCRIBE, out)
        if buf.eof():
            out.append(Violation(rules.SUBSCRIBE_NO_PAYLOAD, buf.tell(), "SUBSCRIBE has no Topic Filter"))
        while not buf.eof():
            topic_filter = read_string(buf, check.SUBSCRIBE_FILTER_FIELD, out)
            options_offset = buf.tell()
            try:
                options = buf.pull_uint8()
            except BufferUnderrun as exc:
                raise BufferUnderrun(exc.offset, 1, 0, f"requested QoS of {topic_filter!r}") from None
            check.check_subscription_options(options, options_offset, out)
            subscriptions.append(
                Subscription(
                    topic_filter=topic_filter,
                    qos=options & 0x03,
                    raw_options=options if options & 0xFC else None,
                )
            )
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Subscribe(
        packet_id=packet_id,
        subscriptions=tuple(subscriptions),
        raw_flags=_raw_flags(PacketType.SUBSCRIBE, flags),
    )


def read_suback(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
    packet_id: int | None = None
    codes = b""
    try:
        packet_id = _read_packet_id(buf, PacketType.SUBACK, out)
        start = buf.tell()
        codes = buf.pull_rest()
        if not codes:
            out.append(Violation(rules.SUBACK_ONE_CODE_PER_FILTER, start, "SUBACK carries no return code"))
        for index, code in enumerate(codes):
            check.check_suback_code(code, start + index, out)
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Suback(packet_id=packet_id, return_codes=tuple(codes), raw_flags=_raw_flags(PacketType.SUBACK, flags))


def read_unsubscribe(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
    packet_id: int | None = None
    filters: list[str] = []
    try:
        packet_id = _read_packet_id(buf, PacketType.UNSUBSCRIBE, out)
        if buf.eof():
            out.append(Violation(rules.UNSUBSCRIBE_NO_PAYLOAD, buf.tell(), "UNSUBSCRIBE has no Topic Filter"))
        while not buf.eof():
            filters.append(read_string(buf, check.UNSUBSCRIBE_FILTER_FIELD, out))
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Unsubscribe(
        packet_id=packet_id, topic_filters=tuple(filters), raw_flags=_raw_flags(PacketType.UNSUBSCRIBE, flags)
    )


def _empty_reader(cls: type[Pingreq | Pingresp | Disconnect], packet_type: PacketType) -> Reader:

    def read_empty(buf: Buffer, flags: int, header_offset: int, out: list[Violation]) -> Packet:
        return cls(raw_flags=_raw_flags(packet_type, flags))

    return read_empty


READERS: dict[int, Reader] = {
    PacketType.CONNECT: read_connect,
    PacketType.CONNACK: read_connack,
    PacketType.PUBACK: _ack_reader(Puback, PacketType.PUBACK),
    PacketType.PUBREC: _ack_reader(Pubrec, PacketType.PUBREC),
    PacketType.PUBREL: _ack_reader(Pubrel, PacketType.PUBREL),
    PacketType.PUBCOMP: _ack_reader(Pubcomp, PacketType.PUBCOMP),
    PacketType.SUBSCRIBE: read_subscribe,
    PacketType.SUBACK: read_suback,
    PacketType.UNSUBSCRIBE: read_unsubscribe,
    PacketType.UNSUBACK: _ack_reader(Unsuback, PacketType.UNSUBACK),
    PacketType.PINGREQ: _empty_reader(Pingreq, PacketType.PINGREQ),
    PacketType.PINGRESP: _empty_reader(Pingresp, PacketType.PINGRESP),
    PacketType.DISCONNECT: _empty_reader(Disconnect, PacketType.DISCONNECT),
}


def check_first_byte(first: int, direction: Direction | None, offset: int, out: list[Violation]) -> bool:
    """What the first byte of a packet alone breaks, reported into ``out``: a reserved type (then False), a type
    its sender never sends, fixed-header flags other than Table 2.2's (PUBLISH flags are read with the packet)."""
    packet_type = first >> 4
    if not check.check_packet_type(packet_type, offset, out):
        return False
    if direction is not None:  # unknown sender: nothing to check
        check.check_direction(packet_type, direction, offset, out)
    if packet_type != _PUBLISH:
        check.check_fixed_flags(packet_type, first & 0x0F, offset, out)
    return True


def read_packet(
    data: bytes, offset: int, body: int, end: int, direction: Direction | None, out: list[Violation]
) -> Packet:
    """Decodes the framed packet ``data[offset:end]`` whose body starts at ``body``, reporting into ``out``."""
    first = data[offset]
    packet_type = first >> 4
    flags = first & 0x0F
    if not check_first_byte(first, direction, offset, out):
        return ReservedPacket(packet_type_value=packet_type, body=data[body:end], flags=flags)
    if packet_type == _PUBLISH:
        return read_publish(data, offset, body, end, out)
    check.check_fixed_length(packet_type, end - body, offset + 1, out)
    return READERS[packet_type](Buffer(data, body, end), flags, offset, out)


_PUBLISH: Final = int(PacketType.PUBLISH)
