"""Conversations for judge tests, written compactly and framed by the real codec.

    talk = Talk().client(CONNECT).server(CONNACK_OK).client(subscribe(1, "a")).quiet(after=10)
    judgement = judge(talk.events)

Packets are encoded with ``codec.encode(p, validate=False)`` (so invalid ones can be written), ``bytes`` and hex
strings are sent as they are; each step's bytes go through the ``StreamDecoder`` of its direction, which turns
them into the ``Sent`` events of that step (none while a packet is incomplete). Every step advances the clock by
``STEP`` seconds unless ``at`` says when it happens.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import Closed, Event, JudgeConfig, Quiet, Sent
from mqttaudit.judge.conversation import DEFAULT_CONFIG, ConversationJudge
from mqttaudit.judge.transcript import Transcript
from mqttaudit.judge.violations import in_text_frame

C = codec.Direction.FROM_CLIENT
S = codec.Direction.FROM_SERVER
STEP = 0.01

Item = codec.Packet | bytes | str
#: A byte step: (time, sender, bytes, sent in a WebSocket text frame).
Step = tuple[float, codec.Direction, bytes, bool]


def wire(item: Item, version: str = "3.1.1") -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return bytes.fromhex(item)
    return codec.encode(item, validate=False, version=version)


class TextRanges:
    """Per direction, the stream ranges sent in WebSocket text frames: a frame that starts in one is marked."""

    def __init__(self) -> None:
        self._fed = {C: 0, S: 0}
        self._ranges: dict[codec.Direction, list[tuple[int, int]]] = {C: [], S: []}

    def fed(self, sender: codec.Direction, length: int, text: bool) -> None:
        start = self._fed[sender]
        self._fed[sender] = start + length
        if text and length:
            self._ranges[sender].append((start, start + length))

    def mark(self, sender: codec.Direction, frames: list[codec.Frame]) -> list[codec.Frame]:
        ranges = self._ranges[sender]
        return [
            in_text_frame(frame) if any(start <= frame.offset < end for start, end in ranges) else frame
            for frame in frames
        ]


@dataclass
class Talk:
    events: list[Event] = field(default_factory=list)
    #: What happened, in order, for re-framing tests: byte steps (time, sender, bytes), Quiet and Closed.
    script: list[Step | Quiet | Closed] = field(default_factory=list)
    now: float = 0.0
    #: The version packets are written and read in ("5" for an MQTT 5.0 conversation).
    version: str = "3.1.1"
    _decoders: dict[codec.Direction, codec.StreamDecoder] = field(default_factory=dict)
    _texts: TextRanges = field(default_factory=TextRanges)

    def __post_init__(self) -> None:
        if not self._decoders:
            self._decoders = {side: codec.StreamDecoder(side, version=self.version) for side in (C, S)}

    def _clock(self, at: float | None) -> float:
        self.now = self.now + STEP if at is None else at
        return self.now

    def send(self, sender: codec.Direction, *items: Item, at: float | None = None, text: bool = False) -> Talk:
        """``text``: the bytes went in a WebSocket text frame, so the frames that start in them carry
        [MQTT-6.0.0-1] (as the probe and the capture's WebSocket layer mark them)."""
        time = self._clock(at)
        data = b"".join(wire(item, self.version) for item in items)
        self.script.append((time, sender, data, text))
        self._texts.fed(sender, len(data), text)
        frames = self._texts.mark(sender, self._decoders[sender].feed(data))
        self.events += [Sent(time, sender, frame) for frame in frames]
        return self

    def client(self, *items: Item, at: float | None = None, text: bool = False) -> Talk:
        return self.send(C, *items, at=at, text=text)

    def server(self, *items: Item, at: float | None = None, text: bool = False) -> Talk:
        return self.send(S, *items, at=at, text=text)

    def quiet(self, after: float | None = None, *, at: float | None = None) -> Talk:
        """Observation stops ``after`` seconds from now (or ``at``) with the connection open."""
        quiet = Quiet(self._clock(self.now + after if after is not None else at))
        self.events.append(quiet)
        self.script.append(quiet)
        return self

    def closed(
        self, by: codec.Direction | None, after: float | None = None, *, at: float | None = None, abrupt: bool = False
    ) -> Talk:
        """The connection closes ``after`` seconds from now (or ``at``; one step by default)."""
        closed = Closed(self._clock(self.now + after if after is not None else at), by, abrupt)
        self.events += _close(self._decoders, closed, self._texts)
        self.script.append(closed)
        return self

    def wait(self, seconds: float) -> Talk:
        """Lets time pass without an event: the next step happens ``seconds`` later."""
        self.now += max(seconds - STEP, 0.0)
        return self


def _close(
    decoders: dict[codec.Direction, codec.StreamDecoder], closed: Closed, texts: TextRanges | None = None
) -> list[Event]:
    """The frames cut off by the close, then the close."""
    texts = texts or TextRanges()
    events: list[Event] = [
        Sent(closed.time, sender, frame) for sender in (C, S) for frame in texts.mark(sender, decoders[sender].close())
    ]
    return [*events, closed]


def reframe(script: Sequence[Step | Quiet | Closed], splits: Sequence[Sequence[int]]) -> list[Event]:
    """The same script fed to fresh decoders in other pieces: byte step ``n`` is cut at the offsets ``splits[n]``
    (taken modulo its length) and fed piece by piece, at its own time."""
    decoders = {C: codec.StreamDecoder(C), S: codec.StreamDecoder(S)}
    texts = TextRanges()
    events: list[Event] = []
    byte_steps = 0
    for step in script:
        if isinstance(step, Closed):
            events += _close(decoders, step, texts)
            continue
        if isinstance(step, Quiet):
            events.append(step)
            continue
        time, sender, data, text = step
        texts.fed(sender, len(data), text)
        cuts = splits[byte_steps % len(splits)] if splits else ()
        byte_steps += 1
        points = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
        for start, end in itertools.pairwise(points):
            frames = texts.mark(sender, decoders[sender].feed(data[start:end]))
            events += [Sent(time, sender, frame) for frame in frames]
    return events


# Packets used again and again --------------------------------------------------------------------------------

CONNECT = codec.Connect(client_id="judge-test", keep_alive=0)
CONNACK_OK = codec.Connack()
PINGREQ = codec.Pingreq()
PINGRESP = codec.Pingresp()
DISCONNECT = codec.Disconnect()


def subscribe(packet_id: int, *filters: str | tuple[str, int]) -> codec.Subscribe:
    subscriptions = [
        codec.Subscription(topic_filter=f, qos=0)
        if isinstance(f, str)
        else codec.Subscription(topic_filter=f[0], qos=f[1])
        for f in filters
    ]
    return codec.Subscribe(packet_id=packet_id, subscriptions=subscriptions)


def suback(packet_id: int, *codes: int) -> codec.Suback:
    return codec.Suback(packet_id=packet_id, return_codes=codes or (0,))


def unsubscribe(packet_id: int, *filters: str) -> codec.Unsubscribe:
    return codec.Unsubscribe(packet_id=packet_id, topic_filters=filters)


def publish(
    topic: str, payload: bytes = b"x", qos: int = 0, packet_id: int | None = None, **flags: bool
) -> codec.Publish:
    if qos and packet_id is None:
        packet_id = 1
    return codec.Publish(topic=topic, payload=payload, qos=qos, packet_id=packet_id, **flags)


def connected(
    client_id: str = "judge-test",
    *,
    clean_session: bool = True,
    keep_alive: int = 0,
    will: codec.Will | None = None,
    session_present: bool = False,
    at: float | None = None,
) -> Talk:
    """A client that connected and was accepted."""
    connect = codec.Connect(client_id=client_id, clean_session=clean_session, keep_alive=keep_alive, will=will)
    talk = Talk()
    if at is not None:
        talk.now = at - STEP
    return talk.client(connect).server(codec.Connack(session_present=session_present))


def acknowledge(talk: Talk, message: codec.Publish) -> Talk:
    """The server's side of the flow of a client PUBLISH."""
    packet_id = message.packet_id or 0
    if message.qos == 1:
        talk.server(codec.Puback(packet_id=packet_id))
    elif message.qos == 2:
        talk.server(codec.Pubrec(packet_id=packet_id)).client(codec.Pubrel(packet_id=packet_id))
        talk.server(codec.Pubcomp(packet_id=packet_id))
    return talk


def publisher(*messages: codec.Publish, client_id: str = "pub", at: float = 1.0) -> Talk:
    """Connects at ``at``, publishes (each acknowledged), makes sure the server processed it all (PINGREQ) and
    leaves with DISCONNECT."""
    talk = connected(client_id, at=at)
    for message in messages:
        acknowledge(talk.client(message), message)
    return talk.client(PINGREQ).server(PINGRESP).client(DISCONNECT).closed(C)


def publish5(
    topic: str = "t", payload: bytes = b"m", *, qos: int = 0, retain: bool = False, pid: int = 1, **properties: object
) -> codec.Publish:
    """An MQTT 5.0 PUBLISH with ``properties`` by keyword (``message_expiry_interval=2``, ``topic_alias=1``...)."""
    return codec.Publish(
        topic=topic,
        payload=payload,
        qos=qos,
        retain=retain,
        packet_id=pid if qos else None,
        properties=make(**properties),  # type: ignore[arg-type]
    )


def transcribe(talks: Mapping[str, Talk], config: JudgeConfig = DEFAULT_CONFIG) -> dict[str, Transcript]:
    """Each conversation of ``talks`` judged alone, by its name: the transcripts the broker model is built from."""
    transcripts = {}
    for name, talk in talks.items():
        judge = ConversationJudge(config, conversation=name)
        for event in talk.events:
            judge.feed(event)
        judge.finish()
        transcripts[name] = judge.transcript
    return transcripts
