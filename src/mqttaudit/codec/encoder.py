"""Encoding with validation: write the packet, then run the decoder's own checks on the bytes written.

Because the checks that judge the written bytes are the very ones that judge received bytes, ``encode`` refuses
exactly the packets whose bytes decode with a MUST-level violation (one validator set, two directions).
"""

from __future__ import annotations

from . import rules
from .errors import EncodeError, ProtocolViolation, Violation
from .packets import Direction, Packet, Publish
from .readers import read_packet
from .remaining_length import encode_remaining_length
from .writers import first_byte, write_body


def encode(packet: Packet, *, validate: bool = True, direction: Direction | str | None = None) -> bytes:
    """The wire bytes of ``packet``.

    With ``validate`` (the default) a packet that breaks a MUST-level rule is refused with
    :class:`ProtocolViolation`, whose ``offset`` points into the bytes that would have been written; ``direction``
    adds the direction-of-flow check. ``validate=False`` writes invalid packets as they are, for negative tests.
    A value the wire cannot hold at all (a 70,000-byte string, QoS 4) raises :class:`EncodeError` either way.
    """
    body = write_body(packet)
    header = bytes((first_byte(packet),)) + encode_remaining_length(len(body))
    data = header + body
    if validate:
        _check(packet, data, len(header), Direction.parse(direction))
    return data


def _check(packet: Packet, data: bytes, body: int, direction: Direction | None) -> None:
    out: list[Violation] = []
    if isinstance(packet, Publish) and packet.qos == 0 and packet.packet_id is not None:
        # Not observable in the bytes (they would read as payload), so only the encoder can catch it.
        out.append(Violation(rules.QOS0_NO_PACKET_ID, 0, "PUBLISH with QoS 0 carries a Packet Identifier"))
    decoded = read_packet(data, 0, body, len(data), direction, out)
    errors = [v for v in out if not rules.is_advisory(v.rule)]
    if errors:
        raise ProtocolViolation(errors[0], violations=tuple(out), packet=packet)
    if decoded != packet:
        raise EncodeError(f"{packet!r} cannot be represented on the wire; its bytes read back as {decoded!r}")
