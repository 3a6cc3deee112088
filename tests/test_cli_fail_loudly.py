"""Nothing judged is never a pass: the audit's usage errors come before Spark starts, an audit that finds no MQTT
connection exits 4, and an interrupted run (real SIGINT and SIGTERM sent to a real audit) exits 130 with one line,
leaving the previous complete output as it was."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mqttaudit.capture import writer
from mqttaudit.report.output_dir import MARKER, STAGING_PREFIX

from .cli_in_process import run_mqttaudit
from .corpus import captures_folder, require_captures

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A small capture of the third-party corpus: the tests that read it are marked ``captures``.
SMALL = captures_folder() / "peafowl" / "mqtt-1.pcapng"


def mqttaudit(*argv: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m mqttaudit ARGS`` in a process of its own: only for what a fresh process alone shows (its
    environment read at start, a JVM it starts itself); everything else runs through ``run_mqttaudit``."""
    return subprocess.run(
        [sys.executable, "-m", "mqttaudit", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def without_java() -> dict[str, str]:
    """An environment in which no java can be found: a PATH of Python's own folder only, no JAVA_HOME."""
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)
    return env


def run_without_java(*argv: str) -> subprocess.CompletedProcess[str]:
    """A process of its own: its environment, not the test worker's (whose JVM runs already), has no Java."""
    return subprocess.run(
        [sys.executable, "-m", "mqttaudit", *argv], capture_output=True, text=True, env=without_java(), check=False
    )


def test_a_file_that_is_not_a_capture_is_a_usage_error_before_spark_starts(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello, these are my notes\n")
    # With no Java at all, the only way to exit 2 naming the file is to check it before starting Spark.
    result = run_without_java("audit", str(notes), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert f"{notes}: not a capture" in result.stderr
    assert "68 65 6c 6c" in result.stderr and "neither a pcap nor a pcapng" in result.stderr
    assert "Java" not in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_folder_with_no_capture_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "captures").mkdir()
    (tmp_path / "captures" / "README").write_text("nothing here\n")
    result = run_without_java("audit", str(tmp_path / "captures"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert f"no capture file (.pcap, .pcapng, .cap) in {tmp_path / 'captures'}" in result.stderr


@pytest.mark.captures
def test_a_folder_of_captures_without_a_capture_suffix_is_found_by_magic_number(tmp_path: Path) -> None:
    from mqttaudit.pipeline import sources

    rotated = tmp_path / "rotated"
    rotated.mkdir()
    (rotated / "trace.pcap1").write_bytes(SMALL.read_bytes())
    (rotated / "notes").write_text("not a capture\n")
    assert sources.expand([str(rotated)]) == [str(rotated / "trace.pcap1")]


@pytest.mark.captures
def test_a_capture_among_non_captures_in_a_glob_is_audited_and_the_others_reported(tmp_path: Path) -> None:
    from mqttaudit.pipeline import sources

    (tmp_path / "a.pcap").write_bytes(SMALL.read_bytes())
    (tmp_path / "b.pcap").write_bytes(b"GIF89a....")
    files = sources.expand([str(tmp_path / "*.pcap")])
    rejected = sources.check_captures([str(tmp_path / "*.pcap")], files)
    assert rejected == [(str(tmp_path / "b.pcap"), rejected[0][1])]
    assert "47 49 46 38" in rejected[0][1]


@pytest.mark.captures
def test_a_master_that_is_not_a_spark_master_url_is_a_usage_error_without_a_traceback(tmp_path: Path) -> None:
    result = run_mqttaudit("audit", str(SMALL), "--out", str(tmp_path / "out"), "--master", "foo")
    assert result.returncode == 2, result.stderr
    assert "--master 'foo' is not a Spark master URL" in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MQTTAUDIT_DRIVER_MEMORY": "256m"}, "MQTTAUDIT_DRIVER_MEMORY='256m'"),
        ({"MQTTAUDIT_DRIVER_MEMORY": "lots"}, "MQTTAUDIT_DRIVER_MEMORY='lots'"),
    ],
)
@pytest.mark.captures
def test_environment_mistakes_are_usage_errors_without_a_traceback(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    # A process of its own: mqttaudit reads MQTTAUDIT_DRIVER_MEMORY (the Spark driver's) when it starts.
    result = mqttaudit("audit", str(SMALL), "--out", str(tmp_path / "out"), "--engine", "spark", env=env)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.captures
def test_no_java_is_a_usage_error_that_says_what_is_missing(tmp_path: Path) -> None:
    result = run_without_java("audit", str(SMALL), "--out", str(tmp_path / "out"), "--engine", "spark")
    assert result.returncode == 2
    assert "mqttaudit audit needs Java 17 or newer (java not found on PATH and JAVA_HOME unset)" in result.stderr


def audit_without_pyspark(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """A process of its own: pyspark made unimportable in it, as on an install without the [spark] extra."""
    argv = ["audit", str(SMALL), "--out", str(tmp_path / "out"), *options]
    code = f"import sys; sys.modules['pyspark'] = None; from mqttaudit.cli.main import main; sys.exit(main({argv!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


@pytest.mark.captures
def test_missing_pyspark_is_a_usage_error_with_the_pip_command(tmp_path: Path) -> None:
    result = audit_without_pyspark(tmp_path, "--engine", "spark")
    assert result.returncode == 2, result.stderr
    assert "pip install 'mqttaudit[spark]'" in result.stderr


@pytest.mark.captures
def test_without_pyspark_a_small_capture_is_still_audited_by_the_local_engine(tmp_path: Path) -> None:
    result = audit_without_pyspark(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "engine: local" in result.stdout


def http_only_capture(path: Path) -> None:
    session = writer.TcpSession(("10.0.0.1", 41000), ("10.0.0.2", 8080))
    packets = session.handshake()
    packets.append(session.send(0, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"))
    packets.append(session.send(1, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    packets += [session.fin(0), session.fin(1)]
    frames = [(1_700_000_000_000_000_000 + i * 1_000_000, writer.ethernet(p)) for i, p in enumerate(packets)]
    path.write_bytes(writer.pcap_bytes(frames, linktype=1))


def test_an_audit_that_finds_no_mqtt_connection_is_incomplete(tmp_path: Path) -> None:
    capture = tmp_path / "http.pcap"
    http_only_capture(capture)
    # A process of its own: the JVM it starts must keep its start-up messages off the process's standard error.
    result = mqttaudit(
        "audit", str(capture), "--out", str(tmp_path / "out"), "--master", "local[1]", "--engine", "spark"
    )
    assert result.returncode == 4, result.stderr
    assert "no MQTT connection found" in result.stderr
    assert "Traceback" not in result.stderr
    # Spark's own start-up messages are hidden unless --verbose.
    for noise in ("log4j", "NativeCodeLoader", "incubator modules", "WARN"):
        assert noise not in result.stderr


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def previous_output(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete audit's output, as a user would have it from an earlier run (audited on the test session)."""
    out = tmp_path_factory.mktemp("interrupt") / "out"
    result = run_mqttaudit("audit", str(SMALL), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [(signal.SIGINT, True), (signal.SIGINT, False), (signal.SIGTERM, False)],
    ids=["ctrl-c-to-the-process-group", "sigint", "sigterm"],
)
@pytest.mark.captures
def test_an_interrupted_audit_exits_130_with_one_line_and_leaves_the_previous_output(
    previous_output: Path, signum: int, whole_group: bool
) -> None:
    before = tree_digest(previous_output)
    # A process of its own: a signal interrupts the whole process, which publishes nothing and exits 130. On Spark:
    # the local engine audits the corpus in about a second, too soon for the signal to arrive mid-way.
    command = ["audit", str(require_captures()), "--out", str(previous_output), "--engine", "spark"]
    process = subprocess.Popen(
        [sys.executable, "-m", "mqttaudit", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a shell gives a foreground job
    )
    assert process.stderr is not None
    # Wait until the audit is under way (Spark started, chunks planned), then interrupt it.
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        lines.append(line)
        if not line or "planning chunks" in line:
            break
    time.sleep(1.0)
    assert process.poll() is None, "".join(lines)
    if whole_group:
        os.killpg(process.pid, signum)
    else:
        os.kill(process.pid, signum)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    said = [line for line in stderr.splitlines() if line.strip() and not line.startswith("  ")]
    assert said == ["interrupted"]
    assert "Traceback" not in stderr and "py4j" not in stderr
    assert stdout == ""
    assert tree_digest(previous_output) == before
    assert not [p for p in previous_output.parent.iterdir() if p.name.startswith(STAGING_PREFIX)]
    assert (previous_output / MARKER).is_file()


def test_the_probe_refuses_a_folder_of_someone_elses_files_before_probing(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    # Port 1 of the loopback: nothing listens there, but the folder is refused before any connection.
    result = run_mqttaudit("probe", "mqtt://127.0.0.1:1", "--out", str(out))
    assert result.returncode == 2, result.stderr
    assert "holds files mqttaudit did not write (notes.txt)" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_an_interrupted_probe_exits_130_and_leaves_the_previous_reports(tmp_path: Path) -> None:
    from mqttaudit.probe.brokers import start_broker

    out = tmp_path / "reports"
    with start_broker("mosquitto") as broker:
        first = run_mqttaudit("probe", broker.url, "--cases", "ping/*", "--out", str(out))
        assert first.returncode == 0, first.stderr
        before = tree_digest(out)
        # A process of its own: a signal interrupts the whole process, which publishes nothing and exits 130.
        process = subprocess.Popen(
            [sys.executable, "-m", "mqttaudit", "probe", broker.url, "--concurrency", "1", "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert process.stderr is not None
        # The first progress mark says the cases are under way (one at a time: the run takes a minute or more).
        assert process.stderr.read(1) != ""
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "interrupted"
    assert "Traceback" not in stderr
    assert stdout == ""
    assert tree_digest(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_capture_names_and_reasons_cannot_forge_terminal_lines() -> None:
    from mqttaudit.cli.audit import lost_lines, summarize

    summary = {
        "counts": {
            "connections": 1,
            "flows": 1,
            "packets": 2,
            "violations": 0,
            "violations_must": 0,
            "violations_by_actor": {},
            "routing_findings": 0,
            "routing_by_kind": {},
        },
        "bytes": {"mqtt_bytes": 6, "reconciles": True},
        "errors": [{"capture": "x.pcap\n0 violations\x1b[2J", "offset": 24, "reason": "bad\rrecord"}],
    }
    lines = summarize(summary).split("\n") + lost_lines(summary)
    assert [line for line in lines if line.startswith("capture error:")] == [
        "capture error: x.pcap\\n0 violations\\x1b[2J at byte 24: bad\\rrecord"
    ]
    assert "0 violations" not in [line.strip() for line in lines]


def test_an_error_raised_while_an_interrupt_unwinds_is_reported_as_interrupted() -> None:
    from mqttaudit.cli.main import _while_interrupted

    def failing_clean_up() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise ConnectionError("Answer from Java side is empty")  # as Py4J's clean-up call after a cut

    try:
        failing_clean_up()
    except ConnectionError as exc:
        assert _while_interrupted(exc)
    assert not _while_interrupted(ConnectionError("a real failure"))
