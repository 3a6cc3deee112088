"""The 3.1.1 case families in MQTT 5.0: each 5.0 shape breaks in 5.0 what its 3.1.1 twin breaks in 3.1.1 (pure),
the judge decides every statement a case lists (a conforming reaction passes, a violating one fails, on a 5.0
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
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from mqttaudit.judge import Sent, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import accepted, delivery, malformed, routing, v5_forbidden
from mqttaudit.probe.cases.v5_ported import (
    CONNECT_ROWS_5,
    FLOWS,
    LEFT_OUT,
    RESTATED,
    SENT_ELSEWHERE,
    STIMULI,
    PortedStimulus,
    intended,
    targeted,
)
from mqttaudit.probe.connection import client_frames
from mqttaudit.probe.outcome import FAIL, INCONCLUSIVE, PASS
from mqttaudit.probe.runner import decide, judge_config
from mqttaudit.spec import load_catalogue
from mqttaudit.spec.identity import statement_id
from tests.live import run_together
from tests.talk import STEP, C, S, Talk
from tests.verdicts import accepting, verdict

TIMEOUT = 1.0
V5 = ProtocolVersion.V5
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
    # the reserved flag bits are v5/forbidden's, but for the DISCONNECTs, whose Will only this family watches
    assert set(SENT_ELSEWHERE) == {
        f"{t.name.lower()}-flag-bit-{bit}"
        for t in malformed.CLIENT_PACKETS
        if t is not codec.PacketType.DISCONNECT
        for bit in range(4)
    }
    forbidden = {s.data for s in v5_forbidden.STIMULI}
    assert all(f"v5/forbidden/{case_id}" in CASES for case_id in SENT_ELSEWHERE)
    assert not [s.case_id for s in STIMULI if s.data in forbidden and not s.with_will]
    assert set(LEFT_OUT) == set(SENT_ELSEWHERE) | {
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
        # what the shape breaks is judged where it binds the broker too, provoked where it binds the Client alone
        cited = {*case.statements, *case.provokes}
        assert set(stimulus.breaks) <= cited or stimulus.case_id in RESTATED, stimulus.case_id
        assert all(not s.rule.binds("server") for s in case.provokes), case.provokes
        assert all(s in CATALOGUE_5 for s in case.statements), case.statements
        assert CLOSE_DUTIES & set(case.statements), stimulus.case_id
        assert case.family == f"v5/malformed-{stimulus.family}"
        assert stimulus.data.hex(" ") in case.stimulus
    # a malformed DISCONNECT owes the watched Will, as in 3.1.1 [MQTT-3.1.2-8]
    assert "MQTT-3.1.2-8" in CASES["v5/malformed/disconnect-flag-bit-0"].statements


# --- the judge decides what each case lists ------------------------------------------------------------------


def _verdict(case: Case, *talks: Talk) -> str:
    judgement = judge_scenario({f"c{n}": talk.events for n, talk in enumerate(talks)}, judge_config(case, TIMEOUT))
    return verdict(case, judgement)


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
def test_closing_passes_and_carrying_on_fails_or_is_lenient(stimulus: PortedStimulus) -> None:
    """Carrying on fails where a statement binds the 5.0 Server to detect the defect, and is lenient otherwise."""
    assert _judged(stimulus, close=True) == PASS
    assert _judged(stimulus, close=True, disconnect_first=True) == PASS
    assert _judged(stimulus, close=False) == accepting(_case(stimulus))


def test_a_malformed_disconnect_taken_for_one_fails_on_the_will() -> None:
    stimulus = BY_ID["disconnect-flag-bit-0"]
    dying = _up_to_stimulus(stimulus).closed(S)
    judgement = judge_scenario(
        {"dying": dying.events, "watcher": _watcher(None).events}, judge_config(_case(stimulus), TIMEOUT)
    )
    result = decide(_case(stimulus), judgement)
    assert result.verdict == FAIL and {rule for f in result.findings for rule in f.rules} == {"MQTT-3.1.2-8"}


# --- the flows: routing rows and negative controls ------------------------------------------------------------

PREFIX = "mqttaudit/5c5c5c5c/case"


def _expand(template: str) -> str:
    return template.format(p=PREFIX, rest=PREFIX.split("/", 1)[1])


def _connected(client_id: str, at: float) -> Talk:
    return Talk(version="5").client(Connect(protocol_level=5, client_id=client_id), at=at).server(Connack())


def _publisher(topic: str) -> Talk:
    talk = _connected("publisher", 1.0)
    talk.client(Publish(topic=topic, payload=b"m", qos=1, packet_id=1), at=1.1)
    return talk.server(Puback(packet_id=1, reason_code=0x00)).quiet(after=3600)


def _subscriber(
    topic_filter: str, qos: int, delivered: str | None, *, suback: bool = True, unsubscribe: bool | None = None
) -> Talk:
    """Subscribes at 0.1; ``delivered``: the topic of a delivery at 1.2 (None: none); ``unsubscribe``: an
    UNSUBSCRIBE at 2.0, answered (True) or not (False)."""
    talk = _connected("subscriber", 0.0)
    talk.client(Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=topic_filter, qos=qos),)), at=0.1)
    if suback:
        talk.server(Suback(packet_id=1, return_codes=(qos,)))
    if delivered is not None:
        talk.server(Publish(topic=delivered, payload=b"m", qos=qos, packet_id=5 if qos else None), at=1.2)
        if qos:
            talk.client(Puback(packet_id=5, reason_code=0x00))
    if unsubscribe is not None:
        talk.client(Unsubscribe(packet_id=2, topic_filters=(topic_filter,)), at=2.0)
        if unsubscribe:
            talk.server(Unsuback(packet_id=2, reason_codes=(0x00,)))
    return talk.quiet(after=3600)


@pytest.mark.parametrize("row", routing.TABLE, ids=lambda row: row.name)
def test_each_routing_row_passes_when_routed_right_and_fails_when_not(row: routing.Row) -> None:
    case = CASES[f"v5/routing/{row.name}"]
    assert case.protocol is ProtocolVersion.V5 and case.statements == row.statements  # the same ids in 5.0
    topic_filter, topic = _expand(row.topic_filter), _expand(row.topic)
    qos = 0 if row.topic_filter == "#" else 1
    right = _subscriber(topic_filter, qos, topic if row.delivered else None)
    wrong = _subscriber(topic_filter, qos, None if row.delivered else topic)
    assert _verdict(case, right, _publisher(topic)) == PASS
    # a '$' topic withheld from a '$' filter is what section 4.7.2 says the server SHOULD do: not assessable, no fail
    withheld = row.delivered and topic.startswith("$")
    assert _verdict(case, wrong, _publisher(topic)) == (INCONCLUSIVE if withheld else FAIL)


@pytest.mark.parametrize("row", accepted.FILTER_ROWS, ids=lambda row: row.name)
def test_each_filter_control_passes_when_served_and_fails_on_each_omission(row: accepted.FilterRow) -> None:
    case = CASES[f"v5/accepted/{row.name}"]
    assert case.statements == ("MQTT-3.8.4-1", "MQTT-4.5.0-1", "MQTT-3.3.2-3", "MQTT-3.10.4-4")
    topic_filter, topic = _expand(row.topic_filter), _expand(row.topic)
    served = _subscriber(topic_filter, 0, topic, unsubscribe=True)
    assert _verdict(case, served, _publisher(topic)) == PASS
    for omission in (
        _subscriber(topic_filter, 0, topic, suback=False, unsubscribe=True),
        _subscriber(topic_filter, 0, None, unsubscribe=True),
        _subscriber(topic_filter, 0, topic, unsubscribe=False),
    ):
        assert _verdict(case, omission, _publisher(topic)) == FAIL


@pytest.mark.parametrize("row", [*accepted.CONNECT_ROWS, *CONNECT_ROWS_5], ids=lambda row: row.name)
def test_each_connect_control_is_a_50_connect_that_passes_when_served(row: accepted.ConnectRow) -> None:
    case = CASES[f"v5/accepted/connect-{row.name}"]
    assert case.statements == ("MQTT-3.12.4-1",)
    data = accepted.connect_bytes(row, malformed.EXAMPLE_CLIENT_ID, PREFIX, ProtocolVersion.V5)
    (packet,) = codec.decode(data, "client", version="5").packets
    assert isinstance(packet, Connect) and packet.protocol_level == 5
    assert not codec.decode(data, "client", version="5").violations
    served = Talk(version="5").client(data).server(Connack()).client(codec.Pingreq()).server(codec.Pingresp())
    assert _verdict(case, served.quiet(after=3600)) == PASS
    unanswered = Talk(version="5").client(data).server(Connack()).client(codec.Pingreq()).quiet(after=3600)
    assert _verdict(case, unanswered) == FAIL


def test_the_50_only_connect_controls_are_what_311_forbids() -> None:
    password, empty_client_id = CONNECT_ROWS_5
    data_311 = accepted.connect_bytes(password, malformed.EXAMPLE_CLIENT_ID, PREFIX)
    assert {v.rule for v in codec.decode(data_311, "client").violations} == {"MQTT-3.1.2-22"}
    data_5 = accepted.connect_bytes(empty_client_id, "ignored", PREFIX, V5)
    (packet,) = codec.decode(data_5, "client", version="5").packets
    assert isinstance(packet, Connect) and packet.client_id == "" and not packet.clean_session
    # the 3.1.1 case of the same CONNECT expects CONNACK 0x02 and a close [MQTT-3.1.3-8]
    assert CASES["connect/empty-client-id-persistent-session"].statements == ("MQTT-3.1.3-8",)
    assert statement_id("MQTT-3.1.3-8", "5.0") is None


# --- the flows of delivery.py and routing.py --------------------------------------------------------------------

#: A message as (topic, QoS, DUP).
Message = tuple[str, int, bool]


def _acked(talk: Talk, sender_acks: bool, qos: int, packet_id: int) -> None:
    """The rest of a QoS flow: ``sender_acks`` when the client received the PUBLISH."""
    ack, back = (talk.client, talk.server) if sender_acks else (talk.server, talk.client)
    if qos == 1:
        ack(codec.Puback(packet_id=packet_id, reason_code=0x00))
    elif qos == 2:
        ack(codec.Pubrec(packet_id=packet_id, reason_code=0x00))
        back(codec.Pubrel(packet_id=packet_id, reason_code=0x00))
        ack(codec.Pubcomp(packet_id=packet_id, reason_code=0x00))


def _sent(*messages: Message) -> Talk:
    """A publisher (from 1.0) sending ``messages``, each acknowledged."""
    talk = _connected("publisher", 1.0)
    for packet_id, (topic, qos, dup) in enumerate(messages, start=1):
        talk.client(Publish(topic=topic, payload=b"m", qos=qos, dup=dup, packet_id=packet_id if qos else None))
        _acked(talk, False, qos, packet_id)
    return talk.quiet(after=3600)


def _received(
    filters: tuple[tuple[str, int], ...],
    *messages: Message,
    granted: tuple[int, ...] | None = None,
    unsubscribe: tuple[str, ...] = (),
    unsuback: tuple[int, ...] | None = (0x00,),
    client_id: str = "subscriber",
) -> Talk:
    """A subscriber of ``filters`` (SUBACK ``granted``, by default the QoS asked) that unsubscribes ``unsubscribe``
    (answered with ``unsuback``, None: unanswered) and then receives ``messages`` (from 1.5)."""
    talk = _connected(client_id, 0.0)
    subscriptions = tuple(Subscription(topic_filter=f, qos=q) for f, q in filters)
    talk.client(Subscribe(packet_id=1, subscriptions=subscriptions), at=0.1)
    talk.server(Suback(packet_id=1, return_codes=granted if granted is not None else tuple(q for _f, q in filters)))
    if unsubscribe:
        talk.client(Unsubscribe(packet_id=2, topic_filters=unsubscribe), at=0.2)
        if unsuback is not None:
            talk.server(Unsuback(packet_id=2, reason_codes=unsuback))
    for packet_id, (topic, qos, dup) in enumerate(messages, start=10):
        delivery = Publish(topic=topic, payload=b"m", qos=qos, dup=dup, packet_id=packet_id if qos else None)
        talk.server(delivery, at=max(1.5, talk.now + STEP))
        _acked(talk, True, qos, packet_id)
    return talk.quiet(after=3600)


P_ = PREFIX


def _unanswered_subscribe(topic_filter: str) -> Talk:
    talk = _connected("subscriber", 0.0)
    talk.client(Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter=topic_filter, qos=1),)), at=0.1)
    return talk.quiet(after=3600)


DOLLAR_TOPIC = "$" + PREFIX + "/d"
#: Per ported case: (conversations of a conforming broker, conversations of one that breaks a statement).
FLOW_TALKS: dict[str, tuple[tuple[Talk, ...], tuple[Talk, ...]]] = {
    "subscribe/suback": (
        (_received(((f"{P_}/s", 1),)),),
        (_unanswered_subscribe(f"{P_}/s"),),
    ),
    "subscribe/multiple-filters": (
        (_received(((f"{P_}/m0", 0), (f"{P_}/m1", 1), (f"{P_}/m2", 2))),),
        (_received(((f"{P_}/m0", 0), (f"{P_}/m1", 1), (f"{P_}/m2", 2)), granted=(0, 1)),),
    ),
    "subscribe/granted-qos-caps-delivery": (
        (_received(((f"{P_}/g", 0),), (f"{P_}/g", 0, False)), _sent((f"{P_}/g", 1, False))),
        (_received(((f"{P_}/g", 0),), (f"{P_}/g", 1, False)), _sent((f"{P_}/g", 1, False))),
    ),
    "subscribe/resubscribe-replaces": (
        (_received(((f"{P_}/r", 0),), (f"{P_}/r", 0, False)), _sent((f"{P_}/r", 1, False))),
        (_received(((f"{P_}/r", 0),), (f"{P_}/r", 1, False)), _sent((f"{P_}/r", 1, False))),
    ),
    "publish/dup-not-propagated": (
        (_received(((f"{P_}/dup", 1),), (f"{P_}/dup", 1, False)), _sent((f"{P_}/dup", 1, True))),
        (_received(((f"{P_}/dup", 1),), (f"{P_}/dup", 1, True)), _sent((f"{P_}/dup", 1, True))),
    ),
    "unsubscribe/unsuback": (
        (_received(((f"{P_}/other", 0),), unsubscribe=(f"{P_}/never",), unsuback=(0x11,)),),
        (_received(((f"{P_}/other", 0),), unsubscribe=(f"{P_}/never",), unsuback=None),),
    ),
    "unsubscribe/multiple-filters": (
        (_received(((f"{P_}/u1", 0), (f"{P_}/u2", 0)), unsubscribe=(f"{P_}/u1", f"{P_}/u2"), unsuback=(0, 0)),),
        (_received(((f"{P_}/u1", 0), (f"{P_}/u2", 0)), unsubscribe=(f"{P_}/u1", f"{P_}/u2"), unsuback=None),),
    ),
    "unsubscribe/exact-filter-only": (
        (
            _received(((f"{P_}/+", 1),), (f"{P_}/x", 1, False), unsubscribe=(f"{P_}/x",), unsuback=(0x11,)),
            _sent((f"{P_}/x", 1, False)),
        ),
        (_received(((f"{P_}/+", 1),), unsubscribe=(f"{P_}/x",), unsuback=(0x11,)), _sent((f"{P_}/x", 1, False))),
    ),
    "topics/no-normalisation": (
        (
            _received(((f"{P_}/\ufeffb", 1),), (f"{P_}/\ufeffb", 1, False)),
            _sent((f"{P_}/\ufeffb", 1, False), (f"{P_}/b", 1, False)),
        ),
        (_received(((f"{P_}/\ufeffb", 1),), (f"{P_}/b", 1, False)), _sent((f"{P_}/b", 1, False))),
    ),
    "topics/dollar-not-matched-by-wildcards": (
        (_received((("#", 0),)), _sent((DOLLAR_TOPIC, 1, False))),
        (_received((("#", 0),), (DOLLAR_TOPIC, 0, False)), _sent((DOLLAR_TOPIC, 1, False))),
    ),
    # a '$' topic's PUBLISH, then on the same connection a QoS 1 PUBLISH the subscriber must get (amqtt 0.12.1
    # acknowledges the second and delivers nothing)
    **{
        f"topics/normal-after-dollar-{word}": (
            (_received(((f"{P_}/after", 1),), (f"{P_}/after", 1, False)), _sent((dollar, qos, False), after)),
            (_received(((f"{P_}/after", 1),)), _sent((dollar, qos, False), after)),
        )
        for word, before, qos in delivery.DOLLAR_FIRST
        for dollar, after in ((before + PREFIX + "/dollar", (f"{P_}/after", 1, False)),)
    },
    "routing/qos-downgrade": (
        (_received(((f"{P_}/q", 0),), (f"{P_}/q", 0, False)), _sent((f"{P_}/q", 2, False))),
        (_received(((f"{P_}/q", 0),), (f"{P_}/q", 2, False)), _sent((f"{P_}/q", 2, False))),
    ),
    "routing/overlapping-three-filters": (
        (
            _received(((f"{P_}/#", 0), (f"{P_}/+/x", 2), (f"{P_}/a/x", 1)), (f"{P_}/a/x", 2, False)),
            _sent((f"{P_}/a/x", 2, False)),
        ),
        (
            _received(((f"{P_}/#", 0), (f"{P_}/+/x", 2), (f"{P_}/a/x", 1)), (f"{P_}/a/x", 0, False)),
            _sent((f"{P_}/a/x", 2, False)),
        ),
    ),
}


def test_every_ported_flow_has_conversations_and_names_its_statements_in_50() -> None:
    assert set(FLOW_TALKS) == {case_id for case_ids in FLOWS.values() for case_id in case_ids}
    for case_id in FLOW_TALKS:
        original, ported = CASES[case_id], CASES[f"v5/{case_id}"]
        assert ported.protocol is ProtocolVersion.V5 and ported.script is original.script
        keys = [s for s in original.statements if statement_id(s, "5.0") is not None]
        assert ported.statements == tuple(dict.fromkeys(statement_id(s, "5.0") for s in keys))
        assert all(s in CATALOGUE_5 for s in ported.statements)


def test_a_qos2_re_send_on_the_same_connection_is_a_50_client_violation_so_that_case_has_no_twin() -> None:
    talk = _connected("publisher", 1.0)
    for dup in (False, True):
        talk.client(Publish(topic=f"{P_}/q2", payload=b"m", qos=2, dup=dup, packet_id=1))
        talk.server(codec.Pubrec(packet_id=1, reason_code=0x00))
    talk.client(codec.Pubrel(packet_id=1, reason_code=0x00)).server(codec.Pubcomp(packet_id=1, reason_code=0x00))
    config = judge_config(CASES["v5/subscribe/suback"], TIMEOUT)
    judgement = judge_scenario({"publisher": talk.quiet(after=3600).events}, config)
    assert {(rule, f.side) for f in judgement.findings for rule in f.rules} == {("MQTT-4.4.0-1", C)}
    assert "v5/publish/qos2-no-duplicate-delivery" not in CASES


@pytest.mark.parametrize("case_id", sorted(FLOW_TALKS))
def test_each_ported_flow_passes_on_a_conforming_broker_and_fails_on_a_violating_one(case_id: str) -> None:
    conforming, violating = FLOW_TALKS[case_id]
    case = CASES[f"v5/{case_id}"]
    assert _verdict(case, *conforming) == PASS
    assert _verdict(case, *violating) == FAIL


# --- against mosquitto ---------------------------------------------------------------------------------------


def test_every_ported_case_gets_a_verdict_from_mosquitto(mosquitto: RunningBroker) -> None:
    cases = [CASES[f"v5/malformed/{stimulus.case_id}"] for stimulus in STIMULI]
    cases += [case for case in CASES.values() if case.id.startswith(("v5/routing/", "v5/accepted/"))]
    cases += [CASES[f"v5/{case_id}"] for case_id in FLOWS["v5/delivery"]]
    flows = len(routing.TABLE) + len(accepted.FILTER_ROWS) + len(accepted.CONNECT_ROWS) + len(CONNECT_ROWS_5)
    assert len(cases) == len(STIMULI) + flows + sum(map(len, FLOWS.values()))
    run_together(mosquitto, cases, "5b5b5b5b")
