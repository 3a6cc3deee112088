"""The files an option names (``--password-file``, ``--profile``, ``--baseline``, ``--keylog``, ``decode --file``),
read up to a cap per kind: ``/dev/zero``, a FIFO that never ends or a sparse file of terabytes is refused with the
option, the file and the cap named, never read whole. A regular file larger than its cap is refused before a byte is
read; anything else is read until one byte past the cap at most.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

MiB: Final = 1024 * 1024

#: A password is MQTT Binary Data: at most 65,535 bytes [MQTT-1.5.6]; its file's first line is read, no more.
PASSWORD_LINE: Final = 65_535
#: A broker profile is a few keys and one scripted authentication exchange (hex of up to 64 KiB per step).
PROFILE: Final = 4 * MiB
#: A baseline is a previous findings.json: each case's evidence is bounded (about 48 KB at most), so a run of the
#: whole library stays far below this.
BASELINE: Final = 128 * MiB
#: A TLS key log: about 180 bytes per TLS 1.2 session, 5 lines per TLS 1.3 session; a million lines fit.
KEYLOG: Final = 256 * MiB
#: The raw bytes ``decode`` reads from a file or standard input (its hex text may take 6 characters a byte).
DECODE: Final = 64 * MiB
DECODE_HEX: Final = 6 * DECODE

_CHUNK: Final = MiB


class OptionFileError(ValueError):
    """An option's file cannot be read, or is over its cap; the message names the option, the file and why."""


def size_text(count: int) -> str:
    """``4 MiB``, ``64 KiB`` or ``65,535 bytes``: a cap as the messages state it."""
    for unit, size in (("MiB", MiB), ("KiB", 1024)):
        if count >= size and count % size == 0:
            return f"{count // size:,} {unit}"
    return f"{count:,} bytes"


def too_large(option: str, name: object, cap: int, what: str = "") -> OptionFileError:
    return OptionFileError(
        f"{option} {name}: {what or 'larger than'} {size_text(cap)}, the most {option} reads; not read further"
    )


def read_capped(path: Path | str, *, option: str, cap: int, what: str = "") -> bytes:
    """The bytes of the file at ``path``, or :class:`OptionFileError` when it cannot be read (the message calls it
    ``what``, else ``option``) or holds more than ``cap`` bytes."""
    return b"".join(blocks_capped(path, option=option, cap=cap, what=what))


def blocks_capped(path: Path | str, *, option: str, cap: int, what: str = "") -> Iterator[bytes]:
    """The bytes of the file at ``path`` block by block, as :func:`read_capped` reads them (the same errors, raised
    when reached), for a reader that holds no more than a block."""
    try:
        with open(path, "rb") as file:
            yield from blocks_open(file, option=option, cap=cap, name=path)
    except OSError as exc:
        raise OptionFileError(f"cannot read {what or option} {path}: {exc.strerror or exc}") from None


def read_open(stream: BinaryIO, *, option: str, cap: int, name: object) -> bytes:
    """What the open ``stream`` holds (a file, a pipe, standard input), read until one byte past ``cap`` at most; a
    regular file larger than ``cap`` is refused by its size, before a byte is read. :class:`OptionFileError` beyond
    the cap or when it cannot be read."""
    return b"".join(blocks_open(stream, option=option, cap=cap, name=name))


def blocks_open(stream: BinaryIO, *, option: str, cap: int, name: object) -> Iterator[bytes]:
    """What the open ``stream`` holds block by block, as :func:`read_open` reads it (the same errors, raised when
    reached)."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # not backed by a file descriptor (a test's stream)
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > cap:
        raise too_large(option, name, cap)
    held = 0
    while held <= cap:
        try:
            chunk = stream.read(min(_CHUNK, cap + 1 - held))
        except OSError as exc:
            raise OptionFileError(f"cannot read {option} {name}: {exc.strerror or exc}") from None
        if not chunk:
            return
        held += len(chunk)
        if held <= cap:
            yield chunk
    raise too_large(option, name, cap)


def read_first_line(path: Path | str, *, option: str, cap: int) -> bytes:
    """The first line of the file at ``path`` (without its line break), reading no further than ``cap`` bytes and
    a line break: :class:`OptionFileError` when that line is longer."""
    try:
        with open(path, "rb") as file:
            head = file.read(cap + 2)  # the line, then \r\n or \n
    except OSError as exc:
        raise OptionFileError(f"cannot read {option} {path}: {exc.strerror or exc}") from None
    line, newline, _ = head.partition(b"\n")
    line = line.removesuffix(b"\r")
    if len(line) > cap or (not newline and len(head) > cap):
        raise too_large(option, path, cap, "a first line longer than")
    return line
