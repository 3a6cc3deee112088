"""Requests, answers and deliveries on an MQTT 5.0 connection: acknowledgements with Reason Codes (a refusal ends
the flow), the reactions 5.0 allows where it allows several, No Local, Retain As Published and Subscription
Identifiers."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import ConversationJudge, Event, JudgeConfig, Judgement, Lost, Quiet, Sent, judge
from mqttaudit.judge.context import Seen
from mqttaudit.judge.deliveries_5 import NO_LOCAL
from mqttaudit.judge.outcomes import ALLOWED_OUTCOMES, PUBLISH_ACCEPTED, PUBLISH_REFUSALS
from mqttaudit.judge.topic_alias import topic_of
from mqttaudit.probe.brokers import BrokerUnavailable, RunningBroker, start_broker
from mqttaudit.spec import identity

from .cases import explain
from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
WAIT = 10.0  # past JudgeConfig().answer_timeout
NO_LOCAL_ID = "MQTT-3.8.3-3"  # the 5.0 statement; 3.1.1 numbers another rule so


def connected(*, clean_start: bool = True, session_present: bool = False) -> Talk:
    """Accepted; the client allows the server 5 Topic Aliases."""
    connect = codec.Connect(
        client_id="five",
        protocol_level=5,
        keep_alive=0,
        clean_session=clean_start,
        properties=make(topic_alias_maximum=5),
    )
    return Talk(version="5").client(connect).server(codec.Connack(session_present=session_present))


def verdict(talk: Talk) -> Judgement:
    return judge(talk.events, V5)


def option(topic_filter: str, qos: int = 1, **options: bool) -> codec.Subscription:
    return codec.Subscription(topic_filter=topic_filter, qos=qos, **options)


def subscribe(packet_id: int, *subscriptions: codec.Subscription, identifier: int | None = None) -> codec.Subscribe:
    properties = make(subscription_identifier=identifier) if identifier is not None else ()
    return codec.Subscribe(packet_id=packet_id, subscriptions=subscriptions, properties=properties)


def suback(packet_id: int, *codes: int) -> codec.Suback:
    return codec.Suback(packet_id=packet_id, return_codes=codes)


def subscribed(*subscriptions: codec.Subscription, identifier: int | None = None, packet_id: int = 1) -> Talk:
    granted = [s.qos for s in subscriptions]
    return (
        connected()
        .client(subscribe(packet_id, *subscriptions, identifier=identifier))
        .server(suback(packet_id, *granted))
    )


def message(
    topic: str = "t", payload: bytes = b"m", *, qos: int = 0, packet_id: int | None = None, retain: bool = False
) -> codec.Publish:
    return codec.Publish(topic=topic, payload=payload, qos=qos, packet_id=packet_id, retain=retain)


def delivery(
    topic: str = "t", payload: bytes = b"m", *, ids: tuple[int, ...] = (), retain: bool = False
) -> codec.Publish:
    properties = make(subscription_identifier=list(ids)) if ids else ()
    return codec.Publish(topic=topic, payload=payload, retain=retain, properties=properties)


def published_back(*, retain: bool, delivered_retain: bool, **options: bool) -> Talk:
    """The client subscribes to "t" with ``options``, publishes to it (QoS 0), and the server sends it back."""
    talk = subscribed(option("t", 0, **options))
    return talk.client(message(retain=retain)).server(delivery(retain=delivered_retain))


@dataclass(frozen=True)
class Case:
    rule: str
    side: codec.Direction
    fails: Callable[[], Talk]
    passes: Callable[[], Talk]
    #: None: what one connection cannot show is left to the broker model (see :mod:`mqttaudit.judge.deliveries_5`).
    undecided: Callable[[], Talk] | None
    name: str = ""

    @property
    def id(self) -> str:
        return "-".join(part for part in (self.rule, self.side.value, self.name) if part)


def qos2_refused(code: int = 0x87) -> Talk:
    return connected().client(message(qos=2, packet_id=3)).server(codec.Pubrec(packet_id=3, reason_code=code))


def pubrel_unknown() -> Talk:
    return connected().client(codec.Pubrel(packet_id=9))


def unsubscribed(code: int, *, held: bool) -> Talk:
    talk = subscribed(option("a", 0)) if held else connected()
    return talk.client(codec.Unsubscribe(packet_id=2, topic_filters=("a",))).server(
        codec.Unsuback(packet_id=2, reason_codes=(code,))
    )


CASES = [
    # [MQTT-4.3.3-4] A PUBREC from 0x80 up ends the flow: no PUBREL is owed, and one sent is a finding.
    Case(
        "MQTT-4.3.3-4",
        C,
        fails=lambda: qos2_refused().client(codec.Pubrel(packet_id=3)),
        passes=lambda: (
            connected()
            .client(message(qos=2, packet_id=3))
            .server(codec.Pubrec(packet_id=3, reason_code=0x10))
            .client(codec.Pubrel(packet_id=3))
        ),
        undecided=lambda: connected().client(message(qos=2, packet_id=3)).server(codec.Pubrec(packet_id=3)).closed(S),
    ),
    Case(
        "MQTT-4.3.3-4",
        C,
        fails=lambda: (
            connected()
            .client(message(qos=2, packet_id=3))
            .server(codec.Pubrec(packet_id=3))
            .client(codec.Pubrel(packet_id=3, reason_code=0x92))
        ),
        passes=lambda: (
            connected()
            .client(message(qos=2, packet_id=3))
            .server(codec.Pubrec(packet_id=3))
            .client(codec.Pubrel(packet_id=3, reason_code=0x00))
        ),
        undecided=lambda: (
            connected().client(message(qos=2, packet_id=3)).server(codec.Pubrec(packet_id=3)).quiet(after=1)
        ),
        name="not-found",
    ),
    # [MQTT-4.3.3-11] PUBCOMP for every PUBREL: 0x00 after the receiver's own PUBREC; for an unknown one 0x92
    # "Packet Identifier not found" or 0x00.
    Case(
        "MQTT-4.3.3-11",
        S,
        fails=lambda: (
            connected()
            .client(message(qos=2, packet_id=3))
            .server(codec.Pubrec(packet_id=3))
            .client(codec.Pubrel(packet_id=3))
            .server(codec.Pubcomp(packet_id=3, reason_code=0x92))
        ),
        passes=lambda: pubrel_unknown().server(codec.Pubcomp(packet_id=9, reason_code=0x92)),
        undecided=lambda: pubrel_unknown().closed(C),
    ),
    Case(
        "MQTT-4.3.3-11",
        S,
        fails=lambda: pubrel_unknown().quiet(after=WAIT),
        passes=lambda: pubrel_unknown().server(codec.Pubcomp(packet_id=9)),
        undecided=lambda: pubrel_unknown().quiet(after=1),
        name="unknown-id",
    ),
    # [MQTT-3.11.3-2] One UNSUBACK Reason Code per Topic Filter.
    Case(
        "MQTT-3.11.3-2",
        S,
        fails=lambda: (
            connected()
            .client(codec.Unsubscribe(packet_id=2, topic_filters=("a", "b")))
            .server(codec.Unsuback(packet_id=2, reason_codes=(0x11,)))
        ),
        passes=lambda: unsubscribed(0x11, held=False),
        undecided=lambda: connected().client(codec.Unsubscribe(packet_id=2, topic_filters=("a",))).closed(C),
    ),
    # [MQTT-3.11.3-1] A held filter's code shows the order: 0x00 (or a refusal), never 0x11 "No subscription existed"
    # (that would be another filter's answer, or a subscription not found [MQTT-3.10.4-1]).
    Case(
        "MQTT-3.11.3-1",
        S,
        fails=lambda: unsubscribed(0x11, held=True),
        passes=lambda: unsubscribed(0x00, held=True),
        undecided=lambda: (
            connected(clean_start=False, session_present=True)
            .client(codec.Unsubscribe(packet_id=2, topic_filters=("a",)))
            .server(codec.Unsuback(packet_id=2, reason_codes=(0x00,)))
        ),
    ),
    Case(
        "MQTT-3.11.3-1",
        S,
        # "a" held, "b" never subscribed, answered in the other order; a filter never subscribed may get 0x00 or 0x11
        fails=lambda: (
            subscribed(option("a", 0))
            .client(codec.Unsubscribe(packet_id=2, topic_filters=("a", "b")))
            .server(codec.Unsuback(packet_id=2, reason_codes=(0x11, 0x00)))
        ),
        passes=lambda: (
            subscribed(option("a", 0))
            .client(codec.Unsubscribe(packet_id=2, topic_filters=("a", "b")))
            .server(codec.Unsuback(packet_id=2, reason_codes=(0x00, 0x00)))
        ),
        undecided=lambda: (
            connected()
            .client(subscribe(1, option("a", 0)), codec.Unsubscribe(packet_id=2, topic_filters=("a",)))
            .server(suback(1, 0), codec.Unsuback(packet_id=2, reason_codes=(0x00,)))
        ),
        name="never-subscribed-beside-a-held-one",
    ),
    # [MQTT-3.9.3-1] A SUBACK code grants at most the QoS requested; any refusal may stand in its place.
    Case(
        "MQTT-3.9.3-1",
        S,
        fails=lambda: connected().client(subscribe(1, option("a", 0), option("b", 2))).server(suback(1, 2, 0x97)),
        passes=lambda: connected().client(subscribe(1, option("a", 0), option("b", 2))).server(suback(1, 0xA2, 1)),
        undecided=lambda: connected().client(subscribe(1, option("a", 0))).closed(C),
    ),
    # [MQTT-3.8.3-3] No Local: the client's own message does not come back.
    Case(
        NO_LOCAL_ID,
        S,
        fails=lambda: published_back(retain=False, delivered_retain=False, no_local=True),
        passes=lambda: subscribed(option("t", 0, no_local=True)).client(message(payload=b"mine")).server(delivery()),
        # A delivery while the SUBSCRIBE that sets No Local awaits its SUBACK: either options may hold.
        undecided=lambda: (
            subscribed(option("t", 0))
            .client(message(), subscribe(2, option("t", 0, no_local=True)))
            .server(delivery(), suback(2, 0))
        ),
    ),
    # [MQTT-3.3.1-12] Retain As Published 0: RETAIN cleared on forwarding.
    Case(
        "MQTT-3.3.1-12",
        S,
        fails=lambda: published_back(retain=True, delivered_retain=True),
        passes=lambda: published_back(retain=True, delivered_retain=False),
        undecided=None,
    ),
    # [MQTT-3.3.1-13] Retain As Published 1: RETAIN as published.
    Case(
        "MQTT-3.3.1-13",
        S,
        fails=lambda: published_back(retain=True, delivered_retain=False, retain_as_published=True),
        passes=lambda: published_back(retain=True, delivered_retain=True, retain_as_published=True),
        undecided=None,
    ),
    # [MQTT-3.3.4-3] The identifiers of the matching subscriptions, and no other.
    Case(
        "MQTT-3.3.4-3",
        S,
        fails=lambda: subscribed(option("t", 0), identifier=7).server(delivery(ids=(8,))),
        passes=lambda: subscribed(option("t", 0), identifier=7).server(delivery(ids=(7,))),
        undecided=lambda: (
            subscribed(option("t", 0), identifier=7)
            .client(subscribe(2, option("t", 1), identifier=9))
            .server(delivery(ids=(7,)))
        ),
    ),
    Case(
        "MQTT-3.3.4-3",
        S,
        fails=lambda: subscribed(option("t", 0), identifier=7).server(delivery()),
        passes=lambda: subscribed(option("#", 0), identifier=5).server(delivery("x/y", ids=(5,))),
        undecided=lambda: (
            subscribed(option("t", 0), identifier=7)
            .client(codec.Unsubscribe(packet_id=2, topic_filters=("t",)))
            .server(delivery(ids=(7,)))
        ),
        name="missing",
    ),
    # [MQTT-3.3.4-4] One copy for overlapping subscriptions carries all their identifiers.
    Case(
        "MQTT-3.3.4-4",
        S,
        fails=lambda: overlapping().server(delivery(ids=(1, 2))),
        passes=lambda: overlapping().server(delivery(ids=(3, 2, 1))),
        undecided=None,
    ),
]


def overlapping() -> Talk:
    """Three subscriptions matching "t", identifiers 1, 2 and 3."""
    talk = subscribed(option("t", 0), identifier=1)
    talk.client(subscribe(2, option("+", 0), identifier=2)).server(suback(2, 0))
    return talk.client(subscribe(3, option("#", 0), identifier=3)).server(suback(3, 0))


def _id(case: Case) -> str:
    return case.id


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_fails(case: Case) -> None:
    judgement = verdict(case.fails())
    assert any(rule == case.rule and f.side is case.side for f in judgement.findings for rule in f.rules), explain(
        judgement
    )


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_passes(case: Case) -> None:
    judgement = verdict(case.passes())
    assert case.rule in judgement.passed, explain(judgement)


@pytest.mark.parametrize("case", [case for case in CASES if case.undecided is not None], ids=_id)
def test_undecided(case: Case) -> None:
    assert case.undecided is not None
    judgement = verdict(case.undecided())
    assert case.rule in judgement.not_assessable, explain(judgement)
    assert case.rule not in judgement.assessed, explain(judgement)


# Refusals: no delivery owed, no PUBREL owed, the identifier free again ---------------------------------------


@pytest.mark.parametrize("code", [0x80, 0x87, 0x97])
def test_a_refusing_pubrec_owes_no_pubrel(code: int) -> None:
    judgement = verdict(qos2_refused(code).quiet(after=WAIT))
    assert judgement.findings == (), explain(judgement)


def test_an_accepting_pubrec_still_owes_its_pubrel() -> None:
    judgement = verdict(qos2_refused(0x00).quiet(after=WAIT))
    assert {rule for f in judgement.findings for rule in f.rules} == {"MQTT-4.3.3-4"}, explain(judgement)


@pytest.mark.parametrize(("code", "taken"), [(0x00, True), (0x10, True), (0x87, False), (0x97, False)])
def test_a_puback_from_0x80_refuses_the_message(code: int, taken: bool) -> None:
    talk = connected().client(message(qos=1, packet_id=4)).server(codec.Puback(packet_id=4, reason_code=code))
    conversation = ConversationJudge(V5)
    for event in talk.events:
        conversation.feed(event)
    judgement = conversation.finish()
    assert judgement.findings == (), explain(judgement)
    (publication,) = conversation.transcript.published
    assert publication.certain is taken
    assert (publication.accepted is not None) is taken


def test_a_refused_identifier_is_free_for_a_new_message() -> None:
    # [MQTT-4.3.3-9] After a PUBREC from 0x80 up the same Packet Identifier starts a new message.
    talk = qos2_refused().client(message(payload=b"again", qos=2, packet_id=3)).server(codec.Pubrec(packet_id=3))
    judgement = verdict(talk.client(codec.Pubrel(packet_id=3)).server(codec.Pubcomp(packet_id=3)))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-2.2.1-3" in judgement.passed


def test_a_refused_subscription_grants_nothing() -> None:
    talk = connected().client(subscribe(1, option("t", 1))).server(suback(1, 0x87)).server(delivery())
    judgement = verdict(talk)
    assert {(rule, f.side) for f in judgement.findings for rule in f.rules} == {("MQTT-3.3.2-3", S)}, explain(judgement)


# Allowed outcomes as data -----------------------------------------------------------------------------------


def test_a_wrong_unsuback_code_quotes_the_allowed_ones() -> None:
    judgement = verdict(unsubscribed(0x11, held=True))
    (finding,) = [f for f in judgement.findings if "MQTT-3.11.3-1" in f.rules]
    assert "0x11 (No subscription existed)" in finding.detail and "'a'" in finding.detail
    assert ALLOWED_OUTCOMES["unsuback-held"].quoted() in finding.expected
    assert "0x00 (Success)" in finding.expected and "0x87 (Not authorized)" in finding.expected


@pytest.mark.parametrize("code", sorted(ALLOWED_OUTCOMES["suback"].codes))
def test_every_suback_refusal_is_allowed_in_any_place(code: int) -> None:
    talk = connected().client(subscribe(1, option("a", 2), option("b", 1))).server(suback(1, code, 1))
    judgement = verdict(talk.quiet(after=1))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.9.3-1" in judgement.passed


def test_unsuback_codes_are_judged_per_filter_in_order() -> None:
    talk = subscribed(option("a", 0)).client(codec.Unsubscribe(packet_id=2, topic_filters=("a", "b")))
    swapped = verdict(talk.server(codec.Unsuback(packet_id=2, reason_codes=(0x11, 0x00))))
    (finding,) = [f for f in swapped.findings if "MQTT-3.11.3-1" in f.rules]
    assert "'a', which the session held" in finding.detail  # 'b' may get Success: it shows no order
    talk = subscribed(option("a", 0)).client(codec.Unsubscribe(packet_id=2, topic_filters=("a", "b")))
    in_order = verdict(talk.server(codec.Unsuback(packet_id=2, reason_codes=(0x00, 0x11))))
    assert in_order.findings == (), explain(in_order)


# Deliveries -------------------------------------------------------------------------------------------------


def test_no_local_is_kept_when_another_subscription_without_it_matches() -> None:
    talk = subscribed(option("t", 0, no_local=True), option("#", 0))
    judgement = verdict(talk.client(message()).server(delivery()))
    assert judgement.findings == (), explain(judgement)
    assert NO_LOCAL_ID in judgement.passed


def test_a_no_local_finding_names_the_published_event() -> None:
    judgement = verdict(published_back(retain=False, delivered_retain=False, no_local=True))
    (finding,) = [f for f in judgement.findings if NO_LOCAL_ID in f.rules]
    assert "event 4" in finding.detail and "('t')" in finding.detail and finding.kind == "leak"


def test_a_shared_subscription_matches_by_its_filter() -> None:
    talk = subscribed(option("$share/g/s/+", 1), identifier=4).server(delivery("s/1", ids=(4,)))
    judgement = verdict(talk)
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-3.3.2-3", "MQTT-3.3.4-3"} <= judgement.passed


def test_delivery_qos_is_judged_under_its_5_0_id() -> None:
    talk = subscribed(option("t", 1))
    judgement = verdict(talk.server(message(qos=2, packet_id=5)))
    assert "MQTT-3.8.4-8" in {rule for f in judgement.findings for rule in f.rules}, explain(judgement)
    judgement = verdict(subscribed(option("t", 1)).server(message(qos=1, packet_id=5)))
    assert "MQTT-3.8.4-8" in judgement.passed, explain(judgement)


def test_a_delivery_whose_alias_mapping_is_unknown_is_not_matched_against_the_empty_topic() -> None:
    # The server's bytes that may have changed the mapping were not observed: its topic is unknown.
    named = codec.Publish(topic="t", payload=b"1", properties=make(topic_alias=1))
    by_alias = codec.Publish(topic="", payload=b"2", properties=make(topic_alias=1))
    talk = subscribed(option("t", 0)).server(named)
    talk.events.append(Lost(talk.now, S, 40))
    judgement = verdict(talk.server(by_alias))
    assert judgement.findings == (), explain(judgement)
    assert "Topic Alias 1" in judgement.not_assessable["MQTT-3.3.2-3"], explain(judgement)


class Aliases:
    """A topic source that knows one mapping."""

    def __init__(self, topic: str | None) -> None:
        self.topic = topic
        self.asked: list[int] = []

    def topic_of(self, seen: Seen) -> str | None:
        self.asked.append(seen.event)
        return self.topic


@pytest.mark.parametrize("resolved", ["t/1", None])
def test_the_topic_of_an_alias_only_publish_is_the_sources(resolved: str | None) -> None:
    by_alias = codec.Publish(topic="", payload=b"2", properties=make(topic_alias=1))
    (frame,) = codec.StreamDecoder(S, version="5").feed(codec.encode(by_alias, version="5"))
    seen = Seen.of(7, 0.0, S, frame)
    source = Aliases(resolved)
    assert topic_of(seen, by_alias, source) == resolved and source.asked == [7]
    assert topic_of(seen, by_alias, None) is None
    named = codec.Publish(topic="t/2", payload=b"2", properties=make(topic_alias=1))
    assert topic_of(seen, named, source) == "t/2" and source.asked == [7]


def test_a_publication_whose_alias_mapping_is_unknown_is_owed_to_nobody() -> None:
    alias_set = codec.Publish(topic="t", payload=b"1", properties=make(topic_alias=2))
    by_alias = codec.Publish(topic="", payload=b"2", qos=1, packet_id=6, properties=make(topic_alias=2))
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=0)
    connack = codec.Connack(properties=make(topic_alias_maximum=5))
    talk = Talk(version="5").client(connect).server(connack).client(alias_set)
    talk.events.append(Lost(talk.now, C, 40))
    talk.client(by_alias).server(codec.Puback(packet_id=6))
    conversation = ConversationJudge(V5)
    for event in talk.events:
        conversation.feed(event)
    conversation.finish()
    named, aliased = conversation.transcript.published
    assert named.certain and not aliased.certain
    assert aliased.accepted is not None


def test_a_pending_subscribe_leaves_undecided_only_the_options_it_uses() -> None:
    plain = connected().client(subscribe(1, option("t", 0))).server(delivery(), suback(1, 0))
    judgement = verdict(plain)
    assert judgement.findings == (), explain(judgement)
    assert not {NO_LOCAL_ID, "MQTT-3.3.4-3"} & set(judgement.not_assessable), explain(judgement)
    local = connected().client(subscribe(1, option("t", 0, no_local=True))).server(delivery(), suback(1, 0))
    assert NO_LOCAL_ID in verdict(local).not_assessable


@pytest.mark.parametrize("code", [0x00, 0x92])
def test_a_pubrel_of_a_resumed_session_may_be_completed_or_not_found(code: int) -> None:
    resumed = connected(clean_start=False, session_present=True).client(codec.Pubrel(packet_id=9))
    judgement = verdict(resumed.server(codec.Pubcomp(packet_id=9, reason_code=code)))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-4.3.3-11" in judgement.passed


def test_one_identifier_per_copy_keeps_the_copy_per_subscription_rule() -> None:
    # mosquitto 2 sends overlapping subscriptions one copy each, with that subscription's identifier.
    judgement = verdict(overlapping().server(delivery(ids=(1,)), delivery(ids=(2,)), delivery(ids=(3,))))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.3.4-5" in judgement.passed
    assert "MQTT-3.3.4-4" not in judgement.assessed and "MQTT-3.3.4-4" not in judgement.not_assessable


# Against a real broker ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto() -> Iterator[RunningBroker]:
    try:
        broker = start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker:
        yield broker


class Live:
    """A 5.0 client on a socket whose bytes, both ways, become judge events."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.decoders = {side: codec.StreamDecoder(side, version="5") for side in (C, S)}
        self.events: list[Event] = []
        self.start = time.monotonic()
        self.awaited = 0  # server packets expected so far, in all

    def now(self) -> float:
        return time.monotonic() - self.start

    def send(self, *packets: codec.Packet) -> Live:
        data = b"".join(codec.encode(p, version="5") for p in packets)
        self.events += [Sent(self.now(), C, frame) for frame in self.decoders[C].feed(data)]
        self.sock.sendall(data)
        return self

    def expect(self, count: int) -> Live:
        """Reads until ``count`` more server packets came (the socket's timeout bounds each wait)."""
        self.awaited += count
        while sum(1 for e in self.events if isinstance(e, Sent) and e.sender is S) < self.awaited:
            data = self.sock.recv(65536)
            assert data, "the broker closed the connection"
            self.events += [Sent(self.now(), S, frame) for frame in self.decoders[S].feed(data)]
        return self

    def judgement(self) -> Judgement:
        self.sock.close()
        return judge([*self.events, Quiet(self.now())], V5)


def test_mosquitto_keeps_the_5_0_flow_and_delivery_rules(mosquitto: RunningBroker) -> None:
    live = Live(mosquitto.port)
    live.send(codec.Connect(client_id="flows-5", protocol_level=5, keep_alive=0)).expect(1)
    live.send(
        subscribe(1, option("f5/nl", 0, no_local=True), option("f5/rap", 0, retain_as_published=True), identifier=7)
    )
    live.expect(1).send(subscribe(2, option("f5/#", 0), identifier=9)).expect(1)
    live.send(message("f5/nl", b"a", qos=1, packet_id=3)).expect(2)  # PUBACK, and the copy for "f5/#" only
    live.send(message("f5/rap", b"b", retain=True)).expect(2)  # one copy per subscription, RETAIN kept and cleared
    live.send(message("f5/x", b"c", qos=2, packet_id=4)).expect(1).send(codec.Pubrel(packet_id=4)).expect(2)
    live.send(codec.Pubrel(packet_id=77)).expect(1)  # a PUBREL of no flow: mosquitto completes it (0x00)
    live.send(codec.Unsubscribe(packet_id=5, topic_filters=("f5/nl", "f5/never"))).expect(1)
    live.send(message("f5/rap", b"", retain=True)).expect(2)  # clears the retained message
    judgement = live.judgement()
    assert [f for f in judgement.findings if f.side is S] == [], explain(judgement)
    assert {rule for f in judgement.findings for rule in f.rules} == {"MQTT-2.2.1-5"}, explain(
        judgement
    )  # the stray PUBREL
    kept = {"MQTT-3.11.3-1", "MQTT-3.11.3-2", "MQTT-3.3.1-12", "MQTT-3.3.1-13", NO_LOCAL_ID, "MQTT-3.3.4-3"}
    assert kept | {"MQTT-4.3.3-11", "MQTT-3.8.4-8", "MQTT-3.3.2-3"} <= judgement.passed, explain(judgement)


def test_the_no_local_key_names_the_5_0_statement_and_no_3_1_1_rule() -> None:
    assert identity.statement_id(NO_LOCAL, identity.V5) == NO_LOCAL_ID
    assert NO_LOCAL != NO_LOCAL_ID  # 3.1.1's MQTT-3.8.3-3 is another rule


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2]), st.sampled_from(sorted(PUBLISH_ACCEPTED | PUBLISH_REFUSALS))),
        min_size=1,
        max_size=6,
    )
)
def test_any_allowed_acknowledgement_then_its_flow_conforms(acks: list[tuple[int, int]]) -> None:
    # A refusal ends the flow there; a success (0x00, 0x10) takes the message and a QoS 2 flow goes on.
    talk = connected()
    for packet_id, (qos, code) in enumerate(acks, start=1):
        talk.client(message(payload=bytes([packet_id]), qos=qos, packet_id=packet_id))
        if qos == 1:
            talk.server(codec.Puback(packet_id=packet_id, reason_code=code))
        elif code >= 0x80:
            talk.server(codec.Pubrec(packet_id=packet_id, reason_code=code))
        else:
            talk.server(codec.Pubrec(packet_id=packet_id, reason_code=code)).client(codec.Pubrel(packet_id=packet_id))
            talk.server(codec.Pubcomp(packet_id=packet_id))
    conversation = ConversationJudge(V5)
    for event in talk.quiet(after=WAIT).events:
        conversation.feed(event)
    judgement = conversation.finish()
    assert judgement.findings == (), explain(judgement)
    assert [p.certain for p in conversation.transcript.published] == [code < 0x80 for _qos, code in acks]


@pytest.mark.parametrize(
    ("talk", "rules"),
    [
        # Another client's message, retained or forwarded: its RETAIN flag as published is on its connection.
        (lambda: subscribed(option("t", 0)).server(delivery(retain=True)), {"MQTT-3.3.1-12"}),
        (lambda: subscribed(option("t", 0, retain_as_published=True)).server(delivery()), {"MQTT-3.3.1-13"}),
        # Published before the No Local subscription was granted: it may come back as a retained message.
        (
            lambda: (
                connected()
                .client(message(retain=True))
                .client(subscribe(1, option("t", 0, no_local=True)))
                .server(suback(1, 0), delivery(retain=True))
            ),
            {NO_LOCAL_ID},
        ),
        # One identifier of three: whether the other copies came is a question of missing deliveries.
        (lambda: overlapping().server(delivery(ids=(2,))), {"MQTT-3.3.4-4"}),
    ],
)
def test_what_only_other_connections_show_is_left_to_the_broker_model(
    talk: Callable[[], Talk], rules: set[str]
) -> None:
    judgement = verdict(talk())
    assert judgement.findings == (), explain(judgement)
    assert not rules & (judgement.assessed | set(judgement.not_assessable)), explain(judgement)


def test_the_own_message_owes_no_identifier_of_a_no_local_subscription() -> None:
    talk = subscribed(option("a/b", 0, no_local=True), identifier=3)
    talk.client(subscribe(2, option("a/+", 0), identifier=1)).server(suback(2, 0))
    talk.client(subscribe(3, option("#", 0), identifier=2)).server(suback(3, 0))
    judgement = verdict(talk.client(message("a/b")).server(delivery("a/b", ids=(1, 2))))
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-3.3.4-3", "MQTT-3.3.4-4", NO_LOCAL_ID} <= judgement.passed
    others = verdict(talk.server(delivery("a/b", b"theirs", ids=(1, 2))))
    assert "MQTT-3.3.4-4" in {rule for f in others.findings for rule in f.rules}, explain(others)


def test_a_delivery_named_by_a_mapped_alias_is_judged_under_its_topic() -> None:
    named = codec.Publish(topic="t", payload=b"1", properties=make(topic_alias=1))
    by_alias = codec.Publish(topic="", payload=b"2", properties=make(topic_alias=1))
    judgement = verdict(subscribed(option("t", 0)).server(named, by_alias))
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.3.2-3" in judgement.passed
    elsewhere = codec.Publish(topic="u", payload=b"1", properties=make(topic_alias=1))
    judgement = verdict(subscribed(option("t", 0)).server(elsewhere, by_alias))
    assert [f.event for f in judgement.findings if "MQTT-3.3.2-3" in f.rules] == [4, 5], explain(judgement)


def test_a_filter_never_subscribed_may_be_answered_success_or_no_subscription_existed() -> None:
    for code in (0x00, 0x11, 0x87):
        judgement = verdict(unsubscribed(code, held=False))
        assert judgement.findings == (), explain(judgement)


@pytest.mark.parametrize("code", [0x87, 0x9E, 0xA2, 0x8F])
def test_a_disconnect_with_a_refusal_may_stand_in_for_a_negative_suback(code: int) -> None:
    talk = connected().client(subscribe(1, option("$share/g/a", 1)))
    talk = talk.server(codec.Disconnect(reason_code=code)).closed(S)
    judgement = verdict(talk)
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.8.4-1" in judgement.passed and "MQTT-3.9.3-1" not in judgement.passed


def test_a_disconnect_whose_code_no_suback_carries_leaves_the_suback_owed() -> None:
    talk = connected().client(subscribe(1, option("a", 1))).server(codec.Disconnect(reason_code=0x8B)).closed(S)
    judgement = verdict(talk)
    assert "MQTT-3.8.4-1" not in judgement.passed  # 0x8B Server shutting down refuses nothing in particular
