"""The 3.1.1 benchmark mix in MQTT 5.0 form: the same shape of traffic, with the properties and Reason Codes that
5.0 clients and brokers put on it.

- PUBLISH: each side publishes from a working set of topics (a device repeats its topics), so a Topic Alias is
  set on a topic's first use in a connection (Topic Name and alias) and most later uses send the alias with an
  empty Topic Name; within the Topic Alias Maximum its peer announced. Message Expiry Interval on some, User
  Properties on some, Content Type (with Payload Format Indicator for JSON) on a few, and a Subscription
  Identifier on many of the server's.
- PUBACK, PUBREC, PUBREL, PUBCOMP: mostly the short form (Success, nothing after the Packet Identifier); some with
  a Reason Code (No matching subscribers, Success written out, a failure that ends a QoS 2 flow), a few of those
  with a Reason String.
- SUBSCRIBE with Subscription Options (No Local, Retain As Published, Retain Handling), a few shared
  subscriptions, a Subscription Identifier on most; SUBACK and UNSUBACK with a Reason Code per Topic Filter.
- Every connection starts with CONNECT/CONNACK carrying the usual properties (Session Expiry Interval, Receive
  Maximum, Topic Alias Maximum, Maximum Packet Size, ...; Will Properties on a Will), and ends with a DISCONNECT
  with a Reason Code from either side; the Topic Aliases start again in the next connection.
"""

from __future__ import annotations

from typing import Any

from codec_traffic import CLIENT, SERVER, Traffic, TrafficGenerator  # bench/codec_traffic.py
from mqttaudit import codec


def make(**values: Any) -> tuple[codec.Property, ...]:
    """Properties by keyword (looked up when called: a codec older than 5.0 can still run the 3.1.1 mix)."""
    return codec.properties.make(**values)


#: Topics one side keeps publishing to; a new one replaces an old one now and then.
WORKING_SET = 24
TRACE_KEYS = ("trace-id", "correlation", "source", "schema")
GATEWAYS = ("gw-north-1", "gw-south-2", "edge-7", "edge-12")
SERVER_REFERENCE = "broker-2.example.net:1883"


class Mqtt5TrafficGenerator(TrafficGenerator):
    """Plausible MQTT 5.0 sessions with the 3.1.1 mix's packet types and proportions."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.working_set: dict[str, list[str]] = {CLIENT: [], SERVER: []}
        self.aliases: dict[str, dict[str, int]] = {CLIENT: {}, SERVER: {}}  # per sender, this connection
        self.alias_maximum = {CLIENT: 0, SERVER: 0}  # the Topic Alias Maximum the sender's peer announced
        self.subscription_ids: list[int] = []
        self.next_subscription_id = 1
        self.session_expiry: int | None = None
        self.connected = False

    # PUBLISH and its acknowledgements.

    def publish_topic(self, sender: str) -> str:
        rng = self.rng
        topics = self.working_set[sender]
        if len(topics) < WORKING_SET and (not topics or rng.random() < 0.1):
            topics.append(self.topic())
        elif rng.random() < 0.01:
            topics[rng.randrange(len(topics))] = self.topic()
        return rng.choice(topics)

    def user_properties(self) -> list[tuple[str, str]]:
        rng = self.rng
        pairs = [("trace-id", rng.randbytes(8).hex())]
        if rng.random() < 0.5:
            pairs.append((rng.choice(TRACE_KEYS[1:]), rng.choice(GATEWAYS)))
        return pairs

    def publish(self, traffic: Traffic, sender: str) -> None:
        rng = self.rng
        receiver = SERVER if sender == CLIENT else CLIENT
        qos = rng.choices((0, 1, 2), weights=(80, 16, 4))[0]
        packet_id = self.packet_id(sender) if qos else None
        dup = bool(qos) and rng.random() < 0.01
        retain = rng.random() < 0.05
        topic = self.publish_topic(sender)
        payload = self.payload()
        values: dict[str, Any] = {}
        if rng.random() < 0.05:
            if payload[:1] == b"{" and payload.isascii():
                values["payload_format_indicator"] = 1
                values["content_type"] = "application/json"
            else:
                values["content_type"] = rng.choice(("application/cbor", "application/octet-stream"))
        if rng.random() < 0.3:
            values["message_expiry_interval"] = rng.choice((30, 60, 300, 3600, 86400))
        aliases = self.aliases[sender]
        alias = aliases.get(topic)
        if alias is not None:
            values["topic_alias"] = alias
            if rng.random() < 0.92:
                topic = ""  # the alias stands for the Topic Name
        elif len(aliases) < self.alias_maximum[sender] and rng.random() < 0.95:
            aliases[topic] = values["topic_alias"] = len(aliases) + 1
        if sender == SERVER and self.subscription_ids and rng.random() < 0.6:
            values["subscription_identifier"] = rng.choice(self.subscription_ids)
        if rng.random() < 0.15:
            values["user_property"] = self.user_properties()
        publish = codec.Publish(
            topic=topic,
            payload=payload,
            qos=qos,
            retain=retain,
            dup=dup,
            packet_id=packet_id,
            properties=make(**values),
        )
        traffic.add(sender, publish)
        if qos == 1:
            traffic.add(receiver, codec.Puback(packet_id=packet_id, **self.publish_answer(receiver)))
        elif qos == 2:
            answer = self.publish_answer(receiver)
            traffic.add(receiver, codec.Pubrec(packet_id=packet_id, **answer))
            if (answer.get("reason_code") or 0) >= 0x80:
                return  # a failed PUBREC ends the flow: no PUBREL follows
            traffic.add(sender, codec.Pubrel(packet_id=packet_id, **self.release_answer()))
            traffic.add(receiver, codec.Pubcomp(packet_id=packet_id, **self.release_answer()))

    def publish_answer(self, answering: str) -> dict[str, Any]:
        """PUBACK/PUBREC fields: mostly the short form; a broker says when nobody subscribed; a few failures."""
        rng = self.rng
        roll = rng.random()
        if roll < (0.75 if answering == SERVER else 0.9):
            return {}
        if answering == SERVER and roll < 0.93:
            reason = {"reason_code": 0x10}
            if rng.random() < 0.2:
                reason["properties"] = make(reason_string="no matching subscribers")
            return reason
        if roll < 0.97:
            return {"reason_code": 0x00, "properties": () if rng.random() < 0.5 else None}
        failure = rng.choice((0x87, 0x97, 0x90) if answering == SERVER else (0x80, 0x97))
        reason_string = {0x87: "not authorized", 0x97: "quota exceeded", 0x90: "topic name invalid"}
        if rng.random() < 0.5:
            return {"reason_code": failure, "properties": make(reason_string=reason_string.get(failure, "refused"))}
        return {"reason_code": failure}

    def release_answer(self) -> dict[str, Any]:
        """PUBREL/PUBCOMP fields: nearly always the short form."""
        roll = self.rng.random()
        if roll < 0.97:
            return {}
        if roll < 0.99:
            return {"reason_code": 0x00}
        return {"reason_code": 0x92, "properties": make(reason_string="packet identifier not found")}

    # Subscriptions.

    def subscription(self) -> codec.Subscription:
        rng = self.rng
        topic_filter = self.topic_filter()
        shared = not topic_filter.startswith("$") and rng.random() < 0.1
        if shared:
            topic_filter = f"$share/{rng.choice(('ingest', 'alerts', 'archive'))}/{topic_filter}"
        return codec.Subscription(
            topic_filter=topic_filter,
            qos=rng.randint(0, 2),
            no_local=not shared and rng.random() < 0.1,  # [MQTT-3.8.3-4] never on a shared subscription
            retain_as_published=rng.random() < 0.15,
            retain_handling=rng.choices((0, 1, 2), weights=(70, 20, 10))[0],
        )

    def subscribe(self, traffic: Traffic) -> None:
        rng = self.rng
        packet_id = self.packet_id(CLIENT)
        subscriptions = tuple(self.subscription() for _ in range(rng.randint(1, 3)))
        values: dict[str, Any] = {}
        if rng.random() < 0.7:
            values["subscription_identifier"] = self.next_subscription_id
            self.subscription_ids = [*self.subscription_ids[-15:], self.next_subscription_id]
            self.next_subscription_id += 1
        if rng.random() < 0.1:
            values["user_property"] = self.user_properties()
        traffic.add(
            CLIENT,
            codec.Subscribe(packet_id=packet_id, subscriptions=subscriptions, properties=make(**values)),
        )
        codes = tuple(rng.choice((0x80, 0x87, 0x97)) if rng.random() < 0.05 else sub.qos for sub in subscriptions)
        properties = (
            make(reason_string="not authorized") if any(c >= 0x80 for c in codes) and rng.random() < 0.5 else ()
        )
        traffic.add(SERVER, codec.Suback(packet_id=packet_id, return_codes=codes, properties=properties))

    def unsubscribe(self, traffic: Traffic) -> None:
        rng = self.rng
        packet_id = self.packet_id(CLIENT)
        filters = tuple(self.topic_filter() for _ in range(rng.randint(1, 2)))
        properties = make(user_property=self.user_properties()) if rng.random() < 0.05 else ()
        traffic.add(CLIENT, codec.Unsubscribe(packet_id=packet_id, topic_filters=filters, properties=properties))
        codes = tuple(0x11 if rng.random() < 0.2 else 0x00 for _ in filters)
        properties = make(reason_string="no subscription existed") if 0x11 in codes and rng.random() < 0.25 else ()
        traffic.add(SERVER, codec.Unsuback(packet_id=packet_id, reason_codes=codes, properties=properties))

    # Connections.

    def disconnect(self, traffic: Traffic) -> None:
        rng = self.rng
        if rng.random() < 0.7:
            roll = rng.random()
            if roll < 0.4:
                packet = codec.Disconnect()  # Normal disconnection, the short form
            elif roll < 0.9 or not self.session_expiry:
                packet = codec.Disconnect(reason_code=0x04 if roll > 0.8 else 0x00, properties=())
            else:  # the session ends with the connection after all
                packet = codec.Disconnect(reason_code=0x00, properties=make(session_expiry_interval=0))
            traffic.add(CLIENT, packet)
        else:
            reason = rng.choice((0x8E, 0x8D, 0x8B, 0x98, 0x9C))
            values: dict[str, Any] = {}
            if reason == 0x9C:
                values["server_reference"] = SERVER_REFERENCE
            if rng.random() < 0.5:
                values["reason_string"] = {0x8E: "session taken over", 0x8D: "keep alive timeout"}.get(
                    reason, "server is going away"
                )
            traffic.add(SERVER, codec.Disconnect(reason_code=reason, properties=make(**values)))
        self.connected = False

    def will(self, device: int) -> codec.Will:
        rng = self.rng
        values: dict[str, Any] = {}
        if rng.random() < 0.5:
            values["will_delay_interval"] = rng.choice((5, 30, 60))
        if rng.random() < 0.3:
            values["message_expiry_interval"] = 3600
        if rng.random() < 0.3:
            values["payload_format_indicator"] = 1
            values["content_type"] = "application/json"
        return codec.Will(
            topic=f"site/1/device/{device}/status",
            message=b'{"online":false}',
            qos=1,
            retain=True,
            properties=make(**values),
        )

    def connect(self, traffic: Traffic) -> None:
        if self.connected:
            self.disconnect(traffic)
        rng = self.rng
        while True:
            device = rng.randint(1, 999)
            assigned = rng.random() < 0.1  # an empty ClientID: the server assigns one
            with_login = rng.random() < 0.7
            values: dict[str, Any] = {}
            self.session_expiry = rng.choice((None, None, 300, 3600, 86400, 0xFFFFFFFF))
            if self.session_expiry is not None:
                values["session_expiry_interval"] = self.session_expiry
            if rng.random() < 0.5:
                values["receive_maximum"] = rng.choice((10, 20, 100, 65535))
            if rng.random() < 0.3:
                values["maximum_packet_size"] = rng.choice((65536, 1048576, 268435455))
            server_aliases = rng.choice((10, 16, 32, 64)) if rng.random() < 0.8 else 0
            if server_aliases:
                values["topic_alias_maximum"] = server_aliases
            if rng.random() < 0.1:
                values["request_problem_information"] = 0
            if rng.random() < 0.1:
                values["user_property"] = [
                    ("model", f"sensor-{rng.randint(1, 9)}"),
                    ("fw", rng.choice(("1.4.3", "2.0.1"))),
                ]
            connect = codec.Connect(
                protocol_level=5,
                client_id="" if assigned else f"dev-{device:04d}-{rng.randbytes(3).hex()}",
                keep_alive=rng.choice((30, 60, 120)),
                clean_session=assigned or rng.random() < 0.5,
                will=self.will(device) if rng.random() < 0.5 else None,
                username=f"device-{device}" if with_login else None,
                password=rng.randbytes(16).hex().encode() if with_login else None,
                properties=make(**values),
            )
            traffic.add(CLIENT, connect)
            if rng.random() < 0.03:  # refused: the client tries again
                code = rng.choice((0x86, 0x87, 0x89))
                properties = make(reason_string="bad user name or password") if code == 0x86 else ()
                traffic.add(SERVER, codec.Connack(return_code=code, properties=properties))
                continue
            break
        answer: dict[str, Any] = {}
        client_aliases = rng.choice((10, 16, 32, 64, 65535)) if rng.random() < 0.85 else 0
        if client_aliases:
            answer["topic_alias_maximum"] = client_aliases
        if assigned:
            answer["assigned_client_identifier"] = f"auto-{rng.randbytes(8).hex()}"
        if rng.random() < 0.5:
            answer["receive_maximum"] = rng.choice((20, 100, 65535))
        if rng.random() < 0.4:
            answer["maximum_packet_size"] = 268435455
        if rng.random() < 0.2:
            answer["server_keep_alive"] = 60
        if rng.random() < 0.1:
            answer["retain_available"] = 1
        if rng.random() < 0.3:
            answer["wildcard_subscription_available"] = 1
            answer["subscription_identifier_available"] = 1
            answer["shared_subscription_available"] = 1
        session_present = not connect.clean_session and rng.random() < 0.5
        traffic.add(SERVER, codec.Connack(session_present=session_present, properties=make(**answer)))
        self.alias_maximum = {CLIENT: client_aliases, SERVER: server_aliases}
        self.aliases = {CLIENT: {}, SERVER: {}}  # [MQTT-3.3.2-7] aliases do not outlive the connection
        self.connected = True

    def start(self) -> Traffic:
        traffic = Traffic(version="5")
        self.connect(traffic)  # Topic Alias Maximum and the other limits come with the CONNECT and CONNACK
        return traffic


def features(traffic: Traffic) -> dict[str, int]:
    """How often the mix uses each 5.0 feature, so a reader can judge how much of 5.0 the figures exercise."""
    props = codec.properties
    counts: dict[str, int] = dict.fromkeys(
        (
            "publish",
            "publish_topic_alias",
            "publish_empty_topic_name",
            "publish_message_expiry_interval",
            "publish_user_property",
            "publish_content_type",
            "publish_subscription_identifier",
            "publish_without_properties",
            "ack",
            "ack_reason_code",
            "ack_reason_string",
            "subscribe_subscription_identifier",
            "subscription_options_other_than_qos",
            "suback_failure_codes",
            "unsuback_no_subscription_existed",
            "disconnect_reason_code",
        ),
        0,
    )
    for _, packet, _ in traffic.packets:
        if isinstance(packet, codec.Publish):
            found = {prop.identifier for prop in packet.properties}
            counts["publish"] += 1
            counts["publish_topic_alias"] += props.TOPIC_ALIAS in found
            counts["publish_empty_topic_name"] += packet.topic == ""
            counts["publish_message_expiry_interval"] += props.MESSAGE_EXPIRY_INTERVAL in found
            counts["publish_user_property"] += props.USER_PROPERTY in found
            counts["publish_content_type"] += props.CONTENT_TYPE in found
            counts["publish_subscription_identifier"] += props.SUBSCRIPTION_IDENTIFIER in found
            counts["publish_without_properties"] += not found
        elif isinstance(packet, codec.Puback | codec.Pubrec | codec.Pubrel | codec.Pubcomp):
            counts["ack"] += 1
            counts["ack_reason_code"] += packet.reason_code is not None
            counts["ack_reason_string"] += props.first(packet.properties, props.REASON_STRING) is not None
        elif isinstance(packet, codec.Subscribe):
            counts["subscribe_subscription_identifier"] += any(
                prop.identifier == props.SUBSCRIPTION_IDENTIFIER for prop in packet.properties
            )
            counts["subscription_options_other_than_qos"] += sum(sub.options != sub.qos for sub in packet.subscriptions)
        elif isinstance(packet, codec.Suback):
            counts["suback_failure_codes"] += sum(code >= 0x80 for code in packet.return_codes)
        elif isinstance(packet, codec.Unsuback):
            counts["unsuback_no_subscription_existed"] += sum(code == 0x11 for code in packet.reason_codes)
        elif isinstance(packet, codec.Disconnect):
            counts["disconnect_reason_code"] += packet.reason_code is not None
    return counts
