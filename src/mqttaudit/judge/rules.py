"""The statement ids the judge decides, by name. Every id here is in the spec catalogue (a test holds that)."""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import rules as codec_rules
from mqttaudit.spec import duties, identity, registry
from mqttaudit.spec.ids import R311

# Reactions to a protocol violation: the receiver closes and does not act on it (sections 1.5.3, 2.2.2, 4.8). Which
# statement binds the receiver of each defect is the registry's (mqttaudit.spec.duties); these are the ones the judge
# names itself.
CLOSE_ON_VIOLATION: Final[str] = R311.MQTT_4_8_0_1
#: [MQTT-6.0.0-1] Over WebSocket, MQTT goes in binary data frames; the recipient of a packet in any other data frame
#: (a text frame) closes the connection. The transport that carried the packet marks its frame with this rule.
BINARY_FRAMES: Final[str] = R311.MQTT_6_0_0_1

# Opening a connection (sections 3.1, 3.2).
CONNECT_FIRST: Final[str] = R311.MQTT_3_1_0_1
SECOND_CONNECT: Final[str] = R311.MQTT_3_1_0_2
UNSUPPORTED_PROTOCOL_LEVEL: Final[str] = R311.MQTT_3_1_2_2
EMPTY_CLIENT_ID_WITHOUT_CLEAN_SESSION: Final[str] = R311.MQTT_3_1_3_8
PLAIN_CLIENT_ID_ALLOWED: Final[str] = R311.MQTT_3_1_3_5
MALFORMED_CONNECT: Final[str] = R311.MQTT_3_1_4_1
CONNACK_FOR_VALID_CONNECT: Final[str] = R311.MQTT_3_1_4_4
NOTHING_PROCESSED_AFTER_REFUSAL: Final[str] = R311.MQTT_3_1_4_5
CONNACK_FIRST: Final[str] = R311.MQTT_3_2_0_1
NO_SESSION_PRESENT_WITH_CLEAN_SESSION: Final[str] = R311.MQTT_3_2_2_1
CLOSE_AFTER_REFUSAL: Final[str] = R311.MQTT_3_2_2_5

# Keep Alive (3.1.2.10).
CLIENT_KEEP_ALIVE: Final[str] = R311.MQTT_3_1_2_23
SERVER_DROPS_SILENT_CLIENT: Final[str] = R311.MQTT_3_1_2_24

# DISCONNECT (3.14.4).
CLOSE_AFTER_DISCONNECT: Final[str] = R311.MQTT_3_14_4_1
NOTHING_AFTER_DISCONNECT: Final[str] = R311.MQTT_3_14_4_2

# Packet Identifiers and acknowledgements (2.3.1, 3.3.4, 3.8.4, 3.10.4, 3.12.4, 4.3, 4.6).
CLIENT_PACKET_ID_IN_USE: Final[str] = R311.MQTT_2_3_1_2
SERVER_PACKET_ID_IN_USE: Final[str] = R311.MQTT_2_3_1_4
PUBLISH_ACK_SAME_ID: Final[str] = R311.MQTT_2_3_1_6
ACK_MATCHES_QOS: Final[str] = R311.MQTT_3_3_4_1
QOS1_RECEIVER_PUBACK: Final[str] = R311.MQTT_4_3_2_2
QOS2_SENDER: Final[str] = R311.MQTT_4_3_3_1
QOS2_RECEIVER: Final[str] = R311.MQTT_4_3_3_2
SUBACK_SENT: Final[str] = R311.MQTT_3_8_4_1
SUBACK_SAME_ID: Final[str] = R311.MQTT_3_8_4_2
SUBACK_CODE_PER_FILTER: Final[str] = R311.MQTT_3_8_4_5
SUBACK_CODES_IN_ORDER: Final[str] = R311.MQTT_3_9_3_1
UNSUBACK_SAME_ID: Final[str] = R311.MQTT_3_10_4_4
UNSUBACK_WITHOUT_DELETION: Final[str] = R311.MQTT_3_10_4_5
PINGRESP_SENT: Final[str] = R311.MQTT_3_12_4_1
PUBACK_ORDER: Final[str] = R311.MQTT_4_6_0_2
PUBREC_ORDER: Final[str] = R311.MQTT_4_6_0_3
PUBREL_ORDER: Final[str] = R311.MQTT_4_6_0_4

# Deliveries to the subscriber on this connection (3.3.2, 3.8.4, 4.7.2).
DELIVERY_MATCHES_SUBSCRIPTION: Final[str] = R311.MQTT_3_3_2_3
DELIVERY_QOS: Final[str] = R311.MQTT_3_8_4_6
DOLLAR_TOPICS_NOT_MATCHED_BY_WILDCARDS: Final[str] = R311.MQTT_4_7_2_1
#: [MQTT-4.7.3-4] Matching applies no normalisation (no empty level dropped, no Unicode normalisation, no BOM
#: stripped): a filter that matches a topic only once normalised does not match it.
NO_NORMALISATION: Final[str] = R311.MQTT_4_7_3_4
#: [MQTT-1.5.3-3] EF BB BF in a string is U+FEFF, neither skipped nor stripped: a topic with it keeps it.
BOM_KEPT: Final[str] = R311.MQTT_1_5_3_3

# Across connections: the broker model (sessions, subscriptions, retained messages, Wills).
WILL_PUBLISHED: Final[str] = R311.MQTT_3_1_2_8
WILL_NOT_RETAINED: Final[str] = R311.MQTT_3_1_2_16
WILL_RETAINED: Final[str] = R311.MQTT_3_1_2_17
WILL_DISCARDED_ON_DISCONNECT: Final[str] = R311.MQTT_3_14_4_3
SESSION_RESUMED: Final[str] = R311.MQTT_3_1_2_4
OFFLINE_MESSAGES_KEPT: Final[str] = R311.MQTT_3_1_2_5
CLEAN_SESSION_DISCARDED: Final[str] = R311.MQTT_3_1_2_6
TAKEOVER: Final[str] = R311.MQTT_3_1_4_2
SESSION_PRESENT: Final[str] = R311.MQTT_3_2_2_2
NO_SESSION_PRESENT: Final[str] = R311.MQTT_3_2_2_3
DUP_NOT_PROPAGATED: Final[str] = R311.MQTT_3_3_1_3
#: [MQTT-3.3.1-1] A PUBLISH the server sends again (unacknowledged on the session's previous connection, re-sent on
#: its resumption [MQTT-4.4.0-1]) has DUP 1.
DUP_ON_REDELIVERY: Final[str] = R311.MQTT_3_3_1_1
RETAINED_SENT_ON_SUBSCRIBE: Final[str] = R311.MQTT_3_3_1_6
RETAINED_QOS0_REPLACES: Final[str] = R311.MQTT_3_3_1_7
RETAIN_SET_ON_NEW_SUBSCRIPTION: Final[str] = R311.MQTT_3_3_1_8
RETAIN_CLEARED_ON_ESTABLISHED: Final[str] = R311.MQTT_3_3_1_9
ZERO_BYTE_RETAINED_CLEARS: Final[str] = R311.MQTT_3_3_1_10
ZERO_BYTE_RETAINED_NOT_STORED: Final[str] = R311.MQTT_3_3_1_11
NON_RETAINED_KEEPS_RETAINED: Final[str] = R311.MQTT_3_3_1_12
HIGHEST_QOS_OF_OVERLAPPING: Final[str] = R311.MQTT_3_3_5_1
UNSUBSCRIBED_STOPS_DELIVERY: Final[str] = R311.MQTT_3_10_4_2
MESSAGE_ROUTED: Final[str] = R311.MQTT_4_5_0_1
#: The rules above, which the broker model decides across connections.
MODEL_RULES: Final[frozenset[str]] = frozenset(
    {
        WILL_PUBLISHED,
        WILL_NOT_RETAINED,
        WILL_RETAINED,
        WILL_DISCARDED_ON_DISCONNECT,
        SESSION_RESUMED,
        OFFLINE_MESSAGES_KEPT,
        CLEAN_SESSION_DISCARDED,
        TAKEOVER,
        SESSION_PRESENT,
        NO_SESSION_PRESENT,
        DUP_NOT_PROPAGATED,
        DUP_ON_REDELIVERY,
        RETAINED_SENT_ON_SUBSCRIBE,
        RETAINED_QOS0_REPLACES,
        RETAIN_SET_ON_NEW_SUBSCRIPTION,
        RETAIN_CLEARED_ON_ESTABLISHED,
        ZERO_BYTE_RETAINED_CLEARS,
        ZERO_BYTE_RETAINED_NOT_STORED,
        NON_RETAINED_KEEPS_RETAINED,
        HIGHEST_QOS_OF_OVERLAPPING,
        UNSUBSCRIBED_STOPS_DELIVERY,
        MESSAGE_ROUTED,
    }
)

#: The rules the judge decides itself, as reactions and obligations.
OWN_RULES: Final[frozenset[str]] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)

#: Rules a transport attaches to the frames it carried (not the codec: the bytes are a sound packet): the receiver
#: closes on them as on a codec violation.
TRANSPORT_RULES: Final[frozenset[str]] = frozenset({BINARY_FRAMES})

#: Codec rules no received bytes can break: they bind the encoder only (a two-byte length cannot exceed 65,535;
#: a QoS 0 PUBLISH has no Packet Identifier field to set).
_ENCODER_ONLY: Final[frozenset[str]] = frozenset(
    {codec_rules.STRING_MAX_LENGTH, codec_rules.TOPIC_MAX_LENGTH, codec_rules.QOS0_NO_PACKET_ID}
)

#: Codec rules of CONNECT the server answers with a CONNACK return code, judged under the statements that say
#: so (MQTT-3.1.2-1, MQTT-3.1.2-2, MQTT-3.1.3-8), not by closing.
_ANSWERED_BY_CONNACK: Final[frozenset[str]] = frozenset(
    {codec_rules.PROTOCOL_NAME, codec_rules.PROTOCOL_LEVEL, codec_rules.CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION}
)
#: Those a server answers with a CONNACK refusal (a Protocol Name it does not know it may also close on).
ANSWERED_BY_CONNACK: Final[frozenset[str]] = _ANSWERED_BY_CONNACK - {codec_rules.PROTOCOL_NAME}

#: The MUST-level codec rules a receiver upholds by closing on a packet that breaks them (a truncation is left
#: out: bytes cut off by a close are nothing anybody could answer).
ENFORCED_CODEC_RULES: Final[frozenset[str]] = frozenset(
    rule
    for rule in codec_rules.CHECKED - _ENCODER_ONLY - _ANSWERED_BY_CONNACK
    if not codec_rules.is_advisory(rule) and rule != codec_rules.TRUNCATED
)

#: The statements that bind a receiver to detect a defect and close on it (mqttaudit.spec.duties), by the keys the
#: judge names them with: the judge decides each by the close, or the answer, of the packet's receiver.
RECEIVER_DUTIES: Final[frozenset[str]] = frozenset(
    key for row in duties.load_duties(identity.V3_1_1).bindings if (key := row.binding_key) is not None
)
#: The same in MQTT 5.0, by their 5.0 ids.
RECEIVER_DUTIES_5_0: Final[frozenset[str]] = frozenset(
    row.binding for row in duties.load_duties(identity.V5).bindings if row.binding is not None
)

#: Every rule id the judge (conversation and scenario) can decide.
CHECKED_RULES: Final[frozenset[str]] = OWN_RULES | ENFORCED_CODEC_RULES | RECEIVER_DUTIES

#: 5.0-only codec rules whose definition names no error for the receiver to close on: an undefined Payload Format
#: Indicator value is the sender's fault alone.
_NO_CLOSE_5_0: Final[frozenset[str]] = frozenset({codec_rules.PAYLOAD_FORMAT_VALUE})
#: A 5.0 CONNECT (Protocol Version 5) whose Protocol Name is not "MQTT" is refused by closing, a CONNACK 0x84 allowed
#: first [MQTT-3.1.2-1]: 5.0 leaves no other specification to follow at that version.
_CLOSED_ON_5_0: Final[frozenset[str]] = frozenset({codec_rules.PROTOCOL_NAME})
#: Codec rules advisory in 3.1.1 that 5.0 makes a MUST: a Variable Byte Integer in more bytes than its value needs
#: (a Remaining Length, Property Length or Subscription Identifier) [MQTT-1.5.5-1], which 5.0 calls malformed.
_MUST_IN_5_0: Final[frozenset[str]] = frozenset({codec_rules.REMAINING_LENGTH_SHORTEST})
#: The codec rules (keys) a receiver upholds by closing on a 5.0 connection: the shared ones and those only 5.0
#: states or makes a MUST (a Malformed Packet or Protocol Error, section 4.13).
ENFORCED_CODEC_RULES_5_0: Final[frozenset[str]] = (
    ENFORCED_CODEC_RULES
    | _CLOSED_ON_5_0
    | _MUST_IN_5_0
    | frozenset(rule for rule in codec_rules.ONLY_5_0 - _NO_CLOSE_5_0 if not codec_rules.is_advisory(rule))
)


#: The codec rules (keys) a 5.0 sender is held to in its own bytes: every MUST-level one.
SENDER_CODEC_RULES_5_0: Final[frozenset[str]] = ENFORCED_CODEC_RULES_5_0 | _NO_CLOSE_5_0


def enforced_codec_rules(version: str) -> frozenset[str]:
    """The codec rules (keys) whose breach the receiver must close on, in ``version``."""
    return ENFORCED_CODEC_RULES_5_0 if version == "5.0" else ENFORCED_CODEC_RULES


# What the judge decides, for ``mqttaudit rules``: its own rules and the codec rules it upholds by a close.
registry.refer_names("judge", __name__, dict(globals()))
registry.refer("judge", __name__, "ENFORCED_CODEC_RULES", sorted(ENFORCED_CODEC_RULES))
registry.refer("judge", __name__, "ENFORCED_CODEC_RULES_5_0", sorted(ENFORCED_CODEC_RULES_5_0))
registry.refer("judge", __name__, "RECEIVER_DUTIES", sorted(RECEIVER_DUTIES))
registry.refer("judge", __name__, "RECEIVER_DUTIES_5_0", sorted(RECEIVER_DUTIES_5_0))
