"""The rule ids the codec checks, by name. Every id here is in the spec catalogue (a test holds that)."""

from __future__ import annotations

from typing import Final

from mqttaudit.spec import identity, registry
from mqttaudit.spec.ids import R5, R311

# Strings (section 1.5.3).
UTF8_WELL_FORMED: Final[str] = R311.MQTT_1_5_3_1
UTF8_NO_NULL: Final[str] = R311.MQTT_1_5_3_2
UTF8_CONTROL_CHARACTERS: Final[str] = R311.MQTT_1_5_3_CONTROL_CHARACTERS
STRING_MAX_LENGTH: Final[str] = R311.MQTT_1_5_3_MAX_LENGTH

# Fixed header (section 2.2).
RESERVED_PACKET_TYPE: Final[str] = R311.MQTT_2_2_1_RESERVED_TYPE
PACKET_DIRECTION: Final[str] = R311.MQTT_2_2_1_DIRECTION
RESERVED_FLAGS: Final[str] = R311.MQTT_2_2_2_1
REMAINING_LENGTH_FOUR_BYTES: Final[str] = R311.MQTT_2_2_3_FOUR_BYTES
REMAINING_LENGTH_SHORTEST: Final[str] = R311.MQTT_2_2_3_SHORTEST_ENCODING
TRUNCATED: Final[str] = R311.MQTT_2_2_3_TRUNCATED
FIELD_OVERRUN: Final[str] = R311.MQTT_2_2_3_OVERRUN
LEFTOVER_BYTES: Final[str] = R311.MQTT_2_2_3_LEFTOVER
SIZE_LIMIT: Final[str] = R311.MQTT_2_2_3_SIZE_LIMIT

# Packet identifiers (section 2.3.1).
PACKET_ID_NONZERO: Final[str] = R311.MQTT_2_3_1_1
QOS0_NO_PACKET_ID: Final[str] = R311.MQTT_2_3_1_5
PUBLISH_ACK_SAME_ID: Final[str] = R311.MQTT_2_3_1_6
SUBSCRIBE_ACK_SAME_ID: Final[str] = R311.MQTT_2_3_1_7
PUBCOMP_SAME_ID: Final[str] = R311.MQTT_4_3_3_2

# CONNECT (section 3.1).
PROTOCOL_NAME: Final[str] = R311.MQTT_3_1_2_PROTOCOL_NAME
PROTOCOL_LEVEL: Final[str] = R311.MQTT_3_1_2_PROTOCOL_LEVEL
CONNECT_RESERVED_FLAG: Final[str] = R311.MQTT_3_1_2_3
WILL_FIELDS_PRESENT: Final[str] = R311.MQTT_3_1_2_9
WILL_FLAG_ZERO_FIELDS: Final[str] = R311.MQTT_3_1_2_11
WILL_QOS_WITHOUT_WILL: Final[str] = R311.MQTT_3_1_2_13
WILL_QOS_3: Final[str] = R311.MQTT_3_1_2_14
WILL_RETAIN_WITHOUT_WILL: Final[str] = R311.MQTT_3_1_2_15
USERNAME_ABSENT: Final[str] = R311.MQTT_3_1_2_18
USERNAME_PRESENT: Final[str] = R311.MQTT_3_1_2_19
PASSWORD_ABSENT: Final[str] = R311.MQTT_3_1_2_20
PASSWORD_PRESENT: Final[str] = R311.MQTT_3_1_2_21
PASSWORD_WITHOUT_USERNAME: Final[str] = R311.MQTT_3_1_2_22
CLIENT_ID_PRESENT: Final[str] = R311.MQTT_3_1_3_3
CLIENT_ID_UTF8: Final[str] = R311.MQTT_3_1_3_4
CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION: Final[str] = R311.MQTT_3_1_3_7
WILL_TOPIC_UTF8: Final[str] = R311.MQTT_3_1_3_10
USERNAME_UTF8: Final[str] = R311.MQTT_3_1_3_11

# CONNACK (section 3.2).
CONNACK_LENGTH: Final[str] = R311.MQTT_3_2_1_REMAINING_LENGTH
CONNACK_RESERVED_FLAGS: Final[str] = R311.MQTT_3_2_2_RESERVED_FLAGS
CONNACK_SESSION_PRESENT_ON_FAILURE: Final[str] = R311.MQTT_3_2_2_4
CONNACK_RETURN_CODE: Final[str] = R311.MQTT_3_2_2_RETURN_CODE

# PUBLISH (section 3.3) and the QoS 0 flow (4.3.1).
DUP_ON_QOS0: Final[str] = R311.MQTT_3_3_1_2
QOS0_SENDER_FLAGS: Final[str] = R311.MQTT_4_3_1_1
QOS_3: Final[str] = R311.MQTT_3_3_1_4
TOPIC_NAME_UTF8: Final[str] = R311.MQTT_3_3_2_1
TOPIC_NAME_NO_WILDCARDS: Final[str] = R311.MQTT_3_3_2_2

# Fixed-size acknowledgements.
PUBACK_LENGTH: Final[str] = R311.MQTT_3_4_1_REMAINING_LENGTH
PUBREC_LENGTH: Final[str] = R311.MQTT_3_5_1_REMAINING_LENGTH
PUBREL_LENGTH: Final[str] = R311.MQTT_3_6_1_REMAINING_LENGTH
PUBREL_FLAGS: Final[str] = R311.MQTT_3_6_1_1
PUBCOMP_LENGTH: Final[str] = R311.MQTT_3_7_1_REMAINING_LENGTH

# SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK.
SUBSCRIBE_FLAGS: Final[str] = R311.MQTT_3_8_1_1
SUBSCRIBE_FILTER_UTF8: Final[str] = R311.MQTT_3_8_3_1
SUBSCRIBE_NO_PAYLOAD: Final[str] = R311.MQTT_3_8_3_3
SUBSCRIBE_OPTIONS: Final[str] = R311.MQTT_3_8_3_4
SUBACK_ONE_CODE_PER_FILTER: Final[str] = R311.MQTT_3_8_4_5
SUBACK_RETURN_CODES: Final[str] = R311.MQTT_3_9_3_2
UNSUBSCRIBE_FLAGS: Final[str] = R311.MQTT_3_10_1_1
UNSUBSCRIBE_FILTER_UTF8: Final[str] = R311.MQTT_3_10_3_1
UNSUBSCRIBE_NO_PAYLOAD: Final[str] = R311.MQTT_3_10_3_2
UNSUBACK_LENGTH: Final[str] = R311.MQTT_3_11_1_REMAINING_LENGTH
PINGREQ_LENGTH: Final[str] = R311.MQTT_3_12_1_REMAINING_LENGTH
PINGRESP_LENGTH: Final[str] = R311.MQTT_3_13_1_REMAINING_LENGTH
DISCONNECT_LENGTH: Final[str] = R311.MQTT_3_14_1_REMAINING_LENGTH
DISCONNECT_FLAGS: Final[str] = R311.MQTT_3_14_1_1

# Topics (section 4.7).
TOPIC_NAME_WILDCARDS: Final[str] = R311.MQTT_4_7_1_1
MULTI_LEVEL_WILDCARD: Final[str] = R311.MQTT_4_7_1_2
SINGLE_LEVEL_WILDCARD: Final[str] = R311.MQTT_4_7_1_3
TOPIC_NOT_EMPTY: Final[str] = R311.MQTT_4_7_3_1
TOPIC_NO_NULL: Final[str] = R311.MQTT_4_7_3_2
TOPIC_MAX_LENGTH: Final[str] = R311.MQTT_4_7_3_3

#: Rules below MUST level: reported, but they never make an encoder refuse a packet or a decode "fail".
ADVISORY: Final = frozenset(
    {
        UTF8_CONTROL_CHARACTERS,
        REMAINING_LENGTH_SHORTEST,
        SIZE_LIMIT,
    }
)

#: Every rule id the codec can report in MQTT 3.1.1 bytes (the keys of the rules both versions state).
CHECKED: Final[frozenset[str]] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)

# Rules only MQTT 5.0 states, by their 5.0 ids.
VBI_FOUR_BYTES: Final[str] = R5.MQTT_1_5_5_FOUR_BYTES
STRING_PAIR_UTF8: Final[str] = R5.MQTT_1_5_7_1
SERVER_PACKET_ID_NONZERO: Final[str] = R5.MQTT_2_2_1_4  # 5.0 states the non-zero id for the Server apart
PROPERTY_LENGTH_ABSENT: Final[str] = R5.MQTT_2_2_2_1.key
PROPERTY_IDENTIFIER: Final[str] = R5.MQTT_2_2_2_PROPERTY_IDENTIFIER
PROPERTY_PACKET: Final[str] = R5.MQTT_2_2_2_PROPERTY_PACKET
PROPERTY_DUPLICATE: Final[str] = R5.MQTT_2_2_2_PROPERTY_DUPLICATE
PROPERTY_VALUE: Final[str] = R5.MQTT_2_2_2_PROPERTY_VALUE
#: The Payload Format Indicator is 0 or 1; unlike the other one-byte flags, its definition names no error for other
#: values, so a receiver owes no close for it.
PAYLOAD_FORMAT_VALUE: Final[str] = R5.MQTT_3_3_2_PAYLOAD_FORMAT
PROPERTY_LENGTH: Final[str] = R5.MQTT_2_2_2_PROPERTY_LENGTH
AUTHENTICATION_DATA_WITHOUT_METHOD: Final[str] = R5.MQTT_3_1_2_AUTHENTICATION_DATA
TOPIC_ALIAS_ZERO: Final[str] = R5.MQTT_3_3_2_8
RESPONSE_TOPIC_UTF8: Final[str] = R5.MQTT_3_3_2_13
RESPONSE_TOPIC_NO_WILDCARDS: Final[str] = R5.MQTT_3_3_2_14
CONTENT_TYPE_UTF8: Final[str] = R5.MQTT_3_3_2_19
SUBSCRIPTION_ID_FROM_CLIENT: Final[str] = R5.MQTT_3_3_4_6
PUBACK_REASON_CODE: Final[str] = R5.MQTT_3_4_2_1
PUBREC_REASON_CODE: Final[str] = R5.MQTT_3_5_2_1
PUBREL_REASON_CODE: Final[str] = R5.MQTT_3_6_2_1
PUBCOMP_REASON_CODE: Final[str] = R5.MQTT_3_7_2_1
NO_LOCAL_SHARED: Final[str] = R5.MQTT_3_8_3_4.key
SUBSCRIBE_OPTIONS_QOS: Final[str] = R5.MQTT_3_8_3_QOS
RETAIN_HANDLING: Final[str] = R5.MQTT_3_8_3_RETAIN_HANDLING
UNSUBACK_REASON_CODES: Final[str] = R5.MQTT_3_11_3_2
DISCONNECT_REASON_CODE: Final[str] = R5.MQTT_3_14_2_1
SESSION_EXPIRY_FROM_SERVER: Final[str] = R5.MQTT_3_14_2_2
AUTH_FLAGS: Final[str] = R5.MQTT_3_15_1_1
AUTH_REASON_CODE: Final[str] = R5.MQTT_3_15_2_1
SHARE_NAME_PRESENT: Final[str] = R5.MQTT_4_8_2_1
SHARE_NAME_FORM: Final[str] = R5.MQTT_4_8_2_2

#: The keys of the rules only MQTT 5.0 states.
ONLY_5_0: Final[frozenset[str]] = frozenset(
    value
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, str) and value.startswith("MQTT-") and value not in CHECKED
)

#: Every rule id the codec can report in MQTT 5.0 bytes.
CHECKED_5_0: Final[frozenset[str]] = frozenset(
    rule for rule in (identity.statement_id(key, identity.V5) for key in CHECKED | ONLY_5_0) if rule is not None
)


#: The same in MQTT 5.0, where the shortest Variable Byte Integer is a MUST [MQTT-1.5.5-1].
ADVISORY_5_0: Final = frozenset({R5.MQTT_1_5_4_CONTROL_CHARACTERS, R5.MQTT_2_1_4_SIZE_LIMIT})
_ADVISORY_ANY: Final = ADVISORY | ADVISORY_5_0


def is_advisory(rule: str) -> bool:
    """True for SHOULD/MAY-level findings (warnings) of either version, False for MUST-level violations."""
    return rule in _ADVISORY_ANY


# What the codec checks, for ``mqttaudit rules``.
registry.refer_names("codec", __name__, dict(globals()), keep=CHECKED | ONLY_5_0)
