"""Reproducers of a serve finding: the broker's side of the connection, as a short standalone Python script
(standard library only) that listens on a port, waits for the client's bytes as they came, sends the bytes mqttaudit
serve sent, in the recorded order, and prints what the client does — so a client library's developer can replay the
situation against the client without mqttaudit.

Built from the recorded evidence (what findings.json holds), so it says what it cannot replay: a frame the evidence
holds only the start of, events past the evidence's bounds, answers that hang on what the client chose (Packet
Identifiers it assigned are replayed as recorded), and WebSocket or TLS (the script speaks plain TCP).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..serve.server import ServedClient, ServeRun
from .peer_text import cut, printable
from .reproducer import FOLDER

#: Characters of a finding's text written into the script's comments.
COMMENT_CHARS = 200


def steps(events: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[str, str]], list[str]]:
    """("expect", hex) for the client's bytes, ("send", hex) for the broker's, ("close", "") where the broker closed;
    and what the evidence could not hold whole."""
    out: list[tuple[str, str]] = []
    cut_short: list[str] = []
    for number, event in enumerate(events):
        sender = event.get("from")
        if sender in ("client", "server"):
            raw = bytes.fromhex(str(event.get("hex", "")).replace(" ", ""))
            length = event.get("length")
            if isinstance(length, int) and length > len(raw):
                cut_short.append(f"event {number}: {length} bytes, {len(raw)} recorded")
            out.append(("expect" if sender == "client" else "send", raw.hex()))
        elif event.get("closed_by") == "server":
            out.append(("close", ""))
            break
        elif event.get("closed_by") == "client":
            break
    return out, cut_short


def serve_reproducer(client: ServedClient) -> str:
    """The script replaying the broker's side of ``client``'s connection."""
    script_steps, cut_short = steps(client.events)
    findings = [
        f"#   {printable(str(f.rule))}: {cut(printable(f.detail), COMMENT_CHARS)}" for f in client.client_findings
    ]
    notes = [f"#   {note}" for note in cut_short]
    if client.events_omitted:
        notes.append(f"#   {client.events_omitted} events past the evidence's bounds are not replayed")
    return "\n".join(
        [
            "#!/usr/bin/env python3",
            f"# Replays mqttaudit serve's side of connection {printable(client.name)} "
            f"(client id {printable(client.client_id)!r}, MQTT {printable(client.version or '?')}).",
            "# Run it, point the client at 127.0.0.1:PORT (default 1883), and watch what the client sends.",
            "# What the client broke there:",
            *findings,
            *(["# Not replayed as recorded:", *notes] if notes else []),
            "import socket",
            "import sys",
            "",
            f"STEPS = {script_steps!r}",
            "",
            "",
            "def main() -> int:",
            "    port = int(sys.argv[1]) if len(sys.argv) > 1 else 1883",
            "    listener = socket.create_server(('127.0.0.1', port))",
            "    print(f'listening on 127.0.0.1:{port}', flush=True)",
            "    connection, peer = listener.accept()",
            "    connection.settimeout(5.0)",
            "    pending = b''",
            "    for action, data in STEPS:",
            "        wanted = bytes.fromhex(data)",
            "        if action == 'expect':",
            "            while len(pending) < len(wanted):",
            "                try:",
            "                    more = connection.recv(65536)",
            "                except TimeoutError:",
            "                    more = b''",
            "                if not more:",
            "                    print('the client sent', pending.hex(' ') or 'nothing', 'and stopped', flush=True)",
            "                    return 1",
            "                pending += more",
            "            print('client ->', pending[: len(wanted)].hex(' '), flush=True)",
            "            pending = pending[len(wanted) :]",
            "        elif action == 'send':",
            "            print('server ->', wanted.hex(' '), flush=True)",
            "            connection.sendall(wanted)",
            "        else:",
            "            print('server closes the connection', flush=True)",
            "            connection.close()",
            "            return 0",
            "    try:",
            "        rest = connection.recv(65536)",
            "        print('client then:', rest.hex(' ') if rest else 'closed the connection', flush=True)",
            "    except TimeoutError:",
            "        print('client then: nothing for 5 s, connection still open', flush=True)",
            "    return 0",
            "",
            "",
            "if __name__ == '__main__':",
            "    raise SystemExit(main())",
            "",
        ]
    )


def write_serve_reproducers(run: ServeRun, out: Path) -> Path | None:
    """``reproducers/<connection>.py`` for every client connection with a finding; the folder, or None."""
    chosen = [client for client in run.clients if client.client_findings]
    if not chosen:
        return None
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for client in chosen:
        (folder / f"{client.name}.py").write_text(serve_reproducer(client), encoding="utf-8")
    return folder
