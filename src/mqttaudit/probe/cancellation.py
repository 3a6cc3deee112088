"""A wait that timed out is no timeout when its task was being cancelled meanwhile.

Python 3.11's ``asyncio.wait_for`` can take a cancellation that arrives as its deadline passes for the deadline
(CPython gh-86296): the task then goes on as if the wait had timed out. A probe interrupted with Ctrl-C had a case
go on that way, fail its set-up and end after the event loop had stopped waiting for it, and Python printed the
case's traceback on the terminal before the run's one line ("interrupted").
"""

from __future__ import annotations

import asyncio


def raise_if_cancelling() -> None:
    """Raises ``CancelledError`` when the current task has been asked to stop; called where a wait timed out."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
