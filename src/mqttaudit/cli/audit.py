"""``mqttaudit audit PATH... --out DIR``: audit pcap/pcapng captures on Spark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .exits import CannotRun, Incomplete, exit_status_help
from .options import output_options
from .progress import audit_progress
from .terminal import echo_lines, printable_line

if TYPE_CHECKING:
    from mqttaudit.capture.tls import KeyLog


def _ports(text: str) -> list[int]:
    try:
        ports = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of ports") from exc
    if not ports or any(not 0 < port < 65536 for port in ports):
        raise click.BadParameter(f"{text!r}: ports are 1 to 65535")
    return ports


@click.command(
    "audit",
    epilog=exit_status_help(
        findings="findings: a MUST-level violation or a routing finding",
        incomplete="incomplete: no MQTT connection was found in the captures, or the spark:// master cannot be reached",
    ),
)
@click.argument("paths", nargs=-1, required=True)
@output_options("mqttaudit-audit", "The Parquet tables, summary.json and the reports")
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option(
    "--ports",
    default=None,
    help="Only flows on these TCP ports (comma-separated); by default MQTT is recognised on any port.",
)
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0.0),
    default=5.0,
    show_default=True,
    help="Seconds a side may take to answer or close, and a broker to deliver.",
)
@click.option(
    "--chunk-mb", type=click.IntRange(min=1), default=64, show_default=True, help="Capture bytes per Spark task."
)
@click.option(
    "--keylog",
    "keylog_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A TLS key log (NSS format: SSLKEYLOGFILE, ssl.SSLContext.keylog_filename): the TLS 1.2 and 1.3 "
    "connections whose secrets it holds are decrypted and audited. Needs mqttaudit[tls].",
)
@click.option("-v", "--verbose", is_flag=True, help="Show Spark's own messages (start-up notices, warnings).")
def audit_command(
    paths: tuple[str, ...],
    out_dir: Path,
    force: bool,
    master: str,
    ports: str | None,
    tolerance: float,
    chunk_mb: int,
    keylog_path: Path | None,
    verbose: bool,
) -> int:
    """Audit captures (files, folders, globs): every packet decoded strictly in both directions, every connection
    judged, routing replayed per broker; Parquet tables, summary.json, report.html and findings.md in --out.
    Exit status 1 when there are MUST-level violations or routing findings, 4 when no MQTT connection was found."""
    from mqttaudit.extras import MissingExtra, require
    from mqttaudit.pipeline.keylog import KeyLogFile
    from mqttaudit.pipeline.sources import AuditInputError
    from mqttaudit.report.output_dir import OutputDirError, check_output_dir

    try:  # an --out that cannot be used is refused before anything is read (run_audit checks it again, by name)
        check_output_dir(out_dir, force=force)
    except OutputDirError as exc:
        raise CannotRun(printable_line(str(exc))) from exc
    # The key log is checked here; the executors read it themselves (its secrets are never shipped to them).
    keylog = None
    if keylog_path is not None:
        read_keylog(keylog_path)
        keylog = KeyLogFile.at(str(keylog_path))
    try:
        require("spark")
    except MissingExtra as exc:
        raise CannotRun(str(exc)) from exc
    from mqttaudit.pipeline.audit import run_audit
    from mqttaudit.pipeline.spark import SparkEnvironmentError, SparkMasterUnreachable

    try:
        with audit_progress() as progress:
            result = run_audit(
                list(paths),
                out_dir,
                master=master,
                ports=None if ports is None else _ports(ports),
                tolerance=tolerance,
                chunk_bytes=chunk_mb * 1024 * 1024,
                progress=progress.phase,
                tasks=progress.tasks,
                verbose=verbose,
                force=force,
                keylog=keylog,
            )
    except (AuditInputError, OutputDirError, SparkEnvironmentError) as exc:
        raise CannotRun(printable_line(str(exc))) from exc
    except SparkMasterUnreachable as exc:
        raise Incomplete(f"{printable_line(str(exc))}: nothing was audited") from exc
    echo_lines(summarize(result.summary))
    click.echo(f"report: {printable_line(str(out_dir / 'report.html'))}")
    if result.incomplete:
        raise Incomplete(nothing_found(result.summary))
    return result.exit_status


def read_keylog(path: Path) -> KeyLog:
    """The key log at ``path``, or a usage error: cryptography missing, a file that cannot be read, or no usable
    line. Lines that cannot be used are named by number on standard error; no secret is ever shown."""
    from mqttaudit import option_files
    from mqttaudit.capture.tls import KeyLog, TlsUnavailable, require_cryptography
    from mqttaudit.option_files import OptionFileError, read_capped

    try:
        require_cryptography()
    except TlsUnavailable as exc:
        raise click.UsageError(f"--keylog: {exc}") from exc
    try:
        text = read_capped(path, option="--keylog", cap=option_files.KEYLOG).decode("utf-8", errors="replace")
    except OptionFileError as exc:
        raise click.UsageError(printable_line(str(exc))) from exc
    keylog = KeyLog.parse(text)
    for problem in keylog.problems[:MAX_KEYLOG_PROBLEMS]:
        click.echo(f"key log: {problem} (skipped)", err=True)
    if len(keylog.problems) > MAX_KEYLOG_PROBLEMS:
        click.echo(f"key log: {len(keylog.problems) - MAX_KEYLOG_PROBLEMS} more line(s) skipped", err=True)
    if not keylog.usable_lines:
        raise click.BadParameter(
            f"{printable_line(str(path))} holds no usable key log line (CLIENT_RANDOM, or the TLS 1.3 traffic secrets)",
            param_hint="--keylog",
        )
    return keylog


#: Key log lines that cannot be used named on standard error at most.
MAX_KEYLOG_PROBLEMS = 20


def nothing_found(summary: dict[str, object]) -> str:
    """Why an audit judged nothing, in one line, naming what it saw (see ``pipeline.detection.no_mqtt_message``)."""
    from mqttaudit.pipeline.detection import no_mqtt_message

    said = no_mqtt_message(summary)
    assert said is not None  # called only when no connection was judged
    errors = summary.get("errors") or []
    assert isinstance(errors, list)
    return said + (f" ({len(errors)} capture error(s), listed above)" if errors else "")


def _policy_lines(summary: dict[str, object]) -> list[str]:
    """The caps and policies that left bytes out of judgement in this audit, when they did."""
    lines = []
    cap = summary.get("malformed_cap")
    if isinstance(cap, dict) and cap.get("connections_capped"):
        lines.append(
            f"{cap['connections_capped']} connection(s) reached the cap of {cap['per_connection']} malformed packets "
            f"kept per connection: {cap['bytes_not_decoded']} bytes after it not decoded"
        )
    conflicts = summary.get("conflicting_retransmissions")
    if isinstance(conflicts, dict) and conflicts.get("ranges"):
        lines.append(
            f"{conflicts['ranges']} conflicting retransmission(s) ({conflicts['bytes']} bytes that arrived twice with "
            "different content): the packets they touch are not judged"
        )
    return lines


def summarize(summary: dict[str, object]) -> str:
    counts = summary["counts"]
    assert isinstance(counts, dict)
    byte_account = summary["bytes"]
    assert isinstance(byte_account, dict)
    actors = counts["violations_by_actor"]
    lines = [
        f"{counts['connections']} connection(s) in {counts['flows']} flow(s), {counts['packets']} packets, "
        f"{byte_account['mqtt_bytes']} bytes of MQTT streams"
        + ("" if byte_account["reconciles"] else " (the byte account does NOT reconcile)"),
        f"{counts['violations']} violation(s) ({counts['violations_must']} MUST): "
        + ", ".join(f"{count} by {actor}s" for actor, count in sorted(actors.items()))
        if counts["violations"]
        else "no violations",
        f"{counts['routing_findings']} routing finding(s)"
        + (
            ": " + ", ".join(f"{n} {kind}" for kind, n in sorted(counts["routing_by_kind"].items()))
            if counts["routing_findings"]
            else ""
        ),
    ]
    lines += _version_lines(summary)
    lines += _detection_lines(summary)
    lines += _policy_lines(summary)
    errors = summary.get("errors") or []
    assert isinstance(errors, list)
    lines += [
        # Each error is one line, whatever a file name or a reason holds (a newline would forge a line of its own).
        printable_line(f"capture error: {e['capture']} at byte {e.get('offset')}: {e.get('reason') or e.get('detail')}")
        for e in errors
    ]
    return "\n".join(lines)


def _version_lines(summary: dict[str, object]) -> list[str]:
    """How many connections spoke each version and how each was handled; what could not be judged, by reason."""
    versions = summary.get("versions")
    undecided = summary.get("not_assessable")
    lines = []
    if isinstance(versions, dict):
        lines += [
            f"MQTT {version}: {entry['connections']} connection(s), {entry['handling']}"
            if version[0].isdigit()
            else f"version {version}: {entry['connections']} connection(s), {entry['handling']}"
            for version, entry in versions.items()
        ]
    if isinstance(undecided, dict) and undecided.get("rows"):
        tags = ", ".join(f"{n} {tag or 'other'}" for tag, n in sorted(undecided["by_tag"].items(), key=lambda i: -i[1]))
        lines.append(f"{undecided['rows']} rule instance(s) not assessable: {tags}")
    return lines


def _detection_lines(summary: dict[str, object]) -> list[str]:
    """Which ports were audited as MQTT and why, and the TCP traffic left out."""
    detection = summary.get("detection")
    if not isinstance(detection, dict):
        return []
    ports = [f"{entry['port']} ({entry['how']}, {entry['connections']} connection(s))" for entry in detection["ports"]]
    lines = ["MQTT on port(s) " + ", ".join(ports)] if ports else []
    other = detection["other_tcp"]
    if other["frames"]:
        named = ", ".join(" or ".join(str(port) for port in entry["ports"]) for entry in other["ports"][:3])
        lines.append(
            f"other TCP, not judged: {other['frames']} frame(s) in {other['flows']} flow(s) on port(s) {named}"
        )
    return lines
