"""Reports of a serve run: ``findings.json`` and ``findings.md``, one section per client connection and one per
finding (statement, side, expected behaviour, the bytes that show it), and the statement coverage per version.

What a client broke is a finding of the client; what the broker broke is a defect of mqttaudit serve and is
reported apart, never as the client's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final
from xml.etree import ElementTree as ET

from ..judge import Finding
from ..probe.runner import finding_to_dict
from ..serve.coverage import NOT_EXERCISED, VERSIONS, Coverage, coverage
from ..serve.scenarios import SCENARIOS
from ..serve.server import ServedClient, ServeRun
from ..spec import load_catalogue
from .audit_html import html_environment
from .evidence import Budget, printable, transcript
from .junit import junit_bytes
from .probe_json import leniency_json
from .reproducer import FOLDER
from .serve_reproducer import write_serve_reproducers
from .statements import rule_json, rule_text

#: The entries a serve run writes into its folder (``reproducers/`` only when a client broke a statement).
SERVE_REPORTS: Final = ("findings.json", "findings.md", "junit.xml", "report.html", FOLDER)


def write_serve_reports(run: ServeRun, out_dir: Path | str) -> list[Path]:
    """findings.json, findings.md, junit.xml, report.html and a reproducer per client connection with a finding."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in SERVE_REPORTS[:-1]]
    paths[0].write_text(json.dumps(serve_run_to_json(run), indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(serve_run_to_markdown(run), encoding="utf-8")
    paths[2].write_bytes(junit_bytes(serve_run_to_junit(run)))
    paths[3].write_text(serve_html(run), encoding="utf-8")
    folder = write_serve_reproducers(run, out)
    return paths if folder is None else [*paths, folder]


class _Page:
    """What serve.html.j2 shows, computed once."""

    def __init__(self, run: ServeRun) -> None:
        self.run = run
        self.levels = ", ".join(_level(level) for level in run.levels)
        self.findings = sum(len(c.client_findings) for c in run.clients)
        self.defects = sum(len(c.server_findings) for c in run.clients)
        self.coverages = coverages(run)
        self.scenario_summary = SCENARIOS[run.scenario].summary if run.scenario else ""
        self._budget = Budget()

    def statement(self, rule: str, version: str) -> str:
        return rule_text(rule, load_catalogue(version or "3.1.1")).split(": ", 1)[0]

    def evidence(self, client: ServedClient) -> str:
        return transcript([{"name": client.name, "client_id": client.client_id, "events": client.events}], self._budget)


def serve_html(run: ServeRun) -> str:
    """report.html: one self-contained page (inline CSS, no script), escaped by the template environment."""
    return html_environment().get_template("serve.html.j2").render(view=_Page(run))


def serve_run_to_junit(run: ServeRun) -> ET.Element:
    """A ``<testsuite>`` with one test case per client connection: a ``<failure>`` per statement the client broke,
    an ``<error>`` for a defect of mqttaudit serve; a connection that never sent a CONNECT is skipped."""
    failures = sum(1 for c in run.clients if c.client_findings)
    errors = sum(1 for c in run.clients if c.server_findings or c.crash)
    skipped = sum(1 for c in run.clients if not c.version)
    suite = ET.Element(
        "testsuite",
        {
            "name": printable(f"mqttaudit serve {run.listen}"),
            "tests": str(len(run.clients)),
            "failures": str(failures),
            "errors": str(errors),
            "skipped": str(skipped),
            "time": f"{run.duration:.3f}",
            "timestamp": printable(run.started),
        },
    )
    for client in run.clients:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"mqttaudit.serve.mqtt-{client.version or 'unknown'}",
                "name": printable(f"{client.name} {client.client_id!r} ({client.peer})"),
                "time": f"{(client.closed or client.opened) - client.opened:.3f}",
            },
        )
        if not client.version:
            ET.SubElement(case, "skipped", {"message": "no CONNECT: nothing of the client was judged"})
        for finding in client.client_findings:
            failure = ET.SubElement(
                case, "failure", {"message": printable(f"{finding.rule}: {finding.detail}"), "type": str(finding.rule)}
            )
            failure.text = printable(f"expected: {finding.expected}")
        for finding in client.server_findings:
            ET.SubElement(
                case, "error", {"message": printable(f"a defect of mqttaudit serve: {finding.rule}: {finding.detail}")}
            )
        if client.crash:
            error = ET.SubElement(case, "error", {"message": "internal error of mqttaudit serve"})
            error.text = printable(client.crash)
    return suite


def coverages(run: ServeRun) -> list[Coverage]:
    """The coverage of each version some client spoke."""
    spoken = {client.version for client in run.clients}
    return [coverage(run.clients, version) for version in VERSIONS if version in spoken]


def serve_run_to_json(run: ServeRun) -> dict[str, Any]:
    limits = run.limits
    return {
        "tool": "mqttaudit serve",
        "listen": run.listen,
        "started": run.started,
        "duration": round(run.duration, 3),
        "protocol_levels": list(run.levels),
        "scenario": run.scenario,
        "limits": {
            "receive_maximum": limits.receive_maximum,
            "topic_alias_maximum": limits.topic_alias_maximum,
            "maximum_packet_size": limits.maximum_packet_size,
            "queued_messages": limits.queued_messages,
        },
        "summary": {
            "clients": len(run.clients),
            "clients_with_findings": sum(1 for c in run.clients if c.client_findings),
            "client_findings": sum(len(c.client_findings) for c in run.clients),
            "server_findings": sum(len(c.server_findings) for c in run.clients),
            "internal_errors": sum(1 for c in run.clients if c.crash),
        },
        "clients": [_client_json(client) for client in run.clients],
        "coverage": [_coverage_json(c) for c in coverages(run)],
    }


def _client_json(client: ServedClient) -> dict[str, Any]:
    catalogue = load_catalogue(client.version or "3.1.1")
    judgement = client.judgement
    return {
        "name": client.name,
        "peer": client.peer,
        "client_id": client.client_id,
        "version": client.version or None,
        "opened": round(client.opened, 6),
        "closed": None if client.closed is None else round(client.closed, 6),
        "ending": client.ending,
        "internal_error": client.crash,
        "findings": [_finding_json(f, catalogue) for f in client.client_findings],
        "server_findings": [_finding_json(f, catalogue) for f in client.server_findings],
        "provoked": [_finding_json(f, catalogue) for f in client.provoked_findings],
        "reaction": client.reaction or None,
        "lenient": [] if judgement is None else [leniency_json(row, catalogue) for row in judgement.lenient],
        "not_assessable": {} if judgement is None else dict(sorted(judgement.not_assessable.items())),
        "events": client.events,
        "events_omitted": client.events_omitted,
    }


def _finding_json(finding: Finding, catalogue: Any) -> dict[str, Any]:
    """A finding as the probe's findings.json holds one, with its statement and the event that called for it."""
    return {**finding_to_dict(finding), "cause": finding.cause, "statement": rule_json(finding.rule, catalogue)}


def _coverage_json(c: Coverage) -> dict[str, Any]:
    return {
        "version": c.version,
        "statements": len(c.statements),
        "exercised": c.exercised,
        "counts": {verdict: c.count(verdict) for verdict in ("pass", "fail", "not assessable", NOT_EXERCISED)},
        "verdicts": [
            {"statement": s.statement, "level": s.level, "verdict": s.verdict, "connections": list(s.connections)}
            | ({"reason": s.reason} if s.reason else {})
            for s in c.statements
        ],
    }


def serve_run_to_markdown(run: ServeRun) -> str:
    findings = sum(len(c.client_findings) for c in run.clients)
    defects = sum(len(c.server_findings) for c in run.clients)
    lines = [
        "# mqttaudit serve: client conformance",
        "",
        f"Listened on {run.listen} for {run.duration:.1f} s (MQTT {', '.join(_level(v) for v in run.levels)}); "
        f"{len(run.clients)} client connection(s), {findings} client finding(s).",
        "",
    ]
    if run.scenario:
        scenario = SCENARIOS[run.scenario]
        lines += [f"Scenario `{scenario.name}`: {scenario.summary}.", ""]
        if scenario.provoked:
            breaks = ", ".join(map(str, scenario.provoked))
            lines += [f"It breaks {breaks} on purpose: those findings against the broker are its stimulus.", ""]
    if defects:
        lines += [
            f"**{defects} finding(s) against the broker itself: defects of mqttaudit serve, not of the clients.**",
            "",
        ]
    if not run.clients:
        lines += ["No client connected: nothing was judged.", ""]
    for cov in coverages(run):
        lines += [
            f"Statement coverage, MQTT {cov.version}: {cov.exercised} of {len(cov.statements)} client statements "
            f"exercised ({cov.count('pass')} pass, {cov.count('fail')} fail, {cov.count('not assessable')} not "
            "assessable).",
            "",
        ]
    for cov in coverages(run):
        exercised = [row for row in cov.statements if row.verdict != NOT_EXERCISED]
        if exercised:
            lines += [
                f"### Client statements exercised, MQTT {cov.version}",
                "",
                "| statement | verdict | |",
                "| --- | --- | --- |",
            ]
            lines += [
                f"| {row.statement} | {row.verdict} | {printable(row.reason or row.summary).replace('|', '/')} |"
                for row in exercised
            ]
            lines.append("")
    for client in run.clients:
        lines += _client_section(client)
    return "\n".join(lines).rstrip("\n") + "\n"


def _level(level: int) -> str:
    return "5.0" if level == 5 else "3.1.1"


def _client_section(client: ServedClient) -> list[str]:
    catalogue = load_catalogue(client.version or "3.1.1")
    title = f"{client.name} ({printable(client.peer)})"
    ident = f", client id {printable(client.client_id)!r}" if client.client_id else ""
    found = client.client_findings
    lines = [
        f"## {title}",
        "",
        f"MQTT {client.version or 'unknown'}{ident}; {client.ending or 'open'}; {len(found)} finding(s).",
        "",
    ]
    if client.crash:
        lines += [
            "**The connection ended on an internal error of mqttaudit serve (a bug):**",
            "",
            "```",
            *(printable(line) for line in client.crash.rstrip().splitlines()),
            "```",
            "",
        ]
    for finding in [*found, *client.server_findings]:
        against = "the client" if finding.side.value == "client" else "the broker (a defect of mqttaudit serve)"
        lines += [
            f"### {finding.rule}: {printable(finding.detail)}",
            "",
            f"- Statement: {rule_text(finding.rule, catalogue)}",
            *([f"- The same act also breaks: {', '.join(finding.also)}"] if finding.also else []),
            f"- Broken by: {against}, event [{finding.event}] at {finding.time:.3f} s",
            f"- Expected: {printable(finding.expected)}",
            "",
        ]
    if found or client.server_findings:
        connection = {"name": client.name, "client_id": client.client_id, "events": client.events}
        lines += ["Evidence:", "", "```", transcript([connection]), "```", ""]
    return lines
