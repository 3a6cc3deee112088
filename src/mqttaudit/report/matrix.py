"""The conformance matrix: statements x brokers, one verdict per cell, as Markdown and as self-contained HTML.

A row is one statement of one version: 5.0 renumbers 3.1.1's statements, so the same id text names different
statements in the two, and each version's rows stand in a table of their own, explained by that version's
catalogue."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..probe.runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, PASS, VERDICTS, CaseResult, ProbeRun
from ..spec import VERSIONS, Catalogue, Rule
from . import markdown
from .audit_html import html_environment
from .evidence import WHOLE_IN, printable
from .markdown import left_out, prose, table
from .peer_text import shown
from .statements import case_catalogue, default_catalogue, in_spec_order, section_of, spec_name

#: Failing cases listed per broker; the rest are counted (each broker's findings.json has them all).
MAX_LISTED = 200

inline = functools.partial(markdown.inline, whole_in=WHOLE_IN)
code = functools.partial(markdown.code, whole_in=WHOLE_IN)

#: When several cases target one statement on one broker, the highest rank decides the cell.
RANK = {NOT_APPLICABLE: 0, PASS: 1, INCONCLUSIVE: 2, LENIENT: 3, FAIL: 4}
CELL_TEXT = {PASS: "pass", FAIL: "FAIL", LENIENT: "lenient", INCONCLUSIVE: "?", NOT_APPLICABLE: "n/a", None: "—"}
LEGEND = (
    "pass · FAIL · lenient: accepted a malformed packet or Protocol Error it was not bound to detect (not a failure) "
    "· ? inconclusive · n/a not applicable · — no case on that broker"
)


@dataclass(frozen=True)
class Cell:
    #: None when no case of that broker's run targets the statement.
    verdict: str | None
    #: The cases of that broker that target the statement, as (case id, its verdict on the statement, reason).
    cases: tuple[tuple[str, str, str], ...]

    @property
    def text(self) -> str:
        return CELL_TEXT[self.verdict]

    @property
    def note(self) -> str:
        """One line per case, for a tooltip."""
        return "\n".join(
            printable(f"{case}: {verdict}") + (f" ({peer_text(reason)})" if reason else "")
            for case, verdict, reason in self.cases[:MAX_LISTED]
        )

    @property
    def failing_case(self) -> str | None:
        return next((case for case, verdict, _ in self.cases if verdict == FAIL), None)

    @property
    def listed_case(self) -> str | None:
        """The case the cell links to in the lists of failing and lenient cases: its first failing one, else its
        first lenient one."""
        return self.failing_case or next((case for case, verdict, _ in self.cases if verdict == LENIENT), None)


@dataclass(frozen=True)
class Row:
    statement: str
    section: str
    rule: Rule | None
    cells: tuple[Cell, ...]
    #: The version whose catalogue numbers the statement ("3.1.1", "5.0"; another specification's for its suite).
    version: str = "3.1.1"
    #: That specification, for headings: ``MQTT 5.0``.
    spec: str = "MQTT 3.1.1"

    @property
    def summary(self) -> str:
        return self.rule.summary if self.rule else "not in the rule catalogue"

    @property
    def differs(self) -> bool:
        """Whether the targets' verdicts on the statement differ (a target with no case on it counts as one more
        verdict, "—")."""
        return len({cell.verdict for cell in self.cells}) > 1


@dataclass(frozen=True)
class Column:
    label: str
    run: ProbeRun

    @property
    def counts(self) -> dict[str, int]:
        return {verdict: self.run.count(verdict) for verdict in VERDICTS}

    @property
    def failures(self) -> list[CaseResult]:
        return [result for result in self.run.results if result.verdict == FAIL]

    @property
    def lenient(self) -> list[CaseResult]:
        return [result for result in self.run.results if result.verdict == LENIENT]


@dataclass(frozen=True)
class Matrix:
    columns: tuple[Column, ...]
    #: Every version's rows, a version's together, in spec order.
    rows: tuple[Row, ...]
    #: Show only the rows where the targets' verdicts differ (``matrix --only-differing``); matrix.html starts with
    #: its toggle on.
    only_differing: bool = False
    #: Per column, the folder of that target's own reports relative to the matrix (its report.html is linked).
    folders: tuple[str, ...] = ()

    @property
    def tables(self) -> list[tuple[str, list[Row]]]:
        """(specification, its rows) per version, in the order of :attr:`rows`."""
        tables: dict[str, list[Row]] = {}
        for row in self.rows:
            tables.setdefault(row.spec, []).append(row)
        return list(tables.items())

    @property
    def differing(self) -> int:
        """How many rows' verdicts differ between the targets."""
        return sum(row.differs for row in self.rows)


def statement_verdict(result: CaseResult, statement: str) -> str:
    """A case's verdict on one of its statements: per statement when the case was decided (a failing case may pass
    its other statements), else the case's verdict (a case stopped early decides none of them)."""
    if result.verdict in (PASS, FAIL):
        return result.statements.get(statement, result.verdict)
    return result.verdict


def build_matrix(
    runs: Sequence[tuple[str, ProbeRun]],
    catalogue: Catalogue | None = None,
    *,
    only_differing: bool = False,
    folders: Sequence[str] = (),
) -> Matrix:
    """Rows are the statements any case targets, one per (version, id): MQTT 3.1.1's, then 5.0's (then another
    specification's), each in spec order and explained by its own version's catalogue; a cell holds only the cases
    of that version. A label left empty becomes the target URL."""
    rules = default_catalogue(catalogue)
    columns = tuple(Column(label or run.target.url, run) for label, run in runs)
    catalogues: dict[str, Catalogue] = {}
    #: Per column, the results by the version of their case.
    results: list[dict[str, list[CaseResult]]] = []
    for column in columns:
        by_version: dict[str, list[CaseResult]] = {}
        for result in column.run.results:
            own = case_catalogue(result.case, rules)
            catalogues.setdefault(own.version, own)
            by_version.setdefault(own.version, []).append(result)
        results.append(by_version)
    order = sorted(catalogues, key=lambda v: (VERSIONS.index(v) if v in VERSIONS else len(VERSIONS), v))
    rows = []
    for version in order:
        own = catalogues[version]
        targeted = (s for by_version in results for r in by_version.get(version, []) for s in r.case.statements)
        for statement in in_spec_order(targeted, own):
            cells = []
            for by_version in results:
                cases = tuple(
                    (result.case.id, verdict, "" if verdict == PASS else result.reason)
                    for result in by_version.get(version, [])
                    if statement in result.case.statements
                    for verdict in [statement_verdict(result, statement)]
                )
                verdict = max((verdict for _, verdict, _ in cases), key=RANK.__getitem__, default=None)
                cells.append(Cell(verdict, cases))
            rows.append(
                Row(
                    statement,
                    section_of(statement, own),
                    own.get(statement),
                    tuple(cells),
                    version,
                    spec_name(own),
                )
            )
    return Matrix(columns, tuple(rows), only_differing, tuple(folders))


def matrix_markdown(matrix: Matrix) -> str:
    """Per-broker counts, the statements x brokers table, and the failing cases with their reasons."""
    lines = ["# mqttaudit conformance matrix", "", "## Brokers", ""]
    lines += table(
        ("Broker", "Target", "Started", *VERDICTS),
        (
            (inline(c.label), code(c.run.target.url, cell=True), inline(c.run.started), *map(str, c.counts.values()))
            for c in matrix.columns
        ),
    )
    lines += ["", "## Statements", "", f"Cells: {LEGEND}.", ""]
    lines.append(
        "One table per version: MQTT 5.0 renumbers 3.1.1's statements, so one id names a different statement in "
        "each, and each row is explained by its own version's catalogue."
    )
    if matrix.only_differing:
        lines += [
            "",
            f"Only the rows where the targets' verdicts differ (--only-differing): {matrix.differing:,} of "
            f"{len(matrix.rows):,} statements.",
        ]
    for spec, rows in matrix.tables:
        shown = [row for row in rows if row.differs or not matrix.only_differing]
        if not shown:
            continue
        lines += ["", f"### {inline(spec)} statements", ""]
        lines += table(
            ("Statement", "Section", "Level", "Summary", *(inline(c.label) for c in matrix.columns)),
            (
                (
                    row.statement,
                    row.section,
                    row.rule.level if row.rule else "-",
                    prose(row.summary),
                    *(cell.text for cell in row.cells),
                )
                for row in shown
            ),
        )
    if matrix.only_differing and not matrix.differing:
        lines += ["", "No statement's verdicts differ between the targets."]
    lines += _listed(matrix, "Failing cases", "failing cases", lambda column: column.failures)
    lines += _listed(matrix, "Lenient cases", "lenient cases", lambda column: column.lenient)
    return "\n".join(lines) + "\n"


def _listed(matrix: Matrix, title: str, what: str, chosen: Callable[[Column], Sequence[CaseResult]]) -> list[str]:
    """A section listing the ``chosen`` cases of every broker with their reasons (``MAX_LISTED`` per broker)."""
    listed = [(column, result) for column in matrix.columns for result in chosen(column)[:MAX_LISTED]]
    if not listed:
        return []
    lines = ["", f"## {title}", ""]
    lines += [f"- {inline(c.label)}: {code(r.case.id)} ({prose(r.case.title)}): {inline(r.reason)}" for c, r in listed]
    for column in matrix.columns:
        lines += left_out(MAX_LISTED, len(chosen(column)), f"{what} of {inline(column.label)}", WHOLE_IN)
    return lines


def matrix_html(matrix: Matrix) -> str:
    """A self-contained page: inline CSS, no scripts, no external assets; the filter "only rows where the targets
    differ" is a checkbox that CSS alone acts on. Built with the audit page's template environment."""
    return (
        html_environment()
        .get_template("matrix.html.j2")
        .render(matrix=matrix, legend=LEGEND, verdicts=VERDICTS, max_listed=MAX_LISTED, cell_note=peer_text)
    )


def peer_text(value: object) -> str:
    """A peer's value as the matrix shows it: cut, every character printable."""
    return shown(value, whole_in=WHOLE_IN)
