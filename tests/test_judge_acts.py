"""One act, one finding: the statements one act breaks are one finding, citing the most specific statement, the
others failed with it (``Finding.also``), never a finding of their own; and what makes two findings two acts.

The bytes are those the capture audit met: a QoS 1 PUBLISH reusing a Packet Identifier still in flight, and a CONNECT
whose Property Length runs past the packet (ff 21, Suricata's mqtt5-excessiveproplen.pcap) accepted with CONNACK
0x00. The audit-level counterparts are in ``test_audit_acts.py``."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, JudgeConfig, judge
from mqttaudit.judge.verdict import Ledger
from mqttaudit.spec import identity

from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
WAIT = 10.0  # past JudgeConfig().answer_timeout


def connected(version: str) -> Talk:
    level = 5 if version == "5" else 4
    talk = Talk(version=version).client(codec.Connect(client_id="acts", protocol_level=level, keep_alive=0))
    return talk.server(codec.Connack())


def acts(judgement: Judgement, side: codec.Direction) -> list[tuple[str, tuple[str, ...]]]:
    """(statement cited, statements failed with it) of each finding against ``side``."""
    return [(str(f.rule), tuple(map(str, f.also))) for f in judgement.findings if f.side is side]


# The ledger: what one act is ------------------------------------------------------------------------------------


def test_an_act_reported_again_under_another_statement_joins_the_first_finding() -> None:
    ledger = Ledger("c", version=identity.V5)
    ledger.fail("MQTT-4.8.0-1", S, 1.0, 3, "SUBACK answers the offending packet", "the server closes")
    ledger.fail("MQTT-4.7.3-1", S, 1.0, 3, "SUBACK answers the offending packet", "filters are not empty")
    judgement = ledger.judgement()
    [finding] = judgement.findings
    assert (finding.rule, finding.also) == ("MQTT-4.13.1-1", ("MQTT-4.7.3-1",))  # 3.1.1's key, named in 5.0
    assert finding.expected == "the server closes; filters are not empty"
    assert {"MQTT-4.13.1-1", "MQTT-4.7.3-1"} <= judgement.failed
    assert not judgement.passed & judgement.failed


def test_other_observations_other_causes_and_other_sides_are_other_acts() -> None:
    ledger = Ledger("c")
    ledger.fail("MQTT-3.3.2-3", S, 1.0, 5, "PUBLISH to 'a' matches no filter", "", kind="leak")
    ledger.fail("MQTT-3.8.4-6", S, 1.0, 5, "PUBLISH to 'a' exceeds the QoS granted", "", kind="qos")
    ledger.fail("MQTT-4.3.2-2", S, 2.0, 9, "no PUBACK for event 4", "", cause=4)
    ledger.fail("MQTT-4.3.2-2", S, 2.0, 9, "no PUBACK for event 6", "", cause=6)
    ledger.fail("MQTT-4.8.0-1", C, 2.0, 9, "no close", "")
    assert len(ledger.judgement().findings) == 5


def test_statements_the_version_does_not_state_are_left_out_of_the_act() -> None:
    ledger = Ledger("c")  # 3.1.1
    finding = ledger.fail("MQTT-2.3.1-2", C, 1.0, 2, "reuses id 1", "", also=["MQTT-4.3.2-3"])  # 5.0 only
    assert finding is not None and (finding.rule, finding.also) == ("MQTT-2.3.1-2", ())


# A Packet Identifier still in flight, reused (MQTT 5.0: 2.2.1, 4.3.2, 4.3.3; MQTT 3.1.1: 2.3.1) -------------------


@pytest.mark.parametrize(
    ("side", "qos", "cited", "also"),
    [
        (C, 1, "MQTT-4.3.2-1", ("MQTT-2.2.1-3", "MQTT-4.3.2-3")),
        (S, 1, "MQTT-4.3.2-1", ("MQTT-2.2.1-4", "MQTT-4.3.2-3")),
        (C, 2, "MQTT-4.3.3-1", ("MQTT-2.2.1-3", "MQTT-4.3.3-3")),
        (S, 2, "MQTT-4.3.3-1", ("MQTT-2.2.1-4", "MQTT-4.3.3-3")),
    ],
)
def test_a_new_message_under_an_identifier_in_flight_is_one_finding_of_its_delivery_protocol(
    side: codec.Direction, qos: int, cited: str, also: tuple[str, ...]
) -> None:
    # 5.0 PUBLISH QoS 1 id 7 'a' 'x' (32 05 00 01 61 00 07 00 78 for QoS 1), then another message under id 7 before
    # its PUBACK / PUBREC: the sender has a new Application Message for an identifier in use.
    first = codec.Publish(topic="a", payload=b"x", qos=qos, packet_id=7)
    second = codec.Publish(topic="a", payload=b"y", qos=qos, packet_id=7)
    judgement = judge(connected("5").send(side, first, second).quiet(after=WAIT).events, V5)
    reuse = [act for act in acts(judgement, side) if act[0] == cited]
    assert reuse == [(cited, also)]
    assert {cited, *also} <= judgement.failed and not {cited, *also} & judgement.passed


def test_with_dup_1_the_new_message_breaks_its_first_dup_0_too_in_the_same_finding() -> None:
    # QoS 2 id 7, then QoS 1 id 7 with DUP 1 (another QoS, so no re-send): one act, four statements.
    first = codec.Publish(topic="a", payload=b"x", qos=2, packet_id=7)
    second = codec.Publish(topic="a", payload=b"y", qos=1, packet_id=7, dup=True)
    judgement = judge(connected("5").client(first, second).quiet(after=WAIT).events, V5)
    assert ("MQTT-4.3.2-1", ("MQTT-2.2.1-3", "MQTT-4.3.3-3", "MQTT-4.3.2-2")) in acts(judgement, C)


def test_a_subscribe_under_an_identifier_in_flight_cites_the_identifier_statement_alone() -> None:
    talk = connected("5").client(codec.Publish(topic="a", payload=b"x", qos=1, packet_id=7))
    talk.client(codec.Subscribe(packet_id=7, subscriptions=(codec.Subscription(topic_filter="a"),)))
    judgement = judge(talk.quiet(after=WAIT).events, V5)
    assert ("MQTT-2.2.1-3", ()) in acts(judgement, C)


def test_in_3_1_1_the_reuse_cites_mqtt_2_3_1_2_once() -> None:
    # 3.1.1's MQTT-4.3.2-1 joins the identifier, DUP and unacknowledged duties in one statement: not judged as one.
    first = codec.Publish(topic="a", payload=b"x", qos=1, packet_id=7)
    judgement = judge(connected("3.1.1").client(first, first).quiet(after=WAIT).events)
    assert [act for act in acts(judgement, C) if "MQTT-2.3.1-2" in act] == [("MQTT-2.3.1-2", ())]


# A malformed CONNECT accepted ------------------------------------------------------------------------------------

#: The CONNECT of mqtt5-excessiveproplen.pcap up to its Property Length ff 21 (4351), 35 bytes left in the packet.
BAD_PROPERTY_LENGTH = bytes.fromhex("10 2f 00 04 4d 51 54 54 05 c2 00 3c ff 21") + bytes(35)


def test_a_server_accepting_a_property_length_past_the_connect_is_one_finding_of_its_connect_duty() -> None:
    # As captured: CONNACK 20 06 00 00 (0x00 Success), then the client closes (the close owed is not assessable).
    talk = Talk(version="5").client(BAD_PROPERTY_LENGTH).server(codec.Connack(properties=make()))
    judgement = judge(talk.closed(C).events, V5)
    assert acts(judgement, S) == [("MQTT-3.1.4-1", ("MQTT-2.2.2-property-length",))]
    assert {"MQTT-3.1.4-1", "MQTT-2.2.2-property-length"} <= judgement.failed
