"""``mqttaudit matrix --format json``: the terminal's summary as one JSON document on standard output, with the exit
status of the text run; run as a newcomer runs it (a process of its own) against a real mosquitto and a port with
nothing on it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mqttaudit.probe.brokers import RunningBroker, free_port

from .child import run_child

PASSING = "ping/pingresp"
FAILING = "malformed/pingreq-flag-bit-0"  # mosquitto answers PINGRESP and stays open (pinned in test_probe_cli)


def matrix(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    return run_child("matrix", *args, "--out", str(out), "--timeout", "0.5", timeout=300)


def test_matrix_format_json_is_one_document_with_the_text_runs_exit_status(
    mosquitto: RunningBroker, tmp_path: Path
) -> None:
    gone = f"mqtt://127.0.0.1:{free_port()}"
    targets = [f"mosquitto={mosquitto.url}", f"gone={gone}", "--cases", f"{PASSING},{FAILING}"]
    text = matrix(*targets, out=tmp_path / "text")
    ran = matrix(*targets, "--format", "json", out=tmp_path / "json")

    assert text.returncode == ran.returncode == 1, ran.stderr  # a MUST failed on mosquitto: 1 wins over 4
    document = json.loads(ran.stdout)  # the whole of standard output is one document: no summary lines
    assert document["exit_status"] == 1
    assert {str(tmp_path / "json" / name) for name in ("matrix.md", "matrix.html")} <= set(document["outputs"])
    broker, nothing = document["targets"]
    assert (broker["label"], broker["exit_status"], broker["incomplete"]) == ("mosquitto", 1, None)
    assert [failed["case"] for failed in broker["failed"]] == [FAILING]
    assert broker["summary"]["pass"] == 1 and broker["summary"]["fail"] == 1
    assert (nothing["label"], nothing["exit_status"], nothing["target"]) == ("gone", 4, gone)
    assert "nothing was probed" in nothing["incomplete"]
    assert f"mqttaudit: cannot reach {gone}" in ran.stderr  # the refusal stays on standard error
    assert f"FAIL {FAILING}" in text.stdout and "FAIL" not in ran.stdout
