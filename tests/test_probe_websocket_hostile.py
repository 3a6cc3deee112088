"""WebSocket servers that break the rules the prober's transport relies on: an upgrade refused with HTTP 404, an
upgrade accepted without the ``mqtt`` subprotocol [MQTT-6.0.0-4], and MQTT bytes in a text frame [MQTT-6.0.0-1].
Each is a small server of its own on 127.0.0.1 speaking real WebSocket (wsproto's server side); the prober must say
why in one line, never raise."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, RejectConnection, Request, TextMessage

from mqttaudit.probe.case import Target
from mqttaudit.probe.preflight import Refusal, preflight

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
