"""MQTT 5.0 limits on one connection (judge.limits): Topic Alias Maximum and alias mappings (3.3.2.3.4), Receive
Maximum (3.3.4) and Maximum Packet Size (3.1.2.11.4, 3.2.2.3.6), each kept, broken by the client, broken by the
server, and not assessable when the declaration or the flows were not observed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import ConversationJudge, JudgeConfig, Judgement, Lost
from mqttaudit.judge import limits as lim
from mqttaudit.judge.context import Seen
from mqttaudit.judge.rules import CLOSE_ON_VIOLATION
from mqttaudit.spec import identity

from .cases import lenient_of
from .talk import C, S, Talk

CONFIG = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))


def named(key: str) -> str:
    """The id a 5.0 conversation reports ``key`` under."""
    name = identity.statement_id(key, identity.V5)
    assert name is not None
    return name


CLOSE_5 = named(CLOSE_ON_VIOLATION)  # MQTT-4.13.1-1


def connect(**properties: int) -> codec.Connect:
    return codec.Connect(protocol_level=5, client_id="limits", properties=make(**properties))


def connack(**properties: int) -> codec.Connack:
    return codec.Connack(properties=make(**properties))


def opened(client: dict[str, int] | None = None, server: dict[str, int] | None = None) -> Talk:
    """A 5.0 connection whose CONNECT and CONNACK declare these properties."""
    return Talk(version="5").client(connect(**(client or {}))).server(connack(**(server or {})))


def publish(topic: str, *, alias: int | None = None, qos: int = 0, packet_id: int | None = None, size: int = 1):
    properties = make(topic_alias=alias) if alias is not None else ()
    if qos and packet_id is None:
        packet_id = 1
    return codec.Publish(topic=topic, payload=b"x" * size, qos=qos, packet_id=packet_id, properties=properties)


def lost(talk: Talk, sender: codec.Direction, length: int = 10) -> Talk:
    talk.now += 0.01
    talk.events.append(Lost(talk.now, sender, length))
    return talk


def run(talk: Talk) -> Judgement:
    conversation = ConversationJudge(CONFIG)
    for event in talk.events:
        conversation.feed(event)
    return conversation.finish()


def failed(judgement: Judgement, key: str) -> list[tuple[str, str]]:
    """(side, detail) of each finding of ``key``."""
    return [(f.side.value, f.detail) for f in judgement.findings if named(key) in f.rules]


def limit_findings(judgement: Judgement) -> list[str]:
    names = {named(key) for key in lim.LIMIT_RULES}
    return [f"{rule} {f.side.value}: {f.detail}" for f in judgement.findings for rule in f.rules if rule in names]


# Topic Alias ---------------------------------------------------------------------------------------------------


def test_aliases_within_both_maximums_are_kept_and_resolve_per_direction() -> None:
    talk = opened({"topic_alias_maximum": 2}, {"topic_alias_maximum": 3})
    talk.client(publish("c/1", alias=3)).client(publish("", alias=3))
    talk.server(publish("s/1", alias=2)).server(publish("", alias=2))
    conversation = ConversationJudge(CONFIG)
    topics = []
    for index, event in enumerate(talk.events):
        conversation.feed(event)
        seen = Seen.of(index, event.time, event.sender, event.frame)  # type: ignore[union-attr]
        topics.append(conversation.limits.topic_of(seen))
    judgement = conversation.finish()
    assert topics == [None, None, "c/1", "c/1", "s/1", "s/1"]
    assert limit_findings(judgement) == []
    kept = {lim.CLIENT_ALIAS_WITHIN_MAXIMUM, lim.CLIENT_ALIAS_WITHIN_DECLARED, lim.SERVER_ALIAS_WITHIN_MAXIMUM}
    kept |= {lim.SERVER_ALIAS_WITHIN_DECLARED, lim.ALIAS_MAPPED}
    assert {named(key) for key in kept} <= judgement.passed


def test_a_3_1_1_connection_is_not_judged_on_5_0_limits() -> None:
    talk = Talk().client(codec.Connect(client_id="old")).server(codec.Connack())
    talk.client(codec.Publish(topic="a", qos=1, packet_id=1), codec.Publish(topic="a", qos=1, packet_id=2))
    judgement = run(talk)
    assert not {named(key) for key in lim.LIMIT_RULES} & (judgement.assessed | set(judgement.not_assessable))


def test_client_alias_above_the_servers_maximum_is_a_protocol_error_the_server_closes_on() -> None:
    talk = opened(server={"topic_alias_maximum": 2}).client(publish("a", alias=3))
    judgement = run(talk.closed(S))
    assert failed(judgement, lim.CLIENT_ALIAS_WITHIN_MAXIMUM) == [
        (
            "client",
            "client PUBLISH (QoS 0, retain 0) to 'a' (event 2) carries Topic Alias 3; the server's CONNACK "
            "(event 1) declared Topic Alias Maximum 2",
        )
    ]
    assert failed(judgement, lim.CLIENT_ALIAS_WITHIN_DECLARED)
    assert CLOSE_5 in judgement.passed  # the server closed on it


def test_server_that_goes_on_after_a_client_alias_above_its_maximum_is_lenient() -> None:
    """3.3.2.3.4 has the receiver of a Topic Alias above its maximum use DISCONNECT 0x94, without a MUST: no
    statement binds the server to detect it, so acting on it is leniency (4.13.1), one entry at the PUBACK."""
    talk = opened(server={"topic_alias_maximum": 2}).client(publish("a", alias=3, qos=1))
    talk.server(codec.Puback(packet_id=1)).quiet(after=10)
    judgement = run(talk)
    assert not [f for f in judgement.findings if CLOSE_5 in f.rules or f.side is S]
    assert [(x.rule, x.side, x.event) for x in judgement.lenient] == [(named(lim.CLIENT_ALIAS_WITHIN_MAXIMUM), S, 3)]


def test_a_publish_beyond_a_limit_is_owed_a_close_not_an_acknowledgement() -> None:
    talk = opened(server={"topic_alias_maximum": 2}).client(publish("a", alias=3, qos=1)).closed(S)
    judgement = run(talk)
    puback = named("MQTT-4.3.2-2")  # the QoS 1 receiver's PUBACK
    assert CLOSE_5 in judgement.passed
    assert puback not in judgement.not_assessable and puback not in judgement.failed


def test_client_alias_when_the_server_declared_no_maximum_breaks_3_2_2_18() -> None:
    judgement = run(opened().client(publish("a", alias=1)).closed(S))
    assert [side for side, _ in failed(judgement, lim.CLIENT_NO_ALIAS_WITHOUT_MAXIMUM)] == ["client"]
    assert "no Topic Alias Maximum" in failed(judgement, lim.CLIENT_ALIAS_WITHIN_MAXIMUM)[0][1]
    assert not failed(judgement, lim.CLIENT_ALIAS_WITHIN_DECLARED)


def test_server_alias_above_the_clients_maximum_is_the_servers_finding_only() -> None:
    talk = opened({"topic_alias_maximum": 1}).server(publish("a", alias=2)).quiet(after=10)
    judgement = run(talk)
    assert [side for side, _ in failed(judgement, lim.SERVER_ALIAS_WITHIN_MAXIMUM)] == ["server"]
    assert "Topic Alias Maximum 1" in failed(judgement, lim.SERVER_ALIAS_WITHIN_DECLARED)[0][1]
    # a Client only SHOULD close (4.13.1): no duty of the client is judged
    assert not [f for f in judgement.findings if f.side is C]


def test_server_alias_when_the_client_declared_none_breaks_3_1_2_27() -> None:
    judgement = run(opened().server(publish("a", alias=1)).quiet(after=1))
    assert [side for side, _ in failed(judgement, lim.SERVER_NO_ALIAS_WITHOUT_MAXIMUM)] == ["server"]


def test_no_alias_while_none_is_declared_keeps_the_no_alias_rules() -> None:
    judgement = run(opened().client(publish("a")).server(publish("a")).quiet(after=1))
    assert {named(lim.CLIENT_NO_ALIAS_WITHOUT_MAXIMUM), named(lim.SERVER_NO_ALIAS_WITHOUT_MAXIMUM)} <= judgement.passed


def test_alias_only_publish_of_an_alias_never_mapped_is_a_protocol_error() -> None:
    judgement = run(opened(server={"topic_alias_maximum": 5}).client(publish("", alias=4)).closed(S))
    assert [side for side, _ in failed(judgement, lim.ALIAS_MAPPED)] == ["client"]
    assert "Topic Alias 4, which the client never mapped" in failed(judgement, lim.ALIAS_MAPPED)[0][1]
    assert CLOSE_5 in judgement.passed


def test_a_client_mapping_never_resolves_a_server_publish() -> None:
    talk = opened({"topic_alias_maximum": 5}, {"topic_alias_maximum": 5})
    talk.client(publish("a", alias=1)).server(publish("", alias=1)).quiet(after=1)
    judgement = run(talk)
    assert failed(judgement, lim.ALIAS_MAPPED) == [
        (
            "server",
            "server PUBLISH (QoS 0, retain 0) to '' (event 3) has an empty Topic Name and Topic Alias 1, which the "
            "server never mapped on this connection (its mappings: none)",
        )
    ]


def test_a_limit_the_client_broke_is_upheld_by_the_close_and_accepted_leniently_by_acting_on_the_packet() -> None:
    """The offence carries the limit rule the packet broke (as a malformed packet's offence carries its codec
    rule): the server keeps it by closing; no statement binds it to detect the breach, so answering is leniency."""
    beyond = opened(server={"topic_alias_maximum": 2}).client(publish("a", alias=3, qos=1))
    closed = run(beyond.closed(S))
    assert not [f for f in closed.findings if f.side is S]
    assert {named(lim.CLIENT_ALIAS_WITHIN_MAXIMUM), named(lim.CLIENT_ALIAS_WITHIN_DECLARED)} <= closed.assessed
    answered = opened(server={"topic_alias_maximum": 2}).client(publish("a", alias=3, qos=1))
    acted = run(answered.server(codec.Puback(packet_id=1)).closed(S))
    assert not [f for f in acted.findings if f.side is S]
    assert lenient_of(acted, S) == {named(lim.CLIENT_ALIAS_WITHIN_MAXIMUM)}
    oversized = opened(server={"maximum_packet_size": 20}).client(publish("a", size=30, qos=1))
    acted = run(oversized.server(codec.Puback(packet_id=1)).closed(S))
    assert lenient_of(acted, S) == {named(lim.CLIENT_PACKET_SIZE)}
    assert "0x95" in acted.lenient[0].basis  # 3.2.2.3.6 names the Reason Code, without a MUST
    window = opened(server={"receive_maximum": 1}).client(
        publish("a", qos=1, packet_id=1), publish("a", qos=1, packet_id=2)
    )
    acted = run(window.server(codec.Puback(packet_id=2)).closed(S))
    assert lenient_of(acted, S) == {named(lim.CLIENT_RECEIVE_MAXIMUM)}


def test_a_refusal_of_a_publish_over_a_limit_acts_on_nothing() -> None:
    """A PUBACK of 0x97 Quota exceeded takes nothing of the PUBLISH beyond the window; the close it is not bound to
    make (3.3.4 names DISCONNECT 0x93 without a MUST) is leniency when missing."""
    window = opened(server={"receive_maximum": 1}).client(
        publish("a", qos=1, packet_id=1), publish("a", qos=1, packet_id=2)
    )
    refused = window.server(codec.Puback(packet_id=2, reason_code=0x97))
    assert not [f for f in run(refused.closed(S)).findings if f.side is S]
    window = opened(server={"receive_maximum": 1}).client(
        publish("a", qos=1, packet_id=1), publish("a", qos=1, packet_id=2)
    )
    left_open = run(window.server(codec.Puback(packet_id=2, reason_code=0x97)).quiet(after=10))
    assert not {CLOSE_5, named(lim.CLIENT_RECEIVE_MAXIMUM)} & {
        rule for f in left_open.findings if f.side is S for rule in f.rules
    }
    assert [(x.rule, x.side, x.event) for x in left_open.lenient] == [(named(lim.CLIENT_RECEIVE_MAXIMUM), S, 3)]
    assert "did not close the connection" in left_open.lenient[0].detail


def test_an_unmapped_client_alias_is_carried_forward_by_a_server_that_acts_on_it() -> None:
    """[MQTT-3.3.2-7] A receiver carries no mapping over from another connection: the server keeps it by closing on
    an alias-only PUBLISH never mapped on this connection and breaks it by delivering or acknowledging it."""
    unmapped = opened(server={"topic_alias_maximum": 5}).client(publish("", alias=1, qos=1))
    assert named(lim.ALIAS_PER_CONNECTION) in run(unmapped.closed(S)).assessed
    unmapped = opened(server={"topic_alias_maximum": 5}).client(publish("", alias=1, qos=1))
    acted = run(unmapped.server(codec.Puback(packet_id=1)).quiet(after=10))
    assert {side for side, _ in failed(acted, lim.ALIAS_PER_CONNECTION)} == {"server"}


def test_a_server_alias_only_publish_never_mapped_on_this_connection_breaks_3_3_2_7() -> None:
    """The server's alias-only PUBLISH relies on a mapping of another connection (one that ended with it); one it
    mapped on this connection keeps the rule."""
    talk = opened({"topic_alias_maximum": 5}).server(publish("", alias=1)).quiet(after=1)
    assert [side for side, _ in failed(run(talk), lim.ALIAS_PER_CONNECTION)] == ["server"]
    mapped = opened({"topic_alias_maximum": 5}).server(publish("a", alias=1), publish("", alias=1)).quiet(after=1)
    judgement = run(mapped)
    assert named(lim.ALIAS_PER_CONNECTION) in judgement.passed and not limit_findings(judgement)


def test_aliases_are_not_assessable_when_the_connack_was_not_captured() -> None:
    talk = lost(Talk(version="5").client(connect()), S).client(publish("a", alias=3)).quiet(after=1)
    judgement = run(talk)
    assert limit_findings(judgement) == []
    reason = judgement.not_assessable[named(lim.CLIENT_ALIAS_WITHIN_MAXIMUM)]
    assert reason.startswith("bytes not captured") and "CONNACK, which declares its limits" in reason


def test_an_alias_mapped_in_unobserved_bytes_is_not_assessable_and_resolves_to_nothing() -> None:
    talk = lost(opened({"topic_alias_maximum": 5}), S).server(publish("", alias=1)).quiet(after=1)
    conversation = ConversationJudge(CONFIG)
    for event in talk.events:
        conversation.feed(event)
    last = talk.events[-2]
    assert conversation.limits.topic_of(Seen.of(len(talk.events) - 2, last.time, S, last.frame)) is None  # type: ignore[union-attr]
    judgement = conversation.finish()
    assert failed(judgement, lim.ALIAS_MAPPED) == []
    assert "Topic Alias 1 may have been mapped there" in judgement.not_assessable[named(lim.ALIAS_MAPPED)]


# Receive Maximum -----------------------------------------------------------------------------------------------


def test_flows_within_both_receive_maximums_are_kept() -> None:
    talk = opened({"receive_maximum": 1}, {"receive_maximum": 2})
    talk.client(publish("a", qos=1, packet_id=1), publish("a", qos=2, packet_id=2))
    talk.server(codec.Puback(packet_id=1)).client(publish("a", qos=1, packet_id=3))
    talk.server(codec.Pubrec(packet_id=2)).client(codec.Pubrel(packet_id=2)).server(codec.Pubcomp(packet_id=2))
    talk.server(codec.Puback(packet_id=3))
    talk.server(publish("b", qos=2, packet_id=7)).client(codec.Pubrec(packet_id=7)).server(codec.Pubrel(packet_id=7))
    talk.client(codec.Pubcomp(packet_id=7)).server(publish("b", qos=1, packet_id=8)).client(codec.Puback(packet_id=8))
    judgement = run(talk.quiet(after=1))
    assert limit_findings(judgement) == []
    assert {named(lim.CLIENT_RECEIVE_MAXIMUM), named(lim.SERVER_RECEIVE_MAXIMUM)} <= judgement.passed


def test_client_beyond_the_servers_receive_maximum_is_a_protocol_error_the_server_closes_on() -> None:
    talk = opened(server={"receive_maximum": 1})
    talk.client(publish("a", qos=1, packet_id=1)).client(publish("a", qos=2, packet_id=2)).closed(S)
    judgement = run(talk)
    assert failed(judgement, lim.CLIENT_RECEIVE_MAXIMUM) == [
        (
            "client",
            "client PUBLISH id 2 (QoS 2, retain 0) to 'a' (event 3) makes 2 QoS 1 and 2 PUBLISHes unacknowledged "
            "(Packet Identifiers 1, 2); the server's CONNACK (event 1) declared Receive Maximum 1",
        )
    ]
    assert CLOSE_5 in judgement.passed


def test_a_pubrec_of_0x80_or_above_ends_the_flow_and_one_below_does_not() -> None:
    failing = codec.Pubrec(packet_id=1, reason_code=0x80)
    talk = opened(server={"receive_maximum": 1}).client(publish("a", qos=2, packet_id=1)).server(failing)
    assert limit_findings(run(talk.client(publish("a", qos=1, packet_id=2)).quiet(after=1))) == []
    talk = opened(server={"receive_maximum": 1}).client(publish("a", qos=2, packet_id=1))
    talk.server(codec.Pubrec(packet_id=1)).client(codec.Pubrel(packet_id=1)).client(publish("a", qos=1, packet_id=2))
    assert len(failed(run(talk.quiet(after=1)), lim.CLIENT_RECEIVE_MAXIMUM)) == 1


def test_server_beyond_the_clients_receive_maximum_is_the_servers_finding() -> None:
    talk = opened({"receive_maximum": 2})
    talk.server(publish("a", qos=1, packet_id=1), publish("a", qos=1, packet_id=2), publish("a", qos=1, packet_id=3))
    talk.server(publish("a", qos=1, packet_id=4))  # the same excess: reported once
    judgement = run(talk.quiet(after=1))
    assert [side for side, _ in failed(judgement, lim.SERVER_RECEIVE_MAXIMUM)] == ["server"]
    assert "declared Receive Maximum 2" in failed(judgement, lim.SERVER_RECEIVE_MAXIMUM)[0][1]


def test_receive_maximum_is_not_assessable_when_acknowledgements_went_unobserved() -> None:
    talk = opened(server={"receive_maximum": 1}).client(publish("a", qos=1, packet_id=1))
    talk = lost(talk, S).client(publish("a", qos=1, packet_id=2)).quiet(after=1)
    judgement = run(talk)
    assert failed(judgement, lim.CLIENT_RECEIVE_MAXIMUM) == []
    assert "2 unacknowledged" in judgement.not_assessable[named(lim.CLIENT_RECEIVE_MAXIMUM)]


def test_unobserved_sender_bytes_still_prove_an_excess() -> None:
    talk = lost(opened(server={"receive_maximum": 1}), C)
    talk.client(publish("a", qos=1, packet_id=1), publish("a", qos=1, packet_id=2)).quiet(after=1)
    assert len(failed(run(talk), lim.CLIENT_RECEIVE_MAXIMUM)) == 1


# Maximum Packet Size -------------------------------------------------------------------------------------------


def test_packets_within_both_maximum_packet_sizes_are_kept() -> None:
    talk = opened({"maximum_packet_size": 64}, {"maximum_packet_size": 64})
    talk.client(publish("a", size=40)).server(publish("a", size=40)).quiet(after=1)
    judgement = run(talk)
    assert limit_findings(judgement) == []
    assert {named(lim.CLIENT_PACKET_SIZE), named(lim.SERVER_PACKET_SIZE)} <= judgement.passed


def test_size_counts_the_whole_packet_fixed_header_included() -> None:
    packet = publish("a", size=10)  # 2 (fixed header) + 3 (topic) + 1 (Property Length) + 10 = 16 bytes
    assert len(codec.encode(packet, version="5")) == 16
    exact = run(opened(server={"maximum_packet_size": 16}).client(packet).quiet(after=1))
    assert failed(exact, lim.CLIENT_PACKET_SIZE) == []
    over = run(opened(server={"maximum_packet_size": 15}).client(packet).closed(S))
    assert failed(over, lim.CLIENT_PACKET_SIZE) == [
        (
            "client",
            "client PUBLISH (QoS 0, retain 0) to 'a' (event 2) is 16 bytes; the server's CONNACK (event 1) declared "
            "Maximum Packet Size 15",
        )
    ]
    assert CLOSE_5 in over.passed


def test_a_packet_skipped_undecoded_is_measured_by_its_remaining_length() -> None:
    bounded = codec.StreamDecoder(C, version="5", max_packet_size=100)  # the auditor's own bound, not the peer's
    talk = Talk(version="5", _decoders={C: bounded, S: codec.StreamDecoder(S, version="5")})
    talk.client(connect()).server(connack(maximum_packet_size=200)).client(publish("a", size=300)).closed(S)
    judgement = run(talk)
    assert "is 307 bytes" in failed(judgement, lim.CLIENT_PACKET_SIZE)[0][1]
    assert "bytes that could not be framed" in failed(judgement, lim.CLIENT_PACKET_SIZE)[0][1]


def test_server_packet_larger_than_the_clients_maximum_is_the_servers_finding() -> None:
    talk = opened({"maximum_packet_size": 20}).server(publish("a", size=30)).quiet(after=1)
    judgement = run(talk)
    assert [side for side, _ in failed(judgement, lim.SERVER_PACKET_SIZE)] == ["server"]
    assert (
        "is 36 bytes; the client's CONNECT (event 0) declared Maximum Packet Size 20"
        in (failed(judgement, lim.SERVER_PACKET_SIZE)[0][1])
    )


def test_the_connack_itself_is_bound_by_the_clients_maximum() -> None:
    big = codec.Connack(properties=make(reason_string="r" * 40))
    judgement = run(Talk(version="5").client(connect(maximum_packet_size=20)).server(big).quiet(after=1))
    assert "server CONNACK (event 1)" in failed(judgement, lim.SERVER_PACKET_SIZE)[0][1]


def test_a_client_packet_before_the_connack_is_not_assessable_beyond_the_maximum_it_declares() -> None:
    talk = Talk(version="5").client(connect()).client(publish("a", size=30))
    judgement = run(talk.server(connack(maximum_packet_size=20)).quiet(after=1))
    assert failed(judgement, lim.CLIENT_PACKET_SIZE) == []
    assert "was sent before the server's CONNACK (event 2)" in judgement.not_assessable[named(lim.CLIENT_PACKET_SIZE)]


def test_packet_size_is_not_assessable_when_the_connack_was_not_captured() -> None:
    talk = lost(Talk(version="5").client(connect()), S).client(publish("a", size=30)).quiet(after=1)
    judgement = run(talk)
    assert judgement.not_assessable[named(lim.CLIENT_PACKET_SIZE)].startswith("bytes not captured")


# Within the limits, whatever the order -------------------------------------------------------------------------


@st.composite
def conversations(draw: st.DrawFn) -> Talk:
    """Both sides publish random aliased and QoS 1/2 messages, never past the peer's declared limits: an alias is
    mapped (with its topic) before it is used alone, and the oldest flow is completed before one more would exceed
    the Receive Maximum."""
    aliases = {C: draw(st.integers(1, 4)), S: draw(st.integers(1, 4))}  # what the peer of each sender declared
    quota = {C: draw(st.integers(1, 3)), S: draw(st.integers(1, 3))}
    talk = opened(
        {"topic_alias_maximum": aliases[S], "receive_maximum": quota[S]},
        {"topic_alias_maximum": aliases[C], "receive_maximum": quota[C]},
    )
    mapped: dict[codec.Direction, set[int]] = {C: set(), S: set()}
    flows: dict[codec.Direction, list[tuple[int, int]]] = {C: [], S: []}
    next_id = {C: 1, S: 1}
    peer = {C: S, S: C}
    for _ in range(draw(st.integers(1, 12))):
        sender = draw(st.sampled_from([C, S]))
        alias = draw(st.one_of(st.none(), st.integers(1, aliases[sender])))
        qos = draw(st.integers(0, 2))
        if qos and len(flows[sender]) == quota[sender]:
            packet_id, old_qos = flows[sender].pop(0)
            if old_qos == 1:
                talk.send(peer[sender], codec.Puback(packet_id=packet_id))
            else:
                talk.send(peer[sender], codec.Pubrec(packet_id=packet_id))
                talk.send(sender, codec.Pubrel(packet_id=packet_id))
                talk.send(peer[sender], codec.Pubcomp(packet_id=packet_id))
        alone = alias is not None and alias in mapped[sender] and draw(st.booleans())
        topic = "" if alone else draw(st.sampled_from(["t/1", "t/2", "u"]))
        if alias is not None:
            mapped[sender].add(alias)
        packet_id = next_id[sender] if qos else None
        if qos:
            next_id[sender] += 1
            flows[sender].append((next_id[sender] - 1, qos))
        talk.send(sender, publish(topic, alias=alias, qos=qos, packet_id=packet_id))
    return talk.quiet(after=1)


@settings(max_examples=60, deadline=None)
@given(conversations())
def test_traffic_within_the_declared_limits_has_no_limit_finding(talk: Talk) -> None:
    judgement = run(talk)
    assert limit_findings(judgement) == []
    assert not {named(key) for key in lim.LIMIT_RULES} & set(judgement.not_assessable)


def test_one_message_in_flight_keeps_an_undeclared_receive_maximum() -> None:
    # no CONNACK yet: Receive Maximum is never 0, so one QoS 1 PUBLISH in flight keeps whatever it will be
    connect = codec.Connect(client_id="five", protocol_level=5, keep_alive=0)
    one = codec.Publish(topic="t", payload=b"1", qos=1, packet_id=1)
    two = codec.Publish(topic="t", payload=b"2", qos=1, packet_id=2)
    assert "MQTT-3.3.4-7" in run(Talk(version="5").client(connect, one).quiet(after=1)).passed
    assert "MQTT-3.3.4-7" in run(Talk(version="5").client(connect, one, two).quiet(after=1)).not_assessable
