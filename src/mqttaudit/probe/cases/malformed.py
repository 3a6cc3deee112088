"""Malformed and forbidden packets: the broker must close the connection and act on none of them.

Brokers check one shape of a rule and miss its neighbour, so each rule is probed by a family of shapes (see
:data:`FAMILIES`), generated from tables of packet types, flag bits, lengths, positions and fields; a new shape is
one table row. Each shape is its own case: one defective packet, sent as the first packet of a connection (CONNECT
defects) or after a CONNECT the broker accepted, on a connection of its own. The statements a case targets are the
ones the judge finds broken when a broker accepts the stimulus: the rules the packet breaks and the duty to close on
it [MQTT-4.8.0-1] (or the more specific statement, such as [MQTT-3.8.1-1]; for CONNECT, without a CONNACK
[MQTT-3.1.4-1]). The stimulus bytes and the judge are the single source of both. The well-formed neighbours a broker
must accept are in :mod:`.accepted`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from ...codec import (
    Connack,
    Connect,
    Direction,
    Frame,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Publish,
    StreamDecoder,
    Suback,
    Unsuback,
    Will,
    encode,
)
from ...codec.remaining_length import encode_remaining_length
from ...codec.validators import FIXED_LENGTH, FIXED_LENGTH_5, REQUIRED_FLAGS, SENDERS
from ...judge import Event, Judgement, Quiet, Sent, judge, rules
from ...spec import identity
from ...spec.registry import StatementId
from ..case import CaseContext, Script, case
from ..connection import client_frames

#: What a stimulus's bytes are made of at run time: the case's own Client Identifier and topic prefix
#: (``CaseContext.client_id()`` and ``CaseContext.topic()``), so that no two cases or runs share a session or a
#: topic, whatever the broker makes of the defect.
Shape = Callable[[str, str], bytes]

#: The identifier and prefix the case list and the tests show a stimulus with.
EXAMPLE_CLIENT_ID = "mqa" + "0" * 20
EXAMPLE_PREFIX = "mqttaudit/<run>/<case>"


@dataclass(frozen=True)
class Stimulus:
    case_id: str
    title: str
    #: Fixed bytes, or the bytes for a Client Identifier and a topic prefix (see :data:`Shape`).
    shape: bytes | Shape
    #: True: sent instead of CONNECT on a fresh connection; False: sent after an accepted CONNECT.
    as_connect: bool = False
    #: The family of shapes it belongs to (:data:`FAMILIES`).
    family: str = ""

    @property
    def with_will(self) -> bool:
        """A malformed DISCONNECT is sent on a connection with a Will, watched by a subscriber: a broker closes on
        any DISCONNECT, so only the Will shows whether it took the packet for one. A DISCONNECT discards the Will
        [MQTT-3.14.4-3]; a close because of a protocol error publishes it (section 3.1.2.5 lists that case), as
        every close without a DISCONNECT does [MQTT-3.1.2-8]."""
        return not self.as_connect and self.data[0] >> 4 == PacketType.DISCONNECT

    def build(self, client_id: str, prefix: str) -> bytes:
        return self.shape if isinstance(self.shape, bytes) else self.shape(client_id, prefix)

    @property
    def data(self) -> bytes:
        """The bytes with the example identifier and prefix."""
        return self.build(EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX)

    @property
    def personal(self) -> bool:
        """The bytes carry the case's own Client Identifier or topic."""
        return not isinstance(self.shape, bytes)


#: The version the families are written in unless told otherwise.
V3: Final = ProtocolVersion.V3_1_1
V5: Final = ProtocolVersion.V5


def no_properties(protocol: ProtocolVersion) -> bytes:
    """What a packet of ``protocol`` holds where 5.0 puts its properties: an empty Property Length in 5.0
    (section 2.2.2), nothing in 3.1.1."""
    return b"\x00" if protocol is V5 else b""


def _raw(packet: Packet, protocol: ProtocolVersion = V3) -> bytes:
    return encode(packet, validate=False, version=protocol)


def _hex(text: str) -> bytes:
    return bytes.fromhex(text)


def _frame(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte,)) + encode_remaining_length(len(body)) + body


def field(data: bytes) -> bytes:
    """A length-prefixed field holding ``data`` as it is (ill-formed UTF-8 included)."""
    return len(data).to_bytes(2, "big") + data


def connect_frame(
    client_id: bytes,
    *,
    flags: int = 0x02,
    tail: bytes = b"",
    keep_alive: int = 0,
    name: bytes = b"MQTT",
    level: int = 4,
    keep: int | None = None,
) -> bytes:
    """The bytes of a CONNECT: Protocol Name and Level, the Connect Flags byte, Keep Alive (at Level 5 an empty
    Property Length) and the Client Identifier, then ``tail`` (the fields the flags announce, as they are).
    ``keep`` cuts the packet to that many bytes after its fixed header (a Remaining Length shorter than the
    variable header)."""
    properties = no_properties(V5) if level == V5.level else b""
    body = field(name) + bytes((level, flags)) + keep_alive.to_bytes(2, "big") + properties + field(client_id) + tail
    return _frame(0x10, body if keep is None else body[:keep])


def _with_will_topic(flags: int, level: bytes, protocol: ProtocolVersion = V3) -> Shape:
    """A CONNECT with the given flags whose Will Topic is ``<prefix>/`` then ``level`` (raw bytes), an empty
    Will Message (in 5.0 after empty Will Properties): a broker that takes it publishes the Will only where this
    case alone listens."""
    will = no_properties(protocol)
    return lambda client_id, prefix: connect_frame(
        client_id.encode(),
        flags=flags,
        tail=will + field(prefix.encode() + b"/" + level) + field(b""),
        level=protocol.level,
    )


def _ill_formed_client_id(protocol: ProtocolVersion = V3) -> Shape:
    """The case's Client Identifier with its last character replaced by 0xFF, a byte UTF-8 never has: still 23
    bytes, so the encoding is the only defect."""
    return lambda client_id, _prefix: connect_frame(client_id[:-1].encode() + b"\xff", level=protocol.level)


def _publish(first_byte: int, level: bytes, after_topic: bytes = b"", protocol: ProtocolVersion = V3) -> Shape:
    """A PUBLISH with fixed header byte ``first_byte`` to ``<prefix>/`` then ``level`` (raw bytes), then
    ``after_topic`` (its Packet Identifier) and, in 5.0, an empty Property Length."""
    tail = after_topic + no_properties(protocol)
    return lambda _client_id, prefix: _frame(first_byte, field(prefix.encode() + b"/" + level) + tail)


def _filters(
    first_byte: int, packet_id: int, *levels: bytes, options: bytes | None = None, protocol: ProtocolVersion = V3
) -> Shape:
    """A SUBSCRIBE (``options``: the byte after each filter) or an UNSUBSCRIBE (None) with fixed header byte
    ``first_byte`` and a Topic Filter ``<prefix>/<level>`` for each of ``levels`` (raw bytes)."""
    head = packet_id.to_bytes(2, "big") + no_properties(protocol)

    def shape(_client_id: str, prefix: str) -> bytes:
        filters = b"".join(field(prefix.encode() + b"/" + level) + (options or b"") for level in levels)
        return _frame(first_byte, head + filters)

    return shape


def _packet(make: Callable[[str], Packet], protocol: ProtocolVersion = V3) -> Shape:
    """The codec's encoding in ``protocol``, unvalidated, of the packet ``make`` builds from the case's topic
    prefix."""
    return lambda _client_id, prefix: _raw(make(prefix), protocol)


# --- the families --------------------------------------------------------------------------------------------
# Each family is a table: one row per shape, each shape its own case (``malformed/<id>``). A new shape is one row.
# The tables name packets, bits, positions and levels; the builders above turn a row into bytes with the case's own
# Client Identifier and topics, in the version ``protocol`` names (3.1.1 unless told), so the MQTT 5.0 library
# builds the same shapes as 5.0 packets (:mod:`.v5_ported`).

CLIENT_PACKETS: Final = tuple(
    t for t in PacketType if t in SENDERS and Direction.FROM_CLIENT in SENDERS[t] and t is not PacketType.PUBLISH
)


def _flag_body(packet_type: PacketType, protocol: ProtocolVersion = V3) -> tuple[bytes | Shape, bool]:
    """A well-formed body for ``packet_type`` (the case's own Client Identifier or filter) and whether it is sent
    as the first packet of a connection: only its fixed-header flags will be wrong."""
    properties = no_properties(protocol)
    if packet_type is PacketType.CONNECT:
        return (lambda client_id, _prefix: connect_frame(client_id.encode(), level=protocol.level)[2:]), True
    if packet_type is PacketType.SUBSCRIBE:
        return (lambda _client_id, prefix: b"\x00\x01" + properties + field(prefix.encode() + b"/a") + b"\x00"), False
    if packet_type is PacketType.UNSUBSCRIBE:
        return (lambda _client_id, prefix: b"\x00\x02" + properties + field(prefix.encode() + b"/a")), False
    fixed = FIXED_LENGTH.get(packet_type)
    return (bytes((0, 1)) if fixed is not None and fixed[0] == 2 else b""), False


def _with_first_byte(first_byte: int, body: bytes | Shape) -> bytes | Shape:
    if isinstance(body, bytes):
        return _frame(first_byte, body)
    return lambda client_id, prefix: _frame(first_byte, body(client_id, prefix))


def _flag_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    """Every reserved fixed-header flag bit of every packet a client sends with fixed flags (Table 2.2), one bit
    flipped at a time: CONNECT, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE, UNSUBSCRIBE, PINGREQ, DISCONNECT."""
    rows = []
    for packet_type in CLIENT_PACKETS:
        required = REQUIRED_FLAGS[packet_type]
        body, as_connect = _flag_body(packet_type, protocol)
        name = packet_type.name
        for bit in range(4):
            flags = required ^ (1 << bit)
            rows.append(
                Stimulus(
                    f"{name.lower()}-flag-bit-{bit}",
                    f"{name} with flag bit {bit} flipped (flags {flags:04b}, not {required:04b})",
                    _with_first_byte((packet_type << 4) | flags, body),
                    as_connect,
                )
            )
    return tuple(rows)


def _length_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    """Every packet of fixed length a client sends, with a Remaining Length one short (when it has one to lose)
    and one long; the body is the right one cut or with one zero byte added. In 5.0 the acknowledgements and
    DISCONNECT may carry a Reason Code and properties, so only their short forms are defects there: 3.1.1's
    lengths are kept, and a size 5.0 reads as a whole packet is left out."""
    rows = []
    for packet_type in CLIENT_PACKETS:
        fixed = FIXED_LENGTH.get(packet_type)
        if fixed is None:
            continue
        length = fixed[0]
        first = bytes(((packet_type << 4) | REQUIRED_FLAGS[packet_type],))
        body = bytes((0, 1))[:length]
        for size in (length - 1, length + 1):
            if size < 0 or (protocol is V5 and size > length and packet_type not in FIXED_LENGTH_5):
                continue
            data = first + bytes((size,)) + (body + b"\x00")[:size]
            rows.append(
                Stimulus(
                    f"{packet_type.name.lower()}-length-{size}",
                    f"{packet_type.name} with a Remaining Length of {size}, not {length}",
                    data,
                )
            )
    return tuple(rows)


#: Reserved packet types, whole and still arriving: (id suffix, title, bytes after the first byte).
RESERVED_TYPE_SHAPES: Final = (
    ("type-byte-only", "whose first byte alone has arrived", ""),
    ("empty", "with a Remaining Length of 0", "00"),
    ("with-body", "with a two-byte body", "02 00 01"),
    ("body-arriving", "whose body is still arriving (10 bytes announced, 2 sent)", "0a 00 01"),
    ("length-arriving", "whose Remaining Length is still arriving (a continuation bit, then nothing)", "80"),
)
#: The reserved packet types of each version: 5.0 gives type 15 to AUTH.
RESERVED_TYPES: Final = {V3: (PacketType.RESERVED_0, PacketType.RESERVED_15), V5: (PacketType.RESERVED_0,)}


def _reserved_type_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    return tuple(
        Stimulus(
            f"reserved-type-{value}-{suffix}",
            f"Reserved packet type {value} {title}",
            bytes((value << 4,)) + bytes.fromhex(rest),
        )
        for value in RESERVED_TYPES[protocol]
        for suffix, title, rest in RESERVED_TYPE_SHAPES
    )


#: The position of a bad level that is the whole filter (see :data:`LEVEL_POSITIONS`).
ONLY: Final = "only"
#: A wildcard that is not alone in its level, at each position of the level; then '#' alone in a level that is not
#: the last. (id, the level's bytes, the positions of the filter it may take).
WILDCARD_LEVELS: Final = (
    ("plus-first-char", b"+x", ("first", "middle", "last", ONLY)),
    ("plus-middle-char", b"x+y", ("first", "middle", "last", ONLY)),
    ("plus-last-char", b"x+", ("first", "middle", "last", ONLY)),
    ("hash-first-char", b"#x", ("first", "middle", "last", ONLY)),
    ("hash-middle-char", b"x#y", ("first", "middle", "last", ONLY)),
    ("hash-last-char", b"x#", ("first", "middle", "last", ONLY)),
    ("hash-alone", b"#", ("first", "middle")),
)
#: Where the bad level sits among the levels of a filter under the case's prefix ``p``: ``only`` is a filter of one
#: level (``x#``, no '/' before the '#' to look back at), outside the case's topics, so only a Topic Filter takes
#: it (a SUBSCRIBE or UNSUBSCRIBE of it reaches no other client), never a Topic Name.
LEVEL_POSITIONS: Final[dict[str, Callable[[bytes, bytes], bytes]]] = {
    "first": lambda level, p: level + b"/" + p + b"/z",
    "middle": lambda level, p: p + b"/" + level + b"/z",
    "last": lambda level, p: p + b"/" + level,
    ONLY: lambda level, _p: level,
}
#: Where the bad filter sits among the filters of one packet: alone, or before or after a good one.
FILTER_PLACES: Final[dict[str, Callable[[bytes, bytes], tuple[bytes, ...]]]] = {
    "": lambda bad, p: (bad,),
    "-before-a-good-filter": lambda bad, p: (bad, p + b"/good"),
    "-after-a-good-filter": lambda bad, p: (p + b"/good", bad),
}
#: The packets that carry Topic Filters: (name, first byte, Packet Identifier, the byte after each filter).
FILTER_CARRIERS: Final[tuple[tuple[str, int, int, bytes | None], ...]] = (
    ("subscribe", 0x82, 1, b"\x00"),
    ("unsubscribe", 0xA2, 2, None),
)


#: Puts a level's bytes among the levels of a filter under the case's prefix.
Placer = Callable[[bytes, bytes], bytes]
#: Puts a bad filter among the filters of a packet, given the case's prefix.
Surroundings = Callable[[bytes, bytes], tuple[bytes, ...]]


def _filter_shape(
    carrier: tuple[str, int, int, bytes | None],
    level: bytes,
    at: Placer,
    around: Surroundings,
    protocol: ProtocolVersion = V3,
) -> Shape:
    """A SUBSCRIBE (with the options byte after each filter) or UNSUBSCRIBE (``carrier``) whose bad filter holds
    ``level`` where ``at`` puts it, among the filters ``around`` adds."""
    _name, first_byte, packet_id, options = carrier
    head = packet_id.to_bytes(2, "big") + no_properties(protocol)

    def shape(_client_id: str, prefix: str) -> bytes:
        p = prefix.encode()
        body = b"".join(field(f) + (options or b"") for f in around(at(level, p), p))
        return _frame(first_byte, head + body)

    return shape


def _topic_name_shape(level: bytes, at: Placer, protocol: ProtocolVersion = V3) -> Shape:
    """A QoS 0 PUBLISH whose Topic Name holds ``level`` where ``at`` puts it."""
    properties = no_properties(protocol)
    return lambda _client_id, prefix: _frame(0x30, field(at(level, prefix.encode())) + properties + b"x")


def _wildcard_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    """'+' and '#' not alone in their level, at the first, middle and last character of the level, in the first,
    middle and last level of the filter, alone in the packet and before or after a good filter; SUBSCRIBE and
    UNSUBSCRIBE [MQTT-4.7.1-2, MQTT-4.7.1-3]. Beside them, PUBLISH Topic Names with a wildcard at the same
    positions, and alone in a level at each level [MQTT-3.3.2-2]."""
    rows = []
    for carrier in FILTER_CARRIERS:
        for place, around in FILTER_PLACES.items():
            for name, level, positions in WILDCARD_LEVELS:
                for position in positions if not place else ("middle",):
                    at = LEVEL_POSITIONS[position]
                    shape = _filter_shape(carrier, level, at, around, protocol)
                    rows.append(
                        Stimulus(
                            f"{carrier[0]}-{name}-{position}-level{place}",
                            f"{carrier[0].upper()} to '{at(level, b'<p>').decode()}'{place.replace('-', ' ')}",
                            shape("", "") if position == ONLY else shape,  # one level: no prefix in it
                        )
                    )
    for name, level, _positions in (("plus-alone", b"+", ()), *WILDCARD_LEVELS):
        for position in (p for p in LEVEL_POSITIONS if p != ONLY) if name.endswith("alone") else ("middle",):
            at = LEVEL_POSITIONS[position]
            rows.append(
                Stimulus(
                    f"publish-topic-{name}-{position}-level",
                    f"PUBLISH to '{at(level, b'<p>').decode()}'",
                    _topic_name_shape(level, at, protocol),
                )
            )
    return tuple(rows)


#: Reserved option bits of a SUBSCRIBE's options byte [MQTT-3.8.3-4]: bits 2 to 7 of 3.1.1's Requested QoS byte;
#: 5.0 gives bits 2 to 5 to No Local, Retain As Published and Retain Handling, and reserves 6 and 7 [MQTT-3.8.3-5].
RESERVED_OPTION_BITS: Final = {V3: range(2, 8), V5: range(6, 8)}


def _option_bit_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    return tuple(
        Stimulus(
            f"subscribe-option-bit-{bit}",
            f"SUBSCRIBE with reserved option bit {bit} set",
            _filters(0x82, 1, b"a/b", options=bytes((1 << bit,)), protocol=protocol),
        )
        for bit in RESERVED_OPTION_BITS[protocol]
    )


def _connect(level: int = 4, flags: int = 0x02, tail: bytes = b"") -> Shape:
    """A CONNECT with the case's Client Identifier, the given Protocol Level and Connect Flags, then ``tail``."""
    return lambda client_id, _prefix: connect_frame(client_id.encode(), flags=flags, tail=tail, level=level)


#: Protocol Levels no MQTT specification uses, so no broker supports them: the server answers CONNACK 0x01 and
#: closes [MQTT-3.1.2-2]. Not 3 (MQTT 3.1, which a broker may support under the name 'MQTT' too), 4 (3.1.1) or
#: 5 (MQTT 5.0).
UNSUPPORTED_LEVELS: Final = (0, 1, 2, 6, 7, 255)
#: The id of the shapes of an unsupported Protocol Level, before the level.
PROTOCOL_LEVEL_SHAPE: Final = "connect-protocol-level-"
#: Where a CONNECT's Remaining Length ends inside its variable header: (id, bytes of the variable header kept).
CONNECT_CUTS: Final = (
    ("in-name-length", 1),
    ("after-name-length", 2),
    ("in-name", 4),
    ("after-name", 6),
    ("after-level", 7),
    ("after-flags", 8),
    ("in-keep-alive", 9),
)
#: The bytes of a CONNECT's variable header up to its Protocol Level: a cut before it names no version.
_UP_TO_LEVEL: Final = 7


def _connect_family(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    """CONNECT variants: unsupported Protocol Levels, a Remaining Length that ends inside the variable header, the
    Connect Flags with the fields they announce missing, and ill-formed fields. Another Protocol Name has no
    shape here: the server may follow another specification then [MQTT-3.1.2-1], so no reaction to it fails.

    In 5.0 (Protocol Level 5, empty CONNECT and Will Properties) the shapes that name no version are left out:
    another Protocol Level, a cut before the level, a first packet that is no CONNECT."""
    level = protocol.level
    will = no_properties(protocol)  # the Will Properties before a Will Topic
    rows = []
    if protocol is V3:
        rows += [
            Stimulus(
                f"{PROTOCOL_LEVEL_SHAPE}{unsupported}",
                f"CONNECT 'MQTT' with Protocol Level {unsupported}",
                _connect(level=unsupported),
                True,
            )
            for unsupported in UNSUPPORTED_LEVELS
        ]
    rows += [
        Stimulus(
            f"connect-cut-{name}",
            f"CONNECT whose Remaining Length ({keep}) ends inside its variable header",
            connect_frame(b"", keep=keep, level=level),  # cut before the payload: no identifier of its own
            True,
        )
        for name, keep in CONNECT_CUTS
        if protocol is V3 or keep >= _UP_TO_LEVEL
    ]
    rows += [
        Stimulus(f"connect-{name}", f"CONNECT with {title}", _connect(level, flags, tail), True)
        for name, title, flags, tail in (
            ("reserved-flag", "the reserved Connect Flag set", 0x03, b""),
            ("will-qos-1-without-will", "Will QoS 1 but Will Flag 0", 0x0A, b""),
            ("will-qos-2-without-will", "Will QoS 2 but Will Flag 0", 0x12, b""),
            ("will-retain-without-will", "Will Retain but Will Flag 0", 0x22, b""),
            ("will-flag-without-will", "Will Flag 1 but no Will fields", 0x06, b""),
            ("will-flag-without-message", "Will Flag 1, a Will Topic and no Will Message", 0x06, will + field(b"w")),
            ("password-without-username", "a password but no user name", 0x42, field(b"p")),
            ("username-flag-without-username", "User Name Flag 1 but no user name", 0x82, b""),
            ("password-flag-without-password", "Password Flag 1 but no password", 0xC2, field(b"u")),
            ("username-ill-formed-utf8", "a User Name with ill-formed UTF-8", 0x82, field(b"\xc0")),
            # fields the flags do not announce, each in its place after the announced ones
            ("username-without-flag", "a User Name but User Name Flag 0", 0x02, field(b"u")),
            (
                "password-without-flag",
                "a User Name and a Password but Password Flag 0",
                0x82,
                field(b"u") + field(b"p"),
            ),
            ("credentials-without-flags", "a User Name and a Password, both flags 0", 0x02, field(b"u") + field(b"p")),
        )
        # 5.0 allows a Password without a User Name (section 3.1.2.9)
        if protocol is V3 or name != "password-without-username"
    ]
    rows += [
        Stimulus("connect-will-qos-3", "CONNECT with Will QoS 3", _with_will_topic(0x1E, b"w", protocol), True),
        # The one stimulus without an identifier of its own: the missing Client Identifier is its defect.
        Stimulus(
            "connect-no-client-id",
            "CONNECT without a Client Identifier",
            connect_frame(b"", level=level, keep=10 + len(no_properties(protocol))),
            True,
        ),
        Stimulus(
            "connect-client-id-ill-formed-utf8",
            "CONNECT Client Identifier with ill-formed UTF-8",
            _ill_formed_client_id(protocol),
            True,
        ),
        Stimulus(
            "connect-will-topic-ill-formed-utf8",
            "CONNECT Will Topic with ill-formed UTF-8",
            _with_will_topic(0x06, b"\xfe", protocol),
            True,
        ),
        Stimulus(
            "connect-will-topic-wildcard",
            "CONNECT Will Topic with '#'",
            lambda client_id, prefix: _raw(
                Connect(protocol_level=level, client_id=client_id, will=Will(topic=f"{prefix}/w/#", message=b"x")),
                protocol,
            ),
            True,
        ),
    ]
    if protocol is V3:
        rows.append(
            Stimulus("first-packet-not-connect", "PINGREQ as the first packet of a connection", _raw(Pingreq()), True)
        )
    return tuple(rows)


#: Packets only a server sends: (name, the packet, which each version encodes in its own form).
SERVER_PACKETS: Final[tuple[tuple[str, Packet], ...]] = (
    ("CONNACK", Connack()),
    ("SUBACK", Suback(packet_id=1, return_codes=(0,))),
    ("UNSUBACK", Unsuback(packet_id=1, reason_codes=(0x00,))),
    ("PINGRESP", Pingresp()),
)


def families(protocol: ProtocolVersion = V3) -> tuple[tuple[str, str, tuple[Stimulus, ...]], ...]:
    """The families written as ``protocol`` packets, in the order the library lists them: (name, what the family
    covers, its shapes)."""
    properties = no_properties(protocol)
    return (
        (
            "framing",
            "Remaining Length of five bytes on several packet types",
            tuple(
                Stimulus(
                    f"remaining-length-fifth-byte{suffix}",
                    f"{name} with a Remaining Length of five bytes",
                    bytes((first,)) + _hex("ff ff ff ff 01"),
                )
                for suffix, name, first in (
                    ("", "PUBLISH", 0x30),
                    ("-subscribe", "SUBSCRIBE", 0x82),
                    ("-pingreq", "PINGREQ", 0xC0),
                )
            ),
        ),
        (
            "reserved-type",
            "reserved packet types 0 and 15, whole and still arriving"
            if protocol is V3
            else "reserved packet type 0, whole and still arriving",
            _reserved_type_family(protocol),
        ),
        (
            "sender",
            "packets only a server sends, sent by the client",
            tuple(
                Stimulus(f"client-sends-{name.lower()}", f"A client sends {name}", _raw(packet, protocol))
                for name, packet in SERVER_PACKETS
            ),
        ),
        ("fixed-flags", "every reserved fixed-header flag bit of every packet a client sends", _flag_family(protocol)),
        ("fixed-length", "fixed-length packets one byte short and one byte long", _length_family(protocol)),
        (
            "publish",
            "PUBLISH flags, Packet Identifier and Topic Name",
            (
                Stimulus("publish-qos-3", "PUBLISH with QoS 3", _publish(0x36, b"a/b", b"\x00\x01", protocol)),
                Stimulus(
                    "publish-dup-on-qos-0",
                    "PUBLISH with QoS 0 and DUP set",
                    _packet(lambda prefix: Publish(topic=f"{prefix}/a/b", dup=True), protocol),
                ),
                Stimulus(
                    "publish-packet-id-0",
                    "QoS 1 PUBLISH with Packet Identifier 0",
                    _packet(lambda prefix: Publish(topic=f"{prefix}/a", qos=1, packet_id=0), protocol),
                ),
                Stimulus(
                    "publish-topic-empty",
                    "PUBLISH with an empty Topic Name" + (" and no Topic Alias" if protocol is V5 else ""),
                    _raw(Publish(topic="", payload=b"x"), protocol),
                ),
                Stimulus(
                    "publish-topic-null",
                    "PUBLISH to a Topic Name holding U+0000",
                    _packet(lambda prefix: Publish(topic=f"{prefix}/a\x00b"), protocol),
                ),
                Stimulus(
                    "publish-topic-ill-formed-utf8",
                    "PUBLISH Topic Name with ill-formed UTF-8",
                    _publish(0x30, b"\xff", protocol=protocol),
                ),
                Stimulus(
                    "publish-topic-surrogate",
                    "PUBLISH Topic Name encoding a UTF-16 surrogate",
                    _publish(0x30, b"a\xed\xa0\x80", protocol=protocol),
                ),
                Stimulus(
                    "publish-topic-overrun",
                    "PUBLISH whose Topic Name length runs past the packet",
                    _hex("30 04 00 09 61 62"),
                ),
            ),
        ),
        (
            "wildcard-position",
            "'+' and '#' where a Topic Filter or Topic Name may not hold them",
            _wildcard_family(protocol),
        ),
        (
            "subscribe",
            "SUBSCRIBE and UNSUBSCRIBE payloads",
            (
                Stimulus(
                    "subscribe-empty-filter",
                    "SUBSCRIBE with an empty Topic Filter",
                    _frame(0x82, b"\x00\x01" + properties + field(b"") + b"\x00"),
                ),
                Stimulus(
                    "subscribe-no-payload", "SUBSCRIBE without a Topic Filter", _frame(0x82, b"\x00\x01" + properties)
                ),
                Stimulus(
                    "subscribe-packet-id-0",
                    "SUBSCRIBE with Packet Identifier 0",
                    _filters(0x82, 0, b"a/b", options=b"\0", protocol=protocol),
                ),
                Stimulus(
                    "subscribe-qos-3",
                    "SUBSCRIBE requesting QoS 3",
                    _filters(0x82, 1, b"a/b", options=b"\x03", protocol=protocol),
                ),
                *_option_bit_family(protocol),
                Stimulus(
                    "subscribe-filter-null",
                    "SUBSCRIBE to a Topic Filter holding U+0000",
                    _filters(0x82, 1, b"a\x00", options=b"\0", protocol=protocol),
                ),
                Stimulus(
                    "subscribe-filter-ill-formed-utf8",
                    "SUBSCRIBE Topic Filter with ill-formed UTF-8",
                    _filters(0x82, 1, b"a\xc3", options=b"\0", protocol=protocol),
                ),
                Stimulus(
                    "unsubscribe-empty-filter",
                    "UNSUBSCRIBE with an empty Topic Filter",
                    _frame(0xA2, b"\x00\x02" + properties + field(b"")),
                ),
                Stimulus(
                    "unsubscribe-no-payload",
                    "UNSUBSCRIBE without a Topic Filter",
                    _frame(0xA2, b"\x00\x02" + properties),
                ),
                Stimulus(
                    "unsubscribe-packet-id-0",
                    "UNSUBSCRIBE with Packet Identifier 0",
                    _filters(0xA2, 0, b"a", protocol=protocol),
                ),
                Stimulus(
                    "unsubscribe-filter-ill-formed-utf8",
                    "UNSUBSCRIBE Topic Filter with ill-formed UTF-8",
                    _filters(0xA2, 2, b"\x80", protocol=protocol),
                ),
            ),
        ),
        ("connect", "CONNECT variants, sent as the first packet of a connection", _connect_family(protocol)),
    )


def stimuli(protocol: ProtocolVersion = V3) -> tuple[Stimulus, ...]:
    """Every shape of every family written as ``protocol`` packets, each with its family's name."""
    return tuple(
        replace(stimulus, family=family) for family, _title, shapes in families(protocol) for stimulus in shapes
    )


#: The families, in the order the library lists them: (name, what the family covers, its shapes).
FAMILIES: Final = families(V3)
#: Every shape of every family, each with its family's name.
STIMULI: Final = stimuli(V3)


#: A broker that accepts the defect: it answers CONNECT (when the defect is not the CONNECT itself) and then
#: stays silent and open far past any grace.
_ACCEPTED_CONNECT = (Connect(client_id=EXAMPLE_CLIENT_ID), Connack())
_LONG_AFTER = 3600.0


def targeted(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements a broker that accepts the stimulus breaks, as the judge itself decides them: the rules the
    packet breaks (which the receiver upholds by rejecting it) and the duty to close on it."""
    events: list[Event] = []
    if not stimulus.as_connect:
        connect, connack = _ACCEPTED_CONNECT
        events.append(Sent(0.0, Direction.FROM_CLIENT, Frame(0, 0, encode(connect), connect)))
        events.append(Sent(0.0, Direction.FROM_SERVER, Frame(0, 0, encode(connack), connack)))
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT), stimulus.data)
    events += [Sent(0.0, Direction.FROM_CLIENT, frame) for frame in frames]
    events.append(Quiet(_LONG_AFTER))
    return charged(judge(events))


def charged(judgement: Judgement) -> tuple[str, ...]:
    """The statements a broker that accepts the stimulus is charged with, as the judge decides them: those it
    breaks, and those of a defect it accepts without being bound to detect it (5.0, section 4.13.1: a leniency),
    with the close [MQTT-4.13.1-1] it keeps by closing on that defect instead."""
    server = Direction.FROM_SERVER
    # Every statement each act breaks (the one cited and those failed with it), in id order within an act.
    statements = [rule for finding in judgement.findings if finding.side is server for rule in sorted(finding.rules)]
    for leniency in judgement.lenient:
        if leniency.side is server:
            close = identity.statement_id(rules.CLOSE_ON_VIOLATION, identity.V5) or ""
            statements += [close, leniency.rule, *leniency.others]
    # A case judges the broker on statements that bind it; the sender's rule a leniency names is the stimulus's
    # own defect, which its case lists apart (``provokes``).
    return tuple(
        dict.fromkeys(
            statement
            for statement in statements
            if statement and (not isinstance(statement, StatementId) or statement.rule.binds("server"))
        )
    )


def provoked(stimulus: Stimulus, version: ProtocolVersion = V3) -> tuple[str, ...]:
    """The Client's statements the stimulus breaks on purpose, which its case names and never judges the broker on
    (see :attr:`~mqttaudit.probe.case.Case.provokes`): the rules its bytes break, as ``version``'s decoder reads them
    (and a packet other than CONNECT opening the connection [MQTT-3.1.0-1]), those that bind the Client alone."""
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=version), stimulus.data)
    keys = [violation.rule_key for frame in frames for violation in frame.violations]
    first = frames[0].packet if frames else None
    if stimulus.as_connect and first is not None and not isinstance(first, Connect):
        keys.append(rules.CONNECT_FIRST)
    broken = (identity.statement_id(key, version.value) for key in dict.fromkeys(keys))
    return tuple(rule for rule in broken if rule is not None and not rule.rule.binds("server"))


_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID} and topic prefix <p> = {EXAMPLE_PREFIX}: each run and"
    " case has its own)"
)


#: The Will of a connection that sends a malformed DISCONNECT (see :attr:`Stimulus.with_will`), on the case's topic.
WILL_LEVEL: Final = "will"


def stimulus_script(stimulus: Stimulus) -> Script:
    """The case script of a shape, in the version the case speaks: a fresh connection sends it instead of
    CONNECT, or after an accepted CONNECT (with a watched Will for a DISCONNECT), then waits for the close."""

    async def script(context: CaseContext) -> None:
        watcher = None
        if stimulus.as_connect:
            connection = await context.open()
            connection.client_id = context.client_id()
        elif stimulus.with_will:
            will_topic = context.topic(WILL_LEVEL)
            watcher = await context.subscriber("watcher", (will_topic, 1))
            connection = await context.connect(will=Will(topic=will_topic, message=b"will", qos=1))
        else:
            connection = await context.connect()
        # built now: the case's own identifier and topics, never another case's or another run's
        await connection.send(stimulus.build(connection.client_id, context.topic()))
        await connection.wait_close()
        if watcher is not None:
            await context.deliveries(watcher, context.topic(WILL_LEVEL))
            await context.settle(watcher)
            await context.leave(watcher)

    return script


def _register(stimulus: Stimulus) -> None:
    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted CONNECT"
    if stimulus.with_will:
        where = "after a CONNECT with a Will (QoS 1) whose topic another connection watches"
    expected = "close the connection without a CONNACK" if stimulus.as_connect else "close the connection"
    if stimulus.case_id.startswith(PROTOCOL_LEVEL_SHAPE):
        # 3.1.1 asks for CONNACK 0x01; a broker that speaks 5.0 may refuse as 5.0 does [MQTT-3.1.2-2 of either]
        expected = "CONNACK 0x01 (a broker that speaks 5.0: 0x84 in 5.0's form), then close the connection"
    if stimulus.with_will:
        expected += " and publish the Will, since no DISCONNECT was received"
    case(
        f"malformed/{stimulus.case_id}",
        targeted(stimulus) + ((rules.WILL_PUBLISHED,) if stimulus.with_will else ()),
        stimulus.title,
        stimulus=f"{stimulus.title}, {where}: {stimulus.data.hex(' ')}{_SHOWN_WITH if stimulus.personal else ''}",
        expected=f"{expected}; act on nothing in it",
        # the Will is published some time after the close: a failure is confirmed alone
        timing=stimulus.with_will,
        family=f"malformed/{stimulus.family}",
        provokes=provoked(stimulus),
    )(stimulus_script(stimulus))


for _stimulus in STIMULI:
    _register(_stimulus)
