"""Captures of real transports, recorded with tcpdump: the same clients (paho-mqtt, and raw clients that break known
rules) talk through one amqtt broker once over TCP and once over WebSocket, and both captures are audited with the
same findings, through the pure path and through ``mqttaudit audit`` on Spark; a WebSocket defect (a text frame) is
named by its statement. A TLS capture of mosquitto without keys is reported as encrypted, not assessable, exit 4."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import paho.mqtt.client as mqtt
import pyarrow.parquet as pq
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request

from mqttaudit.capture.conversation import ENCRYPTED_VERSION
from mqttaudit.capture.layers import ENCRYPTED, ENCRYPTED_REASON, PLAIN, WEBSOCKET
from mqttaudit.cli.main import main
from mqttaudit.codec import Connect, Pingreq, encode
from mqttaudit.probe.brokers import RunningBroker, free_port, launch_broker
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.probe.traffic import MISBEHAVIOUR

from .live import configured_mosquitto
from .observed_captures import HOST, observe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A client that sends an MQTT packet in a WebSocket text frame [MQTT-6.0.0-1] (over TCP: the same packet).
TEXT_FRAME = "bad-text-frame"


class Transport:
    """A socket that speaks MQTT bytes over plain TCP, or inside binary WebSocket frames (wsproto's client)."""

    def __init__(self, port: int, websocket: bool) -> None:
        self.socket = socket.create_connection((HOST, port), timeout=5)
        self.ws: WSConnection | None = None
        if websocket:
            ws = self.ws = WSConnection(ConnectionType.CLIENT)
            self.socket.sendall(ws.send(Request(host=f"{HOST}:{port}", target="/", subprotocols=["mqtt"])))
            while not any(isinstance(event, AcceptConnection) for event in self._events()):
                pass

    def _events(self) -> list[object]:
        assert self.ws is not None
        self.ws.receive_data(self.socket.recv(65536) or None)
        return list(self.ws.events())

    def send(self, data: bytes, *, text: bool = False) -> None:
        if self.ws is None:
            self.socket.sendall(data)
        elif text:
            # wsproto sends text as text: the frame's opcode is what the test is after, its bytes are the packet's.
            from wsproto.events import TextMessage

            self.socket.sendall(self.ws.send(TextMessage(data=data.decode("latin-1"))))
        else:
            self.socket.sendall(self.ws.send(BytesMessage(data=data)))

    def received(self) -> bool:
        """Reads until something arrives; False when the server closed."""
        try:
            data = self.socket.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return False
        if self.ws is not None and data:
            self.ws.receive_data(data)
            list(self.ws.events())
        return bool(data)

    def close(self) -> None:
        self.socket.close()


def raw_client(port: int, websocket: bool, client_id: str, defect: bytes, *, text: bool = False) -> None:
    """Connects, sends ``defect`` once the CONNACK is in, and waits up to 3 s for the broker to close."""
    client = Transport(port, websocket)
    try:
        client.send(encode(Connect(client_id=client_id, keep_alive=30)))
        assert client.received(), f"{client_id}: no CONNACK"
        client.send(defect, text=text)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and client.received():
            pass
    finally:
        client.close()


def talk(port: int, websocket: bool) -> None:
    """The same traffic over either transport: paho-mqtt subscribes and publishes at QoS 0, 1 and 2, then each
    misbehaving raw client sends its defect."""
    transport = "websockets" if websocket else "tcp"
    received: list[bytes] = []
    subscriber = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="subscriber", transport=transport)
    subscriber.on_message = lambda _client, _userdata, message: received.append(message.payload)
    subscriber.connect(HOST, port)
    subscriber.loop_start()
    subscriber.subscribe("plant/#", qos=2)
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="publisher", transport=transport)
    publisher.connect(HOST, port)
    publisher.loop_start()
    time.sleep(0.5)
    for qos in (0, 1, 2):
        publisher.publish("plant/line", b"reading %d" % qos, qos=qos).wait_for_publish(5)
    deadline = time.monotonic() + 5
    while len(received) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    for client in (publisher, subscriber):
        client.disconnect()
        client.loop_stop()
    assert len(received) == 3, received
    for client_id, defect, _rule in MISBEHAVIOUR:
        raw_client(port, websocket, client_id, defect)
    raw_client(port, websocket, TEXT_FRAME, encode(Pingreq()), text=True)


@pytest.fixture(scope="module")
def amqtt_tcp_and_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """amqtt with a TCP and a WebSocket listener, both on 127.0.0.1."""
    workdir = tmp_path_factory.mktemp("amqtt")
    tcp, ws = free_port(), free_port()
    config = {
        "listeners": {
            "default": {"type": "tcp", "bind": f"{HOST}:{tcp}"},
            "ws": {"type": "ws", "bind": f"{HOST}:{ws}"},
        },
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }
    (workdir / "amqtt.yaml").write_text(json.dumps(config))
    command = [sys.executable, "-m", "amqtt.scripts.broker_script", "-c", str(workdir / "amqtt.yaml")]
    with launch_broker("amqtt", command, port=tcp, workdir=workdir, other_ports=[ws]):
        yield tcp, ws


@pytest.fixture(scope="module")
def recorded(amqtt_tcp_and_ws: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("recorded")
    captures = {}
    for name, port, websocket in (("tcp", amqtt_tcp_and_ws[0], False), ("ws", amqtt_tcp_and_ws[1], True)):
        captures[name] = folder / f"{name}.pcap"
        with tcpdump_recording(captures[name], port):
            talk(port, websocket)
    return captures


def findings_by_client(capture: Path, port: int) -> dict[str, set[tuple[str, str]]]:
    """(side, statement) of every finding, by the connection's ClientId (connections without one left out)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for observed in observe(capture, port).values():
        client_id = observed.connection_row["client_id"]
        if isinstance(client_id, str):
            found.setdefault(client_id, set()).update(observed.findings)
    return found


def test_a_websocket_capture_is_audited_with_the_findings_of_the_same_traffic_over_tcp(
    amqtt_tcp_and_ws: tuple[int, int], recorded: dict[str, Path]
) -> None:
    tcp_port, ws_port = amqtt_tcp_and_ws
    over_tcp = findings_by_client(recorded["tcp"], tcp_port)
    over_ws = findings_by_client(recorded["ws"], ws_port)
    for client_id, _defect, rule in MISBEHAVIOUR:
        assert ("client", rule) in over_ws[client_id], client_id
    assert over_tcp["publisher"] == over_ws["publisher"] == set()
    assert over_tcp["subscriber"] == over_ws["subscriber"] == set()
    # Apart from the text frame, every client's findings are the same over both transports.
    assert over_ws.pop(TEXT_FRAME) - over_tcp.pop(TEXT_FRAME) == {("client", "MQTT-6.0.0-1")}
    assert over_ws == over_tcp
    transports = {observed.audit.transport for observed in observe(recorded["ws"], ws_port).values()}
    assert WEBSOCKET in transports and transports <= {WEBSOCKET, PLAIN}  # plain: the readiness probe's, empty


def test_the_websocket_capture_s_bytes_are_accounted_for_and_the_text_frame_set_aside(
    amqtt_tcp_and_ws: tuple[int, int], recorded: dict[str, Path]
) -> None:
    for observed in observe(recorded["ws"], amqtt_tcp_and_ws[1]).values():
        if observed.audit.transport != WEBSOCKET:
            continue  # the readiness probe's empty connection
        assert observed.audit.total.reconciles
        if observed.connection_row["client_id"] == TEXT_FRAME:
            reasons = {hole.reason for hole in observed.audit.unassessable}
            assert any("text frame" in reason for reason in reasons), reasons
        else:
            assert not observed.audit.unassessable, observed.connection_row["client_id"]


def test_mqttaudit_audit_finds_mqtt_over_websocket_on_any_port_with_the_same_findings(
    spark: SparkSession,
    amqtt_tcp_and_ws: tuple[int, int],
    recorded: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws_port = amqtt_tcp_and_ws[1]
    status = main(["audit", str(recorded["ws"]), "--out", str(tmp_path), "--tolerance", "2"])
    capsys.readouterr()
    assert status == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [entry["port"] for entry in summary["detection"]["ports"]] == [ws_port]
    violations = pq.read_table(tmp_path / "violations").to_pylist()
    connections = {row["flow"]: row for row in pq.read_table(tmp_path / "connections").to_pylist()}
    found: dict[str, set[tuple[str, str]]] = {}
    for row in violations:
        found.setdefault(connections[row["flow"]]["client_id"], set()).add((row["actor"], row["rule"]))
    expected = {client: rules for client, rules in findings_by_client(recorded["ws"], ws_port).items() if rules}
    assert found == expected
    text_row = next(row for row in violations if row["rule"] == "MQTT-6.0.0-1")
    assert (text_row["actor"], text_row["origin"], text_row["level"]) == ("client", "transport", "MUST")
    assert text_row["evidence"].startswith("81") and text_row["expected"]
    assert {row["transport"] for row in connections.values()} == {WEBSOCKET}
    assert "MQTT-6.0.0-1" in (tmp_path / "findings.md").read_text()


# -- TLS without keys ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_capture(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """mosquitto with a TLS listener (a trustme certificate) and mosquitto_pub publishing through it, recorded."""
    import trustme

    workdir = tmp_path_factory.mktemp("tls")
    # mosquitto started by root runs as the user mosquitto: its certificate lies where that user can read it.
    readable = Path(tempfile.mkdtemp(prefix="mqttaudit-tls-"))
    readable.chmod(0o755)
    authority = trustme.CA()
    certificate = authority.issue_cert(HOST)
    authority.cert_pem.write_to_path(str(workdir / "ca.pem"))
    certificate.cert_chain_pems[0].write_to_path(str(readable / "cert.pem"))
    certificate.private_key_pem.write_to_path(str(readable / "key.pem"))
    for path in readable.iterdir():
        path.chmod(0o644)
    settings = (f"certfile {readable / 'cert.pem'}", f"keyfile {readable / 'key.pem'}")
    broker: RunningBroker
    try:
        with configured_mosquitto(workdir, *settings) as broker, tcpdump_recording(workdir / "tls.pcap", broker.port):
            for qos in (0, 1):
                command = ["mosquitto_pub", "-h", HOST, "-p", str(broker.port), "--cafile", str(workdir / "ca.pem")]
                subprocess.run([*command, "-t", "plant/line", "-m", "secret", "-q", str(qos)], check=True, timeout=10)
    finally:
        shutil.rmtree(readable)
    return workdir / "tls.pcap", broker.port


def test_tls_without_keys_is_encrypted_not_assessable_never_mqtt(tls_capture: tuple[Path, int]) -> None:
    capture, port = tls_capture
    observed = [o for o in observe(capture, port).values() if o.audit.total.stream]
    assert len(observed) == 2
    for connection in observed:
        audit = connection.audit
        assert (audit.transport, audit.version) == (ENCRYPTED, ENCRYPTED_VERSION)
        assert not audit.frames and not connection.findings
        assert audit.total.unassessable == audit.total.stream > 0
        assert {hole.reason for hole in audit.unassessable} == {ENCRYPTED_REASON}


def test_mqttaudit_audit_of_tls_without_keys_exits_4_with_the_bytes_not_assessable(
    spark: SparkSession, tls_capture: tuple[Path, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture, port = tls_capture
    status = main(["audit", str(capture), "--ports", str(port), "--out", str(tmp_path)])
    out = capsys.readouterr()
    assert status == 4
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["violations"] == 0
    assert summary["versions"][ENCRYPTED_VERSION]["connections"] == 2
    assert summary["bytes"]["unsynced_bytes"] == summary["bytes"]["mqtt_bytes"] > 0
    assert "encrypted" in out.out + out.err
    gaps = pq.read_table(tmp_path / "gaps").to_pylist()
    assert {row["reason"] for row in gaps} == {ENCRYPTED_REASON}
    assert sum(row["length"] for row in gaps) == summary["bytes"]["unsynced_bytes"]
