"""The audit's outputs beside the tools operators already run (tshark, Suricata's EVE, Zeek): findings.jsonl carries
the flow keys EVE names (endpoints, ports, a numeric flow id, the Community ID) and Wireshark's 1-based frame number,
and every line validates against the JSON Schema shipped in the package; ``--format json`` puts the terminal's
summary on standard output as one document; a capture cut short inside a record says so on standard error and does
not pass (exit 4); ``-`` reads a capture from standard input. Every capture is one of the shared corpus (cut by the
test where it says so); every audit is the real command, run in this process on the worker's Spark session, except
the one that needs a pipe into a process of its own."""

from __future__ import annotations

import base64
import hashlib
import io
import ipaddress
import json
import struct
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pyarrow.parquet as pq
import pytest

from mqttaudit.capture import read_records
from mqttaudit.capture.link import RAW
from mqttaudit.capture.writer import TcpSession, pcap_bytes
from mqttaudit.report.audit_flows import community_id
from mqttaudit.report.audit_jsonl import findings_schema

from . import corpus
from .child import SOURCE, child_env, run_child
from .cli_in_process import Ran, run_mqttaudit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.captures

SV = "suricata-verify/"
#: The client sends a packet of the reserved type 0 (the PUBLISH's first byte edited): a violation by the client.
RESERVED_TYPE = SV + "mqtt-events-unassigned-msgtype.pcap"
#: The server accepts a CONNECT whose Property Length runs past it: a violation by the server.
EXCESSIVE_PROPERTY_LENGTH = SV + "mqtt5-excessiveproplen.pcap"
#: A clean MQTT 3.1.1 session (CONNECT, PUBLISH QoS 1, PUBACK, DISCONNECT), cut by the test inside its last record.
CLEAN = SV + "mqtt311-pub-qos1.pcap"


def audit(*args: str, out: Path) -> Ran:
    done = run_mqttaudit("audit", *args, "--out", str(out), "--master", "local[2]")
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def spec_community_id(src_ip: str, src_port: int, dest_ip: str, dest_port: int) -> str:
    """The Community ID of a TCP flow as the spec defines it (version 1, seed 0), written out here from the spec:
    SHA-1 over the seed, the two addresses and ports ordered by address then port, the protocol and a pad byte."""
    a, b = (ipaddress.ip_address(src_ip).packed, src_port), (ipaddress.ip_address(dest_ip).packed, dest_port)
    (first, first_port), (second, second_port) = sorted([a, b])
    data = struct.pack("!H", 0) + first + second + struct.pack("!BBHH", 6, 0, first_port, second_port)
    return "1:" + base64.b64encode(hashlib.sha1(data).digest()).decode()


def endpoint(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


@pytest.fixture(scope="module")
def machine_audit(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One audit, ``--format json``, of two shared captures: a violation by a client and one by a server."""
    out = tmp_path_factory.mktemp("machine") / "out"
    captures = [corpus.capture(RESERVED_TYPE), corpus.capture(EXCESSIVE_PROPERTY_LENGTH)]
    done = audit(*map(str, captures), "--format", "json", out=out)
    lines = (out / "findings.jsonl").read_text(encoding="utf-8").splitlines()
    return {
        "done": done,
        "out": out,
        "captures": {path.name: path for path in captures},
        "findings": [json.loads(line) for line in lines],
        "connections": {row["flow"]: row for row in pq.read_table(out / "connections").to_pylist()},
    }


def test_the_community_id_library_gives_the_spec_test_vector_in_both_directions() -> None:
    # The Community ID spec's TCP example (its README, and c-community-id's): 128.232.110.120:34855 -> 66.35.250.204:80.
    assert community_id("128.232.110.120", 34855, "66.35.250.204", 80) == "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
    assert community_id("66.35.250.204", 80, "128.232.110.120", 34855) == "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
    assert spec_community_id("128.232.110.120", 34855, "66.35.250.204", 80) == "1:LQU9qZlK+B5F3KDmev6m5PMibrg="


def test_findings_jsonl_carry_the_eve_flow_keys_of_the_side_judged(machine_audit: dict[str, Any]) -> None:
    findings, connections = machine_audit["findings"], machine_audit["connections"]
    actors = {(f["capture"], f["actor"]) for f in findings if f["event_type"] == "violation" and f["level"] == "MUST"}
    assert {("mqtt-events-unassigned-msgtype.pcap", "client"), ("mqtt5-excessiveproplen.pcap", "server")} <= actors
    ids: dict[str, int] = {}
    for finding in findings:
        connection = connections[finding["flow"]]
        client, server = endpoint(connection["client"]), endpoint(connection["server"])
        side = "server" if finding["event_type"] == "routing" else finding["actor"]
        judged, other = (server, client) if side == "server" else (client, server)
        assert (finding["src_ip"], finding["src_port"]) == judged, finding
        assert (finding["dest_ip"], finding["dest_port"]) == other, finding
        assert finding["proto"] == "TCP"
        # Computed from the spec here, independently of the library that wrote it.
        assert finding["community_id"] == spec_community_id(*client, *server)
        assert isinstance(finding["flow_id"], int) and 0 <= finding["flow_id"] < 2**53
        assert ids.setdefault(finding["flow"], finding["flow_id"]) == finding["flow_id"]  # one number per flow
    assert len(set(ids.values())) == len(ids) == 2


def test_a_findings_frame_is_wiresharks_1_based_number_of_the_record_that_carried_its_bytes(
    machine_audit: dict[str, Any],
) -> None:
    path = "mqtt-events-unassigned-msgtype.pcap"
    [reserved] = [f for f in machine_audit["findings"] if f["capture"] == path]
    records = list(read_records(machine_audit["captures"][path]))
    assert "…" not in reserved["evidence"]  # a short packet: whole, its offending first byte marked
    assert reserved["evidence"].startswith("[00] ")
    packet = bytes.fromhex(reserved["evidence"].replace("[", "").replace("]", ""))
    assert packet[0] == 0x00  # the reserved type, the PUBLISH's first byte edited
    # Frame N is the N-th record (Wireshark's frame.number, Suricata's pcap_cnt): its payload ends with the packet.
    assert records[reserved["frame"] - 1][2].endswith(packet)
    assert not records[reserved["frame"]][2].endswith(packet)
    frames = [p["frame"] for p in pq.read_table(machine_audit["out"] / "packets").to_pylist() if p["capture"] == path]
    assert frames and min(frames) >= 1 and max(frames) <= len(records)
    markdown = (machine_audit["out"] / "findings.md").read_text(encoding="utf-8")
    assert f"frame {reserved['frame']}" in markdown


def test_every_line_of_findings_jsonl_validates_against_the_shipped_schema(machine_audit: dict[str, Any]) -> None:
    schema = findings_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    assert machine_audit["findings"]
    for finding in machine_audit["findings"]:
        errors = [error.message for error in validator.iter_errors(finding)]
        assert not errors, (finding, errors)
    # The schema is strict: a line with a field it does not describe, or a 0-based frame, is refused.
    first = machine_audit["findings"][0]
    assert not validator.is_valid({**first, "unknown": 1})
    assert not validator.is_valid({**first, "frame": 0})
    # The command prints the schema the package ships.
    printed = run_mqttaudit("schema", "findings.jsonl")
    assert printed.returncode == 0 and json.loads(printed.stdout) == schema


def test_format_json_is_one_document_on_stdout_with_the_exit_status(machine_audit: dict[str, Any]) -> None:
    done = machine_audit["done"]
    assert done.returncode == 1, done.stderr  # violations, as in text
    document = json.loads(done.stdout)  # the whole of standard output is one document
    assert document["exit_status"] == 1 and document["incomplete"] is None and document["lost"] == []
    assert document["summary"] == json.loads((machine_audit["out"] / "summary.json").read_text())
    assert document["outputs"]["findings.jsonl"] == str(machine_audit["out"] / "findings.jsonl")
    assert document["summary"]["counts"]["violations_must"] >= 2


@pytest.fixture(scope="module")
def cut_capture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The clean capture cut 50 bytes into its last record, and where that record starts."""
    source = corpus.capture(CLEAN)
    records = list(read_records(source))
    last = records[-1]
    offset = last[5]  # the byte offset of the last record's header
    path = tmp_path_factory.mktemp("cut") / "cut-short.pcap"
    path.write_bytes(source.read_bytes()[: offset + 50])
    return {"path": path, "offset": offset, "frame": len(records), "needed": 16 + len(last[2])}


@pytest.mark.parametrize("output_format", ["text", "json"])
def test_a_capture_cut_inside_a_record_is_named_on_stderr_and_does_not_pass(
    spark: SparkSession, cut_capture: dict[str, Any], output_format: str, tmp_path: Path
) -> None:
    done = audit(str(cut_capture["path"]), "--format", output_format, out=tmp_path / "out")
    assert done.returncode == 4, done.stdout + done.stderr
    frame = cut_capture["frame"]
    said = (
        f"mqttaudit: warning: cut-short.pcap is cut short: it ends inside the record at byte "
        f"{cut_capture['offset']:,} (frame {frame}), 50 of its {cut_capture['needed']:,} bytes present: that frame "
        f"is not judged, and whatever the capture would have held after it is lost (frames 1 to {frame - 1} were read)"
    )
    assert said in done.stderr.splitlines()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["connections"] == 1 and summary["counts"]["violations"] == 0  # the rest was judged
    assert summary["truncated"][0]["frame"] == frame
    # The data report.html renders names the cut by byte and frame number too.
    shown = json.loads((tmp_path / "out" / "report_data.json").read_text())["summary"]["errors"]
    assert [(e["file"], e["offset"], e["frame"]) for e in shown] == [("cut-short.pcap", cut_capture["offset"], frame)]
    if output_format == "json":
        document = json.loads(done.stdout)
        assert document["exit_status"] == 4 and document["lost"] == [said.removeprefix("mqttaudit: warning: ")]
    else:
        assert "mqttaudit: incomplete: a capture was not read whole" in done.stderr
        assert "no violations" in done.stdout
        readme = (SOURCE.parent / "README.md").read_text(encoding="utf-8")
        assert f"\n{said}\nmqttaudit: incomplete: a capture was not read whole" in readme  # the README shows it


def test_a_capture_piped_into_audit_dash_gives_the_findings_of_its_file(
    machine_audit: dict[str, Any], tmp_path: Path
) -> None:
    path = machine_audit["captures"]["mqtt-events-unassigned-msgtype.pcap"]
    spool = tmp_path / "tmp"
    spool.mkdir()
    with path.open("rb") as capture:
        done = run_child(
            "audit",
            "-",
            "--out",
            str(tmp_path / "out"),
            "--master",
            "local[2]",
            stdin=capture,
            env=child_env(TMPDIR=str(spool)),
            timeout=600,
        )
    assert done.returncode == 1, done.stderr
    piped = [json.loads(line) for line in (tmp_path / "out" / "findings.jsonl").read_text().splitlines()]
    from_file = [f for f in machine_audit["findings"] if f["capture"] == path.name]
    assert {f["capture"] for f in piped} == {"stdin"}

    def comparable(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(
            ({k: v for k, v in f.items() if k != "capture"} for f in findings if f["event_type"] == "violation"),
            key=lambda f: (f["flow"], f["event"], f["rule"]),
        )

    assert comparable(piped) == comparable(from_file) and piped
    assert not [p.name for p in spool.iterdir() if p.name.startswith("mqttaudit-stdin-")]  # the spooled copy is gone


def test_standard_input_past_its_bound_stops_there_and_the_audit_says_so(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A clean session whose PUBLISHes carry 1.5 MiB in all, more than --stdin-max-mb 1 lets in.
    session = TcpSession(("10.0.0.1", 50000), ("10.0.0.2", 1883))
    packets = session.handshake()
    packets.append(session.send(0, bytes.fromhex("10 10 00 04 4d 51 54 54 04 02 00 3c 00 04 62 69 67 31")))
    packets.append(session.send(1, bytes.fromhex("20 02 00 00")))
    payload = b"x" * 50_000
    publish = bytes.fromhex("30 d3 86 03 00 01 74") + payload  # Remaining Length 50,003: topic "t" and the payload
    packets += [session.send(0, publish) for _ in range(30)]
    data = pcap_bytes([(1_700_000_000 * 10**9 + i * 10**6, p) for i, p in enumerate(packets)], linktype=RAW)
    assert len(data) > 1024 * 1024
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    done = audit("-", "--stdin-max-mb", "1", out=tmp_path / "out")
    assert done.returncode == 4, done.stdout + done.stderr
    assert (
        "mqttaudit: warning: standard input: reading stopped at the bound of 1,048,576 bytes (--stdin-max-mb): the "
        "rest of the capture was not read, and what it held was not judged"
    ) in done.stderr.splitlines()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["captures"][0]["bytes"] == 1024 * 1024 and summary["counts"]["connections"] == 1


def test_standard_input_that_is_not_a_capture_or_a_cluster_master_is_refused_before_spark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"GET / HTTP/1.1\r\n")))
    done = run_mqttaudit("audit", "-", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "standard input is not a capture: it starts with 47 45 54 20 ('GET ')" in done.stderr
    done = run_mqttaudit("audit", "-", "--out", str(tmp_path / "out"), "--master", "spark://10.0.0.1:7077")
    assert done.returncode == 2 and "'-' (standard input) needs a local master" in done.stderr
    assert not (tmp_path / "out").exists()
