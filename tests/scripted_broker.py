"""A small MQTT broker (3.1.1 and 5.0) on 127.0.0.1 for the probe's tests, built on :class:`HostileServer`, scripted
to keep the rules or to break one of them on purpose, for pinning the verdicts of cases that need a broker's routing
(Wills, retained messages, sessions, several connections).

    with ScriptedBroker(WILL_BEFORE_CLOSE) as broker:
        run_mqttaudit("probe", broker.url, "--cases", "malformed/disconnect-flag-bit-0")

With no name given it is a conforming broker: CONNACK (held until the next packet is answered, with
:data:`EARLY_ANSWER`), SUBACK, UNSUBACK, PINGRESP, the QoS 1 and 2 flows both ways (a QoS 2 message delivered once
however often it is repeated before its PUBREL; 5.0: 0x92 for a Packet Identifier not in use), routing by Topic Filter
with the 5.0 properties a PUBLISH carries on, retained messages, sessions that keep their subscriptions (3.1.1
CleanSession 0, 5.0 a Session Expiry Interval above 0; they never expire here), the takeover of a Client Identifier
connected again, Keep Alive (closed after one and a half periods of silence), and Wills: published
:data:`WILL_AFTER` after the close, or after the 5.0 Will Delay Interval unless the session comes back first;
3.1.1's DISCONNECT and 5.0's 0x00 discard one. A packet the codec finds a MUST broken in closes the connection (5.0:
DISCONNECT 0x81 first, once connected), and its Will is published. A Protocol Level it does not know gets CONNACK
0x01 and the close. Everything it writes is validated by the codec, but for the bytes a misbehaviour breaks a rule in.

Each name in :data:`MISBEHAVIOURS` turns one behaviour into the act, in bytes, a real broker was seen doing (each is
described where it is defined). One thread per connection, as :class:`HostileServer` runs them; state shared under
one lock; every write to a socket under that socket's own lock. It stops with the server (``lifetime``).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Sequence
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
    Violation,
    Will,
    encode,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.properties import (
    AUTHENTICATION_METHOD,
    SESSION_EXPIRY_INTERVAL,
    SUBSCRIPTION_IDENTIFIER,
    TOPIC_ALIAS,
    first,
    make,
)
from mqttaudit.topics import is_valid_topic_filter, matches

from .hostile_server import HostileServer

V5 = ProtocolVersion.V5
#: Will Delay Interval (a Will property only).
WILL_DELAY_INTERVAL = 0x18
#: What a PUBLISH does not carry on to its subscribers: they are the connection's own.
NOT_FORWARDED = frozenset({TOPIC_ALIAS, SUBSCRIPTION_IDENTIFIER})
#: Reason Code 0x92 "Packet Identifier not found" (PUBREL, PUBCOMP).
NOT_FOUND = 0x92
#: Seconds between a connection's close and the publication of its Will (5.0: one without a Will Delay Interval):
#: a moment after the close, as brokers publish it; which of two sockets the prober reads first is not what the
#: tests are about (:data:`WILL_BEFORE_CLOSE` is the test that is).
WILL_AFTER = 0.02

# -- the misbehaviours, each in the bytes it puts on the wire ----------------------------------------------------

#: A 5.0 DISCONNECT with any Reason Code, one no DISCONNECT has included (``e0 02 80 00``, ``e0 02 ff 00``),
#: discards the Will as ``e0 00`` does (only 0x04 keeps it): mosquitto 2.0.11, mosquitto#3743.
WILL_ANY_DISCONNECT = "will-any-disconnect"
#: A Topic Filter of one level (no '/') is granted whatever wildcard it holds: SUBSCRIBE ``x#`` answered
#: ``90 03 00 01 00`` where ``<p>/x#`` is closed on (aedes 1.2.0).
ONE_LEVEL_WILDCARDS = "one-level-wildcards"
#: After a PUBLISH to a '$' topic, the connection's PUBLISHes are acknowledged (``40 02 00 07``) but delivered to
#: nobody (amqtt 0.12.1).
DOLLAR_POISONS = "dollar-poisons"
#: A PUBREL or PUBREC of a Packet Identifier not in use stops the broker reading: nothing is answered any more (no
#: PUBCOMP ``70 03 00 id 92``, no PINGRESP ``d0 00``), and the connection stays open.
STALL_ON_UNKNOWN_ID = "stall-on-unknown-id"
#: The CONNACK ``20 02 00 00`` is sent after the answer to the packet that follows the CONNECT (SUBACK
#: ``90 03 00 01 00``, PINGRESP ``d0 00``).
EARLY_ANSWER = "early-answer"
#: Every :data:`STALE_EVERY`-th retained QoS 0 message that follows a retained QoS 1 one on its topic leaves the
#: QoS 1 one in place (a store racing with the next packet): a new subscription gets ``33 ...`` of the old message.
STALE_RETAINED = "stale-retained"
#: A packet whose only defect is a repeated property (``27 0f ff ff ff 27 0f ff ff ff`` in a CONNECT, Reason String
#: ``1f`` twice in a PUBACK, PUBREL or DISCONNECT) is taken as if it had none: CONNACK ``20 03 00 00 00``.
LENIENT_DUPLICATES = "lenient-duplicates"
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
MISBEHAVIOURS = frozenset(
    {
        WILL_ANY_DISCONNECT,
        ONE_LEVEL_WILDCARDS,
        DOLLAR_POISONS,
        STALL_ON_UNKNOWN_ID,
        EARLY_ANSWER,
        STALE_RETAINED,
        LENIENT_DUPLICATES,
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
#: With :data:`STALE_RETAINED`: which replacements of a retained QoS 1 message by a QoS 0 one are lost (1 in 4).
STALE_EVERY = 4
#: With :data:`LAZY_KEEP_ALIVE`: how often the Keep Alive check runs when no packet comes in.
LAZY_SWEEP = 8.0


@dataclass(eq=False)
class Client:
    """One connection: its session's subscriptions, its Will, its Keep Alive and the flows in flight."""

    socket: socket.socket
    version: ProtocolVersion = ProtocolVersion.V3_1_1
    #: The Client Identifier it connected with, or the one the broker assigned to an empty one.
    client_id: str = ""
    will: Will | None = None
    keep_alive: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    subscriptions: dict[str, int] = field(default_factory=dict)
    #: QoS 2 Packet Identifiers received and not yet released, and how often each was repeated.
    receiving: dict[int, int] = field(default_factory=dict)
    #: QoS 2 deliveries sent, awaiting PUBREC and PUBCOMP.
    sending: set[int] = field(default_factory=set)
    #: Per Packet Identifier of a QoS 1 delivery, set when its PUBACK comes.
    acks: dict[int, threading.Event] = field(default_factory=dict)
    next_id: int = 0
    #: The CONNACK owed: sent at once, or (EARLY_ANSWER) when the next packet was answered or nothing came.
    pending_connack: Connack | None = None
    #: With :data:`DOLLAR_POISONS`: it published to a '$' topic.
    poisoned: bool = False
    #: With :data:`STALL_ON_UNKNOWN_ID`: it reads and drops what comes.
    stalled: bool = False
    #: It ended with a DISCONNECT that discards the Will.
    discarded: bool = False
    #: Its session outlives it (3.1.1 CleanSession 0, 5.0 a Session Expiry Interval above 0).
    persistent: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, data: bytes) -> None:
        with self.lock, contextlib.suppress(OSError):
            self.socket.sendall(data)

    def write(self, packet: Packet, *, validate: bool = True) -> None:
        """Sends ``packet`` in the connection's version; ``validate=False`` for one a misbehaviour breaks a rule in."""
        self.send(encode(packet, validate=validate, version=self.version))

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
    """``with ScriptedBroker(DOLLAR_POISONS) as broker: ... broker.port``; no name: a conforming broker."""

    def __init__(self, *misbehaviours: str, lifetime: float = 60.0) -> None:
        unknown = set(misbehaviours) - MISBEHAVIOURS
        if unknown:
            raise ValueError(f"no such misbehaviour: {sorted(unknown)}")
        self.misbehaviours = frozenset(misbehaviours)
        self._lock = threading.RLock()
        self._clients: dict[str, Client] = {}  # connected, by Client Identifier
        self._wills: dict[str, threading.Timer] = {}  # delayed Wills by Client Identifier
        #: The subscriptions of every session kept, by Client Identifier (sessions never expire here).
        self._sessions: dict[str, dict[str, int]] = {}
        self._retained: dict[str, Publish] = {}
        self._replacements = 0  # of a retained QoS 1 message by a QoS 0 one (STALE_RETAINED)
        self._assigned = itertools.count(1)
        super().__init__("scripted", lifetime=lifetime)
        if LAZY_KEEP_ALIVE in self.misbehaviours:
            threading.Thread(target=self._lazy_sweeps, daemon=True).start()

    # -- one connection ------------------------------------------------------------------------------------------

    def _scripted(self, connection: socket.socket) -> None:
        client = Client(connection)
        try:
            self._serve_client(client)
        finally:
            self._ended(client)

    def _serve_client(self, client: Client) -> None:
        """Reads and answers until the connection ends, or either side ends it."""
        decoder = StreamDecoder(Direction.FROM_CLIENT, version=None)
        while not self._over():
            try:
                data = client.socket.recv(65536)
            except TimeoutError:
                self._connack_now(client)  # nothing followed the CONNECT (EARLY_ANSWER)
                if LAZY_KEEP_ALIVE not in self.misbehaviours:
                    self._check_keep_alive(client)
                continue
            if not data:
                return
            if client.stalled:
                continue  # read and dropped: the parser is stuck, the connection stays open
            for frame in decoder.feed(data):
                client.last_seen = time.monotonic()
                if LAZY_KEEP_ALIVE in self.misbehaviours:
                    self._sweep()
                if not self._handle(client, frame.packet, frame.violations):
                    return
                if client.stalled:
                    break

    def _handle(self, client: Client, packet: Packet | None, violations: Sequence[Violation]) -> bool:
        """Acts on one packet; False when the connection is to be closed."""
        broken = [v for v in violations if not codec_rules.is_advisory(v.rule)]
        if isinstance(packet, Connect) and self._unknown_level(client, packet):
            return False
        if packet is None or (broken and not self._overlooked(packet, broken)):
            self._malformed(client)
            return False
        if isinstance(packet, Connect):
            return self._connect(client, packet)
        going_on = self._act(client, packet)
        self._connack_now(client)
        return going_on

    def _overlooked(self, packet: Packet, violations: Sequence[Violation]) -> bool:
        """A packet with a MUST broken in it that a misbehaviour takes as if it were not."""
        rules = {v.rule_key for v in violations}
        if LENIENT_DUPLICATES in self.misbehaviours and rules == {codec_rules.PROPERTY_DUPLICATE}:
            return True
        if WILL_ANY_DISCONNECT in self.misbehaviours and isinstance(packet, Disconnect):
            return True  # whatever its Reason Code, taken for a DISCONNECT
        if ONE_LEVEL_WILDCARDS in self.misbehaviours and isinstance(packet, Subscribe | Unsubscribe):
            return all("/" not in f or is_valid_topic_filter(f) for f in _filters(packet))
        return False

    def _act(self, client: Client, packet: Packet) -> bool:
        """Answers one packet after the CONNECT; False when the connection is to be closed."""
        v5 = client.version is V5
        if isinstance(packet, Subscribe):
            return self._subscribed(client, packet)
        if isinstance(packet, Unsubscribe):
            with self._lock:  # routing threads read every client's subscriptions under the same lock
                for topic_filter in packet.topic_filters:
                    client.subscriptions.pop(topic_filter, None)
            codes = [0x00] * len(packet.topic_filters) if v5 else []  # 3.1.1's UNSUBACK has none
            client.write(Unsuback(packet_id=packet.packet_id, reason_codes=codes))
        elif isinstance(packet, Publish):
            return self._published(client, packet)
        elif isinstance(packet, Pubrel):
            known = packet.packet_id in client.receiving
            if not known and STALL_ON_UNKNOWN_ID in self.misbehaviours:
                client.stalled = True
                return True
            client.receiving.pop(packet.packet_id or 0, None)
            client.write(Pubcomp(packet_id=packet.packet_id, reason_code=None if known or not v5 else NOT_FOUND))
        elif isinstance(packet, Pubrec):
            known = packet.packet_id in client.sending
            if not known and STALL_ON_UNKNOWN_ID in self.misbehaviours:
                client.stalled = True
                return True
            code = None if known or not v5 else NOT_FOUND
            if known and v5 and PUBREL_0X80 in self.misbehaviours:
                code = 0x80
            if known or v5:  # 3.1.1: an unknown one is not answered
                client.write(Pubrel(packet_id=packet.packet_id, reason_code=code), validate=code != 0x80)
        elif isinstance(packet, Pubcomp):
            client.sending.discard(packet.packet_id or 0)
        elif isinstance(packet, Puback):
            client.acknowledged(packet.packet_id or 0)
        elif isinstance(packet, Pingreq):
            client.write(Pingresp())
        elif isinstance(packet, Disconnect):
            # 3.1.1, and 5.0 Reason Code 0x00: the Will is discarded; 5.0 0x04 asks for it [MQTT-3.14.4-3]
            code = packet.reason_code or 0x00
            any_code = code != 0x04 and WILL_ANY_DISCONNECT in self.misbehaviours
            client.discarded = not v5 or code == 0x00 or any_code
            expiry = first(packet.properties, SESSION_EXPIRY_INTERVAL) if v5 else None
            if expiry is not None:
                client.persistent = bool(expiry)
            return False
        return True

    # -- CONNECT -------------------------------------------------------------------------------------------------

    def _unknown_level(self, client: Client, connect: Connect) -> bool:
        """A CONNECT of a Protocol Level other than 4 and 5 is refused (3.1.1: CONNACK 0x01), then closed."""
        if ProtocolVersion.from_level(connect.protocol_level) is not None:
            return False
        refusal = "20 03 00 84 00" if REFUSES_LEVEL_IN_5_0_FORM in self.misbehaviours else "20 02 00 01"
        client.send(bytes.fromhex(refusal))
        return True

    def _connect(self, client: Client, connect: Connect) -> bool:
        version = ProtocolVersion.from_level(connect.protocol_level) or ProtocolVersion.V3_1_1
        client.version, client.keep_alive = version, connect.keep_alive
        method = first(connect.properties, AUTHENTICATION_METHOD) if version is V5 else None
        if method is not None and ACCEPTS_ANY_AUTHENTICATION_METHOD not in self.misbehaviours:
            client.send(bytes.fromhex("20 03 00 8c 00"))
            return False
        client.will = connect.will
        client.client_id = connect.client_id or f"scripted-{next(self._assigned)}"
        expiry = first(connect.properties, SESSION_EXPIRY_INTERVAL) if version is V5 else None
        client.persistent = bool(expiry) if version is V5 else not connect.clean_session
        with self._lock:
            older = self._clients.get(client.client_id)
            timer = self._wills.pop(client.client_id, None)
            if timer is not None:
                timer.cancel()  # back before the Will Delay Interval passed: no Will [MQTT-3.1.3-9 of 5.0]
            kept = None if connect.clean_session else self._sessions.get(client.client_id)
            client.subscriptions = kept if kept is not None else {}
            self._sessions[client.client_id] = client.subscriptions
            self._clients[client.client_id] = client
        if older is not None:
            # taken over: its Will goes with the session, unless the delay is ignored (then it goes out at once)
            older.discarded = IGNORES_WILL_DELAY not in self.misbehaviours
            if version is V5:
                older.send(bytes.fromhex("e0 02 8e 00"))
            older.end()
        # 5.0: an empty Client Identifier is answered with the one assigned [MQTT-3.2.2-16]
        assigned = make(assigned_client_identifier=client.client_id) if version is V5 and not connect.client_id else ()
        client.pending_connack = Connack(session_present=kept is not None, properties=assigned)
        if EARLY_ANSWER not in self.misbehaviours:
            self._connack_now(client)
        return True

    def _connack_now(self, client: Client) -> None:
        if client.pending_connack is not None:
            client.write(client.pending_connack)
            client.pending_connack = None

    # -- SUBSCRIBE and PUBLISH -----------------------------------------------------------------------------------

    def _subscribed(self, client: Client, packet: Subscribe) -> bool:
        if DISCONNECTS_3_1_1_IN_5_0_FORM in self.misbehaviours and client.version is not V5:
            client.send(bytes.fromhex("e0 02 80 00"))
            return False
        granted = [min(s.qos, 2) for s in packet.subscriptions]
        with self._lock:
            for subscription, qos in zip(packet.subscriptions, granted, strict=True):
                client.subscriptions[subscription.topic_filter] = qos
        client.write(Suback(packet_id=packet.packet_id, return_codes=granted))
        for subscription, qos in zip(packet.subscriptions, granted, strict=True):
            with self._lock:
                held = [m for topic, m in self._retained.items() if matches(subscription.topic_filter, topic)]
            for message in held:
                self._deliver(client, message, min(qos, message.qos), retain=True)
        return True

    def _published(self, client: Client, publish: Publish) -> bool:
        if publish.topic.startswith("$") and DOLLAR_POISONS in self.misbehaviours:
            client.poisoned = True
        if publish.qos == 1:
            client.write(Puback(packet_id=publish.packet_id))
        elif publish.qos == 2:
            packet_id = publish.packet_id or 0
            repeats = client.receiving.get(packet_id)
            client.receiving[packet_id] = 0 if repeats is None else repeats + 1
            if repeats is not None and repeats + 1 >= 2 and CLOSES_ON_SECOND_REPEAT in self.misbehaviours:
                return False
            client.write(Pubrec(packet_id=publish.packet_id))
            if repeats is not None:
                return True  # a repeat: delivered once already
        if not client.poisoned:
            self._route(publish)
        return True

    # -- routing, retained messages and Wills --------------------------------------------------------------------

    def _route(self, publish: Publish) -> list[threading.Event]:
        """Keeps ``publish`` if it is to be retained and sends it to every matching subscription; returns what tells
        each QoS 1 copy acknowledged."""
        if publish.retain:
            self._retain(publish)
        with self._lock:
            receivers = [
                (client, max(q for f, q in client.subscriptions.items() if matches(f, publish.topic)))
                for client in self._clients.values()
                if any(matches(f, publish.topic) for f in client.subscriptions)
            ]
        delivered = (self._deliver(client, publish, min(publish.qos, granted)) for client, granted in receivers)
        return [acknowledged for acknowledged in delivered if acknowledged is not None]

    def _retain(self, publish: Publish) -> None:
        with self._lock:
            held = self._retained.get(publish.topic)
            if held is not None and held.qos > 0 and publish.qos == 0 and STALE_RETAINED in self.misbehaviours:
                self._replacements += 1
                if self._replacements % STALE_EVERY == 1:
                    return  # the QoS 1 message stays: the race lost
            if publish.payload:
                self._retained[publish.topic] = publish
            else:
                self._retained.pop(publish.topic, None)

    def _deliver(self, client: Client, message: Publish, qos: int, *, retain: bool = False) -> threading.Event | None:
        """Sends ``message`` to ``client`` at ``qos``; returns what tells a QoS 1 copy acknowledged."""
        packet_id = client.packet_id() if qos else None
        if qos == 2:
            client.sending.add(packet_id or 0)
        v5 = client.version is V5
        kept = tuple(p for p in message.properties if p.identifier not in NOT_FORWARDED) if v5 else ()
        dup = DUP_ON_QOS0 in self.misbehaviours and qos == 0
        leaked = any(p.identifier == WILL_DELAY_INTERVAL for p in kept)  # LEAKS_WILL_DELAY
        copy = Publish(
            topic=message.topic,
            payload=message.payload,
            qos=qos,
            retain=retain,
            dup=dup,
            packet_id=packet_id,
            properties=kept,
        )
        client.write(copy, validate=not (dup or leaked))
        return client.acks[packet_id] if qos == 1 and packet_id is not None else None

    def _publish_will(self, client: Client) -> list[threading.Event]:
        will = client.will
        if will is None:
            return []
        leaked = LEAKS_WILL_DELAY in self.misbehaviours
        kept = tuple(p for p in will.properties if leaked or p.identifier != WILL_DELAY_INTERVAL)
        return self._route(
            Publish(topic=will.topic, payload=will.message, qos=will.qos, retain=will.retain, properties=kept)
        )

    def _malformed(self, client: Client) -> None:
        """A malformed packet: (5.0, once connected) DISCONNECT 0x81, the close, then the Will; or, as
        :data:`WILL_BEFORE_CLOSE`, the Will first, and the close once its subscribers acknowledged it (so they surely
        saw it before)."""
        if WILL_BEFORE_CLOSE in self.misbehaviours:
            for acknowledged in self._publish_will(client):
                acknowledged.wait(1.0)
            client.will = None
        if client.version is V5 and client.pending_connack is None:
            client.send(bytes.fromhex("e0 02 81 00"))

    def _ended(self, client: Client) -> None:
        client.end()  # the close first, then the Will: as the client sees it
        with self._lock:
            if self._clients.get(client.client_id) is client:
                del self._clients[client.client_id]
                if not client.persistent:
                    self._sessions.pop(client.client_id, None)
        if client.discarded or client.will is None:
            return
        delay = first(client.will.properties, WILL_DELAY_INTERVAL) if client.version is V5 else None
        if not delay or IGNORES_WILL_DELAY in self.misbehaviours:
            time.sleep(WILL_AFTER)
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


def _filters(packet: Subscribe | Unsubscribe) -> list[str]:
    if isinstance(packet, Subscribe):
        return [s.topic_filter for s in packet.subscriptions]
    return list(packet.topic_filters)
