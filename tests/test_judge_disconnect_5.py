"""The judge on a server's MQTT 5.0 DISCONNECT and on what a small client Maximum Packet Size asks of a CONNACK:
no Session Expiry Interval in it [MQTT-3.14.2-2], nothing after it [MQTT-3.14.4-1], the close after it
[MQTT-3.14.4-2], and a CONNACK without the Reason String or User Property that would take it over the client's
Maximum Packet Size [MQTT-3.2.2-19, -20]."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig, Sent, judge

from .cases import explain
from .talk import S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
CONNECT = codec.Connect(client_id="five", protocol_level=5, keep_alive=0)
SMALL = codec.Connect(client_id="five", protocol_level=5, keep_alive=0, properties=make(maximum_packet_size=24))
TAKEN_OVER = codec.Disconnect(reason_code=0x8E)


def talk(connect: codec.Connect = CONNECT) -> Talk:
    return Talk(version="5").client(connect)


def test_a_server_disconnect_without_session_expiry_then_the_close_keeps_every_disconnect_rule() -> None:
    judgement = judge(talk().server(codec.Connack()).server(TAKEN_OVER).closed(S).events, V5)
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-3.14.2-2", "MQTT-3.14.4-1", "MQTT-3.14.4-2"} <= judgement.passed


def test_a_session_expiry_in_a_server_disconnect_is_the_codecs_finding_not_a_pass() -> None:
    carrying = codec.Disconnect(reason_code=0x8E, properties=make(session_expiry_interval=10))
    events = talk().server(codec.Connack()).server(carrying).closed(S).events
    assert "MQTT-3.14.2-2" not in judge(events, V5).passed
    frames = [e.frame for e in events if isinstance(e, Sent) and e.sender is S]
    assert any(v.rule == "MQTT-3.14.2-2" for frame in frames for v in frame.violations)


def test_a_packet_after_the_servers_disconnect_breaks_3_14_4_1() -> None:
    sent = talk().server(codec.Connack()).server(TAKEN_OVER).server(codec.Pingresp()).closed(S)
    judgement = judge(sent.events, V5)
    assert [f.side for f in judgement.findings if "MQTT-3.14.4-1" in f.rules] == [S]


def test_a_pingreq_the_client_sends_after_the_servers_disconnect_is_owed_no_pingresp() -> None:
    # e0 02 82 00 (Protocol Error) answers a PUBREC; the PINGREQ that follows it finds the server done talking: only
    # the close it owes after its DISCONNECT is missing [MQTT-3.14.4-2], never a PINGRESP [MQTT-3.12.4-1].
    stray = codec.Pubrec(packet_id=7, reason_code=0x00)
    protocol_error = codec.Disconnect(reason_code=0x82)
    sent = talk().server(codec.Connack()).client(stray).server(protocol_error).client(codec.Pingreq())
    judgement = judge(sent.quiet(after=6.0).events, V5)  # past the 5 s grace
    assert "MQTT-3.12.4-1" not in judgement.failed, explain(judgement)
    assert "MQTT-3.14.4-2" in judgement.failed
    # before the DISCONNECT the same PINGREQ is owed its PINGRESP
    owed = talk().server(codec.Connack()).client(stray).client(codec.Pingreq()).quiet(after=6.0)
    assert "MQTT-3.12.4-1" in judge(owed.events, V5).failed


def test_nothing_after_the_servers_disconnect_is_not_assessable_while_the_connection_stays_open() -> None:
    judgement = judge(talk().server(codec.Connack()).server(TAKEN_OVER).quiet(after=0.1).events, V5)
    assert "MQTT-3.14.4-1" in judgement.not_assessable


def test_a_connack_within_the_clients_maximum_keeps_3_2_2_19_and_20() -> None:
    judgement = judge(talk(SMALL).server(codec.Connack(return_code=0x8C)).closed(S).events, V5)
    assert {"MQTT-3.2.2-19", "MQTT-3.2.2-20"} <= judgement.passed, explain(judgement)


def test_a_reason_string_or_user_property_that_takes_a_connack_over_the_maximum_breaks_its_rule() -> None:
    wordy = codec.Connack(return_code=0x8C, properties=make(reason_string="unsupported authentication method"))
    judgement = judge(talk(SMALL).server(wordy).closed(S).events, V5)
    assert {rule for f in judgement.findings if f.side is S for rule in f.rules} >= {"MQTT-3.2.2-19"}
    assert "MQTT-3.2.2-20" not in judgement.failed
    tagged = codec.Connack(return_code=0x8C, properties=make(user_property=("why", "unsupported method")))
    judgement = judge(talk(SMALL).server(tagged).closed(S).events, V5)
    assert "MQTT-3.2.2-20" in {rule for f in judgement.findings if f.side is S for rule in f.rules}
