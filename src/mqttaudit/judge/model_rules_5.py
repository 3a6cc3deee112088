"""The statement ids (keys) of what MQTT 5.0 adds to routing across connections: subscription options, shared
subscriptions, Message Expiry, the properties a forwarded message keeps, and the Will Delay Interval.

Rules 3.1.1 states too are judged under their 3.1.1 keys (:mod:`.rules`), which 5.0 names by its own ids; a key
here that is also a 3.1.1 id of another rule says so with "@5.0" (see :mod:`mqttaudit.spec.identity`).
"""

from __future__ import annotations

from typing import Final

from . import rules
from .deliveries_5 import (
    COPY_PER_SUBSCRIPTION,
    IDENTIFIERS_SENT,
    NO_LOCAL,
    ONE_COPY_ALL_IDENTIFIERS,
    RETAIN_AS_PUBLISHED,
    RETAIN_CLEARED,
)

__all__ = [
    "COPY_PER_SUBSCRIPTION",
    "IDENTIFIERS_SENT",
    "NO_LOCAL",
    "ONE_COPY_ALL_IDENTIFIERS",
    "RETAIN_AS_PUBLISHED",
    "RETAIN_CLEARED",
]

#: [MQTT-3.3.1-9] Retain Handling 0: the retained messages are sent whenever the subscription is made.
RETAINED_ON_EVERY_SUBSCRIBE: Final = rules.RETAINED_SENT_ON_SUBSCRIBE
#: [MQTT-3.3.1-10] Retain Handling 1: sent only if the subscription did not exist already.
RETAINED_IF_NEW: Final = "MQTT-3.3.1-10@5.0"
#: [MQTT-3.3.1-11] Retain Handling 2: never sent when the subscription is made.
NO_RETAINED: Final = "MQTT-3.3.1-11@5.0"
#: [MQTT-4.8.2-3] A shared subscription's message goes at most at the granted QoS of the chosen member.
SHARED_GRANTED_QOS: Final = "MQTT-4.8.2-3"
#: [MQTT-3.3.2-5] A copy whose Message Expiry Interval passed before its onward delivery started is deleted.
EXPIRED_NOT_DELIVERED: Final = "MQTT-3.3.2-5"
#: [MQTT-3.3.2-6] A forwarded copy carries the interval received minus the time the message waited.
EXPIRY_REMAINING: Final = "MQTT-3.3.2-6"
#: Properties forwarded unaltered, by property identifier.
PAYLOAD_FORMAT_FORWARDED: Final = "MQTT-3.3.2-4"
RESPONSE_TOPIC_FORWARDED: Final = "MQTT-3.3.2-15"
CORRELATION_DATA_FORWARDED: Final = "MQTT-3.3.2-16"
USER_PROPERTIES_FORWARDED: Final = "MQTT-3.3.2-17"
USER_PROPERTIES_IN_ORDER: Final = "MQTT-3.3.2-18"
CONTENT_TYPE_FORWARDED: Final = "MQTT-3.3.2-20"
#: [MQTT-3.1.3-9] A connection to the session before the Will Delay Interval passes suppresses the Will.
WILL_DELAY: Final = "MQTT-3.1.3-9@5.0"

#: Keys only 5.0 states: on a 3.1.1 connection (a 3.1.1 subscriber of a 5.0 publisher's message) they are still
#: named by their 5.0 ids.
ONLY_5_0: Final[frozenset[str]] = frozenset(
    {
        NO_LOCAL,
        RETAIN_AS_PUBLISHED,
        RETAINED_IF_NEW,
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
        IDENTIFIERS_SENT,
        ONE_COPY_ALL_IDENTIFIERS,
        COPY_PER_SUBSCRIPTION,
    }
)
