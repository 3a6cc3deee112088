"""Files that options name, given ``/dev/zero`` or a sparse file of 64 GiB, through the real commands: a usage error
(exit 2) naming the option, the file and its cap, at once, never a read of the whole; the password file is read to
its first line only. ``decode`` holds at most its first frames whatever the bytes, and its peak memory is bounded."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mqttaudit import option_files
from mqttaudit.cli.decode import MAX_SHOWN_FRAMES

from .child import MQTTAUDIT, child_env, run_child
from .cli_in_process import run_mqttaudit
from .probe_process import high_water_kib

#: An address nothing listens on: a run that got past its options would exit 4 here, not 2.
NOWHERE = "mqtt://user@127.0.0.1:1"


def sparse(tmp_path: Path, prefix: bytes = b"") -> Path:
    path = tmp_path / "sparse.bin"
    path.write_bytes(prefix)
    os.truncate(path, 64 << 30)  # 64 GiB, none of it on disk
    return path


def arguments(option: str, path: Path, tmp_path: Path) -> list[str]:
    out = ["--out", str(tmp_path / "out")]
    return {
        "--password-file": ["probe", NOWHERE, "--password-file", str(path), *out],
        "--profile": ["probe", NOWHERE, "--profile", str(path), *out],
        "--baseline": ["probe", NOWHERE, "--baseline", str(path), *out],
        "--keylog": ["audit", str(tmp_path / "capture.pcap"), "--keylog", str(path), *out],
        "--file": ["decode", "--file", str(path)],
    }[option]


CAPS = {
    "--password-file": ("a first line longer than", "65,535 bytes"),
    "--profile": ("larger than", "4 MiB"),
    "--baseline": ("larger than", "128 MiB"),
    "--keylog": ("larger than", "256 MiB"),
    "--file": ("larger than", "64 MiB"),
}


@pytest.mark.parametrize("source", ["dev-zero", "sparse-64-GiB"])
@pytest.mark.parametrize("option", list(CAPS))
def test_an_option_file_over_its_cap_is_a_usage_error_naming_option_file_and_cap(
    option: str, source: str, tmp_path: Path
) -> None:
    path = Path("/dev/zero") if source == "dev-zero" else sparse(tmp_path)
    (tmp_path / "capture.pcap").write_bytes(b"")
    ran = run_mqttaudit(*arguments(option, path, tmp_path))

    assert ran.returncode == 2, ran.stdout + ran.stderr[-2000:]
    what, cap = CAPS[option]
    assert f"{option} {path}: {what} {cap}, the most {option} reads; not read further" in ran.stderr
    assert not (tmp_path / "out").exists()


def test_the_caps_are_the_stated_ones() -> None:
    caps = [option_files.PASSWORD_LINE, option_files.PROFILE, option_files.BASELINE]
    caps += [option_files.KEYLOG, option_files.DECODE]
    assert [option_files.size_text(cap) for cap in caps] == [cap for _, cap in CAPS.values()]


def test_only_the_first_line_of_a_password_file_is_read(tmp_path: Path) -> None:
    path = sparse(tmp_path, b"s3cret\n")  # then 64 GiB of zero bytes
    started = time.monotonic()
    ran = run_mqttaudit("probe", NOWHERE, "--password-file", str(path), "--out", str(tmp_path / "out"))

    assert ran.returncode == 4, ran.stderr  # past its options: the target is unreachable
    assert "cannot reach" in ran.stderr
    assert time.monotonic() - started < 60  # not a timing assertion: reading 64 GiB would take minutes


def test_a_password_of_exactly_the_mqtt_limit_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_bytes(b"p" * option_files.PASSWORD_LINE + b"\r\nsecond line")
    assert run_mqttaudit("probe", NOWHERE, "--password-file", str(path), "--out", str(tmp_path / "o")).returncode == 4
    path.write_bytes(b"p" * (option_files.PASSWORD_LINE + 1) + b"\n")
    assert run_mqttaudit("probe", NOWHERE, "--password-file", str(path), "--out", str(tmp_path / "o")).returncode == 2


@pytest.mark.parametrize("flag", [[], ["--hex", "-"]], ids=["raw", "hex"])
def test_decode_of_endless_standard_input_is_a_usage_error(flag: list[str]) -> None:
    with open("/dev/zero", "rb") as zeros:
        ran = run_child("decode", *flag, stdin=zeros, text=False)
    assert ran.returncode == 2, ran.stderr[-2000:]
    assert b"MiB, the most" in ran.stderr and b"not read further" in ran.stderr


def test_decode_holds_its_first_frames_only_and_counts_the_rest(tmp_path: Path) -> None:
    """200 KB of zero bytes are 100,000 malformed frames (a reserved type 0 of length 0 each): before the fix,
    decode --format json held every one (4.9 GB for 2 MB); now its peak stays under a ceiling."""
    zeros = tmp_path / "zeros.bin"
    zeros.write_bytes(bytes(200_000))
    command = [*MQTTAUDIT, "decode", "--file", str(zeros), "--format", "json"]
    out = tmp_path / "decoded.json"
    with out.open("wb") as stdout:
        child = subprocess.Popen(command, stdout=stdout, env=child_env())
        peak_kib = 0
        while True:  # the child's high-water mark, read while it runs
            peak_kib = max(peak_kib, high_water_kib(child.pid))
            try:
                child.wait(timeout=0.05)
                break
            except subprocess.TimeoutExpired:
                continue
    document = json.loads(out.read_text())
    print(f"\ndecode of 200 KB of zero bytes: peak RSS {peak_kib / 1024:.0f} MB")
    assert child.returncode == 1
    assert len(document["unframed"]) + len(document["packets"]) == MAX_SHOWN_FRAMES
    assert document["left_out"]["frames"] == 100_000 - MAX_SHOWN_FRAMES
    assert document["left_out"]["violations_by_rule"] == {"MQTT-2.2.1-reserved-type": 100_000 - MAX_SHOWN_FRAMES}
    assert peak_kib < 250 * 1024
