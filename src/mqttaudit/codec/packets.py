"""MQTT 3.1.1 control packets as frozen dataclasses.

Constructors do not validate: an auditor must be able to hold the invalid packet it observed. Fields that a
wire packet can contradict (flag bits that disagree with the fields) are kept as ``raw_*`` overrides that are
``None`` whenever the bytes agree with the fields, so ``decode(encode(p)) == p`` holds for every packet.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PacketType(enum.IntEnum):
    """Control packet types (section 2.2.1, Table 2.1)."""

    RESERVED_0 = 0
    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    RESERVED_15 = 15


class Direction(enum.Enum):
    """Who sent the bytes: the client (towards the server) or the server (towards the client)."""

    FROM_CLIENT = "client"
    FROM_SERVER = "server"

    @classmethod
    def parse(cls, value: Direction | str | None) -> Direction | None:
        if value is None or isinstance(value, Direction):
            return value
        return cls(value.lower())


@dataclass(frozen=True, slots=True, kw_only=True)
class Will:
    """The Will carried by CONNECT: topic, message and how the server must publish it."""

    topic: str
    message: bytes = b""
    qos: int = 0
    retain: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Connect:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.CONNECT

    protocol_name: str = "MQTT"
    protocol_level: int = 4
    clean_session: bool = True
    keep_alive: int = 0
    client_id: str = ""
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    #: The Connect Flags byte as observed, when it disagrees with the fields above (reserved bit, Will flags
    #: without a Will, ...); None means "derived from the fields".
    raw_connect_flags: int | None = None
    raw_flags: int | None = None

    @property
    def connect_flags(self) -> int:
        """The Connect Flags byte: the observed one when it was kept, else the one the fields imply."""
        if self.raw_connect_flags is not None:
            return self.raw_connect_flags
        return derive_connect_flags(self.clean_session, self.will, self.username, self.password)


@dataclass(frozen=True, slots=True, kw_only=True)
class Connack:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.CONNACK

    session_present: bool = False
    return_code: int = 0
    #: The Connect Acknowledge Flags byte as observed, when bits 7-1 are not zero.
    raw_ack_flags: int | None = None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Publish:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBLISH

    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Puback:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBACK

    packet_id: int | None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pubrec:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBREC

    packet_id: int | None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pubrel:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBREL

    packet_id: int | None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pubcomp:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBCOMP

    packet_id: int | None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """One Topic Filter / requested QoS pair of a SUBSCRIBE."""

    topic_filter: str
    qos: int = 0
    #: The options byte as observed, when its reserved bits 7-2 are not zero.
    raw_options: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribe:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBSCRIBE

    packet_id: int | None
    subscriptions: tuple[Subscription, ...]
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Suback:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBACK

    packet_id: int | None
    return_codes: tuple[int, ...]
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unsubscribe:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.UNSUBSCRIBE

    packet_id: int | None
    topic_filters: tuple[str, ...]
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unsuback:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.UNSUBACK

    packet_id: int | None
    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pingreq:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PINGREQ

    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pingresp:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PINGRESP

    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Disconnect:
    @property
    def packet_type(self) -> PacketType:
        return PacketType.DISCONNECT

    raw_flags: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReservedPacket:
    """A packet of reserved type 0 or 15: framed by its Remaining Length, its body kept as bytes."""

    packet_type_value: int
    body: bytes = b""
    flags: int = 0

    @property
    def packet_type(self) -> PacketType:
        try:
            return PacketType(self.packet_type_value)
        except ValueError:  # only a hand-made packet holds a type outside 0..15
            return PacketType.RESERVED_0 if self.packet_type_value < 0 else PacketType.RESERVED_15


def derive_connect_flags(clean_session: bool, will: Will | None, username: str | None, password: bytes | None) -> int:
    """The Connect Flags byte (3.1.2.3) that a CONNECT with these fields carries."""
    flags = 0x02 if clean_session else 0
    if will is not None:
        flags |= 0x04 | ((will.qos & 0x03) << 3) | (0x20 if will.retain else 0)
    if username is not None:
        flags |= 0x80
    if password is not None:
        flags |= 0x40
    return flags


Packet = (
    Connect
    | Connack
    | Publish
    | Puback
    | Pubrec
    | Pubrel
    | Pubcomp
    | Subscribe
    | Suback
    | Unsubscribe
    | Unsuback
    | Pingreq
    | Pingresp
    | Disconnect
    | ReservedPacket
)

#: Packets whose only field is the Packet Identifier.
AckPacket = Puback | Pubrec | Pubrel | Pubcomp | Unsuback
#: Packets with no variable header and no payload.
EmptyPacket = Pingreq | Pingresp | Disconnect
