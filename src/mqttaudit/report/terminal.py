"""A probe run in a terminal: the summary, one line per failure and per lenient case cut to the terminal's width,
and the progress shown while cases run (a rich progress bar on a terminal, one mark per case otherwise).

Every text from the peer goes through :func:`printable`: a broker's topic may hold ESC or a newline.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from typing import IO, Any

from ..probe.runner import FAIL, LENIENT, VERDICTS, CaseResult, ProbeRun
from ..probe.violations import OtherViolation, not_counted, other_violations
from ..spec import Catalogue
from .evidence import printable
from .statements import default_catalogue

#: The width used when the output is not a terminal.
DEFAULT_WIDTH = 100
ELLIPSIS = "…"
MARKS = {"pass": ".", "fail": "F", "lenient": "L", "inconclusive": "?", "not-applicable": "-"}


def colour_allowed(stream: IO[str]) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    return not os.environ.get("NO_COLOR") and stream.isatty()


def terminal_width(stream: IO[str]) -> int:
    """The terminal's width, or :data:`DEFAULT_WIDTH` when ``stream`` is not a terminal."""
    if not stream.isatty():
        return DEFAULT_WIDTH
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def fit(text: str, width: int) -> str:
    """``text`` made printable and cut to ``width`` characters, the cut marked with an ellipsis."""
    line = printable(text)
    return line if len(line) <= width else line[: max(0, width - 1)] + ELLIPSIS


def fail_line(result: CaseResult, width: int) -> str:
    """``FAIL case-id [statements]: detail``, each statement id once, cut to ``width``."""
    details = list(dict.fromkeys(_said(finding.kind, finding.detail) for finding in result.findings))
    details = details or [result.reason]
    return fit(f"FAIL {result.case.id} [{', '.join(result.cited)}]: {'; '.join(details)}", width)


def lenient_line(result: CaseResult, width: int) -> str:
    """``LENIENT case-id [rules the accepted packets broke] of MQTT <version>: detail``, cut to ``width``: not a
    failure (``--strict`` makes it fail the run)."""
    rules = ", ".join(dict.fromkeys(row.rule for row in result.lenient))
    return fit(f"LENIENT {result.case.id} [{rules} of MQTT {result.case.protocol.value}]: {result.reason}", width)


def _said(kind: str, detail: str) -> str:
    return f"{kind}: {detail}" if kind else detail


def violation_line(violation: OtherViolation, width: int) -> str:
    """``VIOLATION rule (level) by the server: N acts in M cases (first in case): detail``, cut to ``width``; one
    that does not fail the run starts ``violation`` and says why."""
    what = "owed answer" if violation.owed else "act"
    acts = f"{violation.acts:,} {what}{'s' if violation.acts != 1 else ''}"
    cases = f"{len(violation.cases):,} case{'s' if len(violation.cases) != 1 else ''}"
    why = not_counted(violation)
    known = f", {why}" if why else ""
    mark = "VIOLATION" if violation.counted else "violation"
    return fit(
        f"{mark} {violation.rule} ({violation.level}{known}) by the {violation.first.side.value}: {acts} in "
        f"{cases}, no case targets it (first in {violation.first_case}): {violation.first.detail}",
        width,
    )


def summary_lines(run: ProbeRun, width: int, catalogue: Catalogue | None = None) -> list[str]:
    """The run in a few lines: counts, why it is incomplete, the failures (new, known, fixed against a baseline),
    the lenient cases (apart: not failures unless the run is strict), then the rules the broker broke outside the
    cases' statements."""
    counts = ", ".join(f"{run.count(v)} {v}" for v in VERDICTS)
    lines = [fit(f"{run.target.url}: {len(run.results)} cases in {run.duration:.1f} s: {counts}", width)]
    for version, why in run.unspoken.items():
        not_run = sum(1 for result in run.results if result.case.protocol.value == version)
        lines.append(fit(f"not applicable: {why} (its {not_run} MQTT {version} cases)", width))
    if run.incomplete:
        lines.append(fit(f"INCOMPLETE: {run.incomplete}", width))
    if run.broker_down and run.broker_down != run.incomplete:
        lines.append(fit(f"broker down: {run.broker_down}", width))
    violations = [violation_line(v, width) for v in other_violations(run, default_catalogue(catalogue))]
    return lines + _failure_lines(run, width) + _lenient_lines(run, width) + violations


def _lenient_lines(run: ProbeRun, width: int) -> list[str]:
    lenient = [result for result in run.results if result.verdict == LENIENT]
    if not lenient:
        return []
    how = "they fail this run (--strict)" if run.strict else "not failures (--strict makes them fail the run)"
    title = f"lenient: {len(lenient)} malformed packet(s) or Protocol Error(s) accepted, not bound to detect; {how}"
    return [fit(title, width), *(lenient_line(result, width) for result in lenient)]


def _failure_lines(run: ProbeRun, width: int) -> list[str]:
    lines: list[str] = []
    failed = [result for result in run.results if result.verdict == FAIL]
    if run.baseline is None:
        return [fail_line(result, width) for result in failed]
    by_id = {result.case.id: result for result in failed}
    diff = run.baseline
    lines.append(
        fit(
            f"against the baseline: {len(diff.new)} new failures, {len(diff.known)} known, {len(diff.fixed)} fixed "
            f"({diff.source})",
            width,
        )
    )
    lines += _group("new failures:", (fail_line(by_id[case_id], width) for case_id in diff.new), width)
    lines += _group("fixed since the baseline:", (fit(f"FIXED {case_id}", width) for case_id in diff.fixed), width)
    lines += _group(
        "known failures (in the baseline; they do not fail the run):",
        (fail_line(by_id[case_id], width) for case_id in diff.known),
        width,
    )
    return lines


def _group(title: str, lines: Iterable[str], width: int) -> list[str]:
    shown = list(lines)
    return [fit(title, width), *shown] if shown else []


class MarksProgress:
    """One mark per finished case on ``stream`` (``.`` pass, ``F`` fail, ``L`` lenient, ``?`` inconclusive, ``-``
    n/a)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._any = False

    def started(self, total: int) -> None:
        pass

    def finished(self, result: CaseResult) -> None:
        self._stream.write(MARKS.get(result.verdict, "!"))
        self._stream.flush()
        self._any = True

    def close(self) -> None:
        if self._any:
            self._stream.write("\n")
            self._stream.flush()


class BarProgress:
    """A rich progress bar: cases done of the total, failures so far, time left."""

    def __init__(self, stream: IO[str], label: str) -> None:
        from rich.console import Console

        self._console = Console(file=stream, no_color=not colour_allowed(stream), highlight=False)
        self._label = printable(label)
        self._progress: Any = None
        self._task: Any = None
        self._fails = 0
        self._lenient = 0

    def started(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("cases, {task.fields[fails]} failed, {task.fields[lenient]} lenient"),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        self._task = self._progress.add_task(self._label, total=total, fails=0, lenient=0)
        self._progress.start()

    def finished(self, result: CaseResult) -> None:
        if self._progress is None:
            return
        self._fails += result.verdict == FAIL
        self._lenient += result.verdict == LENIENT
        self._progress.update(self._task, advance=1, fails=self._fails, lenient=self._lenient)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def progress_for(stream: IO[str] | None, label: str) -> MarksProgress | BarProgress | None:
    """A progress bar on a terminal, marks otherwise; None for ``stream`` None (quiet)."""
    if stream is None:
        return None
    return BarProgress(stream, label) if stream.isatty() else MarksProgress(stream)
