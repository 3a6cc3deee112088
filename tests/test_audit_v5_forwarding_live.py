"""The audit of a real MQTT 5.0 capture whose payloads the judging stage hands the replay as digests: mosquitto,
recorded here with tcpdump, forwards a queued message of 40 bytes to a resumed session with the Subscription
Identifier of the subscription its earlier connection made [MQTT-3.3.4-3], and the copy carries the publisher's
Message Expiry Interval counted down [MQTT-3.3.2-6]. The audit's replay reads those properties from the digested
transcripts: it once lost them, and blamed mosquitto for a Subscription Identifier its copy carried."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import mqttaudit
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.recorder import tcpdump_recording

from .library_runs import start_or_fail

PAYLOAD = b"q" * 40  # above the digest's 16 bytes
IDENTIFIER = 7


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with start_or_fail("mosquitto") as running:
        yield running


def _client(client_id: str, received: list[tuple[bytes, list[int] | None, int | None]]) -> Any:
    import paho.mqtt.client as mqtt

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)

    def on_message(_client: Any, _userdata: Any, message: mqtt.MQTTMessage) -> None:
        properties = message.properties
        received.append(
            (
                message.payload,
                getattr(properties, "SubscriptionIdentifier", None),
                getattr(properties, "MessageExpiryInterval", None),
            )
        )

    client.on_message = on_message
    return client


def _session(port: int, received: list[tuple[bytes, list[int] | None, int | None]], action: str) -> None:
    """The persistent session 'keeper' (Session Expiry 300 s): subscribes to 't' with the identifier, or comes
    back for what was queued."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    client = _client("keeper", received)
    connect = Properties(PacketTypes.CONNECT)
    connect.SessionExpiryInterval = 300
    client.connect("127.0.0.1", port, clean_start=False, properties=connect)
    client.loop_start()
    if action == "subscribe":
        acknowledged = threading.Event()
        client.on_subscribe = lambda *_args: acknowledged.set()
        properties = Properties(PacketTypes.SUBSCRIBE)
        properties.SubscriptionIdentifier = IDENTIFIER
        client.subscribe("t", qos=1, properties=properties)
        assert acknowledged.wait(5.0), "no SUBACK"
    else:
        deadline = time.monotonic() + 5.0
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the client's PUBACK of the copy goes out before its DISCONNECT
    client.disconnect()
    client.loop_stop()


def test_the_audit_passes_a_queued_5_0_copy_that_carries_its_subscription_identifier(
    broker: RunningBroker, tmp_path: Path
) -> None:
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    received: list[tuple[bytes, list[int] | None, int | None]] = []
    path = tmp_path / "forwarded.pcap"
    with tcpdump_recording(path, broker.port):
        _session(broker.port, received, "subscribe")
        publisher = _client("pub", [])
        publisher.connect("127.0.0.1", broker.port)
        publisher.loop_start()
        properties = Properties(PacketTypes.PUBLISH)
        properties.MessageExpiryInterval = 600
        publisher.publish("t", PAYLOAD, qos=1, properties=properties).wait_for_publish(5)
        time.sleep(0.3)
        publisher.disconnect()
        publisher.loop_stop()
        _session(broker.port, received, "resume")
    # What mosquitto sent, as its client read it: the queued copy with the identifier and the expiry counted down.
    [(payload, identifiers, expiry)] = received
    assert payload == PAYLOAD and identifiers == [IDENTIFIER]
    assert expiry is not None and expiry <= 600

    result = mqttaudit.audit(path, out=tmp_path / "out", ports=[broker.port], engine="local")
    deliveries = pq.read_table(tmp_path / "out" / "deliveries").to_pylist()
    assert [(row["client_id"], row["topic"], row["observed"]) for row in deliveries] == [("keeper", "t", True)]
    findings = pq.read_table(tmp_path / "out" / "routing_findings").to_pylist()
    # The lost properties made this MQTT-3.3.4-3: "the copy lacks Subscription Identifier 7 of 't'".
    assert findings == [], findings
    assert result.summary["counts"]["routing_findings"] == 0
    assert not result.failed
