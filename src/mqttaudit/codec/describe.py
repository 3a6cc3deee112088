"""Plain renderings of packets: a JSON-ready dict and a one-line summary. Pure functions, no I/O."""

from __future__ import annotations

import re
from typing import Any, Final

from .packets import Connect, Packet, Publish, ReservedPacket, Suback, Subscribe, Unsubscribe, Value

#: Lone surrogates: U+DC80..U+DCFF stand for the ill-formed bytes 0x80..0xFF of a string (PEP 383).
_SURROGATES: Final = re.compile(r"[\ud800-\udfff]")  # escapes for re: mypyc holds no surrogate literal


#: A ``repr()`` escape of an ill-formed byte kept as a lone surrogate, not preceded by an escaped backslash.
_QUOTED_SURROGATE: Final = re.compile(r"(?<!\\)((?:\\\\)*)\\udc([89a-f][0-9a-f])")


def quoted(text: str) -> str:
    """``text`` quoted as ``repr()`` quotes it, with each ill-formed byte as ``\\xNN`` by the rule of
    :func:`wire_text` (``'a/\\xff'``): how the judge and the reports name a peer's topic or ClientId."""
    shown = repr(text)
    if "\\udc" not in shown:
        return shown
    return _QUOTED_SURROGATE.sub(r"\1\\x\2", shown)


def wire_text(text: str) -> str:
    """``text`` with every ill-formed byte of the wire (a lone surrogate U+DC80..U+DCFF, as the codec keeps it) as
    the escape ``\\xNN`` of that byte, so that any medium can hold it (``a/\\xffx``); the one rule of every
    table, report and terminal line. Any other lone surrogate becomes ``\\uNNNN``; all else is unchanged."""
    if text.isascii():
        return text
    return _SURROGATES.sub(
        lambda match: (
            f"\\x{ord(match.group()) - 0xDC00:02x}"
            if 0xDC80 <= ord(match.group()) <= 0xDCFF
            else f"\\u{ord(match.group()):04x}"
        ),
        text,
    )


def _plain(value: object) -> Any:
    if isinstance(value, bytes):
        return value.hex(" ")
    if isinstance(value, str):
        # Ill-formed bytes are kept as lone surrogates; shown as escapes so the result is valid JSON text.
        return wire_text(value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Value):
        return {
            name: _plain(item)
            for name, item in value.as_dict().items()
            if not (name.startswith("raw_") and item is None)
        }
    return value


def packet_to_dict(packet: Packet) -> dict[str, Any]:
    """``{"type": "PUBLISH", <field>: <value>, ...}``; bytes become hex strings (``"0a 1b"``, as everywhere),
    ``raw_*`` fields are left out when None (the packet's bytes agreed with its fields)."""
    return {"type": packet.packet_type.name, **_plain(packet)}


def describe_packet(packet: Packet) -> str:
    """A one-line human summary: ``PUBLISH 'a/b' QoS 1 id=7 (2 bytes payload)``."""
    name = packet.packet_type.name
    match packet:
        case Publish():
            flags = "".join(f" {flag}" for flag, on in (("DUP", packet.dup), ("RETAIN", packet.retain)) if on)
            ident = f" id={packet.packet_id}" if packet.packet_id is not None else ""
            return f"{name} {_text(packet.topic)} QoS {packet.qos}{ident}{flags} ({len(packet.payload)} bytes payload)"
        case Connect():
            return (
                f"{name} {quoted(packet.protocol_name)} level {packet.protocol_level} "
                f"client_id={_text(packet.client_id)} "
                f"clean_session={int(packet.clean_session)} keep_alive={packet.keep_alive}"
            )
        case Subscribe():
            subs = ", ".join(f"{_text(s.topic_filter)} QoS {s.qos}" for s in packet.subscriptions)
            return f"{name} id={packet.packet_id} [{subs}]"
        case Unsubscribe():
            return f"{name} id={packet.packet_id} [{', '.join(_text(f) for f in packet.topic_filters)}]"
        case Suback():
            return f"{name} id={packet.packet_id} codes=[{', '.join(f'0x{c:02x}' for c in packet.return_codes)}]"
        case ReservedPacket():
            return f"reserved packet type {packet.packet_type_value} ({len(packet.body)} bytes body)"
    details = " ".join(f"{field}={_plain(item)}" for field, item in packet.as_dict().items() if item is not None)
    return f"{name} {details}".rstrip()


def _text(value: str) -> str:
    return quoted(value)
