"""Where captures come from: local paths, and filesystem URLs (``file://``, ``hdfs://``, ``s3://``/``s3a://``, ...)
opened through ``pyarrow.fs`` on the driver (to plan chunks) and on each executor (to read its chunk)."""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from mqttaudit import locations
from mqttaudit.capture import Opener

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")
#: The first four bytes of a pcap file (micro- or nanosecond timestamps, either byte order) or a pcapng file.
CAPTURE_MAGICS = {
    bytes.fromhex("a1b2c3d4"): "pcap",
    bytes.fromhex("d4c3b2a1"): "pcap",
    bytes.fromhex("a1b23c4d"): "pcap",
    bytes.fromhex("4d3cb2a1"): "pcap",
    bytes.fromhex("0a0d0d0a"): "pcapng",
}


class AuditInputError(ValueError):
    """No capture matches what was asked for, or a location cannot be opened."""


def is_url(location: str) -> bool:
    return locations.is_url(location)


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        return locations.resolve(url)
    except locations.LocationError as exc:
        raise AuditInputError(str(exc)) from exc


def opener(location: str) -> Opener:
    """Opens ``location`` (a path or a URL) for reading, anew at each call."""
    if not is_url(location):
        return lambda: open(location, "rb")
    filesystem, path = _filesystem(location)
    return lambda: cast(BinaryIO, filesystem.open_input_file(path))


def size(location: str) -> int:
    if not is_url(location):
        return os.path.getsize(location)
    filesystem, path = _filesystem(location)
    return int(filesystem.get_file_info(path).size)


def _is_capture(name: str) -> bool:
    return name.endswith(CAPTURE_SUFFIXES)


def head(location: str, count: int = 4) -> bytes:
    """The first ``count`` bytes of a capture (one small read)."""
    with opener(location)() as file:
        return bytes(file.read(count))


def not_a_capture(location: str) -> str | None:
    """Why ``location`` is not a pcap or pcapng file, or ``None`` when its magic number says it is one."""
    try:
        first = head(location)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return _not_a_capture_head(first)


def _not_a_capture_head(first: bytes) -> str | None:
    """Why a file whose first four bytes are ``first`` is not a pcap or pcapng file, or ``None``."""
    if first in CAPTURE_MAGICS:
        return None
    if len(first) < 4:
        return f"holds {len(first)} byte(s), too few for a capture's magic number"
    shown = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in first)
    return f"starts with {first.hex(' ')} ({shown!r}), which is neither a pcap nor a pcapng magic number"


def check_captures(locations: list[str], files: list[str]) -> list[tuple[str, str]]:
    """Checks every file's magic number before any work starts. A file the user named itself that is not a capture
    is a usage error; one found in a folder or by a glob is returned as ``(file, why)`` to be reported while the
    others are audited; no capture at all is a usage error."""
    named = {location for location in locations if not glob.has_magic(location) and not _is_folder(location)}
    rejected: list[tuple[str, str]] = []
    for path in files:
        why = not_a_capture(path)
        if why is None:
            continue
        if path in named:
            raise AuditInputError(f"{path}: not a capture: {why}")
        rejected.append((path, why))
    if len(rejected) == len(files):
        listed = "; ".join(f"{path}: {why}" for path, why in rejected[:3])
        raise AuditInputError(f"no pcap or pcapng capture among {len(files)} file(s) ({listed})")
    return rejected


def _is_folder(location: str) -> bool:
    if not is_url(location):
        return os.path.isdir(location)
    import pyarrow.fs as pafs

    filesystem, path = _filesystem(location)
    return bool(filesystem.get_file_info(path).type == pafs.FileType.Directory)


def expand(locations: list[str]) -> list[str]:
    """Files, folders (every capture below them) and globs, in a stable order."""
    found: list[str] = []
    for location in locations:
        found += _expand_url(location) if is_url(location) else _expand_local(location)
    unique = list(dict.fromkeys(found))
    if not unique:
        raise AuditInputError(f"no capture file (.pcap, .pcapng, .cap) in {', '.join(locations)}")
    return unique


def _expand_local(location: str) -> list[str]:
    matches = sorted(glob.glob(location, recursive=True)) if glob.has_magic(location) else [location]
    if not matches:
        raise AuditInputError(f"{location}: no file matches")
    found: list[str] = []
    for match in matches:
        if os.path.isdir(match):
            # By name, or by magic number (tcpdump -C and -G name rotated files trace.pcap1, trace.pcap2, ...).
            found += sorted(
                str(p)
                for p in Path(match).rglob("*")
                if p.is_file() and (_is_capture(p.name) or not_a_capture(str(p)) is None)
            )
        elif os.path.isfile(match):
            found.append(match)
        else:
            raise AuditInputError(f"{location}: no such file or folder")
    return found


def _expand_url(location: str) -> list[str]:
    import pyarrow.fs as pafs

    scheme, _, _ = location.partition("://")
    filesystem, path = _filesystem(location)
    prefix = location[: len(location) - len(path)] if location.endswith(path) else f"{scheme}://"
    pattern = path if glob.has_magic(path) else None
    base = posixpath.dirname(path) if pattern else path
    info = filesystem.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        raise AuditInputError(f"{location}: no such file or folder")
    if info.type == pafs.FileType.File:
        return [prefix + base]
    listing = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    files = sorted(entry.path for entry in listing if entry.type == pafs.FileType.File)
    wanted = (lambda f: fnmatch.fnmatch(f, pattern)) if pattern else _is_capture
    files = [f for f in files if wanted(f)]
    if not files:
        raise AuditInputError(f"{location}: no file matches")
    return [prefix + f for f in files]


#: The location that names standard input among the captures (``mqttaudit audit -``), as tshark's ``-r -``.
STDIN = "-"
#: The name standard input's capture goes by in the reports (its ``capture`` column).
STDIN_NAME = "stdin"
#: Bytes copied from standard input at a time.
SPOOL_READ = 1 << 20


@dataclass(frozen=True)
class Spooled:
    """A capture read from standard input into a file: its path, the bytes written, and whether reading stopped at
    the bound (``cap``) with more to come."""

    path: Path
    size: int
    cap: int
    stopped_at_cap: bool


def spool(stream: BinaryIO, folder: Path, cap: int) -> Spooled:
    """Copies ``stream`` (standard input) into ``folder``/:data:`STDIN_NAME` up to ``cap`` bytes, so that the
    reading tasks can seek in it as in any capture file. Past ``cap`` nothing more is read: the result says so.
    A stream that does not start with a capture's magic number is refused after its first bytes."""
    path = folder / STDIN_NAME
    written = 0
    with path.open("wb") as out:
        first = _read_up_to(stream, 4)
        why = _not_a_capture_head(first)
        if why is not None:
            raise AuditInputError(f"standard input is not a capture: it {why}")
        out.write(first[:cap])
        written = min(len(first), cap)
        while written < cap:
            data = stream.read(min(SPOOL_READ, cap - written))
            if not data:
                return Spooled(path, written, cap, stopped_at_cap=False)
            out.write(data)
            written += len(data)
    return Spooled(path, written, cap, stopped_at_cap=bool(stream.read(1)))


def _read_up_to(stream: BinaryIO, count: int) -> bytes:
    """``count`` bytes of ``stream``, fewer only at its end (a pipe hands them over in pieces)."""
    got = b""
    while len(got) < count:
        data = stream.read(count - len(got))
        if not data:
            break
        got += data
    return got
