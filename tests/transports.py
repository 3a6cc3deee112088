"""Brokers reached over the transports beyond plain TCP: TLS (with or without client certificates), username and
password, and WebSocket, for the tests of the probe's and the audit's transports. Every broker is a real one,
started on free ports of 127.0.0.1 and stopped by its PID; its certificates are made at test time with trustme.

    material = tls_material(tmp_path / "pki")
    with mosquitto_tls(tmp_path / "broker", material, users={"alice": "secret"}) as broker:
        broker.tcp_url, broker.tls_url  # 'mqtt://127.0.0.1:40117', 'mqtts://127.0.0.1:40119'

mosquitto (Debian's 2.0.11) serves TCP and TLS but not WebSocket: it is built without libwebsockets. amqtt 0.12.1
serves WebSocket, through the ``websockets`` library (15.x here), and its WebSocket listener:

* accepts the handshake whatever the request path (``/``, ``/mqtt``, anything): it routes no paths;
* requires the ``mqtt`` subprotocol: a client that offers none, or offers only another one (``mqttv3.1``), gets
  HTTP 400 (``websockets`` refuses when the server names subprotocols and the client shares none); with ``mqtt``
  offered it answers ``Sec-WebSocket-Protocol: mqtt``;
* serves ``wss`` with the same ``ssl``/``certfile``/``keyfile``/``cafile`` settings as its TLS TCP listener (it asks
  for a client certificate but does not require one: ``CERT_OPTIONAL``).

RabbitMQ (3.10) serves AMQP and MQTT over TLS with one set of ``ssl_options``: :func:`rabbitmq_tls`.

aedes would need the npm ``ws`` package (and a few lines in its server script) for WebSocket; amqtt's listener works,
so aedes has none here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import trustme

from mqttaudit.probe.brokers import (
    HOST,
    BrokerUnavailable,
    RunningBroker,
    free_port,
    launch_broker,
    start_rabbitmq_tls,
)

from .live import configured_mosquitto

#: The common name (and DNS name) of the client certificate; mosquitto's ``use_identity_as_username`` makes it the
#: username of a client that presents it.
CLIENT_IDENTITY = "mqttaudit-client"
#: The path the WebSocket URLs carry (the one most clients use by default; amqtt accepts any).
WS_PATH = "/mqtt"
#: URL schemes by transport, as the URLs of :class:`TransportBroker` spell them.
SCHEMES = {"tcp": "mqtt", "tls": "mqtts", "ws": "ws", "wss": "wss"}


@dataclass(frozen=True)
class TlsMaterial:
    """PEM files for one test's TLS: a CA, a server certificate for ``127.0.0.1`` and ``localhost`` and a client
    certificate (common name :data:`CLIENT_IDENTITY`) both signed by it, and a second, unrelated CA with a client
    certificate of its own, for the tests in which the peer is not trusted."""

    cafile: Path
    server_certfile: Path
    server_keyfile: Path
    client_certfile: Path
    client_keyfile: Path
    other_cafile: Path
    other_client_certfile: Path
    other_client_keyfile: Path


def tls_material(directory: Path) -> TlsMaterial:
    """Makes a :class:`TlsMaterial` in ``directory`` (created when missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, other_ca = trustme.CA(), trustme.CA()
    server = ca.issue_cert(HOST, "localhost")
    client = ca.issue_cert(CLIENT_IDENTITY, common_name=CLIENT_IDENTITY)
    other_client = other_ca.issue_cert(CLIENT_IDENTITY, common_name=CLIENT_IDENTITY)

    def write(name: str, *blobs: trustme.Blob) -> Path:
        path = directory / name
        path.write_bytes(b"".join(blob.bytes() for blob in blobs))
        return path

    return TlsMaterial(
        cafile=write("ca.pem", ca.cert_pem),
        server_certfile=write("server.pem", *server.cert_chain_pems),
        server_keyfile=write("server.key", server.private_key_pem),
        client_certfile=write("client.pem", *client.cert_chain_pems),
        client_keyfile=write("client.key", client.private_key_pem),
        other_cafile=write("other-ca.pem", other_ca.cert_pem),
        other_client_certfile=write("other-client.pem", *other_client.cert_chain_pems),
        other_client_keyfile=write("other-client.key", other_client.private_key_pem),
    )


def transport_url(transport: str, port: int) -> str:
    """The URL of a listener of 127.0.0.1 for ``transport`` (``tcp``, ``tls``, ``ws`` or ``wss``)."""
    path = WS_PATH if transport in ("ws", "wss") else ""
    return f"{SCHEMES[transport]}://{HOST}:{port}{path}"


@dataclass(frozen=True)
class TransportBroker:
    """A running broker with a listener per transport: ``ports`` by transport (``tcp``, ``tls``, ``ws``, ``wss``),
    each on 127.0.0.1. The URL of a transport it does not serve raises KeyError."""

    broker: RunningBroker
    ports: Mapping[str, int]

    @property
    def host(self) -> str:
        return self.broker.host

    @property
    def pid(self) -> int:
        return self.broker.pid

    @property
    def urls(self) -> dict[str, str]:
        """Every listener's URL, by transport."""
        return {transport: self.url(transport) for transport in self.ports}

    def url(self, transport: str) -> str:
        if transport not in self.ports:
            raise KeyError(f"{self.broker.name} has no {transport} listener here (it has {', '.join(self.ports)})")
        return transport_url(transport, self.ports[transport])

    @property
    def tcp_port(self) -> int:
        return self.ports["tcp"]

    @property
    def tls_port(self) -> int:
        return self.ports["tls"]

    @property
    def ws_port(self) -> int:
        return self.ports["ws"]

    @property
    def wss_port(self) -> int:
        return self.ports["wss"]

    @property
    def tcp_url(self) -> str:
        return self.url("tcp")

    @property
    def tls_url(self) -> str:
        return self.url("tls")

    @property
    def ws_url(self) -> str:
        return self.url("ws")

    @property
    def wss_url(self) -> str:
        return self.url("wss")

    def output(self) -> str:
        """What the broker wrote so far (its log)."""
        return self.broker.output()

    def stop(self) -> None:
        self.broker.stop()


@contextmanager
def mosquitto_tls(
    workdir: Path,
    material: TlsMaterial,
    *,
    require_certificate: bool = False,
    use_identity_as_username: bool = False,
    users: Mapping[str, str] | None = None,
    settings: Sequence[str] = (),
) -> Iterator[TransportBroker]:
    """mosquitto with a plain listener (``tcp``) and a TLS one (``tls``) serving ``material``'s server certificate,
    so that one broker can be compared over both. ``require_certificate`` refuses a TLS client without a
    certificate signed by ``material``'s CA; ``use_identity_as_username`` makes the certificate's common name the
    client's username. ``users`` (name to password) requires a username and password on both listeners.
    ``settings`` are further configuration lines, for the whole broker (they come before the listeners)."""
    tls = [
        f"cafile {material.cafile}",
        f"certfile {material.server_certfile}",
        f"keyfile {material.server_keyfile}",
        f"require_certificate {'true' if require_certificate else 'false'}",
    ]
    if use_identity_as_username:
        tls.append("use_identity_as_username true")
    with _mosquitto(workdir, users, settings, tls) as broker:
        yield broker


@contextmanager
def mosquitto_password(
    workdir: Path,
    users: Mapping[str, str],
    *,
    material: TlsMaterial | None = None,
    settings: Sequence[str] = (),
) -> Iterator[TransportBroker]:
    """mosquitto refusing anonymous clients: a username and password from ``users`` (name to password, in a
    ``password_file`` made by ``mosquitto_passwd``) is required on its plain listener (``tcp``) and, with
    ``material``, on a TLS listener (``tls``) too, which is how brokers in the cloud are reached."""
    if material is None:
        with _mosquitto(workdir, users, settings, None) as broker:
            yield broker
    else:
        with mosquitto_tls(workdir, material, users=users, settings=settings) as broker:
            yield broker


@contextmanager
def _mosquitto(
    workdir: Path, users: Mapping[str, str] | None, settings: Sequence[str], tls: Sequence[str] | None
) -> Iterator[TransportBroker]:
    """mosquitto with a plain listener, with a TLS listener configured by the lines ``tls`` unless None, and a
    password file for ``users`` unless None."""
    workdir.mkdir(parents=True, exist_ok=True)
    # Run as root, mosquitto becomes the user mosquitto before it reads the certificates and the password file,
    # and that user cannot enter the test's private temporary directory.
    lines = ["user root"] if os.geteuid() == 0 else []
    if users is not None:
        lines += ["allow_anonymous false", f"password_file {password_file(workdir / 'passwords', users)}"]
    lines += settings
    ports = {"tcp": free_port()}
    if tls is not None:
        ports["tls"] = _another_free_port(ports.values())
        lines += [f"listener {ports['tls']} {HOST}", *tls]
    urls = {SCHEMES[t]: transport_url(t, p) for t, p in ports.items() if t != "tcp"}
    with configured_mosquitto(
        workdir, *lines, port=ports["tcp"], other_ports=[p for t, p in ports.items() if t != "tcp"], urls=urls
    ) as broker:
        yield TransportBroker(broker, ports)


def password_file(path: Path, users: Mapping[str, str]) -> Path:
    """A mosquitto password file at ``path`` with each of ``users`` (name to password), made by
    ``mosquitto_passwd -b`` (the passwords are hashed; the file holds none of them)."""
    binary = shutil.which("mosquitto_passwd")
    if binary is None:
        raise BrokerUnavailable("mosquitto_passwd is not installed: run scripts/install-test-deps.sh")
    path.unlink(missing_ok=True)
    path.touch()
    for name, password in users.items():
        subprocess.run([binary, "-b", str(path), name, password], check=True, capture_output=True)
    return path


@contextmanager
def amqtt_websocket(workdir: Path, material: TlsMaterial | None = None) -> Iterator[TransportBroker]:
    """amqtt with a plain TCP listener (``tcp``) and a WebSocket one (``ws``) for anonymous clients; with
    ``material``, also a TLS TCP listener (``tls``) and a WebSocket one over TLS (``wss``) serving its server
    certificate. Every listener binds 127.0.0.1 (amqtt's default is 0.0.0.0)."""
    workdir.mkdir(parents=True, exist_ok=True)
    transports = ["tcp", "ws", *(["tls", "wss"] if material is not None else [])]
    ports: dict[str, int] = {}
    for transport in transports:
        ports[transport] = _another_free_port(ports.values())
    listeners: dict[str, dict[str, object]] = {}
    for transport, port in ports.items():
        # amqtt requires a listener named 'default'; the others take its settings where they leave one out.
        name = "default" if transport == "tcp" else transport
        listener: dict[str, object] = {"type": "ws" if transport in ("ws", "wss") else "tcp", "bind": f"{HOST}:{port}"}
        if material is not None and transport in ("tls", "wss"):
            listener.update(
                ssl=True,
                cafile=str(material.cafile),
                certfile=str(material.server_certfile),
                keyfile=str(material.server_keyfile),
            )
        listeners[name] = listener
    config = {
        "listeners": listeners,
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }
    path = workdir / "amqtt.yaml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    command = [sys.executable, "-m", "amqtt.scripts.broker_script", "-c", str(path)]
    last = list(listeners)[-1]  # amqtt starts them in order
    ready = f"Listener '{last}' bind to " + re.escape(f"{HOST}:{ports[transports[-1]]}") + r"\b"
    urls = {SCHEMES[t]: transport_url(t, p) for t, p in ports.items() if t != "tcp"}
    other_ports = [p for t, p in ports.items() if t != "tcp"]
    with launch_broker(
        "amqtt", command, port=ports["tcp"], workdir=workdir, ready=ready, other_ports=other_ports, urls=urls
    ) as broker:
        yield TransportBroker(broker, ports)


@contextmanager
def rabbitmq_tls(workdir: Path, material: TlsMaterial, *, verify_peer: bool = False) -> Iterator[RunningBroker]:
    """RabbitMQ (3.10) with plain and TLS listeners for AMQP and MQTT serving ``material``'s server certificate: its
    ``urls`` are ``mqtt``, ``mqtts``, ``amqp`` and ``amqps`` (user and password guest). ``verify_peer`` refuses
    a client without a certificate signed by ``material``'s CA. It takes several seconds to start."""
    with start_rabbitmq_tls(
        material.cafile, material.server_certfile, material.server_keyfile, verify_peer=verify_peer, workdir=workdir
    ) as broker:
        yield broker


def _another_free_port(taken: Iterable[int]) -> int:
    """A free port of 127.0.0.1 that is none of ``taken`` (picked for another listener of the same broker)."""
    avoid = set(taken)
    while (port := free_port()) in avoid:
        pass
    return port
