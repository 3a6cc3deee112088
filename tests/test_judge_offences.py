"""Malformed and forbidden packets (sections 1.5.3, 2.2, 3.1.0, 3.1.4, 3.x "treat as malformed", 4.8), as one
table: each offending client packet against each reaction of the server, with the exact findings it earns.

The rule: the receiver must not answer, act on or acknowledge the packet (no CONNACK 0, SUBACK, UNSUBACK, PUBACK,
PUBREC, PINGRESP, no delivery of the offending message), and must close. An answer that acts on it fails every rule
of the offence, the duty to close included, whatever follows: a close by the server (a session takeover is one), by
the client, by a side unknown, or the end of observation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from mqttaudit import codec
from mqttaudit.judge import Judgement, Quiet, judge, judge_scenario

from .cases import binding, explain
from .talk import (
    CONNACK_OK,
    CONNECT,
    DISCONNECT,
    PINGREQ,
    PINGRESP,
    C,
    Item,
    S,
    Talk,
    connected,
    publish,
    suback,
    subscribe,
)

GRACE = 5.0  # JudgeConfig().close_grace
#: Where a capture stops, long after the connection's last segment: the connection went on unobserved.
CAPTURE_END = 1000.0


def _connect_with_flags(flags: int, payload: bytes = b"\x00\x03mqa") -> bytes:
    """A CONNECT with the given Connect Flags byte and payload (a ClientId 'mqa' unless told)."""
    body = b"\x00\x04MQTT\x04" + bytes((flags,)) + b"\x00\x00" + payload
    return bytes((0x10, len(body))) + body


@dataclass(frozen=True)
class Stimulus:
    name: str
    #: What the client sends (on a fresh connection when ``first``, else after an accepted CONNECT).
    bad: tuple[Item, ...]
    first: bool
    #: What a server acting on it sends (None: nothing answers it).
    answer: Item | None
    #: Every rule the server keeps by closing and breaks by acting on the packet, the duty to close first.
    rules: tuple[str, ...]
    #: The offending message, which a server acting on it may deliver back (PUBLISH only).
    message: codec.Publish | None = None
    #: Findings against the client that sent it, whatever the server does.
    offender: frozenset[tuple[str, str, int]] = frozenset()
    #: Rules the server's answer breaks by itself, besides acting on the offence.
    answer_breaks: tuple[str, ...] = ()


WILD_QOS1 = publish("a/+", b"m", qos=1, packet_id=7)
NULL_QOS2 = publish("a\x00b", b"m", qos=2, packet_id=8)
#: The rules a CONNECT cut inside its variable header breaks: closed without CONNACK, and the field overrun.
CUT = ("MQTT-3.1.4-1", "MQTT-2.2.3-overrun")
ID0_QOS1 = codec.Publish(topic="a/0", payload=b"m", qos=1, packet_id=0)

STIMULI = [
    # CONNECT shapes: closed without any CONNACK [MQTT-3.1.4-1], under the more specific statement when there is one.
    Stimulus(
        "connect-reserved-flag",
        (_connect_with_flags(0x03),),
        True,
        CONNACK_OK,
        ("MQTT-3.1.2-3", "MQTT-3.1.4-1"),
    ),
    Stimulus(
        "connect-will-qos-3",
        (codec.Connect(client_id="x", will=codec.Will(topic="w", qos=3)),),
        True,
        CONNACK_OK,
        ("MQTT-3.1.4-1", "MQTT-3.1.2-14"),
    ),
    Stimulus(
        "connect-client-id-ill-formed-utf8",
        (_connect_with_flags(0x02, b"\x00\x02a\xff"),),
        True,
        CONNACK_OK,
        ("MQTT-1.5.3-1", "MQTT-3.1.4-1", "MQTT-3.1.3-4"),
    ),
    Stimulus(
        "connect-password-without-user-name",
        (_connect_with_flags(0x42, b"\x00\x03mqa\x00\x01p"),),
        True,
        CONNACK_OK,
        ("MQTT-3.1.4-1", "MQTT-3.1.2-22"),
    ),
    # A Remaining Length shorter than the variable header: the name, level or flags were never sent, so the CONNECT
    # is malformed, not another protocol [MQTT-3.1.2-1] nor an unsupported level [MQTT-3.1.2-2].
    Stimulus("connect-cut-inside-protocol-name", ("100500044d5154",), True, CONNACK_OK, CUT),
    Stimulus("connect-cut-before-protocol-level", ("100600044d515454",), True, CONNACK_OK, CUT),
    Stimulus("connect-cut-inside-keep-alive", ("100900044d515454040200",), True, CONNACK_OK, CUT),
    # Forbidden packets.
    Stimulus("second-connect", (CONNECT,), False, CONNACK_OK, ("MQTT-3.1.0-2",)),
    Stimulus(
        "pingreq-before-connect",
        (PINGREQ,),
        True,
        PINGRESP,
        ("MQTT-4.8.0-1", "MQTT-3.1.0-1"),
        offender=frozenset({("MQTT-3.1.0-1", "client", 0)}),
        answer_breaks=("MQTT-3.2.0-1",),  # the server's first packet is not CONNACK
    ),
    Stimulus(
        "reserved-packet-type-0-instead-of-connect",
        ("0000",),
        True,
        CONNACK_OK,
        ("MQTT-4.8.0-1", "MQTT-2.2.1-reserved-type"),
        offender=frozenset({("MQTT-3.1.0-1", "client", 0)}),
    ),
    Stimulus(
        "five-byte-remaining-length-instead-of-connect",
        ("10ffffffff01",),
        True,
        CONNACK_OK,
        ("MQTT-4.8.0-1", "MQTT-2.2.3-four-bytes"),
    ),
    Stimulus(
        "reserved-packet-type-15-then-pingreq",
        ("f000", PINGREQ),
        False,
        PINGRESP,
        ("MQTT-4.8.0-1", "MQTT-2.2.1-reserved-type"),
    ),
    # Malformed packets after an accepted CONNECT.
    Stimulus("subscribe-flags-0000", ("8006000100016100",), False, suback(1), ("MQTT-3.8.1-1", "MQTT-2.2.2-1")),
    Stimulus("subscribe-without-payload", ("82020001",), False, suback(1), ("MQTT-4.8.0-1", "MQTT-3.8.3-3")),
    Stimulus(
        "unsubscribe-flags-0000",
        ("a0050001000161",),
        False,
        codec.Unsuback(packet_id=1),
        ("MQTT-3.10.1-1", "MQTT-2.2.2-1"),
    ),
    Stimulus(
        "publish-qos1-wildcard-topic",
        (WILD_QOS1,),
        False,
        codec.Puback(packet_id=7),
        ("MQTT-4.8.0-1", "MQTT-3.3.2-2", "MQTT-4.7.1-1"),
        WILD_QOS1,
    ),
    Stimulus(
        "publish-qos2-null-in-topic",
        (NULL_QOS2,),
        False,
        codec.Pubrec(packet_id=8),
        ("MQTT-1.5.3-2", "MQTT-4.7.3-2"),
        NULL_QOS2,
    ),
    # Packet Identifier 0: a server acting on it answers with identifier 0, which no flow pairs.
    Stimulus(
        "publish-qos1-packet-id-0",
        (ID0_QOS1,),
        False,
        codec.Puback(packet_id=0),
        ("MQTT-4.8.0-1", "MQTT-2.3.1-1"),
        ID0_QOS1,
    ),
    Stimulus(
        "subscribe-packet-id-0",
        (codec.Subscribe(packet_id=0, subscriptions=[codec.Subscription(topic_filter="a")]),),
        False,
        codec.Suback(packet_id=0, return_codes=(0,)),
        ("MQTT-4.8.0-1", "MQTT-2.3.1-1"),
    ),
    Stimulus("pingreq-with-body", ("c00100",), False, PINGRESP, ("MQTT-4.8.0-1", "MQTT-3.12.1-remaining-length")),
]

#: Outcomes of the offence's rules.
FAIL = "fail"
PASS = "pass"
NOT_ASSESSABLE = "not assessable"


@dataclass
class Run:
    """A conversation and the events the expected findings point at."""

    talk: Talk
    #: The event of the server's answer (or delivery) that acts on the offence, -1 when there is none.
    acted: int = -1

    @property
    def end(self) -> int:
        return len(self.talk.events) - 1


def offend(stimulus: Stimulus) -> Talk:
    start = Talk() if stimulus.first else connected()
    return start.client(*stimulus.bad)


def answered(stimulus: Stimulus, answer: Item | None = None) -> Run:
    talk = offend(stimulus)
    acted = len(talk.events)
    talk.server(answer if answer is not None else stimulus.answer or b"")
    return Run(talk, acted)


def captured_until(talk: Talk, seconds: float) -> Talk:
    """Observation of the connection stops ``seconds`` later, inside a capture that goes on until CAPTURE_END."""
    talk.events.append(Quiet(talk.now + seconds, CAPTURE_END))
    return talk


def delivered(stimulus: Stimulus) -> Run:
    """The client subscribed to everything first, then the server hands the offending message back to it."""
    assert stimulus.message is not None
    talk = connected().client(subscribe(1, "#")).server(suback(1)).client(*stimulus.bad)
    acted = len(talk.events)
    echo = codec.Publish(topic=stimulus.message.topic, payload=stimulus.message.payload)
    return Run(talk.server(echo).closed(S), acted)


@dataclass(frozen=True)
class Reaction:
    name: str
    build: Callable[[Stimulus], Run]
    #: The offence's rules fail at the acting answer.
    at_answer: bool
    #: The offence's rules fail at the end (the server was still open past the grace).
    at_end: bool
    #: What the offence's rules come to.
    outcome: str
    applies: Callable[[Stimulus], bool] = lambda stimulus: True


def _answers(stimulus: Stimulus) -> bool:
    return stimulus.answer is not None


def _refusable(stimulus: Stimulus) -> bool:
    return stimulus.first and "MQTT-3.1.4-1" in stimulus.rules


def answered_then(finish: Callable[[Talk], Talk]) -> Callable[[Stimulus], Run]:
    """The server answers the offence, acting on it; then ``finish`` ends the conversation."""

    def build(stimulus: Stimulus) -> Run:
        run = answered(stimulus)
        finish(run.talk)
        return run

    return build


def silent_then(finish: Callable[[Talk], Talk]) -> Callable[[Stimulus], Run]:
    """The server sends nothing; ``finish`` ends the conversation."""
    return lambda stimulus: Run(finish(offend(stimulus)))


REACTIONS = [
    # name, conversation, fails at the answer, fails at the end, outcome of the offence's rules, applies to
    Reaction("closes-at-once", silent_then(lambda t: t.closed(S, after=0.1)), False, False, PASS),
    Reaction("answers-then-server-closes", answered_then(lambda t: t.closed(S)), True, False, FAIL, _answers),
    Reaction("answers-then-client-closes", answered_then(lambda t: t.closed(C)), True, False, FAIL, _answers),
    Reaction("answers-then-unknown-side-closes", answered_then(lambda t: t.closed(None)), True, False, FAIL, _answers),
    Reaction("answers-then-stays-open", answered_then(lambda t: t.quiet(after=GRACE + 5)), True, True, FAIL, _answers),
    Reaction(
        "answers-then-observation-ends-inside-the-grace",
        answered_then(lambda t: t.quiet(after=GRACE / 5)),
        True,
        False,
        FAIL,
        _answers,
    ),
    Reaction("answers-then-capture-ends", answered_then(lambda t: captured_until(t, 0.1)), True, False, FAIL, _answers),
    Reaction("stays-open-past-the-grace", silent_then(lambda t: t.quiet(after=GRACE + 5)), False, True, FAIL),
    Reaction(
        "observation-ends-inside-the-grace",
        silent_then(lambda t: t.quiet(after=GRACE / 5)),
        False,
        False,
        NOT_ASSESSABLE,
    ),
    Reaction("capture-ends", silent_then(lambda t: captured_until(t, 0.1)), False, False, NOT_ASSESSABLE),
    Reaction("client-closes-first", silent_then(lambda t: t.closed(C, after=0.1)), False, False, NOT_ASSESSABLE),
    Reaction("delivers-it-back", delivered, True, False, FAIL, lambda s: s.message is not None),
]

#: Findings against the client that a cell earns besides the server's, when it stays open after the answer: the
#: client that got PUBREC for its QoS 2 PUBLISH never sent PUBREL [MQTT-4.3.3-1]; an answer with Packet Identifier 0
#: is malformed in turn [MQTT-2.3.1-6] [MQTT-2.3.1-7], and the client did not close on it [MQTT-4.8.0-1].
CLIENT_FINDINGS = {
    ("publish-qos2-null-in-topic", "answers-then-stays-open"): {("MQTT-4.3.3-1", "client", 4)},
    ("publish-qos1-packet-id-0", "answers-then-stays-open"): {
        ("MQTT-2.3.1-6", "client", 4),
        ("MQTT-4.8.0-1", "client", 4),
    },
    # The SUBACK with Packet Identifier 0 breaks MQTT-2.3.1-7, the Server's rule: the client that stays open on it is
    # charged with its own duty to close only.
    ("subscribe-packet-id-0", "answers-then-stays-open"): {("MQTT-4.8.0-1", "client", 4)},
}

CELLS = [(s, r) for s in STIMULI for r in REACTIONS if r.applies(s)]


def findings_of(judgement: Judgement) -> set[tuple[str, str, int]]:
    return {(rule, f.side.value, f.event) for f in judgement.findings for rule in f.rules}


@pytest.mark.parametrize(("stimulus", "reaction"), CELLS, ids=[f"{s.name}:{r.name}" for s, r in CELLS])
def test_offence_table(stimulus: Stimulus, reaction: Reaction) -> None:
    run = reaction.build(stimulus)
    judgement = judge(run.talk.events)
    expected: set[tuple[str, str, int]] = set()
    # the server is charged with the rules that bind it: the Client's own rules its packet broke are not its own
    upheld = binding(stimulus.rules, S)
    if reaction.at_answer:
        expected |= {(rule, "server", run.acted) for rule in (*upheld, *stimulus.answer_breaks)}
    if reaction.at_end:
        expected |= {(rule, "server", run.end) for rule in upheld}
    expected |= stimulus.offender | CLIENT_FINDINGS.get((stimulus.name, reaction.name), set())
    assert findings_of(judgement) == expected, explain(judgement)
    rules = upheld - {rule for rule, _, _ in stimulus.offender}  # failed by the client regardless
    # and the server's conduct decides nothing of them: neither passed nor left undecided by it
    assert not (set(stimulus.rules) - upheld) & (judgement.passed | judgement.not_assessable.keys())
    if reaction.outcome == PASS:
        assert rules <= judgement.passed, explain(judgement)
    elif reaction.outcome == FAIL:
        assert not rules & (judgement.passed | judgement.not_assessable.keys()), explain(judgement)
    else:
        assert rules <= judgement.not_assessable.keys(), explain(judgement)
        assert not rules & judgement.assessed, explain(judgement)


@pytest.mark.parametrize("stimulus", [s for s in STIMULI if _refusable(s)], ids=lambda s: s.name)
def test_a_refusing_connack_breaks_only_the_duty_to_close_without_connack(stimulus: Stimulus) -> None:
    """CONNACK 0x02 accepts nothing, so the server that closes after it keeps the rules it upholds by closing; it
    still sent a CONNACK, which [MQTT-3.1.4-1] forbids."""
    run = answered(stimulus, codec.Connack(return_code=2))
    judgement = judge(run.talk.closed(S).events)
    assert findings_of(judgement) == {("MQTT-3.1.4-1", "server", run.acted)} | stimulus.offender, explain(judgement)
    assert binding(stimulus.rules, S) - {"MQTT-3.1.4-1"} <= judgement.passed, explain(judgement)
    assert all("refuses the offending packet" in f.detail for f in judgement.findings if f.side is S)


@pytest.mark.parametrize("stimulus", [s for s in STIMULI if _answers(s)], ids=lambda s: s.name)
def test_an_acting_answer_names_the_offence_and_what_a_conforming_server_does(stimulus: Stimulus) -> None:
    run = answered(stimulus)
    judgement = judge(run.talk.closed(S).events)
    on_server = [f for f in judgement.findings if f.side is S and set(f.rules).isdisjoint(stimulus.answer_breaks)]
    assert on_server, explain(judgement)
    for finding in on_server:
        assert f"(event {run.acted}) answers" in finding.detail, finding.detail
        assert "without acting on it" in finding.expected, finding.expected


def test_connack_0_to_a_reserved_flag_connect_then_a_takeover_close_is_a_fail_for_the_probe_case() -> None:
    """The false pass of concurrent probing: CONNACK 0, then the broker closes the connection because another
    connection took the session over. The statement the probe case targets fails; nothing of it passes."""
    talk = Talk().client(_connect_with_flags(0x03)).server(CONNACK_OK).closed(S)
    judgement = judge(talk.events)
    assert findings_of(judgement) == {("MQTT-3.1.2-3", "server", 1), ("MQTT-3.1.4-1", "server", 1)}
    assert "MQTT-3.1.2-3" in judgement.failed and "MQTT-3.1.2-3" not in judgement.passed


def test_every_stimulus_meets_every_reaction_that_applies_to_it() -> None:
    """The table is whole: each stimulus is closed on, left open, answered (when anything answers it) and, for a
    PUBLISH, delivered back."""
    for stimulus in STIMULI:
        names = {reaction.name for s, reaction in CELLS if s is stimulus}
        assert {"closes-at-once", "stays-open-past-the-grace", "capture-ends"} <= names, stimulus.name
        assert (stimulus.answer is not None) == ("answers-then-server-closes" in names), stimulus.name
        assert (stimulus.message is not None) == ("delivers-it-back" in names), stimulus.name


def test_a_takeover_close_after_connack_0_to_a_malformed_connect_does_not_undo_the_answer() -> None:
    """Two connections with one ClientId: the first sends a CONNECT with the reserved flag set and gets CONNACK 0;
    the second's CONNECT takes the session over and the server closes the first. The first was acted on."""
    first = Talk().client(_connect_with_flags(0x03), at=1.0).server(CONNACK_OK, at=1.01).closed(S, at=1.2)
    second = Talk().client(codec.Connect(client_id="mqa"), at=1.1).server(CONNACK_OK, at=1.11)
    judgement = judge_scenario({"first": first.events, "second": second.client(DISCONNECT).closed(C).events})
    assert {(f.conversation, rule, f.side.value, f.event) for f in judgement.findings for rule in f.rules} == {
        ("first", "MQTT-3.1.2-3", "server", 1),
        ("first", "MQTT-3.1.4-1", "server", 1),
    }, explain(judgement)
    assert "MQTT-3.1.2-3" not in judgement.passed


@pytest.mark.parametrize(
    ("connect", "rule"),
    [
        (codec.Connect(client_id="x", protocol_level=5), "MQTT-3.1.2-2"),
        (codec.Connect(client_id="", clean_session=False), "MQTT-3.1.3-8"),
    ],
    ids=["unsupported-level", "empty-client-id-with-clean-session-0"],
)
@pytest.mark.parametrize("closer", [S, C, None], ids=["server-closes", "client-closes", "unknown-closes"])
def test_connack_0_where_a_refusal_is_owed_fails_whoever_closes_after(
    connect: codec.Connect, rule: str, closer: codec.Direction | None
) -> None:
    """The CONNECTs the server must refuse with a return code and then close on: accepting one is the finding."""
    judgement = judge(Talk().client(connect).server(CONNACK_OK).closed(closer).events)
    assert findings_of(judgement) == {(rule, "server", 1)}, explain(judgement)


@pytest.mark.parametrize("stimulus", [s for s in STIMULI if _answers(s)], ids=lambda s: s.name)
@pytest.mark.parametrize("closer", [S, C], ids=["server-closes", "client-closes"])
def test_the_probe_case_of_an_answered_offence_fails_whoever_closes_after(
    stimulus: Stimulus, closer: codec.Direction
) -> None:
    """A probe case targets what the judge finds against a broker that accepts the stimulus and stays open; an answer
    that acts on it, then a close by either side, makes that case fail, never pass."""
    from mqttaudit.probe.case import Case
    from mqttaudit.probe.runner import FAIL as CASE_FAIL
    from mqttaudit.probe.runner import decide

    accepted = judge(offend(stimulus).quiet(after=3600).events)
    targeted = tuple(dict.fromkeys(rule for f in accepted.findings if f.side is S for rule in f.rules))
    assert binding(stimulus.rules, S) <= set(targeted), explain(accepted)

    async def script(_: object) -> None:  # never run: the verdict is decided from the judgement
        return None

    case = Case(f"malformed/{stimulus.name}", targeted, stimulus.name, script)
    run = answered(stimulus)
    result = decide(case, judge(run.talk.closed(closer).events))
    assert result.verdict == CASE_FAIL, result.reason
    assert all(verdict == CASE_FAIL for verdict in result.statements.values()), result.statements


def test_an_acknowledgement_with_the_offending_packets_identifier_acts_on_it() -> None:
    """A PUBREL one byte long (62 03 00 01 00) opens no flow; a PUBCOMP with its Packet Identifier answers it all
    the same (mosquitto 2.0.11 sends 70 02 00 01)."""
    talk = connected().client("62 03 00 01 00").server(codec.Pubcomp(packet_id=1)).closed(S)
    acting = [f for f in judge(talk.events).findings if f.side is S and "answers the offending packet" in f.detail]
    assert {rule for f in acting for rule in f.rules} == {"MQTT-4.8.0-1", "MQTT-3.6.1-remaining-length"}, explain(
        judge(talk.events)
    )


def test_an_acknowledgement_that_finishes_an_earlier_flow_does_not_act_on_a_later_offence() -> None:
    """PUBREC id 1 for a QoS 2 PUBLISH id 1, then the client's valid PUBREL id 1 and a malformed PUBREL id 1: the
    PUBCOMP id 1 that follows finishes the valid one's flow."""
    talk = (
        connected()
        .client(publish("a", b"m", qos=2, packet_id=1))
        .server(codec.Pubrec(packet_id=1))
        .client(codec.Pubrel(packet_id=1), "62 03 00 01 00")
        .server(codec.Pubcomp(packet_id=1))
        .closed(S)
    )
    judgement = judge(talk.events)
    assert not [f for f in judgement.findings if f.side is S and "offending" in f.detail], explain(judgement)


def test_a_suback_that_fails_every_filter_of_a_malformed_subscribe_refuses_it_but_had_to_close() -> None:
    talk = connected().client("82 05 00 01 00 00 00").server(suback(1, 0x80)).closed(S)
    judgement = judge(talk.events)
    details = {f.detail for f in judgement.findings if f.side is S and "MQTT-4.8.0-1" in f.rules}
    assert details and all("refuses the offending packet instead of closing" in d for d in details), details
