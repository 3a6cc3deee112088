"""The MQTT 5.0 flow cases (QoS flows, send quota, order, replaced subscriptions, diagnostics under a small Maximum
Packet Size): every statement a case lists is one the judge decides on 5.0 connections, and every case gets a
verdict from mosquitto, the same on each of three runs (what the judge decides of each shape, kept and broken, is
tested in tests/test_judge_flows_more_5.py)."""

from __future__ import annotations

import asyncio

import pytest

from mqttaudit.cli.rules import coverage
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case, Target
from mqttaudit.probe.cases import ALONE, v5_flows
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, NOT_APPLICABLE, PASS, CaseResult, run_case
from mqttaudit.spec import load_catalogue

FLOW_CASES = [case for case in CASES.values() if case.family_name == "v5/flows"]
CATALOGUE_5 = load_catalogue("5.0")
TIMEOUT = 1.0
RUNS = 3
#: mosquitto 2.0.11 takes a QoS 2 PUBLISH whose payload is not the UTF-8 its Payload Format Indicator announces
#: (validating it is a MAY, 3.3.2.3.2): there is no refusal to reuse the identifier after.
NOT_APPLICABLE_TO_MOSQUITTO = {"v5/flows/identifier-reused-after-refusing-pubrec-invalid-utf8"}


def test_the_flow_family_covers_each_statement_family_with_several_shapes() -> None:
    assert len(FLOW_CASES) >= 25
    statements = {s for case in FLOW_CASES for s in case.statements}
    flows = {"MQTT-4.3.2-1", "MQTT-4.3.3-9", "MQTT-4.3.3-10", "MQTT-4.4.0-2", "MQTT-4.9.0-3", "MQTT-3.9.2-1"}
    routing = {"MQTT-4.6.0-6", "MQTT-3.8.4-3", "MQTT-3.8.4-5", "MQTT-3.10.4-1", "MQTT-3.10.4-3"}
    assert flows | routing <= statements
    assert all(case.protocol.value == "5.0" for case in FLOW_CASES)


@pytest.mark.parametrize("case", FLOW_CASES, ids=lambda case: case.id)
def test_every_statement_a_case_lists_is_a_5_0_statement_the_judge_decides(case: Case) -> None:
    for statement in case.statements:
        rule = CATALOGUE_5[statement]
        assert rule.level == "MUST", statement
        assert coverage(rule).judge, statement


def test_the_case_that_leaves_a_retained_message_runs_alone() -> None:
    assert set(v5_flows.ALONE) <= set(ALONE)
    for case in FLOW_CASES:
        assert case.runs_alone is (case.id in ALONE), case.id


# Live ----------------------------------------------------------------------------------------------------------


def run_all(broker: RunningBroker, run: int) -> dict[str, CaseResult]:
    async def everything() -> list[CaseResult]:
        target = Target(broker.host, broker.port)
        together = [case for case in FLOW_CASES if not case.runs_alone]
        results = list(
            await asyncio.gather(
                *(run_case(case, target, timeout=TIMEOUT, run_id=f"f10{run}f10{run}") for case in together)
            )
        )
        alone = [case for case in FLOW_CASES if case.runs_alone]
        return results + [await run_case(case, target, timeout=TIMEOUT, run_id=f"f20{run}f20{run}") for case in alone]

    results = {result.case.id: result for result in asyncio.run(everything())}
    for result in results.values():  # for the record of the run (-rA shows it)
        print(run, result.case.id, result.verdict, result.statements, result.reason)
    return results


#: The case that repeats a QoS 2 PUBLISH before its PUBREL.
REPEAT = "v5/flows/qos2-repeat-before-pubrel"


# Message Expiry timed against the machine's clock: under a loaded parallel run the 1 s waits of these runs missed
# the PUBREL after a PUBREC sent 2.5 s past a 1 s expiry, and v5/flows/qos2-pubrec-after-expiry ended inconclusive
@pytest.mark.alone
def test_every_flow_case_passes_against_mosquitto_on_each_of_three_runs(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 keeps every flow statement but one: it holds each delivery until its answer, never re-sends
    on a connection, answers PINGREQ, SUBSCRIBE and UNSUBSCRIBE at a send quota of zero, keeps each publisher's
    order, and sends no Reason String or User Property at all (so a small Maximum Packet Size never has to leave one
    out). A QoS 2 PUBLISH repeated before its PUBREL gets PUBREC the first time, DISCONNECT 0x82 (e0 01 82) and the
    close the second (mosquitto#3602): a server may close instead of answering, so MQTT-4.3.3-10 is not assessable
    there, but the message it took ownership of with its PUBREC never reaches the subscriber [MQTT-4.5.0-1]."""
    for run in range(RUNS):
        results = run_all(mosquitto, run)
        assert sorted(results) == sorted(case.id for case in FLOW_CASES)
        verdicts = {case_id: r.verdict for case_id, r in results.items() if r.verdict != PASS or r.error}
        assert verdicts == {**dict.fromkeys(NOT_APPLICABLE_TO_MOSQUITTO, NOT_APPLICABLE), REPEAT: FAIL}, (run, verdicts)
        repeated = results[REPEAT]
        assert [f.rule for f in repeated.findings] == ["MQTT-4.5.0-1"]
        assert repeated.statements[v5_flows.REPEAT_ANSWERED] == INCONCLUSIVE
        for result in results.values():
            assert set(result.case.statements) <= set(result.statements)
            if result.case.id not in (*NOT_APPLICABLE_TO_MOSQUITTO, REPEAT):
                assert set(result.statements.values()) == {PASS}, result.case.id
