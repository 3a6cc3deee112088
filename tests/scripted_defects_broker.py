"""A small MQTT broker (3.1.1 and 5.0) on 127.0.0.1 for the probe's tests, built on :class:`HostileServer`: it
routes, keeps sessions and Wills, and answers as a conforming broker would, except for the misbehaviours named in
``quirks``, each one act in bytes that a real broker was seen to do (see :data:`QUIRKS`).

    with ScriptedBroker(WILL_BEFORE_CLOSE) as broker:
        run_mqttaudit("probe", broker.url, "--cases", "malformed/disconnect-flag-bit-0")

One thread per connection, as :class:`HostileServer` runs them; state shared under one lock; every write to a
socket under that socket's own lock. It stops with the server (``lifetime``), like every hostile server.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field

from mqttaudit.codec import (
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    StreamDecoder,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Will,
    encode,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.packets import Properties
from mqttaudit.codec.properties import first
from mqttaudit.topics import matches

from .hostile_server import HostileServer

V5 = ProtocolVersion.V5
#: Will Delay Interval, Authentication Method, Session Expiry Interval, Topic Alias, Subscription Identifier.
WILL_DELAY_INTERVAL, AUTHENTICATION_METHOD, SESSION_EXPIRY = 0x18, 0x15, 0x11
NOT_FORWARDED = frozenset({0x23, 0x0B})

# -- the misbehaviours, each in the bytes it puts on the wire ----------------------------------------------------

#: On a malformed packet (a DISCONNECT with a reserved flag set, ``e1 00``), the Will (QoS 1) goes to its
#: subscribers first, then, as soon as they acknowledged it, (5.0) DISCONNECT 0x81 ``e0 02 81 00`` and the close:
#: the subscribers see the Will before the close it is published for is seen (real brokers: 0.1-0.2 ms before).
WILL_BEFORE_CLOSE = "will-before-close"
#: A 5.0 Will goes out as a PUBLISH carrying the Will Properties as they were: its Will Delay Interval
#: (``18 00 00 00 02``) included, a property no PUBLISH may carry.
LEAKS_WILL_DELAY = "leaks-will-delay"
#: When a 5.0 connection with a Will ends, the Will goes out at once, whatever its Will Delay Interval and
#: whether the session comes back before it: a drop and a takeover alike (so the Will goes out whichever of the
#: two the broker sees first, when the same ClientId connects again right after a reset).
IGNORES_WILL_DELAY = "ignores-will-delay"
#: A 5.0 CONNECT naming any Authentication Method is accepted with CONNACK 0x00 that names none: ``20 03 00 00 00``
#: (a conforming answer here is CONNACK 0x8C ``20 03 00 8c 00``, then the close).
ACCEPTS_ANY_AUTHENTICATION_METHOD = "accepts-any-authentication-method"
#: A 3.1.1 SUBSCRIBE is answered with 5.0's DISCONNECT 0x80 ``e0 02 80 00`` and the close: 3.1.1 has no DISCONNECT
#: from the server (and its DISCONNECT has no body).
DISCONNECTS_3_1_1_IN_5_0_FORM = "disconnects-3.1.1-in-5.0-form"
#: A CONNECT with a Protocol Level it does not know is answered with 5.0's CONNACK 0x84 ``20 03 00 84 00`` and the
#: close (a 3.1.1-only broker answers ``20 02 00 01``).
REFUSES_LEVEL_IN_5_0_FORM = "refuses-level-in-5.0-form"
#: A 5.0 QoS 2 delivery's PUBREL carries Reason Code 0x80 ``62 03 <id> 80``, which PUBREL may not (0x00, 0x92).
PUBREL_0X80 = "pubrel-0x80"
#: A QoS 0 message is forwarded with DUP 1 (``38 ...``), which a QoS 0 PUBLISH may not have.
DUP_ON_QOS0 = "dup-on-qos0"
#: Keep Alive is checked only when a packet comes in on any connection, or every :data:`LAZY_SWEEP` seconds: a
#: silent client of Keep Alive 1 is closed seconds late when nothing else goes on, at 1.5 s when other clients talk.
LAZY_KEEP_ALIVE = "lazy-keep-alive"
#: A QoS 2 PUBLISH repeated (same Packet Identifier, DUP 1) before its PUBREL is answered with PUBREC once, and
#: the second repeat closes the connection (mosquitto#3602).
CLOSES_ON_SECOND_REPEAT = "closes-on-second-repeat"
QUIRKS = frozenset(
    {
        WILL_BEFORE_CLOSE,
        LEAKS_WILL_DELAY,
        IGNORES_WILL_DELAY,
        ACCEPTS_ANY_AUTHENTICATION_METHOD,
        DISCONNECTS_3_1_1_IN_5_0_FORM,
        REFUSES_LEVEL_IN_5_0_FORM,
        PUBREL_0X80,
        DUP_ON_QOS0,
        LAZY_KEEP_ALIVE,
        CLOSES_ON_SECOND_REPEAT,
    }
)
#: How often the lazy Keep Alive check runs when no packet comes in.
LAZY_SWEEP = 8.0


@dataclass(eq=False)
class Client:
    socket: socket.socket
    version: ProtocolVersion = ProtocolVersion.V3_1_1
    client_id: str = ""
    will: Will | None = None
    keep_alive: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    subscriptions: dict[str, int] = field(default_factory=dict)
    #: QoS 2 Packet Identifiers received and not yet released, and how often each was repeated.
    receiving: dict[int, int] = field(default_factory=dict)
    next_id: int = 0
    #: It ended with a DISCONNECT that discards the Will.
    discarded: bool = False
    #: Its session outlives it (3.1.1 CleanSession 0, 5.0 a Session Expiry Interval above 0).
    persistent: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Per Packet Identifier of a QoS 1 delivery, set when its PUBACK comes.
    acks: dict[int, threading.Event] = field(default_factory=dict)

    def send(self, data: bytes) -> None:
        with self.lock, contextlib.suppress(OSError):
            self.socket.sendall(data)

    def write(self, packet: Packet) -> None:
        """Sends ``packet`` in the connection's version (as written, valid or not: a quirk may break a rule)."""
        self.send(encode(packet, validate=False, version=self.version))

    @property
    def success(self) -> int | None:
        """Reason Code 0x00 written out in 5.0; none in 3.1.1."""
        return 0 if self.version is V5 else None

    def packet_id(self) -> int:
        self.next_id = self.next_id % 0xFFFF + 1
        self.acks[self.next_id] = threading.Event()
        return self.next_id

    def acknowledged(self, packet_id: int) -> None:
        self.acks.setdefault(packet_id, threading.Event()).set()

    def end(self) -> None:
        """Closes the connection (its thread sees the end and cleans up)."""
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)


class ScriptedBroker(HostileServer):
    def __init__(self, *quirks: str, lifetime: float = 60.0) -> None:
        unknown = set(quirks) - QUIRKS
        if unknown:
            raise ValueError(f"no such quirk: {sorted(unknown)}")
        self.quirks = frozenset(quirks)
        self._lock = threading.RLock()
        self._clients: dict[str, Client] = {}  # connected, by Client Identifier
        self._wills: dict[str, threading.Timer] = {}  # delayed Wills by Client Identifier
        #: The subscriptions of every session kept, by Client Identifier (sessions never expire here).
        self._sessions: dict[str, dict[str, int]] = {}
        super().__init__("broker", lifetime=lifetime)
        if LAZY_KEEP_ALIVE in self.quirks:
            threading.Thread(target=self._lazy_sweeps, daemon=True).start()

    # -- one connection ------------------------------------------------------------------------------------------

    def _broker(self, connection: socket.socket) -> None:
        client = Client(connection)
        decoder = StreamDecoder(Direction.FROM_CLIENT, version=None)
        try:
            self._serve_client(client, decoder)
        finally:
            self._ended(client)

    def _serve_client(self, client: Client, decoder: StreamDecoder) -> bool:
        """Reads and answers until the connection ends; True when the broker closed it on purpose after a
        DISCONNECT or a refusal (nothing more to do), False on a drop."""
        while not self._over():
            try:
                data = client.socket.recv(65536)
            except TimeoutError:
                if LAZY_KEEP_ALIVE not in self.quirks:
                    self._check_keep_alive(client)
                continue
            if not data:
                return False
            for frame in decoder.feed(data):
                client.last_seen = time.monotonic()
                if LAZY_KEEP_ALIVE in self.quirks:
                    self._sweep()
                broken = [v for v in frame.violations if not codec_rules.is_advisory(v.rule)]
                if isinstance(frame.packet, Connect) and self._unknown_level(client, frame.packet):
                    return True
                if frame.packet is None or broken:
                    self._malformed(client)
                    return False
                if self._answer(client, frame.packet):
                    return True
        return False

    def _answer(self, client: Client, packet: Packet) -> bool:
        """Answers one packet; True when the connection is over."""
        if isinstance(packet, Connect):
            return self._connect(client, packet)
        v5 = client.version is V5
        if isinstance(packet, Subscribe):
            if DISCONNECTS_3_1_1_IN_5_0_FORM in self.quirks and not v5:
                client.send(bytes.fromhex("e0 02 80 00"))
                client.end()
                return True
            granted = [min(s.qos, 2) for s in packet.subscriptions]
            with self._lock:
                for subscription in packet.subscriptions:
                    client.subscriptions[subscription.topic_filter] = min(subscription.qos, 2)
            client.write(Suback(packet_id=packet.packet_id, return_codes=granted))
        elif isinstance(packet, Unsubscribe):
            with self._lock:
                for topic_filter in packet.topic_filters:
                    client.subscriptions.pop(topic_filter, None)
            codes = [0] * len(packet.topic_filters) if v5 else []
            client.write(Unsuback(packet_id=packet.packet_id, reason_codes=codes))
        elif isinstance(packet, Publish):
            return self._published(client, packet)
        elif isinstance(packet, Pubrel):
            client.receiving.pop(packet.packet_id or 0, None)
            client.write(Pubcomp(packet_id=packet.packet_id, reason_code=client.success))
        elif isinstance(packet, Pubrec):
            code = 0x80 if PUBREL_0X80 in self.quirks and v5 else client.success
            client.write(Pubrel(packet_id=packet.packet_id, reason_code=code))
        elif isinstance(packet, Pingreq):
            client.write(Pingresp())
        elif isinstance(packet, Disconnect):
            # 3.1.1, and 5.0 Reason Code 0x00: the Will is discarded; 5.0 0x04 asks for it [MQTT-3.14.4-3]
            client.discarded = not v5 or (packet.reason_code or 0) == 0
            if v5 and first(packet.properties, SESSION_EXPIRY) is not None:
                client.persistent = bool(first(packet.properties, SESSION_EXPIRY))
            client.end()
            return True
        elif isinstance(packet, Puback):
            client.acknowledged(packet.packet_id or 0)
        return False  # PUBCOMP: nothing to answer

    def _unknown_level(self, client: Client, connect: Connect) -> bool:
        """A CONNECT of a Protocol Level other than 4 and 5 is refused (3.1.1: CONNACK 0x01), then closed."""
        if ProtocolVersion.from_level(connect.protocol_level) is not None:
            return False
        refusal = "20 03 00 84 00" if REFUSES_LEVEL_IN_5_0_FORM in self.quirks else "20 02 00 01"
        client.send(bytes.fromhex(refusal))
        client.end()
        return True

    def _connect(self, client: Client, connect: Connect) -> bool:
        version = ProtocolVersion.from_level(connect.protocol_level) or ProtocolVersion.V3_1_1
        client.version, client.client_id, client.keep_alive = version, connect.client_id, connect.keep_alive
        method = first(connect.properties, AUTHENTICATION_METHOD) if version is V5 else None
        if method is not None and ACCEPTS_ANY_AUTHENTICATION_METHOD not in self.quirks:
            client.send(bytes.fromhex("20 03 00 8c 00"))
            client.end()
            return True
        client.will = connect.will
        expiry = first(connect.properties, SESSION_EXPIRY) if version is V5 else None
        client.persistent = bool(expiry) if version is V5 else not connect.clean_session
        with self._lock:
            older = self._clients.get(connect.client_id)
            timer = self._wills.pop(connect.client_id, None)
            if timer is not None:
                timer.cancel()  # back before the Will Delay Interval passed: no Will [MQTT-3.1.3-9 of 5.0]
            kept = None if connect.clean_session else self._sessions.get(connect.client_id)
            client.subscriptions = kept if kept is not None else {}
            self._sessions[connect.client_id] = client.subscriptions
            self._clients[connect.client_id] = client
        if older is not None:
            # taken over: its Will goes with the session, unless the delay is ignored (then it goes out at once)
            older.discarded = IGNORES_WILL_DELAY not in self.quirks
            if version is V5:
                older.send(bytes.fromhex("e0 02 8e 00"))
            older.end()
        client.write(Connack(session_present=kept is not None, return_code=0))
        return False

    def _published(self, client: Client, publish: Publish) -> bool:
        if publish.qos == 1:
            client.write(Puback(packet_id=publish.packet_id, reason_code=client.success))
        elif publish.qos == 2:
            packet_id = publish.packet_id or 0
            repeats = client.receiving.get(packet_id)
            if repeats is not None:
                client.receiving[packet_id] = repeats + 1
                if CLOSES_ON_SECOND_REPEAT in self.quirks and repeats + 1 >= 2:
                    client.end()
                    return True
            else:
                client.receiving[packet_id] = 0
            client.write(Pubrec(packet_id=publish.packet_id, reason_code=client.success))
            if repeats is not None:
                return False  # a repeat: delivered once already
        self._route(publish)
        return False

    # -- routing and Wills ---------------------------------------------------------------------------------------

    def _route(self, publish: Publish, *, properties: Properties | None = None) -> list[threading.Event]:
        """Sends ``publish`` to every matching subscription; returns what tells each QoS 1 copy acknowledged."""
        with self._lock:
            receivers = [
                (client, max(q for f, q in client.subscriptions.items() if matches(f, publish.topic)))
                for client in self._clients.values()
                if any(matches(f, publish.topic) for f in client.subscriptions)
            ]
        acknowledged = []
        for client, granted in receivers:
            qos = min(publish.qos, granted)
            v5 = client.version is V5
            forwarded = publish.properties if properties is None else properties
            kept = tuple(p for p in forwarded if p.identifier not in NOT_FORWARDED) if v5 else ()
            copy = Publish(
                topic=publish.topic,
                payload=publish.payload,
                qos=qos,
                dup=DUP_ON_QOS0 in self.quirks and qos == 0,
                packet_id=client.packet_id() if qos else None,
                properties=kept,
            )
            client.write(copy)
            if qos == 1 and copy.packet_id is not None:
                acknowledged.append(client.acks[copy.packet_id])
        return acknowledged

    def _publish_will(self, client: Client) -> list[threading.Event]:
        will = client.will
        if will is None:
            return []
        message = Publish(topic=will.topic, payload=will.message, qos=will.qos, retain=will.retain)
        leaked = LEAKS_WILL_DELAY in self.quirks
        kept = tuple(p for p in will.properties if leaked or p.identifier != WILL_DELAY_INTERVAL)
        return self._route(message, properties=kept)

    def _malformed(self, client: Client) -> None:
        """A malformed packet: (5.0) DISCONNECT 0x81, the close, then the Will; or, as :data:`WILL_BEFORE_CLOSE`,
        the Will first, and the close once its subscribers acknowledged it (so they surely saw it before)."""
        if WILL_BEFORE_CLOSE in self.quirks:
            for acknowledged in self._publish_will(client):
                acknowledged.wait(1.0)
            client.will = None
        if client.version is V5:
            client.send(bytes.fromhex("e0 02 81 00"))
        client.end()

    def _ended(self, client: Client) -> None:
        client.end()
        with self._lock:
            if self._clients.get(client.client_id) is client:
                del self._clients[client.client_id]
                if not client.persistent:
                    self._sessions.pop(client.client_id, None)
        if client.discarded or client.will is None:
            return
        delay = first(client.will.properties, WILL_DELAY_INTERVAL) if client.version is V5 else None
        if not delay or IGNORES_WILL_DELAY in self.quirks:
            self._publish_will(client)
            return
        timer = threading.Timer(float(delay), self._publish_will, args=(client,))  # type: ignore[arg-type]
        timer.daemon = True
        with self._lock:
            self._wills[client.client_id] = timer
        timer.start()

    # -- Keep Alive ----------------------------------------------------------------------------------------------

    def _check_keep_alive(self, client: Client) -> None:
        """[MQTT-3.1.2-24] Closed once silent for one and a half Keep Alive periods."""
        if client.keep_alive and time.monotonic() - client.last_seen > 1.5 * client.keep_alive:
            client.end()

    def _sweep(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
        for client in clients:
            self._check_keep_alive(client)

    def _lazy_sweeps(self) -> None:
        while not self._over():
            time.sleep(LAZY_SWEEP)
            self._sweep()
