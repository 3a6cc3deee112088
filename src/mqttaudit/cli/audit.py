"""``mqttaudit audit PATH... --out DIR``: audit pcap/pcapng captures on Spark (``-`` reads one from standard
input)."""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mqttaudit.capture import budgets
from mqttaudit.extras import missing
from mqttaudit.locations import join
from mqttaudit.pipeline.engines import AUTO, ENGINES, LOCAL_LIMIT_BYTES, LOCAL_MAX_BYTES, MIB, SPARK, LocalEngineLimit

from .exits import EXIT_INCOMPLETE, EXIT_OK, CannotRun, Incomplete, exit_status_help
from .options import Command, format_option, output_options
from .progress import audit_progress
from .terminal import echo_lines, printable_line

if TYPE_CHECKING:
    from mqttaudit.pipeline.audit import AuditResult
    from mqttaudit.pipeline.keylog import KeyLogFile
    from mqttaudit.pipeline.sources import Spooled

#: MiB of standard input spooled at most by default (``--stdin-max-mb``): past them reading stops, and the capture
#: is audited as one cut short at that byte.
STDIN_MAX_MB = 4096


def _ports(text: str) -> list[int]:
    try:
        ports = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of ports") from exc
    if not ports or any(not 0 < port < 65536 for port in ports):
        raise click.BadParameter(f"{text!r}: ports are 1 to 65535")
    return ports


def budget_option(flag: str, least: int, default: int, says: str) -> Callable[[Command], Command]:
    """A budget's flag: bytes, ``default`` unless given, and a usage error (exit 2) below ``least``, its floor."""
    return click.option(flag, type=click.IntRange(min=least), default=default, show_default=True, help=says)


@click.command(
    "audit",
    epilog=exit_status_help(
        findings="findings: a MUST-level violation or a routing finding",
        incomplete="incomplete: no MQTT connection was found in the captures, a capture was not read whole "
        "(cut short inside a record, a corrupt record, standard input past --stdin-max-mb), two files hold a "
        "connection with different bytes (conflicting copies), a budget left bytes unjudged (--max-message-bytes, "
        "--max-out-of-order-bytes, --max-flow-bytes), or the spark:// master cannot be reached",
    ),
)
@click.argument("paths", nargs=-1, required=True)
@output_options("mqttaudit-audit", "The Parquet tables, summary.json and the reports", urls=True)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default=AUTO,
    show_default=True,
    help=f"Where the stages run: 'spark' on --master; 'local' in this process, without Spark (no JVM: an audit of "
    f"a few MB takes seconds, not the half minute Spark's start costs); 'auto' local when --master is local "
    f"(local, local[N]) and the captures hold at most {LOCAL_MAX_BYTES // MIB} MiB (and --local-limit-mb), else "
    f"spark.",
)
@click.option(
    "--local-limit-mb",
    type=click.IntRange(min=1),
    default=LOCAL_LIMIT_BYTES // MIB,
    show_default=True,
    help="MiB of captures at most for the local engine, which holds every MQTT segment of them in memory at once "
    "(some 1.3 GB at 58 MB of capture): past them '--engine local' is a usage error (exit 2) naming --engine "
    "spark, and 'auto' picks spark.",
)
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
    "--late-window",
    type=click.FloatRange(min=0.0),
    default=60.0,
    show_default=True,
    help="Seconds past --tolerance a delivery still counts as the copy of its message; a later copy is matched to "
    "none (neither a leak nor a duplicate), and a message it would have copied is missing. The replay holds each "
    "message this long past its deadline, and no longer.",
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
@click.option(
    "--stdin-max-mb",
    type=click.IntRange(min=1),
    default=STDIN_MAX_MB,
    show_default=True,
    help="With '-' (a capture on standard input): MiB spooled at most into a temporary file (TMPDIR); past them "
    "reading stops, and the audit says so and exits 4.",
)
@budget_option(
    "--max-message-bytes",
    budgets.MIN_MAX_MESSAGE_BYTES,
    budgets.DEFAULT_MAX_MESSAGE_BYTES,
    "Per-message budget: a larger MQTT packet is skipped as it arrives, never buffered; its first bytes and "
    "declared size are kept, its bytes a not-assessable record.",
)
@budget_option(
    "--max-out-of-order-bytes",
    budgets.MIN_MAX_OUT_OF_ORDER_BYTES,
    budgets.DEFAULT_MAX_OUT_OF_ORDER_BYTES,
    f"Per-direction budget of bytes held behind a hole (each piece costs {budgets.PIECE_COST} more); at it the "
    "oldest holes are declared gaps.",
)
@budget_option(
    "--max-flow-bytes",
    budgets.MIN_MAX_FLOW_BYTES,
    budgets.DEFAULT_MAX_FLOW_BYTES,
    "Per-flow (and per-task) budget of captured TCP payload held; past it the flow stops and the rest is a "
    "not-assessable record. A judging task's worker peaks at about 170 MB plus twice this.",
)
@format_option("the summary as one JSON document on standard output (progress and warnings stay on standard error).")
@click.option("-v", "--verbose", is_flag=True, help="Show Spark's own messages (start-up notices, warnings).")
def audit_command(
    paths: tuple[str, ...],
    out_dir: Path | str,
    force: bool,
    master: str,
    engine: str,
    local_limit_mb: int,
    ports: str | None,
    tolerance: float,
    late_window: float,
    chunk_mb: int,
    keylog_path: Path | None,
    stdin_max_mb: int,
    max_message_bytes: int,
    max_out_of_order_bytes: int,
    max_flow_bytes: int,
    output_format: str,
    verbose: bool,
) -> int:
    """Audit captures (files, folders, globs; '-' reads one from standard input): every packet decoded strictly in
    both directions, every connection judged, routing replayed per broker; Parquet tables, summary.json,
    report.html, findings.md, findings.jsonl and junit.xml in --out. Exit status 1 when there are MUST-level
    violations or routing findings, else 4 when no MQTT connection was found, a capture was not read whole or a
    budget left bytes unjudged."""
    from mqttaudit.extras import MissingExtra, require
    from mqttaudit.pipeline.sources import AuditInputError
    from mqttaudit.report.output_dir import OutputDirError
    from mqttaudit.report.remote_output import check_output

    try:  # an --out that cannot be used is refused before anything is read (run_audit checks it again, by name)
        check_output(out_dir, force=force)
    except OutputDirError as exc:
        raise CannotRun(printable_line(str(exc))) from exc
    # The key log is checked here; the executors read it themselves (its secrets are never shipped to them).
    keylog = None if keylog_path is None else read_keylog(keylog_path)
    try:  # the local engine needs pyarrow alone (the spark extra's); Spark's modules are checked when it is chosen
        require("spark") if engine == SPARK else importlib.import_module("pyarrow")
    except MissingExtra as exc:
        raise CannotRun(str(exc)) from exc
    except ImportError as exc:
        raise CannotRun(str(missing("spark", exc))) from exc
    from mqttaudit.pipeline.audit import run_audit
    from mqttaudit.pipeline.spark import SparkEnvironmentError, SparkMasterUnreachable

    try:
        with (
            standard_input(paths, master, stdin_max_mb * 1024 * 1024) as (locations, spooled),
            audit_progress() as progress,
        ):
            result = run_audit(
                locations,
                out_dir,
                master=master,
                engine=engine,
                local_limit_bytes=local_limit_mb * MIB,
                ports=None if ports is None else _ports(ports),
                tolerance=tolerance,
                late_window=late_window,
                chunk_bytes=chunk_mb * 1024 * 1024,
                progress=progress.phase,
                tasks=progress.tasks,
                verbose=verbose,
                force=force,
                keylog=keylog,
                budgets=budgets.Budgets(max_message_bytes, max_out_of_order_bytes, max_flow_bytes),
            )
    except (AuditInputError, OutputDirError, SparkEnvironmentError, LocalEngineLimit) as exc:
        raise CannotRun(printable_line(str(exc))) from exc
    except SparkMasterUnreachable as exc:
        raise Incomplete(f"{printable_line(str(exc))}: nothing was audited") from exc
    lost = lost_lines(result.summary, spooled)
    for line in lost:  # on standard error, as tshark warns of a capture cut short, whatever the format
        click.echo(printable_line(f"mqttaudit: warning: {line}"), err=True)
    incomplete = nothing_found(result.summary) if result.incomplete else None
    status = result.exit_status
    if spooled is not None and spooled.stopped_at_cap and status == EXIT_OK:
        status = EXIT_INCOMPLETE
    if output_format == "json":
        click.echo(json.dumps(audit_document(result.summary, out_dir, lost, incomplete, status), indent=2))
        if incomplete is not None:
            click.echo(printable_line(f"mqttaudit: incomplete: {incomplete}"), err=True)
        return status
    echo_lines(summarize(result.summary))
    click.echo(f"report: {printable_line(join(out_dir, 'report.html'))}")
    if incomplete is not None:
        raise Incomplete(incomplete)
    if status == EXIT_INCOMPLETE:
        click.echo(f"mqttaudit: incomplete: {'; '.join(incomplete_reasons(result))}", err=True)
    return status


def incomplete_reasons(result: AuditResult) -> list[str]:
    """Why an audit that judged something cannot vouch for all it was given, each with where it is told."""
    reasons = ["a capture was not read whole (see the warnings above)"] if result.cut_short else []
    if result.conflicting_copies:
        reasons.append("two files disagree on a connection's bytes (see the warnings above)")
    reasons += [
        f"the {budget.title} left bytes unjudged ({budget.flag}, see its line above)"
        for budget in result.budgets_applied
    ]
    return reasons


@contextlib.contextmanager
def standard_input(paths: tuple[str, ...], master: str, cap: int) -> Iterator[tuple[list[str], Spooled | None]]:
    """The locations to audit, with ``-`` replaced by a private temporary copy of standard input (at most ``cap``
    bytes; removed when the audit ends, whatever happens), and that copy."""
    from mqttaudit.pipeline.sources import STDIN, AuditInputError, spool

    if STDIN not in paths:
        yield list(paths), None
        return
    if paths.count(STDIN) > 1:
        raise click.UsageError("'-' (standard input) can be named once")
    if not master.startswith("local"):
        raise click.UsageError(
            "'-' (standard input) needs a local master: the executors of a cluster cannot read this machine's "
            "temporary files; put the capture where they read it (hdfs://, s3://) and name it"
        )
    stream = sys.stdin.buffer
    if stream.isatty():
        raise click.UsageError("'-' reads a capture from standard input, which is a terminal: pipe one in")
    folder = Path(tempfile.mkdtemp(prefix="mqttaudit-stdin-"))
    try:
        try:
            spooled = spool(stream, folder, cap)
        except OSError as exc:
            raise AuditInputError(f"standard input cannot be copied to {folder}: {exc.strerror or exc}") from exc
        yield [str(spooled.path) if path == STDIN else path for path in paths], spooled
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def lost_lines(summary: dict[str, Any], spooled: Spooled | None = None) -> list[str]:
    """What of the captures was not read, one line each: where (capture, byte, frame) and what was lost."""
    lines = [
        f"{cut['capture']} is cut short: it ends inside the record at byte {cut['offset']:,} (frame {cut['frame']}), "
        f"{cut['available']:,} of its {cut['needed']:,} bytes present: that frame is not judged, and whatever the "
        "capture would have held after it is lost"
        + (f" (frames 1 to {cut['frame'] - 1} were read)" if cut["frame"] > 1 else " (no frame was read)")
        for cut in summary.get("truncated") or []
    ]
    errors = summary.get("errors") or []
    # Each error is one line, whatever a file name or a reason holds (a newline would forge a line of its own).
    lines += [
        f"capture error: {e['capture']} at byte {e.get('offset')}"
        + (f" (frame {e['frame']})" if e.get("frame") is not None else "")
        + f": {e.get('reason') or e.get('detail')}"
        for e in errors
    ]
    lines += conflicting_copy_lines(summary)
    if spooled is not None and spooled.stopped_at_cap:
        lines.append(
            f"standard input: reading stopped at the bound of {spooled.cap:,} bytes (--stdin-max-mb): the rest of "
            "the capture was not read, and what it held was not judged"
        )
    return [printable_line(line) for line in lines]


def conflicting_copy_lines(summary: dict[str, Any]) -> list[str]:
    """One line per connection two files hold with different bytes (as the summary lists them, then a count)."""
    conflicts = summary.get("conflicting_copies") or {}
    listed = conflicts.get("copies") or []
    lines = [
        f"conflicting copies: {record['captures'][0]} and {record['captures'][1]} hold the connection "
        f"{record.get('connection') or '?'} with different bytes, first at offset {record['offset']:,} "
        f"of the {record['side']}'s stream ({record['sender']}): each copy is judged apart"
        for record in listed
    ]
    more = int(conflicts.get("count", 0)) - len(listed)
    if more > 0:
        lines.append(f"conflicting copies: {more:,} more (the summary lists the first {len(listed)})")
    return lines


def audit_document(
    summary: dict[str, Any], out_dir: Path | str, lost: list[str], incomplete: str | None, status: int
) -> dict[str, Any]:
    """``audit --format json``: what the terminal says, as one document: the exit status, why the run is
    incomplete (or null), what was not read, the reports written, and the whole summary (as summary.json)."""
    from mqttaudit.locations import exists
    from mqttaudit.pipeline.audit import OUTPUTS

    return {
        "exit_status": status,
        "incomplete": incomplete,
        "lost": lost,
        "out_dir": str(out_dir),
        "outputs": {name: join(out_dir, name) for name in OUTPUTS if exists(join(out_dir, name))},
        "summary": summary,
    }


def read_keylog(path: Path) -> KeyLogFile:
    """The key log at ``path`` as the tasks reach it, or a usage error: cryptography missing, a file that cannot be
    read or is over its cap, or no usable line. One pass checks it, holding neither the file nor a secret; lines
    that cannot be used are named by number on standard error (the first few); no secret is ever shown."""
    from mqttaudit import option_files
    from mqttaudit.capture.tls import TlsUnavailable, require_cryptography
    from mqttaudit.option_files import OptionFileError, blocks_capped
    from mqttaudit.pipeline.keylog import check_keylog

    try:
        require_cryptography()
    except TlsUnavailable as exc:
        raise click.UsageError(f"--keylog: {exc}") from exc
    try:
        checked = check_keylog(str(path), blocks_capped(path, option="--keylog", cap=option_files.KEYLOG))
    except OptionFileError as exc:
        raise click.UsageError(printable_line(str(exc))) from exc
    for problem in checked.problems:
        click.echo(f"key log: {problem} (skipped)", err=True)
    if checked.more_problems:
        click.echo(f"key log: {checked.more_problems} more line(s) skipped", err=True)
    if not checked.usable_lines:
        raise click.BadParameter(
            f"{printable_line(str(path))} holds no usable key log line (CLIENT_RANDOM, or the TLS 1.3 traffic secrets)",
            param_hint="--keylog",
        )
    return checked.keylog


def nothing_found(summary: dict[str, object]) -> str:
    """Why an audit judged nothing, in one line, naming what it saw (see ``pipeline.detection.no_mqtt_message``)."""
    from mqttaudit.pipeline.detection import no_mqtt_message

    said = no_mqtt_message(summary)
    assert said is not None  # called only when no connection was judged
    errors = summary.get("errors") or []
    assert isinstance(errors, list)
    return said + (f" ({len(errors)} capture error(s), in the warnings above)" if errors else "")


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
    duplicates = summary.get("duplicate_copies")
    if isinstance(duplicates, dict) and duplicates.get("count"):
        lines.append(
            f"{duplicates['count']} copy(ies) of connections left out: another file holds the same bytes "
            f"({duplicates['bytes']} bytes, {duplicates['segments']} segments; summary.json names the files)"
        )
    return lines + budget_lines(summary)


def budget_lines(summary: dict[str, object]) -> list[str]:
    """The budgets that applied in this audit, each with its counter (the policies are in summary.json)."""
    from mqttaudit.report.budget_texts import budget_lines as lines

    return lines(summary, _terse_count)


def _terse_count(value: int, thing: str) -> str:
    """A count as the terminal's lines write it: ``3 flow(s)``, and bytes always in the plural (``1 bytes``)."""
    return f"{value} {thing}s" if thing.endswith("byte") else f"{value} {thing}(s)"


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
    lines.append(engine_line(summary))
    return "\n".join(lines)


def engine_line(summary: dict[str, object]) -> str:
    """Which engine ran the audit (``--engine``), and on what."""
    if summary.get("engine") == SPARK:
        return f"engine: spark (master {printable_line(str(summary.get('spark_master')))})"
    return "engine: local (in this process, without Spark)"


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
