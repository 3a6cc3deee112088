"""``mqttaudit audit --keylog`` against hostile runs and hostile key logs (issue 28): no secret touches the disk,
not even when the run is killed; a TLS session the key log names that cannot be decrypted is not assessable with
its reason, and an audit left with nothing judged exits 4.

The captures hold real TLS sessions (OpenSSL through Python's ``ssl``, :mod:`tests.tls_sessions`) written by the
project's capture writer; their client sends a CONNECT with a password.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

from mqttaudit import codec
from mqttaudit.capture import writer
from mqttaudit.capture.link import ETHERNET
from mqttaudit.capture.tls import NO_SERVER_HELLO, NOT_DECRYPTED_REASONS, TAG_MISMATCH
from mqttaudit.pipeline.judging import flow_judge
from mqttaudit.pipeline.keylog import KeyLogChanged, KeyLogFile
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.segments import read_segments
from mqttaudit.pipeline.slicing import sliced_replayer
from mqttaudit.report.output_dir import STAGING_PREFIX

from .cli_in_process import run_mqttaudit
from .tls_sessions import Session, session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PASSWORD = b"hunter2-S3cret-pw"
PORT = 8884
#: A CONNECT with a password and no User Name: it breaks [MQTT-3.1.2-22], so its bytes are a violation's evidence.
CONNECT = codec.encode(codec.Connect(client_id="dev-1", password=PASSWORD, keep_alive=30), validate=False)


@pytest.fixture(scope="module")
def made() -> Session:
    """One TLS 1.2 session: the client's CONNECT and PINGREQ, no answer from the server."""
    return session(
        [CONNECT, codec.encode(codec.Pingreq())],
        [],
        maximum=ssl.TLSVersion.TLSv1_2,
        ciphers="ECDHE-RSA-AES128-GCM-SHA256",
    )


def tls_capture(made: Session, path: Path, *, connections: int = 1, first_port: int = 40000) -> Path:
    """A pcap of ``connections`` TCP connections (from client ports ``first_port`` on) that each carry the
    session's two record streams."""
    packets: list[bytes] = []
    for number in range(connections):
        tcp = writer.TcpSession(client=("10.0.0.1", first_port + number), server=("10.0.0.2", PORT))
        packets += tcp.handshake()
        streams = (made.client_stream, made.server_stream)
        pieces = [[stream[at : at + 500] for at in range(0, len(stream), 500)] for stream in streams]
        for index in range(max(len(pieces[0]), len(pieces[1]))):
            packets += [tcp.send(side, pieces[side][index]) for side in (0, 1) if index < len(pieces[side])]
        packets += [tcp.fin(0), tcp.fin(1), tcp.segment(0)]
    records = [(10**18 + index * 10**6, writer.ethernet(packet)) for index, packet in enumerate(packets)]
    path.write_bytes(writer.pcap_bytes(records, ETHERNET))
    return path


def session_secrets(made: Session) -> list[str]:
    """The secrets of the session's key log lines, in hex."""
    return [line.split()[2] for line in made.keylog.splitlines() if len(line.split()) == 3]


def needles(made: Session) -> dict[str, bytes]:
    """What no file may hold: the password (as it is, in hex, in the evidence's spaced hex) and the key log's
    secrets (in hex either case, and as bytes)."""
    found = {
        "password": PASSWORD,
        "password hex": PASSWORD.hex().encode(),
        "password evidence": PASSWORD.hex(" ").encode(),
    }
    for number, secret in enumerate(session_secrets(made)):
        found |= {
            f"secret {number} hex": secret.lower().encode(),
            f"secret {number} HEX": secret.upper().encode(),
            f"secret {number} bytes": bytes.fromhex(secret),
        }
    return found


def holding(folder: Path, made: Session) -> list[tuple[str, str]]:
    """The (file, needle) pairs of every file under ``folder`` that holds a needle."""
    wanted = needles(made)
    held = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            content = path.read_bytes()
            held += [(str(path.relative_to(folder)), name) for name, needle in wanted.items() if needle in content]
    return held


def big_keylog(made: Session, path: Path, others: int) -> Path:
    """The session's key log among ``others`` lines of other sessions: over a megabyte, more than Spark sends a
    Python task's closure in its message (a larger closure goes through a broadcast file on disk)."""
    lines = [f"CLIENT_RANDOM {secrets.token_hex(32)} {secrets.token_hex(48)}" for _ in range(others)]
    path.write_text("\n".join([*lines[: others // 2], made.keylog.strip(), *lines[others // 2 :]]) + "\n")
    return path


def test_a_killed_audit_leaves_neither_the_password_nor_a_key_log_secret_on_disk(made: Session, tmp_path: Path) -> None:
    """SIGKILL to the whole process tree (driver, JVM, Python workers) while the routing replay reads the
    transcripts the judging tasks left: then nothing under the output's folder, Python's temporary folder, Spark's
    local folders or the JVM's temporary folder holds the password or a secret of the key log."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    capture = tls_capture(made, inputs / "tls.pcap", connections=40)
    keylog = big_keylog(made, inputs / "keys.log", 12_000)
    assert keylog.stat().st_size > 2 * 1024 * 1024
    work = tmp_path / "work"
    temp, local, java = work / "tmp", work / "spark-local", work / "java-tmp"
    for folder in (temp, local, java):
        folder.mkdir(parents=True)
    out = work / "audit"
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "SPARK_LOCAL_DIRS": str(local),
        "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={java}",
    }
    command = [sys.executable, "-m", "mqttaudit", "audit", str(capture), "--keylog", str(keylog), "--out", str(out)]
    command += ["--master", "local[2]", "--engine", "spark", "--tolerance", "1"]  # the JVM's folders too
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True
    )
    # The evidence that the run is mid-way: a judging task published its transcripts for the routing replay.
    deadline = time.monotonic() + 240
    published: list[Path] = []
    try:
        while not published and process.poll() is None and time.monotonic() < deadline:
            published = list(work.glob(f"{STAGING_PREFIX}*/_transcripts/part-*.arrow"))
            time.sleep(0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # as the out-of-memory killer ends a tree
        process.wait(timeout=60)
    assert published, f"the audit ended ({process.returncode}) before its transcripts were seen"
    staged = list(work.glob(f"{STAGING_PREFIX}*"))
    assert staged  # the killed run's staging folder stays: what it holds must be nothing secret
    assert holding(work, made) == []


def test_the_audit_masks_the_password_as_the_probe_s_reports_do(
    spark: SparkSession, made: Session, tmp_path: Path
) -> None:
    del spark  # the session the CLI's audit joins
    capture = tls_capture(made, tmp_path / "tls.pcap")
    (tmp_path / "keys.log").write_text(made.keylog)
    out = tmp_path / "out"
    ran = run_mqttaudit(
        "audit", str(capture), "--keylog", str(tmp_path / "keys.log"), "--out", str(out), "--tolerance", "1"
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    violations = pq.read_table(out / "violations").to_pylist()
    [connect] = [row for row in violations if row["rule"] == "MQTT-3.1.2-22"]
    masked = (b"*" * len(PASSWORD)).hex(" ")
    assert connect["evidence"].endswith(masked)
    assert holding(out, made) == []
    assert PASSWORD.decode() not in ran.stdout + ran.stderr


def test_sessions_the_key_log_names_but_that_cannot_be_decrypted_are_not_assessable_and_the_audit_exits_4(
    spark: SparkSession, made: Session, tmp_path: Path
) -> None:
    """Two captures: one session whose key log entry is wrong (its records' tags do not match), another whose
    ServerHello was not captured. Each connection is not decrypted, with its reason in every output; nothing else
    was judged, so the audit exits 4."""
    del spark
    other = session([CONNECT], [], maximum=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    wrong = "\n".join(
        f"{line.rsplit(' ', 1)[0]} {'ab' * 48}" if line.startswith("CLIENT_RANDOM") else line
        for line in made.keylog.splitlines()
    )
    (tmp_path / "keys.log").write_text(f"{wrong}\n{other.keylog}")
    tls_capture(made, tmp_path / "wrong-entry.pcap")
    tls_capture(dataclasses.replace(other, server_stream=b""), tmp_path / "no-server-hello.pcap", first_port=50000)
    out = tmp_path / "out"
    ran = run_mqttaudit(
        "audit", str(tmp_path / "*.pcap"), "--keylog", str(tmp_path / "keys.log"), "--out", str(out), "--tolerance", "1"
    )
    assert ran.returncode == 4, ran.stdout + ran.stderr
    summary = json.loads((out / "summary.json").read_text())
    findings = (out / "findings.md").read_text()
    connections = {row["capture"]: row for row in pq.read_table(out / "connections").to_pylist()}
    for capture, label in (("wrong-entry.pcap", TAG_MISMATCH), ("no-server-hello.pcap", NO_SERVER_HELLO)):
        reason = NOT_DECRYPTED_REASONS[label]
        assert reason in ran.stdout and reason in ran.stderr  # the summary's line, and why the run is incomplete
        assert summary["versions"][label] == {"connections": 1, "handling": reason, "packets": 0}
        assert reason in findings
        row = connections[capture]
        assert (row["transport"], row["version"], row["handling"], row["packets"]) == ("tls", label, reason, 0)


def test_the_tasks_are_given_the_key_log_s_location_never_its_secrets(made: Session, tmp_path: Path) -> None:
    """What Spark pickles for each task (the closures of the three stages and of the port detection) holds the
    key log's location and digest: a few hundred bytes whatever the key log's size, and no secret."""
    from pyspark import cloudpickle

    from mqttaudit.pipeline.detection import start_scanner
    from mqttaudit.pipeline.sealed import new_key

    keylog = KeyLogFile.at(str(big_keylog(made, tmp_path / "keys.log", 12_000)))
    options = AuditOptions(keylog=keylog, seal_key=new_key())
    for task in (partial(read_segments, options=options), flow_judge(options), sliced_replayer(options)):
        shipped = cloudpickle.dumps(task)
        assert len(shipped) < 8192
        assert not [name for name, needle in needles(made).items() if needle in shipped]
    assert len(cloudpickle.dumps(start_scanner(keylog))) < 8192
    # What the tasks look up is the user's file, read once per process.
    [random_hex] = [line.split()[1] for line in made.keylog.splitlines() if line.startswith("CLIENT_RANDOM")]
    assert bytes.fromhex(random_hex) in keylog
    assert keylog.secrets_for(bytes.fromhex(random_hex)) is not None


def test_the_key_log_file_finds_each_session_s_secrets_as_the_key_log_parser_does(tmp_path: Path) -> None:
    """The index the tasks keep (the first 8 bytes of each client random, and where its line starts) gives the
    secrets :class:`~mqttaudit.capture.tls.KeyLog` reads, for TLS 1.2 and 1.3 sessions among many others, with
    comments, unused labels, bad lines and a last line without a newline; a key log changed under the audit is
    refused."""
    from mqttaudit.capture.tls import KeyLog

    tls13 = session([b"x"], [b"y"])
    tls12 = session([b"x"], [b"y"], maximum=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-RSA-AES128-GCM-SHA256")
    others = [f"CLIENT_RANDOM {secrets.token_hex(32)} {secrets.token_hex(48)}" for _ in range(2000)]
    [twin] = [line.split()[1] for line in tls12.keylog.splitlines() if line.startswith("CLIENT_RANDOM")]
    noise = [
        "# a comment",
        f"EXPORTER_SECRET {secrets.token_hex(32)} {secrets.token_hex(32)}",
        f"CLIENT_RANDOM {twin[:16]}{'0' * 48} {secrets.token_hex(48)}",  # another session, the same first 8 bytes
        "CLIENT_RANDOM zz not-hex",
        "   ",
    ]
    text = "\n".join([*others[:1000], tls13.keylog.strip(), *noise, "  " + tls12.keylog.strip(), *others[1000:]])
    path = tmp_path / "keys.log"
    path.write_text(text)  # no newline after the last line
    keylog, parsed = KeyLogFile.at(str(path)), KeyLog.parse(text)
    for random in [*parsed.sessions, bytes(32)]:
        assert keylog.secrets_for(random) == parsed.secrets_for(random)
    assert (bytes.fromhex(twin) in keylog, bytes(32) in keylog) == (True, False)
    # A worker that reads the file after it changed (a digest other than the driver's) refuses it.
    with pytest.raises(KeyLogChanged, match="changed while the audit ran"):
        KeyLogFile(keylog.location, "0" * 64).secrets_for(bytes(32))


def test_a_flow_s_runs_out_of_order_are_judged_as_in_order() -> None:
    """The judging stage copies a flow's segments only when its runs come out of order (two captures of one flow
    given in any order): then they are put in order first, and judged the same."""
    import pyarrow as pa

    from mqttaudit.capture.segments import ACK, PSH, SYN
    from mqttaudit.pipeline.judging import judge_segments
    from mqttaudit.pipeline.segments import Runs
    from mqttaudit.pipeline.tables import SEGMENT_SCHEMA

    client, server = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    connect, connack = codec.encode(codec.Connect(client_id="c")), codec.encode(codec.Connack())
    segments = [
        (0, client, 40000, server, 1883, 1000, 0, SYN, b""),
        (1, server, 1883, client, 40000, 5000, 1001, SYN | ACK, b""),
        (2, client, 40000, server, 1883, 1001, 5001, PSH | ACK, connect),
        (3, server, 1883, client, 40000, 5001, 1001 + len(connect), PSH | ACK, connack),
    ]
    batches = []
    for capture, part in (("one.pcap", segments[:2]), ("two.pcap", segments[2:])):
        runs = Runs(capture)
        runs.extend([("flow", index, 10**18 + time, *rest) for index, (time, *rest) in enumerate(part)])
        batches += list(runs.finish())
    table = pa.Table.from_batches(batches, schema=SEGMENT_SCHEMA)
    options = AuditOptions(broker_ports=frozenset({1883}))
    in_order, reversed_order = (judge_segments(t, options) for t in (table, table.take([1, 0])))
    assert [row["packet_count"] for row in in_order] == [row["packet_count"] for row in reversed_order] == [2]


def test_a_key_log_line_longer_than_any_key_log_line_is_passed_over_in_bounded_memory(tmp_path: Path) -> None:
    """A 16 MiB line without a key log line's shape (a file that is not a key log, or a corrupt one) is read past,
    never held: the worker's index keeps at most one read and one line's worth of it. What looks like a key log line
    inside it is not a line start and is not indexed; the sessions after it are found."""
    import tracemalloc

    from mqttaudit.capture.tls import KeyLog

    tls13 = session([b"x"], [b"y"])
    fake = "0123456789abcdef" + "0" * 48
    junk = ("x" * 4093 + f" CLIENT_RANDOM {fake} {'ab' * 48} ") * 4096  # about 16 MiB, no newline
    text = junk + "\n" + tls13.keylog
    path = tmp_path / "keys.log"
    path.write_text(text)
    tracemalloc.start()
    try:
        keylog = KeyLogFile.at(str(path))
        for random in KeyLog.parse(tls13.keylog).sessions:
            assert keylog.secrets_for(random) is not None
        assert bytes.fromhex(fake) not in keylog
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 6 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB while indexing a 16 MiB line"


def test_the_driver_checks_a_key_log_in_one_pass_holding_neither_the_file_nor_a_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``audit --keylog``'s check (the real one, ``read_keylog``) names the lines it cannot use by number as
    ``KeyLog.parse`` does, and gives the tasks' :class:`KeyLogFile` (its location and digest, the same as
    ``KeyLogFile.at``). Before, it parsed the whole key log, every secret held: 76 MB at most for this 16 MiB one;
    now 8.5 MB, and what it returns holds no secret. (Its cap stays: it also refuses /dev/zero and sparse files at
    once, tests/test_cli_option_files.py.)"""
    import pickle
    import tracemalloc

    from mqttaudit.capture.tls import KeyLog
    from mqttaudit.cli.audit import read_keylog

    held = [f"CLIENT_RANDOM {secrets.token_hex(32)} {secrets.token_hex(48)}" for _ in range(100_000)]
    twice = held[7].split()
    bad = ["CLIENT_RANDOM 00", f"CLIENT_RANDOM {twice[1]} {secrets.token_hex(48)}", "# a comment", ""]
    text = "\n".join([*held[:50], *bad, *held[50:], "CLIENT_TRAFFIC_SECRET_0 zz 00"]) + "\n"
    path = tmp_path / "keys.log"
    path.write_text(text)
    assert path.stat().st_size > 16 * 2**20
    tracemalloc.start()
    try:
        keylog = read_keylog(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12 * 2**20, f"the check held {peak / 2**20:.1f} MiB for a {path.stat().st_size >> 20} MiB key log"
    assert keylog == KeyLogFile.at(str(path))
    parsed = KeyLog.parse(text)
    said = capsys.readouterr().err.splitlines()
    assert said == [f"key log: {problem} (skipped)" for problem in parsed.problems]
    assert [problem.line for problem in parsed.problems] == [51, 52, len(held) + len(bad) + 1]
    kept = pickle.dumps(keylog) + repr(keylog).encode()
    assert not any(line.split()[2].encode() in kept or bytes.fromhex(line.split()[2]) in kept for line in held[:1000])
