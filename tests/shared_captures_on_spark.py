"""The Spark audit of the 31 shared captures (the third-party corpus, :mod:`tests.corpus`) audited together, run once
per test session and read by every test that holds another audit of them against it: the whole model's
(:mod:`tests.whole_replay`, in ``test_pipeline_sliced_replay.py``) and the local engine's
(``test_pipeline_local_engine.py``, with its default slices).

Its routing replay cuts each broker's traffic into slices of 200 bytes of messages, by bytes alone, far smaller than
the traffic: the audits it is compared with must write the same tables whatever their slices, which is what those
tests prove.

Under pytest-xdist every worker process has a session of its own: the tests that read this audit carry the xdist
group :data:`GROUP`, so that they meet in one worker and the audit runs once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mqttaudit.pipeline.audit import AuditResult, run_audit

from .corpus import capture, inventory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The xdist group of every test that reads the audit.
GROUP = pytest.mark.xdist_group("shared-captures-on-spark")


@dataclass(frozen=True)
class SharedCapturesAudit:
    """The captures audited, in the order they were given, and the audit: its output folder and its result."""

    paths: list[str]
    out: Path
    result: AuditResult


def shared_captures() -> list[str]:
    """The corpus's captures, by their path in it (the test is skipped without the corpus)."""
    return [str(capture(name)) for name in sorted(inventory())]


def audit_on_spark(spark: SparkSession, folder: Path) -> SharedCapturesAudit:
    """The body of the session fixture ``shared_captures_on_spark`` (conftest.py): the audit on the Spark engine,
    into ``folder``."""
    paths = shared_captures()
    out = folder / "spark"
    result = run_audit(paths, out, spark=spark, engine="spark", slice_bytes=200, slice_span=0)
    return SharedCapturesAudit(paths, out, result)
