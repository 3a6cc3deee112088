"""Several connections to one broker on a common clock, held against the broker model: routing to every matching
session [MQTT-4.5.0-1], sessions [3.1.2-4/5/6, 3.2.2-2/3, 3.1.4-2], retained messages [3.3.1-6 to -12], Wills
[3.1.2-8/16/17, 3.14.4-3] and the flags and QoS of each delivery [3.3.1-3, 3.3.5-1, 3.8.4-6, 3.10.4-2]."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.judge import judge_scenario

from .cases import Case, case_id, check_fails, check_passes, check_undecided, explain, verdict
from .talk import (
    CONNACK_OK,
    DISCONNECT,
    PINGREQ,
    PINGRESP,
    C,
    S,
    Talk,
    acknowledge,
    connected,
    publish,
    publisher,
    suback,
    subscribe,
)

LATE = 10.0  # every subscriber below watches until here: past every deadline
EARLY = 1.5  # a subscriber that leaves here leaves before any delivery was due


def subscriber(
    *filters: str | tuple[str, int],
    client_id: str = "sub",
    at: float = 0.0,
    clean_session: bool = True,
    session_present: bool = False,
    codes: tuple[int, ...] = (),
) -> Talk:
    talk = connected(client_id, clean_session=clean_session, session_present=session_present, at=at)
    granted = codes or tuple(f[1] if isinstance(f, tuple) else 0 for f in filters)
    return talk.client(subscribe(1, *filters)).server(suback(1, *granted))


def got(talk: Talk, *messages: codec.Publish, at: float = 2.0) -> Talk:
    """The subscriber receives ``messages`` (as the server writes them) and acknowledges them."""
    for number, message in enumerate(messages, start=1):
        sent = message
        if message.qos:
            sent = codec.Publish(
                topic=message.topic,
                payload=message.payload,
                qos=message.qos,
                retain=message.retain,
                dup=message.dup,
                packet_id=100 + number,
            )
        talk.server(sent, at=at + number / 10)
        if sent.qos == 1:
            talk.client(codec.Puback(packet_id=100 + number))
        elif sent.qos == 2:
            talk.client(codec.Pubrec(packet_id=100 + number)).server(codec.Pubrel(packet_id=100 + number))
            talk.client(codec.Pubcomp(packet_id=100 + number))
    return talk


def as_retained(message: codec.Publish) -> codec.Publish:
    return codec.Publish(topic=message.topic, payload=message.payload, qos=message.qos, retain=True)


def not_retained(message: codec.Publish) -> codec.Publish:
    return codec.Publish(topic=message.topic, payload=message.payload, qos=message.qos, retain=False)


def at_qos(message: codec.Publish, qos: int) -> codec.Publish:
    return codec.Publish(topic=message.topic, payload=message.payload, qos=qos, retain=message.retain)


def watch(talk: Talk, *, early: bool = False) -> Talk:
    return talk.closed(C, at=EARLY) if early else talk.quiet(at=LATE)


LIVE = publish("t/1", b"live")
LIVE_QOS1 = publish("t/1", b"live1", qos=1, packet_id=1)
LIVE_QOS2 = publish("t/1", b"live2", qos=2, packet_id=2)
KEPT = publish("r/1", b"kept", qos=1, packet_id=3, retain=True)
KEPT_QOS0 = publish("r/1", b"kept0", retain=True)
CLEAR = publish("r/1", b"", qos=1, packet_id=4, retain=True)
PLAIN = publish("r/1", b"plain", qos=1, packet_id=5)
WILL = codec.Will(topic="will/w", message=b"gone", qos=1)
WILL_RETAINED = codec.Will(topic="will/w", message=b"gone", qos=1, retain=True)
WILL_MESSAGE = publish("will/w", b"gone", qos=1, packet_id=1)


def routed(delivered: bool = True, early: bool = False, **publish_at: float) -> dict[str, Talk]:
    sub = subscriber(("t/+", 1))
    if delivered:
        got(sub, LIVE)
    return {"sub": watch(sub, early=early), "pub": publisher(LIVE, **publish_at)}


def retained_then_subscribe(
    *published: codec.Publish, delivered: tuple[codec.Publish, ...] = (), early: bool = False
) -> dict[str, Talk]:
    """Retained messages are published first; a new subscriber to 'r/#' comes at 3 s."""
    sub = subscriber(("r/#", 1), at=3.0)
    got(sub, *delivered, at=3.5)
    return {"pub": publisher(*published), "sub": sub.closed(C, at=3.6) if early else sub.quiet(at=LATE)}


def will_owner(will: codec.Will, *, disconnect: bool = False, at: float = 1.0) -> Talk:
    talk = Talk()
    talk.now = at - 0.01
    talk.client(codec.Connect(client_id="mortal", will=will)).server(CONNACK_OK)
    if disconnect:
        talk.client(DISCONNECT)
    return talk.closed(C, abrupt=not disconnect)


def wills(
    will: codec.Will, *delivered: codec.Publish, disconnect: bool = False, early: bool = False
) -> dict[str, Talk]:
    sub = got(subscriber(("will/#", 1)), *delivered)
    return {"mortal": will_owner(will, disconnect=disconnect), "sub": watch(sub, early=early)}


def late_subscriber_to_will(will: codec.Will, *delivered: codec.Publish, early: bool = False) -> dict[str, Talk]:
    sub = got(subscriber(("will/#", 1), at=3.0), *delivered, at=3.5)
    return {"mortal": will_owner(will), "sub": sub.closed(C, at=3.6) if early else sub.quiet(at=LATE)}


def persistent(*, first_leaves: float = 0.5, second_at: float = 2.0, session_present: bool = True) -> tuple[Talk, Talk]:
    """A CleanSession 0 client subscribes to 't/+' at QoS 1, leaves, and comes back at ``second_at``."""
    first = (
        subscriber(("t/+", 1), client_id="keeper", clean_session=False).client(DISCONNECT).closed(C, at=first_leaves)
    )
    second = connected("keeper", clean_session=False, session_present=session_present, at=second_at)
    return first, second


def resumed(delivered: bool, *, early: bool = False, publish_at: float = 3.0) -> dict[str, Talk]:
    first, second = persistent()
    if delivered:
        got(second, LIVE_QOS1, at=publish_at + 0.5)
    last = second.closed(C, at=publish_at + 0.2) if early else second.quiet(at=LATE)
    return {"first": first, "second": last, "pub": publisher(LIVE_QOS1, at=publish_at)}


def offline(delivered: bool, *, early: bool = False) -> dict[str, Talk]:
    first, second = persistent(second_at=3.0)
    if delivered:
        got(second, LIVE_QOS1, at=3.2)
    last = second.closed(C, at=3.1) if early else second.quiet(at=LATE)
    return {"first": first, "pub": publisher(LIVE_QOS1, at=1.0), "second": last}


def discarded(delivered: bool, *, early: bool = False) -> dict[str, Talk]:
    first, _ = persistent()
    second = connected("keeper", clean_session=True, at=2.0)
    if delivered:
        got(second, LIVE, at=3.5)
    last = second.closed(C, at=3.1) if early else second.quiet(at=LATE)
    return {"first": first, "second": last, "pub": publisher(LIVE, at=3.0)}


def takeover(closed_by: codec.Direction | None = None) -> dict[str, Talk]:
    """A second connection with the same ClientId at 2 s; the first is closed by ``closed_by`` at once (or
    stays open)."""
    old = connected("twin", at=0.0)
    old = old.quiet(at=LATE) if closed_by is None else old.closed(closed_by, at=2.1)
    return {"old": old, "new": connected("twin", at=2.0).quiet(at=LATE)}


def reconnect(second_present: bool = False, third_present: bool = True) -> dict[str, Talk]:
    """CleanSession 1 wipes any state; then CleanSession 0 twice: no session the first time, one the second."""
    wipe = connected("again", at=0.0).client(DISCONNECT).closed(C, at=0.5)
    second = connected("again", clean_session=False, session_present=second_present, at=1.0)
    third = connected("again", clean_session=False, session_present=third_present, at=2.0).quiet(at=LATE)
    return {"wipe": wipe, "second": second.client(DISCONNECT).closed(C, at=1.5), "third": third}


def lone_persistent() -> dict[str, Talk]:
    return {"only": connected("again", clean_session=False, session_present=True).quiet(at=LATE)}


def overlapping(*delivered_qos: int, early: bool = False) -> dict[str, Talk]:
    sub = subscriber(("t/1", 0), ("t/+", 2))
    got(sub, *(at_qos(LIVE_QOS2, qos) for qos in delivered_qos))
    return {"sub": watch(sub, early=early), "pub": publisher(LIVE_QOS2)}


def unsubscribed(delivered: bool, *, early: bool = False) -> dict[str, Talk]:
    sub = subscriber(("t/+", 0)).client(codec.Unsubscribe(packet_id=2, topic_filters=["t/+"]))
    sub.server(codec.Unsuback(packet_id=2), at=0.5)
    if delivered:
        got(sub, LIVE)
    return {"sub": watch(sub, early=early), "pub": publisher(LIVE)}


def dup_first_copy(dup: bool, *, early_resume: bool = False) -> dict[str, Talk]:
    if early_resume:
        conversations = offline(True)
        return conversations
    sub = subscriber(("t/+", 1))
    copy = codec.Publish(topic="t/1", payload=b"live1", qos=1, packet_id=101, dup=dup)
    sub.server(copy, at=2.0).client(codec.Puback(packet_id=101))
    return {"sub": sub.quiet(at=LATE), "pub": publisher(LIVE_QOS1)}


def racing_retained(flag: bool) -> dict[str, Talk]:
    """The retained message is published while the subscription is being made: live or retained, both fit."""
    sub = connected("sub", at=0.0).client(subscribe(1, ("r/#", 1)), at=1.0).server(suback(1, 1), at=1.5)
    got(sub, as_retained(KEPT) if flag else not_retained(KEPT), at=1.6)
    return {"sub": sub.quiet(at=LATE), "pub": publisher(KEPT, at=0.99)}


def normalised(subscribed_to: str, published: str, got_topic: str | None, *, early: bool = False) -> dict[str, Talk]:
    """'sub' subscribes to ``subscribed_to``; 'pub' publishes to ``published``; 'sub' gets a copy named ``got_topic``
    (None: nothing)."""
    sub = subscriber(subscribed_to)
    if got_topic is not None:
        got(sub, publish(got_topic, b"n"))
    return {"sub": watch(sub, early=early), "pub": publisher(publish(published, b"n"))}


def resent(dup: bool | None) -> dict[str, Talk]:
    """A CleanSession 0 session gets a QoS 1 message at 1.2 s and drops before its PUBACK; resumed at 2 s, it gets
    the message again with ``dup`` (None: not again)."""
    first = connected("k", clean_session=False).client(subscribe(1, ("t", 1))).server(suback(1, 1))
    first.server(publish("t", b"m", qos=1, packet_id=7), at=1.2).closed(C, at=1.3, abrupt=True)
    again = connected("k", clean_session=False, session_present=True, at=2.0)
    if dup is not None:
        again.server(publish("t", b"m", qos=1, packet_id=7, dup=dup), at=2.1).client(codec.Puback(packet_id=7))
    return {"first": first, "again": watch(again), "pub": publisher(publish("t", b"m", qos=1, packet_id=1))}


CASES = [
    Case(
        "MQTT-3.3.1-1",
        S,
        fails=lambda: resent(dup=False),
        passes=lambda: resent(dup=True),
        undecided=lambda: resent(dup=None),
    ),
    Case(
        "MQTT-4.7.3-4",
        S,
        fails=lambda: normalised("a", "\ufeffa", "\ufeffa"),
        passes=lambda: normalised("a", "\ufeffa", None),
        undecided=lambda: normalised("a", "\ufeffa", None, early=True),
    ),
    Case(
        "MQTT-1.5.3-3",
        S,
        fails=lambda: normalised("\ufeffa", "\ufeffa", "a"),
        passes=lambda: normalised("\ufeffa", "\ufeffa", "\ufeffa"),
        undecided=lambda: normalised("\ufeffa", "\ufeffa", None, early=True),
    ),
    Case(
        "MQTT-4.5.0-1",
        S,
        fails=lambda: routed(delivered=False),
        passes=routed,
        undecided=lambda: routed(delivered=False, early=True),
    ),
    Case(
        "MQTT-3.3.1-9",
        S,
        fails=lambda: {"sub": watch(got(subscriber(("t/+", 1)), as_retained(LIVE))), "pub": publisher(LIVE)},
        passes=routed,
        undecided=lambda: racing_retained(flag=False),
    ),
    Case(
        "MQTT-3.3.1-8",
        S,
        fails=lambda: retained_then_subscribe(KEPT, delivered=(not_retained(KEPT),)),
        passes=lambda: retained_then_subscribe(KEPT, delivered=(KEPT,)),
        undecided=lambda: racing_retained(flag=True),
    ),
    Case(
        "MQTT-3.3.1-6",
        S,
        fails=lambda: retained_then_subscribe(KEPT),
        passes=lambda: retained_then_subscribe(KEPT, delivered=(KEPT,)),
        undecided=lambda: retained_then_subscribe(KEPT, early=True),
    ),
    Case(
        "MQTT-3.3.1-7",
        S,
        fails=lambda: retained_then_subscribe(KEPT, KEPT_QOS0, delivered=(KEPT,)),
        passes=lambda: retained_then_subscribe(KEPT, KEPT_QOS0, delivered=(KEPT_QOS0,)),
        undecided=lambda: retained_then_subscribe(KEPT, KEPT_QOS0, early=True),
    ),
    Case(
        "MQTT-3.3.1-10",
        S,
        fails=lambda: retained_then_subscribe(KEPT, CLEAR, delivered=(KEPT,)),
        passes=lambda: retained_then_subscribe(KEPT, CLEAR),
        undecided=lambda: retained_then_subscribe(KEPT, CLEAR, early=True),
    ),
    Case(
        "MQTT-3.3.1-11",
        S,
        fails=lambda: retained_then_subscribe(CLEAR, delivered=(CLEAR,)),
        passes=lambda: retained_then_subscribe(CLEAR),
        undecided=lambda: retained_then_subscribe(CLEAR, early=True),
    ),
    Case(
        "MQTT-3.3.1-12",
        S,
        fails=lambda: retained_then_subscribe(KEPT, PLAIN, delivered=(as_retained(PLAIN),)),
        passes=lambda: retained_then_subscribe(KEPT, PLAIN, delivered=(KEPT,)),
        undecided=lambda: retained_then_subscribe(KEPT, PLAIN, early=True),
    ),
    Case(
        "MQTT-3.1.2-8",
        S,
        fails=lambda: wills(WILL),
        passes=lambda: wills(WILL, WILL_MESSAGE),
        undecided=lambda: wills(WILL, early=True),
    ),
    Case(
        "MQTT-3.1.2-16",
        S,
        fails=lambda: late_subscriber_to_will(WILL, as_retained(WILL_MESSAGE)),
        passes=lambda: late_subscriber_to_will(WILL),
        undecided=lambda: late_subscriber_to_will(WILL, early=True),
    ),
    Case(
        "MQTT-3.1.2-17",
        S,
        fails=lambda: late_subscriber_to_will(WILL_RETAINED),
        passes=lambda: late_subscriber_to_will(WILL_RETAINED, as_retained(WILL_MESSAGE)),
        undecided=lambda: late_subscriber_to_will(WILL_RETAINED, early=True),
    ),
    Case(
        "MQTT-3.14.4-3",
        S,
        fails=lambda: wills(WILL, WILL_MESSAGE, disconnect=True),
        passes=lambda: wills(WILL, disconnect=True),
        undecided=lambda: wills(WILL, disconnect=True, early=True),
    ),
    Case(
        "MQTT-3.1.2-4",
        S,
        fails=lambda: resumed(delivered=False),
        passes=lambda: resumed(delivered=True),
        undecided=lambda: resumed(delivered=False, early=True),
    ),
    Case(
        "MQTT-3.1.2-5",
        S,
        fails=lambda: offline(delivered=False),
        passes=lambda: offline(delivered=True),
        undecided=lambda: offline(delivered=False, early=True),
    ),
    Case(
        "MQTT-3.1.2-6",
        S,
        fails=lambda: discarded(delivered=True),
        passes=lambda: discarded(delivered=False),
        undecided=lambda: discarded(delivered=False, early=True),
    ),
    Case(
        "MQTT-3.1.4-2",
        S,
        fails=takeover,
        passes=lambda: takeover(S),
        undecided=lambda: takeover(C),
    ),
    Case(
        "MQTT-3.2.2-2",
        S,
        fails=lambda: reconnect(third_present=False),
        passes=reconnect,
        undecided=lone_persistent,
    ),
    Case(
        "MQTT-3.2.2-3",
        S,
        fails=lambda: reconnect(second_present=True),
        passes=reconnect,
        undecided=lone_persistent,
    ),
    Case(
        "MQTT-3.3.1-3",
        S,
        fails=lambda: dup_first_copy(dup=True),
        passes=lambda: dup_first_copy(dup=False),
        undecided=lambda: dup_first_copy(dup=False, early_resume=True),
    ),
    Case(
        "MQTT-3.3.5-1",
        S,
        fails=lambda: overlapping(0),
        passes=lambda: overlapping(0, 2),
        undecided=lambda: overlapping(early=True),
    ),
    Case(
        "MQTT-3.10.4-2",
        S,
        fails=lambda: unsubscribed(delivered=True),
        passes=lambda: unsubscribed(delivered=False),
        undecided=lambda: unsubscribed(delivered=False, early=True),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_scenario_breaking_the_rule_is_a_finding(case: Case) -> None:
    check_fails(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_scenario_keeping_the_rule_passes_it(case: Case) -> None:
    check_passes(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_scenario_that_cannot_show_it_leaves_the_rule_not_assessable(case: Case) -> None:
    check_undecided(case)


def findings(conversations: dict[str, Talk]) -> list[tuple[str, str, str]]:
    judgement = judge_scenario({name: talk.events for name, talk in conversations.items()})
    return [(f.conversation, rule, f.side.value) for f in judgement.findings for rule in f.rules]


def test_a_clean_scenario_has_no_finding() -> None:
    judgement = judge_scenario({name: talk.events for name, talk in routed().items()})
    assert judgement.findings == (), explain(judgement)
    assert {"MQTT-4.5.0-1", "MQTT-3.3.1-9", "MQTT-3.3.1-3"} <= judgement.passed


def test_findings_name_their_conversation() -> None:
    assert findings(routed(delivered=False)) == [("sub", "MQTT-4.5.0-1", "server")]


def test_a_message_published_before_the_subscription_is_not_owed() -> None:
    sub = subscriber(("t/+", 1), at=3.0).quiet(at=LATE)
    assert findings({"sub": sub, "pub": publisher(LIVE)}) == []


def test_a_qos2_message_delivered_twice_is_a_duplicate() -> None:
    sub = got(subscriber(("t/+", 2)), LIVE_QOS2, LIVE_QOS2)
    assert ("sub", "MQTT-4.3.3-2", "server") in findings({"sub": sub.quiet(at=LATE), "pub": publisher(LIVE_QOS2)})


def test_a_message_from_a_refused_connection_must_not_be_routed() -> None:
    refused = Talk()
    refused.now = 0.99
    refused.client(codec.Connect(client_id="nobody"), LIVE).server(codec.Connack(return_code=5)).closed(S)
    sub = got(subscriber(("t/+", 0)), LIVE).quiet(at=LATE)
    assert ("sub", "MQTT-3.1.4-5", "server") in findings({"sub": sub, "refused": refused})


def test_a_lower_qos_than_owed_on_a_single_subscription_is_a_finding() -> None:
    sub = got(subscriber(("t/+", 1)), at_qos(LIVE_QOS1, 0)).quiet(at=LATE)
    assert ("sub", "MQTT-3.8.4-6", "server") in findings({"sub": sub, "pub": publisher(LIVE_QOS1)})


def test_a_qos0_retained_message_may_be_dropped() -> None:
    judgement = judge_scenario({n: t.events for n, t in retained_then_subscribe(KEPT_QOS0).items()})
    assert judgement.findings == (), explain(judgement)


def test_a_retained_message_from_before_the_scenario_is_no_finding() -> None:
    sub = got(subscriber(("r/#", 1)), publish("r/old", b"older", qos=1, packet_id=9, retain=True)).quiet(at=LATE)
    judgement = judge_scenario({"sub": sub.events})
    assert judgement.findings == (), explain(judgement)


OTHER = publish("u/1", b"other", qos=1, packet_id=6)


def test_a_subscriber_that_gets_nothing_unmatched_keeps_the_leak_rule() -> None:
    judgement = verdict({"sub": watch(subscriber(("t/+", 1))), "pub": publisher(OTHER)})
    assert "MQTT-3.3.2-3" in judgement.passed, explain(judgement)
    assert judgement.findings == (), explain(judgement)


def test_a_delivery_no_filter_matches_is_a_leak() -> None:
    judgement = verdict({"sub": watch(got(subscriber(("t/+", 1)), OTHER)), "pub": publisher(OTHER)})
    assert [(f.conversation, rule, f.kind) for f in judgement.findings for rule in f.rules] == [
        ("sub", "MQTT-3.3.2-3", "leak")
    ]


def test_routing_findings_name_their_kind() -> None:
    missing = verdict({"sub": watch(subscriber(("t/+", 1))), "pub": publisher(LIVE_QOS1)})
    assert [(rule, f.kind) for f in missing.findings for rule in f.rules] == [("MQTT-4.5.0-1", "missing")], explain(
        missing
    )
    downgraded = verdict({"sub": watch(got(subscriber(("t/+", 1)), at_qos(LIVE_QOS1, 0))), "pub": publisher(LIVE_QOS1)})
    assert [(rule, f.kind) for f in downgraded.findings for rule in f.rules] == [("MQTT-3.8.4-6", "qos")], explain(
        downgraded
    )
    twice = verdict({"sub": watch(got(subscriber(("t/+", 2)), LIVE_QOS2, LIVE_QOS2)), "pub": publisher(LIVE_QOS2)})
    assert [(rule, f.kind) for f in twice.findings for rule in f.rules] == [("MQTT-4.3.3-2", "duplicate")], explain(
        twice
    )


def test_expected_deliveries_list_each_owed_copy_with_its_qos_and_retain_flag() -> None:
    from mqttaudit.judge import expected_deliveries

    overlapping = subscriber(("t/+", 0), ("t/1", 1), client_id="over").quiet(at=LATE)
    plain = subscriber(("t/1", 2), client_id="plain").quiet(at=LATE)
    late = subscriber(("r/1", 1), client_id="late", at=3.0).quiet(at=LATE)
    conversations = {
        "over": overlapping.events,
        "plain": plain.events,
        "late": late.events,
        "pub": publisher(LIVE_QOS1, KEPT).events,
    }
    records = expected_deliveries(conversations)
    summary = [(r.subscriber, r.topic, r.qos, r.highest_qos, r.retain, r.must, r.copies) for r in records]
    assert ("over", "t/1", 1, 1, False, True, 2) in summary  # highest QoS of the two filters, up to two copies
    assert ("plain", "t/1", 1, 1, False, True, 1) in summary  # the publish QoS caps the granted QoS 2
    assert ("late", "r/1", 1, 1, True, True, 1) in summary  # the retained message, on subscribe, RETAIN 1
    assert all(r.publisher == "pub" for r in records)
    assert not [r for r in records if r.topic == "r/1" and r.subscriber != "late"]


def slow_publisher(message: codec.Publish, *, at: float, processed: float) -> Talk:
    """Publishes ``message`` at ``at``; the server shows it processed it only at ``processed`` (its PINGRESP)."""
    talk = acknowledge(connected("slow-pub", at=at).client(message), message)
    return talk.client(PINGREQ, at=processed).server(PINGRESP).client(DISCONNECT).closed(C)


def test_a_qos0_message_the_server_may_have_taken_while_the_session_was_offline_is_not_owed() -> None:
    # The persistent subscriber is away from 1.0 to 3.0; the server took LIVE somewhere between 1.51 and 4.0.
    away = subscriber(("t/+", 1), clean_session=False).closed(C, at=1.0)
    back = connected("sub", clean_session=False, session_present=True, at=3.0).quiet(at=LATE)
    dropped = verdict({"away": away, "back": back, "pub": slow_publisher(LIVE, at=1.5, processed=4.0)})
    assert dropped.findings == (), explain(dropped)
    # At QoS 1 the session keeps it while offline, so it is owed either way.
    away = subscriber(("t/+", 1), clean_session=False).closed(C, at=1.0)
    back = connected("sub", clean_session=False, session_present=True, at=3.0).quiet(at=LATE)
    kept = verdict({"away": away, "back": back, "pub": slow_publisher(LIVE_QOS1, at=1.5, processed=4.0)})
    assert [(f.conversation, f.kind) for f in kept.findings] == [("back", "missing")], explain(kept)


def test_a_message_republished_with_the_same_topic_and_payload_is_matched_to_its_own_delivery() -> None:
    # Two overlapping filters allow two copies of each; the second message must not count as an extra copy of
    # the first (a device's retained status, published again on every connection, looks exactly like this).
    status = publish("s/1", b"online", qos=1, packet_id=7)
    sub = subscriber(("s/#", 1), ("s/1", 1))
    got(got(sub, status, at=2.0), status, at=6.0).quiet(at=20.0)
    first = publisher(status, client_id="pub-1", at=1.0)
    second = publisher(status, client_id="pub-2", at=5.0)
    judgement = verdict({"sub": sub, "pub-1": first, "pub-2": second})
    assert judgement.findings == (), explain(judgement)
    assert "MQTT-4.5.0-1" in judgement.passed


@pytest.mark.parametrize("acked", [True, False, None])
def test_a_qos0_message_the_server_never_acknowledged_at_the_tcp_level_is_not_surely_taken(acked: bool | None) -> None:
    # A capture shows whether the server's TCP acknowledged the PUBLISH; never acknowledged, it may never have
    # reached the broker, so the model takes it as possibly published, owed to no one. The live prober does not
    # know (None): what it sent reached the broker's socket.
    from dataclasses import replace

    from mqttaudit.judge import ConversationJudge, Sent

    talk = connected("pub").client(LIVE).quiet(after=1.0)
    judge = ConversationJudge()
    for event in talk.events:
        judge.feed(replace(event, acked=acked) if isinstance(event, Sent) and event.frame.packet == LIVE else event)
    [published] = judge.transcript.published
    assert published.certain is (acked is not False)


def test_delivering_the_offending_publish_to_another_subscriber_acts_on_it() -> None:
    # A PUBLISH QoS 1 with Packet Identifier 0 breaks MQTT-2.3.1-1: the server must close without acting on it. It
    # closes the publisher at once, but delivers the message to another connection's subscriber: acting on it.
    bad = codec.Publish(topic="t/a", payload=b"bad", qos=1, packet_id=0)
    sub = subscriber(("t/#", 1))
    got(sub, bad, at=1.2)
    pub = connected("pub", at=1.0).client(codec.encode(bad, validate=False), at=1.1).closed(S, at=1.15)
    found = findings({"sub": watch(sub), "pub": pub})
    assert ("sub", "MQTT-4.8.0-1", "server") in found, found  # acting on it, on the subscriber's connection
    # Closed without delivering it, the same publisher is no finding.
    assert findings({"sub": watch(subscriber(("t/#", 1))), "pub": pub}) == []


def closed_by_server_with_will(close_at: float) -> Talk:
    """A client with a Will sends a malformed DISCONNECT (reserved flag bit 0: ``e1 00``) at 1.0 s; the server
    closes the connection at ``close_at``."""
    talk = Talk()
    talk.now = 0.97
    talk.client(codec.Connect(client_id="mortal", will=WILL)).server(CONNACK_OK).client("e1 00", at=1.0)
    return talk.closed(S, at=close_at)


@pytest.mark.parametrize("before", [0.0001, 0.0002, 0.004, 0.04])
def test_a_will_seen_just_before_the_servers_close_of_its_connection_is_a_will_after_it(before: float) -> None:
    """The server closes on the malformed DISCONNECT and publishes the Will: the watcher's socket shows the Will
    0.1-0.2 ms before the prober's shows the close (up to tens of ms on a loaded prober). Within SAME_INSTANT that
    is one instant."""
    sub = got(subscriber(("will/#", 1)), WILL_MESSAGE, at=1.02 - before - 0.1)  # got() sends at ``at`` + 0.1
    judgement = verdict({"mortal": closed_by_server_with_will(1.02), "sub": sub.quiet(at=LATE)})

    assert "MQTT-3.1.2-8" in judgement.passed, explain(judgement)
    assert not [f for f in judgement.findings if f.rule == "MQTT-3.1.2-8"], explain(judgement)


def test_a_will_seen_well_before_the_close_of_its_connection_is_no_will_of_that_close() -> None:
    """100 ms is no longer one instant: the Will came while the connection was still open."""
    sub = got(subscriber(("will/#", 1)), WILL_MESSAGE, at=1.1 - 0.1)
    judgement = verdict({"mortal": closed_by_server_with_will(1.2), "sub": sub.quiet(at=LATE)})

    assert any(f.rule == "MQTT-3.1.2-8" for f in judgement.findings), explain(judgement)


def test_a_will_seen_before_the_clients_own_close_is_early_however_little() -> None:
    """The client's close is stamped before the server can learn of it: no tolerance there."""
    sub = got(subscriber(("will/#", 1)), WILL_MESSAGE, at=1.0199 - 0.1)  # 0.1 ms before the close at 1.02
    judgement = verdict({"mortal": will_owner(WILL), "sub": sub.quiet(at=LATE)})

    assert any(f.rule == "MQTT-3.1.2-8" for f in judgement.findings), explain(judgement)
