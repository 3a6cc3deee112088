"""What a probe run amounts to: whether it judged enough of the broker, which failures count, and the exit status
the command line returns for it (:mod:`mqttaudit.status`).

The rule: a case the prober itself failed on (a bug of mqttaudit, :attr:`CaseResult.crash`) makes exit status 3,
internal error, whatever else the run found: the reports are written, with every other case judged, but the run
cannot say the broker conforms or what it broke in that case. Otherwise a MUST-level failure that the baseline
does not already know makes exit status 1, even in an incomplete run (it is a real finding), and so does a
MUST-level rule the broker broke on any connection of the run although no case targets it (a malformed CONNACK in
every case of a selection about PINGRESP); otherwise an incomplete run makes 4; otherwise 0. A ``lenient`` case (a
malformed packet or Protocol Error accepted that the broker was not bound to detect) is no failure: it makes 1 only
in a strict run (``--strict``, or ``strict = true`` in the broker profile), and then only when the baseline does not
already know it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..spec import Catalogue
from ..status import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_OK
from .runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, PASS, CaseResult, ProbeRun
from .statements import case_level
from .violations import OtherViolation, other_violations

#: The share of inconclusive cases above which a run is incomplete, unless told otherwise.
DEFAULT_MAX_INCONCLUSIVE = 0.10


def parse_share(text: str | float) -> float:
    """``"10%"``, ``"0.1"`` or ``0.1`` -> 0.1; ValueError outside 0..100 % or for anything else."""
    if isinstance(text, float | int):
        share = float(text)
    else:
        value = text.strip()
        try:
            share = float(value[:-1]) / 100 if value.endswith("%") else float(value)
        except ValueError:
            raise ValueError(f"not a fraction or a percentage: {text!r}") from None
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a share of the cases is between 0 and 1 (0% and 100%), not {text!r}")
    return share


def too_inconclusive(results: Sequence[CaseResult], limit: float) -> str | None:
    """Why the run is incomplete when more than ``limit`` of its cases are inconclusive, else None."""
    undecided = sum(1 for result in results if result.verdict == INCONCLUSIVE)
    if not results or undecided / len(results) <= limit:
        return None
    return (
        f"{undecided} of {len(results)} cases inconclusive ({undecided / len(results):.0%}), "
        f"more than the {limit:.0%} allowed (--max-inconclusive)"
    )


def nothing_judged(results: Sequence[CaseResult]) -> str | None:
    """Why the run is incomplete when no case passed, failed or was lenient (all not applicable or inconclusive),
    else None: a run that judged nothing is never a pass, whatever share --max-inconclusive allows."""
    if any(result.verdict in (PASS, FAIL, LENIENT) for result in results):
        return None
    counts = {verdict: sum(1 for r in results if r.verdict == verdict) for verdict in (NOT_APPLICABLE, INCONCLUSIVE)}
    shown = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
    return f"no case could be judged ({shown or 'no case ran'})"


def is_must(result: CaseResult, catalogue: Catalogue) -> bool:
    """Whether the strongest level of the statements the result speaks of (the case's, and those an act of the
    broker broke during it), in the catalogue of the version the case speaks, is MUST (an uncatalogued statement
    counts as MUST)."""
    return (case_level(result.case, catalogue, result.cited) or "MUST") == "MUST"


def failures(run: ProbeRun) -> list[CaseResult]:
    return [result for result in run.results if result.verdict == FAIL]


def counted_failures(run: ProbeRun, catalogue: Catalogue) -> list[CaseResult]:
    """The failures that fail the run: MUST-level ones that the baseline (when there is one) does not know."""
    known = set(run.baseline.known) if run.baseline is not None else set()
    return [result for result in failures(run) if is_must(result, catalogue) and result.case.id not in known]


def counted_violations(run: ProbeRun, catalogue: Catalogue) -> list[OtherViolation]:
    """The other violations that fail the run: MUST-level acts that the baseline (when there is one) does not know."""
    return [violation for violation in other_violations(run, catalogue) if violation.counted]


def lenient_cases(run: ProbeRun) -> list[CaseResult]:
    return [result for result in run.results if result.verdict == LENIENT]


def counted_leniencies(run: ProbeRun) -> list[CaseResult]:
    """The lenient cases that fail the run: none unless it is strict; then those the baseline (when there is one)
    does not know as lenient or failing."""
    if not run.strict:
        return []
    known = set(run.baseline.known_lenient) if run.baseline is not None else set()
    return [result for result in lenient_cases(run) if result.case.id not in known]


def exit_status(run: ProbeRun, catalogue: Catalogue) -> int:
    if any(result.crash is not None for result in run.results):
        return EXIT_INTERNAL
    if counted_failures(run, catalogue) or counted_violations(run, catalogue) or counted_leniencies(run):
        return EXIT_FINDINGS
    return EXIT_INCOMPLETE if run.incomplete else EXIT_OK
