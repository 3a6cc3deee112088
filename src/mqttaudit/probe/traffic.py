"""Realistic traffic for a capture: well-behaved paho-mqtt clients and a few raw-socket clients that break known
rules, against one broker. It feeds the demo and the capture tests; what each misbehaving client does is listed in
:data:`MISBEHAVIOUR`, so an audit of the capture can be checked against it.

Well-behaved clients: a subscriber on a wildcard filter at QoS 1, one at QoS 2 on an exact topic, a retained
publisher, and publishers at QoS 0, 1 and 2. Misbehaving clients each connect with a raw socket, send one defect
and wait for the broker to close the connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mqttaudit.spec.ids import R311

from ..codec import Connect, Disconnect, Publish, encode
from ..extras import missing

if TYPE_CHECKING:
    import paho.mqtt.client as mqtt

#: (client id, the bytes sent after an accepted CONNECT, the statement they break).
MISBEHAVIOUR: Final[tuple[tuple[str, bytes, str], ...]] = (
    ("bad-empty-filter", bytes.fromhex("82 05 00 01 00 00 00"), R311.MQTT_4_7_3_1),
    ("bad-wildcard-topic", encode(Publish(topic="sensor/#", payload=b"x"), validate=False), R311.MQTT_3_3_2_2),
    ("bad-five-byte-length", bytes.fromhex("30 ff ff ff ff 01"), R311.MQTT_2_2_3_FOUR_BYTES),
)


@dataclass(frozen=True)
class TrafficReport:
    """What the traffic did: messages published and received per client, and the misbehaving clients' fate."""

    published: int
    received: dict[str, int]
    #: Client id -> True when the broker closed its connection after the defect.
    closed_on_defect: dict[str, bool]


def _raw_client(host: str, port: int, client_id: str, defect: bytes, timeout: float) -> bool:
    """Connects, sends ``defect`` after CONNACK, and reports whether the broker closed the connection."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode(Connect(client_id=client_id, keep_alive=30)))
        if len(sock.recv(4)) < 4:
            return True
        sock.sendall(defect)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not sock.recv(1024):
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            pass
        sock.sendall(encode(Disconnect()))
        return False


def _paho_client(host: str, port: int, name: str) -> mqtt.Client:
    """A paho-mqtt 3.1.1 client named ``name``, connected to ``host:port`` (its CONNECT sent), its loop running."""
    try:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion
    except ImportError as exc:  # the demo extra: named with its pip command
        raise missing("demo", exc) from exc
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=name, protocol=mqtt.MQTTv311)
    c.connect(host, port, keepalive=30)
    c.loop_start()
    return c


@contextlib.contextmanager
def connected_before(
    host: str, port: int, *, timeout: float = 3.0, prefix: str = "plant"
) -> Iterator[Callable[[], bool]]:
    """A client connected to ``host:port`` on entry, before a recording starts: what the recording sees of it begins
    inside the connection (mid-stream), as in any capture of a running fleet. The block gets a function that makes
    it publish one QoS 1 message and wait for the PUBACK (False when it could not: the broker did not take the
    connection, or ended it); the client disconnects on leaving the block."""
    name = f"{prefix}-early"
    client = _paho_client(host, port, name)
    deadline = time.monotonic() + timeout
    while not client.is_connected() and time.monotonic() < deadline:
        time.sleep(0.01)

    def publish() -> bool:
        if not client.is_connected():
            return False
        info = client.publish(f"{prefix}/line2/temperature", b"19.5", qos=1)
        try:
            info.wait_for_publish(timeout)
        except (RuntimeError, ValueError):  # the connection failed meanwhile: paho says so by raising
            return False
        return info.is_published()

    try:
        yield publish
    finally:
        client.disconnect()
        client.loop_stop()


def run_traffic(host: str, port: int, *, rounds: int = 5, timeout: float = 3.0, prefix: str = "plant") -> TrafficReport:
    """Runs the clients against ``host:port`` and returns what happened (bounded by ``timeout`` per wait)."""
    received: dict[str, int] = {}
    lock = threading.Lock()

    def counter(name: str) -> Callable[[mqtt.Client, object, mqtt.MQTTMessage], None]:
        def on_message(client: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
            with lock:
                received[name] = received.get(name, 0) + 1

        return on_message

    def client(name: str) -> mqtt.Client:
        return _paho_client(host, port, name)

    subscribers = []
    plan = ((f"{prefix}-dashboard", f"{prefix}/+/temperature", 1), (f"{prefix}-archiver", f"{prefix}/line1/#", 2))
    for name, topic_filter, qos in plan:
        sub = client(name)
        sub.on_message = counter(name)
        sub.subscribe(topic_filter, qos)
        subscribers.append(sub)
    time.sleep(0.3)
    publisher = client(f"{prefix}-line1")
    published = 0
    for round_ in range(rounds):
        for qos in (0, 1, 2):
            info = publisher.publish(f"{prefix}/line1/temperature", f"{20 + round_}.{qos}".encode(), qos=qos)
            info.wait_for_publish(timeout)
            published += 1
    retained = publisher.publish(f"{prefix}/line1/status", b"running", qos=1, retain=True)
    retained.wait_for_publish(timeout)
    published += 1
    closed: dict[str, bool] = {}
    for client_id, defect, _rule in MISBEHAVIOUR:
        closed[client_id] = _raw_client(host, port, client_id, defect, timeout)
    time.sleep(0.5)
    cleared = publisher.publish(f"{prefix}/line1/status", b"", qos=1, retain=True)
    cleared.wait_for_publish(timeout)
    for c in (publisher, *subscribers):
        c.disconnect()
        c.loop_stop()
    return TrafficReport(published, received, closed)
