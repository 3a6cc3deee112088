"""The first pass of a streaming routing replay (:mod:`mqttaudit.judge.stream`): the broker state at each slice
boundary, from the broker's skeleton and one walk over its traffic, is the state the whole broker model holds
there, on every scenario of the judge's routing tests and on scenarios hypothesis writes (boundaries inside
subscription windows, persistent sessions offline across them, retained messages set before a subscription,
Wills and QoS 1 and 2 deliveries in flight across a boundary)."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig, rules
from mqttaudit.judge.conversation import DEFAULT_CONFIG
from mqttaudit.judge.model import INF, Expectation, Model, build, normalised, unchanged_by_normalising
from mqttaudit.judge.routing import Routing
from mqttaudit.judge.stream import (
    BrokerState,
    FirstTaken,
    Slice,
    SlicedRouting,
    alive,
    boundary_states,
    cut_slices,
    deliveries,
    kept,
    model_state,
    named,
    plan_slices,
    shard_connections,
    sight,
    skeleton,
    slice_model,
    traffic,
)
from mqttaudit.judge.transcript import Published, Transcript
from mqttaudit.judge.verdict import Judgement, combine
from mqttaudit.pipeline.replay import delivery_row

from .talk import DISCONNECT, STEP, C, S, Talk, connected, publish, suback, subscribe, transcribe, unsubscribe

CONFIG = DEFAULT_CONFIG
V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))


def whole_states(transcripts: Mapping[str, Transcript], times: list[float], config: JudgeConfig) -> list[BrokerState]:
    """The oracle: the broker state at each of ``times`` read off the whole model (every message, every delivery)."""
    model = build(transcripts, config)
    return [_whole_state(model, time) for time in times]


def _whole_state(model: Model, time: float) -> BrokerState:
    in_flight = set()
    for link in model.links:
        if link.session is None or not alive(link.session, time):
            continue
        last = {}
        for delivered in link.transcript.delivered:
            if delivered.time < time and delivered.message.qos and delivered.message.packet_id is not None:
                last[delivered.message.packet_id] = delivered
        answers = link.transcript.answers
        in_flight |= {
            (link.name, d.event) for d in last.values() if d.event not in answers or answers[d.event][1] >= time
        }
    held = {(e.link.name, named(e.message)) for link in model.links for e in link.expectations if kept(e, time)}
    state = model_state(model, time)
    return dataclasses.replace(state, kept=frozenset(held), in_flight=frozenset(in_flight))


def boundaries(transcripts: Mapping[str, Transcript]) -> list[float]:
    """Every time something happened, and a time between each two: a boundary at, and between, every event."""
    times = set()
    for transcript in transcripts.values():
        times |= {transcript.connect_time, transcript.connack_time, transcript.end}
        times |= {r.sent for r in transcript.published} | {r.accepted or 0.0 for r in transcript.published}
        times |= {r.sent for r in transcript.subscribed} | {r.acked or 0.0 for r in transcript.subscribed}
        times |= {r.sent for r in transcript.unsubscribed} | {r.acked or 0.0 for r in transcript.unsubscribed}
        times |= {d.time for d in transcript.delivered} | {answer for _, answer in transcript.answers.values()}
    ordered = sorted(times)
    return sorted({*ordered, *((a + b) / 2 for a, b in itertools.pairwise(ordered)), ordered[-1] + 60})


def assert_states_agree(conversation: Mapping[str, Talk], config: JudgeConfig = CONFIG) -> None:
    transcripts = transcribe(conversation, config)
    times = boundaries(transcripts)
    skeletons = {name: skeleton(transcript) for name, transcript in transcripts.items()}
    streamed = boundary_states(skeletons, traffic(transcripts), deliveries(transcripts), config, times)
    for time, state, whole in zip(times, streamed, whole_states(transcripts, times, config), strict=True):
        assert state == whole, time


def held(model: Model) -> Counter[tuple[object, ...]]:
    """What a model holds for the routing verdicts, named so that two models compare: every expectation, retained
    watch, undecided rule, uncounted message and share group delivery."""
    found: Counter[tuple[object, ...]] = Counter()
    for link in model.links:
        for e in link.expectations:
            found[
                (
                    link.name,
                    named(e.message),
                    e.message.will,
                    e.rule,
                    e.must,
                    e.retained,
                    e.qos,
                    e.qos_rule,
                    e.after,
                    e.deadline,
                    e.copies,
                    e.ceiling,
                    e.forbidden,
                    e.withheld_by,
                    e.also,
                    e.sure,
                    e.as_published,
                    tuple((s.link.name, s.event) for s in e.subscriptions),
                    e.group is not None,
                )
            ] += 1
        for w in link.watches:
            states = tuple(sorted(named(x) if not isinstance(x, str | None) else str(x) for x in w.states))
            found[("watch", link.name, w.topic, w.window, states, tuple(sorted(w.rules)), w.deadline)] += 1
        for rule, why, time in link.unknown:
            found[("unknown", link.name, rule, why, time)] += 1
        for rule, count in link.unobserved.items():
            found[("unobserved", link.name, rule)] += count
    for g in model.groups:
        found[("group", named(g.message), g.share, g.topic_filter, g.must, g.deadline, len(g.members))] += 1
    return found


def assert_slices_add_up(conversation: Mapping[str, Talk], config: JudgeConfig, cuts: list[float]) -> None:
    """The models of the slices between ``cuts`` hold together what the whole model holds, each thing once."""
    transcripts = transcribe(conversation, config)
    skeletons = {name: skeleton(transcript) for name, transcript in transcripts.items()}
    firsts = FirstTaken(build(skeletons, config), config)
    edges = [-INF, *sorted(set(cuts)), INF]
    messages = list(traffic(transcripts))
    together: Counter[tuple[object, ...]] = Counter()
    for start, end in itertools.pairwise(edges):
        part = Slice(start, end, 0)
        sent = [(name, record) for name, record in messages if start <= record.sent < end]
        together += held(slice_model(skeletons, part, sent, firsts.records(), config))
        for name, record in sent:
            firsts.add(name, record)
    assert together == held(build(transcripts, config))


def _scenarios() -> list[tuple[str, dict[str, Talk], JudgeConfig]]:
    from .test_judge_model_5 import CASES as CASES_5
    from .test_judge_scenario import CASES

    found = []
    for case in CASES:
        for column in ("fails", "passes", "undecided"):
            conversation = getattr(case, column)()
            if isinstance(conversation, dict):
                found.append((f"{case.id}-{column}", conversation, CONFIG))
    for rule, name, *makes in CASES_5:
        for column, scenario in zip(("fails", "passes", "undecided"), makes, strict=True):
            if scenario is not None:
                found.append((f"{rule}-{name}-{column}", scenario(), V5))
    return found


SCENARIOS = _scenarios()


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_state_at_every_boundary_is_the_whole_model_s_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Talk], config: JudgeConfig
) -> None:
    assert_states_agree(conversation, config)


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_slices_models_add_up_to_the_whole_model_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Talk], config: JudgeConfig
) -> None:
    cuts = boundaries(transcribe(conversation, config))
    assert_slices_add_up(conversation, config, cuts)  # a slice between every two events
    assert_slices_add_up(conversation, config, cuts[::3])  # and wider ones


def test_the_scenarios_hold_every_part_of_the_state_somewhere() -> None:
    """The comparison above is not empty: the routing tests' scenarios have, at some boundary, an offline session,
    a retained message, a pending Will, a kept message and a delivery in flight."""
    parts: dict[str, bool] = {}
    for _, conversation, config in SCENARIOS:
        transcripts = transcribe(conversation, config)
        for state in whole_states(transcripts, boundaries(transcripts), config):
            for part in ("offline", "wills", "kept", "in_flight", "subscriptions"):
                parts[part] = parts.get(part, False) or bool(getattr(state, part))
            parts["retained"] = parts.get("retained", False) or any(
                states - {"unknown"} for _, states in state.retained
            )
    assert parts == dict.fromkeys(("offline", "wills", "kept", "in_flight", "subscriptions", "retained"), True)


TOPICS = ("a/1", "a/2", "b", "A/1")  # A/1: a topic normalising changes [MQTT-4.7.3-4]
FILTERS = ("a/+", "a/1", "#", "b", "A/+")


def _connection(draw: st.DrawFn, client_id: str, at: float) -> Talk:
    """An accepted connection of ``client_id`` at ``at``: MQTT 3.1.1, or 5.0 with a Session Expiry Interval and a
    Will that may be delayed."""
    persistent = draw(st.booleans())
    v5 = draw(st.booleans())
    will = None
    if draw(st.booleans()):
        delay = make(will_delay_interval=draw(st.sampled_from((1, 4)))) if v5 and draw(st.booleans()) else ()
        will = codec.Will(
            topic=draw(st.sampled_from(TOPICS)),
            message=b"w",
            qos=draw(st.integers(0, 2)),
            retain=draw(st.booleans()),
            properties=delay,
        )
    if not v5:
        return connected(client_id, clean_session=not persistent, will=will, at=at)
    expiry = draw(st.sampled_from((0, 3, 100)))
    connect = codec.Connect(
        client_id=client_id,
        protocol_level=5,
        clean_session=not persistent,
        will=will,
        properties=make(session_expiry_interval=expiry) if expiry else (),
    )
    talk = Talk(version="5")
    talk.now = at - STEP
    return talk.client(connect).server(codec.Connack())


@st.composite
def scenarios(draw: st.DrawFn, overlapping: bool = False) -> dict[str, Talk]:
    """Connections of two or three ClientIds over some seconds: persistent or clean sessions (3.1.1, or 5.0 with
    a Session Expiry Interval and delayed Wills) that come and go (closed by DISCONNECT, dropped with a Will, or
    still open when the capture ends), subscribing, unsubscribing, publishing (retained or not, QoS 0 to 2) and
    receiving QoS 0 to 2 deliveries that are acknowledged or not. ``overlapping``: a ClientId may connect again
    before its previous connection ended (a takeover, or a connection whose end was not seen)."""
    talks: dict[str, Talk] = {}
    clock = {client_id: 0.0 for client_id in "xyz"}
    for index in range(draw(st.integers(1, 6))):
        client_id = draw(st.sampled_from("xxyyz"))
        now = clock[client_id] + draw(st.sampled_from((0.05, 0.5, 3.0, 8.0)))
        talk = _connection(draw, client_id, now)
        v5 = talk.version == "5"
        packet_id = 1
        actions = ("subscribe", "subscribe", "unsubscribe", "publish", "publish", "publish", "deliver")
        for _ in range(draw(st.integers(0, 6))):
            now += draw(st.sampled_from((0.01, 0.3, 2.5, 7.0)))
            action = draw(st.sampled_from(actions))
            if action == "subscribe":
                qos = draw(st.integers(0, 2))
                talk.client(subscribe(packet_id, (draw(st.sampled_from(FILTERS)), qos)), at=now)
                talk.server(suback(packet_id, qos), at=now + 0.01)
            elif action == "unsubscribe":
                talk.client(unsubscribe(packet_id, draw(st.sampled_from(FILTERS))), at=now)
                talk.server(codec.Unsuback(packet_id=packet_id, reason_codes=(0,) if v5 else ()), at=now + 0.01)
            elif action == "publish":
                qos = draw(st.sampled_from((0, 1, 1, 2)))
                topic = draw(st.sampled_from(TOPICS))
                message = publish(
                    topic, draw(st.sampled_from((b"p", b"q", b""))), qos, packet_id, retain=draw(st.booleans())
                )
                talk.client(message, at=now)
                if qos == 1:
                    talk.server(codec.Puback(packet_id=packet_id), at=now + 0.01)
                elif qos == 2:
                    talk.server(codec.Pubrec(packet_id=packet_id), at=now + 0.01)
            else:
                qos = draw(st.integers(0, 2))
                delivered_id = draw(st.sampled_from((7, 8))) if qos else None
                topic = draw(st.sampled_from(TOPICS))
                talk.server(codec.Publish(topic=topic, payload=b"p", qos=qos, packet_id=delivered_id), at=now)
                if qos and draw(st.booleans()):
                    answer = codec.Puback if qos == 1 else codec.Pubrec
                    talk.client(answer(packet_id=delivered_id or 0), at=now + draw(st.sampled_from((0.01, 4.0))))
                    now = talk.now
            packet_id += 1
        now += draw(st.sampled_from((0.01, 1.0, 6.0)))
        ending = draw(st.sampled_from(("disconnect", "dropped", "quiet")))
        if ending == "disconnect":
            reason = draw(st.sampled_from((0, 4))) if v5 else 0
            talk.client(codec.Disconnect(reason_code=reason) if v5 else DISCONNECT, at=now).closed(C)
        elif ending == "dropped":
            talk.closed(draw(st.sampled_from((C, S))), at=now, abrupt=True)
        else:
            talk.quiet(at=now)
        back = draw(st.sampled_from((0.0, 5.0, 20.0))) if overlapping else 0.0
        clock[client_id] = max(0.1, talk.now - back) if back else talk.now
        talks[f"{client_id}{index}"] = talk
    return talks


@st.composite
def offline_scenarios(draw: st.DrawFn) -> dict[str, Talk]:
    """:func:`scenarios` beside a persistent session that subscribes, goes away and comes back while another
    client publishes QoS 1 and 2 messages before, during and after its absence: messages kept for it across
    whatever boundaries fall in between."""
    talks = draw(scenarios())
    v5 = draw(st.booleans())
    version = "5" if v5 else "3.1.1"
    properties = make(session_expiry_interval=100) if v5 else ()
    away, back = draw(st.sampled_from((1.0, 2.0))), draw(st.sampled_from((3.0, 6.0, 12.0)))
    for index, (start, end) in enumerate(((0.0, away), (back, back + 10.0))):
        connect = codec.Connect(
            client_id="k", protocol_level=5 if v5 else 4, clean_session=False, properties=properties
        )
        talk = Talk(version=version)
        talk.now = start
        talk.client(connect, at=start + STEP).server(codec.Connack(session_present=index == 1), at=start + 2 * STEP)
        if index == 0:
            qos = draw(st.integers(0, 2))
            talk.client(subscribe(1, (draw(st.sampled_from(("#", "a/+", "a/1"))), qos)), at=start + 0.1)
            talk.server(suback(1, qos), at=start + 0.11)
            talk.closed(draw(st.sampled_from((C, S))), at=end, abrupt=True)
        else:
            talk.quiet(at=end)
        talks[f"k{index}"] = talk
    sender = Talk(version=version)
    sender.client(codec.Connect(client_id="p", protocol_level=5 if v5 else 4), at=0.05).server(codec.Connack(), at=0.06)
    times = sorted(
        draw(st.lists(st.sampled_from((0.5, 1.5, 2.5, 4.0, 7.0, 13.0)), min_size=1, max_size=4, unique=True))
    )
    for packet_id, at in enumerate(times, start=1):
        qos = draw(st.integers(1, 2))
        sender.client(publish("a/1", b"k", qos, packet_id, retain=draw(st.booleans())), at=at)
        sender.server((codec.Puback if qos == 1 else codec.Pubrec)(packet_id=packet_id), at=at + 0.01)
    talks["p"] = sender.quiet(at=20.0)
    return talks


@settings(max_examples=100, deadline=None)
@given(offline_scenarios())
def test_the_messages_kept_for_an_offline_session_across_boundaries_are_the_whole_model_s(
    conversation: dict[str, Talk],
) -> None:
    assert_states_agree(conversation, V5)


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_the_state_at_every_boundary_is_the_whole_model_s_on_generated_scenarios(
    conversation: dict[str, Talk],
) -> None:
    assert_states_agree(conversation, V5)


@settings(max_examples=100, deadline=None)
@given(st.one_of(scenarios(), offline_scenarios()), st.integers(1, 4))
def test_the_slices_models_add_up_to_the_whole_model_on_generated_scenarios(
    conversation: dict[str, Talk], every: int
) -> None:
    assert_slices_add_up(conversation, V5, boundaries(transcribe(conversation, V5))[::every])


#: What the model built through the topic tries leaves out (:func:`.model.build`): a leak to a session none of
#: whose filters matches [MQTT-3.3.2-3] (reported where it is delivered, by the conversation's judge).
LEFT_TO_EXHAUSTIVE = frozenset({rules.DELIVERY_MATCHES_SUBSCRIPTION})


def assert_the_tries_route_as_every_pair(conversation: Mapping[str, Talk], config: JudgeConfig) -> None:
    """The model that asks only the sessions a message's topic concerns (the one of a broker with many
    sessions) holds what the model that asks every session holds, but for :data:`LEFT_TO_EXHAUSTIVE`."""
    transcripts = transcribe(conversation, config)
    by_trie = held(build(transcripts, config, exhaustive=False))
    every_pair = held(build(transcripts, config, exhaustive=True))
    assert not by_trie - every_pair
    left = every_pair - by_trie
    assert all(key[3] in LEFT_TO_EXHAUSTIVE and key[12] for key in left), left


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from("aZ/+#$ \ufeff\u00c5\u212b\ufb01\u0130\u00df")) | st.text())
def test_a_name_is_unchanged_by_normalising_exactly_when_its_normalised_form_is_itself(text: str) -> None:
    assert unchanged_by_normalising(text) == (normalised(text) == text)


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_model_through_the_tries_is_the_every_pair_model_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Talk], config: JudgeConfig
) -> None:
    assert_the_tries_route_as_every_pair(conversation, config)


@settings(max_examples=150, deadline=None)
@given(st.one_of(scenarios(), scenarios(overlapping=True), offline_scenarios()))
def test_the_model_through_the_tries_is_the_every_pair_model_on_generated_scenarios(
    conversation: dict[str, Talk],
) -> None:
    assert_the_tries_route_as_every_pair(conversation, V5)


def test_slices_hold_at_most_the_budget_and_cover_all_time() -> None:
    messages = [(1.0, 40), (1.5, 40), (2.0, 30), (2.0, 30), (2.0, 30), (3.0, 10), (9.0, 100)]
    slices = plan_slices(messages, 100)
    assert slices == [
        Slice(-INF, 2.0, 80),
        Slice(2.0, 9.0, 100),
        Slice(9.0, INF, 100),
    ]
    # An instant heavier than the budget is one slice: messages sent together are never split.
    assert plan_slices([(1.0, 60), (1.0, 60), (2.0, 1)], 100) == [Slice(-INF, 2.0, 120), Slice(2.0, INF, 1)]
    assert plan_slices([], 100) == [Slice(-INF, INF, 0)]
    with pytest.raises(ValueError, match="out of time order"):
        plan_slices([(2.0, 1), (1.0, 1)], 100)


def test_a_slice_spans_at_least_the_span_asked_before_its_bytes_cut_it() -> None:
    messages = [(1.0, 40), (1.5, 40), (2.0, 30), (2.0, 30), (2.0, 30), (3.0, 10), (9.0, 100), (9.5, 1)]
    parts = [part for part, _ in cut_slices(messages, 100, lambda message: message, 1.5)]
    # Past its budget at 2.0, the first slice runs on until 1.5 s after its first message; the last one, past its
    # budget at 9.5, is 0.5 s long: it holds on.
    assert parts == [Slice(-INF, 3.0, 170), Slice(3.0, 9.0, 10), Slice(9.0, INF, 101)]
    assert [part for part, _ in cut_slices(messages, 100, lambda message: message, 0.0)] == plan_slices(messages, 100)


def test_the_skeleton_leaves_out_what_grows_with_the_traffic() -> None:
    talk = connected("p").client(publish("t", b"1"), publish("t", b"2", retain=True), publish("t", b"3", 1, 1))
    talk.server(codec.Puback(packet_id=1), codec.Publish(topic="t", payload=b"d", qos=1, packet_id=5))
    talk.client(codec.Puback(packet_id=5)).quiet(after=1)
    whole = transcribe({"p": talk})["p"]
    bare = skeleton(whole)
    assert [r.message.payload for r in bare.published] == [b"2"]
    assert bare.delivered == [] and bare.answers == {}
    assert (bare.connect, bare.connack, bare.end) == (whole.connect, whole.connack, whole.end)
    assert len(whole.published) == 3 and len(whole.delivered) == 1  # the whole transcript is left as it was


# -- the routing verdicts slice by slice ---------------------------------------------------------------------------


def verdicts(rows: Iterable[object], judgement: Judgement) -> dict[str, object]:
    """What the routing replay writes, named so that two replays compare: the ``deliveries`` rows, the findings
    (each act with every statement it breaks), the not-assessable rows and the rules assessed."""
    return {
        "rows": Counter(rows),
        "findings": Counter(
            (f.conversation, f.event, f.side, f.time, f.kind, f.detail, frozenset(f.rules)) for f in judgement.findings
        ),
        "undecided": set(judgement.undecided),
        "assessed": judgement.assessed,
        "not assessable": set(judgement.not_assessable),
    }


def whole_verdicts(transcripts: Mapping[str, Transcript], config: JudgeConfig) -> dict[str, object]:
    model = build(transcripts, config)
    judgement = Routing(model, transcripts, config).judgement()
    return verdicts((delivery_row("b", e) for link in model.links for e in link.expectations), judgement)


def run_slices(
    transcripts: Mapping[str, Transcript],
    messages: list[tuple[str, Published]],
    config: JudgeConfig,
    slices: Iterable[Slice],
) -> Iterator[tuple[list[Expectation], Judgement]]:
    """Each slice's routing verdicts, given the messages sent in it (``messages``: :func:`traffic`) and the
    deliveries in :func:`sight` of it, with their answers."""
    sliced = SlicedRouting({name: skeleton(transcript) for name, transcript in transcripts.items()}, config)
    for part in slices:
        first, end = sight(part, config)
        sent = [(name, record) for name, record in messages if part.start <= record.sent < part.end]
        seen = {name: [d for d in t.delivered if first <= d.time < end] for name, t in transcripts.items()}
        answers = {
            name: {d.event: t.answers[d.event] for d in seen[name] if d.event in t.answers}
            for name, t in transcripts.items()
        }
        yield sliced.run(part, sent, seen, answers)


def sliced_verdicts(transcripts: Mapping[str, Transcript], config: JudgeConfig, cuts: list[float]) -> dict[str, object]:
    """The verdicts of the slices between ``cuts``, together."""
    slices = [Slice(start, end, 0) for start, end in itertools.pairwise([-INF, *sorted(set(cuts)), INF])]
    rows: list[object] = []
    judgements = []
    for decided, judgement in run_slices(transcripts, list(traffic(transcripts)), config, slices):
        rows += [delivery_row("b", e) for e in decided]
        judgements.append(judgement)
    return verdicts(rows, combine(judgements))


def assert_sliced_routing_is_whole(conversation: Mapping[str, Talk], config: JudgeConfig, cuts: list[float]) -> None:
    transcripts = transcribe(conversation, config)
    assert sliced_verdicts(transcripts, config, cuts) == whole_verdicts(transcripts, config)


#: A late window short enough that the routing tests' scenarios (some seconds each) outlive it.
SHORT = 0.5


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_slices_routing_verdicts_are_the_whole_model_s_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Talk], config: JudgeConfig
) -> None:
    cuts = boundaries(transcribe(conversation, config))
    for late in (SHORT, config.late_window):
        each = dataclasses.replace(config, late_window=late)
        assert_sliced_routing_is_whole(conversation, each, cuts)
        assert_sliced_routing_is_whole(conversation, each, cuts[::3])


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(scenarios(), scenarios(overlapping=True), offline_scenarios()),
    st.integers(1, 4),
    st.sampled_from((SHORT, 3.0, 60.0)),
)
def test_the_slices_routing_verdicts_are_the_whole_model_s_on_generated_scenarios(
    conversation: dict[str, Talk], every: int, late: float
) -> None:
    config = dataclasses.replace(V5, late_window=late)
    assert_sliced_routing_is_whole(conversation, config, boundaries(transcribe(conversation, config))[::every])


def busy_broker(messages: int) -> dict[str, Transcript]:
    """A subscriber that gets, and acknowledges, each of ``messages`` QoS 1 messages a publisher sends one a second
    (topics and payloads repeat, as a device's status does), through a broker seen all along."""
    sub = connected("s", at=0.0).client(subscribe(1, ("a/+", 1))).server(suback(1, 1))
    pub = connected("p", at=0.5)
    for index in range(messages):
        at = 1.0 + index
        packet_id = index % 60000 + 1
        message = publish(f"a/{index % 7}", b"%d" % (index % 5), 1, packet_id)
        pub.client(message, at=at).server(codec.Puback(packet_id=packet_id), at=at + 0.01)
        sub.server(message, at=at + 0.02)
        sub.client(codec.Puback(packet_id=packet_id), at=at + 0.03)
    end = 2.0 + messages
    return transcribe({"s": sub.quiet(at=end), "p": pub.quiet(at=end)})


def sliced_peak(transcripts: Mapping[str, Transcript], config: JudgeConfig, budget: int) -> tuple[int, int]:
    """The most memory (bytes, traced) the sliced replay held at once beyond the transcripts, with each slice's
    inputs, and the deliveries rows it decided."""
    import tracemalloc

    messages = list(traffic(transcripts))
    slices = plan_slices(((record.sent, len(record.message.payload) + 16) for _, record in messages), budget)
    rows = 0
    tracemalloc.start()
    try:
        for decided, _ in run_slices(transcripts, messages, config, slices):
            rows += len(decided)
            del decided
        return tracemalloc.get_traced_memory()[1], rows
    finally:
        tracemalloc.stop()


def whole_peak(transcripts: Mapping[str, Transcript], config: JudgeConfig) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        model = build(transcripts, config)
        Routing(model, transcripts, config).judgement()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_slice_holds_memory_bounded_by_the_slice_not_by_the_broker_s_traffic() -> None:
    """Ten times the traffic, the same slices (by bytes): the most the sliced replay holds at once (its state
    handed on, one slice's model, its inputs in :func:`sight`) stays flat, while the whole model and its
    verdicts grow with the traffic."""
    small, large = busy_broker(400), busy_broker(4000)
    sliced_small, rows_small = sliced_peak(small, CONFIG, 2000)
    sliced_large, rows_large = sliced_peak(large, CONFIG, 2000)
    assert (rows_small, rows_large) == (400, 4000)  # every message owed once, decided once
    whole_small, whole_large = whole_peak(small, CONFIG), whole_peak(large, CONFIG)
    # Measured: sliced 329 KB -> 429 KB (494 KB at 12,000), whole 322 KB -> 3,135 KB (9,756 KB at 12,000).
    assert whole_large > 5 * whole_small
    assert sliced_large < 2 * sliced_small and sliced_large < whole_large / 4


# -- a copy later than the late window: not assessable, the same in both replays ------------------------------------

LATE_TOPIC = "late/copy"


def late_copy_broker(copy_at: float | None, *, payload: bytes = b"x", reconnect: bool = False) -> dict[str, Talk]:
    """A subscriber at QoS 1 (a persistent session when ``reconnect``); a publisher's QoS 1 message taken at about
    1 s; the broker's copy at ``copy_at`` (None: none), on the subscriber's connection or, when ``reconnect``, on its
    session's next connection (the first one closed at 70 s, past the late window)."""
    sub = connected("sub", clean_session=not reconnect).client(subscribe(1, (LATE_TOPIC, 1))).server(suback(1, 1))
    pub = connected("pub", at=1.0).client(publish(LATE_TOPIC, qos=1, packet_id=7))
    pub.server(codec.Puback(packet_id=7)).client(DISCONNECT).closed(C)
    talks = {"sub": sub, "pub": pub}
    target = sub
    if reconnect:
        sub.client(DISCONNECT, at=70.0).closed(C)
        target = connected("sub", clean_session=False, session_present=True, at=75.0)
        talks["again"] = target
    if copy_at is not None:
        target.server(publish(LATE_TOPIC, payload, qos=1, packet_id=1), at=copy_at)
        target.client(codec.Puback(packet_id=1))
    target.quiet(at=120.0)
    return talks


def routing_outcome(judgement: Judgement) -> tuple[list[str], set[tuple[str, str, str]]]:
    return [f.kind for f in judgement.findings], {
        (row.conversation, row.rule, row.reason.split(":")[0]) for row in judgement.undecided
    }


@pytest.mark.parametrize("reconnect", [False, True], ids=["same-connection", "next-connection"])
def test_a_copy_90_s_late_is_not_assessable_not_missing_in_the_whole_and_the_sliced_replay(reconnect: bool) -> None:
    """A copy 90 s after the message was taken, past its late window (60 s past a 5 s deadline): the message's
    routing rule is not assessable, the reason naming how late the copy came, and no finding; another payload, or no
    copy, leaves it missing. The sliced replay, which forgets the message after its late window and holds the
    missing verdict back until the session ends, says the same, whatever the cuts."""
    late = "copy after the late window"
    cases = {
        "late": (late_copy_broker(91.0, reconnect=reconnect), [], {("sub", "MQTT-4.5.0-1", late)}),
        "other": (late_copy_broker(91.0, payload=b"y", reconnect=reconnect), ["missing"], set()),
        "none": (late_copy_broker(None, reconnect=reconnect), ["missing"], set()),
    }
    for name, (talks, kinds, undecided) in cases.items():
        transcripts = transcribe(talks, CONFIG)
        judgement = Routing(build(transcripts, CONFIG), transcripts, CONFIG).judgement()
        kept = {row for row in routing_outcome(judgement)[1] if row[2] == late}
        assert (routing_outcome(judgement)[0], kept) == (kinds, undecided), name
        if undecided:
            [row] = [row for row in judgement.undecided if row.reason.startswith(late)]
            assert "came 1 min 30 s after the server took" in row.reason
            assert "after the late window of 60 s" in row.reason and "no time limit on delivery" in row.reason
        cuts = boundaries(transcripts)
        for every in (1, 3):
            assert sliced_verdicts(transcripts, CONFIG, cuts[::every]) == whole_verdicts(transcripts, CONFIG), name


def test_the_sliced_replay_holds_at_most_the_cap_of_missing_messages_per_connection() -> None:
    """Every message of a busy broker missed by its subscriber, none copied later: the sliced replay holds at most
    :attr:`.JudgeConfig.late_copies_held` of them for a late copy (the rest reported at once, saying so), and gives
    the whole replay's verdicts."""
    sub = connected("s", at=0.0).client(subscribe(1, ("a/+", 1))).server(suback(1, 1))
    pub = connected("p", at=0.5)
    for index in range(40):
        pub.client(publish(f"a/{index % 7}", b"%d" % index, 1, index + 1), at=1.0 + index)
        pub.server(codec.Puback(packet_id=index + 1))
    transcripts = transcribe({"s": sub.quiet(at=200.0), "p": pub.quiet(at=200.0)})
    config = dataclasses.replace(CONFIG, late_copies_held=5)
    sliced = SlicedRouting({name: skeleton(t) for name, t in transcripts.items()}, config)
    messages = list(traffic(transcripts))
    most = 0
    findings = []
    for start, end in itertools.pairwise([-INF, *range(10, 200, 10), INF]):
        part = Slice(start, end, 0)
        sent = [(name, record) for name, record in messages if part.start <= record.sent < part.end]
        _, judgement = sliced.run(part, sent, {}, {})
        most = max(most, len(sliced._memory.missing))
        findings += judgement.findings
    assert most == 5
    assert (sliced._memory.missing, sliced._memory.held_missing) == ([], {})  # the traffic ended: all reported
    capped = [f for f in findings if "(the cap)" in f.detail]
    assert (len(findings), len(capped)) == (40, 35)
    cuts = boundaries(transcripts)
    assert sliced_verdicts(transcripts, config, cuts[::5]) == whole_verdicts(transcripts, config)


def test_shards_hold_a_client_id_s_connections_and_a_share_group_whole_and_balance_by_weight() -> None:
    """Every connection of a ClientId in one shard, the 5.0 ClientIds that subscribed with one ShareName in one
    shard (a 3.1.1 ``$share/`` filter is an ordinary filter: no group), an empty ClientId a session of its own, the
    heaviest groups spread first; the same sets from any order of input."""

    def shared(client_id: str, topic_filter: str, version: str = "5") -> Talk:
        connect = codec.Connect(client_id=client_id, protocol_level=5 if version == "5" else 4)
        talk = Talk(version=version).client(connect, at=0.0).server(codec.Connack())
        return talk.client(subscribe(1, (topic_filter, 1))).server(suback(1, 1)).quiet(at=3.0)

    talks = {
        "a1": connected("a", at=0.0).quiet(at=1.0),
        "a2": connected("a", at=2.0).quiet(at=3.0),
        "g1": shared("g", "$share/grp/t"),
        "h1": shared("h", "$share/grp/u"),
        "b1": connected("b", at=0.0).quiet(at=3.0),
        "e1": connected("", at=0.0).quiet(at=3.0),
        "e2": connected("", at=1.0).quiet(at=3.0),
    }
    skeletons = transcribe(talks)
    weights = {"a1": 10, "a2": 10, "g1": 5, "h1": 5, "b1": 3, "e1": 1, "e2": 1}
    sets = shard_connections(skeletons, weights, 3)
    assert sorted(name for shard in sets for name in shard) == sorted(talks)  # each connection once
    (of_a,) = [shard for shard in sets if "a1" in shard]
    (of_g,) = [shard for shard in sets if "g1" in shard]
    assert "a2" in of_a and "h1" in of_g and of_a is not of_g  # 22 and 12: the two heaviest apart
    assert {frozenset(shard) for shard in sets} == {
        frozenset({"a1", "a2"}),
        frozenset({"g1", "h1"}),
        frozenset({"b1", "e1", "e2"}),
    }
    reordered = {name: skeletons[name] for name in reversed(list(skeletons))}
    assert shard_connections(reordered, weights, 3) == sets
    assert shard_connections(skeletons, weights, 1) == [set(talks)]
    assert [len(shard) for shard in shard_connections(skeletons, weights, 9)].count(0) == 9 - 5  # five groups
    old = transcribe({"g1": shared("g", "$share/grp/t", "3.1.1"), "h1": shared("h", "$share/grp/u", "3.1.1")})
    assert sorted(map(len, shard_connections(old, {}, 2))) == [1, 1]
