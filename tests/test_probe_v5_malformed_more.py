"""The MQTT 5.0 cases of probe/cases/v5_malformed_more.py: each stimulus breaks exactly the rules it is built for
(pure); per case, a conforming broker keeps every statement the case lists and a violating one breaks every one
(pure, the probe's judge configuration); the judge takes a padded Variable Byte Integer as a Malformed Packet in
5.0 only, and the trie judges a shared filter as the codec does; then every case gets a verdict from mosquitto and
from mqttools, pinned and checked by hand against the spec."""

from __future__ import annotations

from collections import Counter

import pytest

from mqttaudit import codec
from mqttaudit.codec import ProtocolVersion, decode
from mqttaudit.judge import Judgement, judge, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import v5_duplicates, v5_forbidden, v5_malformed, v5_ported
from mqttaudit.probe.cases.malformed import charged
from mqttaudit.probe.cases.v5_malformed_more import (
    CONTENT_TYPE_UTF8,
    PROPERTY_LENGTH_ABSENT,
    RESPONSE_TOPIC_UTF8,
    RESPONSE_TOPIC_WILDCARD,
    SHARE_NAME_FORM,
    SHARE_NAME_PRESENT,
    SHARED,
    STIMULI,
    STRING_PAIR,
    VBI_SHORTEST,
    MoreStimulus,
    decoded_rules,
    targeted,
)
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config
from mqttaudit.topics import InvalidTopic, parse_shared

from .live import run_together
from .talk import S, Talk
from .verdicts import LENIENT, accepting, verdict_of

TIMEOUT = 1.0
#: The duty to close on a Malformed Packet or Protocol Error (on ill-formed UTF-8 or U+0000, the UTF-8 rule's own;
#: for CONNECT, to close without accepting it).
CLOSE_DUTIES = {"MQTT-4.13.1-1", "MQTT-1.5.4-1", "MQTT-1.5.4-2", "MQTT-3.1.4-1"}
OWN_RULES = {
    VBI_SHORTEST,
    STRING_PAIR,
    PROPERTY_LENGTH_ABSENT,
    RESPONSE_TOPIC_UTF8,
    RESPONSE_TOPIC_WILDCARD,
    CONTENT_TYPE_UTF8,
    SHARE_NAME_PRESENT,
    SHARE_NAME_FORM,
}
BY_CASE = {f"v5/malformed/{stimulus.case_id}": stimulus for stimulus in STIMULI}
MORE_CASES = [CASES[case_id] for case_id in BY_CASE]
CONNECT = codec.Connect(client_id="more", protocol_level=5)
#: The acknowledgement that acts on each request a stimulus sends (a QoS 0 PUBLISH has none).
ACTING: dict[int, codec.Packet] = {
    0xC: codec.Pingresp(),
    0x8: codec.Suback(packet_id=1, return_codes=(0x00,)),
    0xA: codec.Unsuback(packet_id=1, reason_codes=(0x00,)),
    0x1: codec.Connack(),
}


def test_every_stimulus_decodes_to_exactly_the_rules_it_is_built_for() -> None:
    for stimulus in STIMULI:
        assert decoded_rules(stimulus) == stimulus.breaks, stimulus.case_id
        # the same with the one-shot decoder of the codec's public interface
        rules = {v.rule for v in decode(stimulus.data, "client", version="5").violations}
        assert rules == set(stimulus.breaks), stimulus.case_id


def test_every_rule_has_several_shapes_in_more_than_one_packet_or_place() -> None:
    shapes = Counter(rule for stimulus in STIMULI for rule in stimulus.breaks if rule in OWN_RULES)
    assert set(shapes) == OWN_RULES
    assert min(shapes.values()) >= 3, shapes
    for rule in OWN_RULES:
        first_bytes = {s.data[0] for s in STIMULI if rule in s.breaks}
        places = {s.case_id.split("-")[0] for s in STIMULI if rule in s.breaks}
        assert len(first_bytes) >= 2 or len(places) >= 2, rule


def test_the_shapes_named_in_the_family_are_there() -> None:
    data = {stimulus.case_id: stimulus.data for stimulus in STIMULI}
    assert data["pingreq-remaining-length-two-bytes"] == bytes.fromhex("c0 80 00")
    assert b"\x0b\x81\x00" in data["subscribe-subscription-identifier-padded"]
    assert b"$share//" in data["subscribe-share-name-empty"]
    assert b"$share/a+b/" in data["subscribe-share-name-with-plus"]
    assert b"$share/a#/" in data["unsubscribe-share-name-with-hash"]
    assert data["subscribe-share-name-without-filter"].endswith(b"$share/mqttaudit\x00")
    # a PUBLISH cut where its Property Length belongs: the Topic Name is the last field
    assert data["publish-qos0-without-property-length"].endswith(b"/v5")


def test_no_other_family_sends_the_same_bytes() -> None:
    families = (v5_malformed, v5_forbidden, v5_ported, v5_duplicates)
    others = {s.data for family in families for s in family.STIMULI}
    assert not [s.case_id for s in STIMULI if s.data in others]


def test_every_case_is_a_50_case_that_targets_its_rules_and_the_duty_to_close() -> None:
    for case_id, stimulus in BY_CASE.items():
        case = CASES[case_id]
        assert case.protocol is ProtocolVersion.V5
        assert case.statements == targeted(stimulus)
        # judged where the rule binds the broker too, provoked where it binds the Client alone (a Topic Filter's)
        assert set(stimulus.breaks) <= {*case.statements, *case.provokes}, case_id
        assert all(not s.rule.binds("server") for s in case.provokes), case_id
        assert CLOSE_DUTIES & set(case.statements), case_id
        assert case.family == f"v5/malformed-{stimulus.family}"
        assert stimulus.as_connect is (stimulus.data[0] >> 4 == 1), case_id
        assert (stimulus.needs == SHARED) is (stimulus.family == "shared-filter"), case_id


# Pure: a conforming broker keeps every statement, a violating one breaks every one ---------------------------------


def _opened(stimulus: MoreStimulus) -> Talk:
    talk = Talk(version="5")
    if not stimulus.as_connect:
        talk.client(CONNECT).server(codec.Connack())
    return talk.client(stimulus.data)


def kept(stimulus: MoreStimulus) -> list[Talk]:
    """The reactions 4.13 allows: the close at once, or after a DISCONNECT (a CONNACK for a CONNECT) with Reason
    Code 0x81 or 0x82."""
    refusal = codec.Connack(return_code=0x81) if stimulus.as_connect else codec.Disconnect(reason_code=0x81)
    answered = codec.Connack(return_code=0x82) if stimulus.as_connect else codec.Disconnect(reason_code=0x82)
    return [
        _opened(stimulus).closed(S),
        _opened(stimulus).server(refusal).closed(S),
        _opened(stimulus).server(answered).closed(S),
    ]


def broken(stimulus: MoreStimulus) -> list[Talk]:
    """A broker that leaves the connection open, and one that acts on the packet (its acknowledgement) and then
    closes; for a shared filter, one that answers SUBACK 0x8F (Topic Filter invalid: for a filter "correctly formed
    but not allowed for this Client", which none of these is) or UNSUBACK 0x11."""
    talks = [_opened(stimulus).quiet(after=10)]
    first = stimulus.data[0]
    if first >> 4 == 3 and first & 0x06:
        qos = (first >> 1) & 3
        ack = codec.Puback(packet_id=1) if qos == 1 else codec.Pubrec(packet_id=1)
        talks.append(_opened(stimulus).server(ack).closed(S))
    elif first >> 4 in ACTING:
        talks.append(_opened(stimulus).server(ACTING[first >> 4]).closed(S))
    if stimulus.family == "shared-filter":
        packet = decode(stimulus.data, "client", version="5").packets[0]
        refusal: codec.Packet = (
            codec.Suback(packet_id=1, return_codes=(0x00,) * (len(packet.subscriptions) - 1) + (0x8F,))
            if isinstance(packet, codec.Subscribe)
            else codec.Unsuback(packet_id=1, reason_codes=(0x11,))
        )
        talks.append(_opened(stimulus).server(refusal).closed(S))
    return talks


def judged(case: Case, talk: Talk) -> Judgement:
    return judge_scenario({"c1": talk.events}, judge_config(case, TIMEOUT))


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_conforming_broker_keeps_every_statement_of_the_case(case: Case) -> None:
    for talk in kept(BY_CASE[case.id]):
        judgement = judged(case, talk)
        assert set(case.statements) <= judgement.passed, (case.statements, sorted(judgement.assessed))
        assert not [f for f in judgement.findings if f.side is S], judgement.findings


@pytest.mark.parametrize("case", MORE_CASES, ids=lambda case: case.id)
def test_a_violating_broker_is_charged_with_every_statement_of_the_case(case: Case) -> None:
    """Each statement fails, or is accepted leniently where nothing binds the server to detect the defect."""
    talks = broken(BY_CASE[case.id])
    assert len(talks) >= 2 or BY_CASE[case.id].data[0] == 0x30  # a QoS 0 PUBLISH has nothing to answer
    for talk in talks:
        charged_with = set(charged(judged(case, talk)))
        assert set(case.statements) <= charged_with, (case.statements, sorted(charged_with))


# Pure: the judge and the trie ----------------------------------------------------------------------------------


def test_a_padded_remaining_length_is_a_malformed_packet_in_50_only() -> None:
    """[MQTT-1.5.5-1] 5.0 makes the shortest Variable Byte Integer a MUST; 3.1.1 gives the algorithm but no MUST:
    a PINGRESP to ``c0 80 00`` is leniency of the 5.0 server (4.13.1), nothing of the 3.1.1 one."""
    v5 = Talk(version="5").client(CONNECT).server(codec.Connack()).client("c0 80 00").server(codec.Pingresp())
    judgement = judge(v5.quiet(after=10).events, judge_config(MORE_CASES[0], TIMEOUT))
    assert not [f for f in judgement.findings if f.side is S]  # no statement binds the server to detect it
    assert [(x.rule, x.side) for x in judgement.lenient] == [(VBI_SHORTEST, S)]
    v3 = Talk().client(codec.Connect(client_id="more")).server(codec.Connack()).client("c0 80 00")
    findings = judge(v3.server(codec.Pingresp()).quiet(after=10).events).findings
    assert not [f for f in findings if f.side is S], findings


@pytest.mark.parametrize(
    "stimulus", [s for s in STIMULI if s.family == "shared-filter"], ids=lambda stimulus: stimulus.case_id
)
def test_the_trie_refuses_each_shared_filter_by_the_rule_the_codec_reads(stimulus: MoreStimulus) -> None:
    packet = decode(stimulus.data, "client", version="5").packets[0]
    filters = (
        [s.topic_filter for s in packet.subscriptions]
        if isinstance(packet, codec.Subscribe)
        else list(getattr(packet, "topic_filters", ()))
    )
    with pytest.raises(InvalidTopic) as refused:
        parse_shared(filters[-1])
    assert refused.value.rule == stimulus.breaks[0]


# Live ----------------------------------------------------------------------------------------------------------


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    return run_together(broker, MORE_CASES, "6d6d6d6d")


#: mosquitto 2.0.11's acceptances, checked by hand (see the test's docstring): fails where a statement binds the
#: server to detect the defect (the Will Properties of a CONNECT, MQTT-3.1.4-1), leniency otherwise.
MOSQUITTO_ACCEPTS = {
    f"v5/malformed/{name}"
    for name in (
        "pingreq-remaining-length-two-bytes",
        "pingreq-remaining-length-three-bytes",
        "publish-qos1-remaining-length-padded",
        "subscribe-remaining-length-padded",
        "publish-qos1-response-topic-plus",
        "publish-response-topic-hash",
        "will-response-topic-hash",
        "will-response-topic-plus",
        "subscribe-share-name-empty",
        "subscribe-share-name-without-filter",
        "subscribe-share-name-then-empty-filter",
        "subscribe-share-name-plus",
        "subscribe-share-name-empty-after-a-good-filter",
        "unsubscribe-share-name-empty",
        "unsubscribe-share-name-without-filter",
    )
}


def test_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 closes (DISCONNECT 0x81 first, or a CONNACK 0x80+ for a CONNECT) on every padded Property
    Length and Subscription Identifier, every User Property, Response Topic and Content Type of ill-formed UTF-8 or
    with U+0000, every PUBLISH without its Property Length, and a ShareName holding a wildcard inside a longer
    level ('$share/a+b/..', '$share/a#/..': its Topic Filter check refuses those levels). It fails, each checked by
    hand against the spec:

    - [MQTT-1.5.5-1] a padded Remaining Length is read and acted on: PINGREQ ``c0 80 00`` and ``c0 80 80 00`` get
      PINGRESP ``d0 00``; a QoS 1 PUBLISH ``32 cd 00 ..`` (77 in two bytes) gets PUBACK ``40 03 00 01 10``; a
      SUBSCRIBE ``82 ca 00 ..`` gets SUBACK 0x00. 1.5.5 says "The encoded value MUST use the minimum number of bytes
      necessary" and 2.1.4 makes the Remaining Length a Variable Byte Integer: such a packet cannot be parsed by
      the rules (a Malformed Packet, section 1.2). The statement binds the sender; 4.13.1 binds the server to close
      only once it detects the error: leniency.
    - [MQTT-3.3.2-14] a Response Topic with a wildcard ('a/+' at QoS 1: PUBACK; '#' at QoS 0: left open; in the Will
      Properties 'a/#' and '+/b': CONNACK 0x00). 3.3.2.3.5: "The Response Topic MUST NOT contain wildcard
      characters"; it is data the protocol does not allow, a Protocol Error (section 1.2), which binds the sender:
      leniency in a PUBLISH; in a CONNECT's Will Properties a fail, since the server validates the whole CONNECT
      [MQTT-3.1.4-1].
    - [MQTT-4.8.2-1, -2] a Shared Subscription filter of a broken form is granted: SUBACK ``90 04 00 01 00 00`` for
      '$share//<p>' (alone and after a good filter), '$share/mqttaudit' (no '/' after the ShareName),
      '$share/mqttaudit/' (no Topic Filter after it) and '$share/+/<p>' (a ShareName '+'); UNSUBACK
      ``b0 04 00 01 00 11`` for '$share//<p>' and '$share/mqttaudit'. 4.8.2: "A Shared Subscription's Topic Filter
      MUST start with $share/ and MUST contain a ShareName that is at least one character long [MQTT-4.8.2-1].
      The ShareName MUST NOT contain the characters "/", "+" or "#", but MUST be followed by a "/" character. This
      "/" character MUST be followed by a Topic Filter [MQTT-4.8.2-2]": both bind every filter that starts
      '$share/' (they would bind none if such a filter could be an ordinary one), its writer being the Client;
      the broker's duty is the close on a Malformed Packet (4.13.1), and no SUBACK or UNSUBACK code
      answers a filter that is not correctly formed (0x8F is "correctly formed but not allowed"). Its CONNACK
      declares no Shared Subscription Available, so shared subscriptions are supported (3.2.2.3.15). Both bind the
      sender of the filter: leniency.
    """
    results = run_all(mosquitto)
    verdicts = {case_id: verdict_of(result) for case_id, result in results.items()}
    assert verdicts == {
        case_id: accepting(CASES[case_id]) if case_id in MOSQUITTO_ACCEPTS else PASS for case_id in BY_CASE
    }
    assert {verdicts[f"v5/malformed/will-response-topic-{w}"] for w in ("hash", "plus")} == {FAIL}
    assert results["v5/malformed/publish-qos1-property-length-padded"].statements == {
        VBI_SHORTEST: PASS,
        "MQTT-4.13.1-1": PASS,
    }
    granted = results["v5/malformed/subscribe-share-name-empty"]
    assert granted.findings == [] and [entry.rule for entry in granted.lenient] == [SHARE_NAME_PRESENT]
    assert "SUBACK id 1 (event 3) answers the offending packet" in granted.lenient[0].detail


def test_mqttools(mqttools: RunningBroker) -> None:
    """mqttools 0.50.0 declares Shared Subscription Available 0 in its CONNACK (``20 09 00 00 06 24 00 28 00 2a
    00``), so the shared-filter cases do not apply. It fails every other case, checked by hand: it never closes the
    connection. To some packets it answers DISCONNECT ``e0 02 81 00`` and leaves the connection open (a PUBLISH cut
    where its Property Length belongs; a QoS 1 PUBLISH, which it refuses whatever it holds); to the others nothing
    at all (a User Property, Response Topic or Content Type of ill-formed UTF-8 or with U+0000, a malformed
    CONNECT). It reads a padded Remaining Length, Property Length or Subscription Identifier without a check
    (PINGRESP ``d0 00`` to ``c0 80 00``, SUBACK ``90 04 00 01 00 00`` to the padded SUBSCRIBEs, CONNACK 0x00 to a
    CONNECT whose Property Length is ``80 00``), and answers CONNACK 0x00 to Will Properties holding a Response
    Topic with a wildcard. A CONNECT's defects fail [MQTT-3.1.4-1] (the server validates the whole CONNECT); the
    others bind the sender, and 4.13.1 binds the server to close only once it detects them: leniency."""
    results = run_all(mqttools)
    verdicts = {case_id: verdict_of(result) for case_id, result in results.items()}
    assert verdicts == {
        case_id: NOT_APPLICABLE if stimulus.needs == SHARED else accepting(CASES[case_id])
        for case_id, stimulus in BY_CASE.items()
    }
    assert {verdicts[case_id] for case_id in BY_CASE if BY_CASE[case_id].needs != SHARED} == {FAIL, LENIENT}
    for case_id, result in results.items():
        if BY_CASE[case_id].needs == SHARED:
            assert "shared_available = false" in result.reason
    padded = results["v5/malformed/pingreq-remaining-length-two-bytes"]
    assert "PINGRESP (event 3) answers" in padded.lenient[0].detail
