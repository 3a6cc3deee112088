"""The broker model on MQTT 5.0 connections: Topic Aliases resolved across connections, Subscription Options (No
Local [MQTT-3.8.3-3], Retain As Published [MQTT-3.3.1-12/-13], Retain Handling [MQTT-3.3.1-9/-10/-11]),
Subscription Identifiers of a resumed session [MQTT-3.3.4-3/-4], shared subscriptions (section 4.8.2,
[MQTT-4.8.2-3]), Message Expiry [MQTT-3.3.2-5/-6], Session Expiry and Session Present [MQTT-3.1.2-23,
3.2.2-3], the Will Delay Interval [MQTT-3.1.3-9, 3.1.2-8, 3.14.4-3] and the properties a forwarded message keeps
[MQTT-3.3.2-4, -15, -16, -17, -18, -20]. Each rule: a scenario that breaks it, one that keeps it, one that cannot
decide it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig, Judgement, Sent, judge_scenario, rules
from mqttaudit.judge import model_rules_5 as rules_5
from mqttaudit.spec import identity

from .cases import explain
from .talk import STEP, C, S, Talk, publish5

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
LATE = 20.0  # every watcher below stays until here: past every deadline
Scenario = dict[str, Talk]


def named(key: str) -> str:
    """The 5.0 statement id of a rule key."""
    return str(identity.statement_id(key, identity.V5))


def client(
    client_id: str,
    *,
    at: float = 0.0,
    clean_start: bool = True,
    expiry: int | None = None,
    will: codec.Will | None = None,
    session_present: bool = False,
) -> Talk:
    """An accepted MQTT 5.0 connection (each side allows the other 5 Topic Aliases)."""
    properties = make(topic_alias_maximum=5, **({} if expiry is None else {"session_expiry_interval": expiry}))
    connect = codec.Connect(
        client_id=client_id, protocol_level=5, clean_session=clean_start, will=will, properties=properties
    )
    talk = Talk(version="5")
    talk.now = at - STEP
    connack = codec.Connack(session_present=session_present, properties=make(topic_alias_maximum=5))
    return talk.client(connect).server(connack)


def option(topic_filter: str, qos: int = 1, **options: bool | int) -> codec.Subscription:
    return codec.Subscription(topic_filter=topic_filter, qos=qos, **options)  # type: ignore[arg-type]


def subscribed(talk: Talk, *subscriptions: codec.Subscription, identifier: int | None = None, pid: int = 1) -> Talk:
    properties = make(subscription_identifier=identifier) if identifier is not None else ()
    talk.client(codec.Subscribe(packet_id=pid, subscriptions=subscriptions, properties=properties))
    return talk.server(codec.Suback(packet_id=pid, return_codes=[s.qos for s in subscriptions]))


def message(
    topic: str = "t", payload: bytes = b"m", *, qos: int = 1, retain: bool = False, pid: int = 1, **properties: object
) -> codec.Publish:
    return publish5(topic, payload, qos=qos, retain=retain, pid=pid, **properties)


def publishes(talk: Talk, *messages: codec.Publish) -> Talk:
    """The client publishes each message (the server acknowledges it)."""
    for sent in messages:
        talk.client(sent)
        if sent.qos == 1:
            talk.server(codec.Puback(packet_id=sent.packet_id or 0))
    return talk


def publisher(*messages: codec.Publish, client_id: str = "pub", at: float = 1.0) -> Talk:
    """Connects at ``at``, publishes, and leaves with DISCONNECT."""
    talk = publishes(client(client_id, at=at), *messages)
    return talk.client(codec.Pingreq()).server(codec.Pingresp()).client(codec.Disconnect()).closed(C)


def receives(talk: Talk, *deliveries: codec.Publish, at: float = 2.0) -> Talk:
    """The server sends each PUBLISH as given; the client acknowledges QoS 1."""
    for number, sent in enumerate(deliveries):
        talk.server(sent, at=at + number / 10)
        if sent.qos == 1:
            talk.client(codec.Puback(packet_id=sent.packet_id or 0))
    return talk


def copy(sent: codec.Publish, *, pid: int = 101, **changes: object) -> codec.Publish:
    """The copy a server writes of ``sent``: its own Packet Identifier, RETAIN 0, the same properties unless
    ``changes`` says otherwise."""
    fields: dict[str, object] = {
        "topic": sent.topic,
        "payload": sent.payload,
        "qos": sent.qos,
        "retain": False,
        "packet_id": pid if sent.qos else None,
        "properties": sent.properties,
    }
    fields.update(changes)
    return codec.Publish(**fields)  # type: ignore[arg-type]


def judged(scenario: Scenario) -> Judgement:
    return judge_scenario({name: talk.events for name, talk in scenario.items()}, V5)


def fails(rule: str, scenario: Scenario) -> None:
    judgement = judged(scenario)
    assert any(rule in f.rules and f.side is S for f in judgement.findings), explain(judgement)


def holds(rule: str, scenario: Scenario) -> None:
    judgement = judged(scenario)
    assert rule in judgement.passed, explain(judgement)
    assert not judgement.findings, explain(judgement)


def undecided(rule: str, scenario: Scenario) -> None:
    judgement = judged(scenario)
    assert rule in judgement.not_assessable, explain(judgement)
    assert rule not in judgement.assessed, explain(judgement)


# No Local across a resumed session ------------------------------------------------------------------------------


def no_local(*, back: bool, early: bool = False) -> Scenario:
    """'me' subscribes to 't' with No Local, leaves its session for 100 s, comes back and publishes to 't'."""
    first = subscribed(client("me", expiry=100), option("t", no_local=True))
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = publishes(client("me", at=1.0, clean_start=False, expiry=100, session_present=True), message())
    if back:
        receives(second, copy(message()))
    return {"first": first, "second": second.closed(C, at=1.2) if early else second.quiet(at=LATE)}


# Retain As Published --------------------------------------------------------------------------------------------


def as_published(
    *subscriptions: codec.Subscription, retain: bool, got_retain: bool, meanwhile: bool = False
) -> Scenario:
    """'sub' subscribes (``meanwhile``: while the message is published, so it may come as a retained message or
    a live one) and receives one copy with RETAIN ``got_retain``."""
    sub = client("sub")
    if meanwhile:
        sub.client(codec.Subscribe(packet_id=1, subscriptions=subscriptions), at=1.0)
        sub.server(codec.Suback(packet_id=1, return_codes=[s.qos for s in subscriptions]), at=1.1)
    else:
        subscribed(sub, *subscriptions)
    receives(sub, copy(message(retain=True), retain=got_retain))
    return {"sub": sub.quiet(at=LATE), "pub": publisher(message(retain=retain))}


# Retain Handling ------------------------------------------------------------------------------------------------

KEPT = message("r", b"kept", retain=True)


def retain_handling(
    handling: int, *, got: int, again: bool = False, early: bool = False, resumed: bool = False
) -> Scenario:
    """A retained message is published at 1 s; 'sub' subscribes to 'r' at 3 s (and again at 4 s when ``again``)
    with ``handling`` and receives the retained message ``got`` times (3.5 s, 4.5 s)."""
    sub = client("sub", at=3.0, clean_start=not resumed, expiry=100, session_present=resumed)
    subscribed(sub, option("r", retain_handling=handling))
    if got:
        receives(sub, copy(KEPT, retain=True), at=3.5)
    if again:
        subscribed(sub, option("r", retain_handling=handling), pid=2)
        if got > 1:
            receives(sub, copy(KEPT, retain=True, pid=102), at=4.5)
    return {"pub": publisher(KEPT), "sub": sub.closed(C, at=3.6) if early else sub.quiet(at=LATE)}


# Subscription Identifiers of a resumed session ------------------------------------------------------------------


def identifiers(
    *carried: int,
    filters: tuple[tuple[str, int], ...] = (("t", 7),),
    unsubscribing: bool = False,
    payload: bytes = b"later",
) -> Scenario:
    """'keeper' subscribes (each filter with its identifier), leaves, resumes at 2 s and gets a message to 't'
    (published at 3 s) carrying ``carried``; ``unsubscribing``: it unsubscribes from 't' meanwhile."""
    first = client("keeper", expiry=100)
    for pid, (topic_filter, identifier) in enumerate(filters, start=1):
        subscribed(first, option(topic_filter), identifier=identifier, pid=pid)
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = client("keeper", at=2.0, clean_start=False, expiry=100, session_present=True)
    if unsubscribing:
        second.client(codec.Unsubscribe(packet_id=9, topic_filters=["t"]), at=2.9)
    sent = message("t", payload)
    ids = make(subscription_identifier=list(carried)) if carried else ()
    receives(second, copy(sent, properties=ids), at=3.2)
    if unsubscribing:
        second.server(codec.Unsuback(packet_id=9, reason_codes=[0]), at=3.5)
    return {"first": first, "second": second.quiet(at=LATE), "pub": publisher(sent, at=3.0)}


# Shared subscriptions -------------------------------------------------------------------------------------------


def shared(*receivers: str, early: str = "", granted: int = 1, delivered_qos: int = 1) -> Scenario:
    """'a' and 'b' share '$share/g/t'; one message to 't' at 1 s reaches ``receivers``."""
    scenario: Scenario = {}
    for name in ("a", "b"):
        member = subscribed(client(name), option("$share/g/t", qos=granted))
        if name in receivers:
            receives(member, copy(message(), qos=delivered_qos, packet_id=101 if delivered_qos else None))
        scenario[name] = member.closed(C, at=1.1) if name == early else member.quiet(at=LATE)
    scenario["pub"] = publisher(message())
    return scenario


# Message Expiry -------------------------------------------------------------------------------------------------

SHORT_LIVED = message("t", b"brief", message_expiry_interval=2)


def expiring(*, back_at: float, got: bool, payload: bytes = SHORT_LIVED.payload) -> Scenario:
    """A persistent subscriber leaves at 0.5 s; a message living 2 s is published at 1 s; it resumes at
    ``back_at``."""
    sent = message("t", payload, message_expiry_interval=2)
    first = subscribed(client("keeper", expiry=100), option("t"))
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = client("keeper", at=back_at, clean_start=False, expiry=100, session_present=True)
    if got:
        receives(second, copy(sent), at=back_at + 0.1)
    return {"first": first, "second": second.quiet(at=LATE), "pub": publisher(sent)}


def remaining(carried: int | None, *twins: codec.Publish, payload: bytes = b"long") -> Scenario:
    sent = message("t", payload, message_expiry_interval=60)
    properties = make(message_expiry_interval=carried) if carried is not None else ()
    sub = receives(subscribed(client("sub"), option("t")), copy(sent, properties=properties), at=3.0)
    return {"sub": sub.quiet(at=LATE), "pub": publisher(sent, *twins)}


# Session Expiry and Session Present -----------------------------------------------------------------------------


def comeback(expiry: int, *, back_at: float = 2.0, present: bool, disconnect_expiry: int | None = None) -> Scenario:
    first = client("keeper", expiry=expiry)
    properties = make(session_expiry_interval=disconnect_expiry) if disconnect_expiry is not None else None
    first.client(codec.Disconnect(reason_code=0, properties=properties)).closed(C, at=0.5)
    second = client("keeper", at=back_at, clean_start=False, expiry=100, session_present=present)
    return {"first": first, "second": second.quiet(at=LATE)}


def kept_offline(*, got: bool, early: bool = False) -> Scenario:
    first = subscribed(client("keeper", expiry=100), option("t"))
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = client("keeper", at=2.0, clean_start=False, expiry=100, session_present=True)
    if got:
        receives(second, copy(message()), at=2.1)
    return {
        "first": first,
        "second": second.closed(C, at=2.05) if early else second.quiet(at=LATE),
        "pub": publisher(message()),
    }


# Wills ----------------------------------------------------------------------------------------------------------

DELAYED = codec.Will(topic="will/w", message=b"gone", qos=1, properties=make(will_delay_interval=3))
WILL_COPY = codec.Publish(topic="will/w", payload=b"gone", qos=1, packet_id=101)


def will(
    *,
    delivered_at: float | None,
    resume_at: float | None = None,
    reason: int | None = None,
    testament: codec.Will = DELAYED,
    early: bool = False,
) -> Scenario:
    """'mortal' (Session Expiry 100 s, Will on 'will/w') leaves at 1 s (with DISCONNECT ``reason``, else
    abruptly); it may come back at ``resume_at``; 'sub' watches 'will/#'."""
    mortal = client("mortal", at=0.5, expiry=100, will=testament)
    if reason is not None:
        mortal.client(codec.Disconnect(reason_code=reason))
    scenario: Scenario = {"mortal": mortal.closed(C, at=1.0, abrupt=reason is None)}
    if resume_at is not None:
        scenario["again"] = client("mortal", at=resume_at, clean_start=False, expiry=100, session_present=True).quiet(
            at=LATE
        )
    sub = subscribed(client("sub"), option("will/#"))
    if delivered_at is not None:
        receives(sub, WILL_COPY, at=delivered_at)
    scenario["sub"] = sub.quiet(at=2.5 if early else LATE)  # early: observation stops before the Will is due
    return scenario


# Properties forwarded -------------------------------------------------------------------------------------------

RICH = message(
    "t",
    b"rich",
    payload_format_indicator=1,
    content_type="text/plain",
    response_topic="reply/me",
    correlation_data=b"c-1",
    user_property=[("a", "1"), ("b", "2")],
)


def forwarded(properties: codec.Properties, *twins: codec.Publish, payload: bytes = RICH.payload) -> Scenario:
    sent = copy(RICH, pid=1, retain=False, payload=payload)
    sub = receives(subscribed(client("sub"), option("t")), copy(sent, properties=properties), at=3.0)
    return {"sub": sub.quiet(at=LATE), "pub": publisher(sent, *twins)}


ALTERED = make(
    payload_format_indicator=0,
    content_type="text/html",
    response_topic="reply/else",
    correlation_data=b"c-2",
    user_property=[("b", "2"), ("a", "1")],
)
TWIN = message("t", b"rich", pid=2, content_type="application/json")

# Topic Aliases --------------------------------------------------------------------------------------------------


def aliased(*payloads: bytes, server_alias: bool = False) -> Scenario:
    """'pub' maps Topic Alias 1 to 't' with b"one", then publishes b"two" by the alias alone."""
    one = message("t", b"one", topic_alias=1)
    two = codec.Publish(topic="", payload=b"two", qos=1, packet_id=2, properties=make(topic_alias=1))
    sub = subscribed(client("sub"), option("t"))
    deliveries = []
    for number, payload in enumerate(payloads):
        topic = "" if server_alias and number else "t"
        aliases = make(topic_alias=2) if server_alias else ()
        deliveries.append(
            codec.Publish(topic=topic, payload=payload, qos=1, packet_id=101 + number, properties=aliases)
        )
    receives(sub, *deliveries, at=3.0)
    return {"sub": sub.quiet(at=LATE), "pub": publisher(one, two)}


# The table ------------------------------------------------------------------------------------------------------

RAP_0 = named(rules_5.RETAIN_CLEARED)
RAP_1 = named(rules_5.RETAIN_AS_PUBLISHED)
GROUP = named(rules.MESSAGE_ROUTED)
Make = Callable[[], Scenario]
Case = tuple[str, str, Make, Make, Make | None]
CASES: list[Case] = [
    # (rule, name, breaks, keeps, cannot decide)
    (
        named(rules_5.NO_LOCAL),
        "resumed",
        lambda: no_local(back=True),
        lambda: no_local(back=False),
        lambda: no_local(back=False, early=True),
    ),
    (
        RAP_0,
        "",
        lambda: as_published(option("t"), retain=True, got_retain=True),
        lambda: as_published(option("t"), retain=True, got_retain=False),
        # subscribed while it was published: it may come as the retained message (RETAIN 1) or a live one
        lambda: as_published(option("t"), retain=True, got_retain=True, meanwhile=True),
    ),
    (
        RAP_1,
        "",
        lambda: as_published(option("t", retain_as_published=True), retain=True, got_retain=False),
        lambda: as_published(option("t", retain_as_published=True), retain=True, got_retain=True),
        lambda: as_published(option("t", retain_as_published=True), retain=True, got_retain=False, meanwhile=True),
    ),
    (
        named(rules_5.RETAINED_ON_EVERY_SUBSCRIBE),
        "again",
        lambda: retain_handling(0, got=1, again=True),
        lambda: retain_handling(0, got=2, again=True),
        lambda: retain_handling(0, got=0, early=True),
    ),
    (
        named(rules_5.RETAINED_IF_NEW),
        "",
        lambda: retain_handling(1, got=2, again=True),
        lambda: retain_handling(1, got=1, again=True),
        lambda: retain_handling(1, got=0, resumed=True),
    ),
    (
        named(rules_5.NO_RETAINED),
        "",
        lambda: retain_handling(2, got=1),
        lambda: retain_handling(2, got=0),
        lambda: retain_handling(2, got=0, early=True),
    ),
    (
        named(rules_5.IDENTIFIERS_SENT),
        "resumed",
        identifiers,
        lambda: identifiers(7),
        lambda: identifiers(7, unsubscribing=True),
    ),
    (
        named(rules_5.ONE_COPY_ALL_IDENTIFIERS),
        "resumed",
        lambda: identifiers(7, 8, filters=(("t", 7), ("#", 8), ("+", 9))),
        lambda: identifiers(7, 8, filters=(("t", 7), ("#", 8))),
        lambda: identifiers(7, filters=(("t", 7), ("#", 8))),
    ),
    (
        GROUP,
        "shared",
        shared,
        lambda: shared("a"),
        lambda: shared(early="b"),
    ),
    (
        named(rules_5.SHARED_GRANTED_QOS),
        "",
        lambda: shared("a", granted=0, delivered_qos=1),
        lambda: shared("a", granted=0, delivered_qos=0),
        None,  # decided on each copy that arrives; nothing to leave open when none does
    ),
    (
        named(rules_5.EXPIRED_NOT_DELIVERED),
        "",
        lambda: expiring(back_at=5.0, got=True),
        lambda: expiring(back_at=5.0, got=False),
        lambda: expiring(back_at=3.5, got=True),
    ),
    (
        named(rules_5.EXPIRY_REMAINING),
        "",
        lambda: remaining(30),
        lambda: remaining(59),
        lambda: remaining(59, message("t", b"long", pid=2, message_expiry_interval=10)),
    ),
    (
        named(rules.NO_SESSION_PRESENT),
        "expiry",
        lambda: comeback(0, present=True),
        lambda: comeback(100, present=True),
        lambda: comeback(2, back_at=2.5, present=False),
    ),
    (
        named(rules.OFFLINE_MESSAGES_KEPT),
        "",
        lambda: kept_offline(got=False),
        lambda: kept_offline(got=True),
        lambda: kept_offline(got=False, early=True),
    ),
    (
        named(rules_5.WILL_DELAY),
        "",
        lambda: will(delivered_at=4.5, resume_at=2.0),
        lambda: will(delivered_at=None, resume_at=2.0),
        lambda: will(delivered_at=None, resume_at=2.0, early=True),
    ),
    (
        named(rules.WILL_PUBLISHED),
        "delay",
        lambda: will(delivered_at=None),
        lambda: will(delivered_at=4.5),
        lambda: will(delivered_at=None, early=True),
    ),
    (
        named(rules.WILL_DISCARDED_ON_DISCONNECT),
        "0x00",
        lambda: will(delivered_at=4.5, reason=0),
        lambda: will(delivered_at=None, reason=0),
        lambda: will(delivered_at=None, reason=0, early=True),
    ),
    (
        named(rules_5.CONTENT_TYPE_FORWARDED),
        "",
        lambda: forwarded(ALTERED),
        lambda: forwarded(RICH.properties),
        lambda: forwarded(RICH.properties, TWIN),
    ),
]


def _id(case: Case) -> str:
    return "-".join(part for part in case[:2] if part)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_a_scenario_that_breaks_the_rule_is_a_server_finding(case: Case) -> None:
    fails(case[0], case[2]())


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_a_scenario_that_keeps_the_rule_passes_without_findings(case: Case) -> None:
    holds(case[0], case[3]())


@pytest.mark.parametrize("case", [c for c in CASES if c[4] is not None], ids=_id)
def test_a_scenario_that_cannot_show_the_rule_leaves_it_not_assessable(case: Case) -> None:
    assert case[4] is not None
    undecided(case[0], case[4]())


# Beyond the table -----------------------------------------------------------------------------------------------


def test_a_message_named_only_by_a_topic_alias_is_routed_under_the_topic_the_alias_stands_for() -> None:
    judgement = judged(aliased(b"one", b"two"))
    assert not judgement.findings, explain(judgement)
    assert GROUP in judgement.passed, explain(judgement)


def test_a_missing_copy_of_an_aliased_message_names_the_topic_the_alias_stands_for() -> None:
    judgement = judged(aliased(b"one"))
    missing = [f for f in judgement.findings if GROUP in f.rules]
    assert missing and "'t'" in missing[0].detail and "event 4 of 'pub'" in missing[0].detail, explain(judgement)


def test_a_delivery_named_only_by_the_servers_topic_alias_meets_its_message() -> None:
    judgement = judged(aliased(b"one", b"two", server_alias=True))
    assert not judgement.findings, explain(judgement)
    assert GROUP in judgement.passed, explain(judgement)


def test_the_transcript_records_the_topic_an_alias_stands_for() -> None:
    from mqttaudit.judge import ConversationJudge

    talk = aliased(b"one", b"two", server_alias=True)
    judges = {}
    for name in ("pub", "sub"):
        judges[name] = ConversationJudge(V5, conversation=name)
        for event in talk[name].events if name == "pub" else talk["sub"].events:
            judges[name].feed(event)
    assert [p.message.topic for p in judges["pub"].transcript.published] == ["t", "t"]
    assert [d.message.topic for d in judges["sub"].transcript.delivered] == ["t", "t"]


FORWARDING = [
    rules_5.PAYLOAD_FORMAT_FORWARDED,
    rules_5.CONTENT_TYPE_FORWARDED,
    rules_5.RESPONSE_TOPIC_FORWARDED,
    rules_5.CORRELATION_DATA_FORWARDED,
    rules_5.USER_PROPERTIES_FORWARDED,
]


def test_every_property_the_publisher_set_arrives_unaltered_and_user_properties_in_order() -> None:
    judgement = judged(forwarded(RICH.properties))
    assert not judgement.findings, explain(judgement)
    assert {*FORWARDING, rules_5.USER_PROPERTIES_IN_ORDER} <= judgement.passed, explain(judgement)


def test_each_altered_property_is_a_finding_of_its_own_statement() -> None:
    judgement = judged(forwarded(ALTERED))
    broken = {rule for f in judgement.findings for rule in f.rules}
    assert {*FORWARDING[:4], rules_5.USER_PROPERTIES_IN_ORDER} <= broken, explain(judgement)
    assert rules_5.USER_PROPERTIES_FORWARDED in judgement.passed, explain(judgement)


def test_a_user_property_left_out_breaks_mqtt_3_3_2_17() -> None:
    lacking = make(
        payload_format_indicator=1,
        content_type="text/plain",
        response_topic="reply/me",
        correlation_data=b"c-1",
        user_property=[("a", "1")],
    )
    fails(rules_5.USER_PROPERTIES_FORWARDED, forwarded(lacking))


def test_disconnect_0x04_still_sends_the_will() -> None:
    prompt = codec.Will(topic="will/w", message=b"gone", qos=1)
    holds(named(rules.WILL_PUBLISHED), will(delivered_at=1.5, reason=0x04, testament=prompt))
    fails(named(rules.WILL_PUBLISHED), will(delivered_at=None, reason=0x04, testament=prompt))


def test_a_session_ending_before_the_will_delay_sends_the_will_then() -> None:
    # Session Expiry 1 s, Will Delay 3 s: the session ends at 2 s and the Will goes then.
    testament = codec.Will(topic="will/w", message=b"gone", qos=1, properties=make(will_delay_interval=30))
    mortal = client("mortal", at=0.5, expiry=1, will=testament).closed(C, at=1.0, abrupt=True)
    sub = receives(subscribed(client("sub"), option("will/#")), WILL_COPY, at=2.2)
    holds(named(rules.WILL_PUBLISHED), {"mortal": mortal, "sub": sub.quiet(at=LATE)})


def test_disconnect_can_end_the_session_with_the_connection() -> None:
    # CONNECT asks for 100 s, DISCONNECT for 0: the session ends, so Session Present 1 breaks MQTT-3.2.2-3.
    fails(named(rules.NO_SESSION_PRESENT), comeback(100, disconnect_expiry=0, present=True))
    holds(named(rules.NO_SESSION_PRESENT), comeback(100, disconnect_expiry=0, present=False))


def test_a_session_with_expiry_0_keeps_nothing_for_the_next_connection() -> None:
    first = subscribed(client("keeper", expiry=0), option("t"))
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = client("keeper", at=2.0, clean_start=False, expiry=100).quiet(at=LATE)
    judgement = judged({"first": first, "second": second, "pub": publisher(message())})
    assert not judgement.findings, explain(judgement)
    assert named(rules.OFFLINE_MESSAGES_KEPT) not in judgement.assessed, explain(judgement)


def test_no_local_on_the_publishing_connection_is_reported_once() -> None:
    me = subscribed(client("me"), option("t", no_local=True))
    publishes(me, message())
    receives(me, copy(message()), at=1.0)
    judgement = judged({"me": me.quiet(at=LATE)})
    local = [f for f in judgement.findings if named(rules_5.NO_LOCAL) in f.rules]
    assert len(local) == 1, explain(judgement)


def test_a_5_0_rule_broken_towards_a_3_1_1_subscriber_is_named_by_its_5_0_id() -> None:
    from .talk import connected, suback, subscribe

    first = connected("old", clean_session=False).client(subscribe(1, ("t", 1))).server(suback(1, 1))
    first.client(codec.Disconnect()).closed(C, at=0.5)
    second = connected("old", clean_session=False, session_present=True, at=5.0)
    second.server(codec.Publish(topic="t", payload=b"brief", qos=1, packet_id=7), at=5.1)
    second.client(codec.Puback(packet_id=7))
    judgement = judged({"first": first, "second": second.quiet(at=LATE), "pub": publisher(SHORT_LIVED)})
    expired = [f for f in judgement.findings if rules_5.EXPIRED_NOT_DELIVERED in f.rules]
    assert expired and expired[0].conversation == "second", explain(judgement)


# A conforming broker, simulated --------------------------------------------------------------------------------

FILTERS = ("a/b", "a/+", "#", "a/#", "b")
TOPICS = ("a/b", "a/c", "b")


@st.composite
def broker_runs(draw: st.DrawFn) -> tuple[list[tuple[str, bool, bool, int | None]], list[tuple[int, str, bool]]]:
    """Subscriptions of three clients (filter, No Local, Retain As Published, identifier) and messages (which
    client publishes, topic, RETAIN)."""
    subscriptions = draw(
        st.lists(
            st.tuples(st.sampled_from(FILTERS), st.booleans(), st.booleans(), st.one_of(st.none(), st.integers(1, 50))),
            min_size=1,
            max_size=3,
            unique_by=lambda s: s[0],
        )
    )
    messages = draw(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(TOPICS), st.booleans()), max_size=5))
    return subscriptions, messages


def simulate(
    subscriptions: list[tuple[str, bool, bool, int | None]], messages: list[tuple[int, str, bool]]
) -> Scenario:
    """Client 0 subscribes; clients 0, 1 and 2 publish (QoS 0, distinct payloads); the server sends client 0 one
    copy of each matching message with the identifiers of every matching subscription, leaves out its own
    messages where every matching subscription has No Local, and sets RETAIN as Retain As Published says."""
    from mqttaudit.topics import matches

    talks = [client(f"c{number}", at=number / 10) for number in range(3)]
    for pid, (topic_filter, no_local, keep, identifier) in enumerate(subscriptions, start=1):
        subscribed(
            talks[0],
            option(topic_filter, 0, no_local=no_local, retain_as_published=keep),
            identifier=identifier,
            pid=pid,
        )
    now = 1.0
    for number, (sender, topic, retain) in enumerate(messages):
        sent = message(topic, f"m{number}".encode(), qos=0, retain=retain)
        talks[sender].client(sent, at=now)
        talks[sender].client(codec.Pingreq(), at=now + 0.01).server(codec.Pingresp(), at=now + 0.02)
        matching = [s for s in subscriptions if matches(s[0], topic)]
        if sender == 0:
            matching = [s for s in matching if not s[1]]
        if matching:
            ids = [s[3] for s in matching if s[3] is not None]
            flags = {s[2] for s in matching}
            delivered = codec.Publish(
                topic=topic,
                payload=sent.payload,
                retain=retain and flags == {True},
                properties=make(subscription_identifier=ids) if ids else (),
            )
            talks[0].server(delivered, at=now + 0.05)
        now += 0.5
    return {f"c{number}": talk.quiet(at=now + LATE) for number, talk in enumerate(talks)}


@settings(max_examples=60, deadline=None)
@given(broker_runs())
def test_a_conforming_broker_over_random_subscriptions_and_messages_has_no_finding(
    run: tuple[list[tuple[str, bool, bool, int | None]], list[tuple[int, str, bool]]],
) -> None:
    scenario = simulate(*run)
    judgement = judged(scenario)
    assert not judgement.findings, explain(judgement)
    delivered = any(
        isinstance(e, Sent) and e.sender is S and isinstance(e.frame.packet, codec.Publish)
        for e in scenario["c0"].events
    )
    assert not delivered or GROUP in judgement.passed, explain(judgement)


def test_a_will_sent_before_its_delay_passed_breaks_mqtt_3_1_2_8() -> None:
    judgement = judged(will(delivered_at=1.5))
    early = [f for f in judgement.findings if named(rules.WILL_PUBLISHED) in f.rules and f.event >= 0]
    assert early and "delivers the Will" in early[0].detail, explain(judgement)


def test_a_message_that_may_expire_before_its_deadline_is_not_owed_and_its_absence_is_not_assessable() -> None:
    sent = message("t", b"fleeting", message_expiry_interval=1)
    sub = subscribed(client("sub"), option("t")).quiet(at=LATE)
    judgement = judged({"sub": sub, "pub": publisher(sent)})
    assert not judgement.findings, explain(judgement)
    assert GROUP in judgement.not_assessable, explain(judgement)


def test_a_copy_that_may_be_live_or_a_barred_retained_message_decides_neither_rule() -> None:
    # a retained QoS 0 message, taken at some time the events do not show, then a Retain Handling 2 subscription:
    # a copy with RETAIN 1 is the retained message Retain Handling 2 bars, or the live one sent with RETAIN 1
    config = JudgeConfig(close_grace=2.0, answer_timeout=2.0, supported_protocol_levels=frozenset({4, 5}))

    def opened(client_id: str, at: float) -> Talk:
        connect = codec.Connect(client_id=client_id, protocol_level=5, keep_alive=0)
        return Talk(version="5").client(connect, at=at).server(codec.Connack())

    pub = opened("pub", 0.5).client(codec.Publish(topic="t", payload=b"r", qos=0, retain=True)).quiet(at=10.0)
    option = codec.Subscription(topic_filter="t", qos=0, retain_handling=2)
    sub = opened("sub", 2.0).client(codec.Subscribe(packet_id=1, subscriptions=(option,)))
    sub = sub.server(codec.Suback(packet_id=1, return_codes=(0,)), codec.Publish(topic="t", payload=b"r", retain=True))
    judgement = judge_scenario({"pub": pub.events, "sub": sub.quiet(at=10.0).events}, config)
    assert not {"MQTT-3.3.1-11", "MQTT-3.3.1-12"} & (judgement.failed | judgement.passed), judgement.findings
    assert {"MQTT-3.3.1-11", "MQTT-3.3.1-12"} <= set(judgement.not_assessable)


def test_a_session_kept_past_its_expiry_breaks_the_discarding_not_session_present() -> None:
    """5.0 statement 4.1.0-2: "The Server MUST discard the Session State when the Network Connection is closed and
    the Session Expiry Interval has passed". A server that answers Session Present 1 to a Clean Start 0 CONNECT 4.5 s
    after a 2 s session's close still held the state, and says so truly ([MQTT-3.2.2-3] asks Session Present 1 of a
    server that holds it): the one statement it broke is the discarding."""
    late = judged(comeback(2, back_at=5.0, present=True))
    assert [(f.rule, f.side) for f in late.findings] == [(named(rules_5.DISCARDED_AFTER_EXPIRY), S)], explain(late)
    for key in (rules.NO_SESSION_PRESENT, rules_5.NEW_SESSION, rules_5.CLEAN_START_PROCESSED):
        assert "past its Session Expiry Interval" in late.not_assessable[named(key)], explain(late)
    on_time = judged(comeback(2, back_at=5.0, present=False))
    assert not on_time.findings, explain(on_time)
    for key in (rules_5.DISCARDED_AFTER_EXPIRY, rules.NO_SESSION_PRESENT, rules_5.NEW_SESSION):
        assert named(key) in on_time.passed, explain(on_time)
