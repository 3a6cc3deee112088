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


#: A collection every this many slices of a replay (:class:`ReplayGarbage`).
COLLECT_EVERY_SLICES = 8


class ReplayGarbage:
    """The collector during a sliced replay: off from its first slice to its end, what the task held before the
    slices (the skeletons, the first pieces, the imports) frozen out of every walk, and a collection of the rest
    every :data:`COLLECT_EVERY_SLICES` slices.

    A slice's broker model is reference cycles (connections and sessions, share groups and their members), so
    something must walk it; but most of what a slice makes outlives it (the expectations and messages handed to the
    next slices, the window of deliveries): on the 4,000,000-packet bench capture a collection at each slice's end
    found 25,000 objects to free among 345,000 it walked, and the automatic collections between the slices walked
    the deliveries read into the window the same way. Walking every few slices instead frees the same cycles for
    a fraction of the walks: the replay alone 59.4 / 63.1 s with a collection per slice (the collector on between
    the slices), 50.4 s so, at a peak 3% higher (622 against 603 MB).

    What was frozen stays frozen until the replay ends: it holds what the whole replay reads (the skeletons); what
    of it dies meanwhile is freed by reference counting, or, in a cycle, by the worker's collections after the end.
    Python has no partial unfreeze: the end also returns what :func:`tune_gc` froze at the worker's start to the old
    generation; only full collections walk it, and the worker's thresholds make those rare."""

    def __init__(self, every: int = COLLECT_EVERY_SLICES) -> None:
        self.every = every
        self.slices = 0
        self._enabled = False

    def __enter__(self) -> ReplayGarbage:
        gc.freeze()
        self._enabled = gc.isenabled()
        gc.disable()
        return self

    def sliced(self) -> None:
        """One slice has ended (its results consumed): every few slices, what is not frozen is walked."""
        self.slices += 1
        if self.slices % self.every == 0:
            gc.collect()

    def __exit__(self, *exc: object) -> None:
        gc.unfreeze()
        if self._enabled:
            gc.enable()
