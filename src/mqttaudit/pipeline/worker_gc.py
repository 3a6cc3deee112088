"""The garbage collector of a Python worker, tuned once for the tasks' work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

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


#: A full collection every this many slices of a replay (:class:`SliceGarbage`).
FULL_EVERY_SLICES = 8


class SliceGarbage:
    """Frees each slice's garbage of a sliced replay at the slice's end, walking only what was made while the
    slice ran.

    A slice's broker model is reference cycles (connections, sessions, expectations): left to the worker's rare full
    collections (:func:`tune_gc`) the slices' garbage would add up, and a full collection after each slice walked
    everything the replay holds (the merge's open pieces, the window of deliveries) again and again: 31 s of the
    107 s replay of the 4,000,000-packet bench capture. Here what exists when a slice starts is frozen, so the
    collection at its end walks only the objects made since, and is then unfrozen. What was alive when the slice
    began and became garbage during it (the state a slice hands the next) escapes that walk: a full collection every
    :data:`FULL_EVERY_SLICES` slices bounds it.

    No automatic collection runs during a slice (the collector is turned off, then back to what it was): the
    slice's model is alive until the slice ends, so a collection before walked it for nothing (4,000,000 packets:
    the replay 72.2 / 76.8 s with them, 70.1 / 74.1 s without, the same peak memory).

    Unfreezing also returns what :func:`tune_gc` froze at the worker's start to the old generation: Python has no
    partial unfreeze. Only full collections walk it, and the worker's thresholds make those rare."""

    def __init__(self, full_every: int = FULL_EVERY_SLICES) -> None:
        self.full_every = full_every
        self.slices = 0

    @contextmanager
    def slice(self) -> Iterator[None]:
        """The block of one slice (a ``yield`` inside it is fine: the generator's close runs the exit too)."""
        gc.freeze()
        enabled = gc.isenabled()
        gc.disable()  # the slice's model lives until its end: a collection before would walk it for nothing
        try:
            yield
        finally:
            gc.collect()
            gc.unfreeze()
            if enabled:
                gc.enable()
            self.slices += 1
            if self.slices % self.full_every == 0:
                gc.collect()
