"""Recording loopback traffic with tcpdump while something talks to a local broker.

``with tcpdump_recording(path, port):`` starts ``tcpdump -i lo --immediate-mode -w path 'tcp port PORT'`` (several
ports: ``tcp port A or tcp port B``), waits until it is listening, and on exit waits for the last packets to be
written (about a second) before stopping it by PID. tcpdump needs the right to capture (root or CAP_NET_RAW);
:class:`RecorderUnavailable` says why when it cannot run. A recording that tcpdump says lost packets (the kernel's
buffer was full while tcpdump waited for a core) raises :class:`RecordingIncomplete`: a capture with holes is not
the traffic that was sent.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

#: The kernel capture buffer, in KiB. In immediate mode every packet may take a block of the ring to itself, so a
#: small buffer fills within a few dozen packets while tcpdump waits for a core on a loaded machine (seen with the
#: 2 MiB default: a CONNECT and its CONNACK missing from a recording of a handful of connections).
BUFFER_KIB = 65536
#: What tcpdump says on exit about packets it lost ("3 packets dropped by kernel").
_DROPPED = re.compile(rb"(\d+) packets? dropped by (kernel|interface)")


class RecorderUnavailable(RuntimeError):
    """tcpdump is missing or may not capture here."""


class RecordingIncomplete(RuntimeError):
    """tcpdump lost packets of the recording; the message says how many."""


def lost_packets(said: bytes) -> int:
    """How many packets tcpdump says, in what it wrote on exit, that it lost (by the kernel or the interface)."""
    return sum(int(count) for count, _where in _DROPPED.findall(said))


def port_filter(ports: int | Sequence[int]) -> str:
    """The capture filter of TCP traffic on ``ports``."""
    wanted = [ports] if isinstance(ports, int) else list(ports)
    if not wanted:
        raise ValueError("a recording needs at least one port")
    return " or ".join(f"tcp port {port}" for port in wanted)


def tcpdump_path() -> str | None:
    return shutil.which("tcpdump") or next(
        (p for p in ("/usr/sbin/tcpdump", "/usr/bin/tcpdump") if Path(p).exists()), None
    )


@contextlib.contextmanager
def tcpdump_recording(
    path: Path,
    port: int | Sequence[int],
    *,
    interface: str = "lo",
    settle: float = 1.0,
    rotate_mb: int | None = None,
) -> Iterator[Path]:
    """Records TCP traffic on ``port`` (one or several) of ``interface`` into the pcap file ``path`` while the
    block runs; raises :class:`RecordingIncomplete` on leaving it when tcpdump lost packets. With ``rotate_mb``,
    tcpdump starts a new file (``path`` then ``path1``, ``path2``...) whenever one exceeds that many million bytes
    (``-C``), as an operator's rotated captures are written."""
    binary = tcpdump_path()
    if binary is None:
        raise RecorderUnavailable("tcpdump is not installed (Debian package tcpdump)")
    command = [binary, "-i", interface, "--immediate-mode", "-U", "-B", str(BUFFER_KIB), "-s", "0", "-w", str(path)]
    if rotate_mb is not None:
        command += ["-C", str(rotate_mb), "-Z", "root"]  # the next files are opened after dropping privileges
    command.append(port_filter(port))
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    said = b""
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
            with contextlib.suppress(OSError):
                said = process.stderr.read() or b""
            process.stderr.close()
    lost = lost_packets(said)
    if lost:
        raise RecordingIncomplete(f"tcpdump lost {lost} packet(s) of {path.name}: {said.decode(errors='replace')}")


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
