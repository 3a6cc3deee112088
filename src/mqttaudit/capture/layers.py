"""Transport layers between a connection's TCP bytes and its MQTT bytes: MQTT over WebSocket (MQTT 5.0 section 6,
MQTT 3.1.1 section 6), over TLS, or WebSocket over TLS.

A layer is sans-I/O like the rest of the capture layer: each side's TCP bytes go in, in stream order
(:meth:`Layer.feed`), and the bytes it carried for that side come out as :class:`Piece` objects with offsets in the
side's *inner* stream, the stream the MQTT framing reads. What the layer finds on the way is a :class:`LayerNote`:
a defect of the sender (a statement it broke, with the bytes that show it) or the reason it stopped carrying a
side. After a gap a layer stops for that side, since its framing cannot be found again with confidence: the rest
of that side is not assessable, never decoded as MQTT. :attr:`Layer.lost` counts, per side, the TCP bytes it set
aside that way, so that every captured byte stays accounted for.

:func:`choose_stack` picks the layers from the client's first bytes, as ``ConnectionAudit`` sees them at the start
of its stream. Under TLS, :class:`InnerChoice` picks from the first decrypted client bytes; a key log of a browser
holds sessions of every kind, so on a port the user did not name (``--ports``), a decrypted stream that starts with
neither an MQTT CONNECT nor an Upgrade to MQTT over WebSocket is *not MQTT*: its bytes are not assessable, never
decoded as MQTT.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

from .detect import NEEDS_MORE, NOT_CONNECT, UPGRADE_HEAD_BYTES, mqtt_start

#: A TLS handshake record (content type 22) of version 3.x: how every TLS connection's first bytes look.
TLS_HANDSHAKE: Final = 0x16
#: The first bytes of an HTTP/1.1 request that may ask for an Upgrade to WebSocket (RFC 6455 4.1: a GET).
HTTP_GET: Final = b"GET "
#: Client bytes needed to choose: the longest prefix :func:`opening_kind` tests.
OPENING_BYTES: Final = len(HTTP_GET)
#: Client bytes that hold a ClientHello's client random (record header 5, handshake header 4, version 2, random
#: 32): what finds a TLS session's secrets in a key log.
HELLO_BYTES: Final = 43

PLAIN: Final = "tcp"
WEBSOCKET: Final = "websocket"
TLS: Final = "tls"
#: The transport of a TLS connection without the keys to read it.
ENCRYPTED: Final = "tls (encrypted)"
#: Why an encrypted connection's bytes are not assessed.
ENCRYPTED_REASON: Final = "encrypted: not assessable (TLS without the session's keys)"
#: Why a decrypted connection's bytes are not assessed when they are no MQTT (see :class:`InnerChoice`).
NOT_MQTT_REASON: Final = (
    "decrypted: not MQTT (the client's first bytes are neither an MQTT CONNECT nor a WebSocket Upgrade offering mqtt)"
)


class Piece(NamedTuple):
    """Bytes a layer carried for one side: ``offset`` in that side's inner stream, ``time`` (ns) of the TCP
    segment that completed them. ``text``: they came in a WebSocket text message, so a packet that starts in them
    breaks [MQTT-6.0.0-1] and its recipient must close."""

    offset: int
    data: bytes
    time: int
    text: bool = False


class LayerNote(NamedTuple):
    """Something a layer found: a defect of the sender (``rule`` is a statement id such as "MQTT-6.0.0-1", or a
    layer rule key such as "websocket-unmasked"), or why the layer stopped (``rule`` None). ``raw`` is at most
    the bytes that show it (never key material)."""

    side: int
    time: int
    rule: str | None
    text: str
    raw: bytes


class Layer(Protocol):
    """One transport layer of one connection, both sides."""

    @property
    def name(self) -> str:
        """The layer's name in the connection's transport: "tls", "websocket"."""
        ...

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]:
        """The side's next TCP bytes, in stream order; the inner bytes they completed."""
        ...

    def gap(self, side: int, length: int, time: int) -> None:
        """``length`` bytes of the side were not captured: the layer loses its framing for that side."""
        ...

    def end(self, side: int, time: int) -> list[Piece]:
        """The side ended (FIN, reset, or the end of the capture); the inner bytes still held for it."""
        ...

    @property
    def notes(self) -> list[LayerNote]:
        """What the layer found so far, in the order found."""
        ...

    @property
    def lost(self) -> tuple[int, int]:
        """Per side: the TCP bytes the layer set aside (after it stopped), not turned into inner bytes."""
        ...


class KeyLookup(Protocol):
    """Where the TLS layer finds a session's secrets: by the ClientHello's client_random (NSS key log format)."""

    def secrets_for(self, client_random: bytes) -> object | None: ...


class Stack:
    """Layers in order, outermost first (TLS, then WebSocket for wss): each layer's pieces feed the next."""

    def __init__(self, layers: list[Layer]) -> None:
        if not layers:
            raise ValueError("a stack holds at least one layer")
        self.layers = layers

    @property
    def name(self) -> str:
        """The layers' names, outermost first ("tls+websocket"); a layer still choosing names nothing yet."""
        return "+".join(layer.name for layer in self.layers if layer.name)

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]:
        pieces = self.layers[0].feed(side, data, time)
        for layer in self.layers[1:]:
            pieces = [inner for piece in pieces for inner in layer.feed(side, piece.data, piece.time)]
        return pieces

    def gap(self, side: int, length: int, time: int) -> None:
        # An inner layer misses what the outer one could not carry; how many inner bytes that is, nobody knows.
        for layer in self.layers:
            layer.gap(side, length, time)

    def end(self, side: int, time: int) -> list[Piece]:
        pieces: list[Piece] = []
        for layer in self.layers:
            carried = [inner for piece in pieces for inner in layer.feed(side, piece.data, piece.time)]
            pieces = carried + layer.end(side, time)
        return pieces

    @property
    def notes(self) -> list[LayerNote]:
        return [note for layer in self.layers for note in layer.notes]

    @property
    def lost(self) -> tuple[int, int]:
        """Per side, the bytes set aside by the outermost layer (those of the inner layers are a part of what the
        outer ones carried, and are counted by the stream that reads them)."""
        return self.layers[0].lost

    @property
    def undecrypted(self) -> str | None:
        """Why the outermost layer (TLS) could not decrypt the session's client stream at all, as a class of
        :data:`~.tls.NOT_DECRYPTED_REASONS`; None when it carried bytes, or is no such layer."""
        failure = getattr(self.layers[0], "undecrypted", None)
        return failure if isinstance(failure, str) else None

    @property
    def not_mqtt(self) -> bool:
        """Whether a layer found that the bytes it carries are no MQTT (:attr:`InnerChoice.not_mqtt`)."""
        return any(isinstance(layer, InnerChoice) and layer.not_mqtt for layer in self.layers)


def opening_kind(opening: bytes) -> str | None:
    """What a client's first bytes start: :data:`TLS` (a TLS handshake record), :data:`WEBSOCKET` (an HTTP GET,
    which may ask for an Upgrade to WebSocket) or :data:`PLAIN`; None while they are a prefix too short to say."""
    if not opening:
        return None
    if opening[0] == TLS_HANDSHAKE:
        if len(opening) < 3:
            return None
        return TLS if opening[1] == 3 else PLAIN
    if opening[: len(HTTP_GET)] == HTTP_GET:
        return WEBSOCKET
    if HTTP_GET.startswith(opening):
        return None
    return PLAIN


def opening_complete(opening: bytes, keys: KeyLookup | None) -> bool:
    """Whether ``opening`` (the client's first bytes) is enough to choose: its kind is known and, for TLS with a
    key log at hand, it holds the ClientHello's client random."""
    kind = opening_kind(opening)
    return kind is not None and (kind != TLS or keys is None or len(opening) >= HELLO_BYTES)


def inner_start(opening: bytes) -> int:
    """What the first decrypted client bytes say, as :func:`~.detect.mqtt_start` reads a stream's first bytes but
    without TLS (TLS inside TLS carries no MQTT here)."""
    return NOT_CONNECT if opening[:1] == bytes([TLS_HANDSHAKE]) else mqtt_start(opening)


def tls_layer(opening: bytes, keys: KeyLookup | None, client: int = 0) -> Layer | None:
    """The TLS layer that decrypts a connection whose client's first bytes are ``opening`` (a ClientHello), or
    None when the keys of its session are not at hand: the connection is then encrypted, not assessable."""
    if keys is None:
        return None
    from .tls import TlsLayer, hello_client_random

    random = hello_client_random(opening)
    if random is None or keys.secrets_for(random) is None:
        return None
    return TlsLayer(keys, client)


class InnerChoice:
    """The layer under TLS, chosen from the first decrypted client bytes as :func:`choose_stack` chooses from the
    first TCP bytes: WebSocket (wss) or none (MQTT straight inside TLS). Until then it holds what it was fed.

    With ``require_mqtt`` (a port the user did not name with ``--ports``: only a TLS ClientHello proved it), the
    client's first bytes must be an MQTT CONNECT or an HTTP Upgrade to WebSocket offering mqtt (read as
    :mod:`.detect` reads a stream's start, up to a whole HTTP head); when they are neither, :attr:`not_mqtt` is
    set and the bytes pass on for the caller to set aside. A start cut short by the end of the stream is read as
    it begins (a CONNECT's first bytes are MQTT), as on a TCP stream at its start."""

    def __init__(self, client: int, *, require_mqtt: bool = False) -> None:
        self.client = client
        self.require_mqtt = require_mqtt
        self.chosen: Layer | None = None
        self.decided = False
        #: The decrypted client stream starts with neither a CONNECT nor an Upgrade to MQTT over WebSocket.
        self.not_mqtt = False
        self._opening = b""
        self._held: list[tuple[int, bytes, int]] = []
        self._fed = [0, 0]

    @property
    def name(self) -> str:
        return "" if self.chosen is None else self.chosen.name

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]:
        if not self.decided:
            self._held.append((side, data, time))
            limit = UPGRADE_HEAD_BYTES if self.require_mqtt else OPENING_BYTES
            if side == self.client:
                self._opening += data[: limit - len(self._opening)]
            if self.require_mqtt:
                if inner_start(self._opening) == NEEDS_MORE and len(self._opening) < limit:
                    return []
            elif opening_kind(self._opening) is None:
                return []
            return self._decide()
        return self._pass(side, data, time)

    def gap(self, side: int, length: int, time: int) -> None:
        if self.chosen is not None:
            self.chosen.gap(side, length, time)

    def end(self, side: int, time: int) -> list[Piece]:
        pieces = self._decide() if not self.decided else []
        return pieces + (self.chosen.end(side, time) if self.chosen is not None else [])

    @property
    def notes(self) -> list[LayerNote]:
        return [] if self.chosen is None else self.chosen.notes

    @property
    def lost(self) -> tuple[int, int]:
        return (0, 0) if self.chosen is None else self.chosen.lost

    def _decide(self) -> list[Piece]:
        self.decided = True
        if self.require_mqtt and self._opening and inner_start(self._opening) == NOT_CONNECT:
            self.not_mqtt = True
        elif opening_kind(self._opening) == WEBSOCKET:
            from .websocket import WebSocketLayer

            self.chosen = WebSocketLayer(self.client)
        held, self._held = self._held, []
        return [piece for side, data, time in held for piece in self._pass(side, data, time)]

    def _pass(self, side: int, data: bytes, time: int) -> list[Piece]:
        if self.chosen is not None:
            return self.chosen.feed(side, data, time)
        offset = self._fed[side]
        self._fed[side] += len(data)
        return [Piece(offset, data, time)]


def choose_stack(
    opening: bytes, keys: KeyLookup | None, client: int = 0, *, require_mqtt: bool = False
) -> tuple[str, Stack | None]:
    """The transport of a connection whose client (side ``client``) starts its stream with ``opening``, and the
    layers that carry its MQTT bytes: (:data:`PLAIN`, None), (:data:`WEBSOCKET`, a stack), (:data:`TLS`, a
    stack), or (:data:`ENCRYPTED`, None) for TLS without keys. ``require_mqtt``: see :class:`InnerChoice`."""
    kind = opening_kind(opening)
    if kind == WEBSOCKET:
        from .websocket import WebSocketLayer

        return WEBSOCKET, Stack([WebSocketLayer(client)])
    if kind == TLS:
        layer = tls_layer(opening, keys, client)
        if layer is None:
            return ENCRYPTED, None
        return TLS, Stack([layer, InnerChoice(client, require_mqtt=require_mqtt)])
    return PLAIN, None
