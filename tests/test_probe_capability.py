"""Capability first: a broker that does not serve a protocol version is judged by none of its statements.

Each test runs the real library call (preflight, cases, judge, verdicts) against a scripted broker on 127.0.0.1
(``tests/hostile_server.py``, mode ``broker``): it serves a CONNECT of one version (CONNACK 0x00, then SUBACK, PUBACK,
PINGRESP as asked, never a delivery) and takes a CONNECT of the other as the test says:

- ``20 02 00 01`` then the close: 3.1.1's CONNACK 0x01 (unacceptable protocol level), as a 3.1.1 broker must answer
  a 5.0 CONNECT [MQTT-3.1.2-2 of 3.1.1];
- ``20 03 00 84 00`` then the close: 5.0's CONNACK 0x84 (unsupported protocol version);
- the close, without a byte;
- silence: it reads the CONNECT and never answers.

A version the broker does not serve makes every case of it not applicable with that reason, said once for the run,
out of --max-inconclusive; what it owes the CONNECT of that version under the version it serves is judged by one case
(``connect/protocol-level-5``): a silent broker is one finding against 3.1.1's MQTT-3.1.2-2, not dozens against 5.0's.
"""

from __future__ import annotations

import pytest

from mqttaudit.probe.api import ProbeResult, run
from mqttaudit.probe.case import CASES
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, NOT_APPLICABLE, PASS

from .hostile_server import CLOSE, HANG, HostileServer

TIMEOUT = 0.5
CONNACK_0X01_3_1_1 = bytes.fromhex("20 02 00 01")
CONNACK_0X84_5_0 = bytes.fromhex("20 03 00 84 00")
#: A few cases of each version that a broker serving that version passes, and the 3.1.1 case that sends a 5.0 CONNECT.
CASES_3_1_1 = ["connect/accepted", "ping/pingresp"]
CASES_5_0 = ["v5/connect/accepted", "v5/ping/pingresp"]
LEVEL_5 = "connect/protocol-level-5"


def probe(server: HostileServer, cases: list[str]) -> ProbeResult:
    return run(server.url, cases=cases, timeout=TIMEOUT, concurrency=4)


def verdicts(result: ProbeResult) -> dict[str, str]:
    return {r.case.id: r.verdict for r in result.results}


def reasons(result: ProbeResult, version: str) -> set[str]:
    return {r.reason for r in result.results if r.case.protocol.value == version}


@pytest.mark.parametrize(
    ("answer", "said", "level_5"),
    [
        (
            CONNACK_0X01_3_1_1,
            "it answered a plain 5.0 CONNECT with 3.1.1's CONNACK 20 02 00 01 (unacceptable level)",
            PASS,
        ),
        (
            CONNACK_0X84_5_0,
            "it answered a plain 5.0 CONNECT with CONNACK 0x84 (unsupported protocol version)",
            NOT_APPLICABLE,
        ),
        (CLOSE, "it closed the connection on a plain 5.0 CONNECT without answering", FAIL),
        (HANG, f"it did not answer a plain 5.0 CONNECT within {TIMEOUT:g} s", FAIL),
    ],
    ids=["connack-0x01", "connack-0x84", "close", "silence"],
)
def test_a_broker_that_does_not_serve_5_0_has_every_5_0_case_not_applicable_once(
    answer: bytes | str, said: str, level_5: str
) -> None:
    """The 3.1.1 case that sends a 5.0 CONNECT passes on CONNACK 0x01 and the close, fails on a close or silence
    (3.1.1 asks CONNACK 0x01 first), and does not apply to a broker that answers in 5.0's form."""
    with HostileServer("broker", lifetime=60, v5=answer) as server:
        result = probe(server, [*CASES_3_1_1, LEVEL_5, *CASES_5_0])
        fives = server.connects.get(5, 0)

    why = f"the broker does not speak MQTT 5.0: {said}"
    assert result.run.unspoken == {"5.0": why}
    assert reasons(result, "5.0") == {why}
    assert verdicts(result) == {
        **dict.fromkeys(CASES_3_1_1, PASS),
        LEVEL_5: level_5,
        **dict.fromkeys(CASES_5_0, NOT_APPLICABLE),
    }
    # the 5.0 cases never ran: one 5.0 CONNECT for the capability, one for the 3.1.1 case that sends one
    assert fives == 2
    assert result.counts[INCONCLUSIVE] == 0 and result.incomplete is None
    failed = [f for r in result.results for f in r.findings]
    assert {(f.rule, f.rule.version) for f in failed} <= {("MQTT-3.1.2-2", "3.1.1")}
    assert [v.rule for v in result.violations] == []
    assert result.exit_status == (1 if level_5 == FAIL else 0)


def test_a_broker_that_hangs_on_5_0_is_one_finding_against_3_1_1s_mqtt_3_1_2_2() -> None:
    """The whole 5.0 library and a few 3.1.1 cases against a broker that serves 3.1.1 and reads a 5.0 CONNECT
    without ever answering: the one defect is the 3.1.1 answer it owes (CONNACK 0x01, then the close), found once;
    nothing is charged against a 5.0 statement, and no 5.0 case is inconclusive."""
    with HostileServer("broker", lifetime=60, v5=HANG) as server:
        result = probe(server, [*CASES_3_1_1, LEVEL_5, "v5/*"])

    fives = [r for r in result.results if r.case.protocol.value == "5.0"]
    assert len(fives) == sum(1 for case in CASES.values() if case.protocol.value == "5.0")
    assert {r.verdict for r in fives} == {NOT_APPLICABLE} and result.counts[INCONCLUSIVE] == 0
    failures = [r for r in result.results if r.verdict == FAIL]
    assert [r.case.id for r in failures] == [LEVEL_5]
    [finding] = failures[0].findings
    assert (finding.rule, finding.rule.version, finding.side.value) == ("MQTT-3.1.2-2", "3.1.1", "server")
    assert not [v for v in result.violations if v.protocol == "5.0"]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (CONNACK_0X84_5_0, "it answered a plain 3.1.1 CONNECT with CONNACK 0x84 (unsupported protocol version)"),
        (CONNACK_0X01_3_1_1, "it answered a plain 3.1.1 CONNECT with 3.1.1's CONNACK 20 02 00 01 (unacceptable level)"),
        (CLOSE, "it closed the connection on a plain 3.1.1 CONNECT without answering"),
    ],
    ids=["connack-0x84", "connack-0x01", "close"],
)
def test_a_broker_that_serves_only_5_0_has_every_3_1_1_case_not_applicable_once(answer: bytes | str, said: str) -> None:
    with HostileServer("broker", lifetime=60, v311=answer) as server:
        result = probe(server, [*CASES_3_1_1, LEVEL_5, *CASES_5_0])

    why = f"the broker does not speak MQTT 3.1.1: {said}"
    assert result.run.unspoken == {"3.1.1": why}
    assert reasons(result, "3.1.1") == {why}
    assert verdicts(result) == {
        **dict.fromkeys([*CASES_3_1_1, LEVEL_5], NOT_APPLICABLE),
        **dict.fromkeys(CASES_5_0, PASS),
    }
    assert result.exit_status == 0 and result.incomplete is None


def test_a_5_0_selection_asks_the_broker_once_before_its_cases() -> None:
    """The capability check is the login check: one plain 5.0 CONNECT, then the case's own."""
    with HostileServer("broker", lifetime=60) as server:
        result = probe(server, ["v5/ping/pingresp"])
        connects = dict(server.connects)

    assert verdicts(result) == {"v5/ping/pingresp": PASS}
    assert connects == {5: 2}


def test_a_version_not_served_by_a_selection_of_it_alone_is_nothing_judged_with_the_reason() -> None:
    with HostileServer("broker", lifetime=60, v5=CONNACK_0X01_3_1_1) as server:
        result = probe(server, CASES_5_0)

    assert set(verdicts(result).values()) == {NOT_APPLICABLE}
    assert result.exit_status == 4
    assert result.incomplete == f"no case could be judged ({len(CASES_5_0)} not-applicable)"
    assert "does not speak MQTT 5.0" in result.run.unspoken["5.0"]


def test_the_level_5_case_is_in_the_3_1_1_library_and_judges_the_3_1_1_statement() -> None:
    case = CASES[LEVEL_5]
    assert case.protocol.value == "3.1.1" and case.statements == ("MQTT-3.1.2-2",)
    assert case.statements[0].version == "3.1.1"
