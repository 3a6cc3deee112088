"""Probe cases: the statements a case targets and the stimulus it sends, written as a short async script.

A script only drives the conversation; it never decides the verdict. The judge does, from the recorded events,
so the same rules judge a live probe and a capture. A script may stop early with :class:`NotApplicable` (the
broker declared a feature unsupported) or :class:`Inconclusive` (the setup the case needs did not happen).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import importlib
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from ..codec import (
    Connack,
    Connect,
    Packet,
    Pingreq,
    Pingresp,
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
from .connection import ProbeConnection

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
    #: The verdict hangs on a deadline or a broker-side timer (Keep Alive, a Will after a drop): a failure is
    #: confirmed by running the case again, alone, before it is reported.
    timing: bool = False
    #: The case leaves state other clients can see while it runs (a retained message): some brokers send every
    #: retained message to every client (amqtt 0.12.1), so it runs with no other case beside it.
    alone: bool = False
    #: The family of shapes the case belongs to (``malformed/wildcard-position``); by default the first part of
    #: its id (``retain``), see :attr:`family_name`.
    family: str = ""

    @property
    def family_name(self) -> str:
        return self.family or self.id.split("/", 1)[0]

    @property
    def runs_alone(self) -> bool:
        """Run after the concurrent cases, one at a time (see :attr:`alone`)."""
        return self.alone


@dataclass(frozen=True)
class Target:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @classmethod
    def parse(cls, url: str) -> Target:
        """``mqtt://HOST[:PORT]`` (or ``HOST[:PORT]``); the port defaults to 1883."""
        rest = url.removeprefix("mqtt://").rstrip("/")
        if "://" in rest or not rest:
            raise ValueError(f"not an mqtt:// target: {url!r}")
        if "@" in rest:  # the prober logs in anonymously; a user name and password here are refused, never shown
            raise ValueError("an mqtt:// target takes no user name or password: mqtt://HOST[:PORT]")
        host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "1883")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad port in {url!r}")
        return cls(host, int(port))


class CaseContext:
    """What a case script works with: connections to the target, unique client ids and topics, and the usual
    client steps (connect, subscribe, publish), each bounded by the probe timeout."""

    def __init__(self, case: Case, target: Target, *, timeout: float, run_id: str) -> None:
        self.case = case
        self.target = target
        self.timeout = timeout
        self.run_id = run_id
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
        """A TCP connection, nothing sent yet. Raises :class:`Inconclusive` when the target does not accept it.
        ``evidence=False`` keeps it out of the conversations the judge sees (housekeeping)."""
        label = name or f"c{len(self.connections) + 1}"
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.target.host, self.target.port), self.timeout
            )
        except (OSError, TimeoutError) as exc:
            raise Unreachable(f"cannot connect to {self.target.url}: {os_error_text(exc)}") from exc
        connection = ProbeConnection(label, reader, writer, self.clock, timeout=self.timeout, auto_ack=auto_ack)
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
    ) -> ProbeConnection:
        """Opens a connection whose CONNECT the broker accepts; :class:`Inconclusive` when it does not."""
        connection = await self.open(name, auto_ack=auto_ack, evidence=evidence)
        connection.client_id = client_id if client_id is not None else self.client_id()
        await connection.send(
            Connect(client_id=connection.client_id, clean_session=clean_session, keep_alive=keep_alive, will=will)
        )
        ack = await connection.wait_type(Connack)
        if not isinstance(ack, Connack):
            raise Inconclusive(f"setup: {connection.missing('CONNACK')} for {connection.name}")
        if ack.return_code != 0:
            raise Inconclusive(f"setup: the broker refused the CONNECT of {connection.name} (code {ack.return_code})")
        return connection

    async def subscriber(self, name: str, *filters: tuple[str, int]) -> ProbeConnection:
        """A fresh connection subscribed to ``filters`` (SUBACK received). It subscribes a moment after CONNACK, so
        that what a broker sends before any subscription (amqtt 0.12.1 pushes retained messages right after
        CONNACK) always comes before the SUBSCRIBE, and is judged so, whatever the timing of the run."""
        connection = await self.connect(name)
        await connection.observe(BEFORE_SUBSCRIBE)
        await self.subscribe(connection, *filters)
        return connection

    async def leave(self, *connections: ProbeConnection) -> None:
        """Ends each connection with DISCONNECT, as a well-behaved client does."""
        for connection in connections:
            await connection.send(_DISCONNECT)

    async def subscribe(self, connection: ProbeConnection, *filters: tuple[str, int]) -> tuple[int, ...]:
        """Subscribes and returns the SUBACK return codes; :class:`Inconclusive` without a SUBACK."""
        packet_id = self.packet_id()
        since = len(connection.received)
        if connection.subscribed_from is None:
            connection.subscribed_from = since
        subscriptions = [Subscription(topic_filter=topic_filter, qos=qos) for topic_filter, qos in filters]
        await connection.send(Subscribe(packet_id=packet_id, subscriptions=subscriptions))
        ack = await connection.wait_for(_answers(Suback, packet_id), since=since)
        if not isinstance(ack, Suback):
            raise Inconclusive(f"setup: {connection.missing(f'SUBACK for packet id {packet_id}')} on {connection.name}")
        return ack.return_codes

    async def subscribe_granted(self, connection: ProbeConnection, topic_filter: str, qos: int) -> int:
        """Subscribes one filter; :class:`NotApplicable` when the broker refuses it or grants less than ``qos``."""
        (code,) = (await self.subscribe(connection, (topic_filter, qos)))[:1] or (0x80,)
        if code == 0x80:
            raise NotApplicable(f"the broker refused the subscription {topic_filter!r} (SUBACK 0x80)")
        if code < qos:
            raise NotApplicable(f"the broker granted QoS {code} for a QoS {qos} subscription")
        return code

    async def unsubscribe(self, connection: ProbeConnection, *filters: str) -> None:
        packet_id = self.packet_id()
        since = len(connection.received)
        await connection.send(Unsubscribe(packet_id=packet_id, topic_filters=filters))
        if not isinstance(await connection.wait_for(_answers(Unsuback, packet_id), since=since), Unsuback):
            missing = connection.missing(f"UNSUBACK for packet id {packet_id}")
            raise Inconclusive(f"setup: {missing} on {connection.name}")

    async def publish(
        self,
        connection: ProbeConnection,
        topic: str,
        payload: bytes = b"",
        *,
        qos: int = 0,
        retain: bool = False,
    ) -> None:
        """Publishes and completes the QoS flow (PUBACK, or PUBREC/PUBREL/PUBCOMP); bounded like every wait."""
        packet_id = self.packet_id() if qos else None
        if retain and payload:
            self.retained.add(topic)
        since = len(connection.received)
        await connection.send(Publish(topic=topic, payload=payload, qos=qos, retain=retain, packet_id=packet_id))
        if qos == 0:
            # PINGRESP answers a later request, so it shows the broker processed the PUBLISH before it.
            await connection.send(Pingreq())
            await connection.wait_type(Pingresp, since=since)
        elif qos == 1:
            await connection.wait_for(_answers(Puback, packet_id), since=since)
        elif qos == 2 and isinstance(await connection.wait_for(_answers(Pubrec, packet_id), since=since), Pubrec):
            await connection.send(Pubrel(packet_id=packet_id))
            await connection.wait_for(_answers(Pubcomp, packet_id), since=since)

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
    """The target did not accept a TCP connection."""


def os_error_text(exc: OSError | TimeoutError) -> str:
    """``connection refused``, ``connection reset by peer``: the error in words, without Python's wrapping."""
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


def _answers(kind: type[Packet], packet_id: int | None) -> Callable[[Packet], bool]:
    return lambda packet: isinstance(packet, kind) and getattr(packet, "packet_id", None) == packet_id


#: Seconds watched past the judge's delivery deadline.
SETTLE_MARGIN = 0.2
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
        if case.id in self._cases:
            raise ValueError(f"duplicate probe case id {case.id!r}")
        self._cases[case.id] = case

    def mark_timing(self, case_ids: Iterable[str]) -> None:
        """Flags the cases whose verdict hangs on a deadline (see :attr:`Case.timing`)."""
        for case_id in case_ids:
            self._cases[case_id] = replace(self._cases[case_id], timing=True)

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
) -> Callable[[Script], Script]:
    """Registers a script as a case of the library."""

    def register(script: Script) -> Script:
        CASES.register(Case(case_id, tuple(statements), title, script, stimulus, expected, timing, family=family))
        return script

    return register
