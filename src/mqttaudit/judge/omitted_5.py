"""MQTT 5.0: a Reason String or User Property is left out where it would make an acknowledgement or DISCONNECT
larger than the receiver's Maximum Packet Size (3.4.2.2.2 and its siblings of PUBREC, PUBREL, PUBCOMP, SUBACK,
UNSUBACK, DISCONNECT and AUTH).

A packet within the maximum keeps both statements of its type. One above it breaks the statement of each property
whose removal would have brought it within (it is too large only because of that property); one too large even
without them breaks only the Maximum Packet Size itself, which :mod:`.limits` reports [MQTT-3.1.2-24].
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import CodecError, Connack, Connect, Direction, Packet
from mqttaudit.codec.properties import MAXIMUM_PACKET_SIZE, REASON_STRING, USER_PROPERTY, first, write_properties
from mqttaudit.codec.remaining_length import encoded_size

from .connection import Connection
from .context import Context, Seen
from .limits import packet_size
from .model_rules_5 import OMITTED_OVER_MAXIMUM
from .sides import side_name

CLIENT: Final = Direction.FROM_CLIENT


def declared_maximum(connection: Connection, receiver_is_client: bool) -> int | None:
    """The Maximum Packet Size the receiver declared (its CONNECT, or the server's CONNACK); None: none known."""
    declaring: Connect | Connack | None = connection.connect if receiver_is_client else connection.connack
    if declaring is None:
        return None
    value = first(declaring.properties, MAXIMUM_PACKET_SIZE)
    return value if isinstance(value, int) else None


def _without(packet: Packet, size: int, left_out: frozenset[int]) -> int:
    """The bytes the properties ``left_out`` take in ``packet`` of ``size`` bytes, with what they add to the
    Property Length and Remaining Length fields (its size less these is its size without them)."""
    properties = getattr(packet, "properties", None) or ()
    kept = tuple(p for p in properties if p.identifier not in left_out)
    if len(kept) == len(properties):
        return 0
    try:
        every, fewer = len(write_properties(properties)), len(write_properties(kept))
    except CodecError:
        return 0  # a property the writer cannot hold (the codec's finding): nothing to weigh
    shrink = encoded_size(every) + every - encoded_size(fewer) - fewer
    remaining = size - 2
    for header in (1, 2, 3, 4):  # the Remaining Length field that fits the packet's size
        if encoded_size(size - 1 - header) == header:
            remaining = size - 1 - header
            break
    less = remaining - shrink
    return size - (1 + encoded_size(less) + less)


def check_omitted(ctx: Context, connection: Connection, seen: Seen) -> None:
    """[MQTT-3.4.2-2, -3.4.2-3, ...] The Reason String and User Properties of ``seen`` keep the receiver's Maximum
    Packet Size (the whole packet, fixed header included)."""
    packet = seen.packet
    if packet is None or seen.offends:
        return
    statements = OMITTED_OVER_MAXIMUM.get(packet.packet_type)
    if statements is None:
        return
    receiver_is_client = seen.receiver is CLIENT
    maximum = declared_maximum(connection, receiver_is_client=receiver_is_client)
    size = packet_size(seen.frame)
    if size is None:
        return
    if maximum is None:
        return  # nothing declared: no limit to keep (a 5.0 connection is always seen from its CONNECT)
    if size <= maximum:
        for rule in statements:
            ctx.ledger.held(rule)
        return
    reason_string = _without(packet, size, frozenset({REASON_STRING}))
    user_properties = _without(packet, size, frozenset({USER_PROPERTY}))
    both = _without(packet, size, frozenset({REASON_STRING, USER_PROPERTY}))
    if size - both > maximum:
        return  # too large whatever it carries: the Maximum Packet Size's own finding
    carried = [
        (rule, what, taken)
        for rule, what, taken in (
            (statements[0], "Reason String", reason_string),
            (statements[1], "User Property", user_properties),
        )
        if taken
    ]
    # Leaving one out would have been enough: that one; only both together: each of them.
    culprits = [c for c in carried if size - c[2] <= maximum] or carried
    name = packet.packet_type.name
    # One act (the packet sent too large), one finding: each property left in breaks its own statement.
    parts = "; ".join(f"{taken} of them its {what} (without it: {size - taken} bytes)" for _r, what, taken in culprits)
    whats = " and ".join(what for _rule, what, _taken in culprits)
    ctx.ledger.fail(
        culprits[0][0],
        seen.sender,
        seen.time,
        seen.event,
        f"{seen.describe()} is {size} bytes, {parts}; the {side_name(seen.receiver)} declared Maximum Packet Size "
        f"{maximum}",
        f"the {side_name(seen.sender)} leaves the {whats} out of a {name} it would make larger than the "
        f"{side_name(seen.receiver)}'s Maximum Packet Size",
        also=[rule for rule, _what, _taken in culprits[1:]],
    )
