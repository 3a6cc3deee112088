"""Captures of real transports, recorded with tcpdump: the same clients (paho-mqtt, and raw clients that break known
rules) talk through one amqtt broker once over TCP and once over WebSocket, and both captures are audited with the
same findings, through the pure path and through ``mqttaudit audit`` on Spark; a WebSocket defect (a text frame) is
named by its statement. A TLS capture of mosquitto without keys is reported as encrypted, not assessable, exit 4."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import paho.mqtt.client as mqtt
import pyarrow.parquet as pq
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request

from mqttaudit.capture.layers import PLAIN, TLS, WEBSOCKET
from mqttaudit.capture.tls import KeyLog
from mqttaudit.cli.main import main
from mqttaudit.codec import Connect, Publish, encode
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.probe.traffic import MISBEHAVIOUR

from .observed_captures import HOST, observe
from .transports import TlsMaterial, TransportBroker, amqtt_websocket, tls_material

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A client that sends an MQTT packet in a WebSocket text frame [MQTT-6.0.0-1] (over TCP: the same packet).
TEXT_FRAME = "bad-text-frame"
#: What that client sends in a text frame: a QoS 0 PUBLISH whose bytes are all ASCII, so that they are valid UTF-8
#: (a WebSocket library may close on invalid UTF-8 in a text frame before MQTT sees the packet) and the frame carries
#: exactly the packet's bytes.
TEXT_PACKET = encode(Publish(topic="plant/text", payload=b"hi", qos=0))
assert max(TEXT_PACKET) < 0x80


class Transport:
    """A socket that speaks MQTT bytes over plain TCP, or inside binary WebSocket frames (wsproto's client)."""

    def __init__(self, port: int, websocket: bool, context: ssl.SSLContext | None = None) -> None:
        self.socket = socket.create_connection((HOST, port), timeout=5)
        if context is not None:
            self.socket = context.wrap_socket(self.socket, server_hostname=HOST)
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
            # wsproto sends text as UTF-8: ASCII bytes go through unchanged.
            from wsproto.events import TextMessage

            self.socket.sendall(self.ws.send(TextMessage(data=data.decode("ascii"))))
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


def raw_client(
    port: int,
    websocket: bool,
    client_id: str,
    defect: bytes,
    *,
    text: bool = False,
    context: ssl.SSLContext | None = None,
) -> None:
    """Connects, sends ``defect`` once the CONNACK is in, and waits up to 3 s for the broker to close."""
    client = Transport(port, websocket, context)
    try:
        client.send(encode(Connect(client_id=client_id, keep_alive=30)))
        assert client.received(), f"{client_id}: no CONNACK"
        client.send(defect, text=text)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and client.received():
            pass
    finally:
        client.close()


def talk(port: int, websocket: bool, context: ssl.SSLContext | None = None) -> None:
    """The same traffic over any transport (TLS with ``context``): paho-mqtt subscribes and publishes at QoS 0, 1
    and 2, then each misbehaving raw client sends its defect."""
    transport = "websockets" if websocket else "tcp"
    received: list[bytes] = []
    subscriber = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="subscriber", transport=transport)
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="publisher", transport=transport)
    if context is not None:
        subscriber.tls_set_context(context)
        publisher.tls_set_context(context)
    subscriber.on_message = lambda _client, _userdata, message: received.append(message.payload)
    subscriber.connect(HOST, port)
    subscriber.loop_start()
    subscriber.subscribe("plant/#", qos=2)
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
        raw_client(port, websocket, client_id, defect, context=context)
    raw_client(port, websocket, TEXT_FRAME, TEXT_PACKET, text=True, context=context)


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_material(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def amqtt(material: TlsMaterial, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TransportBroker]:
    """amqtt with TCP, WebSocket, TLS and WebSocket-over-TLS listeners, all on 127.0.0.1."""
    with amqtt_websocket(tmp_path_factory.mktemp("amqtt"), material) as broker:
        yield broker


@pytest.fixture(scope="module")
def recorded(
    amqtt: TransportBroker, material: TlsMaterial, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The same traffic over TCP, WebSocket and WebSocket over TLS (its key log written by the clients beside it,
    ``wss.keys``), each recorded with tcpdump."""
    folder = tmp_path_factory.mktemp("recorded")
    captures = {}
    for name in ("tcp", "ws", "wss"):
        captures[name] = folder / f"{name}.pcap"
        context = None
        if name == "wss":
            context = ssl.create_default_context(cafile=str(material.cafile))
            context.keylog_filename = str(folder / "wss.keys")
        with tcpdump_recording(captures[name], amqtt.ports[name]):
            talk(amqtt.ports[name], websocket=name != "tcp", context=context)
    captures["wss.keys"] = folder / "wss.keys"
    return captures


def findings_by_client(capture: Path, port: int, keylog: KeyLog | None = None) -> dict[str, set[tuple[str, str]]]:
    """(side, statement) of every finding, by the connection's ClientId (connections without one left out)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for observed in observe(capture, port, keylog=keylog).values():
        client_id = observed.connection_row["client_id"]
        if isinstance(client_id, str):
            found.setdefault(client_id, set()).update(observed.findings)
    return found


def test_a_websocket_capture_is_audited_with_the_findings_of_the_same_traffic_over_tcp(
    amqtt: TransportBroker, recorded: dict[str, Path]
) -> None:
    tcp_port, ws_port = amqtt.ports["tcp"], amqtt.ports["ws"]
    over_tcp = findings_by_client(recorded["tcp"], tcp_port)
    over_ws = findings_by_client(recorded["ws"], ws_port)
    for client_id, _defect, rule in MISBEHAVIOUR:
        assert ("client", rule) in over_ws[client_id], client_id
    assert over_tcp["publisher"] == over_ws["publisher"] == set()
    assert over_tcp["subscriber"] == over_ws["subscriber"] == set()
    # Apart from the text frame, every client's findings are the same over both transports: the client broke
    # MQTT-6.0.0-1 by sending it, and amqtt 0.12.1 by staying open and taking the PUBLISH [MQTT-6.0.0-1].
    assert over_tcp.pop(TEXT_FRAME) == set()
    assert over_ws.pop(TEXT_FRAME) == {("client", "MQTT-6.0.0-1"), ("server", "MQTT-6.0.0-1")}
    assert over_ws == over_tcp
    transports = {observed.audit.transport for observed in observe(recorded["ws"], ws_port).values()}
    assert WEBSOCKET in transports and transports <= {WEBSOCKET, PLAIN}  # plain: the readiness probe's, empty


def test_the_websocket_capture_s_bytes_are_accounted_for_the_text_frame_s_too(
    amqtt: TransportBroker, recorded: dict[str, Path]
) -> None:
    for observed in observe(recorded["ws"], amqtt.ports["ws"]).values():
        if observed.audit.transport != WEBSOCKET:
            continue  # the readiness probe's empty connection
        assert observed.audit.total.reconciles
        # a text frame's bytes are read as MQTT too (marked [MQTT-6.0.0-1]): nothing is set aside
        assert not observed.audit.unassessable, observed.connection_row["client_id"]


def test_mqttaudit_audit_finds_mqtt_over_websocket_on_any_port_with_the_same_findings(
    spark: SparkSession,
    amqtt: TransportBroker,
    recorded: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ws_port = amqtt.ports["ws"]
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
    text_row = next(row for row in violations if row["rule"] == "MQTT-6.0.0-1" and row["origin"] == "transport")
    assert (text_row["actor"], text_row["origin"], text_row["level"]) == ("client", "transport", "MUST")
    assert text_row["evidence"].startswith("81") and text_row["expected"]
    assert {row["transport"] for row in connections.values()} == {WEBSOCKET}
    assert "MQTT-6.0.0-1" in (tmp_path / "findings.md").read_text()


def test_a_websocket_over_tls_capture_with_its_key_log_is_audited_like_websocket(
    amqtt: TransportBroker, recorded: dict[str, Path]
) -> None:
    """wss: TLS decrypted with the clients' key log, then the WebSocket framing removed: the findings of the same
    traffic over plain WebSocket, and every connection's transport says both layers."""
    keylog = KeyLog.parse(recorded["wss.keys"].read_text())
    over_ws = findings_by_client(recorded["ws"], amqtt.ports["ws"])
    over_wss = findings_by_client(recorded["wss"], amqtt.ports["wss"], keylog)
    assert over_wss == over_ws
    assert ("client", "MQTT-6.0.0-1") in over_wss[TEXT_FRAME]
    transports = {o.audit.transport for o in observe(recorded["wss"], amqtt.ports["wss"], keylog=keylog).values()}
    assert f"{TLS}+{WEBSOCKET}" in transports
    without = {o.audit.transport for o in observe(recorded["wss"], amqtt.ports["wss"]).values() if o.audit.frames}
    assert not without  # without the key log nothing of it is decoded as MQTT
