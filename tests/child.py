"""``python -m mqttaudit`` as a child process run from this checkout's source: the command as a user runs it, with
its own exit status, standard output and standard error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parents[1] / "src"
#: The command line of the tool, before its arguments.
MQTTAUDIT = (sys.executable, "-m", "mqttaudit")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment, with the checkout's source first on the path, and ``extra``."""
    return {**os.environ, "PYTHONPATH": str(SOURCE), **extra}


def run_child(*argv: str, timeout: float = 120, text: bool = True, **options: Any) -> subprocess.CompletedProcess[Any]:
    """``mqttaudit ARGV`` run to its end (within ``timeout`` seconds), its output captured; ``options`` go to
    :func:`subprocess.run` (``cwd``, ``stdin``, ``input``, ``env``: :func:`child_env` unless given)."""
    options.setdefault("env", child_env())
    return subprocess.run([*MQTTAUDIT, *argv], capture_output=True, text=text, timeout=timeout, check=False, **options)
