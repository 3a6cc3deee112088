"""The collector settings of the Spark tasks (:mod:`mqttaudit.pipeline.worker_gc`): a sliced replay's garbage is
freed slice by slice, walking only what the slice made, and nothing stays frozen after a slice however it ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from mqttaudit.pipeline.worker_gc import SliceGarbage


class Node:
    """An object that can be put in a reference cycle and watched by a weak reference."""

    def __init__(self) -> None:
        self.other: object = None


def cycle() -> weakref.ref[Node]:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


@pytest.fixture(autouse=True)
def collector_off() -> Iterator[None]:
    """No automatic collection during a test: what is freed, SliceGarbage freed."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_cycle_made_during_a_slice_is_freed_when_the_slice_ends() -> None:
    garbage = SliceGarbage()
    with garbage.slice():
        made = cycle()
        assert gc.get_freeze_count() > 0  # what existed before the slice is out of the collection's walk
        assert made() is not None
    assert made() is None
    assert gc.get_freeze_count() == 0


def test_nothing_stays_frozen_when_a_slice_fails_or_its_generator_is_closed() -> None:
    garbage = SliceGarbage()
    with pytest.raises(RuntimeError), garbage.slice():
        made = cycle()
        raise RuntimeError("a slice that fails")
    assert gc.get_freeze_count() == 0
    assert made() is None

    def slices() -> Iterator[int]:
        for number in range(3):
            with garbage.slice():
                yield number

    running = slices()
    assert next(running) == 0
    assert gc.get_freeze_count() > 0
    running.close()  # the consumer stopped: GeneratorExit runs the slice's end
    assert gc.get_freeze_count() == 0


def test_garbage_older_than_its_slice_waits_for_the_full_collection_every_few_slices() -> None:
    garbage = SliceGarbage(full_every=3)
    older = Node()
    older.other = older
    watched = weakref.ref(older)
    with garbage.slice():
        del older  # alive when the slice began: frozen, so its own collection cannot see it
    assert watched() is not None
    with garbage.slice():
        pass
    assert watched() is not None
    with garbage.slice():  # the third slice: a full collection after it
        pass
    assert watched() is None


def test_no_automatic_collection_runs_during_a_slice_and_the_collector_is_as_it_was_after() -> None:
    garbage = SliceGarbage()
    gc.enable()
    with garbage.slice():
        assert not gc.isenabled()  # the slice's model lives until its end: nothing to collect before
    assert gc.isenabled()
    with pytest.raises(RuntimeError), garbage.slice():
        raise RuntimeError("a slice that fails")
    assert gc.isenabled()
    gc.disable()
    with garbage.slice():
        pass
    assert not gc.isenabled()  # left off by its owner: not turned on by the slice
