"""``findings.json``: a probe run as plain data, every case with its verdict, level and evidence."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..probe.runner import VERDICTS, ProbeRun
from ..probe.violations import other_violations
from ..spec import Catalogue
from .statements import default_catalogue, strongest_level


def probe_run_to_json(run: ProbeRun, catalogue: Catalogue | None = None) -> dict[str, Any]:
    """The run as JSON-ready data; ``level`` is the strongest level among a case's statements. ``incomplete`` says
    why the run does not judge the broker as a whole (None when it does); ``error`` marks a case that could not be
    judged because the target was unreachable, refused the prober or went down; ``baseline`` lists the case ids
    of new, known and fixed failures against a previous run (None without one); ``violations`` groups by rule what
    the broker broke outside the statements of the cases that saw it (each act counted, each case named)."""
    rules = default_catalogue(catalogue)
    return {
        "mqttaudit_version": __version__,
        "target": run.target.url,
        "started": run.started,
        "duration_s": round(run.duration, 3),
        "broker_down": run.broker_down,
        "incomplete": run.incomplete,
        "baseline": None if run.baseline is None else run.baseline.to_json(),
        "summary": {verdict: run.count(verdict) for verdict in VERDICTS},
        "violations": [violation.to_json() for violation in other_violations(run, rules)],
        "results": [
            {
                "case": result.case.id,
                "title": result.case.title,
                "statements": list(result.case.statements),
                "verdict": result.verdict,
                "reason": result.reason,
                "error": result.error,
                "level": strongest_level(result.cited, rules),
                "evidence": result.evidence(),
            }
            for result in run.results
        ],
    }
