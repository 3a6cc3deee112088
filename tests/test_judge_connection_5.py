"""The judge on MQTT 5.0 connections: the lifecycle (CONNECT, CONNACK, AUTH, DISCONNECT from either side), the
reactions 5.0 allows, and findings named by 5.0 statement ids."""

from __future__ import annotations

from mqttaudit import codec
from mqttaudit.codec import Property
from mqttaudit.judge import JudgeConfig, judge

from .cases import explain, lenient_of
from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
CONNECT = codec.Connect(client_id="five", protocol_level=5, keep_alive=0)
CONNACK_OK = codec.Connack()
PINGREQ, PINGRESP = codec.Pingreq(), codec.Pingresp()
AUTH_METHOD = Property(0x15, "SCRAM-SHA-256")


def talk() -> Talk:
    return Talk(version="5")


def rules_of(t: Talk) -> set[str]:
    return {rule for finding in judge(t.events, V5).findings for rule in finding.rules}


def test_an_accepted_5_0_connection_passes_under_5_0_ids() -> None:
    judgement = judge(
        talk().client(CONNECT).server(CONNACK_OK).client(PINGREQ).server(PINGRESP).quiet(after=1).events, V5
    )
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-3.1.0-1", "MQTT-3.1.4-5", "MQTT-3.2.0-1", "MQTT-3.2.2-2"} <= judgement.passed
    assert "MQTT-3.1.4-4" not in judgement.assessed  # the 3.1.1 id of "CONNACK for a valid CONNECT"


def test_a_refusal_of_0x80_or_above_then_a_close_passes() -> None:
    judgement = judge(talk().client(CONNECT).server(codec.Connack(return_code=0x87)).closed(S).events, V5)
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-3.2.2-7" in judgement.passed


def test_a_refusal_without_the_close_fails_3_2_2_7() -> None:
    assert "MQTT-3.2.2-7" in rules_of(talk().client(CONNECT).server(codec.Connack(return_code=0x87)).quiet(after=10))


def test_a_malformed_connect_may_be_refused_before_the_close() -> None:
    bad_flags = bytes.fromhex("101100044d5154540503000000000004666976650"[:-1])  # reserved Connect Flag bit 0 set
    refused = talk().client(bad_flags).server(codec.Connack(return_code=0x81)).closed(S)
    judgement = judge(refused.events, V5)
    assert judgement.findings == (), explain(judgement)
    accepted = talk().client(bad_flags).server(CONNACK_OK).closed(S)
    assert "MQTT-3.1.4-1" in rules_of(accepted)


def test_a_server_packet_before_the_connack_fails_3_2_0_1() -> None:
    early = talk().client(CONNECT).server(PINGRESP).server(CONNACK_OK).quiet(after=1)
    assert "MQTT-3.2.0-1" in rules_of(early)


def test_after_a_refusal_the_server_sends_nothing_but_the_close() -> None:
    t = talk().client(CONNECT).server(codec.Connack(return_code=0x87)).client(PINGREQ).server(PINGRESP).closed(S)
    assert "MQTT-3.2.0-1" in rules_of(t)


def test_one_connack_per_connection() -> None:
    assert "MQTT-3.2.0-2" in rules_of(talk().client(CONNECT).server(CONNACK_OK).server(CONNACK_OK).quiet(after=1))


def test_nothing_after_a_server_disconnect() -> None:
    t = talk().client(CONNECT).server(CONNACK_OK).server(codec.Disconnect(reason_code=0x8B)).server(PINGRESP)
    findings = judge(t.closed(S).events, V5).findings
    (finding,) = [f for f in findings if "MQTT-3.14.4-1" in f.rules]
    assert finding.side is S


def test_nothing_after_a_client_disconnect_under_its_5_0_id() -> None:
    t = talk().client(CONNECT).server(CONNACK_OK).client(codec.Disconnect()).client(PINGREQ).closed(C)
    assert "MQTT-3.14.4-1" in rules_of(t)


def test_an_authenticating_client_waits_for_the_connack() -> None:
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=0, properties=(AUTH_METHOD,))
    eager = talk().client(connect).client(PINGREQ).server(codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,)))
    assert "MQTT-3.1.2-30" in rules_of(eager.quiet(after=1))
    patient = talk().client(connect).server(codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,)))
    patient = patient.client(codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,))).server(CONNACK_OK)
    judgement = judge(patient.quiet(after=1).events, V5)
    assert not {"MQTT-3.1.2-30", "MQTT-3.2.0-1", "MQTT-4.12.0-6"} & judgement.failed, explain(judgement)


def test_no_auth_from_a_server_whose_client_named_no_method() -> None:
    t = talk().client(CONNECT).server(codec.Auth(reason_code=0x18)).server(CONNACK_OK).quiet(after=1)
    assert "MQTT-4.12.0-6" in rules_of(t)


def test_a_plain_client_id_is_not_refused_as_invalid() -> None:
    t = talk().client(CONNECT).server(codec.Connack(return_code=0x85)).closed(S)
    assert "MQTT-3.1.3-5" in rules_of(t)


def test_the_server_keep_alive_replaces_the_clients() -> None:
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=60)
    connack = codec.Connack(properties=(Property(0x13, 1),))
    silent = talk().client(connect).server(connack).quiet(after=10)
    assert "MQTT-3.1.2-20" in rules_of(silent)  # the client had to speak within the server's 1 s


def test_a_property_defect_accepted_is_leniency_and_closing_on_it_passes() -> None:
    """A duplicate property is a Malformed Packet nothing binds the 5.0 Server to detect (4.13.1): answering it is
    leniency under the rule the client broke, not a failure; closing on it keeps [MQTT-4.13.1-1]."""
    twice = codec.Publish(
        topic="t",
        payload=b"p",
        qos=1,
        retain=False,
        dup=False,
        packet_id=1,
        properties=(Property(0x01, 1), Property(0x01, 1)),
    )
    acted = judge(
        talk().client(CONNECT).server(CONNACK_OK).client(twice).server(codec.Puback(packet_id=1)).closed(S).events, V5
    )
    assert [f for f in acted.findings if f.side is S] == [], explain(acted)
    assert [(x.rule, x.side, x.event, x.cause) for x in acted.lenient] == [("MQTT-2.2.2-property-duplicate", S, 3, 2)]
    assert "MQTT-4.13.1-1" in acted.lenient[0].basis and "PUBACK" in acted.lenient[0].detail
    closed = judge(talk().client(CONNECT).server(CONNACK_OK).client(twice).closed(S).events, V5)
    assert closed.findings == (), explain(closed)
    assert {"MQTT-4.13.1-1", "MQTT-2.2.2-property-duplicate"} <= closed.passed


def test_an_undefined_payload_format_indicator_owes_no_close() -> None:
    odd = codec.Publish(
        topic="t", payload=b"p", qos=1, retain=False, dup=False, packet_id=1, properties=(Property(0x01, 2),)
    )
    judgement = judge(
        talk().client(CONNECT).server(CONNACK_OK).client(odd).server(codec.Puback(packet_id=1)).quiet(after=10).events,
        V5,
    )
    assert "MQTT-4.13.1-1" not in judgement.assessed and judgement.findings == (), explain(judgement)


def test_a_client_owes_no_close_on_a_servers_malformed_packet_in_5_0() -> None:
    bad = bytes.fromhex("d100")  # PINGRESP with a reserved flag bit: the server's violation, the codec's finding
    judgement = judge(talk().client(CONNECT).server(CONNACK_OK).client(PINGREQ).server(bad).quiet(after=10).events, V5)
    assert judgement.findings == (), explain(judgement)


def test_the_connack_is_owed_after_the_clients_last_auth_of_an_exchange() -> None:
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=0, properties=(AUTH_METHOD,))
    challenge = codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,))
    accepted = codec.Connack(properties=(AUTH_METHOD,))  # a CONNACK 0x00 repeats the method [MQTT-4.12.0-5]
    slow_client = talk().client(connect).server(challenge).wait(8).client(challenge).server(accepted)
    judgement = judge(slow_client.quiet(after=1).events, V5)
    assert judgement.findings == (), explain(judgement)  # the server waited for the client, not the other way
    assert "MQTT-3.1.4-5" in judgement.passed
    silent_server = talk().client(connect).server(challenge).client(challenge).quiet(after=10)
    assert "MQTT-3.1.4-5" in rules_of(silent_server)


def test_a_client_auth_without_a_method_is_a_protocol_error_the_server_closes_on() -> None:
    auth = codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,))
    closed = judge(talk().client(CONNECT).server(CONNACK_OK).client(auth).closed(S).events, V5)
    assert {rule for f in closed.findings for rule in f.rules} == {"MQTT-4.12.0-7"}, explain(closed)
    assert "MQTT-4.13.1-1" in closed.passed
    answered = judge(talk().client(CONNECT).server(CONNACK_OK).client(auth).server(auth).quiet(after=10).events, V5)
    assert {f.rule for f in answered.findings if f.side is S} == {"MQTT-4.12.0-6"}, explain(answered)  # its own AUTH
    assert lenient_of(answered, S) == {"MQTT-4.12.0-7"}  # [MQTT-4.12.0-7] binds the client, not its receiver


def test_no_auth_before_the_connack_of_a_connection_without_a_method_passes() -> None:
    judgement = judge(talk().client(CONNECT).server(CONNACK_OK).quiet(after=1).events, V5)
    assert "MQTT-4.12.0-6" in judgement.passed


def test_a_server_that_sent_disconnect_closes_the_connection() -> None:
    sent = talk().client(CONNECT).server(CONNACK_OK).server(codec.Disconnect(reason_code=0x8B))
    closed = judge(sent.closed(S).events, V5)
    assert closed.findings == () and "MQTT-3.14.4-2" in closed.passed, explain(closed)
    by_client = judge(
        talk().client(CONNECT).server(CONNACK_OK).server(codec.Disconnect(reason_code=0x8B)).closed(C).events, V5
    )
    assert by_client.findings == (), explain(by_client)  # the client may close first on it
    left_open = talk().client(CONNECT).server(CONNACK_OK).server(codec.Disconnect(reason_code=0x8B)).quiet(after=10)
    findings = [f for f in judge(left_open.events, V5).findings if "MQTT-3.14.4-2" in f.rules]
    assert [f.side for f in findings] == [S]


def test_an_accepting_connack_repeats_the_authentication_method() -> None:
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=0, properties=(AUTH_METHOD,))
    challenge = codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,))
    without = talk().client(connect).server(challenge).client(challenge).server(CONNACK_OK).quiet(after=1)
    assert "MQTT-4.12.0-5" in rules_of(without)


def test_an_accepted_empty_client_identifier_is_named_in_the_connack() -> None:
    empty = codec.Connect(client_id="", protocol_level=5, keep_alive=0)
    named = codec.Connack(properties=(Property(0x12, "auto-1"),))
    kept = judge(talk().client(empty).server(named).quiet(after=1).events, V5)
    assert {"MQTT-3.2.2-16", "MQTT-3.1.3-7"} <= kept.passed, explain(kept)
    assert {"MQTT-3.2.2-16", "MQTT-3.1.3-7"} <= rules_of(talk().client(empty).server(CONNACK_OK).quiet(after=1))


# Enhanced authentication: the client's breaches the server closes on, re-authentication ------------------------

METHOD_CONNECT = codec.Connect(client_id="five", protocol_level=5, keep_alive=0, properties=(AUTH_METHOD,))
CONTINUE = codec.Auth(reason_code=0x18, properties=(AUTH_METHOD,))


def server_rules(t: Talk) -> set[str]:
    return {rule for f in judge(t.events, V5).findings if f.side is S for rule in f.rules}


def client_rules(t: Talk) -> set[str]:
    return {rule for f in judge(t.events, V5).findings if f.side is C for rule in f.rules}


def server_lenient(t: Talk) -> set[str]:
    return lenient_of(judge(t.events, V5), S)


def test_a_packet_other_than_auth_during_the_authentication_is_closed_on_or_accepted_leniently() -> None:
    """[MQTT-3.1.2-30] is the client's; no statement binds the server to detect it, so answering it or staying open
    is leniency (4.13.1), not a failure."""
    eager = talk().client(METHOD_CONNECT).server(CONTINUE).client(PINGREQ)
    assert "MQTT-3.1.2-30" in client_rules(eager.closed(S))
    assert not server_rules(talk().client(METHOD_CONNECT).server(CONTINUE).client(PINGREQ).closed(S))
    answered = talk().client(METHOD_CONNECT).server(CONTINUE).client(PINGREQ).server(PINGRESP).closed(S)
    assert "MQTT-3.1.2-30" not in server_rules(answered)
    assert server_lenient(answered) == {"MQTT-3.1.2-30"}
    left_open = talk().client(METHOD_CONNECT).server(CONTINUE).client(PINGREQ).quiet(10)
    assert "MQTT-3.1.2-30" not in server_rules(left_open)
    assert server_lenient(left_open) == {"MQTT-3.1.2-30"}


def test_the_clients_answer_to_auth_0x18_continues_with_0x18() -> None:
    """[MQTT-4.12.0-3] An answer of 0x00 or 0x19 is the client's Protocol Error: the server closes, without a CONNACK
    that accepts."""
    kept = talk().client(METHOD_CONNECT).server(CONTINUE).client(CONTINUE).server(CONNACK_OK).quiet(after=1)
    judgement = judge(kept.events, V5)
    assert "MQTT-4.12.0-3" in judgement.passed, explain(judgement)
    for code in (0x00, 0x19):
        bad = codec.Auth(reason_code=code, properties=(AUTH_METHOD,))
        assert "MQTT-4.12.0-3" in client_rules(talk().client(METHOD_CONNECT).server(CONTINUE).client(bad).closed(S))
        closed = talk().client(METHOD_CONNECT).server(CONTINUE).client(bad).closed(S)
        assert "MQTT-4.12.0-3" not in server_rules(closed)
        accepted = talk().client(METHOD_CONNECT).server(CONTINUE).client(bad).server(CONNACK_OK).closed(S)
        assert "MQTT-4.12.0-3" not in server_rules(accepted)  # nothing binds the server to detect it: leniency
        assert server_lenient(accepted) == {"MQTT-4.12.0-3"}


def test_a_re_authentication_names_the_connects_method() -> None:
    """[MQTT-4.12.1-1] AUTH 0x19 under another method: the client's finding; a server that goes on is lenient."""
    accepted = codec.Connack(properties=(AUTH_METHOD,))
    other = codec.Auth(reason_code=0x19, properties=(Property(0x15, "OTHER"),))
    start = talk().client(METHOD_CONNECT).server(CONTINUE).client(CONTINUE).server(accepted)
    assert {"MQTT-4.12.1-1", "MQTT-4.12.0-5"} <= client_rules(start.client(other).closed(S))
    going_on = talk().client(METHOD_CONNECT).server(CONTINUE).client(CONTINUE).server(accepted).client(other)
    assert server_lenient(going_on.server(CONTINUE).quiet(after=10)) == {"MQTT-4.12.1-1"}
    same = codec.Auth(reason_code=0x19, properties=(AUTH_METHOD,))
    fine = talk().client(METHOD_CONNECT).server(CONTINUE).client(CONTINUE).server(accepted).client(same)
    judgement = judge(fine.server(codec.Auth(reason_code=0x00, properties=(AUTH_METHOD,))).quiet(after=1).events, V5)
    assert "MQTT-4.12.1-1" in judgement.passed, explain(judgement)


def test_a_failed_re_authentication_ends_with_the_close() -> None:
    """[MQTT-4.12.1-2] A DISCONNECT (or a CONNACK) answering a re-authentication says it failed: the close follows."""
    accepted = codec.Connack(properties=(AUTH_METHOD,))
    same = codec.Auth(reason_code=0x19, properties=(AUTH_METHOD,))

    def failed() -> Talk:
        return talk().client(METHOD_CONNECT).server(CONTINUE).client(CONTINUE).server(accepted).client(same)

    for refusal in (codec.Disconnect(reason_code=0x87), codec.Connack(return_code=0x87)):
        judgement = judge(failed().server(refusal).closed(S).events, V5)
        assert "MQTT-4.12.1-2" in judgement.passed, explain(judgement)
        assert "MQTT-4.12.1-2" in server_rules(failed().server(refusal).quiet(after=10))
    assert "MQTT-4.12.1-2" in judge(failed().closed(S).events, V5).passed


def test_an_auth_keeps_its_reason_string_out_beyond_the_clients_maximum() -> None:
    """[MQTT-3.15.2-2] / [MQTT-3.15.2-3] as for the acknowledgements: within the maximum both hold."""
    size = len(codec.encode(CONTINUE, version="5"))
    connect = codec.Connect(client_id="five", protocol_level=5, properties=(AUTH_METHOD, Property(0x27, size + 2)))
    fits = judge(talk().client(connect).server(CONTINUE).closed(S).events, V5)
    assert {"MQTT-3.15.2-2", "MQTT-3.15.2-3"} <= fits.passed, explain(fits)
    reasoned = codec.Auth(reason_code=0x18, properties=(AUTH_METHOD, Property(0x1F, "why")))
    assert "MQTT-3.15.2-2" in server_rules(talk().client(connect).server(reasoned).closed(S))
