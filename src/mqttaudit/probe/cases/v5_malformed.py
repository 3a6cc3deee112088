"""MQTT 5.0 malformed properties (section 2.2.2): the broker must close the connection and act on none of them.

Each shape is generated from the property table (:data:`mqttaudit.codec.properties.PROPERTIES`): a property in a
packet that may not carry it, an identifier the table does not have, a value outside the range the table gives, a
Property Length that runs past the packet, and a client PUBLISH with a Subscription Identifier [MQTT-3.3.4-6] (a
repeat of a property that may not repeat, in every packet a client sends, is :mod:`.v5_duplicates`). A new property
is one row of that table and yields its shapes here. Each shape is its own case, built like the 3.1.1 family of
:mod:`.malformed`: one defective packet, sent as the first packet of a connection (CONNECT defects) or after a CONNECT
the broker accepted, on a connection of its own. The statements a case targets are those the judge decides on it (the
duty to close, [MQTT-4.13.1-1], and the rule the packet breaks once the judge upholds it): the stimulus bytes and the
judge are the single source of both. A DISCONNECT with Reason Code 0x81 or 0x82 before the close is allowed (section
4.13).
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
    Property,
    ProtocolVersion,
    Publish,
    StreamDecoder,
    Subscribe,
    Subscription,
    encode,
)
from ...codec import properties as props
from ...codec import rules as codec_rules
from ...codec.packets import PropertyValue
from ...codec.properties import DataType, PropertyDefinition
from ...codec.remaining_length import MAX_REMAINING_LENGTH, encode_remaining_length
from ...judge import Event, JudgeConfig, Quiet, Sent, judge
from ...judge.rules import ENFORCED_CODEC_RULES_5_0
from ..case import CaseContext, case
from ..connection import client_frames
from .malformed import EXAMPLE_CLIENT_ID, EXAMPLE_PREFIX, Shape, Stimulus, charged, field, provoked

V5: Final = ProtocolVersion.V5


@dataclass(frozen=True)
class PropertyStimulus(Stimulus):
    #: The one rule the stimulus breaks, as the 5.0 decoder names it.
    breaks: str = ""


#: Builds the packet a shape sends from the case's Client Identifier and topic prefix, around ``properties``.
Carrier = Callable[[str, str, tuple[Property, ...]], Packet]


def _publish(qos: int) -> Carrier:
    return lambda _client_id, prefix, properties: Publish(
        topic=f"{prefix}/v5", payload=b"x", qos=qos, packet_id=1 if qos else None, properties=properties
    )


def _subscribe(_client_id: str, prefix: str, properties: tuple[Property, ...]) -> Packet:
    return Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=f"{prefix}/v5"),), properties=properties)


def _connect(client_id: str, _prefix: str, properties: tuple[Property, ...]) -> Packet:
    return Connect(protocol_level=V5.level, client_id=client_id, properties=properties)


#: The packets the shapes put properties in: (id word, name, packet type, builder). PUBLISH QoS 1 gives the
#: range family a second PUBLISH, so a rule only PUBLISH states (Topic Alias 0) has two shapes too.
CARRIERS: Final[tuple[tuple[str, str, PacketType, Carrier], ...]] = (
    ("publish", "PUBLISH", PacketType.PUBLISH, _publish(0)),
    ("publish-qos1", "QoS 1 PUBLISH", PacketType.PUBLISH, _publish(1)),
    ("subscribe", "SUBSCRIBE", PacketType.SUBSCRIBE, _subscribe),
    ("connect", "CONNECT", PacketType.CONNECT, _connect),
)
#: The carriers of the placement and unknown-identifier families (the packets a client sends most).
PLACED_IN: Final = ("publish", "subscribe")
#: Identifiers Table 2.4 does not define (a test holds that).
UNKNOWN_IDENTIFIERS: Final = (0x7F, 0x00)
#: Properties a client may not send in a packet that may otherwise carry them: their own family
#: (``SUBSCRIPTION_ID_SHAPES``), never a shape of another family, so each shape breaks one rule.
SENDER_BOUND: Final = {(props.SUBSCRIPTION_IDENTIFIER, PacketType.PUBLISH)}
#: A client PUBLISH with Subscription Identifiers [MQTT-3.3.4-6]: (id word, the identifiers).
SUBSCRIPTION_ID_SHAPES: Final = (("one", (1,)), ("largest", (268_435_455,)), ("two", (1, 2)))
#: A Property Length past the end of the packet: (id word, the Property Length, the bytes after it).
OVERRUNS: Final = (("by-one", 3, b"\x01\x00"), ("two-byte-length", 200, b"\x01\x00"))

#: The largest value each integer data type holds (section 1.5).
_LARGEST: Final = {
    DataType.BYTE: 0xFF,
    DataType.TWO_BYTE: 0xFFFF,
    DataType.FOUR_BYTE: 0xFFFFFFFF,
    DataType.VARIABLE: MAX_REMAINING_LENGTH,
}
_SAMPLES: Final[dict[DataType, PropertyValue]] = {
    DataType.BYTE: 0,
    DataType.TWO_BYTE: 1,
    DataType.FOUR_BYTE: 1,
    DataType.VARIABLE: 1,
    DataType.UTF8: "x",
    DataType.PAIR: ("k", "v"),
    DataType.BINARY: b"x",
}


def valid_value(definition: PropertyDefinition) -> PropertyValue:
    """A value the property's definition allows, so that where it stands (or that it repeats) is the only defect."""
    sample = _SAMPLES[definition.data_type]
    return max(sample, definition.minimum) if isinstance(sample, int) else sample


def _shape(carrier: Carrier, properties: tuple[Property, ...]) -> Shape:
    """The unvalidated 5.0 encoding of the carrier's packet with the case's identifier, topic and ``properties``."""
    return lambda client_id, prefix: encode(carrier(client_id, prefix, properties), version="5", validate=False)


def _carrier(word: str) -> tuple[str, str, PacketType, Carrier]:
    return next(row for row in CARRIERS if row[0] == word)


def _placement_family() -> tuple[PropertyStimulus, ...]:
    """Every property of the table in each carrier that may not carry it [MQTT-2.2.2-property-packet]."""
    rows = []
    for word in PLACED_IN:
        _word, name, packet_type, build = _carrier(word)
        for definition in props.PROPERTIES:
            if packet_type in definition.packets:
                continue
            prop = Property(definition.identifier, valid_value(definition))
            rows.append(
                PropertyStimulus(
                    f"{word}-with-{definition.keyword.replace('_', '-')}",
                    f"{name} carrying {definition.name} (0x{definition.identifier:02x}), which it may not carry",
                    _shape(build, (prop,)),
                    breaks=codec_rules.PROPERTY_PACKET,
                )
            )
    return tuple(rows)


def _unknown_family() -> tuple[PropertyStimulus, ...]:
    """Identifiers the table does not define; nothing follows them [MQTT-2.2.2-property-identifier]."""
    return tuple(
        PropertyStimulus(
            f"{word}-unknown-property-0x{identifier:02x}",
            f"{_carrier(word)[1]} carrying the undefined property identifier 0x{identifier:02x}",
            _shape(_carrier(word)[3], (Property(identifier, b""),)),
            breaks=codec_rules.PROPERTY_IDENTIFIER,
        )
        for word in PLACED_IN
        for identifier in UNKNOWN_IDENTIFIERS
    )


def _out_of_range(definition: PropertyDefinition) -> tuple[int, ...]:
    """The values just outside the property's range that its data type can hold."""
    values = [definition.minimum - 1] if definition.minimum > 0 else []
    if definition.maximum is not None and definition.maximum < _LARGEST[definition.data_type]:
        values.append(definition.maximum + 1)
    return tuple(values)


def _range_family() -> tuple[PropertyStimulus, ...]:
    """Every bounded property, in each carrier that may hold it, with a value just out of its range (the rule its
    row names: [MQTT-2.2.2-property-value], or [MQTT-3.3.2-8] for Topic Alias 0), where the receiver must close on
    it."""
    rows: list[PropertyStimulus] = []
    for word, name, packet_type, build in CARRIERS:
        for definition in props.PROPERTIES:
            if packet_type not in definition.packets or (definition.identifier, packet_type) in SENDER_BOUND:
                continue
            if definition.value_rule not in ENFORCED_CODEC_RULES_5_0:
                continue  # an undefined value the receiver owes no close for (the Payload Format Indicator)
            rows.extend(
                PropertyStimulus(
                    f"{word}-{definition.keyword.replace('_', '-')}-{value}",
                    f"{name} carrying {definition.name} {value}",
                    _shape(build, (Property(definition.identifier, value),)),
                    as_connect=packet_type is PacketType.CONNECT,
                    breaks=definition.value_rule,
                )
                for value in _out_of_range(definition)
            )
    return tuple(rows)


def _overrun_shape(packet_type: PacketType, length: int, after: bytes) -> Shape:
    """A PUBLISH (Topic Name) or SUBSCRIBE (Packet Identifier) of the case whose Property Length is ``length``
    with only ``after`` following it."""

    def shape(_client_id: str, prefix: str) -> bytes:
        head = field(f"{prefix}/v5".encode()) if packet_type is PacketType.PUBLISH else b"\x00\x01"
        body = head + encode_remaining_length(length) + after
        first = 0x30 if packet_type is PacketType.PUBLISH else 0x82
        return bytes((first,)) + encode_remaining_length(len(body)) + body

    return shape


def _overrun_family() -> tuple[PropertyStimulus, ...]:
    """A Property Length that runs past the packet [MQTT-2.2.2-property-length]."""
    return tuple(
        PropertyStimulus(
            f"{word}-property-length-overrun-{suffix}",
            f"{name} whose Property Length ({length}) runs past the packet ({len(after)} byte(s) follow it)",
            _overrun_shape(packet_type, length, after),
            breaks=codec_rules.PROPERTY_LENGTH,
        )
        for word, name, packet_type in (
            ("publish", "PUBLISH", PacketType.PUBLISH),
            ("subscribe", "SUBSCRIBE", PacketType.SUBSCRIBE),
        )
        for suffix, length, after in OVERRUNS
    )


def _subscription_id_family() -> tuple[PropertyStimulus, ...]:
    """A client PUBLISH with Subscription Identifiers, which only a server may send [MQTT-3.3.4-6]."""
    return tuple(
        PropertyStimulus(
            f"publish-from-client-subscription-identifier-{suffix}",
            f"A client PUBLISH carrying Subscription Identifier {', '.join(map(str, ids))}",
            _shape(_publish(0), tuple(Property(props.SUBSCRIPTION_IDENTIFIER, i) for i in ids)),
            breaks=codec_rules.SUBSCRIPTION_ID_FROM_CLIENT,
        )
        for suffix, ids in SUBSCRIPTION_ID_SHAPES
    )


#: The families, in the order the library lists them: (name, what the family covers, its shapes).
FAMILIES: Final[tuple[tuple[str, str, tuple[PropertyStimulus, ...]], ...]] = (
    ("property-packet", "a property in a packet that may not carry it", _placement_family()),
    ("property-identifier", "an undefined property identifier", _unknown_family()),
    ("property-value", "a property value out of its range", _range_family()),
    ("property-length", "a Property Length that runs past the packet", _overrun_family()),
    ("subscription-identifier", "a client PUBLISH with a Subscription Identifier", _subscription_id_family()),
)

STIMULI: Final[tuple[PropertyStimulus, ...]] = tuple(
    replace(stimulus, family=family) for family, _title, stimuli in FAMILIES for stimulus in stimuli
)


def decoded_rules(stimulus: Stimulus) -> tuple[str, ...]:
    """The rules the 5.0 decoder finds the stimulus breaking, as a client sends it."""
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=V5), stimulus.data)
    return tuple(dict.fromkeys(v.rule for frame in frames for v in frame.violations))


#: How the judge takes a 5.0 case (as :func:`mqttaudit.probe.runner.judge_config` does): 5.0 CONNECTs accepted.
_JUDGE_CONFIG: Final = JudgeConfig(supported_protocol_levels=frozenset({4, 5}), opening_version="5.0")
_LONG_AFTER = 3600.0


def targeted(stimulus: Stimulus) -> tuple[str, ...]:
    """The statements a broker that accepts the stimulus breaks, as the judge decides them: a 5.0 CONNECT it
    answered, the stimulus, then silence far past any grace."""
    events: list[Event] = []
    if not stimulus.as_connect:
        connect, connack = Connect(protocol_level=V5.level, client_id=EXAMPLE_CLIENT_ID), Connack()
        for sender, packet in ((Direction.FROM_CLIENT, connect), (Direction.FROM_SERVER, connack)):
            events.append(Sent(0.0, sender, Frame(0, 0, encode(packet, version=V5), packet)))
    frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT, version=V5), stimulus.data)
    events += [Sent(0.0, Direction.FROM_CLIENT, frame) for frame in frames]
    events.append(Quiet(_LONG_AFTER))
    return charged(judge(events, _JUDGE_CONFIG))


_SHOWN_WITH = (
    f" (shown with Client Identifier {EXAMPLE_CLIENT_ID} and topic prefix <p> = {EXAMPLE_PREFIX}: each run and"
    " case has its own)"
)


def _register(stimulus: PropertyStimulus) -> None:
    async def script(context: CaseContext) -> None:
        if stimulus.as_connect:
            connection = await context.open()
            connection.client_id = context.client_id()
        else:
            connection = await context.connect()
        # built now: the case's own identifier and topics, never another case's or another run's
        await connection.send(stimulus.build(connection.client_id, context.topic()))
        await connection.wait_close()

    where = "as the first packet of a connection" if stimulus.as_connect else "after an accepted 5.0 CONNECT"
    case(
        f"v5/malformed/{stimulus.case_id}",
        targeted(stimulus),
        stimulus.title,
        stimulus=f"{stimulus.title} (breaks {stimulus.breaks}), {where}: {stimulus.data.hex(' ')}{_SHOWN_WITH}",
        expected="close the connection (a DISCONNECT or CONNACK with Reason Code 0x81 or 0x82 may come first); "
        "act on nothing in it",
        family=f"v5/malformed-{stimulus.family}",
        protocol=V5,
        provokes=provoked(stimulus, V5),
    )(script)


for _stimulus in STIMULI:
    _register(_stimulus)
