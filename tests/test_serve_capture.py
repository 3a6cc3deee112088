"""Capture round trip: a tcpdump recording of real clients talking to mqttaudit serve, audited by ``mqttaudit audit``
(the local engine: the pipeline's own stages without Spark), names the same client findings that serve reported
live, connection by connection."""

from __future__ import annotations

import json
import time
from pathlib import Path

from mqttaudit import codec
from mqttaudit.cli.main import main
from mqttaudit.codec.properties import make
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.serve.background import BackgroundServe
from mqttaudit.serve.server import ServedClient

from .observed_captures import RawClient, mosquitto_client


def _client_rules(client: ServedClient) -> set[str]:
    return {str(rule) for finding in client.client_findings for rule in finding.rules}


def test_a_capture_of_clients_talking_to_serve_audits_with_the_findings_serve_reported_live(tmp_path: Path) -> None:
    capture = tmp_path / "serve.pcap"
    with BackgroundServe() as serve, tcpdump_recording(capture, serve.port):
        mosquitto_client("mosquitto_pub", serve.port, "-V", "mqttv5", "-t", "a/b", "-m", "fine", "-q", "1")
        wildcard = RawClient(serve.port)
        wildcard.send(codec.Connect(client_id="wildcard"))
        wildcard.receive(codec.Connack)
        wildcard.socket.sendall(codec.encode(codec.Publish(topic="sensor/#", payload=b"21.5"), validate=False))
        assert wildcard.socket.recv(16) == b""
        wildcard.close()
        alias = RawClient(serve.port, 5)
        alias.send(codec.Connect(protocol_level=5, client_id="alias"))
        assert alias.expect(codec.Connack) is not None
        alias.send(codec.Publish(topic="t", payload=b"x", properties=make(topic_alias=3)))  # the maximum is 2
        assert alias.expect(codec.Disconnect) is not None
        alias.close()
        assert serve.wait_for_clients(3)
        time.sleep(0.2)
    live = {int(client.peer.rsplit(":", 1)[1]): client for client in serve.stop().clients}
    out = tmp_path / "audit"
    argv = [str(capture), "--engine", "local", "--ports", str(serve.port), "--out", str(out)]
    assert main(["audit", *argv]) == 1  # findings
    rows = [json.loads(line) for line in (out / "findings.jsonl").read_text().splitlines()]
    audited: dict[int, set[tuple[str, str]]] = {port: set() for port in live}
    for row in rows:
        client_port = row["src_port"] if row["actor"] == "client" else row["dest_port"]
        audited[client_port].add((row["actor"], row["rule"]))
    assert set(audited) == set(live)
    for port, client in live.items():
        assert client.server_findings == []
        from_capture = {rule for actor, rule in audited[port] if actor == "client"}
        # Every finding serve reported is in the audit, which names nothing serve did not (a row per statement there,
        # one act one finding here: the statements the same act broke are the finding's ``also``).
        assert {str(finding.rule) for finding in client.client_findings} <= from_capture, client.client_id
        assert from_capture <= _client_rules(client), (client.client_id, client.client_findings)
        assert not {rule for actor, rule in audited[port] if actor == "server"}
    by_id = {client.client_id: _client_rules(client) for client in live.values()}
    assert "MQTT-3.3.2-2" in by_id["wildcard"]
    assert "MQTT-3.3.2-9" in by_id["alias"]
    assert not any(rules for client_id, rules in by_id.items() if client_id not in ("wildcard", "alias"))
