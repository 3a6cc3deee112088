"""``mqttaudit.audit(...)``: the capture audit as a library call (``mqttaudit.audit`` loads this module on first
use; typed callers may import :func:`audit` from here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from pathlib import Path

from mqttaudit.capture.budgets import DEFAULT_BUDGETS, Budgets

from .audit import AuditResult, run_audit
from .engines import AUTO, LOCAL_LIMIT_BYTES

__all__ = ["AuditResult", "Budgets", "audit"]


def audit(
    paths: str | PathLike[str] | Sequence[str | PathLike[str]],
    *,
    out: str | PathLike[str],
    master: str = "local[*]",
    ports: Iterable[int] | None = None,
    tolerance: float = 5.0,
    late_window: float = 60.0,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
    budgets: Budgets = DEFAULT_BUDGETS,
    engine: str = AUTO,
    local_limit_bytes: int = LOCAL_LIMIT_BYTES,
) -> AuditResult:
    """Audits pcap/pcapng captures (files, folders, globs, filesystem URLs) on Spark into the folder ``out`` (a
    path, or a URL such as ``s3://bucket/prefix``) (Parquet tables, ``summary.json``, ``report.html``,
    ``findings.md``, ``findings.jsonl``, ``junit.xml``), published only when the audit completes.

    ``ports`` restricts the audit to flows on those TCP ports (by default MQTT is recognised on any port).
    ``tolerance`` is how long a side may take to answer or close and a broker to deliver; ``late_window`` how long
    past that a delivery still counts as the copy of its message (a later one is matched to nothing).
    ``budgets`` bounds what one connection may make a task hold (see :class:`Budgets` for each policy).
    ``engine`` is ``auto``, ``spark`` or ``local`` as ``mqttaudit audit --engine`` takes it (by default a small
    input on a local master is audited in this process, without Spark); the local engine holds the captures'
    segments in memory at once, and refuses captures of more than ``local_limit_bytes`` (64 MiB by default).
    Raises ``ValueError`` subclasses before Spark starts when nothing can be audited as asked: no capture
    (``AuditInputError``), an ``out`` folder of someone else's files without ``force`` (``OutputDirError``), no
    Java or pyspark or a bad ``master`` (``SparkEnvironmentError``), ``engine="local"`` on captures past
    ``local_limit_bytes`` (``LocalEngineLimit``).
    """
    locations = [paths] if isinstance(paths, str | PathLike) else list(paths)
    return run_audit(
        [str(location) for location in locations],
        out if isinstance(out, str) else Path(out),
        master=master,
        ports=None if ports is None else list(ports),
        tolerance=tolerance,
        late_window=late_window,
        progress=progress or (lambda message: None),
        force=force,
        budgets=budgets,
        engine=engine,
        local_limit_bytes=local_limit_bytes,
    )
