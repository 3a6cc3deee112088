"""A broker that breaks a MUST on every connection, in a statement none of the chosen cases targets: the run
still exits 1, and every report (the terminal summary, findings.json, findings.md, junit.xml) shows the violation,
once per act, grouped by rule over the cases that saw it. Each broker is a scripted hostile server on 127.0.0.1
driving the real ``mqttaudit probe`` command."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from mqttaudit.codec import Connect, Direction, Pingreq, StreamDecoder
from mqttaudit.judge import Finding
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.runner import FAIL, MAX_FINDINGS, CaseResult, ProbeRun, kept_findings
from mqttaudit.probe.violations import other_violations
from mqttaudit.spec import load_catalogue

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
def test_a_violation_no_chosen_case_targets_fails_the_run_and_is_in_every_report(
    connack: bytes, cases: str, rule: str, tmp_path: Path
) -> None:
    ran = probe(connack, tmp_path / "out", "--cases", cases)

    assert ran.returncode == 1, ran.stdout + ran.stderr
    findings, markdown, junit = reports(tmp_path / "out")
    assert all(rule not in r["statements"] for r in findings["results"])  # the chosen cases target other statements
    [violation] = findings["violations"]
    assert (violation["rule"], violation["level"], violation["side"], violation["known"]) == (
        rule,
        "MUST",
        "server",
        False,
    )
    assert violation["acts"] == 1 and violation["cases"] == [findings["results"][0]["case"]]
    assert violation["protocol"] == ("5.0" if cases.startswith("v5/") else "3.1.1")  # whose statement the id names
    assert f"VIOLATION {rule} (MUST) by the server: 1 act in 1 case" in ran.stdout
    assert "## Violations outside the cases' statements" in markdown
    assert f"### {rule} (MUST, section " in markdown
    [failed] = [case for case in junit.iter("testcase") if case.get("classname") == "mqttaudit.probe.violations"]
    failure = failed.find("failure")
    assert failure is not None and failure.get("type") == rule
    assert junit.get("failures") == "1"


def test_the_same_behaviour_in_many_cases_is_one_entry_counting_every_act(tmp_path: Path) -> None:
    ran = probe(RESERVED_FLAGS, tmp_path / "out", "--cases", "ping/*,malformed/pingreq-flag-bit-*")

    assert ran.returncode == 1, ran.stdout + ran.stderr
    findings, markdown, _ = reports(tmp_path / "out")
    results = findings["results"]
    assert len(results) == 5
    # each case's connections got the bad CONNACK once per connection: one act each, counted in the case too
    acts = {r["case"]: r["evidence"]["other_acts"].get("MQTT-3.2.2-reserved-flags", 0) for r in results}
    assert all(count >= 1 for count in acts.values()), acts
    [violation] = [v for v in findings["violations"] if v["rule"] == "MQTT-3.2.2-reserved-flags"]
    assert violation["acts"] == sum(acts.values())
    assert sorted(violation["cases"]) == sorted(acts)
    assert f"{violation['acts']} act(s) by the server in 5 case(s)" in markdown
    assert markdown.count("### MQTT-3.2.2-reserved-flags (MUST") == 1


def test_a_violation_the_baseline_knows_does_not_fail_the_run_but_is_still_shown(tmp_path: Path) -> None:
    first = probe(RESERVED_FLAGS, tmp_path / "first", "--cases", "ping/*")
    assert first.returncode == 1
    again = probe(
        RESERVED_FLAGS, tmp_path / "again", "--cases", "ping/*", "--baseline", str(tmp_path / "first/findings.json")
    )

    assert again.returncode == 0, again.stdout + again.stderr
    findings, markdown, junit = reports(tmp_path / "again")
    [violation] = findings["violations"]
    assert violation["known"] is True
    assert "known to the baseline: it does not fail the run" in again.stdout
    assert "Not counted: known to the baseline" in markdown
    assert junit.get("failures") == "0"


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
