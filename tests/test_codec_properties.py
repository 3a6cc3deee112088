"""Properties of the codec, checked with hypothesis over generated packets and bytes.

Invariant (the fuzz contract, as h11's fuzz/afl-server.py states its own): for ANY input bytes, in any direction
and fed in any pieces, audit-mode decoding raises nothing at all and strict decoding raises nothing but
``codec.CodecError`` (in practice ``ProtocolViolation`` for a MUST-level rule); and the frames returned tile the
input: the first starts at offset 0, each starts where the previous one ended (offset == previous offset +
previous length), none is empty, and their lengths sum to exactly ``len(data)``.

Beside it: decode(encode(p)) == [p] without a violation for every valid packet; ``encode`` refuses exactly the
packets whose bytes decode with a MUST-level violation; the frames do not depend on how the stream is split; and
a packet declared huge is skipped in memory bounded by ``max_packet_size``.
"""

from __future__ import annotations

import collections
import itertools
import tracemalloc

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec import rules

from .strategies import DIRECTIONS, any_packets, valid_packets, valid_packets_with_sender

SETTINGS = settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
MIB = 1 << 20

#: Rules an over-long string is refused with, even with validate=False (no length prefix can describe it).
MAX_LENGTH_RULES = frozenset({rules.STRING_MAX_LENGTH, rules.TOPIC_MAX_LENGTH})


# ---------------------------------------------------------------------------------------------------------------
# Oracles and helpers
# ---------------------------------------------------------------------------------------------------------------


def _wire_length(text: str) -> int:
    """UTF-8 length, counting a PEP 383 escape (U+DC80..U+DCFF) as the one byte it stands for."""
    return sum(1 if 0xDC80 <= ord(c) <= 0xDCFF else len(c.encode("utf-8", "surrogatepass")) for c in text)


def unrepresentable(packet: codec.Packet) -> str | None:
    """Why the wire cannot hold ``packet`` at all (a field too wide for its bytes), or None when it can."""
    texts: list[str] = []
    binaries: list[bytes] = []
    widths: list[tuple[int | None, int]] = []  # (value, bits)
    match packet:
        case codec.Connect():
            texts += [packet.protocol_name, packet.client_id]
            widths += [(packet.protocol_level, 8), (packet.keep_alive, 16), (packet.raw_connect_flags, 8)]
            if packet.will is not None:
                texts.append(packet.will.topic)
                binaries.append(packet.will.message)
                widths.append((packet.will.qos, 2))
            if packet.username is not None:
                texts.append(packet.username)
            if packet.password is not None:
                binaries.append(packet.password)
        case codec.Connack():
            widths += [(packet.raw_ack_flags, 8), (packet.return_code, 8)]
        case codec.Publish():
            texts.append(packet.topic)
            widths += [(packet.qos, 2), (packet.packet_id, 16)]
        case codec.Puback() | codec.Pubrec() | codec.Pubrel() | codec.Pubcomp() | codec.Unsuback():
            widths.append((packet.packet_id, 16))
        case codec.Subscribe():
            widths.append((packet.packet_id, 16))
            for sub in packet.subscriptions:
                texts.append(sub.topic_filter)
                widths.append((sub.raw_options, 8) if sub.raw_options is not None else (sub.qos, 2))
        case codec.Suback():
            widths.append((packet.packet_id, 16))
            widths += [(code, 8) for code in packet.return_codes]
        case codec.Unsubscribe():
            widths.append((packet.packet_id, 16))
            texts += packet.topic_filters
    for value, bits in widths:
        if value is not None and not 0 <= value < 1 << bits:
            return f"{value} does not fit in {bits} bits"
    for text in texts:
        if _wire_length(text) > 0xFFFF:
            return f"a {_wire_length(text)}-byte string"
    for raw in binaries:
        if len(raw) > 0xFFFF:
            return f"a {len(raw)}-byte binary field"
    return None


representable_packets = any_packets.filter(lambda p: unrepresentable(p) is None)


def must_level(violations: list[codec.Violation] | tuple[codec.Violation, ...]) -> list[codec.Violation]:
    return [v for v in violations if not rules.is_advisory(v.rule)]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def feed_pieces(pieces: list[bytes], direction: str | None, **options: object) -> list[codec.Frame]:
    decoder = codec.StreamDecoder(direction, **options)  # type: ignore[arg-type]
    frames: list[codec.Frame] = []
    for piece in pieces:
        frames += decoder.feed(piece)
    return frames + decoder.close()


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def assert_frames_tile(frames: list[codec.Frame] | tuple[codec.Frame, ...], data: bytes) -> None:
    position = 0
    for frame in frames:
        assert frame.offset == position, f"gap or overlap before {frame}"
        assert frame.length > 0
        covered = data[position : position + frame.length]
        assert len(covered) == frame.length, f"{frame} runs past the end of the input"
        if frame.packet is not None:
            assert frame.raw == covered
        else:  # unframeable and oversized runs keep only their first bytes as evidence
            assert frame.raw and covered.startswith(frame.raw)
        position += frame.length
    assert position == len(data)


@st.composite
def packet_streams(draw: st.DrawFn) -> tuple[list[bytes], bytes]:
    """Encodings (validate=False) of 0-5 arbitrary packets, and optional trailing garbage."""
    packets = draw(st.lists(representable_packets, max_size=5))
    garbage = draw(st.just(b"") | st.binary(min_size=1, max_size=24))
    return [codec.encode(p, validate=False) for p in packets], garbage


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    """Valid packets' bytes, then a few byte edits: overwrite, insert, delete, truncate."""
    data = bytearray(b"".join(codec.encode(p) for p in draw(st.lists(valid_packets, min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["overwrite", "insert", "delete", "truncate"]))
        if edit == "overwrite":
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]) | st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 4))]
        else:
            del data[at:]
    return bytes(data)


fuzz_inputs = st.one_of(st.binary(max_size=300), mutated_streams())


def _cuts(data: st.DataObject, length: int) -> list[int]:
    return data.draw(st.lists(st.integers(0, length), max_size=10), label="cuts")


# ---------------------------------------------------------------------------------------------------------------
# 1. Round trip of valid packets
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(packet_and_sender=valid_packets_with_sender())
def test_decode_of_encode_is_identity_for_every_valid_packet(packet_and_sender: tuple[codec.Packet, str]) -> None:
    packet, sender = packet_and_sender
    wire = codec.encode(packet)
    assert codec.encode(packet, direction=sender) == wire
    decoded = codec.decode(wire, sender)
    assert decoded.packets == [packet]
    assert decoded.violations == []
    assert [(f.offset, f.length, f.raw) for f in decoded.frames] == [(0, len(wire), wire)]


# ---------------------------------------------------------------------------------------------------------------
# 2. encode refuses exactly what decode flags
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(packet=any_packets, direction=st.sampled_from(DIRECTIONS))
def test_encode_refuses_a_packet_exactly_when_its_bytes_decode_with_a_must_level_violation(
    packet: codec.Packet, direction: str | None
) -> None:
    if unrepresentable(packet) is not None:
        # Refused either way, and only as "cannot be written", never as some other rule.
        event("unrepresentable")
        for validate in (False, True):
            with pytest.raises((codec.EncodeError, codec.ProtocolViolation)) as refused:
                codec.encode(packet, validate=validate, direction=direction)
            if isinstance(refused.value, codec.ProtocolViolation):
                assert refused.value.rule in MAX_LENGTH_RULES
        return
    wire = codec.encode(packet, validate=False)
    decoded = codec.decode(wire, direction)
    reported = {v.rule for v in must_level(decoded.violations)}
    if isinstance(packet, codec.Publish) and packet.qos == 0 and packet.packet_id is not None:
        reported.add(rules.QOS0_NO_PACKET_ID)  # the id would read as payload: only the encoder can see it
    if reported:
        event("refused")
        with pytest.raises(codec.ProtocolViolation) as refused:
            codec.encode(packet, direction=direction)
        assert refused.value.rule in reported
    elif decoded.packets == [packet]:
        event("accepted")
        assert codec.encode(packet, direction=direction) == wire
    else:
        # Valid bytes that read back as another packet (raw_flags equal to the required flags, escaped bytes
        # that spell well-formed UTF-8, ...): the only EncodeError allowed for a representable packet.
        event("read-back mismatch")
        assert len(decoded.packets) == 1
        with pytest.raises(codec.EncodeError):
            codec.encode(packet, direction=direction)


# ---------------------------------------------------------------------------------------------------------------
# 3. Split invariance
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(stream=packet_streams(), direction=st.sampled_from(DIRECTIONS), data=st.data())
def test_stream_frames_are_the_same_whole_byte_by_byte_and_split_at_random_points(
    stream: tuple[list[bytes], bytes], direction: str | None, data: st.DataObject
) -> None:
    encodings, garbage = stream
    wire = b"".join(encodings) + garbage
    whole = feed_pieces([wire], direction)
    assert feed_pieces(bytewise(wire), direction) == whole
    assert feed_pieces(split_at(wire, _cuts(data, len(wire))), direction) == whole
    assert_frames_tile(whole, wire)
    offset = 0
    for frame, encoding in zip(whole, encodings, strict=False):
        assert (frame.offset, frame.raw) == (offset, encoding)
        assert frame.packet is not None
        offset += len(encoding)


def test_violation_offsets_count_stream_bytes_whatever_the_split() -> None:
    # Regression: readers count offsets in the decoder's internal buffer; findings must count stream bytes.
    first = codec.encode(codec.Pingreq())
    empty_topic = codec.encode(codec.Publish(topic="", payload=b"x"), validate=False)
    expected = [(rules.TOPIC_NOT_EMPTY, len(first) + 2)]  # the topic's length prefix follows a 2-byte header
    whole = codec.decode(first + empty_topic, "client")
    assert [(v.rule, v.offset) for v in whole.violations] == expected
    split = feed_pieces([first, empty_topic], "client")
    assert [(v.rule, v.offset) for f in split for v in f.violations] == expected


def test_frames_after_a_five_byte_remaining_length_do_not_depend_on_how_the_input_is_split() -> None:
    # Regression: the unframeable tail is one frame returned by close(), however the bytes arrived.
    wire = codec.encode(codec.Pingreq()) + b"\x30\xff\xff\xff\xff\x01abc"
    whole = feed_pieces([wire], "client")
    assert feed_pieces(bytewise(wire), "client") == whole


def test_oversized_packet_frame_does_not_depend_on_how_the_input_is_split() -> None:
    # Regression: the evidence of a skipped oversized packet is its first bytes, however they arrived.
    wire = codec.encode(codec.Publish(topic="a", payload=bytes(100)))
    whole = feed_pieces([wire], "client", max_packet_size=50)
    assert [v.rule for f in whole for v in f.violations] == [rules.SIZE_LIMIT]
    assert feed_pieces(bytewise(wire), "client", max_packet_size=50) == whole


@SETTINGS
@given(data=fuzz_inputs, direction=st.sampled_from(DIRECTIONS), split=st.data())
def test_counting_from_any_piece_on_accounts_for_every_byte_and_packet_decoding_would_give(
    data: bytes, direction: str | None, split: st.DataObject
) -> None:
    """A decoder switched to counting (the prober's, once a flooding broker filled a connection's evidence) frames
    exactly as one that decodes: the frames it still returns, the packets it counted by type and their bytes add up
    to every byte fed, and the whole packets it counted are those decoding returned, type for type."""
    pieces = split_at(data, _cuts(split, len(data)))
    switch = split.draw(st.integers(0, len(pieces)), label="switch")
    decoded = feed_pieces(pieces, direction, max_packet_size=64)
    decoder = codec.StreamDecoder(direction, max_packet_size=64)
    frames: list[codec.Frame] = []
    counted: collections.Counter[int] = collections.Counter()
    counted_bytes = 0
    for index, piece in enumerate(pieces):
        if index == switch:
            decoder.count_only()
        frames += decoder.feed(piece)
        kinds, size = decoder.take_counted()
        counted.update(kinds)
        counted_bytes += size
    frames += decoder.close()
    assert decoder.take_counted() == ({}, 0)
    assert sum(frame.length for frame in frames) + counted_bytes == len(data)
    returned = {(frame.offset, frame.length) for frame in frames}
    skipped = [frame for frame in decoded if (frame.offset, frame.length) not in returned]
    assert sum(frame.length for frame in skipped) == counted_bytes
    assert collections.Counter(frame.raw[0] >> 4 for frame in skipped) == counted
    assert all(frame.packet is not None or frame.violations for frame in skipped)
    assert not counted or switch < len(pieces)
    event("packets counted" if counted else "nothing counted")


# ---------------------------------------------------------------------------------------------------------------
# 4. Fuzz: only the codec's own errors, frames tile the input
# ---------------------------------------------------------------------------------------------------------------


@SETTINGS
@given(data=fuzz_inputs)
def test_audit_decode_of_any_bytes_raises_nothing_and_its_frames_tile_the_input(data: bytes) -> None:
    for direction in DIRECTIONS:
        assert_frames_tile(codec.decode(data, direction).frames, data)


@SETTINGS
@given(data=fuzz_inputs)
def test_strict_decode_of_any_bytes_raises_only_a_must_level_protocol_violation(data: bytes) -> None:
    for direction in DIRECTIONS:
        try:
            codec.decode(data, direction, strict=True)
        except codec.CodecError as exc:
            assert isinstance(exc, codec.ProtocolViolation)
            assert not rules.is_advisory(exc.rule)
            assert exc.violation in exc.violations


@SETTINGS
@given(data=fuzz_inputs, direction=st.sampled_from(DIRECTIONS), split=st.data())
def test_stream_decoder_fed_any_bytes_in_any_pieces_raises_only_codec_errors(
    data: bytes, direction: str | None, split: st.DataObject
) -> None:
    pieces = split_at(data, _cuts(split, len(data)))
    assert_frames_tile(feed_pieces(pieces, direction), data)
    decoder = codec.StreamDecoder(direction, strict=True)
    try:
        for piece in pieces:
            decoder.feed(piece)
        decoder.close()
    except codec.CodecError as exc:
        assert isinstance(exc, codec.ProtocolViolation)
        assert not rules.is_advisory(exc.rule)
        assert exc.frames and exc.frames[-1].violations == exc.violations


@SETTINGS
@given(stream=packet_streams(), direction=st.sampled_from(DIRECTIONS))
def test_strict_decode_of_whole_packets_raises_at_the_first_frame_audit_mode_flags(
    stream: tuple[list[bytes], bytes], direction: str | None
) -> None:
    wire = b"".join(stream[0])  # whole packets only: truncation has its own (failing) test below
    audit = codec.decode(wire, direction)
    flagged = [f for f in audit.frames if must_level(f.violations)]
    if not flagged:
        assert codec.decode(wire, direction, strict=True).frames == audit.frames
        return
    with pytest.raises(codec.ProtocolViolation) as raised:
        codec.decode(wire, direction, strict=True)
    first = flagged[0]
    assert raised.value.violation == must_level(first.violations)[0]
    assert raised.value.violations == first.violations
    assert raised.value.packet == first.packet


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(codec.encode(codec.Publish(topic="a/b", payload=b"xyz"))[:-1], id="ends-inside-the-body"),
        pytest.param(b"\x30", id="ends-inside-the-fixed-header"),
        pytest.param(b"\x30\xff", id="ends-inside-the-remaining-length"),
    ],
)
def test_strict_decode_raises_on_a_truncated_packet(wire: bytes) -> None:
    # [MQTT-2.2.3-truncated] is MUST-level, so strict mode raises for it at close().
    assert [v.rule for v in codec.decode(wire, "client").violations] == [rules.TRUNCATED]
    with pytest.raises(codec.ProtocolViolation) as raised:
        codec.decode(wire, "client", strict=True)
    assert raised.value.rule == rules.TRUNCATED


@pytest.mark.parametrize("packet_type_value", [-1, 16])
def test_encode_of_a_reserved_packet_whose_type_does_not_fit_in_four_bits_raises_encode_error(
    packet_type_value: int,
) -> None:
    # Only the codec's own errors escape, even for a hand-made packet type outside 0..15.
    with pytest.raises(codec.EncodeError):
        codec.encode(codec.ReservedPacket(packet_type_value=packet_type_value), validate=False)


# ---------------------------------------------------------------------------------------------------------------
# 5. Memory bound
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header_alone", [False, True], ids=["header-with-data", "header-byte-by-byte"])
def test_packet_declaring_256_mb_is_skipped_without_buffering_more_than_max_packet_size(header_alone: bool) -> None:
    header = b"\x30" + codec.encode_remaining_length(codec.MAX_REMAINING_LENGTH)
    chunk = bytes(64 * 1024)
    first = [*bytewise(header), chunk] if header_alone else [header + chunk]
    pieces = first + [chunk] * 127  # 8 MiB after the header
    decoder = codec.StreamDecoder("client", max_packet_size=MIB)
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
    fed = sum(map(len, pieces))
    assert decoder.offset == fed
    assert [v.rule for f in frames for v in f.violations].count(rules.SIZE_LIMIT) == 1
    assert [f.packet for f in frames] == [None]
    assert (frames[0].offset, frames[0].length) == (0, fed)


def test_framing_resumes_after_an_oversized_packet_is_skipped() -> None:
    oversized = codec.encode(codec.Publish(topic="big", payload=bytes(2 * MIB)))
    wire = oversized + codec.encode(codec.Pingreq())
    decoder = codec.StreamDecoder("client", max_packet_size=MIB)
    frames: list[codec.Frame] = []
    for start in range(0, len(wire), 64 * 1024):
        frames += decoder.feed(wire[start : start + 64 * 1024])
        assert decoder.buffered <= MIB
    frames += decoder.close()
    assert [f.packet for f in frames] == [None, codec.Pingreq()]
    assert [v.rule for v in frames[0].violations] == [rules.SIZE_LIMIT]
    assert (frames[0].length, frames[1].offset) == (len(oversized), len(oversized))


@pytest.mark.parametrize(
    ("max_packet_size", "expected"),
    [
        (codec.DEFAULT_MAX_PACKET_SIZE, {rules.SIZE_LIMIT, rules.TRUNCATED}),
        (codec.MAX_REMAINING_LENGTH + 5, {rules.TRUNCATED}),
    ],
    ids=["above-the-bound", "within-the-bound"],
)
def test_decode_of_a_short_input_declaring_200_mb_does_not_allocate_it(
    max_packet_size: int, expected: set[str]
) -> None:
    data = b"\x30" + codec.encode_remaining_length(200_000_000) + b"\x00\x03a/b" + bytes(1000)
    tracemalloc.start()
    try:
        decoded = codec.decode(data, "client", max_packet_size=max_packet_size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MIB
    assert {v.rule for v in decoded.violations} == expected
    assert decoded.packets == []
    assert_frames_tile(decoded.frames, data)


def test_every_character_the_suspect_scan_finds_is_non_printable() -> None:
    """check_string skips the scan for printable text; that is only sound if the scan never matches printable."""
    from mqttaudit.codec.validators import _SUSPECT

    matched = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and _SUSPECT.search(chr(cp).encode())]
    assert len(matched) == 32 + 1 + 32 + 32 + 34  # C0, DEL, C1, U+FDD0..U+FDEF, two per plane
    assert not [cp for cp in matched if chr(cp).isprintable()]


@given(value=st.integers(min_value=0, max_value=codec.MAX_REMAINING_LENGTH))
def test_the_size_of_a_variable_byte_integer_is_the_length_of_its_encoding(value: int) -> None:
    from mqttaudit.codec.remaining_length import encode_remaining_length, encoded_size

    assert encoded_size(value) == len(encode_remaining_length(value))
