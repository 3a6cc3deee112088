"""The reference broker in a thread of its own, for a test suite or a script that drives clients synchronously:
``with BackgroundServe() as serve: connect to serve.url ...; run = serve.stop()``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

from .broker import V3, V5, Limits
from .server import ServeRun, ServeServer

#: Seconds the thread may take to start listening, or to stop.
STARTUP: float = 10.0


class BackgroundServe:
    """Runs :class:`ServeServer` on its own event loop in a daemon thread (port 0: a free one)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        levels: Iterable[int] = (V3, V5),
        limits: Limits | None = None,
        **options: Any,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._server = ServeServer(host, port, levels=levels, limits=limits, **options)
        self._thread = threading.Thread(target=self._loop.run_forever, name="mqttaudit-serve", daemon=True)
        self._run: ServeRun | None = None

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def host(self) -> str:
        return self._server.host

    def start(self) -> BackgroundServe:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._server.start(), self._loop).result(STARTUP)
        return self

    def stop(self) -> ServeRun:
        """Stops the broker, judges what is still open, and returns the run (the same run on a second call)."""
        if self._run is None:
            self._run = asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(STARTUP)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(STARTUP)
            self._loop.close()
        return self._run

    def clients_done(self) -> int:
        """How many client connections have ended and been judged so far."""
        return len(self._server.run.clients)

    def wait_for_open_connections_to_end(self, timeout: float) -> bool:
        """Waits until every connection has ended (the clients closed them); False when ``timeout`` passed first
        (:meth:`stop` then closes the rest)."""
        return _until(lambda: not self._server.open_connections, timeout)

    def wait_for_clients(self, count: int, timeout: float = 10.0) -> bool:
        """Waits until ``count`` client connections have ended and been judged; False when ``timeout`` passed
        first."""
        return _until(lambda: self.clients_done() >= count, timeout)

    def __enter__(self) -> BackgroundServe:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def _until(test: Callable[[], bool], timeout: float) -> bool:
    """Polls ``test`` (the broker's thread updates what it reads) until it holds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True
