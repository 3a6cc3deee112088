"""The rule ids the codec checks, by name. Every id here is in the spec catalogue (a test holds that)."""

from __future__ import annotations

from typing import Final

from mqttaudit.spec import identity

# Strings (section 1.5.3).
UTF8_WELL_FORMED: Final = "MQTT-1.5.3-1"
UTF8_NO_NULL: Final = "MQTT-1.5.3-2"
UTF8_CONTROL_CHARACTERS: Final = "MQTT-1.5.3-control-characters"
STRING_MAX_LENGTH: Final = "MQTT-1.5.3-max-length"

# Fixed header (section 2.2).
RESERVED_PACKET_TYPE: Final = "MQTT-2.2.1-reserved-type"
PACKET_DIRECTION: Final = "MQTT-2.2.1-direction"
RESERVED_FLAGS: Final = "MQTT-2.2.2-1"
REMAINING_LENGTH_FOUR_BYTES: Final = "MQTT-2.2.3-four-bytes"
REMAINING_LENGTH_SHORTEST: Final = "MQTT-2.2.3-shortest-encoding"
TRUNCATED: Final = "MQTT-2.2.3-truncated"
FIELD_OVERRUN: Final = "MQTT-2.2.3-overrun"
LEFTOVER_BYTES: Final = "MQTT-2.2.3-leftover"
SIZE_LIMIT: Final = "MQTT-2.2.3-size-limit"

# Packet identifiers (section 2.3.1).
PACKET_ID_NONZERO: Final = "MQTT-2.3.1-1"
QOS0_NO_PACKET_ID: Final = "MQTT-2.3.1-5"
PUBLISH_ACK_SAME_ID: Final = "MQTT-2.3.1-6"
SUBSCRIBE_ACK_SAME_ID: Final = "MQTT-2.3.1-7"
PUBCOMP_SAME_ID: Final = "MQTT-4.3.3-2"

# CONNECT (section 3.1).
PROTOCOL_NAME: Final = "MQTT-3.1.2-protocol-name"
PROTOCOL_LEVEL: Final = "MQTT-3.1.2-protocol-level"
CONNECT_RESERVED_FLAG: Final = "MQTT-3.1.2-3"
WILL_FIELDS_PRESENT: Final = "MQTT-3.1.2-9"
WILL_FLAG_ZERO_FIELDS: Final = "MQTT-3.1.2-11"
WILL_QOS_WITHOUT_WILL: Final = "MQTT-3.1.2-13"
WILL_QOS_3: Final = "MQTT-3.1.2-14"
WILL_RETAIN_WITHOUT_WILL: Final = "MQTT-3.1.2-15"
USERNAME_ABSENT: Final = "MQTT-3.1.2-18"
USERNAME_PRESENT: Final = "MQTT-3.1.2-19"
PASSWORD_ABSENT: Final = "MQTT-3.1.2-20"
PASSWORD_PRESENT: Final = "MQTT-3.1.2-21"
PASSWORD_WITHOUT_USERNAME: Final = "MQTT-3.1.2-22"
CLIENT_ID_PRESENT: Final = "MQTT-3.1.3-3"
CLIENT_ID_UTF8: Final = "MQTT-3.1.3-4"
CLIENT_ID_EMPTY_NEEDS_CLEAN_SESSION: Final = "MQTT-3.1.3-7"
WILL_TOPIC_UTF8: Final = "MQTT-3.1.3-10"
USERNAME_UTF8: Final = "MQTT-3.1.3-11"

# CONNACK (section 3.2).
CONNACK_LENGTH: Final = "MQTT-3.2.1-remaining-length"
CONNACK_RESERVED_FLAGS: Final = "MQTT-3.2.2-reserved-flags"
CONNACK_SESSION_PRESENT_ON_FAILURE: Final = "MQTT-3.2.2-4"
CONNACK_RETURN_CODE: Final = "MQTT-3.2.2-return-code"

# PUBLISH (section 3.3) and the QoS 0 flow (4.3.1).
DUP_ON_QOS0: Final = "MQTT-3.3.1-2"
QOS0_SENDER_FLAGS: Final = "MQTT-4.3.1-1"
QOS_3: Final = "MQTT-3.3.1-4"
TOPIC_NAME_UTF8: Final = "MQTT-3.3.2-1"
TOPIC_NAME_NO_WILDCARDS: Final = "MQTT-3.3.2-2"

# Fixed-size acknowledgements.
PUBACK_LENGTH: Final = "MQTT-3.4.1-remaining-length"
PUBREC_LENGTH: Final = "MQTT-3.5.1-remaining-length"
PUBREL_LENGTH: Final = "MQTT-3.6.1-remaining-length"
PUBREL_FLAGS: Final = "MQTT-3.6.1-1"
PUBCOMP_LENGTH: Final = "MQTT-3.7.1-remaining-length"

# SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK.
SUBSCRIBE_FLAGS: Final = "MQTT-3.8.1-1"
SUBSCRIBE_FILTER_UTF8: Final = "MQTT-3.8.3-1"
SUBSCRIBE_NO_PAYLOAD: Final = "MQTT-3.8.3-3"
SUBSCRIBE_OPTIONS: Final = "MQTT-3.8.3-4"
SUBACK_ONE_CODE_PER_FILTER: Final = "MQTT-3.8.4-5"
SUBACK_RETURN_CODES: Final = "MQTT-3.9.3-2"
UNSUBSCRIBE_FLAGS: Final = "MQTT-3.10.1-1"
UNSUBSCRIBE_FILTER_UTF8: Final = "MQTT-3.10.3-1"
UNSUBSCRIBE_NO_PAYLOAD: Final = "MQTT-3.10.3-2"
UNSUBACK_LENGTH: Final = "MQTT-3.11.1-remaining-length"
PINGREQ_LENGTH: Final = "MQTT-3.12.1-remaining-length"
PINGRESP_LENGTH: Final = "MQTT-3.13.1-remaining-length"
DISCONNECT_LENGTH: Final = "MQTT-3.14.1-remaining-length"
DISCONNECT_FLAGS: Final = "MQTT-3.14.1-1"

# Topics (section 4.7).
TOPIC_NAME_WILDCARDS: Final = "MQTT-4.7.1-1"
MULTI_LEVEL_WILDCARD: Final = "MQTT-4.7.1-2"
SINGLE_LEVEL_WILDCARD: Final = "MQTT-4.7.1-3"
TOPIC_NOT_EMPTY: Final = "MQTT-4.7.3-1"
TOPIC_NO_NULL: Final = "MQTT-4.7.3-2"
TOPIC_MAX_LENGTH: Final = "MQTT-4.7.3-3"

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

# Rules only MQTT 5.0 states, by their 5.0 ids (a key ending "@5.0" names a 5.0 id that is also a 3.1.1 key).
VBI_FOUR_BYTES: Final = "MQTT-1.5.5-four-bytes"
STRING_PAIR_UTF8: Final = "MQTT-1.5.7-1"
SERVER_PACKET_ID_NONZERO: Final = "MQTT-2.2.1-4"  # 5.0 states the non-zero id for the Server apart
PROPERTY_LENGTH_ABSENT: Final = "MQTT-2.2.2-1@5.0"
PROPERTY_IDENTIFIER: Final = "MQTT-2.2.2-property-identifier"
PROPERTY_PACKET: Final = "MQTT-2.2.2-property-packet"
PROPERTY_DUPLICATE: Final = "MQTT-2.2.2-property-duplicate"
PROPERTY_VALUE: Final = "MQTT-2.2.2-property-value"
#: The Payload Format Indicator is 0 or 1; unlike the other one-byte flags, its definition names no error for other
#: values, so a receiver owes no close for it.
PAYLOAD_FORMAT_VALUE: Final = "MQTT-3.3.2-payload-format"
PROPERTY_LENGTH: Final = "MQTT-2.2.2-property-length"
AUTHENTICATION_DATA_WITHOUT_METHOD: Final = "MQTT-3.1.2-authentication-data"
TOPIC_ALIAS_ZERO: Final = "MQTT-3.3.2-8"
RESPONSE_TOPIC_UTF8: Final = "MQTT-3.3.2-13"
RESPONSE_TOPIC_NO_WILDCARDS: Final = "MQTT-3.3.2-14"
CONTENT_TYPE_UTF8: Final = "MQTT-3.3.2-19"
SUBSCRIPTION_ID_FROM_CLIENT: Final = "MQTT-3.3.4-6"
PUBACK_REASON_CODE: Final = "MQTT-3.4.2-1"
PUBREC_REASON_CODE: Final = "MQTT-3.5.2-1"
PUBREL_REASON_CODE: Final = "MQTT-3.6.2-1"
PUBCOMP_REASON_CODE: Final = "MQTT-3.7.2-1"
NO_LOCAL_SHARED: Final = "MQTT-3.8.3-4@5.0"
SUBSCRIBE_OPTIONS_QOS: Final = "MQTT-3.8.3-qos"
RETAIN_HANDLING: Final = "MQTT-3.8.3-retain-handling"
UNSUBACK_REASON_CODES: Final = "MQTT-3.11.3-2"
DISCONNECT_REASON_CODE: Final = "MQTT-3.14.2-1"
SESSION_EXPIRY_FROM_SERVER: Final = "MQTT-3.14.2-2"
AUTH_FLAGS: Final = "MQTT-3.15.1-1"
AUTH_REASON_CODE: Final = "MQTT-3.15.2-1"
SHARE_NAME_PRESENT: Final = "MQTT-4.8.2-1"
SHARE_NAME_FORM: Final = "MQTT-4.8.2-2"

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
ADVISORY_5_0: Final = frozenset({"MQTT-1.5.4-control-characters", "MQTT-2.1.4-size-limit"})
_ADVISORY_ANY: Final = ADVISORY | ADVISORY_5_0


def is_advisory(rule: str) -> bool:
    """True for SHOULD/MAY-level findings (warnings) of either version, False for MUST-level violations."""
    return rule in _ADVISORY_ANY
