"""An interrupt is recorded before its exception is raised, so that one lost on the way (raised inside a finalizer,
where Python prints it and drops it: Py4J releases Java objects from weak-reference callbacks) still stops the
output from being published."""

from __future__ import annotations

import gc
import signal
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttaudit import interrupts
from mqttaudit.report.output_dir import staged_output


@pytest.fixture(autouse=True)
def dropped(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[type[BaseException]]]:
    """The exceptions Python printed and dropped ("Exception ignored in ...") during the test."""
    seen: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    interrupts.reset()
    yield seen
    interrupts.reset()


class _Released:
    """Stands for a Py4J Java object whose release runs in a weak-reference callback."""


def _interrupt_inside_a_finalizer() -> None:
    handler = interrupts.recording(signal.default_int_handler)
    thing = _Released()
    weakref.finalize(thing, handler, signal.SIGINT, None)
    del thing
    gc.collect()


def test_an_interrupt_lost_in_a_finalizer_is_still_recorded(dropped: list[type[BaseException]]) -> None:
    _interrupt_inside_a_finalizer()  # the KeyboardInterrupt is dropped, as Python does there
    assert dropped == [KeyboardInterrupt]
    assert interrupts.seen()


def test_an_interrupted_run_publishes_nothing_even_when_its_exception_was_lost(
    tmp_path: Path, dropped: list[type[BaseException]]
) -> None:
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt), staged_output(out) as staging:
        (staging / "findings.md").write_text("half a run")
        _interrupt_inside_a_finalizer()
        assert dropped == [KeyboardInterrupt]  # the block went on: only the record stops the publication
    assert not out.exists()
    assert not any(tmp_path.iterdir())  # the staging folder is gone too


def test_without_an_interrupt_the_output_is_published(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged_output(out) as staging:
        (staging / "findings.md").write_text("a run")
    assert (out / "findings.md").read_text() == "a run"


def test_a_recorded_handler_is_not_wrapped_twice() -> None:
    previous = signal.getsignal(signal.SIGINT)
    try:
        interrupts.record_sigint()
        once = signal.getsignal(signal.SIGINT)
        interrupts.record_sigint()
        assert signal.getsignal(signal.SIGINT) is once
        with pytest.raises(KeyboardInterrupt):
            once(signal.SIGINT, None)  # type: ignore[operator]
        assert interrupts.seen()
    finally:
        signal.signal(signal.SIGINT, previous)
