"""Protocol violations (sections 1.5.3, 2.2.2, 3.x "treat as malformed", 4.8): the receiver closes the connection
within the grace and does not act on the offending packet."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mqttaudit import codec
from mqttaudit.judge import ENFORCED_CODEC_RULES, judge

from . import vectors
from .cases import Case, binding, case_id, check_fails, check_passes, check_undecided, explain
from .talk import CONNACK_OK, CONNECT, PINGREQ, PINGRESP, C, Item, S, Talk, connected, suback

GRACE = 5.0  # JudgeConfig().close_grace


def closing(
    rule: str,
    bad: Item,
    *,
    receiver: codec.Direction = S,
    start: Callable[[], Talk] = connected,
    name: str = "",
    text: bool = False,
) -> Case:
    """The receiver of ``bad`` (sent in a WebSocket text frame when ``text``) must close: it stays open past the
    grace (fails), closes at once (passes), or observation stops inside the grace (undecided)."""
    offender = C if receiver is S else S

    def base() -> Talk:
        return start().send(offender, bad, text=text)

    return Case(
        rule,
        receiver,
        fails=lambda: base().quiet(after=GRACE + 5),
        passes=lambda: base().closed(receiver, after=0.1),
        undecided=lambda: base().quiet(after=GRACE / 5),
        name=name,
    )


def fresh() -> Talk:
    return Talk()


CASES = [
    closing("MQTT-3.6.1-1", "60020001", name="pubrel-flags-0000"),
    closing("MQTT-3.8.1-1", "8006000100016100", name="subscribe-flags-0000"),
    closing("MQTT-3.10.1-1", "a0050001000161", name="unsubscribe-flags-0000"),
    closing("MQTT-3.14.1-1", "e100", name="disconnect-flags-0001"),
    closing("MQTT-3.8.3-4", "8206000100016103", name="requested-qos-3"),
    closing("MQTT-3.3.1-4", "36050001610001", name="publish-qos-3"),
    closing("MQTT-3.3.1-4", "36050001610001", receiver=C, name="publish-qos-3"),
    closing("MQTT-2.2.2-2", "c100", name="pingreq-flags-0001"),
    closing("MQTT-2.2.2-2", "d100", receiver=C, name="pingresp-flags-0001"),
    closing("MQTT-1.5.3-1", "30050002c32878", name="ill-formed-utf8-topic"),
    closing("MQTT-1.5.3-1", "30050002c32878", receiver=C, name="ill-formed-utf8-topic"),
    closing("MQTT-1.5.3-2", "30050002610078", name="null-in-topic"),
    closing("MQTT-1.5.3-2", "30050002610078", receiver=C, name="null-in-topic"),
    closing("MQTT-4.8.0-1", "82020001", name="subscribe-without-payload"),
    closing("MQTT-4.8.0-1", "8206000100016100", receiver=C, name="subscribe-from-server"),
    closing("MQTT-4.8.0-1", "30ffffffff01", name="five-byte-remaining-length"),
    closing("MQTT-4.8.0-1", PINGREQ, start=fresh, name="pingreq-before-connect"),
    closing("MQTT-3.1.0-2", CONNECT, name="second-connect"),
    closing("MQTT-3.1.2-3", codec.Connect(client_id="x", raw_connect_flags=0x03), start=fresh, name="reserved-flag"),
    closing(
        "MQTT-3.1.4-1", codec.Connect(client_id="x", will=codec.Will(topic="w", qos=3)), start=fresh, name="will-qos-3"
    ),
    # [MQTT-6.0.0-1] a sound packet in a WebSocket text frame: its recipient closes, whichever side it is.
    closing("MQTT-6.0.0-1", PINGREQ, text=True, name="pingreq-in-text-frame"),
    closing("MQTT-6.0.0-1", PINGRESP, receiver=C, text=True, name="pingresp-in-text-frame"),
    closing("MQTT-6.0.0-1", CONNECT, start=fresh, text=True, name="connect-in-text-frame"),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_receiver_that_stays_open_past_the_grace_breaks_the_rule(case: Case) -> None:
    check_fails(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_receiver_that_closes_within_the_grace_keeps_the_rule(case: Case) -> None:
    check_passes(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_observation_that_ends_inside_the_grace_decides_nothing(case: Case) -> None:
    check_undecided(case)


def test_suback_to_a_malformed_subscribe_is_acting_on_it() -> None:
    talk = connected().client("8006000100016100").server(suback(1)).closed(S)
    findings = judge(talk.events).findings
    assert sorted((rule, f.side.value, f.event) for f in findings for rule in f.rules) == [
        ("MQTT-2.2.2-1", "server", 3),  # the flags rule the SUBSCRIBE broke
        ("MQTT-3.8.1-1", "server", 3),  # the duty to close on it
    ], explain(judge(talk.events))
    assert all("answers the offending packet" in f.detail for f in findings)


def test_suback_to_an_empty_topic_filter_breaks_the_filter_rule_too() -> None:
    """The server that accepts ``82 05 00 01 00 00 00`` fails [MQTT-4.7.3-1] as well as the duty to close."""
    talk = connected().client("82050001000000").server(suback(1)).closed(S)
    findings = judge(talk.events).findings
    assert sorted((rule, f.side.value, f.event) for f in findings for rule in f.rules) == [
        ("MQTT-4.7.3-1", "server", 3),
        ("MQTT-4.8.0-1", "server", 3),
    ]
    assert all("breaking MQTT-4.7.3-1" in f.detail for f in findings)


def test_answering_a_packet_sent_after_the_violation_is_acting_on_it() -> None:
    talk = connected().client("82020001", PINGREQ).server(PINGRESP).closed(S)
    findings = judge(talk.events).findings
    # the SUBSCRIBE without a Topic Filter breaks the Client's [MQTT-3.8.3-3]; the server breaks its duty to close
    assert sorted((rule, f.side.value) for f in findings for rule in f.rules) == [("MQTT-4.8.0-1", "server")]
    assert all("sent after it" in f.detail and "breaking MQTT-3.8.3-3" in f.detail for f in findings)


def test_answer_to_a_request_sent_before_the_violation_is_not_acting_on_it() -> None:
    talk = connected().client(PINGREQ, "82020001").server(PINGRESP).closed(S)
    assert judge(talk.events).findings == ()


def test_delivering_the_offending_publish_is_acting_on_it() -> None:
    bad = codec.Publish(topic="a/#", payload=b"x")  # a wildcard in a Topic Name [MQTT-3.3.2-2]
    talk = connected().client(bad).server(bad).closed(S)
    assert {(rule, f.side) for f in judge(talk.events).findings for rule in f.rules} == {
        ("MQTT-4.8.0-1", S),
        ("MQTT-3.3.2-2", S),
        ("MQTT-4.7.1-1", S),
        ("MQTT-3.3.2-3", S),  # malformed or not, the server's PUBLISH is a delivery, and nobody subscribed
    }


def test_connack_to_a_malformed_connect_is_acting_on_it() -> None:
    talk = Talk().client(codec.Connect(client_id="x", raw_connect_flags=0x03)).server(CONNACK_OK).closed(S)
    assert [(rule, f.side) for f in judge(talk.events).findings for rule in f.rules] == [
        ("MQTT-3.1.2-3", S),
        ("MQTT-3.1.4-1", S),
    ]


def test_closing_late_is_reported_with_the_delay() -> None:
    talk = connected().client("82020001").closed(S, after=GRACE + 2)
    findings = judge(talk.events).findings
    assert sorted(rule for f in findings for rule in f.rules) == ["MQTT-4.8.0-1"]
    assert all("closed only 7" in f.detail for f in findings)


def test_the_offender_closing_first_decides_nothing() -> None:
    judgement = judge(connected().client("82020001").closed(C, after=0.1).events)
    assert "MQTT-4.8.0-1" in judgement.not_assessable


def test_an_unknown_closer_decides_nothing() -> None:
    judgement = judge(connected().client("82020001").closed(None, after=0.1).events)
    assert "MQTT-4.8.0-1" in judgement.not_assessable


def test_only_the_first_violation_of_a_side_opens_a_duty_to_close() -> None:
    talk = connected().client("82020001").client("a0020002").quiet(after=GRACE + 5)
    assert sorted(rule for f in judge(talk.events).findings for rule in f.rules) == ["MQTT-4.8.0-1"]


def test_a_truncated_packet_at_the_close_is_no_violation_to_close_on() -> None:
    talk = connected().client("3005").closed(C)
    assert judge(talk.events).findings == ()


def test_advisory_violations_oblige_nothing() -> None:
    padded = "c08000"  # PINGREQ with a Remaining Length written in two bytes (SHOULD-level)
    talk = connected().client(padded).server(PINGRESP).quiet(after=GRACE + 5)
    assert judge(talk.events).findings == ()


ENFORCED = [v for v in vectors.INVALID if set(v[3]) & ENFORCED_CODEC_RULES]


@pytest.mark.parametrize(("name", "sender", "data", "wanted"), ENFORCED, ids=[v[0] for v in ENFORCED])
def test_the_receiver_upholds_the_rule_a_malformed_packet_breaks(
    name: str, sender: str, data: bytes, wanted: list[str]
) -> None:
    """Staying open on a packet that breaks codec rule X fails X on the receiver's side when X binds the receiver,
    and the receiver's duty to close in every case; closing keeps them. A rule of the sender alone (a Client's
    CONNECT field) is never charged to the receiver."""
    offender = codec.Direction(sender)
    receiver = S if offender is C else C
    broken = set(wanted) & ENFORCED_CODEC_RULES
    upheld = binding(broken, receiver)
    start = Talk if data[0] >> 4 == 1 else connected  # a CONNECT opens the conversation
    stays = judge(start().send(offender, data).quiet(after=GRACE + 5).events)
    charged = {rule for f in stays.findings if f.side is receiver for rule in f.rules}
    assert upheld <= charged and not (broken - upheld) & charged, explain(stays)
    assert charged, explain(stays)  # the duty to close, under the statement that binds the receiver
    closes = judge(start().send(offender, data).closed(receiver, after=0.1).events)
    assert upheld <= closes.passed, explain(closes)


def test_every_enforced_codec_rule_has_a_vector() -> None:
    assert sorted(ENFORCED_CODEC_RULES - {rule for v in ENFORCED for rule in v[3]}) == []
