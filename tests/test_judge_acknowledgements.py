"""Packet Identifiers and acknowledgements (sections 2.3.1, 3.3.4, 3.8.4, 3.10.4, 3.12.4, 4.3, 4.6): each request
gets its answers, carrying its identifier, in the right order; identifiers in flight are not reused."""

from __future__ import annotations

from typing import Any

import pytest

from mqttaudit import codec
from mqttaudit.judge import judge

from .cases import Case, case_id, check_fails, check_passes, check_undecided, explain
from .talk import PINGREQ, PINGRESP, C, S, Talk, connected, publish, suback, subscribe, unsubscribe

WAIT = 10.0  # past JudgeConfig().answer_timeout


def resumed() -> Talk:
    """CleanSession 0 with Session Present 1: identifiers of earlier connections may still be in flight."""
    return connected(clean_session=False, session_present=True)


def subscribed(qos: int) -> Talk:
    return connected().client(subscribe(1, ("t", qos))).server(suback(1, qos))


def qos1(packet_id: int) -> codec.Publish:
    return publish("t", f"m{packet_id}".encode(), qos=1, packet_id=packet_id)


def qos2(packet_id: int) -> codec.Publish:
    return publish("t", f"m{packet_id}".encode(), qos=2, packet_id=packet_id)


def pubrec_received() -> Talk:
    return connected().client(qos2(3)).server(codec.Pubrec(packet_id=3))


def pubrel_sent() -> Talk:
    return pubrec_received().client(codec.Pubrel(packet_id=3))


CASES = [
    Case(
        "MQTT-2.3.1-2",
        C,
        fails=lambda: connected().client(subscribe(1, "a"), subscribe(1, "b")),
        passes=lambda: connected().client(subscribe(1, "a")).server(suback(1)).client(subscribe(1, "b")),
        undecided=lambda: resumed().client(subscribe(1, "a")),
    ),
    Case(
        "MQTT-2.3.1-4",
        S,
        fails=lambda: subscribed(1).server(qos1(7), qos2(7)),
        passes=lambda: subscribed(1).server(qos1(7)).client(codec.Puback(packet_id=7)).server(qos1(7)),
        undecided=lambda: resumed().server(qos1(7)),
    ),
    Case(
        "MQTT-2.3.1-6",
        S,
        fails=lambda: connected().client(qos1(1)).server(codec.Puback(packet_id=2)),
        passes=lambda: connected().client(qos1(1)).server(codec.Puback(packet_id=1)),
        undecided=lambda: resumed().client(codec.Pubrel(packet_id=9)),
    ),
    Case(
        "MQTT-2.3.1-6",
        C,
        fails=lambda: subscribed(1).server(qos1(4)).client(codec.Puback(packet_id=5)),
        passes=lambda: subscribed(1).server(qos1(4)).client(codec.Puback(packet_id=4)),
        undecided=lambda: subscribed(1).server(qos1(4)).closed(S),
        name="client-puback",
    ),
    Case(
        "MQTT-3.3.4-1",
        S,
        fails=lambda: connected().client(qos1(1)).server(codec.Pubrec(packet_id=1)),
        passes=lambda: connected().client(qos1(1)).server(codec.Puback(packet_id=1)),
        undecided=lambda: connected().client(qos1(1)).closed(C),
    ),
    Case(
        "MQTT-4.3.2-2",
        S,
        fails=lambda: connected().client(qos1(1)).quiet(after=WAIT),
        passes=lambda: connected().client(qos1(1)).server(codec.Puback(packet_id=1)),
        undecided=lambda: connected().client(qos1(1)).quiet(after=1),
    ),
    Case(
        "MQTT-4.3.2-2",
        C,
        fails=lambda: subscribed(1).server(qos1(4)).quiet(after=WAIT),
        passes=lambda: subscribed(1).server(qos1(4)).client(codec.Puback(packet_id=4)),
        undecided=lambda: subscribed(1).server(qos1(4)).closed(S),
        name="client-receiver",
    ),
    Case(
        "MQTT-4.3.3-1",
        C,
        fails=lambda: pubrec_received().quiet(after=WAIT),
        passes=pubrel_sent,
        undecided=lambda: pubrec_received().closed(S),
    ),
    Case(
        "MQTT-4.3.3-2",
        S,
        fails=lambda: pubrel_sent().quiet(after=WAIT),
        passes=lambda: pubrel_sent().server(codec.Pubcomp(packet_id=3)),
        undecided=lambda: pubrel_sent().closed(C),
    ),
    Case(
        "MQTT-3.8.4-1",
        S,
        fails=lambda: connected().client(subscribe(1, "a")).quiet(after=WAIT),
        passes=lambda: connected().client(subscribe(1, "a")).server(suback(1)),
        undecided=lambda: connected().client(subscribe(1, "a")).closed(C),
    ),
    Case(
        "MQTT-3.8.4-2",
        S,
        fails=lambda: connected().client(subscribe(1, "a")).server(suback(2)),
        passes=lambda: connected().client(subscribe(1, "a")).server(suback(1)),
        undecided=lambda: connected().client(subscribe(1, "a")).closed(C),
    ),
    Case(
        "MQTT-3.8.4-5",
        S,
        fails=lambda: connected().client(subscribe(1, "a", "b")).server(suback(1, 0)),
        passes=lambda: connected().client(subscribe(1, "a", "b")).server(suback(1, 0, 0x80)),
        undecided=lambda: connected().client(subscribe(1, "a", "b")).closed(C),
    ),
    Case(
        "MQTT-3.9.3-1",
        S,
        fails=lambda: connected().client(subscribe(1, ("a", 2), ("b", 0))).server(suback(1, 0, 2)),
        passes=lambda: connected().client(subscribe(1, ("a", 2), ("b", 0))).server(suback(1, 1, 0x80)),
        undecided=lambda: connected().client(subscribe(1, ("a", 2), ("b", 0))).closed(C),
    ),
    Case(
        "MQTT-3.10.4-4",
        S,
        fails=lambda: subscribed(0).client(unsubscribe(2, "t")).quiet(after=WAIT),
        passes=lambda: subscribed(0).client(unsubscribe(2, "t")).server(codec.Unsuback(packet_id=2)),
        undecided=lambda: subscribed(0).client(unsubscribe(2, "t")).closed(C),
    ),
    Case(
        "MQTT-3.10.4-5",
        S,
        fails=lambda: connected().client(unsubscribe(2, "never")).quiet(after=WAIT),
        passes=lambda: connected().client(unsubscribe(2, "never")).server(codec.Unsuback(packet_id=2)),
        undecided=lambda: connected().client(unsubscribe(2, "never")).closed(C),
    ),
    Case(
        "MQTT-3.12.4-1",
        S,
        fails=lambda: connected().client(PINGREQ).quiet(after=WAIT),
        passes=lambda: connected().client(PINGREQ).server(PINGRESP),
        undecided=lambda: connected().client(PINGREQ).closed(C),
    ),
    Case(
        "MQTT-4.6.0-2",
        C,
        fails=lambda: (
            subscribed(1).server(qos1(1), qos1(2)).client(codec.Puback(packet_id=2), codec.Puback(packet_id=1))
        ),
        passes=lambda: (
            subscribed(1).server(qos1(1), qos1(2)).client(codec.Puback(packet_id=1), codec.Puback(packet_id=2))
        ),
        undecided=lambda: subscribed(1).server(qos1(1), qos1(2)).closed(C),
    ),
    Case(
        "MQTT-4.6.0-3",
        C,
        fails=lambda: (
            subscribed(2).server(qos2(1), qos2(2)).client(codec.Pubrec(packet_id=2), codec.Pubrec(packet_id=1))
        ),
        passes=lambda: (
            subscribed(2).server(qos2(1), qos2(2)).client(codec.Pubrec(packet_id=1), codec.Pubrec(packet_id=2))
        ),
        undecided=lambda: subscribed(2).server(qos2(1), qos2(2)).closed(C),
    ),
    Case(
        "MQTT-4.6.0-4",
        C,
        fails=lambda: (
            connected()
            .client(qos2(1), qos2(2))
            .server(codec.Pubrec(packet_id=1), codec.Pubrec(packet_id=2))
            .client(codec.Pubrel(packet_id=2), codec.Pubrel(packet_id=1))
        ),
        passes=lambda: (
            connected()
            .client(qos2(1), qos2(2))
            .server(codec.Pubrec(packet_id=1), codec.Pubrec(packet_id=2))
            .client(codec.Pubrel(packet_id=1), codec.Pubrel(packet_id=2))
        ),
        undecided=lambda: (
            connected().client(qos2(1), qos2(2)).server(codec.Pubrec(packet_id=1), codec.Pubrec(packet_id=2)).closed(C)
        ),
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


def rules_of(talk: Talk) -> list[tuple[str, str]]:
    return [(rule, f.side.value) for f in judge(talk.events).findings for rule in f.rules]


def test_a_complete_qos2_exchange_passes_every_step() -> None:
    judgement = judge(pubrel_sent().server(codec.Pubcomp(packet_id=3)).closed(C).events)
    assert judgement.findings == ()
    assert {"MQTT-2.3.1-6", "MQTT-3.3.4-1", "MQTT-4.3.3-1", "MQTT-4.3.3-2"} <= judgement.passed


def test_missing_pubrec_is_the_qos2_receivers_fault() -> None:
    assert rules_of(connected().client(qos2(3)).quiet(after=WAIT)) == [("MQTT-4.3.3-2", "server")]


def test_pubrel_before_pubrec_breaks_the_sender_flow() -> None:
    talk = connected().client(qos2(3), codec.Pubrel(packet_id=3))
    assert ("MQTT-4.3.3-1", "client") in rules_of(talk)


def test_pubcomp_before_pubrel_breaks_the_receiver_flow() -> None:
    talk = pubrec_received().server(codec.Pubcomp(packet_id=3))
    assert ("MQTT-4.3.3-2", "server") in rules_of(talk)


def test_publish_resent_after_its_pubrel_breaks_the_sender_flow() -> None:
    resend = publish("t", b"m3", qos=2, packet_id=3, dup=True)
    assert ("MQTT-4.3.3-1", "client") in rules_of(pubrel_sent().client(resend))


def test_a_dup_resend_before_pubrel_is_no_reuse_and_owes_another_pubrec() -> None:
    resend = publish("t", b"m3", qos=2, packet_id=3, dup=True)
    talk = pubrec_received().client(resend).server(codec.Pubrec(packet_id=3)).client(codec.Pubrel(packet_id=3))
    judgement = judge(talk.server(codec.Pubcomp(packet_id=3)).closed(C).events)
    assert judgement.findings == (), explain(judgement)


def test_a_dup_resend_before_any_pubrec_is_settled_by_the_two_pubrecs() -> None:
    """PUBLISH, its DUP re-send, then PUBREC for each: both answers arrived, nothing is missing."""
    first = publish("t", b"m3", qos=2, packet_id=3)
    resend = publish("t", b"m3", qos=2, packet_id=3, dup=True)
    talk = connected().client(first).client(resend).server(codec.Pubrec(packet_id=3), codec.Pubrec(packet_id=3))
    talk = talk.client(codec.Pubrel(packet_id=3)).server(codec.Pubcomp(packet_id=3)).quiet(after=WAIT)
    judgement = judge(talk.events)
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-4.3.3-2" in judgement.passed


def test_a_stray_pubcomp_is_the_receivers_fault() -> None:
    assert rules_of(connected().server(codec.Pubcomp(packet_id=8))) == [("MQTT-4.3.3-2", "server")]


def test_an_unsuback_with_another_identifier_is_a_finding() -> None:
    talk = subscribed(0).client(unsubscribe(2, "t")).server(codec.Unsuback(packet_id=5))
    assert ("MQTT-3.10.4-4", "server") in rules_of(talk)


def test_a_pubrel_on_a_resumed_session_may_finish_an_earlier_flow() -> None:
    talk = resumed().client(codec.Pubrel(packet_id=9)).server(codec.Pubcomp(packet_id=9)).closed(C)
    judgement = judge(talk.events)
    assert judgement.findings == ()
    assert "MQTT-4.3.3-2" in judgement.passed


def test_a_late_answer_after_a_missed_deadline_is_still_a_finding_once() -> None:
    talk = connected().client(subscribe(1, "a")).quiet(after=WAIT).server(suback(1)).closed(C)
    assert rules_of(talk) == [("MQTT-3.8.4-1", "server")]


def test_the_client_refusing_a_subscription_code_is_no_subscription() -> None:
    talk = connected().client(subscribe(1, "t")).server(suback(1, 0x80)).server(publish("t"))
    assert ("MQTT-3.3.2-3", "server") in rules_of(talk)


def test_a_qos0_publish_needs_no_answer() -> None:
    judgement = judge(connected().client(publish("t")).quiet(after=WAIT).events)
    assert judgement.findings == ()


def test_bytes_lost_from_the_server_leave_its_answers_not_assessable() -> None:
    from mqttaudit.judge import Lost

    talk = connected().client(publish("t", b"m", qos=1, packet_id=1))
    talk.events.append(Lost(talk.now + 0.01, S, 4))  # the PUBACK may be in the bytes the capture missed
    talk.quiet(after=WAIT)
    judgement = judge(talk.events)
    assert judgement.findings == (), explain(judgement)
    assert judgement.not_assessable["MQTT-4.3.2-2"].startswith("bytes not captured: 4 bytes the server sent")


def test_bytes_lost_from_the_client_make_its_ack_order_not_assessable() -> None:
    from mqttaudit.judge import Lost

    first, second = publish("t", b"1", qos=1, packet_id=1), publish("t", b"2", qos=1, packet_id=2)
    talk = connected().server(first, second)
    talk.events.append(Lost(talk.now + 0.01, C, 4))  # the PUBACK for id 1 may be in the bytes the capture missed
    talk.client(codec.Puback(packet_id=2)).quiet(after=WAIT)
    judgement = judge(talk.events)
    assert not [f for f in judgement.findings if "MQTT-4.6.0-2" in f.rules], explain(judgement)
    assert "MQTT-4.6.0-2" in judgement.not_assessable


def test_an_answer_seen_after_lost_bytes_still_keeps_the_rule() -> None:
    from mqttaudit.judge import Lost

    talk = connected().client(publish("t", b"m", qos=1, packet_id=1))
    talk.events.append(Lost(talk.now + 0.01, S, 4))
    talk.now += 0.01
    talk.server(codec.Puback(packet_id=1)).quiet(after=WAIT)
    judgement = judge(talk.events)
    assert "MQTT-4.3.2-2" in judgement.passed, explain(judgement)


def test_an_unanswered_step_says_what_was_owed_for_which_packet() -> None:
    """The text of an obligation is made only when it is broken: it still names the request and the packet the
    missing answer was owed for as they were when the obligation opened."""
    [missing] = judge(pubrel_sent().quiet(after=WAIT).events).findings
    assert (missing.rule, missing.side) == ("MQTT-4.3.3-2", codec.Direction.FROM_SERVER)
    assert missing.detail.startswith("the server did not send PUBCOMP for PUBLISH id 3 (QoS 2, retain 0) to 't'")
    assert missing.expected == "the server answers PUBREL id 3 with PUBCOMP (within 5 s)"
    [ping] = judge(connected().client(PINGREQ).quiet(after=WAIT).events).findings
    assert ping.rule == "MQTT-3.12.4-1" and ping.detail.startswith("the server did not send PINGRESP within 5 s")
    assert ping.expected == "the server answers PINGREQ with PINGRESP (within 5 s)"


@pytest.mark.parametrize(
    ("talk", "rule"),
    [
        (lambda: connected().client(subscribe(1, "a")), "MQTT-3.8.4-1"),
        (lambda: subscribed(0).client(unsubscribe(2, "t")), "MQTT-3.10.4-4"),
        (lambda: connected().client(PINGREQ), "MQTT-3.12.4-1"),
    ],
)
def test_a_server_that_closes_instead_of_answering_a_well_formed_request_fails(talk: Any, rule: str) -> None:
    """Nothing lets a server close instead of SUBACK, UNSUBACK or PINGRESP: it treated the request as malformed."""
    assert (rule, "server") in rules_of(talk().closed(S))


@pytest.mark.parametrize(
    ("talk", "rule"),
    [
        (lambda: connected().client(subscribe(1, "a")), "MQTT-3.8.4-1"),
        (lambda: connected().client(PINGREQ), "MQTT-3.12.4-1"),
    ],
)
def test_a_close_on_a_later_violation_of_the_client_is_not_charged_to_the_request(talk: Any, rule: str) -> None:
    """The client broke a rule after its request (a reserved packet type): the server closes on that, as it must."""
    judgement = judge(talk().client("00 00").closed(S).events)
    assert (rule, "server") not in [(rule, f.side.value) for f in judgement.findings for rule in f.rules]
    assert judgement.not_assessable[rule].startswith("closed instead of answering: the server closed the connection")
