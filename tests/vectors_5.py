"""One table of MQTT 5.0 wire vectors drives the encoder and decoder tests (the 5.0 twin of ``vectors.py``).

VALID: (name, sender, packet, bytes) that must encode (``version="5"``) to exactly these bytes and decode back
without a finding. INVALID: (name, sender, bytes, [(rule, offset)]) where decoding as 5.0 must report exactly these
5.0 statement ids at these stream offsets, in this order.

The bytes are written out by hand. Where a vector is generated (one per property and place, one per Reason Code),
each property's value is a literal hex string below and the packet around it a literal template; only the
Remaining Length and Property Length are counted, by a Variable Byte Integer writer of this file's own.
"""

from __future__ import annotations

from collections.abc import Callable

from mqttaudit import codec
from mqttaudit.codec import properties as props
from mqttaudit.codec import reason_codes
from mqttaudit.codec.packets import PacketType
from mqttaudit.spec import identity

C = "client"
S = "server"

Expected = list[tuple[str, int]]


def h(text: str) -> bytes:
    return bytes.fromhex(text)


def vbi(value: int) -> str:
    """A Variable Byte Integer in hex (section 1.5.5), written independently of the codec."""
    out = []
    while True:
        value, byte = divmod(value, 128)
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out).hex()


# ---------------------------------------------------------------------------------------------------------------
# Hand-written valid packets: every packet type, both directions where Table 2.1 allows
# ---------------------------------------------------------------------------------------------------------------

VALID: list[tuple[str, str, codec.Packet, bytes]] = [
    (
        "connect-minimal",
        C,
        codec.Connect(protocol_level=5, client_id="c1", keep_alive=60),
        h("10 0f 0004 4d515454 05 02 003c 00 0002 6331"),
    ),
    (
        # 5.0 lets the server assign an identifier whatever Clean Start says (3.1.1's 3.1.3-7 is gone).
        "connect-empty-client-id-clean-start-0",
        C,
        codec.Connect(protocol_level=5, clean_session=False, client_id=""),
        h("10 0d 0004 4d515454 05 00 0000 00 0000"),
    ),
    (
        # 5.0 allows a Password without a User Name (3.1.1's 3.1.2-22 is gone).
        "connect-password-without-username",
        C,
        codec.Connect(protocol_level=5, client_id="c", password=b"p"),
        h("10 11 0004 4d515454 05 42 0000 00 0001 63 0001 70"),
    ),
    (
        "connect-full",
        C,
        codec.Connect(
            protocol_level=5,
            client_id="dev",
            clean_session=False,
            keep_alive=30,
            properties=props.make(session_expiry_interval=120, receive_maximum=20),
            will=codec.Will(
                topic="w/t",
                message=b"bye",
                qos=1,
                retain=True,
                properties=props.make(will_delay_interval=10, payload_format_indicator=1),
            ),
            username="u",
            password=b"\x00p",
        ),
        h(
            "10 31 0004 4d515454 05 ec 001e 08 1100000078 210014 0003 646576"
            " 07 180000000a 0101 0003 772f74 0003 627965 0001 75 0002 0070"
        ),
    ),
    ("connack-success", S, codec.Connack(), h("20 03 00 00 00")),
    (
        "connack-session-present-with-properties",
        S,
        codec.Connack(
            session_present=True, properties=props.make(topic_alias_maximum=10, assigned_client_identifier="a")
        ),
        h("20 0a 01 00 07 22000a 12000161"),
    ),
    ("publish-qos0-from-client", C, codec.Publish(topic="a/b", payload=b"hi"), h("30 08 0003 612f62 00 6869")),
    ("publish-qos0-from-server", S, codec.Publish(topic="a/b", payload=b"hi"), h("30 08 0003 612f62 00 6869")),
    (
        "publish-qos1-retain-repeated-user-property",
        C,
        codec.Publish(
            topic="a",
            payload=b"x",
            qos=1,
            retain=True,
            packet_id=10,
            properties=props.make(message_expiry_interval=60, user_property=[("k", "v"), ("k", "v")]),
        ),
        h("33 1a 0001 61 000a 13 020000003c 2600016b000176 2600016b000176 78"),
    ),
    (
        "publish-qos2-dup-two-subscription-identifiers-from-server",
        S,
        codec.Publish(
            topic="t",
            qos=2,
            dup=True,
            packet_id=0xFFFF,
            properties=props.make(subscription_identifier=[1, 268_435_455]),
        ),
        h("3c 0d 0001 74 ffff 07 0b01 0bffffff7f"),
    ),
    (
        # An empty Topic Name with a Topic Alias names the topic by its alias (3.3.2.3.4).
        "publish-empty-topic-with-topic-alias",
        C,
        codec.Publish(topic="", payload=b"p", properties=props.make(topic_alias=3)),
        h("30 07 0000 03 230003 70"),
    ),
    (
        "publish-two-byte-remaining-length",
        C,
        codec.Publish(topic="t", payload=b"\xaa" * 200),
        h("30 cc01 0001 74 00" + "aa" * 200),
    ),
    (
        "publish-two-byte-property-length",
        S,
        codec.Publish(topic="t", properties=props.make(user_property=[("k", "v" * 123)])),
        h("30 8601 0001 74 8101 26 0001 6b 007b" + "76" * 123),
    ),
    ("puback-reason-code-left-out-from-client", C, codec.Puback(packet_id=1), h("40 02 0001")),
    ("puback-reason-code-left-out-from-server", S, codec.Puback(packet_id=1), h("40 02 0001")),
    ("puback-reason-code-only", C, codec.Puback(packet_id=1, reason_code=0x10), h("40 03 0001 10")),
    (
        "puback-empty-property-set",
        S,
        codec.Puback(packet_id=1, reason_code=0, properties=()),
        h("40 04 0001 00 00"),
    ),
    (
        "puback-reason-string",
        C,
        codec.Puback(packet_id=1, reason_code=0x80, properties=props.make(reason_string="no")),
        h("40 09 0001 80 05 1f00026e6f"),
    ),
    ("pubrec-from-client", C, codec.Pubrec(packet_id=2), h("50 02 0002")),
    ("pubrec-from-server", S, codec.Pubrec(packet_id=2, reason_code=0x97), h("50 03 0002 97")),
    ("pubrel-from-client", C, codec.Pubrel(packet_id=3), h("62 02 0003")),
    ("pubrel-from-server", S, codec.Pubrel(packet_id=3, reason_code=0x92), h("62 03 0003 92")),
    ("pubcomp-from-client", C, codec.Pubcomp(packet_id=4, reason_code=0x00), h("70 03 0004 00")),
    ("pubcomp-from-server", S, codec.Pubcomp(packet_id=4), h("70 02 0004")),
    (
        "subscribe-all-options",
        C,
        codec.Subscribe(
            packet_id=4,
            subscriptions=(
                codec.Subscription(
                    topic_filter="a/b", qos=1, no_local=True, retain_as_published=True, retain_handling=2
                ),
            ),
        ),
        h("82 09 0004 00 0003612f62 2d"),
    ),
    (
        "subscribe-shared-with-subscription-identifier",
        C,
        codec.Subscribe(
            packet_id=5,
            subscriptions=(codec.Subscription(topic_filter="$share/g/a/#", qos=2),),
            properties=props.make(subscription_identifier=7),
        ),
        h("82 14 0005 02 0b07 000c 2473686172652f672f612f23 02"),
    ),
    (
        "suback-several-reason-codes",
        S,
        codec.Suback(packet_id=5, return_codes=(0x00, 0x01, 0x02, 0x80, 0x9E)),
        h("90 08 0005 00 000102809e"),
    ),
    (
        "unsubscribe",
        C,
        codec.Unsubscribe(packet_id=6, topic_filters=("a/+", "b/#")),
        h("a2 0d 0006 00 0003612f2b 0003622f23"),
    ),
    ("unsuback", S, codec.Unsuback(packet_id=6, reason_codes=(0x00, 0x11)), h("b0 05 0006 00 0011")),
    ("pingreq", C, codec.Pingreq(), h("c0 00")),
    ("pingresp", S, codec.Pingresp(), h("d0 00")),
    ("disconnect-from-client", C, codec.Disconnect(), h("e0 00")),
    ("disconnect-from-server", S, codec.Disconnect(), h("e0 00")),
    ("disconnect-with-will-message", C, codec.Disconnect(reason_code=0x04), h("e0 01 04")),
    (
        "disconnect-session-expiry-from-client",
        C,
        codec.Disconnect(reason_code=0, properties=props.make(session_expiry_interval=0)),
        h("e0 07 00 05 1100000000"),
    ),
    (
        "disconnect-server-moved",
        S,
        codec.Disconnect(reason_code=0x9D, properties=props.make(server_reference="b")),
        h("e0 06 9d 04 1c000162"),
    ),
    ("auth-empty-from-client", C, codec.Auth(), h("f0 00")),
    ("auth-empty-from-server", S, codec.Auth(), h("f0 00")),
    *(
        (
            f"auth-continue-from-{sender}",
            sender,
            codec.Auth(reason_code=0x18, properties=props.make(authentication_method="m", authentication_data=b"\x01")),
            h("f0 0a 18 08 1500016d 16000101"),
        )
        for sender in (C, S)
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# Every property in every place it may appear (from the PROPERTIES table), and in one place it may not
# ---------------------------------------------------------------------------------------------------------------

#: One value per property, with its wire form (identifier excluded) written by hand.
SAMPLES: dict[int, tuple[codec.packets.PropertyValue, str]] = {
    0x01: (1, "01"),
    0x02: (60, "0000003c"),
    0x03: ("a", "0001 61"),
    0x08: ("r", "0001 72"),
    0x09: (b"\x00\x01", "0002 0001"),
    0x0B: (200, "c801"),
    0x11: (0xFFFFFFFF, "ffffffff"),
    0x12: ("id", "0002 6964"),
    0x13: (30, "001e"),
    0x15: ("m", "0001 6d"),
    0x16: (b"\xff", "0001 ff"),
    0x17: (0, "00"),
    0x18: (5, "00000005"),
    0x19: (1, "01"),
    0x1A: ("ri", "0002 7269"),
    0x1C: ("s", "0001 73"),
    0x1F: ("ok", "0002 6f6b"),
    0x21: (10, "000a"),
    0x22: (0, "0000"),
    0x23: (1, "0001"),
    0x24: (1, "01"),
    0x25: (0, "00"),
    0x26: (("k", "v"), "0001 6b 0001 76"),
    0x27: (1024, "00000400"),
    0x28: (1, "01"),
    0x29: (0, "00"),
    0x2A: (1, "01"),
}

MakePacket = Callable[[codec.packets.Properties], codec.Packet]


def _will_connect(properties: codec.packets.Properties) -> codec.Packet:
    will = codec.Will(topic="w", message=b"m", properties=properties)
    return codec.Connect(protocol_level=5, client_id="c", will=will)


#: Where properties may be carried: (sender, packet around them, first byte, bytes before the Property Length,
#: bytes after the properties).
CARRIERS: dict[int, tuple[str, MakePacket, str, str, str]] = {
    PacketType.CONNECT: (
        C,
        lambda p: codec.Connect(protocol_level=5, client_id="c", properties=p),
        "10",
        "0004 4d515454 05 02 0000",
        "0001 63",
    ),
    props.WILL: (C, _will_connect, "10", "0004 4d515454 05 06 0000 00 0001 63", "0001 77 0001 6d"),
    PacketType.CONNACK: (S, lambda p: codec.Connack(properties=p), "20", "00 00", ""),
    # From the server: a client may not send a Subscription Identifier [MQTT-3.3.4-6].
    PacketType.PUBLISH: (S, lambda p: codec.Publish(topic="t", payload=b"p", properties=p), "30", "0001 74", "70"),
    PacketType.PUBACK: (C, lambda p: codec.Puback(packet_id=1, reason_code=0, properties=p), "40", "0001 00", ""),
    PacketType.PUBREC: (S, lambda p: codec.Pubrec(packet_id=1, reason_code=0, properties=p), "50", "0001 00", ""),
    PacketType.PUBREL: (C, lambda p: codec.Pubrel(packet_id=1, reason_code=0, properties=p), "62", "0001 00", ""),
    PacketType.PUBCOMP: (S, lambda p: codec.Pubcomp(packet_id=1, reason_code=0, properties=p), "70", "0001 00", ""),
    PacketType.SUBSCRIBE: (
        C,
        lambda p: codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="a"),), properties=p),
        "82",
        "0001",
        "0001 61 00",
    ),
    PacketType.SUBACK: (S, lambda p: codec.Suback(packet_id=1, return_codes=(0,), properties=p), "90", "0001", "00"),
    PacketType.UNSUBSCRIBE: (
        C,
        lambda p: codec.Unsubscribe(packet_id=1, topic_filters=("a",), properties=p),
        "a2",
        "0001",
        "0001 61",
    ),
    PacketType.UNSUBACK: (
        S,
        lambda p: codec.Unsuback(packet_id=1, reason_codes=(0,), properties=p),
        "b0",
        "0001",
        "00",
    ),
    # From the client: a server may not send a Session Expiry Interval in DISCONNECT [MQTT-3.14.2-2].
    PacketType.DISCONNECT: (C, lambda p: codec.Disconnect(reason_code=0, properties=p), "e0", "00", ""),
    PacketType.AUTH: (C, lambda p: codec.Auth(reason_code=0x18, properties=p), "f0", "18", ""),
}

#: The order in which a place a property may not appear is picked: PUBLISH first (it has no Authentication
#: Method to pair with Authentication Data).
_WRONG_PLACE_ORDER = [
    PacketType.PUBLISH,
    PacketType.CONNECT,
    PacketType.CONNACK,
    PacketType.SUBSCRIBE,
    PacketType.PUBACK,
    props.WILL,
]


def carried(
    place: int, identifiers: list[int], samples: dict[int, tuple[codec.packets.PropertyValue, str]] | None = None
) -> tuple[str, codec.Packet, bytes, int]:
    """The packet carrying the sample values (``SAMPLES``, or ``samples``) of ``identifiers`` at ``place``:
    (sender, packet, bytes, offset of the first property's identifier)."""
    values = {**SAMPLES, **(samples or {})}
    sender, make, first, before, after = CARRIERS[place]
    prop_hex = "".join(vbi(i) + values[i][1].replace(" ", "") for i in identifiers)
    length = vbi(len(h(prop_hex)))
    body = before.replace(" ", "") + length + prop_hex + after.replace(" ", "")
    remaining = vbi(len(h(body)))
    packet = make(tuple(codec.Property(i, values[i][0]) for i in identifiers))
    offset = 1 + len(h(remaining)) + len(h(before)) + len(h(length))
    return sender, packet, h(first + remaining + body), offset


def _with_companions(identifier: int) -> list[int]:
    # Authentication Data needs an Authentication Method beside it (3.1.2.11.10, 3.2.2.3.18, 3.15.2.2.3).
    return [props.AUTHENTICATION_METHOD, identifier] if identifier == props.AUTHENTICATION_DATA else [identifier]


PROPERTY_PLACES = sorted((p.identifier, place) for p in props.PROPERTIES for place in p.packets)

for _identifier, _place in PROPERTY_PLACES:
    _sender, _packet, _wire, _ = carried(_place, _with_companions(_identifier))
    VALID.append((f"property-0x{_identifier:02x}-in-{props.where(_place)}", _sender, _packet, _wire))


# ---------------------------------------------------------------------------------------------------------------
# Every Reason Code in every packet that may carry it
# ---------------------------------------------------------------------------------------------------------------

#: Packet type -> (sender, packet with the code, bytes around the code, offset of the code).
REASON_CARRIERS: dict[int, tuple[str, Callable[[int], codec.Packet], str, str, int]] = {
    PacketType.CONNACK: (S, lambda c: codec.Connack(return_code=c), "20 03 00", "00", 3),
    PacketType.PUBACK: (C, lambda c: codec.Puback(packet_id=1, reason_code=c), "40 03 0001", "", 4),
    PacketType.PUBREC: (S, lambda c: codec.Pubrec(packet_id=1, reason_code=c), "50 03 0001", "", 4),
    PacketType.PUBREL: (C, lambda c: codec.Pubrel(packet_id=1, reason_code=c), "62 03 0001", "", 4),
    PacketType.PUBCOMP: (S, lambda c: codec.Pubcomp(packet_id=1, reason_code=c), "70 03 0001", "", 4),
    PacketType.SUBACK: (S, lambda c: codec.Suback(packet_id=1, return_codes=(c,)), "90 04 0001 00", "", 5),
    PacketType.UNSUBACK: (S, lambda c: codec.Unsuback(packet_id=1, reason_codes=(c,)), "b0 04 0001 00", "", 5),
    PacketType.DISCONNECT: (C, lambda c: codec.Disconnect(reason_code=c), "e0 01", "", 2),
    PacketType.AUTH: (S, lambda c: codec.Auth(reason_code=c), "f0 01", "", 2),
}

_DISCONNECT_SENDERS = {
    code.value: {"client" if d is codec.Direction.FROM_CLIENT else "server" for d in code.disconnect_senders}
    for code in reason_codes.REASON_CODES
    if PacketType.DISCONNECT in code.packets
}

for _type, (_sender, _make, _before, _after, _) in REASON_CARRIERS.items():
    for _code in sorted(reason_codes.ALLOWED[_type]):
        _senders = sorted(_DISCONNECT_SENDERS[_code]) if _type == PacketType.DISCONNECT else [_sender]
        for _by in _senders:
            _label = reason_codes.name(_code, _type).lower().replace(" ", "-")
            _name = f"reason-code-0x{_code:02x}-{_label}-in-{props.where(_type)}-from-{_by}"
            VALID.append((_name, _by, _make(_code), h(f"{_before} {_code:02x} {_after}")))


# ---------------------------------------------------------------------------------------------------------------
# Malformed and forbidden bytes
# ---------------------------------------------------------------------------------------------------------------

INVALID: list[tuple[str, str, bytes, Expected]] = [
    # Fixed header and framing.
    ("reserved-type-0", C, h("00 00"), [("MQTT-2.1.2-reserved-type", 0)]),
    ("remaining-length-five-bytes", C, h("30 ff ff ff ff 01"), [("MQTT-1.5.5-four-bytes", 5)]),
    # A MUST for every Variable Byte Integer in 5.0 [MQTT-1.5.5-1].
    ("remaining-length-not-shortest-pingreq", C, h("c0 80 00"), [("MQTT-1.5.5-1", 1)]),
    ("remaining-length-not-shortest-disconnect", C, h("e0 81 00 00"), [("MQTT-1.5.5-1", 1)]),
    ("declared-length-beyond-data", C, h("30 0a 0001 61"), [("MQTT-2.1.4-truncated", 0)]),
    ("stream-ends-in-length", C, h("30 80"), [("MQTT-2.1.4-truncated", 0)]),
    (
        "size-limit",
        C,
        h("30 ff ff ff 7f 00 01 61"),
        [("MQTT-2.1.4-size-limit", 1), ("MQTT-2.1.4-truncated", 8)],
    ),
    ("direction-connack-from-client", C, h("20 03 00 00 00"), [("MQTT-2.1.2-direction", 0)]),
    (
        "direction-connect-from-server",
        S,
        h("10 0f 0004 4d515454 05 02 003c 00 0002 6331"),
        [("MQTT-2.1.2-direction", 0)],
    ),
    ("direction-subscribe-from-server", S, h("82 07 0001 00 0001 61 00"), [("MQTT-2.1.2-direction", 0)]),
    ("direction-pingresp-from-client", C, h("d0 00"), [("MQTT-2.1.2-direction", 0)]),
    # Reserved flags (Table 2.2).
    ("pubrel-flags-0000", C, h("60 02 0001"), [("MQTT-2.1.3-1", 0), ("MQTT-3.6.1-1", 0)]),
    ("subscribe-flags-0000", C, h("80 07 0001 00 0001 61 00"), [("MQTT-2.1.3-1", 0), ("MQTT-3.8.1-1", 0)]),
    ("unsubscribe-flags-0011", C, h("a3 06 0001 00 0001 61"), [("MQTT-2.1.3-1", 0), ("MQTT-3.10.1-1", 0)]),
    ("disconnect-flags-0001", C, h("e1 00"), [("MQTT-2.1.3-1", 0), ("MQTT-3.14.1-1", 0)]),
    ("auth-flags-0001", C, h("f1 00"), [("MQTT-2.1.3-1", 0), ("MQTT-3.15.1-1", 0)]),
    ("auth-flags-1000-from-server", S, h("f8 01 18"), [("MQTT-2.1.3-1", 0), ("MQTT-3.15.1-1", 0)]),
    ("puback-flags-0010", S, h("42 02 0001"), [("MQTT-2.1.3-1", 0)]),
    ("connack-flags-0001", S, h("21 03 00 00 00"), [("MQTT-2.1.3-1", 0)]),
    # Fixed lengths: only PINGREQ and PINGRESP keep theirs in 5.0.
    ("pingreq-length-1", C, h("c0 01 00"), [("MQTT-3.12.1-remaining-length", 1)]),
    ("pingresp-length-2", S, h("d0 02 0000"), [("MQTT-3.13.1-remaining-length", 1)]),
    ("puback-length-1", C, h("40 01 00"), [("MQTT-2.1.4-overrun", 2)]),
    ("connack-length-1", S, h("20 01 00"), [("MQTT-2.1.4-overrun", 3)]),
    # Packet Identifiers (section 2.2.1).
    ("publish-qos1-id-0-from-client", C, h("32 06 0001 61 0000 00"), [("MQTT-2.2.1-3", 5)]),
    # 5.0 states the Server's non-zero Packet Identifier apart [MQTT-2.2.1-4].
    ("publish-qos2-id-0-from-server", S, h("34 06 0001 61 0000 00"), [("MQTT-2.2.1-4", 5)]),
    ("subscribe-id-0", C, h("82 07 0000 00 0001 61 00"), [("MQTT-2.2.1-3", 2)]),
    ("unsubscribe-id-0", C, h("a2 06 0000 00 0001 61"), [("MQTT-2.2.1-3", 2)]),
    ("puback-id-0", C, h("40 02 0000"), [("MQTT-2.2.1-5", 2)]),
    ("pubcomp-id-0", S, h("70 03 0000 00"), [("MQTT-2.2.1-5", 2)]),
    ("suback-id-0", S, h("90 04 0000 00 00"), [("MQTT-2.2.1-6", 2)]),
    ("unsuback-id-0", S, h("b0 04 0000 00 00"), [("MQTT-2.2.1-6", 2)]),
    # A Property Length left out where the packet must carry one [MQTT-2.2.2-1]: 3.1.1 bytes on a 5.0 connection.
    ("connack-in-3.1.1-form", S, h("20 02 00 00"), [("MQTT-2.2.2-1", 4)]),
    ("publish-without-property-length", C, h("30 03 0001 61"), [("MQTT-2.2.2-1", 5)]),
    (
        "connect-without-property-length",
        C,
        h("10 0a 0004 4d515454 05 02 0000"),
        [("MQTT-2.2.2-1", 12), ("MQTT-3.1.3-3", 12)],
    ),
    ("suback-without-property-length", S, h("90 02 0001"), [("MQTT-2.2.2-1", 4), ("MQTT-3.8.4-6", 4)]),
    ("unsuback-in-3.1.1-form", S, h("b0 02 0001"), [("MQTT-2.2.2-1", 4), ("MQTT-3.11.3-2", 4)]),
    ("subscribe-without-property-length", C, h("82 02 0001"), [("MQTT-2.2.2-1", 4), ("MQTT-3.8.3-2", 4)]),
    # Properties: duplicates, unknown identifiers, values out of range.
    (
        "publish-message-expiry-twice",
        S,
        h("30 0e 0001 74 0a 020000003c 020000003c"),
        [("MQTT-2.2.2-property-duplicate", 11)],
    ),
    ("connack-maximum-qos-twice", S, h("20 07 00 00 04 2400 2400"), [("MQTT-2.2.2-property-duplicate", 7)]),
    (
        "subscribe-subscription-identifier-twice",
        C,
        h("82 0b 0001 04 0b01 0b02 0001 61 00"),
        [("MQTT-2.2.2-property-duplicate", 7)],
    ),
    ("publish-unknown-property-0x00", S, h("30 06 0001 74 02 0000"), [("MQTT-2.2.2-property-identifier", 6)]),
    ("puback-unknown-property-0x04", C, h("40 06 0001 00 02 0400"), [("MQTT-2.2.2-property-identifier", 6)]),
    (
        "connect-unknown-property-0x80-0x01",
        C,
        h("10 11 0004 4d515454 05 02 0000 03 8001 00 0001 63"),
        [("MQTT-2.2.2-property-identifier", 13)],
    ),
    ("publish-topic-alias-0", C, h("30 07 0001 74 03 230000"), [("MQTT-3.3.2-8", 7)]),
    ("connack-receive-maximum-0", S, h("20 06 00 00 03 210000"), [("MQTT-2.2.2-property-value", 6)]),
    (
        "connect-receive-maximum-0",
        C,
        h("10 11 0004 4d515454 05 02 0000 03 210000 0001 63"),
        [("MQTT-2.2.2-property-value", 14)],
    ),
    ("connack-maximum-packet-size-0", S, h("20 08 00 00 05 2700000000"), [("MQTT-2.2.2-property-value", 6)]),
    ("connack-maximum-qos-2", S, h("20 05 00 00 02 2402"), [("MQTT-2.2.2-property-value", 6)]),
    ("connack-retain-available-2", S, h("20 05 00 00 02 2502"), [("MQTT-2.2.2-property-value", 6)]),
    ("subscribe-subscription-identifier-0", C, h("82 09 0001 02 0b00 0001 61 00"), [("MQTT-2.2.2-property-value", 6)]),
    ("publish-payload-format-indicator-2", S, h("30 06 0001 74 02 0102"), [("MQTT-3.3.2-payload-format", 7)]),
    (
        "connect-request-problem-information-2",
        C,
        h("10 10 0004 4d515454 05 02 0000 02 1702 0001 63"),
        [("MQTT-2.2.2-property-value", 14)],
    ),
    (
        "will-payload-format-indicator-255",
        C,
        h("10 17 0004 4d515454 05 06 0000 00 0001 63 02 01ff 0001 77 0001 6d"),
        [("MQTT-3.3.2-payload-format", 18)],
    ),
    # Lengths: the Property Length against the packet, a property value against the Property Length.
    ("publish-property-length-past-packet", S, h("30 06 0001 74 09 0101"), [("MQTT-2.2.2-property-length", 5)]),
    ("connack-property-length-past-packet", S, h("20 03 00 00 01"), [("MQTT-2.2.2-property-length", 4)]),
    (
        "publish-four-byte-value-past-property-length",
        S,
        h("30 08 0001 74 02 0200 0000"),
        [("MQTT-2.2.2-property-length", 7)],
    ),
    (
        "publish-string-value-past-property-length",
        S,
        h("30 0a 0001 74 04 03 0005 61 6263"),
        [("MQTT-2.2.2-property-length", 9)],
    ),
    (
        "puback-user-property-value-past-property-length",
        C,
        h("40 0d 0001 00 06 26 0001 6b 0005 76 7777"),
        # the bytes after the properties are left over in a PUBACK
        [("MQTT-2.2.2-property-length", 12), ("MQTT-2.1.4-leftover", 12)],
    ),
    # Variable Byte Integers: shortest form [MQTT-1.5.5-1] everywhere, never a fifth byte.
    ("puback-property-length-not-shortest", C, h("40 05 0001 00 8000"), [("MQTT-1.5.5-1", 5)]),
    (
        "subscribe-subscription-identifier-not-shortest",
        C,
        h("82 0a 0001 03 0b8100 0001 61 00"),
        [("MQTT-1.5.5-1", 6)],
    ),
    ("publish-property-identifier-not-shortest", S, h("30 07 0001 74 03 8100 01"), [("MQTT-1.5.5-1", 6)]),
    ("puback-property-length-five-bytes", C, h("40 08 0001 00 ffffffff01"), [("MQTT-1.5.5-four-bytes", 9)]),
    (
        "subscribe-subscription-identifier-five-bytes",
        C,
        h("82 0d 0001 06 0b ffffffff01 0001 61 00"),
        [("MQTT-1.5.5-four-bytes", 10)],
    ),
    # Subscription Options (3.8.3.1) and Shared Subscriptions (4.8.2).
    ("subscribe-options-reserved-bits", C, h("82 07 0001 00 0001 61 c0"), [("MQTT-3.8.3-5", 8)]),
    ("subscribe-options-qos-3", C, h("82 07 0001 00 0001 61 03"), [("MQTT-3.8.3-qos", 8)]),
    ("subscribe-options-retain-handling-3", C, h("82 07 0001 00 0001 61 30"), [("MQTT-3.8.3-retain-handling", 8)]),
    (
        "subscribe-no-local-on-shared",
        C,
        h("82 10 0001 00 000a 2473686172652f672f61 04"),
        [("MQTT-3.8.3-4", 17)],
    ),
    (
        "subscribe-no-local-on-unshared-is-fine-but-qos-3",
        C,
        h("82 07 0001 00 0001 61 07"),
        [("MQTT-3.8.3-qos", 8)],
    ),
    ("subscribe-shared-without-share-name", C, h("82 0f 0001 00 0009 247368617265 2f2f61 00"), [("MQTT-4.8.2-1", 14)]),
    ("subscribe-shared-without-filter", C, h("82 0e 0001 00 0008 2473686172652f67 00"), [("MQTT-4.8.2-2", 15)]),
    # A Shared Subscription is unsubscribed by its whole filter: the same form holds there.
    ("unsubscribe-shared-without-share-name", C, h("a2 0e 0001 00 0009 247368617265 2f2f61"), [("MQTT-4.8.2-1", 14)]),
    ("unsubscribe-shared-without-filter", C, h("a2 0d 0001 00 0008 2473686172652f67"), [("MQTT-4.8.2-2", 15)]),
    # A wildcard in the ShareName breaks 4.8.2-2 alone, at the wildcard: the ShareName is no topic level.
    (
        "subscribe-shared-share-name-with-wildcard",
        C,
        h("82 11 0001 00 000b 2473686172652f672b2f61 00"),
        [("MQTT-4.8.2-2", 15)],
    ),
    ("subscribe-shared-share-name-hash", C, h("82 11 0001 00 000b 2473686172652f61232f78 00"), [("MQTT-4.8.2-2", 15)]),
    # ... while the filter after it is judged as any Topic Filter, at its own bytes.
    (
        "subscribe-shared-filter-hash-not-last",
        C,
        h("82 12 0001 00 000c 2473686172652f672f232f61 00"),
        [("MQTT-4.7.1-1", 16)],
    ),
    # Properties a side may not send.
    ("publish-subscription-identifier-from-client", C, h("30 07 0001 74 02 0b01 70"), [("MQTT-3.3.4-6", 6)]),
    ("disconnect-session-expiry-from-server", S, h("e0 07 00 05 1100000000"), [("MQTT-3.14.2-2", 4)]),
    ("disconnect-with-will-from-server", S, h("e0 01 04"), [("MQTT-3.14.2-1", 2)]),
    # Authentication.
    (
        "connect-authentication-data-without-method",
        C,
        h("10 12 0004 4d515454 05 02 0000 04 16000101 0001 63"),
        [("MQTT-3.1.2-authentication-data", 13)],
    ),
    (
        "connack-authentication-data-without-method",
        S,
        h("20 07 00 00 04 16000101"),
        [("MQTT-3.1.2-authentication-data", 5)],
    ),
    ("auth-authentication-data-without-method", S, h("f0 06 18 04 16000101"), [("MQTT-3.1.2-authentication-data", 4)]),
    # Topics.
    ("publish-empty-topic-without-alias", C, h("30 04 0000 00 70"), [("MQTT-4.7.3-1", 2)]),
    (
        "publish-empty-topic-with-another-property",
        C,
        h("30 06 0000 02 0101 70"),
        [("MQTT-4.7.3-1", 2)],
    ),
    (
        "publish-response-topic-with-wildcard",
        S,
        h("30 0b 0001 74 06 08 0003 612f23 70"),
        [("MQTT-3.3.2-14", 11), ("MQTT-4.7.0-1", 11)],
    ),
    (
        "will-response-topic-with-wildcard",
        C,
        h("10 1a 0004 4d515454 05 06 0000 00 0001 63 05 08 0002 2b2f 0001 77 0001 6d"),
        [("MQTT-3.3.2-14", 20), ("MQTT-4.7.0-1", 20)],
    ),
    (
        "publish-response-topic-ill-formed",
        S,
        h("30 08 0001 74 04 08 0001 ff"),
        [("MQTT-1.5.4-1", 9), ("MQTT-3.3.2-13", 9)],
    ),
    (
        "publish-content-type-ill-formed",
        S,
        h("30 08 0001 74 04 03 0001 ff"),
        [("MQTT-1.5.4-1", 9), ("MQTT-3.3.2-19", 9)],
    ),
    (
        "publish-user-property-name-ill-formed",
        S,
        h("30 0a 0001 74 06 26 0001 ff 0000"),
        [("MQTT-1.5.4-1", 9), ("MQTT-1.5.7-1", 9)],
    ),
    (
        "puback-user-property-value-ill-formed",
        C,
        h("40 0b 0001 00 07 26 0000 0002 61c0"),
        [("MQTT-1.5.4-1", 12), ("MQTT-1.5.7-1", 12)],
    ),
    # [MQTT-1.5.7-1] binds a pair to every rule of a UTF-8 Encoded String, U+0000 [MQTT-1.5.4-2] included.
    (
        "publish-user-property-value-nul",
        C,
        h("30 0d 0001 74 09 26 0001 6b 0003 610062"),
        [("MQTT-1.5.4-2", 13), ("MQTT-1.5.7-1", 13)],
    ),
    ("publish-wildcard-topic", C, h("30 06 0003 612f2b 00"), [("MQTT-3.3.2-2", 6), ("MQTT-4.7.0-1", 6)]),
    ("publish-topic-ill-formed", C, h("30 05 0002 c0af 00"), [("MQTT-1.5.4-1", 4), ("MQTT-3.3.2-1", 4)]),
    ("publish-topic-nul", S, h("30 06 0003 610062 00"), [("MQTT-1.5.4-2", 5), ("MQTT-4.7.3-2", 5)]),
    ("publish-topic-control-character", S, h("30 06 0003 610962 00"), [("MQTT-1.5.4-control-characters", 5)]),
    ("publish-qos3", C, h("36 06 0001 61 0001 00"), [("MQTT-3.3.1-4", 0)]),
    ("publish-dup-qos0", C, h("38 04 0001 61 00"), [("MQTT-3.3.1-2", 0), ("MQTT-4.3.1-1", 0)]),
    ("subscribe-no-topic-filter", C, h("82 03 0001 00"), [("MQTT-3.8.3-2", 5)]),
    ("subscribe-empty-filter", C, h("82 06 0001 00 0000 00"), [("MQTT-4.7.3-1", 5)]),
    ("subscribe-hash-not-last", C, h("82 09 0001 00 0003 232f61 00"), [("MQTT-4.7.1-1", 7)]),
    ("subscribe-plus-not-alone", C, h("82 09 0001 00 0003 612b62 00"), [("MQTT-4.7.1-2", 8)]),
    ("subscribe-filter-ill-formed", C, h("82 07 0001 00 0001 80 00"), [("MQTT-1.5.4-1", 7), ("MQTT-3.8.3-1", 7)]),
    ("subscribe-missing-options-byte", C, h("82 06 0001 00 0001 61"), [("MQTT-2.1.4-overrun", 8)]),
    ("suback-no-reason-code", S, h("90 03 0001 00"), [("MQTT-3.8.4-6", 5)]),
    ("unsubscribe-no-topic-filter", C, h("a2 03 0001 00"), [("MQTT-3.10.3-2", 5)]),
    ("unsubscribe-filter-ill-formed", C, h("a2 06 0001 00 0001 fe"), [("MQTT-1.5.4-1", 7), ("MQTT-3.10.3-1", 7)]),
    ("unsuback-no-reason-code", S, h("b0 03 0001 00"), [("MQTT-3.11.3-2", 5)]),
    # CONNECT.
    ("connect-protocol-name-mqisdp", C, h("10 10 0006 4d5149736470 05 02 0000 00 0001 63"), [("MQTT-3.1.2-1", 2)]),
    (
        "connect-protocol-level-6",
        C,
        h("10 0e 0004 4d515454 06 02 0000 00 0001 63"),
        [("MQTT-3.1.2-protocol-version", 8)],
    ),
    ("connect-reserved-flag", C, h("10 0e 0004 4d515454 05 03 0000 00 0001 63"), [("MQTT-3.1.2-3", 9)]),
    ("connect-will-qos-without-will", C, h("10 0e 0004 4d515454 05 0a 0000 00 0001 63"), [("MQTT-3.1.2-11", 9)]),
    ("connect-will-retain-without-will", C, h("10 0e 0004 4d515454 05 22 0000 00 0001 63"), [("MQTT-3.1.2-13", 9)]),
    (
        "connect-will-qos-3",
        C,
        h("10 15 0004 4d515454 05 1e 0000 00 0001 63 00 0001 74 0001 6d"),
        [("MQTT-3.1.2-12", 9)],
    ),
    ("connect-will-flag-no-will-fields", C, h("10 0e 0004 4d515454 05 06 0000 00 0001 63"), [("MQTT-3.1.2-9", 16)]),
    (
        "connect-will-topic-wildcard",
        C,
        h("10 15 0004 4d515454 05 06 0000 00 0001 63 00 0001 23 0001 6d"),
        [("MQTT-4.7.0-1", 19)],
    ),
    (
        "connect-will-topic-ill-formed",
        C,
        h("10 14 0004 4d515454 05 06 0000 00 0001 63 00 0001 ff 0000"),
        [("MQTT-1.5.4-1", 19), ("MQTT-3.1.3-11", 19)],
    ),
    ("connect-username-flag-no-username", C, h("10 0e 0004 4d515454 05 82 0000 00 0001 63"), [("MQTT-3.1.2-17", 16)]),
    (
        "connect-password-flag-no-password",
        C,
        h("10 11 0004 4d515454 05 c2 0000 00 0001 63 0001 75"),
        [("MQTT-3.1.2-19", 19)],
    ),
    (
        "connect-username-ill-formed",
        C,
        h("10 11 0004 4d515454 05 82 0000 00 0001 63 0001 ff"),
        [("MQTT-1.5.4-1", 18), ("MQTT-3.1.3-12", 18)],
    ),
    ("connect-no-client-id", C, h("10 0b 0004 4d515454 05 02 0000 00"), [("MQTT-3.1.3-3", 13)]),
    (
        "connect-client-id-ill-formed",
        C,
        h("10 0e 0004 4d515454 05 02 0000 00 0001 ff"),
        [("MQTT-1.5.4-1", 15), ("MQTT-3.1.3-4", 15)],
    ),
    ("connect-leftover", C, h("10 0f 0004 4d515454 05 02 0000 00 0001 63 ff"), [("MQTT-2.1.4-leftover", 16)]),
    # A User Name or Password the flags do not announce, in its place after the announced fields.
    (
        "connect-username-without-flag",
        C,
        h("10 12 0004 4d515454 05 02 0000 00 0002 6331 0001 75"),
        [("MQTT-3.1.2-16", 17), ("MQTT-2.1.4-leftover", 17)],
    ),
    (
        "connect-password-without-flag",
        C,
        h("10 16 0004 4d515454 05 82 0000 00 0002 6331 0001 75 0002 7077"),
        [("MQTT-3.1.2-18", 20), ("MQTT-2.1.4-leftover", 20)],
    ),
    (
        "connect-credentials-without-flags",
        C,
        h("10 16 0004 4d515454 05 02 0000 00 0002 6331 0001 75 0002 7077"),
        [("MQTT-3.1.2-16", 17), ("MQTT-3.1.2-18", 20), ("MQTT-2.1.4-leftover", 17)],
    ),
    # CONNACK.
    ("connack-reserved-flags", S, h("20 03 02 00 00"), [("MQTT-3.2.2-1", 2)]),
    ("connack-session-present-with-failure", S, h("20 03 01 80 00"), [("MQTT-3.2.2-6", 2)]),
    ("connack-leftover", S, h("20 04 00 00 00 ff"), [("MQTT-2.1.4-leftover", 5)]),
    ("puback-leftover", C, h("40 05 0001 00 00 ff"), [("MQTT-2.1.4-leftover", 6)]),
]


def _five(key: str) -> str:
    rule = identity.statement_id(key, identity.V5)
    assert rule is not None, key
    return rule


PROPERTY_PACKET = "MQTT-2.2.2-property-packet"

#: Each property in one place it may not appear. User Property may appear everywhere: it has no such place.
for _definition in props.PROPERTIES:
    _wrong = [place for place in _WRONG_PLACE_ORDER if place not in _definition.packets]
    if not _wrong:
        continue
    _sender, _, _wire, _offset = carried(_wrong[0], [_definition.identifier])
    _name = f"property-0x{_definition.identifier:02x}-in-{props.where(_wrong[0])}"
    INVALID.append((_name, _sender, _wire, [(PROPERTY_PACKET, _offset)]))

#: A value out of range for every property whose definition bounds it more than its data type does (the flags
#: are 0 or 1, Receive Maximum, Maximum Packet Size, Topic Alias and Subscription Identifier are not 0), with the
#: statement it breaks.
OUT_OF_RANGE: dict[int, tuple[int, str, str]] = {
    0x01: (2, "02", "MQTT-3.3.2-payload-format"),
    0x0B: (0, "00", "MQTT-2.2.2-property-value"),
    0x17: (2, "02", "MQTT-2.2.2-property-value"),
    0x19: (0xFF, "ff", "MQTT-2.2.2-property-value"),
    0x21: (0, "0000", "MQTT-2.2.2-property-value"),
    0x23: (0, "0000", "MQTT-3.3.2-8"),
    0x24: (2, "02", "MQTT-2.2.2-property-value"),
    0x25: (3, "03", "MQTT-2.2.2-property-value"),
    0x27: (0, "00000000", "MQTT-2.2.2-property-value"),
    0x28: (2, "02", "MQTT-2.2.2-property-value"),
    0x29: (0x80, "80", "MQTT-2.2.2-property-value"),
    0x2A: (2, "02", "MQTT-2.2.2-property-value"),
}

for _identifier, (_value, _hex, _rule) in OUT_OF_RANGE.items():
    for _place in sorted(props.BY_ID[_identifier].packets):
        _sender, _, _wire, _offset = carried(_place, [_identifier], {_identifier: (_value, _hex)})
        _name = f"property-0x{_identifier:02x}-value-{_value}-in-{props.where(_place)}"
        INVALID.append((_name, _sender, _wire, [(_rule, _offset + 1)]))

#: Per packet type, Reason Codes it may not carry: one that another packet type defines and the reserved 0xFF.
for _type, (_sender, _, _before, _after, _offset) in REASON_CARRIERS.items():
    _elsewhere = min(c.value for c in reason_codes.REASON_CODES if c.value not in reason_codes.ALLOWED[_type])
    for _code in (_elsewhere, 0xFF):
        _name = f"reason-code-0x{_code:02x}-not-in-{props.where(_type)}"
        INVALID.append(
            (_name, _sender, h(f"{_before} {_code:02x} {_after}"), [(_five(reason_codes.RULES[_type]), _offset)])
        )

#: DISCONNECT Reason Codes Table 3.10 lets only one side send, sent by the other.
INVALID.extend(
    (f"disconnect-0x{code:02x}-from-{by}", by, h(f"e0 01 {code:02x}"), [("MQTT-3.14.2-1", 2)])
    for code, senders in sorted(_DISCONNECT_SENDERS.items())
    for by in sorted({C, S} - senders)
)

#: Rules only the encoder can see: a QoS 0 PUBLISH's Packet Identifier would read as payload [MQTT-2.2.1-2], and
#: no two-byte length prefix can describe a string over 65,535 bytes [MQTT-1.5.4-max-length, MQTT-4.7.3-3].
ENCODE_ONLY = {"MQTT-2.2.1-2", "MQTT-1.5.4-max-length", "MQTT-4.7.3-3"}

#: Vectors whose bytes end the framing or bound it: their prefixes and tails are tested separately.
FRAMING = {"remaining-length-five-bytes", "size-limit", "declared-length-beyond-data", "stream-ends-in-length"}
