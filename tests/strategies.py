"""Hypothesis strategies for MQTT 3.1.1 packets: VALID ones (no violation, not even a warning) and ARBITRARY
ones (any field value the wire can hold, plus a few it cannot, to exercise the encoder's refusals).

``SENDERS`` is Table 2.1 ("Direction of flow") written out again here, independently of the codec's own table.
"""

from __future__ import annotations

from typing import TypeVar

from hypothesis import strategies as st

from mqttaudit import codec

T = TypeVar("T")

CLIENT = "client"
SERVER = "server"
BOTH = (CLIENT, SERVER)

#: Who may send each packet class (Table 2.1). Reserved packets have no sender at all.
SENDERS: dict[type, tuple[str, ...]] = {
    codec.Connect: (CLIENT,),
    codec.Connack: (SERVER,),
    codec.Publish: BOTH,
    codec.Puback: BOTH,
    codec.Pubrec: BOTH,
    codec.Pubrel: BOTH,
    codec.Pubcomp: BOTH,
    codec.Subscribe: (CLIENT,),
    codec.Suback: (SERVER,),
    codec.Unsubscribe: (CLIENT,),
    codec.Unsuback: (SERVER,),
    codec.Pingreq: (CLIENT,),
    codec.Pingresp: (SERVER,),
    codec.Disconnect: (CLIENT,),
}

DIRECTIONS = (CLIENT, SERVER, None)


def mostly(common: st.SearchStrategy[T], rare: st.SearchStrategy[T], one_in: int = 12) -> st.SearchStrategy[T]:
    """``common``, except about once in ``one_in`` draws ``rare`` (e.g. a value the wire cannot hold)."""
    return st.integers(0, one_in - 1).flatmap(lambda n: rare if n == 0 else common)


# ---------------------------------------------------------------------------------------------------------------
# Valid values
# ---------------------------------------------------------------------------------------------------------------

# Well-formed UTF-8 without U+0000 (a MUST), the control characters and the non-characters (SHOULD NOT, 1.5.3):
# Cc holds U+0000..U+001F and U+007F..U+009F, Cs the surrogates, and every non-character is unassigned (Cn).
_CLEAN = st.characters(exclude_categories=("Cc", "Cs", "Cn"))
_LEVEL_CHAR = st.characters(exclude_categories=("Cc", "Cs", "Cn"), exclude_characters="/+#")

valid_text = st.text(_CLEAN, max_size=10)
_level = st.text(_LEVEL_CHAR, max_size=6)

#: Topic Names: one or more levels of text, no wildcard, at least one character [MQTT-4.7.3-1].
valid_topic_names = st.lists(_level, min_size=1, max_size=4).map(lambda levels: "/".join(levels) or "/")


@st.composite
def valid_topic_filters(draw: st.DrawFn) -> str:
    """Levels of text or a whole-level '+', optionally ending in a whole-level '#' [MQTT-4.7.1-2, -3]."""
    levels = draw(st.lists(st.one_of(_level, st.just("+")), max_size=4))
    if draw(st.booleans()):
        levels.append("#")
    topic_filter = "/".join(levels)
    return topic_filter or draw(st.sampled_from(["#", "+", "a"]))


packet_ids = st.integers(1, 0xFFFF)
payloads = st.binary(max_size=40)


@st.composite
def valid_connects(draw: st.DrawFn) -> codec.Connect:
    clean_session = draw(st.booleans())
    # A zero-length Client Identifier needs CleanSession 1 [MQTT-3.1.3-7].
    client_id = draw(valid_text if clean_session else valid_text.filter(bool))
    will = draw(
        st.none()
        | st.builds(codec.Will, topic=valid_topic_names, message=payloads, qos=st.integers(0, 2), retain=st.booleans())
    )
    username = draw(st.none() | valid_text)
    # A password needs a user name [MQTT-3.1.2-22].
    password = None if username is None else draw(st.none() | st.binary(max_size=12))
    return codec.Connect(
        clean_session=clean_session,
        keep_alive=draw(st.integers(0, 0xFFFF)),
        client_id=client_id,
        will=will,
        username=username,
        password=password,
    )


@st.composite
def valid_connacks(draw: st.DrawFn) -> codec.Connack:
    return_code = draw(st.integers(0, 5))
    # Session Present is 0 with any refusal [MQTT-3.2.2-4].
    session_present = draw(st.booleans()) if return_code == 0 else False
    return codec.Connack(session_present=session_present, return_code=return_code)


@st.composite
def valid_publishes(draw: st.DrawFn) -> codec.Publish:
    qos = draw(st.integers(0, 2))
    return codec.Publish(
        topic=draw(valid_topic_names),
        payload=draw(payloads),
        qos=qos,
        retain=draw(st.booleans()),
        dup=False if qos == 0 else draw(st.booleans()),
        packet_id=None if qos == 0 else draw(packet_ids),
    )


valid_subscriptions = st.builds(codec.Subscription, topic_filter=valid_topic_filters(), qos=st.integers(0, 2))

valid_packets: st.SearchStrategy[codec.Packet] = st.one_of(
    valid_connects(),
    valid_connacks(),
    valid_publishes(),
    *(st.builds(cls, packet_id=packet_ids) for cls in (codec.Puback, codec.Pubrec, codec.Pubrel, codec.Pubcomp)),
    st.builds(
        codec.Subscribe,
        packet_id=packet_ids,
        subscriptions=st.lists(valid_subscriptions, min_size=1, max_size=4).map(tuple),
    ),
    st.builds(
        codec.Suback,
        packet_id=packet_ids,
        return_codes=st.lists(st.sampled_from([0x00, 0x01, 0x02, 0x80]), min_size=1, max_size=4).map(tuple),
    ),
    st.builds(
        codec.Unsubscribe,
        packet_id=packet_ids,
        topic_filters=st.lists(valid_topic_filters(), min_size=1, max_size=4).map(tuple),
    ),
    st.builds(codec.Unsuback, packet_id=packet_ids),
    st.builds(codec.Pingreq),
    st.builds(codec.Pingresp),
    st.builds(codec.Disconnect),
)


@st.composite
def valid_packets_with_sender(draw: st.DrawFn) -> tuple[codec.Packet, str]:
    packet = draw(valid_packets)
    return packet, draw(st.sampled_from(SENDERS[type(packet)]))


# ---------------------------------------------------------------------------------------------------------------
# Arbitrary values: invalid but (mostly) representable
# ---------------------------------------------------------------------------------------------------------------

#: Characters that break rules or test the edges of the string encoding: U+0000, controls, non-characters,
#: wildcards, lone surrogates (ill-formed; U+DC80..U+DCFF stand for raw bytes), and a pair of escaped bytes
#: that together spell a well-formed 'é' (the encoder cannot write them back as the same text).
_SPECIAL = [
    "\x00",
    "\x01",
    "\x1f",
    "\x7f",
    "\x85",
    "\ufdd0",
    "\uffff",
    "\U0010fffe",
    "+",
    "#",
    "/",
    "\udcff",
    "\udc80",
    "\ud800",
    "\udfff",
    "\udcc3\udca9",
    "é",
    "\U0001f600",
]
_any_char = st.one_of(st.sampled_from(_SPECIAL), st.characters(), st.sampled_from("ab/"))
_short_any_text = st.lists(_any_char, max_size=8).map("".join)
#: Over 65,535 bytes of UTF-8: a two-byte length prefix cannot describe it.
_too_long_text = st.sampled_from(["a" * 0x10000, "é" * 0x8000])
any_text = mostly(_short_any_text, _too_long_text, one_in=40)


def _u(bits: int) -> st.SearchStrategy[int]:
    """Integers that fit in ``bits`` bits, and rarely ones that do not."""
    top = (1 << bits) - 1
    return mostly(st.integers(0, top), st.sampled_from([-1, top + 1]))


any_packet_id = st.none() | st.just(0) | mostly(packet_ids, st.sampled_from([-1, 0x10000]))
any_qos = mostly(st.integers(0, 3), st.sampled_from([-1, 4]))
any_raw_flags = st.none() | mostly(st.integers(0, 15), st.sampled_from([-1, 16, 0x12]))
any_raw_byte = st.none() | _u(8)


@st.composite
def any_connects(draw: st.DrawFn) -> codec.Connect:
    will = draw(
        st.none()
        | st.builds(
            codec.Will,
            topic=st.one_of(valid_topic_names, any_text),
            message=payloads,
            qos=any_qos,
            retain=st.booleans(),
        )
    )
    return codec.Connect(
        protocol_name=draw(st.sampled_from(["MQTT", "MQIsdp", ""]) | any_text),
        protocol_level=draw(st.sampled_from([4, 3, 5]) | _u(8)),
        clean_session=draw(st.booleans()),
        keep_alive=draw(_u(16)),
        client_id=draw(st.one_of(valid_text, any_text)),
        will=will,
        username=draw(st.none() | any_text),
        password=draw(st.none() | st.binary(max_size=8)),
        raw_connect_flags=draw(any_raw_byte),
        raw_flags=draw(any_raw_flags),
    )


any_subscriptions = st.builds(
    codec.Subscription,
    topic_filter=st.one_of(valid_topic_filters(), any_text),
    qos=any_qos,
    raw_options=any_raw_byte,
)

any_packets: st.SearchStrategy[codec.Packet] = st.one_of(
    any_connects(),
    st.builds(
        codec.Connack,
        session_present=st.booleans(),
        return_code=mostly(st.integers(0, 7), _u(8)),
        raw_ack_flags=any_raw_byte,
        raw_flags=any_raw_flags,
    ),
    st.builds(
        codec.Publish,
        topic=st.one_of(valid_topic_names, any_text),
        payload=payloads,
        qos=any_qos,
        retain=st.booleans(),
        dup=st.booleans(),
        packet_id=any_packet_id,
    ),
    *(
        st.builds(cls, packet_id=any_packet_id, raw_flags=any_raw_flags)
        for cls in (codec.Puback, codec.Pubrec, codec.Pubrel, codec.Pubcomp, codec.Unsuback)
    ),
    st.builds(
        codec.Subscribe,
        packet_id=any_packet_id,
        subscriptions=st.lists(any_subscriptions, max_size=3).map(tuple),
        raw_flags=any_raw_flags,
    ),
    st.builds(
        codec.Suback,
        packet_id=any_packet_id,
        return_codes=st.lists(st.sampled_from([0, 1, 2, 0x80]) | _u(8), max_size=4).map(tuple),
        raw_flags=any_raw_flags,
    ),
    st.builds(
        codec.Unsubscribe,
        packet_id=any_packet_id,
        topic_filters=st.lists(st.one_of(valid_topic_filters(), any_text), max_size=3).map(tuple),
        raw_flags=any_raw_flags,
    ),
    *(st.builds(cls, raw_flags=any_raw_flags) for cls in (codec.Pingreq, codec.Pingresp, codec.Disconnect)),
    st.builds(
        codec.ReservedPacket,
        packet_type_value=st.sampled_from([0, 15]),
        body=st.binary(max_size=8),
        flags=st.integers(0, 15),
    ),
    valid_packets,
)


# ---------------------------------------------------------------------------------------------------------------
# MQTT 5.0: valid packets with property sets drawn from the properties table, and arbitrary ones
# ---------------------------------------------------------------------------------------------------------------

#: Properties a side may not send where the table otherwise places them, written out again here:
#: a client's Subscription Identifier in PUBLISH [MQTT-3.3.4-6], a server's Session Expiry Interval in
#: DISCONNECT [MQTT-3.14.2-2].
FORBIDDEN_SENDER_5: dict[tuple[int, int], str] = {(0x0B, 3): CLIENT, (0x11, 14): SERVER}

#: Who may send each packet class in MQTT 5.0 (Table 2.1): the server may send DISCONNECT, both sides AUTH.
SENDERS_5: dict[type, tuple[str, ...]] = {**SENDERS, codec.Disconnect: BOTH, codec.Auth: BOTH}

_WIDEST = {"Byte": 0xFF, "Two Byte Integer": 0xFFFF, "Four Byte Integer": 0xFFFFFFFF}
_VBI_MAX = 268_435_455


def valid_property_value(
    definition: codec.properties.PropertyDefinition,
) -> st.SearchStrategy[codec.packets.PropertyValue]:
    """A value the property's definition allows: its range, a Topic Name for Response Topic, any UTF-8 text or
    bytes for the others."""
    kind = definition.data_type.value
    if kind in _WIDEST or kind == "Variable Byte Integer":
        top = definition.maximum if definition.maximum is not None else _WIDEST.get(kind, _VBI_MAX)
        return st.integers(definition.minimum, top)
    if kind == "UTF-8 String Pair":
        return st.tuples(valid_text, valid_text)
    if kind == "Binary Data":
        return st.binary(max_size=12)
    if definition.identifier == codec.properties.RESPONSE_TOPIC:
        return valid_topic_names
    return valid_text


def _may_send(definition: codec.properties.PropertyDefinition, place: int, sender: str | None) -> bool:
    """Whether ``sender`` may send the property at ``place``; an unknown sender (None) might be the side that may
    not."""
    forbidden = FORBIDDEN_SENDER_5.get((definition.identifier, place))
    return forbidden is None or (sender is not None and sender != forbidden)


@st.composite
def valid_properties(draw: st.DrawFn, place: int, sender: str | None) -> tuple[codec.Property, ...]:
    """0-5 properties that may appear at ``place`` (a packet type or ``properties.WILL``) sent by ``sender``:
    repeats only where the table allows them, Authentication Data only beside an Authentication Method."""
    allowed = [d for d in codec.properties.PROPERTIES if place in d.packets and _may_send(d, place, sender)]
    chosen: list[codec.Property] = []
    seen: set[int] = set()
    for definition in draw(st.lists(st.sampled_from(allowed), max_size=5)):
        if definition.identifier in seen and place not in definition.repeatable:
            continue
        seen.add(definition.identifier)
        chosen.append(codec.Property(definition.identifier, draw(valid_property_value(definition))))
    method, data = codec.properties.AUTHENTICATION_METHOD, codec.properties.AUTHENTICATION_DATA
    if data in seen and method not in seen:
        chosen.insert(draw(st.integers(0, len(chosen))), codec.Property(method, draw(valid_text)))
    return tuple(chosen)


def _reason_codes_5(packet_type: int, sender: str | None = None) -> list[int]:
    allowed = codec.reason_codes.ALLOWED[packet_type]
    if packet_type == codec.PacketType.DISCONNECT:
        by_sender = {
            code.value: {"client" if d is codec.Direction.FROM_CLIENT else "server" for d in code.disconnect_senders}
            for code in codec.reason_codes.REASON_CODES
        }
        allowed = frozenset(c for c in allowed if (sender is None and len(by_sender[c]) == 2) or sender in by_sender[c])
    return sorted(allowed)


@st.composite
def valid_connects_5(draw: st.DrawFn) -> codec.Connect:
    will = None
    if draw(st.booleans()):
        will = codec.Will(
            topic=draw(valid_topic_names),
            message=draw(payloads),
            qos=draw(st.integers(0, 2)),
            retain=draw(st.booleans()),
            properties=draw(valid_properties(codec.properties.WILL, CLIENT)),
        )
    # 5.0 allows an empty Client Identifier whatever Clean Start says, and a Password without a User Name.
    return codec.Connect(
        protocol_level=5,
        clean_session=draw(st.booleans()),
        keep_alive=draw(st.integers(0, 0xFFFF)),
        client_id=draw(valid_text),
        will=will,
        username=draw(st.none() | valid_text),
        password=draw(st.none() | st.binary(max_size=12)),
        properties=draw(valid_properties(codec.PacketType.CONNECT, CLIENT)),
    )


@st.composite
def valid_publishes_5(draw: st.DrawFn, sender: str | None) -> codec.Publish:
    qos = draw(st.integers(0, 2))
    properties = draw(valid_properties(codec.PacketType.PUBLISH, sender))
    topic = draw(valid_topic_names)
    if draw(st.integers(0, 4)) == 0:  # an empty Topic Name needs a Topic Alias (3.3.2.3.4)
        topic = ""
        if codec.properties.TOPIC_ALIAS not in {p.identifier for p in properties}:
            alias = codec.Property(codec.properties.TOPIC_ALIAS, draw(st.integers(1, 0xFFFF)))
            properties = (*properties, alias)
    return codec.Publish(
        topic=topic,
        payload=draw(payloads),
        qos=qos,
        retain=draw(st.booleans()),
        dup=False if qos == 0 else draw(st.booleans()),
        packet_id=None if qos == 0 else draw(packet_ids),
        properties=properties,
    )


@st.composite
def _reason_and_properties_5(
    draw: st.DrawFn, packet_type: int, sender: str | None
) -> tuple[int | None, tuple[codec.Property, ...] | None]:
    """The optional tail of an acknowledgement, DISCONNECT or AUTH: no Reason Code (and then no properties), a
    Reason Code alone, or both."""
    if draw(st.booleans()):
        return None, None
    code = draw(st.sampled_from(_reason_codes_5(packet_type, sender)))
    return code, draw(st.none() | valid_properties(packet_type, sender))


@st.composite
def valid_subscriptions_5(draw: st.DrawFn) -> codec.Subscription:
    shared = draw(st.booleans())
    topic_filter = draw(valid_topic_filters())
    if shared:  # $share/{ShareName}/{filter}: a ShareName of one or more characters but '/', '+', '#' (4.8.2)
        topic_filter = f"$share/{draw(_level.filter(bool))}/{topic_filter}"
    return codec.Subscription(
        topic_filter=topic_filter,
        qos=draw(st.integers(0, 2)),
        no_local=False if shared else draw(st.booleans()),  # not on a Shared Subscription [MQTT-3.8.3-4]
        retain_as_published=draw(st.booleans()),
        retain_handling=draw(st.integers(0, 2)),
    )


@st.composite
def valid_packets_5_with_sender(
    draw: st.DrawFn, of: type | None = None, by: str | None = None
) -> tuple[codec.Packet, str]:
    """A valid MQTT 5.0 packet of any of the 15 types (or of class ``of``) and a side that may send it (``by``)."""
    cls = of or draw(st.sampled_from([cls for cls, senders in SENDERS_5.items() if by is None or by in senders]))
    sender = by or draw(st.sampled_from(SENDERS_5[cls]))
    packet_type = int(cls(**_SKELETON.get(cls, {})).packet_type)
    packet: codec.Packet
    if cls is codec.Connect:
        packet = draw(valid_connects_5())
    elif cls is codec.Connack:
        code = draw(st.sampled_from(_reason_codes_5(packet_type)))
        packet = codec.Connack(
            session_present=draw(st.booleans()) if code == 0 else False,  # [MQTT-3.2.2-6]
            return_code=code,
            properties=draw(valid_properties(packet_type, sender)),
        )
    elif cls is codec.Publish:
        packet = draw(valid_publishes_5(sender))
    elif cls in (codec.Puback, codec.Pubrec, codec.Pubrel, codec.Pubcomp):
        code, properties = draw(_reason_and_properties_5(packet_type, sender))
        packet = cls(packet_id=draw(packet_ids), reason_code=code, properties=properties)
    elif cls in (codec.Disconnect, codec.Auth):
        code, properties = draw(_reason_and_properties_5(packet_type, sender))
        packet = cls(reason_code=code, properties=properties)
    elif cls is codec.Subscribe:
        packet = codec.Subscribe(
            packet_id=draw(packet_ids),
            subscriptions=draw(st.lists(valid_subscriptions_5(), min_size=1, max_size=3)),
            properties=draw(valid_properties(packet_type, sender)),
        )
    elif cls in (codec.Suback, codec.Unsuback):
        codes = draw(st.lists(st.sampled_from(_reason_codes_5(packet_type)), min_size=1, max_size=4))
        properties = draw(valid_properties(packet_type, sender))
        if cls is codec.Suback:
            packet = codec.Suback(packet_id=draw(packet_ids), return_codes=codes, properties=properties)
        else:
            packet = codec.Unsuback(packet_id=draw(packet_ids), reason_codes=codes, properties=properties)
    elif cls is codec.Unsubscribe:
        packet = codec.Unsubscribe(
            packet_id=draw(packet_ids),
            topic_filters=draw(st.lists(valid_topic_filters(), min_size=1, max_size=3)),
            properties=draw(valid_properties(packet_type, sender)),
        )
    else:
        packet = cls()
    return packet, sender


#: The fewest arguments each class needs, to ask it its packet type.
_SKELETON: dict[type, dict[str, object]] = {
    codec.Publish: {"topic": ""},
    codec.Puback: {"packet_id": 1},
    codec.Pubrec: {"packet_id": 1},
    codec.Pubrel: {"packet_id": 1},
    codec.Pubcomp: {"packet_id": 1},
    codec.Subscribe: {"packet_id": 1, "subscriptions": ()},
    codec.Suback: {"packet_id": 1, "return_codes": ()},
    codec.Unsubscribe: {"packet_id": 1, "topic_filters": ()},
    codec.Unsuback: {"packet_id": 1},
}

valid_packets_5: st.SearchStrategy[codec.Packet] = valid_packets_5_with_sender().map(lambda pair: pair[0])

#: Identifiers no property has (0x00, 0x04, 0x2B, 0x7F), and one written in two Variable Byte Integer bytes.
UNKNOWN_PROPERTY_IDS = (0x00, 0x04, 0x2B, 0x7F, 0x80)


def _any_property_value(
    definition: codec.properties.PropertyDefinition,
) -> st.SearchStrategy[codec.packets.PropertyValue]:
    """Mostly a value of the right type, in or out of the definition's range; rarely one the type cannot hold."""
    kind = definition.data_type.value
    if kind in _WIDEST or kind == "Variable Byte Integer":
        top = _WIDEST.get(kind, _VBI_MAX)
        edges = st.sampled_from(sorted({0, 1, 2, 3, definition.minimum, top}))
        return mostly(st.one_of(edges, st.integers(0, top)), st.sampled_from([-1, top + 1, "text"]))
    if kind == "UTF-8 String Pair":
        return st.tuples(_short_any_text, _short_any_text)
    if kind == "Binary Data":
        return mostly(st.binary(max_size=8), st.just(bytes(0x10000)))
    return mostly(st.one_of(valid_topic_names, _short_any_text), st.sampled_from([b"bytes", "a" * 0x10000]))


@st.composite
def any_properties(draw: st.DrawFn) -> tuple[codec.Property, ...]:
    """0-4 properties of any identifier, anywhere: misplaced, repeated, out of range, unknown."""
    out: list[codec.Property] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 9)) == 0:
            identifier = draw(st.sampled_from(UNKNOWN_PROPERTY_IDS))
            out.append(codec.Property(identifier, draw(st.binary(max_size=4))))
        else:
            definition = draw(st.sampled_from(codec.properties.PROPERTIES))
            out.append(codec.Property(definition.identifier, draw(_any_property_value(definition))))
    return tuple(out)


_any_code = st.sampled_from([0x00, 0x04, 0x10, 0x18, 0x80, 0x8B, 0x92, 0x9E]) | _u(8)
any_reason_code = st.none() | _any_code


@st.composite
def any_packets_5(draw: st.DrawFn) -> codec.Packet:
    """An arbitrary packet with MQTT 5.0 fields: properties, Reason Codes and Subscription Options of any value."""
    base = draw(st.one_of(any_packets, valid_packets_5))
    if isinstance(base, codec.ReservedPacket) or draw(st.integers(0, 3)) == 0:
        return base
    fields = base.as_dict()
    if "properties" in fields:
        optional = fields["properties"] is None or isinstance(base, codec.Puback | codec.Disconnect | codec.Auth)
        fields["properties"] = draw(st.none() | any_properties()) if optional else draw(any_properties())
    if isinstance(base, codec.Connect):
        fields["protocol_level"] = draw(st.sampled_from([5, 5, 5, 4]) | _u(8))
        if base.will is not None:
            will = base.will.as_dict()
            will["properties"] = draw(any_properties())
            fields["will"] = codec.Will(**will)  # type: ignore[arg-type]
    if "reason_code" in fields:
        fields["reason_code"] = draw(any_reason_code)
    if isinstance(base, codec.Unsuback):
        fields["reason_codes"] = draw(st.lists(_any_code, max_size=3))
    if isinstance(base, codec.Subscribe):
        fields["subscriptions"] = tuple(
            codec.Subscription(
                topic_filter=draw(st.sampled_from(["$share/g/a", "$share//a", "$share/g", "$share/g+/a"]))
                if draw(st.integers(0, 4)) == 0
                else sub.topic_filter,
                qos=sub.qos,
                no_local=draw(st.booleans()),
                retain_as_published=draw(st.booleans()),
                retain_handling=draw(mostly(st.integers(0, 3), st.just(4))),
                raw_options=draw(st.none() | st.sampled_from([0x40, 0x80, 0xC3]))
                if sub.raw_options is None
                else sub.raw_options,
            )
            for sub in base.subscriptions
        )
    return type(base)(**fields)
