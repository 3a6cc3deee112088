"""A broker that breaks a MUST on every connection, in a statement none of the chosen cases targets: each case
fails on that statement, once per act, whatever it targets, and every report (the terminal summary, findings.json,
findings.md, junit.xml) shows it as that case's failure, never again among the run's violations (which keep what
does not fail a run: answers owed past a deadline, acts after the prober's own malformed packet). Each broker is a
scripted hostile server on 127.0.0.1 driving the real ``mqttaudit probe`` command."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from mqttaudit.codec import Connect, Direction, Pingreq, StreamDecoder
from mqttaudit.judge import Finding
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.runner import FAIL, MAX_FINDINGS, PASS, CaseResult, ProbeRun, fail_on_acts, kept_findings
from mqttaudit.probe.violations import other_violations
from mqttaudit.spec import load_catalogue
from mqttaudit.spec.ids import R311

from .cli_in_process import Ran, run_mqttaudit
from .hostile_server import HostileServer

#: A 3.1.1 CONNACK 0 whose acknowledge flags set the seven reserved bits.
RESERVED_FLAGS = bytes.fromhex("20 02 fe 00")
#: A 5.0 CONNACK 0 whose Property Length declares 268,435,455 bytes with one byte left in the packet.
HUGE_PROPERTY_LENGTH = bytes.fromhex("20 07 00 00 ff ff ff 7f 00")


class MisansweringBroker(HostileServer):
    """Answers every CONNECT with ``connack`` (a malformed CONNACK 0) and every PINGREQ with a PINGRESP."""

    def __init__(self, connack: bytes) -> None:
        super().__init__("misanswering", lifetime=60, connack=connack)

    def _misanswering(self, connection: socket.socket) -> None:
        decoder = StreamDecoder(Direction.FROM_CLIENT)
        while not self._over():
            try:
                data = connection.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            for frame in decoder.feed(data):
                if isinstance(frame.packet, Connect):
                    connection.sendall(self.connack)
                elif isinstance(frame.packet, Pingreq):
                    connection.sendall(b"\xd0\x00")


def probe(connack: bytes, out: Path, *args: str) -> Ran:
    with MisansweringBroker(connack) as broker:
        return run_mqttaudit("probe", broker.url, "--out", str(out), "--timeout", "0.5", *args)


def reports(out: Path) -> tuple[dict[str, object], str, ET.Element]:
    findings = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    return findings, (out / "findings.md").read_text(encoding="utf-8"), ET.parse(out / "junit.xml").getroot()


@pytest.mark.parametrize(
    ("connack", "cases", "rule"),
    [
        (RESERVED_FLAGS, "ping/*", "MQTT-3.2.2-reserved-flags"),
        (HUGE_PROPERTY_LENGTH, "v5/ping/*", "MQTT-2.2.2-property-length"),
    ],
    ids=["3.1.1-reserved-connack-flags", "5.0-property-length-268M"],
)
def test_a_must_broken_during_a_case_fails_that_case_on_it_in_every_report(
    connack: bytes, cases: str, rule: str, tmp_path: Path
) -> None:
    ran = probe(connack, tmp_path / "out", "--cases", cases)

    assert ran.returncode == 1, ran.stdout + ran.stderr
    findings, markdown, junit = reports(tmp_path / "out")
    [result] = findings["results"]
    assert rule not in result["statements"]  # the chosen case targets another statement
    assert result["verdict"] == "fail" and rule in result["reason"]
    assert result["evidence"]["statements"][rule] == "fail"
    [cited] = [f for f in result["evidence"]["findings"] if f["rule"] == rule]
    assert (cited["side"], cited["conversation"], cited["event"]) == ("server", "c1", 1)  # the CONNACK, once
    assert findings["violations"] == []  # one act, one finding: not listed again
    assert f"FAIL {result['case']} [{', '.join(result['statements'])}, {rule}]" in ran.stdout
    assert f"**{rule}** (server" in markdown
    reference = markdown.split("#### Standard reference")[1].split("#### Expected behaviour")[0]
    assert f"[{rule}]" in reference  # beside the case's own statements
    [failed] = [case for case in junit.iter("testcase") if case.get("name", "").startswith(result["case"])]
    failure = failed.find("failure")
    assert failure is not None and failure.get("type") == rule
    assert junit.get("failures") == "1"


def test_the_same_behaviour_in_many_cases_fails_each_of_them_once_per_act(tmp_path: Path) -> None:
    ran = probe(RESERVED_FLAGS, tmp_path / "out", "--cases", "ping/*,malformed/pingreq-flag-bit-*")

    assert ran.returncode == 1, ran.stdout + ran.stderr
    findings, _, _ = reports(tmp_path / "out")
    results = findings["results"]
    assert len(results) == 5
    for result in results:
        cited = [f for f in result["evidence"]["findings"] if f["rule"] == "MQTT-3.2.2-reserved-flags"]
        acts = {(f["conversation"], f["event"]) for f in cited}
        assert result["verdict"] == "fail" and len(cited) == len(acts) >= 1, result
        assert result["evidence"]["other_acts"].get("MQTT-3.2.2-reserved-flags", 0) == 0
    assert findings["violations"] == []


def test_a_failure_the_baseline_knows_does_not_fail_the_run_but_is_still_shown(tmp_path: Path) -> None:
    first = probe(RESERVED_FLAGS, tmp_path / "first", "--cases", "ping/*")
    assert first.returncode == 1
    again = probe(
        RESERVED_FLAGS, tmp_path / "again", "--cases", "ping/*", "--baseline", str(tmp_path / "first/findings.json")
    )

    assert again.returncode == 0, again.stdout + again.stderr
    findings, markdown, _ = reports(tmp_path / "again")
    [result] = findings["results"]
    assert result["verdict"] == "fail" and "MQTT-3.2.2-reserved-flags" in result["reason"]
    assert "### Known failures (failing in the baseline too)" in markdown
    assert f"- `{result['case']}`" in markdown.split("### Known failures")[1]


def finding(rule: str, event: int) -> Finding:
    return Finding(rule, Direction.FROM_SERVER, 0.0, event, "detail", "expected", "c1")


def test_a_rule_broken_only_after_a_flood_of_another_is_kept_not_only_counted() -> None:
    flood = [finding("MQTT-A", event) for event in range(MAX_FINDINGS + 5)]
    kept = kept_findings([*flood, finding("MQTT-B", 99), finding("MQTT-B", 100)])
    assert [rule for f in kept for rule in f.rules] == ["MQTT-A"] * MAX_FINDINGS + ["MQTT-B"]


def test_a_broker_that_speaks_only_3_1_1_is_held_to_none_of_5_0s_statements(tmp_path: Path) -> None:
    """3.1.1's answer to a 5.0 CONNECT (CONNACK 0x01, unacceptable protocol level) is malformed read as 5.0, but 5.0
    does not bind a broker that does not speak it: the 5.0 cases do not apply, and no violation is counted."""
    ran = probe(bytes.fromhex("20 02 00 01"), tmp_path / "out", "--cases", "v5/ping/*,v5/connect/accepted")

    assert ran.returncode == 4, ran.stdout + ran.stderr  # nothing judged
    findings, _markdown, _junit = reports(tmp_path / "out")
    assert {r["verdict"] for r in findings["results"]} == {"not-applicable"}
    assert all("does not speak MQTT 5.0" in r["reason"] for r in findings["results"])
    assert findings["violations"] == []


def test_acts_after_a_malformed_packet_the_broker_kept_are_listed_but_do_not_fail_the_run() -> None:
    """After the prober's malformed packet (event 2 of c1) that the broker did not close on, what it does follows
    from its own reading of that packet: listed apart, not counted. The same rule before it, or on another
    connection, is an act that counts."""
    case = CASES["malformed/pubrec-flag-bit-0"]
    result = CaseResult(case, FAIL, malformed_at={"c1": 2})
    result.other_findings = [finding("MQTT-2.3.1-6", 3), finding("MQTT-2.3.1-6", 5), finding("MQTT-4.3.3-2", 1)]
    run = ProbeRun(Target.parse("mqtt://127.0.0.1:1883"), "now", [result], 0.0)

    found = {(v.rule, v.after_malformed): v for v in other_violations(run, load_catalogue("3.1.1"))}

    assert set(found) == {("MQTT-2.3.1-6", True), ("MQTT-4.3.3-2", False)}
    assert found["MQTT-2.3.1-6", True].acts == 2
    assert not found["MQTT-2.3.1-6", True].counted
    assert found["MQTT-4.3.3-2", False].counted


def test_only_must_acts_before_the_probers_malformed_packet_fail_the_case() -> None:
    """The broker's own act fails the case on the statement it breaks (once per act, every rule of the act named);
    an answer it owed past a deadline (a finding with a cause) and an act after the prober's malformed packet (event
    2 of c1) stay among the other findings, which do not fail the case."""
    case = CASES["malformed/pubrec-flag-bit-0"]
    result = CaseResult(case, PASS, malformed_at={"c1": 2})
    owed_answer = Finding(R311.MQTT_3_12_4_1, Direction.FROM_SERVER, 0.0, 4, "no PINGRESP", "PINGRESP", "c2", cause=3)
    after = finding(R311.MQTT_2_3_1_6, 3)
    act, same_act = finding(R311.MQTT_2_2_1_DIRECTION, 1), finding(R311.MQTT_3_14_1_REMAINING_LENGTH, 1)
    result.other_findings = [act, after, same_act, owed_answer]

    fail_on_acts(result)

    assert result.verdict == FAIL
    [cited] = result.findings
    assert (cited.rule, cited.event) == ("MQTT-2.2.1-direction", 1)
    assert cited.also == ("MQTT-3.14.1-remaining-length",)  # failed with the statement it cites
    assert result.statements == {"MQTT-2.2.1-direction": FAIL, "MQTT-3.14.1-remaining-length": FAIL}
    assert result.other_findings == [after, owed_answer]
