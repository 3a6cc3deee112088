"""A reader of standard output that leaves early (``mqttaudit rules | head -1``) is not an error of the tool: what
is written after it left goes nowhere, the command finishes its work (its reports too) and exits with the status of
what it found. No traceback, no "Exception ignored" at exit."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import Buffer


class _ReaderMayLeave(io.RawIOBase):
    """File descriptor ``fd`` for writing; once its reader has gone (EPIPE) the descriptor is pointed at the null
    device, so this write and every later one (the interpreter's last flush included) succeed without a reader."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Buffer, /) -> int:
        try:
            return os.write(self._fd, data)
        except BrokenPipeError:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._fd)
            finally:
                os.close(null)
            return memoryview(data).nbytes


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """While the block runs, the process's standard output (when it is the real one, not a caller's replacement)
    outlives its reader."""
    stdout = sys.stdout
    if stdout is None or stdout is not sys.__stdout__ or not isinstance(stdout, io.TextIOWrapper):
        yield
        return
    with contextlib.suppress(BrokenPipeError):
        stdout.flush()
    raw = _ReaderMayLeave(stdout.fileno())
    # buffered as the standard output was (python -u, PYTHONUNBUFFERED: not at all)
    buffered: Any = io.BufferedWriter(raw) if isinstance(stdout.buffer, io.BufferedWriter) else raw
    guarded = io.TextIOWrapper(
        buffered,
        encoding=stdout.encoding,
        errors=stdout.errors,
        line_buffering=stdout.line_buffering,
        write_through=stdout.write_through,
    )
    sys.stdout = guarded
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            guarded.flush()
        sys.stdout = stdout
