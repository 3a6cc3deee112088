"""The MQTT 5.0 re-delivery cases (:mod:`mqttaudit.probe.cases.v5_redelivery`) and the check behind them: every
statement a case lists is one the judge decides on 5.0 conversations of the case's shape, kept by a conforming broker
and broken by a violating one (pure, the probe's judge configuration); the check's edges (an acknowledged message, an
identifier given to another message, a 3.1.1 session); and every case gets a verdict from mosquitto and from
mqttools."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_redelivery
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config

from . import test_probe_v5_ported as ported
from .cases import explain
from .live import run_together
from .talk import C, S, Talk
from .test_probe_v5_routing import LATE, Scenario, client, copy, message, option, subscribed
from .test_probe_v5_sessions import published_qos2

REDELIVERY_CASES = [case for case in CASES.values() if case.script.__module__ == v5_redelivery.__name__]
DUP = "MQTT-3.3.1-1"
NOT_EXPIRED = "MQTT-4.3.3-7"
END_SESSION = codec.Disconnect(reason_code=0, properties=make(session_expiry_interval=0))


# Conversations ----------------------------------------------------------------------------------------------------


def _answer(talk: Talk, sent: codec.Publish) -> None:
    """The subscriber's part of the flow of ``sent`` (a delivery it takes)."""
    pid = sent.packet_id or 0
    if sent.qos == 1:
        talk.client(codec.Puback(packet_id=pid))
    else:
        talk.client(codec.Pubrec(packet_id=pid)).server(codec.Pubrel(packet_id=pid))
        talk.client(codec.Pubcomp(packet_id=pid))


def _publisher(sent: codec.Publish) -> Talk:
    if sent.qos == 2:
        return published_qos2(sent)  # type: ignore[return-value]
    talk = client("pub", at=1.0).client(sent).server(codec.Puback(packet_id=sent.packet_id or 0))
    return talk.client(codec.Disconnect()).closed(C)


def redelivery(
    qos: int,
    *,
    dup: bool | None = True,
    acknowledged: bool = False,
    other: bool = False,
    expiry: int | None = None,
    back_at: float = 2.0,
) -> Scenario:
    """'first' (session kept 60 s) gets a QoS ``qos`` message at 1.2 s, answers it only if ``acknowledged``, and
    drops at 1.3 s; 'again' resumes the session at ``back_at`` and gets it re-sent with DUP ``dup`` (None: not
    re-sent; ``other``: another message under the same Packet Identifier instead), then ends the session."""
    sent = message(payload=b"m", qos=qos) if expiry is None else message(qos=qos, message_expiry_interval=expiry)
    first = subscribed(client("k", expiry=60), option("t", qos))
    first.server(copy(sent), at=1.2)
    if acknowledged:
        _answer(first, copy(sent))
    first.closed(C, at=1.3, abrupt=True)
    again = client("k", at=back_at, clean=False, expiry=60, present=True)
    if dup is not None:
        resent = copy(sent, dup=dup, payload=b"other" if other else b"m")
        again.server(resent, at=back_at + 0.1)
        _answer(again, resent)
    again.client(END_SESSION, at=LATE).closed(C)
    return {"first": first, "again": again, "pub": _publisher(sent)}


def expired(*, resent: bool) -> Scenario:
    """The QoS 2 message carries Message Expiry Interval 1; the session resumes 2.5 s after the delivery."""
    return redelivery(2, dup=True if resent else None, expiry=1, back_at=3.7)


Make = Callable[[], Scenario]
PAIRS: dict[str, tuple[Make, Make]] = {
    "v5/redelivery/dup-qos1": (lambda: redelivery(1), lambda: redelivery(1, dup=False)),
    "v5/redelivery/dup-qos2": (lambda: redelivery(2), lambda: redelivery(2, dup=False)),
    "v5/redelivery/after-expiry-qos2": (lambda: expired(resent=True), lambda: expired(resent=False)),
}


def judged(scenario: Scenario) -> Judgement:
    config = judge_config(REDELIVERY_CASES[0], 1.0)
    return judge_scenario({name: talk.events for name, talk in scenario.items()}, config)


def against(judgement: Judgement) -> set[str]:
    return {rule for f in judgement.findings if f.side is codec.Direction.FROM_SERVER for rule in f.rules}


def test_every_case_has_a_pair() -> None:
    assert {case.id for case in REDELIVERY_CASES} == set(PAIRS)


@pytest.mark.parametrize("case_id", sorted(PAIRS))
def test_a_conforming_broker_keeps_every_statement_of_the_case(case_id: str) -> None:
    judgement = judged(PAIRS[case_id][0]())
    assert set(CASES[case_id].statements) <= set(judgement.passed), explain(judgement)
    assert not against(judgement), explain(judgement)


@pytest.mark.parametrize("case_id", sorted(PAIRS))
def test_a_violating_broker_breaks_every_statement_of_the_case(case_id: str) -> None:
    judgement = judged(PAIRS[case_id][1]())
    assert set(CASES[case_id].statements) <= against(judgement), explain(judgement)


def test_the_cases_are_timing_cases() -> None:
    """Each waits on what the broker does after a connection drops: a failure is run again, alone."""
    assert all(case.timing for case in REDELIVERY_CASES)


# The check's edges --------------------------------------------------------------------------------------------------


def test_an_acknowledged_message_is_owed_no_re_send_and_a_copy_of_it_is_a_new_message() -> None:
    """A PUBLISH answered before the drop is not unacknowledged: what comes later under its identifier is judged as
    a new message (DUP 0 right there), never as a re-send."""
    judgement = judged(redelivery(1, dup=False, acknowledged=True))
    assert DUP not in judgement.passed and DUP not in against(judgement), explain(judgement)


def test_another_message_under_the_identifier_is_not_a_re_send() -> None:
    judgement = judged(redelivery(1, dup=False, other=True))
    assert DUP not in against(judgement), explain(judgement)


def test_no_re_send_leaves_the_dup_flag_undecided() -> None:
    judgement = judged(redelivery(1, dup=None))
    assert DUP not in judgement.passed and DUP not in against(judgement), explain(judgement)
    assert DUP in judgement.not_assessable, explain(judgement)


def test_a_qos1_message_past_its_expiry_is_no_matter_of_the_qos2_sender() -> None:
    judgement = judged(redelivery(1, dup=None, expiry=1, back_at=3.7))
    assert NOT_EXPIRED not in judgement.passed and NOT_EXPIRED not in against(judgement), explain(judgement)


def _client_3_1_1(at: float, *, clean: bool, present: bool, client_id: str = "k") -> Talk:
    talk = Talk()
    talk.now = at - 0.01
    talk.client(codec.Connect(client_id=client_id, clean_session=clean))
    return talk.server(codec.Connack(session_present=present))


def test_a_3_1_1_session_is_held_to_the_same_rule() -> None:
    """MQTT 3.1.1 states the rule under the same id (3.3.1.1): a CleanSession 0 session resumed gets the re-sent
    PUBLISH with DUP 1."""
    sent = codec.Publish(topic="t", payload=b"m", qos=1, packet_id=1)
    for dup, kept in ((True, True), (False, False)):
        first = _client_3_1_1(0.0, clean=False, present=False)
        first.client(codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="t", qos=1)]))
        first.server(codec.Suback(packet_id=1, return_codes=[1]))
        first.server(codec.Publish(topic="t", payload=b"m", qos=1, packet_id=7), at=1.2).closed(C, at=1.3, abrupt=True)
        again = _client_3_1_1(2.0, clean=False, present=True)
        again.server(codec.Publish(topic="t", payload=b"m", qos=1, packet_id=7, dup=dup), at=2.1)
        again.client(codec.Puback(packet_id=7)).client(codec.Disconnect(), at=LATE).closed(C)
        pub = _client_3_1_1(1.0, clean=True, present=False, client_id="pub")
        pub.client(sent).server(codec.Puback(packet_id=1)).client(codec.Disconnect()).closed(C)
        judgement = judged({"first": first, "again": again, "pub": pub})
        assert (DUP in judgement.passed) is kept, explain(judgement)
        assert (DUP in against(judgement)) is not kept, explain(judgement)


# Live ------------------------------------------------------------------------------------------------------------


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, REDELIVERY_CASES, "7ede7ede")


#: mosquitto 2.0.11 re-sends an unacknowledged QoS 1 or 2 PUBLISH with DUP 1 on the resumed session (for QoS 1 the
#: re-sent bytes are ``3a ..`` / QoS 2 ``3c ..``: fixed-header flags DUP 1). It fails MQTT-4.3.3-7: a QoS 2
#: PUBLISH it sent and never got a PUBREC for is not re-sent once its Message Expiry Interval (1 s) has passed
#: (Session Present 1, then nothing but the PUBACK-free silence until the DISCONNECT): its
#: db__message_write_inflight_out_single drops every expired in-flight message, "must not send", whatever its
#: state, where 4.3.3 says a QoS 2 sender "MUST NOT apply Message expiry if a PUBLISH packet has been sent".
MOSQUITTO: dict[str, str] = {
    "v5/redelivery/dup-qos1": PASS,
    "v5/redelivery/dup-qos2": PASS,
    "v5/redelivery/after-expiry-qos2": FAIL,
}


def test_mosquitto_re_sends_with_dup_1_but_drops_the_expired_qos2_message(mosquitto: RunningBroker) -> None:
    results = run_all(mosquitto)
    assert {case_id: r.verdict for case_id, r in results.items()} == MOSQUITTO
    failed = results["v5/redelivery/after-expiry-qos2"]
    assert {rule for f in failed.findings for rule in f.rules} == {NOT_EXPIRED}


def test_mqttools_declares_maximum_qos_0(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 declares Maximum QoS 0: no QoS 1 or 2 delivery, nothing to re-send."""
    results = run_all(mqttools)
    assert {case_id: r.verdict for case_id, r in results.items()} == dict.fromkeys(PAIRS, NOT_APPLICABLE)


# A User Name or Password the Connect Flags leave out (MQTT-3.1.2-16, -18; 3.1.1: MQTT-3.1.2-18, -20) -------------

#: The CONNECT shapes: a User Name with both flags clear; a Password after a User Name whose Password Flag is clear;
#: both, with both flags clear.
CREDENTIALS = ("username-without-flag", "password-without-flag", "credentials-without-flags")
CREDENTIAL_STATEMENTS = {
    "username-without-flag": {"MQTT-3.1.2-16"},
    "password-without-flag": {"MQTT-3.1.2-18"},
    "credentials-without-flags": {"MQTT-3.1.2-16", "MQTT-3.1.2-18"},
}
TWINS_3_1_1 = {
    "username-without-flag": {"MQTT-3.1.2-18"},
    "password-without-flag": {"MQTT-3.1.2-20"},
    "credentials-without-flags": {"MQTT-3.1.2-18", "MQTT-3.1.2-20"},
}


@pytest.mark.parametrize("name", CREDENTIALS)
def test_each_credentials_shape_provokes_its_statements_in_both_versions(name: str) -> None:
    """The flags and the fields are the Client's to keep: each case provokes them, and judges the broker's close
    on the malformed CONNECT [MQTT-3.1.4-1]."""
    for case, provoked in (
        (CASES[f"v5/malformed/connect-{name}"], CREDENTIAL_STATEMENTS[name]),
        (CASES[f"malformed/connect-{name}"], TWINS_3_1_1[name]),
    ):
        assert provoked <= set(case.provokes) and not provoked & set(case.statements), case.id
        assert "MQTT-3.1.4-1" in case.statements, case.id


@pytest.mark.parametrize("name", CREDENTIALS)
def test_closing_on_a_credentials_shape_keeps_it_and_accepting_it_breaks_it(name: str) -> None:
    """Kept: the server closes (a CONNACK 0x81 Malformed Packet first is allowed, section 4.13); broken: it answers
    CONNACK 0x00 and carries on. What it keeps or breaks is its duty toward the malformed CONNECT [MQTT-3.1.4-1];
    the flags' statements bind the Client, which broke them either way."""
    stimulus = ported.BY_ID[f"connect-{name}"]
    case = CASES[f"v5/malformed/connect-{name}"]
    for first in (None, codec.Connack(return_code=0x81)):
        kept = ported._up_to_stimulus(stimulus)
        if first is not None:
            kept.server(first)
        judgement = judge_scenario({"c": kept.closed(S).events}, judge_config(case, 1.0))
        assert set(case.statements) <= set(judgement.passed), explain(judgement)
    broken = ported._up_to_stimulus(stimulus).server(codec.Connack()).quiet(after=3600)
    judgement = judge_scenario({"c": broken.events}, judge_config(case, 1.0))
    assert "MQTT-3.1.4-1" in against(judgement) and not CREDENTIAL_STATEMENTS[name] & against(judgement)


def _credential_cases(*, with_3_1_1: bool) -> list[Case]:
    prefixes = ("v5/malformed/", "malformed/") if with_3_1_1 else ("v5/malformed/",)
    return [CASES[f"{prefix}connect-{name}"] for prefix in prefixes for name in CREDENTIALS]


def test_mosquitto_closes_on_every_credentials_shape(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 closes the connection on each shape, in 3.1.1 and in 5.0."""
    results = run_together(mosquitto, _credential_cases(with_3_1_1=True), "7c7c7c7c")
    assert {case_id: r.verdict for case_id, r in results.items()} == dict.fromkeys(results, PASS)
    assert len(results) == 2 * len(CREDENTIALS)


def test_mqttools_accepts_unannounced_credentials(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 reads no further than the flags announce: to Connect Flags 0x02 with ``0001 75`` (a User Name
    'u') after the Client Identifier, and with ``0001 70`` (a Password 'p') after that, it answers CONNACK 0x00 and
    leaves the connection open; to Connect Flags 0x82 with a User Name and then a Password it sends no CONNACK, and
    the connection stays open too. Each time it breaks the duty to close on a CONNECT that does not conform
    (MQTT-3.1.4-1); the statements of the shape are the Client's, which the cases provoke."""
    results = run_together(mqttools, _credential_cases(with_3_1_1=False), "7c7c7c7c")
    assert {case_id: r.verdict for case_id, r in results.items()} == dict.fromkeys(results, FAIL)
    for case_id, result in results.items():
        assert "MQTT-3.1.4-1" in {rule for f in result.findings for rule in f.rules}
        assert CREDENTIAL_STATEMENTS[case_id.rsplit("connect-", 1)[1]] <= set(result.case.provokes)
