"""``mqttaudit decode``: decode bytes of one direction and show each packet and each violation."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import click

from mqttaudit import __version__, codec, option_files
from mqttaudit.codec.describe import describe_packet, packet_to_dict
from mqttaudit.option_files import OptionFileError, read_open
from mqttaudit.spec import Catalogue, load_catalogue

from .exits import Incomplete, exit_status_help
from .terminal import printable_line

_HEX_SEPARATORS = re.compile(r"[\s:,]+|0x", re.IGNORECASE)


def parse_hex(text: str) -> bytes:
    """Hex digits, optionally separated by spaces, colons or commas, with optional 0x prefixes."""
    digits = _HEX_SEPARATORS.sub("", text)
    try:
        return bytes.fromhex(digits)
    except ValueError:
        bad = next((c for c in digits if c not in "0123456789abcdefABCDEF"), None)
        reason = f"{bad!r} is not a hex digit" if bad else "odd number of hex digits"
        raise click.BadParameter(f"not hex: {reason}", param_hint="--hex") from None


def violation_to_dict(violation: codec.Violation, catalogue: Catalogue, sender: str | None) -> dict[str, Any]:
    rule = catalogue.get(violation.rule)
    return {
        "rule": violation.rule,
        "offset": violation.offset,
        "detail": violation.detail,
        "level": rule.level if rule else None,
        "severity": rule.severity if rule else None,
        "section": rule.section if rule else None,
        "actor": sender,
        "summary": rule.summary if rule else None,
    }


def frame_to_dict(frame: codec.Frame) -> dict[str, Any]:
    packet = packet_to_dict(frame.packet) if frame.packet is not None else None
    return {"offset": frame.offset, "length": frame.length, "hex": frame.raw.hex(" "), "packet": packet}


def frames_have_errors(frames: Iterable[codec.Frame]) -> bool:
    return any(not codec.rules.is_advisory(v.rule) for frame in frames for v in frame.violations)


def render_frames(frames: Iterable[codec.Frame], sender: str | None, catalogue: Catalogue) -> list[str]:
    """Per frame: its number, stream offset and length, the packet; its bytes in hex; each rule it breaks."""
    lines = []
    for number, frame in enumerate(frames):
        what = describe_packet(frame.packet) if frame.packet is not None else "bytes that are not a packet"
        cut = f" ... (first {len(frame.raw)} of {frame.length} bytes)" if len(frame.raw) < frame.length else ""
        lines.append(f"frame {number} at offset {frame.offset}, {_bytes(frame.length)}: {what}")
        lines.append(f"      bytes: {frame.raw.hex(' ')}{cut}")
        for violation in frame.violations:
            rule = catalogue.get(violation.rule)
            label = f"{rule.level}, section {rule.section}" if rule else "unknown rule"
            mark = "warning" if codec.rules.is_advisory(violation.rule) else "VIOLATION"
            by = f" by the {sender}" if sender else ""
            lines.append(
                f"      {mark} {violation.rule} ({label}){by} at offset {violation.offset}: {violation.detail}"
            )
            if rule:
                lines.append(f"        rule: {rule.summary}")
    return lines


def _bytes(count: int) -> str:
    return f"{count} byte" if count == 1 else f"{count} bytes"


def _read_input(hex_text: str | None, file: BinaryIO | None) -> bytes:
    """The bytes to decode; what a file or standard input holds is read up to a cap (``option_files.DECODE``)."""
    if hex_text is not None and file is not None:
        raise click.UsageError("give either --hex or --file, not both")
    try:
        if hex_text == "-":
            hex_cap = option_files.DECODE_HEX
            data = read_open(sys.stdin.buffer, option="--hex -", cap=hex_cap, name="(standard input)")
            return parse_hex(data.decode("ascii", errors="replace"))
        if hex_text is not None:
            return parse_hex(hex_text)
        if file is not None:
            return read_open(file, option="--file", cap=option_files.DECODE, name=getattr(file, "name", "-"))
        if sys.stdin.isatty():
            raise click.UsageError("no input: give --hex, --file, or pipe raw bytes to standard input")
        return read_open(sys.stdin.buffer, option="standard input", cap=option_files.DECODE, name="(raw bytes)")
    except OptionFileError as exc:
        raise click.UsageError(printable_line(str(exc))) from None


@click.command(
    "decode",
    epilog=exit_status_help(
        ok="conformant: no MUST-level rule is broken (SHOULD-level warnings alone do not fail)",
        findings="findings: the bytes break a MUST-level rule",
        usage="usage error: bad arguments, unreadable input, hex that is not hex",
        incomplete="incomplete: nothing was judged (no bytes to decode)",
    ),
)
@click.option(
    "--hex",
    "hex_text",
    metavar="HEX",
    help='Packet bytes as hex ("82 05 00 01 ..."); "-" reads hex from stdin.',
)
@click.option(
    "--file",
    type=click.File("rb"),
    help='Raw bytes from a file ("-" for stdin). Default: raw bytes on stdin.',
)
@click.option(
    "--from",
    "sender",
    type=click.Choice(["client", "server"]),
    help="Who sent the bytes; enables the direction checks (a server never sends SUBSCRIBE, ...).",
)
@click.option(
    "--protocol",
    type=click.Choice(["3.1.1", "5", "5.0", "3.1", "auto"]),
    default="3.1.1",
    show_default=True,
    help="The MQTT version the bytes are read as; auto: the version a CONNECT in the bytes names, else 3.1.1.",
)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--max-packet-size",
    type=click.IntRange(min=codec.MIN_MAX_PACKET_SIZE),
    default=codec.DEFAULT_MAX_PACKET_SIZE,
    show_default=True,
    help="Larger packets are reported and skipped undecoded.",
)
def decode_command(
    hex_text: str | None,
    file: BinaryIO | None,
    sender: str | None,
    protocol: str,
    output_format: str,
    max_packet_size: int,
) -> int:
    """Decode MQTT packets of one direction (3.1.1 unless --protocol says otherwise) and report every rule they
    break, by the statement ids of the version read.

    Exit status 1 when a MUST-level rule is broken, 4 when there were no bytes to judge, 0 otherwise (warnings
    alone do not fail).
    """
    data = _read_input(hex_text, file)
    version = None if protocol == "auto" else codec.ProtocolVersion.parse(protocol)
    result = decode_bounded(data, sender, max_packet_size=max_packet_size, version=version)
    # MQTT 3.1 has no statement ids: its findings carry those of the 3.1.1 rules it shares.
    catalogue = load_catalogue("5.0" if result.version is codec.ProtocolVersion.V5 else "3.1.1")
    if protocol != "auto":
        how = "as asked"
    elif result.named_version:
        how = "learned from the CONNECT"
    else:
        how = "no CONNECT names a version: read as 3.1.1"
    shown = result.frames
    if output_format == "json":
        document: dict[str, object] = {
            "mqttaudit_version": __version__,
            "from": sender,
            "protocol": result.version.value,
            "protocol_source": how,
            "bytes": len(data),
            "packets": [frame_to_dict(f) for f in shown if f.packet is not None],
            "violations": [violation_to_dict(v, catalogue, sender) for f in shown for v in f.violations],
            "unframed": [frame_to_dict(f) for f in shown if f.packet is None],
        }
        if result.frames_left_out:
            document["left_out"] = result.left_out()
        click.echo(json.dumps(document, indent=2))
    else:
        if protocol != "3.1.1":  # the default reading needs no saying
            click.echo(f"read as MQTT {result.version.value} ({how})")
        for line in render_frames(shown, sender, catalogue):
            click.echo(line)
        if result.frames_left_out:
            click.echo(
                f"... and {result.frames_left_out:,} more frame(s) with {result.violations_left_out:,} violation(s) "
                f"not shown: decode shows the first {MAX_SHOWN_FRAMES:,} frames (the counts below are of them all)"
            )
        click.echo(
            f"{result.packets:,} packet(s), {result.errors:,} violation(s), {result.warnings:,} warning(s) in "
            f"{_bytes(len(data))}"
        )
    if not result.frames:  # nothing judged is never conformant
        raise Incomplete(f"nothing was judged: no packet in {_bytes(len(data))} of input")
    return 1 if result.errors else 0


#: Frames ``decode`` shows (and holds) at most; past them the frames are decoded, judged and counted, not kept, so
#: two bytes per malformed frame cannot make it hold gigabytes.
MAX_SHOWN_FRAMES = 10_000
#: Bytes fed to the decoder at a time.
_FEED = 64 * 1024


@dataclass
class BoundedDecode:
    """What ``decode`` found: the first :data:`MAX_SHOWN_FRAMES` frames, and counts over every frame."""

    version: codec.ProtocolVersion
    frames: list[codec.Frame] = field(default_factory=list)
    packets: int = 0
    errors: int = 0
    warnings: int = 0
    named_version: bool = False
    frames_left_out: int = 0
    violations_left_out: int = 0
    #: Violations of the frames left out, by rule.
    rules_left_out: dict[str, int] = field(default_factory=dict)

    def add(self, frame: codec.Frame) -> None:
        self.packets += frame.packet is not None
        errors = sum(not codec.rules.is_advisory(v.rule) for v in frame.violations)
        self.errors += errors
        self.warnings += len(frame.violations) - errors
        if isinstance(frame.packet, codec.Connect):
            self.named_version |= codec.ProtocolVersion.from_level(frame.packet.protocol_level) is not None
        if len(self.frames) < MAX_SHOWN_FRAMES:
            self.frames.append(frame)
            return
        self.frames_left_out += 1
        self.violations_left_out += len(frame.violations)
        for violation in frame.violations:
            self.rules_left_out[violation.rule] = self.rules_left_out.get(violation.rule, 0) + 1

    def left_out(self) -> dict[str, object]:
        return {
            "frames": self.frames_left_out,
            "violations": self.violations_left_out,
            "violations_by_rule": self.rules_left_out,
            "shown_at_most": MAX_SHOWN_FRAMES,
        }


def decode_bounded(
    data: bytes, sender: str | None, *, max_packet_size: int, version: codec.ProtocolVersion | None
) -> BoundedDecode:
    """The bytes decoded as :func:`mqttaudit.codec.decode` does, fed a slice at a time, keeping the first
    :data:`MAX_SHOWN_FRAMES` frames and counting the rest."""
    decoder = codec.StreamDecoder(sender, max_packet_size=max_packet_size, version=version)
    result = BoundedDecode(decoder.version)
    view = memoryview(data)
    for start in range(0, len(view), _FEED):
        for frame in decoder.feed(view[start : start + _FEED]):
            result.add(frame)
    for frame in decoder.close():
        result.add(frame)
    result.version = decoder.version
    return result
