"""AMQP 0-9-1 topic exchange routing against a live broker, held against the routing oracle.

Every case declares two topic exchanges of its own (auto-delete, named after the run and the case), binds the same
table of binding keys in both, each set of keys to an exclusive server-named queue of its own, consumes from every
queue, and publishes its routing keys to each exchange with publisher confirms. ``TopicTrie(dialect="amqp")``, one
namespace per exchange, says which queues each message is owed to: a delivery it does not owe is a ``leak`` (across
exchanges when the queue is bound to the other exchange only), an owed one that has not arrived when the
observation ends (the timeout after the last publish) is ``missing``, a second copy in one queue a ``duplicate``.

AMQP 0-9-1 numbers no statements: the two rules here name section 3.1.3.3 (the topic exchange type) and are this
project's ids, like those of :mod:`mqttaudit.topics.amqp`; :data:`AMQP_RULES` is their catalogue for the reports.

The client is pika's frame codec over an asyncio stream, so every wait is bounded by the timeout and every frame both
ways is recorded with its bytes, in the evidence format of the MQTT probe, for the same reports. A broker that cannot
be reached, refuses the login or closes the channel makes a case inconclusive with the reason, never a pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote

from ..extras import missing

try:
    from pika import frame as pika_frame  # type: ignore[import-untyped]
    from pika import spec as pika_spec
except ImportError as exc:  # the amqp extra: named with its pip command
    raise missing("amqp", exc) from exc

from ..codec import Direction
from ..judge.verdict import DUPLICATE, LEAK, MISSING, Finding
from ..spec import Catalogue, Rule
from ..topics import AMQP, TopicTrie
from .cancellation import within
from .case import Case, CaseContext, Inconclusive, NotApplicable, Target, Unreachable, open_target
from .runner import FAIL, INCONCLUSIVE, PASS, CaseResult, ProbeRun
from .target_url import parse_target_url
from .transport import ByteStream, Credentials

SUITE = "amqp-routing"
DEFAULT_PORT = 5672
DEFAULT_TLS_PORT = 5671
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
#: The channel every case works on.
CHANNEL = 1
FRAME_MAX = 131072
READ_SIZE = 65536
#: A case (login, some eighty round trips, the publishes, the observation) is cut off after this many timeouts.
CASE_BOUND = 30

TOPIC_MATCH = "AMQP-3.1.3.3-topic-match"
ONE_COPY = "AMQP-3.1.3.3-one-copy-per-queue"
SECTION = "AMQP 0-9-1 section 3.1.3.3"

AMQP_RULES = Catalogue(
    "amqp-0-9-1",
    [
        Rule(
            id=TOPIC_MATCH,
            version="0-9-1",
            section="3.1.3.3",
            level="MUST",
            actor="server",
            observability="conversation",
            summary=(
                "a topic exchange passes a message to every queue bound to it with a pattern that matches the "
                "message's routing key, and to no other queue: not to one whose patterns do not match, not to one "
                "bound to another exchange"
            ),
            origin="derived",
            basis=(
                "AMQP 0-9-1 section 3.1.3.3 (topic exchange type): a message queue binds to the exchange using a "
                "routing pattern P, a publisher sends the exchange a message with the routing key R, and the message "
                "is passed to the message queue if R matches P; a routing key is zero or more words delimited by dots, "
                "and in a pattern '*' matches a single word and '#' zero or more words"
            ),
        ),
        Rule(
            id=ONE_COPY,
            version="0-9-1",
            section="3.1.3.3",
            level="MUST",
            actor="server",
            observability="conversation",
            summary="a queue gets one copy of a message, however many of its bindings to the exchange match it",
            origin="derived",
            basis=(
                "AMQP 0-9-1 section 3.1.3.3: the message is passed to the message queue if R matches P; a queue bound "
                "with two matching patterns is one queue, and a second, unflagged copy in it is a message no "
                "publisher sent"
            ),
        ),
    ],
)

#: The two exchanges of a case, by label; the label is the oracle's namespace and starts every consumer tag.
EXCHANGES = ("x1", "x2")
#: The binding keys every case binds in both exchanges: one exclusive queue per entry and exchange.
BINDINGS: tuple[tuple[str, ...], ...] = (
    ("",),
    ("#",),
    ("*",),
    ("a",),
    ("a.b",),
    ("a.*",),
    ("*.b",),
    ("*.*",),
    ("a.#",),
    ("#.b",),
    ("a..b",),
    ("a.#", "#.b"),
)


# -- the target --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AmqpTarget(Target):
    """``amqp://USER:PASS@HOST:PORT/VHOST``, or ``amqps://`` over TLS (port 5671); the URL it shows in reports
    leaves the password out."""

    scheme: str = "amqp"
    user: str = "guest"
    password: str = field(default="guest", repr=False)
    vhost: str = "/"

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{quote(self.user, safe='')}@{host}:{self.port}/{quote(self.vhost, safe='')}"

    @classmethod
    def parse(cls, url: str) -> AmqpTarget:
        """User and password default to guest, the port to 5672 (amqps: 5671), the vhost to ``/`` (written ``%2F``
        in a URL)."""
        parts = parse_target_url(url)
        if parts.scheme not in ("amqp", "amqps"):
            raise ValueError(f"not an amqp:// target (nor amqps://): {parts.shown!r}")
        user = "guest" if parts.username is None else parts.username
        password = "guest" if parts.password is None else parts.password.reveal()
        return cls(
            parts.host,
            parts.port or (DEFAULT_TLS_PORT if parts.scheme == "amqps" else DEFAULT_PORT),
            scheme=parts.scheme,
            credentials=None if parts.username is None else Credentials(user, parts.password),
            user=user,
            password=password,
            vhost=unquote(parts.path[1:]) or "/",
        )


# -- the cases ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoutingCase:
    """One routing case: the keys it publishes to both exchanges, and the :class:`Case` the reports show."""

    name: str
    routing_keys: tuple[str, ...]
    case: Case


async def _amqp_only(context: CaseContext) -> None:
    raise NotApplicable(f"{context.case.id} is an AMQP 0-9-1 case; run_amqp_routing runs it")


#: The AMQP routing cases by id; the MQTT case library (``mqttaudit.probe.case.CASES``) does not hold them.
AMQP_CASES: dict[str, RoutingCase] = {}


def _routing_case(name: str, routing_keys: tuple[str, ...], title: str) -> None:
    case_id = f"{SUITE}/{name}"
    keys = ", ".join(map(repr, routing_keys))
    bindings = ", ".join(" + ".join(map(repr, keys_)) for keys_ in BINDINGS)
    case = Case(
        case_id,
        (TOPIC_MATCH, ONE_COPY),
        title,
        _amqp_only,
        stimulus=(
            f"routing keys {keys} published, with publisher confirms, to each of two topic exchanges that each have "
            f"{len(BINDINGS)} exclusive queues bound, with the keys {bindings}"
        ),
        expected=(
            "each message reaches exactly the queues bound to the exchange it was published to with a key that "
            "matches its routing key, once each"
        ),
    )
    AMQP_CASES[case_id] = RoutingCase(name, routing_keys, case)


_routing_case(
    "empty-key",
    ("",),
    "A message with the empty routing key reaches the queues bound with '' or '#' to its own exchange, and no other",
)
_routing_case(
    "one-word", ("a", "b"), "One-word routing keys reach the queues bound with the word, '*' or a '#' pattern"
)
_routing_case("two-words", ("a.b", "x.b"), "Two-word routing keys reach exact, '*' and '#' bindings word for word")
_routing_case("three-words", ("a.b.c", "a.x.b"), "'#' takes the words between and after; '*' takes exactly one")
_routing_case(
    "empty-words",
    (".", "a.", ".b", "a..b"),
    "Empty words are words: '.' is two of them, 'a..b' three, and '*' matches an empty one",
)


# -- the recorded connection -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One method the server sent (with its content, for Basic.Deliver and Basic.Return) and its event number."""

    method: Any
    channel: int
    body: bytes
    event: int
    time: float


@dataclass
class _Content:
    """A content-bearing method whose header and body frames are still arriving."""

    method: Any
    channel: int
    raw: bytes
    offset: int
    size: int | None = None
    body: bytes = b""


class AmqpConnection:
    """One recorded AMQP 0-9-1 connection. Every frame both ways becomes an evidence event (a content method with
    its header and body frames is one event); times are seconds on the case's clock."""

    def __init__(
        self,
        name: str,
        stream: ByteStream,
        clock: Callable[[], float],
        *,
        timeout: float,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        self.received: list[Command] = []
        #: Why the case can go no further on this connection: the broker closed the channel or the connection, the
        #: connection failed, or the broker sent bytes that are no frame.
        self.ended: str | None = None
        self._stream = stream
        self._sent = 0
        self._got = 0
        self._buffer = bytearray()
        self._content: _Content | None = None
        #: The TCP connection is over (or unreadable): nothing more can be sent or received on it.
        self._gone = False
        self._closing = False
        self._close_recorded = False
        self._changed = asyncio.Condition()
        self._reading = asyncio.create_task(self._read(), name=f"amqp-read-{name}")

    @classmethod
    async def connect(
        cls, target: AmqpTarget, name: str, clock: Callable[[], float], *, timeout: float
    ) -> AmqpConnection:
        """A connection (TCP, or TLS for amqps://), nothing sent yet; :class:`Unreachable` when the target does not
        accept it."""
        return cls(name, await open_target(target, timeout), clock, timeout=timeout)

    # -- the client's steps ------------------------------------------------------------------------------------

    async def handshake(self, target: AmqpTarget) -> None:
        """Protocol header, PLAIN login, tuning without heartbeats, the vhost, and channel 1 opened."""
        await self._write(PROTOCOL_HEADER, "protocol header AMQP 0-9-1")
        start = await self.expect(pika_spec.Connection.Start, since=0)
        mechanisms = _text(start.mechanisms).split()
        if "PLAIN" not in mechanisms:
            raise Inconclusive(f"setup: the broker offers no PLAIN login (mechanisms: {', '.join(mechanisms)})")
        since = len(self.received)
        login = pika_spec.Connection.StartOk(
            # Asks for a Connection.Close with the reason, rather than a bare close, when the login fails.
            client_properties={"product": "mqttaudit", "capabilities": {"authentication_failure_close": True}},
            mechanism="PLAIN",
            response=f"\0{target.user}\0{target.password}",
            locale="en_US",
        )
        await self.send(login, channel=0, secret=target.password)
        tune = await self.expect(pika_spec.Connection.Tune, since=since)
        await self.send(
            pika_spec.Connection.TuneOk(
                channel_max=tune.channel_max, frame_max=min(tune.frame_max or FRAME_MAX, FRAME_MAX), heartbeat=0
            ),
            channel=0,
        )
        await self.call(pika_spec.Connection.Open(virtual_host=target.vhost), pika_spec.Connection.OpenOk, channel=0)
        await self.call(pika_spec.Channel.Open(), pika_spec.Channel.OpenOk)

    async def call(self, method: Any, reply: Any, *, channel: int = CHANNEL) -> Any:
        """Sends a synchronous method and returns the server's reply; :class:`Inconclusive` (with the broker's
        reply code when it closed the channel or the connection) when no reply comes within the timeout."""
        since = len(self.received)
        await self.send(method, channel=channel)
        return await self.expect(reply, since=since)

    async def expect(self, reply: Any, *, since: int) -> Any:
        """The first ``reply`` from index ``since`` of ``received``; :class:`Inconclusive` when the connection
        ends or the timeout passes first."""
        found = await self.wait_for(lambda command: isinstance(command.method, reply), since=since)
        if found is None:
            raise Inconclusive(f"setup: {self.ended or f'no {reply.NAME} within {self.timeout:g} s'}")
        return found.method

    async def send(self, method: Any, *, channel: int = CHANNEL, secret: str = "") -> int:
        """Sends one method frame; returns its event number. A ``secret`` (the password) is masked in the record."""
        raw = pika_frame.Method(channel, method).marshal()
        return await self._write(raw, describe(method, secret=secret), secret=secret)

    async def publish(self, exchange: str, routing_key: str, body: bytes) -> int:
        """Basic.Publish with its header and body frames, recorded as one event; returns its event number."""
        method = pika_spec.Basic.Publish(exchange=exchange, routing_key=routing_key)
        raw = b"".join(
            (
                pika_frame.Method(CHANNEL, method).marshal(),
                pika_frame.Header(CHANNEL, len(body), pika_spec.BasicProperties()).marshal(),
                pika_frame.Body(CHANNEL, body).marshal(),
            )
        )
        return await self._write(raw, f"{describe(method)} body {body!r}")

    async def wait_for(self, test: Callable[[Command], bool], *, since: int = 0) -> Command | None:
        """The first command from index ``since`` that passes ``test``; None once the case can go no further on
        this connection or the timeout passed."""

        def found() -> Command | None:
            return next((command for command in self.received[since:] if test(command)), None)

        await self.wait_until(lambda: found() is not None or self.ended is not None)
        return found()

    async def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Waits until ``condition()`` holds (checked on every frame received), the TCP connection is over, or the
        timeout passes; returns whether it holds."""

        async def until() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: condition() or self._gone)

        with contextlib.suppress(TimeoutError):
            await within(until(), self.timeout if timeout is None else timeout)
        return condition()

    async def close(self) -> None:
        """Connection.Close and a bounded wait for Connection.CloseOk (unless the connection is over), then FIN;
        the reader stops."""
        self._closing = True
        if not self._gone:
            since = len(self.received)
            close = pika_spec.Connection.Close(reply_code=200, reply_text="done", class_id=0, method_id=0)
            with contextlib.suppress(Inconclusive):
                await self.send(close, channel=0)
                await self.wait_until(lambda: any(_is(c, pika_spec.Connection.CloseOk) for c in self.received[since:]))
        self._record_close("client", False)
        self._stream.close()
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            await within(self._stream.wait_closed(), self.timeout)
        if not self._reading.done():
            self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading

    def evidence(self) -> dict[str, Any]:
        return {"name": self.name, "client_id": "", "events": self.events}

    # -- internals ---------------------------------------------------------------------------------------------

    async def _write(self, raw: bytes, description: str, *, secret: str = "") -> int:
        if self._gone:
            raise Inconclusive(f"setup: {self.ended or 'the connection is closed'}")
        event = self._record("client", self._sent, raw, description, secret=secret)
        self._sent += len(raw)
        try:
            self._stream.write(raw)
            await within(self._stream.drain(), self.timeout)
        except (ConnectionError, OSError, TimeoutError) as exc:
            await self._end(f"the connection failed while sending: {exc or type(exc).__name__}", gone=True)
        return event

    def _record(self, side: str, offset: int, raw: bytes, description: str | None, *, secret: str = "") -> int:
        octets = raw.hex(" ").split()
        if secret:
            hidden = secret.encode()
            at = raw.rfind(b"\0" + hidden) + 1  # PLAIN's response ends with NUL and the password
            if at > 0:
                octets[at : at + len(hidden)] = ["**"] * len(hidden)
        self.events.append(
            {
                "t": round(self.clock(), 6),
                "from": side,
                "offset": offset,
                "hex": " ".join(octets),
                "packet": description,
                "violations": [],
            }
        )
        return len(self.events) - 1

    def _record_close(self, by: str | None, abrupt: bool) -> None:
        """The end of the connection, once: whoever closed first."""
        if not self._close_recorded:
            self._close_recorded = True
            self.events.append({"t": round(self.clock(), 6), "closed_by": by, "how": "rst" if abrupt else "fin"})

    async def _read(self) -> None:
        try:
            while True:
                data = await self._stream.read(READ_SIZE)
                if not data:
                    self._record_close("server", False)
                    await self._end("the broker closed the connection", gone=True)
                    return
                if not await self._receive(data):
                    return
        except (ConnectionError, OSError) as exc:
            self._record_close("server" if isinstance(exc, ConnectionResetError) else None, True)
            await self._end(f"the connection failed: {exc or type(exc).__name__}", gone=True)

    async def _receive(self, data: bytes) -> bool:
        """Records the frames in ``data``; False once the bytes are no longer AMQP frames (reading stops)."""
        self._buffer += data
        readable = True
        while self._buffer:
            try:
                used, frame = pika_frame.decode_frame(bytes(self._buffer))
            except Exception as exc:  # pika raises several kinds for bytes that are no AMQP frame
                self._record("server", self._got, bytes(self._buffer), None)
                why = f"the broker sent bytes that are no AMQP 0-9-1 frame ({exc or type(exc).__name__})"
                await self._end(why, gone=True)
                readable = False
                break
            if frame is None:
                break
            raw = bytes(self._buffer[:used])
            del self._buffer[:used]
            await self._frame(frame, raw, self._got)
            self._got += used
        async with self._changed:
            self._changed.notify_all()
        return readable

    async def _frame(self, frame: Any, raw: bytes, offset: int) -> None:
        if isinstance(frame, pika_frame.ProtocolHeader):
            self._record("server", offset, raw, f"protocol header AMQP {frame.major}-{frame.minor}-{frame.revision}")
            await self._end("the broker answered with its own protocol header: it does not speak AMQP 0-9-1")
        elif isinstance(frame, pika_frame.Method):
            if pika_spec.has_content(frame.method.INDEX):
                self._content = _Content(frame.method, frame.channel_number, raw, offset)
            else:
                self._command(frame.method, frame.channel_number, raw, offset)
                await self._server_closed(frame.method, frame.channel_number)
        elif isinstance(frame, (pika_frame.Header, pika_frame.Body)) and self._content is not None:
            content = self._content
            content.raw += raw
            if isinstance(frame, pika_frame.Header):
                content.size = frame.body_size
            else:
                content.body += frame.fragment
            if content.size is not None and len(content.body) >= content.size:
                self._content = None
                description = f"{describe(content.method)} body {content.body!r}"
                self._command(content.method, content.channel, content.raw, content.offset, content.body, description)
        elif isinstance(frame, pika_frame.Heartbeat):
            self._record("server", offset, raw, "Heartbeat")
        else:
            self._record("server", offset, raw, f"{type(frame).__name__} frame outside any content")

    def _command(
        self, method: Any, channel: int, raw: bytes, offset: int, body: bytes = b"", description: str | None = None
    ) -> None:
        event = self._record("server", offset, raw, description or describe(method))
        self.received.append(Command(method, channel, body, event, self.events[event]["t"]))

    async def _server_closed(self, method: Any, channel: int) -> None:
        """Answers the broker's Connection.Close or Channel.Close; either ends what the case can do here."""
        if isinstance(method, pika_spec.Connection.Close):
            await self._end(f"the broker closed the connection: {method.reply_code} {_text(method.reply_text)}")
            with contextlib.suppress(Inconclusive):
                await self.send(pika_spec.Connection.CloseOk(), channel=0)
        elif isinstance(method, pika_spec.Channel.Close):
            await self._end(f"the broker closed the channel: {method.reply_code} {_text(method.reply_text)}")
            with contextlib.suppress(Inconclusive):
                await self.send(pika_spec.Channel.CloseOk(), channel=channel)

    async def _end(self, why: str, *, gone: bool = False) -> None:
        if self.ended is None and not (gone and self._closing):
            self.ended = why
        self._gone = self._gone or gone
        async with self._changed:
            self._changed.notify_all()


def _is(command: Command, kind: type) -> bool:
    return isinstance(command.method, kind)


#: Attributes left out of a method's description: always the same, or (client and server properties) long.
_QUIET = frozenset({"ticket", "client_properties", "server_properties", "locales", "capabilities", "insist"})
#: The server properties a description keeps: which broker answered.
_SERVER = ("product", "version")


def describe(method: Any, *, secret: str = "") -> str:
    """``Queue.Bind(queue='amq.gen-...', exchange='x', routing_key='a.*')``: every attribute that says something
    (False flags, empty tables and the ever-zero ticket left out); a ``secret`` in PLAIN's response is withheld."""
    parts = []
    for name, value in vars(method).items():
        if name.startswith("_") or name in _QUIET or value is None or value is False or value == {}:
            continue
        shown = _text(value) if isinstance(value, bytes) else value
        if secret and name == "response":  # PLAIN: NUL, user, NUL, password
            shown = str(shown).rpartition("\0" + secret)[0] + "\0<password withheld>"
        parts.append(f"{name}={shown!r}")
    server = getattr(method, "server_properties", None) or {}
    parts += [f"{key}={_text(server[key])!r}" for key in _SERVER if key in server]
    return f"{method.NAME}({', '.join(parts)})"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# -- one case ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoundQueue:
    """A queue of the case: the exchange it is bound to (by label), its binding keys, and its server name."""

    label: str
    exchange: str
    keys: tuple[str, ...]
    name: str

    def bindings(self) -> str:
        return " and ".join(map(repr, self.keys))


@dataclass(frozen=True)
class Published:
    """One message the case published: its exchange (label and name), routing key, body, delivery tag (for the
    confirm), event number, and the queues the oracle owes it to."""

    exchange: str
    exchange_name: str
    routing_key: str
    body: bytes
    tag: int
    event: int
    owed: frozenset[str]


@dataclass
class Observation:
    """What one case set up, sent and saw; :func:`judge_routing` turns it into findings."""

    exchanges: dict[str, str] = field(default_factory=dict)
    queues: dict[str, BoundQueue] = field(default_factory=dict)
    published: list[Published] = field(default_factory=list)
    received: list[Command] = field(default_factory=list)
    #: Case-clock time the observation ended at, once every message was published and watched for the timeout.
    watched_until: float | None = None


def queue_label(exchange: str, keys: Sequence[str]) -> str:
    """The consumer tag of a queue, which every Basic.Deliver to it repeats: ``x1 ''``, ``x2 'a.#' '#.b'``."""
    return " ".join((exchange, *map(repr, keys)))


async def _drive(
    connection: AmqpConnection,
    target: AmqpTarget,
    routing: RoutingCase,
    run_id: str,
    seen: Observation,
    oracle: TopicTrie[str],
) -> None:
    timeout = connection.timeout
    await connection.handshake(target)
    await connection.call(pika_spec.Confirm.Select(), pika_spec.Confirm.SelectOk)
    for label in EXCHANGES:
        name = seen.exchanges[label] = f"mqttaudit.{run_id}.{routing.name}.{label}"
        declare = pika_spec.Exchange.Declare(exchange=name, type="topic", auto_delete=True)
        await connection.call(declare, pika_spec.Exchange.DeclareOk)
    for label in EXCHANGES:
        for keys in BINDINGS:
            tag = queue_label(label, keys)
            declared = await connection.call(
                pika_spec.Queue.Declare(queue="", exclusive=True), pika_spec.Queue.DeclareOk
            )
            queue = BoundQueue(tag, label, keys, _text(declared.queue))
            for key in keys:
                bind = pika_spec.Queue.Bind(queue=queue.name, exchange=seen.exchanges[label], routing_key=key)
                await connection.call(bind, pika_spec.Queue.BindOk)
                oracle.add(label, key, tag)
            consume = pika_spec.Basic.Consume(queue=queue.name, consumer_tag=tag, no_ack=True)
            await connection.call(consume, pika_spec.Basic.ConsumeOk)
            seen.queues[tag] = queue
    for routing_key in routing.routing_keys:
        for label in EXCHANGES:
            body = f"{routing.name} {label} {routing_key!r}".encode()
            event = await connection.publish(seen.exchanges[label], routing_key, body)
            message = Published(
                label,
                seen.exchanges[label],
                routing_key,
                body,
                len(seen.published) + 1,  # delivery tags count the channel's publishes from 1 in confirm mode
                event,
                frozenset(oracle.match(label, routing_key)),
            )
            seen.published.append(message)
            # One message at a time, so what the broker does with each shows right after it in the evidence.
            await connection.wait_until(functools.partial(_settled, message, connection))
            _go_on(connection)
    # Later copies, leaks and duplicates, have the timeout to show.
    await connection.wait_until(lambda: _stopped(connection), timeout)
    _go_on(connection)
    seen.watched_until = connection.clock()


def _stopped(connection: AmqpConnection) -> bool:
    return connection.ended is not None


def _go_on(connection: AmqpConnection) -> None:
    if connection.ended is not None:
        raise Inconclusive(connection.ended)


def _settled(message: Published, connection: AmqpConnection) -> bool:
    """The message is confirmed and every queue it is owed to got it, or the case can go no further."""
    received = connection.received
    if connection.ended is not None:
        return True
    if confirmation(message, received) is None:
        return False
    reached = {_text(c.method.consumer_tag) for c in received if _is_delivery(c) and c.body == message.body}
    return message.owed <= reached


def confirmation(message: Published, received: Sequence[Command]) -> Command | None:
    """The Basic.Ack or Basic.Nack that settles the message's delivery tag (``multiple`` settles every tag up to
    its own)."""
    for command in received:
        method = command.method
        if isinstance(method, (pika_spec.Basic.Ack, pika_spec.Basic.Nack)) and (
            method.delivery_tag == message.tag or (method.multiple and message.tag <= method.delivery_tag)
        ):
            return command
    return None


def _is_delivery(command: Command) -> bool:
    return isinstance(command.method, pika_spec.Basic.Deliver)


@dataclass(frozen=True)
class RoutingVerdict:
    findings: list[Finding]
    #: Verdict per rule.
    statements: dict[str, str]
    #: Why a rule was not decided.
    undecided: list[str]


def judge_routing(seen: Observation, conversation: str, timeout: float) -> RoutingVerdict:
    """Every delivery against the oracle's owed queues (leaks and duplicates), then every confirmed message's owed
    queues against its deliveries (missing ones), once the observation ran its course."""
    by_body = {message.body: message for message in seen.published}
    findings: list[Finding] = []
    first_copy: dict[tuple[bytes, str], Command] = {}
    copies: Counter[tuple[bytes, str]] = Counter()
    for command in filter(_is_delivery, seen.received):
        deliver = command.method
        tag = _text(deliver.consumer_tag)
        message = by_body.get(command.body)
        queue = seen.queues.get(tag)
        where = f"queue {tag!r}" if queue is None else f"queue {tag!r} ({queue.name})"
        if message is None:
            detail = (
                f"Basic.Deliver (event {command.event}) brings {where} a message this case never published: body "
                f"{command.body!r}, exchange {_text(deliver.exchange)!r}, routing key {_text(deliver.routing_key)!r}"
            )
            expected = "a queue gets only messages published to the exchanges it is bound to"
            findings.append(_finding(TOPIC_MATCH, command, detail, expected, LEAK, conversation))
            continue
        if tag not in message.owed:
            detail = _leak(message, command, queue, where)
            findings.append(_finding(TOPIC_MATCH, command, detail, _owed(message), LEAK, conversation))
            continue
        key = (message.body, tag)
        copies[key] += 1
        first_copy.setdefault(key, command)
        if copies[key] > 1:
            detail = (
                f"the message published to {message.exchange_name!r} with routing key {message.routing_key!r} "
                f"(event {message.event}) reaches {where} again (copy {copies[key]}, event {command.event}; the first "
                f"came at event {first_copy[key].event}); {SECTION}"
            )
            expected = "one copy per queue, however many of its bindings match"
            findings.append(_finding(ONE_COPY, command, detail, expected, DUPLICATE, conversation))
    undecided: list[str] = []
    unconfirmed = [m for m in seen.published if not _acked(m, seen.received)]
    if unconfirmed:
        undecided.append(
            f"{TOPIC_MATCH}: the broker did not confirm (Basic.Ack within {timeout:g} s) the messages of events "
            f"{', '.join(str(m.event) for m in unconfirmed)}, so what they are owed cannot be held against it"
        )
    if seen.watched_until is None:
        undecided.append("the case stopped before every message was published and watched for the timeout")
    else:
        for message in seen.published:
            if message in unconfirmed:
                continue
            reached = {key[1] for key in copies if key[0] == message.body}
            findings.extend(
                _missing(message, seen.queues[tag], seen.received, seen.watched_until, conversation)
                for tag in sorted(message.owed - reached)
            )
    statements = {}
    for rule in (TOPIC_MATCH, ONE_COPY):
        if any(f.rule == rule for f in findings):
            statements[rule] = FAIL
        elif seen.watched_until is not None and (rule == ONE_COPY or not unconfirmed):
            statements[rule] = PASS
        else:
            statements[rule] = INCONCLUSIVE
    return RoutingVerdict(findings, statements, undecided)


def _acked(message: Published, received: Sequence[Command]) -> bool:
    settled = confirmation(message, received)
    return settled is not None and isinstance(settled.method, pika_spec.Basic.Ack)


def _leak(message: Published, command: Command, queue: BoundQueue | None, where: str) -> str:
    sent = (
        f"the message published to {message.exchange_name!r} with routing key {message.routing_key!r} "
        f"(event {message.event}) reaches {where} (event {command.event})"
    )
    if queue is None:
        return f"{sent}, a consumer this case never started; {SECTION}"
    if queue.exchange != message.exchange:
        return (
            f"{sent}, which is bound only to the other exchange, with {queue.bindings()}: a binding of one exchange "
            f"routed a message published to another; {SECTION}"
        )
    return f"{sent}, bound to that exchange with {queue.bindings()}, which does not match; {SECTION}"


def _owed(message: Published) -> str:
    owed = ", ".join(repr(tag) for tag in sorted(message.owed)) or "none"
    return f"it reaches only the queues bound to {message.exchange_name!r} with a matching key: {owed}"


def _missing(
    message: Published, queue: BoundQueue, received: Sequence[Command], until: float, conversation: str
) -> Finding:
    acked = confirmation(message, received)
    confirmed = "" if acked is None else f", confirmed by the broker at event {acked.event}"
    detail = (
        f"the message published to {message.exchange_name!r} with routing key {message.routing_key!r} "
        f"(event {message.event}{confirmed}) never reaches queue {queue.label!r} ({queue.name}), bound to that "
        f"exchange with {queue.bindings()}, which matches it; watched until {until:.3f} s; {SECTION}"
    )
    return Finding(
        TOPIC_MATCH,
        Direction.FROM_SERVER,
        until,
        message.event,
        detail,
        "it reaches every queue bound to its exchange with a matching key",
        conversation,
        MISSING,
    )


def _finding(rule: str, command: Command, detail: str, expected: str, kind: str, conversation: str) -> Finding:
    return Finding(rule, Direction.FROM_SERVER, command.time, command.event, detail, expected, conversation, kind)


@dataclass
class AmqpCaseResult(CaseResult):
    """A case result whose evidence also holds the routing table: queues, messages, and where each went."""

    routing: dict[str, Any] = field(default_factory=dict)

    def evidence(self) -> dict[str, Any]:
        return {**super().evidence(), "routing": self.routing}


async def run_routing_case(
    routing: RoutingCase, target: AmqpTarget, *, timeout: float, run_id: str
) -> tuple[AmqpCaseResult, bool]:
    """Runs one case; returns its result and whether the target refused the TCP connection."""
    loop = asyncio.get_running_loop()
    origin = loop.time()

    def clock() -> float:
        return loop.time() - origin

    seen = Observation()
    oracle: TopicTrie[str] = TopicTrie(dialect=AMQP)
    connection: AmqpConnection | None = None
    stopped: str | None = None
    unreachable = False
    try:
        connection = await AmqpConnection.connect(target, "c1", clock, timeout=timeout)
        await within(_drive(connection, target, routing, run_id, seen, oracle), timeout * CASE_BOUND)
    except Unreachable as exc:
        stopped, unreachable = str(exc), True
    except Inconclusive as exc:
        stopped = str(exc)
    except TimeoutError:
        stopped = f"the case did not finish within {timeout * CASE_BOUND:g} s"
    finally:
        if connection is not None:
            await connection.close()
    if connection is not None:
        seen.received = list(connection.received)
    verdict = judge_routing(seen, "c1", timeout)
    result = _decide(routing.case, verdict, stopped)
    result.connections = [] if connection is None else [connection.evidence()]
    result.routing = _routing_table(seen)
    result.assessed = sorted(rule for rule, v in verdict.statements.items() if v != INCONCLUSIVE)
    result.duration = clock()
    return result, unreachable


def _decide(case: Case, verdict: RoutingVerdict, stopped: str | None) -> AmqpCaseResult:
    """``fail`` on any finding, even in a case that stopped early; else the reason it stopped; else ``pass`` when
    every rule was decided."""
    if verdict.findings:
        return AmqpCaseResult(case, FAIL, _reason(verdict.findings), verdict.statements, verdict.findings)
    if stopped is not None:
        return AmqpCaseResult(case, INCONCLUSIVE, stopped, verdict.statements)
    if all(v == PASS for v in verdict.statements.values()):
        return AmqpCaseResult(case, PASS, "", verdict.statements)
    return AmqpCaseResult(case, INCONCLUSIVE, "; ".join(verdict.undecided), verdict.statements)


def _reason(findings: Sequence[Finding]) -> str:
    """``2 leak, 1 missing: <the first finding>; and 2 more``."""
    kinds = Counter(finding.kind for finding in findings)
    counts = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    more = f"; and {len(findings) - 1} more" if len(findings) > 1 else ""
    return f"{counts}: {findings[0].rule}: {findings[0].detail}{more}"


def _routing_table(seen: Observation) -> dict[str, Any]:
    delivered: dict[bytes, list[str]] = {}
    for command in filter(_is_delivery, seen.received):
        delivered.setdefault(command.body, []).append(_text(command.method.consumer_tag))
    return {
        "exchanges": seen.exchanges,
        "queues": [
            {"label": q.label, "exchange": q.exchange, "binding_keys": list(q.keys), "name": q.name}
            for q in seen.queues.values()
        ],
        "messages": [
            {
                "exchange": m.exchange,
                "routing_key": m.routing_key,
                "body": _text(m.body),
                "event": m.event,
                "confirmed": _acked(m, seen.received),
                "owed": sorted(m.owed),
                "delivered": sorted(delivered.get(m.body, [])),
            }
            for m in seen.published
        ],
        "watched_until": seen.watched_until,
    }


# -- a run -------------------------------------------------------------------------------------------------------


async def check_login(target: AmqpTarget, *, timeout: float) -> str | None:
    """None when the login, the vhost and a channel open within ``timeout`` each, else why not."""
    loop = asyncio.get_running_loop()
    origin = loop.time()
    try:
        connection = await AmqpConnection.connect(target, "login", lambda: loop.time() - origin, timeout=timeout)
    except Unreachable as exc:
        return str(exc)
    try:
        await connection.handshake(target)
    except Inconclusive as exc:
        return str(exc)
    finally:
        await connection.close()
    return None


async def probe_amqp_routing(
    target: AmqpTarget,
    cases: Sequence[RoutingCase] | None = None,
    *,
    timeout: float = 2.0,
    progress: Callable[[CaseResult], None] | None = None,
    run_id: str | None = None,
) -> ProbeRun:
    """Runs the routing cases (all of them by default) concurrently, one connection each; results keep the order
    of ``cases``. A target that refuses every connection is reported as down. The exchanges are named
    ``mqttaudit.<run_id>.<case>.x1`` and ``.x2``; ``run_id`` is random unless given."""
    run_id = run_id or secrets.token_hex(4)  # exchanges of concurrent runs against one broker never meet
    started = datetime.now(UTC).isoformat(timespec="seconds")
    clock0 = time.monotonic()
    selected = list(AMQP_CASES.values()) if cases is None else list(cases)

    async def one(routing: RoutingCase) -> tuple[AmqpCaseResult, bool]:
        outcome = await run_routing_case(routing, target, timeout=timeout, run_id=run_id)
        if progress is not None:
            progress(outcome[0])
        return outcome

    outcomes = await asyncio.gather(*(one(routing) for routing in selected))
    results: list[CaseResult] = [result for result, _ in outcomes]
    down = outcomes[0][0].reason if outcomes and all(unreachable for _, unreachable in outcomes) else None
    return ProbeRun(target, started, results, time.monotonic() - clock0, down)


def run_amqp_routing(
    url: str | AmqpTarget,
    timeout: float = 2.0,
    *,
    progress: Callable[[CaseResult], None] | None = None,
    run_id: str | None = None,
) -> ProbeRun:
    """The routing suite against ``url`` (``amqp://USER:PASS@HOST:PORT/VHOST``); raises ValueError for a URL that
    is not one. Write its reports with ``write_probe_reports(run, out_dir, AMQP_RULES)``."""
    target = url if isinstance(url, AmqpTarget) else AmqpTarget.parse(url)
    return asyncio.run(probe_amqp_routing(target, timeout=timeout, progress=progress, run_id=run_id))
