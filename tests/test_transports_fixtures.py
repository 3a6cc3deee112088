"""The brokers of tests/transports.py, each checked with a real client: paho-mqtt round-trips a message over
every transport a broker serves (subscribed on one, published on another, so both are one broker), and what a
broker must refuse is refused (a wrong password with CONNACK 5, a server certificate from another CA, a client
without a certificate where one is required)."""

from __future__ import annotations

import gc
import itertools
import os
import queue
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from mqttaudit import codec
from mqttaudit.probe.brokers import BrokerUnavailable, RunningBroker

from .transports import (
    CLIENT_IDENTITY,
    TlsMaterial,
    TransportBroker,
    amqtt_websocket,
    mosquitto_password,
    mosquitto_tls,
    rabbitmq_tls,
    tls_material,
)

TIMEOUT = 5.0
USERS = {"alice": "wonderland", "bob": "builder"}
#: The CONNACK of MQTT 3.1.1 that refuses a client as not authorised (return code 5).
NOT_AUTHORISED = bytes.fromhex("20020005")
ACCEPTED = bytes.fromhex("20020000")
#: Numbers the connections of the module's clients, whose Client Identifiers end with them.
_CONNECTIONS = itertools.count()


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_material(tmp_path_factory.mktemp("pki"))


@dataclass(frozen=True)
class Endpoint:
    """How a paho client reaches one listener of a broker."""

    port: int
    websocket: bool = False
    path: str = "/mqtt"
    cafile: Path | None = None
    certfile: Path | None = None
    keyfile: Path | None = None
    username: str | None = None
    password: str | None = None


@dataclass
class Connected:
    client: paho.Client
    messages: queue.Queue[bytes]
    subscribed: threading.Event


#: The highest file descriptor ``select()`` can watch, plus one. paho-mqtt 2.2's network loop selects on its socket:
#: on a socket numbered above it the loop never reads the CONNACK (a client opened with 1,100 files open here
#: waits forever). A full run in one process leaves hundreds of sockets to the cyclic garbage collector (probe runs
#: in the process, asyncio transports in reference cycles), which is how these tests timed out in a whole serial run
#: and passed alone.
FD_SETSIZE = 1024


def connect(endpoint: Endpoint, client_id: str) -> Connected:
    """A paho client connected (CONNACK 0 received) through ``endpoint``, its network loop running. Its Client
    Identifier is ``client_id`` with a suffix of its own: no connection takes over another's session."""
    gc.collect()  # closes the sockets earlier tests left in reference cycles, so this one gets a low number
    client_id = f"{client_id}-{next(_CONNECTIONS)}"
    transport: Literal["tcp", "websockets"] = "websockets" if endpoint.websocket else "tcp"
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv311, transport=transport)
    if endpoint.websocket:
        client.ws_set_options(path=endpoint.path)
    if endpoint.cafile is not None:
        client.tls_set(
            ca_certs=str(endpoint.cafile), certfile=_text(endpoint.certfile), keyfile=_text(endpoint.keyfile)
        )
    if endpoint.username is not None:
        client.username_pw_set(endpoint.username, endpoint.password)
    outcome: queue.Queue[object] = queue.Queue()
    connected = Connected(client, queue.Queue(), threading.Event())
    client.on_connect = lambda _c, _u, _f, reason_code, _p: outcome.put(reason_code)
    client.on_subscribe = lambda *_: connected.subscribed.set()
    client.on_message = lambda _c, _u, message: connected.messages.put(bytes(message.payload))
    client.connect("127.0.0.1", endpoint.port, keepalive=30)
    number = client.socket().fileno()
    assert number < FD_SETSIZE, (
        f"paho-mqtt's loop cannot watch socket {number}: {len(os.listdir('/proc/self/fd'))} open"
    )
    client.loop_start()
    reason_code = outcome.get(timeout=TIMEOUT)
    if reason_code != 0:
        client.loop_stop()
        raise AssertionError(f"CONNECT refused: {reason_code}")
    return connected


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def round_trip(subscriber: Endpoint, publisher: Endpoint, payload: bytes = b"over the wire") -> None:
    """Subscribes through ``subscriber``, publishes through ``publisher`` at QoS 1, and waits for the message."""
    receiving = connect(subscriber, "subscriber")
    sending = connect(publisher, "publisher")
    try:
        receiving.client.subscribe("transports/test", qos=1)
        assert receiving.subscribed.wait(TIMEOUT), "no SUBACK"
        sending.client.publish("transports/test", payload, qos=1).wait_for_publish(TIMEOUT)
        assert receiving.messages.get(timeout=TIMEOUT) == payload
    finally:
        for side in (receiving, sending):
            side.client.disconnect()
            side.client.loop_stop()


def raw_connack(port: int, context: ssl.SSLContext | None = None, **connect: object) -> bytes:
    """The bytes a broker answers a CONNECT (MQTT 3.1.1, with ``connect``'s fields) with, up to 4, over TCP or,
    with ``context``, TLS; empty when it closes first."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as plain:
        stream = plain if context is None else context.wrap_socket(plain, server_hostname="127.0.0.1")
        stream.sendall(codec.encode(codec.Connect(client_id="raw", **connect)))  # type: ignore[arg-type]
        answer = b""
        while len(answer) < 4 and (chunk := stream.recv(4 - len(answer))):
            answer += chunk
        return answer


def client_context(cafile: Path, certfile: Path | None = None, keyfile: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(cafile))
    if certfile is not None:
        context.load_cert_chain(str(certfile), str(keyfile) if keyfile else None)
    return context


# mosquitto over TCP and TLS


@pytest.fixture(scope="module")
def mosquitto_with_tls(tmp_path_factory: pytest.TempPathFactory, material: TlsMaterial) -> Iterator[TransportBroker]:
    with mosquitto_tls(tmp_path_factory.mktemp("mosquitto-tls"), material) as broker:
        yield broker


def test_the_tls_broker_carries_a_message_from_tls_to_tcp_and_back(
    mosquitto_with_tls: TransportBroker, material: TlsMaterial
) -> None:
    broker = mosquitto_with_tls
    assert broker.tcp_url == f"mqtt://127.0.0.1:{broker.tcp_port}"
    assert broker.tls_url == f"mqtts://127.0.0.1:{broker.tls_port}"
    tls = Endpoint(broker.tls_port, cafile=material.cafile)
    tcp = Endpoint(broker.tcp_port)
    round_trip(tls, tcp)
    round_trip(tcp, tls)
    with pytest.raises(KeyError, match="no ws listener"):
        _ = broker.ws_url


def test_the_tls_broker_is_not_trusted_with_another_ca(
    mosquitto_with_tls: TransportBroker, material: TlsMaterial
) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(Endpoint(mosquitto_with_tls.tls_port, cafile=material.other_cafile), "distrustful")
    with pytest.raises(ssl.SSLCertVerificationError):
        raw_connack(mosquitto_with_tls.tls_port, client_context(material.other_cafile))


def test_the_tls_broker_does_not_speak_tls_on_its_plain_port(
    mosquitto_with_tls: TransportBroker, material: TlsMaterial
) -> None:
    with pytest.raises(ConnectionResetError):
        raw_connack(mosquitto_with_tls.tcp_port, client_context(material.cafile))
    assert raw_connack(mosquitto_with_tls.tcp_port) == ACCEPTED


def test_a_client_certificate_is_required_and_names_the_client(tmp_path: Path, material: TlsMaterial) -> None:
    with mosquitto_tls(
        tmp_path, material, require_certificate=True, use_identity_as_username=True, settings=["allow_anonymous false"]
    ) as broker:
        # No username in the CONNECT: the certificate's common name is the username, and the client is allowed.
        certified = Endpoint(
            broker.tls_port, cafile=material.cafile, certfile=material.client_certfile, keyfile=material.client_keyfile
        )
        round_trip(certified, certified)
        assert f"u'{CLIENT_IDENTITY}'" in broker.output()
        own = client_context(material.cafile, material.client_certfile, material.client_keyfile)
        assert raw_connack(broker.tls_port, own) == ACCEPTED
        # Without a certificate, or with one from another CA, the connection ends in the handshake (TLS 1.3: the
        # client learns it on its first read). mosquitto 2.0.11 closes without a TLS alert: an EOF.
        with pytest.raises(ssl.SSLError):
            raw_connack(broker.tls_port, client_context(material.cafile))
        foreign = client_context(material.cafile, material.other_client_certfile, material.other_client_keyfile)
        with pytest.raises(ssl.SSLError):
            raw_connack(broker.tls_port, foreign)
        # Anonymous clients are refused on the plain listener, which has no certificate to name them.
        assert raw_connack(broker.tcp_port) == NOT_AUTHORISED


# mosquitto with a password file


@pytest.mark.parametrize("with_tls", [False, True], ids=["tcp", "tls"])
def test_the_password_broker_admits_its_users_only(tmp_path: Path, material: TlsMaterial, with_tls: bool) -> None:
    with mosquitto_password(tmp_path, USERS, material=material if with_tls else None) as broker:
        port = broker.tls_port if with_tls else broker.tcp_port
        cafile = material.cafile if with_tls else None
        context = client_context(material.cafile) if with_tls else None
        alice = Endpoint(port, cafile=cafile, username="alice", password=USERS["alice"])
        bob = Endpoint(broker.tcp_port, username="bob", password=USERS["bob"])
        round_trip(alice, bob)
        assert raw_connack(port, context, username="alice", password=USERS["alice"].encode()) == ACCEPTED
        assert raw_connack(port, context, username="alice", password=b"looking-glass") == NOT_AUTHORISED
        assert raw_connack(port, context, username="carol", password=USERS["alice"].encode()) == NOT_AUTHORISED
        assert raw_connack(port, context) == NOT_AUTHORISED
        with pytest.raises(AssertionError, match="CONNECT refused"):
            connect(Endpoint(port, cafile=cafile, username="bob", password=USERS["alice"]), "impostor")
        assert "wonderland" not in (tmp_path / "passwords").read_text()
        if not with_tls:
            with pytest.raises(KeyError):
                _ = broker.tls_port


# amqtt over WebSocket


@pytest.fixture(scope="module")
def amqtt_ws(tmp_path_factory: pytest.TempPathFactory, material: TlsMaterial) -> Iterator[TransportBroker]:
    with amqtt_websocket(tmp_path_factory.mktemp("amqtt-ws"), material) as broker:
        yield broker


def test_amqtt_carries_a_message_between_websocket_and_tcp(amqtt_ws: TransportBroker) -> None:
    assert amqtt_ws.ws_url == f"ws://127.0.0.1:{amqtt_ws.ws_port}/mqtt"
    ws = Endpoint(amqtt_ws.ws_port, websocket=True)
    tcp = Endpoint(amqtt_ws.tcp_port)
    round_trip(ws, tcp)
    round_trip(tcp, ws)


@pytest.mark.parametrize("path", ["/", "/anything/else"])
def test_amqtt_accepts_websocket_clients_on_any_path(amqtt_ws: TransportBroker, path: str) -> None:
    round_trip(Endpoint(amqtt_ws.ws_port, websocket=True, path=path), Endpoint(amqtt_ws.tcp_port))


def test_amqtt_carries_a_message_over_wss_and_tls(amqtt_ws: TransportBroker, material: TlsMaterial) -> None:
    assert amqtt_ws.wss_url == f"wss://127.0.0.1:{amqtt_ws.wss_port}/mqtt"
    wss = Endpoint(amqtt_ws.wss_port, websocket=True, cafile=material.cafile)
    tls = Endpoint(amqtt_ws.tls_port, cafile=material.cafile)
    round_trip(wss, tls)
    round_trip(tls, Endpoint(amqtt_ws.ws_port, websocket=True))
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(Endpoint(amqtt_ws.wss_port, websocket=True, cafile=material.other_cafile), "distrustful")


def websocket_status(port: int, protocols: str | None) -> str:
    """The head (status line and fields) of amqtt's answer to a WebSocket opening handshake that offers
    ``protocols`` (no Sec-WebSocket-Protocol field when None)."""
    request = [
        "GET /mqtt HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *([f"Sec-WebSocket-Protocol: {protocols}"] if protocols is not None else []),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as stream:
        stream.sendall(("\r\n".join(request) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := stream.recv(4096)):
            answer += chunk
    return answer.split(b"\r\n\r\n", 1)[0].decode("latin-1")


@pytest.mark.parametrize(
    ("protocols", "status", "selected"),
    [
        ("mqtt", "HTTP/1.1 101", "mqtt"),
        ("mqttv3.1, mqtt", "HTTP/1.1 101", "mqtt"),
        (None, "HTTP/1.1 400", None),
        ("mqttv3.1", "HTTP/1.1 400", None),
    ],
)
def test_amqtt_requires_the_mqtt_subprotocol(
    amqtt_ws: TransportBroker, protocols: str | None, status: str, selected: str | None
) -> None:
    head = websocket_status(amqtt_ws.ws_port, protocols)
    assert head.startswith(status), head
    chosen = [
        line.split(":", 1)[1].strip()
        for line in head.split("\r\n")
        if line.lower().startswith("sec-websocket-protocol:")
    ]
    assert chosen == ([selected] if selected else []), head


# RabbitMQ over TLS (AMQP and MQTT)

#: The AMQP 0-9-1 protocol header, which a client sends first; RabbitMQ answers with Connection.Start.
AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


def amqp_opening(port: int, context: ssl.SSLContext) -> bytes:
    """The first bytes RabbitMQ answers the AMQP protocol header with over TLS."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as plain,
        context.wrap_socket(plain, server_hostname="127.0.0.1") as stream,
    ):
        stream.sendall(AMQP_HEADER)
        answer = b""
        while len(answer) < 13 and (chunk := stream.recv(64)):
            answer += chunk
        return answer


@pytest.fixture
def rabbitmq_certified(tmp_path: Path, material: TlsMaterial) -> Iterator[RunningBroker]:
    """RabbitMQ requiring a client certificate on its TLS listeners (skipped where it is not installed)."""
    with ExitStack() as stack:
        try:
            broker = stack.enter_context(rabbitmq_tls(tmp_path, material, verify_peer=True))
        except BrokerUnavailable as exc:
            pytest.skip(str(exc))
        yield broker


def test_rabbitmq_serves_amqp_and_mqtt_over_tls_to_certified_clients_only(
    rabbitmq_certified: RunningBroker, material: TlsMaterial
) -> None:
    broker = rabbitmq_certified
    urls = broker.urls
    assert set(urls) == {"mqtt", "mqtts", "amqp", "amqps"}
    amqps_port = int(urls["amqps"].rsplit(":", 1)[1].split("/")[0])
    mqtts_port = int(urls["mqtts"].rsplit(":", 1)[1])
    own = client_context(material.cafile, material.client_certfile, material.client_keyfile)
    opening = amqp_opening(amqps_port, own)
    # type 1 (method), channel 0, a 4-byte size, class 10 method 10 (Connection.Start), version 0-9
    assert opening[:3] == b"\x01\x00\x00" and opening[7:13] == b"\x00\x0a\x00\x0a\x00\x09", opening.hex()
    certified = Endpoint(
        mqtts_port, cafile=material.cafile, certfile=material.client_certfile, keyfile=material.client_keyfile
    )
    round_trip(certified, Endpoint(broker.port))
    with pytest.raises(ssl.SSLError):
        amqp_opening(amqps_port, client_context(material.cafile))
    with pytest.raises(ssl.SSLError):
        raw_connack(mqtts_port, client_context(material.cafile))
    with pytest.raises(ssl.SSLCertVerificationError):
        amqp_opening(
            amqps_port, client_context(material.other_cafile, material.client_certfile, material.client_keyfile)
        )
