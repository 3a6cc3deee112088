"""``report.html`` of a probe run: one self-contained page (inline CSS, no script, no external asset) for people.
The failures come first, grouped by the statement they break (with its catalogue summary, level and whom it
binds) and counted by family, each with the expected behaviour, what the broker did, the evidence in hex and a
runnable reproducer; then the lenient cases, apart; the violations outside the cases' statements; the cases that
could not be assessed, with their reasons; and the passes, collapsed. Built with the audit page's template
environment (jinja2, autoescaped, every peer value made printable and cut)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..judge import Finding
from ..probe.runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, PASS, VERDICTS, CaseResult, ProbeRun
from ..probe.violations import OtherViolation, not_counted, other_violations
from ..spec import Catalogue
from .audit_html import html_environment
from .evidence import Budget, Exchange, exchange_of, exchanges, expectations, seconds, transcript
from .probe_markdown import FAILURES_CHARS, LENIENCY_TEXT, LENIENT_CHARS, MAX_LINES, anchor
from .reproducer import Reproducer, reproducers
from .statements import (
    binds_text,
    case_catalogue,
    default_catalogue,
    in_spec_order,
    own_catalogue,
    section_of,
    spec_name,
    strongest_level,
)


@dataclass(frozen=True)
class Statement:
    """A statement as the page explains it, in the catalogue of its version."""

    id: str
    spec: str
    section: str
    level: str
    binds: str
    summary: str

    @property
    def anchor(self) -> str:
        return f"statement-{self.spec.replace(' ', '-')}-{self.id}"


@dataclass(frozen=True)
class Row:
    """One packet the client sent: its shape, what a conforming broker does, what this one did."""

    connection: str
    stimulus: str
    breaks: tuple[str, ...]
    expected: str
    observed: str


@dataclass(frozen=True)
class FailedCase:
    result: CaseResult
    anchor: str
    level: str
    #: The statements the case failed, in spec order (the group it is shown in is the first).
    failed: tuple[Statement, ...]
    headline: str
    rows: tuple[Row, ...]
    rows_omitted: int
    findings: tuple[Finding, ...]
    findings_omitted: int
    evidence: tuple[str, ...]
    reproducer: Reproducer | None

    @property
    def size(self) -> int:
        """About the characters the case's section takes (its peer values are cut, its evidence counted)."""
        rows = sum(len(row.stimulus) + len(row.expected) + len(row.observed) + 200 for row in self.rows)
        findings = sum(min(len(finding.detail), 400) + 200 for finding in self.findings)
        return rows + findings + _evidence_size(self.evidence) + 2_000


@dataclass(frozen=True)
class StatementGroup:
    statement: Statement
    cases: tuple[FailedCase, ...]


@dataclass(frozen=True)
class Acceptance:
    """One thing a lenient broker accepted: the rule the packet broke, whom it binds, why the broker was not bound."""

    rule: Statement
    side: str
    time: float
    detail: str
    basis: str


@dataclass(frozen=True)
class LenientCase:
    result: CaseResult
    anchor: str
    acceptances: tuple[Acceptance, ...]
    evidence: tuple[str, ...]
    reproducer: Reproducer | None

    @property
    def size(self) -> int:
        """About the characters the case's section takes."""
        accepted = sum(min(len(row.detail), 400) + len(row.basis) + 400 for row in self.acceptances)
        return accepted + _evidence_size(self.evidence) + 2_000


def _evidence_size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


_Case = TypeVar("_Case", "FailedCase", "LenientCase")


@dataclass(frozen=True)
class ProbeView:
    run: ProbeRun
    counts: dict[str, int]
    groups: tuple[StatementGroup, ...]
    #: (family, failing cases of it, their anchors), most failures first.
    families: tuple[tuple[str, int, tuple[str, ...]], ...]
    lenient: tuple[LenientCase, ...]
    #: Failing and lenient cases past the page's size bound: listed by id, their sections left out.
    failures_left_out: tuple[CaseResult, ...]
    lenient_left_out: tuple[CaseResult, ...]
    violations: tuple[OtherViolation, ...]
    not_assessed: tuple[CaseResult, ...]
    passes: tuple[CaseResult, ...]
    reproducers: Mapping[str, Reproducer]

    @property
    def failures(self) -> int:
        return self.counts[FAIL]

    @property
    def headline(self) -> str:
        run = self.run
        if run.incomplete and not self.failures:
            return f"Incomplete: {run.incomplete}"
        parts = []
        if self.failures:
            parts.append(f"{self.failures:,} failing case{'s' if self.failures != 1 else ''}")
        counted = [v for v in self.violations if v.counted]
        if counted:
            parts.append(f"{len(counted):,} rule(s) broken outside the cases' statements")
        if self.counts[LENIENT]:
            parts.append(f"{self.counts[LENIENT]:,} lenient (not failures)")
        if not parts:
            return f"No case failed: {self.counts[PASS]:,} of {len(run.results):,} cases passed"
        return ", ".join(parts) + f" of {len(run.results):,} cases"

    @property
    def clean(self) -> bool:
        return not self.failures and not any(v.counted for v in self.violations) and not self.run.incomplete


def probe_html(run: ProbeRun, catalogue: Catalogue | None = None) -> str:
    """The whole ``report.html`` of a probe run."""
    view = probe_view(run, catalogue)
    return (
        html_environment()
        .get_template("probe.html.j2")
        .render(
            view=view,
            verdicts=VERDICTS,
            leniency_text=LENIENCY_TEXT,
            not_counted=not_counted,
            seconds=seconds,
        )
    )


def probe_view(run: ProbeRun, catalogue: Catalogue | None = None) -> ProbeView:
    rules = default_catalogue(catalogue)
    violations = other_violations(run, rules)
    found = reproducers(run, [violation.first_case for violation in violations])
    budget = Budget()
    failing = [r for r in run.results if r.verdict == FAIL]
    failed = _bounded([_failed(r, rules, budget, found.get(r.case.id)) for r in failing], FAILURES_CHARS)
    accepting = [r for r in run.results if r.verdict == LENIENT]
    lenient = _bounded([_lenient(r, rules, budget, found.get(r.case.id)) for r in accepting], LENIENT_CHARS)
    return ProbeView(
        run=run,
        counts={verdict: run.count(verdict) for verdict in VERDICTS},
        groups=_groups(failed),
        families=_families(failed),
        lenient=tuple(lenient),
        failures_left_out=tuple(failing[len(failed) :]),
        lenient_left_out=tuple(accepting[len(lenient) :]),
        violations=tuple(violations),
        not_assessed=tuple(r for r in run.results if r.verdict in (INCONCLUSIVE, NOT_APPLICABLE)),
        passes=tuple(r for r in run.results if r.verdict == PASS),
        reproducers=found,
    )


def _bounded(cases: Sequence[_Case], limit: int) -> list[_Case]:
    """The first ``cases`` whose sections fit in ``limit`` characters together (their text as shown; the evidence
    of all of them shares the page's evidence budget), so that a broker that fails everything with floods of
    packets does not make a page of gigabytes; the others are listed by id."""
    kept: list[_Case] = []
    left = limit
    for case in cases:
        left -= case.size
        if left < 0:
            break
        kept.append(case)
    return kept


def statement(statement_id: str, catalogue: Catalogue) -> Statement:
    own = own_catalogue(statement_id, catalogue)
    rule = own.get(statement_id)
    return Statement(
        id=str(statement_id),
        spec=spec_name(own),
        section=rule.section if rule is not None else section_of(statement_id, own),
        level=rule.level if rule is not None else "unlisted",
        binds=binds_text(rule.actor) if rule is not None else "",
        summary=rule.summary if rule is not None else "not in the rule catalogue",
    )


def _failed(result: CaseResult, rules: Catalogue, budget: Budget, reproducer: Reproducer | None) -> FailedCase:
    own = case_catalogue(result.case, rules)
    failing = [s for s, verdict in result.statements.items() if verdict == FAIL]
    failing += [rule for finding in result.findings for rule in finding.rules]
    ordered = in_spec_order(failing or result.cited, own)
    rounds = exchanges(result.connections)
    first = exchange_of(result.findings[0], rounds) if result.findings else None
    headline = (
        f"After the client sent {first.stimulus}, the broker {first.observed}." if first is not None else result.reason
    )
    return FailedCase(
        result=result,
        anchor=anchor(result),
        level=strongest_level(result.cited, own) or "unlisted",
        failed=tuple(statement(s, own) for s in ordered),
        headline=headline,
        rows=tuple(_rows(result, rounds)[:MAX_LINES]),
        rows_omitted=max(0, len(rounds) - MAX_LINES),
        findings=tuple(result.findings[:MAX_LINES]),
        findings_omitted=max(0, len(result.findings) - MAX_LINES) + result.findings_omitted,
        evidence=tuple(transcript(result.connections, budget).splitlines()),
        reproducer=reproducer,
    )


def _rows(result: CaseResult, rounds: Sequence[Exchange]) -> list[Row]:
    """Each exchange with what a conforming broker does: the finding's expectation where a finding lands on it,
    the case's where the client's packet breaks a rule on purpose, else none."""
    expected = expectations(result.findings, result.case.expected, rounds)
    several = len({exchange.connection for exchange in rounds}) > 1
    return [
        Row(
            connection=exchange.connection if several else "",
            stimulus=exchange.stimulus,
            breaks=exchange.violations,
            expected=expected[exchange],
            observed=exchange.observed,
        )
        for exchange in rounds
    ]


def _groups(failed: Sequence[FailedCase]) -> tuple[StatementGroup, ...]:
    """The failing cases by the first statement each fails: MUST-level statements first, then by version (MQTT
    3.1.1, then 5.0) and section."""
    groups: dict[tuple[str, str], list[FailedCase]] = {}
    heads: dict[tuple[str, str], Statement] = {}
    for case in failed:
        head = case.failed[0]
        heads.setdefault((head.spec, head.id), head)
        groups.setdefault((head.spec, head.id), []).append(case)

    def rank(key: tuple[str, str]) -> tuple[bool, str, tuple[int, ...], str]:
        head = heads[key]
        return (head.level != "MUST", head.spec, tuple(int(p) for p in head.section.split(".") if p.isdigit()), head.id)

    return tuple(StatementGroup(heads[key], tuple(groups[key])) for key in sorted(groups, key=rank))


def _families(failed: Sequence[FailedCase]) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
    families: dict[str, list[str]] = {}
    for case in failed:
        families.setdefault(case.result.case.family_name, []).append(case.anchor)
    return tuple(
        (family, len(anchors), tuple(anchors))
        for family, anchors in sorted(families.items(), key=lambda item: (-len(item[1]), item[0]))
    )


def _lenient(result: CaseResult, rules: Catalogue, budget: Budget, reproducer: Reproducer | None) -> LenientCase:
    own = case_catalogue(result.case, rules)
    return LenientCase(
        result=result,
        anchor=anchor(result),
        acceptances=tuple(
            Acceptance(statement(row.rule, own), row.side.value, row.time, row.detail, row.basis)
            for row in result.lenient[:MAX_LINES]
        ),
        evidence=tuple(transcript(result.connections, budget).splitlines()),
        reproducer=reproducer,
    )
