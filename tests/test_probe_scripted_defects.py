"""Verdicts a broker maintainer could contest, each pinned on a scripted broker (tests/scripted_broker.py) that
behaves as a conforming broker but for one act, described in bytes, driven by the real ``mqttaudit probe``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .cli_in_process import run_mqttaudit
from .scripted_broker import WILL_BEFORE_CLOSE, ScriptedBroker

TIMEOUT = "1.0"


def probe(
    broker: ScriptedBroker, out: Path, cases: str, *args: str
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """The exit status of ``mqttaudit probe`` against ``broker``, and the results and the run's violations in its
    findings.json."""
    ran = run_mqttaudit("probe", broker.url, "--out", str(out), "--timeout", TIMEOUT, "--cases", cases, *args)
    findings = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    return ran.returncode, findings["results"], findings["violations"]


def event_time(result: dict[str, Any], connection: str, test: str) -> float:
    """The time of the first event of ``connection`` whose packet description or close matches ``test``."""
    [events] = [c["events"] for c in result["evidence"]["connections"] if c["name"] == connection]
    return next(e["t"] for e in events if test in (e.get("packet") or "") or test == e.get("closed_by"))


# Cross-socket order: the Will a moment before the close it is published for ------------------------------------


@pytest.mark.parametrize("case", ["malformed/disconnect-flag-bit-0", "v5/malformed/disconnect-flag-bit-0"])
def test_a_will_the_watcher_sees_just_before_the_close_is_seen_is_a_will_after_the_close(
    case: str, tmp_path: Path
) -> None:
    """The broker answers ``e1 00`` (DISCONNECT with a reserved flag bit) on c2 by publishing its Will (QoS 1) to
    the watcher and, once the watcher acknowledged it, (5.0) ``e0 02 81 00`` and the close: the watcher's socket
    shows the Will before the prober's shows the close, as real brokers' 0.1-0.2 ms do."""
    with ScriptedBroker(WILL_BEFORE_CLOSE) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    will, close = event_time(result, "watcher", "PUBLISH"), event_time(result, "c2", "server")
    assert will < close  # the order the judge must take as one instant
    assert result["verdict"] == "pass", result["reason"]
    assert result["evidence"]["statements"]["MQTT-3.1.2-8"] == "pass"
    assert status == 0
