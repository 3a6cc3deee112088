"""``mqttaudit demo``: the main job on embedded defaults, showing what mqttaudit finds."""

from __future__ import annotations

from pathlib import Path

import click

from mqttaudit import codec
from mqttaudit.extras import MissingExtra, require
from mqttaudit.spec import load_catalogue

from .decode import frames_have_errors, render_frames
from .exits import EXIT_OK, CannotRun, Incomplete, exit_status_help
from .options import output_options
from .terminal import printable_line

#: (what it is, who sends it, hex bytes[, MQTT version]): known defects from the field, and valid packets beside
#: them; MQTT 3.1.1 unless a version is given.
EXAMPLES: tuple[tuple[str, ...], ...] = (
    ("SUBSCRIBE with an empty Topic Filter", "client", "82 05 00 01 00 00 00"),
    ("UNSUBSCRIBE with an empty Topic Filter", "client", "a2 04 00 02 00 00"),
    (
        "PUBLISH to the wildcard Topic Name 'sensor/#'",
        "client",
        "32 0e 00 08 73 65 6e 73 6f 72 2f 23 00 03 68 69",
    ),
    ("PUBLISH with a five-byte Remaining Length", "client", "30 ff ff ff ff 01"),
    ("SUBSCRIBE to 'a/b' (valid)", "client", "82 08 00 04 00 03 61 2f 62 00"),
    (
        "CONNECT, clean session, client id 'demo' (valid)",
        "client",
        "10 10 00 04 4d 51 54 54 04 02 00 3c 00 04 64 65 6d 6f",
    ),
    ("CONNACK accepted (valid)", "server", "20 02 00 00"),
    (
        "PUBLISH QoS 1 to 'sensor/1' (valid)",
        "client",
        "32 10 00 08 73 65 6e 73 6f 72 2f 31 00 07 32 31 2e 35",
    ),
    ("SUBACK granting QoS 1 and refusing one filter (valid)", "server", "90 04 00 04 01 80"),
    ("SUBACK with the reserved return code 0x03", "server", "90 03 00 04 03"),
    ("PUBREL with reserved flags 0000", "client", "60 02 00 07"),
    (
        "CONNECT with a password but no user name",
        "client",
        "10 10 00 04 4d 51 54 54 04 42 00 3c 00 00 00 02 70 77",
    ),
    ("SUBACK sent by a client", "client", "90 03 00 01 00"),
    ("MQTT 5.0 PUBLISH with Topic Alias 0", "client", "30 07 00 01 61 03 23 00 00", "5.0"),
    ("MQTT 5.0 CONNACK in the 3.1.1 form: no Property Length", "server", "20 02 00 00", "5.0"),
    ("MQTT 5.0 PUBLISH named by Topic Alias 2, empty Topic Name (valid)", "client", "30 06 00 00 03 23 00 02", "5.0"),
    ("MQTT 5.0 PUBACK with Reason Code 0x10, no matching subscribers (valid)", "server", "40 03 00 01 10", "5.0"),
)


@click.command(
    "demo",
    epilog=exit_status_help(
        ok="every step ran (the defects it shows are the demo's point)",
        findings=None,
        incomplete="incomplete: no local broker could be started, or the spark:// master cannot be reached",
    ),
)
@output_options("mqttaudit-out", "The capture, probe/ and audit/")
@click.option("--no-probe", is_flag=True, help="Only decode the example packets.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master for the audit.")
def demo_command(out_dir: Path, force: bool, no_probe: bool, master: str) -> int:
    """The whole job on embedded defaults: decode example packets, start a local broker (mosquitto when
    installed, else amqtt), probe it with the case library, record real clients talking through it (a few of them
    misbehaving), audit that capture on Spark, and say where the reports are. Exit status 0 when every step ran
    (the defects it shows are the demo's point), 4 when no local broker could be started."""
    from mqttaudit.report.output_dir import OutputDirError, check_output_dir, staged_output

    try:  # an --out that cannot be used, or a package the demo needs, is found before anything runs
        if not no_probe:
            check_output_dir(out_dir, force=force, writes=DEMO_OUTPUTS)
            require("demo")
    except (OutputDirError, MissingExtra) as exc:
        raise CannotRun(printable_line(str(exc))) from exc
    if not no_probe:
        from mqttaudit.pipeline.spark import SparkMasterUnreachable, check_master_reachable

        try:
            check_master_reachable(master)
        except SparkMasterUnreachable as exc:
            raise Incomplete(f"{printable_line(str(exc))}: nothing was run") from exc
    failing = 0
    for title, sender, hex_text, *given in EXAMPLES:
        version = given[0] if given else "3.1.1"
        catalogue = load_catalogue(version)
        frames = codec.decode(bytes.fromhex(hex_text), sender, version=version).frames
        verdict = "VIOLATIONS" if frames_have_errors(frames) else "conformant"
        failing += verdict != "conformant"
        click.echo(f"== {title} (from the {sender}): {verdict}")
        for line in render_frames(frames, sender, catalogue):
            click.echo(f"   {line}")
        click.echo("")
    click.echo(
        f"{len(EXAMPLES)} examples decoded, {failing} with violations. Try: mqttaudit decode --hex '...' --from client"
    )
    if not no_probe:
        try:
            with staged_output(out_dir, force=force, writes=DEMO_OUTPUTS) as staging:
                _whole_job(staging, out_dir, master)
        except OutputDirError as exc:
            raise CannotRun(printable_line(str(exc))) from exc
        click.echo(f"\nreports in {printable_line(str(out_dir))}: probe/findings.md, audit/report.html")
    return EXIT_OK


#: The entries the demo writes into its folder.
DEMO_OUTPUTS = ("probe", "audit", "traffic.pcap", "traffic.pcapng")


def _whole_job(staging: Path, out_dir: Path, master: str) -> None:
    """Writes into ``staging``; what it prints names the places in ``out_dir`` where the files will be."""
    from mqttaudit.pipeline.audit import run_audit
    from mqttaudit.probe.brokers import available_brokers, start_broker
    from mqttaudit.probe.case import Target
    from mqttaudit.report import write_probe_reports

    from .audit import summarize as summarize_audit
    from .probe import run_cases, select_cases, summarize

    candidates = [name for name in ("mosquitto", "amqtt") if name in available_brokers()]
    if not candidates:
        raise Incomplete("no local broker to probe (install mosquitto, or amqtt with pip)")
    name = candidates[0]
    capture = staging / "traffic.pcapng"  # the relay's; tcpdump writes traffic.pcap
    click.echo(f"\n== Probing a local {name} with {len(select_cases(None))} cases")
    with start_broker(name) as broker:
        click.echo(f"   {name} started on {broker.url} (pid {broker.pid})")
        run = run_cases(Target(broker.host, broker.port), select_cases(None), 2.0, 8, quiet=False)
        written = write_probe_reports(run, staging / "probe")
        click.echo(summarize(run))
        click.echo(f"probe reports: {', '.join(str(out_dir / p.relative_to(staging)) for p in written)}")
        click.echo(f"\n== Recording clients talking through {name} (three of them misbehave)")
        capture, port, how = _record(capture, broker.port)
        click.echo(f"   {out_dir / capture.name} written ({how})")
    click.echo(f"\n== Auditing the capture on Spark ({master})")
    result = run_audit(
        [str(capture)],
        staging / "audit",
        master=master,
        ports=[port],
        tolerance=2.0,
        progress=lambda message: click.echo(f"   {message}"),
    )
    click.echo(summarize_audit(result.summary))
    click.echo(f"report: {out_dir / 'audit' / 'report.html'}")


def _record(capture: Path, broker_port: int) -> tuple[Path, int, str]:
    """Records the demo traffic with tcpdump on loopback, or through the recording relay when tcpdump may not
    capture here; returns the capture, the broker port as seen in it, and how it was recorded."""
    from mqttaudit.probe.recorder import RecorderUnavailable, tcpdump_recording
    from mqttaudit.probe.relay import relay_recording
    from mqttaudit.probe.traffic import run_traffic

    pcap = capture.with_suffix(".pcap")
    try:
        with tcpdump_recording(pcap, broker_port):
            run_traffic("127.0.0.1", broker_port)
        return pcap, broker_port, "tcpdump on loopback"
    except RecorderUnavailable as exc:
        click.echo(f"   tcpdump cannot capture here ({exc}); recording through the relay instead")
    with relay_recording(capture, "127.0.0.1", broker_port) as relay:
        run_traffic("127.0.0.1", relay.port)
    return capture, broker_port, "the recording relay"
