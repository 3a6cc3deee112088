"""Progress of long work on standard error: a live bar (phase, Spark tasks done of the total, elapsed time and ETA)
when standard error is a terminal, plain lines otherwise (logs, CI, the benchmark that reads them)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import click

from mqttaudit.report.terminal import colour_allowed

from .terminal import printable_line


@dataclass
class AuditProgress:
    """What the audit reports to: ``phase(message)`` at each step, ``tasks(done, total)`` while Spark works
    (``None`` when plain lines are wanted: the pipeline then says task counts as lines itself)."""

    phase: Callable[[str], None]
    tasks: Callable[[int, int], None] | None = None


@contextlib.contextmanager
def audit_progress(*, quiet: bool = False) -> Iterator[AuditProgress]:
    if quiet:
        yield AuditProgress(lambda message: None)
        return
    if not sys.stderr.isatty():
        yield AuditProgress(lambda message: click.echo(f"  {printable_line(message)}", err=True))
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(stderr=True, no_color=not colour_allowed(sys.stderr), highlight=False)
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("starting Spark", total=None)

    def phase(message: str) -> None:
        bar.update(task, description=printable_line(message), completed=0, total=None)

    def tasks(done: int, total: int) -> None:
        bar.update(task, completed=done, total=max(total, 1))

    with bar:
        yield AuditProgress(phase, tasks)
