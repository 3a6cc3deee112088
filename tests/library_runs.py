"""The whole probe library against each broker of the suite, run once per broker and concurrency in a test session
and read by every test that asserts on it.

Per broker, two runs go on side by side, each on a fresh broker of its own:

- the **default run**: ``mqttaudit probe URL --out DIR`` through the command line (every case of both versions,
  the default concurrency), whose exit status and reports (``findings.json``, ``findings.md``, ``junit.xml``)
  several test files read; its broker stays up until the session ends, so that a test can look at what the run
  left on it;
- the **run alone**: the MQTT 3.1.1 library one case at a time (concurrency 1), the reference the default run's
  verdicts are compared with.

Under pytest-xdist every worker process has a session of its own: the tests that read one broker's runs carry the
xdist group :func:`group` names, so that they meet in one worker and the runs happen once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mqttaudit.cli.main import main
from mqttaudit.codec import ProtocolVersion
from mqttaudit.probe.brokers import VERSIONS, BrokerName, BrokerUnavailable, RunningBroker, start_broker
from mqttaudit.probe.case import Case, Target, all_cases
from mqttaudit.probe.runner import ProbeRun, run_probe

#: The brokers whose whole library the suite runs (mqttools speaks MQTT 5.0 only: its families run in their tests).
BROKERS: tuple[BrokerName, ...] = ("mosquitto", "aedes", "amqtt", "rabbitmq")


def group(name: BrokerName) -> pytest.MarkDecorator:
    """The xdist group of the tests that read ``name``'s library runs."""
    return pytest.mark.xdist_group(f"library-{name}")


def by_broker(*names: BrokerName) -> list[Any]:
    """``names`` as parameters, each in its broker's xdist group."""
    return [pytest.param(name, marks=group(name), id=name) for name in names]


def library_3_1_1() -> list[Case]:
    """The MQTT 3.1.1 library: every broker here speaks it."""
    return [case for case in all_cases() if case.protocol is ProtocolVersion.V3_1_1]


@dataclass
class DefaultRun:
    """``mqttaudit probe URL --out DIR`` against a fresh broker: its exit status, its reports, and the broker."""

    name: BrokerName
    status: int
    out: Path
    broker: RunningBroker

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
class LibraryRuns:
    """The runs of this session, made on first request (see the module's text)."""

    tmp_path_factory: pytest.TempPathFactory
    _stack: ExitStack = field(default_factory=ExitStack)
    _done: dict[BrokerName, BrokerRuns] = field(default_factory=dict)

    def __call__(self, name: BrokerName) -> BrokerRuns:
        if name not in self._done:
            self._done[name] = self._run(name)
        return self._done[name]

    def _run(self, name: BrokerName) -> BrokerRuns:
        assert "3.1.1" in VERSIONS[name], name
        alone: list[dict[str, tuple[str, str]]] = []
        failed: list[BaseException] = []

        def run_alone() -> None:
            try:
                with start_or_fail(name) as broker:
                    run = asyncio.run(run_probe(Target.parse(broker.url), library_3_1_1(), concurrency=1))
                alone.append({r.case.id: (r.verdict, r.reason) for r in run.results})
            except BaseException as exc:
                failed.append(exc)

        beside = threading.Thread(target=run_alone, name=f"{name}-alone")
        beside.start()
        try:
            broker = self._stack.enter_context(start_or_fail(name))
            out = self.tmp_path_factory.mktemp(f"{name}-probe")
            status = main(["probe", broker.url, "--out", str(out)])  # in this thread: it handles SIGTERM
        finally:
            beside.join()
        if failed:
            raise failed[0]
        return BrokerRuns(DefaultRun(name, status, out, broker), alone[0])

    def close(self) -> None:
        self._stack.close()


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
