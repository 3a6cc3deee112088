"""Topic Names and Topic Filters as text (section 4.7), judged by the codec's own checks."""

from __future__ import annotations

import pytest

from mqttaudit import codec, topics
from mqttaudit.codec import rules


@pytest.mark.parametrize("name", ["a", "/", "a/b", "/a//b/", "$SYS/broker", " ", "k\u00fcche/\U0001f600", "a" * 65535])
def test_valid_topic_names_pass(name: str) -> None:
    assert topics.topic_name_violations(name) == []
    topics.validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("", [rules.TOPIC_NOT_EMPTY]),
        ("sensor/#", [rules.TOPIC_NAME_WILDCARDS]),
        ("+", [rules.TOPIC_NAME_WILDCARDS]),
        ("a\x00b", [rules.UTF8_NO_NULL, rules.TOPIC_NO_NULL]),
        ("a\ud800", [rules.UTF8_WELL_FORMED]),
        ("a" * 65536, [rules.TOPIC_MAX_LENGTH]),
    ],
)
def test_invalid_topic_names_name_their_rule(name: str, expected: list[str]) -> None:
    assert [v.rule for v in topics.topic_name_violations(name)] == expected
    assert not topics.is_valid_topic_name(name)
    with pytest.raises(topics.InvalidTopic) as caught:
        topics.validate_topic_name(name)
    assert caught.value.rule == expected[0]


@pytest.mark.parametrize("topic_filter", ["#", "+", "a/#", "+/+", "/+/", "a/+/c/#", "$SYS/#", "a//b", "sport/tennis/+"])
def test_valid_topic_filters_pass(topic_filter: str) -> None:
    assert topics.topic_filter_violations(topic_filter) == []


@pytest.mark.parametrize(
    ("topic_filter", "expected", "offset"),
    [
        ("", [rules.TOPIC_NOT_EMPTY], 0),
        ("sport/tennis#", [rules.MULTI_LEVEL_WILDCARD], 12),
        ("sport/tennis/#/ranking", [rules.MULTI_LEVEL_WILDCARD], 13),
        ("#/a", [rules.MULTI_LEVEL_WILDCARD], 0),
        ("sport+", [rules.SINGLE_LEVEL_WILDCARD], 5),
        ("a/+b/c", [rules.SINGLE_LEVEL_WILDCARD], 2),
        ("a\x00", [rules.UTF8_NO_NULL, rules.TOPIC_NO_NULL], 1),
    ],
)
def test_invalid_topic_filters_name_their_rule_and_byte(topic_filter: str, expected: list[str], offset: int) -> None:
    violations = topics.topic_filter_violations(topic_filter)
    assert [v.rule for v in violations] == expected
    assert violations[0].offset == offset
    assert not topics.is_valid_topic_filter(topic_filter)


def test_control_characters_are_warnings_not_errors() -> None:
    assert [v.rule for v in topics.topic_name_violations("a\tb")] == [rules.UTF8_CONTROL_CHARACTERS]
    assert topics.is_valid_topic_name("a\tb")


def test_topic_text_and_packet_judgement_agree() -> None:
    for name in ["", "a/#", "ok/topic", "x\x00"]:
        packet = codec.Publish(topic=name, qos=0)
        in_packet = {v.rule for v in codec.decode(codec.encode(packet, validate=False), "client").violations}
        as_text = {v.rule for v in topics.topic_name_violations(name)}
        assert as_text <= in_packet
        assert in_packet - as_text <= {rules.TOPIC_NAME_NO_WILDCARDS}


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="dialect"):
        topics.topic_name_violations("a", dialect="kafka")
