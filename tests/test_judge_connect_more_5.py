"""MQTT 5.0 duties around CONNECT and CONNACK (judge/handshake_5.py): no server DISCONNECT before a CONNACK that
accepts [MQTT-3.14.0-1], Request Problem Information 0 [MQTT-3.1.2-29], the AUTH exchange [MQTT-4.12.0-1, -2, -4,
-5] and every Topic Alias within the declared maximum accepted [MQTT-3.3.2-12]: each kept, broken and undecided."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec import Property
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig, Judgement, judge

from .cases import explain
from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
CONNECT = codec.Connect(client_id="more5", protocol_level=5, keep_alive=0)
NO_PROBLEMS = codec.Connect(
    client_id="more5", protocol_level=5, keep_alive=0, properties=make(request_problem_information=0)
)
METHOD = Property(0x15, "SCRAM-SHA-1")
AUTHENTICATING = codec.Connect(client_id="more5", protocol_level=5, keep_alive=0, properties=(METHOD,))
CONTINUE = codec.Auth(reason_code=0x18, properties=(METHOD,))
ALIASES = codec.Connack(properties=make(topic_alias_maximum=10))
PINGREQ, PINGRESP = codec.Pingreq(), codec.Pingresp()


def talk() -> Talk:
    return Talk(version="5")


def run(conversation: Talk) -> Judgement:
    return judge(conversation.events, V5)


def failed(judgement: Judgement, rule: str) -> list[codec.Direction]:
    return [finding.side for finding in judgement.findings if rule in finding.rules]


def aliased(alias: int, topic: str = "a/b") -> codec.Publish:
    return codec.Publish(topic=topic, payload=b"x", properties=make(topic_alias=alias))


# [MQTT-3.14.0-1] -------------------------------------------------------------------------------------------


def test_a_server_disconnect_before_the_connack_breaks_3_14_0_1() -> None:
    broken = run(talk().client(CONNECT).server(codec.Disconnect(reason_code=0x81)).closed(S))
    assert failed(broken, "MQTT-3.14.0-1") == [S], explain(broken)
    after_refusal = talk().client(CONNECT).server(codec.Connack(return_code=0x85), codec.Disconnect(reason_code=0x85))
    judgement = run(after_refusal.closed(S))
    assert failed(judgement, "MQTT-3.14.0-1") == [S], explain(judgement)


def test_a_server_disconnect_after_a_connack_that_accepts_keeps_3_14_0_1() -> None:
    kept = run(talk().client(CONNECT).server(codec.Connack(), codec.Disconnect(reason_code=0x8B)).closed(S))
    assert "MQTT-3.14.0-1" in kept.passed and kept.findings == (), explain(kept)
    # A refusal followed by the close alone keeps it too; an open connection without a CONNACK decides nothing.
    refused = run(talk().client(CONNECT).server(codec.Connack(return_code=0x85)).closed(S))
    assert "MQTT-3.14.0-1" in refused.passed, explain(refused)
    silent = run(talk().client(CONNECT).quiet(after=1))
    assert "MQTT-3.14.0-1" not in silent.assessed


def test_3_14_0_1_is_no_3_1_1_statement() -> None:
    three = Talk().client(codec.Connect(client_id="more5", keep_alive=0)).server(codec.Connack()).closed(S)
    assert "MQTT-3.14.0-1" not in run(three).assessed


# [MQTT-3.1.2-29] -------------------------------------------------------------------------------------------


def test_problem_information_in_an_acknowledgement_after_request_problem_information_0_breaks_3_1_2_29() -> None:
    reason = codec.Puback(packet_id=1, reason_code=0x10, properties=make(reason_string="no subscribers"))
    publish = codec.Publish(topic="a", payload=b"x", qos=1, packet_id=1)
    broken = run(talk().client(NO_PROBLEMS).server(codec.Connack()).client(publish).server(reason).quiet(after=1))
    assert failed(broken, "MQTT-3.1.2-29") == [S], explain(broken)
    user = codec.Suback(packet_id=2, return_codes=(0,), properties=(Property(0x26, ("k", "v")),))
    subscribe = codec.Subscribe(packet_id=2, subscriptions=(codec.Subscription(topic_filter="a"),))
    judgement = run(talk().client(NO_PROBLEMS).server(codec.Connack()).client(subscribe).server(user).quiet(after=1))
    assert failed(judgement, "MQTT-3.1.2-29") == [S], explain(judgement)


def test_problem_information_where_it_is_allowed_or_asked_for_keeps_3_1_2_29() -> None:
    publish = codec.Publish(topic="a", payload=b"x", qos=1, packet_id=1)
    plain = codec.Puback(packet_id=1, reason_code=0x10)
    connack = codec.Connack(properties=make(reason_string="welcome"))
    kept = run(talk().client(NO_PROBLEMS).server(connack).client(publish).server(plain).quiet(after=1))
    assert "MQTT-3.1.2-29" in kept.passed and kept.findings == (), explain(kept)
    # Asked for (the default 1): a Reason String anywhere is no finding, and the statement is not assessed.
    reason = codec.Puback(packet_id=1, reason_code=0x10, properties=make(reason_string="no subscribers"))
    asked = run(talk().client(CONNECT).server(codec.Connack()).client(publish).server(reason).quiet(after=1))
    assert "MQTT-3.1.2-29" not in asked.assessed and asked.findings == (), explain(asked)
    # Only a PINGRESP (no properties to carry) decides nothing.
    ping = run(talk().client(NO_PROBLEMS).server(codec.Connack()).client(PINGREQ).server(PINGRESP).quiet(after=1))
    assert "MQTT-3.1.2-29" not in ping.assessed


# [MQTT-4.12.0-1, -2, -4, -5] -------------------------------------------------------------------------------


def test_an_unsupported_method_refused_then_closed_keeps_4_12_0_1() -> None:
    kept = run(talk().client(AUTHENTICATING).server(codec.Connack(return_code=0x8C)).closed(S))
    assert "MQTT-4.12.0-1" in kept.passed and kept.findings == (), explain(kept)
    broken = run(talk().client(AUTHENTICATING).server(codec.Connack(return_code=0x8C)).quiet(after=10))
    assert failed(broken, "MQTT-4.12.0-1") == [S], explain(broken)
    # Refused for another reason: the close is owed under MQTT-3.2.2-7 alone.
    other = run(talk().client(AUTHENTICATING).server(codec.Connack(return_code=0x85)).closed(S))
    assert "MQTT-4.12.0-1" not in other.assessed


def test_a_method_accepted_without_being_taken_up_breaks_4_12_0_1_once() -> None:
    """CONNACK 0x00 naming no Authentication Method, no AUTH before it: the server accepted the connection as one
    that does not support the method (one that does names it in the CONNACK), where it must close. One finding,
    under MQTT-4.12.0-1, not MQTT-4.12.0-5 as well."""
    ignored = run(talk().client(AUTHENTICATING).server(codec.Connack()).quiet(after=1))
    assert failed(ignored, "MQTT-4.12.0-1") == [S], explain(ignored)
    assert failed(ignored, "MQTT-4.12.0-5") == [], explain(ignored)
    # Another method named, or the method taken up by an exchange: the CONNACK breaks MQTT-4.12.0-5.
    other = run(
        talk().client(AUTHENTICATING).server(codec.Connack(properties=(Property(0x15, "PLAIN"),))).quiet(after=1)
    )
    assert failed(other, "MQTT-4.12.0-5") == [S] and "MQTT-4.12.0-1" not in other.assessed, explain(other)
    exchanged = talk().client(AUTHENTICATING).server(CONTINUE).client(CONTINUE).server(codec.Connack()).quiet(after=1)
    taken_up = run(exchanged)
    assert failed(taken_up, "MQTT-4.12.0-5") == [S] and "MQTT-4.12.0-1" not in taken_up.assessed, explain(taken_up)
    named = run(talk().client(AUTHENTICATING).server(codec.Connack(properties=(METHOD,))).quiet(after=1))
    assert named.findings == () and "MQTT-4.12.0-5" in named.passed, explain(named)


def test_an_exchange_refused_is_closed_on_under_4_12_0_4() -> None:
    exchange = talk().client(AUTHENTICATING).server(CONTINUE).client(CONTINUE)
    kept = run(exchange.server(codec.Connack(return_code=0x87)).closed(S))
    assert {"MQTT-4.12.0-4", "MQTT-4.12.0-2", "MQTT-4.12.0-5"} <= kept.passed and kept.findings == (), explain(kept)
    left_open = talk().client(AUTHENTICATING).server(CONTINUE).client(CONTINUE)
    broken = run(left_open.server(codec.Connack(return_code=0x87)).quiet(after=10))
    assert failed(broken, "MQTT-4.12.0-4") == [S], explain(broken)
    assert "MQTT-4.12.0-1" not in broken.assessed


def test_a_server_auth_before_the_connack_without_0x18_breaks_4_12_0_2() -> None:
    success = codec.Auth(reason_code=0x00, properties=(METHOD,))
    broken = run(talk().client(AUTHENTICATING).server(success).quiet(after=1))
    assert failed(broken, "MQTT-4.12.0-2") == [S], explain(broken)
    # After the CONNACK (re-authentication) 0x00 is how the server ends an exchange: not judged under 4.12.0-2.
    reauth = talk().client(AUTHENTICATING).server(codec.Connack(properties=(METHOD,)))
    later = run(reauth.client(codec.Auth(reason_code=0x19, properties=(METHOD,))).server(success).quiet(after=1))
    assert "MQTT-4.12.0-2" not in later.assessed and later.findings == (), explain(later)


def test_an_auth_with_another_method_breaks_4_12_0_5_on_either_side() -> None:
    other = codec.Auth(reason_code=0x18, properties=(Property(0x15, "PLAIN"),))
    server = run(talk().client(AUTHENTICATING).server(other).quiet(after=1))
    assert failed(server, "MQTT-4.12.0-5") == [S], explain(server)
    none = run(talk().client(AUTHENTICATING).server(codec.Auth(reason_code=0x18)).quiet(after=1))
    assert failed(none, "MQTT-4.12.0-5") == [S], explain(none)
    client = run(talk().client(AUTHENTICATING).server(CONTINUE).client(other).quiet(after=1))
    assert failed(client, "MQTT-4.12.0-5") == [C], explain(client)


# [MQTT-3.3.2-12] -------------------------------------------------------------------------------------------


def test_a_disconnect_0x94_for_an_alias_within_the_maximum_breaks_3_3_2_12() -> None:
    opened = talk().client(CONNECT).server(ALIASES)
    broken = run(opened.client(aliased(1), aliased(10)).server(codec.Disconnect(reason_code=0x94)).closed(S))
    assert failed(broken, "MQTT-3.3.2-12") == [S], explain(broken)


def test_aliases_within_the_maximum_taken_keep_3_3_2_12() -> None:
    opened = talk().client(CONNECT).server(ALIASES).client(aliased(1), aliased(1, ""), aliased(10))
    kept = run(opened.client(PINGREQ).server(PINGRESP).client(codec.Disconnect()).closed(C))
    assert "MQTT-3.3.2-12" in kept.passed and kept.findings == (), explain(kept)


def test_an_alias_out_of_range_or_a_bare_close_leaves_3_3_2_12_undecided() -> None:
    beyond = talk().client(CONNECT).server(ALIASES).client(aliased(1), aliased(11))
    refused = run(beyond.server(codec.Disconnect(reason_code=0x94)).closed(S))
    assert "MQTT-3.3.2-12" not in refused.assessed, explain(refused)
    closed = run(talk().client(CONNECT).server(ALIASES).client(aliased(1)).closed(S))
    assert "MQTT-3.3.2-12" not in closed.assessed
    assert "closed the connection without a DISCONNECT" in closed.not_assessable["MQTT-3.3.2-12"]
    # No Topic Alias Maximum declared: every alias is beyond it.
    undeclared = run(talk().client(CONNECT).server(codec.Connack()).client(aliased(1)).quiet(after=1))
    assert "MQTT-3.3.2-12" not in undeclared.assessed


# [MQTT-3.2.2-12, -13] --------------------------------------------------------------------------------------


def willing(qos: int = 0, retain: bool = False) -> codec.Connect:
    will = codec.Will(topic="w", message=b"gone", qos=qos, retain=retain)
    return codec.Connect(client_id="more5", protocol_level=5, keep_alive=0, will=will)


def test_a_will_beyond_the_declared_maximum_qos_accepted_breaks_3_2_2_12() -> None:
    declared = codec.Connack(properties=make(maximum_qos=0))
    broken = run(talk().client(willing(qos=1)).server(declared).quiet(after=1))
    assert failed(broken, "MQTT-3.2.2-12") == [S], explain(broken)
    # Within the declared maximum (or none declared: 2) it is no instance of the statement.
    for connack in (codec.Connack(properties=make(maximum_qos=1)), codec.Connack()):
        within = run(talk().client(willing(qos=1)).server(connack).quiet(after=1))
        assert "MQTT-3.2.2-12" not in within.assessed and within.findings == (), explain(within)


def test_a_will_qos_refused_with_0x9b_is_closed_on_under_3_2_2_12() -> None:
    kept = run(talk().client(willing(qos=2)).server(codec.Connack(return_code=0x9B)).closed(S))
    assert "MQTT-3.2.2-12" in kept.passed and kept.findings == (), explain(kept)
    left_open = run(talk().client(willing(qos=2)).server(codec.Connack(return_code=0x9B)).quiet(after=10))
    assert failed(left_open, "MQTT-3.2.2-12") == [S], explain(left_open)
    # 0x9B to a CONNECT whose Will is QoS 0 (or that has none) is no refusal of a Will QoS.
    other = run(talk().client(willing(qos=0)).server(codec.Connack(return_code=0x9B)).closed(S))
    assert "MQTT-3.2.2-12" not in other.assessed


def test_a_retained_will_without_retain_available_breaks_or_keeps_3_2_2_13() -> None:
    declared = codec.Connack(properties=make(retain_available=0))
    broken = run(talk().client(willing(retain=True)).server(declared).quiet(after=1))
    assert failed(broken, "MQTT-3.2.2-13") == [S], explain(broken)
    kept = run(talk().client(willing(retain=True)).server(codec.Connack(return_code=0x9A)).closed(S))
    assert "MQTT-3.2.2-13" in kept.passed and kept.findings == (), explain(kept)
    left_open = run(talk().client(willing(retain=True)).server(codec.Connack(return_code=0x9A)).quiet(after=10))
    assert failed(left_open, "MQTT-3.2.2-13") == [S], explain(left_open)
    not_retained = run(talk().client(willing()).server(declared).quiet(after=1))
    assert "MQTT-3.2.2-13" not in not_retained.assessed


# [MQTT-4.13.2-1] -------------------------------------------------------------------------------------------


def test_a_connack_or_disconnect_of_0x80_or_above_is_followed_by_the_close_4_13_2_1() -> None:
    refused = run(talk().client(CONNECT).server(codec.Connack(return_code=0x87)).closed(S))
    assert "MQTT-4.13.2-1" in refused.passed and refused.findings == (), explain(refused)
    told = run(talk().client(CONNECT).server(codec.Connack(), codec.Disconnect(reason_code=0x81)).closed(S))
    assert "MQTT-4.13.2-1" in told.passed, explain(told)
    # The client closing first leaves it undecided, as the close after any DISCONNECT [MQTT-3.14.4-2].
    peer = run(talk().client(CONNECT).server(codec.Connack(), codec.Disconnect(reason_code=0x81)).closed(C))
    assert "peer closed first" in peer.not_assessable["MQTT-4.13.2-1"], explain(peer)
    left_open = run(talk().client(CONNECT).server(codec.Connack(), codec.Disconnect(reason_code=0x81)).quiet(after=10))
    assert S in failed(left_open, "MQTT-4.13.2-1"), explain(left_open)
    client = run(talk().client(CONNECT).server(codec.Connack()).client(codec.Disconnect(reason_code=0x80)).quiet(10))
    assert C in failed(client, "MQTT-4.13.2-1"), explain(client)


def test_codes_below_0x80_owe_no_close_under_4_13_2_1() -> None:
    normal = run(talk().client(CONNECT).server(codec.Connack(), codec.Disconnect(reason_code=0x00)).closed(S))
    assert "MQTT-4.13.2-1" not in normal.assessed
    will = run(talk().client(CONNECT).server(codec.Connack()).client(codec.Disconnect(reason_code=0x04)).closed(C))
    assert "MQTT-4.13.2-1" not in will.assessed
