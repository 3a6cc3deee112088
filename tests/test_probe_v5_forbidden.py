"""The MQTT 5.0 forbidden-packet and allowed-outcome families: each stimulus breaks the rule it is built for, the
judge decides every statement a case lists (a conforming reaction passes, a violating one fails, on a 5.0
conversation written with the real codec), and every case gets a verdict against a real mosquitto."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec import (
    Connack,
    Connect,
    Disconnect,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    reason_codes,
)
from mqttaudit.codec import properties as props
from mqttaudit.judge import judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases.v5_forbidden import (
    DELIVERY_PUBREL,
    DELIVERY_QOS1,
    DELIVERY_QOS2,
    OWN_QOS2,
    STIMULI,
    ForbiddenStimulus,
    ack_bytes,
    decoded_rules,
    targeted,
)
from mqttaudit.probe.outcome import FAIL, PASS
from mqttaudit.probe.runner import judge_config
from mqttaudit.spec import load_catalogue
from tests.live import run_together
from tests.talk import C, S, Talk
from tests.verdicts import accepting, verdict

TIMEOUT = 1.0
#: Statements that oblige the server to close on the packet (5.0 ids).
CLOSE_DUTIES = {
    "MQTT-4.13.1-1",
    "MQTT-3.1.4-1",
    "MQTT-3.1.0-2",
    "MQTT-3.3.1-4",
    "MQTT-3.6.1-1",
    "MQTT-3.8.1-1",
    "MQTT-3.8.3-5",
    "MQTT-3.10.1-1",
    "MQTT-3.14.1-1",
}
FAMILY = "v5/forbidden"
#: A delivery's Packet Identifier in the conversations below (the broker's own, not the client's).
DELIVERED_ID = 7
OWN_ID = 3


def _case(stimulus: ForbiddenStimulus) -> Case:
    return CASES[f"{FAMILY}/{stimulus.case_id}"]


def _verdict(case: Case, *talks: Talk) -> str:
    judgement = judge_scenario({f"c{n}": talk.events for n, talk in enumerate(talks)}, judge_config(case, TIMEOUT))
    return verdict(case, judgement)


def _connected(client_id: str = "forbidden", **connect: object) -> Talk:
    packet = Connect(protocol_level=5, client_id=client_id, **connect)  # type: ignore[arg-type]
    return Talk(version="5").client(packet).server(Connack())


def _up_to_stimulus(stimulus: ForbiddenStimulus) -> Talk:
    """A 5.0 conversation up to the stimulus, sent as the probe sends it: after the flow it answers, with the
    flow's Packet Identifier."""
    if stimulus.as_connect:
        return Talk(version="5").client(stimulus.data)
    talk = _connected()
    if stimulus.ack is None:
        return talk.client(stimulus.data)
    if stimulus.answers == OWN_QOS2:
        talk.client(Publish(topic="own", payload=b"q2", qos=2, packet_id=OWN_ID))
        talk.server(Pubrec(packet_id=OWN_ID, reason_code=0x00))
        return talk.client(ack_bytes(*stimulus.ack, OWN_ID))
    qos = 1 if stimulus.answers == DELIVERY_QOS1 else 2
    talk.client(Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter="t", qos=qos),)))
    talk.server(Suback(packet_id=1, return_codes=(qos,)))
    talk.server(Publish(topic="t", payload=b"answered", qos=qos, packet_id=DELIVERED_ID))
    if stimulus.answers == DELIVERY_PUBREL:
        talk.client(Pubrec(packet_id=DELIVERED_ID, reason_code=0x00)).server(Pubrel(packet_id=DELIVERED_ID))
    return talk.client(ack_bytes(*stimulus.ack, DELIVERED_ID))


def _carried_on(stimulus: ForbiddenStimulus, talk: Talk) -> Talk:
    """What a broker that takes the stimulus for a good packet does next, then silence."""
    if stimulus.answers == DELIVERY_QOS2:
        talk.server(Pubrel(packet_id=DELIVERED_ID))
    elif stimulus.answers == OWN_QOS2:
        talk.server(Pubcomp(packet_id=OWN_ID, reason_code=0x00))
    return talk.quiet(after=3600)


# --- the stimuli -------------------------------------------------------------------------------------------


def test_every_reason_code_stimulus_decodes_to_exactly_its_packets_rule() -> None:
    shapes = [s for s in STIMULI if s.family == "reason-code"]
    assert {s.breaks for s in shapes} == {
        "MQTT-3.4.2-1",
        "MQTT-3.5.2-1",
        "MQTT-3.6.2-1",
        "MQTT-3.7.2-1",
        "MQTT-3.14.2-1",
        "MQTT-3.15.2-1",
    }
    for stimulus in shapes:
        assert decoded_rules(stimulus) == (stimulus.breaks,), stimulus.case_id
        # the one-shot decoder of the codec's public interface reads the same
        assert {v.rule for v in codec.decode(stimulus.data, "client", version="5").violations} == {stimulus.breaks}


def test_the_reason_codes_are_outside_what_their_packet_or_a_client_may_use() -> None:
    for stimulus in STIMULI:
        if stimulus.family != "reason-code":
            continue
        packet_type = stimulus.data[0] >> 4
        code = stimulus.data[4] if stimulus.ack is not None else stimulus.data[2]  # after the Packet Identifier
        if code in reason_codes.ALLOWED[packet_type]:  # a DISCONNECT code of the server's only (Table 3.10)
            assert packet_type == codec.PacketType.DISCONNECT, stimulus.case_id
            assert codec.Direction.FROM_CLIENT not in reason_codes.BY_VALUE[code].disconnect_senders


def test_every_other_stimulus_breaks_its_rule_and_a_second_connect_none() -> None:
    for stimulus in STIMULI:
        if stimulus.family == "reason-code":
            continue
        rules = decoded_rules(stimulus)
        if stimulus.case_id.startswith("second-connect"):
            assert rules == (), stimulus.case_id  # a valid CONNECT: its place is the defect
        else:
            assert stimulus.breaks in rules, (stimulus.case_id, rules)


def test_every_fixed_flag_bit_of_every_client_packet_has_a_shape() -> None:
    flags = {s.case_id for s in STIMULI if s.family == "fixed-flags"}
    assert len(flags) == 10 * 4
    assert {"auth-flag-bit-0", "auth-flag-bit-3", "pubrel-flag-bit-1", "connect-flag-bit-2"} <= flags


def test_every_family_has_several_shapes_per_rule() -> None:
    by_rule: dict[str, int] = {}
    for stimulus in STIMULI:
        key = stimulus.breaks or "second CONNECT"
        by_rule[key] = by_rule.get(key, 0) + 1
    assert min(by_rule.values()) >= 3, by_rule


# --- what each case targets, and that the judge decides it -------------------------------------------------


def test_every_case_is_a_50_case_of_statements_the_catalogue_has() -> None:
    catalogue = load_catalogue("5.0")
    cases = [case for case_id, case in CASES.items() if case_id.startswith(f"{FAMILY}/")]
    assert len(cases) >= len(STIMULI) + 10
    for case in cases:
        assert case.protocol is ProtocolVersion.V5
        assert case.family.startswith("v5/forbidden-"), case.id
        assert case.statements and all(s in catalogue for s in case.statements), case.id


def test_every_stimulus_case_targets_what_the_judge_decides_and_a_duty_to_close() -> None:
    for stimulus in STIMULI:
        case = _case(stimulus)
        assert case.statements == targeted(stimulus)
        assert CLOSE_DUTIES & set(case.statements), stimulus.case_id
        if stimulus.breaks:
            assert stimulus.breaks in case.stimulus


@pytest.mark.parametrize("stimulus", STIMULI, ids=lambda s: s.case_id)
def test_a_close_passes_and_carrying_on_fails_or_is_lenient(stimulus: ForbiddenStimulus) -> None:
    """On the conversation the probe has (the flow the packet answers included): closing passes, with or without
    a DISCONNECT 0x81 or 0x82 first; carrying on as if the packet were good fails where a statement binds the server
    to detect the defect, and is lenient otherwise (4.13.1)."""
    case = _case(stimulus)
    assert _verdict(case, _up_to_stimulus(stimulus).closed(S)) == PASS
    if not stimulus.as_connect:
        code = 0x82 if stimulus.case_id.startswith("second-connect") else 0x81
        assert _verdict(case, _up_to_stimulus(stimulus).server(Disconnect(reason_code=code)).closed(S)) == PASS
    assert _verdict(case, _carried_on(stimulus, _up_to_stimulus(stimulus))) == accepting(case)


@pytest.mark.parametrize(
    "stimulus", [s for s in STIMULI if s.answers in (DELIVERY_QOS2, OWN_QOS2)], ids=lambda s: s.case_id
)
def test_an_acknowledgement_of_the_flow_is_acting_on_it(stimulus: ForbiddenStimulus) -> None:
    """A server that completes the flow the bad packet answers acts on it (PUBREL for a PUBREC, PUBCOMP for a
    PUBREL): a fail, or leniency where nothing binds it to detect the defect, even when it closes afterwards."""
    talk = _carried_on(stimulus, _up_to_stimulus(stimulus))
    talk.events.pop()  # the silence: close instead
    assert _verdict(_case(stimulus), talk.closed(S)) == accepting(_case(stimulus))


AUTH_CASES = [case_id for case_id in CASES if case_id.startswith(f"{FAMILY}/connect-unsupported-authentication")]


@pytest.mark.parametrize("case_id", AUTH_CASES)
def test_an_unsupported_authentication_method_is_refused_then_closed(case_id: str) -> None:
    case = CASES[case_id]
    method = props.make(authentication_method="X-MQTTAUDIT-UNSUPPORTED")
    connect = Connect(protocol_level=5, client_id="auth", properties=method)
    for code in (0x8C, 0x87):
        refused = Talk(version="5").client(connect).server(Connack(return_code=code))
        assert _verdict(case, refused.closed(S)) == PASS
    kept_open = Talk(version="5").client(connect).server(Connack(return_code=0x8C)).quiet(after=3600)
    assert _verdict(case, kept_open) == FAIL
    assert len(AUTH_CASES) >= 3


UNSUBSCRIBE_CASES = [case_id for case_id in CASES if case_id.startswith(f"{FAMILY}/unsubscribe-never-subscribed")]


@pytest.mark.parametrize("case_id", UNSUBSCRIBE_CASES)
def test_a_filter_never_subscribed_may_be_answered_0x00_or_0x11(case_id: str) -> None:
    case = CASES[case_id]
    filters = ("p/never", "p/never/either") if case_id.endswith("two-filters") else ("p/never",)

    def answered(*codes: int) -> Talk:
        talk = _connected().client(Unsubscribe(packet_id=2, topic_filters=filters))
        return talk.server(Unsuback(packet_id=2, reason_codes=codes)).client(Disconnect()).closed(C)

    for code in (0x11, 0x00, 0x80):
        assert _verdict(case, answered(*(code,) * len(filters))) == PASS, hex(code)
    assert _verdict(case, answered(*(0x11,) * (len(filters) - 1))) == FAIL  # a Reason Code short
    assert (
        _verdict(case, _connected().client(Unsubscribe(packet_id=2, topic_filters=filters)).quiet(after=3600)) == FAIL
    )


NOBODY_CASES = [case_id for case_id in CASES if case_id.startswith(f"{FAMILY}/publish-qos") and "qos-3" not in case_id]


@pytest.mark.parametrize("case_id", NOBODY_CASES)
def test_a_message_nobody_receives_passes_with_0x00_or_0x10(case_id: str) -> None:
    case = CASES[case_id]
    qos = 1 if "qos1" in case_id else 2
    message = Publish(topic="p/nobody", payload=b"nobody", qos=qos, packet_id=OWN_ID)

    def answered(code: int, completion: int | None = 0x00) -> Talk:
        talk = _connected().client(message)
        if qos == 1:
            return talk.server(Puback(packet_id=OWN_ID, reason_code=code)).client(Disconnect()).closed(C)
        talk.server(Pubrec(packet_id=OWN_ID, reason_code=code)).client(Pubrel(packet_id=OWN_ID, reason_code=0))
        if completion is not None:
            talk.server(Pubcomp(packet_id=OWN_ID, reason_code=completion))
        return talk.quiet(after=3600)

    assert _verdict(case, answered(0x00)) == PASS
    assert _verdict(case, answered(0x10)) == PASS
    assert _verdict(case, _connected().client(message).quiet(after=3600)) == FAIL
    if qos == 2:
        assert _verdict(case, answered(0x10, completion=0x92)) == FAIL  # it took the message with its PUBREC
        assert _verdict(case, answered(0x00, completion=None)) == FAIL


# --- a real broker -----------------------------------------------------------------------------------------


def test_every_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    cases = [case for case_id, case in CASES.items() if case_id.startswith(f"{FAMILY}/")]
    results = run_together(mosquitto, cases, "5f5f5f5f")
    # mosquitto 2.0.11 refuses the unknown Authentication Method (CONNACK 0x8C) and closes on a second CONNECT
    verdicts = {case_id: r.verdict for case_id, r in results.items()}
    assert verdicts[f"{FAMILY}/connect-unsupported-authentication-method"] == PASS
    assert verdicts[f"{FAMILY}/second-connect-same"] == PASS
