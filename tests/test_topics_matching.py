"""Topic Filter / Topic Name matching (section 4.7), against the spec's own examples, and against an independent
regular-expression oracle for every filter and name hypothesis draws."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.topics import TopicIndex, dollar_rule_applies, matches, matches_but_for_dollar_rule

from .strategies import valid_topic_filters, valid_topic_names

# Examples of 4.7.1.2, 4.7.1.3, 4.7.2 and 4.7.3, as (filter, name, matches).
SPEC_EXAMPLES = [
    ("sport/tennis/player1/#", "sport/tennis/player1", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
    ("sport/#", "sport", True),
    ("#", "sport/tennis", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player2", True),
    ("sport/tennis/+", "sport/tennis/player1/ranking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    ("#", "$SYS/broker/clients", False),
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("ACCOUNTS", "Accounts", False),
    ("Accounts payable", "Accounts payable", True),
    ("/finance", "finance", False),
    ("+", "", True),
    ("a/b", "a/b/", False),
    ("#", "/", True),
]


@pytest.mark.parametrize(("topic_filter", "name", "expected"), SPEC_EXAMPLES)
def test_spec_examples(topic_filter: str, name: str, expected: bool) -> None:
    assert matches(topic_filter, name) is expected


def test_the_dollar_rule_only_blocks_filters_that_start_with_a_wildcard() -> None:
    assert dollar_rule_applies("#", "$SYS/x") and dollar_rule_applies("+/x", "$SYS/x")
    assert not dollar_rule_applies("$SYS/#", "$SYS/x") and not dollar_rule_applies("#", "SYS/x")
    assert matches_but_for_dollar_rule("#", "$SYS/x") and matches_but_for_dollar_rule("+/x", "$SYS/x")
    assert not matches_but_for_dollar_rule("+", "$SYS/x")  # would not match anyway: two levels


def test_misplaced_wildcards_compare_as_text() -> None:
    assert not matches("a/#/b", "a/x/b") and not matches("a+", "ab") and not matches("sport#", "sport")


def oracle(topic_filter: str, name: str, *, dollar_rule: bool = True) -> bool:
    """4.7 written as a regular expression: '+' is one level of any characters but '/', a last '#' is the parent
    level plus any levels below, and a '$' name is out of reach of a leading wildcard."""
    if dollar_rule and name.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    levels = topic_filter.split("/")
    pattern = "/".join("[^/]*" if level == "+" else re.escape(level) for level in levels if level != "#")
    if levels[-1] == "#":
        pattern = ".*" if len(levels) == 1 else pattern + "(/.*)?"
    return re.fullmatch(pattern, name, flags=re.DOTALL) is not None


_level = st.sampled_from(["a", "b", "", "$x", "ab"])
small_names = st.lists(_level, min_size=1, max_size=4).map("/".join)
small_filters = st.builds(
    lambda levels, tail: "/".join(levels + tail),
    st.lists(st.one_of(_level, st.just("+")), min_size=0, max_size=4),
    st.sampled_from([[], ["#"]]),
).filter(bool)


@given(small_filters, small_names)
def test_matcher_agrees_with_the_regular_expression_oracle_on_small_alphabets(topic_filter: str, name: str) -> None:
    assert matches(topic_filter, name) == oracle(topic_filter, name)


@given(valid_topic_filters(), valid_topic_names)
def test_matcher_agrees_with_the_oracle_on_any_valid_filter_and_name(topic_filter: str, name: str) -> None:
    assert matches(topic_filter, name) == oracle(topic_filter, name)


@given(valid_topic_names)
def test_a_name_used_as_a_filter_matches_exactly_itself(name: str) -> None:
    assert matches(name, name)
    assert not matches(name, name + "/x")
    assert not matches(name + "/x", name)


@given(valid_topic_names)
def test_hash_matches_every_name_outside_the_dollar_namespace(name: str) -> None:
    assert matches("#", name) is not name.startswith("$")


@given(valid_topic_names, st.data())
def test_a_plus_in_place_of_any_level_still_matches(name: str, data: st.DataObject) -> None:
    levels = name.split("/")
    index = data.draw(st.integers(0, len(levels) - 1))
    topic_filter = "/".join([*levels[:index], "+", *levels[index + 1 :]])
    assert matches(topic_filter, name) is not (index == 0 and name.startswith("$"))


@given(valid_topic_names, valid_topic_names)
def test_a_trailing_hash_matches_the_parent_and_everything_below(parent: str, name: str) -> None:
    expected = name == parent or name.startswith(parent + "/")
    assert matches(parent + "/#", name) is expected


@given(small_filters, small_names)
def test_the_dollar_rule_splits_the_naive_match_in_two(topic_filter: str, name: str) -> None:
    plain, blocked = matches(topic_filter, name), matches_but_for_dollar_rule(topic_filter, name)
    assert not (plain and blocked)
    assert (plain or blocked) == oracle(topic_filter, name, dollar_rule=False)


# Levels that exercise every branch: empty levels, '$' names, wildcards in and out of place, look-alikes.
_LEVELS = st.sampled_from(["", "a", "b", "$SYS", "$x", "+", "#", "a#", "a+", "sport", "ä", "a\u0308"])
_STRINGS = st.lists(_LEVELS, min_size=1, max_size=4).map("/".join)


@given(names=st.lists(_STRINGS, max_size=30), topic_filters=st.lists(_STRINGS, min_size=1, max_size=10))
def test_topic_index_finds_exactly_the_names_a_filter_matches_in_insertion_order(
    names: list[str], topic_filters: list[str]
) -> None:
    index = TopicIndex(names)
    unique = list(dict.fromkeys(names))
    assert len(index) == len(unique)
    for topic_filter in topic_filters:
        assert index.matching(topic_filter) == [name for name in unique if matches(topic_filter, name)]


@given(names=st.lists(valid_topic_names, max_size=20), topic_filter=valid_topic_filters())
def test_topic_index_agrees_with_matches_on_valid_topics(names: list[str], topic_filter: str) -> None:
    unique = list(dict.fromkeys(names))
    assert TopicIndex(names).matching(topic_filter) == [name for name in unique if matches(topic_filter, name)]


def test_topic_index_examples_from_section_4_7() -> None:
    index = TopicIndex(["sport", "sport/tennis/player1", "sport/tennis/player1/ranking", "/finance", "$SYS/x"])
    assert index.matching("sport/#") == ["sport", "sport/tennis/player1", "sport/tennis/player1/ranking"]
    assert index.matching("sport/tennis/+") == ["sport/tennis/player1"]
    assert index.matching("+/+") == ["/finance"]
    assert index.matching("#") == ["sport", "sport/tennis/player1", "sport/tennis/player1/ranking", "/finance"]
    assert index.matching("$SYS/#") == ["$SYS/x"]
