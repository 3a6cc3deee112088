"""Sans-I/O MQTT codec (3.1.1 and 5.0; 3.1 recognised): packets, strict decoding that names the rule each defect
breaks, and encoding that refuses what decoding would flag.

    >>> from mqttaudit import codec
    >>> codec.encode(codec.Subscribe(packet_id=4, subscriptions=(codec.Subscription(topic_filter="a/b"),)))
    b'\\x82\\x08\\x00\\x04\\x00\\x03a/b\\x00'
    >>> [v.rule for v in codec.decode(bytes.fromhex("82050001000000"), "client").violations]
    ['MQTT-4.7.3-1']
"""

from . import packets as _packets
from . import properties, reason_codes, rules
from .buffer import Buffer, BytesLike
from .decoder import Decoded, decode
from .encoder import encode
from .errors import BufferUnderrun, CodecError, EncodeError, ProtocolViolation, Violation
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
    Property,
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
)
from .remaining_length import MAX_REMAINING_LENGTH, encode_remaining_length, read_remaining_length
from .stream import DEFAULT_MAX_PACKET_SIZE, MIN_MAX_PACKET_SIZE, Frame, StreamDecoder
from .version import ProtocolVersion

#: Whether the compiled (mypyc) build of the codec is running; the pure-Python fallback decodes the same, slower.
COMPILED: bool = not (_packets.__file__ or "").endswith(".py")

__all__ = [
    "COMPILED",
    "DEFAULT_MAX_PACKET_SIZE",
    "MAX_REMAINING_LENGTH",
    "MIN_MAX_PACKET_SIZE",
    "Auth",
    "Buffer",
    "BufferUnderrun",
    "BytesLike",
    "CodecError",
    "Connack",
    "Connect",
    "Decoded",
    "Direction",
    "Disconnect",
    "EncodeError",
    "Frame",
    "Packet",
    "PacketType",
    "Pingreq",
    "Pingresp",
    "Property",
    "ProtocolVersion",
    "ProtocolViolation",
    "Puback",
    "Pubcomp",
    "Publish",
    "Pubrec",
    "Pubrel",
    "ReservedPacket",
    "StreamDecoder",
    "Suback",
    "Subscribe",
    "Subscription",
    "Unsuback",
    "Unsubscribe",
    "Violation",
    "Will",
    "decode",
    "encode",
    "encode_remaining_length",
    "properties",
    "read_remaining_length",
    "reason_codes",
    "rules",
]
