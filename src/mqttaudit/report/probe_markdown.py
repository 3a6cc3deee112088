"""``findings.md``: a probe run for people. A summary of every case, then one section per failure (summary,
standard reference, expected behaviour, evidence bytes, what it means for users), one per lenient case (the rule the
accepted packet breaks, whom it binds, why the broker was not bound to detect it, the evidence), then the
inconclusive cases. Every statement is explained in the catalogue of the MQTT version its case spoke."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from ..judge import Finding, Leniency
from ..probe.runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, PASS, VERDICTS, CaseResult, ProbeRun
from ..probe.violations import OtherViolation, not_counted, other_violations
from ..spec import Catalogue
from ..spec.ids import R5
from . import markdown
from .evidence import WHOLE_IN, Budget, Exchange, exchange_of, exchanges, expectations, seconds, transcript
from .markdown import fenced, left_out, prose, table
from .reproducer import Reproducer, reproducers
from .statements import binds_text, case_catalogue, default_catalogue, own_catalogue, section_of, strongest_level

SPEC = "OASIS MQTT Version 3.1.1"
#: Characters the failure sections of one findings.md may take: sections are written while they fit, the other
#: failing cases are listed by id (a broker that floods every case must not make a report of gigabytes).
FAILURES_CHARS = 1_500_000
#: The id of the section of the violations outside the cases' statements, for the link from the header.
VIOLATIONS_ANCHOR = "violations"
#: The id of the section of the lenient cases, for the link from the header.
LENIENT_ANCHOR = "lenient"
#: The ids of the failures' section and of the table of every case (at the end), for the links from the header.
FAILURES_ANCHOR = "failures"
ALL_CASES_ANCHOR = "all-cases"
#: Characters the lenient cases' sections of one findings.md may take, as :data:`FAILURES_CHARS` for failures.
LENIENT_CHARS = 1_000_000
#: Why accepting what one was not bound to detect is not a failure, in the words of MQTT 5.0.
LENIENCY_TEXT = (
    "The broker accepted a malformed packet or a Protocol Error that it was not bound to detect. MQTT 5.0 binds a "
    'Server to close the Network Connection on a Malformed Packet or Protocol Error "when" it detects one '
    f"({R5.MQTT_4_13_1_1}), and says the rigour with which a receiver checks a packet is a compromise (section "
    "4.13.1): the rule the packet breaks binds its sender, and no statement binds the broker to detect that "
    "defect. Each is reported with that rule, whom it binds and why the broker was not bound; none is a failure of "
    "a MUST. They are counted apart and do not fail the run unless it is strict (--strict, or strict = true in the "
    "broker profile)."
)
#: Findings listed in one section, and rows of one expected-behaviour table.
MAX_LINES = 20

inline = functools.partial(markdown.inline, whole_in=WHOLE_IN)
code = functools.partial(markdown.code, whole_in=WHOLE_IN)


def source(catalogue: Catalogue) -> str:
    """The standard a catalogue's statements come from."""
    if catalogue.version.lower().startswith("amqp"):
        return "AMQP 0-9-1 specification"
    return f"OASIS MQTT Version {catalogue.version}"


VERDICT_LABELS = {
    PASS: "pass",
    FAIL: "**FAIL**",
    LENIENT: "*lenient*",
    INCONCLUSIVE: "inconclusive",
    NOT_APPLICABLE: "n/a",
}


def probe_run_to_markdown(run: ProbeRun, catalogue: Catalogue | None = None) -> str:
    """The whole ``findings.md`` document: the header, the failures, the lenient cases, the violations outside the
    cases' statements and the inconclusive cases, then the table of every case at the end."""
    rules = default_catalogue(catalogue)
    failures = [result for result in run.results if result.verdict == FAIL]
    lenient = [result for result in run.results if result.verdict == LENIENT]
    violations = other_violations(run, rules)
    found = reproducers(run, [violation.first_case for violation in violations])
    budget = Budget()
    sections = _sections(
        failures, lambda r: failure_section(r, run.target.url, rules, budget, found.get(r.case.id)), FAILURES_CHARS
    )
    lenient_sections = _sections(
        lenient, lambda r: lenient_section(r, rules, budget, found.get(r.case.id)), LENIENT_CHARS
    )
    lines = [*_header(run, violations), *_baseline_section(run)]
    if failures:
        lines += ["", f'<a id="{FAILURES_ANCHOR}"></a>', "## Failures"]
        for section in sections.values():
            lines += ["", *section]
        rest = [result for result in failures if id(result) not in sections]
        if rest:
            lines += left_out(
                len(sections), len(failures), "failing cases' sections (this report's size bound)", WHOLE_IN
            )
            lines += ["", "Failing cases without a section: " + ", ".join(code(r.case.id) for r in rest) + "."]
    if lenient:
        lines += ["", f'<a id="{LENIENT_ANCHOR}"></a>', "## Lenient cases", "", LENIENCY_TEXT]
        for section in lenient_sections.values():
            lines += ["", *section]
        rest = [result for result in lenient if id(result) not in lenient_sections]
        if rest:
            lines += left_out(
                len(lenient_sections), len(lenient), "lenient cases' sections (this report's size bound)", WHOLE_IN
            )
            lines += ["", "Lenient cases without a section: " + ", ".join(code(r.case.id) for r in rest) + "."]
    lines += _violations_section(violations, found)
    inconclusive = [result for result in run.results if result.verdict == INCONCLUSIVE]
    if inconclusive:
        lines += ["", "## Inconclusive cases", "", "Not decided either way; none of them counts as a pass.", ""]
        lines += [f"- {code(r.case.id)} ({prose(r.case.title)}): {inline(r.reason)}" for r in inconclusive]
    lines += ["", f'<a id="{ALL_CASES_ANCHOR}"></a>', "## All cases", ""]
    lines += table(
        ("Case", "Statements", "Verdict", "Reason"),
        (
            (
                f"[{code(r.case.id, cell=True)}](#{anchor(r)})"
                if id(r) in sections or id(r) in lenient_sections
                else code(r.case.id, cell=True),
                ", ".join(r.case.statements),
                VERDICT_LABELS.get(r.verdict, inline(r.verdict)),
                inline(r.reason),
            )
            for r in run.results
        ),
    )
    return "\n".join(lines) + "\n"


def _sections(
    results: Sequence[CaseResult], section_of_case: Callable[[CaseResult], list[str]], limit: int
) -> dict[int, list[str]]:
    """The sections of ``results``, by ``id()`` of their result, in order, while they fit in ``limit`` characters
    (the transcripts share the report's evidence budget)."""
    sections: dict[int, list[str]] = {}
    left = limit
    for result in results:
        section = section_of_case(result)
        left -= sum(len(line) + 1 for line in section) + 1
        if left < 0:
            break
        sections[id(result)] = section
    return sections


def anchor(result: CaseResult) -> str:
    """The id of a failing or lenient case's section, for links from the summary table."""
    return f"{'lenient' if result.verdict == LENIENT else 'fail'}-{result.case.id}"


def _violations_section(
    violations: Sequence[OtherViolation], found: Mapping[str, Reproducer] | None = None
) -> list[str]:
    """One entry per rule the broker broke outside the statements of the cases that saw it: its level, section
    and summary, how many acts in which cases, and the first act."""
    if not violations:
        return []
    lines = [
        "",
        f'<a id="{VIOLATIONS_ANCHOR}"></a>',
        "## Violations outside the cases' statements",
        "",
        "Rules the broker broke on connections of this run that no case seeing them targets. One act is one "
        "finding; the same behaviour seen in many cases is counted here once per act. A MUST-level act fails the "
        "run like a failing case; an answer or close the broker owed and did not give within the deadline of a "
        "case that does not target it is listed apart and does not.",
    ]
    for violation in violations:
        why = not_counted(violation)
        known = f" Not counted: {why}." if why else ""
        summary = f": {prose(violation.summary)}" if violation.summary else ""
        cases = ", ".join(code(case_id) for case_id in violation.cases[:MAX_LINES])
        lines += [
            "",
            f"### {inline(violation.rule)} ({violation.level}, section {inline(violation.section)})"
            + (" — owed, not given" if violation.owed else ""),
            "",
            f"Statement [{inline(violation.rule)}] of MQTT {inline(violation.protocol)}{summary}.{known}",
            "",
            f"{violation.acts:,} {'owed answer(s) or close(s) not given' if violation.owed else 'act(s)'} by the "
            f"{violation.first.side.value} in {len(violation.cases):,} case(s): "
            f"{cases}{'' if len(violation.cases) <= MAX_LINES else ', …'}.",
        ]
        lines += left_out(min(MAX_LINES, len(violation.cases)), len(violation.cases), "cases", WHOLE_IN)
        lines += ["", f"First seen in case {code(violation.first_case)}:", "", _finding_line(violation.first)]
        rep = (found or {}).get(violation.first_case)
        if rep is not None:
            lines += ["", f"Reproducer of that case: [{inline(rep.path)}]({rep.path})."]
    return lines


def _header(run: ProbeRun, violations: Sequence[OtherViolation] = ()) -> list[str]:
    counts = ", ".join(f"{run.count(verdict)} {verdict}" for verdict in VERDICTS)
    lines = [
        f"# mqttaudit probe findings: {code(run.target.url)}",
        "",
        f"- Target: {code(run.target.url)}",
        f"- Started: {inline(run.started)}",
        f"- Duration: {seconds(run.duration)}",
        f"- Cases: {len(run.results)} ({counts})",
    ]
    for version, why in run.unspoken.items():
        lines.append(f"- **Not applicable, MQTT {inline(version)}:** {inline(why)}; none of its cases was run.")
    if run.broker_down:
        lines.append(f"- **Broker down:** {inline(run.broker_down)}; the cases after that point are inconclusive.")
    if run.incomplete:
        lines.append(
            f"- **Incomplete run:** {inline(run.incomplete)}. The verdicts do not judge the broker as a whole."
        )
    lenient = run.count(LENIENT)
    if lenient:
        counts_how = "each fails this run (--strict)" if run.strict else "not failures; they do not fail the run"
        lines.append(
            f"- **Lenient:** {lenient} case(s) where the broker accepted a malformed packet or Protocol Error it was "
            f"not bound to detect ({counts_how}; see [below](#{LENIENT_ANCHOR}))"
        )
    if violations:
        acts = sum(v.acts for v in violations)
        lines.append(
            f"- **Violations outside the cases' statements:** {len(violations)} rule(s) broken in {acts:,} act(s) "
            f"(see [below](#{VIOLATIONS_ANCHOR}))"
        )
    lines.append(_contents(run, violations))
    if run.baseline is not None:
        diff = run.baseline
        lines.append(
            f"- Baseline {code(diff.source)}: {len(diff.new)} new failures, {len(diff.known)} known, "
            f"{len(diff.fixed)} fixed"
        )
    return lines


def _contents(run: ProbeRun, violations: Sequence[OtherViolation]) -> str:
    """The header's line of links: the failures first, the table of every case last."""
    parts = []
    if run.count(FAIL):
        parts.append(f"[failures](#{FAILURES_ANCHOR}) ({run.count(FAIL)})")
    if run.count(LENIENT):
        parts.append(f"[lenient cases](#{LENIENT_ANCHOR}) ({run.count(LENIENT)})")
    if violations:
        parts.append(f"[violations outside the cases' statements](#{VIOLATIONS_ANCHOR}) ({len(violations)})")
    parts.append(f"[every case](#{ALL_CASES_ANCHOR}) ({len(run.results)}, at the end)")
    scripts = " Each finding has a reproducer script in `reproducers/`." if len(parts) > 1 else ""
    return "- Contents: " + ", ".join(parts) + "." + scripts


def _baseline_section(run: ProbeRun) -> list[str]:
    """New, fixed and known failures against the baseline, each a list of case ids."""
    if run.baseline is None:
        return []
    lines = ["", "## Against the baseline", "", f"Baseline: {code(run.baseline.source)}."]
    groups = (
        ("New failures (not failing in the baseline)", run.baseline.new),
        ("Fixed (failed in the baseline, pass now)", run.baseline.fixed),
        ("Known failures (failing in the baseline too)", run.baseline.known),
    )
    for title, case_ids in groups:
        lines += ["", f"### {title}", ""]
        lines += [f"- {code(case_id)}" for case_id in case_ids] or ["None."]
    return lines


def failure_section(
    result: CaseResult,
    target: str,
    catalogue: Catalogue,
    budget: Budget | None = None,
    reproducer: Reproducer | None = None,
) -> list[str]:
    """The section of one failing case, in the form of a conformance finding; its evidence draws on ``budget``,
    the report's evidence budget; its ``reproducer`` follows the evidence."""
    rounds = exchanges(result.connections)
    catalogue = case_catalogue(result.case, catalogue)
    level = strongest_level(result.cited, catalogue) or "unlisted"
    lines = [
        f'<a id="{anchor(result)}"></a>',
        f"### {prose(result.case.title)}",
        "",
        f"Case {code(result.case.id)}: **FAIL** ({level}).",
        "",
        "#### Summary",
        "",
        *_summary(result, target, rounds),
        "",
        "#### Standard reference",
        "",
        *_reference(result, catalogue),
        "",
        "#### Expected behaviour",
        "",
        *_expected(result, rounds),
        "",
        "#### Evidence",
        "",
        "Every event of the case's connections, in order: [n] is the event number the findings cite, times are "
        "seconds from the start of the case, offsets count the bytes of that direction of the connection.",
        "",
        *fenced(transcript(result.connections, budget)),
    ]
    if result.other_findings:
        lines += ["", "Other rules the broker broke in the same conversation (not targeted by this case):", ""]
        lines += _finding_lines(result.other_findings, getattr(result, "other_findings_omitted", 0))
    lines += _reproducer_lines(reproducer)
    lines += ["", "#### What it means for users", "", _meaning(level, rounds)]
    return lines


def _reproducer_lines(reproducer: Reproducer | None) -> list[str]:
    """How to replay the case: the script in the report folder, the one-liner when there is one, and what the
    replay cannot reproduce."""
    if reproducer is None:
        return []
    lines = [
        "",
        "#### Reproducer",
        "",
        f"Script (Python 3, standard library only; HOST and PORT default to the probed target): "
        f"[{inline(reproducer.path)}]({reproducer.path}), run as `python3 {reproducer.path} [HOST] [PORT]`.",
    ]
    one_liner = reproducer.one_liner()
    if one_liner is not None:
        lines += ["", "One line (bash, printf, sleep, timeout, cat and od; Debian's essential packages):", ""]
        lines += fenced(one_liner, "sh")
    if reproducer.limits:
        lines += ["", "What the replay cannot reproduce:", ""]
        lines += [f"- {inline(limit, None)}" for limit in reproducer.limits]
    return lines


def _summary(result: CaseResult, target: str, rounds: Sequence[Exchange]) -> list[str]:
    lines = []
    first = exchange_of(result.findings[0], rounds) if result.findings else None
    if first is not None:
        lines += [
            f"After the client sent {inline(first.stimulus)}, the broker at {code(target)} {inline(first.observed)}.",
            "",
        ]
    if result.case.stimulus:
        lines += [f"Stimulus: {prose(result.case.stimulus)}.", ""]
    lines += _finding_lines(result.findings, getattr(result, "findings_omitted", 0)) or [f"- {inline(result.reason)}"]
    return lines


def _finding_lines(findings: Sequence[Finding], omitted: int = 0) -> list[str]:
    """One line per finding, the first :data:`MAX_LINES` of them, then how many more (``omitted``: those the run
    itself counted but did not keep)."""
    lines = [_finding_line(finding) for finding in findings[:MAX_LINES]]
    return lines + left_out(len(lines), len(findings) + omitted, "findings", WHOLE_IN) if lines else []


def _finding_line(finding: Finding) -> str:
    where = f" on connection {code(finding.conversation)}" if finding.conversation else ""
    kind = f" — {inline(finding.kind)}" if finding.kind else ""
    also = f"; the same act also breaks {', '.join(inline(rule) for rule in finding.also)}" if finding.also else ""
    return (
        f"- **{inline(finding.rule)}**{kind} ({finding.side.value}, at {seconds(finding.time)}{where}{also}): "
        f"{inline(finding.detail)}"
    )


def lenient_section(
    result: CaseResult, catalogue: Catalogue, budget: Budget | None = None, reproducer: Reproducer | None = None
) -> list[str]:
    """The section of one lenient case: each acceptance with the rule the packet broke (its version's text, level,
    section and whom it binds) and why the broker was not bound to detect it, the case's own statements, then the
    evidence, drawn on ``budget``."""
    catalogue = case_catalogue(result.case, catalogue)
    lines = [
        f'<a id="{anchor(result)}"></a>',
        f"### {prose(result.case.title)}",
        "",
        f"Case {code(result.case.id)}: *lenient* (MQTT {inline(result.case.protocol.value)}; not a failure).",
        "",
    ]
    if result.case.stimulus:
        lines += [f"Stimulus: {prose(result.case.stimulus)}.", ""]
    for row in result.lenient[:MAX_LINES]:
        lines += _leniency_lines(row, catalogue)
    lines += left_out(min(MAX_LINES, len(result.lenient)), len(result.lenient), "acceptances", WHOLE_IN)
    lines += ["", "#### Standard reference of the case", "", *_reference(result, catalogue)]
    lines += [
        "",
        "#### Evidence",
        "",
        *fenced(transcript(result.connections, budget)),
    ]
    return lines + _reproducer_lines(reproducer)


def _leniency_lines(row: Leniency, catalogue: Catalogue) -> list[str]:
    """What was accepted, the rule it breaks (in the catalogue of its version) and whom it binds, and why the
    receiver was not bound to detect it."""
    rules = own_catalogue(row.rule, catalogue)
    rule = rules.get(row.rule)
    where = f" on connection {code(row.conversation)}" if row.conversation else ""
    if rule is None:
        section = inline(section_of(row.rule, rules))
        broken = f"[{inline(row.rule)}] of {source(rules)} (section {section}), not in the rule catalogue"
    else:
        broken = (
            f"[{inline(row.rule)}] of {source(rules)}, section {rule.section} ({rule.level}), which binds "
            f"{binds_text(rule.actor)}: {prose(rule.summary)}"
        )
    return [
        f"- Accepted by the {row.side.value} at {seconds(row.time)}{where}: {inline(row.detail)}",
        f"  - The packet breaks {broken}.",
        f"  - Why the {row.side.value} was not bound to detect it: {prose(row.basis.rstrip('.'))}.",
    ]


def _reference(result: CaseResult, catalogue: Catalogue) -> list[str]:
    lines = [f"Source: {source(catalogue)}.", ""]
    for statement in result.cited:
        rule = catalogue.get(statement)
        if rule is None:
            lines.append(f"- Section {section_of(statement, catalogue)}, [{statement}]: not in the rule catalogue.")
            continue
        basis = f" Stated without a number: {prose(rule.basis)}." if rule.basis else ""
        lines.append(
            f"- Section {rule.section}, statement [{statement}] ({rule.level}, {rule.actor}): "
            f"{prose(rule.summary)}.{basis}"
        )
    lines += [
        "",
        "The requirements above are the catalogue's one-line summaries, not the text of the specification; the "
        "section and statement id locate the original wording.",
    ]
    return lines


def _expected(result: CaseResult, rounds: Sequence[Exchange]) -> list[str]:
    lines = [f"Expected of a conforming broker: {prose(result.case.expected)}.", ""] if result.case.expected else []
    expected = expectations(result.findings, result.case.expected, rounds)
    several = len({exchange.connection for exchange in rounds}) > 1
    rows = []
    for exchange in rounds[:MAX_LINES]:
        shape = inline(exchange.stimulus)
        if exchange.violations:
            shape += f" (breaks {', '.join(exchange.violations)})"
        if several:
            shape = f"{code(exchange.connection, cell=True)}: {shape}"
        rows.append((shape, inline(expected[exchange]) or "-", inline(exchange.observed)))
    rows_shown = table(("Packet shape", "Expected result", "Observed result"), rows)
    return lines + rows_shown + left_out(MAX_LINES, len(rounds), "exchanges", WHOLE_IN)


def _meaning(level: str, rounds: Sequence[Exchange]) -> str:
    if any(exchange.violations for exchange in rounds):
        text = (
            "The broker carries on after input the specification requires it to refuse. Clients with the same defect "
            "go unnoticed against it, invalid data can reach its sessions, subscriptions and other subscribers, and a "
            "deployment cannot rely on the broker to police what its clients send."
        )
    else:
        text = (
            "A conforming client can see behaviour the specification rules out. Client libraries and applications "
            "written against the specification may lose, duplicate or misroute messages, or stall waiting for an "
            "answer, when they talk to this broker."
        )
    if level != "MUST":
        text += f" The statements are {level}-level: a recommended behaviour, so this limits interoperability "
        text += "rather than breaking conformance outright."
    return text
