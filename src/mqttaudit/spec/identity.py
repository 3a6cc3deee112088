"""Rule identity across protocol versions: one key per rule, one statement id per version that states it.

MQTT 5.0 renumbers most statements of 3.1.1 (the reserved fixed-header flags are [MQTT-2.2.2-1] in 3.1.1 and
[MQTT-2.1.3-1] in 5.0) and drops a few (5.0 allows a Password without a User Name). A rule's key is the id under
which mqttaudit first knew it: its 3.1.1 id for rules 3.1.1 states, its 5.0 id for rules only 5.0 states. The
checks report keys; a reader of 5.0 bytes names each finding by :func:`statement_id`.

MQTT 3.1 (protocol level 3, "MQIsdp") numbers nothing: its findings carry the 3.1.1 ids of the rules that hold for
it unchanged, and the codec leaves out the 3.1.1 rules 3.1 does not state.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

V3_1: Final = "3.1"
V3_1_1: Final = "3.1.1"
V5: Final = "5.0"

#: 3.1.1 key -> the MQTT 5.0 statement that says the same thing, or None when 5.0 does not state the rule.
#: Keys absent from this table are 5.0 ids themselves (rules only 5.0 states) and name themselves.
_IN_5_0: Final[dict[str, str | None]] = {
    # Strings (3.1.1 section 1.5.3, 5.0 section 1.5.4).
    "MQTT-1.5.3-1": "MQTT-1.5.4-1",
    "MQTT-1.5.3-2": "MQTT-1.5.4-2",
    "MQTT-1.5.3-control-characters": "MQTT-1.5.4-control-characters",
    "MQTT-1.5.3-max-length": "MQTT-1.5.4-max-length",
    # Fixed header (3.1.1 section 2.2, 5.0 section 2.1); Variable Byte Integers (5.0 section 1.5.5).
    "MQTT-2.2.1-reserved-type": "MQTT-2.1.2-reserved-type",
    "MQTT-2.2.1-direction": "MQTT-2.1.2-direction",
    "MQTT-2.2.2-1": "MQTT-2.1.3-1",
    "MQTT-2.2.3-four-bytes": "MQTT-1.5.5-four-bytes",
    # A SHOULD in 3.1.1 (the Remaining Length "uses" the shortest form), a MUST for every VBI in 5.0.
    "MQTT-2.2.3-shortest-encoding": "MQTT-1.5.5-1",
    "MQTT-2.2.3-truncated": "MQTT-2.1.4-truncated",
    "MQTT-2.2.3-overrun": "MQTT-2.1.4-overrun",
    "MQTT-2.2.3-leftover": "MQTT-2.1.4-leftover",
    "MQTT-2.2.3-size-limit": "MQTT-2.1.4-size-limit",
    # Packet Identifiers (3.1.1 section 2.3.1, 5.0 section 2.2.1).
    "MQTT-2.3.1-1": "MQTT-2.2.1-3",
    "MQTT-2.3.1-5": "MQTT-2.2.1-2",
    "MQTT-2.3.1-6": "MQTT-2.2.1-5",
    "MQTT-2.3.1-7": "MQTT-2.2.1-6",
    "MQTT-4.3.3-2": "MQTT-2.2.1-5",  # 3.1.1 gives PUBCOMP's id its own statement; 5.0 folds it into 2.2.1-5
    # CONNECT.
    "MQTT-3.1.2-protocol-name": "MQTT-3.1.2-1",
    "MQTT-3.1.2-protocol-level": "MQTT-3.1.2-protocol-version",
    "MQTT-3.1.2-3": "MQTT-3.1.2-3",
    "MQTT-3.1.2-9": "MQTT-3.1.2-9",
    "MQTT-3.1.2-11": None,  # 3.1.1's general "Will Flag 0 -> Will QoS and Retain 0"; 5.0 states the two parts
    "MQTT-3.1.2-13": "MQTT-3.1.2-11",
    "MQTT-3.1.2-14": "MQTT-3.1.2-12",
    "MQTT-3.1.2-15": "MQTT-3.1.2-13",
    "MQTT-3.1.2-19": "MQTT-3.1.2-17",
    "MQTT-3.1.2-21": "MQTT-3.1.2-19",
    "MQTT-3.1.2-22": None,  # 5.0 allows a Password without a User Name
    "MQTT-3.1.3-3": "MQTT-3.1.3-3",
    "MQTT-3.1.3-4": "MQTT-3.1.3-4",
    "MQTT-3.1.3-7": None,  # 5.0 lets the Server assign an identifier whatever Clean Start says
    "MQTT-3.1.3-10": "MQTT-3.1.3-11",
    "MQTT-3.1.3-11": "MQTT-3.1.3-12",
    # CONNACK.
    "MQTT-3.2.1-remaining-length": None,  # variable in 5.0 (properties follow)
    "MQTT-3.2.2-reserved-flags": "MQTT-3.2.2-1",
    "MQTT-3.2.2-4": "MQTT-3.2.2-6",
    "MQTT-3.2.2-return-code": "MQTT-3.2.2-8",
    # PUBLISH.
    "MQTT-3.3.1-2": "MQTT-3.3.1-2",
    "MQTT-4.3.1-1": "MQTT-4.3.1-1",
    "MQTT-3.3.1-4": "MQTT-3.3.1-4",
    "MQTT-3.3.2-1": "MQTT-3.3.2-1",
    "MQTT-3.3.2-2": "MQTT-3.3.2-2",
    # Acknowledgements: fixed at two bytes in 3.1.1, a reason code and properties may follow in 5.0.
    "MQTT-3.4.1-remaining-length": None,
    "MQTT-3.5.1-remaining-length": None,
    "MQTT-3.6.1-remaining-length": None,
    "MQTT-3.6.1-1": "MQTT-3.6.1-1",
    "MQTT-3.7.1-remaining-length": None,
    # SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK.
    "MQTT-3.8.1-1": "MQTT-3.8.1-1",
    "MQTT-3.8.3-1": "MQTT-3.8.3-1",
    "MQTT-3.8.3-3": "MQTT-3.8.3-2",
    "MQTT-3.8.3-4": "MQTT-3.8.3-5",
    "MQTT-3.8.4-5": "MQTT-3.8.4-6",
    "MQTT-3.9.3-2": "MQTT-3.9.3-2",
    "MQTT-3.10.1-1": "MQTT-3.10.1-1",
    "MQTT-3.10.3-1": "MQTT-3.10.3-1",
    "MQTT-3.10.3-2": "MQTT-3.10.3-2",
    "MQTT-3.11.1-remaining-length": None,
    # PINGREQ, PINGRESP, DISCONNECT.
    "MQTT-3.12.1-remaining-length": "MQTT-3.12.1-remaining-length",
    "MQTT-3.13.1-remaining-length": "MQTT-3.13.1-remaining-length",
    "MQTT-3.14.1-remaining-length": None,
    "MQTT-3.14.1-1": "MQTT-3.14.1-1",
    # Topics (section 4.7): 5.0 numbers the wildcard rules from 4.7.0.
    "MQTT-4.7.1-1": "MQTT-4.7.0-1",
    "MQTT-4.7.1-2": "MQTT-4.7.1-1",
    "MQTT-4.7.1-3": "MQTT-4.7.1-2",
    "MQTT-4.7.3-1": "MQTT-4.7.3-1",
    "MQTT-4.7.3-2": "MQTT-4.7.3-2",
    "MQTT-4.7.3-3": "MQTT-4.7.3-3",
}

# Rules only 5.0 states whose 5.0 id is also the key of another 3.1.1 rule: their keys say so with "@5.0".
_IN_5_0.update(
    {
        "MQTT-2.2.2-1@5.0": "MQTT-2.2.2-1",  # an empty property set is still written as Property Length 0
        "MQTT-3.8.3-4@5.0": "MQTT-3.8.3-4",  # No Local on a Shared Subscription
    }
)

#: The table above, read-only: key -> 5.0 statement id (None: not a 5.0 rule).
IN_5_0: Final[Mapping[str, str | None]] = MappingProxyType(_IN_5_0)

#: 3.1.1 rules MQTT 3.1 does not state: 3.1 leaves the flags of most fixed headers unspecified rather than
#: reserved, and requires a Client Identifier of 1 to 23 characters whatever the Clean Session flag says.
NOT_IN_3_1: Final = frozenset({"MQTT-2.2.2-1", "MQTT-3.14.1-1", "MQTT-3.1.3-7"})


def statement_id(key: str, version: str) -> str | None:
    """The id ``version`` ("3.1", "3.1.1" or "5.0") gives the rule ``key``; None when that version does not
    state it. 3.1 and 3.1.1 name every rule by its key; 5.0 by the table above, and a key absent from it is a 5.0
    id already."""
    if version == V5:
        return _IN_5_0.get(key, key)
    if version == V3_1:
        return None if key in NOT_IN_3_1 else key
    return key
