"""Every probe report explains a statement with the catalogue of the version its case spoke, and shows leniency apart.

A 5.0 case cites 5.0 ids; 5.0 renumbers 3.1.1, so the same id text names another statement there (5.0's
MQTT-3.1.2-24 is the Maximum Packet Size toward the Client, 3.1.1's the Keep Alive timeout), and an id only 5.0 states
(MQTT-3.3.2-8) is in no 3.1.1 catalogue at all. Each report format renders one 5.0 fail, one 5.0 leniency (an empty
Topic Filter SUBACKed: MQTT-4.7.3-1 binds the sender; a 5.0 Server closes on what it *detects*) and a 3.1.1 pass of
the 3.1.1 statement with the same id, and the text, level and section each shows are the right version's.
"""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from mqttaudit.codec import Direction, ProtocolVersion
from mqttaudit.judge import Finding, Judgement, Leniency
from mqttaudit.probe.baseline import Baseline, compare
from mqttaudit.probe.case import Case, Target
from mqttaudit.probe.outcome import exit_status, nothing_judged
from mqttaudit.probe.profile import ProfileError, parse_profile
from mqttaudit.probe.runner import FAIL, LENIENT, PASS, CaseResult, ProbeRun, decide
from mqttaudit.report import (
    AuditReportData,
    build_matrix,
    probe_run_to_json,
    probe_run_to_junit,
    probe_run_to_markdown,
    write_audit_reports,
    write_matrix,
)
from mqttaudit.report.audit_data import LenientCount, LenientRow
from mqttaudit.report.markdown import prose
from mqttaudit.report.terminal import MARKS, summary_lines
from mqttaudit.spec import load_catalogue
from mqttaudit.spec.ids import R5, R311
from mqttaudit.status import EXIT_FINDINGS, EXIT_OK
from tests.test_report_probe import Conversation

SERVER = Direction.FROM_SERVER
CLIENT = Direction.FROM_CLIENT
V5 = load_catalogue("5.0")
V311 = load_catalogue("3.1.1")
#: What 5.0 and 3.1.1 say under the one id MQTT-3.1.2-24.
MAX_PACKET_SIZE = V5[R5.MQTT_3_1_2_24].summary
KEEP_ALIVE = V311[R311.MQTT_3_1_2_24].summary
BASIS = (
    "MQTT 5.0 binds a Server to close on a Malformed Packet or Protocol Error when it detects one [MQTT-4.13.1-1]; "
    "section 4.13.1 leaves the rigour of checking to the implementation"
)
#: A 5.0 CONNECT (Clean Start, empty ClientId), its CONNACK, a SUBSCRIBE with an empty Topic Filter and its SUBACK.
CONNECT_5 = bytes.fromhex("10 0d 00 04 4d 51 54 54 05 02 00 3c 00 00 00")
CONNACK_5 = bytes.fromhex("20 03 00 00 00")
SUBSCRIBE_EMPTY_5 = bytes.fromhex("82 06 00 01 00 00 00 00")
SUBACK_5 = bytes.fromhex("90 04 00 01 00 00")


async def _script(context: object) -> None:
    """Cases here are never run: their conversations are recorded below."""


def case(case_id: str, statements: tuple[str, ...], title: str, protocol: ProtocolVersion) -> Case:
    return Case(case_id, statements, title, _script, protocol=protocol)


def with_evidence(result: CaseResult, *conversations: Conversation) -> CaseResult:
    result.connections = [conversation.evidence() for conversation in conversations]
    result.duration = 0.5
    return result


def max_packet_size_fail() -> CaseResult:
    """5.0: the broker sends a PUBLISH larger than the Maximum Packet Size the client declared."""
    c1 = Conversation("c1").send(0.0, CLIENT, CONNECT_5).send(0.004, SERVER, CONNACK_5).quiet(2.0)
    finding = Finding(
        R5.MQTT_3_1_2_24,
        SERVER,
        0.5,
        1,
        "the server sent a PUBLISH of 300 bytes to a client whose Maximum Packet Size is 128",
        "send no packet larger than the client's Maximum Packet Size",
        "c1",
    )
    verdict = decide(
        case("v5/maximum-packet-size/to-client", (R5.MQTT_3_1_2_24,), "Maximum Packet Size", ProtocolVersion.V5),
        Judgement((finding,), frozenset({R5.MQTT_3_1_2_24}), {}),
    )
    return with_evidence(verdict, c1)


def topic_alias_zero_fail() -> CaseResult:
    """5.0: an id only 5.0 states (no 3.1.1 rule has it)."""
    finding = Finding(R5.MQTT_3_3_2_8, SERVER, 0.2, 1, "the server sent Topic Alias 0", "no Topic Alias 0", "c1")
    verdict = decide(
        case("v5/topic-alias/server-zero", (R5.MQTT_3_3_2_8,), "Topic Alias 0 from the server", ProtocolVersion.V5),
        Judgement((finding,), frozenset({R5.MQTT_3_3_2_8}), {}),
    )
    return with_evidence(verdict, Conversation("c1").send(0.0, CLIENT, CONNECT_5).send(0.004, SERVER, CONNACK_5))


def empty_filter_lenient() -> CaseResult:
    """5.0: the broker SUBACKs a SUBSCRIBE whose only Topic Filter is empty and keeps the connection open."""
    c1 = (
        Conversation("c1")
        .send(0.0, CLIENT, CONNECT_5)
        .send(0.004, SERVER, CONNACK_5)
        .send(0.010, CLIENT, SUBSCRIBE_EMPTY_5)
        .send(0.012, SERVER, SUBACK_5)
        .quiet(2.0)
    )
    accepted = "the server answered SUBACK 0x00 and kept the connection open"
    row = Leniency(R5.MQTT_4_7_3_1, SERVER, 0.012, 3, accepted, BASIS, "c1", 2)
    verdict = decide(
        case(
            "v5/malformed/subscribe-empty-filter",
            (R5.MQTT_4_13_1_1,),
            "SUBSCRIBE with an empty Topic Filter",
            ProtocolVersion.V5,
        ),
        Judgement((), frozenset(), {R5.MQTT_4_13_1_1: "the server did not detect it"}, (), (row,)),
    )
    return with_evidence(verdict, c1)


def keep_alive_pass() -> CaseResult:
    """3.1.1: the Keep Alive statement that carries the id MQTT-3.1.2-24 in 3.1.1."""
    verdict = decide(
        case("keep-alive/timeout", (R311.MQTT_3_1_2_24,), "Keep Alive timeout", ProtocolVersion.V3_1_1),
        Judgement((), frozenset({R311.MQTT_3_1_2_24}), {}),
    )
    return with_evidence(verdict, Conversation("c1", "mqa0keep").connected())


def versions_run(strict: bool = False) -> ProbeRun:
    results = [max_packet_size_fail(), topic_alias_zero_fail(), empty_filter_lenient(), keep_alive_pass()]
    return ProbeRun(Target("127.0.0.1", 1883), "2025-05-01T10:00:00+00:00", results, 3.0, strict=strict)


def test_the_two_catalogues_say_different_things_under_one_id() -> None:
    assert "Maximum Packet Size" in MAX_PACKET_SIZE and "Keep Alive" in KEEP_ALIVE
    assert R5.MQTT_3_3_2_8 not in V311


# --- the verdict ---------------------------------------------------------------------------------------------------


def test_an_accepted_packet_the_broker_was_not_bound_to_detect_is_lenient_not_a_failure() -> None:
    result = empty_filter_lenient()
    assert result.verdict == LENIENT
    assert result.findings == [] and [row.rule for row in result.lenient] == [R5.MQTT_4_7_3_1]
    assert result.reason == (
        "accepted a packet breaking MQTT-4.7.3-1: the server answered SUBACK 0x00 and kept the connection open"
    )
    assert result.evidence()["lenient"][0]["basis"] == BASIS


def test_a_failure_of_a_targeted_statement_wins_over_leniency() -> None:
    failed = Finding(R5.MQTT_4_13_1_1, SERVER, 2.0, 3, "kept open", "close", "c1")
    row = Leniency(R5.MQTT_4_7_3_1, SERVER, 0.01, 3, "SUBACK", BASIS, "c1")
    subject = case("v5/x", (R5.MQTT_4_13_1_1,), "x", ProtocolVersion.V5)
    result = decide(subject, Judgement((failed,), frozenset({R5.MQTT_4_13_1_1}), {}, (), (row,)))
    assert result.verdict == FAIL and result.lenient == [row]


def test_leniency_of_the_client_is_not_the_brokers() -> None:
    row = Leniency(R5.MQTT_4_7_3_1, CLIENT, 0.01, 3, "the client acted on it", BASIS, "c1")
    subject = case("v5/y", (R5.MQTT_4_13_1_1,), "y", ProtocolVersion.V5)
    result = decide(subject, Judgement((), frozenset({R5.MQTT_4_13_1_1}), {}, (), (row,)))
    assert result.verdict == PASS and result.lenient == []


# --- exit status, --strict, the profile key ------------------------------------------------------------------------


def lenient_only(strict: bool) -> ProbeRun:
    return ProbeRun(Target("127.0.0.1", 1883), "now", [empty_filter_lenient(), keep_alive_pass()], 1.0, strict=strict)


def test_leniency_does_not_fail_a_run_unless_it_is_strict() -> None:
    assert nothing_judged(lenient_only(False).results) is None  # a lenient case judged something
    assert exit_status(lenient_only(False), V311) == EXIT_OK
    assert exit_status(lenient_only(True), V311) == EXIT_FINDINGS


def test_a_strict_run_does_not_fail_on_leniency_its_baseline_knows() -> None:
    run = lenient_only(True)
    known = Baseline("old.json", {"v5/malformed/subscribe-empty-filter": LENIENT, "keep-alive/timeout": PASS})
    run.baseline = compare(known, ((r.case.id, r.verdict) for r in run.results))
    assert run.baseline.known_lenient == ("v5/malformed/subscribe-empty-filter",)
    assert exit_status(run, V311) == EXIT_OK
    run.baseline = compare(Baseline("old.json", {}), ((r.case.id, r.verdict) for r in run.results))
    assert exit_status(run, V311) == EXIT_FINDINGS


def test_a_profile_sets_strict_and_checks_its_type() -> None:
    assert parse_profile("strict = true").strict is True
    assert parse_profile("").strict is None
    assert parse_profile("strict = true").capabilities() == {}  # a policy, not a capability of the broker
    with pytest.raises(ProfileError, match="strict must be true or false"):
        parse_profile('strict = "yes"')


# --- every report ----------------------------------------------------------------------------------------------------


def test_findings_json_gives_each_statement_its_versions_text_level_and_section() -> None:
    data = probe_run_to_json(versions_run())
    results = {result["case"]: result for result in data["results"]}
    assert data["summary"]["lenient"] == 1 and data["summary"]["fail"] == 2 and data["strict"] is False
    mps = results["v5/maximum-packet-size/to-client"]
    assert mps["protocol"] == "5.0" and mps["level"] == "MUST"
    assert mps["rules"] == [
        {
            "id": "MQTT-3.1.2-24",
            "version": "5.0",
            "section": "3.1.2.11.4",
            "level": "MUST",
            "binds": "server",
            "summary": MAX_PACKET_SIZE,
        }
    ]
    alias = results["v5/topic-alias/server-zero"]
    assert alias["level"] == "MUST" and alias["rules"][0]["summary"] == V5[R5.MQTT_3_3_2_8].summary
    keep = results["keep-alive/timeout"]
    assert keep["rules"][0]["version"] == "3.1.1" and keep["rules"][0]["summary"] == KEEP_ALIVE
    lenient = results["v5/malformed/subscribe-empty-filter"]
    assert lenient["verdict"] == "lenient"
    [row] = lenient["lenient"]
    assert row["rule"] == "MQTT-4.7.3-1" and row["side"] == "server" and row["basis"] == BASIS
    assert row["statement"] == {
        "id": "MQTT-4.7.3-1",
        "version": "5.0",
        "section": "4.7.3",
        "level": "MUST",
        "binds": "both",
        "summary": V5[R5.MQTT_4_7_3_1].summary,
    }
    json.dumps(data)  # plain data


def test_findings_md_explains_a_5_0_fail_with_5_0_text_and_the_leniency_in_its_own_section() -> None:
    markdown = probe_run_to_markdown(versions_run())
    assert "(unlisted)" not in markdown
    fail = markdown.split('<a id="fail-v5/maximum-packet-size/to-client"></a>')[1].split("<a id=")[0]
    assert "**FAIL** (MUST)" in fail
    assert "Source: OASIS MQTT Version 5.0." in fail
    assert f"- Section 3.1.2.11.4, statement [MQTT-3.1.2-24] (MUST, server): {MAX_PACKET_SIZE}." in fail
    assert KEEP_ALIVE not in markdown and "Keep Alive period" not in fail
    alias = markdown.split('<a id="fail-v5/topic-alias/server-zero"></a>')[1].split("<a id=")[0]
    assert "**FAIL** (MUST)" in alias and V5[R5.MQTT_3_3_2_8].summary in alias
    assert "- **Lenient:** 1 case(s)" in markdown and "they do not fail the run" in markdown
    assert "| [`v5/malformed/subscribe-empty-filter`](#lenient-v5/malformed/subscribe-empty-filter) |" in markdown
    assert "| *lenient* |" in markdown
    lenient = markdown.split("## Lenient cases")[1]
    assert "Case `v5/malformed/subscribe-empty-filter`: *lenient* (MQTT 5.0; not a failure)." in lenient
    assert (
        "  - The packet breaks [MQTT-4.7.3-1] of OASIS MQTT Version 5.0, section 4.7.3 (MUST), which binds the "
        f"client and the server: {V5[R5.MQTT_4_7_3_1].summary}."
    ) in lenient
    assert f"  - Why the server was not bound to detect it: {prose(BASIS)}." in lenient
    assert "82 06 00 01 00 00 00 00" in lenient  # the evidence
    assert "## Failures" in markdown and markdown.index("## Failures") < markdown.index("## Lenient cases")


def test_junit_shows_5_0_text_and_leniency_without_a_failure() -> None:
    suite = probe_run_to_junit(versions_run())
    assert suite.get("failures") == "2" and suite.get("errors") == "0" and suite.get("skipped") == "0"
    assert ("lenient", "1") in [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")]
    cases = {case.get("name", "").split(" [")[0]: case for case in suite.iter("testcase")}
    mps = cases["v5/maximum-packet-size/to-client"]
    properties = [(p.get("name"), p.get("value")) for p in mps.findall("properties/property")]
    assert ("section", "3.1.2.11.4") in properties and ("protocol", "5.0") in properties
    rule = f"MQTT-3.1.2-24 (MQTT 5.0, section 3.1.2.11.4, MUST, binds the server): {MAX_PACKET_SIZE}"
    assert ("rule", rule) in properties
    failure = mps.find("failure")
    assert failure is not None and rule in (failure.text or "") and KEEP_ALIVE not in (failure.text or "")
    lenient = cases["v5/malformed/subscribe-empty-filter"]
    assert [child.tag for child in lenient] == ["properties", "system-out"]  # no failure, error or skipped
    properties = [(p.get("name"), p.get("value")) for p in lenient.findall("properties/property")]
    assert ("verdict", "lenient") in properties
    [explained] = [value for name, value in properties if name == "lenient"]
    assert "MQTT-4.7.3-1 (MQTT 5.0, section 4.7.3, MUST, binds the client and the server)" in (explained or "")
    assert BASIS in (explained or "")
    out = lenient.find("system-out")
    assert out is not None and (out.text or "").startswith("lenient (not a failure): accepted a packet breaking")
    assert BASIS in (out.text or "") and "82 06 00 01 00 00 00 00" in (out.text or "")
    ET.tostring(suite)  # serialisable


def test_junit_of_a_strict_run_says_so() -> None:
    suite = probe_run_to_junit(versions_run(strict=True))
    assert ("strict", "true") in [(p.get("name"), p.get("value")) for p in suite.findall("properties/property")]


def test_terminal_counts_leniency_apart_and_lists_it() -> None:
    lines = summary_lines(versions_run(), 200)
    assert lines[0].endswith("4 cases in 3.0 s: 1 pass, 2 fail, 0 inconclusive, 0 not-applicable, 1 lenient")
    assert any(line.startswith("FAIL v5/maximum-packet-size/to-client [MQTT-3.1.2-24]") for line in lines)
    assert "lenient: 1 malformed packet(s) or Protocol Error(s) accepted, not bound to detect; not failures" in (
        "\n".join(lines)
    )
    assert any(
        line.startswith("LENIENT v5/malformed/subscribe-empty-filter [MQTT-4.7.3-1 of MQTT 5.0]: accepted a packet")
        for line in lines
    )
    strict = summary_lines(versions_run(strict=True), 200)
    assert any("they fail this run (--strict)" in line for line in strict)
    assert MARKS["lenient"] == "L"


def test_matrix_keeps_3_1_1_and_5_0_rows_apart_each_with_its_own_text(tmp_path: Path) -> None:
    run = versions_run()
    matrix = build_matrix([("broker", run)])
    rows = {(row.version, row.statement): row for row in matrix.rows}
    assert set(rows) == {
        ("3.1.1", "MQTT-3.1.2-24"),
        ("5.0", "MQTT-3.1.2-24"),
        ("5.0", "MQTT-3.3.2-8"),
        ("5.0", "MQTT-4.13.1-1"),
    }
    assert [row.version for row in matrix.rows] == ["3.1.1", "5.0", "5.0", "5.0"]  # 3.1.1's table first
    assert rows["5.0", "MQTT-3.1.2-24"].summary == MAX_PACKET_SIZE
    assert rows["5.0", "MQTT-3.1.2-24"].section == "3.1.2.11.4"
    assert [cell.text for cell in rows["5.0", "MQTT-3.1.2-24"].cells] == ["FAIL"]
    assert rows["3.1.1", "MQTT-3.1.2-24"].summary == KEEP_ALIVE
    assert [cell.text for cell in rows["3.1.1", "MQTT-3.1.2-24"].cells] == ["pass"]
    assert [cell.text for cell in rows["5.0", "MQTT-4.13.1-1"].cells] == ["lenient"]
    markdown_path, html_path = write_matrix([("broker", run)], tmp_path)
    markdown = markdown_path.read_text(encoding="utf-8")
    v311, v5 = markdown.split("### MQTT 3.1.1 statements")[1].split("### MQTT 5.0 statements")
    # each row explained by its own version's summary, in the row
    assert f"| MQTT-3.1.2-24 | 3.1.2.10 | MUST | {prose(KEEP_ALIVE)} | pass |" in v311
    assert f"| MQTT-3.1.2-24 | 3.1.2.11.4 | MUST | {prose(MAX_PACKET_SIZE)} | FAIL |" in v5
    assert "| MQTT-4.13.1-1 | 4.13.1 | MUST | " in v5 and " | lenient |" in v5
    assert "## Lenient cases" in markdown and "- broker: `v5/malformed/subscribe-empty-filter`" in markdown
    html = html_path.read_text(encoding="utf-8")
    table_5 = html.split('data-version="5.0"')[1].split("</table>")[0]
    assert f'<th class="statement" title="{MAX_PACKET_SIZE}">MQTT-3.1.2-24</th><td>3.1.2.11.4</td>' in table_5
    assert '<td class="cell lenient"' in table_5 and 'href="#b1-v5/malformed/subscribe-empty-filter">lenient' in html
    table_311 = html.split('data-version="3.1.1"')[1].split("</table>")[0]
    assert f'title="{KEEP_ALIVE}">MQTT-3.1.2-24</th>' in table_311
    assert '<li id="b1-v5/malformed/subscribe-empty-filter">' in html


# --- the audit's reports -------------------------------------------------------------------------------------------


def test_audit_reports_show_leniency_apart_with_the_5_0_text(tmp_path: Path) -> None:
    """A captured 5.0 server that SUBACKed an empty Topic Filter: the client's violation is a violation; the
    server's acceptance is leniency, in its own section with the 5.0 rule, whom it binds and why it was not bound."""
    count: LenientCount = {
        "rule": R5.MQTT_4_7_3_1,
        "rule_version": "5.0",
        "level": "MUST",
        "section": "4.7.3",
        "actor": "server",
        "count": 3,
        "first_time": 1_700_000_000.0,
        "basis": BASIS,
    }
    row: LenientRow = {
        "capture": "v5.pcap",
        "flow": "10.0.0.9:5009-10.0.0.1:1883",
        "event": 3,
        "rule": R5.MQTT_4_7_3_1,
        "rule_version": "5.0",
        "level": "MUST",
        "section": "4.7.3",
        "actor": "server",
        "frame": 7,
        "offset": 20,
        "time": 1_700_000_000.0,
        "detail": "the server answered SUBACK 0x00 <b>",
        "basis": BASIS,
        "evidence": SUBSCRIBE_EMPTY_5.hex(" "),
    }
    data = AuditReportData(summary={"lenient": 3}, lenient_counts=[count], lenient_rows=[row])
    data = AuditReportData.from_json(data.to_json())  # report_data.json keeps it
    paths = write_audit_reports(tmp_path, data)
    html, markdown = (path.read_text(encoding="utf-8") for path in paths[:2])
    summary = V5[R5.MQTT_4_7_3_1].summary
    assert "No violations found" in markdown  # leniency is no violation
    assert "; 3 malformed packets or Protocol Errors accepted by a receiver not bound to detect it" in markdown
    part = markdown.split("## Leniency")[1].split("\n## ")[0]
    assert "| [`MQTT-4.7.3-1 (MQTT 5.0)`](#lenient-MQTT-4.7.3-1-5.0-server) | the client and the server | server |" in (
        part
    )
    assert (
        f"Section 4.7.3 of MQTT 5.0, statement [MQTT-4.7.3-1] (MUST, binds the client and the server): {summary}"
        in (part)
    )
    assert "Source: OASIS MQTT Version 5.0." in part and prose(BASIS) in part
    assert "frame 7" in part and "82 06 00 01 00 00 00 00" in part
    assert '<section id="lenient">' in html and '<a href="#lenient">Leniency</a>' in html
    assert (
        "Section 4.7.3 of MQTT 5.0, statement <strong>MQTT-4.7.3-1</strong> (binds the client and the server)" in html
    )
    assert summary in html and "SUBACK 0x00 &lt;b&gt;" in html and "<b>" not in html.split('<section id="lenient">')[1]
