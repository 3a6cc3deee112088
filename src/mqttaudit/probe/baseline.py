"""A previous run's ``findings.json`` as a baseline: which failures are new, which are known, which are fixed.

CI runs fail only on new failures; known ones are still listed, so they stay in sight.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import option_files
from ..option_files import OptionFileError, read_capped

FAIL = "fail"
PASS = "pass"
LENIENT = "lenient"


class BaselineError(ValueError):
    """The baseline file cannot be read, or is not a findings.json; the message names the file and why."""


@dataclass(frozen=True)
class Baseline:
    """The verdict of every case of a previous run, by case id."""

    source: str
    verdicts: Mapping[str, str]
    #: The rules its run saw the broker break outside the statements of its cases.
    violations: frozenset[str] = frozenset()

    @property
    def failed(self) -> frozenset[str]:
        return frozenset(case_id for case_id, verdict in self.verdicts.items() if verdict == FAIL)


@dataclass(frozen=True)
class BaselineDiff:
    """Case ids, each list in run order: failing now and not in the baseline's failures (``new``), failing in
    both (``known``), failed in the baseline and passing now (``fixed``)."""

    source: str
    new: tuple[str, ...]
    known: tuple[str, ...]
    fixed: tuple[str, ...]
    #: The rules the baseline's run saw broken outside its cases' statements: seen again, they do not fail the run.
    violations: frozenset[str] = frozenset()
    #: Case ids lenient now that were lenient (or failed) in the baseline too: they do not fail a ``--strict`` run.
    known_lenient: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.source,
            "new": list(self.new),
            "known": list(self.known),
            "fixed": list(self.fixed),
            "known_violations": sorted(self.violations),
            "known_lenient": list(self.known_lenient),
        }


def load_baseline(path: Path | str) -> Baseline:
    """Reads a findings.json written by ``mqttaudit probe``; :class:`BaselineError` when it is not one."""
    source = str(path)
    try:
        text = read_capped(path, option="--baseline", cap=option_files.BASELINE, what="the baseline").decode("utf-8")
    except OptionFileError as exc:
        raise BaselineError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"cannot read the baseline {source}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"the baseline {source} is not JSON: {exc}") from exc
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise BaselineError(f"the baseline {source} is not a findings.json of mqttaudit probe (no 'results' list)")
    verdicts: dict[str, str] = {}
    for index, row in enumerate(results):
        if not (isinstance(row, dict) and isinstance(row.get("case"), str) and isinstance(row.get("verdict"), str)):
            raise BaselineError(f"the baseline {source} has a result without a case and a verdict (results[{index}])")
        verdicts[row["case"]] = row["verdict"]
    return Baseline(source, verdicts, _violations(data))


def _violations(data: dict[str, object]) -> frozenset[str]:
    """The rules a findings.json shows the server breaking outside its cases' statements: its ``violations``, and
    (for one written before that list) each result's ``other_findings``."""
    rules: set[str] = set()
    listed, results = data.get("violations"), data.get("results")
    rows = list(listed) if isinstance(listed, list) else []
    for result in results if isinstance(results, list) else []:
        evidence = result.get("evidence") if isinstance(result, dict) else None
        other = evidence.get("other_findings") if isinstance(evidence, dict) else None
        rows += other if isinstance(other, list) else []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("rule"), str) and row.get("side", "server") == "server":
            rules.add(row["rule"])
    return frozenset(rules)


def compare(baseline: Baseline, verdicts: Iterable[tuple[str, str]]) -> BaselineDiff:
    """``verdicts``: (case id, verdict) of the run now, in run order."""
    now = list(verdicts)
    failed_before = baseline.failed
    return BaselineDiff(
        baseline.source,
        new=tuple(case_id for case_id, verdict in now if verdict == FAIL and case_id not in failed_before),
        known=tuple(case_id for case_id, verdict in now if verdict == FAIL and case_id in failed_before),
        fixed=tuple(case_id for case_id, verdict in now if verdict == PASS and case_id in failed_before),
        violations=baseline.violations,
        known_lenient=tuple(
            case_id
            for case_id, verdict in now
            if verdict == LENIENT and baseline.verdicts.get(case_id) in (LENIENT, FAIL)
        ),
    )
