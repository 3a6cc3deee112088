"""StreamDecoder.waiting: a packet whose first byte already breaks a rule is known before it is whole, and asking
never changes how the stream is framed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.codec import Direction, Frame, StreamDecoder
from mqttaudit.codec import rules as codec_rules

CLIENT = Direction.FROM_CLIENT


def waiting_rules(data: str, direction: Direction = CLIENT) -> list[str] | None:
    decoder = StreamDecoder(direction)
    assert decoder.feed(bytes.fromhex(data)) == []
    frame = decoder.waiting()
    if frame is None:
        return None
    assert frame.packet is None and frame.raw == bytes.fromhex(data) and frame.offset == 0
    return [violation.rule for violation in frame.violations]


def test_a_reserved_type_is_known_from_its_first_byte() -> None:
    assert waiting_rules("00") == [codec_rules.RESERVED_PACKET_TYPE]
    assert waiting_rules("f0 80") == [codec_rules.RESERVED_PACKET_TYPE]  # Remaining Length still arriving
    assert waiting_rules("f0 0a 00 01") == [codec_rules.RESERVED_PACKET_TYPE]  # body still arriving


def test_reserved_flags_and_a_wrong_sender_are_known_from_the_first_byte() -> None:
    assert waiting_rules("83 05 00") == [codec_rules.RESERVED_FLAGS, codec_rules.SUBSCRIBE_FLAGS]
    assert waiting_rules("20 02 00") == [codec_rules.PACKET_DIRECTION]
    assert waiting_rules("20 02 00", Direction.FROM_SERVER) is None


def test_nothing_is_waiting_when_the_first_byte_is_clean_or_nothing_is_incomplete() -> None:
    assert waiting_rules("82 05 00") is None
    assert waiting_rules("") is None
    decoder = StreamDecoder(CLIENT)
    assert len(decoder.feed(bytes.fromhex("00 02 00 01"))) == 1  # whole: framed, nothing waits
    assert decoder.waiting() is None


def test_the_waiting_frame_counts_stream_offsets() -> None:
    decoder = StreamDecoder(CLIENT)
    assert len(decoder.feed(bytes.fromhex("c0 00 f0 05 01"))) == 1
    frame = decoder.waiting()
    assert frame is not None and (frame.offset, frame.length, frame.raw) == (2, 3, bytes.fromhex("f0 05 01"))


@given(st.binary(max_size=64), st.lists(st.integers(min_value=0, max_value=64), max_size=6))
def test_asking_what_waits_never_changes_the_frames(data: bytes, cuts: list[int]) -> None:
    plain, asked = StreamDecoder(CLIENT), StreamDecoder(CLIENT)
    expected = plain.feed(data) + plain.close()
    got: list[Frame] = []
    points = [*sorted({min(cut, len(data)) for cut in cuts}), len(data)]
    start = 0
    for point in points:
        got += asked.feed(data[start:point])
        asked.waiting()
        start = point
    assert got + asked.close() == expected
