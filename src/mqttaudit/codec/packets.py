"""MQTT 3.1.1 control packets as immutable value objects.

Constructors do not validate: an auditor must be able to hold the invalid packet it observed. Fields that a
wire packet can contradict (flag bits that disagree with the fields) are kept as ``raw_*`` overrides that are
``None`` whenever the bytes agree with the fields, so ``decode(encode(p)) == p`` holds for every packet.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import ClassVar, Final

from .buffer import BytesLike, to_bytes


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

    # Members are singletons compared by identity: an identity hash keeps set and dict look-ups (several per
    # packet in the judge) in C rather than in Enum's Python-level __hash__.
    __hash__ = object.__hash__

    @classmethod
    def parse(cls, value: Direction | str | None) -> Direction | None:
        if value is None or isinstance(value, Direction):
            return value
        return cls(value.lower())


class Value:
    """Base of the codec's value objects: equality, hashing, ``repr``, pickling and copying by field values.

    Subclasses list their fields in ``FIELDS`` and set them once in ``__init__`` as ``Final`` attributes. When the
    codec is compiled (the default build) those attributes are read-only at run time; in the pure-Python fallback
    the type checker alone enforces it.
    """

    FIELDS: ClassVar[tuple[str, ...]] = ()

    def values(self) -> tuple[object, ...]:
        """The field values, in ``FIELDS`` order."""
        return tuple([getattr(self, name) for name in self.FIELDS])

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self) or not isinstance(other, Value):
            return NotImplemented
        return self.values() == other.values()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.values()))

    def __repr__(self) -> str:
        args = ", ".join([f"{name}={getattr(self, name)!r}" for name in self.FIELDS])
        return f"{type(self).__name__}({args})"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.as_dict()))


def _rebuild(cls: type[Value], fields: dict[str, object]) -> Value:
    return cls(**fields)


class Will(Value):
    """The Will carried by CONNECT: topic, message and how the server must publish it."""

    FIELDS = ("topic", "message", "qos", "retain")

    def __init__(self, *, topic: str, message: BytesLike = b"", qos: int = 0, retain: bool = False) -> None:
        self.topic: Final = topic
        self.message: Final = to_bytes(message, "Will message")
        self.qos: Final = qos
        self.retain: Final = retain


class Connect(Value):
    FIELDS = (
        "protocol_name",
        "protocol_level",
        "clean_session",
        "keep_alive",
        "client_id",
        "will",
        "username",
        "password",
        "raw_connect_flags",
        "raw_flags",
    )

    def __init__(
        self,
        *,
        protocol_name: str = "MQTT",
        protocol_level: int = 4,
        clean_session: bool = True,
        keep_alive: int = 0,
        client_id: str = "",
        will: Will | None = None,
        username: str | None = None,
        password: BytesLike | None = None,
        raw_connect_flags: int | None = None,
        raw_flags: int | None = None,
    ) -> None:
        self.protocol_name: Final = protocol_name
        self.protocol_level: Final = protocol_level
        self.clean_session: Final = clean_session
        self.keep_alive: Final = keep_alive
        self.client_id: Final = client_id
        self.will: Final = will
        self.username: Final = username
        self.password: Final = None if password is None else to_bytes(password, "password")
        #: The Connect Flags byte as observed, when it disagrees with the fields above (reserved bit, Will flags
        #: without a Will, ...); None means "derived from the fields".
        self.raw_connect_flags: Final = raw_connect_flags
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.CONNECT

    @property
    def connect_flags(self) -> int:
        """The Connect Flags byte: the observed one when it was kept, else the one the fields imply."""
        if self.raw_connect_flags is not None:
            return self.raw_connect_flags
        return derive_connect_flags(self.clean_session, self.will, self.username, self.password)


class Connack(Value):
    FIELDS = ("session_present", "return_code", "raw_ack_flags", "raw_flags")

    def __init__(
        self,
        *,
        session_present: bool = False,
        return_code: int = 0,
        raw_ack_flags: int | None = None,
        raw_flags: int | None = None,
    ) -> None:
        self.session_present: Final = session_present
        self.return_code: Final = return_code
        #: The Connect Acknowledge Flags byte as observed, when bits 7-1 are not zero.
        self.raw_ack_flags: Final = raw_ack_flags
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.CONNACK


class Publish(Value):
    FIELDS = ("topic", "payload", "qos", "retain", "dup", "packet_id")

    def __init__(
        self,
        *,
        topic: str,
        payload: BytesLike = b"",
        qos: int = 0,
        retain: bool = False,
        dup: bool = False,
        packet_id: int | None = None,
    ) -> None:
        self.topic: Final = topic
        self.payload: Final = payload if isinstance(payload, bytes) else to_bytes(payload, "payload")
        self.qos: Final = qos
        self.retain: Final = retain
        self.dup: Final = dup
        self.packet_id: Final = packet_id

    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBLISH

    def __reduce__(self) -> tuple[object, ...]:
        # By position: the audit hands millions of PUBLISHes from one stage to the next.
        return (_publish, (self.topic, self.payload, self.qos, self.retain, self.dup, self.packet_id))


def _publish(topic: str, payload: bytes, qos: int, retain: bool, dup: bool, packet_id: int | None) -> Publish:
    return Publish(topic=topic, payload=payload, qos=qos, retain=retain, dup=dup, packet_id=packet_id)


class _Ack(Value):
    """Packets whose only field is the Packet Identifier."""

    FIELDS = ("packet_id", "raw_flags")

    def __init__(self, *, packet_id: int | None, raw_flags: int | None = None) -> None:
        self.packet_id: Final = packet_id
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        raise NotImplementedError


class Puback(_Ack):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBACK


class Pubrec(_Ack):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBREC


class Pubrel(_Ack):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBREL


class Pubcomp(_Ack):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBCOMP


class Unsuback(_Ack):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.UNSUBACK


class Subscription(Value):
    """One Topic Filter / requested QoS pair of a SUBSCRIBE."""

    FIELDS = ("topic_filter", "qos", "raw_options")

    def __init__(self, *, topic_filter: str, qos: int = 0, raw_options: int | None = None) -> None:
        self.topic_filter: Final = topic_filter
        self.qos: Final = qos
        #: The options byte as observed, when its reserved bits 7-2 are not zero.
        self.raw_options: Final = raw_options


class Subscribe(Value):
    FIELDS = ("packet_id", "subscriptions", "raw_flags")

    def __init__(
        self, *, packet_id: int | None, subscriptions: Iterable[Subscription], raw_flags: int | None = None
    ) -> None:
        self.packet_id: Final = packet_id
        self.subscriptions: Final[tuple[Subscription, ...]] = tuple(subscriptions)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBSCRIBE


class Suback(Value):
    FIELDS = ("packet_id", "return_codes", "raw_flags")

    def __init__(self, *, packet_id: int | None, return_codes: Iterable[int], raw_flags: int | None = None) -> None:
        self.packet_id: Final = packet_id
        self.return_codes: Final[tuple[int, ...]] = tuple(return_codes)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBACK


class Unsubscribe(Value):
    FIELDS = ("packet_id", "topic_filters", "raw_flags")

    def __init__(self, *, packet_id: int | None, topic_filters: Iterable[str], raw_flags: int | None = None) -> None:
        self.packet_id: Final = packet_id
        self.topic_filters: Final[tuple[str, ...]] = tuple(topic_filters)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.UNSUBSCRIBE


class _Empty(Value):
    """Packets with no variable header and no payload."""

    FIELDS = ("raw_flags",)

    def __init__(self, *, raw_flags: int | None = None) -> None:
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        raise NotImplementedError


class Pingreq(_Empty):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PINGREQ


class Pingresp(_Empty):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.PINGRESP


class Disconnect(_Empty):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.DISCONNECT


class ReservedPacket(Value):
    """A packet of reserved type 0 or 15: framed by its Remaining Length, its body kept as bytes."""

    FIELDS = ("packet_type_value", "body", "flags")

    def __init__(self, *, packet_type_value: int, body: BytesLike = b"", flags: int = 0) -> None:
        self.packet_type_value: Final = packet_type_value
        self.body: Final = to_bytes(body, "body")
        self.flags: Final = flags

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
