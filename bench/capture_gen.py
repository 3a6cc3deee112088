"""Realistic MQTT 3.1.1 captures for the audit benchmark, written deterministically with mqttaudit's own writer.

What is written
    A classic pcap (Ethernet, IPv4, TCP, microsecond timestamps) as seen on the network interface of one broker
    at 10.0.0.1:1883. A discrete-event simulation plays hundreds of clients, each on its own TCP connection (its
    own address and ephemeral port), and a conforming broker:

    * devices (most clients) connect with a Will (their retained ``.../status`` topic), publish a retained
      "online" status, subscribe to their own command topics and their site's configuration (wildcard filters),
      then send telemetry reports (one to five PUBLISHes at once, QoS 0/1/2, JSON or binary payloads of 10-200
      bytes, now and then a 2-12 KB snapshot), answer commands, and send PINGREQ when idle for most of their
      Keep Alive; some are trucks on ``fleet/truck-NNN/...``;
    * back-end services subscribe with wildcard filters (``site/3/#``, ``site/+/device/+/temperature``,
      ``fleet/+/gps`` ...), mostly on persistent sessions (CleanSession 0), send commands at QoS 1 and 2, set
      and now and then clear (zero-byte) retained configuration, and open and close detail views (SUBSCRIBE,
      later UNSUBSCRIBE);
    * the broker answers every request (CONNACK with the right Session Present, SUBACK, UNSUBACK, PUBACK,
      PUBREC/PUBCOMP, PINGRESP), routes each message it takes to every session with a matching subscription,
      once, at the lower of the publish QoS and the highest granted QoS of the matching filters, with RETAIN 0;
      sends the retained message of every matching topic (RETAIN 1) after each SUBACK; keeps QoS 1 and 2
      messages for offline persistent sessions and sends them after the next CONNACK; publishes the Will when a
      connection ends without DISCONNECT; and runs the QoS 1 and 2 flows of its deliveries with the clients,
      which acknowledge in order;
    * about 0.1% of the packets are violations, each by a client that then stops talking: a SUBSCRIBE with an
      empty Topic Filter, a PUBLISH whose Topic Name holds a wildcard, or a fixed header whose Remaining Length
      has a fifth byte; the broker closes the connection on each (then publishes the Will), and the client
      reconnects a few seconds later. Clients also disconnect cleanly (DISCONNECT) or drop (RST) now and then.

    TCP is modelled at the segment level: three-way handshakes, a few hundred microseconds of coalescing per
    sender (so several MQTT packets share a segment), 1448-byte maximum segments (so large packets and bursts
    split across segments), delayed pure ACKs, FIN handshakes and resets, per-client round-trip times of 1-80 ms
    and correct sequence numbers and checksums. Every packet is completed by the segment that carries its last
    byte, and the other side reacts only after that segment was captured, in order.

    The capture is streamed to disk as it is simulated: memory stays bounded by the clients' state, not by the
    capture size. The number of MQTT packets is ``BENCH_PACKETS`` (default 4,000,000); a second capture of a
    quarter of that size, at most 1,000,000 packets (``BENCH_COMPARE_PACKETS``), is written for the memory
    comparison of ``bench/audit_bench.py``. Both come from the same seed, so the smaller one is the start of the
    larger one. Each capture gets a JSON manifest beside it (packet counts by type and QoS, violations by kind,
    connections, frames, simulated duration, the subscriptions made). Generation speed is printed and recorded.

How to reproduce
    .venv/bin/python bench/capture_gen.py                       # bench/out/mqtt-4000000.pcap and mqtt-1000000.pcap
    BENCH_PACKETS=200000 .venv/bin/python bench/capture_gen.py  # a quick pair (200,000 and 50,000 packets)
    .venv/bin/python bench/capture_gen.py --packets 20000 --only # one capture of that size, no comparison file
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import io
import itertools
import json
import math
import os
import platform
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mqttaudit import codec
from mqttaudit.capture import writer
from mqttaudit.topics import TopicTrie, matches

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out"
GENERATOR_VERSION = 2
DEFAULT_PACKETS = 4_000_000
COMPARE_LIMIT = 1_000_000
DEFAULT_CLIENTS = 400
DEFAULT_SEED = 20240601

LINKTYPE_ETHERNET = 1
BROKER_IP = bytes((10, 0, 0, 1))
BROKER_PORT = 1883
BROKER_MAC = bytes.fromhex("02000a000001")
GATEWAY_MAC = bytes.fromhex("02000a0000fe")
MSS = 1448
US = 1_000
MS = 1_000_000
S = 1_000_000_000
#: Time on the wire of one full-sized segment at 1 Gbit/s: consecutive segments of a burst are this far apart.
WIRE_NS = 12 * US
DELAYED_ACK_NS = 40 * MS
NAMESPACE = "broker"
CLIENT, BROKER = 0, 1

METRICS = ("temperature", "humidity", "pressure", "battery", "rssi", "co2", "power", "vibration")
CONFIG_KEYS = ("sampling", "thresholds", "firmware", "schedule", "calibration")
COMMANDS = ("reboot", "config", "ota", "locate", "sample")
UNITS = ("C", "%", "hPa", "V", "dBm", "ppm", "W", "mm/s")
SITES = 12
UNSUBACK = codec.PacketType.UNSUBACK
VIOLATIONS = ("empty-topic-filter", "wildcard-topic-name", "five-byte-remaining-length")


# ----------------------------------------------------------------------------------------------------------------
# TCP plumbing: one connection, its two send buffers and packet identifiers
# ----------------------------------------------------------------------------------------------------------------


class Outbox:
    """The bytes one side wrote and has not sent yet, and where each written MQTT packet ends in its stream."""

    __slots__ = ("data", "ends", "flush_at", "sent", "total")

    def __init__(self) -> None:
        self.data = bytearray()
        #: (end offset, start offset, packet) of every packet written and not yet wholly sent.
        self.ends: deque[tuple[int, int, codec.Packet | str]] = deque()
        self.sent = 0
        self.total = 0
        self.flush_at: int | None = None


class Identifiers:
    """Packet Identifiers of one sender: the next free one, never one still in flight."""

    __slots__ = ("busy", "next")

    def __init__(self, start: int) -> None:
        self.next = start
        self.busy: dict[int, object] = {}

    def take(self, what: object) -> int:
        value = self.next
        while value in self.busy:
            value = value % 65535 + 1
        self.next = value % 65535 + 1
        self.busy[value] = what
        return value

    def free(self, value: int | None) -> object:
        return self.busy.pop(value, None) if value is not None else None


class Connection:
    """One TCP connection between a client and the broker, with the state of both MQTT endpoints on it."""

    __slots__ = (
        "ack_timer",
        "broker_active",
        "client",
        "client_active",
        "clock",
        "fin",
        "ids",
        "index",
        "open",
        "out",
        "qos2_in",
        "session",
        "tcp",
        "unacked",
    )

    def __init__(self, index: int, client: Client, tcp: writer.TcpSession, rng: random.Random) -> None:
        self.index = index
        self.client = client
        self.tcp = tcp
        self.out = (Outbox(), Outbox())
        self.ids = (Identifiers(rng.randint(1, 65535)), Identifiers(rng.randint(1, 65535)))
        #: QoS 2 PUBLISH identifiers each side received and has not seen PUBREL for.
        self.qos2_in: tuple[dict[int, None], dict[int, None]] = ({}, {})
        #: When each side last reacted: reactions keep the order in which the packets arrived.
        self.clock = [0, 0]
        self.unacked = [0, 0]
        self.ack_timer = [False, False]
        self.fin = [False, False]
        self.open = True
        #: The client still speaks (not after DISCONNECT, a violation or a reset); the broker still serves it.
        self.client_active = True
        self.broker_active = False
        self.session: BrokerSession | None = None


# ----------------------------------------------------------------------------------------------------------------
# The clients
# ----------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class Client:
    index: int
    kind: str  # "device", "truck" or "service"
    client_id: str
    ip: bytes
    site: int
    name: str  # device number or service name, used in topics
    keep_alive: int
    clean: bool
    rtt_ns: int
    #: Mean seconds between two actions (a telemetry report, a command ...).
    interval: float
    qos_weights: tuple[int, int, int]
    metrics: tuple[str, ...]
    filters: tuple[tuple[str, int], ...]
    will: codec.Will | None
    conn: Connection | None = None
    connected: bool = False
    subscribed_once: bool = False
    last_sent: int = 0
    next_port: int = 0
    #: Chosen to break a rule at its next action.
    violates: bool = False
    #: Detail views a service holds (filter -> when to close it).
    views: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def status_topic(self) -> str:
        if self.kind == "truck":
            return f"fleet/truck-{self.name}/status"
        return f"site/{self.site}/device/{self.name}/status"


# ----------------------------------------------------------------------------------------------------------------
# The broker's state
# ----------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class BrokerSession:
    client_id: str
    clean: bool
    subscriptions: dict[str, int] = dataclasses.field(default_factory=dict)
    conn: Connection | None = None
    will: codec.Will | None = None
    #: QoS 1 and 2 messages kept while the persistent session is offline: (topic, payload, qos).
    queue: list[tuple[str, bytes, int]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Stats:
    packets: int = 0
    by_type: Counter[str] = dataclasses.field(default_factory=Counter)
    by_direction: Counter[str] = dataclasses.field(default_factory=Counter)
    publish_qos: Counter[str] = dataclasses.field(default_factory=Counter)
    violations: Counter[str] = dataclasses.field(default_factory=Counter)
    frames: int = 0
    data_segments: int = 0
    multi_packet_segments: int = 0
    split_packets: int = 0
    connections: int = 0
    closes: Counter[str] = dataclasses.field(default_factory=Counter)
    deliveries: int = 0
    retained_sent: int = 0
    offline_sent: int = 0
    wills: int = 0
    pcap_bytes: int = 0
    mqtt_bytes: int = 0


# ----------------------------------------------------------------------------------------------------------------
# The simulation
# ----------------------------------------------------------------------------------------------------------------

Handler = Callable[[Any], None]


class Simulation:
    """Clients and broker as events on one clock; every segment is written to the capture as it is sent."""

    def __init__(self, packets: int, clients: int, seed: int, out: io.BufferedIOBase) -> None:
        self.rng = random.Random(seed)
        self.target = packets
        self.out = out
        self.pcap = writer.PcapWriter(out, LINKTYPE_ETHERNET)
        self.stats = Stats()
        self.queue: list[tuple[int, int, Handler, Any]] = []
        self.order = itertools.count()
        self.now = 0
        self.last_written = 0
        self.start_ns = 1_717_200_000 * S
        self.done = False
        self.sessions: dict[str, BrokerSession] = {}
        self.trie: TopicTrie[str] = TopicTrie("mqtt")
        self.routes: dict[str, list[tuple[str, int]]] = {}
        self.retained: dict[str, tuple[bytes, int]] = {}
        self.next_violation = self.rng.randint(500, 1500)
        self.filters_seen: Counter[str] = Counter()
        self.clients = self._clients(clients)
        self.devices = [client for client in self.clients if client.kind != "service"]
        self.pingreq = codec.encode(codec.Pingreq())
        self.pingresp = codec.encode(codec.Pingresp())
        self.disconnect = codec.encode(codec.Disconnect())

    # -- the population --------------------------------------------------------------------------------------

    def _clients(self, count: int) -> list[Client]:
        rng = self.rng
        services = max(4, count // 25)
        clients: list[Client] = []
        for index in range(count):
            host = 2 + index
            ip = bytes((10, 1 + host // 250, host % 250 + 1, 1 + index % 7))
            rtt = int(rng.uniform(1, 80) * MS)
            if index < services:
                clients.append(self._service(index, ip, rtt))
                continue
            truck = rng.random() < 0.15
            number = f"{index:04d}"
            site = 1 + index % SITES
            kind = "truck" if truck else "device"
            client = Client(
                index=index,
                kind=kind,
                client_id=f"{'truck' if truck else 'dev'}-{number}-{rng.randbytes(3).hex()}",
                ip=ip,
                site=site,
                name=number,
                keep_alive=rng.choice((30, 60, 60, 120)),
                clean=rng.random() < 0.6,
                rtt_ns=rtt,
                # Log-uniform between 0.1 s and 2 minutes: a few chatty devices, many quiet ones.
                interval=math.exp(rng.uniform(math.log(0.1), math.log(120.0))),
                qos_weights=rng.choice(((80, 15, 5), (60, 30, 10), (30, 60, 10), (90, 10, 0))),
                metrics=tuple(rng.sample(METRICS, rng.randint(2, 5))),
                filters=(
                    (f"cmd/device/{number}/#", rng.choice((1, 2))),
                    ("fleet/broadcast/+" if truck else f"site/{site}/config/#", 1),
                ),
                will=None,
            )
            client.will = codec.Will(topic=client.status_topic, message=b'{"online":false}', qos=1, retain=True)
            clients.append(client)
        return clients

    def _service(self, index: int, ip: bytes, rtt: int) -> Client:
        rng = self.rng
        role = ("ingest", "dashboard", "rules", "fleet")[index % 4]
        site = 1 + rng.randrange(SITES)
        metric = rng.choice(METRICS)
        choices = {
            "ingest": [(f"site/{site}/#", 1), (f"site/{1 + (site + 5) % SITES}/device/+/+", 0)],
            "dashboard": [("site/+/device/+/status", 1), (f"site/+/device/+/{metric}", 0)],
            "rules": [(f"site/{site}/device/+/{metric}", 2), ("cmd/device/+/reply", 1)],
            "fleet": [("fleet/+/gps", 0), ("fleet/+/status", 1)],
        }[role]
        return Client(
            index=index,
            kind="service",
            client_id=f"svc-{role}-{index:02d}",
            ip=ip,
            site=site,
            name=f"{role}-{index:02d}",
            keep_alive=60,
            clean=rng.random() < 0.3,
            rtt_ns=rtt // 10 + MS,  # services sit close to the broker
            interval=rng.uniform(2.0, 8.0),
            qos_weights=(0, 70, 30),
            metrics=(),
            filters=tuple(choices),
            will=None,
        )

    # -- the event loop --------------------------------------------------------------------------------------

    def at(self, when: int, handler: Handler, arg: Any = None) -> None:
        heapq.heappush(self.queue, (when, next(self.order), handler, arg))

    def run(self, progress: Callable[[int], None]) -> None:
        rng = self.rng
        # Clients connect over the first seconds, as after a broker restart.
        for client in self.clients:
            client.next_port = 32768 + rng.randrange(20000)
            self.at(int(rng.uniform(0, 3) * S), self._connect, client)
        reported = 0
        queue, pop = self.queue, heapq.heappop
        while queue and not self.done:
            when, _, handler, arg = pop(queue)
            self.now = when
            handler(arg)
            if self.stats.packets - reported >= 200_000:
                reported = self.stats.packets
                progress(reported)
        # The target is reached: what was written goes out, nothing more is said.
        for client in self.clients:
            conn = client.conn
            if conn is not None and conn.open:
                for side in (CLIENT, BROKER):
                    if conn.out[side].data:
                        self._send_segments(conn, side, react=False)

    def write(self, when: int, side: int, frame: bytes) -> None:
        when = max(when, self.last_written)
        self.last_written = when
        eth = (
            writer.ethernet(frame, src=GATEWAY_MAC, dst=BROKER_MAC)
            if side == CLIENT
            else writer.ethernet(frame, src=BROKER_MAC, dst=GATEWAY_MAC)
        )
        self.pcap.write(self.start_ns + when, eth)
        self.stats.frames += 1
        self.stats.pcap_bytes += 16 + len(eth)

    # -- sending ---------------------------------------------------------------------------------------------

    def send(self, conn: Connection, side: int, packet: codec.Packet | str, raw: bytes) -> bool:
        """Writes one MQTT packet to ``side``'s send buffer; it leaves with the next flush (a few hundred
        microseconds later, together with whatever else the side writes meanwhile)."""
        if self.done or not conn.open or conn.fin[side]:
            return False
        stats = self.stats
        stats.packets += 1
        if stats.packets >= self.target:
            self.done = True
        name = packet if isinstance(packet, str) else packet.packet_type.name
        stats.by_type[name] += 1
        stats.by_direction["client" if side == CLIENT else "server"] += 1
        stats.mqtt_bytes += len(raw)
        box = conn.out[side]
        box.data += raw
        box.ends.append((box.total + len(raw), box.total, packet))
        box.total += len(raw)
        if side == CLIENT:
            conn.client.last_sent = self.now
        if box.flush_at is None:
            spread = 300 * US if side == BROKER else 150 * US
            box.flush_at = self.now + self.rng.randrange(20 * US, spread)
            self.at(box.flush_at, self._flush, (conn, side))
        return True

    def _flush(self, arg: tuple[Connection, int]) -> None:
        conn, side = arg
        conn.out[side].flush_at = None
        if conn.open and conn.out[side].data:
            self._send_segments(conn, side, react=True)

    def _send_segments(self, conn: Connection, side: int, *, react: bool) -> None:
        box = conn.out[side]
        data = bytes(box.data)
        box.data.clear()
        when = self.now
        stats = self.stats
        peer = 1 - side
        for pos in range(0, len(data), MSS):
            piece = data[pos : pos + MSS]
            box.sent += len(piece)
            self.write(when, side, conn.tcp.send(side, piece))
            stats.data_segments += 1
            done: list[codec.Packet | str] = []
            ends = box.ends
            while ends and ends[0][0] <= box.sent:
                done.append(ends.popleft()[2])
            if ends and ends[0][1] < box.sent:
                stats.split_packets += 1  # the next packet continues in the following segment
            if len(done) > 1:
                stats.multi_packet_segments += 1
            conn.unacked[side] = 0  # the data carries the acknowledgement of what the peer sent
            if react and done:
                self._deliver_to(conn, peer, done, when)
            if react:
                self._acknowledge_later(conn, peer, when)
            when += WIRE_NS

    def _deliver_to(self, conn: Connection, receiver: int, packets: list[codec.Packet | str], sent: int) -> None:
        """The receiver reacts to the packets a segment completed, in order, after its processing time (the
        broker, where the capture is taken) or the round trip (a client)."""
        rng = self.rng
        if receiver == BROKER:
            delay = rng.randrange(30 * US, 400 * US)
        else:
            delay = conn.client.rtt_ns + rng.randrange(50 * US, 2 * MS)
        when = max(sent + delay, conn.clock[receiver] + 1)
        conn.clock[receiver] = when
        self.at(when, self._receive, (conn, receiver, packets))

    def _acknowledge_later(self, conn: Connection, receiver: int, sent: int) -> None:
        """Delayed ACKs: every second segment at once, otherwise after 40 ms unless data carried it before."""
        conn.unacked[receiver] += 1
        rtt = conn.client.rtt_ns if receiver == CLIENT else 0
        if conn.unacked[receiver] >= 2:
            self.at(sent + rtt + 20 * US, self._pure_ack, (conn, receiver))
        elif not conn.ack_timer[receiver]:
            conn.ack_timer[receiver] = True
            self.at(sent + rtt + DELAYED_ACK_NS, self._pure_ack, (conn, receiver))

    def _pure_ack(self, arg: tuple[Connection, int]) -> None:
        conn, side = arg
        conn.ack_timer[side] = False
        if conn.open and not conn.fin[side] and conn.unacked[side] and not self.done:
            conn.unacked[side] = 0
            self.write(self.now, side, conn.tcp.segment(side))

    # -- connections -----------------------------------------------------------------------------------------

    def _connect(self, client: Client) -> None:
        if self.done:
            return
        rng = self.rng
        client.next_port = 32768 + (client.next_port - 32768 + rng.randint(1, 97)) % 28000
        tcp = writer.TcpSession(
            (client.ip, client.next_port),
            (BROKER_IP, BROKER_PORT),
            client_isn=rng.getrandbits(32),
            server_isn=rng.getrandbits(32),
        )
        if client.clean:
            client.views.clear()  # a new session holds none of the old one's subscriptions
        conn = Connection(self.stats.connections, client, tcp, rng)
        self.stats.connections += 1
        client.conn, client.connected = conn, False
        syn, syn_ack, ack = tcp.handshake()
        now = self.now
        self.write(now, CLIENT, syn)
        self.write(now + rng.randrange(20 * US, 120 * US), BROKER, syn_ack)
        self.at(now + client.rtt_ns, self._send_connect, (conn, ack))

    def _send_connect(self, arg: tuple[Connection, bytes]) -> None:
        conn, ack = arg
        if self.done:
            return
        client = conn.client
        self.write(self.now, CLIENT, ack)
        rng = self.rng
        login = client.kind != "truck"
        connect = codec.Connect(
            client_id=client.client_id,
            keep_alive=client.keep_alive,
            clean_session=client.clean,
            will=client.will,
            username=f"{client.kind}-{client.name}" if login else None,
            password=rng.randbytes(12).hex().encode() if login else None,
        )
        self.send(conn, CLIENT, connect, codec.encode(connect))

    def _close(self, conn: Connection, side: int, *, reset: bool = False) -> None:
        """``side`` ends the connection: its buffer goes out, then its FIN (or RST); the peer answers a FIN
        with its own after a processing time or a round trip, and the first closer ACKs that."""
        if not conn.open or conn.fin[side]:
            return
        if conn.out[side].data:
            self._send_segments(conn, side, react=True)
        if reset:
            self.write(self.now, side, conn.tcp.reset(side))
            conn.open = False
            self.stats.closes["reset"] += 1
            return
        self.write(self.now, side, conn.tcp.fin(side))
        conn.fin[side] = True
        peer = 1 - side
        if conn.fin[peer]:
            self.at(self.now + (conn.client.rtt_ns if side == BROKER else 50 * US), self._last_ack, (conn, peer))
            return
        delay = conn.client.rtt_ns + 100 * US if peer == CLIENT else self.rng.randrange(50 * US, 300 * US)
        # The peer sees the FIN after everything sent before it: its answer waits for its earlier reactions.
        when = max(self.now + delay, conn.clock[peer] + 1)
        conn.clock[peer] = when
        self.at(when, self._peer_fin, (conn, peer))

    def _peer_fin(self, arg: tuple[Connection, int]) -> None:
        conn, side = arg
        if side == CLIENT:
            conn.client_active = False
        else:
            self._broker_lost(conn)
        self._close(conn, side)

    def _last_ack(self, arg: tuple[Connection, int]) -> None:
        conn, side = arg
        if conn.open:
            self.write(self.now, side, conn.tcp.segment(side))
            conn.open = False

    # -- client behaviour ------------------------------------------------------------------------------------

    def _client_receive(self, conn: Connection, packet: codec.Packet | str) -> None:
        client = conn.client
        if not conn.client_active or isinstance(packet, str):
            return
        kind = packet.packet_type
        if kind is codec.PacketType.CONNACK:
            assert isinstance(packet, codec.Connack)
            self._connected(client, conn, packet.session_present)
        elif kind is codec.PacketType.PUBLISH:
            assert isinstance(packet, codec.Publish)
            if packet.qos == 1:
                self._reply(conn, CLIENT, codec.Puback(packet_id=packet.packet_id))
            elif packet.qos == 2:
                conn.qos2_in[CLIENT][packet.packet_id] = None
                self._reply(conn, CLIENT, codec.Pubrec(packet_id=packet.packet_id))
            if client.kind != "service" and packet.topic.rsplit("/", 1)[-1] in COMMANDS:
                reply = codec.Publish(
                    topic=f"cmd/device/{client.name}/reply",
                    payload=b'{"ok":true,"cmd":"' + packet.topic.rsplit("/", 1)[-1].encode() + b'"}',
                    qos=1,
                    packet_id=conn.ids[CLIENT].take("publish"),
                )
                self._publish_out(conn, reply)
        elif kind is codec.PacketType.PUBREL:
            conn.qos2_in[CLIENT].pop(packet.packet_id, None)  # type: ignore[attr-defined]
            self._reply(conn, CLIENT, codec.Pubcomp(packet_id=packet.packet_id))  # type: ignore[attr-defined]
        elif kind is codec.PacketType.PUBREC:
            self._reply(conn, CLIENT, codec.Pubrel(packet_id=packet.packet_id))  # type: ignore[attr-defined]
        elif kind in (codec.PacketType.PUBACK, codec.PacketType.PUBCOMP, codec.PacketType.SUBACK, UNSUBACK):
            conn.ids[CLIENT].free(packet.packet_id)  # type: ignore[attr-defined]

    def _reply(self, conn: Connection, side: int, packet: codec.Packet) -> None:
        self.send(conn, side, packet, codec.encode(packet))

    def _publish_out(self, conn: Connection, publish: codec.Publish) -> None:
        self.stats.publish_qos[f"qos{publish.qos}"] += 1
        self.send(conn, CLIENT, publish, codec.encode(publish))

    def _connected(self, client: Client, conn: Connection, session_present: bool) -> None:
        rng = self.rng
        client.connected = True
        if not session_present or client.kind != "service":
            # Devices subscribe on every connection; services only when the broker holds no session for them.
            ident = conn.ids[CLIENT].take("subscribe")
            subscribe = codec.Subscribe(
                packet_id=ident,
                subscriptions=tuple(codec.Subscription(topic_filter=f, qos=q) for f, q in client.filters),
            )
            for topic_filter, _ in client.filters:
                self.filters_seen[topic_filter] += 1
            self._reply(conn, CLIENT, subscribe)
        if client.will is not None:
            status = codec.Publish(
                topic=client.status_topic,
                payload=b'{"online":true,"fw":"' + rng.choice((b"1.4.2", b"1.4.3", b"2.0.1")) + b'"}',
                qos=1,
                retain=True,
                packet_id=conn.ids[CLIENT].take("publish"),
            )
            self._publish_out(conn, status)
        self.at(self.now + int(rng.expovariate(1 / client.interval) * S) + MS, self._act, (client, conn))
        self.at(self.now + int(client.keep_alive * 0.75 * S), self._keep_alive, (client, conn))

    def _keep_alive(self, arg: tuple[Client, Connection]) -> None:
        client, conn = arg
        if self.done or client.conn is not conn or not conn.open or not conn.client_active:
            return
        due = client.last_sent + int(client.keep_alive * 0.75 * S)
        if due <= self.now:
            self.send(conn, CLIENT, codec.Pingreq(), self.pingreq)
            due = self.now + int(client.keep_alive * 0.75 * S)
        self.at(due, self._keep_alive, arg)

    def _act(self, arg: tuple[Client, Connection]) -> None:
        client, conn = arg
        if self.done or client.conn is not conn or not conn.open or not conn.client_active:
            return
        rng = self.rng
        if self.stats.packets >= self.next_violation:
            # The client that misbehaves is drawn at random (not the busiest one); it does so at its next action.
            self.next_violation = self.stats.packets + rng.randint(500, 1500)
            rng.choice(self.clients).violates = True
        if client.violates:
            client.violates = False
            self._violate(client, conn)
            return
        roll = rng.random()
        # Per action: a clean DISCONNECT about every 4,000 actions, a dropped connection every 10,000.
        if roll < 0.00025:
            self._disconnect(client, conn)
            return
        if roll < 0.00035:
            self._drop(client, conn)
            return
        if client.kind == "service":
            self._service_action(client, conn)
        else:
            self._report(client, conn)
        self.at(self.now + int(rng.expovariate(1 / client.interval) * S) + 10 * US, self._act, arg)

    def _qos(self, client: Client) -> int:
        return self.rng.choices((0, 1, 2), weights=client.qos_weights)[0]

    def _payload(self, metric: str) -> bytes:
        rng = self.rng
        if rng.random() < 0.2:
            return rng.randbytes(rng.randint(10, 200))
        fields = [
            f'"v":{rng.uniform(-20, 80):.2f}',
            f'"unit":"{rng.choice(UNITS)}"',
            f'"ts":{self.start_ns // S + self.now // S}',
            f'"seq":{rng.randrange(1_000_000)}',
            f'"m":"{metric}"',
            f'"batt":{rng.randint(0, 100)},"rssi":{rng.randint(-110, -40)}',
        ]
        return ("{" + ",".join(fields[: rng.randint(2, len(fields))]) + "}").encode()

    def _report(self, client: Client, conn: Connection) -> None:
        """A telemetry report: one PUBLISH per metric read, written at once (so they share a segment)."""
        rng = self.rng
        if client.kind == "truck":
            topics = [f"fleet/truck-{client.name}/gps"]
            if rng.random() < 0.3:
                topics.append(f"fleet/truck-{client.name}/{rng.choice(client.metrics)}")
        else:
            base = f"site/{client.site}/device/{client.name}/"
            topics = [base + m for m in rng.sample(client.metrics, rng.randint(1, len(client.metrics)))]
            if rng.random() < 0.005:
                topics.append(base + "snapshot")
        for topic in topics:
            qos = self._qos(client)
            if topic.endswith("snapshot"):
                payload, qos = rng.randbytes(rng.randint(2_000, 12_000)), 1
            elif topic.endswith("gps"):
                payload = f'{{"lat":{rng.uniform(-90, 90):.6f},"lon":{rng.uniform(-180, 180):.6f}}}'.encode()
            else:
                payload = self._payload(topic.rsplit("/", 1)[-1])
            ident = conn.ids[CLIENT].take("publish") if qos else None
            self._publish_out(conn, codec.Publish(topic=topic, payload=payload, qos=qos, packet_id=ident))

    def _service_action(self, client: Client, conn: Connection) -> None:
        rng = self.rng
        for view, until in list(client.views.items()):
            if until <= self.now:
                del client.views[view]
                ident = conn.ids[CLIENT].take("unsubscribe")
                self._reply(conn, CLIENT, codec.Unsubscribe(packet_id=ident, topic_filters=(view,)))
        roll = rng.random()
        target = rng.choice(self.devices)
        if roll < 0.7:
            command = rng.choice(COMMANDS)
            qos = rng.choice((1, 1, 2))
            publish = codec.Publish(
                topic=f"cmd/device/{target.name}/{command}",
                payload=json.dumps({"cmd": command, "id": rng.randrange(1 << 30)}).encode(),
                qos=qos,
                packet_id=conn.ids[CLIENT].take("publish"),
            )
            self._publish_out(conn, publish)
        elif roll < 0.85:
            site = rng.randint(1, SITES)
            key = rng.choice(CONFIG_KEYS)
            clear = rng.random() < 0.1
            payload = b"" if clear else json.dumps({"key": key, "rev": rng.randrange(1000)}).encode()
            topic = "fleet/broadcast/" + key if rng.random() < 0.15 else f"site/{site}/config/{key}"
            publish = codec.Publish(
                topic=topic, payload=payload, qos=1, retain=True, packet_id=conn.ids[CLIENT].take("publish")
            )
            self._publish_out(conn, publish)
        elif roll < 0.95 and len(client.views) < 3:
            view = (
                f"fleet/truck-{target.name}/#"
                if target.kind == "truck"
                else f"site/{target.site}/device/{target.name}/#"
            )
            if view not in client.views:
                client.views[view] = self.now + int(rng.uniform(10, 90) * S)
                self.filters_seen[view] += 1
                ident = conn.ids[CLIENT].take("subscribe")
                subscribe = codec.Subscribe(
                    packet_id=ident, subscriptions=(codec.Subscription(topic_filter=view, qos=rng.randint(0, 2)),)
                )
                self._reply(conn, CLIENT, subscribe)
        else:
            topic = f"site/{rng.randint(1, SITES)}/alerts/{rng.choice(METRICS)}"
            self._publish_out(conn, codec.Publish(topic=topic, payload=b'{"level":"warn"}', qos=0))

    def _violate(self, client: Client, conn: Connection) -> None:
        """A client breaks a rule and then falls silent; the broker closes the connection on it."""
        rng = self.rng
        kind = VIOLATIONS[self.stats.violations.total() % len(VIOLATIONS)]
        self.stats.violations[kind] += 1
        if kind == "empty-topic-filter":
            packet = codec.Subscribe(
                packet_id=conn.ids[CLIENT].take("subscribe"),
                subscriptions=(codec.Subscription(topic_filter="", qos=1),),
            )
            raw = codec.encode(packet, validate=False)
        elif kind == "wildcard-topic-name":
            topic = f"site/{client.site}/device/+/{rng.choice(METRICS)}"
            qos = rng.choice((0, 1))
            ident = conn.ids[CLIENT].take("publish") if qos else None
            packet = codec.Publish(topic=topic, payload=self._payload("x"), qos=qos, packet_id=ident)
            raw = codec.encode(packet, validate=False)
        else:
            # PUBLISH with a Remaining Length of 80 80 80 80 01, then what the client meant to send.
            body = codec.encode(codec.Publish(topic=client.status_topic, payload=self._payload("x")))[2:]
            raw = bytes((0x30, 0x80, 0x80, 0x80, 0x80, 0x01)) + body
        marker = f"VIOLATION:{kind}"
        self.send(conn, CLIENT, marker, raw)
        conn.client_active = False
        client.connected = False
        self.at(self.now + int(rng.uniform(2, 8) * S), self._reconnect, client)

    def _disconnect(self, client: Client, conn: Connection) -> None:
        self.send(conn, CLIENT, codec.Disconnect(), self.disconnect)
        conn.client_active = False
        client.connected = False
        self.at(self.now + 200 * US, self._client_fin, conn)
        self.at(self.now + int(self.rng.uniform(1, 10) * S), self._reconnect, client)

    def _client_fin(self, conn: Connection) -> None:
        self.stats.closes["disconnect"] += 1
        self._close(conn, CLIENT)

    def _drop(self, client: Client, conn: Connection) -> None:
        """The client vanishes (power loss, network change): its stack resets the connection."""
        conn.client_active = False
        client.connected = False
        conn.out[CLIENT].data.clear()
        conn.out[CLIENT].ends.clear()
        self._close(conn, CLIENT, reset=True)
        self.at(self.now + self.rng.randrange(30 * US, 300 * US), self._broker_lost_event, conn)
        self.at(self.now + int(self.rng.uniform(3, 15) * S), self._reconnect, client)

    def _reconnect(self, client: Client) -> None:
        if not self.done:
            self._connect(client)

    # -- broker behaviour ------------------------------------------------------------------------------------

    def _receive(self, arg: tuple[Connection, int, list[codec.Packet | str]]) -> None:
        conn, receiver, packets = arg
        if self.done:
            return
        for packet in packets:
            if receiver == BROKER:
                self._broker_receive(conn, packet)
            else:
                self._client_receive(conn, packet)

    def _broker_receive(self, conn: Connection, packet: codec.Packet | str) -> None:
        if not conn.open or conn.fin[BROKER]:
            return
        if isinstance(packet, str):  # a violation: stop serving the client and close the connection
            self.stats.closes["violation"] += 1
            self._broker_lost(conn)
            self._close(conn, BROKER)
            return
        kind = packet.packet_type
        if kind is codec.PacketType.CONNECT:
            assert isinstance(packet, codec.Connect)
            self._accept(conn, packet)
            return
        if not conn.broker_active:
            return
        session = conn.session
        assert session is not None
        if kind is codec.PacketType.PUBLISH:
            assert isinstance(packet, codec.Publish)
            if packet.qos == 1:
                self._reply(conn, BROKER, codec.Puback(packet_id=packet.packet_id))
            elif packet.qos == 2:
                if packet.packet_id in conn.qos2_in[BROKER]:
                    self._reply(conn, BROKER, codec.Pubrec(packet_id=packet.packet_id))
                    return
                conn.qos2_in[BROKER][packet.packet_id] = None  # type: ignore[index]
                self._reply(conn, BROKER, codec.Pubrec(packet_id=packet.packet_id))
            if packet.retain:
                if packet.payload:
                    self.retained[packet.topic] = (packet.payload, packet.qos)
                else:
                    self.retained.pop(packet.topic, None)
            self._route(packet.topic, packet.payload, packet.qos)
        elif kind is codec.PacketType.PUBREL:
            conn.qos2_in[BROKER].pop(packet.packet_id, None)  # type: ignore[attr-defined]
            self._reply(conn, BROKER, codec.Pubcomp(packet_id=packet.packet_id))  # type: ignore[attr-defined]
        elif kind is codec.PacketType.PUBACK or kind is codec.PacketType.PUBCOMP:
            conn.ids[BROKER].free(packet.packet_id)  # type: ignore[attr-defined]
        elif kind is codec.PacketType.PUBREC:
            self._reply(conn, BROKER, codec.Pubrel(packet_id=packet.packet_id))  # type: ignore[attr-defined]
        elif kind is codec.PacketType.SUBSCRIBE:
            assert isinstance(packet, codec.Subscribe)
            self._subscribe(conn, session, packet)
        elif kind is codec.PacketType.UNSUBSCRIBE:
            assert isinstance(packet, codec.Unsubscribe)
            for topic_filter in packet.topic_filters:
                if session.subscriptions.pop(topic_filter, None) is not None:
                    self.trie.remove(NAMESPACE, topic_filter, session.client_id)
                    self.routes.clear()
            self._reply(conn, BROKER, codec.Unsuback(packet_id=packet.packet_id))
        elif kind is codec.PacketType.PINGREQ:
            self.send(conn, BROKER, codec.Pingresp(), self.pingresp)
        elif kind is codec.PacketType.DISCONNECT:
            session.will = None
            self._broker_lost(conn)

    def _accept(self, conn: Connection, connect: codec.Connect) -> None:
        held = self.sessions.get(connect.client_id)
        present = held is not None and not held.clean and not connect.clean_session
        if held is not None and not present:
            self._discard(held)
            held = None
        session = held or BrokerSession(connect.client_id, connect.clean_session)
        self.sessions[connect.client_id] = session
        session.conn, session.will = conn, connect.will
        conn.session, conn.broker_active = session, True
        self._reply(conn, BROKER, codec.Connack(session_present=present))
        queued, session.queue = session.queue, []
        for topic, payload, qos in queued:
            self.stats.offline_sent += 1
            self._deliver(conn, topic, payload, qos, retain=False)

    def _discard(self, session: BrokerSession) -> None:
        for topic_filter in session.subscriptions:
            self.trie.remove(NAMESPACE, topic_filter, session.client_id)
        if session.subscriptions:
            self.routes.clear()
        session.subscriptions.clear()
        session.queue.clear()
        if self.sessions.get(session.client_id) is session:
            del self.sessions[session.client_id]

    def _subscribe(self, conn: Connection, session: BrokerSession, subscribe: codec.Subscribe) -> None:
        granted = []
        for subscription in subscribe.subscriptions:
            name = subscription.topic_filter
            if name not in session.subscriptions:
                self.trie.add(NAMESPACE, name, session.client_id)
            session.subscriptions[name] = subscription.qos
            granted.append(subscription.qos)
        self.routes.clear()
        self._reply(conn, BROKER, codec.Suback(packet_id=subscribe.packet_id, return_codes=granted))
        # [MQTT-3.3.1-6] The retained message of every matching topic, RETAIN 1, after the SUBACK.
        for subscription in subscribe.subscriptions:
            for topic, (payload, qos) in self.retained.items():
                if matches(subscription.topic_filter, topic):
                    self.stats.retained_sent += 1
                    self._deliver(conn, topic, payload, min(qos, subscription.qos), retain=True)

    def _route(self, topic: str, payload: bytes, qos: int) -> None:
        """One copy per matching session, at the lower of the publish QoS and the best granted QoS."""
        targets = self.routes.get(topic)
        if targets is None:
            best: dict[str, int] = {}
            for topic_filter, client_id in self.trie.match_subscriptions(NAMESPACE, topic):
                granted = self.sessions[client_id].subscriptions[topic_filter]
                best[client_id] = max(best.get(client_id, 0), granted)
            targets = self.routes[topic] = list(best.items())
        for client_id, granted in targets:
            session = self.sessions[client_id]
            level = min(qos, granted)
            conn = session.conn
            if conn is not None and conn.broker_active:
                self._deliver(conn, topic, payload, level, retain=False)
            elif not session.clean and level:
                session.queue.append((topic, payload, level))

    def _deliver(self, conn: Connection, topic: str, payload: bytes, qos: int, *, retain: bool) -> None:
        self.stats.deliveries += 1
        ident = conn.ids[BROKER].take("delivery") if qos else None
        publish = codec.Publish(topic=topic, payload=payload, qos=qos, retain=retain, packet_id=ident)
        self.send(conn, BROKER, publish, codec.encode(publish))

    def _broker_lost_event(self, conn: Connection) -> None:
        self._broker_lost(conn)

    def _broker_lost(self, conn: Connection) -> None:
        """The broker stops serving a connection: the session goes offline (or away), the Will goes out."""
        if not conn.broker_active:
            return
        conn.broker_active = False
        session = conn.session
        if session is None or session.conn is not conn:
            return
        session.conn = None
        will, session.will = session.will, None
        if session.clean:
            self._discard(session)
        if will is not None and not self.done:
            # Published once the connection is gone (after the broker's FIN or the client's RST).
            self.at(self.now + self.rng.randrange(400 * US, 2 * MS), self._publish_will, will)

    def _publish_will(self, will: codec.Will) -> None:
        if self.done:
            return
        self.stats.wills += 1
        if will.retain:
            if will.message:
                self.retained[will.topic] = (will.message, will.qos)
            else:
                self.retained.pop(will.topic, None)
        self._route(will.topic, will.message, will.qos)


# ----------------------------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------------------------


def capture_path(packets: int, out_dir: Path = OUT_DIR) -> Path:
    return out_dir / f"mqtt-{packets}.pcap"


def manifest_path(capture: Path) -> Path:
    return capture.with_suffix(".json")


def sizes_from_env(argv_packets: int | None = None) -> tuple[int, int]:
    """The benchmark's capture size (``BENCH_PACKETS``) and the comparison size (``BENCH_COMPARE_PACKETS``, by
    default a quarter of it, at most 1,000,000)."""
    packets = argv_packets or int(os.environ.get("BENCH_PACKETS", DEFAULT_PACKETS))
    compare = int(os.environ.get("BENCH_COMPARE_PACKETS", min(COMPARE_LIMIT, packets // 4)))
    return packets, compare


def generate(packets: int, path: Path, *, clients: int, seed: int) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".pcap.partial")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    with partial.open("wb", buffering=4 * 1024 * 1024) as out:
        simulation = Simulation(packets, clients, seed, out)

        def progress(done: int) -> None:
            rate = done / (time.perf_counter() - wall0)
            print(f"  {path.name}: {done:,} packets ({rate:,.0f}/s)", file=sys.stderr)

        simulation.run(progress)
    partial.replace(path)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    stats = simulation.stats
    duration = simulation.last_written / S
    subscriptions = sorted(simulation.filters_seen.items())
    manifest = {
        "generator": "bench/capture_gen.py",
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "clients": clients,
        "services": sum(1 for c in simulation.clients if c.kind == "service"),
        "capture": path.name,
        "linktype": "ethernet",
        "broker": f"{'.'.join(map(str, BROKER_IP))}:{BROKER_PORT}",
        "packets": stats.packets,
        "packets_by_type": dict(sorted(stats.by_type.items())),
        "packets_by_direction": dict(stats.by_direction),
        "client_publish_qos": dict(sorted(stats.publish_qos.items())),
        "violations": dict(stats.violations),
        "violations_total": stats.violations.total(),
        "deliveries": stats.deliveries,
        "retained_deliveries": stats.retained_sent,
        "offline_deliveries": stats.offline_sent,
        "wills_published": stats.wills,
        "connections": stats.connections,
        "closes": dict(stats.closes),
        "frames": stats.frames,
        "data_segments": stats.data_segments,
        "segments_with_several_packets": stats.multi_packet_segments,
        "packets_split_across_segments": stats.split_packets,
        "mqtt_bytes": stats.mqtt_bytes,
        "file_bytes": path.stat().st_size,
        "duration_s": round(duration, 3),
        "distinct_topic_filters": len(subscriptions),
        "topic_filters": dict(subscriptions),
        "generation": {
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "packets_per_s": round(stats.packets / wall),
            "python": platform.python_version(),
            "codec_build": "compiled" if codec.COMPILED else "pure-python",
        },
    }
    manifest_path(path).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def up_to_date(path: Path, packets: int, clients: int, seed: int) -> bool:
    try:
        manifest = json.loads(manifest_path(path).read_text())
    except (OSError, ValueError):
        return False
    return (
        path.exists()
        and manifest.get("generator_version") == GENERATOR_VERSION
        and (
            manifest.get("packets"),
            manifest.get("clients"),
            manifest.get("seed"),
            manifest.get("file_bytes"),
        )
        == (packets, clients, seed, path.stat().st_size)
    )


def describe(manifest: dict[str, Any]) -> str:
    gen = manifest["generation"]
    return (
        f"{manifest['capture']}: {manifest['packets']:,} MQTT packets in {manifest['frames']:,} frames "
        f"({manifest['file_bytes'] / 1e6:,.1f} MB, {manifest['duration_s']:,.0f} s of traffic, "
        f"{manifest['connections']:,} connections of {manifest['clients']} clients, "
        f"{manifest['violations_total']} violations); generated in {gen['wall_s']:.1f} s = "
        f"{gen['packets_per_s']:,} packets/s"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--packets", type=int, default=None, help="MQTT packets (default: BENCH_PACKETS or 4,000,000)")
    parser.add_argument("--only", action="store_true", help="write only that capture, not the comparison one")
    parser.add_argument("--clients", type=int, default=int(os.environ.get("BENCH_CLIENTS", DEFAULT_CLIENTS)))
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the simulation")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR, help="where captures go (default bench/out)")
    parser.add_argument("--force", action="store_true", help="regenerate even when an identical capture exists")
    args = parser.parse_args(argv)
    if (args.packets is not None and args.packets < 1) or args.clients < 8:
        parser.error("--packets must be positive and --clients at least 8")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    packets, compare = sizes_from_env(args.packets)
    wanted = [packets] if args.only or compare < 1 or compare >= packets else [compare, packets]
    for count in wanted:
        path = capture_path(count, args.out_dir)
        if not args.force and up_to_date(path, count, args.clients, args.seed):
            print(f"up to date: {describe(json.loads(manifest_path(path).read_text()))}")
            continue
        print(f"generating {count:,} packets from {args.clients} clients (seed {args.seed}) ...", file=sys.stderr)
        manifest = generate(count, path, clients=args.clients, seed=args.seed)
        print(describe(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
