"""One-shot decoding of a complete byte string (one direction of one connection)."""

from __future__ import annotations

from dataclasses import dataclass

from .buffer import BytesLike
from .errors import Violation
from .packets import Direction, Packet
from .stream import DEFAULT_MAX_PACKET_SIZE, Frame, StreamDecoder
from .version import ProtocolVersion


@dataclass(frozen=True, slots=True)
class Decoded:
    """What :func:`decode` found: every frame in order, with the packets and violations gathered from them, and the
    version the last packet was read as (the one a CONNECT named, when the version was to be learned)."""

    frames: tuple[Frame, ...]
    version: ProtocolVersion = ProtocolVersion.V3_1_1

    @property
    def packets(self) -> list[Packet]:
        return [frame.packet for frame in self.frames if frame.packet is not None]

    @property
    def violations(self) -> list[Violation]:
        return [violation for frame in self.frames for violation in frame.violations]


def decode(
    data: BytesLike,
    direction: Direction | str | None,
    *,
    strict: bool = False,
    max_packet_size: int = DEFAULT_MAX_PACKET_SIZE,
    version: ProtocolVersion | str | int | None = ProtocolVersion.V3_1_1,
) -> Decoded:
    """Decodes every packet in ``data`` sent by ``direction`` ("client", "server", or None when unknown).

    Audit mode (the default) collects every violation and still returns each best-effort packet; ``strict=True``
    raises :class:`~mqttaudit.codec.ProtocolViolation` at the first MUST-level violation. Data that ends inside a
    packet is reported as [MQTT-2.2.3-truncated]. ``data`` may be ``bytes``, ``bytearray`` or ``memoryview``;
    ``max_packet_size`` below :data:`~mqttaudit.codec.MIN_MAX_PACKET_SIZE` is a ``ValueError``. ``version``
    ("3.1.1", "5", "3.1") is the version the bytes are read as; None learns it from a CONNECT in them.
    """
    decoder = StreamDecoder(direction, strict=strict, max_packet_size=max_packet_size, version=version)
    frames = decoder.feed(data)
    frames += decoder.close()
    return Decoded(tuple(frames), decoder.version)
