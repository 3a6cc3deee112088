"""Probe cases: the statements a case targets and the stimulus it sends, written as a short async script.

A script only drives the conversation; it never decides the verdict. The judge does, from the recorded events,
so the same rules judge a live probe and a capture. A script may stop early with :class:`NotApplicable` (the
broker declared a feature unsupported) or :class:`Inconclusive` (the setup the case needs did not happen).

A case speaks one MQTT version (:attr:`Case.protocol`): its context connects, subscribes, publishes and
acknowledges in that version's form, and after a 5.0 CONNACK knows what the broker declared it supports
(:attr:`CaseContext.capabilities`, with the operator's profile over it).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import importlib
import ipaddress
import os
import ssl
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote

from ..codec import (
    Connack,
    Connect,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    Property,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from ..codec import properties as props
from ..spec import registry
from .cancellation import within
from .capabilities import Capabilities
from .connection import ProbeConnection
from .profile import NO_PROFILE, BrokerProfile
from .target_url import parse_target_url
from .transport import ByteStream, Credentials, TlsOptions, TransportError, open_stream

Script = Callable[["CaseContext"], Awaitable[None]]


class NotApplicable(Exception):
    """The broker declared the feature the case needs unsupported (e.g. it granted QoS 1 for QoS 2)."""


class Inconclusive(Exception):
    """The case could not set up what it needs (a setup CONNECT refused, no SUBACK, ...)."""


@dataclass(frozen=True)
class Case:
    id: str
    statements: tuple[str, ...]
    title: str
    script: Script = field(repr=False, compare=False)
    #: The stimulus in words, for the list and the reports.
    stimulus: str = ""
    #: What a conforming broker does.
    expected: str = ""
    #: The verdict hangs on a deadline or a broker-side timer (Keep Alive, a Will after a drop, Will Delay, an
    #: expiry): the case is judged after every other case, beside timing cases only (its pass as well as its
    #: failure), and a failure is confirmed by running the case again, alone, before it is reported.
    timing: bool = False
    #: The case leaves state other clients can see while it runs (a retained message): some brokers send every
    #: retained message to every client (amqtt 0.12.1), so it runs with no other case beside it.
    alone: bool = False
    #: The family of shapes the case belongs to (``malformed/wildcard-position``); by default the first part of
    #: its id (``retain``), see :attr:`family_name`.
    family: str = ""
    #: The MQTT version the case speaks; its statements are that version's ids.
    protocol: ProtocolVersion = ProtocolVersion.V3_1_1
    #: A timing case whose stimulus is silence itself (Keep Alive): the broker must act on a timer while nothing is
    #: sent on the connection, and any traffic of another case may wake a broker that checks its timers only when
    #: traffic comes, so it runs last, one at a time, with nothing beside it.
    quiet: bool = False
    #: The Client's statements the stimulus breaks on purpose (the packet's defect, which the prober commits): named
    #: with the case, never judged against the broker, which they do not bind. ``statements`` holds what the broker
    #: owes in answer (the close, not acting on the packet), each a MUST that binds the Server.
    provokes: tuple[str, ...] = ()

    @property
    def family_name(self) -> str:
        return self.family or self.id.split("/", 1)[0]

    @property
    def runs_alone(self) -> bool:
        """Run after the concurrent cases, one at a time (see :attr:`alone`)."""
        return self.alone


#: Schemes of the MQTT case library and their default ports; ``ws``/``wss`` carry MQTT over WebSocket.
MQTT_SCHEMES = {"mqtt": 1883, "mqtts": 8883, "ws": 80, "wss": 443}
#: The default port of every scheme a target may have, the AMQP ones too.
DEFAULT_PORTS = {**MQTT_SCHEMES, "amqp": 5672, "amqps": 5671}
#: Schemes whose connection is TLS.
TLS_SCHEMES = frozenset({"mqtts", "wss", "amqps"})
#: The path of a WebSocket target that names none.
DEFAULT_WEBSOCKET_PATH = "/mqtt"


@dataclass(frozen=True)
class Target:
    """Where the broker is and how to reach it: ``scheme`` picks the transport (TCP, TLS, WebSocket, both), ``path``
    is a WebSocket target's, ``tls`` how a TLS target is trusted, ``credentials`` the user name and password every
    CONNECT of the library's client steps carries. Neither ``repr`` nor :attr:`url` shows the password."""

    host: str
    port: int
    scheme: str = "mqtt"
    path: str = ""
    tls: TlsOptions | None = None
    credentials: Credentials | None = field(default=None, repr=False)

    @property
    def default_port(self) -> int:
        return DEFAULT_PORTS.get(self.scheme, 0)

    @property
    def uses_tls(self) -> bool:
        return self.scheme in TLS_SCHEMES

    @property
    def websocket(self) -> bool:
        return self.scheme in ("ws", "wss")

    @property
    def url(self) -> str:
        """``mqtts://user@host:8883``: the user name but never the password."""
        host = f"[{self.host}]" if _is_ipv6(self.host) else self.host
        user = f"{quote(self.credentials.username, safe='')}@" if self.credentials is not None else ""
        return f"{self.scheme}://{user}{host}:{self.port}{self.path if self.websocket else ''}"

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context of a TLS target (the system's trust store unless ``tls`` says otherwise), else None."""
        if not self.uses_tls:
            return None
        return (self.tls or TlsOptions()).context()

    def with_options(self, tls: TlsOptions | None = None, credentials: Credentials | None = None) -> Target:
        """The target with ``tls`` (ValueError when it is no TLS target) and ``credentials`` applied: the URL's
        user name and password win; a URL that names a user and no password takes the password of
        ``credentials``."""
        if tls is not None and tls.given and not self.uses_tls:
            raise ValueError(f"TLS options (--cafile, --cert, --key, --insecure) need a TLS target, not {self.url}")
        merged = self.credentials or credentials
        if self.credentials is not None and self.credentials.password is None and credentials is not None:
            merged = Credentials(self.credentials.username, credentials.password)  # a user in the URL, no password
        if merged is not None and not merged.username:
            raise ValueError(f"a password needs a user name: --username, or USER@ in the target ({self.url})")
        return replace(self, tls=tls if self.uses_tls else None, credentials=merged)

    @classmethod
    def parse(cls, url: str) -> Target:
        """``SCHEME://[USER[:PASSWORD]@]HOST[:PORT][/PATH]`` with SCHEME ``mqtt`` (the default), ``mqtts``, ``ws``
        or ``wss``; the port defaults to the scheme's (1883, 8883, 80, 443), a WebSocket path to ``/mqtt``; user
        name and password are percent-decoded; an IPv6 host is written in brackets."""
        parts = parse_target_url(url)
        shown = parts.shown
        if parts.scheme not in MQTT_SCHEMES or parts.query or parts.fragment:
            raise ValueError(f"not an mqtt://, mqtts://, ws:// or wss:// target: {shown!r}")
        if parts.port == 0:
            raise ValueError(f"bad port in {shown!r}")
        path = parts.path
        if parts.scheme in ("ws", "wss"):
            path = path or DEFAULT_WEBSOCKET_PATH
        elif path.strip("/"):
            raise ValueError(f"an {parts.scheme}:// target has no path: {shown!r}")
        credentials = None if parts.username is None else Credentials(parts.username, parts.password)
        return cls(parts.host, parts.port or MQTT_SCHEMES[parts.scheme], parts.scheme, path, credentials=credentials)


class CaseContext:
    """What a case script works with: connections to the target, unique client ids and topics, and the usual
    client steps (connect, subscribe, publish), each bounded by the probe timeout."""

    def __init__(
        self, case: Case, target: Target, *, timeout: float, run_id: str, profile: BrokerProfile = NO_PROFILE
    ) -> None:
        self.case = case
        self.target = target
        self.timeout = timeout
        self.run_id = run_id
        self.protocol = case.protocol
        #: What the operator declared about the broker (``--profile``).
        self.profile = profile
        #: What the broker supports, from the last 5.0 CONNACK with the profile over it; None before one.
        self.capabilities: Capabilities | None = None
        self.connections: list[ProbeConnection] = []
        #: Topics the case left a retained message on; :meth:`clean_up` clears them after the case is judged.
        self.retained: set[str] = set()
        self._loop = asyncio.get_running_loop()
        self._start = self._loop.time()
        self._packet_ids = 0
        self._client_ids = 0

    def clock(self) -> float:
        return self._loop.time() - self._start

    def client_id(self) -> str:
        """A Client Identifier no other run, case or call of this case uses: ``mqa``, the run id (the one in the
        topics, 8 hex digits), 8 hex digits naming the case and 4 counting the case's ids; 23 characters of
        [0-9a-zA-Z], which every server must accept [MQTT-3.1.3-5]. Connections meant to share a session share one
        call's result."""
        self._client_ids += 1
        return "mqa" + _tag(self.run_id) + _tag(self.case.id) + f"{self._client_ids % 0x10000:04x}"

    def topic(self, *levels: str) -> str:
        """A topic of this case alone: ``mqttaudit/<run>/<case>/<levels>``."""
        return "/".join(("mqttaudit", self.run_id, self.case.id, *levels))

    def packet_id(self) -> int:
        self._packet_ids = self._packet_ids % 0xFFFF + 1
        return self._packet_ids

    async def open(self, name: str | None = None, *, auto_ack: bool = True, evidence: bool = True) -> ProbeConnection:
        """A connection over the target's transport (TCP, TLS, WebSocket), nothing of MQTT sent yet. Raises
        :class:`Unreachable` when the target does not accept it. ``evidence=False`` keeps it out of the
        conversations the judge sees (housekeeping)."""
        label = name or f"c{len(self.connections) + 1}"
        stream = await open_target(self.target, self.timeout)
        credentials = self.target.credentials
        connection = ProbeConnection(
            label,
            stream,
            self.clock,
            timeout=self.timeout,
            auto_ack=auto_ack,
            version=self.protocol,
            secret=None if credentials is None else credentials.password,
        )
        if evidence:
            self.connections.append(connection)
        return connection

    async def connect(
        self,
        name: str | None = None,
        *,
        client_id: str | None = None,
        clean_session: bool = True,
        keep_alive: int = 0,
        will: Will | None = None,
        auto_ack: bool = True,
        evidence: bool = True,
        properties: Iterable[Property] = (),
    ) -> ProbeConnection:
        """Opens a connection whose CONNECT the broker accepts; :class:`Inconclusive` when it does not.

        A 5.0 case sends a 5.0 CONNECT (``clean_session`` is Clean Start) with ``properties``; the broker's
        CONNACK sets :attr:`capabilities`, and an Assigned Client Identifier becomes the connection's
        ``client_id`` (``client_id=""`` asks for one)."""
        connection = await self.open(name, auto_ack=auto_ack, evidence=evidence)
        try:
            return await self._log_in(connection, client_id, clean_session, keep_alive, will, properties)
        except BaseException:
            if not evidence:  # no case holds it to end it: ended here, its reader never left to the garbage collector
                with contextlib.suppress(Exception):
                    await connection.finish()
            raise

    async def _log_in(
        self,
        connection: ProbeConnection,
        client_id: str | None,
        clean_session: bool,
        keep_alive: int,
        will: Will | None,
        properties: Iterable[Property],
    ) -> ProbeConnection:
        """The CONNECT of :meth:`connect` on ``connection`` and the CONNACK that accepts it."""
        connection.client_id = client_id if client_id is not None else self.client_id()
        level = self.protocol.level
        username, password = login(self.target)
        if self.protocol is not ProtocolVersion.V5 and properties:
            raise ValueError(f"CONNECT properties need MQTT 5.0; case {self.case.id} speaks {self.protocol.value}")
        await connection.send(
            Connect(
                protocol_level=level,
                client_id=connection.client_id,
                clean_session=clean_session,
                keep_alive=keep_alive,
                will=will,
                properties=properties,
                username=username,
                password=password,
            )
        )
        ack = await connection.wait_type(Connack)
        if not isinstance(ack, Connack):
            raise Inconclusive(f"setup: {connection.missing('CONNACK')} for {connection.name}")
        connection.connack = ack
        if ack.return_code != 0:
            raise Inconclusive(
                f"setup: the broker refused the CONNECT of {connection.name} (code 0x{ack.return_code:02x})"
                if self.protocol is ProtocolVersion.V5
                else f"setup: the broker refused the CONNECT of {connection.name} (code {ack.return_code})"
            )
        if self.protocol is ProtocolVersion.V5:
            self.capabilities = Capabilities.from_connack(ack).merged(self.profile)
            # the client steps keep to what the broker declared it receives [MQTT-3.2.2-15, MQTT-3.3.4-7]
            connection.server_maximum_packet_size = self.capabilities.maximum_packet_size
            connection.send_quota = asyncio.Semaphore(self.capabilities.receive_maximum)
            assigned = props.first(ack.properties, ASSIGNED_CLIENT_IDENTIFIER)
            if isinstance(assigned, str) and not connection.client_id:
                connection.client_id = assigned
        return connection

    def require(self, feature: str, why: str) -> None:
        """Stops the case as :class:`NotApplicable` when the broker (its last 5.0 CONNACK, or before one the
        profile alone) declares ``feature`` unsupported; ``why`` says what the case needs it for. Features are
        those of :data:`mqttaudit.probe.capabilities.FEATURES` (``qos2``, ``retain``, ``shared-subscriptions``)."""
        known = self.capabilities or Capabilities().merged(self.profile)
        refused = known.unsupported(feature)
        if refused is not None:
            raise NotApplicable(f"{why}: {refused}")

    def require_in_flight(self, count: int, why: str) -> None:
        """Stops the case as :class:`NotApplicable` when the broker's Receive Maximum (its last 5.0 CONNACK, or the
        profile) is below ``count``: ``why`` needs that many QoS 1 and 2 PUBLISHes unacknowledged at once, which
        a client keeping to it cannot send [MQTT-3.3.4-7]."""
        known = self.capabilities or Capabilities().merged(self.profile)
        if known.receive_maximum < count:
            by = "the broker's CONNACK declares" if known.source("receive_maximum") == "CONNACK" else "the profile"
            raise NotApplicable(
                f"{why} needs {count} QoS 1 and 2 PUBLISHes unacknowledged at once: {by} Receive Maximum "
                f"{known.receive_maximum}"
            )

    def declared(self, key: str, why: str) -> object:
        """The value the profile declares for ``key`` (``authentication_methods``); :class:`NotApplicable` with
        ``why`` when the profile does not declare it (no CONNACK says it)."""
        value = getattr(self.profile, key)
        if value is None:
            where = f"the profile {self.profile.source}" if self.profile.source else "no --profile"
            raise NotApplicable(f"{why}: {where} declares no {key}")
        return value

    async def subscriber(self, name: str, *filters: tuple[str, int]) -> ProbeConnection:
        """A fresh connection subscribed to ``filters`` (SUBACK received). It subscribes a moment after CONNACK, so
        that what a broker sends before any subscription (amqtt 0.12.1 pushes retained messages right after
        CONNACK) always comes before the SUBSCRIBE, and is judged so, whatever the timing of the run."""
        connection = await self.connect(name)
        await connection.observe(BEFORE_SUBSCRIBE)
        await self.subscribe(connection, *filters)
        return connection

    async def leave(self, *connections: ProbeConnection) -> None:
        """Ends each connection with DISCONNECT, as a well-behaved client does (in 5.0: Reason Code 0x00 left out,
        the same two bytes)."""
        for connection in connections:
            await connection.send(_DISCONNECT)

    async def disconnect(
        self, connection: ProbeConnection, reason_code: int = 0x00, properties: Iterable[Property] | None = None
    ) -> None:
        """Sends a 5.0 DISCONNECT with ``reason_code`` written out (0x04: Disconnect with Will Message), then
        closes the connection, as the sender of a DISCONNECT must [MQTT-3.14.4-2]."""
        await connection.send(Disconnect(reason_code=reason_code, properties=properties))
        await connection.close()

    async def subscribe(
        self,
        connection: ProbeConnection,
        *filters: tuple[str, int] | Subscription,
        properties: Iterable[Property] = (),
    ) -> tuple[int, ...]:
        """Subscribes and returns the SUBACK return codes (5.0: Reason Codes); :class:`Inconclusive` without a
        SUBACK. A filter is ``(topic_filter, qos)`` or a :class:`Subscription` with 5.0 options."""
        packet_id = self.packet_id()
        since = len(connection.received)
        if connection.subscribed_from is None:
            connection.subscribed_from = since
        subscriptions = [
            item if isinstance(item, Subscription) else Subscription(topic_filter=item[0], qos=item[1])
            for item in filters
        ]
        await connection.send(Subscribe(packet_id=packet_id, subscriptions=subscriptions, properties=properties))
        ack = await connection.wait_for(_answers(Suback, packet_id), since=since)
        if not isinstance(ack, Suback):
            raise Inconclusive(f"setup: {connection.missing(f'SUBACK for packet id {packet_id}')} on {connection.name}")
        return ack.return_codes

    async def subscribe_granted(
        self, connection: ProbeConnection, topic_filter: str | Subscription, qos: int | None = None
    ) -> int:
        """Subscribes one filter; :class:`NotApplicable` when the broker refuses it (3.1.1: 0x80; 5.0: a Reason
        Code of 0x80 or more) or grants less than ``qos`` (a :class:`Subscription` carries its own)."""
        wanted = topic_filter if isinstance(topic_filter, Subscription) else (topic_filter, qos or 0)
        asked = wanted.qos if isinstance(wanted, Subscription) else wanted[1]
        shown = wanted.topic_filter if isinstance(wanted, Subscription) else wanted[0]
        (code,) = (await self.subscribe(connection, wanted))[:1] or (0x80,)
        if is_refusal(code, self.protocol):
            raise NotApplicable(f"the broker refused the subscription {shown!r} (SUBACK 0x{code:02x})")
        if code < asked:
            raise NotApplicable(f"the broker granted QoS {code} for a QoS {asked} subscription")
        return code

    async def unsubscribe(
        self, connection: ProbeConnection, *filters: str, properties: Iterable[Property] = ()
    ) -> tuple[int, ...]:
        """Unsubscribes and returns the UNSUBACK Reason Codes (none in 3.1.1); :class:`Inconclusive` without an
        UNSUBACK."""
        packet_id = self.packet_id()
        since = len(connection.received)
        await connection.send(Unsubscribe(packet_id=packet_id, topic_filters=filters, properties=properties))
        ack = await connection.wait_for(_answers(Unsuback, packet_id), since=since)
        if not isinstance(ack, Unsuback):
            missing = connection.missing(f"UNSUBACK for packet id {packet_id}")
            raise Inconclusive(f"setup: {missing} on {connection.name}")
        return ack.reason_codes

    async def publish(
        self,
        connection: ProbeConnection,
        topic: str,
        payload: bytes = b"",
        *,
        qos: int = 0,
        retain: bool = False,
        properties: Iterable[Property] = (),
    ) -> int | None:
        """Publishes and completes the QoS flow (PUBACK, or PUBREC/PUBREL/PUBCOMP); bounded like every wait.

        Returns the Reason Code of the broker's PUBACK or PUBREC (0x00 when a 5.0 broker leaves it out, and in
        3.1.1), None for QoS 0 or when no answer came. A 5.0 PUBREC of 0x80 or more refuses the message: no PUBREL
        follows [MQTT-4.3.3-4]."""
        packet_id = self.packet_id() if qos else None
        if retain and payload:
            self.retained.add(topic)  # noted first: a case stopped while it is sent still clears it
        publish = Publish(
            topic=topic, payload=payload, qos=qos, retain=retain, packet_id=packet_id, properties=properties
        )
        if qos == 0:
            since = len(connection.received)
            await connection.send(publish)
            # PINGRESP answers a later request, so it shows the broker processed the PUBLISH before it.
            await connection.send(Pingreq())
            await connection.wait_type(Pingresp, since=since)
            return None
        await self._take_quota(connection)
        since = len(connection.received)
        await connection.send(publish)
        kind = Puback if qos == 1 else Pubrec
        ack = await connection.wait_for(_answers(kind, packet_id), since=since)
        if not isinstance(ack, Puback | Pubrec):
            return None  # still unacknowledged: its slot of the broker's Receive Maximum stays taken
        code = ack.reason_code or 0x00
        if isinstance(ack, Pubrec) and not is_refusal(code, self.protocol):
            success = 0x00 if self.protocol is ProtocolVersion.V5 else None
            await connection.send(Pubrel(packet_id=packet_id, reason_code=success))
            if not isinstance(await connection.wait_for(_answers(Pubcomp, packet_id), since=since), Pubcomp):
                return code
        if connection.send_quota is not None:
            connection.send_quota.release()  # the flow ended: PUBACK, PUBCOMP, or a refusing PUBREC [4.9]
        return code

    async def _take_quota(self, connection: ProbeConnection) -> None:
        """Waits, at most the timeout, until a QoS 1 or 2 PUBLISH keeps within the broker's Receive Maximum
        [MQTT-3.3.4-7]: a conforming client sends no more unacknowledged ones (4.9); :class:`Inconclusive` when
        none of those in flight is acknowledged in time."""
        quota = connection.send_quota
        if quota is None:
            return
        try:
            await within(quota.acquire(), self.timeout)
        except TimeoutError:
            assert self.capabilities is not None
            raise Inconclusive(
                f"setup: the broker's Receive Maximum {self.capabilities.receive_maximum} was all taken on "
                f"{connection.name} by QoS 1 and 2 PUBLISHes it did not acknowledge within {self.timeout:g} s"
            ) from None

    async def deliveries(self, connection: ProbeConnection, topic: str, *, timeout: float | None = None) -> None:
        """Waits for a PUBLISH on ``topic``, at most until every delivery the judge may expect is due (its answer
        timeout, plus a margin): a delivery that never comes is then seen missing, not cut off by the case's own
        close. The judge decides whether one was due."""
        wait = self.timeout + SETTLE_MARGIN if timeout is None else timeout
        since = connection.subscribed_from or 0  # what came before the first SUBSCRIBE is no delivery of it
        await connection.wait_for(lambda p: isinstance(p, Publish) and p.topic == topic, wait, since=since)

    async def settle(self, *connections: ProbeConnection) -> None:
        """Watches ``connections`` until every delivery the judge may expect or forbid of what was published so
        far is due (its answer timeout, plus a margin): only then can an absent message count as not delivered."""
        await asyncio.gather(*(connection.observe(self.timeout + SETTLE_MARGIN) for connection in connections))

    async def clean_up(self) -> None:
        """Clears the retained messages the case left (a zero-byte retained PUBLISH [MQTT-3.3.1-10]) on a
        connection that is no part of the evidence."""
        if not self.retained:
            return
        connection = await self.connect("cleanup", evidence=False)
        try:
            for topic in sorted(self.retained):
                await self.publish(connection, topic, b"", qos=1, retain=True)
            await connection.send(bytes((0xE0, 0x00)))
        finally:
            await connection.finish()


class Unreachable(Inconclusive):
    """The target did not accept a connection (TCP, TLS or the WebSocket upgrade)."""


async def open_target(target: Target, timeout: float) -> ByteStream:
    """The one way the library's steps open a connection to ``target`` (see
    :func:`~mqttaudit.probe.transport.open_stream`); :class:`Unreachable` with the reason in words."""
    try:
        return await open_stream(target, timeout)
    except (OSError, TimeoutError) as exc:
        raise Unreachable(f"cannot connect to {target.url}: {os_error_text(exc)}") from None
    except ValueError as exc:  # the CA file or the client certificate cannot be used
        raise Unreachable(f"cannot connect to {target.url}: {exc}") from None


def login(target: Target) -> tuple[str | None, bytes | None]:
    """The User Name and Password of a CONNECT from the library's client steps (none for an anonymous target)."""
    credentials = target.credentials
    if credentials is None:
        return None, None
    return credentials.username, credentials.password_bytes()


def os_error_text(exc: OSError | TimeoutError) -> str:
    """``connection refused``, ``connection reset by peer``: the error in words, without Python's wrapping."""
    if isinstance(exc, TransportError):
        return str(exc)
    if isinstance(exc, TimeoutError) and not exc.errno:
        return "no answer to the TCP connect in time"
    if exc.errno is not None and exc.errno in errno.errorcode:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def _tag(text: str) -> str:
    """8 hex digits standing for ``text`` (a run id or a case id) in a Client Identifier: the text itself when it
    is 8 hex digits already (the runner's run ids), so broker logs tie an identifier to its run's topics."""
    if len(text) == 8 and all(c in "0123456789abcdef" for c in text):
        return text
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def is_refusal(code: int, protocol: ProtocolVersion = ProtocolVersion.V3_1_1) -> bool:
    """A SUBACK, PUBACK or PUBREC code that refuses: 3.1.1's 0x80, or any 5.0 Reason Code from 0x80 up."""
    return code >= 0x80 if protocol is ProtocolVersion.V5 else code == 0x80


#: The CONNACK property naming the Client Identifier the server assigned [MQTT-3.2.2-16].
ASSIGNED_CLIENT_IDENTIFIER = 0x12


def _answers(kind: type[Packet], packet_id: int | None) -> Callable[[Packet], bool]:
    return lambda packet: isinstance(packet, kind) and getattr(packet, "packet_id", None) == packet_id


#: Seconds watched past the judge's delivery deadline.
SETTLE_MARGIN = 0.2
#: How many times a case repeats a packet a receiver must answer again each time (a QoS 2 PUBLISH before its
#: PUBREL): a broker may take the first repeat and fail a later one (mosquitto#3602 closes on the second).
REPEATS = 3
#: Seconds a subscriber watches between CONNACK and its SUBSCRIBE (see :meth:`CaseContext.subscriber`).
BEFORE_SUBSCRIBE = 0.1

_DISCONNECT = bytes((0xE0, 0x00))


class CaseRegistry(Mapping[str, Case]):
    """The case library by id. The first lookup loads :mod:`mqttaudit.probe.cases`, so the registry is complete
    whatever was imported before it."""

    def __init__(self, library: str) -> None:
        self._library = library
        self._cases: dict[str, Case] = {}
        self._loaded = False

    def register(self, case: Case) -> None:
        """Adds ``case``; ValueError when its id is taken, it cites another version's ids, or it would judge the
        broker on a statement that cannot fail it (see :func:`unjudgeable`)."""
        if case.id in self._cases:
            raise ValueError(f"duplicate probe case id {case.id!r}")
        cited = (*case.statements, *case.provokes)
        wrong = [rule for rule in cited if getattr(rule, "version", None) != case.protocol.value]
        if wrong:
            raise ValueError(f"probe case {case.id!r} speaks MQTT {case.protocol.value} but cites {wrong!r}")
        problems = unjudgeable(case)
        if problems:
            raise ValueError(f"probe case {case.id!r} cannot judge a broker on what it cites: {'; '.join(problems)}")
        # what the case probes is what it judges: the Client's statements it provokes are checked by nothing here
        registry.refer("probe", case.script.__module__, case.id, case.statements)
        self._cases[case.id] = case

    def mark_timing(self, case_ids: Iterable[str]) -> None:
        """Flags the cases whose verdict hangs on a deadline (see :attr:`Case.timing`)."""
        for case_id in case_ids:
            self._cases[case_id] = replace(self._cases[case_id], timing=True)

    def mark_quiet(self, case_ids: Iterable[str]) -> None:
        """Flags the timing cases whose stimulus is silence (see :attr:`Case.quiet`)."""
        for case_id in case_ids:
            self._cases[case_id] = replace(self._cases[case_id], timing=True, quiet=True)

    def mark_alone(self, case_ids: Iterable[str]) -> None:
        """Flags the cases that leave state other clients see (see :attr:`Case.alone`)."""
        for case_id in case_ids:
            self._cases[case_id] = replace(self._cases[case_id], alone=True)

    def _all(self) -> dict[str, Case]:
        if not self._loaded:
            self._loaded = True  # set first: the library's modules register while it loads
            try:
                importlib.import_module(self._library)
            except BaseException:
                self._loaded = False
                raise
        return self._cases

    def __getitem__(self, case_id: str) -> Case:
        return self._all()[case_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def unjudgeable(case: Case) -> list[str]:
    """Why ``case`` could fail a broker on something that does not bind it, or judge nothing: each statement it
    judges (:attr:`Case.statements`) must be a MUST that binds the Server, for a fail cites a MUST binding the side
    judged (a SHOULD not followed is never a fail, and a statement of the Client's alone is the stimulus's, cited in
    :attr:`Case.provokes`). Empty when the case is sound."""
    problems = []
    for statement in case.statements:
        rule = registry.rule_of(statement, case.protocol.value)
        if rule is None:
            problems.append(f"{statement} is in no catalogue")
        elif rule.level != "MUST":
            problems.append(f"{statement} is a {rule.level}, never a fail")
        elif not rule.binds("server"):
            problems.append(f"{statement} binds the Client only (a rule the stimulus breaks: cite it in provokes)")
    if not case.statements:
        problems.append("it judges no statement binding the Server")
    return problems


#: Every case of the library, by id, in the library's order.
CASES = CaseRegistry("mqttaudit.probe.cases")


def all_cases() -> list[Case]:
    """Every case of the library, in its order."""
    return list(CASES.values())


def case(
    case_id: str,
    statements: Iterable[str],
    title: str,
    *,
    stimulus: str = "",
    expected: str = "",
    timing: bool = False,
    family: str = "",
    protocol: ProtocolVersion = ProtocolVersion.V3_1_1,
    provokes: Iterable[str] = (),
) -> Callable[[Script], Script]:
    """Registers a script as a case of the library; ``protocol`` is the version it speaks (its statements are that
    version's ids): ``statements`` the Server's MUSTs it judges, ``provokes`` the Client's its stimulus breaks."""

    def register(script: Script) -> Script:
        CASES.register(
            Case(
                case_id,
                tuple(statements),
                title,
                script,
                stimulus,
                expected,
                timing,
                family=family,
                protocol=protocol,
                provokes=tuple(provokes),
            )
        )
        return script

    return register


def _is_ipv6(host: str) -> bool:
    """An IPv6 address literal, written in brackets in a URL (RFC 3986 3.2.2); any other host as it is."""
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False
