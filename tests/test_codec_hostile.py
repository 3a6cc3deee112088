"""Hostile input to the codec, on both builds: the same API whatever bytes-like type carries the input, a
validated ``max_packet_size`` that the decoder never exceeds, only the codec's own errors for any bytes in any
pieces under any bound, and framing whose work is linear in the bytes fed however small the pieces.

Linearity is checked without a clock: ``tracemalloc`` gives the most memory each ``feed`` call allocated above
what was held before it, and over a whole packet those amounts must add up to a few times the bytes fed. A
decoder that rebuilt its pending bytes on every call allocates the whole pending packet each time: for 1 MiB in
1,448-byte pieces, some 360 times the bytes fed. ``bench/framing_bench.py`` times the same (``make bench``).
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec import rules

from .strategies import DIRECTIONS, valid_packets

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
KIB = 1 << 10
MIB = 1 << 20
#: What one ``feed`` call may allocate whatever it is given: the list it returns and a few small objects.
PER_CALL = 256

BytesLike = bytes | bytearray | memoryview
Kind = Callable[[bytes], BytesLike]


def _offset_view(data: bytes) -> memoryview:
    """A memoryview that does not start at its buffer's first byte."""
    return memoryview(b"~~" + data + b"~")[2:-1]


KINDS: dict[str, Kind] = {
    "bytes": bytes,
    "bytearray": bytearray,
    "memoryview": memoryview,
    "memoryview-slice": _offset_view,
}
kinds = pytest.mark.parametrize("kind", KINDS.values(), ids=KINDS.keys())

#: Packets, one with a MUST-level violation (an empty topic), then a truncated one: every kind of frame.
WIRE = (
    codec.encode(codec.Publish(topic="a/b", payload=bytes(range(200)), qos=1, packet_id=7))
    + codec.encode(codec.Publish(topic="", payload=b"x"), validate=False)
    + codec.encode(codec.Pingreq())
    + codec.encode(codec.Subscribe(packet_id=2, subscriptions=[codec.Subscription(topic_filter="a/#")]))[:-2]
)


def feed_all(decoder: codec.StreamDecoder, pieces: Sequence[BytesLike]) -> list[codec.Frame]:
    frames: list[codec.Frame] = []
    for piece in pieces:
        frames += decoder.feed(piece)
    return frames + decoder.close()


def cut(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def assert_all_bytes(frames: Sequence[codec.Frame]) -> None:
    for frame in frames:
        assert type(frame.raw) is bytes
        if isinstance(frame.packet, codec.Publish):
            assert type(frame.packet.payload) is bytes


# ---------------------------------------------------------------------------------------------------------------
# One API, both builds: bytes, bytearray and memoryview everywhere the codec takes bytes
# ---------------------------------------------------------------------------------------------------------------


@kinds
def test_decode_gives_the_same_frames_for_every_bytes_like_type(kind: Kind) -> None:
    expected = codec.decode(WIRE, "client")
    assert [v.rule for v in expected.violations] == [rules.TOPIC_NOT_EMPTY, rules.TRUNCATED]
    got = codec.decode(kind(WIRE), "client")
    assert got == expected
    assert_all_bytes(got.frames)
    with pytest.raises(codec.ProtocolViolation) as strict:
        codec.decode(kind(WIRE), "client", strict=True)
    assert strict.value.rule == rules.TOPIC_NOT_EMPTY


@kinds
def test_stream_decoder_gives_the_same_frames_for_every_bytes_like_type(kind: Kind) -> None:
    expected = feed_all(codec.StreamDecoder("client"), [WIRE])
    for size in (1, 7, 100, len(WIRE)):
        pieces = [kind(piece) for piece in cut(WIRE, range(size, len(WIRE), size))]
        frames = feed_all(codec.StreamDecoder("client"), pieces)
        assert frames == expected
        assert_all_bytes(frames)


def test_a_bytearray_reused_by_the_caller_after_feed_does_not_change_what_was_fed() -> None:
    # As a socket's recv_into buffer is: the decoder must have copied what it keeps.
    wire = codec.encode(codec.Publish(topic="t", payload=bytes(100)))
    decoder = codec.StreamDecoder("client")
    scratch = bytearray(wire[:50])
    assert decoder.feed(scratch) == []
    scratch[:] = b"\xff" * 50
    view = memoryview(scratch)
    assert decoder.feed(memoryview(bytearray(wire[50:]))) == [
        codec.Frame(0, len(wire), wire, codec.decode(wire, "client").packets[0])
    ]
    assert bytes(view) == b"\xff" * 50


@kinds
def test_buffer_reads_every_bytes_like_type_and_returns_bytes(kind: Kind) -> None:
    buffer = codec.Buffer(kind(b"\x01\x02\x03abcdef"), 1, 8)
    assert buffer.pull_uint8() == 2
    assert buffer.pull_uint16() == 0x0361
    taken = buffer.pull_bytes(2)
    rest = buffer.pull_rest()
    assert (taken, rest) == (b"bc", b"de")
    assert type(taken) is bytes and type(rest) is bytes
    with pytest.raises(codec.BufferUnderrun):
        buffer.pull_uint8()


HEADERS = [
    (b"\x30\x05", 1),  # one byte
    (b"\x00\x00\x30\xc1\x02", 3),  # two bytes, not at the start
    (b"\x30\xff\xff", 1),  # stops inside the Remaining Length
    (b"\x30\xff\xff\xff\x7f", 1),  # the largest value
    (b"\x30\xff\xff\xff\xff\x01", 1),  # a fifth byte
    (b"\x30\xff\xff\xff\xff\x01" + bytes(1000), 1),  # ... in a large buffer
]


@kinds
@pytest.mark.parametrize(("data", "pos"), HEADERS)
def test_read_remaining_length_gives_the_same_result_for_every_bytes_like_type(
    kind: Kind, data: bytes, pos: int
) -> None:
    for end in range(pos, len(data) + 1):
        assert codec.read_remaining_length(kind(data), pos, end) == codec.read_remaining_length(data, pos, end)


@kinds
def test_packet_fields_given_as_any_bytes_like_type_are_kept_as_bytes(kind: Kind) -> None:
    made = [
        (codec.Publish(topic="a", payload=kind(b"xyz")), codec.Publish(topic="a", payload=b"xyz")),
        (
            codec.Connect(
                client_id="c", username="u", password=kind(b"pw"), will=codec.Will(topic="w", message=kind(b"m"))
            ),
            codec.Connect(client_id="c", username="u", password=b"pw", will=codec.Will(topic="w", message=b"m")),
        ),
        (
            codec.ReservedPacket(packet_type_value=0, body=kind(b"\x01")),
            codec.ReservedPacket(packet_type_value=0, body=b"\x01"),
        ),
    ]
    for packet, reference in made:
        assert packet == reference and hash(packet) == hash(reference)
        assert codec.encode(packet, validate=False) == codec.encode(reference, validate=False)
        assert all(type(value) is not bytearray and type(value) is not memoryview for value in packet.values())
    connect = made[1][0]
    assert isinstance(connect, codec.Connect) and connect.will is not None
    assert type(connect.password) is bytes and type(connect.will.message) is bytes
    frame = codec.Frame(0, 2, kind(b"\xc0\x00"), codec.Pingreq())
    assert type(frame.raw) is bytes and frame == codec.Frame(0, 2, b"\xc0\x00", codec.Pingreq())


REFUSED: list[tuple[str, Callable[[], object]]] = [
    ("decode-int", lambda: codec.decode(5, "client")),  # type: ignore[arg-type]  # bytes(5) is five zero bytes
    ("decode-str", lambda: codec.decode("\x30\x00", "client")),  # type: ignore[arg-type]
    ("feed-list", lambda: codec.StreamDecoder("client").feed([0x30, 0x00])),  # type: ignore[arg-type]
    ("buffer-int", lambda: codec.Buffer(3)),  # type: ignore[arg-type]
    ("read-remaining-length-str", lambda: codec.read_remaining_length("\x30\x05", 1, 2)),  # type: ignore[arg-type]
    ("publish-payload-int", lambda: codec.Publish(topic="a", payload=3)),  # type: ignore[arg-type]
    ("publish-payload-str", lambda: codec.Publish(topic="a", payload="text")),  # type: ignore[arg-type]
    ("frame-raw-none", lambda: codec.Frame(0, 0, None, None)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("call", [call for _, call in REFUSED], ids=[name for name, _ in REFUSED])
def test_anything_but_a_bytes_like_type_is_a_type_error(call: Callable[[], object]) -> None:
    with pytest.raises(TypeError):
        call()


# ---------------------------------------------------------------------------------------------------------------
# max_packet_size: validated, and never exceeded
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bound", [-(1 << 40), -1, 0, 1, 2, 3, 4])
def test_a_max_packet_size_below_five_is_a_value_error(bound: int) -> None:
    assert codec.MIN_MAX_PACKET_SIZE == 5
    for make in (
        lambda: codec.StreamDecoder("client", max_packet_size=bound),
        lambda: codec.decode(b"\xc0\x00", "client", max_packet_size=bound),
    ):
        with pytest.raises(ValueError, match=r"max_packet_size must be at least 5, not -?\d+"):
            make()


@pytest.mark.parametrize("bound", [1e6, "100", None])
def test_a_max_packet_size_that_is_no_integer_is_a_type_error(bound: object) -> None:
    with pytest.raises(TypeError):
        codec.StreamDecoder("client", max_packet_size=bound)  # type: ignore[arg-type]


def test_the_smallest_bound_holds_a_whole_fixed_header_and_no_more() -> None:
    decoder = codec.StreamDecoder("client", max_packet_size=codec.MIN_MAX_PACKET_SIZE)
    assert decoder.max_packet_size == 5
    # A type byte and four Remaining Length bytes that all ask for more: the size is not known yet.
    assert decoder.feed(b"\x30\xff\xff\xff\xff") == []
    assert decoder.buffered == 5
    frames = decoder.feed(b"\x01")
    assert [v.rule for f in frames for v in f.violations] == [rules.REMAINING_LENGTH_FOUR_BYTES]
    assert decoder.buffered == 0
    # A 4-byte PUBACK fits, a 6-byte PUBLISH is skipped as it arrives.
    decoder = codec.StreamDecoder("server", max_packet_size=5)
    puback, publish = codec.encode(codec.Puback(packet_id=1)), codec.encode(codec.Publish(topic="ab"))
    frames = feed_all(decoder, [puback + publish[:3], publish[3:]])
    assert [f.packet for f in frames] == [codec.Puback(packet_id=1), None]
    assert [v.rule for v in frames[1].violations] == [rules.SIZE_LIMIT]


@st.composite
def hostile_streams(draw: st.DrawFn) -> bytes:
    """Random bytes, valid packets, and headers declaring large sizes, in any order."""
    parts = draw(
        st.lists(
            st.one_of(
                st.binary(max_size=40),
                valid_packets.map(codec.encode),
                st.builds(
                    lambda first, size, tail: bytes((first,)) + codec.encode_remaining_length(size) + tail,
                    st.integers(0, 255),
                    st.integers(0, codec.MAX_REMAINING_LENGTH),
                    st.binary(max_size=20),
                ),
            ),
            max_size=8,
        )
    )
    return b"".join(parts)


bounds = st.one_of(st.integers(codec.MIN_MAX_PACKET_SIZE, 80), st.sampled_from([codec.DEFAULT_MAX_PACKET_SIZE]))


@SETTINGS
@given(
    data=hostile_streams(),
    direction=st.sampled_from(DIRECTIONS),
    bound=bounds,
    strict=st.booleans(),
    split=st.data(),
)
def test_any_bytes_in_any_pieces_under_any_bound_raise_only_codec_errors_and_never_exceed_the_bound(
    data: bytes, direction: str | None, bound: int, strict: bool, split: st.DataObject
) -> None:
    pieces = cut(data, split.draw(st.lists(st.integers(0, len(data)), max_size=12), label="cuts"))
    piece_kinds = split.draw(
        st.lists(st.sampled_from(list(KINDS.values())), min_size=len(pieces), max_size=len(pieces))
    )
    decoder = codec.StreamDecoder(direction, max_packet_size=bound, strict=strict)
    fed = 0
    frames: list[codec.Frame] = []
    for piece, kind in zip(pieces, piece_kinds, strict=True):
        fed += len(piece)
        try:
            frames += decoder.feed(kind(piece))
        except codec.CodecError as exc:
            # strict mode only, at a MUST-level rule; the decoder goes on with the rest of the bytes
            assert strict and isinstance(exc, codec.ProtocolViolation) and not rules.is_advisory(exc.rule)
        else:
            assert decoder.buffered <= bound
        assert decoder.offset + decoder.buffered == fed  # every byte fed is framed, skipped or held
    for _ in range(len(data) + 1):  # a strict close raises at each flawed frame left; called again, it goes on
        try:
            frames += decoder.close()
            break
        except codec.CodecError as exc:
            assert strict and isinstance(exc, codec.ProtocolViolation) and not rules.is_advisory(exc.rule)
    assert decoder.buffered == 0 and decoder.offset == len(data)
    for frame in frames:
        assert frame.packet is None or frame.length <= bound
    if not strict:
        whole = feed_all(codec.StreamDecoder(direction, max_packet_size=bound), [data])
        assert frames == whole  # the same frames whatever the split and the input types
        assert sum(f.length for f in frames) == len(data)


# ---------------------------------------------------------------------------------------------------------------
# Linear framing: the work of each byte fed is bounded, however small the pieces
# ---------------------------------------------------------------------------------------------------------------


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


def publish_of(size: int) -> bytes:
    """A PUBLISH of about ``size`` bytes."""
    return codec.encode(codec.Publish(topic="big", payload=bytes(size)))


@pytest.mark.parametrize(
    ("size", "piece", "count"),
    [(64 * KIB, 1, 1), (MIB, 100, 1), (MIB, 1448, 1), (MIB, 64 * KIB, 1), (256 * KIB, 1448, 8)],
    ids=["64KiB-in-1-byte-pieces", "1MiB-in-100-byte", "1MiB-in-1448-byte", "1MiB-in-64KiB", "8x256KiB-in-1448-byte"],
)
def test_a_large_packet_fed_in_small_pieces_costs_a_bounded_multiple_of_its_bytes(
    size: int, piece: int, count: int
) -> None:
    wire = publish_of(size) * count
    pieces = [wire[pos : pos + piece] for pos in range(0, len(wire), piece)]
    decoder = codec.StreamDecoder("client")
    allocated, frames = allocated_while_feeding(decoder, pieces)
    assert [f.length for f in frames] == [len(wire) // count] * count
    assert not [f for f in frames if f.violations]
    # Joining the packet once and slicing its payload: about 2x, plus a few small objects per call (the list
    # returned); a rebuild per call: some 360x for 1 MiB in 1,448-byte pieces.
    assert allocated <= 4 * len(wire) + PER_CALL * len(pieces), f"{allocated:,} bytes allocated for {len(wire):,}"


def test_an_incomplete_packet_grows_by_exactly_what_each_piece_brings() -> None:
    wire = publish_of(200 * KIB)
    decoder = codec.StreamDecoder("client")
    for pos in range(0, len(wire) - 1448, 1448):
        assert decoder.feed(wire[pos : pos + 1448]) == []
        assert (decoder.buffered, decoder.offset) == (pos + 1448, 0)
    frames = decoder.feed(wire[pos + 1448 :])
    assert [(f.offset, f.raw) for f in frames] == [(0, wire)]
    assert decoder.buffered == 0


def test_a_packet_declaring_256_mb_fed_in_small_pieces_is_skipped_with_work_bounded_by_the_bytes_fed() -> None:
    header = b"\x30" + codec.encode_remaining_length(codec.MAX_REMAINING_LENGTH)
    pieces = [*[bytes((byte,)) for byte in header], *[bytes(1448)] * 2000]
    decoder = codec.StreamDecoder("client", max_packet_size=MIB)
    allocated, frames = allocated_while_feeding(decoder, pieces)
    fed = sum(map(len, pieces))
    assert frames == [] and decoder.buffered == 0 and decoder.offset == fed
    assert allocated <= 4 * fed + PER_CALL * len(pieces)
    closed = decoder.close()
    assert [v.rule for f in closed for v in f.violations] == [rules.SIZE_LIMIT, rules.TRUNCATED]
    assert (closed[0].offset, closed[0].length) == (0, fed)
