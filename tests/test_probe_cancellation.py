"""A wait that timed out while its task was being cancelled ends the task: an interrupted probe stops its cases
instead of letting one go on as if its wait had only timed out (Python 3.11's wait_for can take the one for the
other)."""

from __future__ import annotations

import asyncio

import pytest

from mqttaudit.probe.cancellation import raise_if_cancelling


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
