"""The MQTT 5.0 session, Will, shared subscription and BOM cases (:mod:`mqttaudit.probe.cases.v5_sessions`): every
statement a case lists is one the judge decides on 5.0 conversations, kept by a conforming broker and broken by a
violating one (pure); and every case gets a verdict from mosquitto and from mqttools."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mqttaudit import codec
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES
from mqttaudit.probe.cases import v5_sessions
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult

from .cases import explain
from .live import run_together
from .talk import C
from .test_probe_v5_routing import (
    LATE,
    Scenario,
    client,
    connack,
    copy,
    judged,
    leaves,
    message,
    option,
    publisher,
    receives,
    shared,
    subscribed,
    will_scenario,
)

SESSION_CASES = [case for case in CASES.values() if case.script.__module__ == v5_sessions.__name__]


# Conversations ----------------------------------------------------------------------------------------------------


def bom(*, subscribed_to: str, got: str | None) -> Scenario:
    watcher = subscribed(client("watcher"), option(subscribed_to, 1))
    if got is not None:
        receives(watcher, copy(message("\ufeffa", qos=1), topic=got), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(message("\ufeffa", qos=1))}


def new_session(*, present: bool) -> Scenario:
    return {"gone": leaves(client("k"), 0.5), "again": client("k", at=2.0, clean=False, present=present).quiet(at=LATE)}


def other_client(*, present: bool) -> Scenario:
    return {
        "gone": leaves(client("b"), 0.2),
        "owner": leaves(subscribed(client("a", at=0.3, expiry=60), option("t", 1)), 0.5),
        "stranger": client("b", at=2.0, clean=False, present=present).quiet(at=LATE),
    }


def kept_open(*, delivered: bool) -> Scenario:
    watcher = subscribed(client("watcher", expiry=1), option("t"))
    if delivered:
        receives(watcher, copy(message()), at=3.3)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(message(), at=3.0)}


def after_expiry(*, delivered: bool, present: bool = False) -> Scenario:
    first = leaves(subscribed(client("k", expiry=2), option("t", 1)), 0.5)
    again = client("k", at=4.0, clean=False, present=present)
    if delivered:
        receives(again, copy(message(qos=1)), at=4.1)
    return {"first": first, "again": again.quiet(at=LATE), "pub": publisher(message(qos=1), at=0.6)}


WILL = codec.Will(topic="w", message=b"gone")
DELAYED = codec.Will(topic="w", message=b"gone", properties=codec.properties.make(will_delay_interval=2))


def dropped(*, again: bool, discarded: bool = False) -> Scenario:
    """'dying' leaves at 1 s (a reset, or DISCONNECT 0x00 when ``discarded``), comes back at 1.5 s without a Will and
    leaves (DISCONNECT 0x04, or a reset); a Clean Start 1 connection ends the session at 2 s. ``again``: the
    watcher gets the Will (once more) at 1.7 s (2.5 s)."""
    dying = client("dying", at=0.5, expiry=60, will=WILL)
    if discarded:
        dying.client(codec.Disconnect(reason_code=0))
    back = client("dying", at=1.5, clean=False, expiry=60, present=True)
    if discarded:
        back.closed(C, at=1.6, abrupt=True)
    else:
        back.client(codec.Disconnect(reason_code=0x04)).closed(C, at=1.6)
    watcher = subscribed(client("watcher"), option("w"))
    will_copy = copy(message("w", b"gone"))
    if not discarded:
        receives(watcher, will_copy, at=1.1)
    if again:  # after DISCONNECT 0x00, past the answer timeout of the discard itself (MQTT-3.14.4-3)
        receives(watcher, will_copy, at=2.5 if discarded else 1.7)
    return {
        "dying": dying.closed(C, at=1.0, abrupt=not discarded),
        "back": back,
        "end": leaves(client("dying", at=2.0), 2.1),
        "watcher": watcher.quiet(at=LATE),
    }


USER_PROPERTIES = v5_sessions.WILL_USER_PROPERTIES


def will_order(properties: codec.Properties) -> Scenario:
    dying = client("dying", at=0.5, will=codec.Will(topic="w", message=b"gone", properties=USER_PROPERTIES))
    watcher = receives(
        subscribed(client("watcher"), option("w")), copy(message("w", b"gone"), properties=properties), at=1.1
    )
    return {"dying": dying.closed(C, at=1.0, abrupt=True), "watcher": watcher.quiet(at=LATE)}


def qos2_publisher(at: float = 1.0) -> codec.Publish:
    return message(payload=b"m2", qos=2)


def published_qos2(sent: codec.Publish, at: float = 1.0) -> object:
    talk = client("pub", at=at)
    talk.client(sent).server(codec.Pubrec(packet_id=1)).client(codec.Pubrel(packet_id=1))
    talk.server(codec.Pubcomp(packet_id=1))
    return talk.client(codec.Pingreq()).server(codec.Pingresp()).client(codec.Disconnect()).closed(C)


def refused(*, other_gets: bool) -> Scenario:
    sent = message(qos=1)
    a = subscribed(client("a", expiry=0), option("$share/g/t", 1))
    a.server(copy(sent), at=1.2).client(codec.Puback(packet_id=101, reason_code=0x80))
    b = subscribed(client("b", expiry=0), option("$share/g/t", 1))
    if other_gets:
        b.server(copy(sent, pid=102), at=1.5).client(codec.Puback(packet_id=102, reason_code=0x80))
    return {"a": a.quiet(at=LATE), "b": b.quiet(at=LATE), "pub": publisher(sent)}


def interrupted(*, back: bool, resent: bool = True, other_gets: bool = False) -> Scenario:
    sent = message(payload=b"m2", qos=2)
    expiry = 60 if back else 1
    a = subscribed(client("a", expiry=expiry), option("$share/g/t", 2))
    a.server(copy(sent), at=1.2).closed(C, at=1.3, abrupt=True)
    b = subscribed(client("b", expiry=expiry), option("$share/g/t", 2))
    if other_gets:
        b.server(copy(sent, pid=102), at=2.0)
    scenario: Scenario = {"a": a, "b": b.quiet(at=LATE), "pub": published_qos2(sent)}  # type: ignore[dict-item]
    if back:
        again = client("a", at=3.0, clean=False, expiry=60, present=True)
        if resent:
            again.server(copy(sent, dup=True), at=3.1)
        scenario["again"] = again.quiet(at=LATE)
    return scenario


Make = Callable[[], Scenario]
PAIRS: dict[str, tuple[Make, Make]] = {
    "MQTT-1.5.4-3": (
        lambda: bom(subscribed_to="\ufeffa", got="\ufeffa"),
        lambda: bom(subscribed_to="\ufeffa", got="a"),
    ),
    "MQTT-4.7.3-4": (lambda: bom(subscribed_to="a", got=None), lambda: bom(subscribed_to="a", got="\ufeffa")),
    "MQTT-3.1.2-6": (lambda: new_session(present=False), lambda: new_session(present=True)),
    "MQTT-3.1.4-4": (lambda: new_session(present=False), lambda: new_session(present=True)),
    "MQTT-3.1.3-2": (lambda: other_client(present=False), lambda: other_client(present=True)),
    "MQTT-4.1.0-1": (lambda: kept_open(delivered=True), lambda: kept_open(delivered=False)),
    "MQTT-4.1.0-2": (lambda: after_expiry(delivered=False), lambda: after_expiry(delivered=True)),
    "MQTT-3.1.2-7": (
        lambda: will_scenario(DELAYED, delivered=True, delivered_at=3.5),
        lambda: will_scenario(DELAYED, delivered=False),
    ),
    "MQTT-3.1.2-10": (lambda: dropped(again=False), lambda: dropped(again=True)),
    "MQTT-3.1.3-10": (lambda: will_order(USER_PROPERTIES), lambda: will_order(tuple(reversed(USER_PROPERTIES)))),
    "MQTT-3.1.4-5": (lambda: connack(answered=True), lambda: connack(answered=False)),
    "MQTT-4.5.0-1": (lambda: shared("a"), shared),
    "MQTT-4.8.2-6": (lambda: refused(other_gets=False), lambda: refused(other_gets=True)),
    "MQTT-4.8.2-4": (lambda: interrupted(back=True), lambda: interrupted(back=True, resent=False)),
    "MQTT-4.8.2-5": (lambda: interrupted(back=False), lambda: interrupted(back=False, other_gets=True)),
}


def test_every_statement_of_the_module_has_a_conforming_and_a_violating_scenario() -> None:
    statements = {statement for case in SESSION_CASES for statement in case.statements}
    assert statements == set(PAIRS), sorted(statements ^ set(PAIRS))


@pytest.mark.parametrize("statement", sorted(PAIRS))
def test_the_judge_keeps_the_statement_on_a_conforming_5_0_scenario(statement: str) -> None:
    judgement = judged(PAIRS[statement][0]())
    assert statement in judgement.passed, explain(judgement)
    assert not [f for f in judgement.findings if f.side is codec.Direction.FROM_SERVER], explain(judgement)


def test_a_will_published_before_its_delay_was_stored_and_breaks_only_its_timing() -> None:
    """A Will that arrives at the drop instead of after its Will Delay Interval was held by the server: it breaks
    MQTT-3.1.2-8 (published too soon), not MQTT-3.1.2-7 (stored with the session)."""
    judgement = judged(will_scenario(DELAYED, delivered=True, delivered_at=1.1))
    against = {rule for f in judgement.findings if f.side is codec.Direction.FROM_SERVER for rule in f.rules}
    assert "MQTT-3.1.2-8" in against, explain(judgement)
    assert "MQTT-3.1.2-7" not in against, explain(judgement)
    assert "MQTT-3.1.2-7" in judgement.passed, explain(judgement)


@pytest.mark.parametrize("statement", sorted(PAIRS))
def test_the_judge_finds_the_statement_broken_on_a_violating_5_0_scenario(statement: str) -> None:
    judgement = judged(PAIRS[statement][1]())
    assert any(
        rule == statement and f.side is codec.Direction.FROM_SERVER for f in judgement.findings for rule in f.rules
    ), explain(judgement)


def test_the_dropped_will_after_disconnect_0x00_is_never_published_again() -> None:
    kept = judged(dropped(again=False, discarded=True))
    assert "MQTT-3.1.2-10" in kept.passed, explain(kept)
    broken = judged(dropped(again=True, discarded=True))
    assert any(rule == "MQTT-3.1.2-10" for f in broken.findings for rule in f.rules), explain(broken)


def test_a_qos2_message_sent_to_another_member_after_the_break_breaks_its_completion() -> None:
    broken = judged(interrupted(back=True, other_gets=True))
    assert any(rule == "MQTT-4.8.2-4" for f in broken.findings for rule in f.rules), explain(broken)


# Live ------------------------------------------------------------------------------------------------------------


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, SESSION_CASES, "5e55e55e")


def test_every_case_passes_against_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 keeps every statement the judge decides here, shared subscriptions included: a refused
    message goes to no other member, an interrupted QoS 2 delivery is sent again (DUP 1) to the member's new
    connection and to no other member, nor after the member's session ended."""
    results = run_all(mosquitto)
    assert {case_id: r.verdict for case_id, r in results.items()} == {case.id: PASS for case in SESSION_CASES}


#: mqttools 0.50.0 declares Maximum QoS 0 (the QoS 1 and 2 cases are not applicable) and no shared subscriptions.
#: It ignores the Will Delay Interval: the Will of 'v5/will/stored-with-session' is published at the TCP reset
#: instead of 2 s later (MQTT-3.1.2-8, another case's statement, which fails the case: a MUST broken by the
#: broker's own act; the Will was stored, so MQTT-3.1.2-7 is kept), and
#: it never answers a CONNECT whose Will carries a User Property (MQTT-3.1.4-5: no CONNACK).
MQTTOOLS: dict[str, str] = {
    "v5/topics/bom-kept": PASS,
    "v5/session/clean-start-0-new-session": PASS,
    "v5/session/clean-start-1-processing": PASS,
    "v5/session/other-client-id": NOT_APPLICABLE,
    "v5/session/kept-while-open": PASS,
    "v5/session/expired-discards-queued": NOT_APPLICABLE,
    "v5/will/stored-with-session": FAIL,
    "v5/will/dropped-once-published": PASS,
    "v5/will/dropped-after-disconnect": PASS,
    "v5/will/user-properties-in-order": FAIL,
    "v5/shared/refused-discarded-qos1": NOT_APPLICABLE,
    "v5/shared/refused-discarded-qos2": NOT_APPLICABLE,
    "v5/shared/qos2-completed-on-reconnect": NOT_APPLICABLE,
    "v5/shared/qos2-not-reassigned": NOT_APPLICABLE,
}


def test_every_case_gets_a_verdict_from_mqttools(mqttools: RunningBroker) -> None:
    results = run_all(mqttools)
    assert {case_id: r.verdict for case_id, r in results.items()} == MQTTOOLS
    stored = results["v5/will/stored-with-session"]
    # once: published too soon, not also "never arrived"
    assert [rule for f in stored.findings for rule in f.rules] == ["MQTT-3.1.2-8"]
    assert stored.statements[v5_sessions.WILL_STORED] == PASS
