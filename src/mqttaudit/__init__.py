"""mqttaudit: an MQTT conformance auditor.

Layers (each imports only from the ones before it): spec, codec, topics, then the tools built on them.

The Python API, beside the ``mqttaudit`` command:

- :func:`mqttaudit.probe.run` (and ``run_async``): probe a live broker, get a ``ProbeResult``;
- :func:`mqttaudit.audit`: audit captures on Spark, get an ``AuditResult`` (needs ``mqttaudit[spark]``);
- :mod:`mqttaudit.codec`: decode and encode MQTT bytes with every rule checked.

Each result has the ``exit_status`` the command would exit with (:mod:`mqttaudit.status`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pipeline.audit import AuditResult

__version__ = "0.1.0"

__all__ = ["__version__", "audit"]


def audit(
    paths: str | PathLike[str] | Sequence[str | PathLike[str]],
    *,
    out: str | PathLike[str],
    master: str = "local[*]",
    ports: Iterable[int] | None = None,
    tolerance: float = 5.0,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Audits pcap/pcapng captures (files, folders, globs, filesystem URLs) on Spark into the folder ``out``
    (Parquet tables, ``summary.json``, ``report.html``, ``findings.md``, ``findings.jsonl``, ``junit.xml``),
    published only when the audit completes.

    ``ports`` restricts the audit to flows on those TCP ports (by default MQTT is recognised on any port).
    Raises ``ValueError`` subclasses before Spark starts when nothing can be audited as asked: no capture
    (``AuditInputError``), an ``out`` folder of someone else's files without ``force`` (``OutputDirError``), no
    Java or pyspark or a bad ``master`` (``SparkEnvironmentError``).
    """
    from .pipeline.audit import run_audit

    locations = [paths] if isinstance(paths, str | PathLike) else list(paths)
    return run_audit(
        [str(location) for location in locations],
        Path(out),
        master=master,
        ports=None if ports is None else list(ports),
        tolerance=tolerance,
        progress=progress or (lambda message: None),
        force=force,
    )
