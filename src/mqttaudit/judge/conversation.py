"""The conversation judge: one connection's events in, findings out, whoever recorded the events.

Feed events in time order; each call returns the findings that event decided. ``finish`` settles what is left
(not assessable) and returns the :class:`Judgement`. Nothing here reads a clock, a socket or a file.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from mqttaudit.codec import Connect, Direction

from . import reasons
from .config import JudgeConfig
from .connection import Connection
from .context import Context, Seen
from .deliveries import Deliveries
from .events import Closed, Event, Lost, Quiet, Sent
from .keepalive import KeepAlive
from .limits import Limits
from .obligations import Obligations
from .pairing import Pairing
from .sides import peer, side_name
from .subscriptions import Subscriptions
from .transcript import Transcript
from .verdict import Finding, Judgement, Ledger
from .violations import Offences

CLIENT: Final = Direction.FROM_CLIENT
DEFAULT_CONFIG: Final = JudgeConfig()


class ConversationJudge:
    """Judges the events of one MQTT 3.1.1 connection, both directions, incrementally."""

    def __init__(
        self, config: JudgeConfig = DEFAULT_CONFIG, *, conversation: str = "", mid_stream: bool = False
    ) -> None:
        """``mid_stream``: observation began inside the connection (a capture without its SYN), so its CONNECT,
        the protocol version and the packets already in flight are unknown; nothing is judged on them."""
        ledger = Ledger(conversation, config.opening_version)
        self._ctx = ctx = Context(config, ledger, Obligations(ledger), Transcript())
        self._offences = Offences(ctx)
        self._connection = Connection(ctx, self._offences, mid_stream=mid_stream)
        subscriptions = Subscriptions()
        # The limits resolve Topic Aliases for pairing and deliveries (and the transcript: see _on_sent).
        self._limits = Limits(ctx, self._connection, self._offences)
        self._pairing = Pairing(ctx, self._offences, self._connection, subscriptions, topics=self._limits)
        self._deliveries = Deliveries(ctx, self._connection, subscriptions, topics=self._limits)
        self._keep_alive = KeepAlive(ctx, self._connection, self._offences)
        self._events = 0
        self._now: float | None = None
        self._closed: Closed | None = None
        self._quiet: Quiet | None = None
        self._judgement: Judgement | None = None

    @property
    def transcript(self) -> Transcript:
        """What the conversation did so far, for the broker model."""
        return self._ctx.transcript

    @property
    def limits(self) -> Limits:
        """The MQTT 5.0 limits of the connection (Topic Aliases resolved: :meth:`Limits.topic_of`)."""
        return self._limits

    def feed(self, event: Event) -> list[Finding]:
        """Judges one event; returns the findings it decided."""
        if self._judgement is not None or self._closed is not None:
            raise ValueError("the conversation is over: no event may follow Closed or finish()")
        if self._now is not None and event.time < self._now:
            raise ValueError(f"event {self._events} at {event.time} goes back in time (last was {self._now})")
        index, self._events, self._now = self._events, self._events + 1, event.time
        findings = self._ctx.ledger.findings
        before = len(findings)
        if isinstance(event, Sent):
            self._ctx.obligations.advance(event.time, index, quiet=False)
            if event.acked is False:
                self._unreceived(event, index)
            self._on_sent(Seen.of(index, event.time, event.sender, event.frame, received=event.acked is not False))
        elif isinstance(event, Quiet):
            self._quiet = event
            self._keep_alive.silence(event.time, index)
            self._ctx.obligations.advance(event.time, index, quiet=True)
        elif isinstance(event, Lost):
            self._on_lost(event, index)
        else:
            self._closed = event
            self._ctx.obligations.close(event, index)
            self._end(event.time, index)
        return findings[before:]

    def finish(self) -> Judgement:
        """Ends observation: whatever is still open is not assessable. Returns the judgement (idempotent)."""
        if self._judgement is None:
            if self._closed is None and self._now is not None:
                self._ctx.obligations.finish(self._now, self._quiet)
                self._end(self._now, self._events - 1)
            self._judgement = self._ctx.ledger.judgement()
        return self._judgement

    def _unreceived(self, event: Sent, index: int) -> None:
        receiver = side_name(peer(event.sender))
        reason = reasons.reason(
            reasons.NEVER_ACKNOWLEDGED,
            f"the {receiver}'s TCP never acknowledged event {index} in the capture, so it may never have received it",
        )
        self._ctx.obligations.unreceived(index, event.sender, reason)

    def _on_lost(self, event: Lost, index: int) -> None:
        """Unobserved bytes of one side: what that side owed may be in them, so its duties are not assessable."""
        side = side_name(event.sender)
        if event.undecoded:
            reason = reasons.reason(
                reasons.UNDECODED, f"{event.length} bytes the {side} sent (event {index}) could not be framed"
            )
        else:
            reason = reasons.reason(reasons.LOST_BYTES, f"{event.length} bytes the {side} sent (event {index})")
        self._ctx.obligations.mark_lost(event.sender, reason)
        self._connection.on_lost(event, index, reason)
        self._pairing.lost(event.sender, index)
        self._limits.lost(event.sender, reason)
        if event.sender is CLIENT:
            self._keep_alive.lost(reason, index, event.time)
        self._ctx.transcript.lost.append((event.sender, event.time))

    def _on_sent(self, seen: Seen) -> None:
        connection = self._connection
        if connection.foreign is not None:
            # Another specification's conversation: its packets are not MQTT 3.1.1 packets to judge.
            return
        if seen.sender is CLIENT:
            self._keep_alive.gap(seen)
            if not isinstance(seen.packet, Connect):  # a client CONNECT is the connection's to judge
                self._offences.on_frame(seen)
            connection.on_client(seen)
            # After the connection (its CONNECT and CONNACK declare the limits), before pairing and deliveries
            # (a limit the client breaks is an offence; they read aliased topics).
            self._limits.on_packet(seen)
            answered = self._pairing.on_packet(seen)
        else:
            self._offences.on_frame(seen)
            answered = connection.on_server(seen)
            self._limits.on_packet(seen)
            paired = self._pairing.on_packet(seen)
            answered = paired if answered is None else answered
        if answered is not None:
            self._offences.check_answer(seen, answered)
            if seen.sender is not CLIENT:
                connection.check_answer(seen, answered)
                self._ctx.transcript.processed_by(answered, seen.time)
        self._offences.check_echo(seen, paired=answered is not None)
        self._deliveries.on_packet(seen)
        self._ctx.transcript.note(seen.event, seen.sender, seen.packet, self._limits.topic_of(seen), seen.time)
        if seen.sender is CLIENT:
            self._keep_alive.on_client(seen)
        self._keep_alive.after_event()

    def _end(self, time: float, index: int) -> None:
        self._keep_alive.end(time, index, None if self._closed is not None else self._quiet)
        transcript = self._ctx.transcript
        transcript.end, transcript.end_event, transcript.closed = time, index, self._closed
        offence = self._offences.by(CLIENT)
        transcript.client_offence = None if offence is None else offence.seen.event
        transcript.client_offence_rule = "" if offence is None else offence.act_rule
        self._connection.on_end(time, self._closed)


def judge(events: Iterable[Event], config: JudgeConfig = DEFAULT_CONFIG) -> Judgement:
    """Judges one conversation: every event in order, then :meth:`ConversationJudge.finish`."""
    conversation = ConversationJudge(config)
    for event in events:
        conversation.feed(event)
    return conversation.finish()
