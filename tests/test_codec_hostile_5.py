"""Hostile MQTT 5.0 input to the codec (the 5.0 twin of ``test_codec_hostile.py``).

Invariant: for ANY bytes, read as 5.0 or with the version to be learned from a CONNECT, in any direction, fed in
any pieces of any bytes-like type, under any ``max_packet_size``: audit-mode decoding raises nothing, strict
decoding raises nothing but a MUST-level ``codec.ProtocolViolation``, every byte fed is framed, skipped or held,
never more than the bound is held, the frames tile the input and do not depend on the split. Memory stays
bounded however large a Remaining Length, a Property Length or a Variable Byte Integer claims to be.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec import rules

from .strategies import DIRECTIONS, valid_connects_5, valid_packets_5
from .test_codec_hostile import KIB, KINDS, MIB, PER_CALL, SETTINGS, BytesLike, Kind, kinds

V5 = "5"
VERSIONS = (V5, None)  # told 5.0, or learning it from the CONNECT at the start of the stream
CONNECT_5 = bytes.fromhex("10 0d 0004 4d515454 05 02 0000 00 0000")

#: A 5.0 CONNECT, a PUBLISH with properties, one with Topic Alias 0 (a MUST-level finding), an AUTH, then a
#: SUBSCRIBE cut short: every kind of frame.
WIRE = (
    CONNECT_5
    + bytes.fromhex("33 1a 0001 61 000a 13 020000003c 2600016b000176 2600016b000176 78")
    + bytes.fromhex("30 07 0001 74 03 230000")
    + bytes.fromhex("f0 0a 18 08 1500016d 16000101")
    + bytes.fromhex("82 14 0005 02 0b07 000c 2473686172652f672f612f23 02")[:-3]
)


def feed_all(decoder: codec.StreamDecoder, pieces: Sequence[BytesLike]) -> list[codec.Frame]:
    frames: list[codec.Frame] = []
    for piece in pieces:
        frames += decoder.feed(piece)
    return frames + decoder.close()


def cut(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def assert_frames_tile(frames: Sequence[codec.Frame], data: bytes) -> None:
    position = 0
    for frame in frames:
        assert frame.offset == position and frame.length > 0
        covered = data[position : position + frame.length]
        assert len(covered) == frame.length
        if frame.packet is not None:
            assert frame.raw == covered
        else:
            assert frame.raw and covered.startswith(frame.raw)
        position += frame.length
    assert position == len(data)


def assert_only_codec_errors(exc: BaseException) -> None:
    assert isinstance(exc, codec.ProtocolViolation), exc
    assert not rules.is_advisory(exc.rule)
    assert exc.violation in exc.violations


# ---------------------------------------------------------------------------------------------------------------
# One API for every bytes-like type
# ---------------------------------------------------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("version", VERSIONS, ids=["told-5", "learned"])
def test_5_0_decode_gives_the_same_frames_for_every_bytes_like_type(kind: Kind, version: str | None) -> None:
    expected = codec.decode(WIRE, "client", version=V5)
    assert [v.rule for v in expected.violations] == ["MQTT-3.3.2-8", "MQTT-2.1.4-truncated"]
    assert len(expected.packets) == 4
    got = codec.decode(kind(WIRE), "client", version=version)
    assert got.frames == expected.frames
    with pytest.raises(codec.ProtocolViolation) as strict:
        codec.decode(kind(WIRE), "client", strict=True, version=version)
    assert strict.value.rule == "MQTT-3.3.2-8"


@kinds
def test_5_0_stream_decoder_gives_the_same_frames_for_every_bytes_like_type_and_split(kind: Kind) -> None:
    expected = feed_all(codec.StreamDecoder("client", version=V5), [WIRE])
    for size in (1, 7, 100, len(WIRE)):
        pieces = [kind(piece) for piece in cut(WIRE, range(size, len(WIRE), size))]
        assert feed_all(codec.StreamDecoder("client", version=None), pieces) == expected
        assert feed_all(codec.StreamDecoder("client", version=V5), pieces) == expected


# ---------------------------------------------------------------------------------------------------------------
# Any bytes, any pieces, any bound: only the codec's own errors
# ---------------------------------------------------------------------------------------------------------------


@st.composite
def mutated_5_0_streams(draw: st.DrawFn) -> bytes:
    """A 5.0 CONNECT and valid 5.0 packets, then a few byte edits: overwrite, insert, delete, truncate."""
    packets = [draw(valid_connects_5()), *draw(st.lists(valid_packets_5, min_size=1, max_size=3))]
    data = bytearray(b"".join(codec.encode(p, version=V5) for p in packets))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["overwrite", "insert", "delete", "truncate"]))
        if edit == "overwrite":
            data[at] = draw(st.sampled_from([0x00, 0x01, 0x0B, 0x23, 0x26, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            del data[at:]
    return bytes(data)


@st.composite
def hostile_5_0_streams(draw: st.DrawFn) -> bytes:
    """Random bytes, valid 5.0 packets, and headers, Property Lengths and Subscription Identifiers declaring
    large sizes, in any order, often after a 5.0 CONNECT."""
    large = st.integers(0, codec.MAX_REMAINING_LENGTH).map(codec.encode_remaining_length)
    parts = draw(
        st.lists(
            st.one_of(
                st.binary(max_size=40),
                valid_packets_5.map(lambda p: codec.encode(p, version=V5)),
                st.builds(
                    lambda first, size, tail: bytes((first,)) + size + tail,
                    st.integers(0, 255),
                    large,
                    st.binary(max_size=20),
                ),
                # a PUBLISH whose Property Length, or a SUBSCRIBE whose Subscription Identifier, claims a lot
                large.map(lambda size: bytes.fromhex("30 0a 0001 74") + size + b"\x26\x00"),
                large.map(lambda size: bytes.fromhex("82 0c 0001 06 0b") + size + b"\x00\x01a\x00"),
            ),
            max_size=8,
        )
    )
    return (CONNECT_5 if draw(st.booleans()) else b"") + b"".join(parts)


fuzz_inputs = st.one_of(st.binary(max_size=300), mutated_5_0_streams(), hostile_5_0_streams())
bounds = st.one_of(st.integers(codec.MIN_MAX_PACKET_SIZE, 80), st.sampled_from([codec.DEFAULT_MAX_PACKET_SIZE]))


@SETTINGS
@given(data=fuzz_inputs)
def test_audit_decode_of_any_5_0_bytes_raises_nothing_and_its_frames_tile_the_input(data: bytes) -> None:
    for direction, version in itertools.product(DIRECTIONS, VERSIONS):
        assert_frames_tile(codec.decode(data, direction, version=version).frames, data)


@SETTINGS
@given(data=fuzz_inputs)
def test_strict_decode_of_any_5_0_bytes_raises_only_a_must_level_protocol_violation(data: bytes) -> None:
    for direction, version in itertools.product(DIRECTIONS, VERSIONS):
        try:
            codec.decode(data, direction, strict=True, version=version)
        except codec.CodecError as exc:
            assert_only_codec_errors(exc)


@SETTINGS
@given(
    data=fuzz_inputs,
    direction=st.sampled_from(DIRECTIONS),
    version=st.sampled_from(VERSIONS),
    bound=bounds,
    strict=st.booleans(),
    split=st.data(),
)
def test_any_5_0_bytes_in_any_pieces_under_any_bound_raise_only_codec_errors_and_never_exceed_the_bound(
    data: bytes, direction: str | None, version: str | None, bound: int, strict: bool, split: st.DataObject
) -> None:
    pieces = cut(data, split.draw(st.lists(st.integers(0, len(data)), max_size=12), label="cuts"))
    piece_kinds = split.draw(
        st.lists(st.sampled_from(list(KINDS.values())), min_size=len(pieces), max_size=len(pieces))
    )
    decoder = codec.StreamDecoder(direction, max_packet_size=bound, strict=strict, version=version)
    fed = 0
    frames: list[codec.Frame] = []
    for piece, kind in zip(pieces, piece_kinds, strict=True):
        fed += len(piece)
        try:
            frames += decoder.feed(kind(piece))
        except codec.CodecError as exc:
            assert strict
            assert_only_codec_errors(exc)
        else:
            assert decoder.buffered <= bound
        assert decoder.offset + decoder.buffered == fed
    for _ in range(len(data) + 1):  # a strict close raises at each flawed frame left; called again, it goes on
        try:
            frames += decoder.close()
            break
        except codec.CodecError as exc:
            assert strict
            assert_only_codec_errors(exc)
    assert decoder.buffered == 0 and decoder.offset == len(data)
    for frame in frames:
        assert frame.packet is None or frame.length <= bound
    if not strict:
        whole = feed_all(codec.StreamDecoder(direction, max_packet_size=bound, version=version), [data])
        assert frames == whole
        assert_frames_tile(frames, data)


# ---------------------------------------------------------------------------------------------------------------
# Bounded memory
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS, ids=["told-5", "learned"])
def test_a_5_0_packet_declaring_256_mb_is_skipped_without_buffering_more_than_max_packet_size(
    version: str | None,
) -> None:
    header = b"\x30" + codec.encode_remaining_length(codec.MAX_REMAINING_LENGTH)
    chunk = bytes(64 * KIB)
    pieces = [CONNECT_5 + header + chunk] + [chunk] * 127
    decoder = codec.StreamDecoder("client", max_packet_size=MIB, version=version)
    frames: list[codec.Frame] = []
    tracemalloc.start()
    try:
        for piece in pieces:
            frames += decoder.feed(piece)
            assert decoder.buffered <= MIB
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    frames += decoder.close()
    assert peak < 2 * MIB
    assert decoder.version is codec.ProtocolVersion.V5
    assert [v.rule for f in frames for v in f.violations] == ["MQTT-2.1.4-size-limit", "MQTT-2.1.4-truncated"]
    assert [f.packet for f in frames] == [codec.Connect(protocol_level=5), None]


@pytest.mark.parametrize(
    ("name", "wire", "expected"),
    [
        ("property-length", "30 0b 0001 74 ffffff7f 2600 0000", ["MQTT-2.2.2-property-length"]),
        ("largest-subscription-identifier", "82 0c 0001 05 0b ffffff7f 0001 61 00", []),
        ("binary-length", "30 09 0001 74 04 09 ffff 00 00", ["MQTT-2.2.2-property-length"]),
        ("user-property", "40 0b 0001 00 07 26 ffff 00 ffff 00", ["MQTT-2.2.2-property-length"]),
    ],
)
def test_a_5_0_length_claiming_far_more_than_the_packet_holds_allocates_nothing_for_it(
    name: str, wire: str, expected: list[str]
) -> None:
    data = bytes.fromhex(wire)
    tracemalloc.start()
    try:
        decoded = codec.decode(data, None, version=V5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * KIB
    assert [v.rule for v in decoded.violations] == expected
    assert len(decoded.packets) == 1
    assert_frames_tile(decoded.frames, data)


def allocated_while_feeding(decoder: codec.StreamDecoder, pieces: Sequence[bytes]) -> tuple[int, list[codec.Frame]]:
    """The sum over ``feed`` calls of the most memory each allocated above what was held before it."""
    total = 0
    frames: list[codec.Frame] = []
    tracemalloc.start()
    try:
        for piece in pieces:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            frames += decoder.feed(piece)
            _, peak = tracemalloc.get_traced_memory()
            total += peak - before
    finally:
        tracemalloc.stop()
    return total, frames


@pytest.mark.parametrize(("size", "piece"), [(64 * KIB, 1), (MIB, 1448)], ids=["64KiB-in-1-byte", "1MiB-in-1448-byte"])
def test_a_large_5_0_packet_fed_in_small_pieces_costs_a_bounded_multiple_of_its_bytes(size: int, piece: int) -> None:
    packet = codec.Publish(
        topic="big", payload=bytes(size), properties=codec.properties.make(content_type="x", topic_alias=2)
    )
    wire = codec.encode(packet, version=V5)
    pieces = [wire[pos : pos + piece] for pos in range(0, len(wire), piece)]
    allocated, frames = allocated_while_feeding(codec.StreamDecoder("server", version=V5), pieces)
    assert [f.packet for f in frames] == [packet]
    assert allocated <= 4 * len(wire) + PER_CALL * len(pieces), f"{allocated:,} bytes allocated for {len(wire):,}"


def test_a_strict_decoder_counts_each_byte_once_after_a_packet_with_advisory_findings_only() -> None:
    """Found by the fuzz test above: a packet whose findings are all advisory (a User Property and Topic Filters
    with U+0001) raised nothing, yet left the bytes after it pending; an oversized packet starting there took them
    as well, and the strict decoder's offset ended two bytes past the end of the stream."""
    data = bytes(44) + bytes.fromhex("a21a00010f26000401e0a08000060101c280c2800001010003010101001b")
    decoder = codec.StreamDecoder("client", max_packet_size=28, strict=True, version="5")
    calls = 0
    while True:
        calls += 1
        assert calls <= len(data) + 2  # each raise moves past one flawed frame
        try:
            _ = decoder.feed(data) if calls == 1 else decoder.close()
        except codec.CodecError:
            assert decoder.offset + decoder.buffered == len(data)
            continue
        if calls > 1:
            break
    assert decoder.buffered == 0 and decoder.offset == len(data)
