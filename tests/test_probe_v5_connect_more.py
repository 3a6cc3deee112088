"""The MQTT 5.0 cases of probe/cases/v5_connect_more.py: every statement a case lists is one the judge decides on a
5.0 conversation of the case's shape, kept by a conforming broker and broken by a violating one (pure, the probe's
judge configuration); every case gets a verdict from mosquitto and from mqttools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec import Property
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_connect_more
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config

from .live import configured_mosquitto, run_together
from .talk import C, S, Talk

TIMEOUT = 1.0
MODULE = "mqttaudit.probe.cases.v5_connect_more"
MORE_CASES = [case for case in CASES.values() if case.script.__module__ == MODULE]
NO_PROBLEMS = codec.Connect(client_id="more", protocol_level=5, properties=make(request_problem_information=0))
CONNECT = codec.Connect(client_id="more", protocol_level=5)
ALIASES = codec.Connack(properties=make(topic_alias_maximum=10))
METHOD = make(authentication_method=v5_connect_more.UNKNOWN_METHOD)
AUTHENTICATING = codec.Connect(client_id="more", protocol_level=5, properties=METHOD)
TWICE = codec.Connect(client_id="more", protocol_level=5, properties=(Property(0x11, 10), Property(0x11, 10)))
PUBLISH_1 = codec.Publish(topic="t", payload=b"x", qos=1, packet_id=1)
REASON = make(reason_string="no subscribers")
LIMITED = codec.Connack(properties=make(maximum_qos=1, retain_available=0))


def willing(qos: int = 0, retain: bool = False) -> codec.Connect:
    will = codec.Will(topic="w", message=b"gone", qos=qos, retain=retain)
    return codec.Connect(client_id="willing", protocol_level=5, will=will)


def aliased(alias: int, topic: str = "t") -> codec.Publish:
    return codec.Publish(topic=topic, payload=b"x", properties=make(topic_alias=alias))


def talk() -> Talk:
    return Talk(version="5")


def pairs() -> dict[str, tuple[Talk, Talk]]:
    """Per case: (a conversation in which the broker keeps every statement, one in which it breaks every one),
    fresh each time (judging one ends it)."""
    return {
        "v5/problem-information/acknowledgements": (
            talk().client(NO_PROBLEMS).server(codec.Connack()).client(PUBLISH_1).server(codec.Puback(packet_id=1)),
            talk()
            .client(NO_PROBLEMS)
            .server(codec.Connack())
            .client(PUBLISH_1)
            .server(codec.Puback(packet_id=1, reason_code=0, properties=(Property(0x26, ("k", "v")),))),
        ),
        "v5/problem-information/refusals": (
            talk()
            .client(NO_PROBLEMS)
            .server(codec.Connack())
            .client(PUBLISH_1)
            .server(codec.Puback(packet_id=1, reason_code=0x10)),
            talk()
            .client(NO_PROBLEMS)
            .server(codec.Connack())
            .client(PUBLISH_1)
            .server(codec.Puback(packet_id=1, reason_code=0x10, properties=REASON)),
        ),
        **{
            f"v5/alias-accepted/{name}": (
                talk().client(CONNECT).server(ALIASES).client(aliased(1), aliased(10)).client(codec.Disconnect()),
                talk()
                .client(CONNECT)
                .server(ALIASES)
                .client(aliased(1), aliased(10))
                .server(codec.Disconnect(reason_code=0x94)),
            )
            for name in ("first", "maximum", "every")
        },
        "v5/no-early-disconnect/duplicate-property": (
            talk().client(TWICE).server(codec.Connack(return_code=0x82)),
            talk().client(TWICE).server(codec.Disconnect(reason_code=0x82)),
        ),
        "v5/no-early-disconnect/after-acceptance": (
            talk().client(CONNECT).server(codec.Connack()).client(CONNECT).server(codec.Disconnect(reason_code=0x82)),
            talk().client(CONNECT).server(codec.Disconnect(reason_code=0x82)),
        ),
        **{
            f"v5/will-beyond-capabilities/{name}": (
                talk().client(willing(qos=2)).server(codec.Connack(return_code=0x9B)),
                talk().client(willing(qos=2)).server(LIMITED).client(codec.Disconnect()),
            )
            for name in ("qos-one-above", "qos2")
        },
        "v5/will-beyond-capabilities/retain": (
            talk().client(willing(retain=True)).server(codec.Connack(return_code=0x9A)),
            talk().client(willing(retain=True)).server(LIMITED).client(codec.Disconnect()),
        ),
        "v5/no-early-disconnect/unknown-authentication-method": (
            talk().client(AUTHENTICATING).server(codec.Connack(return_code=0x8C)),
            talk().client(AUTHENTICATING).server(codec.Connack(return_code=0x8C), codec.Disconnect(reason_code=0x8C)),
        ),
    }


def judged(case: Case, conversation: Talk, *, closed: bool) -> Judgement:
    ended = conversation.closed(S) if closed else conversation.quiet(after=10)
    return judge_scenario({"c1": ended.events}, judge_config(case, TIMEOUT))


def test_every_case_has_a_pair_and_lists_only_its_own_statements() -> None:
    assert sorted(case.id for case in MORE_CASES) == sorted(pairs())
    for case in MORE_CASES:
        assert case.statements, case.id
        assert set(case.statements) <= {
            v5_connect_more.PROBLEM_INFORMATION,
            v5_connect_more.ALIASES_ACCEPTED,
            v5_connect_more.NO_EARLY_DISCONNECT,
            v5_connect_more.UNSUPPORTED_METHOD,
            v5_connect_more.CLOSE_AFTER_ERROR,
            v5_connect_more.WILL_QOS,
            v5_connect_more.WILL_RETAIN,
        }


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_conforming_broker_keeps_every_statement_of_the_case(case: Case) -> None:
    kept, _broken = pairs()[case.id]
    judgement = judged(case, kept, closed=True)
    assert set(case.statements) <= judgement.passed, (case.statements, sorted(judgement.assessed))
    assert not [f for f in judgement.findings if f.side is S and not set(f.rules).isdisjoint(case.statements)]


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_violating_broker_breaks_every_statement_of_the_case(case: Case) -> None:
    _kept, broken = pairs()[case.id]
    # The refusal left open breaks the close of MQTT-4.12.0-1; the others are broken whether or not it closes.
    judgement = judged(case, broken, closed="authentication" not in case.id)
    failed = {rule for f in judgement.findings if f.side is S for rule in f.rules}
    assert set(case.statements) <= failed, (case.statements, sorted(failed))


def test_the_client_side_of_a_case_is_no_finding_against_the_broker() -> None:
    """The second CONNECT of after-acceptance is the client's Protocol Error [MQTT-3.1.0-2]: the broker's DISCONNECT
    for it, after CONNACK 0x00, keeps MQTT-3.14.0-1."""
    case = CASES["v5/no-early-disconnect/after-acceptance"]
    kept, _broken = pairs()[case.id]
    judgement = judged(case, kept, closed=True)
    assert not [f for f in judgement.findings if f.side is S], judgement.findings
    assert not [f for f in judgement.findings if f.side is C and "MQTT-3.14.0-1" in f.rules]


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """mosquitto configured with ``max_qos 1`` and ``retain_available false``, which its CONNACK then declares."""
    workdir = tmp_path_factory.mktemp("mosquitto-limited")
    with configured_mosquitto(workdir, "max_qos 1", "retain_available false") as broker:
        yield broker


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, MORE_CASES, "6c6c6c6c")


WILL_CASES = [f"v5/will-beyond-capabilities/{name}" for name in ("qos-one-above", "qos2", "retain")]


def test_every_case_passes_against_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 (Topic Alias Maximum 10) sends no Reason String or User Property at all, takes every alias
    from 1 to 10, closes without DISCONNECT on a CONNECT with a property twice, answers an unknown Authentication
    Method with CONNACK 0x8C and closes."""
    results = run_all(mosquitto)
    assert {case_id: result.verdict for case_id, result in results.items()} == {
        **dict.fromkeys(pairs(), PASS),
        **dict.fromkeys(WILL_CASES, NOT_APPLICABLE),  # Maximum QoS 2 and retained messages: no Will exceeds them
    }


def test_mosquitto_with_maximum_qos_1_and_no_retain_refuses_the_wills_beyond_them(
    mosquitto_limited: RunningBroker,
) -> None:
    """With ``max_qos 1`` and ``retain_available false`` its CONNACK declares both; a Will of QoS 2 gets CONNACK 0x9B
    and a retained Will 0x9A, each followed by the close: every case passes."""
    results = run_all(mosquitto_limited)
    assert {case_id: result.verdict for case_id, result in results.items()} == dict.fromkeys(pairs(), PASS)
    assert results["v5/will-beyond-capabilities/retain"].statements == {v5_connect_more.WILL_RETAIN: PASS}


def test_mqttools_leaves_a_refusal_open_and_takes_wills_above_its_maximum_qos(
    mqttools: RunningBroker,
) -> None:
    """mqttools 0.50.0 answers CONNACK 0x8C and never closes [MQTT-4.12.0-1]; it accepts Wills above the Maximum QoS
    0 it declares [MQTT-3.2.2-12]; it declares no Topic Alias Maximum
    (the alias cases are not applicable) and grants QoS 0 only (the problem-information cases then judge SUBACK
    and UNSUBACK)."""
    results = run_all(mqttools)
    verdicts = {case_id: result.verdict for case_id, result in results.items()}
    assert verdicts == {
        **dict.fromkeys(pairs(), PASS),
        **{f"v5/alias-accepted/{name}": NOT_APPLICABLE for name in ("first", "maximum", "every")},
        "v5/no-early-disconnect/unknown-authentication-method": FAIL,
        # It declares Maximum QoS 0 and accepts a Will of QoS 1 or 2 with CONNACK 0x00 [MQTT-3.2.2-12].
        "v5/will-beyond-capabilities/qos-one-above": FAIL,
        "v5/will-beyond-capabilities/qos2": FAIL,
        "v5/will-beyond-capabilities/retain": NOT_APPLICABLE,
    }
    for name in ("qos-one-above", "qos2"):
        assert (
            "with Maximum QoS 0 accepts a CONNECT whose Will has QoS"
            in results[f"v5/will-beyond-capabilities/{name}"].reason
        )
    failure = results["v5/no-early-disconnect/unknown-authentication-method"]
    assert sorted(rule for f in failure.findings for rule in f.rules) == ["MQTT-4.12.0-1", "MQTT-4.13.2-1"]
    assert "did not close the connection" in failure.reason
