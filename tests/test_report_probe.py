"""Probe reports: findings.json, findings.md, junit.xml and the conformance matrix, built from recorded runs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from mqttaudit.codec import (
    Connack,
    Connect,
    Direction,
    Packet,
    Pingreq,
    Pingresp,
    Publish,
    StreamDecoder,
    Suback,
    Subscribe,
    Subscription,
    Will,
    encode,
)
from mqttaudit.judge import Finding, JudgeConfig, Judgement, judge_scenario
from mqttaudit.judge.events import Closed, Event, Quiet, Sent
from mqttaudit.probe.case import Case, Target
from mqttaudit.probe.runner import (
    INCONCLUSIVE,
    NOT_APPLICABLE,
    CaseResult,
    ProbeRun,
    decide,
    events_to_dicts,
)
from mqttaudit.report import (
    build_matrix,
    probe_run_to_json,
    probe_run_to_junit,
    probe_run_to_markdown,
    write_matrix,
    write_probe_reports,
)
from mqttaudit.report.evidence import MAX_HEX_BYTES, transcript

CLIENT = Direction.FROM_CLIENT
SERVER = Direction.FROM_SERVER
NASTY = "topic <a&b> \x00\x01\x7f end"


async def _script(context: object) -> None:
    """Cases here are never run: their conversations are recorded below."""


def make_case(case_id: str, statements: Iterable[str], title: str, expected: str = "", stimulus: str = "") -> Case:
    return Case(case_id, tuple(statements), title, _script, stimulus, expected)


class Conversation:
    """One recorded connection: bytes framed by the real StreamDecoder of each direction, as the prober does."""

    def __init__(self, name: str, client_id: str = "") -> None:
        self.name = name
        self.client_id = client_id
        self.events: list[Event] = []
        self._decoders = {CLIENT: StreamDecoder(CLIENT), SERVER: StreamDecoder(SERVER)}

    def send(self, t: float, side: Direction, data: Packet | bytes) -> Conversation:
        raw = data if isinstance(data, bytes) else encode(data, direction=side)
        decoder = self._decoders[side]
        frames = decoder.feed(raw) or decoder.close()  # a five-byte length frames only at the end of the stream
        self.events.extend(Sent(t, side, frame) for frame in frames)
        return self

    def closed(self, t: float, by: Direction | None, abrupt: bool = False) -> Conversation:
        self.events.append(Closed(t, by, abrupt))
        return self

    def quiet(self, t: float) -> Conversation:
        self.events.append(Quiet(t))
        return self

    def connected(self, t: float = 0.0, **connect: Any) -> Conversation:
        self.send(t, CLIENT, Connect(client_id=self.client_id, **connect))
        return self.send(t + 0.004, SERVER, Connack(return_code=0))

    def evidence(self) -> dict[str, Any]:
        return {"name": self.name, "client_id": self.client_id, "events": events_to_dicts(self.events)}


def judged(
    case: Case,
    conversations: list[Conversation],
    findings: Iterable[Finding] = (),
    assessed: Iterable[str] = (),
    not_assessable: dict[str, str] | None = None,
    duration: float = 0.5,
) -> CaseResult:
    """A case result as the runner makes it: ``decide`` on a judgement, then the recorded evidence."""
    result = decide(case, Judgement(tuple(findings), frozenset(assessed), not_assessable or {}))
    result.connections = [conversation.evidence() for conversation in conversations]
    result.duration = duration
    return result


def empty_filter_fail() -> CaseResult:
    """The broker answers a SUBSCRIBE with an empty Topic Filter with SUBACK and keeps the connection open."""
    case = make_case(
        "subscribe-empty-filter",
        ("MQTT-4.7.3-1", "MQTT-4.8.0-1"),
        "SUBSCRIBE with an empty Topic Filter",
        expected="close the connection without a SUBACK",
        stimulus="SUBSCRIBE whose only Topic Filter has length 0x0000",
    )
    c1 = (
        Conversation("c1", "mqa0empty0filter")
        .connected()
        .send(0.010, CLIENT, bytes.fromhex("82 05 00 01 00 00 00"))
        .send(0.013, SERVER, Suback(packet_id=1, return_codes=(0,)))
        .quiet(2.010)
    )
    finding = Finding(
        "MQTT-4.8.0-1",
        SERVER,
        2.010,
        4,
        "the server kept the connection open for 2.000 s after a SUBSCRIBE with an empty Topic Filter",
        "close the network connection on a protocol violation",
        "c1",
    )
    return judged(case, [c1], [finding], assessed=["MQTT-4.7.3-1", "MQTT-4.8.0-1"])


def reserved_type_pass() -> CaseResult:
    case = make_case("reserved-packet-type-0", ("MQTT-2.2.1-reserved-type", "MQTT-4.8.0-1"), "Reserved packet type 0")
    c1 = Conversation("c1", "mqa0reserved").connected().send(0.010, CLIENT, b"\x00\x00").closed(0.022, SERVER)
    return judged(case, [c1], assessed=case.statements)


def pingreq_pass() -> CaseResult:
    case = make_case("pingreq-answered", ("MQTT-3.12.4-1",), "PINGREQ is answered with PINGRESP")
    c1 = Conversation("c1", "mqa0ping").connected().send(0.01, CLIENT, Pingreq()).send(0.011, SERVER, Pingresp())
    return judged(case, [c1.closed(0.02, CLIENT)], assessed=case.statements)


def fifth_length_byte_fail() -> CaseResult:
    """Bytes that cannot be framed; the broker keeps the connection open (special characters in the detail)."""
    case = make_case("remaining-length-fifth-byte", ("MQTT-4.8.0-1",), "Remaining Length with a fifth byte")
    c1 = Conversation("c1", "mqa0fifth").connected().send(0.010, CLIENT, bytes.fromhex("30 ff ff ff ff 01")).quiet(2.0)
    finding = Finding("MQTT-4.8.0-1", SERVER, 2.0, 3, f"kept open; last topic {NASTY}", "close the connection", "c1")
    return judged(case, [c1], [finding], assessed=case.statements)


def will_fail() -> CaseResult:
    """Two connections: the Will of c2 never reaches the subscriber on c1."""
    case = make_case("will-published", ("MQTT-3.1.2-8",), "The Will is published when a client drops")
    will_topic = "mqttaudit/run/will-published/w"
    c1 = (
        Conversation("sub", "mqa0will0sub")
        .connected()
        .send(0.01, CLIENT, Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=will_topic, qos=1),)))
        .send(0.012, SERVER, Suback(packet_id=1, return_codes=(1,)))
        .quiet(2.5)
    )
    c2 = (
        Conversation("dropper", "mqa0will0pub")
        .connected(0.02, will=Will(topic=will_topic, message=b"gone", qos=1))
        .closed(0.5, CLIENT, abrupt=True)
    )
    finding = Finding(
        "MQTT-3.1.2-8", SERVER, 2.5, 4, "no PUBLISH of the Will within 2.000 s", "publish the Will Message", "sub"
    )
    return judged(case, [c1, c2], [finding], assessed=case.statements)


def setup_inconclusive() -> CaseResult:
    case = make_case("qos2-exactly-once", ("MQTT-4.3.3-2", "MQTT-4.8.0-1"), "QoS 2 delivered exactly once")
    return CaseResult(case, INCONCLUSIVE, "setup: no SUBACK for packet id 1 on c1")


def qos2_not_applicable() -> CaseResult:
    case = make_case("qos2-pubrel", ("MQTT-4.3.3-2",), "PUBREL answered with PUBCOMP")
    return CaseResult(case, NOT_APPLICABLE, "the broker granted QoS 1 for a QoS 2 subscription")


def probe_run(results: list[CaseResult], port: int = 1883, broker_down: str | None = None) -> ProbeRun:
    return ProbeRun(Target("127.0.0.1", port), "2025-05-01T10:00:00+00:00", results, 4.25, broker_down)


@pytest.fixture
def run() -> ProbeRun:
    return probe_run(
        [
            empty_filter_fail(),
            reserved_type_pass(),
            pingreq_pass(),
            fifth_length_byte_fail(),
            will_fail(),
            setup_inconclusive(),
            qos2_not_applicable(),
        ]
    )


# --- findings.json -------------------------------------------------------------------------------------------------


def test_json_has_exactly_the_documented_keys(run: ProbeRun) -> None:
    data = probe_run_to_json(run)
    assert set(data) == {
        "mqttaudit_version",
        "target",
        "started",
        "duration_s",
        "broker_down",
        "incomplete",
        "strict",
        "not_spoken",
        "baseline",
        "summary",
        "violations",
        "results",
    }
    assert data["incomplete"] is None and data["baseline"] is None and data["strict"] is False
    assert data["not_spoken"] == {}
    assert data["target"] == "mqtt://127.0.0.1:1883"
    assert data["summary"] == {"pass": 2, "fail": 3, "inconclusive": 1, "not-applicable": 1, "lenient": 0}
    keys = {
        "case",
        "title",
        "protocol",
        "statements",
        "provokes",
        "rules",
        "verdict",
        "reason",
        "error",
        "level",
        "lenient",
        "evidence",
        "reproducer",
    }
    assert all(set(result) == keys for result in data["results"])
    first = data["results"][0]
    assert first["case"] == "subscribe-empty-filter"
    assert first["statements"] == ["MQTT-4.7.3-1", "MQTT-4.8.0-1"]
    assert first["verdict"] == "fail"
    assert first["reason"].startswith("MQTT-4.8.0-1: the server kept the connection open")
    assert first["evidence"]["connections"][0]["events"][2]["hex"] == "82 05 00 01 00 00 00"
    assert first["evidence"]["findings"][0]["rule"] == "MQTT-4.8.0-1"


def test_json_level_is_the_strongest_among_the_statements(run: ProbeRun) -> None:
    levels = {result["case"]: result["level"] for result in probe_run_to_json(run)["results"]}
    assert levels["subscribe-empty-filter"] == "MUST"
    run.results[0] = judged(make_case("bom", ("MQTT-1.5.3-control-characters",), "Control characters"), [])
    assert probe_run_to_json(run)["results"][0]["level"] == "SHOULD"
    run.results[0] = judged(make_case("unknown", ("MQTT-9.9.9-9",), "Not catalogued"), [])
    assert probe_run_to_json(run)["results"][0]["level"] is None


def test_json_survives_a_round_trip_through_text(run: ProbeRun, tmp_path: Path) -> None:
    paths = write_probe_reports(run, tmp_path / "out")
    assert [path.name for path in paths] == ["findings.json", "findings.md", "junit.xml", "report.html", "reproducers"]
    assert json.loads(paths[0].read_text(encoding="utf-8")) == probe_run_to_json(run)


# --- findings.md ---------------------------------------------------------------------------------------------------


def plain(markdown: str) -> str:
    """``markdown`` with its backslash escapes taken out: the text a reader sees."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def failure_sections(markdown: str) -> dict[str, str]:
    """Case id -> its failure section."""
    parts = re.split(r'^<a id="fail-([^"]+)"></a>$', markdown, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n## ")[0] for i in range(1, len(parts), 2)}


def test_markdown_header_and_summary_table_cover_every_case(run: ProbeRun) -> None:
    markdown = probe_run_to_markdown(run)
    assert markdown.startswith("# mqttaudit probe findings: `mqtt://127.0.0.1:1883`\n")
    assert "- Cases: 7 (2 pass, 3 fail, 1 inconclusive, 1 not-applicable, 0 lenient)" in markdown
    assert "- Duration: 4.250 s" in markdown
    for result in run.results:
        assert re.search(rf"^\| \[?`{re.escape(result.case.id)}`", markdown, flags=re.M), result.case.id
    assert "| [`subscribe-empty-filter`](#fail-subscribe-empty-filter) | MQTT-4.7.3-1, MQTT-4.8.0-1 | **FAIL** |" in (
        markdown
    )
    assert "Broker down" not in markdown


def test_markdown_names_a_broker_that_went_down(run: ProbeRun) -> None:
    run.broker_down = "the broker stopped accepting connections during case will-published"
    assert "- **Broker down:** the broker stopped accepting connections during case will-published" in (
        probe_run_to_markdown(run)
    )


def test_markdown_has_one_section_per_failure_and_none_for_passes(run: ProbeRun) -> None:
    sections = failure_sections(probe_run_to_markdown(run))
    assert list(sections) == ["subscribe-empty-filter", "remaining-length-fifth-byte", "will-published"]
    for section in sections.values():
        for heading in ("Summary", "Standard reference", "Expected behaviour", "Evidence", "What it means for users"):
            assert f"\n#### {heading}\n" in section


def test_failure_section_cites_the_statements_and_shows_the_expected_behaviour(run: ProbeRun) -> None:
    section = failure_sections(probe_run_to_markdown(run))["subscribe-empty-filter"]
    assert "### SUBSCRIBE with an empty Topic Filter" in section
    assert "Source: OASIS MQTT Version 3.1.1." in section
    assert "- Section 4.7.3, statement [MQTT-4.7.3-1] (MUST, " in section
    assert "- Section 4.8, statement [MQTT-4.8.0-1] (MUST, both): Unless stated otherwise" in section
    assert "not the text of the specification" in section
    assert "**MQTT-4.8.0-1** (server, at 2.010 s on connection `c1`): the server kept the connection open" in section
    assert "Stimulus: SUBSCRIBE whose only Topic Filter has length 0x0000." in section
    assert "Expected of a conforming broker: close the connection without a SUBACK." in section
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| Packet shape | Expected result | Observed result |"
    assert rows[1] == (
        "| CONNECT 'MQTT' level 4 client_id='mqa0empty0filter' clean_session=1 keep_alive=0 | - "
        "| answered CONNACK session_present=False return_code=0 |"
    )
    assert plain(rows[2]) == (
        "| SUBSCRIBE id=1 ['' QoS 0] (breaks MQTT-4.7.3-1) | close the network connection on a protocol violation "
        "| answered SUBACK id=1 codes=[0x00]; then kept the connection open for 2.000 s |"
    )


def squeezed(line: str) -> str:
    """``line`` with runs of spaces (column alignment) reduced to one."""
    return " ".join(line.split())


def test_failure_section_evidence_has_the_bytes_both_ways_in_order(run: ProbeRun) -> None:
    section = failure_sections(probe_run_to_markdown(run))["subscribe-empty-filter"]
    evidence = section.split("#### Evidence")[1].split("```text\n")[1].split("\n```")[0].splitlines()
    assert evidence[0] == "connection c1, client id 'mqa0empty0filter'"
    assert squeezed(evidence[5]) == "[2] 0.010 s client -> server SUBSCRIBE id=1 ['' QoS 0]"
    assert evidence[6].strip() == "bytes at offset 30: 82 05 00 01 00 00 00"
    assert evidence[7].strip() == "violation MQTT-4.7.3-1 at offset 34: Topic Filter is empty (length 0x0000)"
    assert squeezed(evidence[8]) == "[3] 0.013 s server -> client SUBACK id=1 codes=[0x00]"
    assert evidence[9].strip() == "bytes at offset 4: 90 03 00 01 00"
    assert squeezed(evidence[10]) == "[4] 2.010 s observation stopped with the connection still open"


def test_undecodable_bytes_are_shown_as_malformed_hex(run: ProbeRun) -> None:
    section = failure_sections(probe_run_to_markdown(run))["remaining-length-fifth-byte"]
    assert "| malformed: 30 ff ff ff ff 01 (breaks MQTT-2.2.3-four-bytes) | close the connection |" in section
    assert "kept the connection open for 1.990 s |" in section
    # The control bytes of the detail are escaped, the markup characters neutralised.
    assert "topic \\<a\\&b> \\\\x00\\\\x01\\\\x7f end" in section
    assert "\x00" not in section and "\x01" not in section


def test_several_connections_are_named_in_the_table_and_the_transcript(run: ProbeRun) -> None:
    section = failure_sections(probe_run_to_markdown(run))["will-published"]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [row.split(":")[0] for row in rows] == ["| `sub`", "| `sub`", "| `dropper`"]
    # The finding points at the subscriber's silence, so it belongs to the subscriber's last packet.
    assert plain(rows[1]).startswith(
        "| `sub`: SUBSCRIBE id=1 ['mqttaudit/run/will-published/w' QoS 1] | publish the Will"
    )
    assert rows[1].endswith("then kept the connection open for 2.490 s |")
    assert rows[2].endswith(
        "| - | answered CONNACK session_present=False return_code=0; "
        "then kept the connection open for 0.480 s, until the client closed it |"
    )
    assert "connection dropper, client id 'mqa0will0pub'" in section
    assert "closed by the client (RST)" in section


def test_long_frames_are_cut_in_the_transcript_and_kept_whole_in_the_json() -> None:
    c1 = Conversation("c1").connected().send(0.01, CLIENT, Publish(topic="a/b", payload=bytes(1000)))
    text = transcript([c1.evidence()])
    assert f"... (first {MAX_HEX_BYTES} of 1,008 bytes)" in text
    assert len(c1.evidence()["events"][2]["hex"].split()) == 1008


def test_the_real_judges_findings_land_on_the_offending_packet() -> None:
    """End to end from recorded events: the judge decides, the report places its findings on the stimulus row."""
    conversation = (
        Conversation("c1", "mqa0judged")
        .connected()
        .send(0.010, CLIENT, bytes.fromhex("82 05 00 01 00 00 00"))
        .send(0.013, SERVER, Suback(packet_id=1, return_codes=(0,)))
        .quiet(4.010)
    )
    case = empty_filter_fail().case
    result = decide(case, judge_scenario({"c1": conversation.events}, JudgeConfig(close_grace=2.0)))
    result.connections = [conversation.evidence()]
    assert result.verdict == "fail" and {rule for f in result.findings for rule in f.rules} == {
        "MQTT-4.7.3-1",
        "MQTT-4.8.0-1",
    }
    section = failure_sections(probe_run_to_markdown(probe_run([result])))["subscribe-empty-filter"]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    subscribe_expected = rows[2].split(" | ")[1]
    assert plain(rows[2]).startswith("| SUBSCRIBE id=1 ['' QoS 0] (breaks MQTT-4.7.3-1) | ")
    assert subscribe_expected == "; ".join(dict.fromkeys(f.expected for f in result.findings))
    assert rows[1].split(" | ")[1] == "-"  # nothing was wrong with the CONNECT
    assert all(f"**{f.rule}** (server, at {f.time:.3f} s" in section for f in result.findings)
    # One finding per act, the SUBACK (event 3) and the close never made: each cites the receiver's duty to close,
    # the filter rule failed by the same act.
    assert [(f.rule, f.also, f.event, f.cause) for f in result.findings] == [
        ("MQTT-4.8.0-1", ("MQTT-4.7.3-1",), 3, -1),
        ("MQTT-4.8.0-1", ("MQTT-4.7.3-1",), 4, 2),
    ]
    assert "; the same act also breaks MQTT-4.7.3-1): " in section


def test_inconclusive_cases_are_listed_with_their_reasons(run: ProbeRun) -> None:
    markdown = probe_run_to_markdown(run)
    tail = markdown.split("## Inconclusive cases")[1].split("## All cases")[0]
    assert "- `qos2-exactly-once` (QoS 2 delivered exactly once): setup: no SUBACK for packet id 1 on c1" in tail
    assert "qos2-pubrel" not in tail


def test_a_run_without_failures_has_no_failure_sections() -> None:
    markdown = probe_run_to_markdown(probe_run([reserved_type_pass(), pingreq_pass()]))
    assert "## Failures" not in markdown and "#### " not in markdown
    assert "## Inconclusive cases" not in markdown


# --- junit.xml -----------------------------------------------------------------------------------------------------


def test_junit_has_one_testcase_per_case_and_right_counts(run: ProbeRun, tmp_path: Path) -> None:
    path = write_probe_reports(run, tmp_path)[2]
    suite = ET.parse(path).getroot()
    assert suite.tag == "testsuite"
    assert suite.get("name") == "mqttaudit probe mqtt://127.0.0.1:1883"
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors")) == (
        "7",
        "3",
        "2",
        "0",
    )
    cases = suite.findall("testcase")
    assert [case.get("name") for case in cases] == [
        "subscribe-empty-filter [MQTT-4.7.3-1, MQTT-4.8.0-1]",
        "reserved-packet-type-0 [MQTT-2.2.1-reserved-type, MQTT-4.8.0-1]",
        "pingreq-answered [MQTT-3.12.4-1]",
        "remaining-length-fifth-byte [MQTT-4.8.0-1]",
        "will-published [MQTT-3.1.2-8]",
        "qos2-exactly-once [MQTT-4.3.3-2, MQTT-4.8.0-1]",
        "qos2-pubrel [MQTT-4.3.3-2]",
    ]
    # Case ids without a suite part: the whole id is the suite.
    assert [case.get("classname") for case in cases[:2]] == [
        "mqttaudit.probe.subscribe-empty-filter",
        "mqttaudit.probe.reserved-packet-type-0",
    ]
    properties = [(p.get("name"), p.get("value")) for p in cases[0].findall("properties/property")]
    assert properties[:3] == [("statement", "MQTT-4.7.3-1"), ("statement", "MQTT-4.8.0-1"), ("section", "4.7.3")]
    assert properties[3:6] == [
        ("protocol", "3.1.1"),
        ("level", "MUST"),
        (
            "rule",
            "MQTT-4.7.3-1 (MQTT 3.1.1, section 4.7.3, MUST, binds the client and the server): Every Topic Name and "
            "Topic Filter must be at least one character long",
        ),
    ]
    assert cases[0].get("time") == "0.500"
    assert len(suite.findall("testcase/failure")) == 3 and len(suite.findall("testcase/skipped")) == 2
    assert cases[1].find("failure") is None and cases[1].find("skipped") is None


def test_junit_failure_carries_the_rule_reason_and_transcript(run: ProbeRun) -> None:
    suite = ET.fromstring(ET.tostring(probe_run_to_junit(run)))
    failure = suite.findall("testcase")[0].find("failure")
    assert failure is not None
    assert failure.get("type") == "MQTT-4.8.0-1"
    assert failure.get("message", "").startswith("MQTT-4.8.0-1: the server kept the connection open for 2.000 s")
    assert "bytes at offset 30: 82 05 00 01 00 00 00" in (failure.text or "")
    assert "client -> server  SUBSCRIBE id=1 ['' QoS 0]" in (failure.text or "")
    skipped = suite.findall("testcase")[5].find("skipped")
    assert skipped is not None and skipped.get("message") == "inconclusive: setup: no SUBACK for packet id 1 on c1"


def test_junit_escapes_markup_and_control_characters(run: ProbeRun, tmp_path: Path) -> None:
    data = write_probe_reports(run, tmp_path)[2].read_bytes()
    assert b"\x00" not in data and b"\x01" not in data and b"\x7f" not in data
    assert b"topic &lt;a&amp;b&gt; \\x00\\x01\\x7f end" in data
    failure = ET.fromstring(data).findall("testcase")[3].find("failure")
    assert failure is not None
    assert failure.get("message") == "MQTT-4.8.0-1: kept open; last topic topic <a&b> \\x00\\x01\\x7f end"


# --- matrix --------------------------------------------------------------------------------------------------------


@pytest.fixture
def runs(run: ProbeRun) -> list[tuple[str, ProbeRun]]:
    """Broker A is ``run``; broker B passes what A failed, has no Will case and a setup problem on QoS 2."""
    b = probe_run(
        [
            judged(empty_filter_fail().case, [], assessed=["MQTT-4.7.3-1", "MQTT-4.8.0-1"]),
            reserved_type_pass(),
            pingreq_pass(),
            judged(fifth_length_byte_fail().case, [], assessed=["MQTT-4.8.0-1"]),
            setup_inconclusive(),
            judged(qos2_not_applicable().case, [], assessed=["MQTT-4.3.3-2"]),
        ],
        port=1884,
    )
    return [("broker-a", run), ("", b)]


EXPECTED_MATRIX = {
    # statement: (broker A, broker B)
    "MQTT-2.2.1-reserved-type": ("pass", "pass"),
    "MQTT-3.1.2-8": ("FAIL", "—"),
    "MQTT-3.12.4-1": ("pass", "pass"),
    "MQTT-4.3.3-2": ("?", "?"),  # A: inconclusive beats not applicable; B: inconclusive beats pass
    "MQTT-4.7.3-1": ("pass", "pass"),  # A's failing case broke only MQTT-4.8.0-1
    "MQTT-4.8.0-1": ("FAIL", "?"),  # A: fail beats inconclusive and pass; B: inconclusive beats pass
}


def test_matrix_cells_follow_fail_over_inconclusive_over_pass(runs: list[tuple[str, ProbeRun]]) -> None:
    matrix = build_matrix(runs)
    assert [column.label for column in matrix.columns] == ["broker-a", "mqtt://127.0.0.1:1884"]
    assert {row.statement: tuple(cell.text for cell in row.cells) for row in matrix.rows} == EXPECTED_MATRIX


def test_matrix_rows_are_in_section_order(runs: list[tuple[str, ProbeRun]]) -> None:
    statements = [row.statement for row in build_matrix(runs).rows]
    assert statements == [
        "MQTT-2.2.1-reserved-type",
        "MQTT-3.1.2-8",
        "MQTT-3.12.4-1",
        "MQTT-4.3.3-2",
        "MQTT-4.7.3-1",
        "MQTT-4.8.0-1",
    ]


def test_matrix_markdown_has_every_statement_by_broker_cell(runs: list[tuple[str, ProbeRun]], tmp_path: Path) -> None:
    markdown = write_matrix(runs, tmp_path)[0].read_text(encoding="utf-8")
    assert "| Statement | Section | Level | Summary | broker-a | mqtt://127.0.0.1:1884 |" in plain(markdown)
    rows = {
        cells[0]: tuple(cells[4:])
        for line in markdown.splitlines()
        if line.startswith("| MQTT-")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    assert rows == EXPECTED_MATRIX
    assert "| broker-a | `mqtt://127.0.0.1:1883` | 2025-05-01T10:00:00+00:00 | 2 | 3 | 1 | 1 |" in markdown
    assert "- broker-a: `will-published` (The Will is published when a client drops): MQTT-3.1.2-8: no PUBLISH" in (
        markdown
    )


class _MatrixPage(HTMLParser):
    """Collects the matrix rows (statement, its title, cell classes and texts) and every referenced URL."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, Any]] = {}
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self._row: dict[str, Any] | None = None
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.add(tag)
        self.urls += [value or "" for name, value in attrs if name in ("href", "src")]
        if tag == "th" and attributes.get("class") == "statement":
            self._row = {"title": attributes.get("title"), "cells": [], "classes": []}
            self._in = "statement"
        elif tag == "td" and self._row is not None and "cell" in (attributes.get("class") or ""):
            self._row["classes"].append((attributes.get("class") or "").split()[1])
            self._row["cells"].append("")
            self._in = "cell"

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None
        if tag in ("th", "td"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._row is None or self._in is None:
            return
        if self._in == "statement":
            self.rows[data] = self._row
        else:
            self._row["cells"][-1] += data


def test_matrix_html_is_colour_coded_and_self_contained(runs: list[tuple[str, ProbeRun]], tmp_path: Path) -> None:
    html = write_matrix(runs, tmp_path)[1].read_text(encoding="utf-8")
    page = _MatrixPage()
    page.feed(html)
    assert {statement: tuple(row["cells"]) for statement, row in page.rows.items()} == EXPECTED_MATRIX
    assert page.rows["MQTT-4.8.0-1"]["classes"] == ["fail", "inconclusive"]
    assert page.rows["MQTT-3.1.2-8"]["classes"] == ["fail", "none"]
    assert page.rows["MQTT-4.7.3-1"]["title"] == "Every Topic Name and Topic Filter must be at least one character long"
    assert "link" not in page.tags and "script" not in page.tags and "img" not in page.tags
    assert all(url.startswith("#") for url in page.urls)
    assert "http" not in html
    assert ".fail {" in html  # the colours are inline CSS


def test_matrix_html_links_failing_cells_to_the_case_list(runs: list[tuple[str, ProbeRun]], tmp_path: Path) -> None:
    html = write_matrix(runs, tmp_path)[1].read_text(encoding="utf-8")
    assert '<a href="#b1-will-published">FAIL</a>' in html
    assert '<li id="b1-will-published">' in html
    assert "<td>2</td>" not in html  # counts sit in coloured cells
    assert '<td class="fail">3</td>' in html and '<td class="fail">0</td>' in html
    # Details with markup and control bytes are escaped.
    assert "topic &lt;a&amp;b&gt; \\x00\\x01\\x7f end" in html
    assert "\x00" not in html and "\x7f" not in html


def test_a_routing_finding_shows_its_kind() -> None:
    case = make_case("leak", ("MQTT-3.3.2-3",), "A delivery no filter matches", expected="not delivered")
    c1 = Conversation("subscriber", "mqa0leak").connected().quiet(2.5)
    finding = Finding(
        "MQTT-3.3.2-3",
        SERVER,
        1.0,
        2,
        "server PUBLISH to 'u/1' (event 2) matches no Topic Filter the client subscribed to on this connection",
        "the server sends a client only messages whose Topic Name matches one of its subscriptions",
        "subscriber",
        "leak",
    )
    result = judged(case, [c1], [finding], assessed=["MQTT-3.3.2-3"])
    assert result.evidence()["findings"][0]["kind"] == "leak"
    section = failure_sections(probe_run_to_markdown(probe_run([result])))["leak"]
    assert "- **MQTT-3.3.2-3** — leak (server, at " in section
