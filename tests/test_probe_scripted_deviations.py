"""The cases for the deviations of issue 29, point 8, and the duplicate properties, against a scripted broker on
127.0.0.1 (:mod:`tests.scripted_broker`): the real case scripts, the real connections and the real judge. Each test
runs the cases once against the broker keeping the rules, where every case passes, and once against the same broker
with one behaviour changed to the bytes a real broker was seen sending, where the cases fail on the statement that
behaviour breaks and on no other case's."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.cases.delivery import ROUNDS
from mqttaudit.probe.cases.v5_routing import OTHER_DISCONNECT_CODES
from mqttaudit.probe.runner import FAIL, PASS, CaseResult, run_case

from .scripted_broker import STALE_EVERY, ScriptedBroker

TIMEOUT = 1.0
_RUNS = itertools.count()


def run(case_ids: list[str], *deviations: str) -> dict[str, CaseResult]:
    """Every case at once against a fresh scripted broker with ``deviations``, by case id."""

    async def everything(port: int) -> list[CaseResult]:
        target = Target("127.0.0.1", port)
        run_id = f"5cd{next(_RUNS):05x}"
        return list(
            await asyncio.gather(*(run_case(CASES[c], target, timeout=TIMEOUT, run_id=run_id) for c in case_ids))
        )

    with ScriptedBroker(*deviations) as broker:
        results = {result.case.id: result for result in asyncio.run(everything(broker.port))}
    for result in results.values():  # for the record of the run (-rA shows it)
        print(result.case.id, result.verdict, result.reason)
    return results


def verdicts(results: dict[str, CaseResult]) -> dict[str, str]:
    return {case_id: result.verdict for case_id, result in results.items()}


def failed_on(result: CaseResult) -> frozenset[str]:
    return frozenset(finding.rule for finding in result.findings)


def both_versions(*case_ids: str) -> list[str]:
    return [*case_ids, *(f"v5/{case_id}" for case_id in case_ids)]


def test_a_will_is_published_after_every_disconnect_but_reason_code_0x00() -> None:
    # mosquitto 2.0.11 (and mosquitto#3743): e0 02 80 00, e0 02 ff 00, ... taken for e0 00: the Will discarded
    others = [f"v5/will/disconnect-0x{code:02x}-sends-qos1" for code, _words in OTHER_DISCONNECT_CODES]
    controls = ["v5/will/disconnect-0x00-discards-qos1", "v5/will/disconnect-0x04-sends-qos1"]
    assert set(verdicts(run(others + controls)).values()) == {PASS}
    results = run(others + controls, "will-any-disconnect")
    assert {case_id: failed_on(results[case_id]) for case_id in others} == dict.fromkeys(
        others, frozenset({"MQTT-3.1.2-8"})
    )
    assert {verdicts(results)[case_id] for case_id in controls} == {PASS}


def test_a_wildcard_sharing_the_one_level_of_a_filter_is_refused_where_the_same_level_under_a_prefix_is() -> None:
    # aedes 1.2.0: SUBSCRIBE 'x#' answered 90 03 00 01 00, while '<p>/x#' is closed on
    only_level = both_versions("malformed/subscribe-hash-last-char-only-level")
    under_prefix = both_versions("malformed/subscribe-hash-last-char-last-level")
    assert set(verdicts(run(only_level + under_prefix)).values()) == {PASS}
    results = run(only_level + under_prefix, "one-level-wildcards")
    assert [verdicts(results)[case_id] for case_id in under_prefix] == [PASS, PASS]
    # The filter breaks the Client's rule ('#' alone or after '/', and last: 3.1.1 MQTT-4.7.1-2, 5.0 MQTT-4.7.1-1);
    # the broker is judged on its own duty toward it. 3.1.1 binds it to close (MQTT-4.8.0-1); 5.0 binds it to
    # nothing it was not bound to detect, so granting it there is no pass either way.
    first, second = (results[case_id] for case_id in only_level)
    assert "MQTT-4.8.0-1" in failed_on(first) and "MQTT-4.7.1-2" in first.case.provokes
    assert second.verdict != PASS and "MQTT-4.7.1-1" in second.case.provokes


def test_a_publish_after_one_to_a_dollar_topic_is_still_routed() -> None:
    # amqtt 0.12.1: the second PUBLISH is acknowledged (40 02 00 07) and delivered to nobody
    cases = both_versions("topics/normal-after-dollar-qos0", "topics/normal-after-dollar-qos1")
    cases += both_versions("topics/normal-after-dollar-sys")
    assert set(verdicts(run(cases)).values()) == {PASS}
    results = run(cases, "dollar-poisons")
    assert {case_id: failed_on(result) for case_id, result in results.items()} == dict.fromkeys(
        cases, frozenset({"MQTT-4.5.0-1"})
    )


def test_an_acknowledgement_of_no_flow_leaves_the_connection_answering() -> None:
    # the conforming broker: PUBCOMP (5.0: 70 03 00 id 92) for the PUBREL, PUBREL 62 03 00 id 92 for the PUBREC,
    # PINGRESP; the stalled one reads on and answers nothing
    pubrel = ["publish/pubrel-unknown-id-then-pingreq", "v5/flows/pubrel-unknown-id-then-pingreq"]
    pubrel += ["v5/flows/pubrel-unknown-id-short-then-pingreq"]
    pubrec = ["v5/flows/pubrec-unknown-id-then-pingreq", "v5/flows/pubrec-unknown-id-short-then-pingreq"]
    conforming = run(pubrel + pubrec)
    assert set(verdicts(conforming).values()) == {PASS}
    assert not [f for result in conforming.values() for f in result.other_findings], "an answer the spec gives"
    results = run(pubrel + pubrec, "stall-on-unknown-id")
    assert failed_on(results[pubrel[0]]) == {"MQTT-3.12.4-1", "MQTT-4.3.3-2"}
    assert {case_id: failed_on(results[case_id]) for case_id in pubrel[1:]} == dict.fromkeys(
        pubrel[1:], frozenset({"MQTT-3.12.4-1", "MQTT-4.3.3-11"})
    )
    assert {case_id: failed_on(results[case_id]) for case_id in pubrec} == dict.fromkeys(
        pubrec, frozenset({"MQTT-3.12.4-1"})
    )


def test_a_request_sent_before_the_connack_is_answered_after_it() -> None:
    # the deviating broker sends 90 03 00 01 00 (SUBACK), or d0 00 (PINGRESP), before 20 02 00 00
    cases = both_versions("connect/pipelined-subscribe", "connect/pipelined-pingreq")
    assert set(verdicts(run(cases)).values()) == {PASS}
    results = run(cases, "early-answer")
    assert {case_id: failed_on(result) for case_id, result in results.items()} == dict.fromkeys(
        cases, frozenset({"MQTT-3.2.0-1"})
    )


def test_a_retained_qos_1_message_that_survives_its_qos_0_replacement_fails_the_case_once_per_round() -> None:
    # every STALE_EVERY-th replacement lost: rounds 0, 4 and 8 of 10 send 'old-N' (QoS 1, RETAIN 1) to the new
    # subscription; the fail lists each of them, the other rounds pass
    stale = [number for number in range(ROUNDS) if number % STALE_EVERY == 0]
    for case_id, rule in zip(
        both_versions("retain/qos0-replaces-qos1-rounds"), ("MQTT-3.3.1-7", "MQTT-3.3.1-5"), strict=True
    ):
        assert verdicts(run([case_id])) == {case_id: PASS}
        result = run([case_id], "stale-retained")[case_id]  # a broker of its own: its own count of replacements
        assert result.verdict == FAIL
        assert [f.rule for f in result.findings] == [rule] * len(stale)
        assert [int(f.detail.split("/round/")[1].split("'")[0]) for f in result.findings] == stale


@pytest.mark.parametrize(
    "case_id",
    [
        "v5/malformed/connect-two-maximum-packet-size",
        "v5/malformed/connect-two-request-response-information",
        "v5/malformed/connect-two-topic-alias-maximum",
        "v5/malformed/will-two-will-delay-interval",
        "v5/malformed/puback-two-reason-string",
        "v5/malformed/pubrel-two-reason-string",
    ],
)
def test_a_repeated_property_taken_as_if_it_were_not_is_found(case_id: str) -> None:
    # the lenient broker answers 10 .. 27 0f ff ff ff 27 0f ff ff ff .. with CONNACK 20 03 00 00 00, and a PUBACK
    # or PUBREL with Reason String 1f twice as it would the same packet with one
    assert verdicts(run([case_id])) == {case_id: PASS}
    result = run([case_id], "lenient-duplicates")[case_id]
    assert result.verdict != PASS
    assert "MQTT-2.2.2-property-duplicate" in result.reason


def test_a_disconnect_with_a_repeated_property_taken_for_a_disconnect_loses_the_will() -> None:
    # e0 0a 00 08 1f 00 01 78 1f 00 01 78 taken for a normal DISCONNECT: the Will the close owes is never sent
    cases = [f"v5/malformed/disconnect-two-{name}" for name in ("session-expiry-interval", "reason-string")]
    assert set(verdicts(run(cases)).values()) == {PASS}
    results = run(cases, "lenient-duplicates")
    for case_id in cases:
        assert "MQTT-3.1.2-8" in failed_on(results[case_id]), case_id
