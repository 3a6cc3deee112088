"""The 3.1.1 case families in MQTT 5.0: each 5.0 shape breaks in 5.0 what its 3.1.1 twin breaks in 3.1.1 (pure),
the judge decides every statement a case lists (a conforming reaction passes, a violating one fails, on a 5.0
conversation written with the real codec), and every case gets a verdict against a real mosquitto."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from mqttaudit import codec
from mqttaudit.codec import (
    Connack,
    Connect,
    Disconnect,
    ProtocolVersion,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Will,
)
from mqttaudit.judge import Sent, judge_scenario
from mqttaudit.probe.brokers import RunningBroker, start_broker
from mqttaudit.probe.case import CASES, Case, Target
from mqttaudit.probe.cases import malformed
from mqttaudit.probe.cases.v5_ported import LEFT_OUT, RESTATED, STIMULI, PortedStimulus, intended, targeted
from mqttaudit.probe.connection import client_frames
from mqttaudit.probe.outcome import FAIL, NOT_APPLICABLE, PASS, CaseResult
from mqttaudit.probe.runner import decide, judge_config, run_case
from mqttaudit.spec import load_catalogue
from mqttaudit.spec.identity import statement_id
from tests.talk import C, S, Talk

TIMEOUT = 1.0
CATALOGUE_5 = load_catalogue("5.0")
#: The duty to close on a Malformed Packet or Protocol Error (or the packet's own statement of it); for CONNECT,
#: to close without accepting it.
CLOSE_DUTIES = {"MQTT-4.13.1-1", "MQTT-3.1.4-1", "MQTT-3.3.1-4", "MQTT-3.6.1-1", "MQTT-3.8.1-1", "MQTT-3.8.3-5"}
CLOSE_DUTIES |= {"MQTT-3.10.1-1", "MQTT-3.14.1-1", "MQTT-1.5.4-1", "MQTT-1.5.4-2"}  # 1.5.4: "a Malformed Packet"
WILL_TOPIC = f"{malformed.EXAMPLE_PREFIX}/{malformed.WILL_LEVEL}"
BY_ID = {stimulus.case_id: stimulus for stimulus in STIMULI}


def _case(stimulus: PortedStimulus) -> Case:
    return CASES[f"v5/malformed/{stimulus.case_id}"]


def _read(data: bytes, version: str) -> list[codec.Violation]:
    """The violations the probe records in ``data`` sent by a client (a packet still arriving included)."""
    frames, _begun = client_frames(codec.StreamDecoder(codec.Direction.FROM_CLIENT, version=version), data)
    return [v for frame in frames for v in frame.violations]


# --- the shapes ----------------------------------------------------------------------------------------------


def test_every_shape_decodes_in_50_to_the_50_statements_of_its_311_twins_rules() -> None:
    twins = {stimulus.case_id: stimulus for stimulus in malformed.STIMULI}
    for stimulus in STIMULI:
        twin = twins[stimulus.case_id]
        keys_311 = {v.rule_key for v in _read(twin.data, "3.1.1")}
        expected = RESTATED.get(stimulus.case_id) or tuple(
            sorted(rule for rule in (statement_id(key, "5.0") for key in keys_311) if rule is not None)
        )
        assert stimulus.breaks == expected == intended(twin), stimulus.case_id
        assert {v.rule for v in _read(stimulus.data, "5")} == set(stimulus.breaks), stimulus.case_id
        # the same keys as the 3.1.1 twin, but for the rules 5.0 restates
        if stimulus.case_id not in RESTATED:
            assert {v.rule_key for v in _read(stimulus.data, "5")} <= keys_311, stimulus.case_id
        assert stimulus.data != twin.data or not stimulus.as_connect, stimulus.case_id


def test_the_50_shapes_are_50_packets() -> None:
    for stimulus in STIMULI:
        data = stimulus.data
        if stimulus.as_connect and data[1] > 7:  # a CONNECT that reaches its Protocol Level says 5
            assert data[8] == 5, stimulus.case_id
        first = data[0] >> 4
        if first == codec.PacketType.PUBLISH and stimulus.family != "framing" and data[1] > 6:
            # the PUBLISH twins differ from 3.1.1 by the Property Length (or are the same overrunning bytes)
            twin = next(s for s in malformed.STIMULI if s.case_id == stimulus.case_id)
            assert len(data) == len(twin.data) + 1, stimulus.case_id


def test_the_shapes_left_out_are_those_50_does_not_state_or_no_50_connect_carries() -> None:
    assert set(LEFT_OUT) == {
        # 5.0 gives type 15 to AUTH
        *(f"reserved-type-15-{suffix}" for suffix, _title, _rest in malformed.RESERVED_TYPE_SHAPES),
        # 5.0 acknowledgements and DISCONNECT carry a Reason Code: no fixed length [MQTT-3.4.1-remaining-length]
        *(f"{name}-length-{size}" for name in ("puback", "pubrec", "pubrel", "pubcomp") for size in (1, 3)),
        "disconnect-length-1",
        # No Local, Retain As Published and Retain Handling
        *(f"subscribe-option-bit-{bit}" for bit in range(2, 6)),
        # no 5.0 CONNECT: another Protocol Level, a cut before the level, no CONNECT at all
        *(f"connect-protocol-level-{level}" for level in malformed.UNSUPPORTED_LEVELS),
        *(f"connect-cut-{name}" for name, keep in malformed.CONNECT_CUTS if keep < 7),
        "first-packet-not-connect",
        # 5.0 allows a Password without a User Name [MQTT-3.1.2-22 has no 5.0 statement]
        "connect-password-without-username",
    }
    assert statement_id("MQTT-3.1.2-22", "5.0") is None
    assert len(STIMULI) + len(LEFT_OUT) == len(malformed.STIMULI)


def test_every_case_is_a_50_case_whose_statements_the_judge_gives() -> None:
    for stimulus in STIMULI:
        case = _case(stimulus)
        assert case.protocol is ProtocolVersion.V5
        assert case.statements == targeted(stimulus)
        assert set(stimulus.breaks) <= set(case.statements) or stimulus.case_id in RESTATED, stimulus.case_id
        assert all(s in CATALOGUE_5 for s in case.statements), case.statements
        assert CLOSE_DUTIES & set(case.statements), stimulus.case_id
        assert case.family == f"v5/malformed-{stimulus.family}"
        assert stimulus.data.hex(" ") in case.stimulus
    # a malformed DISCONNECT owes the watched Will, as in 3.1.1 [MQTT-3.1.2-8]
    assert "MQTT-3.1.2-8" in CASES["v5/malformed/disconnect-flag-bit-0"].statements


# --- the judge decides what each case lists ------------------------------------------------------------------


def _verdict(case: Case, *talks: Talk) -> str:
    judgement = judge_scenario({f"c{n}": talk.events for n, talk in enumerate(talks)}, judge_config(case, TIMEOUT))
    return decide(case, judgement).verdict


def _up_to_stimulus(stimulus: PortedStimulus, *, at: float = 1.0) -> Talk:
    """A 5.0 conversation up to the stimulus, recorded as the probe records it (a packet still arriving is
    judged by its first byte)."""
    talk = Talk(version="5")
    if not stimulus.as_connect:
        will = Will(topic=WILL_TOPIC, message=b"will", qos=1) if stimulus.with_will else None
        talk.client(Connect(protocol_level=5, client_id=malformed.EXAMPLE_CLIENT_ID, will=will), at=at)
        talk.server(Connack())
    talk.now += 0.01
    frames, _begun = client_frames(codec.StreamDecoder(C, version="5"), stimulus.data)
    talk.events += [Sent(talk.now, C, frame) for frame in frames]
    return talk


def _watcher(will_at: float | None) -> Talk:
    """A subscriber of the Will Topic; the Will reaches it at ``will_at`` (None: never)."""
    talk = Talk(version="5").client(Connect(protocol_level=5, client_id="watcher"), at=0.0).server(Connack())
    talk.client(Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=WILL_TOPIC, qos=1),)))
    talk.server(Suback(packet_id=1, return_codes=(1,)))
    if will_at is not None:
        talk.server(Publish(topic=WILL_TOPIC, payload=b"will", qos=1, packet_id=1), at=will_at)
    return talk.quiet(after=3600)


def _judged(stimulus: PortedStimulus, close: bool, *, disconnect_first: bool = False) -> str:
    talk = _up_to_stimulus(stimulus)
    if close:
        if disconnect_first:  # the Reason Code a server may send before it closes (section 4.13)
            talk.server(Connack(return_code=0x81) if stimulus.as_connect else Disconnect(reason_code=0x81))
        talk.closed(S)
    else:
        talk.quiet(after=3600)
    if stimulus.with_will:
        return _verdict(_case(stimulus), talk, _watcher(talk.now + 0.1 if close else None))
    return _verdict(_case(stimulus), talk)


@pytest.mark.parametrize("stimulus", STIMULI, ids=lambda s: s.case_id)
def test_closing_passes_and_carrying_on_fails(stimulus: PortedStimulus) -> None:
    assert _judged(stimulus, close=True) == PASS
    assert _judged(stimulus, close=True, disconnect_first=True) == PASS
    assert _judged(stimulus, close=False) == FAIL


def test_a_malformed_disconnect_taken_for_one_fails_on_the_will() -> None:
    stimulus = BY_ID["disconnect-flag-bit-0"]
    dying = _up_to_stimulus(stimulus).closed(S)
    judgement = judge_scenario(
        {"dying": dying.events, "watcher": _watcher(None).events}, judge_config(_case(stimulus), TIMEOUT)
    )
    result = decide(_case(stimulus), judgement)
    assert result.verdict == FAIL and {f.rule for f in result.findings} == {"MQTT-3.1.2-8"}


# --- against mosquitto ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto() -> Iterator[RunningBroker]:
    with start_broker("mosquitto") as broker:
        yield broker


async def _run_all(broker: RunningBroker, cases: list[Case]) -> list[CaseResult]:
    target = Target(broker.host, broker.port)
    return list(await asyncio.gather(*(run_case(c, target, timeout=TIMEOUT, run_id="5b5b5b5b") for c in cases)))


def test_every_ported_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    cases = [case for case in CASES.values() if case.id.startswith("v5/") and case.protocol is ProtocolVersion.V5]
    cases = [case for case in cases if case.id.removeprefix("v5/malformed/") in BY_ID]
    assert len(cases) == len(STIMULI)
    results = asyncio.run(_run_all(mosquitto, cases))
    undecided = [(r.case.id, r.verdict, r.reason) for r in results if r.verdict not in (PASS, FAIL, NOT_APPLICABLE)]
    assert not undecided
    assert not [r.case.id for r in results if r.error]
    for result in results:  # what mosquitto did with each, for the record of the run (-rA shows it)
        print(result.case.id, result.verdict, result.reason)
