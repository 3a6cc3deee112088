"""Properties of the MQTT 5.0 codec, checked with hypothesis (the 5.0 twin of ``test_codec_properties.py``).

decode(encode(p)) == [p] without a finding for every valid 5.0 packet of the 15 types, its properties drawn from
the properties table (placement, repeats, value ranges, who may send them); ``encode`` refuses exactly the packets
whose 5.0 bytes decode with a MUST-level violation; the frames of a 5.0 stream do not depend on how it is split;
and a decoder that learns the version from a 5.0 CONNECT, or follows the decoder of the other direction, reads
what follows exactly as a decoder told ``version="5"``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec import properties as props

from .strategies import (
    CLIENT,
    DIRECTIONS,
    SENDERS_5,
    SERVER,
    any_packets_5,
    valid_connects_5,
    valid_packets_5_with_sender,
)
from .test_codec_properties import (
    _wire_length,
    assert_frames_tile,
    bytewise,
    feed_pieces,
    must_level,
    split_at,
    unrepresentable,
)

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
#: 15 packet types: 40 examples each keeps the round trips within 300 x 2 examples.
PER_TYPE = settings(SETTINGS, max_examples=40)
V5 = "5"
#: The rules an over-long string is refused with in 5.0, even with validate=False.
MAX_LENGTH_RULES_5 = frozenset({"MQTT-1.5.4-max-length", "MQTT-4.7.3-3"})
#: A QoS 0 PUBLISH's Packet Identifier would read as payload: only the encoder can see it.
QOS0_NO_PACKET_ID_5 = "MQTT-2.2.1-2"
_FIXED = {"Byte": 0xFF, "Two Byte Integer": 0xFFFF, "Four Byte Integer": 0xFFFFFFFF}
_VBI_MAX = 268_435_455


# ---------------------------------------------------------------------------------------------------------------
# Oracles and helpers
# ---------------------------------------------------------------------------------------------------------------


def unwritable_property(prop: codec.Property) -> str | None:
    """Why no bytes can hold ``prop``: a value its data type cannot carry, or an unknown identifier whose value
    is not given as raw bytes."""
    value = prop.value
    if not 0 <= prop.identifier <= _VBI_MAX:
        return f"identifier {prop.identifier} is no Variable Byte Integer"
    definition = props.BY_ID.get(prop.identifier)
    if definition is None:
        return None if isinstance(value, bytes) else "an unknown property needs its value as raw bytes"
    kind = definition.data_type.value
    if kind in _FIXED or kind == "Variable Byte Integer":
        top = _FIXED.get(kind, _VBI_MAX)
        fits = isinstance(value, int) and 0 <= value <= top
        return None if fits else f"{value!r} is no {kind}"
    if kind == "Binary Data":
        return None if isinstance(value, bytes) and len(value) <= 0xFFFF else f"{kind} {len(value)} long or no bytes"
    texts = value if kind == "UTF-8 String Pair" and isinstance(value, tuple) else (value,)
    if not all(isinstance(text, str) and _wire_length(text) <= 0xFFFF for text in texts):
        return f"{kind} that no length prefix describes, or no text"
    return None


def unrepresentable_5(packet: codec.Packet) -> str | None:
    """Why the 5.0 wire cannot hold ``packet`` at all, or None when it can."""
    why = unrepresentable(packet)
    if why is not None:
        return why
    held: list[codec.Property] = list(getattr(packet, "properties", None) or ())
    if isinstance(packet, codec.Connect) and packet.will is not None:
        held += packet.will.properties
    for prop in held:
        why = unwritable_property(prop)
        if why is not None:
            return why
    codes: list[int] = []
    if isinstance(packet, codec.Puback | codec.Pubrec | codec.Pubrel | codec.Pubcomp | codec.Disconnect | codec.Auth):
        if packet.reason_code is None and packet.properties is not None:
            return "properties without a Reason Code before them"
        codes += [] if packet.reason_code is None else [packet.reason_code]
    if isinstance(packet, codec.Unsuback):
        codes += packet.reason_codes
    if isinstance(packet, codec.Subscribe):
        for sub in packet.subscriptions:
            if sub.raw_options is None and not 0 <= sub.retain_handling <= 3:
                return f"Retain Handling {sub.retain_handling} does not fit in two bits"
    for code in codes:
        if not 0 <= code <= 0xFF:
            return f"Reason Code {code} does not fit in a byte"
    return None


@st.composite
def packet_streams_5(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """5.0 encodings (validate=False) of 0-5 arbitrary packets, and optional trailing garbage."""
    packets = draw(st.lists(any_packets_5().filter(lambda p: unrepresentable_5(p) is None), max_size=5))
    garbage = draw(st.just(b"") | st.binary(min_size=1, max_size=24))
    return [codec.encode(p, validate=False, version=V5) for p in packets], garbage


def _cuts(data: st.DataObject, length: int) -> list[int]:
    return data.draw(st.lists(st.integers(0, length), max_size=10), label="cuts")


@st.composite
def packets_from(draw: st.DrawFn, sender: str) -> list[codec.Packet]:
    """0-4 valid 5.0 packets that ``sender`` may send."""
    pairs = draw(st.lists(valid_packets_5_with_sender(by=sender), max_size=4))
    return [packet for packet, _ in pairs]


# ---------------------------------------------------------------------------------------------------------------
# 1. Round trip of valid 5.0 packets
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", list(SENDERS_5), ids=[cls.__name__ for cls in SENDERS_5])
@settings(PER_TYPE)
@given(data=st.data())
def test_decode_of_encode_is_identity_for_every_valid_5_0_packet_of_each_type(cls: type, data: st.DataObject) -> None:
    packet, sender = data.draw(valid_packets_5_with_sender(cls), label="packet and sender")
    wire = codec.encode(packet, version=V5)
    assert codec.encode(packet, version=V5, direction=sender) == wire
    decoded = codec.decode(wire, sender, version=V5)
    assert decoded.packets == [packet]
    assert decoded.violations == []
    assert [(f.offset, f.length, f.raw) for f in decoded.frames] == [(0, len(wire), wire)]


@pytest.mark.parametrize("cls", list(SENDERS_5), ids=[cls.__name__ for cls in SENDERS_5])
def test_the_valid_5_0_strategy_draws_each_packet_type_with_properties_where_it_may(cls: type) -> None:
    seen: list[codec.Packet] = []

    @settings(max_examples=60, deadline=None, database=None, derandomize=True)
    @given(pair=valid_packets_5_with_sender(cls))
    def collect(pair: tuple[codec.Packet, str]) -> None:
        seen.append(pair[0])

    collect()
    assert seen and {type(p) for p in seen} == {cls}
    if cls not in (codec.Pingreq, codec.Pingresp):
        assert any(getattr(p, "properties", None) for p in seen)
    if cls is codec.Connect:
        assert any(p.will and p.will.properties for p in seen if isinstance(p, codec.Connect))


# ---------------------------------------------------------------------------------------------------------------
# 2. encode refuses exactly what decode flags
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(packet=any_packets_5(), direction=st.sampled_from(DIRECTIONS))
def test_encode_refuses_a_5_0_packet_exactly_when_its_bytes_decode_with_a_must_level_violation(
    packet: codec.Packet, direction: str | None
) -> None:
    if unrepresentable_5(packet) is not None:
        event("unrepresentable")
        for validate in (False, True):
            with pytest.raises((codec.EncodeError, codec.ProtocolViolation)) as refused:
                codec.encode(packet, validate=validate, direction=direction, version=V5)
            if isinstance(refused.value, codec.ProtocolViolation):
                assert refused.value.rule in MAX_LENGTH_RULES_5
        return
    wire = codec.encode(packet, validate=False, version=V5)
    decoded = codec.decode(wire, direction, version=V5)
    reported = {v.rule for v in must_level(decoded.violations)}
    if isinstance(packet, codec.Publish) and packet.qos == 0 and packet.packet_id is not None:
        reported.add(QOS0_NO_PACKET_ID_5)
    if reported:
        event("refused")
        with pytest.raises(codec.ProtocolViolation) as refused:
            codec.encode(packet, direction=direction, version=V5)
        assert refused.value.rule in reported
    elif decoded.packets == [packet]:
        event("accepted")
        assert codec.encode(packet, direction=direction, version=V5) == wire
    else:
        # Valid bytes that read back as another packet (an unknown property's raw bytes that spell a known one,
        # raw flags equal to the required ones, ...): the only EncodeError allowed for a representable packet.
        event("read-back mismatch")
        assert len(decoded.packets) == 1
        with pytest.raises(codec.EncodeError):
            codec.encode(packet, direction=direction, version=V5)


# ---------------------------------------------------------------------------------------------------------------
# 3. Split invariance
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(stream=packet_streams_5(), direction=st.sampled_from(DIRECTIONS), data=st.data())
def test_5_0_stream_frames_are_the_same_whole_byte_by_byte_and_split_at_random_points(
    stream: tuple[list[bytes], bytes], direction: str | None, data: st.DataObject
) -> None:
    encodings, garbage = stream
    wire = b"".join(encodings) + garbage
    whole = feed_pieces([wire], direction, version=V5)
    assert feed_pieces(bytewise(wire), direction, version=V5) == whole
    assert feed_pieces(split_at(wire, _cuts(data, len(wire))), direction, version=V5) == whole
    assert_frames_tile(whole, wire)
    offset = 0
    for frame, encoding in zip(whole, encodings, strict=False):
        assert (frame.offset, frame.raw) == (offset, encoding)
        assert frame.packet is not None
        offset += len(encoding)


# ---------------------------------------------------------------------------------------------------------------
# 4. Version learning and following the peer
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(connect=valid_connects_5(), after=packets_from(CLIENT), data=st.data())
def test_a_decoder_that_learns_5_0_from_the_connect_reads_the_stream_as_version_5_does(
    connect: codec.Connect, after: list[codec.Packet], data: st.DataObject
) -> None:
    wire = b"".join(codec.encode(p, version=V5) for p in [connect, *after])
    told = feed_pieces([wire], CLIENT, version=V5)
    assert [f.packet for f in told] == [connect, *after]
    assert not [v for f in told for v in f.violations]
    learner = codec.StreamDecoder(CLIENT, version=None)
    assert learner.version is codec.ProtocolVersion.V3_1_1  # until the CONNECT is read
    frames: list[codec.Frame] = []
    for piece in split_at(wire, _cuts(data, len(wire))):
        frames += learner.feed(piece)
    assert frames + learner.close() == told
    assert learner.version is codec.ProtocolVersion.V5
    learned = codec.decode(wire, CLIENT, version=None)
    assert (learned.frames, learned.version) == (tuple(told), codec.ProtocolVersion.V5)


@SETTINGS
@given(connect=valid_connects_5(), replies=packets_from(SERVER), data=st.data())
def test_a_server_decoder_given_the_client_decoder_as_peer_reads_5_0_once_the_connect_is_read(
    connect: codec.Connect, replies: list[codec.Packet], data: st.DataObject
) -> None:
    client = codec.StreamDecoder(CLIENT, version=None)
    server = codec.StreamDecoder(SERVER, peer=client)
    assert server.version is codec.ProtocolVersion.V3_1_1
    assert [f.packet for f in client.feed(codec.encode(connect, version=V5))] == [connect]
    assert server.version is codec.ProtocolVersion.V5
    wire = b"".join(codec.encode(p, version=V5) for p in replies)
    frames: list[codec.Frame] = []
    for piece in split_at(wire, _cuts(data, len(wire))):
        frames += server.feed(piece)
    told = feed_pieces([wire], SERVER, version=V5)
    assert frames + server.close() == told
    assert [f.packet for f in told] == replies
    assert not [v for f in told for v in f.violations]


def test_a_server_decoder_follows_a_3_1_1_connect_too() -> None:
    client = codec.StreamDecoder(CLIENT, version=None)
    server = codec.StreamDecoder(SERVER, peer=client)
    client.feed(codec.encode(codec.Connect(client_id="c")))
    assert server.version is codec.ProtocolVersion.V3_1_1
    # The 3.1.1 CONNACK is clean as 3.1.1; the same bytes lack their Property Length as 5.0 [MQTT-2.2.2-1].
    assert server.feed(bytes.fromhex("20 02 00 00"))[0].violations == ()


def test_a_learning_decoder_reads_a_5_0_connack_before_any_connect_as_3_1_1() -> None:
    # Nothing has named the version yet: the default, 3.1.1, reads a 5.0 CONNACK as the wrong length.
    frames = codec.decode(bytes.fromhex("20 03 00 00 00"), SERVER, version=None).frames
    assert [v.rule for f in frames for v in f.violations] == ["MQTT-3.2.1-remaining-length"]
