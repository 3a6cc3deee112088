"""The vector table drives both directions: each valid vector is encoded and decoded whole, byte by byte, as
every strict prefix and with trailing bytes; each invalid vector must report exactly its rules."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec import rules

from .vectors import ENCODE_ONLY, INVALID, VALID

valid_ids = [name for name, *_ in VALID]
invalid_ids = [name for name, *_ in INVALID]


def feed_in_pieces(data: bytes, sender: str, sizes: int) -> list[codec.Frame]:
    decoder = codec.StreamDecoder(sender)
    frames: list[codec.Frame] = []
    for start in range(0, len(data), sizes):
        frames += decoder.feed(data[start : start + sizes])
    return frames + decoder.close()


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_packet_encodes_to_its_vector(name: str, sender: str, packet: codec.Packet, wire: bytes) -> None:
    assert codec.encode(packet, direction=sender) == wire


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_decodes_whole_to_its_packet_without_violation(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    result = codec.decode(wire, sender)
    assert result.packets == [packet]
    assert result.violations == []
    assert result.frames[0].raw == wire


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_decodes_the_same_fed_byte_by_byte(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    frames = feed_in_pieces(wire, sender, 1)
    assert [f.packet for f in frames] == [packet]
    assert frames == list(codec.decode(wire, sender).frames)


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_every_strict_prefix_of_a_valid_vector_needs_more_data(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    for cut in range(1, len(wire)):
        decoder = codec.StreamDecoder(sender)
        assert decoder.feed(wire[:cut]) == [], f"prefix of {cut} bytes produced a frame"
        assert decoder.buffered == cut
        closed = decoder.close()
        assert [v.rule for f in closed for v in f.violations] == [rules.TRUNCATED]
        assert closed[0].packet is None and closed[0].length == cut


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_with_trailing_bytes_decodes_the_packet_then_waits(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    decoder = codec.StreamDecoder(sender)
    frames = decoder.feed(wire + b"\x30")
    assert [f.packet for f in frames] == [packet]
    assert frames[0].violations == ()
    assert decoder.buffered == 1 and decoder.offset == len(wire)


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_invalid_vector_reports_exactly_its_rules(name: str, sender: str, wire: bytes, expected: list[str]) -> None:
    assert [v.rule for v in codec.decode(wire, sender, max_packet_size=1024).violations] == expected


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_invalid_vector_reports_the_same_fed_byte_by_byte(
    name: str, sender: str, wire: bytes, expected: list[str]
) -> None:
    decoder = codec.StreamDecoder(sender, max_packet_size=1024)
    frames: list[codec.Frame] = []
    for index in range(len(wire)):
        frames += decoder.feed(wire[index : index + 1])
    frames += decoder.close()
    assert [v.rule for f in frames for v in f.violations] == expected


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_invalid_vector_offsets_point_inside_the_input(
    name: str, sender: str, wire: bytes, expected: list[str]
) -> None:
    for violation in codec.decode(wire, sender, max_packet_size=1024).violations:
        assert 0 <= violation.offset <= len(wire), violation


def test_every_rule_the_codec_claims_is_triggered_by_a_vector() -> None:
    triggered = {rule for *_, expected in INVALID for rule in expected}
    assert codec.rules.CHECKED - ENCODE_ONLY - triggered == set()


def test_strict_decode_raises_the_first_violation_with_the_best_effort_packet() -> None:
    with pytest.raises(codec.ProtocolViolation) as caught:
        codec.decode(bytes.fromhex("82 05 00 01 00 00 00"), "client", strict=True)
    assert caught.value.rule == rules.TOPIC_NOT_EMPTY
    assert caught.value.offset == 4
    assert caught.value.packet == codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter=""),))


def test_strict_decode_does_not_raise_for_warnings() -> None:
    result = codec.decode(bytes.fromhex("c0 80 00"), "client", strict=True)
    assert result.packets == [codec.Pingreq()]
    assert [v.rule for v in result.violations] == [rules.REMAINING_LENGTH_SHORTEST]


def test_strict_stream_decoder_hands_over_the_frames_before_the_violation() -> None:
    good = bytes.fromhex("c0 00")
    bad = bytes.fromhex("a2 04 00 02 00 00")
    decoder = codec.StreamDecoder("client", strict=True)
    with pytest.raises(codec.ProtocolViolation) as caught:
        decoder.feed(good + bad + good)
    frames = caught.value.frames
    assert [f.packet for f in frames] == [
        codec.Pingreq(),
        codec.Unsubscribe(packet_id=2, topic_filters=("",)),
    ]
    assert [f.packet for f in decoder.feed(b"")] == [codec.Pingreq()]
    assert decoder.close() == []


def test_five_byte_remaining_length_makes_the_rest_unframeable_but_accounted() -> None:
    wire = bytes.fromhex("30 ff ff ff ff 01") + b"\x00" * 100
    decoder = codec.StreamDecoder("client")
    frames = decoder.feed(wire) + decoder.feed(b"more") + decoder.close()
    assert [v.rule for f in frames for v in f.violations] == [rules.REMAINING_LENGTH_FOUR_BYTES]
    assert frames[0].violations[0].offset == 5
    assert sum(f.length for f in frames) == len(wire) + 4
    assert all(f.packet is None for f in frames)


def test_four_byte_remaining_length_maximum_is_accepted() -> None:
    length, end = codec.read_remaining_length(bytes.fromhex("ff ff ff 7f"), 0, 4)
    assert (length, end) == (codec.MAX_REMAINING_LENGTH, 4)
    assert codec.encode_remaining_length(codec.MAX_REMAINING_LENGTH) == bytes.fromhex("ff ff ff 7f")


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "8001"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2097151, "ffff7f"),
        (2097152, "80808001"),
    ],
)
def test_remaining_length_boundaries_of_table_2_4(value: int, wire: str) -> None:
    encoded = codec.encode_remaining_length(value)
    assert encoded.hex() == wire
    assert codec.read_remaining_length(encoded, 0, len(encoded)) == (value, len(encoded))


def test_remaining_length_beyond_four_bytes_cannot_be_encoded() -> None:
    with pytest.raises(codec.EncodeError):
        codec.encode_remaining_length(codec.MAX_REMAINING_LENGTH + 1)


def test_ill_formed_string_survives_a_round_trip_byte_for_byte() -> None:
    wire = bytes.fromhex("30 05 0003 61ff62")
    packet = codec.decode(wire, "client").packets[0]
    assert isinstance(packet, codec.Publish)
    assert codec.encode(packet, validate=False) == wire
    with pytest.raises(codec.ProtocolViolation) as caught:
        codec.encode(packet)
    assert caught.value.rule == rules.UTF8_WELL_FORMED
