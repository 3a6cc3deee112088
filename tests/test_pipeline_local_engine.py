"""The local engine (issue 31, point 8: a small audit kept off Spark) against the Spark engine: the same tables (row
sets), the same summary.json and the same report_data.json, on the 31 shared captures audited together and on
captures written here with the project's capture writer that make routing findings, gaps, a TLS session decrypted
with its key log, corrupt records and a truncated file. Each Spark audit runs on the test session's ``local[2]``,
once per case (module-scoped); the shared captures' is the test session's audit of them, with far smaller slices
of each broker's routing replay than the local engine's defaults (:mod:`tests.shared_captures_on_spark`). Also:
which engine ``--engine auto`` picks, and that the local engine never imports pyspark."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit import codec
from mqttaudit.pipeline.audit import LOCAL, SPARK, TABLES, AuditResult, choose_engine, run_audit
from mqttaudit.pipeline.engines import LOCAL_LIMIT_BYTES, LocalEngineLimit
from mqttaudit.pipeline.keylog import KeyLogFile
from mqttaudit.pipeline.spark import SparkMasterUnreachable
from mqttaudit.probe.brokers import free_port

from .child import run_child
from .cli_in_process import run_mqttaudit
from .crafted import CONNACK_ACCEPTED, PUBLISH_QOS1, connect, sessions, write_capture
from .memory import PeakMemory
from .shared_captures_on_spark import GROUP, SharedCapturesAudit
from .test_audit_tls_secrets import tls_capture
from .test_capture_hostile import timestamp_capture
from .tls_sessions import session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: What differs between two runs of the same audit by design: when and how long it ran, and on what.
RUN_ONLY = ("duration", "spark_master", "engine", "routing_replays")
#: SUBSCRIBE id 1 to 'a/b' at QoS 1, and its SUBACK granting QoS 1.
SUBSCRIBE = bytes.fromhex("82 08 00 01 00 03 61 2f 62 01")
SUBACK = bytes.fromhex("90 03 00 01 01")
PUBACK = bytes.fromhex("40 02 00 07")
PINGREQ, PINGRESP = bytes.fromhex("c0 00"), bytes.fromhex("d0 00")


def routing_capture(path: Path) -> Path:
    """Client A subscribes to 'a/b' at QoS 1; client B publishes to it at QoS 1 and the broker acknowledges; the
    broker never delivers it to A, who goes on pinging for 30 s (a missing delivery, a routing finding). One of A's
    PINGREQs was not captured (a gap), and B's PUBLISH is sent twice, the first copy of its bytes differing."""
    a, b = sessions()
    records: list[tuple[float, bytes]] = []
    records += [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [(0.1, a.send(0, connect(b"sub"))), (0.11, a.send(1, CONNACK_ACCEPTED))]
    records += [(0.2, a.send(0, SUBSCRIBE)), (0.21, a.send(1, SUBACK))]
    records += [(1 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [(1.1, b.send(0, connect(b"pub"))), (1.11, b.send(1, CONNACK_ACCEPTED))]
    records += [(2.0, b.send(0, PUBLISH_QOS1)), (2.01, b.send(1, PUBACK))]
    for second in range(10, 31, 5):
        ping = a.send(0, PINGREQ)
        if second != 15:  # never captured: a gap in A's stream
            records.append((second, ping))
        records.append((second + 0.01, a.send(1, PINGRESP)))
    return write_capture(path, records)


def routing_case(folder: Path) -> tuple[list[str], dict[str, Any]]:
    return [str(routing_capture(folder / "routing.pcap"))], {}


def tls_case(folder: Path) -> tuple[list[str], dict[str, Any]]:
    made = session(
        [codec.encode(codec.Connect(client_id="dev-1", keep_alive=30)), codec.encode(codec.Pingreq())],
        [codec.encode(codec.Connack()), codec.encode(codec.Pingresp())],
        maximum=ssl.TLSVersion.TLSv1_2,
        ciphers="ECDHE-RSA-AES128-GCM-SHA256",
    )
    (folder / "keys.log").write_text(made.keylog)
    return [str(tls_capture(made, folder / "tls.pcap", connections=3))], {
        "keylog": KeyLogFile.at(str(folder / "keys.log"))
    }


def broken_case(folder: Path) -> tuple[list[str], dict[str, Any]]:
    """A pcapng with records whose timestamps overflow (corrupt, skipped), and the routing capture cut inside its
    last record (truncated)."""
    (folder / "timestamps.pcapng").write_bytes(timestamp_capture()[0])
    whole = routing_capture(folder / "whole.pcap").read_bytes()
    (folder / "truncated.pcap").write_bytes(whole[:-7])
    (folder / "whole.pcap").unlink()
    return [str(folder / "timestamps.pcapng"), str(folder / "truncated.pcap")], {}


#: The case of the 31 shared captures audited together, whose Spark audit is the test session's.
SHARED_CAPTURES = "31-shared-captures"
#: The other cases: their captures written into a folder, and the audit's options.
CASES: dict[str, Callable[[Path], tuple[list[str], dict[str, Any]]]] = {
    "routing-findings-and-gaps": routing_case,
    "tls-key-log": tls_case,
    "corrupt-and-truncated": broken_case,
}


@pytest.fixture(scope="module", params=[pytest.param(SHARED_CAPTURES, marks=[GROUP, pytest.mark.captures]), *CASES])
def both(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[tuple[Path, AuditResult], tuple[Path, AuditResult]]:
    """One case audited by the Spark engine (on the test session's Spark) and by the local engine (its default
    slices)."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == SHARED_CAPTURES:
        shared: SharedCapturesAudit = request.getfixturevalue("shared_captures_on_spark")
        paths, options = shared.paths, {}
        spark_out, on_spark = shared.out, shared.result
    else:
        spark: SparkSession = request.getfixturevalue("spark")
        paths, options = CASES[request.param](folder)
        spark_out = folder / "spark"
        on_spark = run_audit(paths, spark_out, spark=spark, tolerance=5.0, **options)
    local = run_audit(paths, folder / "local", engine=LOCAL, tolerance=5.0, **options)
    assert on_spark.summary["engine"] == SPARK and local.summary["engine"] == LOCAL
    return (spark_out, on_spark), (folder / "local", local)


def rows(out: Path, table: str) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in pq.read_table(out / table).to_pylist())


def test_the_local_engine_writes_the_same_rows_to_every_table(both: Any) -> None:
    (spark_out, on_spark), (local_out, _) = both
    assert on_spark.summary["counts"]["connections"] > 0
    for table in TABLES:
        assert rows(local_out, table) == rows(spark_out, table), table


def per_broker(replays: list[dict[str, Any]]) -> dict[str, tuple[int, int, dict[str, str]]]:
    """The routing replay's row of each broker (one each): deliveries, routing findings, rules not assessable (the
    task's partition differs between the engines)."""
    totals = {
        row["broker"]: (row["deliveries"], row["routing_findings"], json.loads(row["not_assessable"]))
        for row in replays
    }
    assert len(totals) == len(replays), replays
    return totals


def test_the_local_engine_writes_the_same_summary(both: Any) -> None:
    (spark_out, _), (local_out, _) = both
    on_spark = json.loads((spark_out / "summary.json").read_text())
    local = json.loads((local_out / "summary.json").read_text())
    assert {k: v for k, v in local.items() if k not in RUN_ONLY} == {
        k: v for k, v in on_spark.items() if k not in RUN_ONLY
    }
    assert per_broker(local["routing_replays"]) == per_broker(on_spark["routing_replays"])
    assert (local["engine"], local["spark_master"]) == (LOCAL, None)
    assert (on_spark["engine"], on_spark["spark_master"]) == (SPARK, "local[2]")


def test_the_local_engine_writes_the_same_report_data_and_exit_status(both: Any) -> None:
    (spark_out, on_spark), (local_out, local) = both
    spark_data = json.loads((spark_out / "report_data.json").read_text())
    local_data = json.loads((local_out / "report_data.json").read_text())
    assert spark_data["summary"].pop("spark_master") == "local[2]"
    assert local_data["summary"].pop("spark_master") == ""
    assert local_data == spark_data
    assert local.exit_status == on_spark.exit_status


def test_the_cases_make_what_they_are_for(both: Any, request: pytest.FixtureRequest) -> None:
    """Each case holds what it is there to compare (so that an equality of empty parts proves nothing less)."""
    (_, on_spark), _ = both
    summary = on_spark.summary
    case = request.node.callspec.params["both"]
    if case.startswith("routing"):
        assert summary["counts"]["routing_findings"] >= 1
        assert summary["bytes"]["gap_bytes"] > 0
    elif case.startswith("tls"):
        assert summary["versions"]["3.1.1"]["connections"] == 3
    elif case.startswith("corrupt"):
        assert summary["truncated"] and summary["errors"]
    else:
        assert summary["counts"]["violations_must"] >= 1 and summary["duplicate_copies"]["count"] >= 1


def test_auto_audits_a_small_capture_on_a_local_master_in_this_process(tmp_path: Path) -> None:
    path = routing_capture(tmp_path / "routing.pcap")
    ran = run_mqttaudit("audit", str(path), "--out", str(tmp_path / "out"), "--master", "local[2]")
    assert ran.returncode == 1, ran.stderr
    assert "engine: local" in ran.stdout
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["engine"] == LOCAL


def test_auto_audits_past_the_threshold_on_spark(spark: SparkSession, tmp_path: Path) -> None:
    del spark  # the session the audit joins
    path = routing_capture(tmp_path / "routing.pcap")
    size = path.stat().st_size
    result = run_audit([str(path)], tmp_path / "out", master="local[2]", local_max_bytes=size - 1)
    assert result.summary["engine"] == SPARK
    assert choose_engine("auto", "local[2]", size, size) == LOCAL


def test_auto_with_a_cluster_master_is_spark_whatever_the_size(tmp_path: Path) -> None:
    path = routing_capture(tmp_path / "routing.pcap")
    master = f"spark://127.0.0.1:{free_port()}"  # nobody answers: only the Spark engine asks
    with pytest.raises(SparkMasterUnreachable):
        run_audit([str(path)], tmp_path / "out", master=master)
    for cluster in (master, "yarn", "k8s://https://127.0.0.1:6443", "local-cluster[2,1,1024]"):
        assert choose_engine("auto", cluster, 1) == SPARK
    assert choose_engine("local", master, 10**12, local_limit_bytes=10**12) == LOCAL
    assert choose_engine("spark", "local[2]", 1) == SPARK


def publish_capture(path: Path, publishes: int) -> Path:
    """One client connects and publishes ``publishes`` QoS 0 messages of 1,400 bytes to 'a/b' (some 1.5 KB of
    capture each)."""
    a, _ = sessions()
    payload = b"\x00\x03a/b" + bytes(1400)
    publish = bytes([0x30]) + codec.encode_remaining_length(len(payload)) + payload
    records = [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [(0.1, a.send(0, connect(b"big"))), (0.11, a.send(1, CONNACK_ACCEPTED))]
    records += [(1 + 0.001 * i, a.send(0, publish)) for i in range(publishes)]
    return write_capture(path, records)


def test_the_local_engine_refuses_captures_past_its_limit(tmp_path: Path) -> None:
    path = publish_capture(tmp_path / "big.pcap", 800)
    size = path.stat().st_size
    assert size > 1024 * 1024
    out = tmp_path / "out"
    ran = run_mqttaudit("audit", str(path), "--out", str(out), "--engine", "local", "--local-limit-mb", "1")
    assert ran.returncode == 2, ran.stderr
    assert f"the captures hold {size:,} bytes" in ran.stderr
    assert "limit of 1,048,576 bytes (1 MiB, --local-limit-mb)" in ran.stderr
    assert "--engine spark" in ran.stderr
    assert not out.exists()  # refused before anything was read or written
    # Within the limit the same capture is audited, in this process; past it, auto picks Spark.
    ran = run_mqttaudit("audit", str(path), "--out", str(out), "--engine", "local", "--local-limit-mb", "2")
    assert ran.returncode == 0, ran.stderr
    assert json.loads((out / "summary.json").read_text())["engine"] == LOCAL
    assert choose_engine("auto", "local[2]", size, local_limit_bytes=1024 * 1024) == SPARK
    with pytest.raises(LocalEngineLimit):
        choose_engine("local", "local[2]", size, local_limit_bytes=size - 1)
    assert choose_engine("local", "local[2]", size, local_limit_bytes=size) == LOCAL


def test_the_local_engine_refuses_a_capture_past_its_default_limit_in_little_memory(tmp_path: Path) -> None:
    """Unfixed, ``--engine local`` audited this 65.6 MiB capture in one process of 786 MB peak (29 s, exit 0; the
    limit refuses it at 94 MB)."""
    path = publish_capture(tmp_path / "past.pcap", 47_000)
    assert path.stat().st_size > LOCAL_LIMIT_BYTES
    with PeakMemory() as peak:
        done = run_child("audit", str(path), "--out", str(tmp_path / "out"), "--engine", "local")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "limit of 67,108,864 bytes (64 MiB, --local-limit-mb)" in done.stderr and "--engine spark" in done.stderr
    assert peak.python < 300 * 2**20, f"the command reached {peak.python >> 20} MB"
    assert not (tmp_path / "out").exists()


def test_the_local_engine_never_imports_pyspark(tmp_path: Path) -> None:
    path = routing_capture(tmp_path / "routing.pcap")
    script = (
        "import sys\n"
        "from mqttaudit.cli.main import main\n"
        f"status = main(['audit', {str(path)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, 'pyspark imported'\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "engine: local" in done.stdout
