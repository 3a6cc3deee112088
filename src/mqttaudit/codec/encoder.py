"""Encoding with validation: write the packet, then run the decoder's own checks on the bytes written.

Because the checks that judge the written bytes are the very ones that judge received bytes, ``encode`` refuses
exactly the packets whose bytes decode with a MUST-level violation (one validator set, two directions).
"""

from __future__ import annotations

from . import rules
from .errors import EncodeError, ProtocolViolation, Violation
from .packets import Direction, Packet, Publish
from .readers import name_findings, read_packet
from .remaining_length import encode_remaining_length
from .version import ProtocolVersion
from .writers import first_byte, write_body


def encode(
    packet: Packet,
    *,
    validate: bool = True,
    direction: Direction | str | None = None,
    version: ProtocolVersion | str | int = ProtocolVersion.V3_1_1,
) -> bytes:
    """The wire bytes of ``packet`` in MQTT ``version`` ("3.1.1", the default, as :func:`decode` reads; "5" or
    "3.1").

    With ``validate`` (the default) a packet that breaks a MUST-level rule is refused with
    :class:`ProtocolViolation`, whose ``offset`` points into the bytes that would have been written; ``direction``
    adds the direction-of-flow check. ``validate=False`` writes invalid packets as they are, for negative tests.
    A value the wire cannot hold at all (a 70,000-byte string, QoS 4) raises :class:`EncodeError` either way.
    """
    chosen = ProtocolVersion.parse(version) or ProtocolVersion.V3_1_1
    try:
        body = write_body(packet, chosen is ProtocolVersion.V5)
    except ProtocolViolation as exc:  # a string no length prefix can describe, named as the version names it
        found = list(exc.violations)
        name_findings(found, 0, chosen)
        raise ProtocolViolation(found[0], violations=tuple(found), packet=packet) from None
    header = bytes((first_byte(packet),)) + encode_remaining_length(len(body))
    data = header + body
    if validate:
        _check(packet, data, len(header), Direction.parse(direction), chosen)
    return data


def _check(packet: Packet, data: bytes, body: int, direction: Direction | None, version: ProtocolVersion) -> None:
    out: list[Violation] = []
    if isinstance(packet, Publish) and packet.qos == 0 and packet.packet_id is not None:
        # Not observable in the bytes (they would read as payload), so only the encoder can catch it.
        out.append(Violation(rules.QOS0_NO_PACKET_ID, 0, "PUBLISH with QoS 0 carries a Packet Identifier"))
        name_findings(out, 0, version)
    decoded = read_packet(data, 0, body, len(data), direction, out, version)
    errors = [v for v in out if not rules.is_advisory(v.rule)]
    if errors:
        raise ProtocolViolation(errors[0], violations=tuple(out), packet=packet)
    if decoded != packet:
        hint = "" if version is ProtocolVersion.V5 else " (MQTT 5.0 fields need version='5')"
        raise EncodeError(f"{packet!r} cannot be represented on the wire{hint}; its bytes read back as {decoded!r}")
