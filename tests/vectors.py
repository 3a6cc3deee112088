"""One table of wire vectors drives the encoder and decoder tests.

VALID: (name, sender, packet, bytes) pairs that must encode to exactly these bytes and decode back without a
violation. INVALID: (name, sender, bytes, rules) where decoding must report exactly these rule ids.
"""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec import rules

C = "client"
S = "server"


def h(text: str) -> bytes:
    return bytes.fromhex(text)


VALID: list[tuple[str, str, codec.Packet, bytes]] = [
    (
        "connect-minimal",
        C,
        codec.Connect(client_id="c1", keep_alive=60),
        h("10 0e 00 04 4d515454 04 02 003c 0002 6331"),
    ),
    (
        "connect-empty-client-id",
        C,
        codec.Connect(client_id=""),
        h("10 0c 00 04 4d515454 04 02 0000 0000"),
    ),
    (
        "connect-full",
        C,
        codec.Connect(
            client_id="dev",
            clean_session=False,
            keep_alive=30,
            will=codec.Will(topic="w/t", message=b"bye", qos=1, retain=True),
            username="u",
            password=b"\x00p",
        ),
        h("10 20 0004 4d515454 04 ec 001e 0003 646576 0003 772f74 0003 627965 0001 75 0002 0070"),
    ),
    ("connack-accepted", S, codec.Connack(), h("20 02 00 00")),
    ("connack-session-present", S, codec.Connack(session_present=True), h("20 02 01 00")),
    ("connack-refused-identifier", S, codec.Connack(return_code=2), h("20 02 00 02")),
    ("publish-qos0", C, codec.Publish(topic="a/b", payload=b"hi"), h("30 07 0003 612f62 6869")),
    (
        "publish-qos1-retain",
        C,
        codec.Publish(topic="a", payload=b"x", qos=1, retain=True, packet_id=10),
        h("33 06 0001 61 000a 78"),
    ),
    (
        "publish-qos2-dup-from-server",
        S,
        codec.Publish(topic="$SYS/x", qos=2, dup=True, packet_id=0xFFFF),
        h("3c 0a 0006 24535953 2f78 ffff"),
    ),
    ("publish-empty-payload", C, codec.Publish(topic="t", qos=0), h("30 03 0001 74")),
    (
        "publish-utf8-topic",
        C,
        codec.Publish(topic="k\u00fcche/\ufeff/\U0001f600", payload=b""),
        h("30 11 000f 6bc3bc636865 2f efbbbf 2f f09f9880"),
    ),
    (
        "publish-empty-levels",
        C,
        codec.Publish(topic="/a//", payload=b"p"),
        h("30 07 0004 2f612f2f 70"),
    ),
    (
        "publish-two-byte-length",
        C,
        codec.Publish(topic="t", payload=b"\xaa" * 200),
        h("30 cb01 0001 74" + "aa" * 200),
    ),
    ("puback", C, codec.Puback(packet_id=1), h("40 02 0001")),
    ("pubrec", S, codec.Pubrec(packet_id=2), h("50 02 0002")),
    ("pubrel", C, codec.Pubrel(packet_id=3), h("62 02 0003")),
    ("pubcomp", S, codec.Pubcomp(packet_id=4), h("70 02 0004")),
    (
        "subscribe-one",
        C,
        codec.Subscribe(packet_id=4, subscriptions=(codec.Subscription(topic_filter="a/b"),)),
        h("82 08 0004 0003 612f62 00"),
    ),
    (
        "subscribe-wildcards",
        C,
        codec.Subscribe(
            packet_id=5,
            subscriptions=(
                codec.Subscription(topic_filter="+/x/#", qos=2),
                codec.Subscription(topic_filter="#", qos=1),
                codec.Subscription(topic_filter="+", qos=0),
                codec.Subscription(topic_filter="/+/", qos=0),
            ),
        ),
        h("82 18 0005 0005 2b2f782f23 02 0001 23 01 0001 2b 00 0003 2f2b2f 00"),
    ),
    ("suback", S, codec.Suback(packet_id=5, return_codes=(2, 1, 0, 0x80)), h("90 06 0005 02010080")),
    (
        "unsubscribe",
        C,
        codec.Unsubscribe(packet_id=6, topic_filters=("a/+", "b/#")),
        h("a2 0c 0006 0003 612f2b 0003 622f23"),
    ),
    ("unsuback", S, codec.Unsuback(packet_id=6), h("b0 02 0006")),
    ("pingreq", C, codec.Pingreq(), h("c0 00")),
    ("pingresp", S, codec.Pingresp(), h("d0 00")),
    ("disconnect", C, codec.Disconnect(), h("e0 00")),
]

INVALID: list[tuple[str, str, bytes, list[str]]] = [
    # Fixed header and framing.
    ("reserved-type-0", C, h("00 00"), [rules.RESERVED_PACKET_TYPE]),
    ("reserved-type-15", S, h("f0 01 aa"), [rules.RESERVED_PACKET_TYPE]),
    ("remaining-length-five-bytes", C, h("30 ff ff ff ff 01"), [rules.REMAINING_LENGTH_FOUR_BYTES]),
    ("remaining-length-over-long", C, h("c0 80 00"), [rules.REMAINING_LENGTH_SHORTEST]),
    ("declared-length-beyond-data", C, h("30 0a 00 01 61"), [rules.TRUNCATED]),
    ("stream-ends-in-length", C, h("30 80"), [rules.TRUNCATED]),
    ("size-limit", C, h("30 ff ff ff 7f 00 01 61"), [rules.SIZE_LIMIT, rules.TRUNCATED]),
    ("direction-connack-from-client", C, h("20 02 00 00"), [rules.PACKET_DIRECTION]),
    ("direction-subscribe-from-server", S, h("82 06 0001 0001 61 00"), [rules.PACKET_DIRECTION]),
    ("direction-disconnect-from-server", S, h("e0 00"), [rules.PACKET_DIRECTION]),
    # Reserved flags.
    ("pubrel-flags-0000", C, h("60 02 0001"), [rules.RESERVED_FLAGS, rules.PUBREL_FLAGS]),
    ("subscribe-flags-0000", C, h("80 06 0001 0001 61 00"), [rules.RESERVED_FLAGS, rules.SUBSCRIBE_FLAGS]),
    ("unsubscribe-flags-0011", C, h("a3 05 0001 0001 61"), [rules.RESERVED_FLAGS, rules.UNSUBSCRIBE_FLAGS]),
    ("disconnect-flags-0001", C, h("e1 00"), [rules.RESERVED_FLAGS, rules.DISCONNECT_FLAGS]),
    ("puback-flags-0010", S, h("42 02 0001"), [rules.RESERVED_FLAGS]),
    ("pingreq-flags-1000", C, h("c8 00"), [rules.RESERVED_FLAGS]),
    # Exact lengths of fixed-size packets.
    ("connack-length-3", S, h("20 03 00 00 00"), [rules.CONNACK_LENGTH]),
    ("puback-length-1", C, h("40 01 00"), [rules.PUBACK_LENGTH]),
    ("puback-length-3", C, h("40 03 0001 00"), [rules.PUBACK_LENGTH]),
    ("pubrec-length-0", C, h("50 00"), [rules.PUBREC_LENGTH]),
    ("pubrel-length-4", C, h("62 04 0001 0000"), [rules.PUBREL_LENGTH]),
    ("pubcomp-length-1", S, h("70 01 01"), [rules.PUBCOMP_LENGTH]),
    ("unsuback-length-3", S, h("b0 03 0001 00"), [rules.UNSUBACK_LENGTH]),
    ("pingreq-length-1", C, h("c0 01 00"), [rules.PINGREQ_LENGTH]),
    ("pingresp-length-2", S, h("d0 02 0000"), [rules.PINGRESP_LENGTH]),
    ("disconnect-length-1", C, h("e0 01 00"), [rules.DISCONNECT_LENGTH]),
    # Packet identifiers.
    ("publish-qos1-id-0", C, h("32 05 0001 61 0000"), [rules.PACKET_ID_NONZERO]),
    ("subscribe-id-0", C, h("82 06 0000 0001 61 00"), [rules.PACKET_ID_NONZERO]),
    ("unsubscribe-id-0", C, h("a2 05 0000 0001 61"), [rules.PACKET_ID_NONZERO]),
    ("puback-id-0", C, h("40 02 0000"), [rules.PUBLISH_ACK_SAME_ID]),
    ("pubcomp-id-0", C, h("70 02 0000"), [rules.PUBCOMP_SAME_ID]),
    ("suback-id-0", S, h("90 03 0000 00"), [rules.SUBSCRIBE_ACK_SAME_ID]),
    # PUBLISH.
    ("publish-qos3", C, h("36 05 0001 61 0001"), [rules.QOS_3]),
    ("publish-dup-qos0", C, h("38 03 0001 61"), [rules.DUP_ON_QOS0, rules.QOS0_SENDER_FLAGS]),
    (
        "publish-wildcard-hash",
        C,
        h("32 0e 00 08 73 65 6e 73 6f 72 2f 23 00 03 68 69"),
        [rules.TOPIC_NAME_NO_WILDCARDS, rules.TOPIC_NAME_WILDCARDS],
    ),
    (
        "publish-wildcard-plus",
        S,
        h("30 05 0003 612f2b"),
        [rules.TOPIC_NAME_NO_WILDCARDS, rules.TOPIC_NAME_WILDCARDS],
    ),
    ("publish-empty-topic", C, h("30 03 0000 78"), [rules.TOPIC_NOT_EMPTY]),
    ("publish-topic-nul", C, h("30 05 0003 610062"), [rules.UTF8_NO_NULL, rules.TOPIC_NO_NULL]),
    ("publish-topic-surrogate", C, h("30 05 0003 eda080"), [rules.UTF8_WELL_FORMED, rules.TOPIC_NAME_UTF8]),
    ("publish-topic-overlong-utf8", C, h("30 04 0002 c0af"), [rules.UTF8_WELL_FORMED, rules.TOPIC_NAME_UTF8]),
    (
        "publish-topic-truncated-utf8",
        C,
        h("30 04 0002 61e2"),
        [rules.UTF8_WELL_FORMED, rules.TOPIC_NAME_UTF8],
    ),
    ("publish-topic-control-char", C, h("30 05 0003 61 09 62"), [rules.UTF8_CONTROL_CHARACTERS]),
    ("publish-topic-noncharacter", C, h("30 05 0003 efbfbf"), [rules.UTF8_CONTROL_CHARACTERS]),
    ("publish-topic-past-end", C, h("30 03 0005 61"), [rules.FIELD_OVERRUN]),
    ("publish-qos1-no-packet-id", C, h("32 03 0001 61"), [rules.FIELD_OVERRUN]),
    ("publish-empty-body", C, h("30 00"), [rules.FIELD_OVERRUN]),
    # CONNECT.
    (
        "connect-protocol-name-mqisdp",
        C,
        h("10 10 0006 4d5149736470 03 02 003c 0002 6331"),
        [rules.PROTOCOL_NAME, rules.PROTOCOL_LEVEL],
    ),
    ("connect-protocol-level-5", C, h("10 0e 0004 4d515454 05 02 003c 0002 6331"), [rules.PROTOCOL_LEVEL]),
    (
        "connect-reserved-flag",
        C,
        h("10 0e 0004 4d515454 04 03 003c 0002 6331"),
        [rules.CONNECT_RESERVED_FLAG],
    ),
    (
        "connect-will-qos-without-will",
        C,
        h("10 0e 0004 4d515454 04 0a 003c 0002 6331"),
        [rules.WILL_QOS_WITHOUT_WILL, rules.WILL_FLAG_ZERO_FIELDS],
    ),
    (
        "connect-will-retain-without-will",
        C,
        h("10 0e 0004 4d515454 04 22 003c 0002 6331"),
        [rules.WILL_RETAIN_WITHOUT_WILL, rules.WILL_FLAG_ZERO_FIELDS],
    ),
    (
        "connect-will-qos-3",
        C,
        h("10 14 0004 4d515454 04 1e 003c 0002 6331 0001 74 0001 6d"),
        [rules.WILL_QOS_3],
    ),
    (
        "connect-will-flag-no-will-fields",
        C,
        h("10 0e 0004 4d515454 04 06 003c 0002 6331"),
        [rules.WILL_FIELDS_PRESENT],
    ),
    (
        "connect-will-topic-wildcard",
        C,
        h("10 14 0004 4d515454 04 06 003c 0002 6331 0001 23 0001 6d"),
        [rules.TOPIC_NAME_WILDCARDS],
    ),
    (
        "connect-password-without-username",
        C,
        h("10 11 0004 4d515454 04 42 003c 0002 6331 0001 70"),
        [rules.PASSWORD_WITHOUT_USERNAME],
    ),
    (
        "connect-username-flag-no-username",
        C,
        h("10 0e 0004 4d515454 04 82 003c 0002 6331"),
        [rules.USERNAME_PRESENT],
    ),
    (
        "connect-password-flag-no-password",
        C,
        h("10 11 0004 4d515454 04 c2 003c 0002 6331 0001 75"),
        [rules.PASSWORD_PRESENT],
    ),
    ("connect-no-client-id", C, h("10 0a 0004 4d515454 04 02 003c"), [rules.CLIENT_ID_PRESENT]),
    (
        "connect-client-id-ill-formed",
        C,
        h("10 0d 0004 4d515454 04 02 003c 0001 ff"),
        [rules.UTF8_WELL_FORMED, rules.CLIENT_ID_UTF8],
    ),
    (
        "connect-username-ill-formed",
        C,
        h("10 10 0004 4d515454 04 82 003c 0001 61 0001 ff"),
        [rules.UTF8_WELL_FORMED, rules.USERNAME_UTF8],
    ),
    (
        "connect-will-topic-ill-formed",
        C,
        h("10 12 0004 4d515454 04 06 003c 0001 61 0001 ff 0000"),
        [rules.UTF8_WELL_FORMED, rules.WILL_TOPIC_UTF8],
    ),
    (
        "connect-empty-client-id-persistent",
        C,
        h("10 0c 0004 4d515454 04 00 003c 0000"),
        [rules.CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION],
    ),
    ("connect-leftover", C, h("10 0f 0004 4d515454 04 02 003c 0002 6331 ff"), [rules.LEFTOVER_BYTES]),
    # A User Name or Password the flags do not announce, in its place after the announced fields.
    (
        "connect-username-without-flag",
        C,
        h("10 11 0004 4d515454 04 02 003c 0002 6331 0001 75"),
        [rules.USERNAME_ABSENT, rules.LEFTOVER_BYTES],
    ),
    (
        "connect-password-without-flag",
        C,
        h("10 15 0004 4d515454 04 82 003c 0002 6331 0001 75 0002 7077"),
        [rules.PASSWORD_ABSENT, rules.LEFTOVER_BYTES],
    ),
    (
        "connect-credentials-without-flags",
        C,
        h("10 15 0004 4d515454 04 02 003c 0002 6331 0001 75 0002 7077"),
        [rules.USERNAME_ABSENT, rules.PASSWORD_ABSENT, rules.LEFTOVER_BYTES],
    ),
    ("connect-truncated-header", C, h("10 05 0004 4d5154"), [rules.FIELD_OVERRUN]),
    # CONNACK.
    ("connack-reserved-flags", S, h("20 02 02 00"), [rules.CONNACK_RESERVED_FLAGS]),
    ("connack-return-code-6", S, h("20 02 00 06"), [rules.CONNACK_RETURN_CODE]),
    ("connack-session-present-refused", S, h("20 02 01 05"), [rules.CONNACK_SESSION_PRESENT_ON_FAILURE]),
    # SUBSCRIBE / SUBACK / UNSUBSCRIBE.
    ("subscribe-empty-filter", C, h("82 05 00 01 00 00 00"), [rules.TOPIC_NOT_EMPTY]),
    ("subscribe-no-payload", C, h("82 02 0001"), [rules.SUBSCRIBE_NO_PAYLOAD]),
    ("subscribe-qos-3", C, h("82 06 0001 0001 61 03"), [rules.SUBSCRIBE_OPTIONS]),
    ("subscribe-reserved-option-bits", C, h("82 06 0001 0001 61 04"), [rules.SUBSCRIBE_OPTIONS]),
    ("subscribe-missing-qos-byte", C, h("82 05 0001 0001 61"), [rules.FIELD_OVERRUN]),
    ("subscribe-hash-not-last", C, h("82 08 0001 0003 232f61 00"), [rules.MULTI_LEVEL_WILDCARD]),
    ("subscribe-hash-not-alone", C, h("82 07 0001 0002 6123 00"), [rules.MULTI_LEVEL_WILDCARD]),
    ("subscribe-plus-not-alone", C, h("82 08 0001 0003 612b62 00"), [rules.SINGLE_LEVEL_WILDCARD]),
    ("subscribe-filter-nul", C, h("82 07 0001 0002 6100 00"), [rules.UTF8_NO_NULL, rules.TOPIC_NO_NULL]),
    (
        "subscribe-filter-ill-formed",
        C,
        h("82 06 0001 0001 80 00"),
        [rules.UTF8_WELL_FORMED, rules.SUBSCRIBE_FILTER_UTF8],
    ),
    ("suback-reserved-code", S, h("90 03 0001 03"), [rules.SUBACK_RETURN_CODES]),
    ("suback-no-codes", S, h("90 02 0001"), [rules.SUBACK_ONE_CODE_PER_FILTER]),
    ("unsubscribe-empty-filter", C, h("a2 04 00 02 00 00"), [rules.TOPIC_NOT_EMPTY]),
    ("unsubscribe-no-payload", C, h("a2 02 0001"), [rules.UNSUBSCRIBE_NO_PAYLOAD]),
    (
        "unsubscribe-filter-ill-formed",
        C,
        h("a2 05 0001 0001 fe"),
        [rules.UTF8_WELL_FORMED, rules.UNSUBSCRIBE_FILTER_UTF8],
    ),
]

#: Rules that only the encoder can see: they leave no trace in the bytes (checked in test_codec_encode.py), or
#: concern values the wire cannot hold at all.
ENCODE_ONLY = {rules.QOS0_NO_PACKET_ID, rules.STRING_MAX_LENGTH, rules.TOPIC_MAX_LENGTH}
