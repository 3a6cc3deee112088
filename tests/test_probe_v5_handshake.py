"""The MQTT 5.0 cases of probe/cases/v5_handshake.py: every statement a case lists is one the judge decides on a
5.0 conversation of the case's shape, kept by a conforming broker and broken by a violating one (pure, the probe's
judge configuration; a broken CONNACK's own bytes are the codec's finding, as the runner reports them); every case
gets a verdict from mosquitto and from mqttools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.judge.events import Sent
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_handshake as hs
from mqttaudit.probe.cases.malformed import charged
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config
from mqttaudit.spec import identity

from .cases import explain
from .live import configured_mosquitto, run_together
from .talk import C, S, Talk
from .verdicts import LENIENT, verdict_of

TIMEOUT = 1.0
MODULE = "mqttaudit.probe.cases.v5_handshake"
HANDSHAKE_CASES = [case for case in CASES.values() if case.script.__module__ == MODULE]
CONNECT = codec.Connect(client_id="hs", protocol_level=5)
NO_RESPONSE = codec.Connect(client_id="hs", protocol_level=5, properties=make(request_response_information=0))
METHOD = codec.Connect(client_id="hs", protocol_level=5, properties=make(authentication_method=hs.UNKNOWN_METHOD))
EMPTY_ID = codec.Connect(client_id="", protocol_level=5)
OK = codec.Connack()
BAD_METHOD = codec.Connack(return_code=0x8C)
PUBLISH_1 = codec.Publish(topic="t", payload=b"x", qos=1, packet_id=1)
SUBSCRIBE_2 = codec.Subscribe(packet_id=2, subscriptions=[codec.Subscription(topic_filter="o", qos=1)])
SUBACK_2 = codec.Suback(packet_id=2, return_codes=(1,))


def talk() -> Talk:
    return Talk(version="5")


def named(name: str, level: int = 5) -> codec.Connect:
    return codec.Connect(client_id="hs", protocol_name=name, protocol_level=level)


def assigned(identifier: str) -> codec.Connack:
    return codec.Connack(properties=make(assigned_client_identifier=identifier))


def pairs() -> dict[str, tuple[dict[str, Talk], dict[str, Talk]]]:
    """Per case: (conversations in which the broker keeps every statement, ones in which it breaks every one),
    each ended, fresh each time (judging one ends it)."""
    result: dict[str, tuple[dict[str, Talk], dict[str, Talk]]] = {}
    first_packets = {"pingreq": codec.Pingreq(), "subscribe": SUBSCRIBE_2, "publish": PUBLISH_1}
    answers = {"pingreq": codec.Pingresp(), "subscribe": SUBACK_2, "publish": codec.Puback(packet_id=1)}
    for word, packet in first_packets.items():
        result[f"v5/connect-first/{word}"] = (
            {"c": talk().client(packet).closed(S)},
            {"c": talk().client(packet).server(answers[word]).quiet(after=5)},
        )
    for word, name in hs.OTHER_NAMES:
        # a server that does not accept the name closes (0x84 may come first); one that accepts it is another
        # protocol's (see the test below): what breaks the statement is a refusal left open
        result[f"v5/connect-refused/protocol-name-{word}"] = (
            {"c": talk().client(named(name)).server(codec.Connack(return_code=0x84)).closed(S)},
            {"c": talk().client(named(name)).server(codec.Connack(return_code=0x84)).quiet(after=5)},
        )
    for version in hs.UNSUPPORTED_VERSIONS:
        result[f"v5/connect-refused/protocol-version-{version}"] = (
            {"c": talk().client(named("MQTT", version)).closed(S)},
            {"c": talk().client(named("MQTT", version)).quiet(after=5)},
        )
    for word, connect in (("accepting", NO_RESPONSE), ("response-information-absent", CONNECT)):
        result[f"v5/connack/{word}"] = (
            {"c": talk().client(connect).server(OK).client(codec.Disconnect()).closed(C)},
            {
                "c": talk()
                .client(connect)
                .server(
                    "20 0d 02 00 0a 1a 00 03 61 2f 62 15 00 01 58",  # flags 0x02, Response Information, a method
                    "20 03 00 05 00",  # a second CONNACK, with 0x05 (no 5.0 CONNACK code)
                )
                .closed(C)
            },
        )
    result["v5/connack/refusing"] = (
        {"c": talk().client(METHOD).server(BAD_METHOD).closed(S)},
        {"c": talk().client(METHOD).server("20 03 03 8c 00", "20 03 00 f0 00").quiet(after=5)},
    )
    followers = (PUBLISH_1, SUBSCRIBE_2, codec.Pingreq())
    result["v5/connect-refused/nothing-processed-after"] = (
        {"c": talk().client(METHOD, *followers).server(BAD_METHOD).closed(S)},
        {
            "c": talk()
            .client(METHOD, *followers)
            .server(BAD_METHOD, codec.Puback(packet_id=1), SUBACK_2, codec.Pingresp())
            .quiet(after=5)
        },
    )
    result["v5/client-identifier/rejected"] = (
        {"c": talk().client(EMPTY_ID).server(codec.Connack(return_code=0x85)).closed(S)},
        {"c": talk().client(EMPTY_ID).server(codec.Connack(return_code=0x85)).quiet(after=5)},
    )
    result["v5/client-identifier/assigned-unique"] = (
        {name: talk().client(EMPTY_ID).server(assigned(name)).quiet(after=1) for name in "ab"},
        {name: talk().client(EMPTY_ID).server(assigned("same")).quiet(after=1) for name in "ab"},
    )
    for word, _title, data in hs.UNASKED_AUTH:
        # the violating broker answers the AUTH nobody asked for with one of its own [MQTT-4.12.0-6] and stays open
        result[f"v5/auth-unrequested/without-method-{word}"] = (
            {"c": talk().client(CONNECT).server(OK).client(data).closed(S)},
            {"c": talk().client(CONNECT).server(OK).client(data).server("f0 00").quiet(after=5)},
        )
    silent = codec.Connect(client_id="hs", protocol_level=5, keep_alive=1)
    for word in ("server-disconnects-silent-client", "client-value-applies"):
        result[f"v5/keep-alive/{word}"] = (
            {"c": talk().client(silent).server(OK).closed(S, after=1.8)},
            {"c": talk().client(silent).server(OK).quiet(after=5)},
        )
    return result


def judged(case: Case, conversations: dict[str, Talk]) -> Judgement:
    return judge_scenario({name: t.events for name, t in conversations.items()}, judge_config(case, TIMEOUT))


def against_broker(case: Case, conversations: dict[str, Talk]) -> set[str]:
    """The statements the broker is charged with: the judge's findings, the defects it accepted leniently (with
    the close it would keep by closing on them), and the codec's findings on its own frames (as the runner adds
    them)."""
    failed = set(charged(judged(case, conversations)))
    for conversation in conversations.values():
        for event in conversation.events:
            if isinstance(event, Sent) and event.sender is S:
                failed |= {identity.statement_id(v.rule_key, identity.V5) or "" for v in event.frame.violations}
    return failed


def test_every_case_has_a_pair() -> None:
    assert sorted(case.id for case in HANDSHAKE_CASES) == sorted(pairs())
    assert all(case.statements for case in HANDSHAKE_CASES)


@pytest.mark.parametrize("case", HANDSHAKE_CASES, ids=lambda case: case.id)
def test_a_conforming_broker_keeps_every_statement_of_the_case(case: Case) -> None:
    kept, _broken = pairs()[case.id]
    judgement = judged(case, kept)
    # as the runner decides: assessed, and no finding against the broker (a client-side MUST broken on purpose is
    # the client's finding, which the case provokes: MQTT-3.1.0-1, MQTT-4.12.0-7)
    assert set(case.statements) <= judgement.assessed, (case.statements, sorted(judgement.assessed))
    assert not [f for f in judgement.findings if f.side is S and not set(f.rules).isdisjoint(case.statements)]
    assert not against_broker(case, kept) & set(case.statements)


@pytest.mark.parametrize("case", HANDSHAKE_CASES, ids=lambda case: case.id)
def test_a_violating_broker_breaks_every_statement_of_the_case(case: Case) -> None:
    _kept, broken = pairs()[case.id]
    failed = against_broker(case, broken)
    assert set(case.statements) <= failed, (case.statements, sorted(failed))


# The judge's new checks, one by one ------------------------------------------------------------------------


def test_an_unsupported_version_may_be_refused_with_0x84_or_0x01_but_not_accepted() -> None:
    case = CASES["v5/connect-refused/protocol-version-6"]
    for code in (0x84, 0x01):
        refused = talk().client(named("MQTT", 6)).server(codec.Connack(return_code=code)).closed(S)
        assert hs.PROTOCOL_VERSION in judged(case, {"c": refused}).passed, code
    accepted = talk().client(named("MQTT", 6)).server(OK).quiet(after=5)
    assert hs.PROTOCOL_VERSION in {rule for f in judged(case, {"c": accepted}).findings for rule in f.rules}


@pytest.mark.parametrize(("word", "name"), hs.OTHER_NAMES, ids=[word for word, _name in hs.OTHER_NAMES])
@pytest.mark.parametrize("connack", ["20 03 00 00 00", "20 02 00 00"], ids=["5.0-form", "3.1.1-form"])
def test_another_protocol_name_accepted_is_another_protocols_not_a_fail(word: str, name: str, connack: str) -> None:
    """3.1.2.1 of 5.0: "A Server which support multiple protocols uses the Protocol Name to determine whether the data
    is MQTT ... If the Server does not want to accept the CONNECT ... it MUST close" [MQTT-3.1.2-1]. A broker that
    accepts 'MQIsdp' (3.1's name) at Protocol Version 5, in either CONNACK form, breaks nothing of it: not judged,
    and not assessable, saying so."""
    case = CASES[f"v5/connect-refused/protocol-name-{word}"]
    judgement = judged(case, {"c": talk().client(named(name)).server(connack).quiet(after=5)})
    assert not [f for f in judgement.findings if f.side is S], explain(judgement)
    assert judgement.not_assessable[hs.PROTOCOL_NAME].startswith("another specification: "), explain(judgement)


def test_the_client_statements_the_handshake_cases_break_are_provoked_not_judged() -> None:
    for word, _title, _build in hs.NOT_CONNECT:
        case = CASES[f"v5/connect-first/{word}"]
        assert case.provokes == (hs.CONNECT_FIRST,) and case.statements == (hs.CONNACK_FIRST, hs.CLOSE_ON_ERROR)
    for word, _title, _data in hs.UNASKED_AUTH:
        case = CASES[f"v5/auth-unrequested/without-method-{word}"]
        assert case.provokes == (hs.NO_CLIENT_AUTH,) and case.statements == (hs.CLOSE_ON_ERROR, hs.NO_SERVER_METHOD)


def test_a_refusal_with_0x84_of_another_protocol_name_still_owes_the_close() -> None:
    case = CASES["v5/connect-refused/protocol-name-mqtx"]
    left_open = talk().client(named("MQTX")).server(codec.Connack(return_code=0x84)).quiet(after=5)
    assert hs.PROTOCOL_NAME in {rule for f in judged(case, {"c": left_open}).findings for rule in f.rules}


def test_a_server_keep_alive_replaces_the_clients_and_leaves_mqtt_3_2_2_22_unexercised() -> None:
    """A CONNACK with Server Keep Alive 3 makes the server's limit 4.5 s (plus the slack), not 1.5 s."""
    case = CASES["v5/keep-alive/client-value-applies"]
    silent = codec.Connect(client_id="hs", protocol_level=5, keep_alive=1)
    longer = codec.Connack(properties=make(server_keep_alive=3))
    judgement = judged(case, {"c": talk().client(silent).server(longer).closed(S, after=4.0)})
    assert hs.KEEP_ALIVE in judgement.passed
    assert hs.CLIENT_KEEP_ALIVE not in judgement.assessed


def test_assigned_identifiers_may_repeat_once_the_first_connection_ended() -> None:
    case = CASES["v5/client-identifier/assigned-unique"]
    first = talk().client(EMPTY_ID).server(assigned("same")).closed(C)
    later = Talk(version="5", now=1.0).client(EMPTY_ID).server(assigned("same")).closed(C)
    judgement = judged(case, {"a": first, "b": later})
    assert hs.UNIQUE_ASSIGNED not in judgement.assessed


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_without_empty_ids(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """mosquitto configured with ``allow_zero_length_clientid false``."""
    workdir = tmp_path_factory.mktemp("mosquitto-no-empty-ids")
    with configured_mosquitto(workdir, "allow_zero_length_clientid false") as broker:
        yield broker


def run_all(broker: RunningBroker, cases: list[Case] = HANDSHAKE_CASES) -> dict[str, CaseResult]:
    return run_together(broker, cases, "4a4a4a4a")


KEEP_ALIVE_CASES = [f"v5/keep-alive/{word}" for word in ("server-disconnects-silent-client", "client-value-applies")]


@pytest.mark.alone  # three Keep Alive clients timed against mosquitto's check of every client every 5 s
def test_mosquitto_keeps_the_handshake_but_checks_keep_alive_only_every_5_s(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 closes on every first packet that is no CONNECT, on every other Protocol Name (without a
    CONNACK), answers Protocol Version 6, 0 and 255 with the 3.1.1 CONNACK 20 02 00 01 and closes, refuses the
    unknown Authentication Method with CONNACK 20 03 00 8c 00 and closes, answers no packet sent after it, closes on
    every AUTH without a method, and assigns different identifiers. It checks Keep Alive every 5 s for all clients at
    once: of three clients with Keep Alive 1 s connected 1.2 s apart, some stay open past 1.5 s plus the grace
    (the same finding as 3.1.1's keep-alive case) [MQTT-3.1.2-22, MQTT-3.2.2-22]. It accepts an empty Client
    Identifier by default (the rejection case is not applicable)."""
    results = run_all(mosquitto)
    print({case_id: verdict_of(result) for case_id, result in results.items() if verdict_of(result) != FAIL})
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        **dict.fromkeys(KEEP_ALIVE_CASES, FAIL),
        "v5/client-identifier/rejected": NOT_APPLICABLE,
    }
    for case_id in KEEP_ALIVE_CASES:
        assert "did not close the connection of a client silent" in results[case_id].reason


def test_mosquitto_without_empty_identifiers_refuses_them_with_0x80_not_0x85(
    mosquitto_without_empty_ids: RunningBroker,
) -> None:
    """With ``allow_zero_length_clientid false`` mosquitto 2.0.11 refuses a 5.0 CONNECT with an empty Client
    Identifier with CONNACK 20 03 00 80 00 (Unspecified error), not 0x85, and closes: nothing names the Client
    Identifier as the reason, so MQTT-3.1.3-8 is not exercised (the close is MQTT-3.2.2-7's)."""
    cases = [CASES["v5/client-identifier/rejected"], CASES["v5/client-identifier/assigned-unique"]]
    results = run_all(mosquitto_without_empty_ids, cases)
    assert {case_id: result.verdict for case_id, result in results.items()} == dict.fromkeys(
        ("v5/client-identifier/rejected", "v5/client-identifier/assigned-unique"), NOT_APPLICABLE
    )
    assert "CONNACK 0x80" in results["v5/client-identifier/rejected"].reason


def test_mqttools_never_closes_a_connection_it_will_not_serve(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 answers nothing and keeps the connection open (6 s and more by hand) after a first packet
    that is no CONNECT (PINGREQ c0 00 among them) [MQTT-3.1.0-1], a CONNECT of another Protocol Name at version 5
    [MQTT-3.1.2-1], a CONNECT of Protocol Version 6, 0 or 255 [MQTT-3.1.2-2]; it refuses the unknown Authentication
    Method with CONNACK 20 09 00 8c 06 24 00 28 00 2a 00 and never closes [MQTT-3.1.4-2] (the packets after it are
    not answered: MQTT-3.1.4-6 holds there); it keeps the connection after an AUTH without a method (the client's
    [MQTT-4.12.0-7]: leniency, 4.13.1); it accepts an empty Client Identifier without an Assigned Client Identifier
    (20 09 00 00 06 24 00 28 00 2a 00) [MQTT-3.1.3-7, MQTT-3.2.2-16], which fails the two cases that send one
    although neither targets it (the rejection and the uniqueness cases have nothing of their own to judge); it never
    closes a silent client."""
    results = run_all(mqttools)
    passing = {
        "v5/connack/accepting",
        "v5/connack/response-information-absent",
    }
    # [MQTT-4.12.0-7] binds the client: no statement binds the server to detect an AUTH without a method (4.13.1).
    lenient = {case_id for case_id in pairs() if case_id.startswith("v5/auth-unrequested/without-method-")}
    assert len(lenient) == 6
    # [MQTT-3.1.0-1] binds the client too: answering nothing and staying open after a first packet that is no
    # CONNECT keeps MQTT-3.2.0-1 and breaks nothing binding the server (4.13.1): leniency.
    lenient |= {f"v5/connect-first/{word}" for word in ("pingreq", "publish", "subscribe")}
    assert {case_id: verdict_of(result) for case_id, result in results.items()} == {
        **{case_id: FAIL for case_id in pairs()},
        **dict.fromkeys(lenient, LENIENT),
        **dict.fromkeys(passing, PASS),
    }
    for case_id in ("v5/client-identifier/rejected", "v5/client-identifier/assigned-unique"):
        [finding] = results[case_id].findings  # one act (the CONNACK), every statement it breaks
        assert {"MQTT-3.1.3-7", "MQTT-3.2.2-16"} <= set(finding.rules)
    after = results["v5/connect-refused/nothing-processed-after"]
    assert after.statements == {hs.NOTHING_AFTER_REFUSAL: PASS, hs.FAILED_CHECK: FAIL}
    assert results["v5/connack/refusing"].statements[hs.FAILED_CHECK] == FAIL
