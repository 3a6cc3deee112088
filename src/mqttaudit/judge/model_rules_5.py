"""The statement ids (keys) of what MQTT 5.0 adds to routing across connections: subscription options, shared
subscriptions, Message Expiry, the properties a forwarded message keeps, and the Will Delay Interval; and of what
it states apart about one connection's QoS flows, send quota and omitted diagnostics.

Rules 3.1.1 states too are judged under their 3.1.1 keys (:mod:`.rules`), which 5.0 names by its own ids; the keys
here are 5.0 ids (``R5``), whatever 3.1.1 rule shares their text (see :mod:`mqttaudit.spec.identity`).
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec import PacketType
from mqttaudit.spec import registry
from mqttaudit.spec.ids import R5, R311

from . import rules
from .deliveries_5 import (
    COPY_PER_SUBSCRIPTION,
    IDENTIFIERS_SENT,
    NO_LOCAL,
    ONE_COPY_ALL_IDENTIFIERS,
    RETAIN_AS_PUBLISHED,
    RETAIN_CLEARED,
    SUBACK_CODE_IS_GRANT,
)

__all__ = [
    "COPY_PER_SUBSCRIPTION",
    "IDENTIFIERS_SENT",
    "NO_LOCAL",
    "ONE_COPY_ALL_IDENTIFIERS",
    "RETAIN_AS_PUBLISHED",
    "RETAIN_CLEARED",
    "SUBACK_CODE_IS_GRANT",
]

#: [MQTT-3.3.1-9] Retain Handling 0: the retained messages are sent whenever the subscription is made.
RETAINED_ON_EVERY_SUBSCRIBE: Final = rules.RETAINED_SENT_ON_SUBSCRIBE
#: [MQTT-3.3.1-10] Retain Handling 1: sent only if the subscription did not exist already.
RETAINED_IF_NEW: Final[str] = R5.MQTT_3_3_1_10.key
#: [MQTT-3.3.1-11] Retain Handling 2: never sent when the subscription is made.
NO_RETAINED: Final[str] = R5.MQTT_3_3_1_11.key
#: [MQTT-3.8.4-3] A SUBSCRIBE of a filter the session holds replaces that subscription: one copy, not two.
SAME_FILTER_REPLACES: Final[str] = R311.MQTT_3_8_4_3
#: [MQTT-3.8.4-4] With Retain Handling 0 the replacement re-sends the matching retained messages.
REPLACED_RESENDS_RETAINED: Final[str] = R5.MQTT_3_8_4_4.key
#: [MQTT-3.10.4-1] An UNSUBSCRIBE deletes only a subscription whose filter is the same, character by character.
EXACT_MATCH_DELETES: Final[str] = R311.MQTT_3_10_4_1
#: [MQTT-3.8.4-5] A SUBSCRIBE of several filters is handled as that many SUBSCRIBEs, answered by one SUBACK (its
#: 3.1.1 key).
SUBSCRIBE_AS_SEQUENCE: Final[str] = R311.MQTT_3_8_4_4
#: [MQTT-3.10.4-3] In-flight QoS 1 and 2 deliveries of a deleted subscription are completed.
UNSUBSCRIBED_IN_FLIGHT_COMPLETED: Final[str] = R311.MQTT_3_10_4_3
#: [MQTT-4.6.0-5] Messages of one topic and QoS reach each subscriber in the order their publisher sent them;
#: [MQTT-4.6.0-6] on a non-shared subscription every topic is such an Ordered Topic. Keyed by their 3.1.1 ids,
#: which number the two the other way round.
ORDERED_TOPIC: Final[str] = R311.MQTT_4_6_0_6
NON_SHARED_ORDERED: Final[str] = R311.MQTT_4_6_0_5
#: [MQTT-4.8.2-3] A shared subscription's message goes at most at the granted QoS of the chosen member.
SHARED_GRANTED_QOS: Final[str] = R5.MQTT_4_8_2_3
#: [MQTT-3.3.2-5] A copy whose Message Expiry Interval passed before its onward delivery started is deleted.
EXPIRED_NOT_DELIVERED: Final[str] = R5.MQTT_3_3_2_5
#: [MQTT-3.3.2-6] A forwarded copy carries the interval received minus the time the message waited.
EXPIRY_REMAINING: Final[str] = R5.MQTT_3_3_2_6
#: Properties forwarded unaltered, by property identifier.
PAYLOAD_FORMAT_FORWARDED: Final[str] = R5.MQTT_3_3_2_4
RESPONSE_TOPIC_FORWARDED: Final[str] = R5.MQTT_3_3_2_15
CORRELATION_DATA_FORWARDED: Final[str] = R5.MQTT_3_3_2_16
USER_PROPERTIES_FORWARDED: Final[str] = R5.MQTT_3_3_2_17
USER_PROPERTIES_IN_ORDER: Final[str] = R5.MQTT_3_3_2_18
CONTENT_TYPE_FORWARDED: Final[str] = R5.MQTT_3_3_2_20
#: [MQTT-3.1.3-9] A connection to the session before the Will Delay Interval passes suppresses the Will.
WILL_DELAY: Final[str] = R5.MQTT_3_1_3_9.key
#: [MQTT-3.1.2-7] A Will is stored with the session: it is published when the connection ends (3.1.1's
#: MQTT-3.1.2-7 says retained messages are no session state).
WILL_STORED: Final[str] = R5.MQTT_3_1_2_7.key
#: [MQTT-3.1.2-10] The stored Will is dropped once published or after DISCONNECT 0x00: never published (again)
#: later. 3.1.1 states the same rule under the same id.
WILL_DROPPED: Final[str] = R311.MQTT_3_1_2_10
#: [MQTT-3.1.3-10] The Will's User Properties are published in the order they were sent (3.1.1's MQTT-3.1.3-10 is
#: the Will Topic's UTF-8).
WILL_USER_PROPERTIES_IN_ORDER: Final[str] = R5.MQTT_3_1_3_10.key

# Sessions (3.1.2.4, 3.1.3.1, 3.1.4, 4.1) ---------------------------------------------------------------------------

#: [MQTT-3.1.2-6] Clean Start 0 with no session held for the ClientId: a new session (Session Present 0, nothing
#: of an earlier one). 3.1.1's MQTT-3.1.2-6 is CleanSession 1.
NEW_SESSION: Final[str] = R5.MQTT_3_1_2_6.key
#: [MQTT-3.1.4-4] The server carries out the Clean Start processing of 3.1.2.4 (3.1.1's MQTT-3.1.4-4 is the
#: CONNACK 0x00 after a valid CONNECT).
CLEAN_START_PROCESSED: Final[str] = R5.MQTT_3_1_4_4.key
#: [MQTT-3.1.3-2] Session state is identified by the ClientId: another ClientId never resumes it.
SESSION_BY_CLIENT_ID: Final[str] = R311.MQTT_3_1_3_2
#: [MQTT-4.1.0-1] No Session State is discarded while the connection is open (its Session Expiry Interval runs
#: from the close). 3.1.1's MQTT-4.1.0-1 keeps it for the life of the session.
KEPT_WHILE_OPEN: Final[str] = R5.MQTT_4_1_0_1.key
#: [MQTT-4.1.0-2] Once the connection closed and the Session Expiry Interval passed, the Session State is
#: discarded: Session Present 0, nothing queued for it delivered (3.1.1's MQTT-4.1.0-2 is another rule).
DISCARDED_AFTER_EXPIRY: Final[str] = R5.MQTT_4_1_0_2.key

# Shared subscriptions (4.8.2) ----------------------------------------------------------------------------------------

#: [MQTT-4.8.2-4] A QoS 2 delivery to a member interrupted by a broken connection is completed to that member when
#: it reconnects (and not sent to another member).
SHARED_QOS2_COMPLETED: Final[str] = R5.MQTT_4_8_2_4
#: [MQTT-4.8.2-5] If that member's session ends before it reconnects, no other member gets the message.
SHARED_NOT_REASSIGNED: Final[str] = R5.MQTT_4_8_2_5
#: [MQTT-4.8.2-6] A message the chosen member answers with PUBACK or PUBREC 0x80 or above is discarded, not sent
#: to another member.
SHARED_REFUSED_DISCARDED: Final[str] = R5.MQTT_4_8_2_6

# One connection's QoS flows (4.3, 4.4), each side as sender and receiver --------------------------------------

#: [MQTT-4.3.2-1] A new QoS 1 message gets a Packet Identifier not in use; [MQTT-4.3.3-1] a new QoS 2 one too.
QOS1_NEW_ID: Final[str] = R311.MQTT_4_3_2_1
QOS2_NEW_ID: Final[str] = R5.MQTT_4_3_3_1.key
#: [MQTT-4.3.2-2] / [MQTT-4.3.3-2] A new message's first PUBLISH has DUP 0.
QOS1_FIRST_DUP_0: Final[str] = R5.MQTT_4_3_2_2.key
QOS2_FIRST_DUP_0: Final[str] = R5.MQTT_4_3_3_2.key
#: [MQTT-4.3.2-3] A QoS 1 PUBLISH stays unacknowledged (its identifier in use) until its PUBACK.
QOS1_HELD_UNTIL_PUBACK: Final[str] = R5.MQTT_4_3_2_3
#: [MQTT-4.3.2-5] After its PUBACK, a PUBLISH with the same identifier is a new message, whatever its DUP flag.
QOS1_REUSED_ID_IS_NEW: Final[str] = R5.MQTT_4_3_2_5
#: [MQTT-4.3.3-3] A QoS 2 PUBLISH stays unacknowledged until its PUBREC.
QOS2_HELD_UNTIL_PUBREC: Final[str] = R5.MQTT_4_3_3_3
#: [MQTT-4.3.3-5] A PUBREL stays unacknowledged until its PUBCOMP.
QOS2_PUBREL_HELD_UNTIL_PUBCOMP: Final[str] = R5.MQTT_4_3_3_5
#: [MQTT-4.3.3-6] No re-send of the PUBLISH once its PUBREL was sent.
QOS2_NO_PUBLISH_AFTER_PUBREL: Final[str] = R5.MQTT_4_3_3_6
#: [MQTT-4.3.3-9] After a PUBREC of 0x80 or above, a PUBLISH with the same identifier is a new message.
QOS2_NEW_AFTER_REFUSAL: Final[str] = R5.MQTT_4_3_3_9
#: [MQTT-4.3.3-10] Until its PUBREL, a repeat of the PUBLISH is answered with PUBREC again (and not delivered
#: onward twice).
QOS2_REPEAT_ANSWERED: Final[str] = R5.MQTT_4_3_3_10
#: [MQTT-4.3.3-12] After its PUBCOMP, a PUBLISH with the same identifier is a new message.
QOS2_NEW_AFTER_PUBCOMP: Final[str] = R5.MQTT_4_3_3_12
#: [MQTT-4.4.0-1] Unacknowledged PUBLISH and PUBREL packets are re-sent on a resumed session, and at no other time.
RESEND_ONLY_ON_RESUME: Final[str] = R311.MQTT_4_4_0_1
#: [MQTT-4.4.0-2] A PUBLISH answered with PUBACK or PUBREC of 0x80 or above is acknowledged: never re-sent.
REFUSED_NOT_RESENT: Final[str] = R5.MQTT_4_4_0_2

# Acknowledgements: their identifiers and codes (2.2.1, 3.2.2.3.4, 3.8.4, 3.9.3, 3.10.4) --------------------------

#: [MQTT-2.2.1-6] SUBACK and UNSUBACK carry the Packet Identifier of the request they answer (its 3.1.1 key).
SUBSCRIBE_ACK_SAME_ID: Final[str] = R311.MQTT_2_3_1_7
#: [MQTT-3.9.3-2] A SUBACK holds one Subscribe Reason Code of Table 3-8 for each Topic Filter received (the codec
#: checks each value against the table; the judge, one per filter).
SUBACK_CODE_FOR_EACH_FILTER: Final[str] = R311.MQTT_3_9_3_2
#: [MQTT-3.10.4-6] An UNSUBSCRIBE of several Topic Filters is handled as that many UNSUBSCRIBEs, answered by one
#: UNSUBACK.
UNSUBSCRIBE_AS_SEQUENCE: Final[str] = R311.MQTT_3_10_4_6
#: [MQTT-3.2.2-9] A server without QoS 1 or QoS 2 declares its highest QoS as Maximum QoS: one that refuses a
#: PUBLISH within what it declared as "QoS not supported" did not.
MAXIMUM_QOS_DECLARED: Final[str] = R5.MQTT_3_2_2_9
#: [MQTT-3.2.2-10] A server without QoS 1 or QoS 2 still accepts a SUBSCRIBE requesting QoS 0, 1 or 2.
SUBSCRIBE_ABOVE_MAXIMUM_ACCEPTED: Final[str] = R5.MQTT_3_2_2_10

# QoS 2 under Message Expiry and PUBREC's identifier (4.3.3) ---------------------------------------------------------
#: [MQTT-4.3.3-7] A QoS 2 sender applies no Message Expiry to a PUBLISH it has sent: its flow goes on.
QOS2_SENT_NOT_EXPIRED: Final[str] = R5.MQTT_4_3_3_7
#: [MQTT-4.3.3-8] A QoS 2 receiver answers PUBREC with the PUBLISH's Packet Identifier.
QOS2_PUBREC_SAME_ID: Final[str] = R5.MQTT_4_3_3_8
#: [MQTT-4.3.3-13] A QoS 2 receiver completes the acknowledgement sequence of a message it let expire.
QOS2_EXPIRED_COMPLETED: Final[str] = R5.MQTT_4_3_3_13

# Send quota (3.3.4, 4.9) ----------------------------------------------------------------------------------------

#: [MQTT-3.3.4-10] A server at its send quota still sends the packets that are not PUBLISH.
QUOTA_HOLDS_ONLY_PUBLISH: Final[str] = R5.MQTT_3_3_4_10
#: [MQTT-4.9.0-2] At a send quota of zero no QoS 1 or 2 PUBLISH is sent.
ZERO_QUOTA_NO_PUBLISH: Final[str] = R5.MQTT_4_9_0_2
#: [MQTT-4.9.0-3] At a send quota of zero the other packets are still processed and answered.
ZERO_QUOTA_ANSWERS: Final[str] = R5.MQTT_4_9_0_3

# Reason String and User Property left out when the receiver's Maximum Packet Size is too small ----------------

PUBACK_REASON_STRING: Final[str] = R5.MQTT_3_4_2_2
PUBACK_USER_PROPERTY: Final[str] = R5.MQTT_3_4_2_3
PUBREC_REASON_STRING: Final[str] = R5.MQTT_3_5_2_2
PUBREC_USER_PROPERTY: Final[str] = R5.MQTT_3_5_2_3
PUBREL_REASON_STRING: Final[str] = R5.MQTT_3_6_2_2
PUBREL_USER_PROPERTY: Final[str] = R5.MQTT_3_6_2_3
PUBCOMP_REASON_STRING: Final[str] = R5.MQTT_3_7_2_2
PUBCOMP_USER_PROPERTY: Final[str] = R5.MQTT_3_7_2_3
SUBACK_REASON_STRING: Final[str] = R5.MQTT_3_9_2_1
SUBACK_USER_PROPERTY: Final[str] = R5.MQTT_3_9_2_2
UNSUBACK_REASON_STRING: Final[str] = R5.MQTT_3_11_2_1
UNSUBACK_USER_PROPERTY: Final[str] = R5.MQTT_3_11_2_2
DISCONNECT_REASON_STRING: Final[str] = R5.MQTT_3_14_2_3
DISCONNECT_USER_PROPERTY: Final[str] = R5.MQTT_3_14_2_4
#: [MQTT-3.2.2-19] / [MQTT-3.2.2-20] The same of the CONNACK (the server's only: the client declared its maximum in
#: the CONNECT it answers).
CONNACK_REASON_STRING: Final[str] = R5.MQTT_3_2_2_19
CONNACK_USER_PROPERTY: Final[str] = R5.MQTT_3_2_2_20
AUTH_REASON_STRING: Final[str] = R5.MQTT_3_15_2_2
AUTH_USER_PROPERTY: Final[str] = R5.MQTT_3_15_2_3
#: Packet type -> (its Reason String statement, its User Property statement).
OMITTED_OVER_MAXIMUM: Final[dict[PacketType, tuple[str, str]]] = {
    PacketType.PUBACK: (PUBACK_REASON_STRING, PUBACK_USER_PROPERTY),
    PacketType.PUBREC: (PUBREC_REASON_STRING, PUBREC_USER_PROPERTY),
    PacketType.PUBREL: (PUBREL_REASON_STRING, PUBREL_USER_PROPERTY),
    PacketType.PUBCOMP: (PUBCOMP_REASON_STRING, PUBCOMP_USER_PROPERTY),
    PacketType.SUBACK: (SUBACK_REASON_STRING, SUBACK_USER_PROPERTY),
    PacketType.UNSUBACK: (UNSUBACK_REASON_STRING, UNSUBACK_USER_PROPERTY),
    PacketType.DISCONNECT: (DISCONNECT_REASON_STRING, DISCONNECT_USER_PROPERTY),
    PacketType.CONNACK: (CONNACK_REASON_STRING, CONNACK_USER_PROPERTY),
    PacketType.AUTH: (AUTH_REASON_STRING, AUTH_USER_PROPERTY),
}

#: Keys only 5.0 states: on a 3.1.1 connection (a 3.1.1 subscriber of a 5.0 publisher's message) they are still
#: named by their 5.0 ids.
ONLY_5_0: Final[frozenset[str]] = frozenset(
    {
        NO_LOCAL,
        RETAIN_AS_PUBLISHED,
        RETAINED_IF_NEW,
        REPLACED_RESENDS_RETAINED,
        NO_RETAINED,
        SHARED_GRANTED_QOS,
        EXPIRED_NOT_DELIVERED,
        EXPIRY_REMAINING,
        PAYLOAD_FORMAT_FORWARDED,
        RESPONSE_TOPIC_FORWARDED,
        CORRELATION_DATA_FORWARDED,
        USER_PROPERTIES_FORWARDED,
        USER_PROPERTIES_IN_ORDER,
        CONTENT_TYPE_FORWARDED,
        WILL_DELAY,
        WILL_STORED,
        WILL_USER_PROPERTIES_IN_ORDER,
        NEW_SESSION,
        CLEAN_START_PROCESSED,
        KEPT_WHILE_OPEN,
        DISCARDED_AFTER_EXPIRY,
        SHARED_QOS2_COMPLETED,
        SHARED_NOT_REASSIGNED,
        SHARED_REFUSED_DISCARDED,
        IDENTIFIERS_SENT,
        ONE_COPY_ALL_IDENTIFIERS,
        COPY_PER_SUBSCRIPTION,
    }
)


# What this module decides, for ``mqttaudit rules``.
registry.refer_names("judge", __name__, dict(globals()))
