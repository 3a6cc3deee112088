"""The garbage collector of a Python worker, tuned once for the tasks' work."""

from __future__ import annotations

import gc

#: Allocations between two young-generation collections in a task (Python's default is 700).
GC_THRESHOLD = 50_000


def tune_gc() -> None:
    """Tunes the cyclic garbage collector of this worker process for the tasks' work, once per process.

    A task builds millions of small objects that stay alive until it ends (decoded packets, events, a broker's
    transcripts); with the default thresholds the collector walks them again and again, which measured 40-60% of
    a task's time. What was imported is frozen out of its walks; collections become rarer, not disabled, so the
    few reference cycles are still freed."""
    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.freeze()
        gc.set_threshold(GC_THRESHOLD, 20, 100)
