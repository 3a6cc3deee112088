"""The seeded MQTT traffic the codec benchmark decodes: packets in order, each with its sender and wire bytes.

The 3.1.1 mix (``TrafficGenerator``): telemetry PUBLISHes (about 70% of the packets, QoS 0/1/2, 10-200 byte
payloads) with the acknowledgements their QoS calls for, keep-alives, subscriptions and a few connections. The
5.0 form of the same mix is in ``codec_traffic_mqtt5.py``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from mqttaudit import codec

CLIENT = "client"
SERVER = "server"
DIRECTIONS = (CLIENT, SERVER)

METRICS = ("temperature", "humidity", "pressure", "battery", "rssi", "status", "co2", "power")
ROOMS = ("kitchen", "livingroom", "bedroom", "garage", "office")
LETTERS = "abcdefghijklmnopqrstuvwxyz "
FIRMWARE = ("1.4.2", "1.4.3", "2.0.0-rc1", "2.0.1")


@dataclasses.dataclass
class Traffic:
    """The generated packets, in order, each with its sender and wire bytes in ``version`` (None: 3.1.1, or the
    version a CONNECT names)."""

    version: str | None = None
    packets: list[tuple[str, codec.Packet, bytes]] = dataclasses.field(default_factory=list)

    def add(self, direction: str, packet: codec.Packet) -> None:
        options = {} if self.version is None else {"version": self.version}  # older codecs know 3.1.1 only
        self.packets.append((direction, packet, codec.encode(packet, direction=direction, **options)))

    def stream(self, direction: str) -> bytes:
        return b"".join(raw for sender, _, raw in self.packets if sender == direction)

    def expected(self, direction: str) -> list[codec.Packet]:
        return [packet for sender, packet, _ in self.packets if sender == direction]


class TrafficGenerator:
    """Plausible MQTT 3.1.1 sessions: telemetry publishes and their QoS flows, keep-alives, subscriptions."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = {CLIENT: 1, SERVER: 1}
        self.clock = 1_717_000_000

    def packet_id(self, sender: str) -> int:
        value = self.next_id[sender]
        self.next_id[sender] = value % 65535 + 1
        return value

    def topic(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.75:
            return f"site/{rng.randint(1, 12)}/device/{rng.randint(1, 999)}/{rng.choice(METRICS)}"
        if roll < 0.9:
            return f"fleet/truck-{rng.randint(1, 250):03d}/gps"
        return f"home/{rng.choice(ROOMS)}/light/{rng.randint(1, 8)}/state"

    def topic_filter(self) -> str:
        rng = self.rng
        return rng.choice(
            (
                f"site/{rng.randint(1, 12)}/device/+/{rng.choice(METRICS)}",
                f"site/{rng.randint(1, 12)}/#",
                "fleet/+/gps",
                f"home/{rng.choice(ROOMS)}/light/+/state",
                f"cmd/device/{rng.randint(1, 999)}",
                "$SYS/broker/load/#",
            )
        )

    def payload(self) -> bytes:
        """10-200 bytes: mostly small JSON documents, some opaque binary (protobuf/CBOR-like) blobs."""
        rng = self.rng
        target = rng.randint(10, 200)
        if rng.random() < 0.2:
            return rng.randbytes(target)
        self.clock += rng.randint(0, 3)
        fields = [
            f'"v":{rng.uniform(-20, 80):.2f}',
            f'"ts":{self.clock}',
            f'"seq":{rng.randint(0, 1_000_000)}',
            f'"unit":"{rng.choice(("C", "%", "hPa", "V", "dBm", "ppm", "W"))}"',
            f'"fw":"{rng.choice(FIRMWARE)}"',
            f'"lat":{rng.uniform(-90, 90):.6f},"lon":{rng.uniform(-180, 180):.6f}',
            f'"batt":{rng.randint(0, 100)},"rssi":{rng.randint(-110, -40)}',
            f'"note":"{"".join(rng.choice(LETTERS) for _ in range(rng.randint(8, 60)))}"',
        ]
        text = "{" + fields[0]
        for extra in fields[1:]:
            if len(text) + len(extra) + 2 > min(target, 200):
                break
            text += "," + extra
        return (text + "}").encode()

    def publish(self, traffic: Traffic, sender: str) -> None:
        rng = self.rng
        receiver = SERVER if sender == CLIENT else CLIENT
        qos = rng.choices((0, 1, 2), weights=(80, 16, 4))[0]
        packet_id = self.packet_id(sender) if qos else None
        dup = bool(qos) and rng.random() < 0.01
        retain = rng.random() < 0.05
        publish = codec.Publish(
            topic=self.topic(), payload=self.payload(), qos=qos, retain=retain, dup=dup, packet_id=packet_id
        )
        traffic.add(sender, publish)
        if qos == 1:
            traffic.add(receiver, codec.Puback(packet_id=packet_id))
        elif qos == 2:
            traffic.add(receiver, codec.Pubrec(packet_id=packet_id))
            traffic.add(sender, codec.Pubrel(packet_id=packet_id))
            traffic.add(receiver, codec.Pubcomp(packet_id=packet_id))

    def subscribe(self, traffic: Traffic) -> None:
        rng = self.rng
        packet_id = self.packet_id(CLIENT)
        subscriptions = tuple(
            codec.Subscription(topic_filter=self.topic_filter(), qos=rng.randint(0, 2))
            for _ in range(rng.randint(1, 3))
        )
        traffic.add(CLIENT, codec.Subscribe(packet_id=packet_id, subscriptions=subscriptions))
        codes = tuple(0x80 if rng.random() < 0.05 else sub.qos for sub in subscriptions)
        traffic.add(SERVER, codec.Suback(packet_id=packet_id, return_codes=codes))

    def unsubscribe(self, traffic: Traffic) -> None:
        packet_id = self.packet_id(CLIENT)
        filters = tuple(self.topic_filter() for _ in range(self.rng.randint(1, 2)))
        traffic.add(CLIENT, codec.Unsubscribe(packet_id=packet_id, topic_filters=filters))
        traffic.add(SERVER, codec.Unsuback(packet_id=packet_id))

    def connect(self, traffic: Traffic) -> None:
        rng = self.rng
        device = rng.randint(1, 999)
        will = None
        if rng.random() < 0.5:
            will = codec.Will(topic=f"site/1/device/{device}/status", message=b'{"online":false}', qos=1, retain=True)
        with_login = rng.random() < 0.7
        connect = codec.Connect(
            client_id=f"dev-{device:04d}-{rng.randbytes(3).hex()}",
            keep_alive=rng.choice((30, 60, 120)),
            clean_session=rng.random() < 0.5,
            will=will,
            username=f"device-{device}" if with_login else None,
            password=rng.randbytes(16).hex().encode() if with_login else None,
        )
        traffic.add(CLIENT, connect)
        traffic.add(SERVER, codec.Connack(session_present=not connect.clean_session and rng.random() < 0.5))

    def ping(self, traffic: Traffic) -> None:
        traffic.add(CLIENT, codec.Pingreq())
        traffic.add(SERVER, codec.Pingresp())

    def start(self) -> Traffic:
        """The traffic before the mix: nothing here; a version whose packets depend on a CONNECT opens with one."""
        return Traffic()

    def build(self, count: int) -> Traffic:
        traffic = self.start()
        rng = self.rng
        while len(traffic.packets) < count:
            roll = rng.random()
            if roll < 0.925:
                self.publish(traffic, CLIENT if rng.random() < 0.6 else SERVER)
            elif roll < 0.97:
                self.ping(traffic)
            elif roll < 0.988:
                self.subscribe(traffic)
            elif roll < 0.996:
                self.unsubscribe(traffic)
            else:
                self.connect(traffic)
        del traffic.packets[count:]
        return traffic


def chunked(data: bytes, size: int) -> list[bytes]:
    """``data`` as a TCP receiver would read it: ``size``-byte segments, packets split anywhere."""
    return [data[pos : pos + size] for pos in range(0, len(data), size)]


def packet_aligned_chunks(raws: Sequence[bytes], size: int) -> list[tuple[bytes, int]]:
    """Whole packets grouped into chunks of at most ``size`` bytes (a bigger one goes alone), with counts."""
    chunks: list[tuple[bytes, int]] = []
    current: list[bytes] = []
    length = 0
    for raw in raws:
        if current and length + len(raw) > size:
            chunks.append((b"".join(current), len(current)))
            current, length = [], 0
        current.append(raw)
        length += len(raw)
    if current:
        chunks.append((b"".join(current), len(current)))
    return chunks
