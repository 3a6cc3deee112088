"""The whole probe library against each broker of the suite, run once per broker and concurrency in a test session
and read by every test that asserts on it.

Per broker, two runs, each on a fresh broker of its own:

- the **default run**: ``mqttaudit probe URL --out DIR``, a process of its own (every case of both versions, the
  default concurrency), whose exit status and reports (``findings.json``, ``findings.md``, ``junit.xml``) several
  test files read; its broker stays up until the session ends, so that a test can look at what the run left on it;
- the **run alone**: the MQTT 3.1.1 library one case at a time (concurrency 1), the reference the default run's
  verdicts are compared with.

Most of a run is waiting on the broker, so the first test that asks for any broker's runs starts them all, side by
side, and each test waits for its broker's. Under pytest-xdist every worker process has a session of its own: the
tests that read these runs carry the xdist group :data:`GROUP`, so that they meet in one worker and the runs happen
once.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqttaudit.codec import ProtocolVersion
from mqttaudit.probe.brokers import VERSIONS, BrokerName, BrokerUnavailable, RunningBroker, start_broker
from mqttaudit.probe.case import Case, Target, all_cases
from mqttaudit.probe.runner import ProbeRun, run_probe

#: The brokers whose whole library the suite runs (mqttools speaks MQTT 5.0 only: its families run in their tests).
BROKERS: tuple[BrokerName, ...] = ("mosquitto", "aedes", "amqtt", "rabbitmq")
#: The xdist group of every test that reads these runs.
GROUP = pytest.mark.xdist_group("library-runs")
#: How long a default run may take before it is stopped (a hang becomes the test's failure, with the run's output).
DEFAULT_RUN_LIMIT = 600.0


def by_broker(*names: BrokerName) -> list[Any]:
    """``names`` as parameters of a test that reads their runs (in the xdist group :data:`GROUP`)."""
    return [pytest.param(name, marks=GROUP, id=name) for name in names]


def library_3_1_1() -> list[Case]:
    """The MQTT 3.1.1 library: every broker here speaks it."""
    return [case for case in all_cases() if case.protocol is ProtocolVersion.V3_1_1]


@dataclass
class DefaultRun:
    """``mqttaudit probe URL --out DIR`` against a fresh broker: its exit status, its reports, what it printed, and
    the broker (still up)."""

    name: BrokerName
    status: int
    out: Path
    broker: RunningBroker
    said: str

    @property
    def report(self) -> dict[str, Any]:
        """findings.json (read again at each call: a test may not change another's copy)."""
        loaded: dict[str, Any] = json.loads((self.out / "findings.json").read_text())
        return loaded

    def verdicts(self) -> dict[str, tuple[str, str]]:
        """case -> (verdict, reason), in library order."""
        return {r["case"]: (r["verdict"], r["reason"]) for r in self.report["results"]}


@dataclass
class BrokerRuns:
    default: DefaultRun
    #: The 3.1.1 library one case at a time: case -> (verdict, reason), in library order.
    alone: dict[str, tuple[str, str]]


@dataclass
class _Pending:
    """One broker's two runs while they go on: the default run's process and the thread of the run alone."""

    name: BrokerName
    broker: RunningBroker
    out: Path
    said: Path
    process: subprocess.Popen[bytes]
    beside: threading.Thread | None = None
    alone: list[dict[str, tuple[str, str]]] = field(default_factory=list)
    failed: list[BaseException] = field(default_factory=list)

    def run_alone(self) -> None:
        try:
            with start_or_fail(self.name) as broker:
                run = asyncio.run(run_probe(Target.parse(broker.url), library_3_1_1(), concurrency=1))
            self.alone.append({r.case.id: (r.verdict, r.reason) for r in run.results})
        except BaseException as exc:
            self.failed.append(exc)

    def start_alone(self) -> None:
        self.beside = threading.Thread(target=self.run_alone, name=f"{self.name}-alone")
        self.beside.start()

    def join(self) -> None:
        if self.beside is not None:
            self.beside.join()

    def result(self) -> BrokerRuns:
        try:
            self.process.wait(timeout=DEFAULT_RUN_LIMIT)
        except subprocess.TimeoutExpired:
            _stop(self.process)
            limit = f"{DEFAULT_RUN_LIMIT:g} s"
            pytest.fail(f"mqttaudit probe {self.broker.url} did not end within {limit}:\n{self._said()}")
        self.join()
        if self.failed:
            raise self.failed[0]
        default = DefaultRun(self.name, self.process.returncode, self.out, self.broker, self._said())
        return BrokerRuns(default, self.alone[0])

    def _said(self) -> str:
        return self.said.read_text(errors="replace")


@dataclass
class LibraryRuns:
    """The runs of this session: every broker's start on the first request (see the module's text)."""

    tmp_path_factory: pytest.TempPathFactory
    _stack: ExitStack = field(default_factory=ExitStack)
    _pending: dict[BrokerName, _Pending] = field(default_factory=dict)
    _done: dict[BrokerName, BrokerRuns] = field(default_factory=dict)
    #: Why a broker's runs could not start: every test that asks for them fails with it, not only the first.
    _failed: dict[BrokerName, str] = field(default_factory=dict)

    def __call__(self, name: BrokerName) -> BrokerRuns:
        if not self._pending and not self._failed:
            for broker_name in BROKERS:
                try:
                    self._pending[broker_name] = self._start(broker_name)
                except (pytest.fail.Exception, OSError) as exc:
                    self._failed[broker_name] = f"{broker_name}'s library runs could not start: {exc}"
        if name in self._failed:
            pytest.fail(self._failed[name], pytrace=False)
        if name not in self._done:
            self._done[name] = self._pending[name].result()
        return self._done[name]

    def _start(self, name: BrokerName) -> _Pending:
        assert "3.1.1" in VERSIONS[name], name
        broker = self._stack.enter_context(start_or_fail(name))
        out = self.tmp_path_factory.mktemp(f"{name}-probe")
        # a process of its own: the command line as a user runs it, and beside the other brokers' runs
        command = [sys.executable, "-m", "mqttaudit", "probe", broker.url, "--out", str(out)]
        said = out.parent / f"{out.name}.said"  # a file, not a pipe: a run nobody reads yet never blocks on its output
        with said.open("w") as output:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
        self._stack.callback(_stop, process)
        pending = _Pending(name, broker, out, said, process)
        pending.start_alone()
        return pending

    def close(self) -> None:
        for pending in self._pending.values():
            pending.join()
        self._stack.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def start_or_fail(name: BrokerName) -> RunningBroker:
    """``name`` on a free port; a broker this machine lacks fails the test (``make test`` installs them all)."""
    try:
        return start_broker(name)
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def probe(cases: list[Case], url: str) -> ProbeRun:
    """``cases`` against ``url`` at the default concurrency, through the library."""
    return asyncio.run(run_probe(Target.parse(url), cases))


def library_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LibraryRuns]:
    """The body of the session fixture ``library_runs`` (conftest.py)."""
    runs = LibraryRuns(tmp_path_factory)
    try:
        yield runs
    finally:
        runs.close()
