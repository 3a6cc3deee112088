"""A captured connection through the judge as table rows, and the routing replay of one broker (pure, no Spark)."""

from __future__ import annotations

import pickle

from mqttaudit import codec
from mqttaudit.judge import JudgeConfig
from mqttaudit.pipeline.conversations import Flow, digested, judge_flow
from mqttaudit.pipeline.replay import replay_broker

from .talk import CONNACK_OK, Talk, connected, publish, suback, subscribe

CONFIG = JudgeConfig(close_grace=2.0, answer_timeout=2.0)


def flow(name: str, talk: Talk) -> Flow:
    return Flow("cap.pcap", name, "10.0.0.2:5000", "10.0.0.1:1883", talk.events, list(range(len(talk.events))))


def test_packets_violations_and_the_connection_row() -> None:
    talk = connected("c1").client("82050001000000").server(suback(1)).quiet(after=5)
    result = judge_flow(flow("f1", talk), CONFIG)
    assert result.packets.data["type"] == ["CONNECT", "CONNACK", "SUBSCRIBE", "SUBACK"]
    assert result.packets.data["direction"] == ["client", "server", "client", "server"]
    rows = list(
        zip(
            result.violations.data["rule"],
            result.violations.data["actor"],
            result.violations.data["origin"],
            strict=True,
        )
    )
    assert ("MQTT-4.7.3-1", "client", "codec") in rows  # the client sent the empty filter
    assert ("MQTT-4.7.3-1", "server", "judge") in rows  # the server accepted it
    assert ("MQTT-4.8.0-1", "server", "judge") in rows
    assert result.connection.data["client_id"] == ["c1"]
    assert result.connection.data["how"] == ["capture-end"]


def test_the_replay_finds_a_missing_delivery_and_lists_what_was_owed() -> None:
    message = publish("t/1", b"x" * 40, qos=1, packet_id=1)
    sub = connected("sub").client(subscribe(1, ("t/+", 1))).server(suback(1, 1)).quiet(at=10.0)
    pub = connected("pub", at=1.0).client(message).server(codec.Puback(packet_id=1)).quiet(at=10.0)
    blobs = [(name, judge_flow(flow(name, talk), CONFIG).transcript) for name, talk in (("sub", sub), ("pub", pub))]
    deliveries, findings, _ = replay_broker("10.0.0.1:1883", blobs, CONFIG)
    assert deliveries.data["subscriber_flow"] == ["sub"] and deliveries.data["expected"] == ["owed"]
    assert deliveries.data["observed"] == [False] and deliveries.data["qos_expected"] == [1]
    assert list(zip(findings.data["kind"], findings.data["rule"], strict=True)) == [("missing", "MQTT-4.5.0-1")]


def test_payload_digests_keep_equality_and_emptiness() -> None:
    talk = Talk().client(codec.Connect(client_id="d")).server(CONNACK_OK)
    talk.client(publish("a", b"y" * 100, retain=True), publish("a", b"", retain=True))
    transcript = pickle.loads(judge_flow(flow("d", talk), CONFIG).transcript)
    big, empty = (p.message.payload for p in transcript.published)
    assert len(big) == 16 and empty == b""
    assert digested(transcript).published[0].message.payload == big
