"""The MQTT 5.0 limit families (Topic Alias, Receive Maximum, Maximum Packet Size): every statement a case lists
is one the judge decides, kept by a conforming broker and broken by a violating one (pure), and every case gets a
verdict from mosquitto (default, and with a Maximum Packet Size configured) and from mqttools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario, limits
from mqttaudit.judge.rules import RECEIVER_DUTIES_5_0
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_limits
from mqttaudit.probe.cases.malformed import charged
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config
from mqttaudit.spec import identity

from .live import configured_mosquitto, run_together
from .talk import C, S, Talk
from .verdicts import LENIENT, verdict_of

#: The 5.0 ids of every rule judge.limits decides.
LIMIT_STATEMENTS = {identity.statement_id(key, identity.V5) for key in limits.LIMIT_RULES}
FAMILIES = ("v5/topic-alias", "v5/receive-maximum", "v5/maximum-packet-size")
LIMIT_CASES = [
    case
    for case in CASES.values()
    if case.family_name in FAMILIES and case.script.__module__ == "mqttaudit.probe.cases.v5_limits"
]
TIMEOUT = 1.0
TOPIC = "mqttaudit/run/limits/t"


def opened(client: dict[str, int] | None = None, server: dict[str, int] | None = None) -> Talk:
    connect = codec.Connect(protocol_level=5, client_id="limits", properties=make(**(client or {})))
    return Talk(version="5").client(connect).server(codec.Connack(properties=make(**(server or {}))))


def publish(topic: str = TOPIC, *, alias: int | None = None, qos: int = 0, packet_id: int | None = None, size: int = 1):
    properties = make(topic_alias=alias) if alias is not None else ()
    return codec.Publish(topic=topic, payload=b"x" * size, qos=qos, packet_id=packet_id, properties=properties)


def publishes(count: int, qos: int) -> list[codec.Publish]:
    return [publish(qos=qos, packet_id=i) for i in range(1, count + 1)]


def sized(size: int, qos: int = 0) -> codec.Publish:
    payload = v5_limits._sized(TOPIC, size, qos)
    assert payload is not None
    return codec.Publish(topic=TOPIC, payload=payload, qos=qos, packet_id=1 if qos else None)


#: Per case: (a conversation in which the broker keeps every statement, one in which it breaks every one).
Pair = tuple[dict[str, Talk], dict[str, Talk]]


def _breach(server: dict[str, int], stimulus: list[codec.Packet], answer: codec.Packet | None) -> Pair:
    """The client breaks a declared limit: a conforming broker closes; a violating one answers and stays open."""
    kept = opened(server=server).client(*stimulus).closed(S)
    broken = opened(server=server).client(*stimulus)
    if answer is not None:
        broken.server(answer)
    return {"c1": kept}, {"c1": broken.quiet(after=10)}


def _to_client(client: dict[str, int], good: list[codec.Packet], bad: list[codec.Packet]) -> Pair:
    """The client declared a limit: a conforming broker keeps it, a violating one does not."""
    return {"c1": opened(client).server(*good).quiet(after=10)}, {"c1": opened(client).server(*bad).quiet(after=10)}


def _window(receive_maximum: int, qos: int) -> Pair:
    ack = codec.Puback if qos == 1 else codec.Pubcomp
    kept = opened({"receive_maximum": receive_maximum}).server(*publishes(receive_maximum, qos))
    if qos == 2:
        kept.client(*(codec.Pubrec(packet_id=i) for i in range(1, receive_maximum + 1)))
        kept.server(*(codec.Pubrel(packet_id=i) for i in range(1, receive_maximum + 1)))
    kept.client(*(ack(packet_id=i) for i in range(1, receive_maximum + 1)))
    more = publish(qos=qos, packet_id=receive_maximum + 1)
    broken = opened({"receive_maximum": receive_maximum}).server(*publishes(receive_maximum + 1, qos))
    return {"c1": kept.server(more).quiet(after=10)}, {"c1": broken.quiet(after=10)}


def _discarded(maximum: int, qos: int) -> Pair:
    """A publisher sends a message one byte too large for the subscriber, then one that fits: a conforming broker
    delivers only the second, on the same connection; a violating one sends the first as well."""

    def subscriber(*deliveries: codec.Publish) -> Talk:
        talk = opened({"maximum_packet_size": maximum})
        talk.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter=TOPIC, qos=qos),)))
        talk.server(codec.Suback(packet_id=1, return_codes=(qos,)))
        for at, delivery in enumerate(deliveries):
            talk.server(delivery, at=0.2 + at / 100)
        return talk.quiet(after=10)

    def publisher() -> Talk:
        talk = (
            Talk(version="5").client(codec.Connect(protocol_level=5, client_id="pub"), at=0.05).server(codec.Connack())
        )
        for message in (sized(maximum + 1, qos), sized(maximum, qos)):
            talk.client(message, at=talk.now + 0.02)
            if qos:
                talk.server(codec.Puback(packet_id=1))
        return talk.quiet(after=10)

    kept = {"subscriber": subscriber(sized(maximum, qos)), "publisher": publisher()}
    broken = {"subscriber": subscriber(sized(maximum + 1, qos), sized(maximum, qos)), "publisher": publisher()}
    return kept, broken


def _remapped() -> Pair:
    subscribe = codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="b"),))
    suback = codec.Suback(packet_id=1, return_codes=(0,))
    kept = opened().client(subscribe).server(suback).server(publish("b")).quiet(after=10)
    broken = opened().client(subscribe).server(suback).server(publish("a", alias=1)).quiet(after=10)
    return {"subscriber": kept}, {"subscriber": broken}


def pairs() -> dict[str, Pair]:
    held = [*publishes(20, 2)]
    alias = {"topic_alias_maximum": 10}
    return {
        "v5/topic-alias/maximum-plus-one": _breach(alias, [publish(alias=11)], codec.Pingresp()),
        "v5/topic-alias/maximum-plus-one-qos2": _breach(
            alias, [publish(alias=11, qos=2, packet_id=1)], codec.Pubrec(packet_id=1)
        ),
        "v5/topic-alias/largest": _breach(alias, [publish(alias=0xFFFF)], None),
        "v5/topic-alias/without-maximum": _breach(
            {}, [publish(alias=1, qos=1, packet_id=1)], codec.Puback(packet_id=1)
        ),
        "v5/topic-alias/unmapped-qos0": _breach(alias, [publish("", alias=1)], None),
        "v5/topic-alias/unmapped-qos1": _breach(
            alias, [publish("", alias=1, qos=1, packet_id=1)], codec.Puback(packet_id=1)
        ),
        "v5/topic-alias/mapped-on-another-connection": _breach(alias, [publish("", alias=1)], None),
        "v5/topic-alias/remapped": _remapped(),
        "v5/topic-alias/to-client-without-maximum": _to_client({}, [publish()], [publish(alias=1)]),
        "v5/topic-alias/to-client-maximum-0": _to_client({"topic_alias_maximum": 0}, [publish()], [publish(alias=1)]),
        "v5/topic-alias/to-client-maximum-2": _to_client(
            {"topic_alias_maximum": 2}, [publish(alias=2), publish("", alias=2)], [publish(alias=3)]
        ),
        **{f"v5/receive-maximum/to-client-{m}-qos{q}": _window(m, q) for m in (1, 2) for q in (1, 2)},
        "v5/receive-maximum/from-client-qos2-burst": _breach(
            {"receive_maximum": 20}, publishes(21, 2), codec.Pubrec(packet_id=21, reason_code=0x97)
        ),
        "v5/receive-maximum/from-client-qos1-after-held-window": _breach(
            {"receive_maximum": 20}, [*held, publish(qos=1, packet_id=21)], codec.Puback(packet_id=21)
        ),
        **{f"v5/maximum-packet-size/to-client-{m}-qos{q}": _discarded(m, q) for m, q in ((64, 0), (128, 0), (128, 1))},
        "v5/maximum-packet-size/from-client-qos0": _breach({"maximum_packet_size": 100}, [sized(101)], None),
        "v5/maximum-packet-size/from-client-qos1": _breach(
            {"maximum_packet_size": 100}, [sized(101, 1)], codec.Puback(packet_id=1)
        ),
    }


def judged(case: Case, conversations: dict[str, Talk]) -> Judgement:
    return judge_scenario({name: talk.events for name, talk in conversations.items()}, judge_config(case, TIMEOUT))


def test_every_limit_case_has_a_conforming_and_a_violating_conversation() -> None:
    assert sorted(pairs()) == sorted(case.id for case in LIMIT_CASES)
    assert len(LIMIT_CASES) >= 20


@pytest.mark.parametrize("case", LIMIT_CASES, ids=lambda case: case.id)
def test_the_judge_decides_every_statement_of_the_case_both_ways(case: Case) -> None:
    kept, broken = pairs()[case.id]
    conforming = judged(case, kept)
    # A limit the client broke is failed by the client and upheld by the broker: assessed, no finding against it.
    assert set(case.statements) <= conforming.assessed, (case.statements, sorted(conforming.assessed))
    assert not [f for f in conforming.findings if not set(f.rules).isdisjoint(case.statements) and f.side is S]
    violating = judged(case, broken)
    charged_with = set(charged(violating))  # broken, or (a limit nothing binds the server to detect) lenient on
    assert set(case.statements) <= charged_with, (case.statements, sorted(charged_with))


def test_a_case_whose_client_breaks_a_limit_targets_the_close_and_the_limit_it_broke() -> None:
    """The client's own breach (MQTT-3.3.2-9, MQTT-3.3.4-7, ...) is a finding against the client; the broker upholds
    the limit by closing (the statement passes for it); acting on the packet or staying open is leniency (no
    statement binds it to detect the breach, 4.13.1), except for an alias mapping carried forward (MQTT-3.3.2-7)."""
    breaches = [case for case in LIMIT_CASES if case.id.split("/")[-1] not in SERVER_SIDE]
    assert len(breaches) == 11
    for case in breaches:
        assert case.statements[0] == v5_limits.CLOSE, case.id
        kept, broken = pairs()[case.id]
        limits_of_case = (set(case.statements) | set(case.provokes)) & LIMIT_STATEMENTS
        assert limits_of_case, case.id
        conforming = judged(case, kept)
        assert {f.side for f in conforming.findings if not set(f.rules).isdisjoint(LIMIT_STATEMENTS)} == {C}, case.id
        violating = judged(case, broken)
        against = {rule for f in violating.findings if f.side is S for rule in f.rules}
        lenient = {rule for entry in violating.lenient if entry.side is S for rule in (entry.rule, *entry.others)}
        if against & RECEIVER_DUTIES_5_0:  # an alias never mapped here: acting on it carries a mapping forward
            assert limits_of_case <= against, case.id
        else:
            assert limits_of_case <= lenient and not limits_of_case & against, case.id
        assert limits_of_case <= {rule for f in violating.findings if f.side is C for rule in f.rules} | {
            v5_limits.ALIAS_PER_CONNECTION
        }, case.id


def _receive_maximum_overrun(answer: codec.Packet) -> Talk:
    return opened(server={"receive_maximum": 2}).client(*publishes(3, 2)).server(answer)


def test_a_refusal_of_a_publish_beyond_the_receive_maximum_acts_on_nothing_and_staying_open_is_lenient() -> None:
    """3.3.4: the server "uses a DISCONNECT packet with Reason Code 0x93", without a MUST: no statement binds it to
    detect the overrun (4.13.1). A PUBREC of 0x97 Quota exceeded for the PUBLISH beyond the window accepts nothing
    of it: followed by the close it keeps MQTT-3.3.4-7 and MQTT-4.13.1-1; left open (mosquitto 2.0.11), or a PUBREC
    0x00 that accepts it, is leniency, one entry, not a failure."""
    case = CASES["v5/receive-maximum/from-client-qos2-burst"]
    refused = codec.Pubrec(packet_id=3, reason_code=0x97)
    closed = judged(case, {"c1": _receive_maximum_overrun(refused).closed(S)})
    assert not [f for f in closed.findings if f.side is S], closed.findings
    assert {"MQTT-4.13.1-1", "MQTT-3.3.4-7"} <= closed.assessed
    left_open = judged(case, {"c1": _receive_maximum_overrun(refused).quiet(after=10)})
    assert not {"MQTT-4.13.1-1", "MQTT-3.3.4-7"} & {rule for f in left_open.findings if f.side is S for rule in f.rules}
    assert [(x.rule, x.side) for x in left_open.lenient] == [("MQTT-3.3.4-7", S)]
    accepted = judged(case, {"c1": _receive_maximum_overrun(codec.Pubrec(packet_id=3)).closed(S)})
    assert not {"MQTT-4.13.1-1", "MQTT-3.3.4-7"} & {rule for f in accepted.findings if f.side is S for rule in f.rules}
    assert [(x.rule, x.side, x.event) for x in accepted.lenient] == [("MQTT-3.3.4-7", S, 5)]  # the PUBREC


#: The cases that judge what the broker sends (the rest judge its answer to the client's breach).
SERVER_SIDE = {
    "remapped",
    "to-client-without-maximum",
    "to-client-maximum-0",
    "to-client-maximum-2",
    *(f"to-client-{m}-qos{q}" for m in (1, 2) for q in (1, 2)),
    "to-client-64-qos0",
    "to-client-128-qos0",
    "to-client-128-qos1",
}


def test_sized_publishes_count_the_whole_packet() -> None:
    for size in (64, 65, 127, 128, 129, 200):
        for qos in (0, 1):
            assert len(codec.encode(sized(size, qos), version="5")) == size


@pytest.mark.parametrize(("maximum", "qos"), [(64, 0), (128, 1)])
def test_a_message_too_large_for_the_subscriber_is_owed_nothing(maximum: int, qos: int) -> None:
    """The message one byte over the subscriber's Maximum Packet Size is discarded [MQTT-3.1.2-25]: the routing
    replay owes it to nobody (it said "never arrived", MQTT-4.5.0-1, of a broker that discarded it)."""
    case = CASES[f"v5/maximum-packet-size/to-client-{maximum}-qos{qos}"]
    kept, _broken = _discarded(maximum, qos)
    judgement = judged(case, kept)
    assert not [f for f in judgement.findings if f.side is S], judgement.findings
    assert "MQTT-4.5.0-1" in judgement.passed  # the one that fits is owed, and came


def test_a_broker_that_closes_instead_of_carrying_on_after_a_message_too_large_breaks_3_1_2_25() -> None:
    """3.1.2.11.4: the server discards the packet "and then behave[s] as if it had completed sending that Application
    Message": closing the subscriber's connection is not carrying on; with no later message the rule is open."""
    case = CASES["v5/maximum-packet-size/to-client-64-qos0"]
    kept, _broken = _discarded(64, 0)
    subscriber = opened({"maximum_packet_size": 64})
    subscriber.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter=TOPIC),)))
    subscriber.server(codec.Suback(packet_id=1, return_codes=(0,))).closed(S, at=0.3)
    closed = judged(case, {"subscriber": subscriber, "publisher": kept["publisher"]})
    assert [f.side for f in closed.findings if v5_limits.DISCARD_TOO_LARGE in f.rules] == [S]
    silent = opened({"maximum_packet_size": 64})
    silent.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter=TOPIC),)))
    silent.server(codec.Suback(packet_id=1, return_codes=(0,))).quiet(after=10)
    _kept, broken = _discarded(64, 0)
    undecided = judged(case, {"subscriber": silent, "publisher": broken["publisher"]})
    assert v5_limits.DISCARD_TOO_LARGE in undecided.not_assessable


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_with_packet_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """mosquitto configured with ``max_packet_size 200``, which its CONNACK then declares."""
    with configured_mosquitto(tmp_path_factory.mktemp("mosquitto-mps"), "max_packet_size 200") as broker:
        yield broker


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, LIMIT_CASES, "5b5b5b5b")


#: What mosquitto 2.0.11 does (default configuration: Topic Alias Maximum 10, Receive Maximum 20, no Maximum Packet
#: Size): it closes on every alias breach; it refuses a PUBLISH past its Receive Maximum with a 0x97 acknowledgement
#: instead of closing; it lets a third QoS 1/2 PUBLISH out toward a client whose Receive Maximum is 2; it sends a
#: PUBLISH one byte over the client's Maximum Packet Size (it counts the Remaining Length and its own bytes, not
#: the first byte of the fixed header).
MOSQUITTO = {
    "v5/topic-alias/maximum-plus-one": PASS,
    "v5/topic-alias/maximum-plus-one-qos2": PASS,
    "v5/topic-alias/largest": PASS,
    "v5/topic-alias/without-maximum": NOT_APPLICABLE,  # it declares Topic Alias Maximum 10
    "v5/topic-alias/unmapped-qos0": PASS,
    "v5/topic-alias/unmapped-qos1": PASS,
    "v5/topic-alias/mapped-on-another-connection": PASS,
    "v5/topic-alias/remapped": PASS,
    "v5/topic-alias/to-client-without-maximum": PASS,
    "v5/topic-alias/to-client-maximum-0": PASS,
    "v5/topic-alias/to-client-maximum-2": NOT_APPLICABLE,
    "v5/receive-maximum/to-client-1-qos1": PASS,
    "v5/receive-maximum/to-client-1-qos2": PASS,
    "v5/receive-maximum/to-client-2-qos1": FAIL,
    "v5/receive-maximum/to-client-2-qos2": FAIL,
    "v5/receive-maximum/from-client-qos2-burst": LENIENT,  # PUBREC 0x97 and no close: no MUST binds it to detect
    "v5/receive-maximum/from-client-qos1-after-held-window": LENIENT,
    "v5/maximum-packet-size/to-client-64-qos0": FAIL,
    "v5/maximum-packet-size/to-client-128-qos0": FAIL,
    "v5/maximum-packet-size/to-client-128-qos1": FAIL,
    "v5/maximum-packet-size/from-client-qos0": NOT_APPLICABLE,
    "v5/maximum-packet-size/from-client-qos1": NOT_APPLICABLE,
}


def test_every_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    results = run_all(mosquitto)
    assert {case_id: verdict_of(result) for case_id, result in results.items()} == MOSQUITTO
    assert "is 65 bytes" in results["v5/maximum-packet-size/to-client-64-qos0"].reason
    assert "declared Receive Maximum 2" in results["v5/receive-maximum/to-client-2-qos1"].reason


def test_mosquitto_with_a_maximum_packet_size_takes_a_packet_one_byte_over(
    mosquitto_with_packet_limit: RunningBroker,
) -> None:
    """With ``max_packet_size 200`` its CONNACK declares Maximum Packet Size 200, yet it takes a 201-byte PUBLISH
    (it leaves the fixed header's first byte out of the count): no close, and a PUBACK for the QoS 1 one. 3.2.2.3.6
    has the server use DISCONNECT 0x95 without a MUST: leniency, not a failure (4.13.1)."""
    results = run_all(mosquitto_with_packet_limit)
    details = {}
    for name in ("from-client-qos0", "from-client-qos1"):
        result = results[f"v5/maximum-packet-size/{name}"]
        assert verdict_of(result) == LENIENT, result.reason
        assert [entry.rule for entry in result.lenient] == ["MQTT-3.2.2-15"]
        details[name] = result.lenient[0].detail
    assert "the server did not close the connection" in details["from-client-qos0"]
    assert "PUBACK" in details["from-client-qos1"]
    assert "is 201 bytes, above the server's Maximum Packet Size 200" in details["from-client-qos1"]


def test_every_case_gets_a_verdict_from_mqttools(mqttools: RunningBroker) -> None:
    results = run_all(mqttools)
    verdicts = {case_id: verdict_of(result) for case_id, result in results.items()}
    # It declares no Topic Alias Maximum and takes an alias anyway, never closing: MQTT-3.2.2-18 and MQTT-3.3.2-9
    # bind the client, and no statement binds the server to detect the alias (4.13.1): leniency.
    assert {verdicts[f"v5/topic-alias/{name}"] for name in ("maximum-plus-one", "without-maximum")} == {LENIENT}
    (entry,) = results["v5/topic-alias/without-maximum"].lenient
    assert {entry.rule, *entry.others} == {"MQTT-3.3.2-9", "MQTT-3.2.2-18"}
    assert verdicts["v5/topic-alias/largest"] == NOT_APPLICABLE  # MQTT-3.2.2-17 binds a declared maximum only
    # Maximum QoS 0: nothing of QoS 1 or 2 applies.
    assert {v for case_id, v in verdicts.items() if case_id.startswith("v5/receive-maximum/")} == {NOT_APPLICABLE}
    assert verdicts["v5/maximum-packet-size/to-client-64-qos0"] == PASS
