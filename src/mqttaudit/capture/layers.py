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
of its stream.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol

#: A TLS handshake record (content type 22) of version 3.x: how every TLS connection's first bytes look.
TLS_HANDSHAKE: Final = 0x16
#: The first bytes of an HTTP/1.1 request that may ask for an Upgrade to WebSocket (RFC 6455 4.1: a GET).
HTTP_GET: Final = b"GET "
#: Client bytes needed to choose: the longest prefix :func:`opening_kind` tests.
OPENING_BYTES: Final = len(HTTP_GET)

PLAIN: Final = "tcp"
WEBSOCKET: Final = "websocket"
TLS: Final = "tls"
#: The transport of a TLS connection without the keys to read it.
ENCRYPTED: Final = "tls (encrypted)"
#: Why an encrypted connection's bytes are not assessed.
ENCRYPTED_REASON: Final = "encrypted: not assessable (TLS without the session's keys)"


class Piece(NamedTuple):
    """Bytes a layer carried for one side: ``offset`` in that side's inner stream, ``time`` (ns) of the TCP
    segment that completed them."""

    offset: int
    data: bytes
    time: int


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

    #: "tls", "websocket".
    name: str

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
        self.name = "+".join(layer.name for layer in layers)

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


def tls_layer(opening: bytes, keys: KeyLookup | None) -> Layer | None:
    """The TLS layer that decrypts a connection whose client's first bytes are ``opening`` (a ClientHello), or
    None when the keys of its session are not at hand: the connection is then encrypted, not assessable."""
    del opening, keys
    return None


def choose_stack(opening: bytes, keys: KeyLookup | None, client: int = 0) -> tuple[str, Stack | None]:
    """The transport of a connection whose client (side ``client``) starts its stream with ``opening``, and the
    layers that carry its MQTT bytes: (:data:`PLAIN`, None), (:data:`WEBSOCKET`, a stack), (:data:`TLS`, a
    stack), or (:data:`ENCRYPTED`, None) for TLS without keys."""
    kind = opening_kind(opening)
    if kind == WEBSOCKET:
        from .websocket import WebSocketLayer

        return WEBSOCKET, Stack([WebSocketLayer(client)])
    if kind == TLS:
        layer = tls_layer(opening, keys)
        return (ENCRYPTED, None) if layer is None else (TLS, Stack([layer]))
    return PLAIN, None
