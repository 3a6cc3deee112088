"""Packet bodies from bytes: one reader per packet type for every version, each reporting what it finds through
the validators (and, for MQTT 5.0, the property and reason-code tables).

Readers never raise: a field that runs past the packet is reported as [MQTT-2.2.3-overrun] and the packet is
returned with the fields read so far. Checks report rule keys (mqttaudit.spec.identity); :func:`read_packet`
names them by the statements of the version it reads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final

from mqttaudit.spec import identity

from . import reason_codes, rules
from . import validators as check
from .buffer import Buffer
from .errors import BufferUnderrun, Violation
from .packets import (
    Auth,
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
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
    Will,
    derive_connect_flags,
)
from .properties import TOPIC_ALIAS, WILL, read_properties
from .version import ProtocolVersion

#: A packet body's reader: (cursor over the body, fixed-header flags, sender, version, findings) -> packet.
Reader = Callable[[Buffer, int, Direction | None, ProtocolVersion, list[Violation]], Packet]


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
    if not exc.reported:
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


def _properties(
    buf: Buffer, packet: int, direction: Direction | None, out: list[Violation], required: bool = True
) -> Properties:
    """The properties at the cursor (MQTT 5.0). Where the packet must carry a Property Length and the body ends
    first, that is reported [MQTT-2.2.2-1] (a 3.1.1 packet on a 5.0 connection looks like this)."""
    if buf.eof():
        if required:
            detail = f"{check.packet_name(packet, True)} has no Property Length (an empty set is written as 0)"
            out.append(Violation(rules.PROPERTY_LENGTH_ABSENT, buf.tell(), detail))
        return ()
    found, after = read_properties(buf.data, buf.tell(), buf.end, packet, direction, out)
    buf.seek(after)
    return found


def _leftover(buf: Buffer, what: str, out: list[Violation]) -> None:
    if not buf.eof():
        detail = f"{buf.remaining()} byte(s) follow the last {what} field"
        out.append(Violation(rules.LEFTOVER_BYTES, buf.tell(), detail))


def _length_prefixed_fields(data: bytes) -> int:
    """How many two-byte-length-prefixed fields (UTF-8 strings or Binary Data) ``data`` is, exactly: 0 when it is
    not such a sequence."""
    count = 0
    index = 0
    while index < len(data):
        if index + 2 > len(data):
            return 0
        index += 2 + int.from_bytes(data[index : index + 2], "big")
        count += 1
    return count if index == len(data) else 0


def _unannounced_credentials(buf: Buffer, connect_flags: int, out: list[Violation]) -> None:
    """Bytes after the last field the flags announce that are exactly a User Name and/or Password in their places:
    a User Name with its flag clear [MQTT-3.1.2-18], a Password with its flag clear [MQTT-3.1.2-20] (5.0: 3.1.2-16,
    -18). Only where the flags leave those places empty (a field after a Password announced is no credential);
    the leftover bytes are reported beside them. The cursor stays put."""
    if buf.eof() or connect_flags & 0x40:
        return
    offset = buf.tell()
    data = buf.data[offset : buf.end]
    count = _length_prefixed_fields(data)
    detail = "Password flag is 0 but a Password follows the User Name"
    if connect_flags & 0x80:
        if count == 1:
            out.append(Violation(rules.PASSWORD_ABSENT, offset, detail))
        return
    if count in (1, 2):
        out.append(Violation(rules.USERNAME_ABSENT, offset, "User Name flag is 0 but a User Name follows"))
    if count == 2:
        second = offset + 2 + int.from_bytes(data[:2], "big")
        out.append(Violation(rules.PASSWORD_ABSENT, second, detail))


def read_connect(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    name, level, connect_flags, keep_alive, client_id = "", 0, 0, 0, ""
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    properties: Properties = ()
    try:
        name_offset = buf.tell()
        name = read_string(buf, check.PROTOCOL_NAME_FIELD, out)
        level_offset = buf.tell()
        level = buf.pull_uint8()
        check.check_protocol(name, level, name_offset, level_offset, out, version.value)
        flags_offset = buf.tell()
        connect_flags = buf.pull_uint8()
        check.check_connect_flags(connect_flags, flags_offset, out)
        keep_alive = buf.pull_uint16()
        if v5:
            properties = _properties(buf, PacketType.CONNECT, direction, out)
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
                    detail = (
                        "Will flag is 1 but no Will Properties follow"
                        if v5
                        else "Will flag is 1 but no Will Topic follows"
                    )
                    out.append(Violation(rules.WILL_FIELDS_PRESENT, buf.tell(), detail))
                else:
                    will_properties = _properties(buf, WILL, direction, out) if v5 else ()
                    topic = read_string(buf, check.WILL_TOPIC_FIELD, out)
                    message = read_binary(buf, "Will Message")
                    will = Will(
                        topic=topic,
                        message=message,
                        qos=(connect_flags >> 3) & 3,
                        retain=bool(connect_flags & 0x20),
                        properties=will_properties,
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
            _unannounced_credentials(buf, connect_flags, out)
            _leftover(buf, "CONNECT", out)
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
        properties=properties,
        raw_connect_flags=None if connect_flags == derived else connect_flags,
        raw_flags=_raw_flags(PacketType.CONNECT, flags),
    )


def read_connack(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    ack_flags = return_code = 0
    properties: Properties = ()
    try:
        offset = buf.tell()
        ack_flags = buf.pull_uint8()
        return_code = buf.pull_uint8()
        check.check_connack(ack_flags, return_code, offset, out, v5)
        if v5:
            reason_codes.check_reason_code(PacketType.CONNACK, return_code, direction, offset + 1, out)
            properties = _properties(buf, PacketType.CONNACK, direction, out)
            _leftover(buf, "CONNACK", out)
    except BufferUnderrun as exc:
        if v5:  # in 3.1.1 the fixed-length rule has reported it
            _overrun(exc, out)
    return Connack(
        session_present=bool(ack_flags & 0x01),
        return_code=return_code,
        properties=properties,
        raw_ack_flags=ack_flags if ack_flags & 0xFE else None,
        raw_flags=_raw_flags(PacketType.CONNACK, flags),
    )


def _field_end(start: int, end: int, needed: int, what: str) -> int:
    """Where a field of ``needed`` bytes at ``start`` ends; raises like a Buffer read when it passes ``end``."""
    if start + needed > end:
        raise BufferUnderrun(start, needed, end - start, what)
    return start + needed


def read_publish(
    data: bytes,
    offset: int,
    body: int,
    end: int,
    out: list[Violation],
    direction: Direction | None = None,
    v5: bool = False,
) -> Publish:
    """PUBLISH, the packet of the hot path: read by index rather than through a Buffer, with the shared checks."""
    flags = data[offset] & 0x0F
    qos = (flags >> 1) & 0x03
    dup = flags & 0x08 != 0
    check.check_publish_flags(qos, dup, offset, out)
    topic = ""
    packet_id: int | None = None
    payload = b""
    properties: Properties = ()
    try:
        topic_start = _field_end(body, end, 2, "Topic Name")
        topic_end = _field_end(topic_start, end, (data[body] << 8) | data[body + 1], "Topic Name")
        if not v5 or topic_end > topic_start:
            # Topic Names repeat: one string per distinct name keeps decoded traffic (and its pickles, which
            # memoize a repeated object) smaller.
            topic = sys.intern(
                check.check_string(data[topic_start:topic_end], topic_start, check.PUBLISH_TOPIC_FIELD, out)
            )
        payload_start = topic_end
        if qos:
            payload_start = _field_end(topic_end, end, 2, "Packet Identifier")
            packet_id = (data[topic_end] << 8) | data[topic_end + 1]
            if v5 and packet_id == 0 and direction is _FROM_SERVER:  # 5.0 binds each side by its own statement
                out.append(Violation(rules.SERVER_PACKET_ID_NONZERO, topic_end, "PUBLISH Packet Identifier is 0"))
            else:
                check.check_packet_id(_PUBLISH, packet_id, topic_end, out)
        if v5:
            if payload_start < end and data[payload_start] == 0:  # no properties: the common case
                payload_start += 1
            else:
                properties, payload_start = _publish_properties(data, payload_start, end, direction, out)
            if topic_end == topic_start and not any(p.identifier == TOPIC_ALIAS for p in properties):
                # An empty Topic Name is allowed only where a Topic Alias stands for it (3.3.2.3.4).
                detail = "Topic Name is empty (length 0x0000) and no Topic Alias stands for it"
                out.append(Violation(rules.TOPIC_NOT_EMPTY, body, detail))
        payload = data[payload_start:end]
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Publish(
        topic=topic,
        payload=payload,
        qos=qos,
        retain=flags & 0x01 != 0,
        dup=dup,
        packet_id=packet_id,
        properties=properties,
    )


def _publish_properties(
    data: bytes, pos: int, end: int, direction: Direction | None, out: list[Violation]
) -> tuple[Properties, int]:
    if pos >= end:
        detail = "PUBLISH has no Property Length (an empty set is written as 0)"
        out.append(Violation(rules.PROPERTY_LENGTH_ABSENT, pos, detail))
        return (), pos
    return read_properties(data, pos, end, _PUBLISH, direction, out)


def _ack_reader(cls: type[Puback | Pubrec | Pubrel | Pubcomp], packet_type: PacketType) -> Reader:

    def read_ack(
        buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
    ) -> Packet:
        v5 = version is _V5
        # A short body has been reported by the fixed-length rule (3.1.1); the id is then unknown.
        if not v5:
            packet_id = _read_packet_id(buf, packet_type, out) if buf.remaining() >= 2 else None
            return cls(packet_id=packet_id, raw_flags=_raw_flags(packet_type, flags))
        packet_id = None
        reason_code: int | None = None
        properties: Properties | None = None
        try:
            packet_id = _read_packet_id(buf, packet_type, out)
            reason_code, properties = _reason_and_properties(buf, packet_type, direction, out)
        except BufferUnderrun as exc:
            _overrun(exc, out)
        return cls(
            packet_id=packet_id,
            reason_code=reason_code,
            properties=properties,
            raw_flags=_raw_flags(packet_type, flags),
        )

    return read_ack


def _reason_and_properties(
    buf: Buffer, packet_type: int, direction: Direction | None, out: list[Violation]
) -> tuple[int | None, Properties | None]:
    """The optional Reason Code and properties that end a 5.0 acknowledgement, DISCONNECT or AUTH: either may be
    left out when the Remaining Length stops before it."""
    if buf.eof():
        return None, None
    offset = buf.tell()
    reason_code = buf.pull_uint8()
    reason_codes.check_reason_code(packet_type, reason_code, direction, offset, out)
    if buf.eof():
        return reason_code, None
    properties = _properties(buf, packet_type, direction, out)
    _leftover(buf, check.packet_name(packet_type, True), out)
    return reason_code, properties


def read_subscribe(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    packet_id: int | None = None
    subscriptions: list[Subscription] = []
    properties: Properties = ()
    try:
        packet_id = _read_packet_id(buf, PacketType.SUBSCRIBE, out)
        if v5:
            properties = _properties(buf, PacketType.SUBSCRIBE, direction, out)
        if buf.eof():
            out.append(Violation(rules.SUBSCRIBE_NO_PAYLOAD, buf.tell(), "SUBSCRIBE has no Topic Filter"))
        while not buf.eof():
            filter_offset = buf.tell()
            topic_filter = read_string(buf, check.SUBSCRIBE_FILTER_FIELD_5 if v5 else check.SUBSCRIBE_FILTER_FIELD, out)
            options_offset = buf.tell()
            try:
                options = buf.pull_uint8()
            except BufferUnderrun as exc:
                raise BufferUnderrun(exc.offset, 1, 0, f"options of {topic_filter!r}") from None
            subscriptions.append(_subscription(buf, topic_filter, options, filter_offset, options_offset, v5, out))
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Subscribe(
        packet_id=packet_id,
        subscriptions=tuple(subscriptions),
        properties=properties,
        raw_flags=_raw_flags(PacketType.SUBSCRIBE, flags),
    )


def _subscription(
    buf: Buffer,
    topic_filter: str,
    options: int,
    filter_offset: int,
    options_offset: int,
    v5: bool,
    out: list[Violation],
) -> Subscription:
    if not v5:
        check.check_subscription_options(options, options_offset, out)
        return Subscription(
            topic_filter=topic_filter, qos=options & 0x03, raw_options=options if options & 0xFC else None
        )
    shared = check.is_shared_filter(buf.data[filter_offset + 2 : options_offset])
    check.check_subscription_options_5(options, shared, options_offset, out)
    return Subscription(
        topic_filter=topic_filter,
        qos=options & 0x03,
        no_local=bool(options & 0x04),
        retain_as_published=bool(options & 0x08),
        retain_handling=(options >> 4) & 0x03,
        raw_options=options if options & 0xC0 else None,
    )


def read_suback(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    packet_id: int | None = None
    codes = b""
    properties: Properties = ()
    try:
        packet_id = _read_packet_id(buf, PacketType.SUBACK, out)
        if v5:
            properties = _properties(buf, PacketType.SUBACK, direction, out)
        codes = _read_codes(buf, PacketType.SUBACK, direction, v5, out)
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Suback(
        packet_id=packet_id,
        return_codes=tuple(codes),
        properties=properties,
        raw_flags=_raw_flags(PacketType.SUBACK, flags),
    )


#: The statement a SUBACK or UNSUBACK without any code breaks: one code answers each Topic Filter.
_ONE_CODE_PER_FILTER: Final = {
    int(PacketType.SUBACK): rules.SUBACK_ONE_CODE_PER_FILTER,
    int(PacketType.UNSUBACK): rules.UNSUBACK_REASON_CODES,
}


def _read_codes(buf: Buffer, packet_type: int, direction: Direction | None, v5: bool, out: list[Violation]) -> bytes:
    """The codes that end a SUBACK (or a 5.0 UNSUBACK), one per Topic Filter: at least one, each from its table
    (3.1.1's SUBACK return codes, or 5.0's Reason Codes of the packet)."""
    start = buf.tell()
    codes = buf.pull_rest()
    if not codes:
        kind = "Reason Code" if v5 else "return code"
        out.append(
            Violation(_ONE_CODE_PER_FILTER[packet_type], start, f"{check.packet_name(packet_type)} carries no {kind}")
        )
    for index, code in enumerate(codes):
        if v5:
            reason_codes.check_reason_code(packet_type, code, direction, start + index, out)
        else:
            check.check_suback_code(code, start + index, out)
    return codes


def read_unsubscribe(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    packet_id: int | None = None
    filters: list[str] = []
    properties: Properties = ()
    try:
        packet_id = _read_packet_id(buf, PacketType.UNSUBSCRIBE, out)
        if v5:
            properties = _properties(buf, PacketType.UNSUBSCRIBE, direction, out)
        if buf.eof():
            out.append(Violation(rules.UNSUBSCRIBE_NO_PAYLOAD, buf.tell(), "UNSUBSCRIBE has no Topic Filter"))
        # a Shared Subscription is unsubscribed by its whole filter, in the same form
        field = check.UNSUBSCRIBE_FILTER_FIELD_5 if v5 else check.UNSUBSCRIBE_FILTER_FIELD
        while not buf.eof():
            filters.append(read_string(buf, field, out))
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Unsubscribe(
        packet_id=packet_id,
        topic_filters=tuple(filters),
        properties=properties,
        raw_flags=_raw_flags(PacketType.UNSUBSCRIBE, flags),
    )


def read_unsuback(
    buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
) -> Packet:
    v5 = version is _V5
    if not v5:  # a short body has been reported by the fixed-length rule; the id is then unknown
        packet_id = _read_packet_id(buf, PacketType.UNSUBACK, out) if buf.remaining() >= 2 else None
        return Unsuback(packet_id=packet_id, raw_flags=_raw_flags(PacketType.UNSUBACK, flags))
    packet_id = None
    codes = b""
    properties: Properties = ()
    try:
        packet_id = _read_packet_id(buf, PacketType.UNSUBACK, out)
        properties = _properties(buf, PacketType.UNSUBACK, direction, out)
        codes = _read_codes(buf, PacketType.UNSUBACK, direction, v5, out)
    except BufferUnderrun as exc:
        _overrun(exc, out)
    return Unsuback(
        packet_id=packet_id,
        reason_codes=tuple(codes),
        properties=properties,
        raw_flags=_raw_flags(PacketType.UNSUBACK, flags),
    )


def _empty_reader(cls: type[Pingreq | Pingresp], packet_type: PacketType) -> Reader:

    def read_empty(
        buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
    ) -> Packet:
        return cls(raw_flags=_raw_flags(packet_type, flags))

    return read_empty


def _reasoned_reader(cls: type[Disconnect | Auth], packet_type: PacketType) -> Reader:

    def read_reasoned(
        buf: Buffer, flags: int, direction: Direction | None, version: ProtocolVersion, out: list[Violation]
    ) -> Packet:
        v5 = version is _V5
        reason_code: int | None = None
        properties: Properties | None = None
        if v5:  # in 3.1.1 DISCONNECT is empty, and the fixed-length rule has reported any body
            try:
                reason_code, properties = _reason_and_properties(buf, packet_type, direction, out)
            except BufferUnderrun as exc:
                _overrun(exc, out)
        return cls(reason_code=reason_code, properties=properties, raw_flags=_raw_flags(packet_type, flags))

    return read_reasoned


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
    PacketType.UNSUBACK: read_unsuback,
    PacketType.PINGREQ: _empty_reader(Pingreq, PacketType.PINGREQ),
    PacketType.PINGRESP: _empty_reader(Pingresp, PacketType.PINGRESP),
    PacketType.DISCONNECT: _reasoned_reader(Disconnect, PacketType.DISCONNECT),
    PacketType.AUTH: _reasoned_reader(Auth, PacketType.AUTH),  # reached in 5.0 only: 15 is reserved before
}


def check_first_byte(
    first: int, direction: Direction | None, offset: int, out: list[Violation], v5: bool = False
) -> bool:
    """What the first byte of a packet alone breaks, reported into ``out``: a reserved type (then False), a type
    its sender never sends, fixed-header flags other than Table 2.2's (PUBLISH flags are read with the packet)."""
    packet_type = first >> 4
    if not check.check_packet_type(packet_type, offset, out, v5):
        return False
    if direction is not None:  # unknown sender: nothing to check
        check.check_direction(packet_type, direction, offset, out, v5)
    if packet_type != _PUBLISH:
        check.check_fixed_flags(packet_type, first & 0x0F, offset, out)
    return True


def read_packet(
    data: bytes,
    offset: int,
    body: int,
    end: int,
    direction: Direction | None,
    out: list[Violation],
    version: ProtocolVersion = ProtocolVersion.V3_1_1,
) -> Packet:
    """Decodes the framed packet ``data[offset:end]`` whose body starts at ``body`` as ``version`` reads it,
    reporting into ``out`` under that version's statement ids."""
    v5 = version is _V5
    first_finding = len(out)
    first = data[offset]
    packet_type = first >> 4
    packet: Packet
    clean = _CLEAN_5 if v5 else _CLEAN
    if not (clean[0] if direction is None else clean[1] if direction is _FROM_CLIENT else clean[2])[first] and (
        not check_first_byte(first, direction, offset, out, v5)
    ):
        packet = ReservedPacket(packet_type_value=packet_type, body=data[body:end], flags=first & 0x0F)
    elif packet_type == _PUBLISH:
        packet = read_publish(data, offset, body, end, out, direction, v5)
    else:
        check.check_fixed_length(packet_type, end - body, offset + 1, out, v5)
        packet = READERS[packet_type](Buffer(data, body, end), first & 0x0F, direction, version, out)
    if version is not _V3_1_1 and len(out) > first_finding:
        name_findings(out, first_finding, version)
    return packet


def name_findings(out: list[Violation], start: int, version: ProtocolVersion) -> None:
    """Renames the findings ``out[start:]`` (reported by rule key) with ``version``'s statement ids, dropping
    those of rules the version does not state."""
    named = []
    for violation in out[start:]:
        rule = identity.statement_id(violation.rule, version.value)
        if rule == violation.rule:
            named.append(violation)
        elif rule is not None:
            named.append(Violation(rule, violation.offset, violation.detail, violation.rule))
    out[start:] = named


_PUBLISH: Final = int(PacketType.PUBLISH)
_FROM_CLIENT: Final = Direction.FROM_CLIENT
_FROM_SERVER: Final = Direction.FROM_SERVER


def _clean_first_bytes(v5: bool) -> tuple[bytes, bytes, bytes]:
    """Per sender (unknown, client, server): 1 for each first byte :func:`check_first_byte` finds nothing in, so
    the common packet costs one look-up rather than three checks."""
    rows = []
    for direction in (None, _FROM_CLIENT, _FROM_SERVER):
        row = bytearray(256)
        for first in range(256):
            found: list[Violation] = []
            row[first] = check_first_byte(first, direction, 0, found, v5) and not found
        rows.append(bytes(row))
    return rows[0], rows[1], rows[2]


_CLEAN: Final = _clean_first_bytes(False)
_CLEAN_5: Final = _clean_first_bytes(True)
_V3_1_1: Final = ProtocolVersion.V3_1_1
_V5: Final = ProtocolVersion.V5
