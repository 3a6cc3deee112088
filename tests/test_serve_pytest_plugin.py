"""The pytest plugin a client library's suite uses (mqttaudit.cli.pytest_plugin), run by pytest's own pytester
in a subprocess: a well-behaved client passes, one that breaks a statement fails the test with the finding, a
scenario chosen by marker applies, and the session ends with the statement coverage."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]

#: The plugin, named when the installed mqttaudit does not register it already (a source tree on PYTHONPATH).
PLUGIN = (
    () if any(e.name == "mqttaudit" for e in entry_points(group="pytest11")) else ("-p", "mqttaudit.cli.pytest_plugin")
)
TESTS = """
import socket

import paho.mqtt.client as mqtt
import pytest

from mqttaudit import codec


def test_a_well_behaved_client(mqttaudit_serve):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="good", protocol=mqtt.MQTTv5)
    client.connect(mqttaudit_serve.host, mqttaudit_serve.port)
    client.loop_start()
    client.publish("a/b", b"x", qos=1).wait_for_publish(5)
    client.disconnect()
    client.loop_stop()


def test_a_client_that_publishes_to_a_wildcard(mqttaudit_serve):
    with socket.create_connection((mqttaudit_serve.host, mqttaudit_serve.port)) as raw:
        raw.sendall(codec.encode(codec.Connect(client_id="bad")))
        raw.recv(4)
        raw.sendall(codec.encode(codec.Publish(topic="sensor/#", payload=b"1"), validate=False))
        raw.recv(4)


@pytest.mark.mqttaudit_scenario("receive-maximum-1")
def test_a_scenario_chosen_by_marker(mqttaudit_serve):
    with socket.create_connection((mqttaudit_serve.host, mqttaudit_serve.port)) as raw:
        raw.sendall(codec.encode(codec.Connect(protocol_level=5, client_id="flood"), version=5))
        connack = raw.recv(64)
        assert connack[5:8] == bytes.fromhex("210001")  # Receive Maximum 1
        for packet_id in (1, 2):
            raw.sendall(codec.encode(codec.Publish(topic="t", qos=1, packet_id=packet_id), version=5))
        raw.recv(64)
"""


def test_the_fixture_fails_a_test_whose_client_broke_a_statement(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_client=TESTS)
    result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_a_client_that_publishes_to_a_wildcard*",
            "*MQTT-3.3.2-2*sensor/#*",
            "*MQTT-3.3.4-7*Receive Maximum 1*",
            "*mqttaudit serve: client statement coverage*",
            "MQTT 3.1.1: * of 72 client statements exercised*",
            "MQTT 5.0: * of 133 client statements exercised*",
        ]
    )


def test_an_unknown_scenario_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_client="def test_it(mqttaudit_serve):\n    pass\n")
    result = pytester.runpytest_subprocess(*PLUGIN, "--mqttaudit-scenario", "no-such", timeout=60)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*no mqttaudit scenario 'no-such'*"])
