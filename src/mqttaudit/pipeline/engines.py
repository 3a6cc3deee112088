"""Which engine runs an audit's stages: Spark (on ``--master``), or this process without Spark (:mod:`.local`), which
an audit of small captures on a local master is better off with (Spark's start-up, a job per stage and a query per
report part cost some 20 seconds whatever the input); what an engine is (:class:`Engine`) and the job it runs
(:class:`Job`). Nothing here imports more than the standard library: the command line's options are built from it.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator

    from mqttaudit.report import AuditReportData

    from .options import AuditOptions
    from .task_files import Published

#: What ``--engine`` chooses from: ``auto`` is :data:`LOCAL` for small inputs on a local master, else :data:`SPARK`.
AUTO, LOCAL, SPARK = "auto", "local", "spark"
ENGINES = (AUTO, SPARK, LOCAL)
#: Bytes of captures up to which ``--engine auto`` audits in one process without Spark (on a local master).
#: Measured on a loaded 2-core machine (README, "Small captures: the local engine"): the local engine took 10.6 s
#: against Spark local[2]'s 67.6 s at 14.4 MB of capture, 55.0 s against 108.8 s at 33.1 MB, and 102.1 s against
#: 95.3 s at 57.8 MB, where its memory (it holds the captures' MQTT segments at once) reached 1.3 GB: below 32 MiB
#: it takes at most half Spark's time, in under 1 GB.
LOCAL_MAX_BYTES = 32 * 1024 * 1024
#: Bytes of captures past which the local engine refuses to run, whoever chose it (``--local-limit-mb``): it holds
#: every MQTT segment of the captures in memory at once, so its peak grows with them (468 MB at 14.4 MB of capture,
#: 813 MB at 33.1 MB, 1,283 MB at 57.8 MB, in the measure above). Twice the ``auto`` threshold: an ``--engine
#: local`` a little past it is honoured, a large capture goes to Spark, which reads it chunk by chunk.
LOCAL_LIMIT_BYTES = 2 * LOCAL_MAX_BYTES
MIB = 1024 * 1024


class LocalEngineLimit(ValueError):
    """The local engine was asked for captures larger than its limit (:data:`LOCAL_LIMIT_BYTES` by default): a usage
    error, raised before any capture is read."""

    def __init__(self, input_bytes: int, limit: int) -> None:
        self.input_bytes, self.limit = input_bytes, limit
        super().__init__(
            f"--engine local: the captures hold {input_bytes:,} bytes ({input_bytes / MIB:.1f} MiB), more than the "
            f"local engine's limit of {limit:,} bytes ({limit / MIB:g} MiB, --local-limit-mb): it holds every MQTT "
            f"segment of them in memory at once; audit them with --engine spark, which reads them chunk by chunk in "
            f"its tasks, or raise --local-limit-mb"
        )


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: Spark in this machine's one JVM."""
    return master == "local" or (master.startswith("local[") and master.endswith("]"))


def choose_engine(
    engine: str,
    master: str,
    input_bytes: int,
    local_max_bytes: int = LOCAL_MAX_BYTES,
    session: object = None,
    local_limit_bytes: int = LOCAL_LIMIT_BYTES,
) -> str:
    """The engine an audit runs on (:data:`LOCAL` or :data:`SPARK`): ``engine`` when it names one; for ``auto``,
    local when the master is a local one (never a cluster's: ``spark://``, ``yarn``, ``k8s://``), no Spark
    ``session`` was handed over, and the captures hold at most ``local_max_bytes`` (and ``local_limit_bytes``).
    Raises :class:`LocalEngineLimit` when ``engine`` is local and the captures hold more than
    ``local_limit_bytes``."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    if engine == LOCAL and input_bytes > local_limit_bytes:
        raise LocalEngineLimit(input_bytes, local_limit_bytes)
    if engine != AUTO:
        return engine
    small = input_bytes <= min(local_max_bytes, local_limit_bytes)
    return LOCAL if session is None and is_local_master(master) and small else SPARK


@dataclass(frozen=True)
class Job:
    """An audit's stages as an engine runs them (:meth:`Engine.run`, :meth:`Engine.report_data`)."""

    #: The captures' chunks (:data:`~.tables.CHUNK_SCHEMA` rows), the stages' input.
    chunk_rows: list[dict[str, Any]]
    #: What the tasks read: ports, tolerance, budgets, where they write.
    options: AuditOptions
    #: The folder of the tables (a local path or a URL).
    out_dir: Path | str
    #: Hears each phase.
    progress: Callable[[str], None]
    #: The captures' bytes (how many tasks judge them).
    input_bytes: int
    #: The report data keep this many sample violations per rule and side, and this many rows of each table.
    samples: int
    rows: int


class Engine(Protocol):
    """What runs an audit's stages: Spark (:class:`~.audit.SparkEngine`) or this process
    (:class:`~.local.LocalEngine`)."""

    @property
    def name(self) -> str: ...

    @property
    def parallelism(self) -> int: ...

    @property
    def master(self) -> str | None: ...

    def accumulator(self) -> Accumulator[Published] | None: ...

    def port_proofs(self, chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes]) -> dict[int, str]: ...

    def watching(
        self, progress: Callable[[str], None], tasks: Callable[[int, int], None] | None
    ) -> AbstractContextManager[None]: ...

    def run(self, job: Job) -> dict[str, Any]:
        """The reading, judging and replay stages; the tables written, the summary returned."""
        ...

    def report_data(self, job: Job, summary: dict[str, Any]) -> AuditReportData:
        """The report data, from the tables ``job`` wrote."""
        ...
