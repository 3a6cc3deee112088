"""Fixtures shared across test files: one Spark session (``local[2]``) for every test that needs Spark, a mosquitto
and an mqttools broker per test module that probes them, the whole library's runs per broker, and the Spark audit of
the shared captures; and how the tests are shared out among pytest-xdist's workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mqttaudit.probe.brokers import RunningBroker

    from .library_runs import LibraryRuns
    from .shared_captures_on_spark import SharedCapturesAudit


# -- sharing the tests out among pytest-xdist's workers (make test: -n 4 --dist loadgroup --no-loadscope-reorder) -----

#: The modules that took longest in a whole run (pytest --durations), longest first: handed out first, so that none
#: of them ends the run alone while the other workers idle. Speed only: a module missing here merely starts later.
LONGEST_FIRST = (
    "tests/test_capture_expectations.py",
    "tests/test_pipeline_audit.py",
    "tests/test_audit_object_store.py",
    "tests/test_pipeline_detection.py",
    "tests/test_probe_hostile.py",
    "tests/test_cli_fail_loudly.py",
    "tests/test_routing_observation.py",
    "tests/test_probe_concurrency.py",
    "tests/test_topics_trie.py",
    "tests/test_capture_tls_live.py",
    "tests/test_probe_transports.py",
    "tests/test_report_precision.py",
    "tests/test_readme.py",
    "tests/test_capture_hostile.py",
    "tests/test_audit_transports.py",
    "tests/test_codec_properties_5.py",
    "tests/test_audit_observation.py",
    "tests/test_probe_brokers.py",
    "tests/test_serve_scenarios.py",
)


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _group_of(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test without an xdist group of its own goes with its module, so that a module's fixtures (its brokers,
    its audits) are made once, in one worker; the whole-library runs' group goes first, then the longest modules."""
    from .library_runs import GROUP

    for item in items:
        if _group_of(item) is None:
            item.add_marker(pytest.mark.xdist_group(_module_of(item)))

    def rank(item: pytest.Item) -> int:
        if _group_of(item) == GROUP.args[0]:
            return 0
        module = _module_of(item)
        return 1 + LONGEST_FIRST.index(module) if module in LONGEST_FIRST else 1 + len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within a rank


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``--dist loadgroup`` pytest-xdist groups a worker's tests by a suffix it adds to their node ids; a
    pytest on which that no longer works (9.2 computes node ids afresh) would share every group's runs out to every
    worker, each making them again: refuse to run instead."""
    if getattr(session.config.option, "loadgroup", False) and any("@" not in i.nodeid for i in session.items):
        raise pytest.UsageError(
            "pytest-xdist did not group the tests (--dist loadgroup): this pytest is not one it supports "
            "(constraints.txt pins one that is)"
        )


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


@pytest.fixture(scope="session")
def shared_captures_on_spark(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> SharedCapturesAudit:
    """The shared captures audited together on Spark with small slices, once (:mod:`tests.shared_captures_on_spark`)."""
    from .shared_captures_on_spark import audit_on_spark

    return audit_on_spark(spark, tmp_path_factory.mktemp("shared-captures-on-spark"))


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
