"""``findings.json``: a probe run as plain data, every case with its verdict, level and evidence."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..judge import Leniency
from ..probe.runner import VERDICTS, CaseResult, ProbeRun, leniency_to_dict
from ..probe.violations import other_violations
from ..spec import Catalogue
from .reproducer import Reproducer, reproducers
from .statements import case_catalogue, default_catalogue, rule_json, strongest_level


def probe_run_to_json(run: ProbeRun, catalogue: Catalogue | None = None) -> dict[str, Any]:
    """The run as JSON-ready data. Each result names the ``protocol`` its case spoke and gives its ``statements``
    as ids and as ``rules`` (each id with the section, level, the side it binds and the summary of that version's
    catalogue); ``level`` is the strongest level among them. ``incomplete`` says why the run does not judge the
    broker as a whole (None when it does); ``error`` marks a case that could not be judged because the target was
    unreachable, refused the prober or went down; ``baseline`` lists the case ids of new, known and fixed failures
    against a previous run (None without one); ``violations`` groups by rule what the broker broke outside the
    statements of the cases that saw it (each act counted, each case named). A ``lenient`` result lists in
    ``lenient`` what the broker accepted and was not bound to detect: the rule the packet broke (with its version's
    text and whom it binds), the receiver, and ``basis``, why that receiver was not bound; ``strict`` says whether
    such a case fails the run; ``not_spoken`` the protocol versions the broker does not speak, with why (their cases
    are not applicable); ``provokes`` the Client's statements a case's stimulus breaks on purpose (never the
    broker's to fail). A case that carries a finding (failing, lenient, or where a violation outside the cases'
    statements was first seen) has a ``reproducer``: ``script``, the path of its standalone Python script in the
    report folder, ``shell``, a one-liner (None when the case needs the script), ``shell_tools``, what the one-liner
    runs, ``password_from``, the environment variable the script takes a password from, and ``limits``, what the
    replay cannot reproduce; None for the other cases."""
    rules = default_catalogue(catalogue)
    violations = other_violations(run, rules)
    found = reproducers(run, [violation.first_case for violation in violations])
    return {
        "mqttaudit_version": __version__,
        "target": run.target.url,
        "started": run.started,
        "duration_s": round(run.duration, 3),
        "broker_down": run.broker_down,
        "incomplete": run.incomplete,
        "strict": run.strict,
        "not_spoken": dict(run.unspoken),
        "baseline": None if run.baseline is None else run.baseline.to_json(),
        "summary": {verdict: run.count(verdict) for verdict in VERDICTS},
        "violations": [violation.to_json() for violation in violations],
        "results": [
            _result(result, case_catalogue(result.case, rules), found.get(result.case.id)) for result in run.results
        ],
    }


def _result(result: CaseResult, rules: Catalogue, reproducer: Reproducer | None = None) -> dict[str, Any]:
    return {
        "case": result.case.id,
        "title": result.case.title,
        "protocol": result.case.protocol.value,
        "statements": list(result.case.statements),
        "provokes": list(result.case.provokes),
        "rules": [rule_json(statement, rules) for statement in result.case.statements],
        "verdict": result.verdict,
        "reason": result.reason,
        "error": result.error,
        "level": strongest_level(result.cited, rules),
        "lenient": [leniency_json(row, rules) for row in result.lenient],
        "evidence": result.evidence(),
        "reproducer": None if reproducer is None else reproducer.to_json(),
    }


def leniency_json(row: Leniency, rules: Catalogue) -> dict[str, Any]:
    """One leniency: the rule the accepted packet broke (``statement``: its version's section, level, whom it binds,
    summary), the receiver that accepted it (``side``), what happened and why the receiver was not bound."""
    return {**leniency_to_dict(row), "statement": rule_json(row.rule, rules)}
