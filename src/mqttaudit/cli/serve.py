"""``mqttaudit serve``: the strict reference broker that judges the clients connecting to it, until Ctrl-C (or
SIGTERM, ``--clients``, ``--duration``); then the reports and the exit status of what the clients did."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
import sys
from dataclasses import replace
from pathlib import Path

import click

from mqttaudit.judge import Finding
from mqttaudit.report.evidence import printable
from mqttaudit.report.output_dir import OutputDirError, staged_output
from mqttaudit.report.serve_reports import SERVE_REPORTS, write_serve_reports
from mqttaudit.serve import Limits, ServedClient, ServeRun, ServeServer
from mqttaudit.serve.profile import ServeProfileError, load_limits
from mqttaudit.serve.scenarios import SCENARIOS, Scenario
from mqttaudit.serve.server import Listener
from mqttaudit.status import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_INTERNAL, EXIT_OK

from .exits import CannotRun, exit_status_help
from .options import output_options

_LEVELS = {"3.1.1": (4,), "5": (5,), "5.0": (5,), "all": (4, 5)}


def serve_status(run: ServeRun) -> int:
    """3 when the broker itself broke a rule (a defect of mqttaudit serve), else 1 when a client did, else 4 when
    no client connection was judged, else 0."""
    if any(client.server_findings or client.crash for client in run.clients):
        return EXIT_INTERNAL
    if any(client.client_findings for client in run.clients):
        return EXIT_FINDINGS
    if not any(client.version for client in run.clients):
        return EXIT_INCOMPLETE
    return EXIT_OK


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"expected HOST:PORT (port 0: any free port), not {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command(
    "serve",
    epilog=exit_status_help(
        findings="findings: a client broke a MUST-level statement (3 instead when the broker itself broke one: a "
        "defect of mqttaudit serve)",
        incomplete="incomplete: no client connection was judged",
    ),
)
@click.option("--listen", default="127.0.0.1:1883", show_default=True, help="HOST:PORT to listen on (port 0: free).")
@click.option(
    "--protocol",
    type=click.Choice(sorted(_LEVELS)),
    default="all",
    show_default=True,
    help="The MQTT versions accepted; a CONNECT of another is refused as the spec says.",
)
@click.option("--tls-listen", metavar="HOST:PORT", help="Also listen for MQTT over TLS (needs --tls-cert, --tls-key).")
@click.option("--ws-listen", metavar="HOST:PORT", help="Also listen for MQTT over WebSocket (any path).")
@click.option("--wss-listen", metavar="HOST:PORT", help="Also listen for MQTT over WebSocket over TLS.")
@click.option(
    "--tls-cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="TLS: certificate chain."
)
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="TLS: private key.")
@click.option(
    "--profile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML file of the limits the broker advertises (receive_maximum = 10, topic_alias_maximum = 0, "
    "maximum_packet_size = 1024, server_keep_alive = 30, queued_messages = 100); the options below override it.",
)
@click.option("--receive-maximum", type=click.IntRange(1, 65535), help=f"[default: {Limits.receive_maximum}]")
@click.option("--topic-alias-maximum", type=click.IntRange(0, 65535), help=f"[default: {Limits.topic_alias_maximum}]")
@click.option(
    "--maximum-packet-size",
    type=click.IntRange(5, 268_435_460),
    help=f"The largest packet a 5.0 client may send (advertised in CONNACK).  [default: {Limits.maximum_packet_size}]",
)
@click.option(
    "--scenario",
    metavar="NAME",
    help="Put every client in this situation (see --list-scenarios): small limits, held acknowledgements, a dropped "
    "connection, a server DISCONNECT...",
)
@click.option("--hostile", metavar="NAME", help="A hostile scenario: --hostile NAME is --scenario hostile/NAME.")
@click.option("--list-scenarios", is_flag=True, help="List the scenarios with the client statements each provokes.")
@click.option("--clients", type=click.IntRange(1), help="Stop after this many client connections have ended.")
@click.option("--duration", type=click.FloatRange(0, min_open=True), help="Stop after this many seconds.")
@output_options("serve-report", "Folder for findings.json and findings.md")
def serve_command(
    listen: str,
    protocol: str,
    tls_listen: str | None,
    ws_listen: str | None,
    wss_listen: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    profile: Path | None,
    receive_maximum: int | None,
    topic_alias_maximum: int | None,
    maximum_packet_size: int | None,
    scenario: str | None,
    hostile: str | None,
    list_scenarios: bool,
    clients: int | None,
    duration: float | None,
    out_dir: Path,
    force: bool,
) -> int:
    """A strict reference broker (MQTT 3.1.1 and 5.0; not a production broker) that judges every client connecting
    to it, statement by statement, and reports what each client broke, with the bytes that show it.

    It advertises small limits (Receive Maximum 2, Topic Alias Maximum 2, Maximum Packet Size 256) so that a 5.0
    client must honour them. Ctrl-C stops it and writes the reports."""
    if list_scenarios:
        for line in scenario_lines():
            click.echo(line)
        return EXIT_OK
    if scenario and hostile:
        raise click.UsageError("--scenario and --hostile choose one scenario: give one of them")
    chosen = None
    if scenario or hostile:
        name = scenario or f"hostile/{hostile}"
        if name not in SCENARIOS:
            raise click.BadParameter(f"no scenario {name!r} (--list-scenarios lists them)", param_hint="--scenario")
        chosen = SCENARIOS[name]
    host, port = parse_listen(listen)
    context = None
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    if (tls_listen or wss_listen) and tls_cert is None:
        raise click.UsageError("--tls-listen and --wss-listen need --tls-cert and --tls-key")
    if tls_cert is not None and tls_key is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(tls_cert, tls_key)
        except (ssl.SSLError, OSError) as exc:
            raise CannotRun(f"cannot load the TLS certificate and key: {exc}") from None
    listeners = [
        Listener(*parse_listen(where), tls, websocket)
        for where, tls, websocket in (
            (tls_listen, context, False),
            (ws_listen, None, True),
            (wss_listen, context, True),
        )
        if where
    ]
    try:
        limits = load_limits(profile) if profile is not None else Limits()
    except ServeProfileError as exc:
        raise CannotRun(str(exc)) from None
    given = {
        "receive_maximum": receive_maximum,
        "topic_alias_maximum": topic_alias_maximum,
        "maximum_packet_size": maximum_packet_size,
    }
    limits = replace(limits, **{key: value for key, value in given.items() if value is not None})
    try:
        with staged_output(out_dir, force=force, writes=SERVE_REPORTS) as staging:
            run = asyncio.run(_serve(host, port, _LEVELS[protocol], limits, listeners, chosen, clients, duration))
            write_serve_reports(run, staging)
    except OutputDirError as exc:
        raise CannotRun(str(exc)) from None
    except OSError as exc:
        raise CannotRun(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    status = serve_status(run)
    click.echo(
        f"mqttaudit serve: {len(run.clients)} client connection(s), "
        f"{sum(len(c.client_findings) for c in run.clients)} client finding(s); reports in {out_dir}",
        err=True,
    )
    return status


async def _serve(
    host: str,
    port: int,
    levels: tuple[int, ...],
    limits: Limits,
    listeners: list[Listener],
    scenario: Scenario | None,
    clients: int | None,
    duration: float | None,
) -> ServeRun:
    stop = asyncio.Event()
    ended = 0

    def on_client(client: ServedClient) -> None:
        nonlocal ended
        found = len(client.client_findings)
        _say(f"{client.name} {client.client_id!r} (MQTT {client.version or '?'}): {client.ending}, {found} finding(s)")
        ended += 1
        if clients is not None and ended >= clients:
            stop.set()

    def on_finding(client: ServedClient, finding: Finding) -> None:
        if finding.side.value == "server" and finding.rule in client.provoked:
            return  # the hostile scenario's own stimulus
        who = "client" if finding.side.value == "client" else "BROKER (a defect of mqttaudit serve)"
        _say(f"  {client.name}: {finding.rule} broken by the {who}: {finding.detail}")

    server = ServeServer(
        host,
        port,
        levels=levels,
        limits=limits,
        listeners=listeners,
        scenario=scenario,
        on_finding=on_finding,
        on_client=on_client,
    )
    await server.start()
    _say(f"mqttaudit serve: listening on {' '.join(server.urls)} (Ctrl-C stops and writes the reports)")
    loop = asyncio.get_running_loop()
    for number in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(number, stop.set)
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), duration)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(number)
    return await server.stop()


def scenario_lines() -> list[str]:
    """``--list-scenarios``: each scenario, what it does, and the statements it provokes (and, hostile, breaks)."""
    lines = []
    for scenario in SCENARIOS.values():
        versions = "MQTT 5.0 clients" if scenario.version == "5.0" else "every client"
        lines.append(f"{scenario.name}  ({versions})")
        lines.append(f"    {scenario.summary}")
        cited = ", ".join(f"{s} ({s.version})" for s in scenario.statements)
        lines.append(f"    client statements: {cited}")
        if scenario.provoked:
            lines.append(f"    breaks on purpose: {', '.join(f'{s} ({s.version})' for s in scenario.provoked)}")
    return lines


def _say(line: str) -> None:
    click.echo(printable(line), err=True)
    sys.stderr.flush()
