"""Leniency in MQTT 5.0 (section 4.13.1): a receiver that accepts a defect no statement binds it to detect is lenient,
one entry per offence under the rule the packet broke, with the basis; where a statement binds it (MQTT-3.8.3-5,
the fixed-header flags of PUBREL, SUBSCRIBE, UNSUBSCRIBE, DISCONNECT and AUTH), it fails as before; 3.1.1's
MQTT-4.8.0-1 binds every receiver, so 3.1.1 verdicts do not change. Conversations written as bytes."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.judge import JudgeConfig, Judgement, judge
from mqttaudit.spec.ids import R5, R311

from .cases import explain, lenient_of
from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
CONNECT_5 = codec.Connect(client_id="lenient", protocol_level=5, keep_alive=0)
#: SUBSCRIBE id 1, no properties, one empty Topic Filter with Subscription Options 0 (MQTT-4.7.3-1).
EMPTY_FILTER_5 = "82 06 0001 00 0000 00"
#: SUBSCRIBE id 1, no properties, filter "a" with Subscription Options 0xc0: the reserved bits 7-6 (MQTT-3.8.3-5).
RESERVED_BITS_5 = "82 07 0001 00 0001 61 c0"
#: Both defects in one SUBSCRIBE: an empty filter with Subscription Options 0xc0.
BOTH_5 = "82 06 0001 00 0000 c0"
#: The 3.1.1 SUBSCRIBE of the issue: id 1, one empty Topic Filter, Requested QoS 0.
EMPTY_FILTER_3_1_1 = "82 05 00 01 00 00 00"
SUBACK_5 = "90 04 0001 00 00"  # granted QoS 0


def five() -> Talk:
    return Talk(version="5").client(CONNECT_5).server(codec.Connack())


def judged(talk: Talk) -> Judgement:
    return judge(talk.events, V5)


def against(judgement: Judgement, side: codec.Direction = S) -> set[str]:
    return {rule for f in judgement.findings if f.side is side for rule in f.rules}


def test_a_5_0_server_that_subacks_an_empty_topic_filter_is_lenient_once_not_failing() -> None:
    judgement = judged(five().client(EMPTY_FILTER_5).server(SUBACK_5).quiet(after=10))
    assert against(judgement) == set(), explain(judgement)
    (entry,) = judgement.lenient  # the SUBACK, and the connection left open after it: one act, one entry
    assert (entry.rule, entry.side, entry.event, entry.cause) == (R5.MQTT_4_7_3_1, S, 3, 2)
    assert entry.rule.version == "5.0" and entry.rule.rule.actor == "both"
    assert "SUBACK id 1 (event 3) answers the offending packet" in entry.detail
    assert "Topic Filter is empty" in entry.detail
    assert "MQTT-4.7.3-1 binds whoever sends it" in entry.basis
    assert "4.13.1" in entry.basis and "[MQTT-4.13.1-1]" in entry.basis


def test_a_5_0_server_left_open_on_an_empty_filter_is_lenient_at_the_offending_packet() -> None:
    judgement = judged(five().client(EMPTY_FILTER_5).quiet(after=10))
    assert against(judgement) == set(), explain(judgement)
    (entry,) = judgement.lenient
    assert (entry.rule, entry.side, entry.event, entry.cause) == (R5.MQTT_4_7_3_1, S, 2, -1)
    assert "the server did not close the connection within" in entry.detail


def test_a_5_0_server_that_closes_on_an_empty_filter_keeps_the_rules_and_is_not_lenient() -> None:
    judgement = judged(five().client(EMPTY_FILTER_5).closed(S))
    assert judgement.findings == () and judgement.lenient == (), explain(judgement)
    assert {R5.MQTT_4_13_1_1, R5.MQTT_4_7_3_1} <= judgement.passed


def test_a_5_0_server_refusing_an_empty_filter_without_closing_is_lenient() -> None:
    refused = judged(five().client(EMPTY_FILTER_5).server("90 04 0001 00 80").quiet(after=10))
    assert against(refused) == set(), explain(refused)
    assert [(x.rule, x.event) for x in refused.lenient] == [(R5.MQTT_4_7_3_1, 3)]
    assert "refuses the offending packet instead of closing" in refused.lenient[0].detail


def test_a_5_0_server_that_accepts_reserved_subscription_option_bits_fails_3_8_3_5() -> None:
    judgement = judged(five().client(RESERVED_BITS_5).server(SUBACK_5).quiet(after=10))
    assert judgement.lenient == (), explain(judgement)
    assert against(judgement) == {R5.MQTT_3_8_3_5, R5.MQTT_4_13_1_1}, explain(judgement)
    acted = [f for f in judgement.findings if f.event == 3]
    # one act, one finding: the SUBACK cites the binding statement, the close [MQTT-4.13.1-1] failed with it
    assert [f.rules for f in acted] == [(R5.MQTT_3_8_3_5, R5.MQTT_4_13_1_1)]
    assert all("answers the offending packet" in f.detail for f in acted)
    assert R5.MQTT_3_8_3_5.rule.actor == "server" and R5.MQTT_3_8_3_5.rule.level == "MUST"


def test_a_bound_defect_beside_an_unbound_one_fails_under_the_binding_statement() -> None:
    judgement = judged(five().client(BOTH_5).server(SUBACK_5).quiet(after=10))
    assert judgement.lenient == (), explain(judgement)
    assert R5.MQTT_3_8_3_5 in against(judgement)


def test_a_3_1_1_broker_that_subacks_an_empty_filter_still_fails() -> None:
    """MQTT-4.8.0-1: a Client or Server that encounters a protocol violation closes; receiving the packet is
    encountering it, so 3.1.1 verdicts stay fails."""
    talk = Talk().client(codec.Connect(client_id="old")).server(codec.Connack()).client(EMPTY_FILTER_3_1_1)
    judgement = judge(talk.server("90 03 0001 00").quiet(after=10).events)
    assert judgement.lenient == (), explain(judgement)
    assert {R311.MQTT_4_7_3_1, R311.MQTT_4_8_0_1} == against(judgement)
    assert {f.event for f in judgement.findings if R311.MQTT_4_8_0_1 in f.rules} == {3, 4}  # the SUBACK; left open


def test_a_5_0_client_is_lenient_on_a_servers_malformed_packet_but_bound_by_disconnect_flags() -> None:
    """4.13.1: a Client that detects an error SHOULD close; MQTT-3.14.1-1 binds the Client to validate the
    DISCONNECT's reserved bits."""
    subscribed = five().client("82 07 0001 00 0001 61 00").server(SUBACK_5)
    dup = judged(subscribed.server("38 05 0001 61 00 78").quiet(after=10))  # DUP 1 on a QoS 0 PUBLISH
    assert against(dup, C) == set(), explain(dup)
    assert lenient_of(dup, C) == {R5.MQTT_3_3_1_2} and lenient_of(dup, S) == set()
    assert "SHOULD close" in dup.lenient[0].basis
    flags = judged(five().server("e1 00").quiet(after=10))
    assert R5.MQTT_3_14_1_1 in against(flags, C), explain(flags)
    assert flags.lenient == ()
    closed = judged(five().server("e1 00").closed(C))
    assert against(closed, C) == set() and closed.lenient == (), explain(closed)
