"""``mqttaudit probe`` and ``mqttaudit matrix``: the case library against live brokers, with reports; ``probe``
also runs the AMQP 0-9-1 routing suite against an ``amqp://`` target. Both are :func:`mqttaudit.probe.run` plus
printing: selection, preflight, confirmation of timing cases, baseline and exit status live in the library."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from mqttaudit.codec import ProtocolVersion
from mqttaudit.probe.api import ProbeResult, ProbeUsageError, run
from mqttaudit.probe.case import CASES, Case, Target
from mqttaudit.probe.outcome import parse_share
from mqttaudit.probe.profile import BrokerProfile, ProfileError, load_profile
from mqttaudit.probe.runner import DEFAULT_CONCURRENCY, ProbeRun, crashes, run_probe
from mqttaudit.probe.selection import NoCaseSelected, parse_protocol
from mqttaudit.probe.selection import select_cases as select_from_library
from mqttaudit.probe.statements import case_level
from mqttaudit.probe.target_url import shown_url
from mqttaudit.probe.targets import is_amqp, parse_target
from mqttaudit.probe.transport import TlsOptions
from mqttaudit.report import MATRIX_REPORTS, PROBE_REPORTS
from mqttaudit.report.evidence import printable
from mqttaudit.report.output_dir import OutputDirError, check_output_dir, staged_output
from mqttaudit.report.terminal import colour_allowed, progress_for, summary_lines, terminal_width
from mqttaudit.spec import load_catalogue
from mqttaudit.status import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_OK

from .connection import Connection, connection_from_options, connection_options, split_spec
from .exits import CannotRun, exit_status_help
from .options import format_option, output_options

_FINDINGS = "findings: a MUST-level case failed, or (with --strict) a case was lenient"
_USAGE = (
    "usage error: bad arguments, a selection that matches nothing, an unreadable baseline, an --out folder of "
    "other files"
)
_INCOMPLETE = (
    "incomplete: the target was unreachable or refused us, went down, or more cases than --max-inconclusive "
    "allows ended inconclusive"
)
_CASES_HELP = (
    "Globs over case ids or statement ids, comma-separated or repeated; '!GLOB' leaves cases out "
    "(e.g. 'malformed/*,!malformed/pingreq-*')."
)
_SKIP_HELP = "Globs of cases to leave out, comma-separated or repeated (e.g. 'malformed/pingreq-*')."
_STRICT_HELP = (
    "Hold the broker to detecting every malformed packet and Protocol Error: a lenient case (one the broker accepted "
    "and was not bound to detect, MQTT 5.0 section 4.13.1) fails the run (exit status 1) like a MUST failure. The "
    "profile key strict = true does the same."
)
_PROTOCOL_HELP = "The MQTT version whose cases run: 3.1.1, 5 (or 5.0), or all.  [default: all]"
_PROFILE_HELP = (
    "A TOML file declaring what the broker's CONNACK cannot (receive_maximum = 2, authentication_methods = [], "
    "retain_available = false, ...) and, in an [authentication] table, one enhanced authentication exchange the "
    "broker accepts (method, and data as hex strings: the CONNECT's, then each answer to an AUTH 0x18); it "
    "overrides the CONNACK, and a case that needs an undeclared setting is not applicable."
)


def select_cases(patterns: str | Sequence[str] | None, suite: str | None = None) -> list[Case]:
    """The library's selection, or no case when nothing matches (for callers that report that themselves)."""
    try:
        return select_from_library(patterns, suite=suite)
    except NoCaseSelected:
        return []


def probe_coverage(protocol: ProtocolVersion = ProtocolVersion.V3_1_1) -> dict[str, list[str]]:
    """Statement id of ``protocol`` -> the cases of that version that target it."""
    coverage: dict[str, list[str]] = {}
    for c in CASES.values():
        if c.protocol is not protocol:
            continue
        for statement in c.statements:
            coverage.setdefault(statement, []).append(c.id)
    return coverage


def run_cases(target: Target, selected: Sequence[Case], timeout: float, concurrency: int, quiet: bool) -> ProbeRun:
    """The cases alone against a target known to be up (the demo's broker): no preflight, no baseline."""
    progress = None if quiet else progress_for(sys.stderr, target.url)
    if progress is not None:
        progress.started(len(selected))
    try:
        return asyncio.run(
            run_probe(
                target,
                selected,
                timeout=timeout,
                concurrency=concurrency,
                progress=None if progress is None else progress.finished,
            )
        )
    finally:
        if progress is not None:
            progress.close()


def summarize(run: ProbeRun) -> str:
    return "\n".join(summary_lines(run, terminal_width(sys.stdout)))


def _share(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_share(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _protocol(ctx: click.Context, param: click.Parameter, value: str) -> ProtocolVersion | None:
    try:
        return parse_protocol(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


def _profile(ctx: click.Context, param: click.Parameter, value: Path | None) -> BrokerProfile | None:
    try:
        return None if value is None else load_profile(value)
    except ProfileError as exc:
        raise click.BadParameter(printable(str(exc))) from exc


def _profiles(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, BrokerProfile]:
    """``--profile [LABEL=]FILE`` of ``matrix``: the profile of each labelled target, under ``""`` the one for the
    targets no labelled profile names."""
    found: dict[str, BrokerProfile] = {}
    for value in values:
        label, _, path = value.partition("=") if "=" in value else ("", "", value)
        if label in found:
            raise click.BadParameter(f"two profiles for {'target ' + repr(label) if label else 'every target'}")
        try:
            found[label] = load_profile(path)
        except ProfileError as exc:
            raise click.BadParameter(printable(str(exc))) from exc
    return found


def _probe(
    target: str,
    *,
    patterns: Sequence[str],
    skip: Sequence[str],
    suite: str | None,
    timeout: float,
    concurrency: int,
    max_inconclusive: float,
    baseline: Path | None,
    quiet: bool,
    protocol: ProtocolVersion | None = None,
    profile: BrokerProfile | None = None,
    connection: Connection | None = None,
    strict: bool = False,
) -> ProbeResult:
    """One library run, with progress on stderr unless ``quiet``; argument errors become usage errors."""
    progress = None if quiet else progress_for(sys.stderr, shown_url(target))
    try:
        return run(
            target,
            cases=list(patterns) or None,
            skip=list(skip) or None,
            suite=suite,
            timeout=timeout,
            concurrency=concurrency,
            max_inconclusive=max_inconclusive,
            baseline=baseline,
            progress=progress,
            protocol=protocol,
            profile=profile,
            tls=None if connection is None else _tls_for(target, connection),
            credentials=None if connection is None else connection.credentials,
            strict=strict,
        )
    except ProbeUsageError as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        if progress is not None:
            progress.close()


def _tls_for(url: str, connection: Connection) -> TlsOptions | None:
    """The TLS options for the target ``url``: a matrix gives them to its TLS targets only."""
    try:
        target = parse_target(url)
    except ValueError:
        return connection.tls  # the run reports the bad target
    return connection.tls if target.uses_tls else None


def _print_summary(result: ProbeResult) -> None:
    colour = colour_allowed(sys.stdout)
    styles = {"FAIL ": "red", "VIOLATION ": "red", "LENIENT ": "yellow", "INCOMPLETE": "yellow", "FIXED ": "green"}
    for line in summary_lines(result.run, terminal_width(sys.stdout), result.catalogue):
        style = next((fg for start, fg in styles.items() if line.startswith(start)), None) if colour else None
        click.echo(click.style(line, fg=style) if style else line, color=colour)


@click.command(
    "probe",
    epilog=exit_status_help(
        findings=f"{_FINDINGS} (with --baseline: one the baseline does not list); 1 wins over 4",
        usage=_USAGE,
        incomplete=_INCOMPLETE,
    ),
)
@click.argument("target", required=False)
@output_options("mqttaudit-out", "findings.json, findings.md, junit.xml, report.html and reproducers/")
@click.option("--cases", "patterns", multiple=True, help=_CASES_HELP)
@click.option("--skip", multiple=True, help=_SKIP_HELP)
@click.option(
    "--suite",
    help="Only the cases whose id starts with SUITE/ (routing, malformed, ...). amqp:// targets have one suite, "
    "routing (the default there): AMQP 0-9-1 topic exchange routing.",
)
@click.option("--timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Seconds per wait.")
@click.option("--concurrency", type=click.IntRange(min=1), default=DEFAULT_CONCURRENCY, show_default=True)
@click.option(
    "--max-inconclusive",
    default="10%",
    show_default=True,
    callback=_share,
    help="The share of the cases (0.1 or 10%) that may end inconclusive before the run counts as incomplete.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A previous findings.json: only failures not in it fail the run; new, fixed and known ones are listed.",
)
@click.option("--protocol", default="all", metavar="3.1.1|5|all", callback=_protocol, help=_PROTOCOL_HELP)
@click.option(
    "--profile",
    type=click.Path(dir_okay=False, path_type=Path),
    callback=_profile,
    help=_PROFILE_HELP,
)
@click.option("--strict", is_flag=True, help=_STRICT_HELP)
@click.option(
    "--list", "list_only", is_flag=True, help="List the cases, their protocol and their statements; probe nothing."
)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@connection_options
def probe_command(
    target: str | None,
    out_dir: Path,
    force: bool,
    patterns: tuple[str, ...],
    skip: tuple[str, ...],
    suite: str | None,
    timeout: float,
    concurrency: int,
    max_inconclusive: float,
    baseline: Path | None,
    protocol: ProtocolVersion | None,
    profile: BrokerProfile | None,
    strict: bool,
    list_only: bool,
    output_format: str,
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    insecure: bool,
    username: str | None,
    password_file: Path | None,
) -> int:
    """Probe the broker at TARGET (mqtt://[USER@]HOST[:PORT]; mqtts:// over TLS; ws://HOST[:PORT][/PATH] and wss://
    over WebSocket; or amqp[s]://USER:PASS@HOST:PORT/VHOST for the AMQP routing suite) and write findings.json,
    findings.md, junit.xml, report.html and a reproducer script per finding (reproducers/) to --out, also when the
    run is incomplete. A password comes from --password-file or
    $MQTTAUDIT_PASSWORD (or the URL) and is never shown.

    A target that cannot be reached or refuses the prober's CONNECT is reported in one line (exit status 4)
    after one connection attempt. A failure of a timing-dependent case (Keep Alive, Will) is run again, alone,
    and counts only when it fails again."""
    if list_only:
        _list(_listed(target, patterns, skip, suite, protocol), output_format)
        return EXIT_OK
    if target is None:
        raise click.UsageError("a TARGET (mqtt://HOST:PORT) is needed, or --list")
    connection = connection_from_options(
        [target],
        cafile=cafile,
        certfile=certfile,
        keyfile=keyfile,
        insecure=insecure,
        username=username,
        password_file=password_file,
        every_target=True,
    )
    _check_out(out_dir, force, PROBE_REPORTS)
    quiet = output_format == "json"
    result = _probe(
        target,
        patterns=patterns,
        skip=skip,
        suite=suite,
        timeout=timeout,
        concurrency=concurrency,
        max_inconclusive=max_inconclusive,
        baseline=baseline,
        quiet=quiet,
        protocol=protocol,
        profile=profile,
        connection=connection,
        strict=strict,
    )
    try:
        written = result.write_reports(out_dir, force=force)
    except OutputDirError as exc:  # the folder changed during the run: the user's files win over the reports
        raise CannotRun(printable(str(exc))) from None
    if result.refusal is not None:
        click.echo(printable(f"mqttaudit: {result.incomplete}"), err=True)
    if quiet:
        click.echo(json.dumps(result.to_json(), indent=2))
    elif result.refusal is None:
        _print_summary(result)
        click.echo(f"reports: {', '.join(str(path) for path in written)}")
    broken = crashes(result.results)
    if broken is not None:  # exit status 3: said on stderr too, where a script looks for an internal error
        click.echo(printable(f"mqttaudit: internal error: {broken} (findings.json names each exception)"), err=True)
    return result.exit_status


def _listed(
    target: str | None,
    patterns: Sequence[str],
    skip: Sequence[str],
    suite: str | None,
    protocol: ProtocolVersion | None = None,
) -> list[Case]:
    if target is not None and is_amqp(target):
        from mqttaudit.probe.api import amqp_selection

        try:
            return amqp_selection(list(patterns), list(skip), suite)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    try:
        return select_from_library(list(patterns), list(skip), suite=suite, protocol=protocol)
    except NoCaseSelected as exc:
        raise click.UsageError(str(exc)) from None


def _list(selected: Sequence[Case], output_format: str) -> None:
    if output_format == "json":
        rows = [
            {
                "id": c.id,
                "statements": list(c.statements),
                "title": c.title,
                "level": case_level(c) or "MUST",
                "stimulus": c.stimulus,
                "expected": c.expected,
                "timing": c.timing,
                "family": c.family_name,
                "protocol": c.protocol.value,
            }
            for c in selected
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    width = max((len(c.id) for c in selected), default=10)
    families: dict[str, list[Case]] = {}
    for c in selected:
        families.setdefault(c.family_name, []).append(c)
    for family, members in families.items():
        click.echo(f"{family} ({len(members)} case{'s' if len(members) != 1 else ''})")
        for c in members:
            click.echo(f"  {c.id:<{width}}  {c.protocol.value:<5}  {', '.join(c.statements)}")
    versions = {c.protocol: None for c in selected}  # in the library's order
    each = [
        f"{sum(c.protocol is v for c in selected)} MQTT {v.value} cases covering {_numbered(selected, v)} of its "
        "numbered statements"
        for v in versions
    ]
    click.echo(f"\n{len(selected)} cases in {len(families)} families: {'; '.join(each)}")


def _numbered(cases: Sequence[Case], version: ProtocolVersion) -> int:
    """How many numbered statements of ``version`` the cases of that version target."""
    catalogue = load_catalogue(version.value)
    targeted = {s for c in cases if c.protocol is version for s in c.statements}
    return sum(1 for s in targeted if s in catalogue and catalogue[s].origin == "statement")


@click.command(
    "matrix",
    epilog=exit_status_help(
        " (the worst over the brokers)",
        findings=f"{_FINDINGS}; 1 wins over 4",
        usage=_USAGE,
        incomplete=_INCOMPLETE,
    ),
)
@click.argument("targets", nargs=-1, required=True)
@output_options("mqttaudit-matrix", "matrix.md, matrix.html and each broker's reports")
@click.option("--cases", "patterns", multiple=True, help=_CASES_HELP)
@click.option("--skip", multiple=True, help=_SKIP_HELP)
@click.option("--timeout", type=click.FloatRange(min=0.05), default=2.0, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=DEFAULT_CONCURRENCY, show_default=True)
@click.option(
    "--max-inconclusive",
    default="10%",
    show_default=True,
    callback=_share,
    help="The share of the cases (0.1 or 10%) that may end inconclusive before a broker's run counts as incomplete.",
)
@click.option("--protocol", default="all", metavar="3.1.1|5|all", callback=_protocol, help=_PROTOCOL_HELP)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="[LABEL=]FILE",
    callback=_profiles,
    help="A broker profile (see `probe --help`) for the target labelled LABEL (its NAME, or HOST:PORT); repeated, "
    "one per target. Without LABEL= it is the profile of every target that has none of its own.",
)
@click.option("--strict", is_flag=True, help=_STRICT_HELP)
@format_option("the summary as one JSON document on standard output (progress and refusals stay on standard error).")
@click.option(
    "--only-differing",
    is_flag=True,
    help="matrix.md shows only the statements whose verdicts differ between the targets (matrix.html starts with "
    "its toggle of the same filter on).",
)
@connection_options
def matrix_command(
    targets: tuple[str, ...],
    out_dir: Path,
    force: bool,
    patterns: tuple[str, ...],
    skip: tuple[str, ...],
    timeout: float,
    concurrency: int,
    max_inconclusive: float,
    protocol: ProtocolVersion | None,
    profiles: dict[str, BrokerProfile],
    strict: bool,
    output_format: str,
    only_differing: bool,
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    insecure: bool,
    username: str | None,
    password_file: Path | None,
) -> int:
    """Probe several brokers (TARGET is mqtt://HOST:PORT or NAME=mqtt://HOST:PORT) and write a statements x
    brokers matrix (matrix.md, matrix.html) plus each broker's own reports under --out. Exit status 1 when any
    broker fails a MUST-level case (or, with --strict, is lenient in one), else 4 when any run is incomplete. TARGET
    may be mqtts://, ws:// or wss:// too; the TLS options apply to every TLS target, --username and the password to
    every target whose URL names no user."""
    from mqttaudit.report import write_matrix, write_probe_reports  # the reports, loaded only when needed

    try:
        select_from_library(list(patterns), list(skip), protocol=protocol)
        labels = [_label(spec) for spec in targets]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    connection = connection_from_options(
        targets,
        cafile=cafile,
        certfile=certfile,
        keyfile=keyfile,
        insecure=insecure,
        username=username,
        password_file=password_file,
        every_target=False,
    )
    unknown = sorted(label for label in profiles if label and label not in labels)
    if unknown:
        raise click.UsageError(printable(f"--profile names no target labelled {', '.join(map(repr, unknown))}"))
    writes = (*MATRIX_REPORTS, *(_safe(label) for label in labels))
    _check_out(out_dir, force, writes)
    results: list[tuple[str, ProbeResult]] = []
    for spec, wanted in zip(targets, labels, strict=True):
        name, url = split_spec(spec)
        result = _probe(
            url,
            patterns=patterns,
            skip=skip,
            suite=None,
            timeout=timeout,
            concurrency=concurrency,
            max_inconclusive=max_inconclusive,
            baseline=None,
            quiet=False,
            protocol=protocol,
            profile=profiles.get(wanted, profiles.get("")),
            connection=connection,
            strict=strict,
        )
        target = result.run.target
        label = name or f"{target.host}:{target.port}"
        if result.refusal is not None:
            click.echo(printable(f"mqttaudit: {result.incomplete}"), err=True)
        elif output_format == "text":
            _print_summary(result)
        results.append((label, result))
    try:
        with staged_output(out_dir, force=force, writes=writes) as staging:
            for label, result in results:
                write_probe_reports(result.run, staging / _safe(label), result.catalogue)
            runs = [(n, r.run) for n, r in results]
            folders = [_safe(label) for label, _ in results]
            matrix = write_matrix(runs, staging, only_differing=only_differing, folders=folders)
            written = [out_dir / p.relative_to(staging) for p in matrix]
    except OutputDirError as exc:
        raise CannotRun(printable(str(exc))) from None
    statuses = {result.exit_status for _, result in results}
    worst = (EXIT_INTERNAL, EXIT_FINDINGS, EXIT_INCOMPLETE)  # a bug of the prober on any target first
    status = next((status for status in worst if status in statuses), EXIT_OK)
    if output_format == "json":
        click.echo(json.dumps(matrix_document(results, out_dir, written, status), indent=2))
    else:
        click.echo(f"matrix: {', '.join(printable(str(path)) for path in written)}")
    return status


def matrix_document(
    results: Sequence[tuple[str, ProbeResult]], out_dir: Path, written: Sequence[Path], status: int
) -> dict[str, Any]:
    """``matrix --format json``: what the terminal says, as one document: the exit status (the worst over the
    targets), the matrix reports, and per target its label, URL (never a password), exit status, why its run is
    incomplete (or null), its verdict counts, the cases that fail it with their statements, and its reports."""
    return {
        "exit_status": status,
        "outputs": [str(path) for path in written],
        "targets": [
            {
                "label": label,
                "target": result.target,
                "exit_status": result.exit_status,
                "incomplete": result.incomplete,
                "summary": result.counts,
                "failed": [
                    {"case": failed.case.id, "statements": [str(s) for s in failed.case.statements]}
                    for failed in result.counted_findings
                ],
                "reports": str(out_dir / _safe(label)),
            }
            for label, result in results
        ],
    }


def _label(spec: str) -> str:
    """The label of a matrix target (``NAME=mqtt://HOST:PORT`` or ``mqtt://HOST:PORT``): NAME, or HOST:PORT."""
    name, url = split_spec(spec)
    target = parse_target(url)
    return name or f"{target.host}:{target.port}"


def _check_out(out_dir: Path, force: bool, writes: Sequence[str]) -> None:
    """Refuses an --out that cannot be used, or a folder of someone else's files, before probing, not after."""
    try:
        check_output_dir(out_dir, force=force, writes=writes)
    except OutputDirError as exc:
        raise CannotRun(printable(str(exc))) from None


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
