"""``mqttaudit probe`` and ``mqttaudit matrix``: the case library against live brokers, with reports; ``probe``
also runs the AMQP 0-9-1 routing suite against an ``amqp://`` target."""

from __future__ import annotations

import asyncio
import fnmatch
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
from mqttaudit.probe.case import CASES, Case, Target
from mqttaudit.probe.runner import FAIL, VERDICTS, CaseResult, ProbeRun, run_probe
from mqttaudit.spec import load_catalogue

LEVEL_ORDER = {"MUST": 0, "SHOULD": 1, "MAY": 2}


def select_cases(patterns: str | None, suite: str | None = None) -> list[Case]:
    """Cases whose id, or one of whose statements, matches one of the comma-separated glob ``patterns``, and
    whose id starts with ``suite/`` when a suite is given."""
    cases = [c for c in CASES.values() if suite is None or c.id.startswith(f"{suite}/")]
    if not patterns:
        return cases
    globs = [p.strip() for p in patterns.split(",") if p.strip()]
    return [
        c
        for c in cases
        if any(fnmatch.fnmatchcase(c.id, g) or any(fnmatch.fnmatchcase(s, g) for s in c.statements) for g in globs)
    ]


def case_level(case: Case) -> str:
    """The strongest level among the statements a case targets."""
    catalogue = load_catalogue("3.1.1")
    levels = [catalogue[s].level for s in case.statements if s in catalogue]
    return min(levels, key=lambda level: LEVEL_ORDER.get(level, 9)) if levels else "MUST"


def probe_coverage() -> dict[str, list[str]]:
    """Statement id -> the cases that target it."""
    coverage: dict[str, list[str]] = {}
    for c in CASES.values():
        for statement in c.statements:
            coverage.setdefault(statement, []).append(c.id)
    return coverage


def run_cases(target: Target, selected: Sequence[Case], timeout: float, concurrency: int, quiet: bool) -> ProbeRun:
    progress = _progress(quiet)
    run = asyncio.run(run_probe(target, selected, timeout=timeout, concurrency=concurrency, progress=progress))
    if not quiet:
        click.echo("", err=True)
    return run


def _progress(quiet: bool) -> Callable[[CaseResult], None]:
    marks = {"pass": ".", "fail": "F", "inconclusive": "?", "not-applicable": "-"}

    def progress(result: CaseResult) -> None:
        if not quiet:
            click.echo(marks.get(result.verdict, "!"), nl=False, err=True)

    return progress


def summarize(run: ProbeRun) -> str:
    counts = ", ".join(f"{run.count(v)} {v}" for v in VERDICTS)
    lines = [f"{run.target.url}: {len(run.results)} cases in {run.duration:.1f} s: {counts}"]
    if run.broker_down:
        lines.append(f"  broker down: {run.broker_down}")
    lines.extend(
        f"  FAIL {result.case.id} [{', '.join(result.case.statements)}]: {result.reason}"
        for result in run.results
        if result.verdict == FAIL
    )
    return "\n".join(lines)


def must_failures(run: ProbeRun) -> list[CaseResult]:
    return [r for r in run.results if r.verdict == FAIL and case_level(r.case) == "MUST"]


def _parse_target(value: str) -> Target:
    try:
        return Target.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.command("probe")
@click.argument("target", required=False)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("mqttaudit-out"))
@click.option("--cases", "patterns", help="Comma-separated globs over case ids or statement ids.")
@click.option(
    "--suite",
    help="Only the cases whose id starts with SUITE/ (routing, malformed, ...). amqp:// targets have one suite, "
    "routing (the default there): AMQP 0-9-1 topic exchange routing.",
)
@click.option("--timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Seconds per wait.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--list", "list_only", is_flag=True, help="List the cases and their statements; probe nothing.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def probe_command(
    target: str | None,
    out_dir: Path,
    patterns: str | None,
    suite: str | None,
    timeout: float,
    concurrency: int,
    list_only: bool,
    output_format: str,
) -> int:
    """Probe the broker at TARGET (mqtt://HOST:PORT, or amqp://USER:PASS@HOST:PORT/VHOST for the AMQP routing
    suite) and write findings.json, findings.md and junit.xml to --out. Exit status 1 when a MUST-level case
    fails (any failing case, for amqp://)."""
    if target is not None and target.startswith("amqp://"):
        return _probe_amqp(target, out_dir, patterns, suite, timeout, list_only, output_format)
    selected = select_cases(patterns, suite)
    if list_only:
        _list(selected, output_format)
        return 0
    if target is None:
        raise click.UsageError("a TARGET (mqtt://HOST:PORT) is needed, or --list")
    if not selected:
        raise click.UsageError(f"no case matches {patterns!r}" + (f" in suite {suite!r}" if suite else ""))
    from mqttaudit.report import write_probe_reports
    from mqttaudit.report.probe_json import probe_run_to_json

    run = run_cases(_parse_target(target), selected, timeout, concurrency, quiet=output_format == "json")
    written = write_probe_reports(run, out_dir)
    if output_format == "json":
        click.echo(json.dumps(probe_run_to_json(run), indent=2))
    else:
        click.echo(summarize(run))
        click.echo(f"reports: {', '.join(str(path) for path in written)}")
    return 1 if must_failures(run) else 0


def _probe_amqp(
    target: str,
    out_dir: Path,
    patterns: str | None,
    suite: str | None,
    timeout: float,
    list_only: bool,
    output_format: str,
) -> int:
    """The AMQP 0-9-1 routing suite against ``target``, reported like the MQTT cases; exit status 1 on a failure."""
    from mqttaudit.probe.amqp import AMQP_CASES, AMQP_RULES, AmqpTarget, run_amqp_routing
    from mqttaudit.report import write_probe_reports
    from mqttaudit.report.probe_json import probe_run_to_json

    if suite not in (None, "routing"):
        raise click.UsageError(f"amqp:// targets have one suite, 'routing', not {suite!r}")
    if patterns:
        raise click.UsageError("--cases selects MQTT cases; an amqp:// target runs the whole routing suite")
    if list_only:
        _list([routing.case for routing in AMQP_CASES.values()], output_format)
        return 0
    try:
        parsed = AmqpTarget.parse(target)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    quiet = output_format == "json"
    run = run_amqp_routing(parsed, timeout, progress=_progress(quiet))
    if not quiet:
        click.echo("", err=True)
    written = write_probe_reports(run, out_dir, AMQP_RULES)
    if quiet:
        click.echo(json.dumps(probe_run_to_json(run, AMQP_RULES), indent=2))
    else:
        click.echo(summarize(run))
        click.echo(f"reports: {', '.join(str(path) for path in written)}")
    return 1 if run.count(FAIL) else 0


def _list(selected: Sequence[Case], output_format: str) -> None:
    if output_format == "json":
        rows = [
            {
                "id": c.id,
                "statements": list(c.statements),
                "title": c.title,
                "level": case_level(c),
                "stimulus": c.stimulus,
                "expected": c.expected,
            }
            for c in selected
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    width = max((len(c.id) for c in selected), default=10)
    for c in selected:
        click.echo(f"{c.id:<{width}}  {', '.join(c.statements)}")
    numbered = {s for c in selected for s in c.statements if s.rsplit("-", 1)[-1].isdigit()}
    click.echo(f"\n{len(selected)} cases covering {len(numbered)} numbered statements")


@click.command("matrix")
@click.argument("targets", nargs=-1, required=True)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("mqttaudit-matrix"))
@click.option("--cases", "patterns", help="Comma-separated globs over case ids or statement ids.")
@click.option("--timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
def matrix_command(
    targets: tuple[str, ...], out_dir: Path, patterns: str | None, timeout: float, concurrency: int
) -> int:
    """Probe several brokers (TARGET is mqtt://HOST:PORT or NAME=mqtt://HOST:PORT) and write a statements x
    brokers matrix (matrix.md, matrix.html) plus each broker's own reports under --out."""
    from mqttaudit.report import write_matrix, write_probe_reports

    selected = select_cases(patterns)
    if not selected:
        raise click.UsageError(f"no case matches {patterns!r}")
    runs: list[tuple[str, ProbeRun]] = []
    for spec in targets:
        name, _, url = spec.rpartition("=") if "=" in spec else ("", "", spec)
        target = _parse_target(url)
        label = name or f"{target.host}:{target.port}"
        run = run_cases(target, selected, timeout, concurrency, quiet=False)
        write_probe_reports(run, out_dir / _safe(label))
        click.echo(summarize(run))
        runs.append((label, run))
    written = write_matrix(runs, out_dir)
    click.echo(f"matrix: {', '.join(str(path) for path in written)}")
    return 1 if any(must_failures(run) for _, run in runs) else 0


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
