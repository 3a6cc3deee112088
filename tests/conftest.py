"""Fixtures shared across test files: one Spark session (``local[2]``) for every test that needs Spark, and a
mosquitto and an mqttools broker per test module that probes them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqttaudit.probe.brokers import RunningBroker

    from .library_runs import LibraryRuns


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from mqttaudit.pipeline.spark import spark_session

    session = spark_session("local[2]", app_name="mqttaudit-tests", shuffle_partitions=4)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def library_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LibraryRuns]:
    """The whole probe library against each broker, once per broker and concurrency (:mod:`tests.library_runs`)."""
    from .library_runs import library_runs

    yield from library_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def mosquitto() -> Iterator[RunningBroker]:
    """mosquitto (Debian's, 2.0.11 here) on a free port of 127.0.0.1, for the tests of one module."""
    from mqttaudit.probe.brokers import start_broker

    with start_broker("mosquitto") as broker:
        yield broker


@pytest.fixture(scope="module")
def mqttools() -> Iterator[RunningBroker]:
    """mqttools (an MQTT 5.0-only broker) on a free port of 127.0.0.1, for the tests of one module."""
    from mqttaudit.probe.brokers import start_broker

    with start_broker("mqttools") as broker:
        yield broker


# -- the third-party corpus (tests/corpus.py): skipped before fixtures when missing, and counted in one line -------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``captures`` is skipped without the corpus (failed under CI=true) before its fixtures run."""
    if item.get_closest_marker("captures") is not None:
        from .corpus import require_captures

        require_captures()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per missing folder instead of one reason per test, counted from the reports: under pytest-xdist
    they come from the workers, and this hook runs on the controller. Under CI=true the same tests fail."""
    from collections import Counter

    from .corpus import CAPTURES_MISSING, SPEC_LISTS_MISSING

    stats = terminalreporter.stats
    counted: Counter[tuple[str, str]] = Counter()
    for outcome, reports in (
        ("skipped", stats.get("skipped", [])),
        ("failed", [*stats.get("failed", []), *stats.get("error", [])]),
    ):
        for report in reports:
            longrepr = getattr(report, "longrepr", None)
            # A skip's longrepr is (path, line, "Skipped: reason"); a failure's prints as its message.
            text = str(longrepr[2]) if isinstance(longrepr, tuple | list) and len(longrepr) == 3 else str(longrepr)
            reason = text.removeprefix("Skipped: ").strip()
            if reason.startswith((CAPTURES_MISSING, SPEC_LISTS_MISSING)):
                counted[outcome, reason] += 1
    for (outcome, reason), count in counted.items():
        terminalreporter.write_line(f"mqttaudit: {count} test{'s' if count != 1 else ''} {outcome}: {reason}")
