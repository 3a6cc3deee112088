"""WebSocket servers that break the rules the prober's transport relies on: an upgrade refused with HTTP 404, an
upgrade accepted without the ``mqtt`` subprotocol [MQTT-6.0.0-4], and MQTT bytes in a text frame [MQTT-6.0.0-1].
Each is a small server of its own on 127.0.0.1 speaking real WebSocket (wsproto's server side); the prober must say
why in one line, never raise.

Then hostile WebSocket brokers (tests/hostile_server.py, ``ws_`` modes) against the real ``mqttaudit probe``, its
peak memory measured where memory was the break: Pings that keep coming after the prober's Close frame, a frame
header declaring 2^63 bytes in the same write as the 101, a Ping flood from a broker that reads nothing."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.connection import Connection, ConnectionState
from wsproto.events import AcceptConnection, CloseConnection, Ping, RejectConnection, Request, TextMessage

from mqttaudit.codec import Connack, Connect, ProtocolVersion, Publish, encode
from mqttaudit.probe.case import Target
from mqttaudit.probe.connection import ProbeConnection
from mqttaudit.probe.preflight import Refusal, preflight
from mqttaudit.probe.targets import parse_target
from mqttaudit.probe.transport import (
    MAX_CONTROL_BACKLOG,
    MAX_MESSAGE,
    SocketStream,
    StreamCapped,
    WebSocketStream,
    open_stream,
)

from .hostile_server import HostileServer
from .probe_process import REPORTS, probe

Answer = Callable[[WSConnection, Request], bytes]


@asynccontextmanager
async def websocket_server(answer: Answer, after: bytes = b"") -> AsyncIterator[int]:
    """Answers each upgrade with ``answer``'s bytes, then sends ``after`` (already framed) once the client writes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        websocket = WSConnection(ConnectionType.SERVER)
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                websocket.receive_data(data)
                for event in websocket.events():
                    if isinstance(event, Request):
                        writer.write(answer(websocket, event))
                        await writer.drain()
                    else:
                        writer.write(after)
                        await writer.drain()
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _not_found(websocket: WSConnection, request: Request) -> bytes:
    return websocket.send(RejectConnection(status_code=404))


def _no_subprotocol(websocket: WSConnection, request: Request) -> bytes:
    return websocket.send(AcceptConnection())


def _mqtt(websocket: WSConnection, request: Request) -> bytes:
    return websocket.send(AcceptConnection(subprotocol="mqtt"))


def _run(coroutine: Callable[[], Awaitable[Refusal | None]]) -> Refusal | None:
    return asyncio.run(coroutine())


def test_a_refused_upgrade_is_one_line() -> None:
    ports: list[int] = []

    async def go() -> Refusal | None:
        async with websocket_server(_not_found) as port:
            ports.append(port)
            return await preflight(Target("127.0.0.1", port, "ws", "/mqtt"), 1.0)

    refusal = _run(go)
    assert refusal == Refusal(
        "unreachable",
        f"cannot reach ws://127.0.0.1:{ports[0]}/mqtt: WebSocket: the broker refused the upgrade (HTTP 404)",
    )


def test_an_upgrade_without_the_mqtt_subprotocol_is_refused_with_the_statement() -> None:
    async def go() -> Refusal | None:
        async with websocket_server(_no_subprotocol) as port:
            return await preflight(Target("127.0.0.1", port, "ws", "/mqtt"), 1.0)

    refusal = _run(go)
    assert refusal is not None
    assert refusal.message.endswith("WebSocket: the broker chose subprotocol none, not 'mqtt' [MQTT-6.0.0-4]")


def test_a_text_frame_ends_the_connection_and_says_why() -> None:
    """The CONNACK comes in a text frame: no CONNACK is read, and the reason names the frame and MQTT-6.0.0-1."""
    server_side = WSConnection(ConnectionType.SERVER)
    server_side.receive_data(
        b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Protocol: mqtt\r\n\r\n"
    )
    next(server_side.events())
    server_side.send(AcceptConnection(subprotocol="mqtt"))
    text_frame = server_side.send(TextMessage(data="\x20\x02\x00\x00"))

    async def go() -> Refusal | None:
        async with websocket_server(_mqtt, after=text_frame) as port:
            return await preflight(Target("127.0.0.1", port, "ws", "/mqtt"), 1.0)

    refusal = _run(go)
    assert refusal is not None
    assert "WebSocket: the broker sent a text frame; MQTT goes in binary frames [MQTT-6.0.0-1]" in refusal.message


@pytest.mark.parametrize("answer", [_not_found, _no_subprotocol])
def test_the_cli_exits_4_with_one_line(answer: Answer, tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import threading

    from mqttaudit.cli.main import main

    ready = threading.Event()
    stop = threading.Event()
    port_box: list[int] = []

    def serve() -> None:
        async def go() -> None:
            async with websocket_server(answer) as port:
                port_box.append(port)
                ready.set()
                while not stop.is_set():
                    await asyncio.sleep(0.05)

        asyncio.run(go())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(5)
    try:
        status = main(["probe", f"ws://127.0.0.1:{port_box[0]}", "--out", str(tmp_path), "--timeout", "1"])
    finally:
        stop.set()
        thread.join(5)
    err = capsys.readouterr().err
    assert status == 4
    assert err.count("\n") == 1 and "WebSocket: " in err and "Traceback" not in err


# -- hostile WebSocket brokers against the real command ----------------------------------------------------------

#: The 5.0 CONNACK accepting a CONNECT, what the ``ws_`` brokers answer: the runs below take one 5.0 case.
CONNACK_5 = encode(Connack(return_code=0), version=ProtocolVersion.V5)
CASE = "v5/connect/accepted"
#: Wall time a run below may take at most (it takes a few seconds).
LIMIT = 60
#: The prober's peak resident memory against these brokers: about 40 MB measured; unbounded before (a frame
#: header of 2^63 bytes: 278 MB after two 1 s connections, 2.5 GB in 15 s with the whole library).
PEAK_RSS_MB = 150


def test_pings_after_the_probers_close_frame_end_with_reports_not_an_internal_error(tmp_path: Path) -> None:
    """The broker reads nothing after the CONNECT and sends Pings without end: the prober's Close frame waits in
    its send buffer and its socket goes on reading, so it reads Pings after its Close. It answers none (RFC 6455
    5.5.1); before, wsproto refused that Pong with LocalProtocolError, which nothing caught: exit 3, no reports."""
    with HostileServer("ws_pinging", lifetime=LIMIT, connack=CONNACK_5) as server:
        outcome = probe(server.url, tmp_path / "out", "--timeout", "2", "--cases", CASE, limit=LIMIT)
    assert outcome.status in (0, 1, 4), outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr and "ProtocolError" not in outcome.stderr
    assert all((outcome.out / name).is_file() for name in REPORTS)
    assert [r["case"] for r in outcome.report()["results"]] == [CASE]


def test_a_pong_is_never_sent_once_the_prober_has_sent_its_close() -> None:
    """The same at the stream: a Ping read after the prober's own Close frame is not answered, and the stream ends
    at the broker's Close without raising."""

    async def go() -> tuple[bytes, bytes]:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            reader, writer = await asyncio.open_connection(sock=ours)
            websocket = Connection(ConnectionType.CLIENT)
            websocket.send(CloseConnection(code=1000))  # the prober's Close frame, sent
            assert websocket.state is ConnectionState.LOCAL_CLOSING
            early = [Ping(payload=b"late"), CloseConnection(code=1000)]
            stream = WebSocketStream(SocketStream(reader, writer), websocket, timeout=1.0, early=early)  # type: ignore[arg-type]
            read = await stream.read()
            await stream.drain()
            theirs.setblocking(False)
            try:
                written = theirs.recv(65536)
            except BlockingIOError:
                written = b""
            stream.abort()
            return read, written

    assert asyncio.run(go()) == (b"", b"")


def test_a_frame_of_2_63_bytes_with_the_101_ends_the_connection_with_the_reason_and_bounded_memory(
    tmp_path: Path,
) -> None:
    """The 101 and a binary frame header declaring 2^63 bytes (RFC 6455 forbids the top bit) in one write, then
    bytes as fast as the socket takes them: the frame is met on the stream's first read and the connection ends
    there, with the reason; before, the close wsproto made of it was dropped with the upgrade's events and every
    later byte was kept."""
    with HostileServer("ws_giant_frame", lifetime=LIMIT, max_bytes=4 << 30) as server:
        outcome = probe(server.url, tmp_path / "out", "--timeout", "2", "--cases", CASE, limit=LIMIT)
    print(f"\n2^63-byte frame: exit {outcome.status}, {outcome.wall:.1f} s, peak RSS {outcome.peak_rss_mb:.0f} MB")
    assert outcome.status == 4, outcome.stderr[-2000:]
    assert "WebSocket: the broker sent a frame that breaks RFC 6455 (8-byte payload length with non-zero MSB" in (
        outcome.stderr
    )
    assert outcome.peak_rss_mb < PEAK_RSS_MB


def test_mqtt_bytes_that_come_with_the_101_are_read(tmp_path: Path) -> None:
    """The events that come in the same read as the 101 are the stream's like any later ones: a CONNACK written
    with the 101 is the CONNACK (it was dropped, and the case failed for "no CONNACK")."""
    with HostileServer("ws_early_connack", lifetime=LIMIT, connack=CONNACK_5) as server:
        outcome = probe(server.url, tmp_path / "out", "--timeout", "2", "--cases", CASE, limit=LIMIT)
    results = outcome.report()["results"]
    assert [r["verdict"] for r in results] == ["pass"], results[0]["reason"]


def test_a_ping_flood_from_a_broker_that_reads_nothing_keeps_memory_bounded(tmp_path: Path) -> None:
    """Pings as fast as the socket takes them, and the broker reads nothing: the prober answers the latest Ping of
    each read (RFC 6455 5.5.3) and waits for the socket to drain, so its memory stays flat; the run ends with
    reports that say what the broker did not do (answer a CONNECT: the preflight stops there, exit 4)."""
    with HostileServer("ws_ping_flood", lifetime=LIMIT, max_bytes=4 << 30) as server:
        outcome = probe(server.url, tmp_path / "out", "--timeout", "2", "--cases", CASE, limit=LIMIT)
    print(f"\nPing flood: exit {outcome.status}, {outcome.wall:.1f} s, peak RSS {outcome.peak_rss_mb:.0f} MB")
    assert outcome.status in (1, 4), outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr
    assert outcome.peak_rss_mb < PEAK_RSS_MB
    reasons = [r["reason"] for r in outcome.report()["results"]]
    assert outcome.status == 4
    assert reasons and all("did not answer a plain 5.0 CONNECT within 2 s" in reason for reason in reasons), reasons


def test_replies_to_a_broker_that_reads_nothing_are_capped_and_the_connection_closed_with_the_reason() -> None:
    """The prober has bytes the broker does not read (a large PUBLISH) and the broker keeps sending Pings: the
    replies wait behind them, so past ``MAX_CONTROL_BACKLOG`` unsent bytes for the timeout the prober closes the
    connection, and the connection says why: not assessable, never a verdict on bytes it stopped reading."""

    async def go(url: str) -> tuple[bool, ProbeConnection]:
        stream = await open_stream(parse_target(url), 1.0)
        connection = ProbeConnection("c1", stream, time.monotonic, timeout=1.0)
        await connection.send(Connect(client_id="mqaflood"))
        # more than the kernel's buffers take (up to 4 MiB to send on Linux), so some of it waits in the prober
        await connection.send(Publish(topic="t", payload=bytes(8 << 20)))
        closed = await connection.wait_close(10)
        await connection.finish()
        return closed, connection

    with HostileServer("ws_ping_flood", lifetime=LIMIT, max_bytes=1 << 30) as server:
        closed, connection = asyncio.run(go(server.url))
    assert closed and connection.capped
    summary = connection.cap_summary()
    assert "WebSocket Pings but read nothing for 1 s" in summary, summary
    assert f"past its cap of {MAX_CONTROL_BACKLOG:,}" in summary, summary
    assert "the prober closed the connection" in summary
    assert "evidence kept" in connection.missing("CONNACK")


def test_a_websocket_message_above_the_cap_closes_the_connection_with_the_reason() -> None:
    """A binary frame of 32 MiB is legal WebSocket, but above what the prober takes in one message: it closes the
    connection there (close code 1009) and says why, instead of reading on."""

    async def go(url: str) -> tuple[int, str]:
        stream = await open_stream(parse_target(url), 2.0)
        taken = 0
        try:
            while chunk := await stream.read():
                taken += len(chunk)
        except StreamCapped as exc:
            return taken, str(exc)
        finally:
            stream.abort()
        return taken, "the stream ended"

    with HostileServer("ws_huge_message", lifetime=LIMIT) as server:
        taken, why = asyncio.run(go(server.url))
    assert why == (
        f"WebSocket: the broker sent a message of more than {MAX_MESSAGE:,} bytes, the prober's cap on one "
        "message; the prober closed the connection (close code 1009)"
    )
    assert taken <= MAX_MESSAGE
