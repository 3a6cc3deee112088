"""The reports of ``mqttaudit audit``: ``report.html`` and ``findings.md``, written from the data the driver
collected (see :class:`~mqttaudit.report.audit_data.AuditReportData`); and, when ``out_dir`` holds the audit's
tables, ``findings.jsonl`` and ``junit.xml``, written in one pass over the finding tables."""

from __future__ import annotations

from pathlib import Path

from ..spec import Catalogue
from .audit_data import AuditReportData
from .audit_html import audit_html
from .audit_jsonl import write_jsonl
from .audit_junit import FindingTally, audit_to_junit, junit_document
from .audit_markdown import audit_to_markdown
from .audit_tables import finding_rows, tables_present


def write_audit_reports(
    out_dir: Path | str, data: AuditReportData, catalogue: Catalogue | None = None, tables: Path | str | None = None
) -> list[Path]:
    """Writes ``report.html`` and ``findings.md`` into ``out_dir`` (created if needed), then ``findings.jsonl`` and
    ``junit.xml`` if it holds the ``violations`` and ``routing_findings`` tables (or ``tables``, a local folder or a
    URL, does); returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.html", out / "findings.md"]
    paths[0].write_text(audit_html(data, catalogue), encoding="utf-8")
    paths[1].write_text(audit_to_markdown(data, catalogue), encoding="utf-8")
    if tables_present(out if tables is None else tables):
        paths += write_finding_outputs(out, data, catalogue, tables)
    return paths


def write_finding_outputs(
    out_dir: Path, data: AuditReportData, catalogue: Catalogue | None = None, tables: Path | str | None = None
) -> list[Path]:
    """``findings.jsonl`` (every violation and routing finding, streamed from the tables of ``out_dir``, or of
    ``tables``) and ``junit.xml`` (counted as they pass); returns their paths."""
    tally = FindingTally()
    jsonl, junit = out_dir / "findings.jsonl", out_dir / "junit.xml"
    write_jsonl(jsonl, finding_rows(out_dir if tables is None else tables), tally.add)
    captures = [capture["file"] for capture in data.summary.get("captures", [])]
    junit.write_bytes(junit_document(audit_to_junit(tally, catalogue, captures=captures)))
    return [jsonl, junit]
