"""The MQTT 5.0 routing cases (sessions, Wills, retained messages, forwarded properties, Message Expiry, Subscription
Identifiers, overlapping and shared subscriptions, UNSUBSCRIBE, '$' topics): every statement a case lists is one the
judge decides on 5.0 conversations, kept by a conforming broker and broken by a violating one (pure, with the
judge configuration the probe uses); and every case gets a verdict from mosquitto and from mqttools."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mqttaudit import codec
from mqttaudit.codec import reason_codes
from mqttaudit.codec.properties import USER_PROPERTY, make
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.cases import ALONE, v5_routing
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, judge_config

from .cases import explain
from .live import run_together
from .talk import STEP, C, S, Talk, publish5

ROUTING_CASES = [case for case in CASES.values() if case.script.__module__ == v5_routing.__name__]
TIMEOUT = 1.0
#: Every watcher below stays until here: past every deadline of the scenarios.
LATE = 12.0
Scenario = dict[str, Talk]


# Conversations ----------------------------------------------------------------------------------------------------


def client(
    client_id: str,
    *,
    at: float = 0.0,
    clean: bool = True,
    expiry: int | None = None,
    will: codec.Will | None = None,
    present: bool = False,
) -> Talk:
    """An accepted MQTT 5.0 connection opened at ``at``."""
    properties = make(session_expiry_interval=expiry) if expiry is not None else ()
    talk = Talk(version="5")
    talk.now = at - STEP
    connect = codec.Connect(
        client_id=client_id, protocol_level=5, clean_session=clean, will=will, properties=properties
    )
    return talk.client(connect).server(codec.Connack(session_present=present))


def subscribed(talk: Talk, *subscriptions: codec.Subscription, identifier: int | None = None, pid: int = 1) -> Talk:
    properties = make(subscription_identifier=identifier) if identifier is not None else ()
    talk.client(codec.Subscribe(packet_id=pid, subscriptions=subscriptions, properties=properties))
    return talk.server(codec.Suback(packet_id=pid, return_codes=[s.qos for s in subscriptions]))


def option(topic_filter: str, qos: int = 0, **options: bool | int) -> codec.Subscription:
    return codec.Subscription(topic_filter=topic_filter, qos=qos, **options)  # type: ignore[arg-type]


message = publish5


def copy(sent: codec.Publish, *, pid: int = 101, **changes: object) -> codec.Publish:
    """What a server sends on of ``sent``: its own Packet Identifier, RETAIN 0, the same properties."""
    fields: dict[str, object] = {
        "topic": sent.topic,
        "payload": sent.payload,
        "qos": sent.qos,
        "retain": False,
        "packet_id": pid if sent.qos else None,
        "properties": sent.properties,
    }
    fields.update(changes)
    if not fields["qos"]:
        fields["packet_id"] = None
    return codec.Publish(**fields)  # type: ignore[arg-type]


def publisher(*messages: codec.Publish, at: float = 1.0, client_id: str = "pub") -> Talk:
    """Connects at ``at``, publishes each message (acknowledged), and leaves with DISCONNECT."""
    talk = client(client_id, at=at)
    for sent in messages:
        talk.client(sent)
        if sent.qos == 1:
            talk.server(codec.Puback(packet_id=sent.packet_id or 0))
        else:  # PINGRESP shows the server took the QoS 0 message before the next one
            talk.client(codec.Pingreq()).server(codec.Pingresp())
    return talk.client(codec.Pingreq()).server(codec.Pingresp()).client(codec.Disconnect()).closed(C)


def receives(talk: Talk, *deliveries: codec.Publish, at: float) -> Talk:
    for number, sent in enumerate(deliveries):
        talk.server(sent, at=at + number / 10)
        if sent.qos == 1:
            talk.client(codec.Puback(packet_id=sent.packet_id or 0))
    return talk


def leaves(talk: Talk, at: float) -> Talk:
    return talk.client(codec.Disconnect()).closed(C, at=at)


# Sessions ---------------------------------------------------------------------------------------------------------


def discarded(*, delivered: bool) -> Scenario:
    first = leaves(subscribed(client("k", expiry=60), option("t")), 0.5)
    second = client("k", at=0.8)
    if delivered:
        receives(second, copy(message()), at=1.2)
    return {"first": first, "second": second.quiet(at=LATE), "pub": publisher(message())}


def present_on_clean_start(*, present: bool) -> Scenario:
    return {"c": client("c", present=present).quiet(at=LATE)}


def resumed(*, delivered: bool) -> Scenario:
    first = leaves(subscribed(client("k", expiry=60), option("t", 1)), 0.5)
    second = client("k", at=0.8, clean=False, expiry=60, present=True)
    if delivered:
        receives(second, copy(message(qos=1)), at=1.2)
    return {"first": first, "second": second.quiet(at=LATE), "pub": publisher(message(qos=1))}


def queued(*, delivered: bool) -> Scenario:
    first = leaves(subscribed(client("k", expiry=60), option("t", 1)), 0.5)
    second = client("k", at=3.0, clean=False, expiry=60, present=True)
    if delivered:
        receives(second, copy(message(qos=1)), at=3.1)
    return {"first": first, "second": second.quiet(at=LATE), "pub": publisher(message(qos=1))}


def comeback(*, expiry: int, present: bool) -> Scenario:
    first = leaves(client("k", expiry=expiry), 0.5)
    return {"first": first, "second": client("k", at=3.0, clean=False, present=present).quiet(at=LATE)}


def takeover(*, closed: bool) -> Scenario:
    old = client("k")
    old = old.closed(S, at=1.1) if closed else old.quiet(at=LATE)
    return {"old": old, "new": client("k", at=1.0).quiet(at=LATE)}


def connack(*, answered: bool) -> Scenario:
    talk = Talk(version="5").client(codec.Connect(client_id="c", protocol_level=5))
    return {"c": (talk.server(codec.Connack()) if answered else talk).quiet(at=LATE)}


# Wills ------------------------------------------------------------------------------------------------------------

WILL = codec.Will(topic="w", message=b"gone")
#: At QoS 1: the judge lets a server drop a retained QoS 0 message at any time (as 3.1.1 does).
RETAINED_WILL = codec.Will(topic="w", message=b"gone", qos=1, retain=True)
#: The Will Delay Interval property: the server keeps it; the PUBLISH of the Will has no such property.
WILL_DELAY = 0x18
DELAYED = codec.Will(topic="w", message=b"gone", properties=make(will_delay_interval=2))


def will_scenario(
    testament: codec.Will,
    *,
    delivered: bool,
    late_gets: bool = False,
    reason: int | None = None,
    back: bool = False,
    delivered_at: float = 1.1,
) -> Scenario:
    """'dying' leaves at 1 s (DISCONNECT ``reason``, else a reset); 'watcher' is subscribed to the Will Topic, 'late'
    subscribes at 4 s; ``back``: 'dying' connects again at 1.1 s."""
    dying = client("dying", at=0.5, expiry=60, will=testament)
    if reason is not None:
        dying.client(codec.Disconnect(reason_code=reason))
    scenario = {"dying": dying.closed(C, at=1.0, abrupt=reason is None)}
    if back:
        scenario["again"] = client("dying", at=1.1, clean=False, expiry=60, present=True).quiet(at=LATE)
    watcher = subscribed(client("watcher"), option("w", 1))
    published = message("w", b"gone", qos=testament.qos, retain=testament.retain)
    # everything the Will carries but its delay goes on with it
    will_copy = copy(published, properties=tuple(p for p in testament.properties if p.identifier != WILL_DELAY))
    if delivered:
        receives(watcher, will_copy, at=delivered_at)
    scenario["watcher"] = watcher.quiet(at=LATE)
    late = subscribed(client("late", at=4.0), option("w", 1))
    if late_gets:
        receives(late, copy(will_copy, retain=True), at=4.1)
    scenario["late"] = late.quiet(at=LATE)
    return scenario


# Retained messages ------------------------------------------------------------------------------------------------


def retained(published: list[codec.Publish], got: list[codec.Publish], *subscriptions: codec.Subscription) -> Scenario:
    """``published`` at 1 s; 'late' subscribes at 3 s (once per subscription) and gets ``got`` after each."""
    late = client("late", at=3.0)
    for pid, subscription in enumerate(subscriptions or (option("t", 1),), start=1):
        subscribed(late, subscription, pid=pid)
    receives(late, *got, at=3.5)
    return {"pub": publisher(*published), "late": late.quiet(at=LATE)}


KEPT = message(payload=b"kept", qos=1, retain=True)
KEPT_0 = message(payload=b"kept", retain=True)
AS_RETAINED = copy(KEPT, retain=True)


def handling(level: int, got: int) -> Scenario:
    wanted = option("t", 1, retain_handling=level)
    return retained([KEPT], [copy(KEPT, retain=True, pid=101 + n) for n in range(got)], wanted, wanted)


def as_published(keep: bool, *, flag: bool) -> Scenario:
    watcher = subscribed(client("watcher"), option("t", retain_as_published=keep))
    receives(watcher, copy(KEPT_0, retain=flag), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(KEPT_0)}


# Properties and Message Expiry ------------------------------------------------------------------------------------

RICH = codec.Publish(topic="t", payload=b"rich", properties=v5_routing.FORWARDED)
#: The same User Properties in another order, every other property kept.
REORDERED = (
    *(p for p in v5_routing.FORWARDED if p.identifier != USER_PROPERTY),
    *sorted((p for p in v5_routing.FORWARDED if p.identifier == USER_PROPERTY), key=lambda p: str(p.value)),
)
ALTERED = make(
    payload_format_indicator=0,
    content_type="text/html",
    response_topic="mqttaudit/else",
    correlation_data=b"other",
    user_property=[("a", "2"), ("z", "1"), ("z", "0")],
)


def forwarded(properties: codec.Properties) -> Scenario:
    watcher = receives(subscribed(client("watcher"), option("t")), copy(RICH, properties=properties), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(RICH)}


def live(*, delivered: bool, sent: codec.Publish = RICH) -> Scenario:
    watcher = subscribed(client("watcher"), option("t"))
    if delivered:
        receives(watcher, copy(sent), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(sent)}


BRIEF = message(payload=b"brief", retain=True, message_expiry_interval=1)
AGING = message(payload=b"aging", message_expiry_interval=60)


# Identifiers, overlapping and shared subscriptions, UNSUBSCRIBE, '$' ---------------------------------------------


def identified(filters: list[tuple[str, int | None, int]], *deliveries: codec.Publish) -> Scenario:
    watcher = client("watcher")
    for pid, (topic_filter, identifier, qos) in enumerate(filters, start=1):
        subscribed(watcher, option(topic_filter, qos), identifier=identifier, pid=pid)
    receives(watcher, *deliveries, at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(message("a/b", qos=1))}


def with_ids(*ids: int, qos: int = 1, pid: int = 101) -> codec.Publish:
    return copy(message("a/b", qos=1), qos=qos, pid=pid, properties=make(subscription_identifier=list(ids)))


def shared(*receivers: str, granted: int = 0, delivered_qos: int = 0) -> Scenario:
    scenario: Scenario = {}
    for name in ("a", "b"):
        member = subscribed(client(name), option("$share/g/t", granted))
        if name in receivers:
            receives(member, copy(message(qos=1), qos=delivered_qos), at=1.2)
        scenario[name] = member.quiet(at=LATE)
    scenario["pub"] = publisher(message(qos=1))
    return scenario


def unsubscribed(*, delivered: bool) -> Scenario:
    watcher = subscribed(client("watcher"), option("t"))
    watcher.client(codec.Unsubscribe(packet_id=2, topic_filters=["t"])).server(
        codec.Unsuback(packet_id=2, reason_codes=[0])
    )
    if delivered:
        receives(watcher, copy(message()), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(message())}


def dollar(*, delivered: bool) -> Scenario:
    sent = message("$x/t")
    watcher = subscribed(client("watcher"), option("+/t"))
    if delivered:
        receives(watcher, copy(sent), at=1.2)
    return {"watcher": watcher.quiet(at=LATE), "pub": publisher(sent)}


# The table: per statement, a conforming and a violating scenario --------------------------------------------------

Make = Callable[[], Scenario]
PAIRS: dict[str, tuple[Make, Make]] = {
    "MQTT-3.1.2-4": (lambda: discarded(delivered=False), lambda: discarded(delivered=True)),
    "MQTT-3.2.2-2": (lambda: present_on_clean_start(present=False), lambda: present_on_clean_start(present=True)),
    "MQTT-3.1.2-5": (lambda: resumed(delivered=True), lambda: resumed(delivered=False)),
    "MQTT-3.1.2-23": (lambda: queued(delivered=True), lambda: queued(delivered=False)),
    # (Session Present 1 after the expiry is the session kept too long, MQTT-4.1.0-2: not this statement's breach)
    "MQTT-3.2.2-3": (lambda: comeback(expiry=1, present=False), lambda: comeback(expiry=100, present=False)),
    "MQTT-3.1.4-3": (lambda: takeover(closed=True), lambda: takeover(closed=False)),
    "MQTT-3.1.4-5": (lambda: connack(answered=True), lambda: connack(answered=False)),
    "MQTT-3.1.2-8": (lambda: will_scenario(WILL, delivered=True), lambda: will_scenario(WILL, delivered=False)),
    "MQTT-3.1.2-14": (
        lambda: will_scenario(WILL, delivered=True),
        lambda: will_scenario(WILL, delivered=True, late_gets=True),
    ),
    "MQTT-3.1.2-15": (
        lambda: will_scenario(RETAINED_WILL, delivered=True, late_gets=True),
        lambda: will_scenario(RETAINED_WILL, delivered=True),
    ),
    "MQTT-3.1.3-9": (
        lambda: will_scenario(DELAYED, delivered=False, back=True),
        lambda: will_scenario(DELAYED, delivered=True, back=True, delivered_at=4.5),
    ),
    "MQTT-3.14.4-3": (
        lambda: will_scenario(WILL, delivered=False, reason=0x00),
        lambda: will_scenario(WILL, delivered=True, reason=0x00),
    ),
    "MQTT-3.3.1-5": (
        lambda: retained([KEPT_0, message(payload=b"new", retain=True)], [copy(message(payload=b"new"), retain=True)]),
        lambda: retained([KEPT_0, message(payload=b"new", retain=True)], [copy(KEPT_0, retain=True)]),
    ),
    "MQTT-3.3.1-6": (
        lambda: retained([KEPT, message(payload=b"", qos=1, retain=True, pid=2)], []),
        lambda: retained([KEPT, message(payload=b"", qos=1, retain=True, pid=2)], [AS_RETAINED]),
    ),
    "MQTT-3.3.1-7": (
        lambda: retained([message(payload=b"", retain=True)], []),
        lambda: retained([message(payload=b"", retain=True)], [copy(message(payload=b""), retain=True)]),
    ),
    "MQTT-3.3.1-8": (
        lambda: retained([KEPT, message(payload=b"passing", qos=1, pid=2)], [AS_RETAINED]),
        lambda: retained(
            [KEPT, message(payload=b"passing", qos=1, pid=2)], [copy(message(payload=b"passing", qos=1), retain=True)]
        ),
    ),
    "MQTT-3.3.1-9": (lambda: retained([KEPT], [AS_RETAINED], option("t", 1)), lambda: retained([KEPT], [])),
    "MQTT-3.3.1-10": (lambda: handling(1, 1), lambda: handling(1, 2)),
    "MQTT-3.3.1-11": (
        lambda: retained([KEPT], [], option("t", 1, retain_handling=2)),
        lambda: retained([KEPT], [AS_RETAINED], option("t", 1, retain_handling=2)),
    ),
    "MQTT-3.3.1-12": (lambda: as_published(False, flag=False), lambda: as_published(False, flag=True)),
    "MQTT-3.3.1-13": (lambda: as_published(True, flag=True), lambda: as_published(True, flag=False)),
    **{
        statement: (lambda: forwarded(v5_routing.FORWARDED), lambda: forwarded(ALTERED))
        for statement in v5_routing.PROPERTIES_FORWARDED
        if statement not in ("MQTT-3.3.2-17", "MQTT-3.3.2-18")
    },
    "MQTT-3.3.2-17": (lambda: forwarded(v5_routing.FORWARDED), lambda: forwarded(ALTERED)),
    "MQTT-3.3.2-18": (lambda: forwarded(v5_routing.FORWARDED), lambda: forwarded(REORDERED)),
    "MQTT-3.3.2-5": (
        lambda: {"pub": publisher(BRIEF), "late": subscribed(client("late", at=4.0), option("t")).quiet(at=LATE)},
        lambda: {
            "pub": publisher(BRIEF),
            "late": receives(subscribed(client("late", at=4.0), option("t")), copy(BRIEF, retain=True), at=4.1).quiet(
                at=LATE
            ),
        },
    ),
    "MQTT-3.3.2-6": (
        lambda: live(delivered=True, sent=AGING),
        lambda: {
            "watcher": receives(
                subscribed(client("watcher"), option("t")),
                copy(AGING, properties=make(message_expiry_interval=30)),
                at=1.2,
            ).quiet(at=LATE),
            "pub": publisher(AGING),
        },
    ),
    "MQTT-3.3.4-2": (
        lambda: identified([("a/+", None, 0), ("a/b", None, 1)], copy(message("a/b", qos=1))),
        lambda: identified([("a/+", None, 0), ("a/b", None, 1)], copy(message("a/b", qos=1), qos=0)),
    ),
    "MQTT-3.3.4-3": (
        lambda: identified([("a/b", 7, 1)], with_ids(7)),
        lambda: identified([("a/b", 7, 1)], copy(message("a/b", qos=1))),
    ),
    "MQTT-3.3.4-4": (
        lambda: identified([("a/b", 7, 1), ("a/#", 8, 1), ("a/+", 9, 1)], with_ids(7, 8, 9)),
        # one copy with two of three identifiers answers neither one subscription nor all of them
        lambda: identified([("a/b", 7, 1), ("a/#", 8, 1), ("a/+", 9, 1)], with_ids(7, 8)),
    ),
    "MQTT-3.3.4-5": (
        lambda: identified([("a/b", 7, 1), ("a/#", 8, 1)], with_ids(7), with_ids(8, pid=102)),
        lambda: identified([("a/b", 7, 1), ("a/#", 8, 1)], with_ids(7), copy(message("a/b", qos=1), pid=102)),
    ),
    "MQTT-4.8.2-3": (lambda: shared("a"), lambda: shared("a", delivered_qos=1)),
    "MQTT-4.5.0-1": (lambda: shared("a"), shared),
    "MQTT-3.10.4-2": (lambda: unsubscribed(delivered=False), lambda: unsubscribed(delivered=True)),
    "MQTT-4.7.2-1": (lambda: dollar(delivered=False), lambda: dollar(delivered=True)),
}


def judged(scenario: Scenario) -> Judgement:
    return judge_scenario({name: talk.events for name, talk in scenario.items()}, judge_config(ROUTING_CASES[0], 1.0))


def test_the_module_has_its_cases_and_every_statement_has_a_conforming_and_a_violating_scenario() -> None:
    assert len(ROUTING_CASES) >= 50
    statements = {statement for case in ROUTING_CASES for statement in case.statements}
    assert statements == set(PAIRS), sorted(statements ^ set(PAIRS))


@pytest.mark.parametrize("statement", sorted(PAIRS))
def test_the_judge_keeps_the_statement_on_a_conforming_5_0_scenario(statement: str) -> None:
    judgement = judged(PAIRS[statement][0]())
    assert statement in judgement.passed, explain(judgement)
    assert not [f for f in judgement.findings if f.side is S], explain(judgement)


@pytest.mark.parametrize("statement", sorted(PAIRS))
def test_the_judge_finds_the_statement_broken_on_a_violating_5_0_scenario(statement: str) -> None:
    judgement = judged(PAIRS[statement][1]())
    assert any(rule == statement and f.side is S for f in judgement.findings for rule in f.rules), explain(judgement)


def test_every_case_that_leaves_a_retained_message_runs_alone_and_only_those() -> None:
    for case in ROUTING_CASES:
        assert case.runs_alone is (case.id in ALONE), case.id
    assert set(v5_routing.ALONE) <= {case.id for case in ROUTING_CASES}


def test_the_disconnect_codes_that_leave_the_will_are_what_table_3_10_says_they_are() -> None:
    # only 0x00 discards the Will [MQTT-3.14.4-3]; the others: codes a client may send, the server's own, none at all
    allowed = reason_codes.ALLOWED[codec.PacketType.DISCONNECT]
    codes = [code for code, _words in v5_routing.OTHER_DISCONNECT_CODES]
    assert 0x00 not in codes and v5_routing.WITH_WILL not in codes
    for code in codes:
        known = reason_codes.BY_VALUE.get(code)
        if code in v5_routing.UNDEFINED:
            assert code not in allowed, code
        elif code in v5_routing.SERVER_ONLY:
            assert known is not None and known.disconnect_senders == {S}, code
        else:
            assert code in allowed and known is not None and C in known.disconnect_senders, code
    assert set(v5_routing.SERVER_ONLY) | set(v5_routing.UNDEFINED) < set(codes)


def test_the_cases_that_wait_on_an_interval_are_timing_cases() -> None:
    waiting = ("expired", "delay", "takeover", "extends", "will/abrupt", "will/retained", "remaining-retained")
    for case in ROUTING_CASES:
        if any(word in case.id for word in waiting) and "0x00-discards-qos0-delayed" not in case.id:
            assert case.timing, case.id


# Live ------------------------------------------------------------------------------------------------------------


def run_all(broker: RunningBroker) -> dict[str, CaseResult]:
    # all at once: both brokers send a retained message only to the subscriptions it matches, so the cases that
    # leave one need not run alone here (the runner runs them alone for brokers that do not)
    return run_together(broker, ROUTING_CASES, "7e7e7e7e")


def verdicts(case_ids: Callable[[Case], bool], verdict: str) -> dict[str, str]:
    return {case.id: verdict for case in ROUTING_CASES if case_ids(case)}


def test_every_case_passes_against_mosquitto(mosquitto: RunningBroker) -> None:
    """mosquitto 2.0.11 keeps every statement the judge decides here but one. (It closes a taken-over connection
    without DISCONNECT 0x8E; the judge decides only the close of MQTT-3.1.4-3.)"""
    results = run_all(mosquitto)
    # It discards the Will on a DISCONNECT of any Reason Code but 0x04 (mosquitto#3743), where only 0x00 deletes it
    # [MQTT-3.1.2-8].
    deleted = {f"v5/will/disconnect-0x{code:02x}-sends-qos1" for code, _words in v5_routing.OTHER_DISCONNECT_CODES}
    expected = verdicts(lambda case: case.id not in deleted, PASS) | verdicts(lambda case: case.id in deleted, FAIL)
    assert {case_id: result.verdict for case_id, result in results.items()} == expected
    assert all(set(results[case_id].statements.values()) == {FAIL} for case_id in deleted)


#: What mqttools 0.50.0 breaks (it declares Maximum QoS 0, no wildcards, no shared subscriptions): it keeps no
#: Session Expiry (Session Present 1 for an expired or ended session), neither closes a taken-over connection nor
#: publishes a Will on DISCONNECT 0x04, ignores the Will Delay, Retain Handling, Retain As Published, Message
#: Expiry on retained messages and Subscription Identifiers; it drops a Will's properties, never answers a CONNECT
#: whose Will carries Correlation Data or a User Property, and answers a PUBLISH with a User Property with
#: DISCONNECT 0x81 (the other properties of a PUBLISH it forwards).
MQTTOOLS_FAILS = {
    "v5/session/expired",
    "v5/session/disconnect-ends-session",
    "v5/session/takeover-clean",
    "v5/session/takeover-persistent",
    "v5/will/properties-forwarded",
    "v5/will/delay-then-published",
    "v5/will/delay-reconnect-suppresses",
    "v5/will/disconnect-0x04-sends-qos0",
    "v5/will/disconnect-0x04-sends-qos0-delayed",
    "v5/retain/handling-1-new-only",
    "v5/retain/handling-2-never",
    "v5/retain/as-published-1-qos0",
    "v5/properties/forwarded-qos0",
    "v5/message-expiry/remaining-retained",
    "v5/message-expiry/expired-retained",
    "v5/subscription-identifier/sent-qos0",
    "v5/subscription-identifier/replaced",
    *(f"v5/will/only-{name}" for name in ("payload-format", "content-type", "response-topic")),  # dropped
    *(f"v5/will/only-{name}" for name in ("correlation-data", "user-properties")),  # no CONNACK
    "v5/properties/only-user-properties",  # DISCONNECT 0x81
}
MQTTOOLS_PASSES = {
    "v5/session/clean-start-discards-subscription",
    "v5/session/resumed-subscription-qos0",
    "v5/session/disconnect-extends-session",
    "v5/will/abrupt-close-qos0",
    "v5/will/session-ends-before-delay",
    "v5/will/disconnect-0x00-discards-qos0",
    "v5/will/disconnect-0x00-discards-qos0-delayed",
    "v5/retain/replaced-qos0",
    "v5/retain/empty-not-stored-qos0",
    "v5/retain/retain-0-leaves-qos0",
    "v5/retain/as-published-0-qos0",
    "v5/message-expiry/remaining-live",
    "v5/unsubscribed/stops-delivery-qos0",
    *(
        f"v5/properties/only-{name}"
        for name in ("payload-format", "content-type", "response-topic", "correlation-data")
    ),
}


def test_every_case_gets_a_verdict_from_mqttools(mqttools: RunningBroker) -> None:
    results = run_all(mqttools)
    expected = verdicts(lambda case: case.id in MQTTOOLS_FAILS, FAIL)
    expected |= verdicts(lambda case: case.id in MQTTOOLS_PASSES, PASS)
    expected |= verdicts(lambda case: case.id not in expected, NOT_APPLICABLE)
    assert {case_id: result.verdict for case_id, result in results.items()} == expected
    assert "DISCONNECT" not in results["v5/properties/forwarded-qos0"].reason  # the missing delivery is the finding
    assert "Session Present 1" in results["v5/session/expired"].reason
