"""Deliveries on one connection (sections 3.3.2, 3.8.4, 4.7.2): every PUBLISH the server sends matches a
subscription of the session, never a '$' topic through a leading wildcard, at no more than the granted QoS."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.judge import judge, judge_scenario, reasons

from .cases import Case, case_id, check_fails, check_passes, check_undecided, explain
from .talk import C, S, Talk, connected, publish, publisher, suback, subscribe

DOLLAR = publish("$probe/x", b"d")


def subscribed(topic_filter: str, qos: int = 0) -> Talk:
    return connected().client(subscribe(1, (topic_filter, qos))).server(suback(1, qos))


def resumed() -> Talk:
    return connected(clean_session=False, session_present=True)


def wildcard_watcher() -> Talk:
    return connected("watcher", at=0.0).client(subscribe(1, "#")).server(suback(1))


CASES = [
    Case(
        "MQTT-3.3.2-3",
        S,
        fails=lambda: connected().server(publish("t")),
        passes=lambda: subscribed("t").server(publish("t")),
        undecided=lambda: resumed().server(publish("t")),
    ),
    Case(
        "MQTT-3.8.4-6",
        S,
        fails=lambda: subscribed("t", 0).server(publish("t", qos=1, packet_id=5)),
        passes=lambda: subscribed("t", 1).server(publish("t", qos=1, packet_id=5)).client(codec.Puback(packet_id=5)),
        undecided=lambda: resumed().server(publish("t", qos=1, packet_id=5)),
    ),
    Case(
        "MQTT-4.7.2-1",
        S,
        fails=lambda: subscribed("#").server(DOLLAR),
        passes=lambda: {"watcher": wildcard_watcher().quiet(at=10), "pub": publisher(DOLLAR)},
        undecided=lambda: {"watcher": wildcard_watcher().closed(C, at=1.5), "pub": publisher(DOLLAR)},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conversation_breaking_the_rule_is_a_finding(case: Case) -> None:
    check_fails(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conversation_keeping_the_rule_passes_it(case: Case) -> None:
    check_passes(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_conversation_that_cannot_show_it_leaves_the_rule_not_assessable(case: Case) -> None:
    check_undecided(case)


def findings(talk: Talk) -> list[str]:
    return [rule for f in judge(talk.events).findings for rule in f.rules]


def test_a_dollar_topic_matches_a_filter_that_names_its_first_level() -> None:
    assert findings(subscribed("$probe/#").server(DOLLAR)) == []


def test_a_delivery_may_come_before_the_suback() -> None:
    talk = connected().client(subscribe(1, ("t", 1))).server(publish("t", qos=1, packet_id=2), suback(1, 1))
    assert findings(talk.client(codec.Puback(packet_id=2))) == []


def test_the_qos_bound_is_the_grant_not_the_request() -> None:
    talk = connected().client(subscribe(1, ("t", 2))).server(suback(1, 0)).server(publish("t", qos=1, packet_id=4))
    assert findings(talk) == ["MQTT-3.8.4-6"]


def test_overlapping_subscriptions_allow_the_highest_grant() -> None:
    talk = connected().client(subscribe(1, ("t", 0), ("+", 2))).server(suback(1, 0, 2))
    talk.server(publish("t", qos=2, packet_id=4)).client(codec.Pubrec(packet_id=4))
    assert findings(talk) == []


def test_a_filter_unsubscribed_on_this_connection_still_explains_a_queued_delivery() -> None:
    talk = subscribed("t").client(codec.Unsubscribe(packet_id=2, topic_filters=["t"])).server(publish("t"))
    assert findings(talk) == []


def dollar_watcher(topic_filter: str) -> Talk:
    return connected("watcher", at=0.0).client(subscribe(1, (topic_filter, 1))).server(suback(1, 1))


def test_a_message_on_a_dollar_topic_may_be_withheld_from_a_matching_subscriber() -> None:
    """Section 4.7.2: "The Server SHOULD prevent Clients from using such Topic Names to exchange messages with
    other Clients". A broker that follows the SHOULD breaks no MUST: '$probe/x' not delivered to '$probe/#' (still
    open long past the deadline) is no finding; the routing statement is not assessable, saying why. The same on an
    ordinary topic is the missing delivery [MQTT-4.5.0-1]."""
    kept_off = judge_scenario(
        {"watcher": dollar_watcher("$probe/#").quiet(at=10).events, "pub": publisher(DOLLAR).events}
    )
    assert kept_off.findings == (), explain(kept_off)
    assert kept_off.not_assessable["MQTT-4.5.0-1"].startswith(f"{reasons.NOT_OWED}: "), explain(kept_off)
    assert "section 4.7.2" in kept_off.not_assessable["MQTT-4.5.0-1"]
    plain = publish("probe/x", b"d")
    missing = judge_scenario({"watcher": dollar_watcher("probe/#").quiet(at=10).events, "pub": publisher(plain).events})
    assert [(f.rule, f.side, f.kind) for f in missing.findings] == [("MQTT-4.5.0-1", S, "missing")], explain(missing)


def test_a_message_on_a_dollar_topic_delivered_to_a_matching_subscriber_is_judged_as_routed() -> None:
    delivered = dollar_watcher("$probe/#").server(DOLLAR, at=1.5).quiet(at=10)
    judgement = judge_scenario({"watcher": delivered.events, "pub": publisher(DOLLAR).events})
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-4.5.0-1" in judgement.passed, explain(judgement)
