"""A recording relay: where tcpdump may not capture, clients talk to the broker through this relay, which writes
what passes through as a pcapng capture of raw IPv4 frames, with a handshake, every chunk of bytes as one TCP
segment with correct sequence numbers, and FIN or RST at the end, so the audit reads it like any capture.

It listens on 127.0.0.1 (a free port); each accepted connection is relayed to the broker on a connection of its
own and recorded under its real loopback endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from mqttaudit.capture.writer import PcapngWriter, TcpSession

RAW_IPV4 = 228  # LINKTYPE_IPV4
NANOSECONDS = 9


class RecordingRelay:
    """Relays 127.0.0.1:``port`` to ``broker_host``:``broker_port`` and records both directions."""

    def __init__(self, broker_host: str, broker_port: int, capture: Path) -> None:
        self.broker = (broker_host, broker_port)
        self.capture = capture
        self.port = 0
        self._lock = threading.Lock()
        self._file = capture.open("wb")
        self._writer = PcapngWriter(self._file)
        self._writer.section()
        self._interface = self._writer.add_interface(RAW_IPV4, tsresol=NANOSECONDS)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None

    def _record(self, frame: bytes) -> None:
        with self._lock:
            self._writer.write(self._interface, time.time_ns(), frame)
            self._file.flush()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        peer = client_writer.get_extra_info("peername")
        try:
            broker_reader, broker_writer = await asyncio.open_connection(*self.broker)
        except OSError:
            client_writer.close()
            return
        session = TcpSession((peer[0], peer[1]), self.broker)
        for frame in session.handshake():
            self._record(frame)

        async def pipe(side: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while data := await reader.read(65536):
                    self._record(session.send(side, data))
                    writer.write(data)
                    await writer.drain()
                self._record(session.fin(side))
            except (ConnectionError, OSError):
                self._record(session.reset(side))
            finally:
                with contextlib.suppress(Exception):
                    writer.close()

        await asyncio.gather(pipe(0, client_reader, broker_writer), pipe(1, broker_reader, client_writer))

    def start(self) -> RecordingRelay:
        self._thread.start()
        self._ready.wait(5)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        with self._lock:
            self._file.close()


@contextlib.contextmanager
def relay_recording(capture: Path, broker_host: str, broker_port: int) -> Iterator[RecordingRelay]:
    """Runs a :class:`RecordingRelay` for the block; clients connect to ``relay.port``."""
    relay = RecordingRelay(broker_host, broker_port, capture).start()
    try:
        yield relay
    finally:
        time.sleep(0.2)
        relay.stop()
