"""mqttaudit serve judging real clients, each started by the test: paho-mqtt (3.1.1 and 5.0), Debian's
mosquitto_pub and mosquitto_sub, MQTT.js under node, and a raw client that publishes to ``sensor/#``.

A well-behaved exchange (subscribe, publish at QoS 0, 1 and 2, receive, disconnect) must leave every connection
without a finding on either side: a finding against the broker would be a defect of serve, and one against the
client a deviation of that client, pinned here with its statement once checked by hand against the spec text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from mqttaudit import codec
from mqttaudit.serve.background import BackgroundServe
from mqttaudit.serve.server import ServeRun

from .observed_captures import RawClient, mosquitto_client, subscribed_client

ROOT = Path(__file__).resolve().parents[1]
MQTTJS = ROOT / ".node" / "node_modules" / "mqtt"


def _clean(run: ServeRun, connections: int) -> None:
    """Every connection judged, none with a finding on either side, none ended by a defect of serve."""
    assert len(run.clients) == connections, [c.name for c in run.clients]
    for client in run.clients:
        assert client.crash is None, client.crash
        assert client.judgement is not None
        assert [(f.rule, f.detail) for f in client.server_findings] == []
        assert [(f.rule, f.detail) for f in client.client_findings] == []
        assert client.judgement.client_assessed, f"{client.name}: nothing of the client was decided"


@pytest.mark.parametrize("version", ["mqttv311", "mqttv5"])
def test_mosquitto_pub_and_sub_are_judged_conforming(version: str) -> None:
    with BackgroundServe() as serve:
        subscriber = subscribed_client(serve.port, "-V", version, "-t", "m/#", "-q", "2", "-C", "3", "-i", "sub")
        for qos in (0, 1, 2):
            mosquitto_client(
                "mosquitto_pub", serve.port, "-V", version, "-t", f"m/{qos}", "-m", f"q{qos}", "-q", str(qos)
            )
        output, _ = subscriber.communicate(timeout=10)
        assert subscriber.returncode == 0
        assert [line for line in output.splitlines() if line.startswith("q")] == ["q0", "q1", "q2"]
        assert serve.wait_for_clients(4)
    run = serve.stop()
    _clean(run, 4)
    assert {c.version for c in run.clients} == {"5.0" if version == "mqttv5" else "3.1.1"}


@pytest.mark.parametrize("protocol", [4, 5])
def test_paho_mqtt_is_judged_conforming(protocol: int) -> None:
    got: list[bytes] = []
    with BackgroundServe() as serve:
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"paho-{protocol}", protocol=protocol)
        client.on_message = lambda _client, _userdata, message: got.append(message.payload)
        subscribed = []
        client.on_subscribe = lambda *args: subscribed.append(args)
        client.connect(serve.host, serve.port)
        client.loop_start()
        try:
            client.subscribe("p/#", qos=2)
            _until(lambda: subscribed)
            for info in [client.publish(f"p/{qos}", f"m{qos}", qos=qos) for qos in (0, 1, 2)]:
                info.wait_for_publish(5)
            _until(lambda: len(got) == 3)
        finally:
            client.disconnect()
            client.loop_stop()
        assert sorted(got) == [b"m0", b"m1", b"m2"]
        assert serve.wait_for_clients(1)
    _clean(serve.stop(), 1)


@pytest.mark.parametrize("protocol", ["4", "5"])
def test_mqtt_js_is_judged_conforming(protocol: str) -> None:
    assert shutil.which("node") is not None and MQTTJS.exists(), "scripts/install-test-deps.sh installs them"
    with BackgroundServe() as serve:
        script = Path(__file__).parent / "clients" / "mqttjs_client.js"
        env = {**os.environ, "NODE_PATH": str(MQTTJS.parent)}
        done = subprocess.run(  # noqa: PLW1510 - the status is asserted with the client's own words
            ["node", str(script), serve.url, protocol, f"js{protocol}"],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [f"js{protocol}/q0,js{protocol}/q1,js{protocol}/q2"]
        assert serve.wait_for_clients(1)
    _clean(serve.stop(), 1)


def test_a_raw_client_publishing_to_a_wildcard_topic_is_closed_and_reported_under_mqtt_3_3_2_2() -> None:
    with BackgroundServe() as serve:
        raw = RawClient(serve.port)
        raw.send(codec.Connect(client_id="raw"))
        raw.receive(codec.Connack)
        raw.socket.sendall(codec.encode(codec.Publish(topic="sensor/#", payload=b"21.5"), validate=False))
        assert raw.socket.recv(100) == b""  # the broker closed the connection
        raw.close()
        assert serve.wait_for_clients(1)
    (client,) = serve.stop().clients
    assert client.ending == "server closed"
    assert client.server_findings == []
    (finding,) = client.client_findings
    assert (finding.rule, finding.side.value, finding.event) == ("MQTT-3.3.2-2", "client", 2)
    assert "MQTT-4.7.1-1" in finding.also  # the same act, one finding
    assert "sensor/#" in finding.detail


def _until(test: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():  # type: ignore[operator]
        if time.monotonic() >= deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
