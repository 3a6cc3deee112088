"""A pytest plugin for client libraries' test suites: the ``mqttaudit_serve`` fixture starts the strict reference
broker on a free port of 127.0.0.1 for one test, yields it (``.url``, ``.host``, ``.port``), and fails the test when
a client connection broke a statement, with the findings in the failure message.

Installed with mqttaudit (entry point ``pytest11``); options:

``--mqttaudit-scenario NAME``  put the clients in a scenario (``mqttaudit serve --list-scenarios``); a test may
    choose its own with ``@pytest.mark.mqttaudit_scenario("receive-maximum-1")``.
``--mqttaudit-report DIR``  write each test's ``findings.json`` and ``findings.md`` under DIR.

At the end of the session the terminal summary gives the statement coverage of every test together: how many of
the client statements of each version (72 in 3.1.1, 133 in 5.0) the clients exercised, with a verdict for each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..report.serve_reports import write_serve_reports
from ..serve.background import BackgroundServe
from ..serve.coverage import VERSIONS, coverage
from ..serve.scenarios import SCENARIOS
from ..serve.server import ServedClient

_RUNS: pytest.StashKey[list[ServedClient]] = pytest.StashKey()
#: Seconds the fixture waits at teardown for the test's connections to be judged.
SETTLE = 5.0


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mqttaudit", "mqttaudit serve: a strict MQTT broker that judges the clients under test")
    group.addoption("--mqttaudit-scenario", default=None, help="The scenario every mqttaudit_serve broker runs.")
    group.addoption("--mqttaudit-report", default=None, help="Write each test's findings under this folder.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "mqttaudit_scenario(name): the scenario this test's mqttaudit_serve runs")
    config.stash[_RUNS] = []


_SERVE: pytest.StashKey[BackgroundServe] = pytest.StashKey()


@pytest.fixture
def mqttaudit_serve(request: pytest.FixtureRequest) -> Iterator[BackgroundServe]:
    """mqttaudit serve on a free port for this test; the test fails when a client broke a statement."""
    marker = request.node.get_closest_marker("mqttaudit_scenario")
    name = marker.args[0] if marker is not None else request.config.getoption("--mqttaudit-scenario")
    if name is not None and name not in SCENARIOS:
        raise pytest.UsageError(f"no mqttaudit scenario {name!r}; `mqttaudit serve --list-scenarios` lists them")
    serve = BackgroundServe(scenario=SCENARIOS[name] if name else None).start()
    request.node.stash[_SERVE] = serve
    try:
        yield serve
    finally:
        _finish(request.node, serve)  # when the test body raised, its findings are still recorded


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After the test body, the broker is stopped and its verdict fails the test itself (not its teardown)."""
    result = yield
    serve = item.stash.get(_SERVE, None)
    if serve is not None:
        _finish(item, serve)
        run = serve.stop()
        broken = [(client, finding) for client in run.clients for finding in client.client_findings]
        defects = [(client, finding) for client in run.clients for finding in client.server_findings]
        if broken or defects:
            lines = [f"{client.name} ({client.client_id!r}): {f.rule} {f.detail}" for client, f in broken]
            lines += [f"{client.name}: a defect of mqttaudit serve: {f.rule} {f.detail}" for client, f in defects]
            pytest.fail("mqttaudit serve: the client broke MQTT statements:\n" + "\n".join(lines), pytrace=False)
    return result


_FINISHED: pytest.StashKey[bool] = pytest.StashKey()


def _finish(item: pytest.Item, serve: BackgroundServe) -> None:
    """Stops the broker once the test's connections ended (or :data:`SETTLE` passed), once per test, and keeps
    its clients for the coverage and its reports when asked."""
    if item.stash.get(_FINISHED, False):
        return
    item.stash[_FINISHED] = True
    serve.wait_for_open_connections_to_end(SETTLE)
    run = serve.stop()
    item.config.stash[_RUNS].extend(run.clients)
    folder = item.config.getoption("--mqttaudit-report")
    if folder:
        write_serve_reports(run, Path(folder) / re.sub(r"[^\w.-]+", "_", item.nodeid))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    clients = config.stash.get(_RUNS, [])
    if not clients:
        return
    terminalreporter.section("mqttaudit serve: client statement coverage")
    for version in VERSIONS:
        if not any(client.version == version for client in clients):
            continue
        cov = coverage(clients, version)
        terminalreporter.write_line(
            f"MQTT {version}: {cov.exercised} of {len(cov.statements)} client statements exercised "
            f"({cov.count('pass')} pass, {cov.count('fail')} fail, {cov.count('not assessable')} not assessable)"
        )
