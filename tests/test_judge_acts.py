"""One act, one finding: the statements one act breaks are one finding, citing the most specific statement, the
others failed with it (``Finding.also``), never a finding of their own; and what makes two findings two acts.

The bytes are those the capture audit met: a QoS 1 PUBLISH reusing a Packet Identifier still in flight, and a CONNECT
whose Property Length runs past the packet (ff 21, Suricata's mqtt5-excessiveproplen.pcap) accepted with CONNACK
0x00. The audit-level counterparts are in ``test_audit_acts.py``."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig, Judgement, judge
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


# No under-claim: what the conversation decides in spite of what it lacks ----------------------------------------


def order_talk(loss_after_publishes: bool, *, answers: tuple[int, ...]) -> Talk:
    """3.1.1: two server QoS 1 PUBLISHes (ids 1, 2) and the client's PUBACKs in the order ``answers``; 4 client
    bytes lost (a PINGREQ and its PINGRESP's worth) before the PUBLISHes, or between them and the answers."""
    from mqttaudit.judge import Lost

    first = codec.Publish(topic="t", payload=b"1", qos=1, packet_id=1)
    second = codec.Publish(topic="t", payload=b"2", qos=1, packet_id=2)
    talk = connected("3.1.1")
    if not loss_after_publishes:
        talk.events.append(Lost(talk.now + 0.001, C, 2))
        talk.server(codec.Pingresp())
    talk.server(first, second)
    if loss_after_publishes:
        talk.events.append(Lost(talk.now + 0.001, C, 2))
    for packet_id in answers:
        talk.client(codec.Puback(packet_id=packet_id))
    return talk.quiet(after=WAIT)


def test_client_bytes_lost_before_every_publish_leave_the_ack_order_decided() -> None:
    kept = judge(order_talk(False, answers=(1, 2)).events)
    assert "MQTT-4.6.0-2" in kept.passed, kept.not_assessable
    swapped = judge(order_talk(False, answers=(2, 1)).events)
    assert ("MQTT-4.6.0-2", ()) in acts(swapped, C)
    # Lost after the PUBLISHes, the bytes may hold the PUBACK of id 1: the order is open.
    open_ = judge(order_talk(True, answers=(2, 1)).events)
    assert "MQTT-4.6.0-2" in open_.not_assessable and "MQTT-4.6.0-2" not in open_.failed


def test_client_bytes_lost_before_every_pubrec_leave_the_pubrel_order_decided() -> None:
    from mqttaudit.judge import Lost

    talk = connected("3.1.1")
    talk.events.append(Lost(talk.now + 0.001, C, 2))
    talk.server(codec.Pingresp())
    talk.client(codec.Publish(topic="t", payload=b"1", qos=2, packet_id=1))
    talk.client(codec.Publish(topic="t", payload=b"2", qos=2, packet_id=2))
    talk.server(codec.Pubrec(packet_id=1), codec.Pubrec(packet_id=2))
    talk.client(codec.Pubrel(packet_id=2), codec.Pubrel(packet_id=1)).quiet(after=WAIT)
    judgement = judge(talk.events)
    assert ("MQTT-4.6.0-4", ()) in acts(judgement, C), judgement.not_assessable


def resumed(*deliveries: codec.Publish) -> Judgement:
    """3.1.1, CleanSession 0 answered with Session Present 1 (the session's earlier subscriptions are unknown), a
    SUBSCRIBE to 'a/+' at QoS 1 granted, then ``deliveries`` from the server, each acknowledged."""
    talk = Talk().client(codec.Connect(client_id="acts", clean_session=False, keep_alive=0))
    talk.server(codec.Connack(session_present=True))
    talk.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="a/+", qos=1),)))
    talk.server(codec.Suback(packet_id=1, return_codes=(1,)))
    for delivery in deliveries:
        talk.server(delivery)
        if delivery.qos == 1:
            talk.client(codec.Puback(packet_id=delivery.packet_id or 0))
        elif delivery.qos == 2:
            talk.client(codec.Pubrec(packet_id=delivery.packet_id or 0))
            talk.server(codec.Pubrel(packet_id=delivery.packet_id or 0))
            talk.client(codec.Pubcomp(packet_id=delivery.packet_id or 0))
    return judge(talk.quiet(after=WAIT).events)


def test_a_delivery_matching_a_captured_subscribe_matches_a_subscription_whatever_else_the_session_held() -> None:
    judgement = resumed(codec.Publish(topic="a/b", payload=b"m", qos=1, packet_id=5))
    assert {"MQTT-3.3.2-3", "MQTT-3.8.4-6"} <= judgement.passed, judgement.not_assessable


def test_a_delivery_no_captured_subscribe_explains_is_still_not_assessable() -> None:
    # 'b/c' may answer to a subscription of the earlier connection; 'a/b' at QoS 2 to one granting QoS 2.
    judgement = resumed(
        codec.Publish(topic="b/c", payload=b"m"), codec.Publish(topic="a/b", payload=b"m", qos=2, packet_id=5)
    )
    assert {"MQTT-3.3.2-3", "MQTT-3.8.4-6"} <= judgement.not_assessable.keys()
    assert not judgement.findings
