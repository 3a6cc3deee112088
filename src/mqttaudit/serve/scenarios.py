"""Scenarios: situations the broker puts its clients in so that a client's handling of them is judged — small
limits in CONNACK, acknowledgements held back, a connection dropped in the middle of a QoS flow, a server
DISCONNECT, and (``hostile``) packets a conforming server never sends.

A scenario is data: what the broker changes (:class:`Scenario` fields), the client statements it provokes, and,
for a hostile one, the server statements it breaks on purpose (their findings are the stimulus, reported as
provoked, never as defects of serve). The client under test is driven by its own application (observed), or
through behaviour topics: the commands in :attr:`Scenario.commands`, published to the client on
``mqttaudit/behaviour/<ClientId>`` once it subscribes there (see :mod:`.behaviour`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..codec import Direction, Disconnect, PacketType, encode
from ..codec.reason_codes import REASON_CODES
from ..spec.ids import R5, R311
from ..spec.registry import StatementId

ANY: Final = "any"
V5_ONLY: Final = "5.0"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    #: The client statements the scenario gives a client the chance to break.
    statements: tuple[StatementId, ...]
    #: "5.0" when only 5.0 clients are concerned (a 3.1.1 client is served as usual), else "any".
    version: str = ANY
    #: CONNACK overrides (5.0): Receive Maximum, Topic Alias Maximum (on a ClientId's first connection, and on its
    #: later ones: None there means absent), Maximum Packet Size, Server Keep Alive, Session Expiry Interval.
    receive_maximum: int | None = None
    topic_alias_maximum: int | None = None
    topic_alias_maximum_later: int | None = None
    alias_later_given: bool = False
    maximum_packet_size: int | None = None
    server_keep_alive: int | None = None
    session_expiry_interval: int | None = None
    retain_available: bool = True
    #: Every subscription finds a retained QoS 2 message waiting on a topic it matches.
    seed_retained: bool = False
    #: Seconds the broker holds each PUBACK and PUBREC it owes the client (so that unacknowledged messages add up).
    hold_acks: float = 0.0
    #: Drop the first connection of a ClientId whose session persists in the middle of a QoS flow: "publish" (on
    #: the first QoS 1 or 2 PUBLISH, unacknowledged) or "pubrel" (on the first PUBREL, before PUBCOMP).
    drop_at: str | None = None
    #: Send DISCONNECT with this Reason Code once the client subscribed or published (or 1 s after CONNACK);
    #: ``short``: Remaining Length 1 (no Property Length), else 2 with an empty property list.
    disconnect: int | None = None
    short: bool = False
    #: Hostile: a Topic Alias the client never allowed on every delivery; Session Present 1 on a clean start; raw
    #: bytes sent instead of the CONNACK (``instead_of_connack``) or right after it.
    server_alias: bool = False
    lie_session_present: bool = False
    raw: bytes = b""
    instead_of_connack: bool = False
    #: Server statements the scenario breaks on purpose.
    provoked: tuple[StatementId, ...] = ()
    #: Behaviour-topic commands, sent in order once the client subscribes to its behaviour topic.
    commands: tuple[str, ...] = ()

    @property
    def hostile(self) -> bool:
        return bool(self.provoked)


_FLOOD = ("publish 6 1 mqttaudit/flood", "publish 6 2 mqttaudit/flood")


def _disconnects() -> list[Scenario]:
    server_codes = [
        code
        for code in REASON_CODES
        if PacketType.DISCONNECT in code.packets and Direction.FROM_SERVER in code.disconnect_senders
    ]
    out = []
    for code in server_codes:
        for short in (True, False):
            if short and code.value == 0x00:
                continue  # 0x00 without properties is written as Remaining Length 0
            wire = encode(Disconnect(reason_code=code.value, properties=None if short else ()), version=5)
            out.append(
                Scenario(
                    f"disconnect-0x{code.value:02x}-{'short' if short else 'long'}",
                    f"the broker sends DISCONNECT {code.name} ({wire.hex(' ')}) and closes: the client must send "
                    "nothing after it and treat the connection as closed",
                    (R5.MQTT_4_13_2_1, R5.MQTT_3_14_4_1),
                    V5_ONLY,
                    disconnect=code.value,
                    short=short,
                )
            )
    return out


SCENARIOS: Final[dict[str, Scenario]] = {
    s.name: s
    for s in [
        *(
            Scenario(
                f"receive-maximum-{maximum}",
                f"CONNACK Receive Maximum {maximum}, and the broker holds each PUBACK and PUBREC for 1 s: a client "
                f"must not have more than {maximum} QoS 1 and 2 PUBLISHes unacknowledged",
                (R5.MQTT_3_3_4_7, R5.MQTT_3_3_4_8),
                V5_ONLY,
                receive_maximum=maximum,
                hold_acks=1.0,
                commands=_FLOOD,
            )
            for maximum in (1, 2)
        ),
        Scenario(
            "topic-alias-maximum-0",
            "CONNACK without Topic Alias Maximum: the client must send no Topic Alias",
            (R5.MQTT_3_2_2_18, R5.MQTT_3_3_2_9),
            V5_ONLY,
            topic_alias_maximum=0,
            commands=("publish 4 0 mqttaudit/alias/same-topic",),
        ),
        Scenario(
            "topic-alias-maximum-1",
            "CONNACK Topic Alias Maximum 1: the client must use no Topic Alias above 1",
            (R5.MQTT_3_2_2_17, R5.MQTT_3_3_2_9),
            V5_ONLY,
            topic_alias_maximum=1,
            commands=("publish 3 0 mqttaudit/alias/a", "publish 3 0 mqttaudit/alias/b"),
        ),
        Scenario(
            "topic-alias-absent-on-reconnect",
            "Topic Alias Maximum 2 on a ClientId's first connection, absent on the next: the client must not keep the "
            "old maximum, nor an alias mapping from the old connection",
            (R5.MQTT_3_2_2_18, R5.MQTT_3_3_2_7, R5.MQTT_3_3_2_9),
            V5_ONLY,
            topic_alias_maximum=2,
            topic_alias_maximum_later=0,
            alias_later_given=True,
            commands=("publish 3 1 mqttaudit/alias/reconnect", "reconnect", "publish 3 1 mqttaudit/alias/reconnect"),
        ),
        Scenario(
            "maximum-packet-size-small",
            "CONNACK Maximum Packet Size 64: the client must send no larger packet",
            (R5.MQTT_3_2_2_15,),
            V5_ONLY,
            maximum_packet_size=64,
            commands=("publish 1 1 mqttaudit/large 100",),
        ),
        Scenario(
            "server-keep-alive",
            "CONNACK Server Keep Alive 2 (shorter than the client's): the client must use it, with a PINGREQ within "
            "2 s of silence",
            (R5.MQTT_3_2_2_21, R5.MQTT_3_1_2_21, R5.MQTT_3_1_2_20),
            V5_ONLY,
            server_keep_alive=2,
        ),
        Scenario(
            "reconnect-mid-qos1",
            "the broker drops the connection on the client's first QoS 1 or 2 PUBLISH of a persistent session, "
            "unacknowledged: on reconnecting with Session Present 1 the client must send it again, same Packet "
            "Identifier, DUP set",
            (R311.MQTT_4_4_0_1, R311.MQTT_3_3_1_1, R5.MQTT_4_4_0_1, R5.MQTT_3_3_1_1, R5.MQTT_3_3_2_7),
            drop_at="publish",
            commands=("publish 1 1 mqttaudit/resend",),
        ),
        Scenario(
            "reconnect-mid-qos2",
            "the broker drops the connection on the client's first PUBREL of a persistent session, before PUBCOMP: "
            "on reconnecting with Session Present 1 the client must send the PUBREL again",
            (R311.MQTT_4_4_0_1, R5.MQTT_4_4_0_1),
            drop_at="pubrel",
            commands=("publish 1 2 mqttaudit/resend",),
        ),
        Scenario(
            "session-present-0-after-stored",
            "CONNACK Session Expiry Interval 0 on every connection, so a stored session ends with it: reconnecting, "
            "the client gets Session Present 0 and must discard its session state (no PUBLISH with DUP from before)",
            (R5.MQTT_3_2_2_5,),
            V5_ONLY,
            session_expiry_interval=0,
            drop_at="publish",
            commands=("publish 1 1 mqttaudit/discard",),
        ),
        Scenario(
            "will-delay",
            "Wills are held for their Will Delay Interval and dropped on a reconnect within it (observed: the "
            "client's CONNECT must carry its Will well formed)",
            (R311.MQTT_3_1_2_14, R5.MQTT_3_1_2_9, R5.MQTT_3_1_2_12),
        ),
        Scenario(
            "retained",
            "every subscription finds a retained QoS 2 message waiting (RETAIN set): the client must complete the "
            "QoS 2 flow as its receiver",
            (R311.MQTT_4_3_3_2, R5.MQTT_4_3_3_8, R5.MQTT_4_3_3_11),
            seed_retained=True,
        ),
        Scenario(
            "retain-unavailable",
            "CONNACK Retain Available 0: the client must send no PUBLISH with RETAIN set (the broker closes with "
            "DISCONNECT 0x9A on one)",
            (R5.MQTT_3_2_2_14,),
            V5_ONLY,
            retain_available=False,
            commands=("publish 1 0 mqttaudit/retained retain",),
        ),
        Scenario(
            "auth-challenge",
            "the Authentication Method 'mqttaudit-challenge' (client-first, then the challenge reversed), with "
            "re-authentication by AUTH 0x19 (observed: the client must choose the method)",
            (R5.MQTT_4_12_0_3, R5.MQTT_4_12_0_5, R5.MQTT_4_12_0_7, R5.MQTT_4_12_1_1),
            V5_ONLY,
        ),
        *_disconnects(),
        # Hostile: what a conforming server never does.
        Scenario(
            "hostile/server-topic-alias",
            "every delivery carries a Topic Alias above the Topic Alias Maximum the client declared: a Protocol Error "
            "the client SHOULD close on (4.13.1; not closing is leniency), and must not crash on",
            (),
            V5_ONLY,
            server_alias=True,
            provoked=(R5.MQTT_3_3_2_11, R5.MQTT_3_1_2_26, R5.MQTT_3_1_2_27),
            commands=("publish 1 0 mqttaudit/hostile",),  # the command itself comes with the alias
        ),
        Scenario(
            "hostile/session-present-on-clean-start",
            "CONNACK Session Present 1 on every connection, a clean start's included: a client without session "
            "state must close",
            (R5.MQTT_3_2_2_4,),
            V5_ONLY,
            lie_session_present=True,
            provoked=(R5.MQTT_3_2_2_2, R5.MQTT_3_2_2_3),
        ),
        Scenario(
            "hostile/connack-properties-overrun",
            "a CONNACK whose Property Length runs past the packet (20 05 00 00 10 21 00 02): a Malformed Packet the "
            "client SHOULD close on (4.13.1; not closing is leniency), and must not crash on",
            (),
            V5_ONLY,
            raw=bytes.fromhex("2005000010210002"),
            instead_of_connack=True,
            provoked=(R5.MQTT_2_2_2_PROPERTY_LENGTH,),
        ),
        Scenario(
            "hostile/connack-reserved-flags",
            "a CONNACK with fixed-header flags 0010 (22 02 00 00): a 3.1.1 client must close; a 5.0 client SHOULD",
            (R311.MQTT_2_2_2_2,),
            raw=bytes.fromhex("22020000"),
            instead_of_connack=True,
            provoked=(R311.MQTT_2_2_2_1, R5.MQTT_2_1_3_1),
        ),
        Scenario(
            "hostile/five-byte-remaining-length",
            "after CONNACK, a PUBLISH whose Remaining Length takes five bytes (30 ff ff ff ff 01): a 3.1.1 client "
            "must close; a 5.0 client SHOULD",
            (R311.MQTT_4_8_0_1,),
            raw=bytes.fromhex("30ffffffff01"),
            provoked=(R311.MQTT_2_2_3_FOUR_BYTES, R5.MQTT_1_5_5_FOUR_BYTES),
        ),
        Scenario(
            "hostile/unsolicited-pubrel",
            "after CONNACK, a PUBREL for a Packet Identifier the client never used (62 02 12 34): the client must "
            "answer PUBCOMP (0x92 in 5.0) or close, and must not crash",
            (R311.MQTT_4_3_3_1, R5.MQTT_4_3_3_11),
            raw=bytes.fromhex("62021234"),
            provoked=(R311.MQTT_2_3_1_6, R5.MQTT_2_2_1_5),
        ),
    ]
}


def scenario(name: str) -> Scenario:
    """The scenario called ``name``; KeyError naming the known ones otherwise."""
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"no scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
