"""Reproducers of a probe case: the bytes the prober sent, per connection and in the recorded order, as a shell
one-liner and as a short standalone Python script (standard library only) that replays them and prints what the
broker answers, in hex.

Both are built from the recorded evidence (``CaseResult.connections``, as findings.json holds it), so they say
what they cannot replay: a frame the evidence holds only the start of (the rest is padded to its recorded length
with its last recorded byte), client packets past the evidence's bounds, a password (masked in the evidence: the
script takes it from ``$MQTTAUDIT_PASSWORD`` and writes it into the CONNECT), WebSocket framing (the script
speaks plain TCP, or TLS with ``--tls``), and answers that hang on what the broker chose (Packet Identifiers it
assigned, which the prober acknowledged).

The one-liner needs nothing beyond Debian's essential packages: ``bash`` (its ``/dev/tcp``), ``printf`` with
octal escapes, ``sleep``, ``timeout``, ``cat`` and ``od`` (coreutils). It exists for a case of one plain TCP
connection whose bytes the evidence holds whole and that needs no password; the script covers every case.
"""

from __future__ import annotations

import re
import string
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..probe.case import Target
from ..probe.runner import FAIL, LENIENT, CaseResult, ProbeRun
from .peer_text import cut, printable

#: The folder of a probe report's reproducer scripts.
FOLDER = "reproducers"
#: Environment variable the scripts take a password from (the one ``mqttaudit probe`` reads).
PASSWORD_VARIABLE = "MQTTAUDIT_PASSWORD"
#: Bytes a one-liner carries at most; a case that sends more has its script only.
ONE_LINER_BYTES = 512
#: Seconds the replay listens after its last send, at least (the recorded tail, plus a second, when longer).
MIN_WAIT = 2.0
#: Characters of a reason or title written into a script's comments.
COMMENT_CHARS = 200
#: Octets that stand in a one-liner's ``printf`` format as themselves; every other is an octal escape.
_LITERAL = frozenset((string.ascii_letters + string.digits).encode())
_MASKED_OCTET = re.compile(r"^[0-9a-fA-F]{2}$")


@dataclass(frozen=True, slots=True)
class Send:
    """One write of the prober, or its close of a connection: on which connection (its index), when (seconds from
    the start of the case), and the bytes the evidence holds of it."""

    connection: int
    time: float
    data: bytes
    #: Bytes the frame had, as recorded; more than ``len(data)`` when the evidence holds only its start.
    length: int
    #: The frame is a CONNECT whose password the evidence masks: ``data`` is its body up to the password field
    #: (fixed header and Remaining Length left out), the script appends the password and frames it again.
    password: bool = False
    #: Not a write but the prober closing the connection: "fin" (an orderly close) or "rst" (a reset: a drop, as
    #: the Will cases make one).
    close: str = ""

    @property
    def whole(self) -> bool:
        return self.length <= len(self.data)


@dataclass(frozen=True, slots=True)
class Reproducer:
    """How to replay one case: its sends, the connections they go on, and what the replay cannot reproduce."""

    case: str
    title: str
    protocol: str
    verdict: str
    reason: str
    host: str
    port: int
    scheme: str
    connections: tuple[str, ...]
    sends: tuple[Send, ...]
    #: Seconds the recording went on after the last send (the broker's answers, a close, a wait).
    tail: float
    limits: tuple[str, ...] = field(default=())
    #: Whether the broker's answers are framed as MQTT packets ("mqtt") or shown as read ("raw", AMQP).
    framing: str = "mqtt"
    #: Client frames the replay leaves out (masked, or past the evidence's bounds): the one-liner is withheld.
    gaps: int = 0

    @property
    def path(self) -> str:
        """Where the script is, relative to the report folder: ``reproducers/malformed/empty-topic-filter.py``."""
        return script_path(self.case)

    @property
    def wait(self) -> float:
        return max(MIN_WAIT, round(self.tail + 1.0, 1))

    @property
    def writes(self) -> tuple[Send, ...]:
        """The sends that write bytes (not the closes)."""
        return tuple(send for send in self.sends if not send.close)

    @property
    def needs_password(self) -> bool:
        return any(send.password for send in self.sends)

    def one_liner(self) -> str | None:
        """``bash -c '...'``: the sends written to ``/dev/tcp/HOST/PORT`` with the recorded pauses, then what the
        broker answers for :attr:`wait` seconds as hex (``od``). None when the case needs the script (several
        connections, TLS or WebSocket, a password, a frame not held whole, more than ``ONE_LINER_BYTES``)."""
        if (
            len(self.connections) != 1
            or self.gaps
            or self.scheme not in ("mqtt", "amqp")
            or not self.writes
            or any(send.password or not send.whole for send in self.writes)
            or sum(len(send.data) for send in self.writes) > ONE_LINER_BYTES
            or not _plain_host(self.host)
        ):
            return None
        steps = ['trap "" PIPE', f"exec 3<>/dev/tcp/{self.host}/{self.port}"]
        last = self.writes[0].time
        for send in self.writes:
            pause = round(send.time - last, 1)
            if pause >= 0.1:  # a pause the broker can tell from none
                steps.append(f"sleep {pause:g}")
            steps.append(f'printf "{_octal(send.data)}" >&3')
            last = send.time
        steps.append(f"timeout {self.wait:g} cat <&3 | od -An -tx1")
        return "bash -c '" + "; ".join(steps) + "'"

    def script(self) -> str:
        """The standalone Python script (standard library only)."""
        return _script(self)

    def to_json(self) -> dict[str, Any]:
        """For findings.json: the script's path in the report folder, the one-liner (None without one), what the
        replay cannot reproduce, and the password variable when the case needs one (never the password)."""
        return {
            "script": self.path,
            "shell": self.one_liner(),
            "shell_tools": "bash (/dev/tcp), printf, sleep, timeout, cat, od" if self.one_liner() else None,
            "password_from": PASSWORD_VARIABLE if self.needs_password else None,
            "limits": list(self.limits),
        }


def script_path(case_id: str) -> str:
    """The script of ``case_id`` in the report folder; each part of the id made a safe file name."""
    parts = [re.sub(r"[^A-Za-z0-9._-]", "_", part).lstrip(".") or "_" for part in case_id.split("/")]
    return "/".join([FOLDER, *parts[:-1], parts[-1] + ".py"])


def reproducer(result: CaseResult, target: Target) -> Reproducer:
    """The reproducer of one case's recorded connections (``CaseResult.connections``) against ``target``'s host
    and port; a password the run carried is masked in the recorded CONNECTs, the script asks for it."""
    connections: Sequence[Mapping[str, Any]] = result.connections
    has_password = target.credentials is not None and target.credentials.password is not None
    host, port, scheme = target.host, target.port, target.scheme
    limits: list[str] = []
    gaps = 0
    names: list[str] = []
    sends: list[Send] = []
    end = 0.0
    for index, connection in enumerate(connections):
        names.append(printable(cut(str(connection.get("name", f"c{index}")), 60)))
        events = list(connection.get("events") or [])
        omitted = connection.get("omitted")
        if isinstance(omitted, Mapping):
            later = list(omitted.get("client_events") or [])
            unrecorded = _int(omitted.get("client_packets")) - len(later)
            events += later
            if unrecorded > 0:
                gaps += unrecorded
                limits.append(
                    f"connection {names[-1]}: {unrecorded:,} client packets past the evidence's bounds are not replayed"
                )
            last = omitted.get("end")
            if isinstance(last, Mapping):
                end = max(end, _float(last.get("t")))
        for event in events:
            end = max(end, _float(event.get("t")))
            if event.get("closed_by") == "client":
                how = "rst" if event.get("how") == "rst" else "fin"
                sends.append(Send(index, _float(event.get("t")), b"", 0, close=how))
                continue
            if event.get("from") != "client":
                continue
            send = _send(index, event, has_password)
            if send is None:
                gaps += 1
                limits.append(f"connection {names[-1]}: a frame whose bytes were masked is not replayed")
                continue
            if not send.whole:
                limits.append(
                    f"connection {names[-1]}: a frame of {send.length:,} bytes was recorded by its first "
                    f"{len(send.data):,}; the replay pads it to its length with its last recorded byte"
                )
            sends.append(send)
    sends.sort(key=lambda send: send.time)
    if scheme in ("ws", "wss"):
        limits.append(
            "the case ran over WebSocket; the script sends the same MQTT bytes over plain TCP (or TLS with --tls), "
            "so point it at the broker's TCP listener"
        )
    if any(send.password for send in sends):
        limits.append(f"the CONNECT carries the target's password: the script takes it from ${PASSWORD_VARIABLE}")
    if len(names) > 1 or len(sends) > 1:
        limits.append(
            "the bytes are replayed at the recorded times, not in answer to the broker: an answer that depends on "
            "what the broker chose (a Packet Identifier it assigned, a session left by an earlier run) may differ"
        )
    last_send = sends[-1].time if sends else 0.0
    return Reproducer(
        case=result.case.id,
        title=result.case.title,
        protocol=result.case.protocol.value,
        verdict=result.verdict,
        reason=result.reason,
        host=host,
        port=port,
        scheme=scheme,
        connections=tuple(names),
        sends=tuple(sends),
        tail=max(0.0, end - last_send),
        limits=tuple(dict.fromkeys(limits)),
        framing="raw" if scheme.startswith("amqp") else "mqtt",
        gaps=gaps,
    )


def _send(index: int, event: Mapping[str, Any], has_password: bool) -> Send | None:
    octets = str(event.get("hex", "")).split()
    if not all(_MASKED_OCTET.match(octet) for octet in octets):
        return None  # an AMQP frame whose password the evidence shows as '**'
    data = bytes.fromhex("".join(octets))
    length = max(_int(event.get("length")) or len(data), len(data))
    body = _password_connect_body(data) if has_password and length == len(data) else None
    if body is not None:  # its length is the password's, known when the script runs
        return Send(index, _float(event.get("t")), body, len(body), password=True)
    return Send(index, _float(event.get("t")), data, length)


def _password_connect_body(frame: bytes) -> bytes | None:
    """The body of an MQTT CONNECT up to its password field when the password is masked (asterisks, its length
    before them: the password is the last field of a CONNECT in 3.1.1 and 5.0), else None."""
    if not frame or frame[0] != 0x10:  # CONNECT, flags 0
        return None
    start = 1
    while start < len(frame) and start <= 4 and frame[start] & 0x80:  # a length of 4 bytes at most
        start += 1
    body = frame[start + 1 :]
    stars = len(body) - len(body.rstrip(b"*"))
    if stars == 0 or len(body) < stars + 2 or int.from_bytes(body[-stars - 2 : -stars], "big") != stars:
        return None
    return body[: -stars - 2]


def _octal(data: bytes) -> str:
    """``data`` as a ``printf`` format inside double quotes inside single quotes: letters and digits as
    themselves, every other octet as a three-digit octal escape (POSIX printf; no quote, ``%``, ``$`` or
    backslash left to any shell)."""
    return "".join(chr(octet) if octet in _LITERAL else f"\\{octet:03o}" for octet in data)


def _plain_host(host: str) -> bool:
    return re.fullmatch(r"[A-Za-z0-9.:-]+", host) is not None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _comment(text: str) -> str:
    """Text for one comment line of a script: printable (no line break can end the comment), cut."""
    return printable(cut(text, COMMENT_CHARS, "findings.json"))


def _wrapped(text: str, first: str, rest: str) -> list[str]:
    """Comment lines of at most 110 characters (a long word stays whole)."""
    return textwrap.wrap(text, 110, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False) or [first]


def _script(rep: Reproducer) -> str:
    sends = []
    for send in rep.sends:
        if send.close:
            sends.append(f"    ({send.connection}, {send.time:.6f}, {send.close!r}),")
            continue
        hexed = send.data.hex(" ")
        data = f'with_password(bytes.fromhex("{hexed}"))' if send.password else f'bytes.fromhex("{hexed}")'
        if not send.whole:
            data = f"padded({data}, {send.length})"
        sends.append(f"    ({send.connection}, {send.time:.6f}, {data}),")
    limits = [line for limit in rep.limits for line in _wrapped(printable(limit), "#   - ", "#     ")]
    header = [
        "#!/usr/bin/env python3",
        f"# Reproducer of the mqttaudit probe case {_comment(rep.case)} (MQTT {_comment(rep.protocol)}):",
        *_wrapped(_comment(rep.title), "#   ", "#   "),
        *_wrapped(f"Recorded verdict: {_comment(rep.verdict)}: {_comment(rep.reason)}", "# ", "#   "),
        "#",
        *_wrapped(
            f"Replays the bytes the prober sent on the case's {len(rep.connections)} connection(s), in the recorded "
            "order and at the recorded times, then prints what the broker answers as hex (one MQTT packet a line) "
            "and how each connection ended. Standard library only (Python 3.8 or later):",
            "# ",
            "# ",
        ),
        "#",
        f"#   python3 {rep.path.rsplit('/', 1)[-1]} [HOST] [PORT] [--tls] [--insecure] [--wait SECONDS]",
        "#",
        f"# HOST and PORT default to the probed target, {_comment(rep.host)}:{rep.port}.",
        "# What this replay cannot reproduce:",
        *(limits or ["#   (nothing: every byte is recorded whole)"]),
    ]
    return (
        "\n".join(header)
        + "\n"
        + _BODY.format(
            connections=repr(list(rep.connections)),
            host=repr(rep.host),
            port=rep.port,
            wait=f"{rep.wait:g}",
            tls=repr(rep.scheme in ("mqtts", "wss", "amqps")),
            framing=repr(rep.framing),
            variable=repr(PASSWORD_VARIABLE),
            sends="\n".join(sends),
        )
    )


_BODY = '''
import argparse
import os
import selectors
import socket
import ssl
import struct
import sys
import time

HOST, PORT, WAIT, TLS, FRAMING = {host}, {port}, {wait}, {tls}, {framing}
PASSWORD_VARIABLE = {variable}
#: Bytes of one answer printed; a longer one is cut, its length noted.
SHOWN = 256
#: Bytes of one packet framed at most; past it, what the broker sends is printed as read.
LARGEST = 1 << 20


def with_password(body):
    """A CONNECT to build at send time from its body up to the password and the password of the environment."""
    return ("password", body)


def connect_with_password(body):
    password = os.environ.get(PASSWORD_VARIABLE)
    if password is None:
        sys.exit("this case's CONNECT carries the target's password: set " + PASSWORD_VARIABLE)
    secret = password.encode("utf-8")
    body += len(secret).to_bytes(2, "big") + secret
    return bytes([0x10]) + remaining_length(len(body)) + body


def remaining_length(value):
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def padded(data, length):
    """A frame the evidence holds only the start of, padded to its length with its last recorded byte."""
    return data + data[-1:] * (length - len(data))


def packets(buffer):
    """The whole MQTT packets at the start of buffer and the rest; None for the rest when no MQTT framing
    holds it (a fifth length byte, or a packet of more than LARGEST bytes, printed as read from then on)."""
    out = []
    while len(buffer) >= 2:
        length, at = 0, 1
        while True:
            if at > 4:
                return out, None
            if at >= len(buffer):
                return out, buffer
            length += (buffer[at] & 0x7F) << (7 * (at - 1))
            at += 1
            if not buffer[at - 1] & 0x80:
                break
        if at + length > LARGEST:
            return out, None
        if len(buffer) < at + length:
            break
        out.append(buffer[: at + length])
        buffer = buffer[at + length :]
    return out, buffer


def shown(data):
    text = data[:SHOWN].hex(" ")
    return text + (" ... ({{:,}} bytes)".format(len(data)) if len(data) > SHOWN else "")


CONNECTIONS = {connections}
#: (connection, seconds from the start, bytes), in the order sent; "fin" or "rst" for the prober's close.
SENDS = [
{sends}
]


def main():
    parser = argparse.ArgumentParser(description="Replays one mqttaudit probe case against a broker.")
    parser.add_argument("host", nargs="?", default=HOST)
    parser.add_argument("port", nargs="?", type=int, default=PORT)
    parser.add_argument("--tls", action="store_true", default=TLS, help="connect with TLS")
    parser.add_argument("--insecure", action="store_true", help="with --tls: do not verify the certificate")
    parser.add_argument("--wait", type=float, default=WAIT, help="seconds to listen after the last send")
    options = parser.parse_args()
    context = None
    if options.tls:
        context = ssl.create_default_context()
        if options.insecure:
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    sockets, buffers, selector = {{}}, {{}}, selectors.DefaultSelector()
    start = time.monotonic()

    def say(index, text):
        print("{{:8.3f}} s  {{}}  {{}}".format(time.monotonic() - start, CONNECTIONS[index], text), flush=True)

    def read(until):
        while sockets and time.monotonic() < until:
            for key, _ in selector.select(max(0.0, until - time.monotonic())):
                index = key.data
                try:
                    data = key.fileobj.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                except OSError as exc:
                    data, ended = b"", "reset ({{}})".format(exc.strerror or type(exc).__name__)
                else:
                    ended = "closed by the broker (FIN)"
                if data and FRAMING == "mqtt" and buffers[index] is not None:
                    pending = buffers[index] + data
                    whole, buffers[index] = packets(pending)
                    for packet in whole:
                        say(index, "<- " + shown(packet))
                    if buffers[index] is None:
                        say(index, "<- unframed: " + shown(pending[sum(map(len, whole)) :]))
                elif data:
                    say(index, "<- " + shown(data))
                if not data:
                    if buffers[index]:
                        say(index, "<- incomplete packet: " + shown(buffers[index]))
                    say(index, ended)
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    del sockets[index]

    for index, at, data in SENDS:
        read(start + at)
        if data in ("fin", "rst"):
            if index in sockets:
                if data == "rst":  # a drop: the reset a lost network gives
                    sockets[index].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                selector.unregister(sockets[index])
                sockets.pop(index).close()
                say(index, "closed by the client ({{}})".format(data.upper()))
            continue
        if isinstance(data, tuple):
            data = connect_with_password(data[1])
        if index not in sockets and index in buffers:
            say(index, "-> not sent, the connection is closed: " + shown(data))
            continue
        if index not in sockets:
            try:
                raw = socket.create_connection((options.host, options.port), timeout=10)
                if context is not None:
                    raw = context.wrap_socket(raw, server_hostname=options.host)
            except OSError as exc:
                sys.exit("cannot connect to {{}}:{{}}: {{}}".format(options.host, options.port, exc))
            raw.setblocking(False)
            sockets[index], buffers[index] = raw, b""
            selector.register(raw, selectors.EVENT_READ, index)
        say(index, "-> " + shown(data))
        try:
            sockets[index].setblocking(True)
            sockets[index].sendall(data)
            sockets[index].setblocking(False)
        except OSError as exc:
            say(index, "send failed: {{}}".format(exc.strerror or type(exc).__name__))
    read(time.monotonic() + options.wait)
    for index in sorted(sockets):
        say(index, "still open after {{:g}} s".format(options.wait))
        sockets[index].close()


if __name__ == "__main__":
    main()
'''


def reproducers(run: ProbeRun, first_cases: Sequence[str] = ()) -> dict[str, Reproducer]:
    """Case id -> reproducer, for every case that carries a finding: each failing and lenient case, and
    ``first_cases`` (the cases where a violation outside the cases' statements was first seen)."""
    wanted = set(first_cases)
    return {
        result.case.id: reproducer(result, run.target)
        for result in run.results
        if (result.verdict in (FAIL, LENIENT) or result.case.id in wanted) and result.connections
    }


def write_reproducers(found: Mapping[str, Reproducer], out: Path) -> list[Path]:
    """Writes each reproducer's script under ``out`` (the report folder), executable; the paths written."""
    paths = []
    for rep in found.values():
        path = out / rep.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rep.script(), encoding="utf-8")
        path.chmod(0o755)
        paths.append(path)
    return paths
