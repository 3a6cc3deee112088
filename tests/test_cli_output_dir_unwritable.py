"""An output folder mqttaudit may not write into, through every command that has one: one line naming it and why,
exit 2, before any work (no connection to the target, no capture read, no example decoded).

The folders are made read-only by their mode (0o555, or a parent of 0o555 where the folder does not exist yet), and
the command runs as a user that mode binds. The suite runs as root, whom no mode stops (``os.access`` says root may
write anywhere but a read-only file system, and it can), so as root the command runs as ``nobody`` (``setpriv``);
otherwise as the test's own user. Its folders are in a temporary folder of its own under the system's, which
``nobody`` can reach (pytest's ``tmp_path`` is under a folder of mode 0o700)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .child import MQTTAUDIT, child_env
from .hostile_server import HostileServer

NOBODY = 65534


@pytest.fixture
def place() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mqttaudit-unwritable-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)


def as_a_user_modes_bind(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [*MQTTAUDIT, *arguments]
    if os.geteuid() == 0:
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *command]
    env = child_env(HOME=str(cwd), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def read_only(place: Path) -> tuple[Path, str]:
    out = place / "reports"
    out.mkdir()
    out.chmod(0o555)
    return out, f"--out {out}: mqttaudit may not write into this folder (permission denied)"


def uncreatable(place: Path) -> tuple[Path, str]:
    parent = place / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    return parent / "reports", f"--out {parent / 'reports'}: no folder can be made in {parent} (Permission denied)"


SHAPES = {"read-only": read_only, "uncreatable": uncreatable}


def command(name: str, target: str, out: Path) -> list[str]:
    return {
        "probe": ["probe", target, "--out", str(out), "--timeout", "0.2"],
        "matrix": ["matrix", target, "--out", str(out), "--timeout", "0.2"],
        "audit": ["audit", "capture.pcap", "--out", str(out)],
        "demo": ["demo", "--out", str(out)],
    }[name]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["probe", "matrix", "audit", "demo"])
def test_an_out_the_user_may_not_write_is_a_usage_error_before_any_work(name: str, shape: str, place: Path) -> None:
    out, said = SHAPES[shape](place)
    (place / "capture.pcap").write_bytes(b"")  # never read: the audit stops at --out
    with HostileServer("silent", lifetime=30) as broker:
        ran = as_a_user_modes_bind(*command(name, broker.url, out), cwd=place)
        connections = broker.connections

    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert ran.stderr == f"Error: {said}\n"
    assert connections == 0  # nothing was probed
    assert ran.stdout == ""  # the demo decoded nothing either
    assert sorted(os.listdir(place)) == sorted(["capture.pcap", out.name if shape == "read-only" else "locked"])
