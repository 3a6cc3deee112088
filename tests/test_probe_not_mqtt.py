"""``mqttaudit probe`` pointed at something that is not an MQTT broker: the preflight tells it from a broker in one
exchange per version (a CONNECT, then the first bytes within the timeout) and stops before any case runs, saying what
it found, with exit 4. Each target is a real server on 127.0.0.1: Python's own HTTP server, and scripted peers that
answer like nginx, a TLS port or an SSH server, close at once or stay silent."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import re
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mqttaudit.codec import Connack, Connect, Direction, ProtocolVersion, Publish, StreamDecoder, encode
from mqttaudit.probe.brokers import start_broker
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.runner import run_probe

from .hostile_server import _scripted_answer
from .probe_process import Outcome, probe

TIMEOUT = 1.0
#: Bound of a refused run: two greetings of one timeout each, and the interpreter's start (never a case library).
LIMIT = 60.0


class Peer:
    """A TCP server on 127.0.0.1 that runs ``behaviour`` on each connection in a thread, counting connections."""

    def __init__(self, behaviour: Callable[[socket.socket], None]) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"mqtt://127.0.0.1:{self.listener.getsockname()[1]}"
        self.stopped = threading.Event()

    def __enter__(self) -> Peer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.listener.close()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self.listener.accept()
                self.connections += 1
                threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connection.settimeout(30)
            self.behaviour(connection)

    def hold(self, connection: socket.socket) -> None:
        """Reads until the client closes (or the test ends), answering nothing."""
        with contextlib.suppress(OSError):
            while not self.stopped.is_set() and connection.recv(4096):
                pass


def answering(reply: bytes, *, first: bool = False) -> Callable[[Peer], Callable[[socket.socket], None]]:
    """A peer that sends ``reply`` once it has read the CONNECT's first bytes (or at once, with ``first``), then
    holds the connection open."""

    def make(peer: Peer) -> Callable[[socket.socket], None]:
        def behaviour(connection: socket.socket) -> None:
            if not first:
                connection.recv(1)
            connection.sendall(reply)
            peer.hold(connection)

        return behaviour

    return make


def closing(peer: Peer) -> Callable[[socket.socket], None]:
    return lambda connection: connection.close()


def silent(peer: Peer) -> Callable[[socket.socket], None]:
    return peer.hold


HTTP_400 = b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
PEERS: dict[str, tuple[Callable[[Peer], Callable[[socket.socket], None]], str]] = {
    # nginx answers a request line it cannot parse at once
    "http": (
        answering(HTTP_400),
        re.escape("answered a plain 3.1.1 CONNECT with `HTTP/1.1 400 Bad Request`: not an MQTT"),
    ),
    # a TLS server reads our CONNECT as a bad record: a fatal alert, decode_error
    "tls": (
        answering(bytes.fromhex("15 03 03 00 02 02 32")),
        re.escape("with the bytes 15 03 03 00 02 02 32 (a TLS record: "),
    ),
    "ssh": (
        answering(b"SSH-2.0-OpenSSH_9.2p1\r\n", first=True),
        re.escape("with `SSH-2.0-OpenSSH_9.2p1`: not an MQTT broker?"),
    ),
    "garbage": (
        answering(b"\x00\xff\x1b[2J\x00\x07" * 20),
        re.escape("with the bytes 00 ff 1b 5b 32 4a 00 07 00 ff 1b 5b "),
    ),
    # closed before or after the CONNECT came in: a FIN, or an RST for the bytes it never read
    "closing": (
        closing,
        r"it (closed|reset) the connection on a plain 3\.1\.1 CONNECT without answering; it (closed|reset) the "
        r"connection on a plain 5\.0 CONNECT without answering: not an MQTT broker\?",
    ),
    "silent": (
        silent,
        re.escape(
            f"it did not answer a plain 3.1.1 CONNECT within {TIMEOUT:g} s; it did not answer a plain 5.0 CONNECT "
            f"within {TIMEOUT:g} s: not an MQTT broker?"
        ),
    ),
}


def assert_refused_before_any_case(outcome: Outcome, said: str, connections: int) -> None:
    assert outcome.status == 4, outcome.stdout + outcome.stderr
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mqttaudit: mqtt://127.0.0.1:"), outcome.stderr
    assert re.search(said, lines[0]), lines[0]
    assert lines[0].endswith(" — nothing was probed"), lines[0]
    assert "Task was destroyed" not in outcome.stderr and "Traceback" not in outcome.stderr
    assert connections <= 2  # one greeting per version: no case ran
    results = outcome.report()["results"]
    assert len(results) == len(CASES) and all(r["reason"].startswith("not probed: ") for r in results)


@pytest.mark.parametrize("name", PEERS)
def test_a_peer_that_is_not_an_mqtt_broker_stops_the_probe_before_any_case_with_exit_4(
    name: str, tmp_path: Path
) -> None:
    make, said = PEERS[name]
    with Peer(lambda connection: None) as peer:
        peer.behaviour = make(peer)
        outcome = probe(peer.url, tmp_path / "out", "--timeout", str(TIMEOUT), limit=LIMIT)
        connections = peer.connections
    assert_refused_before_any_case(outcome, said, connections)


@contextlib.contextmanager
def http_server() -> Iterator[tuple[str, list[int]]]:
    """Python's own HTTP server on a free port; the list counts the connections it took."""
    accepted: list[int] = []

    class Server(http.server.ThreadingHTTPServer):
        def process_request(self, request: object, client_address: object) -> None:
            accepted.append(1)
            super().process_request(request, client_address)  # type: ignore[arg-type]

    server = Server(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"mqtt://127.0.0.1:{server.server_address[1]}", accepted
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_server_on_the_port_is_not_an_mqtt_broker(tmp_path: Path) -> None:
    """The HTTP server reads a request line up to a newline, which a CONNECT does not hold: it says nothing."""
    with http_server() as (url, accepted):
        outcome = probe(url, tmp_path / "out", "--timeout", str(TIMEOUT), limit=LIMIT)
    assert_refused_before_any_case(outcome, "did not answer a plain 3.1.1 CONNECT", len(accepted))


def test_an_http_server_behind_a_websocket_target_is_refused_at_the_upgrade(tmp_path: Path) -> None:
    """Over ws:// the upgrade is the first exchange: Python's HTTP server answers it 404 and the probe stops."""
    with http_server() as (url, accepted):
        target = url.replace("mqtt://", "ws://") + "/mqtt"
        outcome = probe(target, tmp_path / "out", "--timeout", str(TIMEOUT), limit=LIMIT)
    assert outcome.status == 4, outcome.stdout + outcome.stderr
    [line] = outcome.stderr.strip().splitlines()
    assert "404" in line and line.endswith(" — nothing was probed"), line
    assert "Task was destroyed" not in outcome.stderr and "Traceback" not in outcome.stderr
    assert len(accepted) == 1


def test_a_real_broker_passes_the_preflight(tmp_path: Path) -> None:
    with start_broker("mosquitto") as broker:
        outcome = probe(broker.url, tmp_path / "out", "--timeout", "2", "--cases", "connect/accepted", limit=LIMIT)
    assert outcome.status == 0, outcome.stdout + outcome.stderr
    [result] = outcome.report()["results"]
    assert result["verdict"] == "pass"
    assert "Task was destroyed" not in outcome.stderr


def test_a_clean_up_connection_the_broker_never_accepts_is_ended_not_left_pending() -> None:
    """A broker that accepts every CONNECT until it holds a retained message, and none after: the case's clean-up
    connection (no part of the evidence) gets no CONNACK either. It is ended all the same, while the run goes on:
    before, nothing held it, and asyncio said "Task was destroyed but it is pending!" of its reader when the
    garbage collector took it (three times in a newcomer's run against an HTTP server)."""
    retained = threading.Event()
    refused = threading.Event()
    ended = threading.Event()

    def behaviour(connection: socket.socket) -> None:
        decoder = StreamDecoder(Direction.FROM_CLIENT, version=None)
        while data := connection.recv(65536):
            for frame in decoder.feed(data):
                packet = frame.packet
                if isinstance(packet, Connect) and retained.is_set():
                    refused.set()
                    try:
                        peer.hold(connection)
                    finally:
                        ended.set()
                    return
                if isinstance(packet, Connect):
                    connection.sendall(encode(Connack(return_code=0)))
                elif packet is not None:
                    if isinstance(packet, Publish) and packet.retain and packet.payload:
                        retained.set()
                    answer = _scripted_answer(packet, ProtocolVersion.V3_1_1)
                    if answer is not None:
                        connection.sendall(encode(answer))

    async def scenario() -> tuple[str, list[str], bool]:
        run = await run_probe(Target.parse(peer.url), [CASES["retain/delivered-on-subscribe"]], timeout=0.5)
        pending = [task.get_name() for task in asyncio.all_tasks() if task.get_name().startswith("probe-read-")]
        return run.results[0].verdict, pending, await asyncio.to_thread(ended.wait, 10)

    with Peer(behaviour) as peer:
        verdict, pending, closed = asyncio.run(scenario())
    # the subscriber that comes after the retained PUBLISH got no CONNACK, nor did the clean-up connection
    assert refused.is_set() and verdict == "inconclusive"
    assert pending == []
    assert closed  # the prober ended the clean-up connection itself, long before its event loop closed
