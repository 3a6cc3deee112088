"""How a 5.0 server must react to a defective CONNECT: close on a Malformed Packet [MQTT-3.1.4-1], and accept (or
refuse) one whose only defect is a value the specification defines no error for (the shapes of the shared captures
mqtt5-excessiveproplen.pcap and mqtt5-sub-mosquittoprops.pcap)."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec import Property
from mqttaudit.judge import JudgeConfig, judge

from .cases import explain
from .talk import S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
#: Payload Format Indicator 144 in the Will Properties: 3.1.3.2.3 defines 0 and 1 and names no error for others.
ODD_WILL = codec.Will(topic="willtopic", message=b"willmessage", properties=(Property(0x01, 144),))
CONNECT_ODD_WILL = codec.Connect(client_id="myvoiceismypassport", protocol_level=5, keep_alive=0, will=ODD_WILL)
#: A CONNECT whose Property Length (ff 21 = 4351) runs past the packet [MQTT-2.2.2-property-length].
CONNECT_OVERRUN = bytes.fromhex("10 14 00 04 4d 51 54 54 05 02 00 3c ff 21 00 14 00 05 66 69 76 65")
SUBSCRIBE = codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="topicX"),))
SUBACK = codec.Suback(packet_id=1, return_codes=(0,))


def test_a_will_payload_format_indicator_of_144_is_the_clients_fault_alone() -> None:
    accepted = Talk(version="5").client(CONNECT_ODD_WILL).server(codec.Connack()).client(SUBSCRIBE).server(SUBACK)
    assert [v.rule for v in accepted.events[0].frame.violations] == ["MQTT-3.3.2-payload-format"]  # the codec's finding
    judgement = judge(accepted.closed(S, after=1).events, V5)
    # Accepting it and answering the SUBSCRIBE that follows is no offence: no statement makes the server close.
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-3.1.4-5", "MQTT-3.8.4-1"} <= judgement.passed
    assert "MQTT-3.1.4-1" not in judgement.assessed


def test_a_property_length_past_the_connect_is_malformed_and_accepting_it_fails_3_1_4_1() -> None:
    talk = Talk(version="5").client(CONNECT_OVERRUN)
    assert "MQTT-2.2.2-property-length" in {v.rule for v in talk.events[0].frame.violations}
    accepted = judge(talk.server(codec.Connack()).closed(S).events, V5)
    assert {(rule, f.side) for f in accepted.findings for rule in f.rules} >= {("MQTT-3.1.4-1", S)}, explain(accepted)
    # Closing instead, after a CONNACK of 0x80 or above or none, keeps it.
    for answer in ((), (codec.Connack(return_code=0x81),)):
        kept = judge(Talk(version="5").client(CONNECT_OVERRUN).server(*answer).closed(S).events, V5)
        assert kept.findings == (), explain(kept)
        assert "MQTT-3.1.4-1" in kept.passed
