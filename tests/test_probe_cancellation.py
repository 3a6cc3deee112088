"""A wait that timed out while its task was being cancelled ends the task: an interrupted probe stops its cases
instead of letting one go on as if its wait had only timed out (Python 3.11's wait_for can take the one for the
other)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from pathlib import Path

import pytest

import mqttaudit.probe
from mqttaudit.probe.cancellation import raise_if_cancelling, within


async def _swallowing_then_checking(checked: list[str]) -> None:
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        checked.append("swallowed")  # what wait_for does when the cancellation meets its deadline
    raise_if_cancelling()
    checked.append("went on")


def test_a_task_asked_to_stop_stops_at_the_check() -> None:
    checked: list[str] = []

    async def run() -> None:
        task = asyncio.create_task(_swallowing_then_checking(checked))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert checked == ["swallowed"]


def test_a_task_nobody_cancelled_goes_on() -> None:
    async def run() -> str:
        raise_if_cancelling()
        try:
            await asyncio.wait_for(asyncio.sleep(10), 0.01)
        except TimeoutError:
            raise_if_cancelling()
            return "timed out"
        return "finished"

    assert asyncio.run(run()) == "timed out"


async def _cancelled_then_swallowed() -> None:
    """The task is asked to stop and the cancellation is swallowed on the way, as wait_for may do."""
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(0)


def test_a_deadline_met_while_the_task_is_being_cancelled_is_a_cancellation() -> None:
    seen: list[str] = []

    async def run() -> None:
        await _cancelled_then_swallowed()
        try:
            await within(asyncio.sleep(10), 0.01)
        except TimeoutError:
            seen.append("timed out")  # the case would go on as if its wait had only timed out
        except asyncio.CancelledError:
            seen.append("cancelled")

    asyncio.run(run())
    assert seen == ["cancelled"]


def test_a_deadline_met_by_a_task_nobody_cancelled_is_a_timeout() -> None:
    async def run() -> str:
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(10), 0.01)
        return await within(asyncio.sleep(0, "done"), 1.0)

    assert asyncio.run(run()) == "done"


def test_every_bounded_wait_of_the_prober_goes_through_within() -> None:
    """No module of the probe calls ``asyncio.wait_for`` but the one that makes it safe: a new wait site that
    forgot the cancellation check fails here."""
    package = Path(mqttaudit.probe.__file__).parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "cancellation.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = isinstance(node, ast.Attribute) and node.attr == "wait_for"
            called = called and isinstance(node.value, ast.Name) and node.value.id == "asyncio"
            imported = isinstance(node, ast.ImportFrom) and node.module == "asyncio"
            imported = imported and any(alias.name == "wait_for" for alias in node.names)
            if called or imported:
                offenders.append(f"{path.relative_to(package)}:{node.lineno}")
    assert offenders == []


def test_a_result_ready_when_the_cancellation_comes_is_a_cancellation() -> None:
    """The connection ends (its future is done) in the same turn of the loop as the task is cancelled: Python
    3.11's wait_for returns the result and forgets the cancellation; within does not."""
    seen: list[str] = []

    async def waiting(ended: asyncio.Future[str]) -> None:
        try:
            seen.append(await within(ended, 10))
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def run() -> None:
        ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(waiting(ended))
        await asyncio.sleep(0)
        ended.set_result("the connection ended")
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert seen == ["cancelled"]
