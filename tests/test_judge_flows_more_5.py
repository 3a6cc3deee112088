"""MQTT 5.0 QoS flows on one connection: Packet Identifiers held until their answer and new afterwards, re-sending
only on a resumed session, the send quota (4.9) and the Reason String and User Properties a small Maximum Packet
Size leaves out. Each statement kept, broken, and not assessable where the conversation cannot tell."""

from __future__ import annotations

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import USER_PROPERTY, make
from mqttaudit.judge import JudgeConfig, Judgement, judge, judge_scenario
from mqttaudit.judge import model_rules_5 as rules_5
from mqttaudit.spec import identity

from .talk import C, S, Talk

V5 = JudgeConfig(supported_protocol_levels=frozenset({4, 5}))
WAIT = 10.0  # past JudgeConfig().answer_timeout
#: [MQTT-3.1.2-24] The Maximum Packet Size itself (its key: 3.1.1 numbers another rule so).
PACKET_SIZE = "MQTT-3.1.2-24@5.0"
TOPIC = "flows/t"


def connected(*, clean_start: bool = True, session_present: bool = False, **client: int) -> Talk:
    connect = codec.Connect(
        client_id="flows", protocol_level=5, keep_alive=0, clean_session=clean_start, properties=make(**client)
    )
    return Talk(version="5").client(connect).server(codec.Connack(session_present=session_present))


def publish(packet_id: int | None, qos: int = 1, *, dup: bool = False, payload: bytes = b"m") -> codec.Publish:
    return codec.Publish(topic=TOPIC, payload=payload, qos=qos, packet_id=packet_id, dup=dup)


def verdict(talk: Talk) -> Judgement:
    return judge(talk.quiet(after=WAIT).events, V5)


def named(key: str) -> str:
    """The 5.0 statement id of a rule key ("MQTT-4.3.3-1@5.0" is MQTT-4.3.3-1)."""
    return str(identity.statement_id(key, identity.V5))


def failed(judgement: Judgement, rule: str, side: codec.Direction = S) -> list[str]:
    return [f.detail for f in judgement.findings if named(rule) in f.rules and f.side is side]


def assert_kept(judgement: Judgement, *statements: str) -> None:
    for statement in map(named, statements):
        assert statement in judgement.passed, (statement, judgement.not_assessable.get(statement))
        assert not [f for f in judgement.findings if statement in f.rules], statement


def undecided(judgement: Judgement, rule: str) -> bool:
    return named(rule) in judgement.not_assessable


# Sender: identifiers in use until the answer [MQTT-4.3.2-1, -3; MQTT-4.3.3-3, -5, -6] ----------------------------


def test_a_server_that_waits_for_each_answer_keeps_the_sender_statements() -> None:
    talk = connected().server(publish(1), publish(2, 2)).client(codec.Puback(packet_id=1), codec.Pubrec(packet_id=2))
    talk.server(codec.Pubrel(packet_id=2)).client(codec.Pubcomp(packet_id=2)).server(publish(1, payload=b"again"))
    talk.client(codec.Puback(packet_id=1))
    assert_kept(
        verdict(talk),
        rules_5.QOS1_NEW_ID,
        rules_5.QOS1_HELD_UNTIL_PUBACK,
        rules_5.QOS2_HELD_UNTIL_PUBREC,
        rules_5.QOS2_PUBREL_HELD_UNTIL_PUBCOMP,
        rules_5.QOS2_NO_PUBLISH_AFTER_PUBREL,
    )


def test_a_new_qos1_message_under_an_identifier_awaiting_puback_breaks_both_statements() -> None:
    judgement = verdict(connected().server(publish(1), publish(1, payload=b"other")))
    assert failed(judgement, rules_5.QOS1_NEW_ID) and failed(judgement, rules_5.QOS1_HELD_UNTIL_PUBACK)


def test_a_new_message_under_an_identifier_awaiting_pubrec_breaks_mqtt_4_3_3_3() -> None:
    judgement = verdict(connected().server(publish(3, 2), publish(3, 1, payload=b"other")))
    assert failed(judgement, rules_5.QOS2_HELD_UNTIL_PUBREC)


def test_a_new_qos2_message_under_an_identifier_in_use_breaks_mqtt_4_3_3_1() -> None:
    judgement = verdict(connected().server(publish(3, 2), publish(3, 2, payload=b"other")))
    assert failed(judgement, rules_5.QOS2_NEW_ID) and failed(judgement, rules_5.QOS2_HELD_UNTIL_PUBREC)
    assert named(rules_5.QOS2_NEW_ID) == "MQTT-4.3.3-1"


@pytest.mark.parametrize(("qos", "rule"), [(1, rules_5.QOS1_FIRST_DUP_0), (2, rules_5.QOS2_FIRST_DUP_0)])
def test_the_first_publish_of_a_new_message_has_dup_0(qos: int, rule: str) -> None:
    assert_kept(verdict(connected().server(publish(1, qos))), rule)
    assert failed(verdict(connected().server(publish(1, qos, dup=True))), rule)
    resumed = connected(clean_start=False, session_present=True).server(publish(1, qos, dup=True))
    assert undecided(verdict(resumed), rule)
    assert named(rule) == f"MQTT-4.3.{qos + 1}-2"


def test_the_pubrel_owed_after_an_unsubscribe_completes_the_delivery_mqtt_3_10_4_3() -> None:
    def flow() -> Talk:
        talk = connected().server(publish(6, 2)).client(codec.Pubrec(packet_id=6))
        talk.client(codec.Unsubscribe(packet_id=8, topic_filters=("flows/#",)))
        return talk.server(codec.Unsuback(packet_id=8, reason_codes=(0,)))

    assert_kept(verdict(flow().server(codec.Pubrel(packet_id=6)).client(codec.Pubcomp(packet_id=6))), "MQTT-3.10.4-3")
    assert failed(verdict(flow()), "MQTT-3.10.4-3")
    other = connected().server(publish(6, 2)).client(codec.Unsubscribe(packet_id=8, topic_filters=("else",)))
    other.server(codec.Unsuback(packet_id=8, reason_codes=(0,)))
    assert "MQTT-3.10.4-3" not in verdict(other).assessed


def test_a_new_message_under_an_identifier_whose_pubrel_awaits_pubcomp_breaks_mqtt_4_3_3_5() -> None:
    talk = connected().server(publish(4, 2)).client(codec.Pubrec(packet_id=4)).server(codec.Pubrel(packet_id=4))
    judgement = verdict(talk.server(publish(4, 2, payload=b"other")))
    assert failed(judgement, rules_5.QOS2_PUBREL_HELD_UNTIL_PUBCOMP)


def test_the_publish_re_sent_after_its_pubrel_breaks_mqtt_4_3_3_6_not_the_pubrel_statement() -> None:
    talk = connected().server(publish(4, 2)).client(codec.Pubrec(packet_id=4)).server(codec.Pubrel(packet_id=4))
    judgement = verdict(talk.server(publish(4, 2, dup=True)))
    assert failed(judgement, rules_5.QOS2_NO_PUBLISH_AFTER_PUBREL)
    assert not [f for f in judgement.findings if "MQTT-4.3.3-4" in f.rules]


def test_a_resumed_session_leaves_the_new_identifier_not_assessable() -> None:
    judgement = verdict(connected(clean_start=False, session_present=True).server(publish(1)))
    assert undecided(judgement, rules_5.QOS1_NEW_ID)


# Re-sending only on a resumed session [MQTT-4.4.0-1, -2] -----------------------------------------------------------


def test_a_publish_re_sent_on_the_same_connection_breaks_mqtt_4_4_0_1() -> None:
    judgement = verdict(connected().server(publish(1), publish(1, dup=True)).client(codec.Puback(packet_id=1)))
    assert failed(judgement, rules_5.RESEND_ONLY_ON_RESUME)


def test_a_pubrel_re_sent_on_the_same_connection_breaks_mqtt_4_4_0_1() -> None:
    talk = connected().server(publish(4, 2)).client(codec.Pubrec(packet_id=4))
    judgement = verdict(talk.server(codec.Pubrel(packet_id=4), codec.Pubrel(packet_id=4)))
    assert failed(judgement, rules_5.RESEND_ONLY_ON_RESUME)


def test_a_publish_re_sent_after_its_refusal_breaks_mqtt_4_4_0_2() -> None:
    talk = connected().server(publish(1)).client(codec.Puback(packet_id=1, reason_code=0x80))
    judgement = verdict(talk.server(publish(1, dup=True)).client(codec.Puback(packet_id=1)))
    assert failed(judgement, rules_5.REFUSED_NOT_RESENT)


def test_a_new_message_after_a_refusal_keeps_mqtt_4_4_0_2() -> None:
    talk = connected().server(publish(1)).client(codec.Puback(packet_id=1, reason_code=0x80))
    judgement = verdict(talk.server(publish(1, payload=b"new")).client(codec.Puback(packet_id=1)))
    assert_kept(judgement, rules_5.REFUSED_NOT_RESENT)


def test_a_client_that_re_sends_on_the_same_connection_is_the_client_at_fault() -> None:
    judgement = verdict(connected().client(publish(1), publish(1, dup=True)).server(codec.Puback(packet_id=1)))
    assert failed(judgement, rules_5.RESEND_ONLY_ON_RESUME, C) and not failed(judgement, rules_5.RESEND_ONLY_ON_RESUME)


# Receiver: repeats and reused identifiers [MQTT-4.3.2-5, MQTT-4.3.3-9, -10, -12] ---------------------------------


def test_a_repeat_before_pubrel_answered_with_pubrec_again_keeps_mqtt_4_3_3_10() -> None:
    talk = connected().client(publish(7, 2)).server(codec.Pubrec(packet_id=7)).client(publish(7, 2, dup=True))
    talk.server(codec.Pubrec(packet_id=7)).client(codec.Pubrel(packet_id=7)).server(codec.Pubcomp(packet_id=7))
    assert_kept(verdict(talk), rules_5.QOS2_REPEAT_ANSWERED)


def test_a_repeat_before_pubrel_left_unanswered_breaks_mqtt_4_3_3_10() -> None:
    talk = connected().client(publish(7, 2)).server(codec.Pubrec(packet_id=7)).client(publish(7, 2, dup=True))
    assert failed(verdict(talk), rules_5.QOS2_REPEAT_ANSWERED)


@pytest.mark.parametrize(
    ("first", "rule"),
    [
        ([publish(5), codec.Puback(packet_id=5)], rules_5.QOS1_REUSED_ID_IS_NEW),
        ([publish(5, 2), codec.Pubrec(packet_id=5, reason_code=0x80)], rules_5.QOS2_NEW_AFTER_REFUSAL),
        (
            [publish(5, 2), codec.Pubrec(packet_id=5), codec.Pubrel(packet_id=5), codec.Pubcomp(packet_id=5)],
            rules_5.QOS2_NEW_AFTER_PUBCOMP,
        ),
    ],
    ids=["after-puback", "after-refusing-pubrec", "after-pubcomp"],
)
def test_a_publish_reusing_a_finished_identifier_is_a_new_message_the_server_answers(
    first: list[codec.Packet], rule: str
) -> None:
    def flow(talk: Talk) -> Talk:
        for packet in first:
            talk.send(C if isinstance(packet, codec.Publish | codec.Pubrel) else S, packet)
        return talk

    again = publish(5, 1, dup=True, payload=b"second")
    kept = flow(connected()).client(again).server(codec.Puback(packet_id=5))
    assert_kept(verdict(kept), rule)
    broken = flow(connected()).client(again)
    assert failed(verdict(broken), rule)


# Send quota [MQTT-4.9.0-2, -3; MQTT-3.3.4-10] ----------------------------------------------------------------------


def test_a_server_at_zero_quota_that_answers_pingreq_and_subscribe_keeps_the_quota_statements() -> None:
    subscribe = codec.Subscribe(packet_id=9, subscriptions=(codec.Subscription(topic_filter="x"),))
    talk = connected(receive_maximum=1).server(publish(1)).client(codec.Pingreq(), subscribe)
    talk.server(codec.Pingresp(), codec.Suback(packet_id=9, return_codes=(0,))).client(codec.Puback(packet_id=1))
    assert_kept(
        verdict(talk), rules_5.QUOTA_HOLDS_ONLY_PUBLISH, rules_5.ZERO_QUOTA_ANSWERS, rules_5.ZERO_QUOTA_NO_PUBLISH
    )


def test_a_server_at_zero_quota_that_withholds_pingresp_breaks_the_quota_statements() -> None:
    judgement = verdict(connected(receive_maximum=1).server(publish(1)).client(codec.Pingreq()))
    assert failed(judgement, rules_5.QUOTA_HOLDS_ONLY_PUBLISH) and failed(judgement, rules_5.ZERO_QUOTA_ANSWERS)
    assert failed(judgement, "MQTT-3.12.4-1")


def test_a_pingreq_below_the_quota_does_not_exercise_the_quota_statements() -> None:
    judgement = verdict(connected(receive_maximum=2).server(publish(1)).client(codec.Pingreq()))
    assert rules_5.QUOTA_HOLDS_ONLY_PUBLISH not in judgement.assessed | set(judgement.not_assessable)


def test_a_qos1_publish_at_zero_quota_breaks_mqtt_4_9_0_2() -> None:
    judgement = verdict(connected(receive_maximum=1).server(publish(1), publish(2)))
    assert failed(judgement, rules_5.ZERO_QUOTA_NO_PUBLISH) and failed(judgement, "MQTT-3.3.4-9")


def test_the_quota_of_a_resumed_session_is_not_assessable_below_the_maximum() -> None:
    judgement = verdict(connected(clean_start=False, session_present=True, receive_maximum=2).server(publish(1)))
    assert undecided(judgement, rules_5.ZERO_QUOTA_NO_PUBLISH)


# Reason String and User Property over the Maximum Packet Size [MQTT-3.4.2-2, ... MQTT-3.14.2-4] -----------------


def reasoned(packet_type: type[codec.Packet], text: str = "", pairs: int = 0, **fields: object) -> codec.Packet:
    found = make(reason_string=text) if text else ()
    properties = (*found, *(codec.Property(USER_PROPERTY, ("k", "v" * 8)) for _ in range(pairs)))
    return packet_type(properties=properties, **fields)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("packet_type", "fields", "statements"),
    [
        (codec.Puback, {"packet_id": 1, "reason_code": 0x10}, rules_5.OMITTED_OVER_MAXIMUM[codec.PacketType.PUBACK]),
        (
            codec.Suback,
            {"packet_id": 1, "return_codes": (0x80,)},
            rules_5.OMITTED_OVER_MAXIMUM[codec.PacketType.SUBACK],
        ),
        (
            codec.Unsuback,
            {"packet_id": 1, "reason_codes": (0x11,)},
            rules_5.OMITTED_OVER_MAXIMUM[codec.PacketType.UNSUBACK],
        ),
    ],
    ids=["puback", "suback", "unsuback"],
)
def test_a_reason_string_or_user_property_over_the_clients_maximum_breaks_its_statement(
    packet_type: type[codec.Packet], fields: dict[str, object], statements: tuple[str, str]
) -> None:
    reason_string, user_property = statements
    small = reasoned(packet_type, **fields)
    size = len(codec.encode(small, version="5", validate=False))
    maximum = size + 4

    def answered(packet: codec.Packet) -> Judgement:
        talk = connected(maximum_packet_size=maximum)
        if packet_type is codec.Puback:
            talk.client(publish(1, payload=b""))
        elif packet_type is codec.Suback:
            talk.client(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="x"),)))
        else:
            talk.client(codec.Unsubscribe(packet_id=1, topic_filters=("x",)))
        return verdict(talk.server(packet))

    assert_kept(answered(small), reason_string, user_property)
    with_text = answered(reasoned(packet_type, "refused because of a long story", **fields))
    assert failed(with_text, reason_string) and not failed(with_text, user_property)
    assert failed(with_text, PACKET_SIZE)  # the oversize packet itself, reported by the limits
    with_pairs = answered(reasoned(packet_type, pairs=2, **fields))
    assert failed(with_pairs, user_property) and not failed(with_pairs, reason_string)


def test_a_packet_too_large_even_without_its_reason_string_breaks_only_the_maximum_packet_size() -> None:
    suback = codec.Suback(packet_id=1, return_codes=(0,) * 40, properties=make(reason_string="why"))
    subscribe = codec.Subscribe(
        packet_id=1, subscriptions=tuple(codec.Subscription(topic_filter=f"x{i}") for i in range(40))
    )
    judgement = verdict(connected(maximum_packet_size=20).client(subscribe).server(suback))
    assert failed(judgement, PACKET_SIZE) and not failed(judgement, rules_5.SUBACK_REASON_STRING)


def test_without_a_declared_maximum_the_omission_statements_are_not_exercised() -> None:
    talk = connected().client(publish(1)).server(reasoned(codec.Puback, "fine", packet_id=1, reason_code=0))
    judgement = verdict(talk)
    assert rules_5.PUBACK_REASON_STRING not in judgement.assessed


# Across connections: order, replaced subscriptions, repeats [MQTT-4.6.0-5, -6; MQTT-3.8.4-3, -4; MQTT-4.3.3-10] --


def joined(client_id: str, at: float) -> Talk:
    talk = Talk(version="5")
    talk.now = at
    connect = codec.Connect(client_id=client_id, protocol_level=5, keep_alive=0)
    return talk.client(connect).server(codec.Connack())


def subscriber(*filters: str, at: float = 0.0) -> Talk:
    talk = joined("sub", at)
    for pid, name in enumerate(filters, start=1):
        subscription = codec.Subscription(topic_filter=name, qos=2)
        talk.client(codec.Subscribe(packet_id=pid, subscriptions=(subscription,)))
        talk.server(codec.Suback(packet_id=pid, return_codes=(2,)))
    return talk


def publisher(*payloads: bytes, qos: int = 1, retain: bool = False, at: float = 1.0) -> Talk:
    talk = joined("pub", at)
    for pid, payload in enumerate(payloads, start=1):
        talk.client(codec.Publish(topic=TOPIC, payload=payload, qos=qos, packet_id=pid, retain=retain))
        talk.server(codec.Puback(packet_id=pid))
    return talk


def received(talk: Talk, *payloads: bytes, at: float, qos: int = 1, retain: bool = False) -> Talk:
    for index, payload in enumerate(payloads):
        pid = 100 + index
        talk.server(codec.Publish(topic=TOPIC, payload=payload, qos=qos, packet_id=pid, retain=retain), at=at + index)
        talk.client(codec.Puback(packet_id=pid))
    return talk


def scenario(**talks: Talk) -> Judgement:
    return judge_scenario({name: talk.quiet(at=30.0).events for name, talk in talks.items()}, V5)


def test_messages_of_one_publisher_arrive_in_the_order_it_sent_them_mqtt_4_6_0_5_and_6() -> None:
    kept = scenario(sub=received(subscriber(TOPIC), b"1", b"2", at=2.0), pub=publisher(b"1", b"2"))
    assert_kept(kept, rules_5.ORDERED_TOPIC, rules_5.NON_SHARED_ORDERED)
    assert named(rules_5.ORDERED_TOPIC) == "MQTT-4.6.0-5" and named(rules_5.NON_SHARED_ORDERED) == "MQTT-4.6.0-6"
    broken = scenario(sub=received(subscriber(TOPIC), b"2", b"1", at=2.0), pub=publisher(b"1", b"2"))
    assert failed(broken, rules_5.ORDERED_TOPIC) and failed(broken, rules_5.NON_SHARED_ORDERED)


def test_a_shared_subscription_need_not_keep_the_order() -> None:
    shared = received(subscriber(f"$share/g/{TOPIC}"), b"2", b"1", at=2.0)
    judgement = scenario(sub=shared, pub=publisher(b"1", b"2"))
    assert not failed(judgement, rules_5.ORDERED_TOPIC) and not failed(judgement, rules_5.NON_SHARED_ORDERED)


def test_the_same_filter_subscribed_again_replaces_the_subscription_mqtt_3_8_4_3() -> None:
    kept = scenario(sub=received(subscriber(TOPIC, TOPIC), b"1", at=2.0), pub=publisher(b"1"))
    assert_kept(kept, rules_5.SAME_FILTER_REPLACES)
    broken = scenario(sub=received(subscriber(TOPIC, TOPIC), b"1", b"1", at=2.0), pub=publisher(b"1"))
    assert failed(broken, rules_5.SAME_FILTER_REPLACES)


def test_two_different_filters_owe_no_replacement() -> None:
    judgement = scenario(sub=received(subscriber(TOPIC, "flows/+"), b"1", b"1", at=2.0), pub=publisher(b"1"))
    assert named(rules_5.SAME_FILTER_REPLACES) not in judgement.assessed


def test_a_replacement_with_retain_handling_0_re_sends_the_retained_message_mqtt_3_8_4_4() -> None:
    def subscribed_twice(copies: int) -> Talk:
        talk = subscriber(TOPIC, at=1.0)
        received(talk, b"r", at=1.5, retain=True)
        subscription = codec.Subscription(topic_filter=TOPIC, qos=2)
        talk.client(codec.Subscribe(packet_id=9, subscriptions=(subscription,)), at=3.0)
        talk.server(codec.Suback(packet_id=9, return_codes=(2,)))
        return received(talk, *[b"r"] * copies, at=3.5, retain=True)

    kept = scenario(sub=subscribed_twice(1), pub=publisher(b"r", retain=True, at=0.0))
    assert_kept(kept, rules_5.REPLACED_RESENDS_RETAINED)
    assert named(rules_5.REPLACED_RESENDS_RETAINED) == "MQTT-3.8.4-4"
    broken = scenario(sub=subscribed_twice(0), pub=publisher(b"r", retain=True, at=0.0))
    assert failed(broken, rules_5.REPLACED_RESENDS_RETAINED) and failed(broken, "MQTT-3.3.1-6")  # 5.0 MQTT-3.3.1-9


def test_a_qos2_repeat_before_pubrel_is_not_delivered_twice_mqtt_4_3_3_10() -> None:
    def repeated() -> Talk:
        talk = joined("pub", 1.0).client(codec.Publish(topic=TOPIC, payload=b"once", qos=2, packet_id=1))
        talk.server(codec.Pubrec(packet_id=1))
        talk.client(codec.Publish(topic=TOPIC, payload=b"once", qos=2, packet_id=1, dup=True))
        talk.server(codec.Pubrec(packet_id=1)).client(codec.Pubrel(packet_id=1)).server(codec.Pubcomp(packet_id=1))
        return talk

    def delivered(copies: int) -> Talk:
        talk = subscriber(TOPIC)
        for index in range(copies):
            pid = 50 + index
            talk.server(codec.Publish(topic=TOPIC, payload=b"once", qos=2, packet_id=pid), at=2.0 + index)
            talk.client(codec.Pubrec(packet_id=pid)).server(codec.Pubrel(packet_id=pid))
            talk.client(codec.Pubcomp(packet_id=pid))
        return talk

    once = scenario(sub=delivered(1), pub=repeated())
    assert not failed(once, rules_5.QOS2_REPEAT_ANSWERED) and "MQTT-4.5.0-1" in once.passed
    twice = scenario(sub=delivered(2), pub=repeated())
    assert failed(twice, rules_5.QOS2_REPEAT_ANSWERED)


def test_a_subscribe_of_several_filters_gets_one_suback_mqtt_3_8_4_5() -> None:
    both = (codec.Subscription(topic_filter="a"), codec.Subscription(topic_filter="b"))
    talk = connected().client(codec.Subscribe(packet_id=4, subscriptions=both))
    kept = verdict(talk.server(codec.Suback(packet_id=4, return_codes=(0, 0))))
    assert_kept(kept, rules_5.SUBSCRIBE_AS_SEQUENCE)
    assert named(rules_5.SUBSCRIBE_AS_SEQUENCE) == "MQTT-3.8.4-5"
    talk = connected().client(codec.Subscribe(packet_id=4, subscriptions=both))
    broken = verdict(
        talk.server(codec.Suback(packet_id=4, return_codes=(0, 0)), codec.Suback(packet_id=4, return_codes=(0,)))
    )
    assert failed(broken, rules_5.SUBSCRIBE_AS_SEQUENCE)


def test_an_unsubscribe_deletes_only_the_same_filter_mqtt_3_10_4_1() -> None:
    def unsubscribed(name: str, copies: int) -> Talk:
        talk = subscriber(TOPIC)
        talk.client(codec.Unsubscribe(packet_id=7, topic_filters=(name,)))
        talk.server(codec.Unsuback(packet_id=7, reason_codes=(0x11,)))
        return received(talk, *[b"1"] * copies, at=2.0)

    kept = scenario(sub=unsubscribed("flows/+", 1), pub=publisher(b"1"))
    assert_kept(kept, rules_5.EXACT_MATCH_DELETES)
    broken = scenario(sub=unsubscribed("flows/+", 0), pub=publisher(b"1"))
    assert failed(broken, rules_5.EXACT_MATCH_DELETES) and failed(broken, "MQTT-4.5.0-1")
    unrelated = scenario(sub=unsubscribed("other", 0), pub=publisher(b"1"))
    assert failed(unrelated, "MQTT-4.5.0-1") and not failed(unrelated, rules_5.EXACT_MATCH_DELETES)
