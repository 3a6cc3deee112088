"""Reports of probe runs: ``findings.json``, ``findings.md``, ``junit.xml``, ``report.html`` and the
``reproducers/`` scripts for one broker, and the conformance matrix (``matrix.md``, ``matrix.html``) across
brokers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..probe.runner import ProbeRun
from ..probe.violations import other_violations
from ..spec import Catalogue
from .audit_data import AuditReportData
from .audit_html import audit_html
from .audit_markdown import audit_to_markdown
from .audit_reports import write_audit_reports
from .junit import junit_bytes, probe_run_to_junit
from .matrix import Matrix, build_matrix, matrix_html, matrix_markdown, statement_verdict
from .probe_html import probe_html
from .probe_json import probe_run_to_json
from .probe_markdown import probe_run_to_markdown
from .reproducer import FOLDER as REPRODUCERS
from .reproducer import reproducers, write_reproducers
from .statements import default_catalogue

__all__ = [
    "PROBE_REPORTS",
    "AuditReportData",
    "Matrix",
    "audit_html",
    "audit_to_markdown",
    "build_matrix",
    "junit_bytes",
    "matrix_html",
    "matrix_markdown",
    "probe_html",
    "probe_run_to_json",
    "probe_run_to_junit",
    "probe_run_to_markdown",
    "statement_verdict",
    "write_audit_reports",
    "write_matrix",
    "write_probe_reports",
]


#: The entries a probe run writes into its folder (``reproducers/`` is a folder of scripts).
PROBE_REPORTS = ("findings.json", "findings.md", "junit.xml", "report.html", REPRODUCERS)
#: The entries a matrix writes beside each broker's folder.
MATRIX_REPORTS = ("matrix.md", "matrix.html")


def write_probe_reports(run: ProbeRun, out_dir: Path | str, catalogue: Catalogue | None = None) -> list[Path]:
    """Writes ``findings.json``, ``findings.md``, ``junit.xml``, ``report.html`` and, for every case that carries a
    finding, its reproducer script under ``reproducers/`` into ``out_dir`` (created if needed). Returns the
    reports' paths, then the folder of the scripts when there is one."""
    out = _directory(out_dir)
    paths = [out / name for name in PROBE_REPORTS[:-1]]
    paths[0].write_text(json.dumps(probe_run_to_json(run, catalogue), indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(probe_run_to_markdown(run, catalogue), encoding="utf-8")
    paths[2].write_bytes(junit_bytes(probe_run_to_junit(run, catalogue)))
    paths[3].write_text(probe_html(run, catalogue), encoding="utf-8")
    rules = default_catalogue(catalogue)
    found = reproducers(run, [violation.first_case for violation in other_violations(run, rules)])
    if write_reproducers(found, out):
        paths.append(out / REPRODUCERS)
    return paths


def write_matrix(
    runs: Sequence[tuple[str, ProbeRun]],
    out_dir: Path | str,
    catalogue: Catalogue | None = None,
    *,
    only_differing: bool = False,
    folders: Sequence[str] = (),
) -> list[Path]:
    """Writes ``matrix.md`` and ``matrix.html`` for ``(label, run)`` pairs, one broker each. ``only_differing``:
    matrix.md shows only the statements whose verdicts differ between the brokers, and matrix.html starts with that
    filter on; ``folders``: each broker's report folder relative to ``out_dir``, which matrix.html links to."""
    out = _directory(out_dir)
    matrix = build_matrix(runs, catalogue, only_differing=only_differing, folders=folders)
    paths = [out / name for name in MATRIX_REPORTS]
    paths[0].write_text(matrix_markdown(matrix), encoding="utf-8")
    paths[1].write_text(matrix_html(matrix), encoding="utf-8")
    return paths


def _directory(out_dir: Path | str) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out
