"""The reactions MQTT 5.0 allows where it allows several: the Reason Codes that may answer a request in each
situation. The checks read this table; a finding quotes the allowed codes when none of them came."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mqttaudit.codec import PacketType
from mqttaudit.codec.reason_codes import name
from mqttaudit.spec import registry
from mqttaudit.spec.ids import R5

from . import rules

#: SUBACK Reason Codes that refuse one subscription (Table 2.6, section 3.9.3).
SUBACK_REFUSALS: Final = frozenset({0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2})
#: UNSUBACK Reason Codes that refuse one unsubscription (section 3.11.3).
UNSUBACK_REFUSALS: Final = frozenset({0x80, 0x83, 0x87, 0x8F, 0x91})
#: PUBACK and PUBREC Reason Codes that refuse the message (sections 3.4.2.1, 3.5.2.1).
PUBLISH_REFUSALS: Final = frozenset({0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99})
#: A PUBACK or PUBREC below 0x80 takes the message: "No matching subscribers" (0x10) is a success too.
PUBLISH_ACCEPTED: Final = frozenset({0x00, 0x10})
#: Reason Codes from 0x80 up report a failure (section 2.4).
FIRST_FAILURE: Final = 0x80
#: "Packet Identifier not found" (PUBREL, PUBCOMP).
PACKET_ID_NOT_FOUND: Final = 0x92
#: "No subscription existed" (UNSUBACK).
NO_SUBSCRIPTION_EXISTED: Final = 0x11


@dataclass(frozen=True, slots=True)
class Outcomes:
    """The Reason Codes a receiver may answer with in one situation, and the statement that answer is judged by."""

    #: The rule key of the statement.
    rule: str
    packet_type: PacketType
    codes: frozenset[int]
    #: When these codes apply, in one line.
    situation: str

    def allows(self, code: int) -> bool:
        return code in self.codes

    def quoted(self, extra: frozenset[int] = frozenset()) -> str:
        """The allowed codes with their names, for a finding's ``expected`` text."""
        return ", ".join(f"{code:#04x} ({name(code, self.packet_type)})" for code in sorted(self.codes | extra))

    def expected(self, extra: frozenset[int] = frozenset()) -> str:
        return f"{self.situation}: {self.packet_type.name} Reason Code {self.quoted(extra)}"


#: Situation -> the codes MQTT 5.0 allows there. A SUBACK may also grant any QoS up to the one requested (the
#: check adds those per Topic Filter).
ALLOWED_OUTCOMES: Final[dict[str, Outcomes]] = {
    # [MQTT-4.3.2-4] The receiver of a QoS 1 PUBLISH answers PUBACK; it takes the message or refuses it.
    "puback": Outcomes(
        rules.QOS1_RECEIVER_PUBACK,
        PacketType.PUBACK,
        PUBLISH_ACCEPTED | PUBLISH_REFUSALS,
        "a QoS 1 PUBLISH is accepted (0x00, or 0x10 when nobody subscribed) or refused (0x80 and above)",
    ),
    # [MQTT-4.3.3-8] The receiver of a QoS 2 PUBLISH answers PUBREC; a refusal ends the flow [MQTT-4.3.3-4].
    "pubrec": Outcomes(
        R5.MQTT_4_3_3_8,
        PacketType.PUBREC,
        PUBLISH_ACCEPTED | PUBLISH_REFUSALS,
        "a QoS 2 PUBLISH is accepted (0x00, or 0x10 when nobody subscribed) or refused (0x80 and above)",
    ),
    # [MQTT-4.3.3-4] The PUBREL answering a PUBREC below 0x80 of the sender's own PUBLISH on this connection:
    # "not found" contradicts the PUBLISH it sent.
    "pubrel-known": Outcomes(
        rules.QOS2_SENDER,
        PacketType.PUBREL,
        frozenset({0x00}),
        "the PUBREL for a PUBREC of the sender's own QoS 2 PUBLISH on this connection releases it",
    ),
    # [MQTT-4.3.3-11] A PUBREL of a flow the receiver acknowledged with PUBREC: it holds the identifier until the
    # PUBREL [MQTT-4.3.3-10], so "not found" contradicts its own PUBREC.
    "pubcomp-known": Outcomes(
        R5.MQTT_4_3_3_11,
        PacketType.PUBCOMP,
        frozenset({0x00}),
        "a PUBREL of a QoS 2 flow the receiver acknowledged with PUBREC on this connection is completed",
    ),
    # A PUBREL whose identifier no flow of this connection holds: the receiver still answers [MQTT-4.3.3-11], with
    # 0x92 "Packet Identifier not found" or 0x00 (no statement binds the code; mosquitto 2 sends 0x00).
    "pubcomp-unknown": Outcomes(
        R5.MQTT_4_3_3_11,
        PacketType.PUBCOMP,
        frozenset({0x00, PACKET_ID_NOT_FOUND}),
        "a PUBREL whose Packet Identifier no flow here holds is completed or reported not found",
    ),
    # [MQTT-3.8.4-7] Each SUBACK code grants a QoS up to the one requested, or refuses with a failure code; the
    # codes follow the order of the filters [MQTT-3.9.3-1], which a grant above a filter's request shows broken.
    "suback": Outcomes(
        rules.SUBACK_CODES_IN_ORDER,
        PacketType.SUBACK,
        SUBACK_REFUSALS,
        "each Topic Filter is granted at most the QoS it requested, or refused",
    ),
    # [MQTT-3.11.3-1] A filter the session holds is deleted (0x00) or the unsubscription refused.
    "unsuback-held": Outcomes(
        R5.MQTT_3_11_3_1,
        PacketType.UNSUBACK,
        frozenset({0x00}) | UNSUBACK_REFUSALS,
        "a Topic Filter the session holds is unsubscribed or refused",
    ),
    # A filter the session does not hold: "No subscription existed" is the precise answer, but no statement binds
    # the choice, so 0x00 (Success) is allowed too; such a filter does not show the order either.
    "unsuback-not-held": Outcomes(
        R5.MQTT_3_11_3_1,
        PacketType.UNSUBACK,
        frozenset({0x00, NO_SUBSCRIPTION_EXISTED}) | UNSUBACK_REFUSALS,
        "a Topic Filter the session does not hold is answered as never subscribed (or Success), or refused",
    ),
}


def refuses(code: int | None) -> bool:
    """A 5.0 acknowledgement code reports a failure (a left-out code means Success)."""
    return code is not None and code >= FIRST_FAILURE


# What this module decides, for ``mqttaudit rules``: the statement each situation's answer is judged by.
registry.refer("judge", __name__, "ALLOWED_OUTCOMES", [outcomes.rule for outcomes in ALLOWED_OUTCOMES.values()])
