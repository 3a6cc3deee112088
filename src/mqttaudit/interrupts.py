"""Whether this process was interrupted (Ctrl-C or SIGTERM), whatever became of the exception the signal raised.

A signal handler's exception surfaces wherever Python happens to be; raised inside a finalizer (Py4J releases its
Java objects from weak-reference callbacks) it is printed as "Exception ignored" and lost, and an interrupted audit
went on to publish its output and exit 1. So every handler the command line installs first records the signal
here, and the output folder refuses to publish, and the command exits 130, once one was recorded.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

_seen = threading.Event()

Handler = Callable[[int, FrameType | None], Any]


def seen() -> bool:
    """An interrupt arrived since :func:`reset`."""
    return _seen.is_set()


def reset() -> None:
    _seen.clear()


def recording(handler: Handler | int | None) -> Handler:
    """A handler that records the signal, then does what ``handler`` does (a default or ignored disposition, or
    none known, raises KeyboardInterrupt as Python's own handler of Ctrl-C does)."""

    def record(signum: int, frame: FrameType | None) -> Any:
        _seen.set()
        if callable(handler):
            return handler(signum, frame)
        raise KeyboardInterrupt

    record.recorded = True  # type: ignore[attr-defined]
    return record


def record_sigint() -> None:
    """Wraps the current SIGINT handler (PySpark installs its own when its context starts) so that it records the
    interrupt first; in the main thread only, and once."""
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGINT)
    if not getattr(current, "recorded", False):
        signal.signal(signal.SIGINT, recording(current))
