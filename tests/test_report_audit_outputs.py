"""The audit's outputs for machines: ``findings.jsonl`` (one JSON object per violation and routing finding, streamed
from the Parquet tables) and ``junit.xml`` (one test case per rule and side), written from small tables made here
with the audit's own table schemas; the tool's version in the report data; the byte accounting's wording."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mqttaudit import __version__
from mqttaudit.codec import rules as codec_rules
from mqttaudit.judge import CHECKED_RULES
from mqttaudit.pipeline.tables import TABLE_COLUMNS, table_schema
from mqttaudit.report import AuditReportData, audit_flows, audit_tables, write_audit_reports
from mqttaudit.report.audit_jsonl import json_line
from mqttaudit.report.audit_junit import FindingTally, audit_to_junit, junit_document
from mqttaudit.report.output_schemas import output_schema
from mqttaudit.spec import load_catalogue

T0 = 1746093600.0  # 2025-05-01 10:00:00 UTC
CAPTURE = "edge.pcapng"
CATALOGUE = load_catalogue("3.1.1")
#: Ill-formed UTF-8 from the wire as the codec keeps it (PEP 383), and a control character.
SURROGATE_TOPIC = "a/\udcff"
HOSTILE = "<script>\x01</script>"


def violation(**row: Any) -> dict[str, Any]:
    base = {
        "capture": CAPTURE,
        "flow": "c1@1",
        "event": 2,
        "rule": "MQTT-4.7.3-1",
        "level": "MUST",
        "section": "4.7.3",
        "actor": "client",
        "origin": "codec",
        "kind": None,
        "frame": 2,
        "offset": 20,
        "time": T0 + 1,
        "detail": "Topic Filter is empty (length 0x0000)",
        "expected": None,
        "evidence": "82 05 00 01 00 00 00",
    }
    return {**base, **row}


VIOLATIONS = [
    violation(event=9, frame=40, offset=90, time=T0 + 9, evidence="a2 04 00 02 00 00"),
    violation(),  # the earliest of MQTT-4.7.3-1 by the client, though not the first row
    violation(
        flow="c2@5",
        rule="MQTT-4.8.0-1",
        section="4.8",
        actor="server",
        origin="judge",
        kind="answered",
        frame=3,
        offset=4,
        time=T0 + 2,
        detail=f"server PUBLISH to {SURROGATE_TOPIC!s} answers {HOSTILE}",
        expected="the server closes the connection",
        evidence="90 03 00 01 00",
    ),
]
ROUTING = [
    {
        "broker": "10.0.0.1:1883",
        "flow": "sub@7",
        "event": 4,
        "kind": "leak",
        "rule": "MQTT-3.3.2-3",
        "level": "MUST",
        "section": "3.3.2",
        "time": T0 + 3,
        "detail": f"server PUBLISH to {SURROGATE_TOPIC!r} matches no Topic Filter",
        "expected": "only messages that match a subscription",
    }
]
CONNECTIONS = [
    {"capture": "other.pcap", "flow": "c1@1", "client": "10.0.0.2:5000", "server": "10.0.0.1:1883"},
    {"capture": "subscribers.pcap", "flow": "sub@7", "client": "10.0.0.3:5001", "server": "10.0.0.1:1883"},
]


def table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    """The rows with the table's schema; text holding ill-formed UTF-8 (lone surrogates) is stored as the wire's
    bytes, which pyarrow keeps in a string column without checking."""
    schema = table_schema(name)
    arrays = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        if field.type == pa.string():
            raw = pa.array([None if v is None else v.encode("utf-8", "surrogateescape") for v in values], pa.binary())
            arrays.append(pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count))
        else:
            arrays.append(pa.array(values, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def audit_dir(out: Path, tables: dict[str, list[dict[str, Any]]]) -> Path:
    """An audit output folder holding the given rows, one Parquet file per table (as a task writes them)."""
    for name, rows in tables.items():
        (out / name).mkdir(parents=True)
        pq.write_table(table(name, rows), out / name / "part-00000-x.parquet")
    return out


def read_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    data.decode("utf-8")  # the whole file is valid UTF-8
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


@pytest.fixture
def written(tmp_path: Path) -> dict[str, Any]:
    out = audit_dir(tmp_path, {"violations": VIOLATIONS, "routing_findings": ROUTING, "connections": CONNECTIONS})
    data = AuditReportData(summary={"captures": [{"file": CAPTURE, "bytes": 1, "records": 1}]})
    paths = write_audit_reports(out, data)
    suite = ET.fromstring((out / "junit.xml").read_bytes())
    return {"paths": paths, "lines": read_lines(out / "findings.jsonl"), "suite": suite, "out": out}


def test_the_audit_reports_include_findings_jsonl_and_junit_xml(written: dict[str, Any]) -> None:
    assert [path.name for path in written["paths"]] == ["report.html", "findings.md", "findings.jsonl", "junit.xml"]


def test_findings_jsonl_has_one_line_per_violation_and_routing_finding_with_the_tables_fields(
    written: dict[str, Any],
) -> None:
    lines = written["lines"]
    assert [line["event_type"] for line in lines] == ["violation"] * 3 + ["routing"]
    extra = {"event_type", "timestamp", "mqttaudit_version", "capture", *audit_flows.FIELDS}
    for line in lines[:3]:
        assert set(line) == extra | set(TABLE_COLUMNS["violations"])
    assert set(lines[3]) == extra | set(TABLE_COLUMNS["routing_findings"])
    assert {line["mqttaudit_version"] for line in lines} == {__version__}
    assert [line["rule"] for line in lines] == ["MQTT-4.7.3-1", "MQTT-4.7.3-1", "MQTT-4.8.0-1", "MQTT-3.3.2-3"]
    first = lines[1]
    assert (first["capture"], first["flow"], first["frame"], first["offset"]) == (CAPTURE, "c1@1", 2, 20)
    assert first["evidence"] == "82 05 00 01 00 00 00" and first["time"] == T0 + 1
    assert first["timestamp"] == "2025-05-01T10:00:01.000000+00:00"


def test_each_line_names_its_connection_as_eve_does_from_the_side_judged(written: dict[str, Any]) -> None:
    client, unknown, routing = written["lines"][1], written["lines"][2], written["lines"][3]
    # A client's violation: from the client to the server; a routing finding: from the broker to the subscriber.
    assert [client[k] for k in ("src_ip", "src_port", "dest_ip", "dest_port")] == ["10.0.0.2", 5000, "10.0.0.1", 1883]
    assert [routing[k] for k in ("src_ip", "src_port", "dest_ip", "dest_port")] == ["10.0.0.1", 1883, "10.0.0.3", 5001]
    assert client["community_id"] == audit_flows.community_id("10.0.0.1", 1883, "10.0.0.2", 5000)
    assert client["proto"] == routing["proto"] == "TCP"
    assert client["flow_id"] == audit_flows.flow_id("c1@1") != routing["flow_id"]
    # A flow the connections table does not name: its endpoints are unknown, never guessed.
    assert [unknown[k] for k in ("src_ip", "src_port", "dest_ip", "dest_port", "community_id")] == [None] * 5
    assert unknown["flow_id"] == audit_flows.flow_id("c2@5")
    validator = jsonschema.Draft202012Validator(
        output_schema("findings.jsonl"), format_checker=jsonschema.FormatChecker()
    )
    for line in written["lines"]:
        assert not [error.message for error in validator.iter_errors(line)], line


def test_a_routing_finding_carries_the_capture_of_its_connection(written: dict[str, Any]) -> None:
    routing = written["lines"][3]
    assert routing["capture"] == "subscribers.pcap" and routing["broker"] == "10.0.0.1:1883"
    assert routing["kind"] == "leak" and routing["flow"] == "sub@7"


def test_ill_formed_text_from_the_wire_becomes_byte_escapes(written: dict[str, Any]) -> None:
    judge = written["lines"][2]
    assert judge["detail"] == f"server PUBLISH to a/\\xff answers {HOSTILE}"
    assert "\\udcff" in written["lines"][3]["detail"]  # repr() had already escaped it: kept as it was
    assert json_line({"topic": "x\udc80\udcffy", "t": 1}) == b'{"topic":"x\\\\x80\\\\xffy","t":1}\n'
    assert json.loads(json_line({"topic": "x\udc80\udcffy"}))["topic"] == "x\\x80\\xffy"


def test_non_finite_times_are_null_in_json(tmp_path: Path) -> None:
    out = audit_dir(tmp_path, {"violations": [violation(time=math.nan)], "routing_findings": []})
    write_audit_reports(out, AuditReportData())
    (line,) = read_lines(out / "findings.jsonl")
    assert line["time"] is None and line["timestamp"] is None


def test_a_string_column_holding_bytes_that_are_not_utf8_is_read_with_byte_escapes(tmp_path: Path) -> None:
    raw = pa.array([b"c1@1", b"a/\xff\xfe"], pa.binary())
    column = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    with pytest.raises(UnicodeDecodeError):
        column.to_pylist()
    assert audit_tables.column_values(column) == ["c1@1", "a/\\xff\\xfe"]
    rows = table("violations", [violation(), violation()])
    rows = rows.set_column(rows.schema.get_field_index("detail"), "detail", column)
    (tmp_path / "violations").mkdir()
    pq.write_table(rows, tmp_path / "violations" / "part-0.parquet")
    (tmp_path / "routing_findings").mkdir()
    write_audit_reports(tmp_path, AuditReportData())
    assert [line["detail"] for line in read_lines(tmp_path / "findings.jsonl")] == ["c1@1", "a/\\xff\\xfe"]


def test_rows_are_streamed_batch_by_batch_across_files_skipping_unpublished_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_tables, "BATCH_ROWS", 2)
    folder = tmp_path / "violations"
    folder.mkdir(parents=True)
    for part in range(3):
        rows = [violation(event=part * 10 + n) for n in range(5)]
        pq.write_table(table("violations", rows), folder / f"part-{part}.parquet", row_group_size=5)
    pq.write_table(table("violations", [violation(event=999)]), folder / ".part-9.parquet.tmp")  # a task not done
    (folder / "_SUCCESS").write_bytes(b"")
    batches = list(audit_tables._batches(folder, None))
    assert max(batch.num_rows for batch in batches) == 2
    (tmp_path / "routing_findings").mkdir()
    write_audit_reports(tmp_path, AuditReportData())
    events = sorted(line["event"] for line in read_lines(tmp_path / "findings.jsonl"))
    assert events == [part * 10 + n for part in range(3) for n in range(5)]


def cases_by_key(suite: ET.Element) -> dict[tuple[str, str], ET.Element]:
    """(classname, rule id and what follows it up to the colon) -> test case."""
    return {(case.attrib["classname"], case.attrib["name"].split(":")[0]): case for case in suite.iter("testcase")}


def checked_pairs() -> set[tuple[str, str]]:
    pairs = set()
    for rule in CATALOGUE:
        if rule.id in codec_rules.CHECKED or rule.id in CHECKED_RULES:
            sides = ("client", "server") if rule.actor == "both" else (rule.actor,)
            pairs.update((f"mqttaudit.audit.{side}", rule.id) for side in sides)
    return pairs


def test_junit_counts_a_case_per_checked_rule_and_side_and_fails_the_violated_ones(written: dict[str, Any]) -> None:
    suite, cases = written["suite"], cases_by_key(written["suite"])
    expected = checked_pairs() - {("mqttaudit.audit.server", "MQTT-3.3.2-3")}  # its findings are routing cases
    expected |= {("mqttaudit.audit.routing", "MQTT-3.3.2-3 (leak)")}
    assert set(cases) == expected
    assert int(suite.attrib["tests"]) == len(expected) == len(list(suite.iter("testcase")))
    failed = {key for key, case in cases.items() if case.find("failure") is not None}
    assert failed == {
        ("mqttaudit.audit.client", "MQTT-4.7.3-1"),
        ("mqttaudit.audit.server", "MQTT-4.8.0-1"),
        ("mqttaudit.audit.routing", "MQTT-3.3.2-3 (leak)"),
    }
    assert suite.attrib["failures"] == "3" and suite.attrib["errors"] == "0"
    passing = cases[("mqttaudit.audit.client", "MQTT-3.3.1-4")]
    assert passing.find("failure") is None
    assert passing.attrib["name"] == f"MQTT-3.3.1-4: {CATALOGUE['MQTT-3.3.1-4'].summary}"
    properties = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
    assert properties == {"mqttaudit_version": __version__, "capture": CAPTURE}


def test_junit_failure_gives_the_count_and_the_first_violations_evidence(written: dict[str, Any]) -> None:
    failure = cases_by_key(written["suite"])[("mqttaudit.audit.client", "MQTT-4.7.3-1")].find("failure")
    assert failure is not None and failure.attrib["type"] == "MQTT-4.7.3-1"
    assert failure.attrib["message"] == "2 violations by the client; first: Topic Filter is empty (length 0x0000)"
    text = failure.text or ""
    assert text.startswith("MQTT-4.7.3-1: 2 violations by the client.\nThe first one:\n")
    for shown in (
        f"  capture: {CAPTURE}",
        "  flow: c1@1",
        "  frame: 2",
        "  stream offset: 20",
        "  time: 2025-05-01 10:00:01.000 UTC",
        "  detail: Topic Filter is empty (length 0x0000)",
        "  evidence (hex): 82 05 00 01 00 00 00",
    ):
        assert shown in text.splitlines()
    routing = cases_by_key(written["suite"])[("mqttaudit.audit.routing", "MQTT-3.3.2-3 (leak)")].find("failure")
    assert routing is not None and "1 routing finding of kind leak" in routing.attrib["message"]
    assert "  capture: subscribers.pcap" in (routing.text or "") and "  broker: 10.0.0.1:1883" in (routing.text or "")


def test_junit_text_from_the_wire_is_escaped_for_xml(written: dict[str, Any]) -> None:
    document = (written["out"] / "junit.xml").read_bytes()
    assert b"<script>" not in document and b"\x01" not in document
    failure = cases_by_key(written["suite"])[("mqttaudit.audit.server", "MQTT-4.8.0-1")].find("failure")
    assert failure is not None
    assert "  detail: server PUBLISH to a/\\xff answers <script>\\x01</script>" in (failure.text or "")
    assert "<script>\\x01</script>" in failure.attrib["message"]


def test_an_audit_without_findings_writes_an_empty_jsonl_and_a_passing_junit(tmp_path: Path) -> None:
    out = audit_dir(tmp_path, {"violations": [], "routing_findings": [], "connections": []})
    write_audit_reports(out, AuditReportData())
    assert (out / "findings.jsonl").read_bytes() == b""
    suite = ET.fromstring((out / "junit.xml").read_bytes())
    assert suite.attrib["failures"] == "0" and int(suite.attrib["tests"]) == len(checked_pairs())
    assert set(cases_by_key(suite)) == checked_pairs()


def test_report_data_carries_the_version_and_refuses_a_wrong_type() -> None:
    data = AuditReportData(mqttaudit_version=__version__)
    assert json.loads(data.to_json())["mqttaudit_version"] == __version__
    assert AuditReportData.from_json(data.to_json()) == data
    assert AuditReportData.from_json("{}").mqttaudit_version == ""  # not recorded: not guessed
    with pytest.raises(ValueError, match="mqttaudit_version: expected a string"):
        AuditReportData.from_json('{"mqttaudit_version": 1}')


def test_the_byte_accounting_names_what_the_malformed_bytes_are(tmp_path: Path) -> None:
    counted = {"mqtt_bytes": 10, "packet_bytes": 6, "malformed_bytes": 4, "gap_bytes": 0, "unsynced_bytes": 0}
    paths = write_audit_reports(tmp_path, AuditReportData(summary={"bytes": counted}))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert "could not be framed" not in text
        assert (
            "in malformed frames (packets that break a MUST-level codec rule of the version of their connection" in text
        )
        assert (
            "in whole MQTT packets (packets with no MUST-level codec violation of the version of their connection"
            in text
        )
        assert "MQTT 3.1.1, 5.0 or 3.1, and the packets of connections framed only: no CONNECT captured" in text


def test_junit_escapes_every_field_of_a_row_including_rule_side_and_kind() -> None:
    tally = FindingTally()
    tally.add("violation", violation(rule="MQTT-9\x07", actor="cli\x1bent", detail="a\x00b"))
    tally.add("routing", {**ROUTING[0], "kind": "le\x0bak", "broker": "b\x7f"})
    document = junit_document(audit_to_junit(tally, CATALOGUE, captures=["cap\x1b.pcap"], checked=[]))
    suite = ET.fromstring(document)  # XML 1.0 cannot hold these characters at all: escaped, it parses
    assert not any(byte < 0x20 and byte not in b"\n\t" for byte in document)
    assert sorted(case.attrib["classname"] for case in suite.iter("testcase")) == [
        "mqttaudit.audit.cli\\x1bent",
        "mqttaudit.audit.routing",
    ]
    names = [case.attrib["name"] for case in suite.iter("testcase")]
    assert "MQTT-9\\x07: (not in the rule catalogue)" in names
    assert any(name.startswith("MQTT-3.3.2-3 (le\\x0bak): ") for name in names)
    assert {p.attrib["value"] for p in suite.iter("property")} == {__version__, "cap\\x1b.pcap"}


def test_junit_and_jsonl_keep_a_5_0_finding_apart_from_the_3_1_1_statement_of_the_same_id(tmp_path: Path) -> None:
    # MQTT-3.1.2-17: a User Name statement in MQTT 5.0, a Will statement in MQTT 3.1.1.
    v5 = violation(rule="MQTT-3.1.2-17", section="3.1.2.8", rule_version="5.0", detail="no User Name follows")
    out = audit_dir(tmp_path, {"violations": [v5], "routing_findings": [], "connections": CONNECTIONS})
    write_audit_reports(out, AuditReportData())
    [line] = read_lines(out / "findings.jsonl")
    assert (line["rule"], line["rule_version"]) == ("MQTT-3.1.2-17", "5.0")
    cases = cases_by_key(ET.fromstring((out / "junit.xml").read_bytes()))
    failed = cases["mqttaudit.audit.client", "MQTT-3.1.2-17 (MQTT 5.0)"]
    assert failed.find("failure") is not None
    assert failed.attrib["name"].endswith(load_catalogue("5.0")["MQTT-3.1.2-17"].summary)
    # The 3.1.1 statement of that id stays a passing case of its own.
    passing = cases["mqttaudit.audit.server", "MQTT-3.1.2-17"]
    assert passing.find("failure") is None and passing.attrib["name"].endswith(CATALOGUE["MQTT-3.1.2-17"].summary)
