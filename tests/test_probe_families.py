"""The shape families and their negative controls, without a broker: each table dimension is covered, every shape
is its own case with its own bytes, every malformed shape breaks a rule and every control breaks none."""

from __future__ import annotations

import itertools

import pytest

from mqttaudit.codec import Direction, PacketType, Publish, StreamDecoder, Subscribe, Unsubscribe, decode
from mqttaudit.codec.validators import FIXED_LENGTH, REQUIRED_FLAGS
from mqttaudit.probe.case import CASES
from mqttaudit.probe.cases import accepted
from mqttaudit.probe.cases.malformed import (
    CLIENT_PACKETS,
    CONNECT_CUTS,
    FAMILIES,
    FILTER_CARRIERS,
    LEVEL_POSITIONS,
    ONLY,
    RESERVED_TYPE_SHAPES,
    STIMULI,
    UNSUPPORTED_LEVELS,
    WILDCARD_LEVELS,
    Stimulus,
    targeted,
)
from mqttaudit.probe.connection import client_frames
from mqttaudit.topics import is_valid_topic_filter, is_valid_topic_name, matches

CLIENT = Direction.FROM_CLIENT
BY_ID = {stimulus.case_id: stimulus for stimulus in STIMULI}
PREFIX = "mqttaudit/0a1b2c3d/family"


def first_bytes(stimulus_id: str) -> bytes:
    return BY_ID[stimulus_id].build("mqa" + "0" * 20, PREFIX)


def test_every_shape_is_a_case_of_its_family_with_bytes_of_its_own() -> None:
    assert len(BY_ID) == len(STIMULI)
    built = [stimulus.build("mqa" + "0" * 20, PREFIX) for stimulus in STIMULI]
    assert len(set(built)) == len(built), [s.case_id for s, b in zip(STIMULI, built, strict=True) if built.count(b) > 1]
    for stimulus in STIMULI:
        case = CASES[f"malformed/{stimulus.case_id}"]
        assert case.family == f"malformed/{stimulus.family}" and case.family_name == case.family
    assert [name for name, _title, _shapes in FAMILIES] == list(dict.fromkeys(s.family for s in STIMULI))


def test_every_reserved_flag_bit_of_every_client_packet_with_fixed_flags_is_a_shape() -> None:
    assert {PacketType.CONNECT, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE, PacketType.PUBREL} <= set(CLIENT_PACKETS)
    for packet_type, bit in itertools.product(CLIENT_PACKETS, range(4)):
        data = first_bytes(f"{packet_type.name.lower()}-flag-bit-{bit}")
        assert data[0] >> 4 == packet_type and data[0] & 0x0F == REQUIRED_FLAGS[packet_type] ^ (1 << bit)
        assert BY_ID[f"{packet_type.name.lower()}-flag-bit-{bit}"].as_connect is (packet_type is PacketType.CONNECT)
        # only the flags are wrong: the same bytes with the right flags decode cleanly
        fixed = bytes((data[0] & 0xF0 | REQUIRED_FLAGS[packet_type],)) + data[1:]
        assert not decode(fixed, CLIENT).violations, packet_type.name


def test_every_fixed_length_client_packet_is_a_shape_one_short_and_one_long() -> None:
    fixed = [t for t in CLIENT_PACKETS if t in FIXED_LENGTH]
    assert {PacketType.PUBACK, PacketType.PUBREL, PacketType.PINGREQ, PacketType.DISCONNECT} <= set(fixed)
    for packet_type in fixed:
        length = FIXED_LENGTH[packet_type][0]
        for size in (length - 1, length + 1):
            name = f"{packet_type.name.lower()}-length-{size}"
            if size < 0:
                assert name not in BY_ID
                continue
            data = first_bytes(name)
            assert data[0] >> 4 == packet_type and data[1] == size and len(data) == 2 + size


def test_reserved_types_are_shapes_whole_and_still_arriving() -> None:
    for value, (suffix, _title, rest) in itertools.product((0, 15), RESERVED_TYPE_SHAPES):
        data = first_bytes(f"reserved-type-{value}-{suffix}")
        assert data == bytes((value << 4,)) + bytes.fromhex(rest)
    # still arriving: nothing is framed, yet the probe records the first byte's offence at once
    for suffix in ("body-arriving", "length-arriving"):
        data = first_bytes(f"reserved-type-15-{suffix}")
        assert StreamDecoder(CLIENT).feed(data) == []
        frames, begun = client_frames(StreamDecoder(CLIENT), data)
        assert begun == 0 and [v.rule for v in frames[0].violations] == ["MQTT-2.2.1-reserved-type"]


def test_wildcards_sit_at_every_position_of_level_filter_and_packet() -> None:
    for (carrier, *_rest), (name, _level, positions) in itertools.product(FILTER_CARRIERS, WILDCARD_LEVELS):
        for position in positions:
            assert f"{carrier}-{name}-{position}-level" in BY_ID
        for place in ("before-a-good-filter", "after-a-good-filter"):
            assert f"{carrier}-{name}-middle-level-{place}" in BY_ID
    chars = {name.rsplit("-", 1)[0] for name, _level, _positions in WILDCARD_LEVELS if "char" in name}
    assert chars == {"plus-first", "plus-middle", "plus-last", "hash-first", "hash-middle", "hash-last"}
    for position in LEVEL_POSITIONS:
        if position == ONLY:  # a Topic Name of one level would leave the case's own topics
            assert not [case_id for case_id in BY_ID if case_id.startswith("publish-topic") and ONLY in case_id]
            continue
        assert f"publish-topic-plus-alone-{position}-level" in BY_ID
        assert f"publish-topic-hash-alone-{position}-level" in BY_ID


def test_a_wildcard_sharing_the_only_level_of_a_filter_has_shapes_of_its_own() -> None:
    # 'x#' with no '/' before the '#' (a broker that looks back for the separator finds none): aedes 1.2.0 grants
    # it while it closes on '<p>/x#'
    assert BY_ID["subscribe-hash-last-char-only-level"].data == bytes.fromhex("82 07 00 01 00 02 78 23 00")
    assert BY_ID["unsubscribe-hash-first-char-only-level"].data == bytes.fromhex("a2 06 00 02 00 02 23 78")
    only = [s for s in STIMULI if s.case_id.endswith(f"-{ONLY}-level")]
    assert len(only) == len(FILTER_CARRIERS) * sum(ONLY in positions for _name, _level, positions in WILDCARD_LEVELS)
    assert not [s.case_id for s in only if s.personal]  # the same bytes in every run: no prefix to put in them


@pytest.mark.parametrize("stimulus", [s for s in STIMULI if s.family == "wildcard-position"], ids=lambda s: s.case_id)
def test_each_wildcard_shape_holds_exactly_one_bad_filter_or_name(stimulus: Stimulus) -> None:
    (packet,) = decode(stimulus.build("mqa" + "0" * 20, PREFIX), CLIENT).packets
    if isinstance(packet, Publish):
        assert not is_valid_topic_name(packet.topic)
        return
    assert isinstance(packet, Subscribe | Unsubscribe)
    filters = (
        [s.topic_filter for s in packet.subscriptions] if isinstance(packet, Subscribe) else list(packet.topic_filters)
    )
    assert [is_valid_topic_filter(f) for f in filters].count(False) == 1, filters
    assert len(filters) == (1 if stimulus.case_id.endswith("-level") else 2)


def test_connect_shapes_cover_the_levels_and_the_cuts() -> None:
    for level in UNSUPPORTED_LEVELS:
        data = first_bytes(f"connect-protocol-level-{level}")
        assert data[8] == level  # the level is the only defect
        assert [v.rule for v in decode(data, CLIENT).violations] == ["MQTT-3.1.2-protocol-level"]
        assert targeted(BY_ID[f"connect-protocol-level-{level}"]) == ("MQTT-3.1.2-2",)
    assert 4 not in UNSUPPORTED_LEVELS and 5 not in UNSUPPORTED_LEVELS  # 3.1.1, and 5.0 a broker may speak
    for name, keep in CONNECT_CUTS:
        data = first_bytes(f"connect-cut-{name}")
        assert data[1] == keep and len(data) == 2 + keep


def test_every_malformed_case_can_fail() -> None:
    """A shape whose acceptance the judge finds nothing wrong with would be a case that cannot fail."""
    for stimulus in STIMULI:
        assert targeted(stimulus), stimulus.case_id


@pytest.mark.parametrize("row", accepted.FILTER_ROWS, ids=lambda row: row.name)
def test_every_filter_control_is_well_formed_and_matches_its_topic(row: accepted.FilterRow) -> None:
    topic_filter = row.topic_filter.format(p=PREFIX, rest=PREFIX.split("/", 1)[1])
    topic = row.topic.format(p=PREFIX, rest=PREFIX.split("/", 1)[1])
    assert is_valid_topic_filter(topic_filter) and is_valid_topic_name(topic)
    assert matches(topic_filter, topic)
    assert CASES[f"accepted/{row.name}"].statements == ("MQTT-3.8.4-1", "MQTT-4.5.0-1", "MQTT-3.3.2-3", "MQTT-3.10.4-4")


@pytest.mark.parametrize("row", accepted.CONNECT_ROWS, ids=lambda row: row.name)
def test_every_connect_control_is_a_well_formed_connect(row: accepted.ConnectRow) -> None:
    data = accepted.connect_bytes(row, "mqa" + "0" * 20, PREFIX)
    assert not decode(data, CLIENT).violations
    assert CASES[f"accepted/connect-{row.name}"].statements == ("MQTT-3.12.4-1",)
