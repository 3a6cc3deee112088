"""Plain renderings of packets: a JSON-ready dict and a one-line summary. Pure functions, no I/O."""

from __future__ import annotations

import re
from typing import Any, Final

from . import reason_codes
from .packets import (
    Auth,
    Connect,
    Packet,
    Property,
    Publish,
    ReservedPacket,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Value,
)
from .properties import BY_ID

#: Fields only MQTT 5.0 fills: left out of a packet's dict while they hold their empty value (3.1.1 packets).
_FIVE_ONLY: Final = frozenset(
    {"properties", "reason_code", "reason_codes", "no_local", "retain_as_published", "retain_handling"}
)

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
    if isinstance(value, Property):
        definition = BY_ID.get(value.identifier)
        name = definition.name if definition is not None else "unknown"
        return {"identifier": value.identifier, "name": name, "value": _plain(value.value)}
    if isinstance(value, Value):
        return {
            name: _plain(item)
            for name, item in value.as_dict().items()
            if not (name.startswith("raw_") and item is None) and not (name in _FIVE_ONLY and not item)
        }
    return value


def packet_to_dict(packet: Packet) -> dict[str, Any]:
    """``{"type": "PUBLISH", <field>: <value>, ...}``; bytes become hex strings (``"0a 1b"``, as everywhere),
    ``raw_*`` fields are left out when None (the packet's bytes agreed with its fields), and so are the MQTT 5.0
    fields while empty; each property is ``{"identifier": 35, "name": "Topic Alias", "value": 1}``."""
    return {"type": packet_name(packet), **_plain(packet)}


def packet_name(packet: Packet) -> str:
    """``PUBLISH``, ..., ``AUTH`` (type 15 is AUTH in MQTT 5.0, a reserved type before)."""
    return "AUTH" if isinstance(packet, Auth) else packet.packet_type.name


def describe_properties(properties: tuple[Property, ...] | None) -> str:
    """``Topic Alias=1, User Property=('k', 'v')``: each property by name, in wire order."""
    shown = []
    for prop in properties or ():
        definition = BY_ID.get(prop.identifier)
        name = definition.name if definition is not None else f"property 0x{prop.identifier:02x}"
        value = prop.value
        if isinstance(value, str):
            text = quoted(value)
        elif isinstance(value, bytes):
            text = value.hex(" ") if len(value) <= 16 else f"{value[:16].hex(' ')} ... ({len(value)} bytes)"
        elif isinstance(value, tuple):
            text = f"({quoted(value[0])}, {quoted(value[1])})"
        else:
            text = str(value)
        shown.append(f"{name}={text}")
    return ", ".join(shown)


def describe_reason(code: int, packet_type: int) -> str:
    """``0x10 No matching subscribers``."""
    return f"0x{code:02x} {reason_codes.name(code, packet_type)}"


def describe_packet(packet: Packet) -> str:
    """A one-line human summary: ``PUBLISH 'a/b' QoS 1 id=7 (2 bytes payload)``, with MQTT 5.0 reason codes and
    properties after it: ``PUBACK id=7 reason 0x10 No matching subscribers [Reason String='none']``."""
    line = _describe(packet)
    properties = getattr(packet, "properties", None)
    if properties:
        line += f" [{describe_properties(properties)}]"
    return line


def _describe(packet: Packet) -> str:
    name = packet_name(packet)
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
        case Unsuback() if packet.reason_codes:
            return f"{name} id={packet.packet_id} codes=[{', '.join(f'0x{c:02x}' for c in packet.reason_codes)}]"
        case ReservedPacket():
            return f"reserved packet type {packet.packet_type_value} ({len(packet.body)} bytes body)"
    details = " ".join(
        f"{field}={_plain(item)}"
        for field, item in packet.as_dict().items()
        if item is not None and field not in _FIVE_ONLY
    )
    reason = getattr(packet, "reason_code", None)
    if isinstance(reason, int):
        details += f" reason {describe_reason(reason, packet.packet_type)}"
    return f"{name} {details}".replace("  ", " ").strip()


def _text(value: str) -> str:
    return quoted(value)
