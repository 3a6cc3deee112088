"""One connection of a probe case, over TCP, TLS or WebSocket (a :class:`~mqttaudit.probe.transport.ByteStream`):
every byte both ways is framed by the codec and recorded as judge events.

The client side behaves as a correct client unless a case says otherwise: it acknowledges what the broker delivers
(PUBACK, PUBREC/PUBCOMP) so that the broker's own obligations can be judged. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from ..codec import (
    Connack,
    Connect,
    Direction,
    Frame,
    Packet,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    StreamDecoder,
    Violation,
    decode,
    encode,
    encode_remaining_length,
    read_remaining_length,
)
from ..codec.describe import describe_packet
from ..codec.masking import mask_password
from ..codec.remaining_length import MAX_BYTES as MAX_LENGTH_BYTES
from ..codec.remaining_length import MAX_REMAINING_LENGTH, encoded_size
from ..codec.rules import SIZE_LIMIT
from ..codec.stream import EVIDENCE_BYTES
from ..judge.events import Closed, Event, Lost, Quiet, Sent
from ..judge.violations import in_text_frame
from ..spec import identity
from .cancellation import raise_if_cancelling, within
from .overflow import MAX_BYTES, MAX_FRAMES, MAX_VIOLATIONS, SERVER_MAX_PACKET, Overflow
from .transport import ByteStream, Secret, StreamCapped, WebSocketStream

#: How a case may send MQTT bytes in a WebSocket text frame [MQTT-6.0.0-1]: one frame, or fragmented.
TEXT_FRAME = "text"
FRAGMENTED_TEXT = "fragmented text"
#: Why a case that sends a text frame does not apply to a target.
NOT_WEBSOCKET = "the target is not a WebSocket target"

CLIENT = Direction.FROM_CLIENT
SERVER = Direction.FROM_SERVER
READ_SIZE = 65536
#: A PUBLISH of the prober's larger than this (fixed header included) is streamed: its payload is written in chunks
#: of ``STREAM_CHUNK`` filler bytes and never built, and it is recorded by its first bytes, undecoded, as a packet
#: from a server above ``SERVER_MAX_PACKET`` is. Up to it a packet is sent whole and recorded decoded.
STREAMED_ABOVE = SERVER_MAX_PACKET
STREAM_CHUNK = 64 * 1024
#: The payload byte of a streamed PUBLISH.
FILLER = b"p"
_CHUNK = FILLER * STREAM_CHUNK

#: How many of the server's first bytes a connection keeps as they came (see ``ProbeConnection.heard``).
HEARD_BYTES = 256

PacketTest = Callable[[Packet], bool]


class ProbeConnection:
    """A recorded connection. Times are seconds on the case's clock (``clock()``), shared by its connections.

    ``events`` is what the judge gets, and it is always a conversation the judge can take: times never go back,
    nothing follows the one ``Closed`` event, and what the server sent beyond the evidence bounds
    (:mod:`~mqttaudit.probe.overflow`) is one ``Lost`` event at the time it began, with the count in ``overflow``.
    Only :meth:`_record` appends to it.
    """

    def __init__(
        self,
        name: str,
        stream: ByteStream,
        clock: Callable[[], float],
        *,
        timeout: float,
        auto_ack: bool = True,
        version: ProtocolVersion = ProtocolVersion.V3_1_1,
        secret: Secret | None = None,
    ) -> None:
        self.name = name
        self.client_id = ""
        #: The MQTT version both directions are read and written as.
        self.version = version
        #: The CONNACK that accepted or refused this connection's CONNECT (set by ``CaseContext.connect``).
        self.connack: Connack | None = None
        #: The index in ``received`` where the connection's first SUBSCRIBE was sent (None before it).
        self.subscribed_from: int | None = None
        #: What the broker declared it receives (5.0: its CONNACK, or the operator's profile), which the client
        #: steps keep to: the largest packet (None: no limit but the protocol's), and a slot per QoS 1 or 2 PUBLISH
        #: it takes unacknowledged (its Receive Maximum; None: not declared, as in 3.1.1).
        self.server_maximum_packet_size: int | None = None
        self.send_quota: asyncio.Semaphore | None = None
        self.events: list[Event] = []
        self.timeout = timeout
        self.auto_ack = auto_ack
        #: What the server sent past the evidence bounds: counted, not kept.
        self.overflow = Overflow()
        self._stream = stream
        #: The password the client steps send: the evidence shows it as asterisks of its length.
        self._secret = secret.reveal().encode() if secret else b""
        self._clock = clock
        self._opened = clock()
        self._to_server = StreamDecoder(CLIENT, version=version)
        self._begun: int | None = None  # stream offset of a packet recorded while it was still arriving
        self._from_server = StreamDecoder(SERVER, max_packet_size=SERVER_MAX_PACKET, version=version)
        self._received: list[Packet] = []
        self._kept_frames = 0
        self._kept_bytes = 0
        self._kept_violations = 0
        self._lost_at: int | None = None  # index in events of the Lost event standing for the overflow
        self._changed = asyncio.Condition()
        self._closing = False  # the client side is closing: the reader only records what had arrived
        self._streaming: asyncio.Event | None = None  # set while a streamed packet goes out: other sends wait
        self._closed: Closed | None = None
        #: The first bytes the server sent (up to ``HEARD_BYTES``), as they came: what the preflight shows of a target
        #: that does not answer in MQTT.
        self.heard = b""
        self._reading = asyncio.create_task(self._read(), name=f"probe-read-{name}")

    # -- what was seen ------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def closed_by_server(self) -> bool:
        return self._closed is not None and self._closed.by is SERVER

    @property
    def trouble(self) -> str | None:
        """Why the transport failed (a TLS alert, a WebSocket text frame), None when it did not."""
        return self._stream.trouble

    @property
    def capped(self) -> bool:
        """The server sent more than the evidence bounds: the rest is only counted (see ``overflow``)."""
        return self.overflow.active

    @property
    def lost_at(self) -> int | None:
        """The index in ``events`` of the ``Lost`` event standing for what was not kept, None when all was kept."""
        return self._lost_at

    @property
    def received(self) -> list[Packet]:
        """Packets the server sent so far, in order (within the evidence bounds)."""
        return list(self._received)

    def missing(self, packet: str, timeout: float | None = None) -> str:
        """Why no ``packet`` (``CONNACK``) came, in words: the broker ended the connection (and when), the evidence
        was capped, or nothing came within the timeout."""
        closed = self._closed
        trouble = f" ({self._stream.trouble})" if self._stream.trouble else ""
        if closed is not None and closed.by is SERVER:
            how = "reset" if closed.abrupt else "closed"
            return (
                f"the broker {how} the connection after {closed.time - self._opened:.3f} s, with no {packet}{trouble}"
            )
        if self.capped:
            return f"no {packet} in the evidence kept: {self.cap_summary()}"
        if closed is not None and closed.by is None:
            return f"the connection ended ({'RST' if closed.abrupt else 'FIN'}) with no {packet}{trouble}"
        return f"no {packet} within {self.timeout if timeout is None else timeout:g} s"

    def cap_summary(self) -> str:
        """``the broker sent more than 1,000 frames or 262,144 bytes on c1; then ...``, or the other bound that
        stopped the connection (a packet above the decode bound, a WebSocket bound) and the policy at it."""
        if self.overflow.reason is not None:
            return f"{self.overflow.reason} on {self.name}; {self.overflow.summary()}"
        return (
            f"the broker sent more than {MAX_FRAMES:,} frames, {MAX_BYTES:,} bytes or {MAX_VIOLATIONS:,} "
            f"violations on {self.name}; {self.overflow.summary()}"
        )

    # -- acting -------------------------------------------------------------------------------------------------

    @property
    def websocket(self) -> bool:
        """The connection is MQTT over WebSocket (a ws:// or wss:// target)."""
        return isinstance(self._stream, WebSocketStream)

    async def send(self, data: Packet | bytes, *, validate: bool = True, text: str | None = None) -> None:
        """Sends a packet (encoded by the codec; ``validate=False`` for a deliberately invalid one) or raw bytes.
        A packet larger than the broker's Maximum Packet Size (:attr:`server_maximum_packet_size`) is not sent:
        the case is not applicable (:meth:`check_size`; raw bytes go as they are).

        ``text`` (:data:`TEXT_FRAME` or :data:`FRAGMENTED_TEXT`) sends them in a WebSocket text message instead of a
        binary frame, breaking [MQTT-6.0.0-1] on purpose: the frames recorded for them carry that violation, so
        the judge holds the broker to closing without acting on them. On a connection that is no WebSocket the
        case is not applicable."""
        if text is not None and not isinstance(self._stream, WebSocketStream):
            from .case import NotApplicable  # the case module builds on this one

            raise NotApplicable(NOT_WEBSOCKET)
        raw = (
            data if isinstance(data, bytes) else encode(data, validate=validate, direction=CLIENT, version=self.version)
        )
        if isinstance(data, Packet):
            self.check_size(data, raw)
        while self._streaming is not None:  # never inside a packet that is still going out
            await self._streaming.wait()
        if self._closed is not None or self._closing:
            return  # the connection is over: nothing more reaches the broker, and the judge sees why
        now = self._clock()
        shown = raw
        if self._secret and isinstance(data, Connect) and data.password == self._secret:
            # the same packet with the password as asterisks of its length: what the judge and the reports see
            shown = encode(mask_password(data), validate=validate, direction=CLIENT, version=self.version)
        elif self._secret and isinstance(data, bytes) and self._secret in data:
            shown = self._masked(data)
        frames, self._begun = client_frames(self._to_server, shown, self._begun)
        for frame in frames:
            self._record(Sent(now, CLIENT, frame if text is None else in_text_frame(frame)))
        try:
            if isinstance(self._stream, WebSocketStream) and text is not None:
                self._stream.write_text(raw, fragmented=text == FRAGMENTED_TEXT)
            else:
                self._stream.write(raw)
            await within(self._stream.drain(), self.timeout)
        except (ConnectionError, TimeoutError, OSError):
            await self._settle()

    def _masked(self, data: bytes) -> bytes:
        """Raw bytes that hold the target's password (a CONNECT a case built itself, in any version) as the judge
        and the reports may see them: each CONNECT with that password re-encoded with asterisks in its place, any
        other occurrence of the password's bytes blanked out byte for byte."""
        decoded = decode(data, CLIENT, version=None)
        if len(decoded.frames) == 1 and sum(f.length for f in decoded.frames) == len(data):
            packet = decoded.frames[0].packet
            if isinstance(packet, Connect) and packet.password == self._secret:
                version = ProtocolVersion.from_level(packet.protocol_level) or self.version
                return encode(mask_password(packet), validate=False, direction=CLIENT, version=version)
        return data.replace(self._secret, b"*" * len(self._secret))

    async def send_publish(self, packet: Publish, size: int) -> None:
        """Sends ``packet`` padded with filler bytes in place of its own payload to ``size`` bytes, fixed header
        included, unvalidated (a negative case's oversized PUBLISH); ValueError when no payload makes it that size
        (see :func:`padded`). A packet of up to :data:`STREAMED_ABOVE` bytes goes whole, like any other; a larger
        one, up to the largest the Remaining Length holds, is streamed in chunks, so the prober never holds it
        whole, whatever its size: each chunk waits for the socket to take the one before (at most the timeout; a
        broker that reads none of it for that long gets the connection reset by the prober).

        A streamed packet is recorded as one frame of its first bytes with its length, undecoded (the advisory
        size-limit note says why), at the time its last byte was written or its sending ended: a receiver acts on a
        packet once it has it, and the judge's deadlines for the broker's answer run from then. What the broker
        sent meanwhile (a DISCONNECT on reading the fixed header, say) is recorded after it at that same time,
        in the order it came."""
        shape = padded(packet, size, self.version)
        if shape is None:
            raise ValueError(f"no payload makes {describe_packet(packet)} {size:,} bytes long")
        head, payload_length = shape
        if size <= STREAMED_ABOVE:
            await self.send(head + FILLER * payload_length)
            return
        while self._streaming is not None:
            await self._streaming.wait()
        if self._closed is not None or self._closing:
            return
        if self._to_server.buffered:
            raise ValueError(f"{self.name}: a streamed PUBLISH cannot follow a packet the prober left unfinished")
        offset = self._to_server.offset
        index = len(self.events)
        self._record(Sent(self._clock(), CLIENT, _streamed_frame(offset, head, size, size, self.version)))
        self._to_server = StreamDecoder(CLIENT, version=self.version, offset=offset + size)
        self._streaming = streaming = asyncio.Event()
        written, ending = 0, ""
        ended = "; the broker ended the connection before it was all sent"
        try:
            for piece in _pieces(head, payload_length):
                if self._closed is not None:  # the broker closed (a FIN, after its DISCONNECT): nobody reads on
                    ending = ended
                    break
                self._stream.write(piece)
                written += len(piece)
                await within(self._stream.drain(), self.timeout)
        except TimeoutError:
            ending = f"; the connection took none of it for {self.timeout:g} s, so the prober reset the connection"
        except (ConnectionError, OSError):
            ending = ended
        finally:
            self._streaming = None
            streaming.set()
        if ending:
            more = f" (at most {written:,} written{ending})"
            shown = _streamed_frame(offset, head, written, size, self.version, more)
            recorded = self.events[index]
            if isinstance(recorded, Sent):
                self.events[index] = replace(recorded, frame=shown)
        self._retime(index, self._clock())
        if ending.endswith("reset the connection"):
            await self.close(abrupt=True)
        elif ending:
            await self._settle()

    def check_size(self, packet: Packet, raw: bytes) -> None:
        """:class:`~mqttaudit.probe.case.NotApplicable` when ``raw`` (the bytes of ``packet``) is larger than the
        broker's Maximum Packet Size. A packet a case builds is about its content, valid or not: over the broker's
        maximum it would test the size instead (a case that means to exceed it sends :meth:`send_publish`)."""
        if self._fits(raw):
            return
        from .case import NotApplicable  # the case module builds on this one

        raise NotApplicable(
            f"the broker's Maximum Packet Size {self.server_maximum_packet_size:,} is smaller than the "
            f"{len(raw):,}-byte {type(packet).__name__.upper()} the case sends on {self.name}, which no client may "
            "send it [MQTT-3.2.2-15]"
        )

    def _fits(self, raw: bytes) -> bool:
        """A conforming client may send ``raw``: within the broker's Maximum Packet Size, if it declared one (a
        CONNECT goes before any is known)."""
        maximum = self.server_maximum_packet_size
        return maximum is None or len(raw) <= maximum

    def _retime(self, index: int, now: float) -> None:
        """Events from ``index`` on happen no earlier than ``now`` (a streamed packet and what came while it went
        out); times never go back along ``events``."""
        for at in range(index, len(self.events)):
            event = self.events[at]
            if event.time < now:
                self.events[at] = replace(event, time=now)
        if self._closed is not None and self.events and isinstance(self.events[-1], Closed):
            self._closed = self.events[-1]

    async def wait_for(self, test: PacketTest, timeout: float | None = None, *, since: int = 0) -> Packet | None:
        """The first packet from the server (from index ``since`` of ``received``) that passes ``test``; None
        when the connection closes, the evidence is capped or ``timeout`` passes first."""
        checked = since  # each packet is tested once, however often the connection changes

        def found() -> Packet | None:
            nonlocal checked
            while checked < len(self._received):
                packet = self._received[checked]
                if test(packet):
                    return packet
                checked += 1
            return None

        def over() -> bool:
            return self._closed is not None or self._closing or self.capped

        async def until() -> Packet | None:
            async with self._changed:
                await self._changed.wait_for(lambda: found() is not None or over())
            return found()

        try:
            return await within(until(), self.timeout if timeout is None else timeout)
        except TimeoutError:
            return None

    async def wait_type(self, kind: type[Packet], timeout: float | None = None, *, since: int = 0) -> Packet | None:
        return await self.wait_for(lambda packet: isinstance(packet, kind), timeout, since=since)

    async def wait_heard(self, timeout: float | None = None) -> bytes:
        """Waits until the server sends its first bytes, closes, or ``timeout`` passes: the bytes it sent so far."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: bool(self.heard) or self._closed is not None or self.capped)

        with contextlib.suppress(TimeoutError):
            await within(until(), self.timeout if timeout is None else timeout)
        return self.heard

    async def wait_close(self, timeout: float | None = None) -> bool:
        """Waits until the server closes the connection; False when ``timeout`` passes first."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: self._closed is not None)

        try:
            await within(until(), self.timeout if timeout is None else timeout)
        except TimeoutError:
            return False
        return True

    async def observe(self, seconds: float) -> None:
        """Watches the connection for ``seconds`` (or until it closes)."""
        await self.wait_close(seconds)

    async def close(self, *, abrupt: bool = False) -> None:
        """Closes the connection from the client side: FIN, or RST when ``abrupt``. What the server had sent
        before the close took effect (read, but not yet recorded) is recorded before the ``Closed`` event."""
        if self._closed is not None or self._closing:
            return
        self._closing = True
        now = self._clock()
        if abrupt:
            self._reset()
        else:
            self._stream.close()
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await within(self._stream.wait_closed(), self.timeout)
        await self._drain()
        await self._end(Closed(now, CLIENT, abrupt))

    async def finish(self) -> None:
        """Ends the observation: an open connection is recorded as quiet until now, then closed. The socket is
        closed whatever ended the connection (a broker's FIN leaves it half open), never left to the garbage
        collector."""
        try:
            if self._closed is None:
                now = self._clock()
                self._closing = True
                self._stream.abort()
                await self._drain()
                await self._end(Closed(now, CLIENT, True), quiet=True)
            await self._stop_reading()
        finally:
            self._stream.abort()

    # -- internals ----------------------------------------------------------------------------------------------

    def _record(self, event: Event) -> None:
        """The only way into ``events``: keeps them in time order and nothing after ``Closed`` (a frame that comes
        later is counted in ``overflow``; the recorder's own order makes that impossible, this makes it certain)."""
        if self._closed is not None:
            if isinstance(event, Sent):
                self.overflow.after_close += 1
            return
        last = self.events[-1].time if self.events else event.time
        if event.time < last:
            event = replace(event, time=last)
        self.events.append(event)

    async def _read(self) -> None:
        try:
            while True:
                data = await self._stream.read(READ_SIZE)
                if not data:
                    if not self._closing:
                        await self._end(Closed(self._clock(), SERVER, False))
                    return
                await self._receive(data)
        except StreamCapped as exc:  # the prober closed it at one of the transport's bounds
            if not self._closing:
                now = self._clock()
                self._cap(now, str(exc))
                await self._end(Closed(now, CLIENT, True))
        except (ConnectionResetError, BrokenPipeError):
            if not self._closing:
                await self._end(Closed(self._clock(), SERVER, True))
        except (ConnectionError, OSError):
            if not self._closing:
                await self._end(Closed(self._clock(), None, True))
        finally:
            if self._closed is None and not self._closing:
                self._end_now(Closed(self._clock(), None, False))

    async def _receive(self, data: bytes) -> None:
        now = self._clock()
        if len(self.heard) < HEARD_BYTES:
            self.heard += data[: HEARD_BYTES - len(self.heard)]
        decoder = self._from_server
        if self.capped and not decoder.counting:
            decoder.count_only()  # nothing more is kept: framing alone accounts for the rest
        packets = self._take(now, decoder.feed(data))
        if decoder.counting:
            self.overflow.add_counted(now, *decoder.take_counted())
        declared = decoder.skipping
        if declared is not None:  # still arriving: what hangs on it is not assessable from now on
            self._cap(now, _oversized(declared))
        async with self._changed:
            self._changed.notify_all()
        if self.auto_ack:
            for packet in packets:
                answer = _acknowledgement(packet, self.version)
                if answer is not None and self._fits(encode(answer, direction=CLIENT, version=self.version)):
                    await self.send(answer)

    def _take(self, now: float, frames: list[Frame]) -> list[Packet]:
        """Records the server's frames within the evidence bounds and counts the rest; returns the packets kept."""
        packets: list[Packet] = []
        for frame in frames:
            if self._closed is not None:
                self.overflow.after_close += 1
                continue
            if not self.capped:
                fits = (
                    self._kept_frames < MAX_FRAMES
                    and self._kept_bytes + len(frame.raw) <= MAX_BYTES
                    and self._kept_violations + len(frame.violations) <= MAX_VIOLATIONS
                )
                if fits:
                    self._kept_frames += 1
                    self._kept_bytes += len(frame.raw)
                    self._kept_violations += len(frame.violations)
                    self._record(Sent(now, SERVER, frame))
                    if frame.packet is not None:
                        packets.append(frame.packet)
                    elif any(violation.rule_key == SIZE_LIMIT for violation in frame.violations):
                        self._cap(now, _oversized(frame.length))
                    continue
                self._lost_at = len(self.events)
                self._record(Lost(now, SERVER, 0))  # its length is known when the connection ends
            self.overflow.add(now, frame)
        self._received.extend(packets)
        return packets

    async def _end(self, closed: Closed, *, quiet: bool = False) -> None:
        self._end_now(closed, quiet=quiet)
        async with self._changed:
            self._changed.notify_all()

    def _end_now(self, closed: Closed, *, quiet: bool = False) -> None:
        """Records the end: the server's unfinished last packet [MQTT-2.2.3-truncated], the size of what was not
        kept, then ``Quiet`` (observation stopped with the connection open) or nothing, then ``Closed``."""
        if self._closed is not None:
            return
        self._take(closed.time, self._from_server.close())
        if self._lost_at is not None:
            lost = self.events[self._lost_at]
            assert isinstance(lost, Lost)
            self.events[self._lost_at] = replace(lost, length=self.overflow.bytes)
        if quiet:
            self._record(Quiet(closed.time))
        self._record(closed)
        self._closed = self.events[-1] if isinstance(self.events[-1], Closed) else closed

    def _cap(self, now: float, reason: str) -> None:
        """The connection keeps nothing more the server sends, for ``reason`` (a bound and its policy): one
        ``Lost`` event from ``now`` tells the judge so."""
        if self._closed is not None or self.capped:
            return
        self._lost_at = len(self.events)
        self._record(Lost(now, SERVER, 0))
        self.overflow.since = now
        self.overflow.reason = reason

    def _reset(self) -> None:
        self._stream.reset()

    async def _drain(self) -> None:
        """After our close the transport reads no more: the reader records what it still holds, then stops."""
        if not self._reading.done():
            with contextlib.suppress(TimeoutError):
                await within(asyncio.shield(self._reading), min(self.timeout, 1.0))
        await self._stop_reading()

    async def _settle(self) -> None:
        """After a failed write the reader learns how the connection ended; give it a moment to say so."""
        await self.wait_close(min(self.timeout, 1.0))

    async def _stop_reading(self) -> None:
        """Stops the reader and waits for it. Its own cancellation ends here; one of the task that stops it (an
        interrupted probe) goes on up."""
        if not self._reading.done():
            self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        raise_if_cancelling()


def padded(packet: Publish, size: int, version: ProtocolVersion) -> tuple[bytes, int] | None:
    """``packet``'s bytes up to its payload (its own payload left out), with the Remaining Length of a packet of
    ``size`` bytes, and the payload length that makes it so; None when none does (the packet is longer with an
    empty payload, or ``size`` is past the largest packet). Computed, never built: the Remaining Length's own size
    (1 to 4 bytes) is the one unknown."""
    bare = Publish(**(packet.as_dict() | {"payload": b""}))  # type: ignore[arg-type]
    empty = encode(bare, validate=False, direction=CLIENT, version=version)
    remaining, body = read_remaining_length(empty, 1, len(empty))
    for length_bytes in range(1, MAX_LENGTH_BYTES + 1):
        payload = size - 1 - length_bytes - remaining
        if (
            payload >= 0
            and remaining + payload <= MAX_REMAINING_LENGTH
            and encoded_size(remaining + payload) == length_bytes
        ):
            return empty[:1] + encode_remaining_length(remaining + payload) + empty[body:], payload
    return None


def _pieces(head: bytes, payload_length: int) -> Iterator[bytes]:
    """A streamed PUBLISH as the chunks written: its head, then the filler payload ``STREAM_CHUNK`` bytes at a time."""
    yield head
    full, rest = divmod(payload_length, STREAM_CHUNK)
    for _ in range(full):
        yield _CHUNK
    if rest:
        yield _CHUNK[:rest]


def _streamed_frame(
    offset: int, head: bytes, length: int, size: int, version: ProtocolVersion, more: str = ""
) -> Frame:
    """The frame that records a streamed PUBLISH of ``size`` bytes whose first ``length`` went out: its first
    bytes (``head`` and filler, ``EVIDENCE_BYTES`` at least), undecoded, with the advisory size-limit note."""
    raw = head + _CHUNK[: max(0, min(EVIDENCE_BYTES - len(head), size - len(head)))]
    detail = (
        f"the prober's own PUBLISH of {size:,} bytes (fixed header included), streamed in chunks and never held "
        f"whole: its first {len(raw):,} bytes are kept, the rest skipped undecoded{more}"
    )
    rule = identity.statement_id(SIZE_LIMIT, version.value) or SIZE_LIMIT
    return Frame(offset, length, raw, None, (Violation(rule, offset + 1, detail, SIZE_LIMIT),))


def _oversized(declared: int) -> str:
    """Why a connection stopped at a packet above the prober's decode bound, and the policy."""
    return (
        f"the broker sent a packet of {declared:,} bytes, above the {SERVER_MAX_PACKET:,}-byte bound of what the "
        "prober decodes (a CONNECT without Maximum Packet Size allows any size the protocol does); it was skipped "
        "undecoded and nothing after it was kept"
    )


def client_frames(decoder: StreamDecoder, raw: bytes, begun: int | None = None) -> tuple[list[Frame], int | None]:
    """The frames to record for ``raw`` sent through ``decoder``, and the offset of the packet recorded while
    still arriving (``begun``: the one recorded before, if any). A packet whose first byte already breaks a rule
    (a reserved type, reserved flags) is recorded as soon as that byte is sent, with the bytes sent so far: the
    broker may close on it then, and must not wait for a Remaining Length that is still arriving. That packet is
    not recorded a second time when it is whole."""
    frames = [frame for frame in decoder.feed(raw) if frame.offset != begun]
    early = decoder.waiting()
    if early is not None and early.offset != begun:
        frames.append(early)
        begun = early.offset
    return frames, begun


def _acknowledgement(packet: Packet, version: ProtocolVersion = ProtocolVersion.V3_1_1) -> Packet | None:
    """What a correct client answers to a packet from the server [MQTT-4.5.0-2, MQTT-4.3.2-2, MQTT-4.3.3-2]; in
    5.0 with the Reason Code Success written out (0x00), which a 5.0 reader takes and a 3.1.1 packet cannot hold."""
    success = 0x00 if version is ProtocolVersion.V5 else None
    if isinstance(packet, Publish) and packet.packet_id is not None:
        if packet.qos == 1:
            return Puback(packet_id=packet.packet_id, reason_code=success)
        if packet.qos == 2:
            return Pubrec(packet_id=packet.packet_id, reason_code=success)
    if isinstance(packet, Pubrel) and packet.packet_id is not None:
        return Pubcomp(packet_id=packet.packet_id, reason_code=success)
    return None
