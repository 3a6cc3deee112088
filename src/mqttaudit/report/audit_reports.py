"""The reports of ``mqttaudit audit``: ``report.html`` and ``findings.md``, written from the data the driver
collected (see :class:`~mqttaudit.report.audit_data.AuditReportData`)."""

from __future__ import annotations

from pathlib import Path

from ..spec import Catalogue
from .audit_data import AuditReportData
from .audit_html import audit_html
from .audit_markdown import audit_to_markdown


def write_audit_reports(out_dir: Path | str, data: AuditReportData, catalogue: Catalogue | None = None) -> list[Path]:
    """Writes ``report.html`` and ``findings.md`` into ``out_dir`` (created if needed) and returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "report.html", out / "findings.md"]
    paths[0].write_text(audit_html(data, catalogue), encoding="utf-8")
    paths[1].write_text(audit_to_markdown(data, catalogue), encoding="utf-8")
    return paths
