"""Rule identity across protocol versions: one key per rule, one statement id per version that states it.

MQTT 5.0 renumbers most statements of 3.1.1 (the reserved fixed-header flags are [MQTT-2.2.2-1] in 3.1.1 and
[MQTT-2.1.3-1] in 5.0) and drops a few (5.0 allows a Password without a User Name). A rule's key is the registry id
(:mod:`mqttaudit.spec.ids`) under which mqttaudit first knew it: its 3.1.1 id for rules 3.1.1 states, its 5.0 id for
rules only 5.0 states, each carrying its version. A 5.0 id whose text is also a 3.1.1 key (5.0's MQTT-2.2.2-1, an
empty Property Length, is not 3.1.1's reserved flags) is keyed by its :attr:`~mqttaudit.spec.registry.StatementId.key`,
its text with "@5.0", so the two never meet as one key in a set or a comparison. The checks report keys; a reader of
5.0 bytes names each finding by :func:`statement_id`.

MQTT 3.1 (protocol level 3, "MQIsdp") numbers nothing: its findings carry the 3.1.1 ids of the rules that hold for
it unchanged, and the codec leaves out the 3.1.1 rules 3.1 does not state.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Final

from .catalogue import load_catalogue
from .registry import StatementId

V3_1: Final = "3.1"
V3_1_1: Final = "3.1.1"
V5: Final = "5.0"
_AT_5_0: Final = "@5.0"

#: 3.1.1 key -> the MQTT 5.0 statement that says the same thing, or None when 5.0 does not state the rule.
#: Keys absent from this table are 5.0 ids themselves (rules only 5.0 states) and name themselves.
_IN_5_0: Final[dict[str, str | None]] = {
    # Strings (3.1.1 section 1.5.3, 5.0 section 1.5.4).
    # 3.1.1 also makes the receiver close here; 5.0 calls the packet malformed and closes under MQTT-4.13.1-1.
    "MQTT-1.5.3-1": "MQTT-1.5.4-1",
    "MQTT-1.5.3-2": "MQTT-1.5.4-2",
    "MQTT-1.5.3-3": "MQTT-1.5.4-3",  # a BOM (EF BB BF) is U+FEFF, neither skipped nor stripped
    "MQTT-1.5.3-control-characters": "MQTT-1.5.4-control-characters",
    "MQTT-1.5.3-max-length": "MQTT-1.5.4-max-length",
    # Fixed header (3.1.1 section 2.2, 5.0 section 2.1); Variable Byte Integers (5.0 section 1.5.5).
    "MQTT-2.2.1-reserved-type": "MQTT-2.1.2-reserved-type",
    "MQTT-2.2.1-direction": "MQTT-2.1.2-direction",
    "MQTT-2.2.2-1": "MQTT-2.1.3-1",
    # 5.0 makes invalid flags a Malformed Packet (2.1.3) and the close the error handling's: a MUST for a Server,
    # only a SHOULD for a Client (4.13.1).
    "MQTT-2.2.2-2": "MQTT-4.13.1-1",
    "MQTT-2.2.3-four-bytes": "MQTT-1.5.5-four-bytes",
    # A SHOULD in 3.1.1 (the Remaining Length "uses" the shortest form), a MUST for every VBI in 5.0.
    "MQTT-2.2.3-shortest-encoding": "MQTT-1.5.5-1",
    "MQTT-2.2.3-truncated": "MQTT-2.1.4-truncated",
    "MQTT-2.2.3-overrun": "MQTT-2.1.4-overrun",
    "MQTT-2.2.3-leftover": "MQTT-2.1.4-leftover",
    "MQTT-2.2.3-size-limit": "MQTT-2.1.4-size-limit",
    # Packet Identifiers (3.1.1 section 2.3.1, 5.0 section 2.2.1).
    "MQTT-2.3.1-1": "MQTT-2.2.1-3",
    "MQTT-2.3.1-2": "MQTT-2.2.1-3",  # 5.0 asks "non-zero" and "currently unused" in one statement
    "MQTT-2.3.1-4": "MQTT-2.2.1-4",
    "MQTT-2.3.1-5": "MQTT-2.2.1-2",
    "MQTT-2.3.1-6": "MQTT-2.2.1-5",
    "MQTT-2.3.1-7": "MQTT-2.2.1-6",
    "MQTT-4.3.3-2": "MQTT-2.2.1-5",  # 3.1.1 gives PUBCOMP's id its own statement; 5.0 folds it into 2.2.1-5
    # (the rest of 3.1.1's QoS 2 receiver, which the judge decides under the same key, is 5.0 MQTT-4.3.3-8 to -12)
    # CONNECT.
    "MQTT-3.1.0-1": "MQTT-3.1.0-1",
    "MQTT-3.1.0-2": "MQTT-3.1.0-2",
    "MQTT-3.1.2-protocol-name": "MQTT-3.1.2-1",
    "MQTT-3.1.2-protocol-level": "MQTT-3.1.2-protocol-version",
    "MQTT-3.1.2-2": "MQTT-3.1.2-2",  # weaker in 5.0: the refusing CONNACK (0x84) is a MAY, the close still a MUST
    "MQTT-3.1.2-3": "MQTT-3.1.2-3",
    # Clean Session splits into Clean Start and the Session Expiry Interval: what 3.1.1 asks of CleanSession 0 is
    # resuming (5.0 MQTT-3.1.2-5) and keeping the session after the close (MQTT-3.1.2-23, only while the Session
    # Expiry Interval is above 0); of CleanSession 1, discarding the old session (MQTT-3.1.2-4).
    "MQTT-3.1.2-4": "MQTT-3.1.2-5",
    "MQTT-3.1.2-5": "MQTT-3.1.2-23",  # the queued QoS 1 and 2 messages are Session State 5.0 keeps after a close
    "MQTT-3.1.2-6": "MQTT-3.1.2-4",  # 5.0 ends the new session with the connection only if its expiry is 0
    # 5.0 publishes the Will once the Will Delay Interval has passed, and only a DISCONNECT 0x00 deletes it.
    "MQTT-3.1.2-8": "MQTT-3.1.2-8",
    "MQTT-3.1.2-9": "MQTT-3.1.2-9",
    "MQTT-3.1.2-10": "MQTT-3.1.2-10",  # the Will is dropped once published (5.0: or after DISCONNECT 0x00)
    "MQTT-3.1.2-11": None,  # 3.1.1's general "Will Flag 0 -> Will QoS and Retain 0"; 5.0 states the two parts
    "MQTT-3.1.2-13": "MQTT-3.1.2-11",
    "MQTT-3.1.2-14": "MQTT-3.1.2-12",
    "MQTT-3.1.2-15": "MQTT-3.1.2-13",
    "MQTT-3.1.2-16": "MQTT-3.1.2-14",
    "MQTT-3.1.2-17": "MQTT-3.1.2-15",
    "MQTT-3.1.2-18": "MQTT-3.1.2-16",
    "MQTT-3.1.2-19": "MQTT-3.1.2-17",
    "MQTT-3.1.2-20": "MQTT-3.1.2-18",
    "MQTT-3.1.2-21": "MQTT-3.1.2-19",
    "MQTT-3.1.2-22": None,  # 5.0 allows a Password without a User Name
    # Keep Alive: in 5.0 the period may be the Server Keep Alive of CONNACK (MQTT-3.1.2-21, MQTT-3.2.2-21/22).
    "MQTT-3.1.2-23": "MQTT-3.1.2-20",
    "MQTT-3.1.2-24": "MQTT-3.1.2-22",
    "MQTT-3.1.3-2": "MQTT-3.1.3-2",  # session state identified by the ClientId
    "MQTT-3.1.3-3": "MQTT-3.1.3-3",
    "MQTT-3.1.3-4": "MQTT-3.1.3-4",
    "MQTT-3.1.3-5": "MQTT-3.1.3-5",
    # 5.0 states "process it as if supplied" apart (MQTT-3.1.3-7), with the Assigned Client Identifier in CONNACK.
    "MQTT-3.1.3-6": "MQTT-3.1.3-6",
    "MQTT-3.1.3-7": None,  # 5.0 lets the Server assign an identifier whatever Clean Start says
    # The refusal of an empty ClientId with CleanSession 0: the combination is allowed in 5.0, so nothing refuses
    # it (5.0 MQTT-3.1.3-8 is the close after refusing any Client Identifier, a rule of another scope).
    "MQTT-3.1.3-8": None,
    "MQTT-3.1.3-10": "MQTT-3.1.3-11",
    "MQTT-3.1.3-11": "MQTT-3.1.3-12",
    "MQTT-3.1.4-1": "MQTT-3.1.4-1",  # 5.0 lets the Server send a CONNACK 0x80 or above before it closes
    "MQTT-3.1.4-2": "MQTT-3.1.4-3",  # takeover; 5.0 sends the old connection DISCONNECT 0x8E first
    "MQTT-3.1.4-4": "MQTT-3.1.4-5",
    "MQTT-3.1.4-5": "MQTT-3.1.4-6",  # 5.0 still processes AUTH after a refusal
    # CONNACK.
    "MQTT-3.2.0-1": "MQTT-3.2.0-1",  # 5.0 lets AUTH come before the CONNACK
    "MQTT-3.2.1-remaining-length": None,  # variable in 5.0 (properties follow)
    "MQTT-3.2.2-reserved-flags": "MQTT-3.2.2-1",
    # Session Present: 5.0 MQTT-3.2.2-1 is the reserved flags; 3.1.1's three rules are 5.0's -2 and -3.
    "MQTT-3.2.2-1": "MQTT-3.2.2-2",
    "MQTT-3.2.2-2": "MQTT-3.2.2-3",  # 5.0 states Session Present 1 and 0 after Clean Start 0 in one statement
    "MQTT-3.2.2-3": "MQTT-3.2.2-3",
    "MQTT-3.2.2-4": "MQTT-3.2.2-6",
    "MQTT-3.2.2-5": "MQTT-3.2.2-7",  # every refusing CONNACK code is 0x80 or above in 5.0
    "MQTT-3.2.2-return-code": "MQTT-3.2.2-8",
    # PUBLISH.
    "MQTT-3.3.1-1": "MQTT-3.3.1-1",
    "MQTT-3.3.1-2": "MQTT-3.3.1-2",
    "MQTT-4.3.1-1": "MQTT-4.3.1-1",
    "MQTT-3.3.1-3": "MQTT-3.3.1-3",
    "MQTT-3.3.1-4": "MQTT-3.3.1-4",
    # Retained messages: 5.0 renumbers them and makes sending them on subscription depend on Retain Handling.
    "MQTT-3.3.1-6": "MQTT-3.3.1-9",  # Retain Handling 0; 1 sends them only for a new subscription, 2 never
    "MQTT-3.3.1-7": "MQTT-3.3.1-5",  # stronger in 5.0: every retained PUBLISH MUST replace and be stored
    # 5.0 section 3.3.1.3 says they "are sent with the RETAIN flag set to 1" in prose: no MUST, no statement id.
    "MQTT-3.3.1-8": None,
    "MQTT-3.3.1-9": "MQTT-3.3.1-12",  # only with Retain As Published 0; with 1 RETAIN is copied (MQTT-3.3.1-13)
    "MQTT-3.3.1-10": "MQTT-3.3.1-6",
    "MQTT-3.3.1-11": "MQTT-3.3.1-7",
    "MQTT-3.3.1-12": "MQTT-3.3.1-8",
    "MQTT-3.3.2-1": "MQTT-3.3.2-1",
    "MQTT-3.3.2-2": "MQTT-3.3.2-2",
    "MQTT-3.3.2-3": "MQTT-3.3.2-3",
    "MQTT-3.3.4-1": "MQTT-3.3.4-1",
    "MQTT-3.3.5-1": "MQTT-3.3.4-2",
    # 5.0 answers an unauthorised PUBLISH with PUBACK or PUBREC 0x87 (Not authorized): "ack or close" is gone.
    "MQTT-3.3.5-2": None,
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
    "MQTT-3.8.3-4": "MQTT-3.8.3-5",  # the reserved bits; a Maximum QoS of 3 is MQTT-3.8.3-qos in 5.0
    "MQTT-3.8.4-1": "MQTT-3.8.4-1",
    "MQTT-3.8.4-2": "MQTT-3.8.4-2",
    "MQTT-3.8.4-3": "MQTT-3.8.4-3",  # 5.0 re-sends the retained messages apart (MQTT-3.8.4-4, Retain Handling 0)
    "MQTT-3.8.4-5": "MQTT-3.8.4-6",
    "MQTT-3.8.4-6": "MQTT-3.8.4-8",
    "MQTT-3.9.3-1": "MQTT-3.9.3-1",
    "MQTT-3.9.3-2": "MQTT-3.9.3-2",
    "MQTT-3.10.1-1": "MQTT-3.10.1-1",
    "MQTT-3.10.3-1": "MQTT-3.10.3-1",
    "MQTT-3.10.3-2": "MQTT-3.10.3-2",
    "MQTT-3.10.4-2": "MQTT-3.10.4-2",
    # 5.0 moves the sentence "same Packet Identifier as the UNSUBSCRIBE" into MQTT-3.10.4-5 (and MQTT-2.2.1-6).
    "MQTT-3.10.4-4": "MQTT-3.10.4-4",
    "MQTT-3.10.4-5": "MQTT-3.10.4-5",
    "MQTT-3.10.4-6": "MQTT-3.10.4-6",
    "MQTT-3.11.1-remaining-length": None,
    # PINGREQ, PINGRESP, DISCONNECT.
    "MQTT-3.12.1-remaining-length": "MQTT-3.12.1-remaining-length",
    "MQTT-3.12.4-1": "MQTT-3.12.4-1",
    "MQTT-3.13.1-remaining-length": "MQTT-3.13.1-remaining-length",
    "MQTT-3.14.1-remaining-length": None,
    "MQTT-3.14.1-1": "MQTT-3.14.1-1",
    # After a DISCONNECT 5.0 swaps the numbers of "close" and "send nothing more", and binds both sides to them.
    "MQTT-3.14.4-1": "MQTT-3.14.4-2",
    "MQTT-3.14.4-2": "MQTT-3.14.4-1",
    "MQTT-3.14.4-3": "MQTT-3.14.4-3",  # narrower in 5.0: only a DISCONNECT 0x00 discards the Will (0x04 keeps it)
    # Delivery protocols (section 4.3): 5.0 gives each duty of 3.1.1's sender and receiver its own statement.
    "MQTT-4.3.2-2": "MQTT-4.3.2-4",  # the PUBACK; treating the id as new afterwards is MQTT-4.3.2-5
    # The PUBREL in answer to a PUBREC below 0x80; never re-sending the PUBLISH after it is MQTT-4.3.3-6.
    "MQTT-4.3.3-1": "MQTT-4.3.3-4",
    # Resending on reconnection: 5.0 adds "and at no other time".
    "MQTT-4.4.0-1": "MQTT-4.4.0-1",
    "MQTT-4.5.0-1": "MQTT-4.5.0-1",
    "MQTT-4.6.0-2": "MQTT-4.6.0-2",
    "MQTT-4.6.0-3": "MQTT-4.6.0-3",
    "MQTT-4.6.0-4": "MQTT-4.6.0-4",
    # Topics (section 4.7): 5.0 numbers the wildcard rules from 4.7.0.
    "MQTT-4.7.1-1": "MQTT-4.7.0-1",
    "MQTT-4.7.1-2": "MQTT-4.7.1-1",
    "MQTT-4.7.1-3": "MQTT-4.7.1-2",
    "MQTT-4.7.2-1": "MQTT-4.7.2-1",
    "MQTT-4.7.3-1": "MQTT-4.7.3-1",
    "MQTT-4.7.3-2": "MQTT-4.7.3-2",
    "MQTT-4.7.3-3": "MQTT-4.7.3-3",
    "MQTT-4.7.3-4": "MQTT-4.7.3-4",  # no normalisation in matching
    # Handling errors (3.1.1 section 4.8, 5.0 section 4.13): a MUST for the Server, a SHOULD for the Client in 5.0.
    "MQTT-4.8.0-1": "MQTT-4.13.1-1",
    # MQTT over WebSocket (chapter 6 of both): binary data frames only; the recipient of another closes.
    "MQTT-6.0.0-1": "MQTT-6.0.0-1",
}

# Rules only 5.0 states whose 5.0 id is also the key of another 3.1.1 rule: their keys say so with "@5.0".
_IN_5_0.update(
    {
        "MQTT-2.2.2-1@5.0": "MQTT-2.2.2-1",  # an empty property set is still written as Property Length 0
        "MQTT-3.8.3-4@5.0": "MQTT-3.8.3-4",  # No Local on a Shared Subscription
        "MQTT-3.1.2-24@5.0": "MQTT-3.1.2-24",  # Maximum Packet Size (3.1.1's MQTT-3.1.2-24 is the Keep Alive timer)
        "MQTT-3.8.3-3@5.0": "MQTT-3.8.3-3",  # No Local (3.1.1's MQTT-3.8.3-3 is the SUBSCRIBE's Topic Filter)
        "MQTT-3.1.3-7@5.0": "MQTT-3.1.3-7",  # the Assigned Client Identifier (3.1.1's is the empty ClientId's flag)
        "MQTT-3.1.3-9@5.0": "MQTT-3.1.3-9",  # Will Delay (3.1.1's MQTT-3.1.3-9 is the refused ClientId)
        "MQTT-3.1.2-7@5.0": "MQTT-3.1.2-7",  # the Will stored with the session (3.1.1's: retained messages)
        "MQTT-3.1.3-10@5.0": "MQTT-3.1.3-10",  # the Will's User Properties in order (3.1.1's: Will Topic UTF-8)
        "MQTT-3.1.2-6@5.0": "MQTT-3.1.2-6",  # Clean Start 0, no session: a new one (3.1.1's: CleanSession 1)
        "MQTT-3.1.4-4@5.0": "MQTT-3.1.4-4",  # Clean Start processing (3.1.1's: CONNACK 0x00 for a valid CONNECT)
        "MQTT-4.1.0-1@5.0": "MQTT-4.1.0-1",  # nothing discarded while open (3.1.1's: kept for the session's life)
        "MQTT-4.1.0-2@5.0": "MQTT-4.1.0-2",  # discarded after the expiry (3.1.1's: lasts while connected)
        "MQTT-3.3.1-10@5.0": "MQTT-3.3.1-10",  # Retain Handling 1 (3.1.1's MQTT-3.3.1-10 is the zero-byte retained)
        "MQTT-3.3.1-11@5.0": "MQTT-3.3.1-11",  # Retain Handling 2 (3.1.1's MQTT-3.3.1-11 is "zero-byte not stored")
        # The QoS 1 and 2 sender's first transmission (DUP 0) and a QoS 2 message's unused identifier: 3.1.1 numbers
        # the whole sender MQTT-4.3.2-1 / -4.3.3-1 and the receivers -4.3.2-2 / -4.3.3-2.
        "MQTT-4.3.2-2@5.0": "MQTT-4.3.2-2",
        "MQTT-4.3.3-1@5.0": "MQTT-4.3.3-1",
        "MQTT-4.3.3-2@5.0": "MQTT-4.3.3-2",
        "MQTT-3.8.4-4@5.0": "MQTT-3.8.4-4",  # Retain Handling 0 on a replacement (3.1.1's -3.8.4-4: a sequence)
        "MQTT-3.1.3-8@5.0": "MQTT-3.1.3-8",  # the close after CONNACK 0x85 (3.1.1's -3.1.3-8: an empty ClientId)
        "MQTT-3.1.4-2@5.0": "MQTT-3.1.4-2",  # the close after a further check fails (3.1.1's -3.1.4-2: takeover)
    }
)

# Rules 3.1.1 and 5.0 both state, under the numbers the judge's 5.0 checks use.
_IN_5_0.update(
    {
        "MQTT-4.3.2-1": "MQTT-4.3.2-1",  # 5.0 keeps only "an unused Packet Identifier" under the number
        "MQTT-3.10.4-1": "MQTT-3.10.4-1",
        "MQTT-3.10.4-3": "MQTT-3.10.4-3",
        "MQTT-3.8.4-4": "MQTT-3.8.4-5",  # a multi-filter SUBSCRIBE handled as a sequence, one SUBACK
        # 3.1.1 swaps the two ordering statements: its -5 makes every topic Ordered, its -6 keeps the order.
        "MQTT-4.6.0-5": "MQTT-4.6.0-6",
        "MQTT-4.6.0-6": "MQTT-4.6.0-5",
    }
)

#: The table above, read-only: key -> 5.0 statement id (None: not a 5.0 rule).
IN_5_0: Final[Mapping[str, str | None]] = MappingProxyType(_IN_5_0)

#: The 5.0 statements the table gives to more than one key on purpose: 5.0 id -> why.
SHARED_IN_5_0: Final[Mapping[str, str]] = MappingProxyType(
    {
        "MQTT-2.2.1-3": "5.0 asks a non-zero and a currently unused Packet Identifier of the Client in one statement",
        "MQTT-2.2.1-5": "5.0 states the Packet Identifier of PUBACK, PUBREC, PUBREL and PUBCOMP in one statement",
        "MQTT-3.2.2-3": "5.0 states Session Present 1 (state held) and 0 (none) after Clean Start 0 in one statement",
        "MQTT-4.13.1-1": "5.0 closes on every Malformed Packet and Protocol Error, invalid flags included, by one rule",
    }
)

#: 3.1.1 rules MQTT 3.1 does not state: 3.1 leaves the flags of most fixed headers unspecified rather than
#: reserved, and requires a Client Identifier of 1 to 23 characters whatever the Clean Session flag says.
NOT_IN_3_1: Final = frozenset({"MQTT-2.2.2-1", "MQTT-3.14.1-1", "MQTT-3.1.3-7"})


def statement_id(key: str, version: str) -> StatementId | None:
    """The id ``version`` ("3.1", "3.1.1" or "5.0") gives the rule ``key``; None when that version does not
    state it.

    A key is a :class:`~mqttaudit.spec.registry.StatementId` of the version under which mqttaudit first knew the
    rule: a 3.1.1 id, or a 5.0 id for a rule only 5.0 states. A 5.0 key names itself in 5.0 and nothing in 3.1 and
    3.1.1; a 3.1.1 key names itself in 3.1 (unless 3.1 does not state it) and 3.1.1, and the table above in 5.0. A
    plain string (read back from a report, written in a test) is a 3.1.1 key, or a 5.0 one when it ends "@5.0" or
    no 3.1.1 rule has that id."""
    return _named(str(key), getattr(key, "version", None), version)


@lru_cache(maxsize=4096)
def _named(text: str, key_version: str | None, version: str) -> StatementId | None:
    """:func:`statement_id` of the key ``text`` (a :class:`~mqttaudit.spec.registry.StatementId` of
    ``key_version``, or a plain string when None): a pure function of its arguments, asked millions of times by a
    broker's routing replay (once per delivery and rule decided), so remembered."""
    text, own = _key(text if key_version is None else StatementId(text, key_version))
    if own == V5:
        return StatementId(text, V5) if version == V5 else None
    if version == V5:
        named = _IN_5_0.get(text, text)
        return None if named is None else StatementId(named, V5)
    if version == V3_1:
        return None if text in NOT_IN_3_1 else StatementId(text, V3_1_1)
    return StatementId(text, V3_1_1)


def _key(key: str) -> tuple[str, str]:
    """(id text, the version whose id it is) of a key."""
    if key.endswith(_AT_5_0):
        return key[: -len(_AT_5_0)], V5
    own = getattr(key, "version", None)
    if isinstance(own, str):
        return str(key), own
    if key in _IN_5_0 or key in load_catalogue(V3_1_1):
        return key, V3_1_1
    return key, V5


def needs_suffix(text: str) -> bool:
    """Whether the 5.0 rule ``text`` is keyed with "@5.0": its text is a 3.1.1 key too."""
    return text in _IN_5_0 or text in load_catalogue(V3_1_1)
