"""``mqttaudit ARGS`` run in the test process through ``main``, with what it wrote to standard output and standard
error. An audit run so joins the worker's Spark session (``spark_session`` reuses it through ``getOrCreate`` and
never stops it), so a test requests the ``spark`` fixture first: the session is then the fixture's ``local[2]``.
A process of its own is only for what a process alone shows: signals, its environment, a fresh JVM's output."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from mqttaudit.cli.main import main


@dataclass(frozen=True)
class Ran:
    """What a run of ``mqttaudit`` gave, under the names ``subprocess.run`` gives them."""

    returncode: int
    stdout: str
    stderr: str


def run_mqttaudit(*argv: str) -> Ran:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(list(argv))
    return Ran(status, stdout.getvalue(), stderr.getvalue())
