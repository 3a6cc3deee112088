"""One TCP connection of a probe case: every byte both ways is framed by the codec and recorded as judge events.

The client side behaves as a correct client unless a case says otherwise: it acknowledges what the broker delivers
(PUBACK, PUBREC/PUBCOMP) so that the broker's own obligations can be judged. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable

from ..codec import Direction, Packet, Puback, Pubcomp, Publish, Pubrec, Pubrel, StreamDecoder, encode
from ..judge.events import Closed, Event, Quiet, Sent

CLIENT = Direction.FROM_CLIENT
SERVER = Direction.FROM_SERVER
READ_SIZE = 65536

PacketTest = Callable[[Packet], bool]


class ProbeConnection:
    """A recorded connection. Times are seconds on the case's clock (``clock()``), shared by its connections."""

    def __init__(
        self,
        name: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        clock: Callable[[], float],
        *,
        timeout: float,
        auto_ack: bool = True,
    ) -> None:
        self.name = name
        self.client_id = ""
        self.events: list[Event] = []
        self.timeout = timeout
        self.auto_ack = auto_ack
        self._reader = reader
        self._writer = writer
        self._clock = clock
        self._to_server = StreamDecoder(CLIENT)
        self._from_server = StreamDecoder(SERVER)
        self._received: list[Packet] = []
        self._changed = asyncio.Condition()
        self._closed: Closed | None = None
        self._reading = asyncio.create_task(self._read(), name=f"probe-read-{name}")

    # -- what was seen ------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def closed_by_server(self) -> bool:
        return self._closed is not None and self._closed.by is SERVER

    @property
    def received(self) -> list[Packet]:
        """Packets the server sent so far, in order."""
        return list(self._received)

    # -- acting -------------------------------------------------------------------------------------------------

    async def send(self, data: Packet | bytes, *, validate: bool = True) -> None:
        """Sends a packet (encoded by the codec; ``validate=False`` for a deliberately invalid one) or raw bytes."""
        raw = data if isinstance(data, bytes) else encode(data, validate=validate, direction=CLIENT)
        if self._closed is not None:
            return  # the broker already closed: nothing more reaches it, and the judge sees why
        now = self._clock()
        self.events.extend(Sent(now, CLIENT, frame) for frame in self._to_server.feed(raw))
        try:
            self._writer.write(raw)
            await asyncio.wait_for(self._writer.drain(), self.timeout)
        except (ConnectionError, TimeoutError, OSError):
            await self._settle()

    async def wait_for(self, test: PacketTest, timeout: float | None = None, *, since: int = 0) -> Packet | None:
        """The first packet from the server (from index ``since`` of ``received``) that passes ``test``; None
        when the connection closes or ``timeout`` passes first."""

        def found() -> Packet | None:
            return next((packet for packet in self._received[since:] if test(packet)), None)

        async def until() -> Packet | None:
            async with self._changed:
                await self._changed.wait_for(lambda: found() is not None or self._closed is not None)
            return found()

        try:
            return await asyncio.wait_for(until(), self.timeout if timeout is None else timeout)
        except TimeoutError:
            return None

    async def wait_type(self, kind: type[Packet], timeout: float | None = None, *, since: int = 0) -> Packet | None:
        return await self.wait_for(lambda packet: isinstance(packet, kind), timeout, since=since)

    async def wait_close(self, timeout: float | None = None) -> bool:
        """Waits until the server closes the connection; False when ``timeout`` passes first."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self._closed is not None)

        try:
            await asyncio.wait_for(until(), self.timeout if timeout is None else timeout)
        except TimeoutError:
            return False
        return True

    async def observe(self, seconds: float) -> None:
        """Watches the connection for ``seconds`` (or until it closes)."""
        await self.wait_close(seconds)

    async def close(self, *, abrupt: bool = False) -> None:
        """Closes the connection from the client side: FIN, or RST when ``abrupt``."""
        if self._closed is not None:
            return
        self._record_close(Closed(self._clock(), CLIENT, abrupt))
        if abrupt:
            sock = self._writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._writer.transport.abort()
        else:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(self._writer.wait_closed(), self.timeout)
        await self._stop_reading()

    async def finish(self) -> None:
        """Ends the observation: an open connection is recorded as quiet until now, then closed."""
        if self._closed is None:
            self.events.append(Quiet(self._clock()))
            self._writer.transport.abort()
            self._closed = Closed(self._clock(), CLIENT, True)
        await self._stop_reading()

    # -- internals ----------------------------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                data = await self._reader.read(READ_SIZE)
                if not data:
                    self._record_close(Closed(self._clock(), SERVER, False))
                    break
                await self._receive(data)
        except (ConnectionResetError, BrokenPipeError):
            self._record_close(Closed(self._clock(), SERVER, True))
        except (ConnectionError, OSError):
            self._record_close(Closed(self._clock(), None, True))
        finally:
            if self._closed is None:
                self._record_close(Closed(self._clock(), None, False))
            async with self._changed:
                self._changed.notify_all()

    async def _receive(self, data: bytes) -> None:
        now = self._clock()
        frames = self._from_server.feed(data)
        self.events.extend(Sent(now, SERVER, frame) for frame in frames)
        packets = [frame.packet for frame in frames if frame.packet is not None]
        self._received.extend(packets)
        async with self._changed:
            self._changed.notify_all()
        if self.auto_ack:
            for packet in packets:
                answer = _acknowledgement(packet)
                if answer is not None:
                    await self.send(answer)

    def _record_close(self, event: Closed) -> None:
        if self._closed is None:
            self._closed = event
            frames = self._from_server.close()
            self.events.extend(Sent(event.time, SERVER, frame) for frame in frames)
            self.events.append(event)

    async def _settle(self) -> None:
        """After a failed write the reader learns how the connection ended; give it a moment to say so."""
        await self.wait_close(min(self.timeout, 1.0))

    async def _stop_reading(self) -> None:
        if not self._reading.done():
            self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading


def _acknowledgement(packet: Packet) -> Packet | None:
    """What a correct client answers to a packet from the server [MQTT-4.5.0-2, MQTT-4.3.2-2, MQTT-4.3.3-2]."""
    if isinstance(packet, Publish) and packet.packet_id is not None:
        if packet.qos == 1:
            return Puback(packet_id=packet.packet_id)
        if packet.qos == 2:
            return Pubrec(packet_id=packet.packet_id)
    if isinstance(packet, Pubrel) and packet.packet_id is not None:
        return Pubcomp(packet_id=packet.packet_id)
    return None
