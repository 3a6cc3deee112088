"""Opening and closing a connection (sections 3.1, 3.2, 3.14, Keep Alive 3.1.2.10)."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.judge import Closed, ConversationJudge, JudgeConfig, Quiet, judge

from .cases import Case, case_id, check_fails, check_passes, check_undecided, explain
from .talk import CONNACK_OK, CONNECT, DISCONNECT, PINGREQ, PINGRESP, C, S, Talk, connected, suback, subscribe

LEVEL_5 = codec.Connect(client_id="x", protocol_level=5)
LEVEL_6 = codec.Connect(client_id="x", protocol_level=6)
EMPTY_ID_PERSISTENT = codec.Connect(client_id="", clean_session=False)


def refused(code: int, *then: codec.Packet) -> Talk:
    return Talk().client(CONNECT, *then).server(codec.Connack(return_code=code))


#: 23 characters from 0-9, a-z, A-Z: a ClientId every server must allow.
PLAIN_ID = codec.Connect(client_id="Plain0123456789abcdefgh", keep_alive=0)

CASES = [
    Case(
        "MQTT-3.1.0-1",
        C,
        fails=lambda: Talk().client(PINGREQ),
        passes=connected,
        undecided=lambda: Talk().client("30ffffffff01"),
    ),
    Case(
        "MQTT-3.2.0-1",
        S,
        fails=lambda: Talk().client(CONNECT).server(PINGRESP),
        passes=connected,
        undecided=lambda: Talk().client(CONNECT).server("20ffffffff01"),
    ),
    Case(
        "MQTT-3.1.2-2",
        S,
        fails=lambda: Talk().client(LEVEL_5).server(CONNACK_OK).quiet(after=10),
        passes=lambda: Talk().client(LEVEL_5).server(codec.Connack(return_code=1)).closed(S),
        undecided=lambda: Talk().client(LEVEL_5).server(codec.Connack(return_code=1)).quiet(after=1),
    ),
    Case(
        "MQTT-3.1.3-8",
        S,
        fails=lambda: Talk().client(EMPTY_ID_PERSISTENT).server(CONNACK_OK).quiet(after=10),
        passes=lambda: Talk().client(EMPTY_ID_PERSISTENT).server(codec.Connack(return_code=2)).closed(S),
        undecided=lambda: Talk().client(EMPTY_ID_PERSISTENT).server(codec.Connack(return_code=2)).quiet(after=1),
    ),
    Case(
        "MQTT-3.1.3-5",
        S,
        fails=lambda: Talk().client(PLAIN_ID).server(codec.Connack(return_code=2)).closed(S),
        passes=lambda: Talk().client(PLAIN_ID).server(CONNACK_OK),
        undecided=lambda: Talk().client(PLAIN_ID).closed(S),
    ),
    Case(
        "MQTT-3.1.4-4",
        S,
        fails=lambda: Talk().client(CONNECT).quiet(after=10),
        passes=connected,
        undecided=lambda: Talk().client(CONNECT).closed(S, after=1),
    ),
    Case(
        "MQTT-3.1.4-5",
        S,
        fails=lambda: refused(5, subscribe(1, "a")).server(suback(1)).closed(S),
        passes=lambda: refused(5, subscribe(1, "a")).closed(S),
        undecided=lambda: refused(5, subscribe(1, "a")).quiet(after=1),
    ),
    Case(
        "MQTT-3.2.2-1",
        S,
        fails=lambda: Talk().client(CONNECT).server(codec.Connack(session_present=True)),
        passes=connected,
        undecided=lambda: Talk().client(CONNECT).quiet(after=1),
    ),
    Case(
        "MQTT-3.2.2-5",
        S,
        fails=lambda: refused(4).quiet(after=10),
        passes=lambda: refused(4).closed(S),
        undecided=lambda: refused(4).quiet(after=1),
    ),
    Case(
        "MQTT-3.14.4-1",
        C,
        fails=lambda: connected().client(DISCONNECT).quiet(after=10),
        passes=lambda: connected().client(DISCONNECT).closed(C),
        undecided=lambda: connected().client(DISCONNECT).closed(S),
    ),
    Case(
        "MQTT-3.14.4-2",
        C,
        fails=lambda: connected().client(DISCONNECT).client(PINGREQ).closed(C),
        passes=lambda: connected().client(DISCONNECT).closed(C),
        undecided=lambda: connected().client(DISCONNECT).quiet(after=1),
    ),
    Case(
        "MQTT-3.1.2-23",
        C,
        fails=lambda: connected(keep_alive=10).quiet(after=30),
        passes=lambda: connected(keep_alive=10).wait(8).client(PINGREQ).server(PINGRESP).closed(C),
        undecided=lambda: connected(keep_alive=10).quiet(after=3),
    ),
    Case(
        "MQTT-3.1.2-24",
        S,
        fails=lambda: connected(keep_alive=10).quiet(after=20),
        passes=lambda: connected(keep_alive=10).closed(S, after=14),
        undecided=lambda: connected(keep_alive=10).closed(C, after=12),
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


LEVEL_9 = codec.Connect(client_id="judge-test", protocol_level=9)


@pytest.mark.parametrize(
    ("connack", "kept"),
    [
        ("20 02 00 01", True),  # 3.1.1's answer [MQTT-3.1.2-2 of 3.1.1]
        ("20 03 00 84 00", True),  # 5.0's, from a server that speaks 5.0 [MQTT-3.1.2-2 of 5.0]
        ("20 08 00 84 05 1f 00 02 6e 6f", True),  # 5.0's with a Reason String
        ("20 02 00 84", False),  # 0x84 in 3.1.1's two bytes: well formed in neither version
        ("20 02 00 02", False),
    ],
)
def test_an_unknown_protocol_level_may_be_refused_as_either_version_refuses_it(connack: str, kept: bool) -> None:
    """A level that is neither 4 nor 5 names neither version: 3.1.1's CONNACK 0x01 and 5.0's CONNACK 0x84 (in
    5.0's form), each followed by the close, keep MQTT-3.1.2-2."""
    judgement = judge(Talk().client(LEVEL_9).server(connack.replace(" ", "")).closed(S).events)
    if kept:
        assert "MQTT-3.1.2-2" in judgement.passed, explain(judgement)
    else:
        assert [f.rule for f in judgement.findings if f.side is S] == ["MQTT-3.1.2-2"], explain(judgement)
    left_open = judge(Talk().client(LEVEL_9).server(connack.replace(" ", "")).quiet(after=10).events)
    unclosed = [f for f in left_open.findings if f.rule == "MQTT-3.1.2-2" and "did not close" in f.detail]
    assert [f.side for f in unclosed] == [S], explain(left_open)  # the close is owed either way


def test_closing_without_the_connack_0x01_breaks_the_protocol_level_rule() -> None:
    findings = judge(Talk().client(LEVEL_5).closed(S).events).findings
    assert [(rule, f.side) for f in findings for rule in f.rules] == [("MQTT-3.1.2-2", S)]
    assert "did not send CONNACK first" in findings[0].detail


def test_refusing_a_valid_connect_with_any_return_code_is_allowed() -> None:
    for code in range(1, 6):
        judgement = judge(refused(code).closed(S).events)
        assert judgement.findings == (), explain(judgement)
        assert {"MQTT-3.1.4-4", "MQTT-3.2.2-5"} <= judgement.passed


def test_a_refused_connection_owes_no_answer_to_what_followed_the_connect() -> None:
    judgement = judge(refused(5, subscribe(1, "a"), PINGREQ).closed(S, after=20).events)
    assert {rule for f in judgement.findings for rule in f.rules} == {"MQTT-3.2.2-5"}  # only the late close


def test_another_protocol_name_is_not_judged_as_mqtt_3_1_1() -> None:
    mqisdp = codec.Connect(client_id="x", protocol_name="MQIsdp", protocol_level=3)
    judgement = judge(Talk().client(mqisdp).server(CONNACK_OK).quiet(after=10).events)
    assert judgement.findings == ()
    assert "MQTT-3.1.2-1" in judgement.not_assessable["MQTT-3.1.4-4"]


def test_a_supported_level_the_judge_does_not_know_is_not_judged() -> None:
    config = JudgeConfig(supported_protocol_levels=frozenset({4, 5, 6}))
    conversation = ConversationJudge(config)
    for event in Talk().client(LEVEL_6).server(CONNACK_OK).quiet(after=10).events:
        conversation.feed(event)
    judgement = conversation.finish()
    assert "MQTT-3.1.2-2" not in judgement.assessed and "MQTT-3.1.4-4" in judgement.not_assessable


def test_a_second_connack_answers_the_second_connect() -> None:
    talk = connected().client(CONNECT).server(CONNACK_OK).closed(S)
    findings = judge(talk.events).findings
    assert [(rule, f.event) for f in findings for rule in f.rules] == [("MQTT-3.1.0-2", 3)]


def test_keep_alive_restarts_with_every_client_packet() -> None:
    talk = connected(keep_alive=10)
    for _ in range(5):
        talk.wait(9).client(PINGREQ).server(PINGRESP)
    judgement = judge(talk.quiet(after=5).events)
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.1.2-23" in judgement.passed


def test_a_server_closing_before_a_whole_keep_alive_does_not_exercise_the_rule() -> None:
    judgement = judge(connected(keep_alive=10).closed(S, after=4).events)
    assert "MQTT-3.1.2-24" not in judgement.assessed | judgement.not_assessable.keys()


def test_keep_alive_zero_never_expires() -> None:
    judgement = judge(connected(keep_alive=0).quiet(after=3600).events)
    assert judgement.findings == ()
    assert "MQTT-3.1.2-24" not in judgement.not_assessable


def test_keep_alive_no_longer_applies_after_disconnect() -> None:
    judgement = judge(connected(keep_alive=10).client(DISCONNECT).closed(C, after=30).events)
    assert {rule for f in judgement.findings for rule in f.rules} == {"MQTT-3.14.4-1"}


def test_events_must_not_go_back_in_time() -> None:
    conversation = ConversationJudge()
    conversation.feed(Quiet(2.0))
    with pytest.raises(ValueError, match="back in time"):
        conversation.feed(Quiet(1.0))


def test_nothing_may_follow_the_close() -> None:
    conversation = ConversationJudge()
    conversation.feed(Closed(1.0, C, abrupt=False))
    with pytest.raises(ValueError, match="over"):
        conversation.feed(Quiet(2.0))


def test_finish_is_idempotent_and_an_empty_conversation_decides_nothing() -> None:
    conversation = ConversationJudge()
    first = conversation.finish()
    assert first is conversation.finish()
    assert first.findings == () and not first.assessed and not first.not_assessable


def test_a_conversation_seen_from_its_middle_is_not_blamed_for_what_came_before() -> None:
    from mqttaudit.judge import ConversationJudge

    talk = Talk().client(PINGREQ).server(PINGRESP).server(codec.Puback(packet_id=9)).quiet(after=10)
    whole = ConversationJudge()
    middle = ConversationJudge(mid_stream=True)
    for event in talk.events:
        whole.feed(event)
        middle.feed(event)
    assert {rule for f in whole.finish().findings for rule in f.rules} >= {"MQTT-3.1.0-1"}
    judged = middle.finish()
    assert judged.findings == (), explain(judged)
    assert "MQTT-3.1.0-1" in judged.not_assessable and "MQTT-3.12.4-1" in judged.passed


def test_lost_server_bytes_before_its_first_packet_leave_connack_first_not_assessable() -> None:
    from mqttaudit.judge import Lost, judge

    talk = Talk().client(CONNECT)
    talk.events.append(Lost(talk.now + 0.01, S, 4))  # the CONNACK may be in them
    talk.now += 0.01
    talk.client(PINGREQ).server(PINGRESP).quiet(after=10)
    judgement = judge(talk.events)
    assert "MQTT-3.2.0-1" in judgement.not_assessable, explain(judgement)
    assert not [f for f in judgement.findings if f.side is S], explain(judgement)


def test_nothing_is_judged_after_the_connect_of_another_specification() -> None:
    from mqttaudit.judge import JudgeConfig, judge

    v6 = codec.Connect(client_id="six", protocol_level=6)
    talk = Talk().client(v6).server(CONNACK_OK).client("82050001000000").server(suback(1)).quiet(after=10)
    judgement = judge(talk.events, JudgeConfig(supported_protocol_levels=frozenset({4, 6})))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.1.4-4" in judgement.not_assessable


def test_a_server_that_keeps_a_silent_client_is_told_what_it_owed() -> None:
    findings = {rule: f for f in judge(connected(keep_alive=1).quiet(after=10).events).findings for rule in f.rules}
    kept = findings["MQTT-3.1.2-24"]
    assert kept.side is codec.Direction.FROM_SERVER
    owed = "close the connection of a client silent for 1.5 s (Keep Alive 1 s)"
    assert kept.detail.startswith(f"the server did not {owed}")
    assert kept.expected == "the server disconnects a client that sends nothing for 1.5 times its Keep Alive"
