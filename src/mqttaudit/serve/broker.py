"""The reference broker's state machine: sessions, subscriptions, retained messages, Wills and the QoS flows of
MQTT 3.1.1 and 5.0, sans-I/O.

A :class:`Link` is one network connection. The I/O layer hands the broker each packet a link received
(:meth:`Broker.receive`), each malformed frame (:meth:`Broker.malformed`) and each close (:meth:`Broker.lost`),
and calls :meth:`Broker.tick` at :meth:`Broker.next_deadline`; the broker answers by appending packets, and at
most one :data:`CLOSE`, to the outboxes of the links concerned (:meth:`Broker.take_outboxes`). Nothing here reads
a clock or touches a socket.

It is a strict, small broker for testing clients, not a production one: everything lives in memory, every queue
is bounded, and it advertises small limits (:class:`Limits`) so that a client must honour them.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from ..codec import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Property,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    Will,
    encode,
)
from ..codec.properties import (
    AUTHENTICATION_DATA,
    AUTHENTICATION_METHOD,
    MAXIMUM_PACKET_SIZE,
    MESSAGE_EXPIRY_INTERVAL,
    RECEIVE_MAXIMUM,
    SESSION_EXPIRY_INTERVAL,
    SUBSCRIPTION_IDENTIFIER,
    TOPIC_ALIAS,
    TOPIC_ALIAS_MAXIMUM,
    first,
    make,
)
from ..topics import MQTT, MQTT5, TopicTrie, matches, parse_shared
from .scenarios import Scenario
from .session import NEVER, Granted, Message, Outgoing, Session, publish_of

#: What an outbox holds after the packets to send when the connection must be closed.
CLOSE: Final = "close"
#: Protocol levels.
V3: Final = 4
V5: Final = 5
#: Properties a PUBLISH carries that the server does not forward as they are [MQTT-3.3.2-17..20 keep the rest].
_NOT_FORWARDED: Final = frozenset({TOPIC_ALIAS, SUBSCRIPTION_IDENTIFIER, MESSAGE_EXPIRY_INTERVAL})
_WILL_DELAY: Final = 0x18
_UNLIMITED_EXPIRY: Final = 0xFFFFFFFF
# 5.0 Reason Codes the broker sends.
SUCCESS: Final = 0x00
NO_SUBSCRIPTION_EXISTED: Final = 0x11
MALFORMED: Final = 0x81
PROTOCOL_ERROR: Final = 0x82
UNSUPPORTED_VERSION: Final = 0x84
BAD_AUTH_METHOD: Final = 0x8C
KEEP_ALIVE_TIMEOUT: Final = 0x8D
TAKEN_OVER: Final = 0x8E
NOT_FOUND: Final = 0x92
RECEIVE_MAXIMUM_EXCEEDED: Final = 0x93
TOPIC_ALIAS_INVALID: Final = 0x94
PACKET_TOO_LARGE: Final = 0x95
RETAIN_NOT_SUPPORTED: Final = 0x9A
QUOTA_EXCEEDED: Final = 0x97
#: 3.1.1 codes for a refusal: CONNACK 0x03 Server unavailable, SUBACK 0x80 Failure.
SERVER_UNAVAILABLE: Final = 0x03
SUBSCRIBE_FAILURE: Final = 0x80
SHUTTING_DOWN: Final = 0x8B
NOT_AUTHORIZED: Final = 0x87
CONTINUE_AUTHENTICATION: Final = 0x18
REAUTHENTICATE: Final = 0x19
#: The one enhanced authentication method (MQTT 5.0 section 4.12) the broker knows: one round of challenge and
#: response with fixed data, enough for a client (or the probe, given a profile) to exercise AUTH.
AUTH_METHOD: Final = "mqttaudit-challenge"
AUTH_CLIENT_FIRST: Final = b"client-first"
AUTH_CHALLENGE: Final = b"mqttaudit-nonce"
AUTH_RESPONSE: Final = b"ecnon-tiduattqm"
CONNECTING: Final = "connecting"
REAUTHENTICATING: Final = "reauthenticating"
#: 3.1.1 CONNACK return codes.
REFUSED_VERSION: Final = 0x01
REFUSED_IDENTIFIER: Final = 0x02


@dataclass(frozen=True)
class Limits:
    """What the broker advertises to 5.0 clients (small by default, so a client must honour them) and the bounds
    of what it keeps."""

    #: Receive Maximum: QoS 1 and 2 PUBLISHes a client may have unacknowledged towards the broker.
    receive_maximum: int = 2
    #: Topic Alias Maximum: the highest Topic Alias a client may use towards the broker (0: none).
    topic_alias_maximum: int = 2
    #: Maximum Packet Size the broker accepts from a 5.0 client (whole packet).
    maximum_packet_size: int = 256
    #: The largest packet accepted from a 3.1.1 client, which is told no limit: a bound on memory only.
    maximum_packet_size_3_1_1: int = 1024 * 1024
    #: Messages queued per session for a client offline or out of Receive Maximum room; more are dropped.
    queued_messages: int = 1000
    #: Sessions the broker keeps at once; a CONNECT that would start one more is refused (CONNACK 0x97 Quota
    #: exceeded in 5.0, 0x03 Server unavailable in 3.1.1).
    sessions: int = 10_000
    #: Subscriptions per session; one more is refused in its SUBACK (0x97 in 5.0, 0x80 in 3.1.1).
    subscriptions: int = 1_000
    #: Topics with a retained message; a client's retained PUBLISH to one more closes its connection (5.0: after
    #: DISCONNECT 0x97), as a server may for a quota. (A Will's message past it is published, not kept.)
    retained_messages: int = 10_000
    #: Server Keep Alive (5.0), None to accept the client's.
    server_keep_alive: int | None = None
    #: A client silent for this many Keep Alive periods is disconnected [MQTT-3.1.2-24].
    keep_alive_factor: float = 1.5
    #: Seconds the broker waits for a client to close after its DISCONNECT [MQTT-3.14.4-1] before closing itself.
    close_wait: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.receive_maximum <= 0xFFFF:
            raise ValueError("receive_maximum is 1..65535")
        if not 0 <= self.topic_alias_maximum <= 0xFFFF:
            raise ValueError("topic_alias_maximum is 0..65535")
        if not 5 <= self.maximum_packet_size <= 268_435_460:
            raise ValueError("maximum_packet_size is 5..268435460")
        for name in ("queued_messages", "sessions", "subscriptions", "retained_messages"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


@dataclass(eq=False)
class Link:
    """One network connection to the broker."""

    name: str
    opened: float
    level: int | None = None
    session: Session | None = None
    #: CONNACK accepted the connection.
    connected: bool = False
    outbox: list[Packet | bytes | str] = field(default_factory=list)
    closing: bool = False
    last_heard: float = 0.0
    keep_alive: int = 0
    #: What the client declared (5.0): how many QoS 1/2 PUBLISHes it takes unacknowledged, the largest packet it
    #: takes, the highest Topic Alias it takes (the broker uses none).
    receive_maximum: int = 0xFFFF
    maximum_packet_size: int | None = None
    #: Topic Aliases the client set towards the broker.
    aliases: dict[int, str] = field(default_factory=dict)
    #: QoS 1 and 2 PUBLISHes received and not yet acknowledged (PUBACK sent, or PUBCOMP for QoS 2).
    unacknowledged: int = 0
    #: The client sent DISCONNECT (with 5.0 Reason Code 0x04 its Will is still published).
    disconnected: bool = False
    disconnected_at: float = 0.0
    keep_will: bool = False
    #: Messages discarded for this client because they exceeded its Maximum Packet Size [MQTT-3.1.2-25].
    too_large: int = 0
    #: The enhanced authentication agreed in CONNECT (5.0), its stage while an exchange goes on, and the CONNECT
    #: waiting for its end.
    method: str | None = None
    authenticating: str | None = None
    pending: tuple[Connect, str, str | None] | None = None
    #: What the broker declared to this client in CONNACK (5.0): its Receive Maximum, Topic Alias Maximum and
    #: Maximum Packet Size, and whether it takes retained messages.
    receive_limit: int = 0xFFFF
    alias_limit: int = 0
    packet_limit: int | None = None
    retain_available: bool = True
    #: The Topic Alias Maximum the client declared in CONNECT (the broker sends none unless hostile).
    client_alias_maximum: int = 0
    #: A scenario's acknowledgements held back: (when due, packet), in order.
    held: deque[tuple[float, Packet]] = field(default_factory=deque)
    #: When a scenario's server DISCONNECT is due.
    disconnect_at: float | None = None

    @property
    def v5(self) -> bool:
        return self.level == V5

    def send(self, packet: Packet | bytes) -> None:
        """Queues a packet, or bytes (encoded already, or a hostile scenario's), unless the link is closing."""
        if not self.closing:
            self.outbox.append(packet)

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.outbox.append(CLOSE)


class Broker:
    """Sessions, subscriptions and retained messages of one broker, shared by every link."""

    def __init__(
        self, limits: Limits | None = None, levels: Iterable[int] = (V3, V5), scenario: Scenario | None = None
    ) -> None:
        self.limits = limits or Limits()
        self.scenario = scenario
        self._known: set[str] = set()  # ClientIds that connected before (a scenario treats later connections apart)
        self._dropped: set[str] = set()  # ClientIds whose connection a scenario dropped mid-flow
        self._commanded: set[str] = set()  # ClientIds the scenario's commands were sent to
        self.levels = frozenset(levels)
        self.sessions: dict[str, Session] = {}
        self.retained: dict[str, Message] = {}
        self._tries: dict[int, TopicTrie[str]] = {V3: TopicTrie(MQTT), V5: TopicTrie(MQTT5)}
        self._links: dict[str, Link] = {}  # ClientId -> the link holding its session
        self._touched: dict[int, Link] = {}
        self._turns: dict[tuple[str, str], int] = {}  # share group -> next member
        self._assigned = itertools.count(1)

    # -- what the I/O layer calls ----------------------------------------------------------------------------

    def open(self, name: str, now: float) -> Link:
        return Link(name=name, opened=now, last_heard=now)

    def take_outboxes(self) -> list[tuple[Link, list[Packet | bytes | str]]]:
        """Every link's packets to send (and CLOSE), emptied."""
        out = [(link, link.outbox) for link in self._touched.values() if link.outbox]
        for link, _ in out:
            link.outbox = []
        self._touched.clear()
        return out

    def receive(self, link: Link, packet: Packet, now: float) -> None:
        """A well-formed packet from the client of ``link``."""
        self._touch(link)
        if link.closing:
            return
        link.last_heard = now
        if link.disconnected:
            return  # nothing after DISCONNECT is acted on [MQTT-3.14.4-2]
        if not link.connected:
            if isinstance(packet, Connect) and link.level is None:
                self._connect(link, packet, now)
            elif link.authenticating == CONNECTING and isinstance(packet, Auth | Disconnect):
                self._authenticate(link, packet, now)
            elif link.authenticating == CONNECTING:
                link.send(Connack(return_code=PROTOCOL_ERROR))  # only AUTH or DISCONNECT before CONNACK [MQTT-4.12.0-4]
                link.close()
            else:
                link.close()  # [MQTT-3.1.0-1] the first packet is CONNECT; nothing before CONNACK accepted it
            return
        handler = _HANDLERS.get(type(packet))
        if handler is None:  # a second CONNECT [MQTT-3.1.0-2], or a packet only a server sends
            self._refuse(link, PROTOCOL_ERROR, now)
            return
        handler(self, link, packet, now)

    def malformed(self, link: Link, now: float, *, too_large: bool = False) -> None:
        """The client sent a frame with a MUST-level violation: close, in 5.0 after DISCONNECT [MQTT-4.13.1-1]."""
        self._touch(link)
        self._refuse(link, PACKET_TOO_LARGE if too_large else MALFORMED, now)

    def lost(self, link: Link, now: float) -> None:
        """The network connection of ``link`` ended (either side closed it)."""
        self._touch(link)
        link.closing = True
        session = link.session
        if session is None or self._links.get(session.client_id) is not link:
            return
        del self._links[session.client_id]
        will = session.will
        if will is not None and (not link.disconnected or link.keep_will):
            delay = first(will.properties, _WILL_DELAY) if link.v5 else 0
            session.will_at = now + float(delay if isinstance(delay, int) else 0)
        else:
            session.will = None
        session.ends_at = now + session.expiry
        if session.will_at is not None and session.ends_at <= session.will_at:
            session.will_at = session.ends_at  # [MQTT-3.1.3-9] the Will goes when the session ends, at the latest
        self.tick(now)

    def shut_down(self, now: float) -> None:
        """Closes every link (5.0: DISCONNECT 0x8B Server shutting down)."""
        for link in list(self._links.values()):
            self._touch(link)
            if link.v5:
                link.send(Disconnect(reason_code=SHUTTING_DOWN))
            link.close()

    def next_deadline(self) -> float | None:
        deadlines = [s.will_at for s in self.sessions.values() if s.will_at is not None]
        deadlines += [s.ends_at for s in self.sessions.values() if s.ends_at is not None and s.ends_at < NEVER]
        for link in self._links.values():
            if link.held:
                deadlines.append(link.held[0][0])
            if link.disconnect_at is not None:
                deadlines.append(link.disconnect_at)
            if link.disconnected:
                deadlines.append(link.disconnected_at + self.limits.close_wait)
            elif link.keep_alive:
                deadlines.append(link.last_heard + link.keep_alive * self.limits.keep_alive_factor)
        return min(deadlines, default=None)

    def tick(self, now: float) -> None:
        """Publishes the Wills due, ends the sessions that expired, drops silent clients [MQTT-3.1.2-24]."""
        for link in list(self._links.values()):
            while link.held and link.held[0][0] <= now and not link.closing:
                self._touch(link)
                self._release(link, link.held.popleft()[1])
            if link.disconnect_at is not None and now >= link.disconnect_at and self.scenario is not None:
                self._touch(link)
                code, short = self.scenario.disconnect, self.scenario.short
                link.send(Disconnect(reason_code=code, properties=None if short else ()))
                link.close()  # [MQTT-3.14.4-2]
                continue
            if link.disconnected:
                if now >= link.disconnected_at + self.limits.close_wait:
                    self._touch(link)
                    link.close()
            elif link.keep_alive and now >= link.last_heard + link.keep_alive * self.limits.keep_alive_factor:
                self._touch(link)
                self._refuse(link, KEEP_ALIVE_TIMEOUT, now)
        for session in list(self.sessions.values()):
            if session.will_at is not None and now >= session.will_at and session.will is not None:
                will, session.will, session.will_at = session.will, None, None
                self._publish_will(session, will, now)
            if session.ends_at is not None and now >= session.ends_at:
                self._end_session(session)

    # -- connection ------------------------------------------------------------------------------------------

    def _connect(self, link: Link, connect: Connect, now: float) -> None:
        level = connect.protocol_level
        if level not in self.levels or level not in (V3, V5):
            if level == V5:
                link.level = V5
                link.send(Connack(return_code=UNSUPPORTED_VERSION))
            else:
                link.send(Connack(return_code=REFUSED_VERSION))  # [MQTT-3.1.2-2] in the 3.1.1 form
            link.close()
            return
        link.level = level
        v5 = level == V5
        client_id = connect.client_id
        assigned = None
        if not client_id:
            if not v5 and not connect.clean_session:
                link.send(Connack(return_code=REFUSED_IDENTIFIER))  # [MQTT-3.1.3-8]
                link.close()
                return
            client_id = assigned = f"mqttaudit-{next(self._assigned)}"  # [MQTT-3.1.3-6]
        method = first(connect.properties, AUTHENTICATION_METHOD) if v5 else None
        if method is not None:
            if method != AUTH_METHOD:
                link.send(Connack(return_code=BAD_AUTH_METHOD))  # [MQTT-4.12.0-1]
                link.close()
            elif first(connect.properties, AUTHENTICATION_DATA) != AUTH_CLIENT_FIRST:
                link.send(Connack(return_code=NOT_AUTHORIZED))
                link.close()
            else:  # one round of challenge and response before CONNACK
                link.authenticating, link.pending = CONNECTING, (connect, client_id, assigned)
                link.send(Auth(reason_code=CONTINUE_AUTHENTICATION, properties=_challenge()))
            return
        self._accept_connection(link, connect, client_id, assigned, now)

    def _accept_connection(
        self, link: Link, connect: Connect, client_id: str, assigned: str | None, now: float
    ) -> None:
        level = connect.protocol_level
        v5 = level == V5
        if client_id not in self.sessions and len(self.sessions) >= self.limits.sessions:
            link.send(Connack(return_code=QUOTA_EXCEEDED if v5 else SERVER_UNAVAILABLE))  # a bound on memory
            link.close()
            return
        previous = self._links.get(client_id)
        if previous is not None:  # [MQTT-3.1.4-2] the existing client is disconnected
            self._touch(previous)
            if previous.v5:
                previous.send(Disconnect(reason_code=TAKEN_OVER))
            previous.close()
            self.lost(previous, now)
        session = self.sessions.get(client_id)
        if session is not None and session.will is not None:
            session.will, session.will_at = None, None  # [MQTT-3.1.3-9] a new connection before the Will Delay
        present = session is not None and not connect.clean_session
        if session is not None and not present:
            self._end_session(session)
            session = None
        if session is None:
            session = self.sessions[client_id] = Session(client_id=client_id, level=level)
        session.ends_at = None
        if v5:
            expiry = first(connect.properties, SESSION_EXPIRY_INTERVAL)
            seconds = expiry if isinstance(expiry, int) else 0
            session.expiry = NEVER if seconds == _UNLIMITED_EXPIRY else float(seconds)
            maximum = first(connect.properties, RECEIVE_MAXIMUM)
            link.receive_maximum = maximum if isinstance(maximum, int) and maximum > 0 else 0xFFFF
            size = first(connect.properties, MAXIMUM_PACKET_SIZE)
            link.maximum_packet_size = size if isinstance(size, int) and size > 0 else None
        else:
            session.expiry = 0.0 if connect.clean_session else NEVER
        session.will = connect.will
        link.session = session
        link.keep_alive = connect.keep_alive
        scenario = self._scenario_for(link)
        later = client_id in self._known
        self._known.add(client_id)
        values: dict[str, int | str] = {}
        if v5:
            alias = first(connect.properties, TOPIC_ALIAS_MAXIMUM)
            link.client_alias_maximum = alias if isinstance(alias, int) else 0
            values = self._declared(link, scenario, later)
            if scenario is not None and scenario.session_expiry_interval is not None:
                session.expiry = float(scenario.session_expiry_interval)  # CONNACK overrides the client's
                values["session_expiry_interval"] = scenario.session_expiry_interval
            if "server_keep_alive" in values:
                link.keep_alive = int(values["server_keep_alive"])  # [MQTT-3.2.2-22]
            if assigned is not None:
                values["assigned_client_identifier"] = assigned
            if link.method is not None:
                values["authentication_method"] = link.method  # [MQTT-4.12.0-5] the method agreed
        link.connected = True
        self._links[client_id] = link
        if scenario is not None and scenario.lie_session_present:
            present = True  # hostile: Session Present 1 on a clean start
        if scenario is not None and scenario.raw and scenario.instead_of_connack:
            link.send(scenario.raw)
        else:
            link.send(Connack(session_present=present, properties=make(**values)))
        if scenario is not None and scenario.raw and not scenario.instead_of_connack:
            link.send(scenario.raw)
        if scenario is not None and scenario.disconnect is not None:
            link.disconnect_at = now + 1.0  # or at once after the client's first SUBSCRIBE or PUBLISH
        if present:
            self._resume(link, session, now)
        self._drain(link, now)

    def _scenario_for(self, link: Link) -> Scenario | None:
        """The scenario, when it concerns this link's version."""
        scenario = self.scenario
        if scenario is None or (scenario.version == "5.0" and not link.v5):
            return None
        return scenario

    def _declared(self, link: Link, scenario: Scenario | None, later: bool) -> dict[str, int | str]:
        """The limits CONNACK declares to a 5.0 client (a scenario's, else the broker's), kept on the link."""
        limits = self.limits
        link.receive_limit = limits.receive_maximum
        link.alias_limit = limits.topic_alias_maximum
        link.packet_limit = limits.maximum_packet_size
        keep_alive = limits.server_keep_alive
        if scenario is not None:
            link.receive_limit = scenario.receive_maximum or link.receive_limit
            if scenario.topic_alias_maximum is not None:
                link.alias_limit = scenario.topic_alias_maximum
            if later and scenario.alias_later_given:
                link.alias_limit = scenario.topic_alias_maximum_later or 0
            link.packet_limit = scenario.maximum_packet_size or link.packet_limit
            keep_alive = scenario.server_keep_alive if scenario.server_keep_alive is not None else keep_alive
            link.retain_available = scenario.retain_available
        values: dict[str, int | str] = {}
        if link.receive_limit != 0xFFFF:
            values["receive_maximum"] = link.receive_limit
        if link.alias_limit:
            values["topic_alias_maximum"] = link.alias_limit
        values["maximum_packet_size"] = link.packet_limit
        if not link.retain_available:
            values["retain_available"] = 0
        if keep_alive is not None:
            values["server_keep_alive"] = keep_alive
        return values

    def _resume(self, link: Link, session: Session, now: float) -> None:
        """A resumed session: every message in flight again, in order, PUBLISH with DUP or PUBREL [MQTT-4.4.0-1]."""
        for outgoing in list(session.inflight.values()):
            if outgoing.released:
                link.send(Pubrel(packet_id=outgoing.packet_id))
            else:  # even when expired since: a PUBLISH once sent is not subject to expiry [MQTT-4.3.3-7]
                link.send(publish_of(outgoing, now, link.v5))

    def _refuse(self, link: Link, reason: int, now: float) -> None:
        """Closes ``link`` for a Protocol Error or a Malformed Packet: in 5.0 with a DISCONNECT first."""
        if link.v5 and link.connected:
            link.send(Disconnect(reason_code=reason))
        link.close()

    def _end_session(self, session: Session) -> None:
        trie = self._tries[session.level]
        for topic_filter in session.subscriptions:
            trie.remove(_BROKER, topic_filter, session.client_id)
        self.sessions.pop(session.client_id, None)

    # -- packets ---------------------------------------------------------------------------------------------

    def _publish(self, link: Link, packet: Publish, now: float) -> None:
        session = link.session
        assert session is not None
        topic = packet.topic
        properties = packet.properties
        if link.v5:
            alias = first(properties, TOPIC_ALIAS)
            if isinstance(alias, int):
                if alias == 0 or alias > link.alias_limit:
                    self._refuse(link, TOPIC_ALIAS_INVALID, now)  # [MQTT-3.3.2-9]
                    return
                if topic:
                    link.aliases[alias] = topic
                elif alias in link.aliases:
                    topic = link.aliases[alias]
                else:
                    self._refuse(link, PROTOCOL_ERROR, now)  # an alias never set names no topic
                    return
            elif not topic:
                self._refuse(link, PROTOCOL_ERROR, now)  # [MQTT-3.3.2-1] no Topic Name and no alias
                return
        if packet.qos > 0 and link.v5 and link.unacknowledged >= link.receive_limit:
            self._refuse(link, RECEIVE_MAXIMUM_EXCEEDED, now)  # the client broke [MQTT-3.3.4-7]
            return
        if packet.retain and not link.retain_available:
            self._refuse(link, RETAIN_NOT_SUPPORTED, now)  # the client broke [MQTT-3.2.2-14]
            return
        if packet.retain and self._retained_full(topic):
            self._refuse(link, QUOTA_EXCEEDED, now)  # a bound on memory
            return
        scenario = self._scenario_for(link)
        if scenario is not None:
            link.disconnect_at = now if link.disconnect_at is not None else None
            if packet.qos > 0 and self._drops(link, session, scenario, "publish"):
                return  # as if lost in the network: nothing routed, nothing acknowledged
        if packet.qos == 2 and packet.packet_id in session.unreleased:
            link.send(Pubrec(packet_id=packet.packet_id))  # [MQTT-4.3.3-2] not delivered again
            return
        expiry = first(properties, MESSAGE_EXPIRY_INTERVAL) if link.v5 else None
        message = Message(
            topic=topic,
            payload=packet.payload,
            qos=packet.qos,
            retain=packet.retain,
            publisher=session.client_id,
            received=now,
            properties=tuple(p for p in properties if p.identifier not in _NOT_FORWARDED) if link.v5 else (),
            expiry=expiry if isinstance(expiry, int) else None,
        )
        self._accept(message, now)
        if packet.qos == 1:
            link.unacknowledged += 1
            self._acknowledge(link, Puback(packet_id=packet.packet_id), now, scenario)
        elif packet.qos == 2:
            assert packet.packet_id is not None
            session.unreleased.add(packet.packet_id)
            link.unacknowledged += 1  # until PUBCOMP
            self._acknowledge(link, Pubrec(packet_id=packet.packet_id), now, scenario)

    def _acknowledge(self, link: Link, packet: Puback | Pubrec, now: float, scenario: Scenario | None) -> None:
        """Sends a PUBACK or PUBREC, or holds it back as the scenario asks (in order, behind those held)."""
        if (scenario is not None and scenario.hold_acks > 0) or link.held:
            link.held.append((now + (scenario.hold_acks if scenario is not None else 0.0), packet))
            return
        self._release(link, packet)

    def _release(self, link: Link, packet: Packet) -> None:
        link.send(packet)
        if isinstance(packet, Puback):
            link.unacknowledged = max(0, link.unacknowledged - 1)

    def _drops(self, link: Link, session: Session, scenario: Scenario, stage: str) -> bool:
        """Whether the scenario drops the connection here (the first time for the ClientId): a network failure in
        the middle of the flow, which the client must resume on its next connection (or discard, told Session
        Present 0)."""
        if scenario.drop_at != stage or session.client_id in self._dropped:
            return False
        self._dropped.add(session.client_id)
        link.close()
        return True

    def _pubrel(self, link: Link, packet: Pubrel, now: float) -> None:
        session = link.session
        assert session is not None and packet.packet_id is not None
        scenario = self._scenario_for(link)
        if (
            scenario is not None
            and packet.packet_id in session.unreleased
            and self._drops(link, session, scenario, "pubrel")
        ):
            return
        if packet.packet_id in session.unreleased:
            session.unreleased.discard(packet.packet_id)
            link.unacknowledged = max(0, link.unacknowledged - 1)
            link.send(Pubcomp(packet_id=packet.packet_id))
        elif link.v5:
            link.send(Pubcomp(packet_id=packet.packet_id, reason_code=NOT_FOUND))
        else:
            link.send(Pubcomp(packet_id=packet.packet_id))

    def _puback(self, link: Link, packet: Puback | Pubcomp, now: float) -> None:
        session = link.session
        assert session is not None
        outgoing = session.inflight.get(packet.packet_id or 0)
        if outgoing is None:
            return
        if outgoing.qos == 1 if isinstance(packet, Puback) else outgoing.released:
            del session.inflight[packet.packet_id or 0]
            self._drain(link, now)

    def _pubrec(self, link: Link, packet: Pubrec, now: float) -> None:
        session = link.session
        assert session is not None
        outgoing = session.inflight.get(packet.packet_id or 0)
        if outgoing is None or outgoing.qos != 2:
            if link.v5:
                link.send(Pubrel(packet_id=packet.packet_id, reason_code=NOT_FOUND))
            else:
                link.send(Pubrel(packet_id=packet.packet_id))
            return
        if link.v5 and (packet.reason_code or 0) >= 0x80:
            del session.inflight[packet.packet_id or 0]  # no PUBREL after a refusal [MQTT-4.3.3-4]: the flow ends
            self._drain(link, now)
            return
        outgoing.released = True
        link.send(Pubrel(packet_id=packet.packet_id))

    def _subscribe(self, link: Link, packet: Subscribe, now: float) -> None:
        session = link.session
        assert session is not None
        trie = self._tries[session.level]
        identifier = first(packet.properties, SUBSCRIPTION_IDENTIFIER) if link.v5 else None
        codes: list[int] = []
        retained: list[Outgoing] = []
        scenario = self._scenario_for(link)
        commands: tuple[str, ...] = ()
        for subscription in packet.subscriptions:
            topic_filter = subscription.topic_filter
            if scenario is not None and topic_filter == behaviour_topic(session.client_id):
                if session.client_id not in self._commanded:  # once per ClientId, not on every resubscription
                    self._commanded.add(session.client_id)
                    commands = scenario.commands
            elif scenario is not None and scenario.seed_retained:
                self._seed(topic_filter, now)
            new = topic_filter not in session.subscriptions
            if new and len(session.subscriptions) >= self.limits.subscriptions:
                codes.append(QUOTA_EXCEEDED if link.v5 else SUBSCRIBE_FAILURE)  # a bound on memory
                continue
            session.subscriptions[topic_filter] = Granted(
                subscription, identifier if isinstance(identifier, int) else None
            )
            trie.add(_BROKER, topic_filter, session.client_id)  # [MQTT-3.8.4-3] replaces the options
            codes.append(subscription.qos)
            shared = link.v5 and parse_shared(topic_filter) is not None
            send_retained = not shared and (
                not link.v5 or subscription.retain_handling == 0 or (subscription.retain_handling == 1 and new)
            )
            if send_retained:
                retained += self._retained_for(topic_filter, subscription.qos, identifier, now)
        link.send(Suback(packet_id=packet.packet_id, return_codes=codes))
        for outgoing in retained:  # after the SUBACK, with RETAIN set [MQTT-3.3.1-6]
            self._deliver(session, outgoing, now)
        if link.disconnect_at is not None:
            link.disconnect_at = now  # the scenario's DISCONNECT goes once the client has subscribed
        for command in commands:  # behaviour topic: the scenario's commands, in order
            message = Message(behaviour_topic(session.client_id), command.encode(), 0, False, "", now)
            self._deliver(session, Outgoing(message, 0, False), now)

    def _seed(self, topic_filter: str, now: float) -> None:
        """A retained QoS 2 message on a topic the filter matches, unless one is there (scenario ``retained``)."""
        shared = parse_shared(topic_filter) if topic_filter.startswith("$share/") else None
        inner = topic_filter if shared is None else shared[1]
        topic = "/".join("retained" if level in ("+", "#") else level for level in inner.split("/"))
        if topic not in self.retained and not topic.startswith("$"):
            self.retained[topic] = Message(topic, b"retained by mqttaudit serve", 2, True, "", now)

    def _retained_for(self, topic_filter: str, qos: int, identifier: object, now: float) -> list[Outgoing]:
        """The retained messages a new subscription gets, RETAIN set [MQTT-3.3.1-6], at most at its QoS."""
        ids = (identifier,) if isinstance(identifier, int) else ()
        return [
            Outgoing(message, min(qos, message.qos), True, ids)
            for topic, message in self.retained.items()
            if matches(topic_filter, topic) and not message.expired(now)
        ]

    def _unsubscribe(self, link: Link, packet: Unsubscribe, now: float) -> None:
        session = link.session
        assert session is not None
        trie = self._tries[session.level]
        codes = []
        for topic_filter in packet.topic_filters:
            held = session.subscriptions.pop(topic_filter, None)
            if held is not None:
                trie.remove(_BROKER, topic_filter, session.client_id)
            codes.append(SUCCESS if held is not None else NO_SUBSCRIPTION_EXISTED)
        link.send(Unsuback(packet_id=packet.packet_id, reason_codes=codes if link.v5 else ()))

    def _pingreq(self, link: Link, packet: Pingreq, now: float) -> None:
        link.send(Pingresp())  # [MQTT-3.12.4-1]

    def _disconnect(self, link: Link, packet: Disconnect, now: float) -> None:
        session = link.session
        assert session is not None
        if link.v5:
            expiry = first(packet.properties, SESSION_EXPIRY_INTERVAL)
            if isinstance(expiry, int):
                if session.expiry == 0 and expiry != 0:
                    self._refuse(link, PROTOCOL_ERROR, now)  # [MQTT-3.14.2-2]
                    return
                session.expiry = NEVER if expiry == _UNLIMITED_EXPIRY else float(expiry)
            # [MQTT-3.1.2-8] only Normal disconnection (0x00, or no Reason Code) deletes the Will
            link.keep_will = packet.reason_code not in (None, SUCCESS)
        link.disconnected, link.disconnected_at = True, now  # the client closes next [MQTT-3.14.4-1]

    def _auth(self, link: Link, packet: Auth, now: float) -> None:
        if link.method is None:
            self._refuse(link, PROTOCOL_ERROR, now)  # no Authentication Method was agreed in CONNECT [MQTT-4.12.0-7]
            return
        self._authenticate(link, packet, now)

    def _authenticate(self, link: Link, packet: Auth | Disconnect, now: float) -> None:
        """One step of the ``mqttaudit-challenge`` exchange: CONNECT (or AUTH 0x19) with the client's first data,
        AUTH 0x18 with the challenge, AUTH 0x18 with the response, then CONNACK (or AUTH 0x00)."""
        if isinstance(packet, Disconnect):
            link.close()
            return
        method = first(packet.properties, AUTHENTICATION_METHOD)
        data = first(packet.properties, AUTHENTICATION_DATA)
        if method != (link.method or AUTH_METHOD):
            self._refuse_authentication(link, PROTOCOL_ERROR, now)  # [MQTT-4.12.0-5] the same method throughout
            return
        code = packet.reason_code or SUCCESS
        if code == REAUTHENTICATE and link.connected and link.authenticating is None:
            if data == AUTH_CLIENT_FIRST:
                link.authenticating = REAUTHENTICATING
                link.send(Auth(reason_code=CONTINUE_AUTHENTICATION, properties=_challenge()))
            else:
                self._refuse_authentication(link, NOT_AUTHORIZED, now)
            return
        if code != CONTINUE_AUTHENTICATION or link.authenticating is None:
            self._refuse_authentication(link, PROTOCOL_ERROR, now)
            return
        if data != AUTH_RESPONSE:
            self._refuse_authentication(link, NOT_AUTHORIZED, now)
            return
        stage, link.authenticating = link.authenticating, None
        if stage == CONNECTING:
            assert link.pending is not None
            connect, client_id, assigned = link.pending
            link.pending, link.method = None, AUTH_METHOD
            self._accept_connection(link, connect, client_id, assigned, now)
        else:
            link.send(Auth(reason_code=SUCCESS, properties=make(authentication_method=AUTH_METHOD)))

    def _refuse_authentication(self, link: Link, reason: int, now: float) -> None:
        """Before CONNACK a refusal is a CONNACK with the reason; after it, a DISCONNECT [MQTT-4.12.1-2]."""
        if link.connected:
            self._refuse(link, reason, now)
        else:
            link.send(Connack(return_code=reason))
            link.close()

    # -- routing ---------------------------------------------------------------------------------------------

    def _retained_full(self, topic: str) -> bool:
        return topic not in self.retained and len(self.retained) >= self.limits.retained_messages

    def _accept(self, message: Message, now: float) -> None:
        if message.retain and not message.payload:
            self.retained.pop(message.topic, None)  # [MQTT-3.3.1-10]
        elif message.retain and not self._retained_full(message.topic):  # a Will past the bound is not kept
            self.retained[message.topic] = message  # [MQTT-3.3.1-5]
        self._route(message, now)

    def _route(self, message: Message, now: float) -> None:
        owed: dict[str, Outgoing] = {}
        copies: list[tuple[Session, Outgoing]] = []
        groups: dict[tuple[str, str], list[tuple[Session, Granted]]] = {}
        for level, trie in self._tries.items():
            for topic_filter, client_id in trie.match_subscriptions(_BROKER, message.topic):
                session = self.sessions.get(client_id)
                if session is None:
                    continue
                granted = session.subscriptions.get(topic_filter)
                if granted is None:
                    continue
                option = granted.subscription
                shared = parse_shared(topic_filter) if level == V5 else None
                if shared is not None:
                    groups.setdefault(shared, []).append((session, granted))
                    continue
                if level == V5 and option.no_local and client_id == message.publisher:
                    continue  # [MQTT-3.8.3-3]
                qos = min(message.qos, option.qos)
                retain = message.retain and level == V5 and option.retain_as_published  # [MQTT-3.3.1-12, MQTT-3.3.1-13]
                ids = (granted.identifier,) if granted.identifier is not None else ()
                if level == V5:  # a copy per subscription, each with its own identifier [MQTT-3.3.4-5]
                    copies.append((session, Outgoing(message, qos, retain, ids)))
                    continue
                held = owed.get(client_id)
                if held is None:
                    owed[client_id] = Outgoing(message, qos, retain, ids)
                else:  # one copy at the highest QoS [MQTT-3.3.5-1]
                    held.qos = max(held.qos, qos)
        for group, members in groups.items():
            members.sort(key=lambda member: member[0].client_id)
            online = [m for m in members if m[0].client_id in self._links] or members
            turn = self._turns.get(group, 0)
            session, granted = online[turn % len(online)]
            self._turns[group] = turn + 1
            ids = (granted.identifier,) if granted.identifier is not None else ()
            retain = message.retain and granted.subscription.retain_as_published
            self._deliver(session, Outgoing(message, min(message.qos, granted.subscription.qos), retain, ids), now)
        for client_id, outgoing in owed.items():
            self._deliver(self.sessions[client_id], outgoing, now)
        for session, outgoing in copies:
            self._deliver(session, outgoing, now)

    def _publish_will(self, session: Session, will: Will, now: float) -> None:
        properties = tuple(p for p in will.properties if p.identifier not in (_WILL_DELAY, *_NOT_FORWARDED))
        expiry = first(will.properties, MESSAGE_EXPIRY_INTERVAL)
        message = Message(
            topic=will.topic,
            payload=will.message,
            qos=will.qos,
            retain=will.retain,
            publisher=session.client_id,
            received=now,
            properties=properties if session.level == V5 else (),
            expiry=expiry if isinstance(expiry, int) else None,
        )
        self._accept(message, now)

    def _deliver(self, session: Session, outgoing: Outgoing, now: float) -> None:
        link = self._links.get(session.client_id)
        if link is None:
            if outgoing.qos > 0 and session.expiry > 0:
                session.enqueue(outgoing, self.limits.queued_messages)  # QoS 0 is not kept [MQTT-3.1.2-5]
            return
        if outgoing.qos == 0:
            self._transmit(link, session, outgoing, now)
            return
        session.enqueue(outgoing, self.limits.queued_messages)
        self._drain(link, now)

    def _drain(self, link: Link, now: float) -> None:
        """Sends queued messages while the client's Receive Maximum has room [MQTT-3.3.4-9]."""
        session = link.session
        if session is None or link.closing:
            return
        self._touch(link)
        while session.queue and len(session.inflight) < link.receive_maximum:
            outgoing = session.queue.popleft()
            if outgoing.message.expired(now):
                continue  # [MQTT-3.3.2-5]
            self._transmit(link, session, outgoing, now)

    def _transmit(self, link: Link, session: Session, outgoing: Outgoing, now: float) -> None:
        if outgoing.qos > 0:
            packet_id = session.packet_id()
            if packet_id is None:
                session.queue.appendleft(outgoing)
                return
            outgoing.packet_id = packet_id
        scenario = self._scenario_for(link)
        extra: tuple[Property, ...] = ()
        if scenario is not None and scenario.server_alias:  # hostile: an alias beyond what the client allowed
            extra = (Property(TOPIC_ALIAS, link.client_alias_maximum + 1),)
        packet: Packet | bytes = publish_of(outgoing, now, link.v5, extra)
        if link.maximum_packet_size is not None:
            assert isinstance(packet, Publish)
            packet = encode(packet, version=V5, validate=False)  # encoded once: these bytes are what is sent
            if len(packet) > link.maximum_packet_size:
                link.too_large += 1  # [MQTT-3.1.2-25] discarded as if delivered
                return
        if outgoing.qos > 0:
            session.inflight[outgoing.packet_id or 0] = outgoing
        outgoing.sent = True
        self._touch(link)
        link.send(packet)

    def _touch(self, link: Link) -> None:
        self._touched[id(link)] = link


_BROKER: Final = "broker"


def behaviour_topic(client_id: str) -> str:
    """Where a scenario's commands reach the client with this ClientId (behaviour topics)."""
    return f"mqttaudit/behaviour/{client_id}"


def _challenge() -> tuple[Property, ...]:
    return make(authentication_method=AUTH_METHOD, authentication_data=AUTH_CHALLENGE)


_HANDLERS: Final[dict[type, Callable[[Broker, Link, Any, float], None]]] = {
    Publish: Broker._publish,
    Puback: Broker._puback,
    Pubrec: Broker._pubrec,
    Pubrel: Broker._pubrel,
    Pubcomp: Broker._puback,
    Subscribe: Broker._subscribe,
    Unsubscribe: Broker._unsubscribe,
    Pingreq: Broker._pingreq,
    Disconnect: Broker._disconnect,
    Auth: Broker._auth,
}
