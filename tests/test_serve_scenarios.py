"""mqttaudit serve's scenarios: the catalogue itself, real clients put in them (paho-mqtt and MQTT.js, each through
behaviour topics), and raw clients scripted to break each checked statement, so that every verdict is shown able to
fail.

The deviations pinned here were checked by hand against the MQTT text, on the bytes. paho-mqtt 2.2 as a 5.0 client
sends past the server's Receive Maximum [MQTT-3.3.4-7], past its Maximum Packet Size [MQTT-3.2.2-15], a retained
PUBLISH after Retain Available 0 [MQTT-3.2.2-14], and re-sends a message of a session the broker said it no longer
has [MQTT-3.2.2-5]. MQTT.js 5.16 does the first three too, and in 3.1.1 and 5.0 sends its unacknowledged QoS 1
PUBLISH again on a resumed session with DUP 0 (first byte 0x32, not 0x3a) [MQTT-3.3.1-1].
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.serve.background import BackgroundServe
from mqttaudit.serve.behaviour import parse_command
from mqttaudit.serve.scenarios import SCENARIOS, scenario
from mqttaudit.serve.server import ServedClient, ServeRun

from .observed_captures import RawClient

HARNESS = Path(__file__).parent / "clients" / "paho_behaviour.py"
MQTTJS_HARNESS = Path(__file__).parent / "clients" / "mqttjs_behaviour.js"
ROOT = Path(__file__).resolve().parents[1]
MQTTJS = ROOT / ".node" / "node_modules" / "mqtt"
#: The judge's answer timeout and close grace where a test waits them out (a silence is what it judges).
SHORT = 1.0


def test_every_scenario_names_client_statements_and_hostile_ones_the_server_statements_they_break() -> None:
    for name, each in SCENARIOS.items():
        assert each.statements or each.hostile, name  # a hostile one may provoke only robustness (a SHOULD)
        for statement in each.statements:
            assert statement.rule.binds("client"), (name, statement)
        for statement in each.provoked:
            assert statement.rule.binds("server"), (name, statement)
        assert name.startswith("hostile/") == each.hostile or (each.raw == b"" and not each.hostile)
        for command in each.commands:
            parse_command(command)  # raises on a command the harness could not carry out
    names = set(SCENARIOS)
    assert {"receive-maximum-1", "receive-maximum-2", "topic-alias-maximum-0", "topic-alias-maximum-1"} <= names
    assert {"disconnect-0x8b-short", "disconnect-0x8b-long", "disconnect-0x94-short"} <= names


def test_a_behaviour_command_that_is_not_one_is_refused() -> None:
    assert parse_command("publish 3 1 a/b 100 retain").size == 100
    for text in ("publish 3 4 a/b", "publish x 1 a", "jump", "publish 1 1 a 2 3"):
        with pytest.raises(ValueError, match="not a behaviour command"):
            parse_command(text)


def _paho(name: str, protocol: int = 5, idle: float = 3.0) -> ServeRun:
    with BackgroundServe(scenario=scenario(name)) as serve:
        client_id = f"paho-{name.replace('/', '-')}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, str(HARNESS), serve.host, str(serve.port), str(protocol), client_id]
        done = subprocess.run(  # noqa: PLW1510 - the status is asserted with what the harness said
            [*command, "--idle", str(idle)], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, done.stderr
        time.sleep(0.2)  # the harness's last close reaches the broker
    return serve.stop()


def _mqttjs(name: str, protocol: int = 5, idle: float = 3.0) -> ServeRun:
    assert MQTTJS.exists(), "scripts/install-test-deps.sh installs MQTT.js"
    with BackgroundServe(scenario=scenario(name)) as serve:
        client_id = f"js-{name.replace('/', '-')}"
        env = {**os.environ, "NODE_PATH": str(MQTTJS.parent)}
        command = ["node", str(MQTTJS_HARNESS), serve.url, str(protocol), client_id, str(idle)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)  # noqa: PLW1510
        assert done.returncode == 0, done.stderr
        time.sleep(0.2)
    return serve.stop()


def _rules(run: ServeRun) -> set[str]:
    for client in run.clients:
        assert client.crash is None, client.crash
        assert client.server_findings == [], [(f.rule, f.detail) for f in client.server_findings]
    return {rule for client in run.clients for finding in client.client_findings for rule in finding.rules}


@pytest.mark.parametrize(
    ("name", "broken"),
    [
        ("receive-maximum-1", "MQTT-3.3.4-7"),
        ("receive-maximum-2", "MQTT-3.3.4-7"),
        ("maximum-packet-size-small", "MQTT-3.2.2-15"),
        ("retain-unavailable", "MQTT-3.2.2-14"),
        ("session-present-0-after-stored", "MQTT-3.2.2-5"),
    ],
)
def test_paho_mqtt_5_deviations(name: str, broken: str) -> None:
    run = _paho(name)
    assert broken in _rules(run)


@pytest.mark.parametrize("name", ["reconnect-mid-qos1", "reconnect-mid-qos2", "topic-alias-absent-on-reconnect"])
@pytest.mark.parametrize("protocol", [4, 5])
def test_paho_mqtt_resumes_its_flows_and_keeps_no_alias(name: str, protocol: int) -> None:
    run = _paho(name, protocol)
    if SCENARIOS[name].version == "5.0" and protocol == 4:
        assert _rules(run) == set()
        return
    assert _rules(run) == set()
    assert len(run.clients) >= 2, "the scenario's second connection never came"
    if name.startswith("reconnect-mid"):
        second = run.clients[1]
        assert second.judgement is not None
        resent = [e for e in second.events if e.get("from") == "client" and "DUP" in str(e.get("packet"))]
        assert resent or name.endswith("qos2"), second.events


@pytest.mark.parametrize(
    ("name", "protocol", "broken"),
    [
        ("receive-maximum-2", 5, "MQTT-3.3.4-7"),
        ("maximum-packet-size-small", 5, "MQTT-3.2.2-15"),
        ("retain-unavailable", 5, "MQTT-3.2.2-14"),
        ("reconnect-mid-qos1", 4, "MQTT-3.3.1-1"),
        ("reconnect-mid-qos1", 5, "MQTT-3.3.1-1"),
        ("reconnect-mid-qos2", 4, None),
        ("reconnect-mid-qos2", 5, None),
    ],
)
def test_mqtt_js_in_scenarios(name: str, protocol: int, broken: str | None) -> None:
    rules = _rules(_mqttjs(name, protocol))
    assert rules == set() if broken is None else broken in rules


def test_paho_mqtt_handles_server_disconnects_in_both_forms() -> None:
    """serve sends its DISCONNECT once paho has subscribed; paho connects again by itself, and the harness leaves
    when it has been idle: a connection paho opened again and closed before serve's DISCONNECT came is the harness
    leaving, not the scenario (how the two interleave depends on the machine's load). Every connection that got the
    DISCONNECT ended by serve's close, with nothing from paho after it."""
    for name in ("disconnect-0x8b-short", "disconnect-0x8e-long"):
        run = _paho(name, idle=1.5)
        assert _rules(run) == set()
        endings = [(client.ending, _got_disconnect(client)) for client in run.clients]
        assert ("server closed", True) in endings, endings
        assert all(ending == ("server closed" if got else "client closed") for ending, got in endings), endings


def _got_disconnect(client: ServedClient) -> bool:
    """Whether serve sent ``client`` a DISCONNECT: a frame from the server whose first byte is 0xE0 (type 14)."""
    return any(event.get("from") == "server" and str(event.get("hex", "")).startswith("e0") for event in client.events)


# -- raw clients: each verdict shown able to fail ------------------------------------------------------------------


def _connect(port: int, client_id: str, version: int = 5, **fields: object) -> RawClient:
    raw = RawClient(port, version)
    properties = make(session_expiry_interval=300) if version == 5 else ()
    raw.send(codec.Connect(protocol_level=version, client_id=client_id, clean_session=False, properties=properties,
                           **fields))  # type: ignore[arg-type]  # fmt: skip
    assert raw.expect(codec.Connack) is not None
    return raw


@pytest.mark.parametrize("version", [4, 5])
def test_a_client_that_does_not_resend_its_unacknowledged_publish_breaks_mqtt_4_4_0_1(version: int) -> None:
    with BackgroundServe(scenario=scenario("reconnect-mid-qos1"), answer_timeout=SHORT) as serve:
        first = _connect(serve.port, "forgetful", version)
        first.send(codec.Publish(topic="t", payload=b"x", qos=1, packet_id=7))
        assert first.expect(codec.Puback) is None  # dropped, unacknowledged
        first.close()
        second = _connect(serve.port, "forgetful", version)
        time.sleep(SHORT + 0.3)  # past the judge's answer timeout with the connection open: silence is the evidence
        second.send(codec.Disconnect())
        second.close()
        assert serve.wait_for_clients(2)
    run = serve.stop()
    assert _rules(run) == {"MQTT-4.4.0-1"}
    (finding,) = run.clients[1].client_findings
    assert "Packet Identifier 7" in finding.detail


@pytest.mark.parametrize("version", [4, 5])
def test_a_client_that_resends_without_dup_breaks_mqtt_3_3_1_1(version: int) -> None:
    with BackgroundServe(scenario=scenario("reconnect-mid-qos1")) as serve:
        first = _connect(serve.port, "no-dup", version)
        first.send(codec.Publish(topic="t", payload=b"x", qos=1, packet_id=7))
        assert first.expect(codec.Puback) is None
        first.close()
        second = _connect(serve.port, "no-dup", version)
        second.send(codec.Publish(topic="t", payload=b"x", qos=1, packet_id=7))
        assert second.expect(codec.Puback) is not None
        second.send(codec.Disconnect())
        second.close()
        assert serve.wait_for_clients(2)
    assert "MQTT-3.3.1-1" in _rules(serve.stop())


def test_a_client_that_honours_receive_maximum_1_is_not_faulted() -> None:
    with BackgroundServe(scenario=scenario("receive-maximum-1")) as serve:
        raw = _connect(serve.port, "patient")
        for packet_id in (1, 2):
            raw.send(codec.Publish(topic="t", payload=b"x", qos=1, packet_id=packet_id))
            assert raw.expect(codec.Puback) is not None  # held for 1 s, then sent
        raw.send(codec.Disconnect())
        raw.close()
        assert serve.wait_for_clients(1)
    run = serve.stop()
    assert _rules(run) == set()
    assert "MQTT-3.3.4-7" in run.clients[0].judgement.client_assessed  # type: ignore[union-attr]


def test_a_hostile_connack_with_reserved_flags_is_closed_on_by_a_strict_client_and_provokes_no_defect() -> None:
    with BackgroundServe(scenario=scenario("hostile/connack-reserved-flags"), close_grace=SHORT) as serve:
        raw = RawClient(serve.port, 4)
        raw.send(codec.Connect(client_id="strict"))
        raw.socket.recv(16)
        raw.close()  # a strict client closes on the malformed CONNACK
        lenient = RawClient(serve.port, 4)
        lenient.send(codec.Connect(client_id="lenient"))
        lenient.socket.recv(16)
        lenient.send(codec.Pingreq())  # carries on as if the CONNACK were sound
        time.sleep(SHORT + 0.5)  # past the judge's close grace: staying open is the evidence
        lenient.close()
        assert serve.wait_for_clients(2)
    run = serve.stop()
    strict, carried_on = sorted(run.clients, key=lambda c: c.client_id != "strict")
    assert strict.client_findings == [] and strict.server_findings == []
    assert [f.rule for f in strict.provoked_findings] == ["MQTT-2.2.2-1"]
    assert "MQTT-2.2.2-2" in {rule for f in carried_on.client_findings for rule in f.rules}  # close on bad flags


def _served(run: ServeRun, client_id: str) -> ServedClient:
    return next(client for client in run.clients if client.client_id == client_id)


@pytest.mark.parametrize("answers", [True, False])
def test_a_retained_qos_2_message_must_be_received_with_pubrec_and_pubcomp(answers: bool) -> None:
    with BackgroundServe(scenario=scenario("retained"), answer_timeout=SHORT) as serve:
        raw = _connect(serve.port, f"receiver-{answers}")
        raw.send(codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="r/+", qos=2)]))
        delivered = raw.receive(codec.Publish)
        assert isinstance(delivered, codec.Publish) and delivered.retain and delivered.qos == 2
        assert delivered.topic == "r/retained"
        if answers:
            raw.send(codec.Pubrec(packet_id=delivered.packet_id))
            assert raw.receive(codec.Pubrel) is not None
            raw.send(codec.Pubcomp(packet_id=delivered.packet_id))
        time.sleep(SHORT + 0.3 if not answers else 0.1)  # past the judge's answer timeout for the silent one
        raw.send(codec.Disconnect())
        raw.close()
        assert serve.wait_for_clients(1)
    rules = _rules(serve.stop())
    assert rules == set() if answers else "MQTT-4.3.3-8" in rules
