"""``python -m mqttaudit probe`` as a child process, measured: its exit status, what it printed, its wall time and
its peak resident memory, for the tests that attack the real command with a hostile broker on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .child import SOURCE

#: The reports every probe run writes.
REPORTS = ("findings.json", "findings.md", "junit.xml")


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str
    wall: float
    peak_rss_mb: float
    out: Path

    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = json.loads((self.out / "findings.json").read_text(encoding="utf-8"))
        return report

    def sizes(self) -> dict[str, int]:
        return {name: (self.out / name).stat().st_size for name in REPORTS}


def high_water_kib(pid: int) -> int:
    """The peak resident memory of process ``pid`` so far (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def probe(target: str, out: Path, *args: str, limit: float, source: Path = SOURCE) -> Outcome:
    """Runs ``python -m mqttaudit probe`` (from ``source``) as a child, killed after ``limit`` seconds. Its peak
    RSS is the kernel's high-water mark of the child's own memory (``VmHWM``), read while it runs: ``ru_maxrss``
    from wait4 would also count the parent's memory at the fork (the test process, large after the Spark tests),
    not the prober's."""
    command = [sys.executable, "-m", "mqttaudit", "probe", target, "--out", str(out), *args]
    env = {**os.environ, "PYTHONPATH": str(source), "COLUMNS": "100"}
    stdout, stderr = out.parent / f"{out.name}.stdout", out.parent / f"{out.name}.stderr"
    started = time.monotonic()
    with stdout.open("wb") as o, stderr.open("wb") as e:
        child = subprocess.Popen(command, stdout=o, stderr=e, env=env)
        peak_kib = 0
        while True:
            peak_kib = max(peak_kib, high_water_kib(child.pid))
            pid, status, _usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > limit:
                child.kill()
                pid, status, _usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    return Outcome(
        child.returncode,
        stdout.read_text(errors="replace"),
        stderr.read_text(errors="replace"),
        time.monotonic() - started,
        peak_kib / 1024,
        out,
    )
