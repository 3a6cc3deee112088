"""The Spark session of an audit: the embedded ``local[*]`` master by default, any master URL otherwise.

Loopback only for the embedded master (driver host and bind address 127.0.0.1, no UI), the executors' Python is
the driver's, and Arrow carries every batch between the JVM and Python.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .. import interrupts
from ..extras import MissingExtra, require

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: The JVM heap of the driver (and, in local mode, of the executors). The tasks write the tables and the replay's
#: transcripts themselves, so the JVM holds only runs of segments being shuffled and sorted (it spills to disk),
#: a small row per connection, and the summary's aggregates: nothing in it grows with the capture, but the
#: collector grows the heap toward its cap as the work goes on (at 8,000,000 packets the heap reached 1,014 MB of a
#: 1 GB cap in the summary's queries, and the JVM 1,504 MB; at 1,000,000 it stayed at its first 380 MB). With
#: 512 MB the 8,000,000-packet audit gave the same tables, its JVM at most 898 MB (944 s, against 1,019 s with 1 GB:
#: one run each, on a loaded machine).
DEFAULT_DRIVER_MEMORY = os.environ.get("MQTTAUDIT_DRIVER_MEMORY", "512m")
#: The driver JVM's options, and the executors' on a cluster. Its optimising compiler (C2) spent as much CPU
#: compiling Spark's generated code as the JVM spent on the audit's data; the quick compiler alone halved the JVM's
#: CPU time (the data work is Python's).
DEFAULT_DRIVER_JAVA_OPTIONS = os.environ.get("MQTTAUDIT_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
#: The JVM's own log (unified logging) goes to standard error, warnings and errors only, never to standard output,
#: which is the audit's (``--format json``): a JVM writing its class archive at exit warned there once per class it
#: skipped, thousands of lines after the JSON document. Those warnings (class data sharing) are off: they are about
#: the JVM's cache, not the audit.
JVM_LOG_OPTIONS = ("-Xlog:disable", "-Xlog:all=warning:stderr", "-Xlog:cds*=off:stderr")
#: Where the driver JVM keeps its archive of the classes Spark loads to start (class data sharing: they are mapped
#: instead of loaded and verified again; the JVM's start-up took half the CPU time): a folder, or "off". The first
#: audit with a given pyspark and Java writes it as its JVM exits (about 150 MB; that run takes longer to end); the
#: later ones map it.
CLASS_ARCHIVE_SETTING = "MQTTAUDIT_CLASS_ARCHIVE"
#: An archive an exited JVM left under its process's name is taken once it is this old (the JVM writes it as it exits,
#: after the Python process is gone).
CLASS_ARCHIVE_SETTLED_S = 30.0
#: Bytes of an Arrow batch between the JVM and the Python workers at most.
ARROW_BATCH_BYTES = 16 * 1024 * 1024
#: The C library's memory arenas in the JVM at most (``MALLOC_ARENA_MAX``; unless the environment sets it). Its
#: threads each took an arena of their own, and what they freed (Arrow's direct buffers) stayed resident: at
#: 8,000,000 packets the JVM was 898 MB resident where it accounted for about 760 MB committed.
MALLOC_ARENAS = "2"
#: Spark refuses a driver heap below about 450 MB; ask for a little more than that.
MIN_DRIVER_MEMORY_MB = 512
MIN_JAVA = 17
#: The master URLs Spark knows: local modes, a standalone cluster, YARN, Kubernetes.
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[^\s/]+:\d+(,[^\s/]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)
_MEMORY = re.compile(r"(\d+)([kmgt]?)b?", re.IGNORECASE)
_MEMORY_MB = {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


class SparkEnvironmentError(ValueError):
    """The audit cannot start Spark here as asked (no Java, an old Java, no pyspark, a bad master or memory)."""


class SparkMasterUnreachable(RuntimeError):
    """No master of a ``spark://`` URL accepts a connection: the audit cannot run now (incomplete, exit 4: the
    URL is well formed, the cluster is down or elsewhere, as a probe's unreachable broker is)."""


#: How long the check waits for a TCP connection to each master of a ``spark://`` URL.
MASTER_CONNECT_TIMEOUT = 5.0


def check_master_reachable(master: str, timeout: float = MASTER_CONNECT_TIMEOUT) -> None:
    """Before Spark starts (its own client retries for more than a minute, then fails with a Java traceback): one
    TCP connection to the master of a ``spark://HOST:PORT`` URL (to any of a list of them); else
    :class:`SparkMasterUnreachable` saying why, for each. Other masters are Spark's own to reach."""
    if not master.startswith("spark://"):
        return
    tried: list[str] = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except socket.gaierror as exc:
            tried.append(f"cannot resolve {host} ({(exc.strerror or str(exc)).lower()})")
        except TimeoutError:
            tried.append(f"no answer from {address} within {timeout:g} s")
        except OSError as exc:
            tried.append(f"{address}: {(exc.strerror or str(exc)).lower()}")
    raise SparkMasterUnreachable(f"--master {master}: cannot reach the Spark master ({'; '.join(tried)})")


def check_environment(master: str, driver_memory: str = DEFAULT_DRIVER_MEMORY) -> None:
    """Raises :class:`SparkEnvironmentError` with what to do, before any JVM is started."""
    if not _MASTER.fullmatch(master):
        raise SparkEnvironmentError(
            f"--master {master!r} is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT, yarn, "
            "k8s://URL)"
        )
    memory = _MEMORY.fullmatch(driver_memory.strip())
    if memory is None or int(memory.group(1)) * _MEMORY_MB[memory.group(2).lower()] < MIN_DRIVER_MEMORY_MB:
        raise SparkEnvironmentError(
            f"MQTTAUDIT_DRIVER_MEMORY={driver_memory!r}: give the driver's JVM heap as a size of at least "
            f"{MIN_DRIVER_MEMORY_MB}m (for example 2g)"
        )
    try:
        require("spark")
    except MissingExtra as exc:
        raise SparkEnvironmentError(str(exc)) from exc
    _check_java()


def _java_command() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def class_archive_folder() -> Path | None:
    """The folder of the class archive (:data:`CLASS_ARCHIVE_SETTING`, else the user's cache folder); None: off."""
    setting = os.environ.get(CLASS_ARCHIVE_SETTING)
    if setting is not None:
        return None if setting.strip().lower() in ("", "off", "0", "no") else Path(setting).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "mqttaudit"


def class_archive_options(folder: Path | None, java: str | None, now: float | None = None) -> list[str]:
    """The driver JVM's options for class data sharing in ``folder``: map the archive of this pyspark and ``java``
    when there is one; else take one a JVM finished writing under its process's name; else write one at exit
    under this process's name. None when there is no folder, no Java, or the folder cannot be made."""
    if folder is None or java is None:
        return []
    import pyspark

    try:
        identity = f"{os.path.realpath(java)}:{os.stat(java).st_mtime_ns}:{pyspark.__version__}"
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    name = f"spark-{pyspark.__version__}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}.jsa"
    archive = folder / name
    now = time.time() if now is None else now
    if not archive.exists():
        for written in sorted(folder.glob(f"{name}.*")):
            if _settled(written, now):
                with contextlib.suppress(OSError):
                    os.replace(written, archive)
                break
    if archive.exists():
        for extra in folder.glob(f"{name}.*"):  # written by audits that started together with the first
            if _settled(extra, now):
                extra.unlink(missing_ok=True)
        return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    if any(folder.glob(f"{name}.*")) or not _archive_writer(folder / f"{archive.stem}.lock"):
        return []  # another audit is writing it
    return [f"-XX:ArchiveClassesAtExit={folder / f'{name}.{os.getpid()}'}"]


#: The lock files of the class archives this process writes, held open (and so locked) until it ends.
_WRITER_LOCKS: list[int] = []


def _archive_writer(lock: Path) -> bool:
    """Whether this process takes ``lock`` (an flock, never waited for), and so is the one audit whose JVM writes
    the archive: audits that start together on a fresh machine each wrote one (190 MB). The lock is released when
    the process ends, however it ends, so a writer that died blocks no one."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _WRITER_LOCKS.append(fd)
    return True


def _settled(written: Path, now: float) -> bool:
    """An archive written under a process's name is whole: the process is gone and the file has not changed for
    :data:`CLASS_ARCHIVE_SETTLED_S`."""
    try:
        return not _alive(int(written.suffix.lstrip("."))) and now - written.stat().st_mtime >= CLASS_ARCHIVE_SETTLED_S
    except (OSError, ValueError):
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_java() -> None:
    java = _java_command()
    if java is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "java not found on PATH and JAVA_HOME unset"
        )
        raise SparkEnvironmentError(f"mqttaudit audit needs Java {MIN_JAVA} or newer ({where})")
    try:
        answer = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkEnvironmentError(f"mqttaudit audit needs Java {MIN_JAVA} or newer ({java} -version: {exc})") from exc
    version = re.search(r'version "(\d+)(?:\.(\d+))?', answer.stderr + answer.stdout)
    if version is None:
        raise SparkEnvironmentError(f"{java} -version did not say which Java it is: {answer.stderr.strip()[:200]!r}")
    major = int(version.group(1))
    if major == 1 and version.group(2):  # "1.8.0_392" is Java 8
        major = int(version.group(2))
    if major < MIN_JAVA:
        raise SparkEnvironmentError(f"mqttaudit audit needs Java {MIN_JAVA} or newer; {java} is Java {major}")


@contextlib.contextmanager
def _jvm_environment() -> Iterator[None]:
    """While the JVM starts, the environment it inherits (and the Python workers it forks) caps the C library's
    memory arenas (:data:`MALLOC_ARENAS`, unless the environment sets its own); this process's is left as it was."""
    if "MALLOC_ARENA_MAX" in os.environ:
        yield
        return
    os.environ["MALLOC_ARENA_MAX"] = MALLOC_ARENAS
    try:
        yield
    finally:
        os.environ.pop("MALLOC_ARENA_MAX", None)


@contextlib.contextmanager
def _jvm_output_to(log: str | None) -> Iterator[None]:
    """While the JVM starts, our standard error (which it inherits for its whole life) is ``log``: Spark's start-up
    notices and warnings go there instead of the terminal. ``None`` leaves the terminal as it is (``--verbose``)."""
    if log is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    return f"{os.sep}py4j{os.sep}" not in record.pathname


_kept_logs: set[str] = set()


def jvm_log_path() -> str:
    """Where the JVM's own messages go unless ``--verbose``: one file per process, in the temporary folder,
    removed when the process exits unless :func:`keep_jvm_log` asked to keep it."""
    path = os.path.join(tempfile.gettempdir(), f"mqttaudit-spark-{os.getpid()}.log")
    atexit.register(_remove_log, path)
    return path


def keep_jvm_log() -> str | None:
    """The JVM's log of this process, kept after exit (to look into a failure), or ``None`` when there is none."""
    path = os.path.join(tempfile.gettempdir(), f"mqttaudit-spark-{os.getpid()}.log")
    if not os.path.exists(path):
        return None
    _kept_logs.add(path)
    return path


def _remove_log(path: str) -> None:
    if path not in _kept_logs:
        with contextlib.suppress(OSError):
            os.unlink(path)


def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "mqttaudit",
    shuffle_partitions: int | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    verbose: bool = True,
) -> SparkSession:
    """A Spark session for ``master`` (one per process: an existing one is reused and reconfigured).
    ``driver_memory`` sizes the driver's JVM heap, which in local mode is also the executors' (it takes effect
    when this call starts the JVM). Unless ``verbose``, the JVM's own output goes to :func:`jvm_log_path`."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # A row may carry a run of segments of up to 8 MiB: batches are bounded by bytes as well as rows (a batch
        # holds one row at least). The JVM's buffers for a batch are direct memory: with 64 MiB batches they took
        # up to 239 MB at 8,000,000 packets, resident after they were freed.
        .config("spark.sql.execution.arrow.maxBytesPerBatch", str(ARROW_BATCH_BYTES))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", driver_memory)
        .config(
            "spark.driver.extraJavaOptions",
            " ".join(
                [
                    DEFAULT_DRIVER_JAVA_OPTIONS,
                    *JVM_LOG_OPTIONS,
                    *class_archive_options(class_archive_folder(), _java_command()),
                ]
            ),
        )
        # On a cluster the executors are JVMs of their own, which run Spark's generated code just the same.
        .config("spark.executor.extraJavaOptions", " ".join([DEFAULT_DRIVER_JAVA_OPTIONS, *JVM_LOG_OPTIONS]))
        .config("spark.executorEnv.MALLOC_ARENA_MAX", os.environ.get("MALLOC_ARENA_MAX", MALLOC_ARENAS))
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if not verbose:
        # Py4J logs every broken connection to the JVM with a traceback, as when an interrupt stops the JVM;
        # a real failure still reaches us as an exception.
        logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
        logging.getLogger().addFilter(_not_from_py4j)  # it also logs through the root logger
    with _jvm_environment(), _jvm_output_to(None if verbose else jvm_log_path()):
        try:
            session = builder.getOrCreate()
        except Exception as exc:
            if not master.startswith("spark://") or interrupts.seen():
                raise
            # Something listens there, but no master took the application (Spark gives up after a minute).
            kept = "" if verbose else f"; Spark's own messages are in {keep_jvm_log()}"
            raise SparkMasterUnreachable(
                f"--master {master}: no Spark master there took the application{kept}"
            ) from exc
    session.sparkContext.setLogLevel("ERROR")
    interrupts.record_sigint()  # PySpark's context put its own SIGINT handler in place of the command line's
    return session
