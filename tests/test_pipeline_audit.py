"""The audit on Spark (``local[2]``), on captures recorded here with tcpdump while real clients talk through a real
mosquitto, and on broken captures: every table written, counts that reconcile, violations attributed to the side
that broke the rule, the broker judged on its reactions, and bad input reported without a crash."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttaudit.cli.demo import TOP
from mqttaudit.cli.main import main
from mqttaudit.judge.reasons import EXPLANATIONS, MID_STREAM
from mqttaudit.pipeline.audit import CHUNKS_PER_CORE, MIN_CHUNK_BYTES, TABLES, chunk_size, run_audit
from mqttaudit.pipeline.sources import AuditInputError
from mqttaudit.probe.brokers import BrokerUnavailable, start_broker
from mqttaudit.probe.case import CASES
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.probe.runner import DEFAULT_CONCURRENCY
from mqttaudit.probe.traffic import MISBEHAVIOUR, run_traffic
from mqttaudit.report.output_dir import MARKER

from .cli_in_process import run_mqttaudit
from .corpus import capture, require_captures
from .whole_replay import whole_model_audit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, Any]]:
    """A capture of paho-mqtt clients and three misbehaving raw clients talking through mosquitto."""
    folder = tmp_path_factory.mktemp("recorded")
    try:
        broker = start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker, tcpdump_recording(folder / "traffic.pcap", broker.port):
        report = run_traffic("127.0.0.1", broker.port)
    yield folder / "traffic.pcap", broker.port, report


@pytest.fixture(scope="module")
def audited(
    spark: SparkSession, recorded: tuple[Path, int, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The recorded capture through ``mqttaudit audit`` once (on the test session): its exit status, its output, the
    summary it wrote and its tables, read by every test of it."""
    capture, port, report = recorded
    out = tmp_path_factory.mktemp("audit")
    options = ("--ports", str(port), "--out", str(out), "--tolerance", "2", "--engine", "spark")
    ran = run_mqttaudit("audit", str(capture), *options)
    summary = json.loads((out / "summary.json").read_text())
    tables = {name: pq.read_table(out / name).to_pylist() for name in TABLES}
    return {"ran": ran, "summary": summary, "tables": tables, "out": out, "traffic": report, "port": port}


def test_every_misbehaving_client_is_caught_with_the_statement_it_broke(audited: dict[str, Any]) -> None:
    violations = audited["tables"]["violations"]
    connections = {c["flow"]: c for c in audited["tables"]["connections"]}
    for client_id, _defect, rule in MISBEHAVIOUR:
        mine = [v for v in violations if connections[v["flow"]]["client_id"] == client_id]
        assert (rule, "client", "codec") in {(v["rule"], v["actor"], v["origin"]) for v in mine}, client_id
        assert all(v["evidence"] for v in mine if v["origin"] == "codec")


def test_mosquitto_closing_on_those_clients_is_judged_conformant(audited: dict[str, Any]) -> None:
    assert all(audited["traffic"].closed_on_defect.values())
    connections = {c["flow"]: c for c in audited["tables"]["connections"]}
    bad = {client_id for client_id, _, _ in MISBEHAVIOUR}
    for flow, connection in connections.items():
        if connection["client_id"] in bad:
            assert connection["ended_by"] == "server", connection
            server_side = [v for v in audited["tables"]["violations"] if v["flow"] == flow and v["actor"] == "server"]
            assert server_side == [], server_side


def test_no_routing_finding_and_every_owed_delivery_observed_where_the_capture_saw_it(
    audited: dict[str, Any],
) -> None:
    """A delivery the capture did not see (tcpdump dropped its segment: a gap towards that subscriber) is not
    assessable, never missing; every other owed delivery was observed."""
    assert audited["tables"]["routing_findings"] == []
    owed = [d for d in audited["tables"]["deliveries"] if d["expected"] == "owed"]
    blind = {g["flow"] for g in audited["tables"]["gaps"] if g["kind"] == "gap" and g["direction"] == "server"}
    assert owed and all(d["observed"] or d["subscriber_flow"] in blind for d in owed)
    observed = [d for d in owed if d["observed"]]
    assert len(observed) <= sum(audited["traffic"].received.values())
    if not blind:
        assert len(observed) == sum(audited["traffic"].received.values())


def test_the_routing_replay_runs_a_task_per_core_for_the_broker_whose_row_counts_its_tables(
    audited: dict[str, Any],
) -> None:
    """One broker: its row in ``routing_replays``, whose counts are the tables' rows, replayed by two tasks side by
    side on ``local[2]`` (a shard of its connections each)."""
    replays = audited["summary"]["routing_replays"]
    (broker,) = {row["server"] for row in audited["tables"]["connections"]}
    assert [row["broker"] for row in replays] == [broker] and broker.endswith(f":{audited['port']}")
    assert replays[0]["tasks"] == 2
    assert replays[0]["deliveries"] == len(audited["tables"]["deliveries"])
    assert replays[0]["routing_findings"] == len(audited["tables"]["routing_findings"])


def test_the_recording_s_many_client_ids_get_the_whole_model_s_deliveries_and_findings(
    recorded: tuple[Path, int, Any], audited: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recording's ClientIds (paho clients and the raw misbehaving ones) replayed slice by slice on Spark: the
    deliveries, routing findings and not-assessable rows of the whole model, every session at once."""
    capture, port, _report = recorded
    out = tmp_path / "whole"
    whole_model_audit(monkeypatch, [capture], out, ports=[port], tolerance=2.0)
    client_ids = {row["client_id"] for row in audited["tables"]["connections"] if row["client_id"]}
    assert len(client_ids) > 2, client_ids

    def rows(folder: Path, table: str) -> list[str]:
        return sorted(json.dumps(row, sort_keys=True, default=str) for row in pq.read_table(folder / table).to_pylist())

    for table in ("deliveries", "routing_findings", "not_assessable"):
        assert rows(audited["out"], table) == rows(out, table), table
    assert rows(out, "deliveries")  # something was owed


def test_the_byte_account_reconciles_and_the_summary_counts_the_tables(audited: dict[str, Any]) -> None:
    summary = json.loads((audited["out"] / "summary.json").read_text())
    account = summary["bytes"]
    assert account["reconciles"] and account["mqtt_bytes"] > 0
    assert account["mqtt_bytes"] == sum(
        account[k] for k in ("packet_bytes", "malformed_bytes", "gap_bytes", "unsynced_bytes")
    )
    tables = audited["tables"]
    assert summary["counts"]["packets"] == len(tables["packets"])
    assert summary["counts"]["connections"] == len(tables["connections"])
    assert summary["counts"]["violations"] == len(tables["violations"])
    # Every frame is a row of ``packets`` (malformed ones too), so their lengths add up to the framed bytes.
    assert sum(p["length"] for p in tables["packets"]) == account["packet_bytes"] + account["malformed_bytes"]


def test_packets_carry_frames_offsets_and_directions(audited: dict[str, Any]) -> None:
    packets = audited["tables"]["packets"]
    assert {p["direction"] for p in packets} == {"client", "server"}
    assert all(p["frame"] is not None and p["offset"] is not None for p in packets)
    connects = [p for p in packets if p["type"] == "CONNECT"]
    assert {p["client_id"] for p in connects} >= {client_id for client_id, _, _ in MISBEHAVIOUR}


def test_the_reports_are_written_and_nothing_else_is_left(audited: dict[str, Any]) -> None:
    out = audited["out"]
    reports = {"summary.json", "report.html", "findings.md", "report_data.json", "findings.jsonl", "junit.xml", MARKER}
    assert {path.name for path in out.iterdir()} == {*TABLES, *reports}  # the replay's transcripts are gone
    findings = [json.loads(line) for line in (out / "findings.jsonl").read_text(encoding="utf-8").splitlines()]
    tables = audited["tables"]
    assert len(findings) == len(tables["violations"]) + len(tables["routing_findings"]) > 0
    suite = ElementTree.fromstring((out / "junit.xml").read_bytes())
    violated = {(v["rule"], v["actor"]) for v in tables["violations"]}
    assert int(suite.attrib["failures"]) == len(violated) + len(
        {(r["rule"], r["kind"]) for r in tables["routing_findings"]}
    )
    html = (out / "report.html").read_text()
    assert "MQTT-4.7.3-1" in html and "<svg" in html and "http://" not in html.replace("http://www.w3.org", "")
    assert "MQTT-2.2.3-four-bytes" in (out / "findings.md").read_text()


def test_a_failing_audit_exits_1_and_says_where_the_report_is(audited: dict[str, Any]) -> None:
    ran = audited["ran"]
    assert ran.returncode == 1, ran.stderr
    assert "violation(s)" in ran.stdout and str(audited["out"] / "report.html") in ran.stdout


def test_truncated_and_corrupt_captures_are_reported_and_the_rest_is_audited(
    spark: SparkSession, recorded: tuple[Path, int, Any], tmp_path: Path
) -> None:
    capture, port, _ = recorded
    data = capture.read_bytes()
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "truncated.pcap").write_bytes(data[: len(data) - 7])
    (folder / "corrupt.pcap").write_bytes(b"\x00\x01garbage" + data[10:200])
    shutil.copy(capture, folder / "whole.pcap")
    result = run_audit([str(folder)], tmp_path / "out", ports=[port], tolerance=2.0, spark=spark)
    errors = {e["capture"]: e for e in result.summary["errors"]}
    assert "corrupt.pcap" in errors and errors["corrupt.pcap"]["reason"]
    assert [t["capture"] for t in result.summary["truncated"]] == ["truncated.pcap"]
    assert result.summary["bytes"]["reconciles"]
    assert result.summary["counts"]["connections"] > 0


def test_a_capture_that_starts_mid_connection_is_judged_from_what_is_known(
    spark: SparkSession, recorded: tuple[Path, int, Any], tmp_path: Path
) -> None:
    from mqttaudit.capture import read_records
    from mqttaudit.capture.writer import pcap_bytes

    capture, port, _ = recorded
    records = list(read_records(str(capture)))
    tail = records[len(records) // 2 :]
    cut = tmp_path / "middle.pcap"
    cut.write_bytes(pcap_bytes([(r[0], r[2]) for r in tail], linktype=records[0][1]))
    result = run_audit([str(cut)], tmp_path / "out", ports=[port], tolerance=2.0, spark=spark)
    connections = pq.read_table(tmp_path / "out" / "connections").to_pylist()
    assert any(c["mid_stream"] for c in connections)
    violations = pq.read_table(tmp_path / "out" / "violations").to_pylist()
    assert not [v for v in violations if v["rule"] in ("MQTT-3.1.0-1", "MQTT-3.2.0-1")]
    assert result.summary["bytes"]["reconciles"]


def test_no_capture_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(AuditInputError):
        run_audit([str(tmp_path / "none-*.pcap")], tmp_path / "out")


def test_a_rotated_capture_is_audited_like_the_whole_one(
    spark: SparkSession, recorded: tuple[Path, int, Any], audited: dict[str, Any], tmp_path: Path
) -> None:
    """Connections that cross from one file to the next (and chunks of 4 KiB) are reassembled as one, read
    through file:// URLs."""
    from mqttaudit.capture import read_records
    from mqttaudit.capture.writer import pcap_bytes

    capture, port, _ = recorded
    records = list(read_records(str(capture)))
    half = len(records) // 2
    for name, part in (("rot-1.pcap", records[:half]), ("rot-2.pcap", records[half:])):
        (tmp_path / name).write_bytes(pcap_bytes([(r[0], r[2]) for r in part], linktype=records[0][1]))
    result = run_audit(
        [f"file://{tmp_path}/rot-*.pcap"], tmp_path / "out", ports=[port], tolerance=2.0, chunk_bytes=4096, spark=spark
    )
    whole = audited["summary"]
    assert len(result.summary["captures"]) == 2
    assert result.summary["counts"]["connections"] == whole["counts"]["connections"]
    assert result.summary["counts"]["packets"] == whole["counts"]["packets"]
    assert result.summary["bytes"] == whole["bytes"]
    rules = sorted((v["rule"], v["actor"]) for v in pq.read_table(tmp_path / "out" / "violations").to_pylist())
    assert rules == sorted((v["rule"], v["actor"]) for v in audited["tables"]["violations"])


@pytest.mark.captures
def test_every_shared_capture_is_audited_on_spark_without_a_crash_and_the_bytes_reconcile(
    spark: SparkSession, tmp_path: Path
) -> None:
    """All captures of the third-party corpus (other projects' suites) in one audit; the per-capture expectations
    are checked without Spark in test_capture_expectations.py."""
    folder = require_captures()
    ports: set[int] = set()
    for line in capture("INVENTORY.tsv").read_text().splitlines()[1:]:
        ports |= {int(p) for p in line.split("\t")[9].split(",") if p}
    result = run_audit([str(folder)], tmp_path / "out", ports=sorted(ports), tolerance=5.0, spark=spark)
    summary = result.summary
    assert len(summary["captures"]) == 31 and summary["errors"] == []
    assert summary["bytes"]["reconciles"], summary["bytes"]
    assert summary["counts"]["connections"] >= 31
    assert (tmp_path / "out" / "report.html").stat().st_size > 0


def test_the_demo_runs_the_whole_job_and_tells_it_as_a_short_story(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mqttaudit demo``: a local broker probed with the whole library at the probe's default concurrency, real
    clients recorded, the capture audited, the reports named; what it prints is a story in four steps that explains
    each term once, with counts and the top findings instead of every FAIL line, and no Spark stage numbers."""
    status = main(["demo", "--out", str(tmp_path), "--master", "local[2]"])
    out = capsys.readouterr().out
    assert status == 0
    lines = out.splitlines()
    steps = [line for line in lines if line.startswith("== Step ") or line == "== Done"]
    assert steps == [
        "== Step 1 of 4: decoding example packets",
        "== Step 2 of 4: probing a local broker (mosquitto)",
        "== Step 3 of 4: recording clients talking through mosquitto",
        "== Step 4 of 4: auditing the recording on Spark",
        "== Done",
    ]
    prose = " ".join(out.split())  # the story's paragraphs are wrapped
    # each term is explained where it first appears
    assert "MQTT-4.7.3-1 is the 1st normative statement of section 4.7.3" in prose
    assert f"the case library runs {DEFAULT_CONCURRENCY} cases at a time" in prose
    assert "it is lenient when the broker accepted a defect no statement obliges it to detect" in prose
    assert "not-applicable when it needs a feature the broker does not offer" in prose
    assert "messages delivered wrongly or not at all (routing findings)" in prose
    # every kind of check the recording could not decide is named with what it means (which kinds occur depends on
    # the recorded traffic's timing; tests/test_cli.py holds that every tag has an explanation), and one always
    # occurs: the client connected before tcpdump started (the test suite records with tcpdump, as root)
    assert "(tcpdump on loopback)" in out
    assert "plant-early, was connected before tcpdump started" in prose
    summary_json = json.loads((tmp_path / "audit" / "summary.json").read_text())
    by_tag = (summary_json.get("not_assessable") or {}).get("by_tag") or {}
    assert by_tag.get(MID_STREAM), by_tag
    for tag, n in by_tag.items():
        assert f"{n} check{'s' if n != 1 else ''} the recording cannot decide (not assessable), '{tag}': " in prose
        assert f"'{tag}': {EXPLANATIONS[tag]}." in prose
    # the probe: its counts over the whole library, the statements broken most often, where the rest is
    counted = [line for line in lines if " cases in " in line]
    assert len(counted) == 1, counted
    summary = re.fullmatch(
        r"   (\d+) cases in \d+ s: (\d+) pass, (\d+) fail, (\d+) lenient, (\d+) not-applicable, (\d+) inconclusive",
        counted[0],
    )
    assert summary, counted[0]
    cases, *verdicts = (int(n) for n in summary.groups())
    assert cases == len(CASES) == sum(verdicts)
    top = lines.index("   statements the broker broke most often:")
    listed = [line for line in lines[top + 1 : top + 1 + TOP + 1] if line.startswith("     MQTT-")]
    assert 1 <= len(listed) <= TOP
    assert f"every case, with the bytes sent and received: {tmp_path / 'probe'}" in out
    assert not [line for line in lines if line.startswith(("FAIL ", "LENIENT ", "violation "))]
    # the recording and its audit
    assert "written (tcpdump on loopback)" in out or "written (the recording relay)" in out
    assert all(client in prose for client, _, _ in MISBEHAVIOUR)
    assert re.search(r"^   \d+ connections, \d+ packets: \d+ violations \(\d+ by clients\)", out, re.MULTILINE)
    assert lines[lines.index("   statements broken:") + 1].startswith("     MQTT-")
    assert f"every violation with its packet's bytes: {tmp_path / 'audit' / 'report.html'}" in out
    # nothing a newcomer did not type or cannot read: no Spark stages, no option of another command, no cut lines
    assert not re.search(r"stage \d+: \d+/\d+ tasks", out)
    assert "--ports" not in out and "\u2026" not in out
    assert (tmp_path / "audit" / "report.html").exists() and (tmp_path / "probe" / "junit.xml").exists()
    summary_json = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert summary_json["counts"]["violations_by_actor"].get("client", 0) >= len(MISBEHAVIOUR)
    assert summary_json["counts"]["routing_findings"] == 0


@given(
    total=st.integers(0, 1 << 40),
    largest=st.integers(MIN_CHUNK_BYTES, 1 << 30),
    parallelism=st.integers(1, 64),
)
def test_chunks_are_bounded_and_come_in_a_multiple_of_the_cores(total: int, largest: int, parallelism: int) -> None:
    size = chunk_size(total, largest, parallelism)
    assert MIN_CHUNK_BYTES <= size <= largest
    chunks = -(-total // size)
    if size > MIN_CHUNK_BYTES:  # not held up by the floor: every core gets at least four, in equal shares but one
        assert chunks >= CHUNKS_PER_CORE * parallelism
        per_core = -(-total // (largest * parallelism))
        assert chunks <= parallelism * max(CHUNKS_PER_CORE, per_core)
        assert chunks > parallelism * (max(CHUNKS_PER_CORE, per_core) - 1)
