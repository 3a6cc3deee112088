"""MQTT over WebSocket on the broker's side (MQTT section 6), sans-I/O with ``wsproto``: the opening handshake
selecting the ``mqtt`` subprotocol [MQTT-6.0.0-4], binary messages read as one MQTT stream whatever their frame
boundaries [MQTT-6.0.0-2], text frames flagged (MQTT goes in binary frames [MQTT-6.0.0-1]), Pings answered, and
what the broker sends wrapped in binary frames.

Bounded: a handshake request larger than :data:`MAX_HANDSHAKE` bytes ends the connection; message payloads are
handed on as they arrive (wsproto yields them in pieces), so nothing here grows with a message's size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

#: The subprotocol an MQTT server selects [MQTT-6.0.0-4].
MQTT_SUBPROTOCOL: Final = "mqtt"
#: The largest opening handshake accepted before the connection is ended.
MAX_HANDSHAKE: Final = 16 * 1024


@dataclass
class Received:
    """What a read of the socket gave: MQTT bytes (each piece with whether a text frame carried it), bytes to
    write back (the handshake's answer, Pongs, the answer to a Close), and whether the WebSocket ended."""

    pieces: list[tuple[bytes, bool]] = field(default_factory=list)
    reply: bytes = b""
    closed: bool = False
    #: Why the WebSocket ended, when it was not a Close frame of the client's.
    trouble: str | None = None


class ServerWebSocket:
    def __init__(self) -> None:
        self._ws = WSConnection(ConnectionType.SERVER)
        self._handshake = 0

    @property
    def open(self) -> bool:
        return self._ws.state is ConnectionState.OPEN

    def receive(self, data: bytes) -> Received:
        out = Received()
        if not self.open:
            self._handshake += len(data)
            if self._handshake > MAX_HANDSHAKE:
                out.closed, out.trouble = True, f"a WebSocket handshake over {MAX_HANDSHAKE} bytes"
                return out
        try:
            self._ws.receive_data(data)
            replies = [self._event(event, out) for event in self._ws.events()]
        except (RemoteProtocolError, LocalProtocolError) as exc:
            out.closed, out.trouble = True, f"WebSocket protocol error: {exc}"
            return out
        out.reply = b"".join(replies)
        return out

    def _event(self, event: object, out: Received) -> bytes:
        if isinstance(event, Request):
            if MQTT_SUBPROTOCOL not in event.subprotocols:
                out.closed, out.trouble = True, "the WebSocket handshake offered no 'mqtt' subprotocol [MQTT-6.0.0-3]"
                return self._ws.send(RejectConnection(status_code=400))
            return self._ws.send(AcceptConnection(subprotocol=MQTT_SUBPROTOCOL))  # [MQTT-6.0.0-4]
        if isinstance(event, BytesMessage):
            out.pieces.append((bytes(event.data), False))
        elif isinstance(event, TextMessage):
            out.pieces.append((event.data.encode("utf-8", "surrogatepass"), True))
        elif isinstance(event, Ping):
            return self._ws.send(event.response())
        elif isinstance(event, CloseConnection):
            out.closed = True
            if self._ws.state is ConnectionState.REMOTE_CLOSING:
                return self._ws.send(event.response())
        return b""

    def wrap(self, data: bytes) -> bytes:
        """``data`` in one binary frame [MQTT-6.0.0-1]; nothing once the WebSocket is closing."""
        if not self.open:
            return b""
        return self._ws.send(BytesMessage(data=data))

    def close(self) -> bytes:
        """The Close frame that ends the WebSocket from the broker's side (1000, normal closure)."""
        if not self.open:
            return b""
        return self._ws.send(CloseConnection(code=1000))
