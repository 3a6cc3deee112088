"""Every bounded wait of the prober: :func:`within`, a deadline that never takes a cancellation for itself.

Python 3.11's ``asyncio.wait_for`` can take a cancellation that arrives as its deadline passes for the deadline
(CPython gh-86296): the task then goes on as if the wait had timed out. A probe interrupted with Ctrl-C had a case
go on that way, fail its set-up and end after the event loop had stopped waiting for it, and Python printed the
case's traceback on the terminal before the run's one line ("interrupted"). So no code of the prober calls
``asyncio.wait_for`` itself: every wait with a deadline goes through :func:`within`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def raise_if_cancelling() -> None:
    """Raises ``CancelledError`` when the current task has been asked to stop; called where a wait timed out."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def within(awaitable: Awaitable[T], timeout: float) -> T:
    """``awaitable``'s result within ``timeout`` seconds: ``TimeoutError`` when the deadline passed first, but
    ``CancelledError`` when the task was asked to stop meanwhile, whatever the wait ended with: Python 3.11's
    wait_for also returns a result that was ready when the cancellation came (a connection that ended as Ctrl-C
    closed it), and a case would then fail its set-up after the event loop stopped waiting for it."""
    try:
        result = await asyncio.wait_for(awaitable, timeout)
    except TimeoutError:
        raise_if_cancelling()
        raise
    raise_if_cancelling()
    return result
