"""The probe as a library call: select cases, check the target can be reached, run, confirm timing-dependent
failures, compare with a baseline, and decide the exit status. ``mqttaudit probe`` and ``matrix`` are this call
plus printing.

>>> result = run("mqtt://127.0.0.1:1883", cases="ping/*")  # doctest: +SKIP
>>> result.exit_status, result.counts["pass"]  # doctest: +SKIP
(0, 1)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ..codec import ProtocolVersion
from ..spec import Catalogue
from .baseline import Baseline, compare, load_baseline
from .case import Case, Target
from .confirm import confirm_timing_failures
from .outcome import (
    DEFAULT_MAX_INCONCLUSIVE,
    counted_failures,
    exit_status,
    failures,
    lenient_cases,
    nothing_judged,
    parse_share,
    too_inconclusive,
)
from .preflight import Refusal, preflight_amqp, versions_unspoken
from .profile import NO_PROFILE, BrokerProfile, load_profile
from .runner import (
    DEFAULT_CONCURRENCY,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    VERDICTS,
    CaseResult,
    ProbeRun,
    crashes,
    run_probe,
)
from .selection import Patterns, parse_protocol, select_cases
from .targets import is_amqp, parse_target
from .transport import Credentials, TlsOptions
from .violations import OtherViolation, other_violations


class ProbeUsageError(ValueError):
    """The arguments of a run are wrong (target, selection, share, baseline): nothing was probed."""


class ProbeProgress(Protocol):
    """What a caller hears while a run goes on: the number of cases, then each result as it comes."""

    def started(self, total: int) -> None: ...

    def finished(self, result: CaseResult) -> None: ...


@dataclass
class ProbeResult:
    """One probe run and what it amounts to. ``run`` holds everything the reports show."""

    run: ProbeRun
    #: The rules the cases cite when they are another specification's (AMQP 0-9-1); None for MQTT, whose cases
    #: each cite the catalogue of the version they speak (:func:`~mqttaudit.probe.statements.case_catalogue`).
    catalogue: Catalogue | None = None
    #: Why nothing was probed (unreachable, unresolvable, refused the prober), when so.
    refusal: Refusal | None = None

    @property
    def target(self) -> str:
        """The target's URL, without any password."""
        return self.run.target.url

    @property
    def results(self) -> list[CaseResult]:
        return self.run.results

    @property
    def counts(self) -> dict[str, int]:
        return {verdict: self.run.count(verdict) for verdict in VERDICTS}

    @property
    def incomplete(self) -> str | None:
        """Why the run does not judge the broker as a whole, or None."""
        return self.run.incomplete

    @property
    def findings(self) -> list[CaseResult]:
        """The failed cases, known to the baseline or not."""
        return failures(self.run)

    @property
    def counted_findings(self) -> list[CaseResult]:
        """The failures that fail the run: MUST-level, and not in the baseline."""
        return counted_failures(self.run, self._rules())

    @property
    def violations(self) -> list[OtherViolation]:
        """The rules the broker broke outside the statements of the cases that saw it, grouped by rule."""
        return other_violations(self.run, self._rules())

    @property
    def lenient(self) -> list[CaseResult]:
        """The lenient cases: malformed packets or Protocol Errors the broker accepted and was not bound to detect."""
        return lenient_cases(self.run)

    @property
    def exit_status(self) -> int:
        """0 conformant, 1 a MUST-level failure or violation (new, with a baseline) or, in a strict run, a lenient
        case (new, with a baseline), 3 the prober failed on a case (a bug; every other case was judged and the
        reports can be written), 4 incomplete."""
        return exit_status(self.run, self._rules())

    def to_json(self) -> dict[str, Any]:
        """The findings.json document."""
        from ..report.probe_json import probe_run_to_json

        return probe_run_to_json(self.run, self.catalogue)

    def write_reports(self, out_dir: Path | str, *, force: bool = False) -> list[Path]:
        """Writes findings.json, findings.md, junit.xml, report.html and reproducers/ into ``out_dir``, published
        whole (see :mod:`mqttaudit.report.output_dir`: a folder of someone else's files is refused unless ``force``,
        and a file of someone else's with the name of a report is never replaced, whatever ``force`` says)."""
        from ..report import PROBE_REPORTS, write_probe_reports
        from ..report.output_dir import staged_output

        out = Path(out_dir)
        with staged_output(out, force=force, writes=PROBE_REPORTS) as staging:
            written = write_probe_reports(self.run, staging, self.catalogue)
        return [out / path.relative_to(staging) for path in written]

    def _rules(self) -> Catalogue:
        from ..report.statements import default_catalogue

        return default_catalogue(self.catalogue)


def run(
    target: str,
    *,
    cases: Patterns = None,
    skip: Patterns = None,
    suite: str | None = None,
    timeout: float = 2.0,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_inconclusive: float | str = DEFAULT_MAX_INCONCLUSIVE,
    baseline: Path | str | Baseline | None = None,
    confirm_timing: bool = True,
    progress: ProbeProgress | None = None,
    protocol: ProtocolVersion | str | None = None,
    profile: BrokerProfile | Path | str | None = None,
    tls: TlsOptions | None = None,
    credentials: Credentials | None = None,
    strict: bool = False,
) -> ProbeResult:
    """Probes ``target`` (see :func:`run_async`) from synchronous code."""
    return asyncio.run(
        run_async(
            target,
            cases=cases,
            skip=skip,
            suite=suite,
            timeout=timeout,
            concurrency=concurrency,
            max_inconclusive=max_inconclusive,
            baseline=baseline,
            confirm_timing=confirm_timing,
            progress=progress,
            protocol=protocol,
            profile=profile,
            tls=tls,
            credentials=credentials,
            strict=strict,
        )
    )


async def run_async(
    target: str,
    *,
    cases: Patterns = None,
    skip: Patterns = None,
    suite: str | None = None,
    timeout: float = 2.0,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_inconclusive: float | str = DEFAULT_MAX_INCONCLUSIVE,
    baseline: Path | str | Baseline | None = None,
    confirm_timing: bool = True,
    progress: ProbeProgress | None = None,
    protocol: ProtocolVersion | str | None = None,
    profile: BrokerProfile | Path | str | None = None,
    tls: TlsOptions | None = None,
    credentials: Credentials | None = None,
    strict: bool = False,
) -> ProbeResult:
    """Probes the broker at ``target`` (``mqtt://HOST:PORT``, ``mqtts://``, ``ws://``, ``wss://``, or
    ``amqp://USER:PASS@HOST:PORT/VHOST`` for the AMQP routing suite) with the cases that ``cases`` selects and
    ``skip`` leaves out (globs over case ids or statement ids; ``!glob`` in ``cases`` excludes too) that speak
    ``protocol`` ("3.1.1", "5"; None or "all": every version).
    ``profile`` (a :class:`~mqttaudit.probe.profile.BrokerProfile` or the path of its TOML file) declares what the
    broker's CONNACK cannot. ``tls`` says how a TLS target (``mqtts://``, ``wss://``, ``amqps://``) is trusted;
    ``credentials`` (a user name and a :class:`~mqttaudit.probe.transport.Secret` password) go into every CONNECT
    of the library's client steps, unless the URL names a user of its own (that one wins). ``strict`` (or
    ``strict = true`` in the profile) makes a ``lenient`` case fail the run (exit status 1), as a MUST failure does.

    A target that cannot be reached or refuses the prober gives a result whose ``incomplete`` says why (exit
    status 4); nothing is raised for it. ValueError for a malformed target, a selection that matches nothing, a
    bad ``max_inconclusive`` or ``protocol``, an unreadable baseline (:class:`~mqttaudit.probe.baseline.BaselineError`)
    or profile (:class:`~mqttaudit.probe.profile.ProfileError`).
    """
    try:
        parsed = parse_target(target)
        if not is_amqp(target):
            parsed = parsed.with_options(tls, credentials)
        else:
            parsed = _amqp_options(target, parsed, tls, credentials)
        parsed.tls_context()  # a CA file or client certificate that cannot be used is a usage error, found now
        limit = parse_share(max_inconclusive)
        known = load_baseline(baseline) if isinstance(baseline, Path | str) else baseline
        version = protocol if isinstance(protocol, ProtocolVersion) else parse_protocol(protocol)
        declared = load_profile(profile) if isinstance(profile, Path | str) else profile or NO_PROFILE
        selected = (
            amqp_selection(cases, skip, suite)
            if is_amqp(target)
            else select_cases(cases, skip, suite=suite, protocol=version)
        )
    except ValueError as exc:
        raise ProbeUsageError(str(exc)) from None
    if is_amqp(target):
        result = await _run_amqp(parsed, selected, timeout, progress)
    else:
        result = await _run_mqtt(parsed, selected, timeout, concurrency, confirm_timing, progress, declared)
    probe_run = result.run
    probe_run.strict = strict or declared.strict is True
    if probe_run.incomplete is None:
        probe_run.incomplete = (
            crashes(probe_run.results)
            or probe_run.broker_down
            or too_inconclusive(probe_run.results, limit)
            or nothing_judged(probe_run.results)
        )
    if known is not None:
        probe_run.baseline = compare(known, ((r.case.id, r.verdict) for r in probe_run.results))
    return result


async def _run_mqtt(
    target: Target,
    selected: Sequence[Case],
    timeout: float,
    concurrency: int,
    confirm_timing: bool,
    progress: ProbeProgress | None,
    profile: BrokerProfile = NO_PROFILE,
) -> ProbeResult:
    clock0 = time.monotonic()
    # capability first: one plain CONNECT per version of the selection (the login check too)
    unspoken = await versions_unspoken(target, timeout, {case.protocol for case in selected})
    if isinstance(unspoken, Refusal):
        return ProbeResult(not_probed(target, selected, unspoken, time.monotonic() - clock0), refusal=unspoken)
    runnable = [case for case in selected if case.protocol not in unspoken]
    if progress is not None:
        progress.started(len(runnable))
    probe_run = await run_probe(
        target,
        runnable,
        timeout=timeout,
        concurrency=concurrency,
        progress=None if progress is None else progress.finished,
        profile=profile,
    )
    if unspoken:
        # A version's statements do not bind a broker that does not speak it: its cases do not apply, said once for
        # the run and on each case, in library order.
        said = {version: f"the broker does not speak MQTT {version.value}: {why}" for version, why in unspoken.items()}
        probe_run.unspoken = {version.value: why for version, why in said.items()}
        ran = {result.case.id: result for result in probe_run.results}
        probe_run.results = [
            ran.get(case.id) or CaseResult(case, NOT_APPLICABLE, said[case.protocol]) for case in selected
        ]
    if confirm_timing and probe_run.broker_down is None:

        async def alone(case: Case) -> CaseResult:
            return (await run_probe(target, [case], timeout=timeout, concurrency=1, profile=profile)).results[0]

        rerun_from = time.monotonic()
        probe_run.results = await confirm_timing_failures(probe_run.results, alone)
        probe_run.duration += time.monotonic() - rerun_from
    return ProbeResult(probe_run)


def _amqp_options(url: str, target: Target, tls: TlsOptions | None, credentials: Credentials | None) -> Target:
    """An AMQP target logs in with its URL's user and password; ``credentials`` stand in for a URL that names none
    (else the login is guest's)."""
    from dataclasses import replace

    from .amqp import AmqpTarget

    amqp = target.with_options(tls)
    assert isinstance(amqp, AmqpTarget)
    if credentials is None or amqp.credentials is not None:  # the URL named a user
        return amqp
    password = "" if credentials.password is None else credentials.password.reveal()
    return replace(amqp, user=credentials.username, password=password)


def amqp_selection(cases: Patterns, skip: Patterns, suite: str | None) -> list[Case]:
    """The AMQP routing suite runs whole: no case selection, and its one suite is ``routing``."""
    from .amqp import AMQP_CASES

    if suite not in (None, "routing"):
        raise ValueError(f"amqp:// targets have one suite, 'routing', not {suite!r}")
    if cases or skip:
        raise ValueError("--cases and --skip select MQTT cases; an amqp:// target runs the whole routing suite")
    return [routing.case for routing in AMQP_CASES.values()]


async def _run_amqp(
    target: Target, selected: Sequence[Case], timeout: float, progress: ProbeProgress | None
) -> ProbeResult:
    from .amqp import AMQP_CASES, AMQP_RULES, AmqpTarget, probe_amqp_routing

    assert isinstance(target, AmqpTarget)
    clock0 = time.monotonic()
    refusal = await preflight_amqp(target, timeout)
    if refusal is not None:
        return ProbeResult(not_probed(target, selected, refusal, time.monotonic() - clock0), AMQP_RULES, refusal)
    if progress is not None:
        progress.started(len(selected))
    routing = [AMQP_CASES[case.id] for case in selected]
    probe_run = await probe_amqp_routing(
        target, routing, timeout=timeout, progress=None if progress is None else progress.finished
    )
    if probe_run.broker_down:
        for result in probe_run.results:
            result.error = result.verdict == INCONCLUSIVE and result.reason.startswith("cannot connect to")
    return ProbeResult(probe_run, AMQP_RULES)


def not_probed(target: Target, cases: Sequence[Case], refusal: Refusal, duration: float) -> ProbeRun:
    """The run of a target that could not be probed: every case an error with the reason, and the run incomplete."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    results = [CaseResult(case, INCONCLUSIVE, f"not probed: {refusal.message}", error=True) for case in cases]
    return ProbeRun(target, started, results, duration, incomplete=f"{refusal.message} — nothing was probed")
