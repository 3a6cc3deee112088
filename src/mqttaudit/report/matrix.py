"""The conformance matrix: statements x brokers, one verdict per cell, as Markdown and as self-contained HTML."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jinja2

from ..probe.runner import FAIL, INCONCLUSIVE, NOT_APPLICABLE, PASS, VERDICTS, CaseResult, ProbeRun
from ..spec import Catalogue, Rule
from . import markdown
from .evidence import WHOLE_IN, printable
from .markdown import left_out, prose, table
from .peer_text import shown
from .statements import default_catalogue, in_spec_order, section_of

#: Failing cases listed per broker; the rest are counted (each broker's findings.json has them all).
MAX_LISTED = 200

inline = functools.partial(markdown.inline, whole_in=WHOLE_IN)
code = functools.partial(markdown.code, whole_in=WHOLE_IN)

#: When several cases target one statement on one broker, the highest rank decides the cell.
RANK = {NOT_APPLICABLE: 0, PASS: 1, INCONCLUSIVE: 2, FAIL: 3}
CELL_TEXT = {PASS: "pass", FAIL: "FAIL", INCONCLUSIVE: "?", NOT_APPLICABLE: "n/a", None: "—"}
LEGEND = "pass · FAIL · ? inconclusive · n/a not applicable · — no case on that broker"


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


@dataclass(frozen=True)
class Row:
    statement: str
    section: str
    rule: Rule | None
    cells: tuple[Cell, ...]

    @property
    def summary(self) -> str:
        return self.rule.summary if self.rule else "not in the rule catalogue"


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


@dataclass(frozen=True)
class Matrix:
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]


def statement_verdict(result: CaseResult, statement: str) -> str:
    """A case's verdict on one of its statements: per statement when the case was decided (a failing case may pass
    its other statements), else the case's verdict (a case stopped early decides none of them)."""
    if result.verdict in (PASS, FAIL):
        return result.statements.get(statement, result.verdict)
    return result.verdict


def build_matrix(runs: Sequence[tuple[str, ProbeRun]], catalogue: Catalogue | None = None) -> Matrix:
    """Rows are the statements any case targets, in spec order; a label left empty becomes the target URL."""
    rules = default_catalogue(catalogue)
    columns = tuple(Column(label or run.target.url, run) for label, run in runs)
    targeted = (statement for _, run in runs for result in run.results for statement in result.case.statements)
    rows = []
    for statement in in_spec_order(targeted, rules):
        cells = []
        for column in columns:
            cases = tuple(
                (result.case.id, verdict, "" if verdict == PASS else result.reason)
                for result in column.run.results
                if statement in result.case.statements
                for verdict in [statement_verdict(result, statement)]
            )
            verdict = max((verdict for _, verdict, _ in cases), key=RANK.__getitem__, default=None)
            cells.append(Cell(verdict, cases))
        rows.append(Row(statement, section_of(statement, rules), rules.get(statement), tuple(cells)))
    return Matrix(columns, tuple(rows))


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
    lines += table(
        ("Statement", "Section", "Level", *(inline(c.label) for c in matrix.columns)),
        (
            (row.statement, row.section, row.rule.level if row.rule else "-", *(cell.text for cell in row.cells))
            for row in matrix.rows
        ),
    )
    failing = [(column, result) for column in matrix.columns for result in column.failures[:MAX_LISTED]]
    if failing:
        lines += ["", "## Failing cases", ""]
        lines += [
            f"- {inline(c.label)}: {code(r.case.id)} ({prose(r.case.title)}): {inline(r.reason)}" for c, r in failing
        ]
        for column in matrix.columns:
            lines += left_out(MAX_LISTED, len(column.failures), f"failing cases of {inline(column.label)}", WHOLE_IN)
    return "\n".join(lines) + "\n"


def matrix_html(matrix: Matrix) -> str:
    """A self-contained page: inline CSS, no scripts, no external assets."""
    return _environment().get_template("matrix.html.j2").render(matrix=matrix, legend=LEGEND, verdicts=VERDICTS)


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("mqttaudit.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["printable"] = printable
    environment.filters["peer"] = peer_text
    environment.globals["max_listed"] = MAX_LISTED
    return environment


def peer_text(value: object) -> str:
    """A peer's value as the matrix shows it: cut, every character printable."""
    return shown(value, whole_in=WHOLE_IN)
