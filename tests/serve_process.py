"""``mqttaudit serve`` in a process of its own, for the tests that run it as a user does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Served:
    status: int
    report: dict[str, Any]
    said: str


class ServeProcess:
    """``mqttaudit serve`` in a process of its own, listening on free ports; :meth:`stop` sends SIGINT (how a user
    stops it) and returns its exit status, its report and what it said."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.folder = folder
        self.log = folder / "serve.log"
        command = [sys.executable, "-m", "mqttaudit", "serve", "--listen", "127.0.0.1:0", "--out", str(folder / "out")]
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([*command, *options], stdout=log, stderr=subprocess.STDOUT)
        self.urls = self._wait_listening()

    def _wait_listening(self, timeout: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log.read_text(errors="replace").splitlines():
                if "listening on " in line:
                    return line.split("listening on ", 1)[1].split(" (", 1)[0].split()
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.process.kill()
        raise AssertionError(f"mqttaudit serve did not start: {self.log.read_text(errors='replace')}")

    def stop(self) -> Served:
        self.process.send_signal(signal.SIGINT)
        status = self.process.wait(timeout=60)
        report = json.loads((self.folder / "out" / "findings.json").read_text())
        return Served(status, report, self.log.read_text(errors="replace"))
