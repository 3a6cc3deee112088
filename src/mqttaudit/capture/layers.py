"""The transport layers between TCP and MQTT framing: what a layer hands on (:class:`Piece`), what it finds
(:class:`LayerNote`), and the protocol each layer follows (:class:`Layer`)."""

from __future__ import annotations

from typing import NamedTuple, Protocol


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
    """One transport layer of a connection, fed each side's bytes in stream order."""

    name: str

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]: ...

    def gap(self, side: int, length: int, time: int) -> None: ...

    def end(self, side: int, time: int) -> list[Piece]: ...

    @property
    def notes(self) -> list[LayerNote]: ...

    @property
    def lost(self) -> tuple[int, int]: ...
