"""Reports of probe runs: ``findings.json``, ``findings.md`` and ``junit.xml`` for one broker, and the
conformance matrix (``matrix.md``, ``matrix.html``) across brokers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..probe.runner import ProbeRun
from ..spec import Catalogue
from .audit_data import AuditReportData
from .audit_html import audit_html
from .audit_markdown import audit_to_markdown
from .audit_reports import write_audit_reports
from .junit import junit_bytes, probe_run_to_junit
from .matrix import Matrix, build_matrix, matrix_html, matrix_markdown, statement_verdict
from .probe_json import probe_run_to_json
from .probe_markdown import probe_run_to_markdown

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
    "probe_run_to_json",
    "probe_run_to_junit",
    "probe_run_to_markdown",
    "statement_verdict",
    "write_audit_reports",
    "write_matrix",
    "write_probe_reports",
]


#: The entries a probe run writes into its folder.
PROBE_REPORTS = ("findings.json", "findings.md", "junit.xml")
#: The entries a matrix writes beside each broker's folder.
MATRIX_REPORTS = ("matrix.md", "matrix.html")


def write_probe_reports(run: ProbeRun, out_dir: Path | str, catalogue: Catalogue | None = None) -> list[Path]:
    """Writes ``findings.json``, ``findings.md`` and ``junit.xml`` into ``out_dir`` (created if needed)."""
    out = _directory(out_dir)
    paths = [out / name for name in PROBE_REPORTS]
    paths[0].write_text(json.dumps(probe_run_to_json(run, catalogue), indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(probe_run_to_markdown(run, catalogue), encoding="utf-8")
    paths[2].write_bytes(junit_bytes(probe_run_to_junit(run, catalogue)))
    return paths


def write_matrix(
    runs: Sequence[tuple[str, ProbeRun]], out_dir: Path | str, catalogue: Catalogue | None = None
) -> list[Path]:
    """Writes ``matrix.md`` and ``matrix.html`` for ``(label, run)`` pairs, one broker each."""
    out = _directory(out_dir)
    matrix = build_matrix(runs, catalogue)
    paths = [out / name for name in MATRIX_REPORTS]
    paths[0].write_text(matrix_markdown(matrix), encoding="utf-8")
    paths[1].write_text(matrix_html(matrix), encoding="utf-8")
    return paths


def _directory(out_dir: Path | str) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out
