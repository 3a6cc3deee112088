"""A real Spark standalone cluster on 127.0.0.1 for the tests: a master and workers started with the classes that
ship in the pyspark package (``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker``), on
free ports, each worker with its own working and temporary folders (nothing shared on disk but what the tests
put there), ready when the master's status page lists every worker alive, stopped by PID."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mqttaudit.probe.brokers import free_port

HOST = "127.0.0.1"
#: Seconds the master and its workers may take to start and register (JVMs on a shared machine).
READY_WITHIN = 120.0
#: The heap of the master's and the workers' own JVMs (they only schedule and launch executors).
DAEMON_MEMORY = "256m"


@dataclass(frozen=True)
class Worker:
    #: Where the worker runs its executors (``app-*/N/stderr`` is each executor's log).
    work_dir: Path
    #: The worker's and its executors' temporary folder (``SPARK_LOCAL_DIRS``: shuffle files, spills).
    local_dir: Path


@dataclass(frozen=True)
class Cluster:
    master: str
    workers: tuple[Worker, ...]


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _alive_workers(status_url: str) -> int:
    """The workers the master's status page says are alive; 0 while the page is not its JSON yet (a CI run got the
    master's HTML page from ``/json/`` while the master was starting)."""
    with urllib.request.urlopen(status_url, timeout=5) as answer:
        text = answer.read()
    try:
        status = json.loads(text)
    except ValueError:
        return 0
    return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")


@contextlib.contextmanager
def standalone_cluster(folder: Path, workers: int, env: dict[str, str], memory: str = "1g") -> Iterator[Cluster]:
    """A master and ``workers`` workers of 1 core and ``memory`` each; ``env`` is the workers' environment (their
    executors inherit it). Their output is in ``folder``."""
    spark_class = str(_spark_home() / "bin" / "spark-class")
    daemon_env = {**env, "SPARK_HOME": str(_spark_home()), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY}
    daemon_env["SPARK_LOCAL_IP"] = HOST
    port, ui = free_port(), free_port()
    master = f"spark://{HOST}:{port}"
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str], extra: dict[str, str]) -> None:
        with (folder / f"{name}.log").open("wb") as log:
            processes.append(
                subprocess.Popen(
                    [spark_class, *argv], stdout=log, stderr=subprocess.STDOUT, env={**daemon_env, **extra}
                )
            )

    started: list[Worker] = []
    try:
        start(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port), "--webui-port", str(ui)],
            {"SPARK_LOCAL_DIRS": str(folder / "master-tmp")},
        )
        for index in range(workers):
            own = folder / f"worker-{index}"
            worker = Worker(own / "work", own / "tmp")
            for path in (worker.work_dir, worker.local_dir):
                path.mkdir(parents=True)
            start(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    master,
                    "--host",
                    HOST,
                    "--port",
                    str(free_port()),
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    "1",
                    "--memory",
                    memory,
                    "--work-dir",
                    str(worker.work_dir),
                ],
                {"SPARK_LOCAL_DIRS": str(worker.local_dir), "SPARK_WORKER_DIR": str(worker.work_dir)},
            )
            started.append(worker)
        deadline = time.monotonic() + READY_WITHIN
        while True:
            try:
                if _alive_workers(f"http://{HOST}:{ui}/json/") == workers:
                    break
            except OSError:
                pass
            if any(process.poll() is not None for process in processes) or time.monotonic() > deadline:
                said = "\n".join(path.read_text(errors="replace")[-1500:] for path in sorted(folder.glob("*.log")))
                raise RuntimeError(f"the Spark cluster did not start:\n{said}")
            time.sleep(0.5)
        yield Cluster(master, tuple(started))
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def environment_without_spark(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (this process's by default) without the Spark settings of an enclosing session."""
    source = os.environ if env is None else env
    return {key: value for key, value in source.items() if not key.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
