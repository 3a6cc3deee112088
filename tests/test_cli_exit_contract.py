"""The exit-status contract where a newcomer found holes, each through the real command in a process of its own:
a reader that leaves early (``| head -n1``) ends the command quietly with the status of what it found,
``decode`` of nothing judges nothing (exit 4, never 0), and an audit whose ``spark://`` master nobody answers at
says so before Spark starts (exit 4, no Java traceback)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from mqttaudit.capture import writer
from mqttaudit.codec import Connack, Connect, encode
from mqttaudit.probe.brokers import free_port, start_broker
from mqttaudit.spec import load_catalogue

from .child import MQTTAUDIT, child_env, run_child

MQTTAUDIT_IN_A_SHELL = shlex.join(MQTTAUDIT)


def piped_to_head(arguments: str, cwd: Path, reader: str = "head -n1") -> tuple[int, str, str]:
    """``mqttaudit ARGUMENTS | head -n1`` in a shell: mqttaudit's exit status, what the reader printed, and what
    mqttaudit wrote to standard error."""
    script = f"{MQTTAUDIT_IN_A_SHELL} {arguments} 2>stderr.txt | {reader}; exit ${{PIPESTATUS[0]}}"
    ran = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=120, check=False
    )
    return ran.returncode, ran.stdout, (cwd / "stderr.txt").read_text()


#: Each prints far more than a pipe holds (64 KiB), so head leaves while mqttaudit still writes; ``true`` leaves
#: before mqttaudit has started: (arguments, reader, exit status, what the reader shows first).
PIPED = {
    "rules-json": ("rules --protocol 5 --format json", "head -n1", 0, "["),
    "rules-explained": (
        "rules --protocol 5 " + " ".join(r.id for r in load_catalogue("5.0")),
        "head -n1",
        0,
        "MQTT-1.5.4-1",
    ),
    "rules-to-true": ("rules", "true", 0, ""),
    "decode-clean": ("decode --from client --hex '" + "c0 00 " * 20_000 + "'", "head -n1", 0, "frame 0 at offset 0"),
    "decode-findings": ("decode --from client --hex '" + "c2 00 " * 20_000 + "'", "head -n1", 1, "frame 0 at "),
    "decode-nothing-to-true": ("decode --hex ''", "true", 4, ""),
}


@pytest.mark.parametrize("name", PIPED)
def test_a_reader_that_leaves_early_ends_the_command_quietly_with_its_status(name: str, tmp_path: Path) -> None:
    arguments, reader, status, first = PIPED[name]
    code, shown, stderr = piped_to_head(arguments, tmp_path, reader)
    assert shown.startswith(first), shown
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "Broken pipe" not in stderr
    if status == 4:
        assert stderr == "mqttaudit: incomplete: nothing was judged: no packet in 0 bytes of input\n"
    else:
        assert stderr == ""
    assert code == status


def test_a_probe_whose_reader_leaves_at_once_still_writes_its_reports_and_exits_with_its_verdict(
    tmp_path: Path,
) -> None:
    """The probe writes to standard output only at its end, when ``true`` has long left: every write meets a pipe
    without a reader."""
    with start_broker("mosquitto") as broker:
        arguments = f"probe {broker.url} --cases 'ping/*' --out out --timeout 2"
        code, _, stderr = piped_to_head(arguments, tmp_path, reader="true")
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "Broken pipe" not in stderr
    assert stderr.strip() == "." * stderr.strip().count(".")  # its progress marks alone
    assert (tmp_path / "out" / "findings.json").is_file()


@pytest.mark.parametrize("given", [["--hex", ""], ["--hex", "  "], ["--file", os.devnull], ["--file", "-"]])
def test_decode_of_zero_bytes_judges_nothing_and_exits_4(given: list[str]) -> None:
    ran = run_child("decode", *given, "--format", "json", input=b"", text=False, timeout=60)
    assert ran.returncode == 4, ran
    assert ran.stderr.decode() == "mqttaudit: incomplete: nothing was judged: no packet in 0 bytes of input\n"
    assert b'"packets": []' in ran.stdout


def test_an_audit_whose_spark_master_nobody_answers_at_is_incomplete_before_spark_starts(tmp_path: Path) -> None:
    """Exit 4, not 2: the URL is well formed and the cluster may be up later, as a probe's broker may (an
    unreachable target is incomplete there too). Before, Spark's client tried for 71 s and died in a Java traceback
    (exit 3)."""
    session = writer.TcpSession(("10.0.0.1", 41000), ("10.0.0.2", 1883))
    packets = [
        *session.handshake(),
        session.send(0, encode(Connect(client_id="c"))),
        session.send(1, encode(Connack())),
    ]
    frames = [(1_700_000_000_000_000_000 + i * 1_000_000, writer.ethernet(p)) for i, p in enumerate(packets)]
    (tmp_path / "capture.pcap").write_bytes(writer.pcap_bytes(frames, linktype=1))
    master = f"spark://127.0.0.1:{free_port()}"  # nobody listens there
    ran = run_child("audit", "capture.pcap", "--master", master, "--out", "out", cwd=tmp_path)
    assert ran.returncode == 4, ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        f"mqttaudit: incomplete: --master {master}: cannot reach the Spark master ({master[8:]}: connection refused): "
        "nothing was audited"
    ), ran.stderr
    assert "Traceback" not in ran.stderr and "java" not in ran.stderr.lower()
    assert "Spark's own messages" not in ran.stderr  # no JVM was started
    assert not (tmp_path / "out").exists()
