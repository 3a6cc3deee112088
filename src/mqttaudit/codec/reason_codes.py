"""MQTT 5.0 Reason Codes (section 2.4): one table of the 43 codes, the packets that may carry each, and who may
send it in a DISCONNECT; the decoder's checks and the reports' names both read it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from . import rules
from .errors import Violation
from .packets import Direction, PacketType

_C, _S = Direction.FROM_CLIENT, Direction.FROM_SERVER


@dataclass(frozen=True, slots=True)
class ReasonCode:
    """One code: its value, its name, the packet types that may carry it, and (for DISCONNECT, Table 3.10) the
    sides that may send it."""

    value: int
    name: str
    packets: frozenset[int]
    disconnect_senders: frozenset[Direction] = frozenset()


_CONNACK, _PUBACK, _PUBREC, _PUBREL, _PUBCOMP = (
    PacketType.CONNACK,
    PacketType.PUBACK,
    PacketType.PUBREC,
    PacketType.PUBREL,
    PacketType.PUBCOMP,
)
_SUBACK, _UNSUBACK, _DISCONNECT, _AUTH = PacketType.SUBACK, PacketType.UNSUBACK, PacketType.DISCONNECT, PacketType.AUTH
_FAILURES = (_CONNACK, _PUBACK, _PUBREC, _SUBACK, _UNSUBACK, _DISCONNECT)  # where the general failures may appear
_BOTH = frozenset({_C, _S})
_SERVER = frozenset({_S})


def _code(value: int, name: str, *packets: int, sent_by: frozenset[Direction] = _BOTH) -> ReasonCode:
    return ReasonCode(value, name, frozenset(int(p) for p in packets), sent_by if _DISCONNECT in packets else _BOTH)


#: Table 2.6, with the DISCONNECT senders of Table 3.10. 0x00 is "Success", "Normal disconnection" in DISCONNECT
#: and "Granted QoS 0" in SUBACK: one value, three names, one row.
REASON_CODES: Final[tuple[ReasonCode, ...]] = (
    _code(0x00, "Success", _CONNACK, _PUBACK, _PUBREC, _PUBREL, _PUBCOMP, _SUBACK, _UNSUBACK, _DISCONNECT, _AUTH),
    _code(0x01, "Granted QoS 1", _SUBACK),
    _code(0x02, "Granted QoS 2", _SUBACK),
    _code(0x04, "Disconnect with Will Message", _DISCONNECT, sent_by=frozenset({_C})),
    _code(0x10, "No matching subscribers", _PUBACK, _PUBREC),
    _code(0x11, "No subscription existed", _UNSUBACK),
    _code(0x18, "Continue authentication", _AUTH),
    _code(0x19, "Re-authenticate", _AUTH),
    _code(0x80, "Unspecified error", *_FAILURES),
    _code(0x81, "Malformed Packet", _CONNACK, _DISCONNECT),
    _code(0x82, "Protocol Error", _CONNACK, _DISCONNECT),
    _code(0x83, "Implementation specific error", *_FAILURES),
    _code(0x84, "Unsupported Protocol Version", _CONNACK),
    _code(0x85, "Client Identifier not valid", _CONNACK),
    _code(0x86, "Bad User Name or Password", _CONNACK),
    _code(0x87, "Not authorized", *_FAILURES, sent_by=_SERVER),
    _code(0x88, "Server unavailable", _CONNACK),
    _code(0x89, "Server busy", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x8A, "Banned", _CONNACK),
    _code(0x8B, "Server shutting down", _DISCONNECT, sent_by=_SERVER),
    # Table 2.6 lists 0x8C for DISCONNECT too; Table 3.10, which [MQTT-3.14.2-1] binds DISCONNECT to, does not.
    _code(0x8C, "Bad authentication method", _CONNACK),
    _code(0x8D, "Keep Alive timeout", _DISCONNECT, sent_by=_SERVER),
    _code(0x8E, "Session taken over", _DISCONNECT, sent_by=_SERVER),
    _code(0x8F, "Topic Filter invalid", _SUBACK, _UNSUBACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x90, "Topic Name invalid", _CONNACK, _PUBACK, _PUBREC, _DISCONNECT),
    _code(0x91, "Packet Identifier in use", _PUBACK, _PUBREC, _SUBACK, _UNSUBACK),
    _code(0x92, "Packet Identifier not found", _PUBREL, _PUBCOMP),
    _code(0x93, "Receive Maximum exceeded", _DISCONNECT),
    _code(0x94, "Topic Alias invalid", _DISCONNECT),
    _code(0x95, "Packet too large", _CONNACK, _DISCONNECT),
    _code(0x96, "Message rate too high", _DISCONNECT),
    _code(0x97, "Quota exceeded", _CONNACK, _PUBACK, _PUBREC, _SUBACK, _DISCONNECT),
    _code(0x98, "Administrative action", _DISCONNECT),
    _code(0x99, "Payload format invalid", _CONNACK, _PUBACK, _PUBREC, _DISCONNECT),
    _code(0x9A, "Retain not supported", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x9B, "QoS not supported", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x9C, "Use another server", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x9D, "Server moved", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x9E, "Shared Subscriptions not supported", _SUBACK, _DISCONNECT, sent_by=_SERVER),
    _code(0x9F, "Connection rate exceeded", _CONNACK, _DISCONNECT, sent_by=_SERVER),
    _code(0xA0, "Maximum connect time", _DISCONNECT, sent_by=_SERVER),
    _code(0xA1, "Subscription Identifiers not supported", _SUBACK, _DISCONNECT, sent_by=_SERVER),
    _code(0xA2, "Wildcard Subscriptions not supported", _SUBACK, _DISCONNECT, sent_by=_SERVER),
)

BY_VALUE: Final[dict[int, ReasonCode]] = {code.value: code for code in REASON_CODES}

#: The statement each packet type's Reason Codes are bound by.
RULES: Final[dict[int, str]] = {
    PacketType.CONNACK: rules.CONNACK_RETURN_CODE,
    PacketType.PUBACK: rules.PUBACK_REASON_CODE,
    PacketType.PUBREC: rules.PUBREC_REASON_CODE,
    PacketType.PUBREL: rules.PUBREL_REASON_CODE,
    PacketType.PUBCOMP: rules.PUBCOMP_REASON_CODE,
    PacketType.SUBACK: rules.SUBACK_RETURN_CODES,
    PacketType.UNSUBACK: rules.UNSUBACK_REASON_CODES,
    PacketType.DISCONNECT: rules.DISCONNECT_REASON_CODE,
    PacketType.AUTH: rules.AUTH_REASON_CODE,
}

#: Packet type -> the codes it may carry.
ALLOWED: Final[dict[int, frozenset[int]]] = {
    packet_type: frozenset(code.value for code in REASON_CODES if packet_type in code.packets) for packet_type in RULES
}

_DISCONNECT_SENT_BY: Final[dict[int, frozenset[Direction]]] = {
    code.value: code.disconnect_senders for code in REASON_CODES if _DISCONNECT in code.packets
}


def name(value: int, packet_type: int | None = None) -> str:
    """The name of a code (``"Quota exceeded"``), as the packet type calls it; ``"reserved"`` if none."""
    if value == 0x00 and packet_type == _DISCONNECT:
        return "Normal disconnection"
    if value == 0x00 and packet_type == _SUBACK:
        return "Granted QoS 0"
    code = BY_VALUE.get(value)
    return code.name if code is not None else "reserved"


_PACKET_NAMES: Final[dict[int, str]] = {int(t): "AUTH" if t == _AUTH else PacketType(t).name for t in RULES}


def check_reason_code(
    packet_type: int, value: int, direction: Direction | None, offset: int, out: list[Violation]
) -> None:
    """A Reason Code the packet type does not define [the packet's statement], or a DISCONNECT code its sender
    may not send (Table 3.10)."""
    packet = _PACKET_NAMES[packet_type]
    if value not in ALLOWED[packet_type]:
        known = BY_VALUE.get(value)
        what = f"0x{value:02x} ({known.name}) is not one of {packet}'s" if known else f"0x{value:02x} is reserved"
        out.append(Violation(RULES[packet_type], offset, f"{packet} Reason Code {what}"))
    elif packet_type == _DISCONNECT and direction is not None and direction not in _DISCONNECT_SENT_BY[value]:
        side = "client" if direction is _C else "server"
        out.append(
            Violation(
                RULES[packet_type],
                offset,
                f"DISCONNECT Reason Code 0x{value:02x} ({name(value, packet_type)}) sent by the {side}, "
                "which Table 3.10 does not let send it",
            )
        )
