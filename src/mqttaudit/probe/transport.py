"""How the prober reaches a target: TCP, TLS (the standard ``ssl`` module) or WebSocket (``wsproto``, sans-I/O),
each seen by the connections above it as one :class:`ByteStream`, so the case library runs unchanged over every
transport. :func:`open_stream` is the one place a connection to a target is opened.

A TLS failure (certificate verification, handshake, a TLS alert on the first read) and a refused WebSocket
upgrade become a :class:`TransportError` whose text is one line saying why; never a traceback. MQTT over WebSocket
goes in binary frames [MQTT-6.0.0-1] with the ``mqtt`` subprotocol [MQTT-6.0.0-4].
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, NoReturn, Protocol

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    Pong,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.frame_protocol import CloseReason, FrameProtocol, Opcode
from wsproto.utilities import ProtocolError, RemoteProtocolError

from .cancellation import within

if TYPE_CHECKING:
    from .case import Target

#: The WebSocket subprotocol an MQTT client offers and the server must choose [MQTT-6.0.0-4].
MQTT_SUBPROTOCOL = "mqtt"
READ_SIZE = 65536
#: Seconds the TCP connect may take at least, whatever the answer timeout. The handshake is the peer's kernel's,
#: not the broker's: it takes microseconds when the broker listens, so the floor costs a live broker nothing, while
#: an answer timeout of half a second would otherwise call a broker unreachable whenever the prober's own event
#: loop was held up that long (a busy machine) and the connect's completion was read after the timer.
TCP_CONNECT_FLOOR = 5.0


class Secret:
    """A password that never shows: ``repr``, ``str`` and formatting give ``***``; :meth:`reveal` is the one way to
    the text, used only where a CONNECT or a login is encoded."""

    __slots__ = ("_value",)
    #: Every password this process was given, for the last line of defence: the command line's report of a bug
    #: (a traceback, whose message might quote one) masks them all.
    given: ClassVar[set[str]] = set()

    def __init__(self, value: str) -> None:
        self._value = value
        if value:
            Secret.given.add(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


@dataclass(frozen=True)
class Credentials:
    """The user name and password every CONNECT of the library's client steps carries."""

    username: str
    password: Secret | None = field(default=None, repr=False)

    def password_bytes(self) -> bytes | None:
        return None if self.password is None else self.password.reveal().encode()


@dataclass(frozen=True)
class TlsOptions:
    """How a TLS target is trusted and how the prober shows itself: a CA file (else the system's trust store), a
    client certificate and its key, or no verification at all (``insecure``)."""

    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    insecure: bool = False

    @property
    def given(self) -> bool:
        """Any TLS option was set (only a TLS target takes them)."""
        return self != TlsOptions()

    def context(self) -> ssl.SSLContext:
        """The client's TLS context; ValueError (one line) when a file cannot be used."""
        try:
            context = ssl.create_default_context(cafile=None if self.cafile is None else str(self.cafile))
            if self.certfile is not None:
                context.load_cert_chain(str(self.certfile), None if self.keyfile is None else str(self.keyfile))
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS: cannot load the CA file or the client certificate: {_ssl_text(exc)}") from None
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


class TransportError(ConnectionError):
    """The connection to the target could not be set up: TLS or the WebSocket upgrade failed. Its text says why
    in one line (``TLS: certificate verify failed (...)``)."""


class StreamCapped(ConnectionError):
    """The prober ended the connection at one of its own bounds on what a broker may make it hold (a WebSocket
    message, the bytes it buffers, the replies a broker does not read). Its text names the bound and says that the
    prober closed the connection; what the broker sent after that point was not read."""


class ByteStream(Protocol):
    """A connection to the target as an ordered stream of bytes both ways, whatever carries it. ``read`` returns
    ``b""`` when the server has ended it; ``trouble`` says in words why the transport failed (a TLS alert, a
    WebSocket text frame), None when it did not."""

    trouble: str | None

    async def read(self, size: int = READ_SIZE) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...

    def abort(self) -> None:
        """Drops the connection at once, without a goodbye."""

    def reset(self) -> None:
        """Drops the connection with a TCP RST (SO_LINGER 0)."""


class SocketStream:
    """A TCP or TLS connection: asyncio's streams with the TLS errors said in words."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.trouble: str | None = None
        self._reader = reader
        self._writer = writer
        self._tls = writer.get_extra_info("ssl_object") is not None
        self._got = 0

    async def read(self, size: int = READ_SIZE) -> bytes:
        try:
            data = await self._reader.read(size)
        except ssl.SSLError as exc:
            # A TLS 1.3 server checks the client certificate after the client's handshake ended: its alert comes
            # on the first read.
            self.trouble = f"TLS: {_ssl_text(exc)}"
            raise ConnectionResetError(self.trouble) from None
        except ConnectionResetError:
            if self._tls and not self._got:
                # the same, when the reset overtakes the alert
                self.trouble = (
                    "TLS: the broker reset the connection right after the handshake, before any data "
                    "(does it want a client certificate? see --cert)"
                )
            raise
        self._got += len(data)
        return data

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def unsent(self) -> int:
        """Bytes written and not yet taken by the kernel (the broker does not read them)."""
        return self._writer.transport.get_write_buffer_size()

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()

    def abort(self) -> None:
        self._writer.transport.abort()

    def reset(self) -> None:
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._writer.transport.abort()


class ResetStream:
    """A TCP connection the broker accepted and then reset before the prober's event loop looked at it: the
    kernel reports that RST on the connect itself (``ECONNRESET``; a broker that refuses the connection gives
    ``ECONNREFUSED``). It is the connection the broker reset, not an unreachable broker: reading it says so, as it
    does for the reset met on the first read or write, so the outcome never depends on which comes first."""

    trouble: str | None = None

    def __init__(self, error: ConnectionResetError) -> None:
        self._error = error

    async def read(self, size: int = READ_SIZE) -> bytes:
        raise ConnectionResetError(self._error.errno, self._error.strerror)

    def write(self, data: bytes) -> None:
        raise ConnectionResetError(self._error.errno, self._error.strerror)

    async def drain(self) -> None:
        return None

    def unsent(self) -> int:
        return 0

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None

    def abort(self) -> None:
        return None

    def reset(self) -> None:
        return None


#: The largest WebSocket message the prober takes from a broker: a binary message may carry any number of MQTT
#: packets [MQTT-6.0.0-2], but none of the library's conversations comes near this; past it the prober closes the
#: connection (RFC 6455 close code 1009, message too big) and the case says why.
MAX_MESSAGE = 16 * 1024 * 1024
#: MQTT bytes unwrapped from WebSocket frames and not yet read by the connection above. The stream reads the next
#: bytes only once these are taken, so one read's payload is the most it holds; past this bound it closes.
MAX_BUFFERED = 1024 * 1024
#: Bytes the prober's replies to a broker's control frames (Pongs) may wait in its send buffer for a broker that
#: does not read them: past this it waits for the socket to drain, up to the timeout, then closes the connection.
MAX_CONTROL_BACKLOG = 64 * 1024
#: The states of a WebSocket connection in which the prober sends each kind of frame (wsproto raises for any
#: other): after the prober's own Close it sends nothing more, no Pong either (RFC 6455 section 5.5.1).
SENDABLE: dict[type[Event], frozenset[ConnectionState]] = {
    BytesMessage: frozenset({ConnectionState.OPEN}),
    Pong: frozenset({ConnectionState.OPEN}),
    CloseConnection: frozenset({ConnectionState.OPEN, ConnectionState.REMOTE_CLOSING}),
}


class WebSocketStream:
    """MQTT over WebSocket on a TCP or TLS connection: what is written goes in one binary frame [MQTT-6.0.0-1];
    what the server sends in binary frames is read as one stream, whatever the frame boundaries [MQTT-6.0.0-2].
    A Close frame from the server ends the stream as a close (answered, as RFC 6455 section 5.5.1 asks); a text
    frame breaks MQTT-6.0.0-1 and the client must then close the connection: it is said in ``trouble`` and the
    stream ends as a reset by the server (the judge sees the connection end; the reason names the frame). So does a
    frame that breaks RFC 6455 itself (wsproto's close codes 1002 and 1007).

    A Ping is answered by one Pong for the most recent Ping of each read (RFC 6455 section 5.5.3 allows it), written
    with backpressure: past ``MAX_CONTROL_BACKLOG`` unsent bytes the stream waits for the socket to drain, up to
    ``timeout``. That bound, ``MAX_MESSAGE`` and ``MAX_BUFFERED`` end the connection with :class:`StreamCapped`,
    whose text names the bound; nothing wsproto raises leaves this class."""

    def __init__(
        self,
        carrier: SocketStream | ResetStream,
        websocket: WSConnection,
        *,
        timeout: float,
        early: Iterable[Event] = (),
    ) -> None:
        self.trouble: str | None = None
        self._carrier = carrier
        self._websocket = websocket
        self._timeout = timeout
        #: Events that came with the 101 reply, taken on the first read like any later ones.
        self._early = list(early)
        self._pending = bytearray()
        self._message = 0  # bytes of the binary message arriving so far
        self._ping: Ping | None = None  # the most recent Ping not answered yet
        self._pings = 0
        self._ended = False

    async def read(self, size: int = READ_SIZE) -> bytes:
        if self._early:
            early, self._early = self._early, []
            self._take_events(early)
            await self._answer()
        while not self._pending and not self._ended:
            data = await self._carrier.read(READ_SIZE)
            if not data:
                self._ended = True
                break
            try:
                self._websocket.receive_data(data)
                events = list(self._websocket.events())
            except RemoteProtocolError as exc:
                self._broken(str(exc))
            except ProtocolError:  # data after the close: the stream is over
                self._ended = True
                break
            self._take_events(events)
            await self._answer()
        chunk = bytes(self._pending[:size])
        del self._pending[:size]
        return chunk

    def _take_events(self, events: Iterable[Event]) -> None:
        for event in events:
            if self._ended:
                return  # nothing after the close is read
            if isinstance(event, BytesMessage):
                self._message += len(event.data)
                if self._message > MAX_MESSAGE:
                    self._cap(
                        f"the broker sent a message of more than {MAX_MESSAGE:,} bytes, the prober's cap "
                        "on one message",
                        CloseReason.MESSAGE_TOO_BIG,
                    )
                if event.message_finished:
                    self._message = 0
                self._pending += event.data
                if len(self._pending) > MAX_BUFFERED:
                    self._cap(
                        f"more than {MAX_BUFFERED:,} bytes of the broker's WebSocket data waited unread, the prober's "
                        "cap on what it buffers",
                        CloseReason.MESSAGE_TOO_BIG,
                    )
            elif isinstance(event, Ping):
                self._pings += 1
                self._ping = event  # once the prober has sent its Close it answers none (RFC 6455 5.5.1)
            elif isinstance(event, CloseConnection):
                if self._websocket.state is ConnectionState.OPEN:
                    # wsproto reports a frame it cannot parse as a close it made itself: the state stays open
                    self._broken(f"{event.reason or 'no reason'}; close code {event.code}")
                self._send(event.response())
                self._ended = True
            elif isinstance(event, TextMessage):  # [MQTT-6.0.0-1]
                self.trouble = "WebSocket: the broker sent a text frame; MQTT goes in binary frames [MQTT-6.0.0-1]"
                self._carrier.abort()
                raise ConnectionResetError(self.trouble)

    async def _answer(self) -> None:
        """One Pong for the most recent Ping, written with backpressure: a broker that reads none of them gets the
        connection closed once ``MAX_CONTROL_BACKLOG`` bytes wait unsent for ``timeout``."""
        ping, self._ping = self._ping, None
        if ping is None or not self._send(ping.response()):
            return
        backlog = self._carrier.unsent()
        if backlog <= MAX_CONTROL_BACKLOG:
            return
        try:
            await within(self._carrier.drain(), self._timeout)
        except TimeoutError:
            self._cap(
                f"the broker sent {self._pings:,} WebSocket Pings but read nothing for {self._timeout:g} s while the "
                f"prober's replies waited behind {backlog:,} unsent bytes, past its cap of {MAX_CONTROL_BACKLOG:,}",
                CloseReason.POLICY_VIOLATION,
            )
        except (ConnectionError, OSError):
            return  # the reader learns how the connection ended

    def _send(self, event: Event) -> bool:
        """Writes ``event``'s frame when the connection's state allows it (``SENDABLE``); False when it does not."""
        if self._websocket.state not in SENDABLE.get(type(event), frozenset()):
            return False
        try:
            data = self._websocket.send(event)
        except ProtocolError:
            return False
        self._carrier.write(data)
        return True

    def _broken(self, why: str) -> NoReturn:
        self.trouble = f"WebSocket: the broker sent a frame that breaks RFC 6455 ({why})"
        self._ended = True
        self._carrier.abort()
        raise ConnectionResetError(self.trouble)

    def _cap(self, why: str, code: CloseReason) -> NoReturn:
        """Closes the connection at one of the stream's bounds (best effort, with ``code``), saying which."""
        self.trouble = f"WebSocket: {why}; the prober closed the connection (close code {int(code)})"
        self._ended = True
        with contextlib.suppress(ConnectionError, OSError):
            self._send(CloseConnection(code=code))
        self._carrier.abort()
        raise StreamCapped(self.trouble)

    def write(self, data: bytes) -> None:
        if not self._send(BytesMessage(data=data)):
            raise BrokenPipeError("the WebSocket connection is closing")

    def write_text(self, data: bytes, *, fragmented: bool = False) -> None:
        """``data`` as they are in one WebSocket text message, which breaks [MQTT-6.0.0-1] on purpose: one text frame,
        or (``fragmented``) a text frame with its first half and a continuation frame with the rest (RFC 6455 5.4).
        The bytes need not be UTF-8 (wsproto's messages encode text, so its frame serializer writes the frames,
        masked as a client's)."""
        if self._websocket.state is not ConnectionState.OPEN:
            raise BrokenPipeError("the WebSocket connection is closing")
        framer = FrameProtocol(client=True, extensions=[])
        if not fragmented:
            self._carrier.write(bytes(framer._serialize_frame(Opcode.TEXT, data, fin=True)))
            return
        half = len(data) // 2
        self._carrier.write(
            bytes(framer._serialize_frame(Opcode.TEXT, data[:half], fin=False))
            + bytes(framer._serialize_frame(Opcode.CONTINUATION, data[half:], fin=True))
        )

    async def drain(self) -> None:
        await self._carrier.drain()

    def unsent(self) -> int:
        return self._carrier.unsent()

    def close(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            self._send(CloseConnection(code=CloseReason.NORMAL_CLOSURE))
        self._carrier.close()

    async def wait_closed(self) -> None:
        await self._carrier.wait_closed()

    def abort(self) -> None:
        self._carrier.abort()

    def reset(self) -> None:
        self._carrier.reset()


async def open_stream(target: Target, timeout: float) -> ByteStream:
    """A connection to ``target`` over its transport, nothing of MQTT sent yet, within ``timeout`` for each step
    (TLS, the upgrade; the TCP connect within at least :data:`TCP_CONNECT_FLOOR`). OSError from the TCP connect as
    it is (refused, unresolvable: the caller says it in words), :class:`TransportError` when TLS or the WebSocket
    upgrade fails, TimeoutError when a step takes longer. A broker that accepts the TCP connection and resets it at
    once gives a stream it reset (:class:`ResetStream`), whether the RST overtook the connect or not."""
    context = target.tls_context()
    stream: SocketStream | ResetStream
    try:
        reader, writer = await within(
            asyncio.open_connection(
                target.host,
                target.port,
                ssl=context,
                server_hostname=target.host if context is not None else None,  # SNI, and the name checked
                ssl_handshake_timeout=timeout if context is not None else None,
            ),
            max(timeout, TCP_CONNECT_FLOOR) + (timeout if context is not None else 0.0),
        )
        stream = SocketStream(reader, writer)
    except ssl.SSLCertVerificationError as exc:
        raise TransportError(f"TLS: certificate verify failed ({exc.verify_message})") from None
    except ssl.SSLError as exc:
        raise TransportError(f"TLS: the handshake failed ({_ssl_text(exc)})") from None
    except ConnectionResetError as exc:
        if context is not None:
            reason = (exc.strerror or str(exc)).lower()
            raise TransportError(f"TLS: the broker ended the connection during the handshake ({reason})") from None
        stream = ResetStream(exc)  # the handshake was done: a refused connect is ECONNREFUSED
    if not target.websocket:
        return stream
    try:
        return await within(_upgrade(stream, target, timeout), timeout)
    except TimeoutError:
        stream.abort()
        raise TransportError(f"WebSocket: no answer to the upgrade within {timeout:g} s") from None
    except BaseException:
        stream.abort()
        raise


async def _upgrade(carrier: SocketStream | ResetStream, target: Target, timeout: float) -> WebSocketStream:
    """The WebSocket opening handshake (RFC 6455 section 4) offering the ``mqtt`` subprotocol [MQTT-6.0.0-4]. What
    comes with the 101 reply (MQTT bytes, a Ping, a Close, a frame wsproto cannot parse) is the new stream's first
    read."""
    websocket = WSConnection(ConnectionType.CLIENT)
    status: int | None = None
    try:
        carrier.write(
            websocket.send(Request(host=_host_header(target), target=target.path, subprotocols=[MQTT_SUBPROTOCOL]))
        )
        await carrier.drain()
    except ConnectionError as exc:
        raise TransportError(f"WebSocket: the connection failed during the upgrade ({exc})") from None
    while True:
        try:
            data = await carrier.read(READ_SIZE)
        except ConnectionError as exc:
            raise TransportError(f"WebSocket: the connection failed during the upgrade ({exc})") from None
        if not data:
            raise TransportError(
                "WebSocket: the broker closed the connection before answering the upgrade"
                if status is None
                else f"WebSocket: the broker refused the upgrade (HTTP {status})"
            )
        try:
            websocket.receive_data(data)
            events = list(websocket.events())
        except ProtocolError as exc:
            raise TransportError(
                f"WebSocket: the broker's answer to the upgrade is no WebSocket handshake ({exc})"
            ) from None
        for index, event in enumerate(events):
            if isinstance(event, RejectConnection):
                status = event.status_code
                if not event.has_body:
                    raise TransportError(f"WebSocket: the broker refused the upgrade (HTTP {status})")
            elif isinstance(event, RejectData):
                if event.body_finished:
                    raise TransportError(f"WebSocket: the broker refused the upgrade (HTTP {status})")
            elif isinstance(event, AcceptConnection):
                if event.subprotocol != MQTT_SUBPROTOCOL:  # [MQTT-6.0.0-4]
                    chosen = "none" if event.subprotocol is None else repr(event.subprotocol)
                    raise TransportError(f"WebSocket: the broker chose subprotocol {chosen}, not 'mqtt' [MQTT-6.0.0-4]")
                return WebSocketStream(carrier, websocket, timeout=timeout, early=events[index + 1 :])


def _host_header(target: Target) -> str:
    host = f"[{target.host}]" if ":" in target.host else target.host
    return host if target.port == target.default_port else f"{host}:{target.port}"


def _ssl_text(exc: BaseException) -> str:
    """``tlsv13 alert certificate required``: the TLS error in words, without OpenSSL's wrapping."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verify failed ({exc.verify_message})"
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.replace("_", " ").lower()
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
