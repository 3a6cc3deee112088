"""The MQTT 5.0 cases of probe/cases/v5_limits_more.py: every statement a case lists is one the judge decides,
kept by a conforming broker and broken by a violating one (pure, the probe's judge configuration, with the
runner's own findings on the broker's malformed bytes); every case gets a verdict from mosquitto (default, and
with a Maximum Packet Size configured) and from mqttools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Judgement, Sent, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_limits_more as more
from mqttaudit.probe.runner import FAIL, LENIENT, NOT_APPLICABLE, PASS, CaseResult, judge_config

from .live import configured_mosquitto, run_together
from .talk import S, Talk

TIMEOUT = 1.0
MODULE = "mqttaudit.probe.cases.v5_limits_more"
MORE_CASES = [case for case in CASES.values() if case.script.__module__ == MODULE]
TOPIC = "mqttaudit/run/more/t"
SMALL = make(maximum_packet_size=more.SMALL_PACKET_SIZE)
#: A Reason String and a User Property each too large to leave the other alone within 24 bytes.
WORDY = make(reason_string="r" * 20, user_property=("k" * 8, "v" * 8))


def opened(client: tuple[codec.Property, ...] = SMALL, server: dict[str, int] | None = None, cid: str = "c") -> Talk:
    connect = codec.Connect(protocol_level=5, client_id=cid, properties=client)
    return Talk(version="5").client(connect).server(codec.Connack(properties=make(**(server or {}))))


Pair = tuple[dict[str, Talk], dict[str, Talk]]


def _server_disconnect(stimulus: list[codec.Packet], code: int, server: dict[str, int] | None = None) -> Pair:
    """A conforming broker: a bare DISCONNECT, then the close. A violating one: a DISCONNECT whose Reason String and
    User Property take it over the maximum, then another with a Session Expiry Interval, and no close."""
    kept = opened(server=server).client(*stimulus).server(codec.Disconnect(reason_code=code)).closed(S)
    wordy = codec.Disconnect(reason_code=code, properties=WORDY)
    expiring = codec.Disconnect(reason_code=code, properties=make(session_expiry_interval=10))
    broken = opened(server=server).client(*stimulus).server(wordy, expiring).quiet(after=10)
    return {"c1": kept}, {"c1": broken}


def _connack() -> Pair:
    method = make(maximum_packet_size=more.SMALL_PACKET_SIZE, authentication_method=more.UNKNOWN_METHOD)
    refused = codec.Connect(protocol_level=5, client_id="r", properties=method)
    kept = {
        "accepted": opened().client(codec.Disconnect()).closed(codec.Direction.FROM_CLIENT),
        "refused": Talk(version="5").client(refused).server(codec.Connack(return_code=0x8C)).closed(S),
    }
    broken = {
        "accepted": Talk(version="5")
        .client(codec.Connect(protocol_level=5, client_id="c", properties=SMALL))
        .server(codec.Connack(properties=WORDY))
        .quiet(after=10),
        "refused": Talk(version="5")
        .client(refused)
        .server(codec.Connack(return_code=0x8C, properties=WORDY))
        .closed(S),
    }
    return kept, broken


def _pubrel() -> Pair:
    def subscriber(pubrel: codec.Pubrel) -> Talk:
        talk = opened(make(maximum_packet_size=more.PUBREL_PACKET_SIZE))
        talk.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter=TOPIC, qos=2),)))
        talk.server(codec.Suback(packet_id=1, return_codes=(2,)))
        talk.server(codec.Publish(topic=TOPIC, payload=b"m", qos=2, packet_id=1)).client(codec.Pubrec(packet_id=1))
        return talk.server(pubrel).client(codec.Pubcomp(packet_id=1)).quiet(after=10)

    wordy = make(reason_string="r" * 40, user_property=("k" * 20, "v" * 20))
    return {"subscriber": subscriber(codec.Pubrel(packet_id=1))}, {
        "subscriber": subscriber(codec.Pubrel(packet_id=1, reason_code=0, properties=wordy))
    }


def _mapped_before_reconnecting() -> Pair:
    aliased = codec.Publish(topic="", payload=b"x", properties=make(topic_alias=1))
    kept = opened(server={"topic_alias_maximum": 10}).client(aliased).closed(S)
    broken = opened(server={"topic_alias_maximum": 10}).client(aliased).quiet(after=10)
    return {"again": kept}, {"again": broken}


def _to_client_after_reconnecting() -> Pair:
    declared = make(topic_alias_maximum=2)
    mapped = codec.Publish(topic=TOPIC, payload=b"a0", properties=make(topic_alias=1))
    alone = codec.Publish(topic="", payload=b"a1", properties=make(topic_alias=1))
    kept = opened(declared).server(mapped, alone).quiet(after=10)
    broken = opened(declared).server(alone).quiet(after=10)
    return {"again": kept}, {"again": broken}


def pairs() -> dict[str, Pair]:
    alias = {"topic_alias_maximum": 10}
    over = codec.Publish(topic=TOPIC, payload=b"x" * 200)
    return {
        "v5/server-disconnect/topic-alias-invalid": _server_disconnect(
            [codec.Publish(topic=TOPIC, payload=b"x", properties=make(topic_alias=11))], 0x94, alias
        ),
        "v5/server-disconnect/packet-too-large": _server_disconnect([over], 0x95, {"maximum_packet_size": 100}),
        "v5/server-disconnect/session-taken-over": _server_disconnect([], 0x8E),
        "v5/server-disconnect/receive-maximum-exceeded": _server_disconnect(
            [codec.Publish(topic=TOPIC, payload=b"x", qos=2, packet_id=i) for i in (1, 2, 3)],
            0x93,
            {"receive_maximum": 2},
        ),
        "v5/server-disconnect/protocol-error": _server_disconnect(
            [codec.Connect(protocol_level=5, client_id="c", properties=SMALL)], 0x82
        ),
        "v5/small-maximum/connack": _connack(),
        "v5/small-maximum/pubrel": _pubrel(),
        "v5/topic-alias/mapped-before-reconnecting": _mapped_before_reconnecting(),
        "v5/topic-alias/to-client-after-reconnecting": _to_client_after_reconnecting(),
    }


def judged(case: Case, conversations: dict[str, Talk]) -> Judgement:
    return judge_scenario({name: talk.events for name, talk in conversations.items()}, judge_config(case, TIMEOUT))


def codec_findings(conversations: dict[str, Talk]) -> set[str]:
    """The rules the broker's own bytes break (the runner reports them beside the judge's findings)."""
    return {
        violation.rule
        for talk in conversations.values()
        for event in talk.events
        if isinstance(event, Sent) and event.sender is S
        for violation in event.frame.violations
    }


def test_every_case_has_a_pair() -> None:
    assert sorted(case.id for case in MORE_CASES) == sorted(pairs())


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_the_judge_decides_every_statement_of_the_case_both_ways(case: Case) -> None:
    kept, broken = pairs()[case.id]
    conforming = judged(case, kept)
    assert set(case.statements) <= conforming.assessed, (case.statements, sorted(conforming.assessed))
    assert not [f for f in conforming.findings if not set(f.rules).isdisjoint(case.statements) and f.side is S]
    assert not codec_findings(kept) & set(case.statements)
    violating = judged(case, broken)
    failed = {rule for f in violating.findings if f.side is S for rule in f.rules} | codec_findings(broken)
    assert set(case.statements) <= failed, (case.statements, sorted(failed))


# Live ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_with_packet_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with configured_mosquitto(tmp_path_factory.mktemp("mosquitto-mps"), "max_packet_size 200") as broker:
        yield broker


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, MORE_CASES, "7d7d7d7d")


def test_every_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 sends DISCONNECT 0x94 for a Topic Alias above its maximum, bare, then closes; it closes
    without DISCONNECT on a session taken over and on a second CONNECT; it refuses a PUBLISH beyond its Receive
    Maximum with 0x97 and stays open (3.3.4 names DISCONNECT 0x93 without a MUST: leniency, section 4.13.1); it
    sends no aliases toward clients."""
    verdicts = {case_id: result.verdict for case_id, result in run_all(mosquitto).items()}
    assert verdicts == {
        "v5/server-disconnect/topic-alias-invalid": PASS,
        "v5/server-disconnect/packet-too-large": NOT_APPLICABLE,  # no Maximum Packet Size by default
        "v5/server-disconnect/session-taken-over": NOT_APPLICABLE,
        "v5/server-disconnect/receive-maximum-exceeded": LENIENT,
        "v5/server-disconnect/protocol-error": NOT_APPLICABLE,
        "v5/small-maximum/connack": PASS,
        "v5/small-maximum/pubrel": PASS,
        "v5/topic-alias/mapped-before-reconnecting": PASS,
        "v5/topic-alias/to-client-after-reconnecting": NOT_APPLICABLE,
    }


def test_mosquitto_with_a_maximum_packet_size_takes_a_packet_one_byte_over_without_disconnect(
    mosquitto_with_packet_limit: RunningBroker,
) -> None:
    """It takes the 201-byte PUBLISH (its off-by-one, mosquitto#3515) with no DISCONNECT 0x95: 5.0 names that
    answer without a MUST, so it is leniency (section 4.13.1), as in v5/maximum-packet-size/from-client-*."""
    results = run_all(mosquitto_with_packet_limit)
    assert results["v5/server-disconnect/packet-too-large"].verdict == LENIENT
    assert results["v5/server-disconnect/topic-alias-invalid"].verdict == PASS


def test_every_case_gets_a_verdict_from_mqttools(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 answers a second CONNECT with DISCONNECT 0x82 (bytes e0 02 82 00) and leaves the connection
    open: 3.14.4 "After sending a DISCONNECT packet the sender MUST close the Network Connection" [MQTT-3.14.4-2].
    It keeps an old connection open on a session takeover [MQTT-3.1.4-3], which fails the case that sees it though
    the DISCONNECT it targets is optional there, and takes an alias it never allowed, without DISCONNECT (not
    applicable here); it declares Maximum QoS 0 and no Topic Alias Maximum."""
    results = run_all(mqttools)
    verdicts = {case_id: result.verdict for case_id, result in results.items()}
    assert verdicts == {
        # it takes an alias above its maximum (none declared) and stays open: no MUST binds it to detect that
        "v5/server-disconnect/topic-alias-invalid": LENIENT,
        "v5/server-disconnect/packet-too-large": NOT_APPLICABLE,
        "v5/server-disconnect/session-taken-over": FAIL,
        "v5/server-disconnect/receive-maximum-exceeded": NOT_APPLICABLE,
        "v5/server-disconnect/protocol-error": FAIL,
        "v5/small-maximum/connack": PASS,
        "v5/small-maximum/pubrel": NOT_APPLICABLE,
        "v5/topic-alias/mapped-before-reconnecting": NOT_APPLICABLE,
        "v5/topic-alias/to-client-after-reconnecting": NOT_APPLICABLE,
    }
    assert [f.rule for f in results["v5/server-disconnect/session-taken-over"].findings] == ["MQTT-3.1.4-3"]
    failed = results["v5/server-disconnect/protocol-error"]
    assert {rule for rule, verdict in failed.statements.items() if verdict == FAIL} == {"MQTT-3.14.4-2"}
