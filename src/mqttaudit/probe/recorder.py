"""Recording loopback traffic with tcpdump while something talks to a local broker.

``with tcpdump_recording(path, port):`` starts ``tcpdump -i lo --immediate-mode -w path 'tcp port PORT'``, waits
until it is listening, and on exit waits for the last packets to be written (about a second) before stopping it by
PID. tcpdump needs the right to capture (root or CAP_NET_RAW); :class:`RecorderUnavailable` says why when it
cannot run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

#: The kernel capture buffer, in KiB: large enough that a burst on loopback is not dropped.
BUFFER_KIB = 65536


class RecorderUnavailable(RuntimeError):
    """tcpdump is missing or may not capture here."""


def tcpdump_path() -> str | None:
    return shutil.which("tcpdump") or next(
        (p for p in ("/usr/sbin/tcpdump", "/usr/bin/tcpdump") if Path(p).exists()), None
    )


@contextlib.contextmanager
def tcpdump_recording(path: Path, port: int, *, interface: str = "lo", settle: float = 1.0) -> Iterator[Path]:
    """Records TCP traffic on ``port`` of ``interface`` into the pcap file ``path`` while the block runs."""
    binary = tcpdump_path()
    if binary is None:
        raise RecorderUnavailable("tcpdump is not installed (Debian package tcpdump)")
    command = [binary, "-i", interface, "--immediate-mode", "-U", "-B", str(BUFFER_KIB), "-s", "0", "-w", str(path)]
    command.append(f"tcp port {port}")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _wait_listening(process, path)
        yield path
        time.sleep(settle)  # the last segments, and the FINs after them, reach the file
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        if process.stderr is not None:
            process.stderr.close()


def _wait_listening(process: subprocess.Popen[bytes], path: Path, timeout: float = 5.0) -> None:
    """tcpdump says "listening on" on stderr once it captures; the file exists then."""
    deadline = time.monotonic() + timeout
    assert process.stderr is not None
    os.set_blocking(process.stderr.fileno(), False)
    said = b""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            rest = process.stderr.read() or b""
            raise RecorderUnavailable(f"tcpdump exited: {(said + rest).decode(errors='replace').strip()}")
        chunk = process.stderr.read() or b""
        said += chunk
        if b"listening on" in said and path.exists():
            time.sleep(0.2)
            return
        time.sleep(0.05)
    raise RecorderUnavailable(f"tcpdump did not start capturing within {timeout:g} s: {said.decode(errors='replace')}")
