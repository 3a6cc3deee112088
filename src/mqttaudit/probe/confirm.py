"""Timing-dependent failures are confirmed before they are reported: a case flagged ``timing`` that failed is run
once more, alone, after the main run; it stays a failure only when it fails again. A quiet one (``Case.quiet``:
Keep Alive) ran alone in the main run already, with nothing beside it: that run's failure is its lone run's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from .case import Case
from .runner import FAIL, INCONCLUSIVE, PASS, CaseResult

UNSTABLE = "unstable: failed once, passed on a second run"

Rerun = Callable[[Case], Awaitable[CaseResult]]


async def confirm_timing_failures(results: Sequence[CaseResult], rerun: Rerun) -> list[CaseResult]:
    """``results`` with each failure of a timing case replaced by what a second, lone run of it says: the first
    result (and its evidence) when it fails again, else ``inconclusive`` with the reason (the first run's evidence
    and findings kept, so the report still shows what was seen). Reruns go one at a time, in order."""
    confirmed: list[CaseResult] = []
    for result in results:
        if result.verdict != FAIL or not result.case.timing or result.case.quiet:
            confirmed.append(result)
            continue
        second = await rerun(result.case)
        if second.verdict == FAIL:
            result.reason = f"{result.reason} (failed again on a second run)"
            confirmed.append(result)
            continue
        why = UNSTABLE if second.verdict == PASS else f"unstable: failed once, {second.verdict} on a second run"
        if second.verdict != PASS and second.reason:
            why += f" ({second.reason})"
        result.verdict = INCONCLUSIVE
        result.reason = f"{why}; first run: {result.reason}"
        result.statements = {statement: INCONCLUSIVE for statement in result.statements}
        confirmed.append(result)
    return confirmed
