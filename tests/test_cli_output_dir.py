"""``--out`` through the real commands: one that cannot be used is a usage error (exit 2) that names it and why,
found before any work (no connection to the target, no capture read); ``--force`` writes beside a user's files
and never replaces one, even one named like an output of mqttaudit."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mqttaudit.report.output_dir import MARKER, OutputDirError, staged_output

from .cli_in_process import Ran, run_mqttaudit
from .hostile_server import HostileServer


def dangling(tmp_path: Path) -> Path:
    (tmp_path / "out").symlink_to(tmp_path / "nowhere" / "out")
    return tmp_path / "out"


def loop(tmp_path: Path) -> Path:
    (tmp_path / "out").symlink_to(tmp_path / "out")
    return tmp_path / "out"


def under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("a file")
    return tmp_path / "notes.txt" / "out"


def under_a_dangling_link(tmp_path: Path) -> Path:
    return dangling(tmp_path) / "reports"


def under_sys(tmp_path: Path) -> Path:
    return Path("/sys/mqttaudit-out")


SHAPES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "dangling-symlink": (dangling, r"is a symbolic link to nothing \("),
    "symlink-loop": (loop, "is a loop of symbolic links"),
    "under-a-file": (under_a_file, r"notes\.txt, which is a file, not a folder"),
    "under-a-dangling-symlink": (under_a_dangling_link, "a symbolic link to nothing"),
    "under-sys": (under_sys, r"no folder can be made in /sys \("),
}


def command(name: str, target: str, out: Path, tmp_path: Path) -> list[str]:
    return {
        "probe": ["probe", target, "--out", str(out), "--timeout", "0.2"],
        "matrix": ["matrix", target, "--out", str(out), "--timeout", "0.2"],
        "audit": ["audit", str(tmp_path / "capture.pcap"), "--out", str(out)],
        "demo": ["demo", "--out", str(out)],
    }[name]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["probe", "matrix", "audit", "demo"])
def test_an_out_that_cannot_be_used_is_a_usage_error_before_any_work(name: str, shape: str, tmp_path: Path) -> None:
    make, why = SHAPES[shape]
    out = make(tmp_path)
    (tmp_path / "capture.pcap").write_bytes(b"")  # never read: the audit stops at --out
    with HostileServer("silent", lifetime=30) as broker:
        ran = run_mqttaudit(*command(name, broker.url, out, tmp_path))
        connections = broker.connections

    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert f"--out {out}: " in ran.stderr
    assert connections == 0  # nothing was probed
    assert re.search(why, ran.stderr), ran.stderr
    assert "Traceback" not in ran.stderr
    assert "== " not in ran.stdout  # the demo decoded nothing either
    assert not any(p.name.startswith(".mqttaudit-") for p in tmp_path.iterdir())


def test_a_symlink_to_a_folder_is_written_through_and_kept(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "real")
    ran = run_mqttaudit("probe", "mqtt://127.0.0.1:1", "--out", str(tmp_path / "out"), "--timeout", "0.2")

    assert ran.returncode == 4, ran.stderr
    assert (tmp_path / "out").is_symlink()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == [
        MARKER,
        "findings.json",
        "findings.md",
        "junit.xml",
        "report.html",
    ]


@pytest.mark.parametrize("name", ["probe", "matrix", "demo"])
def test_force_never_replaces_a_users_file_named_like_an_output(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    mine = {"probe": "findings.md", "matrix": "matrix.md", "demo": "probe"}[name]
    (out / mine).write_text("my own notes")
    with HostileServer("silent", lifetime=30) as broker:
        ran = run_mqttaudit(*command(name, broker.url, out, tmp_path), "--force")
        connections = broker.connections

    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert f"holds {mine}, which mqttaudit did not write and would replace" in ran.stderr
    assert "never over them" in ran.stderr
    assert connections == 0
    assert (out / mine).read_text() == "my own notes"
    assert sorted(os.listdir(out)) == [mine]


def test_force_never_replaces_a_users_file_in_an_audit_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("<p>mine</p>")
    (tmp_path / "capture.pcap").write_bytes(b"")
    ran = run_mqttaudit("audit", str(tmp_path / "capture.pcap"), "--out", str(out), "--force")

    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "holds report.html, which mqttaudit did not write and would replace" in ran.stderr
    assert (out / "report.html").read_text() == "<p>mine</p>"


def test_force_keeps_a_users_file_that_appears_during_the_run_and_refuses_to_publish(tmp_path: Path) -> None:
    out = tmp_path / "out"
    refused = pytest.raises(OutputDirError, match=r"holds findings\.md, which mqttaudit did not write")
    with refused, staged_output(out, force=True) as staging:
        (staging / "findings.md").write_text("report")
        (staging / "junit.xml").write_text("<testsuite/>")
        out.mkdir()
        (out / "findings.md").write_text("written meanwhile by someone else")
    assert sorted(os.listdir(out)) == ["findings.md"]
    assert (out / "findings.md").read_text() == "written meanwhile by someone else"
    assert not any(p.name.startswith(".mqttaudit-") for p in tmp_path.iterdir())


def test_force_still_replaces_what_mqttaudit_wrote_and_leaves_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    first = run_mqttaudit("probe", "mqtt://127.0.0.1:1", "--out", str(out), "--timeout", "0.2", "--force")
    (out / "findings.md").write_text("edited by hand after the run: still mqttaudit's entry")
    again = run_mqttaudit("probe", "mqtt://127.0.0.1:1", "--out", str(out), "--timeout", "0.2", "--force")

    assert (first.returncode, again.returncode) == (4, 4), again.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert (out / "findings.md").read_text().startswith("# mqttaudit probe findings")


def test_a_run_is_never_refused_for_its_own_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for _ in range(2):
        ran: Ran = run_mqttaudit("probe", "mqtt://127.0.0.1:1", "--out", str(out), "--timeout", "0.2")
        assert ran.returncode == 4, ran.stderr
