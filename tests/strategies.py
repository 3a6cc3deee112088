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
