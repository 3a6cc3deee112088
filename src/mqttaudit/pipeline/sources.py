"""Where captures come from: local paths, and filesystem URLs (``file://``, ``hdfs://``, ``s3://``/``s3a://``, ...)
opened through ``pyarrow.fs`` on the driver (to plan chunks) and on each executor (to read its chunk)."""

from __future__ import annotations

import fnmatch
import glob
import os
import posixpath
from pathlib import Path
from typing import Any, BinaryIO, cast

from mqttaudit.capture import Opener

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")


class AuditInputError(ValueError):
    """No capture matches what was asked for, or a location cannot be opened."""


def is_url(location: str) -> bool:
    return "://" in location


def _filesystem(url: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    uri = "s3://" + url[len("s3a://") :] if url.startswith("s3a://") else url
    try:
        return cast(tuple[Any, str], pafs.FileSystem.from_uri(uri))
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise AuditInputError(f"{url}: cannot open this filesystem ({exc})") from exc


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


def expand(locations: list[str]) -> list[str]:
    """Files, folders (every capture below them) and globs, in a stable order."""
    found: list[str] = []
    for location in locations:
        found += _expand_url(location) if is_url(location) else _expand_local(location)
    unique = list(dict.fromkeys(found))
    if not unique:
        raise AuditInputError(f"no capture file under {', '.join(locations)}")
    return unique


def _expand_local(location: str) -> list[str]:
    matches = sorted(glob.glob(location, recursive=True)) if glob.has_magic(location) else [location]
    if not matches:
        raise AuditInputError(f"{location}: no file matches")
    found: list[str] = []
    for match in matches:
        if os.path.isdir(match):
            found += sorted(str(p) for p in Path(match).rglob("*") if p.is_file() and _is_capture(p.name))
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
