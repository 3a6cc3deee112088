"""TLS in real captures: the same traffic of real clients (paho, and a raw client that breaks a rule) through
mosquitto, recorded with tcpdump once over its plain listener and once over its TLS listener with the clients
writing a key log (``ssl.SSLContext.keylog_filename``), for TLS 1.2 and TLS 1.3. Audited with the key log, the TLS
capture gives the findings of the plaintext one; without it, its connections are encrypted, not assessable, and
the audit exits 4. Through the pure path (``observe``) and through the CLI on Spark ``local[2]``. Without
``--ports``, the key log proves the MQTT-over-TLS port, and an HTTPS-like session of the same key log in the same
capture is reported as not MQTT."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from mqttaudit import codec
from mqttaudit.capture.conversation import NOT_MQTT_VERSION
from mqttaudit.capture.detect import BY_KEYLOG, BY_TLS_PORT, KNOWN_TLS_PORTS
from mqttaudit.capture.layers import NOT_MQTT_REASON
from mqttaudit.capture.tls import KeyLog
from mqttaudit.cli.main import main
from mqttaudit.probe.brokers import HOST
from mqttaudit.probe.recorder import tcpdump_recording

from .observed_captures import observe
from .transports import TlsMaterial, mosquitto_tls, tls_material

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A PUBLISH with both QoS bits set (MQTT-3.3.1-4): topic "a/b", packet identifier 1, payload "x".
QOS_3_PUBLISH = b"\x36\x08\x00\x03a/b\x00\x01x"


class Recorded(NamedTuple):
    plain: Path
    plain_port: int
    tls: Path
    tls_port: int
    keylog: Path


def _context(material: TlsMaterial, keylog: Path | None, maximum: ssl.TLSVersion | None) -> ssl.SSLContext | None:
    if keylog is None:
        return None
    context = ssl.create_default_context(cafile=str(material.cafile))
    context.keylog_filename = str(keylog)
    if maximum is not None:
        context.maximum_version = maximum
    return context


def talk(port: int, context: ssl.SSLContext | None) -> None:
    """A paho client subscribes, publishes at QoS 1 to itself and disconnects; then a raw client connects and sends
    a PUBLISH of QoS 3, which mosquitto answers by closing."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="tls-paho", protocol=mqtt.MQTTv311)
    if context is not None:
        client.tls_set_context(context)
    received, subscribed = threading.Event(), threading.Event()
    client.on_message = lambda *args: received.set()
    client.on_subscribe = lambda *args: subscribed.set()
    client.connect(HOST, port, keepalive=30)
    client.loop_start()
    try:
        client.subscribe("tls/topic", qos=1)
        assert subscribed.wait(5)
        client.publish("tls/topic", b"over tls?", qos=1).wait_for_publish(timeout=5)
        assert received.wait(5)
        client.disconnect()
    finally:
        client.loop_stop()
    raw = socket.create_connection((HOST, port), timeout=5)
    if context is not None:
        raw = context.wrap_socket(raw, server_hostname=HOST)
    with raw:
        raw.sendall(codec.encode(codec.Connect(client_id="tls-raw", keep_alive=30)))
        assert raw.recv(4)[:1] == b"\x20"  # CONNACK
        raw.sendall(QOS_3_PUBLISH)
        try:
            while raw.recv(1024):
                pass
        except (ssl.SSLError, ConnectionResetError):
            pass


@pytest.fixture(scope="module", params=["TLS 1.2", "TLS 1.3"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    maximum = ssl.TLSVersion.TLSv1_2 if request.param == "TLS 1.2" else ssl.TLSVersion.TLSv1_3
    folder = tmp_path_factory.mktemp("tls")
    material = tls_material(folder / "pki")
    keylog = folder / "keys.log"
    with mosquitto_tls(folder / "broker", material) as broker:
        plain, tls = folder / "plain.pcap", folder / "tls.pcap"
        with tcpdump_recording(plain, broker.tcp_port):
            talk(broker.tcp_port, None)
        with tcpdump_recording(tls, broker.tls_port):
            talk(broker.tls_port, _context(material, keylog, maximum))
    assert keylog.read_text().count("CLIENT_") >= 2  # both clients wrote their secrets
    return Recorded(plain, broker.tcp_port, tls, broker.tls_port, keylog)


def _findings(observed: dict[int, Any]) -> list[list[tuple[str, str]]]:
    """Each connection's findings, sorted, the connections in the order they started."""
    ordered = sorted(observed.values(), key=lambda each: each.audit.first_time)
    return [sorted(each.findings) for each in ordered]


def test_decrypted_the_tls_capture_gives_the_plaintext_findings(recorded: Recorded) -> None:
    plain = observe(recorded.plain, recorded.plain_port)
    decrypted = observe(recorded.tls, recorded.tls_port, keylog=KeyLog.parse(recorded.keylog.read_text()))
    assert len(plain) == len(decrypted) == 2
    assert ("client", "MQTT-3.3.1-4") in _findings(plain)[1]  # the raw client's QoS 3, seen in the clear
    assert _findings(decrypted) == _findings(plain)
    for each in decrypted.values():
        assert each.audit.transport == "tls"
        assert each.audit.version == "3.1.1"
        assert not [note for note in each.audit.layer_notes if "not decrypt" in note.text]
    # The MQTT bytes are the same: every packet of the plaintext connection was read from the decrypted one.
    plain_packets = sorted(each.audit.total.packets for each in plain.values())
    assert sorted(each.audit.total.packets for each in decrypted.values()) == plain_packets


def test_without_the_key_log_the_tls_capture_is_encrypted_not_assessable(recorded: Recorded) -> None:
    encrypted = observe(recorded.tls, recorded.tls_port)
    assert len(encrypted) == 2
    for each in encrypted.values():
        assert each.audit.transport == "tls (encrypted)"
        assert not each.audit.frames and not each.findings
        assert each.audit.total.unassessable == each.audit.total.stream > 0
        assert {row.reason for row in each.audit.unassessable} == {
            "encrypted: not assessable (TLS without the session's keys)"
        }


def test_the_cli_on_spark_decrypts_with_the_key_log_and_writes_no_secret(
    spark: SparkSession, recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    del spark  # the session the CLI's audit joins: local[2], shared by the module's tests
    common = ["--tolerance", "2", "--master", "local[2]"]
    plain_status = main(["audit", str(recorded.plain), "--out", str(tmp_path / "plain"), *common])
    plain_out = capsys.readouterr().out
    status = main(
        [
            "audit",
            str(recorded.tls),
            "--ports",
            str(recorded.tls_port),
            "--keylog",
            str(recorded.keylog),
            "--out",
            str(tmp_path / "tls"),
            *common,
        ]
    )
    tls_out = capsys.readouterr()
    assert plain_status == status == 1
    import pyarrow.parquet as pq

    def rules(folder: Path) -> list[tuple[str, str]]:
        return sorted((row["actor"], row["rule"]) for row in pq.read_table(folder / "violations").to_pylist())

    assert rules(tmp_path / "tls") == rules(tmp_path / "plain")
    assert ("client", "MQTT-3.3.1-4") in rules(tmp_path / "tls")
    assert plain_out.splitlines()[1] == tls_out.out.splitlines()[1]  # the violations line
    secrets = [
        line.split()[2] for line in recorded.keylog.read_text().splitlines() if line.startswith(("CLIENT_", "SERVER_"))
    ]
    assert secrets
    written = [path for path in (tmp_path / "tls").rglob("*") if path.is_file()]
    for path in written:
        content = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in content.lower() and bytes.fromhex(secret) not in content, path
    for secret in secrets:
        assert secret not in tls_out.out + tls_out.err


def test_the_cli_without_the_key_log_exits_4_encrypted(
    spark: SparkSession, recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    del spark
    status = main(
        [
            "audit",
            str(recorded.tls),
            "--ports",
            str(recorded.tls_port),
            "--out",
            str(tmp_path),
            "--tolerance",
            "2",
            "--master",
            "local[2]",
        ]
    )
    said = capsys.readouterr()
    assert status == 4
    assert "encrypted: not assessable" in said.out + said.err


# -- MQTT over TLS on any port, beside an HTTPS-like session of the same key log ------------------------------------

HTTP_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"


class _HttpsLike:
    """A one-request server on 127.0.0.1 behind ``ssl`` (mosquitto's server certificate): reads an HTTP request,
    answers it and closes, as an HTTPS server would."""

    def __init__(self, material: TlsMaterial) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(material.server_certfile), str(material.server_keyfile))
        self._context = context
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connection, _address = self._listener.accept()
        with self._context.wrap_socket(connection, server_side=True) as wrapped:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = wrapped.recv(4096)
                if not chunk:
                    return
                request += chunk
            wrapped.sendall(HTTP_ANSWER)

    def close(self) -> None:
        self._thread.join(timeout=5)
        self._listener.close()


def https_get(port: int, context: ssl.SSLContext) -> bytes:
    with context.wrap_socket(socket.create_connection((HOST, port), timeout=5), server_hostname=HOST) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        with contextlib.suppress(ssl.SSLError, ConnectionResetError):
            while chunk := raw.recv(4096):
                answer += chunk
    return answer


class Mixed(NamedTuple):
    plain: Path
    tls: Path
    keylog: Path
    tls_port: int
    https_port: int


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Mixed:
    folder = tmp_path_factory.mktemp("mixed")
    material = tls_material(folder / "pki")
    keylog = folder / "keys.log"
    context = _context(material, keylog, None)
    assert context is not None
    https = _HttpsLike(material)
    try:
        with mosquitto_tls(folder / "broker", material) as broker:
            plain, tls = folder / "plain.pcap", folder / "tls.pcap"
            with tcpdump_recording(plain, broker.tcp_port):
                talk(broker.tcp_port, None)
            with tcpdump_recording(tls, (broker.tls_port, https.port)):
                talk(broker.tls_port, context)
                assert https_get(https.port, context) == HTTP_ANSWER
    finally:
        https.close()
    assert keylog.read_text().count("CLIENT_TRAFFIC_SECRET_0") == 3  # two MQTT clients and the HTTPS one
    return Mixed(plain, tls, keylog, broker.tls_port, https.port)


def test_without_ports_the_key_log_proves_the_mqtt_over_tls_port_and_the_https_session_is_not_mqtt(
    spark: SparkSession, mixed: Mixed, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``audit CAPTURE --keylog KEYS`` without ``--ports``: the TLS ClientHellos in the key log prove both ports;
    decrypted, the MQTT connections give the plaintext findings and the HTTPS one is not MQTT, with no finding."""
    del spark
    common = ["--tolerance", "2", "--master", "local[2]"]
    plain_status = main(["audit", str(mixed.plain), "--out", str(tmp_path / "plain"), *common])
    capsys.readouterr()
    out = tmp_path / "tls"
    status = main(["audit", str(mixed.tls), "--keylog", str(mixed.keylog), "--out", str(out), *common])
    said = capsys.readouterr()
    assert plain_status == status == 1, said.err
    import pyarrow.parquet as pq

    def rules(folder: Path) -> list[tuple[str, str]]:
        return sorted((row["actor"], row["rule"]) for row in pq.read_table(folder / "violations").to_pylist())

    assert rules(out) == rules(tmp_path / "plain") and ("client", "MQTT-3.3.1-4") in rules(out)
    summary = json.loads((out / "summary.json").read_text())
    tls_how = BY_TLS_PORT if mixed.tls_port in KNOWN_TLS_PORTS else BY_KEYLOG
    assert summary["detection"]["mode"] == "any port"
    assert summary["detection"]["ports"] == [
        {"port": port, "how": how, "connections": count}
        for port, how, count in sorted([(mixed.tls_port, tls_how, 2), (mixed.https_port, BY_KEYLOG, 1)])
    ]
    assert summary["versions"]["3.1.1"]["connections"] == 2
    assert summary["versions"][NOT_MQTT_VERSION]["connections"] == 1
    connections = pq.read_table(out / "connections").to_pylist()
    [https] = [row for row in connections if str(row["server"]).endswith(f":{mixed.https_port}")]
    assert (https["transport"], https["version"], https["handling"]) == ("tls", NOT_MQTT_VERSION, NOT_MQTT_REASON)
    assert https["packets"] == https["violations"] == 0
    tables = ("violations", "packets", "not_assessable")
    assert not [table for table in tables if https["flow"] in pq.read_table(out / table).column("flow").to_pylist()]
    holes = [row for row in pq.read_table(out / "gaps").to_pylist() if row["flow"] == https["flow"]]
    assert holes and {row["reason"] for row in holes} == {NOT_MQTT_REASON}
