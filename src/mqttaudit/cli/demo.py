"""``mqttaudit demo``: the main job on embedded defaults, showing what mqttaudit finds."""

from __future__ import annotations

import json
import sys
from collections import Counter
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
    """The whole job on embedded defaults, told as a short story: decode example packets, start a local broker
    (mosquitto when installed, else amqtt), probe it with the case library, record real clients talking through it
    (a few of them misbehaving), audit that capture on Spark, and say where the reports are. Exit status 0 when
    every step ran (the defects it shows are the demo's point), 4 when no local broker could be started."""
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
        _say(
            "mqttaudit demo: what mqttaudit finds, in four steps (a few minutes): decode example packets, probe a "
            "local broker, record clients talking through it, audit that recording. The reports go to "
            f"{printable_line(str(out_dir))}/."
        )
    if not no_probe:
        _step(1, "decoding example packets")
    _say(
        "The MQTT specification numbers its rules: MQTT-4.7.3-1 is the 1st normative statement of section 4.7.3. "
        "mqttaudit reads MQTT bytes strictly and names, for each rule a packet breaks (a violation), the "
        "statement, the side that broke it and the byte offset where it shows."
    )
    click.echo("")
    failing = 0
    for number, (title, sender, hex_text, *given) in enumerate(EXAMPLES):
        version = given[0] if given else "3.1.1"
        catalogue = load_catalogue(version)
        frames = codec.decode(bytes.fromhex(hex_text), sender, version=version).frames
        verdict = "VIOLATIONS" if frames_have_errors(frames) else "conformant"
        failing += verdict != "conformant"
        click.echo(f"== {title} (from the {sender}): {verdict}")
        for line in render_frames(frames, sender, catalogue):
            # the first example as `mqttaudit decode` prints it; the others, their bytes and what they break
            if number == 0 or line.lstrip().startswith(SHOWN_AFTER_THE_FIRST):
                click.echo(f"   {line}")
        if number == 0:
            _say(
                "(`mqttaudit decode` prints each frame: its packet, its bytes, each rule broken with the statement's "
                "level and section and the rule in words; the other examples show their bytes and what they break.)"
            )
    click.echo(
        f"\n{len(EXAMPLES)} examples decoded, {failing} with violations. Your own bytes: "
        "mqttaudit decode --hex '...' --from client"
    )
    if not no_probe:
        try:
            with staged_output(out_dir, force=force, writes=DEMO_OUTPUTS) as staging:
                _whole_job(staging, out_dir, master)
        except OutputDirError as exc:
            raise CannotRun(printable_line(str(exc))) from exc
        _step(None, "done")
        _say(
            f"The reports are in {printable_line(str(out_dir))}: probe/findings.md (the broker), audit/report.html "
            "(the recording). Next, your own: mqttaudit probe mqtt://HOST:1883, mqttaudit audit CAPTURE.pcapng"
        )
    return EXIT_OK


#: The entries the demo writes into its folder.
DEMO_OUTPUTS = ("probe", "audit", "traffic.pcap", "traffic.pcapng")
#: What the demo shows of each example after the first: the bytes and the rules they break.
SHOWN_AFTER_THE_FIRST = ("bytes:", "VIOLATION ", "warning ")
#: The statements listed under "broken most often" (the reports hold them all).
TOP = 5


def _say(text: str, indent: str = "", hanging: str = "") -> None:
    """A paragraph of the story, wrapped at 100 characters (a log has no width to fit)."""
    import textwrap

    click.echo(
        textwrap.fill(
            text,
            width=100,
            initial_indent=indent,
            subsequent_indent=hanging or indent,
            break_long_words=False,
            break_on_hyphens=False,  # statement ids and client ids stay whole
        )
    )


def _step(number: int | None, title: str) -> None:
    click.echo(f"\n== {title.capitalize()}" if number is None else f"\n== Step {number} of 4: {title}")


def _whole_job(staging: Path, out_dir: Path, master: str) -> None:
    """Writes into ``staging``; what it prints names the places in ``out_dir`` where the files will be."""
    from mqttaudit.probe.api import run
    from mqttaudit.probe.brokers import available_brokers, start_broker
    from mqttaudit.probe.runner import DEFAULT_CONCURRENCY
    from mqttaudit.probe.traffic import MISBEHAVIOUR
    from mqttaudit.report import write_probe_reports
    from mqttaudit.report.terminal import progress_for

    candidates = [name for name in ("mosquitto", "amqtt") if name in available_brokers()]
    if not candidates:
        raise Incomplete("no local broker to probe (install mosquitto, or amqtt with pip)")
    name = candidates[0]
    capture = staging / "traffic.pcapng"  # the relay's; tcpdump writes traffic.pcap
    _step(2, f"probing a local broker ({name})")
    _say(
        "A probe plays the client to a live broker: each case sends it valid packets or one deliberate defect, and "
        "judges the broker's reactions against the statements that bind a server (its MUSTs). A case passes or "
        "fails; it is lenient when the broker accepted a defect no statement obliges it to detect (reported, not a "
        "failure), not-applicable when it needs a feature the broker does not offer, inconclusive when the broker's "
        "answer could not be judged."
    )
    with start_broker(name) as broker:
        click.echo(f"   {name} started on {broker.url}; the case library runs {DEFAULT_CONCURRENCY} cases at a time")
        progress = progress_for(sys.stderr, broker.url)
        try:
            result = run(broker.url, progress=progress)
        finally:
            if progress is not None:
                progress.close()
        written = write_probe_reports(result.run, staging / "probe")
        probe_run = result.run
        if probe_run.incomplete:
            _say(f"incomplete: {probe_run.incomplete}", indent="   ")
        counts = ", ".join(f"{probe_run.count(v)} {v}" for v in ("pass", "fail", "lenient", "not-applicable"))
        click.echo(
            f"   {len(probe_run.results)} cases in {probe_run.duration:.0f} s: {counts}, "
            f"{probe_run.count('inconclusive')} inconclusive"
        )
        _top(
            "statements the broker broke most often",
            Counter(
                (statement, r.case.protocol.value)
                for r in probe_run.results
                if r.verdict == "fail"
                for statement in r.cited
            ),
            "case",
        )
        shown = ", ".join(p.name for p in written)
        click.echo(f"   every case, with the bytes sent and received: {out_dir / 'probe'} ({shown})")
        _step(3, f"recording clients talking through {name}")
        misbehaving = ", ".join(f"{client} ({rule})" for client, _, rule in MISBEHAVIOUR)
        _say(
            f"Real MQTT clients (paho-mqtt) subscribe and publish at QoS 0, 1 and 2 through {name} while the traffic "
            f"is recorded; {len(MISBEHAVIOUR)} more clients misbehave on purpose, each breaking one statement: "
            f"{misbehaving}."
        )
        capture, port, how = _record(capture, broker.port)
        click.echo(f"   {out_dir / capture.name} written ({how})")
    _audit(capture, port, staging, out_dir, master)


def _audit(capture: Path, port: int, staging: Path, out_dir: Path, master: str) -> None:
    from mqttaudit.judge.reasons import EXPLANATIONS
    from mqttaudit.pipeline.audit import run_audit

    _step(4, "auditing the recording on Spark")
    _say(
        "The audit reads captures (pcap, pcapng), finds the MQTT connections in them, decodes every packet and "
        "judges both sides with the probe's judge; it replays the broker's routing to find messages delivered "
        f"wrongly or not at all (routing findings). It runs on Apache Spark, here {master}: the cores of this "
        "machine."
    )
    click.echo("   starting Spark")
    result = run_audit(
        [str(capture)],
        staging / "audit",
        master=master,
        ports=[port],
        tolerance=2.0,
        progress=lambda message: click.echo(f"   {message}"),
        tasks=lambda done, total: None,  # the phases are the progress a reader follows, not Spark's stages
    )
    counts = result.summary["counts"]
    by_actor = ", ".join(f"{n} by {actor}s" for actor, n in sorted(counts["violations_by_actor"].items()))
    click.echo(
        f"   {counts['connections']} connections, {counts['packets']} packets: {counts['violations']} violations"
        + (f" ({by_actor})" if by_actor else "")
        + f", {counts['routing_findings']} routing findings"
    )
    _top("statements broken", _violations(staging / "audit" / "findings.jsonl"), "time")
    undecided = result.summary.get("not_assessable") or {}
    for tag, n in sorted((undecided.get("by_tag") or {}).items(), key=lambda item: -item[1]):
        why = EXPLANATIONS.get(tag)
        _say(
            f"{n} check{'s' if n != 1 else ''} the recording cannot decide (not assessable), '{tag}'"
            + (f": {why}." if why else "."),
            indent="   ",
        )
    click.echo(f"   every violation with its packet's bytes: {out_dir / 'audit' / 'report.html'}")


def _violations(findings: Path) -> Counter[tuple[str, str]]:
    """(statement, version) -> violations, from the audit's findings.jsonl."""
    rows = (json.loads(line) for line in findings.read_text().splitlines() if line.strip())
    return Counter(
        (row["rule"], row.get("rule_version") or "3.1.1") for row in rows if row.get("event_type") == "violation"
    )


def _top(title: str, counted: Counter[tuple[str, str]], unit: str) -> None:
    """The statements counted most, each with its summary from the catalogue of its version."""
    if not counted:
        return
    click.echo(f"   {title}:")
    for (statement, version), n in counted.most_common(TOP):
        rule = load_catalogue(version).get(statement)
        summary = f": {rule.summary}" if rule is not None else ""
        _say(f"{statement} ({n} {unit}{'s' if n != 1 else ''}){summary}", indent="     ", hanging="       ")
    if len(counted) > TOP:
        click.echo(f"     ... and {len(counted) - TOP} more")


def _record(capture: Path, broker_port: int) -> tuple[Path, int, str]:
    """Records the demo traffic with tcpdump on loopback, or through the recording relay when tcpdump may not
    capture here; returns the capture, the broker port as seen in it, and how it was recorded."""
    from mqttaudit.probe.recorder import RecorderUnavailable, tcpdump_recording
    from mqttaudit.probe.relay import relay_recording
    from mqttaudit.probe.traffic import connected_before, run_traffic

    pcap = capture.with_suffix(".pcap")
    try:
        with connected_before("127.0.0.1", broker_port) as publish, tcpdump_recording(pcap, broker_port):
            early = publish()
            run_traffic("127.0.0.1", broker_port)
        if early:
            _say(
                "One more client, plant-early, was connected before tcpdump started, as in any capture of a running "
                "fleet: the recording holds its PUBLISH but not its CONNECT.",
                indent="   ",
            )
        return pcap, broker_port, "tcpdump on loopback"
    except RecorderUnavailable as exc:
        click.echo(f"   tcpdump cannot capture here ({exc}); recording through the relay instead")
    with relay_recording(capture, "127.0.0.1", broker_port) as relay:
        run_traffic("127.0.0.1", relay.port)
    return capture, broker_port, "the recording relay"
