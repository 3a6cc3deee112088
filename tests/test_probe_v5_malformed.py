"""The MQTT 5.0 malformed-property family: each stimulus breaks exactly the rule it is built for (pure), and every
case gets a verdict against a real mosquitto."""

from __future__ import annotations

from collections import Counter

from mqttaudit.codec import ProtocolVersion, decode
from mqttaudit.codec import properties as props
from mqttaudit.codec import rules as codec_rules
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES
from mqttaudit.probe.cases.v5_malformed import STIMULI, UNKNOWN_IDENTIFIERS, decoded_rules, targeted

from .live import run_together

TIMEOUT = 1.0
#: The duty to close on a Malformed Packet or Protocol Error; for CONNECT, to close without accepting it.
CLOSE_DUTIES = {"MQTT-4.13.1-1", "MQTT-3.1.4-1"}


def test_every_stimulus_decodes_to_exactly_the_intended_violation() -> None:
    for stimulus in STIMULI:
        assert decoded_rules(stimulus) == (stimulus.breaks,), stimulus.case_id
        # the same with the one-shot decoder of the codec's public interface
        rules = {v.rule for v in decode(stimulus.data, "client", version="5").violations}
        assert rules == {stimulus.breaks}, stimulus.case_id


def test_every_rule_has_at_least_two_shapes() -> None:
    # a repeated property is :mod:`v5_duplicates`' family, in every packet a client sends
    shapes = Counter(stimulus.breaks for stimulus in STIMULI)
    intended = {
        codec_rules.PROPERTY_PACKET,
        codec_rules.PROPERTY_IDENTIFIER,
        codec_rules.PROPERTY_VALUE,
        codec_rules.PROPERTY_LENGTH,
        codec_rules.TOPIC_ALIAS_ZERO,
        codec_rules.SUBSCRIPTION_ID_FROM_CLIENT,
    }
    assert set(shapes) == intended
    assert min(shapes.values()) >= 2, shapes


def test_the_shapes_named_in_the_family_are_there() -> None:
    ids = {stimulus.case_id for stimulus in STIMULI}
    assert {
        "publish-with-session-expiry-interval",
        "subscribe-with-topic-alias",
        "publish-unknown-property-0x7f",
        "subscribe-unknown-property-0x00",
        "subscribe-subscription-identifier-0",
        "publish-topic-alias-0",
        "connect-request-problem-information-2",
        "publish-property-length-overrun-by-one",
        "subscribe-property-length-overrun-by-one",
        "publish-from-client-subscription-identifier-one",
    } <= ids
    # 3.3.2.3.2 names no error for an undefined Payload Format Indicator: no close is owed, so no case
    assert "publish-payload-format-indicator-2" not in ids
    assert not set(UNKNOWN_IDENTIFIERS) & set(props.BY_ID)


def test_only_connect_defects_open_the_connection() -> None:
    for stimulus in STIMULI:
        assert stimulus.as_connect is (stimulus.data[0] >> 4 == 1), stimulus.case_id


def test_every_case_is_a_50_case_that_targets_the_duty_to_close() -> None:
    for stimulus in STIMULI:
        case = CASES[f"v5/malformed/{stimulus.case_id}"]
        assert case.protocol is ProtocolVersion.V5
        assert case.statements == targeted(stimulus)
        assert CLOSE_DUTIES & set(case.statements), stimulus.case_id
        assert case.family == f"v5/malformed-{stimulus.family}"
        assert stimulus.breaks in case.stimulus


def test_every_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    run_together(mosquitto, [CASES[f"v5/malformed/{stimulus.case_id}"] for stimulus in STIMULI], "5a5a5a5a")
