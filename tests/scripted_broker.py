"""A small MQTT broker on 127.0.0.1, scripted to keep the rules or to break one of them on purpose, for pinning the
verdicts of cases that need a broker's routing (Wills, retained messages, several connections).

It speaks 3.1.1 and 5.0 with the project's codec: CONNACK, SUBACK, UNSUBACK, PINGRESP, the QoS 1 and 2 flows both
ways, routing by Topic Filter, retained messages and Wills (5.0: only DISCONNECT 0x00 discards one). A packet the
codec finds a violation in closes the connection (and a Will is then published). A CleanSession 0 connection leaves
a session (its Client Identifier, for Session Present; nothing else is kept). Each name in ``deviations`` turns
one behaviour into the deviation a real broker was seen with; each test states the bytes that differ.

- ``will-any-disconnect``: a DISCONNECT with any Reason Code, one no DISCONNECT has included, discards the Will
  (only 0x04 keeps it).
- ``one-level-wildcards``: a Topic Filter of one level (no '/') is granted whatever wildcard it holds (``x#``).
- ``dollar-poisons``: after a PUBLISH to a '$' topic, the connection's PUBLISHes are acknowledged but not routed.
- ``stall-on-unknown-id``: a PUBREL or PUBREC of a Packet Identifier not in use stops the broker reading: nothing is
  answered any more, and the connection stays open.
- ``early-answer``: the CONNACK is sent after the answer to the packet that follows the CONNECT.
- ``stale-retained``: every ``STALE_EVERY``-th retained QoS 0 message that follows a retained QoS 1 one on its topic
  leaves the QoS 1 one in place (a store racing with the next packet).
- ``lenient-duplicates``: a packet whose only defect is a repeated property is taken as if it had none.
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
    encode,
)
from mqttaudit.codec import rules as codec_rules
from mqttaudit.codec.properties import SESSION_EXPIRY_INTERVAL, first
from mqttaudit.topics import is_valid_topic_filter, matches

from .hostile_server import HostileServer

DEVIATIONS = frozenset(
    {
        "will-any-disconnect",
        "one-level-wildcards",
        "dollar-poisons",
        "stall-on-unknown-id",
        "early-answer",
        "stale-retained",
        "lenient-duplicates",
    }
)
#: With ``stale-retained``: which replacements of a retained QoS 1 message by a QoS 0 one are lost (1 in 4).
STALE_EVERY = 4
#: Seconds between a connection's close and the publication of its Will.
WILL_AFTER = 0.02
#: Reason Code 0x92 "Packet Identifier not found" (PUBREL, PUBCOMP).
NOT_FOUND = 0x92


@dataclass(eq=False)
class Client:
    """One connection: what it subscribed, its Will, and the flows in flight."""

    sock: socket.socket
    version: ProtocolVersion = ProtocolVersion.V3_1_1
    will: Publish | None = None
    subscriptions: dict[str, int] = field(default_factory=dict)
    #: QoS 2 PUBLISHes received, awaiting PUBREL; QoS 2 deliveries sent, awaiting PUBREC.
    received_qos2: set[int] = field(default_factory=set)
    sent_qos2: set[int] = field(default_factory=set)
    poisoned: bool = False
    present: bool = False
    stalled: bool = False
    pending_connack: bool = False
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, packet: Packet) -> None:
        with self.lock, contextlib.suppress(OSError):
            self.sock.sendall(encode(packet, version=self.version))


class ScriptedBroker(HostileServer):
    """``with ScriptedBroker("dollar-poisons") as broker: ... broker.port``; no deviation: a conforming broker."""

    def __init__(self, *deviations: str, lifetime: float = 60.0) -> None:
        unknown = set(deviations) - DEVIATIONS
        if unknown:
            raise ValueError(f"no such deviation: {sorted(unknown)}")
        self.deviations = frozenset(deviations)
        self.clients: list[Client] = []
        self.retained: dict[str, Publish] = {}
        self.sessions: set[str] = set()
        self.replacements = 0
        self.state = threading.Lock()
        super().__init__("scripted", lifetime=lifetime)

    def _scripted(self, sock: socket.socket) -> None:
        client = Client(sock)
        decoder = StreamDecoder(Direction.FROM_CLIENT, version=None)
        try:
            while not self._over():
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    self._connack_now(client)
                    continue
                if not data:
                    break
                if client.stalled:
                    continue  # read and dropped: the parser is stuck, the connection stays open
                if not all(self._handle(client, frame.packet, frame.violations) for frame in decoder.feed(data)):
                    break
        finally:
            with self.state:
                if client in self.clients:
                    self.clients.remove(client)
            with contextlib.suppress(OSError):  # the close first, then the Will: as the client sees it
                sock.shutdown(socket.SHUT_RDWR)
            if client.will is not None:
                # a moment after the close, as brokers publish it: which of two sockets the prober reads first is
                # not what these tests are about
                time.sleep(WILL_AFTER)
                self._route(client.will, client)

    # -- packets ---------------------------------------------------------------------------------------------------

    def _handle(self, client: Client, packet: Packet | None, violations: Sequence[Violation]) -> bool:
        """Acts on one packet; False when the connection is to be closed."""
        if client.stalled:
            return True
        if violations and not self._overlooked(packet, violations):
            return False
        if isinstance(packet, Connect):
            return self._connect(client, packet)
        answered = self._answer(client, packet)
        self._connack_now(client)
        return answered

    def _overlooked(self, packet: Packet | None, violations: Sequence[Violation]) -> bool:
        rules = {v.rule_key for v in violations}
        if "lenient-duplicates" in self.deviations and rules == {codec_rules.PROPERTY_DUPLICATE}:
            return True
        if "will-any-disconnect" in self.deviations and isinstance(packet, Disconnect):
            return True  # whatever its Reason Code, taken for a DISCONNECT
        if "one-level-wildcards" in self.deviations and isinstance(packet, Subscribe | Unsubscribe):
            return all("/" not in f or is_valid_topic_filter(f) for f in _filters(packet))
        return False

    def _connect(self, client: Client, packet: Connect) -> bool:
        client.version = ProtocolVersion.V5 if packet.protocol_level == 5 else ProtocolVersion.V3_1_1
        if packet.will is not None:
            will = packet.will
            client.will = Publish(topic=will.topic, payload=will.message, qos=will.qos, retain=will.retain)
        # a session (no subscriptions kept) outlives a CleanSession 0 connection; 5.0: one with a Session Expiry
        kept = not packet.clean_session and (
            client.version is ProtocolVersion.V3_1_1 or bool(first(packet.properties, SESSION_EXPIRY_INTERVAL))
        )
        with self.state:
            self.clients.append(client)
            client.present = not packet.clean_session and packet.client_id in self.sessions
            (self.sessions.add if kept else self.sessions.discard)(packet.client_id)
        client.pending_connack = True
        if "early-answer" not in self.deviations:
            self._connack_now(client)
        return True

    def _connack_now(self, client: Client) -> None:
        if client.pending_connack:
            client.pending_connack = False
            client.send(Connack(session_present=client.present))

    def _answer(self, client: Client, packet: Packet | None) -> bool:
        v5 = client.version is ProtocolVersion.V5
        if isinstance(packet, Subscribe):
            with self.state:  # routing threads read every client's subscriptions under the same lock
                for subscription in packet.subscriptions:
                    client.subscriptions[subscription.topic_filter] = subscription.qos
            client.send(Suback(packet_id=packet.packet_id, return_codes=[s.qos for s in packet.subscriptions]))
            for subscription in packet.subscriptions:
                self._send_retained(client, subscription.topic_filter, subscription.qos)
        elif isinstance(packet, Unsubscribe):
            with self.state:
                for topic_filter in packet.topic_filters:
                    client.subscriptions.pop(topic_filter, None)
            codes = [0x00] * len(packet.topic_filters) if v5 else []  # 3.1.1's UNSUBACK has none
            client.send(Unsuback(packet_id=packet.packet_id, reason_codes=codes))
        elif isinstance(packet, Publish):
            self._publish(client, packet)
        elif isinstance(packet, Pubrel):
            known = packet.packet_id in client.received_qos2
            if not known and "stall-on-unknown-id" in self.deviations:
                client.stalled = True
                return True
            client.received_qos2.discard(packet.packet_id or 0)
            code = None if known or not v5 else NOT_FOUND
            client.send(Pubcomp(packet_id=packet.packet_id, reason_code=code))
        elif isinstance(packet, Pubrec):
            known = packet.packet_id in client.sent_qos2
            if not known and "stall-on-unknown-id" in self.deviations:
                client.stalled = True
                return True
            if known or v5:
                client.send(Pubrel(packet_id=packet.packet_id, reason_code=None if known or not v5 else NOT_FOUND))
        elif isinstance(packet, Pubcomp):
            client.sent_qos2.discard(packet.packet_id or 0)
        elif isinstance(packet, Pingreq):
            client.send(Pingresp())
        elif isinstance(packet, Disconnect):
            code = packet.reason_code or 0x00
            if not v5 or code == 0x00 or (code != 0x04 and "will-any-disconnect" in self.deviations):
                client.will = None
            return False
        return True

    def _publish(self, client: Client, packet: Publish) -> None:
        if packet.topic.startswith("$") and "dollar-poisons" in self.deviations:
            client.poisoned = True
        if packet.qos == 1:
            client.send(Puback(packet_id=packet.packet_id))
        elif packet.qos == 2:
            client.received_qos2.add(packet.packet_id or 0)
            client.send(Pubrec(packet_id=packet.packet_id))
        if client.poisoned:
            return
        if packet.retain:
            self._retain(packet)
        self._route(Publish(topic=packet.topic, payload=packet.payload, qos=packet.qos), client)

    def _retain(self, packet: Publish) -> None:
        with self.state:
            held = self.retained.get(packet.topic)
            if held is not None and held.qos > 0 and packet.qos == 0 and "stale-retained" in self.deviations:
                self.replacements += 1
                if self.replacements % STALE_EVERY == 1:
                    return  # the QoS 1 message stays: the race lost
            if packet.payload:
                self.retained[packet.topic] = packet
            else:
                self.retained.pop(packet.topic, None)

    def _route(self, message: Publish, sender: Client) -> None:
        if message.retain:
            self._retain(message)
        with self.state:
            receivers = [
                (c, max(q for f, q in c.subscriptions.items() if matches(f, message.topic)))
                for c in self.clients
                if any(matches(f, message.topic) for f in c.subscriptions)
            ]
        for receiver, granted in receivers:
            self._deliver(receiver, message, min(granted, message.qos), retain=False)

    def _send_retained(self, client: Client, topic_filter: str, granted: int) -> None:
        with self.state:
            held = [m for topic, m in self.retained.items() if matches(topic_filter, topic)]
        for message in held:
            self._deliver(client, message, min(granted, message.qos), retain=True)

    def _deliver(self, client: Client, message: Publish, qos: int, *, retain: bool) -> None:
        packet_id = next(client.ids) if qos else None
        if qos == 2:
            client.sent_qos2.add(packet_id or 0)
        client.send(Publish(topic=message.topic, payload=message.payload, qos=qos, retain=retain, packet_id=packet_id))


def _filters(packet: Subscribe | Unsubscribe) -> list[str]:
    if isinstance(packet, Subscribe):
        return [s.topic_filter for s in packet.subscriptions]
    return list(packet.topic_filters)
