"""The MQTT 5.0 cases of probe/cases/v5_flows_more.py: every statement a case lists is one the judge decides on a
5.0 conversation of the case's shape, kept by a conforming broker and broken by a violating one (pure, the probe's
judge configuration); every case gets a verdict from mosquitto, from mosquitto with ``max_qos 1`` and from
mqttools. Then the judge's own edges for those statements."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_flows_more
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config

from .live import configured_mosquitto, run_together
from .talk import S, Talk, publish5, suback, subscribe, unsubscribe

TIMEOUT = 1.0
MODULE = "mqttaudit.probe.cases.v5_flows_more"
MORE_CASES = [case for case in CASES.values() if case.script.__module__ == MODULE]
CONNECT = codec.Connect(client_id="more", protocol_level=5)
CONNACK = codec.Connack()
MAXIMUM_QOS_0 = codec.Connack(properties=make(maximum_qos=0))
EXPIRING = {"message_expiry_interval": v5_flows_more.EXPIRY}


def talk(connack: codec.Connack = CONNACK) -> Talk:
    return Talk(version="5").client(CONNECT).server(connack)


def unsuback(packet_id: int, *codes: int) -> codec.Unsuback:
    return codec.Unsuback(packet_id=packet_id, reason_codes=codes)


def subscribes(*, granted: tuple[int, ...], second_id: int, delivered_qos: int) -> Talk:
    """Two SUBSCRIBEs in flight, their SUBACKs, one delivery on the QoS 1 filter, completed."""
    conversation = (
        talk()
        .client(subscribe(1, ("a", 0), ("b", 1), ("c", 2)), subscribe(2, ("d", 2)))
        .server(suback(1, *granted), suback(second_id, 2))
        .server(publish5("b", qos=delivered_qos, pid=1))
    )
    if delivered_qos == 1:
        conversation.client(codec.Puback(packet_id=1))
    else:
        conversation.client(codec.Pubrec(packet_id=1)).server(codec.Pubrel(packet_id=1))
        conversation.client(codec.Pubcomp(packet_id=1))
    return conversation.client(unsubscribe(3, "a", "b", "c", "d")).server(unsuback(3, 0, 0, 0, 0))


def unsubscribes(*answers: codec.Unsuback) -> Talk:
    return (
        talk()
        .client(subscribe(1, "a", "b", "c"))
        .server(suback(1, 0, 0, 0))
        .client(unsubscribe(2, "a", "b", "c"))
        .server(*answers)
    )


def in_flight(second_id: int) -> Talk:
    return (
        talk()
        .client(subscribe(1, ("a", 1)))
        .server(suback(1, 1))
        .server(publish5("a", b"m0", qos=1, pid=1), publish5("a", b"m1", qos=1, pid=second_id))
        .client(codec.Puback(packet_id=1), codec.Puback(packet_id=2))
    )


def pubrecs(*answers: int) -> Talk:
    conversation = talk().client(publish5("t", b"m0", qos=2, pid=1), publish5("t", b"m1", qos=2, pid=2))
    for packet_id in answers:
        conversation.server(codec.Pubrec(packet_id=packet_id))
    for packet_id in answers:
        conversation.client(codec.Pubrel(packet_id=packet_id)).server(codec.Pubcomp(packet_id=packet_id))
    return conversation


def pubrel_late(pubcomp_code: int) -> Talk:
    return (
        talk()
        .client(publish5("t", qos=2, pid=1, **EXPIRING))
        .server(codec.Pubrec(packet_id=1))
        .wait(v5_flows_more.PAST_EXPIRY)
        .client(codec.Pubrel(packet_id=1))
        .server(codec.Pubcomp(packet_id=1, reason_code=pubcomp_code))
    )


def pubrec_late(pubrel_code: int) -> Talk:
    return (
        talk()
        .client(subscribe(1, ("t", 2)))
        .server(suback(1, 2))
        .server(publish5("t", qos=2, pid=1, **EXPIRING))
        .wait(v5_flows_more.PAST_EXPIRY)
        .client(codec.Pubrec(packet_id=1))
        .server(codec.Pubrel(packet_id=1, reason_code=pubrel_code))
        .client(codec.Pubcomp(packet_id=1))
    )


def above_maximum(*codes: int) -> Talk:
    return talk(MAXIMUM_QOS_0).client(subscribe(1, ("a", 0), ("b", 1), ("c", 2))).server(suback(1, *codes))


def unknown_pubrec(code: int | None, *, answered: bool, pubrel: int | None = 0x92) -> Talk:
    """A PUBREC of an identifier the server never used, then PINGREQ: answered (PUBREL ``pubrel``, PINGRESP) or
    not."""
    conversation = talk().client(codec.Pubrec(packet_id=7, reason_code=code))
    if answered:
        conversation.server(codec.Pubrel(packet_id=7, reason_code=pubrel))
    conversation.client(codec.Pingreq())
    return conversation.server(codec.Pingresp()) if answered else conversation


def pairs() -> dict[str, tuple[Talk, Talk]]:
    """Per case: (a conversation in which the broker keeps every statement, one in which it breaks every one),
    fresh each time (judging one ends it)."""
    return {
        # Broken: the first SUBACK holds two codes for three filters [MQTT-3.9.3-2], the second carries an
        # identifier no SUBSCRIBE used [MQTT-2.2.1-6], and the delivery exceeds the QoS 1 granted [MQTT-3.8.4-7].
        "v5/acknowledgements/subscribes-in-flight": (
            subscribes(granted=(0, 1, 2), second_id=2, delivered_qos=1),
            subscribes(granted=(0, 1), second_id=7, delivered_qos=2),
        ),
        # Broken: an UNSUBACK with two codes for three filters, then another with an identifier nobody used.
        "v5/acknowledgements/unsubscribe-several-filters": (
            unsubscribes(unsuback(2, 0, 0, 0)),
            unsubscribes(unsuback(2, 0, 0), unsuback(9, 0, 0, 0)),
        ),
        "v5/flows/deliveries-in-flight": (in_flight(2), in_flight(1)),
        # Broken: PUBRECs of identifiers 1 and 5; the PUBLISH of identifier 2 gets none.
        "v5/flows/pubrecs-in-flight": (pubrecs(1, 2), pubrecs(1, 5)),
        "v5/flows/qos2-pubrel-after-expiry": (pubrel_late(0x00), pubrel_late(0x92)),
        "v5/flows/qos2-pubrec-after-expiry": (pubrec_late(0x00), pubrec_late(0x92)),
        # Broken: the connection stays open and answers nothing after the PUBREC (its parser stalled).
        "v5/flows/pubrec-unknown-id-then-pingreq": (
            unknown_pubrec(0x00, answered=True),
            unknown_pubrec(0x00, answered=False),
        ),
        "v5/flows/pubrec-unknown-id-short-then-pingreq": (
            unknown_pubrec(None, answered=True),
            unknown_pubrec(None, answered=False),
        ),
        "v5/maximum-qos/subscribe-above-maximum": (above_maximum(0, 0, 0), above_maximum(0, 0x80, 0x83)),
        "v5/maximum-qos/publish-within-maximum": (
            talk().client(publish5("t", qos=1, pid=1)).server(codec.Puback(packet_id=1)),
            talk().client(publish5("t", qos=1, pid=1)).server(codec.Disconnect(reason_code=0x9B)),
        ),
    }


def judged(case: Case, conversation: Talk) -> Judgement:
    return judge_scenario({"c1": conversation.quiet(after=10).events}, judge_config(case, TIMEOUT))


def test_every_case_has_a_pair_and_lists_only_its_own_statements() -> None:
    assert sorted(case.id for case in MORE_CASES) == sorted(pairs())
    for case in MORE_CASES:
        assert case.statements, case.id
        assert set(case.statements) <= v5_flows_more.STATEMENTS


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_conforming_broker_keeps_every_statement_of_the_case(case: Case) -> None:
    kept, _broken = pairs()[case.id]
    judgement = judged(case, kept)
    assert set(case.statements) <= judgement.passed, (case.statements, sorted(judgement.assessed))
    assert not [f for f in judgement.findings if f.side is S and not set(f.rules).isdisjoint(case.statements)]


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_violating_broker_breaks_every_statement_of_the_case(case: Case) -> None:
    _kept, broken = pairs()[case.id]
    judgement = judged(case, broken)
    failed = {rule for f in judgement.findings if f.side is S for rule in f.rules}
    assert set(case.statements) <= failed, (case.statements, sorted(failed))


# The judge's edges --------------------------------------------------------------------------------------------------

CASE = CASES["v5/flows/pubrecs-in-flight"]


def verdicts(conversation: Talk, *rules: str) -> dict[str, str]:
    judgement = judged(CASE, conversation)
    failed = {rule for f in judgement.findings if f.side is S for rule in f.rules}
    return {rule: "fail" if rule in failed else "pass" if rule in judgement.passed else "undecided" for rule in rules}


def test_a_refusal_of_its_own_leaves_the_subscribe_above_maximum_undecided() -> None:
    """0x87 Not authorized or 0x97 Quota exceeded need not be about the QoS: only 0x80 and 0x83 say nothing more."""
    assert verdicts(above_maximum(0, 0, 0x87), "MQTT-3.2.2-10") == {"MQTT-3.2.2-10": "undecided"}
    assert verdicts(above_maximum(0, 0x83, 0), "MQTT-3.2.2-10") == {"MQTT-3.2.2-10": "fail"}


def test_a_subscribe_within_the_maximum_qos_decides_nothing_of_it() -> None:
    within = talk().client(subscribe(1, ("a", 2))).server(suback(1, 0x80))
    assert verdicts(within, "MQTT-3.2.2-10") == {"MQTT-3.2.2-10": "undecided"}


def test_a_disconnect_for_a_publish_above_the_declared_maximum_keeps_it() -> None:
    """The client broke the Maximum QoS 0 it was told: DISCONNECT 0x9B is the right answer."""
    above = talk(MAXIMUM_QOS_0).client(publish5("t", qos=1, pid=1)).server(codec.Disconnect(reason_code=0x9B))
    assert verdicts(above, "MQTT-3.2.2-9") == {"MQTT-3.2.2-9": "undecided"}


def test_expiry_decides_nothing_before_the_interval_surely_passed() -> None:
    """Within the interval and a second of timer resolution the message may not have expired yet."""
    early = (
        talk()
        .client(publish5("t", qos=2, pid=1, **EXPIRING))
        .server(codec.Pubrec(packet_id=1))
        .wait(1.5)
        .client(codec.Pubrel(packet_id=1))
        .server(codec.Pubcomp(packet_id=1, reason_code=0x92))
    )
    assert verdicts(early, "MQTT-4.3.3-13", "MQTT-4.3.3-11") == {"MQTT-4.3.3-13": "undecided", "MQTT-4.3.3-11": "fail"}


def test_a_missing_pubcomp_after_expiry_breaks_the_completion() -> None:
    silent = talk().client(publish5("t", qos=2, pid=1, **EXPIRING)).server(codec.Pubrec(packet_id=1))
    silent.wait(v5_flows_more.PAST_EXPIRY).client(codec.Pubrel(packet_id=1))
    assert verdicts(silent, "MQTT-4.3.3-13") == {"MQTT-4.3.3-13": "fail"}


def test_a_delivery_before_its_suback_decides_nothing_of_the_grant() -> None:
    """Before the SUBACK the requested QoS bounds the delivery: the code that shows the grant has not come."""
    early = talk().client(subscribe(1, ("a", 1))).server(publish5("a", qos=1, pid=1), suback(1, 1))
    early.client(codec.Puback(packet_id=1))
    assert verdicts(early, "MQTT-3.8.4-7") == {"MQTT-3.8.4-7": "undecided"}


def test_a_reserved_suback_code_is_the_codecs_finding_not_a_pass() -> None:
    reserved = talk().client(subscribe(1, "a")).server(suback(1, 0x05))
    assert verdicts(reserved, "MQTT-3.9.3-2") == {"MQTT-3.9.3-2": "undecided"}


@pytest.mark.parametrize("pubrel", [0x92, 0x00, None])
def test_a_pubrel_answering_a_pubrec_of_no_flow_is_no_server_violation(pubrel: int | None) -> None:
    # 50 03 00 07 00 (PUBREC of an identifier the server never sent) answered by 62 03 00 07 92 (the answer 3.6.2.1
    # gives), 62 03 00 07 00 or 62 02 00 07 (mosquitto 2.0.11): a PUBREC below 0x80 calls for a PUBREL
    # [MQTT-4.3.3-4], whose code no statement binds; a PUBREL of an identifier nobody acknowledged stays the
    # server's finding [MQTT-2.2.1-5]
    case = CASES["v5/flows/pubrec-unknown-id-then-pingreq"]
    judgement = judged(case, unknown_pubrec(0x00, answered=True, pubrel=pubrel))
    assert not [f for f in judgement.findings if f.side is S], judgement.findings
    stray = talk().client(codec.Pingreq()).server(codec.Pingresp(), codec.Pubrel(packet_id=7, reason_code=pubrel))
    assert "MQTT-2.2.1-5" in {rule for f in judged(case, stray).findings if f.side is S for rule in f.rules}


def test_a_pubrel_of_success_never_answers_a_refusing_pubrec_of_no_flow() -> None:
    # 50 03 00 07 80 refuses: no PUBREL is called for [MQTT-4.3.3-4], so 62 03 00 07 00 names no flow [MQTT-2.2.1-5]
    case = CASES["v5/flows/pubrec-unknown-id-then-pingreq"]
    refused = unknown_pubrec(0x80, answered=True, pubrel=0x00)
    assert "MQTT-2.2.1-5" in {rule for f in judged(case, refused).findings if f.side is S for rule in f.rules}


def test_a_second_unsuback_for_a_multi_filter_unsubscribe_breaks_the_sequence() -> None:
    twice = unsubscribes(unsuback(2, 0, 0, 0), unsuback(2, 0, 0, 0))
    assert verdicts(twice, "MQTT-3.10.4-6") == {"MQTT-3.10.4-6": "fail"}


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """mosquitto configured with ``max_qos 1``, which its CONNACK then declares."""
    with configured_mosquitto(tmp_path_factory.mktemp("mosquitto-max-qos-1"), "max_qos 1") as broker:
        yield broker


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, MORE_CASES, "7f7f7f7f")


QOS2_CASES = [
    "v5/flows/pubrecs-in-flight",
    "v5/flows/qos2-pubrel-after-expiry",
    "v5/flows/qos2-pubrec-after-expiry",
]


def test_every_case_passes_against_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 answers each SUBSCRIBE in flight with its own SUBACK, completes QoS 2 flows whose messages
    expired (PUBCOMP 0x00, PUBREL 0x00) and declares no Maximum QoS (nothing is above it)."""
    results = run_all(mosquitto)
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        "v5/maximum-qos/subscribe-above-maximum": NOT_APPLICABLE,
    }


def test_mosquitto_with_maximum_qos_1_grants_a_qos_2_subscription_at_qos_1(mosquitto_limited: RunningBroker) -> None:
    """With ``max_qos 1`` its CONNACK declares Maximum QoS 1; a QoS 2 filter is granted QoS 1, a QoS 1 PUBLISH taken;
    the QoS 2 flows are not applicable."""
    results = run_all(mosquitto_limited)
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        **dict.fromkeys(QOS2_CASES, NOT_APPLICABLE),
    }


def test_mqttools_grants_every_subscription_at_its_maximum_qos_0(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 declares Maximum QoS 0 and grants QoS 0 for filters requesting 1 and 2: the QoS 1 and 2 cases
    are not applicable, and so are the PUBREC-of-no-flow cases (it disconnects on the PUBREC)."""
    results = run_all(mqttools)
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        **dict.fromkeys(QOS2_CASES, NOT_APPLICABLE),
        "v5/flows/deliveries-in-flight": NOT_APPLICABLE,
        "v5/maximum-qos/publish-within-maximum": NOT_APPLICABLE,
        # it answers a PUBREC of no flow with DISCONNECT e0 02 82 00: a Protocol Error it may close on, so nothing
        # after it is owed (the case is not applicable then)
        "v5/flows/pubrec-unknown-id-then-pingreq": NOT_APPLICABLE,
        "v5/flows/pubrec-unknown-id-short-then-pingreq": NOT_APPLICABLE,
    }
    assert FAIL not in {result.verdict for result in results.values()}
