"""MQTT control packets (3.1, 3.1.1 and 5.0) as immutable value objects.

One class per packet type serves every version. The fields only MQTT 5.0 has (properties, reason codes, the
subscription options No Local, Retain As Published and Retain Handling) hold their empty defaults in 3.1.1
packets. ``properties`` is a tuple of :class:`Property` in wire order (repeats and all, as observed); where 5.0
lets a packet leave the Property Length out (acknowledgements, DISCONNECT, AUTH), None means it was left out.

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
    AUTH = 15  # MQTT 5.0 (an alias: the name of type 15 stays RESERVED_15, as 3.1.1 has it)


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


#: A property's value: an integer (byte, two/four-byte, variable byte integer), a string, binary data, or a
#: User Property's (name, value) pair.
PropertyValue = int | str | bytes | tuple[str, str]


class Property(Value):
    """One MQTT 5.0 property as observed: its identifier (known or not) and its value.

    :mod:`mqttaudit.codec.properties` holds the table of the 27 properties (name, data type, packets); build
    property tuples by name with :func:`mqttaudit.codec.properties.make`.
    """

    FIELDS = ("identifier", "value")

    def __init__(self, identifier: int, value: PropertyValue) -> None:
        self.identifier: Final = identifier
        self.value: Final = value


Properties = tuple[Property, ...]


class Will(Value):
    """The Will carried by CONNECT: topic, message and how the server must publish it."""

    FIELDS = ("topic", "message", "qos", "retain", "properties")

    def __init__(
        self,
        *,
        topic: str,
        message: BytesLike = b"",
        qos: int = 0,
        retain: bool = False,
        properties: Iterable[Property] = (),
    ) -> None:
        self.topic: Final = topic
        self.message: Final = to_bytes(message, "Will message")
        self.qos: Final = qos
        self.retain: Final = retain
        #: Will Properties (MQTT 5.0).
        self.properties: Final[Properties] = tuple(properties)


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
        "properties",
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
        properties: Iterable[Property] = (),
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
        self.properties: Final[Properties] = tuple(properties)
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
    FIELDS = ("session_present", "return_code", "properties", "raw_ack_flags", "raw_flags")

    def __init__(
        self,
        *,
        session_present: bool = False,
        return_code: int = 0,
        properties: Iterable[Property] = (),
        raw_ack_flags: int | None = None,
        raw_flags: int | None = None,
    ) -> None:
        self.session_present: Final = session_present
        #: The Connect Return Code (3.1.1), or the Connect Reason Code (5.0).
        self.return_code: Final = return_code
        self.properties: Final[Properties] = tuple(properties)
        #: The Connect Acknowledge Flags byte as observed, when bits 7-1 are not zero.
        self.raw_ack_flags: Final = raw_ack_flags
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.CONNACK


class Publish(Value):
    FIELDS = ("topic", "payload", "qos", "retain", "dup", "packet_id", "properties")

    def __init__(
        self,
        *,
        topic: str,
        payload: BytesLike = b"",
        qos: int = 0,
        retain: bool = False,
        dup: bool = False,
        packet_id: int | None = None,
        properties: Iterable[Property] = (),
    ) -> None:
        self.topic: Final = topic
        self.payload: Final = payload if isinstance(payload, bytes) else to_bytes(payload, "payload")
        self.qos: Final = qos
        self.retain: Final = retain
        self.dup: Final = dup
        self.packet_id: Final = packet_id
        # A tuple already (the readers build one): the hot path makes no copy.
        self.properties: Final[Properties] = properties if isinstance(properties, tuple) else tuple(properties)

    @property
    def packet_type(self) -> PacketType:
        return PacketType.PUBLISH

    def __reduce__(self) -> tuple[object, ...]:
        # By position: the audit hands millions of PUBLISHes from one stage to the next.
        fields = (self.topic, self.payload, self.qos, self.retain, self.dup, self.packet_id)
        return (_publish, (*fields, self.properties) if self.properties else fields)


def _publish(
    topic: str, payload: bytes, qos: int, retain: bool, dup: bool, packet_id: int | None, properties: Properties = ()
) -> Publish:
    return Publish(
        topic=topic, payload=payload, qos=qos, retain=retain, dup=dup, packet_id=packet_id, properties=properties
    )


def _optional_properties(properties: Iterable[Property] | None) -> Properties | None:
    return None if properties is None else tuple(properties)


class _Ack(Value):
    """PUBACK, PUBREC, PUBREL and PUBCOMP: a Packet Identifier; in MQTT 5.0 a Reason Code and properties may
    follow (None: left out of the bytes, which means Success and no properties)."""

    FIELDS = ("packet_id", "reason_code", "properties", "raw_flags")

    def __init__(
        self,
        *,
        packet_id: int | None,
        reason_code: int | None = None,
        properties: Iterable[Property] | None = None,
        raw_flags: int | None = None,
    ) -> None:
        self.packet_id: Final = packet_id
        self.reason_code: Final = reason_code
        self.properties: Final = _optional_properties(properties)
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


class Unsuback(Value):
    """UNSUBACK: the Packet Identifier; in MQTT 5.0 properties and one Reason Code per Topic Filter follow."""

    FIELDS = ("packet_id", "reason_codes", "properties", "raw_flags")

    def __init__(
        self,
        *,
        packet_id: int | None,
        reason_codes: Iterable[int] = (),
        properties: Iterable[Property] = (),
        raw_flags: int | None = None,
    ) -> None:
        self.packet_id: Final = packet_id
        self.reason_codes: Final[tuple[int, ...]] = tuple(reason_codes)
        self.properties: Final[Properties] = tuple(properties)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.UNSUBACK


class Subscription(Value):
    """One Topic Filter of a SUBSCRIBE with its requested QoS and, in MQTT 5.0, its Subscription Options."""

    FIELDS = ("topic_filter", "qos", "no_local", "retain_as_published", "retain_handling", "raw_options")

    def __init__(
        self,
        *,
        topic_filter: str,
        qos: int = 0,
        no_local: bool = False,
        retain_as_published: bool = False,
        retain_handling: int = 0,
        raw_options: int | None = None,
    ) -> None:
        self.topic_filter: Final = topic_filter
        self.qos: Final = qos
        self.no_local: Final = no_local
        self.retain_as_published: Final = retain_as_published
        self.retain_handling: Final = retain_handling
        #: The options byte as observed, when it sets bits the version reserves (7-2 in 3.1.1, 7-6 in 5.0).
        self.raw_options: Final = raw_options

    @property
    def options(self) -> int:
        """The Subscription Options byte: the observed one when it was kept, else the one the fields imply."""
        if self.raw_options is not None:
            return self.raw_options
        return (
            (self.qos & 0x03)
            | (0x04 if self.no_local else 0)
            | (0x08 if self.retain_as_published else 0)
            | ((self.retain_handling & 0x03) << 4)
        )


class Subscribe(Value):
    FIELDS = ("packet_id", "subscriptions", "properties", "raw_flags")

    def __init__(
        self,
        *,
        packet_id: int | None,
        subscriptions: Iterable[Subscription],
        properties: Iterable[Property] = (),
        raw_flags: int | None = None,
    ) -> None:
        self.packet_id: Final = packet_id
        self.subscriptions: Final[tuple[Subscription, ...]] = tuple(subscriptions)
        self.properties: Final[Properties] = tuple(properties)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBSCRIBE


class Suback(Value):
    FIELDS = ("packet_id", "return_codes", "properties", "raw_flags")

    def __init__(
        self,
        *,
        packet_id: int | None,
        return_codes: Iterable[int],
        properties: Iterable[Property] = (),
        raw_flags: int | None = None,
    ) -> None:
        self.packet_id: Final = packet_id
        #: The Return Codes (3.1.1), or the Reason Codes (5.0), one per Topic Filter.
        self.return_codes: Final[tuple[int, ...]] = tuple(return_codes)
        self.properties: Final[Properties] = tuple(properties)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        return PacketType.SUBACK


class Unsubscribe(Value):
    FIELDS = ("packet_id", "topic_filters", "properties", "raw_flags")

    def __init__(
        self,
        *,
        packet_id: int | None,
        topic_filters: Iterable[str],
        properties: Iterable[Property] = (),
        raw_flags: int | None = None,
    ) -> None:
        self.packet_id: Final = packet_id
        self.topic_filters: Final[tuple[str, ...]] = tuple(topic_filters)
        self.properties: Final[Properties] = tuple(properties)
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


class _Reasoned(Value):
    """DISCONNECT and AUTH: empty in 3.1.1; in MQTT 5.0 a Reason Code and properties may follow (None: left out
    of the bytes, which means Reason Code 0x00 and no properties)."""

    FIELDS = ("reason_code", "properties", "raw_flags")

    def __init__(
        self,
        *,
        reason_code: int | None = None,
        properties: Iterable[Property] | None = None,
        raw_flags: int | None = None,
    ) -> None:
        self.reason_code: Final = reason_code
        self.properties: Final = _optional_properties(properties)
        self.raw_flags: Final = raw_flags

    @property
    def packet_type(self) -> PacketType:
        raise NotImplementedError


class Disconnect(_Reasoned):
    @property
    def packet_type(self) -> PacketType:
        return PacketType.DISCONNECT


class Auth(_Reasoned):
    """AUTH (MQTT 5.0 only; type 15 is reserved in 3.1.1)."""

    @property
    def packet_type(self) -> PacketType:
        return PacketType.AUTH


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
    | Auth
    | ReservedPacket
)

#: Acknowledgements of PUBLISH and PUBREL: a Packet Identifier, in 5.0 a Reason Code and properties.
AckPacket = Puback | Pubrec | Pubrel | Pubcomp
#: Packets with no variable header and no payload.
EmptyPacket = Pingreq | Pingresp
