"""``mqttaudit demo``: the main job on embedded defaults, showing what mqttaudit finds."""

from __future__ import annotations

from pathlib import Path

import click

from mqttaudit import codec
from mqttaudit.spec import load_catalogue

from .decode import frames_have_errors, render_frames

#: (what it is, who sends it, hex bytes): known defects from the field, and valid packets beside them.
EXAMPLES: tuple[tuple[str, str, str], ...] = (
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
)


@click.command("demo")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("mqttaudit-out"))
@click.option("--no-probe", is_flag=True, help="Only decode the example packets.")
def demo_command(out_dir: Path, no_probe: bool) -> int:
    """Decode example packets, valid and broken, then probe a local broker (mosquitto when installed, else amqtt)
    with the whole case library and write its reports to --out."""
    catalogue = load_catalogue("3.1.1")
    failing = 0
    for title, sender, hex_text in EXAMPLES:
        frames = codec.decode(bytes.fromhex(hex_text), sender).frames
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
        _probe_local_broker(out_dir)
    return 0


def _probe_local_broker(out_dir: Path) -> None:
    from mqttaudit.probe.brokers import available_brokers, start_broker
    from mqttaudit.probe.case import Target
    from mqttaudit.report import write_probe_reports

    from .probe import run_cases, select_cases, summarize

    candidates = [name for name in ("mosquitto", "amqtt") if name in available_brokers()]
    if not candidates:
        click.echo("\nno local broker to probe (install mosquitto, or amqtt with pip); skipping the probe")
        return
    name = candidates[0]
    click.echo(f"\n== Probing a local {name} with {len(select_cases(None))} cases")
    with start_broker(name) as broker:
        click.echo(f"   {name} started on {broker.url} (pid {broker.pid})")
        run = run_cases(Target(broker.host, broker.port), select_cases(None), 2.0, 8, quiet=False)
    written = write_probe_reports(run, out_dir)
    click.echo(summarize(run))
    click.echo(f"reports: {', '.join(str(path) for path in written)}")
