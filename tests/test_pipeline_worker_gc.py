"""The collector settings of the Spark tasks (:mod:`mqttaudit.pipeline.worker_gc`): a sliced replay's garbage is
freed every few slices, walking only what the replay made, and nothing stays frozen after the replay however it
ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from mqttaudit.pipeline.worker_gc import ReplayGarbage


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
    """No automatic collection during a test: what is freed, ReplayGarbage (or the test) freed."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def test_cycles_made_during_the_slices_are_freed_every_few_slices() -> None:
    with ReplayGarbage(every=3) as garbage:
        made = cycle()
        assert gc.get_freeze_count() > 0  # what existed before the replay is out of the collections' walks
        garbage.sliced()
        garbage.sliced()
        assert made() is not None  # no collection yet
        later = cycle()
        garbage.sliced()  # the third slice: a collection after it
        assert made() is None
        assert later() is None
        kept = Node()
        kept.other = kept
        alive = weakref.ref(kept)
        for _ in range(3):
            garbage.sliced()
        assert alive() is not None  # a cycle still referenced is not freed
        del kept
    assert gc.get_freeze_count() == 0


def test_what_existed_before_the_replay_stays_frozen_until_it_ends_then_is_freed() -> None:
    older = Node()
    older.other = older
    watched = weakref.ref(older)
    with ReplayGarbage(every=1) as garbage:
        del older  # alive when the replay began: frozen, so its collections cannot see it
        garbage.sliced()
        garbage.sliced()
        assert watched() is not None
    assert gc.get_freeze_count() == 0
    gc.collect()  # the worker's next full collection
    assert watched() is None


def test_nothing_stays_frozen_when_a_replay_fails_or_its_generator_is_closed() -> None:
    with pytest.raises(RuntimeError), ReplayGarbage():
        made = cycle()
        raise RuntimeError("a slice that fails")
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert made() is None

    def slices() -> Iterator[int]:
        with ReplayGarbage() as garbage:
            for number in range(3):
                yield number
                garbage.sliced()

    running = slices()
    assert next(running) == 0
    assert gc.get_freeze_count() > 0
    running.close()  # the consumer stopped: GeneratorExit ends the replay's block
    assert gc.get_freeze_count() == 0


def test_no_automatic_collection_runs_during_a_replay_and_the_collector_is_as_it_was_after() -> None:
    gc.enable()
    with ReplayGarbage() as garbage:
        assert not gc.isenabled()  # walked every few slices instead
        garbage.sliced()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), ReplayGarbage():
        raise RuntimeError("a slice that fails")
    assert gc.isenabled()
    gc.disable()
    with ReplayGarbage():
        pass
    assert not gc.isenabled()  # left off by its owner: not turned on by the replay
