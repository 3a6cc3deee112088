"""The reference broker's state machine (mqttaudit.serve.broker), sans-I/O: what it sends each link for what the
links send it. Each test names the statement the broker's conduct keeps."""

from __future__ import annotations

from mqttaudit.codec import (
    Connack,
    Connect,
    Disconnect,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Will,
    encode,
)
from mqttaudit.codec.properties import make
from mqttaudit.serve.broker import CLOSE, Broker, Limits, Link


def _connect(broker: Broker, client_id: str, now: float = 0.0, **fields: object) -> Link:
    link = broker.open(client_id, now)
    broker.receive(link, Connect(client_id=client_id, **fields), now)  # type: ignore[arg-type]
    return link


def _sent(broker: Broker) -> dict[str, list[object]]:
    return {link.name: items for link, items in broker.take_outboxes()}


def _subscribe(broker: Broker, link: Link, topic_filter: str, qos: int, packet_id: int = 1) -> None:
    broker.receive(
        link, Subscribe(packet_id=packet_id, subscriptions=[Subscription(topic_filter=topic_filter, qos=qos)]), 0.0
    )


def test_connect_subscribe_and_publish_deliver_at_the_lower_qos() -> None:
    broker = Broker()
    sub = _connect(broker, "sub")
    _subscribe(broker, sub, "a/+", 1)
    pub = _connect(broker, "pub")
    assert _sent(broker) == {
        "sub": [Connack(), Suback(packet_id=1, return_codes=[1])],
        "pub": [Connack()],
    }
    broker.receive(pub, Publish(topic="a/b", payload=b"x", qos=2, packet_id=7), 1.0)
    sent = _sent(broker)
    assert sent["pub"] == [Pubrec(packet_id=7)]
    assert sent["sub"] == [Publish(topic="a/b", payload=b"x", qos=1, packet_id=1)]  # [MQTT-3.8.4-6]


def test_a_qos_2_publish_repeated_before_pubrel_is_not_delivered_again() -> None:
    broker = Broker()
    sub = _connect(broker, "sub")
    _subscribe(broker, sub, "t", 0)
    pub = _connect(broker, "pub")
    _sent(broker)
    message = Publish(topic="t", payload=b"1", qos=2, packet_id=3)
    broker.receive(pub, message, 1.0)
    broker.receive(pub, Publish(topic="t", payload=b"1", qos=2, packet_id=3, dup=True), 1.1)
    sent = _sent(broker)
    assert sent["sub"] == [Publish(topic="t", payload=b"1")]  # [MQTT-4.3.3-2] once
    assert sent["pub"] == [Pubrec(packet_id=3), Pubrec(packet_id=3)]
    broker.receive(pub, Pubrel(packet_id=3), 1.2)
    assert _sent(broker)["pub"] == [Pubcomp(packet_id=3)]


def test_a_5_0_client_gets_no_more_in_flight_than_its_receive_maximum_and_the_rest_after_each_puback() -> None:
    broker = Broker()
    sub = _connect(broker, "sub", protocol_level=5, properties=make(receive_maximum=2))
    _subscribe(broker, sub, "t", 1)
    pub = _connect(broker, "pub", protocol_level=5)
    _sent(broker)
    for number in range(4):
        broker.receive(pub, Publish(topic="t", payload=bytes([number]), qos=1, packet_id=number + 1), 1.0)
    delivered = [p for p in _sent(broker)["sub"] if isinstance(p, Publish)]
    assert [p.payload for p in delivered] == [b"\x00", b"\x01"]  # [MQTT-3.3.4-9]
    broker.receive(sub, Puback(packet_id=delivered[0].packet_id), 2.0)
    more = _sent(broker)["sub"]
    assert [p.payload for p in more if isinstance(p, Publish)] == [b"\x02"]
    assert more[0].packet_id != delivered[1].packet_id  # type: ignore[union-attr]  # still in flight [MQTT-2.3.1-2]


def test_a_packet_identifier_in_flight_is_never_handed_out_again() -> None:
    broker = Broker()
    sub = _connect(broker, "sub")  # 3.1.1: no Receive Maximum, every identifier may be in flight
    _subscribe(broker, sub, "t", 1)
    pub = _connect(broker, "pub")
    _sent(broker)
    for _ in range(65_536):
        broker.receive(pub, Publish(topic="t", payload=b"", qos=1, packet_id=1), 1.0)
    ids = [p.packet_id for p in _sent(broker)["sub"] if isinstance(p, Publish)]
    assert sorted(ids) == list(range(1, 65_536))  # [MQTT-2.3.1-2]: all 65,535 in use, the last message waits
    broker.receive(sub, Puback(packet_id=100), 2.0)
    assert _sent(broker)["sub"] == [Publish(topic="t", payload=b"", qos=1, packet_id=100)]


def test_a_resumed_session_gets_its_unacknowledged_messages_again_with_dup_and_its_pubrels() -> None:
    broker = Broker()
    sub = _connect(broker, "sub", clean_session=False)
    _subscribe(broker, sub, "t", 2)
    pub = _connect(broker, "pub")
    broker.receive(pub, Publish(topic="t", payload=b"a", qos=1, packet_id=1), 1.0)
    broker.receive(pub, Publish(topic="t", payload=b"b", qos=2, packet_id=2), 1.0)
    first = [p for p in _sent(broker)["sub"] if isinstance(p, Publish)]
    broker.receive(sub, Pubrec(packet_id=first[1].packet_id), 1.5)
    assert _sent(broker)["sub"] == [Pubrel(packet_id=first[1].packet_id)]
    broker.lost(sub, 2.0)
    again = _connect(broker, "sub", 3.0, clean_session=False)
    sent = _sent(broker)[again.name]
    assert sent[0] == Connack(session_present=True)  # [MQTT-3.2.2-2]
    assert sent[1:] == [  # [MQTT-4.4.0-1] in the original order, DUP set on the PUBLISH [MQTT-3.3.1-1]
        Publish(topic="t", payload=b"a", qos=1, dup=True, packet_id=first[0].packet_id),
        Pubrel(packet_id=first[1].packet_id),
    ]


def test_a_clean_session_ends_the_old_one_and_says_no_session_present() -> None:
    broker = Broker()
    link = _connect(broker, "c", clean_session=False)
    _subscribe(broker, link, "t", 1)
    broker.lost(link, 1.0)
    _sent(broker)
    _connect(broker, "c", 2.0, clean_session=True)
    assert _sent(broker)["c"] == [Connack(session_present=False)]  # [MQTT-3.2.2-1]
    assert "t" not in broker.sessions["c"].subscriptions


def test_retained_messages_go_to_a_new_subscriber_with_retain_set_and_an_empty_one_clears_them() -> None:
    broker = Broker()
    pub = _connect(broker, "pub")
    broker.receive(pub, Publish(topic="r/1", payload=b"kept", retain=True), 1.0)
    broker.receive(pub, Publish(topic="r/2", payload=b"gone", retain=True), 1.0)
    broker.receive(pub, Publish(topic="r/2", payload=b"", retain=True), 1.1)  # [MQTT-3.3.1-10]
    sub = _connect(broker, "sub")
    _subscribe(broker, sub, "r/#", 1)
    sent = _sent(broker)["sub"]
    assert sent[1] == Suback(packet_id=1, return_codes=[1])
    assert sent[2:] == [Publish(topic="r/1", payload=b"kept", retain=True)]  # [MQTT-3.3.1-6] at QoS 0 as stored


def test_a_will_is_published_on_a_lost_connection_and_not_after_disconnect() -> None:
    broker = Broker()
    sub = _connect(broker, "sub")
    _subscribe(broker, sub, "will/#", 0)
    lost = _connect(broker, "lost", will=Will(topic="will/lost", message=b"bye"))
    polite = _connect(broker, "polite", will=Will(topic="will/polite", message=b"bye"))
    _sent(broker)
    broker.receive(polite, Disconnect(), 1.0)
    broker.lost(polite, 1.0)  # [MQTT-3.14.4-3] the Will is discarded
    broker.lost(lost, 1.0)  # [MQTT-3.1.2-8]
    assert _sent(broker).get("sub") == [Publish(topic="will/lost", payload=b"bye")]


def test_a_5_0_will_waits_for_its_delay_and_a_reconnect_within_it_cancels_it() -> None:
    broker = Broker()
    sub = _connect(broker, "sub")
    _subscribe(broker, sub, "will/#", 0)
    will = Will(topic="will/x", message=b"bye", properties=make(will_delay_interval=5))
    expiring = make(session_expiry_interval=60)
    link = _connect(broker, "x", protocol_level=5, will=will, properties=expiring)
    _sent(broker)
    broker.lost(link, 1.0)
    broker.tick(4.0)
    assert "sub" not in _sent(broker)
    _connect(broker, "x", 5.0, protocol_level=5, clean_session=False, properties=expiring)
    broker.tick(7.0)
    assert "sub" not in _sent(broker)  # [MQTT-3.1.3-9]
    other = _connect(broker, "y", 8.0, protocol_level=5, will=will, properties=expiring)
    broker.lost(other, 8.0)
    broker.tick(13.0)
    assert _sent(broker)["sub"] == [Publish(topic="will/x", payload=b"bye")]


def test_a_topic_alias_beyond_the_maximum_gets_disconnect_0x94_and_a_close() -> None:
    broker = Broker(Limits(topic_alias_maximum=2))
    link = _connect(broker, "c", protocol_level=5)
    _sent(broker)
    broker.receive(link, Publish(topic="t", payload=b"", properties=make(topic_alias=3)), 1.0)
    assert _sent(broker)["c"] == [Disconnect(reason_code=0x94), CLOSE]


def test_a_5_0_client_beyond_the_broker_s_receive_maximum_gets_disconnect_0x93() -> None:
    broker = Broker(Limits(receive_maximum=1))
    link = _connect(broker, "c", protocol_level=5)
    _sent(broker)
    broker.receive(link, Publish(topic="t", qos=2, packet_id=1), 1.0)
    broker.receive(link, Publish(topic="t", qos=2, packet_id=2), 1.0)
    assert _sent(broker)["c"] == [Pubrec(packet_id=1), Disconnect(reason_code=0x93), CLOSE]


def test_no_local_and_shared_subscriptions_route_as_5_0_says() -> None:
    broker = Broker()
    me = _connect(broker, "me", protocol_level=5)
    broker.receive(me, Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="t", no_local=True)]), 0.0)
    workers = [_connect(broker, f"w{n}", protocol_level=5) for n in range(2)]
    for worker in workers:
        _subscribe(broker, worker, "$share/g/t", 0)
    _sent(broker)
    for number in range(4):
        broker.receive(me, Publish(topic="t", payload=bytes([number])), 1.0)
    sent = _sent(broker)
    assert "me" not in sent  # [MQTT-3.8.3-3]
    got = sorted(p.payload for name in ("w0", "w1") for p in sent[name])  # type: ignore[attr-defined]
    assert got == [b"\x00", b"\x01", b"\x02", b"\x03"]  # each message to one member of the group
    assert len(sent["w0"]) == len(sent["w1"]) == 2


def test_sessions_subscriptions_and_retained_topics_are_bounded_with_refusals_the_spec_allows() -> None:
    broker = Broker(Limits(sessions=2, subscriptions=1, retained_messages=1))
    first = _connect(broker, "a", clean_session=False)
    _connect(broker, "b", protocol_level=5)
    _sent(broker)
    third = _connect(broker, "c")
    fourth = _connect(broker, "d", protocol_level=5)
    sent = _sent(broker)
    assert sent["c"] == [Connack(return_code=0x03), CLOSE]  # 3.1.1 Server unavailable
    assert sent["d"] == [Connack(return_code=0x97), CLOSE]  # 5.0 Quota exceeded
    assert third.closing and fourth.closing
    broker.receive(
        first,
        Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="x"), Subscription(topic_filter="y")]),
        1.0,
    )
    assert _sent(broker)["a"] == [Suback(packet_id=1, return_codes=[0, 0x80])]  # the second: Failure
    assert set(broker.sessions["a"].subscriptions) == {"x"}
    broker.receive(first, Publish(topic="r/1", payload=b"1", retain=True), 2.0)
    broker.receive(first, Publish(topic="r/1", payload=b"2", retain=True), 2.0)  # the same topic: replaced
    assert broker.retained["r/1"].payload == b"2"
    broker.receive(first, Publish(topic="r/2", payload=b"3", retain=True), 2.0)
    assert _sent(broker)["a"][-1] == CLOSE and set(broker.retained) == {"r/1"}


def test_a_message_too_large_for_the_subscriber_s_maximum_packet_size_is_discarded() -> None:
    broker = Broker()
    sub = _connect(broker, "small", protocol_level=5, properties=make(maximum_packet_size=20))
    _subscribe(broker, sub, "t", 0)
    pub = _connect(broker, "pub")
    _sent(broker)
    broker.receive(pub, Publish(topic="t", payload=b"fits"), 1.0)
    broker.receive(pub, Publish(topic="t", payload=b"x" * 30), 1.0)  # 35 bytes: more than 20
    assert _sent(broker)["small"] == [encode(Publish(topic="t", payload=b"fits"), version=5)]  # [MQTT-3.1.2-25]
    assert sub.too_large == 1
