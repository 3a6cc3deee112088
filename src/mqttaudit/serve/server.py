"""The reference broker on the network: an asyncio server that runs :class:`~.broker.Broker`, records each client
connection as judge events (every byte both ways, framed by the codec) and judges it live with the same judge as
the probe and the audit.

Each connection's findings on the client's side are the point: what the client broke. Findings on the server's
side are defects of this broker (they make the run an internal error). Every buffer a client can grow is bounded:
the decoder by the largest packet accepted, the evidence by :data:`EVIDENCE_EVENTS`, queues by :class:`Limits`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from ..codec import Connect, Direction, Frame, Packet, ProtocolVersion, StreamDecoder, encode
from ..codec import rules as codec_rules
from ..judge import ConversationJudge, Finding, JudgeConfig, Judgement
from ..judge.events import Closed, Event, Quiet, Sent, password_masked
from ..judge.rules import ANSWERED_BY_CONNACK
from ..judge.sender_violations import frame_finding
from ..judge.violations import in_text_frame
from ..probe.connection import client_frames
from ..probe.runner import events_to_dicts, owed
from .broker import V3, V5, Broker, Limits, Link
from .resumption import ClientFlows, Owed
from .scenarios import Scenario
from .websocket import ServerWebSocket

CLIENT: Final = Direction.FROM_CLIENT
SERVER: Final = Direction.FROM_SERVER
#: The judge's own timing, from an instance: the compiled judge keeps no class-level defaults.
_JUDGE_DEFAULTS: Final = JudgeConfig()
READ_SIZE: Final = 65536
#: Events kept per connection as evidence; the judge sees them all.
EVIDENCE_EVENTS: Final = 400
#: Seconds a connection may stay open after the broker closed its side before the socket is dropped.
CLOSE_WAIT: Final = 1.0


@dataclass(frozen=True)
class Listener:
    """Where the broker listens: TCP, with TLS when ``tls`` is given, with WebSocket when ``websocket``."""

    host: str = "127.0.0.1"
    port: int = 1883
    tls: ssl.SSLContext | None = None
    websocket: bool = False

    @property
    def scheme(self) -> str:
        if self.websocket:
            return "wss" if self.tls is not None else "ws"
        return "mqtts" if self.tls is not None else "mqtt"


@dataclass
class ServedClient:
    """One client connection and its verdict."""

    name: str
    peer: str
    opened: float
    client_id: str = ""
    version: str = ""
    closed: float | None = None
    #: How it ended: "client closed", "client reset", "server closed", "server stopped".
    ending: str = ""
    judgement: Judgement | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    events_omitted: int = 0
    #: The traceback of a defect of mqttaudit serve that ended the connection.
    crash: str | None = None
    #: The client's malformed packets: the codec's violations of its own frames (the judge judges the reaction).
    malformed: list[Finding] = field(default_factory=list)
    #: The broker's own malformed packets (a hostile scenario's; otherwise defects of serve).
    sent_malformed: list[Finding] = field(default_factory=list)
    #: What the client did on this connection about the flows its previous one left open (:mod:`.resumption`).
    resumed: list[Finding] = field(default_factory=list)
    #: The scenario that served it, and the server statements the scenario breaks on purpose.
    scenario: str = ""
    provoked: frozenset[str] = frozenset()

    @property
    def client_findings(self) -> list[Finding]:
        judged = [] if self.judgement is None else [f for f in self.judgement.findings if f.side is CLIENT]
        return one_per_act(sorted([*self.malformed, *self.resumed, *judged], key=lambda f: (f.event, f.rule)))

    @property
    def server_findings(self) -> list[Finding]:
        """Findings against this broker that a scenario did not provoke: defects of mqttaudit serve."""
        judged = [] if self.judgement is None else self.judgement.findings
        return [f for f in (*self.sent_malformed, *judged) if f.side is SERVER and f.rule not in self.provoked]

    @property
    def reaction(self) -> str:
        """What the client did after a hostile scenario's stimulus (its first provoked finding): "closed" (FIN),
        "reset" (RST: a crash looks like this), "carried on" (sent packets after it and did not close), "hung"
        (neither, until the connection ended otherwise); "" when nothing was provoked."""
        provoked = self.provoked_findings
        if not provoked:
            return ""
        stimulus = min(finding.event for finding in provoked)
        if stimulus >= len(self.events) - 1 and self.events_omitted:
            return "not known (past the events kept as evidence)"
        after = self.events[stimulus + 1 :]
        sent = any(event.get("from") == "client" for event in after)
        for event in after:
            if event.get("closed_by") == "client":
                return "reset" if event.get("how") == "rst" else ("carried on, then closed" if sent else "closed")
        return "carried on" if sent else "hung"

    @property
    def provoked_findings(self) -> list[Finding]:
        """The broker's deliberate breaches of a hostile scenario, as the judge saw them: the stimulus."""
        judged = [] if self.judgement is None else self.judgement.findings
        return [f for f in (*self.sent_malformed, *judged) if f.side is SERVER and f.rule in self.provoked]


@dataclass
class ServeRun:
    """What a serve session amounts to: every client connection judged."""

    listen: str
    started: str
    levels: tuple[int, ...]
    limits: Limits
    clients: list[ServedClient] = field(default_factory=list)
    duration: float = 0.0
    #: The scenario's name, "" when none.
    scenario: str = ""


class _Connection:
    """One client connection: bytes in and out, recorded as judge events and judged as they happen."""

    def __init__(
        self, server: ServeServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, websocket: bool
    ) -> None:
        self.server = server
        self.websocket = ServerWebSocket() if websocket else None
        self.reader, self.writer = reader, writer
        peername = writer.get_extra_info("peername")
        name = f"client-{next(server.numbers)}"
        now = server.now()
        self.served = ServedClient(name=name, peer=_address(peername), opened=now)
        self.link: Link = server.broker.open(name, now)
        limits = server.broker.limits
        self.decoder = StreamDecoder(CLIENT, version=None, max_packet_size=limits.maximum_packet_size_3_1_1)
        self.encoder_view = StreamDecoder(SERVER, peer=self.decoder, max_packet_size=2**28 + 5)
        self.judge = ConversationJudge(server.judge_config, conversation=name)
        self.count = 0
        self.flows: ClientFlows | None = None
        scenario = server.broker.scenario
        if scenario is not None:
            self.served.scenario, self.served.provoked = scenario.name, frozenset(map(str, scenario.provoked))
        self.begun: int | None = None  # a packet recorded while still arriving (its first byte broke a rule)
        self.ended = False
        self.closing = False

    def record(self, event: Event) -> None:
        if self.ended:
            return
        index, self.count = self.count, self.count + 1
        if isinstance(event, Sent) and event.frame.packet is not None:
            self._follow(index, event.time, event.sender, event.frame.packet)
        # The broker's refusals of a version it does not speak are in another version's form: not held to this one.
        if isinstance(event, Sent) and (event.sender is CLIENT or self.link.connected):
            v5 = self.decoder.version is ProtocolVersion.V5
            found = frame_finding(
                event.frame, event.sender, v5=v5, time=event.time, event=index, conversation=self.served.name
            )
            if found is not None:
                mine = event.sender is SERVER
                (self.served.sent_malformed if mine else self.served.malformed).append(found)
                self.server.report(self.served, found)
        if len(self.served.events) < EVIDENCE_EVENTS:
            self.served.events.extend(events_to_dicts([event]))
        else:
            self.served.events_omitted += 1
        for finding in self.judge.feed(event):
            self.server.report(self.served, finding)

    def _follow(self, index: int, time: float, sender: Direction, packet: Packet) -> None:
        """Feeds the client's flows across connections (created at its CONNECT)."""
        if self.flows is None and sender is CLIENT and isinstance(packet, Connect):
            client_id = packet.client_id
            leftovers = self.server.leftovers
            self.flows = ClientFlows(
                self.served.name,
                packet.protocol_level == V5,
                (lambda: leftovers.pop(client_id, [])) if client_id else list,
                self.server.judge_config.answer_timeout,
            )
        if self.flows is not None:
            self.flows.on(index, time, sender, packet)

    async def run(self) -> None:
        try:
            while not self.closing:
                try:
                    data = await self.reader.read(READ_SIZE)
                except (ConnectionError, OSError):
                    self.finish(Closed(self.server.now(), CLIENT, abrupt=True), "client reset")
                    return
                if not data:
                    self.finish(Closed(self.server.now(), CLIENT, abrupt=False), "client closed")
                    return
                if self.websocket is None:
                    self.receive(data)
                    continue
                got = self.websocket.receive(data)
                if got.reply:
                    self.writer.write(got.reply)
                for piece, text in got.pieces:
                    self.receive(piece, text=text)
                if got.closed:
                    ending = "client closed" if got.trouble is None else f"client closed: {got.trouble}"
                    self.finish(Closed(self.server.now(), CLIENT, abrupt=got.trouble is not None), ending)
                    return
        except Exception:  # a defect of this broker: reported, and the connection closed; the others go on
            self.served.crash = traceback.format_exc()
            self.finish(None, "closed: internal error of mqttaudit serve")
        finally:
            with contextlib.suppress(Exception):
                self.writer.close()

    def receive(self, data: bytes, *, text: bool = False) -> None:
        """Bytes from the client (``text``: carried in a WebSocket text frame, which breaks MQTT-6.0.0-1)."""
        broker = self.server.broker
        frames, self.begun = client_frames(self.decoder, data, self.begun)
        frames = [password_masked(frame) for frame in frames]  # nothing keeps or writes a client's password
        if text:
            frames = [in_text_frame(frame) for frame in frames]
        for frame in frames:
            now = self.server.now()  # per frame: the answer to the one before was stamped after the bytes came
            self.record(Sent(now, CLIENT, frame))
            if self.link.closing:
                continue  # bytes after the broker decided to close: recorded, not acted on
            if _malformed(frame):
                broker.malformed(self.link, now, too_large=frame.packet is None and _oversized(frame))
            elif frame.packet is not None:
                if self.link.packet_limit is not None and frame.length > self.link.packet_limit:
                    broker.malformed(self.link, now, too_large=True)  # [MQTT-3.2.2-15] the client's duty
                else:
                    if isinstance(frame.packet, Connect):
                        self.served.client_id = frame.packet.client_id
                        self.served.version = "5.0" if frame.packet.protocol_level == V5 else "3.1.1"
                    broker.receive(self.link, frame.packet, now)
            self.server.flush()

    def transmit(self, items: Iterable[Packet | bytes | str]) -> None:
        for item in items:
            if isinstance(item, str):  # CLOSE
                self.close_by_server()
                return
            data = item if isinstance(item, bytes) else encode(item, version=V5 if self.link.v5 else V3, validate=False)
            now = self.server.now()
            for frame in self.encoder_view.feed(data):
                self.record(Sent(now, SERVER, frame))
            if self.websocket is not None:
                data = self.websocket.wrap(data)
            if not self.writer.is_closing():
                self.writer.write(data)

    def close_by_server(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.finish(Closed(self.server.now(), SERVER, abrupt=False), "server closed")
        with contextlib.suppress(Exception):
            if self.websocket is not None and not self.writer.is_closing():
                self.writer.write(self.websocket.close())
            self.writer.close()

    def finish(self, closed: Closed | None, ending: str) -> None:
        """Ends the conversation: the broker learns the link is gone, the judge gives its verdict."""
        if self.ended:
            return
        now = self.server.now()
        self.server.broker.lost(self.link, now)
        self.record(closed if closed is not None else Quiet(now))
        self.ended = True
        if self.flows is not None:
            left = self.flows.finish(now)
            self.served.resumed = self.flows.findings
            if self.served.client_id and self.flows.connack is not None:
                self.server.leftovers[self.served.client_id] = left
        self.served.closed = now
        self.served.ending = ending
        self.served.judgement = self.judge.finish()
        self.server.done(self)
        self.server.flush()


class ServeServer:
    """Runs the broker on ``host:port`` (0: a free port) until :meth:`stop`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 1883,
        *,
        levels: Iterable[int] = (V3, V5),
        limits: Limits | None = None,
        tls: ssl.SSLContext | None = None,
        websocket: bool = False,
        listeners: Sequence[Listener] = (),
        scenario: Scenario | None = None,
        answer_timeout: float = _JUDGE_DEFAULTS.answer_timeout,
        close_grace: float = _JUDGE_DEFAULTS.close_grace,
        on_finding: Callable[[ServedClient, Finding], None] | None = None,
        on_client: Callable[[ServedClient], None] | None = None,
    ) -> None:
        self.listeners = [Listener(host, port, tls, websocket), *listeners]
        self.levels = tuple(sorted(set(levels)))
        self.broker = Broker(limits, self.levels, scenario)
        #: ClientId -> the flows its last connection left open (:mod:`.resumption`).
        self.leftovers: dict[str, list[Owed]] = {}
        self.judge_config = JudgeConfig(
            supported_protocol_levels=frozenset(self.levels), answer_timeout=answer_timeout, close_grace=close_grace
        )
        self.numbers = itertools.count(1)
        self._origin = time.monotonic()
        self._connections: dict[int, _Connection] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._ticker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_finding, self._on_client = on_finding, on_client
        self.run = ServeRun(
            scenario="" if scenario is None else scenario.name,
            listen="",
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            levels=self.levels,
            limits=self.broker.limits,
        )

    def now(self) -> float:
        return time.monotonic() - self._origin

    @property
    def open_connections(self) -> int:
        """Client connections not ended yet."""
        return len(self._connections)

    @property
    def host(self) -> str:
        return self.listeners[0].host

    @property
    def port(self) -> int:
        return self.listeners[0].port

    @property
    def url(self) -> str:
        return self.urls[0]

    @property
    def urls(self) -> list[str]:
        """The URL of each listener (its port once listening, when 0 was asked for)."""
        return [
            f"{each.scheme}://{each.host}:{each.port}" + ("/mqtt" if each.websocket else "") for each in self.listeners
        ]

    async def start(self) -> None:
        for index, listener in enumerate(self.listeners):

            async def accept(
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ws: bool = listener.websocket
            ) -> None:
                await self._accept(reader, writer, ws)

            server = await asyncio.start_server(accept, listener.host, listener.port, ssl=listener.tls)
            self._servers.append(server)
            self.listeners[index] = replace(listener, port=server.sockets[0].getsockname()[1])
        self.run.listen = " ".join(self.urls)
        self._ticker = asyncio.create_task(self._tick())

    async def stop(self) -> ServeRun:
        """Stops listening, closes every connection (5.0: DISCONNECT 0x8B) and judges what is left."""
        self._stopping = True
        for server in self._servers:
            server.close()
        self.broker.shut_down(self.now())
        self.flush()
        for connection in list(self._connections.values()):
            connection.finish(None, "server stopped")
            with contextlib.suppress(Exception):
                connection.writer.close()
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        if self._tasks:  # their sockets are closed: each reader ends at once
            _done, pending = await asyncio.wait(list(self._tasks), timeout=CLOSE_WAIT)
            for task in pending:
                task.cancel()
        self.run.duration = self.now()
        return self.run

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, websocket: bool) -> None:
        connection = _Connection(self, reader, writer, websocket)
        self._connections[id(connection.link)] = connection
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await connection.run()
        finally:
            if task is not None:
                self._tasks.discard(task)
            connection.finish(None, "server stopped")

    async def _tick(self) -> None:
        while not self._stopping:  # a flag: wait_for may swallow a cancel that meets a wake-up (Python 3.11)
            deadline = self.broker.next_deadline()
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - self.now()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self.broker.tick(self.now())
            self.flush()

    def flush(self) -> None:
        for link, items in self.broker.take_outboxes():
            connection = self._connections.get(id(link))
            if connection is not None and not connection.ended:
                connection.transmit(items)
        self._wake.set()

    def report(self, client: ServedClient, finding: Finding) -> None:
        if self._on_finding is not None:
            self._on_finding(client, finding)

    def done(self, connection: _Connection) -> None:
        self._connections.pop(id(connection.link), None)
        self.run.clients.append(connection.served)
        if self._on_client is not None:
            self._on_client(connection.served)


def one_per_act(findings: Iterable[Finding]) -> list[Finding]:
    """One act is one finding: the findings after the first of an act (a packet of the connection; an answer or
    close owed is no act) join it as the statements it also breaks."""
    out: list[Finding] = []
    first_of: dict[tuple[str, int], int] = {}
    for finding in findings:
        key = None if owed(finding) else (finding.conversation, finding.event)
        at = None if key is None else first_of.get(key)
        if at is None:
            if key is not None:
                first_of[key] = len(out)
            out.append(finding)
            continue
        lead = out[at]
        more = tuple(rule for rule in finding.rules if rule not in lead.rules)
        out[at] = replace(lead, also=(*lead.also, *more))
    return out


def _address(peername: object) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        return f"{peername[0]}:{peername[1]}"
    return str(peername)


def _malformed(frame: Frame) -> bool:
    """Whether the broker closes on ``frame``: bytes that frame no packet, or any MUST-level violation but those
    of a CONNECT that CONNACK answers (an unsupported Protocol Level, an empty ClientId without a clean session)."""
    return frame.packet is None or any(
        not codec_rules.is_advisory(v.rule) and v.rule_key not in ANSWERED_BY_CONNACK for v in frame.violations
    )


def _oversized(frame: Frame) -> bool:
    return any(v.rule_key == codec_rules.SIZE_LIMIT for v in frame.violations)
