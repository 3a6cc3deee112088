"""Properties of the judge as a whole: it decides exactly the rules it claims, each of them shown broken by a test
conversation; it cites only catalogue statements; and its judgement depends on the bytes, not on how they were
split into feeds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.judge import CHECKED_RULES, OWN_RULES, ConversationJudge, Event, Judgement, Sent, judge, judge_scenario
from mqttaudit.judge.rules import RECEIVER_DUTIES
from mqttaudit.spec import load_catalogue

from . import (
    test_judge_acknowledgements,
    test_judge_connection,
    test_judge_deliveries,
    test_judge_scenario,
    test_judge_violations,
)
from .cases import Case, verdict
from .talk import C, S, Talk, reframe

ALL_CASES: list[Case] = [
    *test_judge_violations.CASES,
    *test_judge_connection.CASES,
    *test_judge_acknowledgements.CASES,
    *test_judge_deliveries.CASES,
    *test_judge_scenario.CASES,
]
CATALOGUE = load_catalogue("3.1.1")


def test_every_checked_rule_is_a_catalogue_statement_or_derived_rule() -> None:
    assert sorted(CHECKED_RULES - {rule.id for rule in CATALOGUE}) == []


def test_the_case_tables_cover_exactly_the_judges_own_rules_and_the_receiver_duties() -> None:
    assert {case.rule for case in ALL_CASES} == set(OWN_RULES | RECEIVER_DUTIES)


def test_every_checked_rule_is_triggered_by_some_test_conversation() -> None:
    triggered = {rule for case in ALL_CASES for f in verdict(case.fails()).findings for rule in f.rules}
    assert sorted((OWN_RULES | RECEIVER_DUTIES) - triggered) == []


def test_the_side_at_fault_is_one_the_catalogue_allows() -> None:
    for case in ALL_CASES:
        actor = CATALOGUE[case.rule].actor
        assert actor in ("both", case.side.value), f"{case.id}: the catalogue says {actor}"


# Conversations hypothesis writes ------------------------------------------------------------------------------

ids = st.integers(1, 3)
topics = st.sampled_from(["a", "b/c", "$s/x"])
filters = st.sampled_from(["a", "+", "#", "b/+", "$s/#"])


@st.composite
def publishes(draw: st.DrawFn) -> codec.Publish:
    qos = draw(st.integers(0, 2))
    return codec.Publish(
        topic=draw(topics),
        payload=draw(st.sampled_from([b"x", b"y", b""])),
        qos=qos,
        retain=draw(st.booleans()),
        dup=qos > 0 and draw(st.booleans()),
        packet_id=draw(ids) if qos else None,
    )


packets: st.SearchStrategy[codec.Packet] = st.one_of(
    publishes(),
    *(st.builds(cls, packet_id=ids) for cls in (codec.Puback, codec.Pubrec, codec.Pubrel, codec.Pubcomp)),
    st.builds(
        codec.Subscribe,
        packet_id=ids,
        subscriptions=st.lists(
            st.builds(codec.Subscription, topic_filter=filters, qos=st.integers(0, 2)), min_size=1, max_size=2
        ),
    ),
    st.builds(
        codec.Suback, packet_id=ids, return_codes=st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=2)
    ),
    st.builds(codec.Unsubscribe, packet_id=ids, topic_filters=st.lists(filters, min_size=1, max_size=2)),
    st.builds(codec.Unsuback, packet_id=ids),
    st.builds(codec.Pingreq),
    st.builds(codec.Pingresp),
    st.builds(codec.Disconnect),
    st.builds(
        codec.Connect,
        client_id=st.sampled_from(["p", "q", ""]),
        clean_session=st.booleans(),
        keep_alive=st.sampled_from([0, 2, 10]),
        will=st.none() | st.builds(codec.Will, topic=topics, message=st.just(b"w"), qos=st.integers(0, 2)),
        protocol_level=st.sampled_from([4, 4, 4, 5]),
    ),
    st.builds(codec.Connack, session_present=st.booleans(), return_code=st.sampled_from([0, 0, 0, 2, 5])),
)
#: Bytes that break rules: SUBSCRIBE without payload, DISCONNECT flags, a fifth length byte, PINGREQ flags,
#: U+0000 in a topic, a truncated PUBLISH.
broken = st.sampled_from(["82020001", "e100", "30ffffffff01", "c100", "30050002610078", "3005"])
pauses = st.sampled_from([0.0, 0.01, 1.0, 6.0, 20.0])


@st.composite
def conversations(draw: st.DrawFn) -> Talk:
    talk = Talk()
    if draw(st.booleans()):
        talk.client(codec.Connect(client_id="p", keep_alive=draw(st.sampled_from([0, 10]))))
        talk.server(draw(st.sampled_from([codec.Connack(), codec.Connack(return_code=5)])))
    for _ in range(draw(st.integers(0, 10))):
        talk.wait(draw(pauses))
        sender = draw(st.sampled_from([C, S]))
        talk.send(sender, draw(st.one_of(packets, broken)))
    talk.wait(draw(pauses))
    if draw(st.booleans()):
        talk.quiet(after=draw(pauses))
    else:
        talk.closed(draw(st.sampled_from([C, S, None])), after=draw(pauses))
    return talk


def same(a: Judgement, b: Judgement) -> bool:
    return a.findings == b.findings and a.assessed == b.assessed and dict(a.not_assessable) == dict(b.not_assessable)


def check_sound(judgement: Judgement, events: list[Event]) -> None:
    """Findings cite catalogue rules the judge claims, at the time of the event they name as evidence."""
    for finding in judgement.findings:
        assert finding.rule in CATALOGUE and finding.rule in CHECKED_RULES
        assert 0 <= finding.event < len(events)
        assert events[finding.event].time == finding.time
    assert judgement.assessed <= CHECKED_RULES and set(judgement.not_assessable) <= CHECKED_RULES
    assert not judgement.assessed & judgement.not_assessable.keys()


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_any_conversation_is_judged_with_catalogue_rules_and_real_evidence(talk: Talk) -> None:
    check_sound(judge(talk.events), talk.events)


@settings(max_examples=200, deadline=None)
@given(conversations(), st.lists(st.lists(st.integers(0, 200), max_size=4), min_size=1, max_size=6))
def test_judgement_does_not_depend_on_how_the_bytes_were_split(talk: Talk, splits: list[list[int]]) -> None:
    assert same(judge(reframe(talk.script, splits)), judge(talk.events))


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(ALL_CASES),
    st.sampled_from(["fails", "passes", "undecided"]),
    st.lists(st.lists(st.integers(0, 200), max_size=4), min_size=1, max_size=6),
)
def test_case_conversations_keep_their_judgement_when_reframed(
    case: Case, column: str, splits: list[list[int]]
) -> None:
    conversation = getattr(case, column)()
    talks = conversation if isinstance(conversation, dict) else {"": conversation}
    original = judge_scenario({name: talk.events for name, talk in talks.items()})
    reframed = judge_scenario({name: reframe(talk.script, splits) for name, talk in talks.items()})
    assert same(reframed, original)


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_fed_findings_are_the_judgements_findings(talk: Talk) -> None:
    conversation = ConversationJudge()
    fed = [finding for event in talk.events for finding in conversation.feed(event)]
    judgement = conversation.finish()
    assert set(fed) <= set(judgement.findings)
    assert len(fed) == len(set(fed))


@settings(max_examples=100, deadline=None)
@given(st.lists(conversations(), min_size=1, max_size=3))
def test_any_scenario_cites_only_catalogue_rules(talks: list[Talk]) -> None:
    judgement = judge_scenario({f"c{n}": talk.events for n, talk in enumerate(talks)})
    for finding in judgement.findings:
        assert finding.rule in CHECKED_RULES
        events = talks[int(finding.conversation[1:])].events
        assert events[finding.event].time == finding.time


def test_sent_events_carry_codec_frames() -> None:
    talk = Talk().client(codec.Pingreq())
    [event] = talk.events
    assert isinstance(event, Sent) and event.frame.packet == codec.Pingreq()


def test_the_examples_in_the_docstrings_hold() -> None:
    import doctest

    import mqttaudit.judge
    import mqttaudit.topics.matching

    for module in (mqttaudit.judge, mqttaudit.topics.matching):
        assert doctest.testmod(module).failed == 0
