"""The MQTT 5.0 vector table drives both directions: each valid vector is encoded and decoded whole, byte by
byte, as every strict prefix and with trailing bytes; each invalid vector must report exactly its rules at its
offsets, the same whole and byte by byte, and its strict prefixes only the truncation."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec import properties as props
from mqttaudit.codec import reason_codes, rules

from .vectors_5 import (
    CARRIERS,
    ENCODE_ONLY,
    FRAMING,
    INVALID,
    OUT_OF_RANGE,
    PROPERTY_PLACES,
    REASON_CARRIERS,
    SAMPLES,
    VALID,
    Expected,
)

V5 = "5"
TRUNCATED = "MQTT-2.1.4-truncated"
valid_ids = [name for name, *_ in VALID]
invalid_ids = [name for name, *_ in INVALID]
whole_invalid = [vector for vector in INVALID if vector[0] not in FRAMING]
whole_invalid_ids = [name for name, *_ in whole_invalid]


def found(violations: list[codec.Violation] | tuple[codec.Violation, ...]) -> Expected:
    return [(v.rule, v.offset) for v in violations]


def feed_in_pieces(data: bytes, sender: str, sizes: int, **options: int) -> list[codec.Frame]:
    decoder = codec.StreamDecoder(sender, version=V5, **options)
    frames: list[codec.Frame] = []
    for start in range(0, len(data), sizes):
        frames += decoder.feed(data[start : start + sizes])
    return frames + decoder.close()


def declared_length(wire: bytes) -> tuple[int, int]:
    """(Remaining Length, where the body starts) read without the codec, for checking the table itself."""
    value, shift, pos = 0, 0, 1
    while True:
        byte = wire[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


# ---------------------------------------------------------------------------------------------------------------
# The table itself
# ---------------------------------------------------------------------------------------------------------------


def test_vector_names_are_unique() -> None:
    assert len(set(valid_ids)) == len(valid_ids)
    assert len(set(invalid_ids)) == len(invalid_ids)


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_declares_exactly_its_own_length(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    length, body = declared_length(wire)
    assert body + length == len(wire)


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), whole_invalid, ids=whole_invalid_ids)
def test_invalid_vector_declares_exactly_its_own_length(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    length, body = declared_length(wire)
    assert body + length == len(wire)


def test_every_property_has_a_sample_and_every_place_a_carrier() -> None:
    assert set(SAMPLES) == {p.identifier for p in props.PROPERTIES}
    assert len(props.PROPERTIES) == 27
    assert {place for p in props.PROPERTIES for place in p.packets} == set(CARRIERS)
    assert props.WILL in CARRIERS  # the Will Properties are a place of their own


def test_every_property_in_every_place_it_may_appear_is_a_valid_vector() -> None:
    places = {(p.identifier, place) for p in props.PROPERTIES for place in p.packets}
    assert set(PROPERTY_PLACES) == places
    carried = set()
    for _, _, packet, _ in VALID:
        held = packet.will.properties if isinstance(packet, codec.Connect) and packet.will else ()
        for prop in (getattr(packet, "properties", None) or ()) + held:
            carried.add(prop.identifier)
    assert carried == set(SAMPLES)
    # every property except User Property (allowed everywhere) also has a place where it may not appear
    misplaced = {name for name, *_ in INVALID if name.startswith("property-0x") and "-value-" not in name}
    assert len(misplaced) == 26


def test_every_property_bounded_beyond_its_data_type_has_an_out_of_range_vector_in_every_place() -> None:
    widest = {"Byte": 0xFF, "Two Byte Integer": 0xFFFF, "Four Byte Integer": 0xFFFFFFFF}
    bounded = {
        p.identifier
        for p in props.PROPERTIES
        if p.minimum > 0 or (p.maximum is not None and p.maximum < widest.get(p.data_type.value, 268_435_455))
    }
    assert set(OUT_OF_RANGE) == bounded
    for identifier in bounded:
        for place in props.BY_ID[identifier].packets:
            assert (
                f"property-0x{identifier:02x}-value-{OUT_OF_RANGE[identifier][0]}-in-{props.where(place)}"
                in invalid_ids
            )


def test_each_packet_types_reason_codes_are_bound_by_its_own_5_0_statement() -> None:
    # Written out from the 5.0 text, independently of the identity table the disallowed-code vectors use.
    statements = {
        "CONNACK": "MQTT-3.2.2-8",
        "PUBACK": "MQTT-3.4.2-1",
        "PUBREC": "MQTT-3.5.2-1",
        "PUBREL": "MQTT-3.6.2-1",
        "PUBCOMP": "MQTT-3.7.2-1",
        "SUBACK": "MQTT-3.9.3-2",
        "UNSUBACK": "MQTT-3.11.3-2",
        "DISCONNECT": "MQTT-3.14.2-1",
        "AUTH": "MQTT-3.15.2-1",
    }
    for name, _, _, expected in [v for v in INVALID if "-not-in-" in v[0]]:
        assert expected == [(statements[name.rsplit("-", 1)[1]], expected[0][1])], name
    assert len([n for n in invalid_ids if "-not-in-" in n]) == 2 * len(statements)


def test_every_reason_code_of_every_packet_type_has_a_valid_vector() -> None:
    assert set(REASON_CARRIERS) == set(reason_codes.RULES)
    for packet_type, allowed in reason_codes.ALLOWED.items():
        for code in allowed:
            where = props.where(packet_type)
            assert any(name.startswith(f"reason-code-0x{code:02x}-") and f"-in-{where}-" in name for name in valid_ids)


# ---------------------------------------------------------------------------------------------------------------
# Valid vectors
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_packet_encodes_to_its_vector(name: str, sender: str, packet: codec.Packet, wire: bytes) -> None:
    assert codec.encode(packet, version=V5, direction=sender) == wire


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_decodes_whole_to_its_packet_without_violation(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    result = codec.decode(wire, sender, version=V5)
    assert result.packets == [packet]
    assert result.violations == []
    assert result.frames[0].raw == wire


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_decodes_the_same_fed_byte_by_byte(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    frames = feed_in_pieces(wire, sender, 1)
    assert [f.packet for f in frames] == [packet]
    assert frames == list(codec.decode(wire, sender, version=V5).frames)


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_every_strict_prefix_of_a_valid_vector_needs_more_data(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    for cut in range(1, len(wire)):
        decoder = codec.StreamDecoder(sender, version=V5)
        assert decoder.feed(wire[:cut]) == [], f"prefix of {cut} bytes produced a frame"
        assert decoder.buffered == cut
        closed = decoder.close()
        assert found(closed[0].violations) == [(TRUNCATED, 0)]
        assert len(closed) == 1 and closed[0].packet is None and closed[0].length == cut


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_with_trailing_bytes_decodes_the_packet_then_waits(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    decoder = codec.StreamDecoder(sender, version=V5)
    frames = decoder.feed(wire + b"\x30")
    assert [f.packet for f in frames] == [packet]
    assert frames[0].violations == ()
    assert decoder.buffered == 1 and decoder.offset == len(wire)


@pytest.mark.parametrize(("name", "sender", "packet", "wire"), VALID, ids=valid_ids)
def test_valid_vector_read_as_learned_from_a_5_0_connect_decodes_the_same(
    name: str, sender: str, packet: codec.Packet, wire: bytes
) -> None:
    connect = bytes.fromhex("10 0d 0004 4d515454 05 02 0000 00 0000")
    client = codec.StreamDecoder("client", version=None)
    assert [f.packet for f in client.feed(connect)] == [codec.Connect(protocol_level=5)]
    if sender == "client":
        frames = client.feed(wire) + client.close()
    else:
        server = codec.StreamDecoder("server", peer=client)
        frames = server.feed(wire) + server.close()
    assert [f.packet for f in frames] == [packet]
    assert [f.violations for f in frames] == [()]


# ---------------------------------------------------------------------------------------------------------------
# Invalid vectors
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_invalid_vector_reports_exactly_its_rules_at_their_offsets(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    assert found(codec.decode(wire, sender, version=V5, max_packet_size=1024).violations) == expected


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_invalid_vector_reports_the_same_fed_byte_by_byte(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    frames = feed_in_pieces(wire, sender, 1, max_packet_size=1024)
    assert found([v for f in frames for v in f.violations]) == expected


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), INVALID, ids=invalid_ids)
def test_every_strict_prefix_of_an_invalid_vector_reports_only_the_truncation(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    if name == "size-limit":  # a prefix that declares an oversized packet is skipped as it arrives
        wire = wire[:2]
    for cut in range(1, len(wire)):
        decoder = codec.StreamDecoder(sender, version=V5)
        assert decoder.feed(wire[:cut]) == [], f"prefix of {cut} bytes produced a frame"
        closed = decoder.close()
        assert [found(f.violations) for f in closed] == [[(TRUNCATED, 0)]]


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), whole_invalid, ids=whole_invalid_ids)
def test_invalid_vector_with_trailing_bytes_reports_its_rules_then_waits(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    decoder = codec.StreamDecoder(sender, version=V5)
    frames = decoder.feed(wire + b"\x30")
    assert len(frames) == 1 and found(frames[0].violations) == expected
    assert frames[0].packet is not None
    assert decoder.buffered == 1 and decoder.offset == len(wire)


@pytest.mark.parametrize(("name", "sender", "wire", "expected"), whole_invalid, ids=whole_invalid_ids)
def test_strict_decode_of_an_invalid_vector_raises_its_first_must_level_rule(
    name: str, sender: str, wire: bytes, expected: Expected
) -> None:
    errors = [(rule, offset) for rule, offset in expected if not rules.is_advisory(rule)]
    if not errors:
        assert found(codec.decode(wire, sender, version=V5, strict=True).violations) == expected
        return
    with pytest.raises(codec.ProtocolViolation) as raised:
        codec.decode(wire, sender, version=V5, strict=True)
    assert (raised.value.rule, raised.value.offset) == errors[0]


def test_every_rule_the_codec_claims_for_5_0_is_triggered_by_a_vector() -> None:
    triggered = {rule for *_, expected in INVALID for rule, _ in expected}
    assert codec.rules.CHECKED_5_0 - ENCODE_ONLY - triggered == set()
    assert triggered <= codec.rules.CHECKED_5_0  # no vector expects a rule the codec does not claim


def test_the_rules_only_the_encoder_sees_are_refused_under_their_5_0_ids() -> None:
    cases: list[tuple[codec.Packet, str]] = [
        (codec.Publish(topic="a", packet_id=3), "MQTT-2.2.1-2"),
        (codec.Publish(topic="a" * 0x10000), "MQTT-4.7.3-3"),
        (codec.Connect(protocol_level=5, client_id="c" * 0x10000), "MQTT-1.5.4-max-length"),
        (codec.Connect(protocol_level=5, username="u" * 0x10000), "MQTT-1.5.4-max-length"),
    ]
    for packet, rule in cases:
        with pytest.raises(codec.ProtocolViolation) as refused:
            codec.encode(packet, version=V5)
        assert refused.value.rule == rule, packet
    assert {rule for _, rule in cases} == ENCODE_ONLY


# ---------------------------------------------------------------------------------------------------------------
# Version: the same bytes read as 3.1.1 and as 5.0
# ---------------------------------------------------------------------------------------------------------------


def test_a_3_1_1_connack_read_as_5_0_lacks_its_property_length_and_is_clean_as_3_1_1() -> None:
    wire = bytes.fromhex("20 02 00 00")
    assert codec.decode(wire, "server", version="3.1.1").violations == []
    assert found(codec.decode(wire, "server", version=V5).violations) == [("MQTT-2.2.2-1", 4)]


def test_type_15_is_reserved_in_3_1_1_and_auth_in_5_0() -> None:
    wire = bytes.fromhex("f0 00")
    assert found(codec.decode(wire, "client", version="3.1.1").violations) == [(rules.RESERVED_PACKET_TYPE, 0)]
    assert codec.decode(wire, "client", version=V5).packets == [codec.Auth()]


def test_a_server_disconnect_is_a_direction_violation_in_3_1_1_only() -> None:
    wire = bytes.fromhex("e0 00")
    assert found(codec.decode(wire, "server", version="3.1.1").violations) == [(rules.PACKET_DIRECTION, 0)]
    assert codec.decode(wire, "server", version=V5).violations == []


def test_a_non_shortest_remaining_length_is_advisory_in_3_1_1_and_a_must_in_5_0() -> None:
    wire = bytes.fromhex("c0 80 00")
    assert codec.decode(wire, "client", version="3.1.1", strict=True).packets == [codec.Pingreq()]
    with pytest.raises(codec.ProtocolViolation) as raised:
        codec.decode(wire, "client", version=V5, strict=True)
    assert (raised.value.rule, raised.value.offset) == ("MQTT-1.5.5-1", 1)


def test_version_none_learns_5_0_from_the_connect_and_reads_what_follows_as_5_0() -> None:
    stream = b"".join(
        bytes.fromhex(part)
        for part in (
            "10 0f 0004 4d515454 05 02 003c 00 0002 6331",
            "30 07 0000 03 230003 70",
            "f0 00",
            "e0 01 04",
        )
    )
    learned = codec.decode(stream, "client", version=None)
    assert learned == codec.decode(stream, "client", version=V5)
    assert learned.violations == []
    assert [type(p) for p in learned.packets] == [codec.Connect, codec.Publish, codec.Auth, codec.Disconnect]


# ---------------------------------------------------------------------------------------------------------------
# What the first byte of an incomplete 5.0 packet already breaks
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sender", "data", "expected"),
    [
        ("client", "f1 05 00", ["MQTT-2.1.3-1", "MQTT-3.15.1-1"]),  # AUTH flags
        ("client", "00 05", ["MQTT-2.1.2-reserved-type"]),
        ("client", "20 03 00", ["MQTT-2.1.2-direction"]),
        ("server", "82 05 00", ["MQTT-2.1.2-direction"]),
        ("client", "62 80", []),  # a clean PUBREL whose Remaining Length is still arriving
        ("client", "f0 02 18", []),  # AUTH is a packet in 5.0
        ("server", "e0 02 8b", []),  # the server may send DISCONNECT in 5.0
    ],
)
def test_what_the_first_byte_of_an_incomplete_5_0_packet_breaks_is_named_by_5_0_ids(
    sender: str, data: str, expected: list[str]
) -> None:
    decoder = codec.StreamDecoder(sender, version=V5)
    assert decoder.feed(bytes.fromhex(data)) == []
    frame = decoder.waiting()
    got = [v.rule for v in frame.violations] if frame is not None else []
    assert got == expected
    if frame is not None:
        assert (frame.offset, frame.raw, frame.packet) == (0, bytes.fromhex(data), None)
