"""The routing trie (MQTT 3.1.1 section 4.7, MQTT 5.0 shared subscriptions 4.8.2, AMQP 0-9-1 topic exchanges):
the specifications' own examples, the edge cases routers get wrong, and hypothesis runs that hold the trie to the
brute-force reference matcher on random subscriptions, topics and add/remove sequences."""

from __future__ import annotations

import random
import tracemalloc
import unicodedata
from collections.abc import Callable, Hashable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from mqttaudit.codec import rules
from mqttaudit.spec.identity import statement_id
from mqttaudit.topics import (
    AMQP,
    MQTT,
    MQTT5,
    InvalidTopic,
    ReferenceMatcher,
    TopicTrie,
    amqp_matches,
    parse_shared,
)
from mqttaudit.topics.amqp import SHORTSTR_LENGTH, SHORTSTR_ZERO_OCTET, split_words

from .strategies import valid_topic_filters, valid_topic_names

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def subscribed(dialect: str, topic_filter: str, topic: str) -> bool:
    trie: TopicTrie[str] = TopicTrie(dialect)
    trie.add("ns", topic_filter, "sub")
    return trie.match("ns", topic) == ["sub"]


# ---------------------------------------------------------------------------------------------------------------
# MQTT: the examples of section 4.7 and the edge cases around them
# ---------------------------------------------------------------------------------------------------------------

# (filter, name, matches): 4.7.1.2, 4.7.1.3, 4.7.2 and 4.7.3 of MQTT 3.1.1, then empty levels and '#' depth.
MQTT_EXAMPLES = [
    ("sport/tennis/player1/#", "sport/tennis/player1", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
    ("sport/tennis/player1/#", "sport/tennis/player2", False),
    ("sport/#", "sport", True),
    ("sport/#", "sports", False),
    ("#", "sport/tennis", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player2", True),
    ("sport/tennis/+", "sport/tennis/player1/ranking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),
    ("sport/+/player1", "sport/tennis/player1", True),
    ("+/tennis/#", "sport/tennis", True),
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    ("#", "$SYS/broker/clients", False),
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/#", "$SYS", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("ACCOUNTS", "Accounts", False),
    ("Accounts payable", "Accounts payable", True),
    ("/finance", "finance", False),
    ("/finance", "/finance", True),
    # Empty levels are levels.
    ("a//b", "a//b", True),
    ("a//b", "a/b", False),
    ("a/+/b", "a//b", True),
    ("+/+", "/", True),
    ("+", "/", False),
    ("a/", "a", False),
    ("a/+", "a/", True),
    ("a/#", "a/", True),
    ("#", "/", True),
    ("/#", "/", True),
    ("/#", "a", False),
    ("+/#", "a", True),
    ("+/+/+", "a/b", False),
    ("+/+/+", "a//", True),
    # The '$' rule looks at the first level only.
    ("a/+", "a/$SYS", True),
    ("a/#", "a/$SYS/x", True),
    ("+", "$", False),
    ("#", "x$", True),
    ("$share/g/a", "$share/g/a", True),  # 3.1.1 knows no shared subscriptions: an ordinary filter
    ("$share/g/a", "a", False),
]


@pytest.mark.parametrize(("topic_filter", "name", "expected"), MQTT_EXAMPLES)
def test_mqtt_spec_examples_and_edge_cases(topic_filter: str, name: str, expected: bool) -> None:
    assert subscribed(MQTT, topic_filter, name) is expected
    assert subscribed(MQTT5, topic_filter, name) is expected or topic_filter.startswith("$share/")


def test_every_mqtt_example_filter_in_one_trie_matches_exactly_its_names() -> None:
    trie: TopicTrie[str] = TopicTrie()
    reference: ReferenceMatcher[str] = ReferenceMatcher()
    for topic_filter, _, _ in MQTT_EXAMPLES:
        trie.add("broker", topic_filter, topic_filter)
        reference.add("broker", topic_filter, topic_filter)
    for _, name, _ in MQTT_EXAMPLES:
        matched = trie.match("broker", name)
        assert {f for f, n, ok in MQTT_EXAMPLES if n == name and ok} <= set(matched)
        assert not {f for f, n, ok in MQTT_EXAMPLES if n == name and not ok} & set(matched)
        assert matched == reference.match("broker", name)


def test_a_subscriber_to_hash_and_dollar_sys_hash_receives_both() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "#", "monitor")
    trie.add("broker", "$SYS/#", "monitor")
    assert trie.match("broker", "$SYS/broker/load") == ["monitor"]
    assert trie.match("broker", "sport/tennis") == ["monitor"]


@pytest.mark.parametrize(
    ("subscribed_as", "published_as"),
    [
        ("caf\u00e9", "cafe\u0301"),  # precomposed vs decomposed é
        ("cafe\u0301", "caf\u00e9"),
        ("\ufb01le", "file"),  # the ligature ﬁ
        ("Stra\u00dfe", "STRASSE"),
        ("\uff41", "a"),  # full-width a
        ("A", "a"),
    ],
)
def test_names_and_filters_are_never_normalised(subscribed_as: str, published_as: str) -> None:
    # [MQTT-4.7.3-4] code points compare exactly, whatever Unicode says they are equivalent to.
    # A router that normalised (NFKC) or folded case would take the two for one.
    folded = {unicodedata.normalize("NFKC", text).casefold() for text in (subscribed_as, published_as)}
    assert len(folded) == 1
    trie: TopicTrie[int] = TopicTrie()
    trie.add("broker", f"menu/{subscribed_as}", 1)
    trie.add("broker", "menu/+", 2)
    assert trie.match("broker", f"menu/{published_as}") == [2]
    assert trie.match("broker", f"menu/{subscribed_as}") == [1, 2]


@pytest.mark.parametrize(
    ("topic_filter", "rule"),
    [
        ("", rules.TOPIC_NOT_EMPTY),
        ("sport/tennis#", rules.MULTI_LEVEL_WILDCARD),
        ("sport/tennis/#/ranking", rules.MULTI_LEVEL_WILDCARD),
        ("#/a", rules.MULTI_LEVEL_WILDCARD),
        ("a/##", rules.MULTI_LEVEL_WILDCARD),
        ("sport+", rules.SINGLE_LEVEL_WILDCARD),
        ("+a/b", rules.SINGLE_LEVEL_WILDCARD),
        ("a/++", rules.SINGLE_LEVEL_WILDCARD),
        ("a\x00b", rules.UTF8_NO_NULL),
        ("a\ud800", rules.UTF8_WELL_FORMED),
        ("a" * 0x10000, rules.TOPIC_MAX_LENGTH),
    ],
)
def test_invalid_filters_are_refused_with_the_rule_they_break(topic_filter: str, rule: str) -> None:
    trie: TopicTrie[str] = TopicTrie()
    with pytest.raises(InvalidTopic) as caught:
        trie.add("broker", topic_filter, "x")
    assert caught.value.rule == rule
    assert len(trie) == 0 and trie.namespaces() == [] and trie.node_count() == 0
    with pytest.raises(InvalidTopic):
        trie.remove("broker", topic_filter, "x")


def test_a_filter_with_nul_breaks_both_string_and_topic_rules() -> None:
    with pytest.raises(InvalidTopic) as caught:
        TopicTrie().add("broker", "a/\x00", "x")
    assert {v.rule for v in caught.value.violations} == {rules.UTF8_NO_NULL, rules.TOPIC_NO_NULL}
    assert caught.value.offset == 2


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", rules.TOPIC_NOT_EMPTY),
        ("sport/#", rules.TOPIC_NAME_WILDCARDS),
        ("+", rules.TOPIC_NAME_WILDCARDS),
        ("caf\u00e9/+", rules.TOPIC_NAME_WILDCARDS),
        ("a\x00", rules.UTF8_NO_NULL),
        ("\u00e9\x00", rules.UTF8_NO_NULL),
        ("a/\udc80", rules.UTF8_WELL_FORMED),
        ("a" * 0x10000, rules.TOPIC_MAX_LENGTH),
        ("\u00e9" * 0x8000, rules.TOPIC_MAX_LENGTH),
    ],
)
def test_matching_an_invalid_topic_name_raises_the_rule_it_breaks(name: str, rule: str) -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "#", "all")
    for namespace in ("broker", "nobody-subscribed-here"):
        with pytest.raises(InvalidTopic) as caught:
            trie.match(namespace, name)
        assert caught.value.rule == rule


def test_longest_valid_names_match() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "#", "all")
    assert trie.match("broker", "a" * 0xFFFF) == ["all"]
    assert trie.match("broker", "\u00e9" * 0x7FFF + "a") == ["all"]  # 65,535 bytes of UTF-8


def test_control_characters_are_only_advisory_so_they_route() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "a\tb/+", "tab")
    assert trie.match("broker", "a\tb/c") == ["tab"]


# ---------------------------------------------------------------------------------------------------------------
# Subscriptions: identity, order, namespaces, removal and memory
# ---------------------------------------------------------------------------------------------------------------


def test_the_same_value_under_the_same_filter_counts_once() -> None:
    trie: TopicTrie[str] = TopicTrie()
    assert trie.add("broker", "a/+", "alice") is True
    assert trie.add("broker", "a/+", "alice") is False
    assert len(trie) == 1
    assert trie.match("broker", "a/b") == ["alice"]
    assert trie.remove("broker", "a/+", "alice") is True
    assert trie.match("broker", "a/b") == []


def test_a_value_comes_back_once_per_matching_filter_in_the_order_added() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "a/#", "alice")
    trie.add("broker", "a/b", "bob")
    trie.add("broker", "+/b", "alice")
    trie.add("broker", "a/#", "carol")
    trie.add("broker", "#", "dave")
    assert trie.match("broker", "a/b") == ["alice", "bob", "alice", "carol", "dave"]
    assert trie.match_subscriptions("broker", "a/b") == [
        ("a/#", "alice"),
        ("a/b", "bob"),
        ("+/b", "alice"),
        ("a/#", "carol"),
        ("#", "dave"),
    ]
    trie.remove("broker", "a/#", "alice")
    trie.add("broker", "a/#", "alice")  # counts from its new add
    assert trie.match("broker", "a/b") == ["bob", "alice", "carol", "dave", "alice"]


def test_remove_returns_false_for_anything_not_subscribed() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "a/b", "alice")
    assert trie.remove("other-broker", "a/b", "alice") is False
    assert trie.remove("broker", "a/b", "bob") is False
    assert trie.remove("broker", "a/+", "alice") is False
    assert trie.remove("broker", "a/b/c", "alice") is False
    assert trie.remove("broker", "a", "alice") is False
    assert trie.remove("broker", "a/b", "alice") is True
    assert trie.remove("broker", "a/b", "alice") is False
    assert len(trie) == 0


def test_namespaces_never_see_each_others_subscriptions() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add(("tcp://broker-a:1883", "/tenant1"), "#", "a")
    trie.add(("tcp://broker-a:1883", "/tenant2"), "sensor/+", "b")
    trie.add(7, "sensor/1", "c")
    assert trie.match(("tcp://broker-a:1883", "/tenant1"), "sensor/1") == ["a"]
    assert trie.match(("tcp://broker-a:1883", "/tenant2"), "sensor/1") == ["b"]
    assert trie.match(7, "sensor/1") == ["c"]
    assert trie.match("tcp://broker-a:1883", "sensor/1") == []
    assert trie.namespaces() == [("tcp://broker-a:1883", "/tenant1"), ("tcp://broker-a:1883", "/tenant2"), 7]
    assert trie.filters(("tcp://broker-a:1883", "/tenant2")) == ["sensor/+"]
    assert trie.filters("unknown") == []


def test_removing_the_last_value_prunes_nodes_and_the_namespace() -> None:
    trie: TopicTrie[str] = TopicTrie()
    trie.add("broker", "a/b/c", "x")
    trie.add("broker", "a/b", "y")
    trie.add("broker", "a/+/#", "z")
    assert trie.node_count() == 6  # root, a, a/b, a/b/c, a/+, a/+/#
    trie.remove("broker", "a/b/c", "x")
    assert trie.node_count() == 5
    assert trie.match("broker", "a/b") == ["y", "z"]
    trie.remove("broker", "a/+/#", "z")
    assert trie.node_count() == 3
    assert trie.filters("broker") == ["a/b"]
    trie.remove("broker", "a/b", "y")
    assert trie.node_count() == 0 and trie.namespaces() == [] and len(trie) == 0


def _churn_filters(count: int) -> list[tuple[int, str]]:
    rng = random.Random(4711)
    levels = ["a", "b", "", "+", "$x", "caf\u00e9", "device-17"]
    out = []
    for _ in range(count):
        depth = rng.randint(1, 6)
        topic_filter = "/".join(rng.choice(levels) for _ in range(depth)) or "/"
        if rng.random() < 0.3:
            topic_filter += "/#"
        out.append((rng.randrange(8), topic_filter))
    return out


#: Where the trie's allocations are traced from: its own modules, or this file's lines that call it (a compiled
#: trie has no Python frame of its own). What other threads of the test process allocate meanwhile (a worker may
#: still run threads of earlier tests) is not the trie's; all threads together once came to 17 KB in a CI run.
_TRIE_FRAMES = (tracemalloc.Filter(True, __file__), tracemalloc.Filter(True, "*/mqttaudit/topics/*"))


def _held_by_the_trie() -> int:
    """Bytes traced now that were allocated by the trie or by this file's calls to it."""
    return sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(_TRIE_FRAMES).statistics("filename"))


def test_memory_does_not_grow_with_add_remove_churn() -> None:
    subscriptions = _churn_filters(3000)
    removals = list(enumerate(subscriptions))
    random.Random(1883).shuffle(removals)
    trie: TopicTrie[int] = TopicTrie()

    def churn() -> None:
        for value, (namespace, topic_filter) in enumerate(subscriptions):
            trie.add(namespace, topic_filter, value)
        assert len(trie) == len(subscriptions) and trie.node_count() > 1000
        for value, (namespace, topic_filter) in removals:
            assert trie.remove(namespace, topic_filter, value)

    churn()
    assert len(trie) == 0 and trie.node_count() == 0 and trie.namespaces() == []
    tracemalloc.start()
    try:
        churn()
        churn()  # two traced rounds first: CPython's free lists keep (and trace) a few thousand freed tuples
        baseline, start = _held_by_the_trie(), tracemalloc.get_traced_memory()[0]
        for _ in range(3):
            churn()
        grown = _held_by_the_trie() - baseline
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert trie.node_count() == 0
    assert peak > 200_000  # the subscriptions did occupy memory while they lived ...
    assert grown < 16_000  # ... and gave it back


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="dialect"):
        TopicTrie("kafka")
    with pytest.raises(ValueError, match="dialect"):
        ReferenceMatcher("kafka")


# ---------------------------------------------------------------------------------------------------------------
# MQTT 5.0 shared subscriptions
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic_filter", "parsed"),
    [
        ("$share/workers/sensor/+/temperature", ("workers", "sensor/+/temperature")),
        ("$share/g/#", ("g", "#")),
        ("$share/g//", ("g", "/")),
        ("$share/g/$share/h/a", ("g", "$share/h/a")),
        ("$share/gr\u00fcn/a", ("gr\u00fcn", "a")),
        ("$share", None),
        ("$shared/g/a", None),
        ("$SHARE/g/a", None),
        ("sensor/#", None),
    ],
)
def test_parse_shared_splits_share_name_and_filter(topic_filter: str, parsed: tuple[str, str] | None) -> None:
    assert parse_shared(topic_filter) == parsed


@pytest.mark.parametrize(
    ("topic_filter", "rule", "offset"),
    [
        ("$share/", "MQTT-4.8.2-1", 7),
        ("$share//a", "MQTT-4.8.2-1", 7),
        ("$share/g", "MQTT-4.8.2-2", 8),
        ("$share/g/", "MQTT-4.8.2-2", 9),
        ("$share/g+/a", "MQTT-4.8.2-2", 8),
        ("$share/+/a", "MQTT-4.8.2-2", 7),
        ("$share/#/a", "MQTT-4.8.2-2", 7),
        ("$share/\u00e9#/a", "MQTT-4.8.2-2", 9),  # offsets count UTF-8 bytes
        ("$share/g/a#", "MQTT-4.7.1-1", 10),  # MQTT 5.0 numbering: '#' is 4.7.1-1
        ("$share/g/#/a", "MQTT-4.7.1-1", 9),
        ("$share/g/a+", "MQTT-4.7.1-2", 10),  # ... and '+' is 4.7.1-2
        ("$share/g/a\x00", "MQTT-1.5.4-2", 10),
        ("$share/g\x00/a", "MQTT-1.5.4-2", 8),
    ],
)
def test_malformed_shared_subscriptions_are_refused_with_mqtt5_rule_ids(
    topic_filter: str, rule: str, offset: int
) -> None:
    with pytest.raises(InvalidTopic) as caught:
        parse_shared(topic_filter)
    assert (caught.value.rule, caught.value.offset) == (rule, offset)
    trie: TopicTrie[str] = TopicTrie(MQTT5)
    with pytest.raises(InvalidTopic) as caught:
        trie.add("broker", topic_filter, "x")
    assert caught.value.rule == rule
    assert len(trie) == 0


def test_shared_subscriptions_match_on_their_filter_and_keep_their_group() -> None:
    trie: TopicTrie[str] = TopicTrie(MQTT5)
    trie.add("broker", "sensor/+", "s1")
    trie.add("broker", "$share/g1/sensor/+", "s1")
    trie.add("broker", "$share/g2/sensor/#", "s1")
    trie.add("broker", "$share/g1/sensor/+", "s2")
    trie.add("broker", "$share/g1/sensor/+", "s2")  # the same subscription again
    assert len(trie) == 4
    assert trie.match("broker", "sensor/1") == ["s1", "s1", "s1", "s2"]
    assert trie.match_subscriptions("broker", "sensor/1") == [
        ("sensor/+", "s1"),
        ("$share/g1/sensor/+", "s1"),
        ("$share/g2/sensor/#", "s1"),
        ("$share/g1/sensor/+", "s2"),
    ]
    assert trie.match("broker", "$share/g1/sensor/1") == []
    assert trie.filters("broker") == ["$share/g1/sensor/+", "$share/g2/sensor/#", "sensor/+"]
    assert trie.remove("broker", "$share/g1/sensor/+", "s1") is True
    assert trie.remove("broker", "$share/g3/sensor/+", "s2") is False
    assert trie.match("broker", "sensor/1") == ["s1", "s1", "s2"]


def test_the_dollar_rule_applies_to_the_filter_inside_a_shared_subscription() -> None:
    trie: TopicTrie[str] = TopicTrie(MQTT5)
    trie.add("broker", "$share/g/#", "wild")
    trie.add("broker", "$share/g/$SYS/#", "sys")
    assert trie.match("broker", "$SYS/broker/load") == ["sys"]
    assert trie.match("broker", "a/b") == ["wild"]


def test_mqtt311_treats_share_filters_as_plain_text_and_mqtt5_does_not() -> None:
    v311: TopicTrie[str] = TopicTrie(MQTT)
    v5: TopicTrie[str] = TopicTrie(MQTT5)
    for trie in (v311, v5):
        trie.add("broker", "$share/g/a", "x")
        trie.add("broker", "$share", "y")  # no '/' after "$share": not a shared subscription in either
    assert v311.match("broker", "$share/g/a") == ["x"] and v311.match("broker", "a") == []
    assert v5.match("broker", "a") == ["x"] and v5.match("broker", "$share/g/a") == []
    assert v311.match("broker", "$share") == ["y"] == v5.match("broker", "$share")
    v311.add("broker", "$share//a", "z")  # an empty level, valid in 3.1.1
    assert v311.match("broker", "$share//a") == ["z"]


@pytest.mark.parametrize(
    ("method", "text", "rule311", "rule5"),
    [
        ("add", "a#", "MQTT-4.7.1-2", "MQTT-4.7.1-1"),
        ("add", "a/+b", "MQTT-4.7.1-3", "MQTT-4.7.1-2"),
        ("add", "", "MQTT-4.7.3-1", "MQTT-4.7.3-1"),
        ("add", "a\x00", "MQTT-1.5.3-2", "MQTT-1.5.4-2"),
        ("match", "a/#", "MQTT-4.7.1-1", "MQTT-4.7.0-1"),
        ("match", "a\ud800", "MQTT-1.5.3-1", "MQTT-1.5.4-1"),
        ("match", "", "MQTT-4.7.3-1", "MQTT-4.7.3-1"),
    ],
)
def test_each_mqtt_dialect_cites_its_own_edition(method: str, text: str, rule311: str, rule5: str) -> None:
    cited: dict[str, list[str]] = {}
    for dialect, expected in ((MQTT, rule311), (MQTT5, rule5)):
        for matcher in (TopicTrie(dialect), ReferenceMatcher(dialect)):
            with pytest.raises(InvalidTopic) as caught:
                if method == "add":
                    matcher.add("broker", text, "x")
                else:
                    matcher.match("broker", text)
            assert caught.value.rule == expected
            cited[dialect] = [v.rule for v in caught.value.violations]
    # Every violation, not only the raised one, is renumbered for 5.0.
    assert cited[MQTT5] == [statement_id(cited_rule, "5.0") for cited_rule in cited[MQTT]]


# ---------------------------------------------------------------------------------------------------------------
# AMQP 0-9-1 topic exchanges
# ---------------------------------------------------------------------------------------------------------------

# The RabbitMQ topic tutorial: Q1 is bound with "*.orange.*", Q2 with "*.*.rabbit" and "lazy.#".
TUTORIAL = [
    ("quick.orange.rabbit", ["Q1", "Q2"]),
    ("lazy.orange.elephant", ["Q1", "Q2"]),
    ("quick.orange.fox", ["Q1"]),
    ("lazy.brown.fox", ["Q2"]),
    ("lazy.pink.rabbit", ["Q2", "Q2"]),  # two bindings match; the queue gets the message once (caller's job)
    ("quick.brown.fox", []),
    ("orange", []),
    ("quick.orange.new.rabbit", []),
    ("lazy.orange.new.rabbit", ["Q2"]),
    ("lazy", ["Q2"]),
    ("", []),
]


@pytest.mark.parametrize(("routing_key", "queues"), TUTORIAL)
def test_amqp_tutorial_routing(routing_key: str, queues: list[str]) -> None:
    trie: TopicTrie[str] = TopicTrie(AMQP)
    for binding_key, queue in (("*.orange.*", "Q1"), ("*.*.rabbit", "Q2"), ("lazy.#", "Q2")):
        trie.add("topic_logs", binding_key, queue)
    assert sorted(trie.match("topic_logs", routing_key)) == queues
    assert sorted(set(queues)) == sorted(set(trie.match("topic_logs", routing_key)))


# (binding key, routing key, matches)
AMQP_EXAMPLES = [
    ("", "", True),  # zero words match zero words
    ("", "a", False),
    ("a", "", False),
    ("#", "", True),
    ("*", "", False),
    ("#.#", "", True),
    ("*", ".", False),  # "." is two empty words
    ("*.*", ".", True),
    ("", ".", False),
    ("#", ".", True),
    ("a.*.b", "a..b", True),  # the middle word is empty
    ("a.b", "a..b", False),
    ("a.#.b", "a.b", True),
    ("a.#.b", "a.x.y.b", True),
    ("a.#.b", "a.x.y", False),
    ("#.a.#", "a", True),
    ("#.a.#", "x.a.y.z", True),
    ("#.a.#", "x.b", False),
    ("#.*", "", False),
    ("#.*", "a", True),
    ("*.#.*", "a", False),
    ("*.#.*", "a.b", True),
    ("a*", "ab", False),  # '*' inside a word is text
    ("a*", "a*", True),
    ("a#", "a", False),
    ("*", "*", True),  # a routing key's words are all text
    ("#", "$SYS.x", True),  # no '$' rule
    ("*.x", "$SYS.x", True),
    ("A", "a", False),
    ("caf\u00e9", "cafe\u0301", False),
    ("lazy.#", "lazy.", True),
    ("lazy.*", "lazy.", True),
]


@pytest.mark.parametrize(("binding_key", "routing_key", "expected"), AMQP_EXAMPLES)
def test_amqp_words_and_wildcards(binding_key: str, routing_key: str, expected: bool) -> None:
    assert amqp_matches(binding_key, routing_key) is expected
    assert subscribed(AMQP, binding_key, routing_key) is expected


def test_split_words_counts_the_empty_key_as_zero_words() -> None:
    assert split_words("") == []
    assert split_words(".") == ["", ""]
    assert split_words("a..b") == ["a", "", "b"]
    assert split_words("stock.usd.nyse") == ["stock", "usd", "nyse"]


def test_several_hashes_deliver_a_binding_once() -> None:
    trie: TopicTrie[str] = TopicTrie(AMQP)
    trie.add("x", "#.#", "q")
    trie.add("x", "#.#.#.#.#.#.#.#.#.#.#.#", "r")
    trie.add("x", "#.a.#.a.#", "s")
    assert trie.match("x", "a") == ["q", "r"]
    assert trie.match("x", "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a") == ["q", "r", "s"]


def test_an_empty_key_never_leaks_into_another_exchange() -> None:
    # rabbitmq/rabbitmq-server#16271 (reported again as #16425): with one trie root for every topic exchange,
    # a message published with an empty routing key reached the queues bound with "" to *other* exchanges.
    trie: TopicTrie[str] = TopicTrie(AMQP)
    for exchange in ("emails", "other"):
        trie.add(("/", exchange), "", f"{exchange}-queue")
        trie.add(("/", exchange), "*", f"{exchange}-queue")
    trie.add(("/", "third"), "#", "third-queue")
    assert trie.match(("/", "emails"), "") == ["emails-queue"]
    assert trie.match(("/", "other"), "") == ["other-queue"]
    assert trie.match(("/", "third"), "") == ["third-queue"]
    assert trie.match(("/", "emails"), "x") == ["emails-queue"]
    assert trie.match(("/", "nobody"), "") == []
    trie.remove(("/", "emails"), "", "emails-queue")
    assert trie.match(("/", "emails"), "") == []
    assert trie.match(("/", "other"), "") == ["other-queue"]


def test_an_empty_mqtt_filter_is_refused_where_amqp_accepts_an_empty_key() -> None:
    with pytest.raises(InvalidTopic) as caught:
        TopicTrie(MQTT).add("x", "", "q")
    assert caught.value.rule == rules.TOPIC_NOT_EMPTY
    assert TopicTrie(AMQP).add("x", "", "q") is True


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("a" * 256, SHORTSTR_LENGTH),
        ("\u00e9" * 128, SHORTSTR_LENGTH),  # 128 characters, 256 bytes
        ("a.\x00", SHORTSTR_ZERO_OCTET),
    ],
)
def test_amqp_keys_must_fit_a_shortstr(key: str, rule: str) -> None:
    trie: TopicTrie[str] = TopicTrie(AMQP)
    with pytest.raises(InvalidTopic, match="binding key") as caught:
        trie.add("x", key, "q")
    assert caught.value.rule == rule
    with pytest.raises(InvalidTopic, match="routing key") as caught:
        trie.match("x", key)
    assert caught.value.rule == rule
    assert trie.add("x", "a" * 255, "q") and trie.add("x", "\u00e9" * 127 + "a", "q")
    assert trie.match("x", "a" * 255) == ["q"]


# ---------------------------------------------------------------------------------------------------------------
# The trie against the reference matcher
# ---------------------------------------------------------------------------------------------------------------

# Few, colliding pieces, so that random filters and topics meet: empty levels, '$' levels, a letter precomposed
# and decomposed, an astral character, and the dialects' separators inside levels.
_PIECES = ["a", "b", "", "$", "$SYS", "caf\u00e9", "cafe\u0301", "\U0001f600", "x.y", "x/y"]
_NAMESPACES = st.sampled_from([0, 1, "exchange", ("vhost", "amq.topic")])
_VALUES = st.integers(0, 5)


def _text_levels(separator: str) -> st.SearchStrategy[str]:
    return st.sampled_from([p for p in _PIECES if separator not in p])


@st.composite
def mqtt_filters(draw: st.DrawFn) -> str:
    """Valid MQTT filters biased to the adversarial shapes: '#', '+/#', '+/+/+', long chains of one level."""
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return draw(st.sampled_from(["#", "+", "+/#", "+/+", "+/+/+", "/#", "$SYS/#", "+/+/+/+/+/+/+/+/#"]))
    if shape == 1:
        level = draw(st.sampled_from(["a", "+", ""]))
        chain = "/".join([level] * draw(st.integers(1, 12))) + draw(st.sampled_from(["", "/#"]))
        return chain or "/"
    levels = draw(st.lists(st.one_of(_text_levels("/"), st.just("+")), min_size=1, max_size=5))
    if draw(st.booleans()):
        levels.append("#")
    return "/".join(levels) or "/"


@st.composite
def mqtt_names(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 5)) == 0:
        return "/".join(["a"] * draw(st.integers(1, 14)))
    return "/".join(draw(st.lists(_text_levels("/"), min_size=1, max_size=6))) or "/"


_SHARE_NAMES = st.sampled_from(["g1", "g2", "caf\u00e9"])


@st.composite
def mqtt5_filters(draw: st.DrawFn) -> str:
    inner = draw(mqtt_filters())
    if draw(st.booleans()):
        return f"$share/{draw(_SHARE_NAMES)}/{inner}"
    return inner


@st.composite
def amqp_keys(draw: st.DrawFn) -> str:
    """Binding and routing keys alike: '*' and '#' are wildcards in the first and plain words in the second."""
    if draw(st.integers(0, 6)) == 0:
        return draw(st.sampled_from(["", "#", "*", "#.#", "*.#", "#.*", "#.a.#", "*.*.*", ".", "..", "#.#.#.#"]))
    words = st.one_of(_text_levels("."), st.sampled_from(["*", "#"]))
    return ".".join(draw(st.lists(words, max_size=7)))


DIALECT_STRATEGIES = {
    MQTT: (mqtt_filters(), mqtt_names()),
    MQTT5: (mqtt5_filters(), mqtt_names()),
    AMQP: (amqp_keys(), amqp_keys()),
}

# A few strings every dialect refuses somewhere, so both sides must refuse them alike.
_INVALID = ["", "a#", "a/#/b", "+a", "a\x00", "$share//a", "$share/g", "x" * 256, "a/\ud800"]


def _outcome(call: Callable[..., object], *args: object) -> object:
    try:
        return call(*args)
    except InvalidTopic as error:
        return ("refused", error.rule, error.offset)


@pytest.mark.parametrize("dialect", [MQTT, MQTT5, AMQP])
@SETTINGS
@given(data=st.data())
def test_trie_agrees_with_the_reference_on_random_subscriptions(dialect: str, data: st.DataObject) -> None:
    filters, topics = DIALECT_STRATEGIES[dialect]
    subscriptions = data.draw(st.lists(st.tuples(_NAMESPACES, filters, _VALUES), max_size=40))
    trie: TopicTrie[int] = TopicTrie(dialect)
    reference: ReferenceMatcher[int] = ReferenceMatcher(dialect)
    for namespace, topic_filter, value in subscriptions:
        assert trie.add(namespace, topic_filter, value) == reference.add(namespace, topic_filter, value)
    assert len(trie) == len(reference)
    for topic in data.draw(st.lists(topics, min_size=1, max_size=15)):
        for namespace in (0, 1, "exchange", ("vhost", "amq.topic"), "never-used"):
            assert trie.match(namespace, topic) == reference.match(namespace, topic), (namespace, topic)
            assert trie.match_subscriptions(namespace, topic) == reference.match_subscriptions(namespace, topic)


@SETTINGS
@given(st.lists(st.tuples(_NAMESPACES, valid_topic_filters(), _VALUES), max_size=30), st.lists(valid_topic_names))
def test_trie_agrees_with_the_reference_on_any_unicode(
    subscriptions: list[tuple[Hashable, str, int]], names: list[str]
) -> None:
    trie: TopicTrie[int] = TopicTrie()
    reference: ReferenceMatcher[int] = ReferenceMatcher()
    for namespace, topic_filter, value in subscriptions:
        trie.add(namespace, topic_filter, value)
        reference.add(namespace, topic_filter, value)
    for name in names + [topic_filter.replace("+", "x").replace("#", "y") for _, topic_filter, _ in subscriptions]:
        for namespace in (0, 1, "exchange"):
            assert trie.match(namespace, name) == reference.match(namespace, name)


class TrieVersusReference(RuleBasedStateMachine):
    """Random add/remove/match sequences: the trie answers as the reference does, and holds no node that no
    subscription needs."""

    dialect = MQTT

    def __init__(self) -> None:
        super().__init__()
        self.trie: TopicTrie[int] = TopicTrie(self.dialect)
        self.reference: ReferenceMatcher[int] = ReferenceMatcher(self.dialect)
        self.filters, self.topics = DIALECT_STRATEGIES[self.dialect]

    @rule(data=st.data(), namespace=_NAMESPACES, value=_VALUES)
    def add(self, data: st.DataObject, namespace: Hashable, value: int) -> None:
        topic_filter = data.draw(self.filters)
        added = _outcome(self.trie.add, namespace, topic_filter, value)
        assert added == _outcome(self.reference.add, namespace, topic_filter, value)

    @rule(data=st.data())
    def remove_existing(self, data: st.DataObject) -> None:
        subscriptions = self.reference.subscriptions()
        if subscriptions:
            namespace, topic_filter, value = data.draw(st.sampled_from(subscriptions))
            assert self.trie.remove(namespace, topic_filter, value) is True
            assert self.reference.remove(namespace, topic_filter, value) is True

    @rule(data=st.data(), namespace=_NAMESPACES, value=_VALUES)
    def remove_any(self, data: st.DataObject, namespace: Hashable, value: int) -> None:
        topic_filter = data.draw(self.filters)
        removed = _outcome(self.trie.remove, namespace, topic_filter, value)
        assert removed == _outcome(self.reference.remove, namespace, topic_filter, value)

    @rule(data=st.data(), namespace=_NAMESPACES)
    def match(self, data: st.DataObject, namespace: Hashable) -> None:
        topic = data.draw(self.topics)
        assert self.trie.match(namespace, topic) == self.reference.match(namespace, topic)

    @rule(text=st.sampled_from(_INVALID), namespace=_NAMESPACES, value=_VALUES)
    def refuse_alike(self, text: str, namespace: Hashable, value: int) -> None:
        for trie_call, reference_call in (
            (self.trie.add, self.reference.add),
            (self.trie.remove, self.reference.remove),
        ):
            assert _outcome(trie_call, namespace, text, value) == _outcome(reference_call, namespace, text, value)
        assert _outcome(self.trie.match, namespace, text) == _outcome(self.reference.match, namespace, text)

    @invariant()
    def same_subscriptions(self) -> None:
        assert len(self.trie) == len(self.reference)
        assert set(self.trie.namespaces()) == set(self.reference.namespaces())
        for namespace in self.reference.namespaces():
            assert self.trie.filters(namespace) == self.reference.filters(namespace)
        if not len(self.reference):
            assert self.trie.node_count() == 0


class AmqpTrieVersusReference(TrieVersusReference):
    dialect = AMQP


class Mqtt5TrieVersusReference(TrieVersusReference):
    dialect = MQTT5


TestMqttStateMachine = TrieVersusReference.TestCase
TestMqtt5StateMachine = Mqtt5TrieVersusReference.TestCase
TestAmqpStateMachine = AmqpTrieVersusReference.TestCase
TestMqttStateMachine.settings = SETTINGS
TestMqtt5StateMachine.settings = SETTINGS
TestAmqpStateMachine.settings = SETTINGS
