"""Where an audit reads and writes: a local path, or a URL of any filesystem ``pyarrow.fs`` reaches (``file://``,
``s3://`` and ``s3a://``, ``gs://``, ``hdfs://``, ``abfs://``), as that filesystem and a path in it.

Credentials and endpoints come from each filesystem's own standard settings, read where the filesystem is opened
(the driver and every executor): for S3 ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION`` and ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` (an S3-compatible server), or a profile; for HDFS
the Hadoop client's (``HADOOP_HOME``, ``CLASSPATH``). mqttaudit never reads them itself, and never writes them.
pyarrow comes with the spark extra: it is imported when a location is opened.
"""

from __future__ import annotations

import functools
import os
import posixpath
from pathlib import Path
from typing import Any, cast

#: The scheme that names this machine's files: ``file:///tmp/out`` is the local path ``/tmp/out``.
FILE_SCHEME = "file://"


class LocationError(ValueError):
    """A location's filesystem cannot be opened (an unknown scheme, a malformed URL, no client library)."""


def is_url(location: str | os.PathLike[str]) -> bool:
    return isinstance(location, str) and "://" in location


def is_remote(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is on another filesystem than this machine's (a URL other than ``file://``)."""
    return is_url(location) and not str(location).startswith(FILE_SCHEME)


def local_path(location: str | os.PathLike[str]) -> Path:
    """A location on this machine's filesystem (a path, or a ``file://`` URL) as a path."""
    text = os.fspath(location)
    return Path(text[len(FILE_SCHEME) :] if text.startswith(FILE_SCHEME) else text)


def as_output(location: str | os.PathLike[str]) -> Path | str:
    """An ``--out`` as the audit takes it: a local path (``file://`` URLs too), or a remote URL kept as text."""
    return str(location).rstrip("/") if is_remote(location) else local_path(location)


def join(location: str | os.PathLike[str], *parts: str) -> str:
    """``location`` with ``parts`` appended, keeping its scheme."""
    return posixpath.join(os.fspath(location), *parts) if is_url(location) else os.path.join(location, *parts)


def resolve(location: str | os.PathLike[str]) -> tuple[Any, str]:
    """The ``pyarrow.fs`` filesystem of ``location`` and the path in it (absolute for a local path)."""
    if not is_remote(location):
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem(), os.path.abspath(local_path(location))
    text = os.fspath(location)
    scheme, _, rest = text.partition("://")
    rest, _, query = rest.partition("?")
    root, _, tail = rest.partition("/")
    scheme = "s3" if scheme == "s3a" else scheme
    options = f"?{query}" if query else ""
    try:
        if not root:  # no bucket or host (hdfs:///path: the default file system): the URL as pyarrow reads it
            return _filesystem(f"{scheme}://{rest}{options}")
        # The filesystem of the bucket or host (with the URL's options), then the path below it.
        filesystem, base = _filesystem(f"{scheme}://{root}{options}")
    except (OSError, ValueError) as exc:  # pyarrow's errors derive from these
        raise LocationError(f"{text}: cannot open this filesystem ({exc})") from exc
    return filesystem, posixpath.join(base or "/", tail) if tail else (base or "/")


@functools.cache
def _filesystem(root: str) -> tuple[Any, str]:
    """One filesystem object per bucket or host and process (each opens its own connections and reads the
    credentials once), and the path of the root in it."""
    import pyarrow.fs as pafs

    filesystem, base = pafs.FileSystem.from_uri(root)
    return filesystem, cast(str, base)


def renames(filesystem: Any) -> bool:
    """Whether a file can be published by renaming it into place (this machine's filesystem); object stores copy."""
    import pyarrow.fs as pafs

    return isinstance(filesystem, pafs.LocalFileSystem)


def write_bytes(location: str | os.PathLike[str], data: bytes) -> None:
    filesystem, path = resolve(location)
    with filesystem.open_output_stream(path) as out:
        out.write(data)


def read_bytes(location: str | os.PathLike[str]) -> bytes:
    filesystem, path = resolve(location)
    with filesystem.open_input_stream(path) as source:
        return bytes(source.read())


def exists(location: str | os.PathLike[str]) -> bool:
    import pyarrow.fs as pafs

    filesystem, path = resolve(location)
    return bool(filesystem.get_file_info(path).type != pafs.FileType.NotFound)


def files_under(location: str | os.PathLike[str]) -> list[str]:
    """The paths (relative to ``location``, ``/``-separated, sorted) of every file below it; none when it is not
    there."""
    import pyarrow.fs as pafs

    filesystem, path = resolve(location)
    listing = filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    base = path.rstrip("/") + "/"
    return sorted(
        info.path[len(base) :].replace(os.sep, "/")
        for info in listing
        if info.type == pafs.FileType.File and info.path.startswith(base)
    )


def delete_file(location: str | os.PathLike[str]) -> None:
    filesystem, path = resolve(location)
    filesystem.delete_file(path)


def delete_tree(location: str | os.PathLike[str]) -> None:
    """Removes ``location`` and everything below it (nothing when it is not there)."""
    import pyarrow.fs as pafs

    filesystem, path = resolve(location)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        filesystem.delete_dir(path)
    elif info.type == pafs.FileType.File:
        filesystem.delete_file(path)


def upload(local: Path, location: str) -> None:
    """Copies the local file ``local`` to ``location``."""
    import pyarrow.fs as pafs

    filesystem, path = resolve(location)
    pafs.copy_files(
        str(local.absolute()), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=filesystem
    )
