"""Peak memory of the processes a test starts, measured while they run: psutil polls the test process's
descendants (the Spark JVM and its Python workers, a broker, a command) from a thread, every ``interval`` seconds.
A peak is a sample, so it errs low by what lived shorter than the interval; the ceilings tests assert are
generous for that reason."""

from __future__ import annotations

import os
import threading
from types import TracebackType

import psutil


class PeakMemory:
    """``with PeakMemory() as peak: ...``; then ``peak.python`` is the largest resident set size (bytes) seen of
    one descendant Python process (a Spark Python worker), and ``peak.tree`` the largest sum over the test process
    and all its descendants."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.python = 0
        self.tree = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._root = psutil.Process(os.getpid())

    def __enter__(self) -> PeakMemory:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        total = 0
        for process in [self._root, *self._root.children(recursive=True)]:
            try:
                rss = process.memory_info().rss
                name = process.name()
            except psutil.Error:  # it ended between the listing and the reading
                continue
            total += rss
            if process.pid != self._root.pid and name.startswith("python"):
                self.python = max(self.python, rss)
        self.tree = max(self.tree, total)
