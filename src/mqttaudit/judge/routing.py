"""Routing verdicts: the deliveries each connection received, held against what the broker model says it was
owed. Missing, unexpected and misflagged deliveries become findings; so do the Session Present flags and the
takeover of a connected ClientId."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mqttaudit.codec import Direction, Publish
from mqttaudit.spec import identity
from mqttaudit.spec.identity import V3_1_1, V5
from mqttaudit.spec.ids import R5

from ..codec.describe import quoted
from . import expiry_5, forwarding_5, reasons, rules
from . import model_rules_5 as rules_5
from .config import JudgeConfig
from .model import (
    INF,
    Expectation,
    GroupDelivery,
    Link,
    Message,
    Model,
    RetainedWatch,
    existed,
    forbid,
    in_memory,
    not_retained_rule,
)
from .transcript import Delivered, Transcript
from .verdict import DUPLICATE, LEAK, MISSING, QOS, Judgement, Ledger, combine

SERVER: Final = Direction.FROM_SERVER


@dataclass(frozen=True)
class Missing:
    """A message owed to a connection and not delivered within its window (its deadline plus the late window), held
    until the connection's session can get no more copies: a copy that can be it (on this connection or a later one
    of the session, same topic and payload, a QoS allowed, matched by nothing else) arriving later makes its rules
    not assessable, since MQTT sets no time limit on delivery; with none, they are broken (missing). What it holds
    is bounded: the topic, a digest of the payload, and the findings it makes."""

    link: str
    v5: bool
    #: Its session, by the session's first connection, and when its own connection opened.
    session: str
    opened: float
    topic: str
    digest: bytes
    highest: int
    owed_from: float
    deadline: float
    #: A copy later than this can be it (the late window is past, and the message was decided missing).
    after: float
    #: When the session can get no more copies (its last connection's end).
    until: float
    #: The order missing messages are held and matched in: when decided, then the message's name and the rule.
    order: tuple[float, str, int, bool, str]
    what: str
    #: The findings it makes if no copy comes: (rule, time, event, detail, expected).
    failures: tuple[tuple[str, float, int, str, str], ...]


def digest(payload: bytes) -> bytes:
    """What a held missing message keeps of its payload (:class:`Missing`)."""
    return hashlib.blake2b(payload, digest_size=16).digest()


@dataclass
class Memory:
    """What the routing verdicts of one slice of time hand on to the next (see :mod:`.stream`): per connection, the
    last copy of each publisher's topic and QoS it got (ordering), and the QoS 1 and 2 deliveries not acknowledged
    (per Packet Identifier, their last use); the messages still within their late window; and the connections
    whose session checks were made; the messages decided missing, held until their session ends for a later copy
    (:class:`Missing`), and per connection how many were held (at most :attr:`.JudgeConfig.late_copies_held`) and
    until when its session lasts (then forgotten)."""

    last: dict[str, dict[tuple[str, str, int], tuple[Delivered, Expectation]]] = field(default_factory=dict)
    unacknowledged: dict[str, dict[int, Delivered]] | None = None
    messages: list[Message] = field(default_factory=list)
    opened: set[str] = field(default_factory=set)
    missing: list[Missing] = field(default_factory=list)
    held_missing: dict[str, tuple[int, float]] = field(default_factory=dict)


class Routing:
    """Judges a built model; one ledger per conversation, so every finding points into its own events.

    :meth:`judgement` judges all of it. :meth:`between` judges one slice of time: it matches the deliveries
    observed in it and decides what can get no more copies by its end (:func:`closes`), leaving the rest (still
    on the model's connections) for the next slice, with ``memory``."""

    def __init__(
        self, model: Model, transcripts: Mapping[str, Transcript], config: JudgeConfig, memory: Memory | None = None
    ) -> None:
        self._model = model
        self._config = config
        self._memory = memory or Memory()
        self._ledgers = {
            name: Ledger(name, version=V5 if transcript.speaks_5_0 else V3_1_1)
            for name, transcript in transcripts.items()
        }
        #: Rules only 5.0 states, broken on a 3.1.1 connection (a 5.0 client's message sent on to a 3.1.1
        #: subscriber): named by their 5.0 ids.
        self._ledgers_5_0 = {name: Ledger(name, version=V5) for name, ledger in self._ledgers.items()}
        #: Per conversation and statement id, the deliveries (events) the replay decided: the conversation judge,
        #: which sees one connection, may have left them undecided (see :mod:`.scenario`).
        self.settled: dict[tuple[str, str], set[int]] = {}
        #: Per 5.0 connection, the first copies of live messages in the order they arrived.
        self._arrivals: list[tuple[Delivered, Expectation]] = []
        self._replacing: dict[int, bool] = {}
        #: Decided missing in this call of :meth:`between`, and the deliveries it matched to nothing.
        self._missing: list[Missing] = []
        self._strays: list[tuple[Link, Delivered]] = []
        #: The expectations of the connection being matched whose topic holds U+FEFF, by that topic without them
        #: and the payload: what :meth:`_stripped` looks up, made at its first call for the connection (rare: a
        #: delivery no expectation explains), None until then.
        self._bom: dict[tuple[str, bytes], list[Expectation]] | None = None
        self._same_client: dict[str, list[Link]] = {}
        for link in model.links:
            if link.client_id:  # each empty ClientId is a ClientId of its own [MQTT-3.1.3-6]
                self._same_client.setdefault(link.client_id, []).append(link)

    def _at(self, seconds: float) -> str:
        """A time of this observation as its details name it (UTC for a capture's, seconds for the prober's)."""
        return reasons.instant(seconds, wall_clock=self._config.wall_clock)

    def _held_messages(self, key: tuple[str, bytes], time: float) -> list[Message]:
        """The messages of topic and payload ``key`` a copy observed at ``time`` may repeat (:func:`.model.in_memory`),
        each once, in the order the server started taking them."""
        found: dict[tuple[str, int, bool], Message] = {}
        for message in (*self._model.by_key.get(key, ()), *self._memory.messages):
            if message.key == key and in_memory(message, time, self._config):
                found.setdefault(message.name, message)
        return sorted(found.values(), key=lambda m: (m.window[0], m.name))

    def _within(self, link: Link, start: float, deadline: float) -> list[Delivered]:
        """The deliveries on ``link`` from ``start`` to ``deadline`` plus the late window: all a check of what was
        due by ``deadline`` may look at (a replay that forgets holds no more of them)."""
        end = deadline + self._config.late_window
        return [d for d in link.transcript.delivered if start <= d.time <= end]

    def _unseen_bytes(self, link: Link, what: str) -> str | None:
        """Why ``what`` is not assessable on ``link`` when bytes the server sent on it were not observed (from the
        first such loss); None when every byte it sent was."""
        lost = [time for side, time in link.transcript.lost if side is SERVER]
        if not lost:
            return None
        return reasons.reason(
            reasons.LOST_BYTES,
            f"bytes the server sent on this connection were not captured or could not be framed (from "
            f"{self._at(min(lost))}): {what} may be among them",
        )

    def judgement(self) -> Judgement:
        return self.between(-INF, INF)

    def between(self, start: float, end: float) -> Judgement:
        """Matches the deliveries observed from ``start`` to ``end`` (excluded) and decides what no later copy can
        change by ``end``: expectations, retained watches and share group messages (marked ``decided``), and the
        session checks of connections (in :attr:`Memory.opened`). The model's own undecided rules and uncounted
        messages are reported here."""
        late = self._config.late_window
        opened = self._memory.opened
        for link in self._model.links:
            if link.name not in opened and self._due(self._session_closes(link), end):
                opened.add(link.name)
                self._session_present(link)
                self._takeover(link)
                self._redelivered(link)
        for link in self._model.links:  # in the order they opened: a message missed on one may be owed on the next
            by_key: dict[tuple[str, bytes], list[Expectation]] = {}
            self._bom = None
            for expectation in link.expectations:
                by_key.setdefault(expectation.key, []).append(expectation)
            self._arrivals = []
            for delivered in link.transcript.delivered:
                if start <= delivered.time < end:
                    self._deliver(link, delivered, by_key)
            self._check_order(link)
            for expectation in list(link.expectations):
                if not expectation.decided and self._due(closes(expectation, late), end):
                    expectation.decided = True
                    self._settle(link, expectation)
            for watch in link.watches:
                if not watch.decided and self._due(min(watch.deadline + late, link.ended), end):
                    watch.decided = True
                    self._settle_watch(link, watch)
            for rule, count in link.unobserved.items():
                self._undecided(link, rule, self._unobserved_messages(link, count))
            for rule, why, time in link.unknown:
                self._undecided(link, rule, reasons.reason(reasons.EARLIER_SESSION, why), time=time)
        for group in self._model.groups:
            if not group.decided and self._due(group_closes(group, self._config), end):
                group.decided = True
                self._settle_group(group)
        self._late_copies(end)
        ledgers = [*self._ledgers.values(), *self._ledgers_5_0.values()]
        return combine(ledger.judgement() for ledger in ledgers)

    @staticmethod
    def _due(closing: float, end: float) -> bool:
        """Decided in a slice ending at ``end``: it closes before; the last slice decides everything left."""
        return end == INF or closing < end

    def _session_closes(self, link: Link) -> float:
        """When the session checks of ``link`` can be made: its re-sent copies are in (their deadline plus the late
        window, or its end), and its session's previous connection ended (what it left unacknowledged is known)."""
        window = min(link.opened + self._config.answer_timeout + self._config.late_window, link.ended)
        session = link.session
        if session is None or link not in session.links or session.links.index(link) == 0:
            return window
        return max(window, session.links[session.links.index(link) - 1].ended)

    def _unacknowledged(self, link: Link) -> dict[int, Delivered]:
        known = self._memory.unacknowledged
        return _unacknowledged(link) if known is None else known.get(link.name, {})

    def _settled(self, link: Link, rule: str, event: int) -> None:
        """``rule`` was decided (held or broken) for delivery ``event`` on ``link``."""
        ledger = self._ledger(link, rule)
        named = identity.statement_id(rule, ledger.version)
        if named is not None:
            self.settled.setdefault((link.name, named), set()).add(event)

    def _ledger(self, link: Link, rule: str) -> Ledger:
        return self._ledger_of(link.name, link.v5, rule)

    def _ledger_of(self, name: str, v5: bool, rule: str) -> Ledger:
        if rule in rules_5.ONLY_5_0 and not v5:
            return self._ledgers_5_0[name]
        return self._ledgers[name]

    def _fail(self, link: Link, rule: str, time: float, event: int, detail: str, expected: str, kind: str = "") -> None:
        self._ledger(link, rule).fail(rule, SERVER, time, event, detail, expected, kind)

    def _held(self, link: Link, rule: str) -> None:
        self._ledger(link, rule).held(rule)

    def _undecided(self, link: Link, rule: str, reason: str, event: int = -1, time: float | None = None) -> None:
        """An instance of ``rule``, a duty of the server on ``link``, could not be decided."""
        self._ledger(link, rule).undecided(rule, reason, side=SERVER, event=event, time=time)

    def _unobserved(self, link: Link, deadline: float, what: str) -> str:
        """Why nothing can be said of ``what`` (a clause: "... was due"), by ``deadline`` on a connection last
        seen open before it: the capture holds nothing of the connection after that time, or nothing of the
        broker at all."""
        horizon = self._model.horizon
        due = f"{what} by {self._at(deadline)}"
        if deadline > horizon:
            return reasons.reason(
                reasons.CAPTURE_ENDS, f"{due}; nothing of this server was captured after {self._at(horizon)}"
            )
        return reasons.reason(
            f"{reasons.NO_ACTIVITY} {self._at(link.ended)}",
            f"the connection is not seen after it, though the capture goes on; {due}",
        )

    def _unobserved_messages(self, link: Link, count: int) -> str:
        messages = "1 message" if count == 1 else f"{count} messages"
        return reasons.reason(
            f"{reasons.NO_ACTIVITY} {self._at(link.ended)}",
            f"the connection is not seen after it; {messages} published later would be owed to it if it was still open",
        )

    def _cut_short(self, link: Link, deadline: float, what: str) -> str:
        """Why nothing can be said of ``what`` (a clause: "... was due"), by ``deadline`` on a connection that
        ended, or was last seen, before it."""
        closed = link.closed
        if closed is None:
            return self._unobserved(link, deadline, what)
        due = f"{what} by {self._at(deadline)}"
        if closed.by is SERVER:
            return reasons.reason(
                reasons.CLOSED_INSTEAD, f"the server closed the connection at {self._at(closed.time)}; {due}"
            )
        by = "the client" if closed.by is not None else "a side unknown"
        return reasons.reason(
            reasons.PEER_CLOSED, f"the connection was closed by {by} at {self._at(closed.time)}; {due}"
        )

    # Sessions -------------------------------------------------------------------------------------------------

    def _session_present(self, link: Link) -> None:
        """[MQTT-3.2.2-2] Session Present 1 when the server holds the session; [MQTT-3.2.2-3] 0 when it does not.
        On a 5.0 connection the flag shows the Clean Start processing (5.0 statement 3.1.4-4): Clean Start 1 starts a
        new session, Clean Start 0 resumes the one held or, with none held, starts a new one (5.0 statement 3.1.2-6);
        a session whose Session Expiry Interval passed is not held (5.0 statement 4.1.0-2), nor is another
        ClientId's [MQTT-3.1.3-2]."""
        connack = link.transcript.connack
        if connack is None:
            return
        if link.clean:
            if link.v5:
                self._flag_owed(link, connack.session_present, False, [rules_5.CLEAN_START_PROCESSED])
            return
        owed = link.owed_session_present
        at_stake: list[str] = [rules.SESSION_PRESENT if owed else rules.NO_SESSION_PRESENT]
        if link.v5:
            at_stake.append(rules_5.CLEAN_START_PROCESSED)
            if owed is False:
                at_stake.append(rules_5.NEW_SESSION)
            if link.after_expiry:
                at_stake.append(rules_5.DISCARDED_AFTER_EXPIRY)
            if self._other_session_held(link):
                at_stake.append(rules_5.SESSION_BY_CLIENT_ID)
        if owed is None:
            reason = reasons.reason(
                reasons.EARLIER_SESSION,
                link.present_unknown or f"no earlier connection of ClientId {quoted(link.client_id)} was seen",
            )
            for unknown in (rules.SESSION_PRESENT, rules.NO_SESSION_PRESENT, *at_stake[1:]):
                self._undecided(link, unknown, reason, link.transcript.connack_event, link.transcript.connack_time)
            return
        if link.after_expiry and connack.session_present:
            # Session Present 1 after the expiry: the server still held the session, and says so truly. What it
            # broke is the discarding (5.0 statement 4.1.0-2); the flag's own statements, and the new session due to a
            # server holding none, ask nothing of a server that holds one.
            self._flag_owed(link, True, False, [rules_5.DISCARDED_AFTER_EXPIRY])
            reason = reasons.reason(
                reasons.EARLIER_SESSION,
                f"the server kept the session of ClientId {quoted(link.client_id)} past its Session Expiry Interval "
                f"({R5.MQTT_4_1_0_2}): Session Present 1 reports the state it held",
            )
            for rule in at_stake:
                if rule != rules_5.DISCARDED_AFTER_EXPIRY:
                    self._undecided(link, rule, reason, link.transcript.connack_event, link.transcript.connack_time)
            return
        self._flag_owed(link, connack.session_present, owed, at_stake)

    def _flag_owed(self, link: Link, present: bool, owed: bool, at_stake: Sequence[str]) -> None:
        """The CONNACK's Session Present is ``owed``: every rule of ``at_stake`` held, or broken."""
        if present == owed:
            for rule in at_stake:
                self._held(link, rule)
            return
        clean = "Clean Start" if link.v5 else "CleanSession"
        for rule in at_stake:
            self._fail(
                link,
                rule,
                link.transcript.connack_time,
                link.transcript.connack_event,
                f"CONNACK sets Session Present {int(present)} for ClientId {quoted(link.client_id)} ({clean} "
                f"{int(link.clean)}), whose session the server {'holds' if owed else 'does not hold'}",
                EXPECTED.get(rule, f"{clean} {int(link.clean)} is answered with Session Present {int(owed)} here"),
            )

    def _redelivered(self, link: Link) -> None:
        """What a resumed session (Session Present 1) is sent again: each QoS 1 or 2 PUBLISH its previous connection
        got and never acknowledged (no PUBACK, no PUBREC) is re-sent with its original Packet Identifier
        [MQTT-4.4.0-1], and that copy has DUP 1 [MQTT-3.3.1-1]. A QoS 2 one is re-sent even if its Message Expiry
        Interval has passed since: a QoS 2 sender applies no expiry to a PUBLISH it has sent [MQTT-4.3.3-7].
        (A PUBREL re-sent after PUBREC has no DUP flag: its flags are fixed, section 3.6.1.)"""
        connack = link.transcript.connack
        session = link.session
        if link.clean or connack is None or not connack.session_present or session is None:
            return
        position = session.links.index(link)
        if position == 0:
            return
        earlier = session.links[position - 1]
        pending = self._unacknowledged(earlier)
        if not pending:
            return
        if any(side is not SERVER for side, _ in earlier.transcript.lost):
            why = f"bytes of the client on {quoted(earlier.name)} went unobserved: its acknowledgements are unknown"
            self._undecided(link, rules.DUP_ON_REDELIVERY, reasons.reason(reasons.EARLIER_SESSION, why))
            return
        again: dict[int, Delivered] = {}
        for delivered in self._within(link, link.opened, link.opened + self._config.answer_timeout):
            packet_id = delivered.message.packet_id
            if packet_id in pending and packet_id not in again:
                again[packet_id] = delivered
        for packet_id, sent in pending.items():
            resent = again.get(packet_id)
            if resent is not None and not _same_message(resent.message, sent.message):
                continue  # the identifier went to another message: a new one, not this one re-sent
            if _expired_before(sent, link.opened):
                self._expired_resent(link, earlier, sent, resent)
            if resent is None:
                self._not_resent(link, earlier, sent)
            elif resent.message.dup:
                self._held(link, rules.DUP_ON_REDELIVERY)
            else:
                self._fail(
                    link,
                    rules.DUP_ON_REDELIVERY,
                    resent.time,
                    resent.event,
                    f"PUBLISH to {quoted(resent.message.topic)} (event {resent.event}, Packet Identifier {packet_id}) "
                    f"re-sends the QoS {sent.message.qos} message sent on {quoted(earlier.name)} (event {sent.event}) "
                    "and never acknowledged there, with DUP 0",
                    EXPECTED[rules.DUP_ON_REDELIVERY],
                )

    def _not_resent(self, link: Link, earlier: Link, sent: Delivered) -> None:
        """No re-send of ``sent`` on ``link``: nothing to say of its DUP flag."""
        what = (
            f"the PUBLISH sent on {quoted(earlier.name)} (event {sent.event}, Packet Identifier "
            f"{sent.message.packet_id}) was not re-sent on this connection"
        )
        self._undecided(link, rules.DUP_ON_REDELIVERY, reasons.reason(reasons.NO_ANSWER, what))

    def _expired_resent(self, link: Link, earlier: Link, sent: Delivered, resent: Delivered | None) -> None:
        """[MQTT-4.3.3-7] A QoS 2 PUBLISH sent before its Message Expiry Interval passed, unacknowledged when its
        connection ended, is re-sent on the resumed session all the same: the sender applies no expiry to it."""
        rule = rules_5.QOS2_SENT_NOT_EXPIRED
        if resent is not None:
            self._held(link, rule)
            return
        what = (
            f"the QoS 2 PUBLISH to {quoted(sent.message.topic)} sent on {quoted(earlier.name)} (event {sent.event}, "
            f"Packet Identifier {sent.message.packet_id}), unacknowledged there and since expired"
        )
        deadline = link.opened + self._config.answer_timeout
        unseen = self._unseen_bytes(link, what)
        if unseen is not None:
            self._undecided(link, rule, unseen)
        elif link.ended >= deadline:
            self._fail(
                link,
                rule,
                link.ended,
                link.transcript.end_event,
                f"{what}: the session was resumed on {quoted(link.name)} at {self._at(link.opened)} and the "
                f"message was not sent again by {self._at(deadline)} (seen open until {self._at(link.ended)})",
                EXPECTED[rule],
                MISSING,
            )
        else:
            self._undecided(link, rule, self._cut_short(link, deadline, f"the re-sent {what} was due"))

    def _other_session_held(self, link: Link) -> bool:
        """Another ClientId's session was held (not ended) when ``link`` connected: a server that found sessions by
        anything but the ClientId could have given it that one [MQTT-3.1.3-2]."""
        connected = link.transcript.connect_time
        return any(
            session.client_id
            and session.client_id != link.client_id
            and session.links[0].opened < connected
            and connected < session.ended - expiry_5.GRANULARITY
            for session in self._model.every_session or self._model.sessions
        )

    def _takeover(self, link: Link) -> None:
        """[MQTT-3.1.4-2] A CONNECT with the ClientId of a connected client disconnects that client."""
        connected = link.transcript.connect_time
        for older in self._same_client.get(link.client_id, ()):
            if older is link or not older.may_be_open_at(connected):
                continue
            deadline = link.opened + self._config.close_grace
            closed = older.closed
            if (closed is not None and closed.time > deadline) or (closed is None and older.ended >= deadline):
                self._fail(
                    older,
                    rules.TAKEOVER,
                    older.ended,
                    older.transcript.end_event,
                    f"the connection stayed open {reasons.elapsed(older.ended - link.opened)} after ClientId "
                    f"{quoted(link.client_id)} connected again on {quoted(link.name)}",
                    f"the server disconnects the existing client within {self._config.close_grace:g} s",
                )
            elif closed is not None and closed.by is SERVER:
                self._held(older, rules.TAKEOVER)
            else:
                what = (
                    f"its close after ClientId {quoted(link.client_id)} connected again on {quoted(link.name)} was due"
                )
                self._undecided(older, rules.TAKEOVER, self._cut_short(older, deadline, what), time=connected)

    # Deliveries -----------------------------------------------------------------------------------------------

    def _deliver(self, link: Link, delivered: Delivered, by_key: dict[tuple[str, bytes], list[Expectation]]) -> None:
        publish = delivered.message
        key = (publish.topic, publish.payload)
        late = self._config.late_window
        matching = [e for e in by_key.get(key, ()) if e.matches_at(delivered.time, late)]
        owed = [
            e for e in matching if not e.forbidden and (len(e.delivered) < e.copies or (publish.dup and e.delivered))
        ]
        if owed:
            # Same topic and payload may be several messages (a device's retained status, re-published on each
            # connection): a first copy goes before an extra one, one still due before one past its deadline.
            chosen = min(
                owed,
                key=lambda e: (
                    e.retained != publish.retain,
                    bool(e.delivered),
                    e.deadline < delivered.time,
                    not e.must,
                    e.after,
                    e.message.window[0],
                    e.message.name,
                    e.rule,
                ),
            )
            first = not chosen.delivered
            chosen.delivered.append(publish)
            chosen.arrivals.append(delivered)
            if first and link.v5 and not chosen.retained:
                self._arrivals.append((delivered, chosen))
                if self._replaces(chosen):
                    self._held(link, rules_5.SAME_FILTER_REPLACES)
            # A copy with RETAIN 1 of a message that may be live, or the retained one its subscription must not get
            # (MQTT 5.0 Retain Handling 1 or 2, an expired one): which it is decides which rule it keeps or breaks.
            barred = (
                [e for e in matching if e.forbidden and e.retained] if publish.retain and not chosen.retained else []
            )
            if len({e.retained for e in owed}) > 1 or barred:
                reason = reasons.reason(
                    reasons.AMBIGUOUS, f"event {delivered.event} may be a live or a retained message"
                )
                for rule in _retain_rules(owed) + [e.rule for e in barred]:
                    self._undecided(link, rule, reason, delivered.event, delivered.time)
                for expectation in barred:
                    expectation.delivered.append(publish)  # decided here: not assessable, neither kept nor broken
            else:
                self._retain_flag(link, delivered, chosen)
            self._qos_at_most(link, delivered, chosen)
            if first:
                self._dup_not_propagated(link, delivered, chosen)
                self._expiry(link, delivered, chosen)
            if link.v5:
                self._forwarded(link, delivered, chosen)
            return
        forbidden = [e for e in matching if e.forbidden and (publish.retain or not e.retained)]
        # one still within its window before one whose deadline passed (a Will discarded, then dropped for good)
        forbidden.sort(
            key=lambda e: (e.deadline < delivered.time, e.after, e.message.window[0], e.message.name, e.rule)
        )
        if publish.retain and not any(e.retained for e in forbidden):
            # A RETAIN 1 copy on a new subscription is judged as the retained message it claims to be: one the topic
            # no longer held breaks the rule that replaced it, before any rule against its live delivery.
            forbidden = self._retained_leak(link, delivered) + forbidden
        if forbidden:
            barring = forbidden[0]
            barring.delivered.append(publish)
            for rule in (barring.rule, *barring.also):
                if rule == rules.DELIVERY_MATCHES_SUBSCRIPTION:
                    continue  # the conversation judge reported it where it arrived
                self._fail(
                    link,
                    rule,
                    delivered.time,
                    delivered.event,
                    f"PUBLISH to {quoted(publish.topic)} (event {delivered.event}, RETAIN {int(publish.retain)}) "
                    f"delivers {_what(barring)}",
                    EXPECTED.get(rule, ACTING_ON_A_VIOLATION),
                    LEAK,
                )
            return
        if self._stripped(link, delivered):
            return
        if not matching:
            self._strays.append((link, delivered))  # may be a late copy of a message missing (:meth:`_late_copies`)
        self._duplicate(link, delivered, [e for e in matching if e.delivered])

    def _stripped(self, link: Link, delivered: Delivered) -> bool:
        """[MQTT-1.5.3-3] A delivery no expectation explains whose topic is that of a message owed here with its
        U+FEFF characters left out: the server stripped them."""
        publish = delivered.message
        if self._bom is None:
            self._bom = {}
            for each in link.expectations:
                topic = each.message.publish.topic
                if "\ufeff" in topic and not each.forbidden:
                    self._bom.setdefault((topic.replace("\ufeff", ""), each.message.publish.payload), []).append(each)
        stripped = [
            expectation
            for expectation in self._bom.get((publish.topic, publish.payload), ())
            if expectation.matches_at(delivered.time, self._config.late_window)
        ]
        if not stripped:
            return False
        expectation = min(stripped, key=lambda e: (e.after, e.message.window[0], e.message.name, e.rule))
        self._fail(
            link,
            rules.BOM_KEPT,
            delivered.time,
            delivered.event,
            f"PUBLISH to {quoted(publish.topic)} (event {delivered.event}) delivers {_what(expectation)} without "
            "its U+FEFF (EF BB BF)",
            EXPECTED[rules.BOM_KEPT],
        )
        return True

    def _retained_leak(self, link: Link, delivered: Delivered) -> list[Expectation]:
        """A RETAIN 1 delivery no expectation explains, held against the new subscriptions' watches of its topic:
        the message it repeats, if the topic did not hold it as retained then, becomes a forbidden expectation
        (delivered) under the rule that says why."""
        publish = delivered.message
        time = delivered.time
        candidates = self._held_messages((publish.topic, publish.payload), time)
        changes = self._model.retained.get(publish.topic, [])
        for watch in link.watches:
            if watch.topic != publish.topic or not watch.window[0] <= time <= watch.deadline + self._config.late_window:
                continue
            for message in candidates:
                states = {state.name for state in watch.states if isinstance(state, Message)}
                rule = None if message.name in states else not_retained_rule(message, changes, watch.window)
                if rule is not None:
                    return [forbid(link, message, rule, retained=True, after=watch.window[0], deadline=watch.deadline)]
        return []

    def _settle_watch(self, link: Link, watch: RetainedWatch) -> None:
        """What a new subscription did not receive as retained, once every delivery was matched."""
        for rule in sorted(watch.rules):
            self._settle_absence(link, rule, watch.deadline, f"a retained message of {quoted(watch.topic)}")

    def _duplicate(self, link: Link, delivered: Delivered, used: list[Expectation]) -> None:
        """[MQTT-4.3.3-2] A QoS 2 message reaches a subscriber once per subscription, never more (5.0 states it as
        [MQTT-4.3.3-10]: a repeat of the PUBLISH causes no duplicate onward delivery); [MQTT-3.8.4-3] in 5.0 a
        filter subscribed again replaced its subscription, so a second copy for it is one too many."""
        if delivered.message.dup:
            return
        replaced = [e for e in used if link.v5 and self._replaces(e)]
        if replaced:
            self._fail(
                link,
                rules_5.SAME_FILTER_REPLACES,
                delivered.time,
                delivered.event,
                f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) delivers "
                f"{_what(replaced[0])} once more, though the session subscribed to the same filter again "
                "(a replacement, not a second subscription)",
                EXPECTED[rules_5.SAME_FILTER_REPLACES],
                DUPLICATE,
            )
            return
        if not any(e.qos == 2 for e in used):
            return
        self._fail(
            link,
            rules_5.QOS2_REPEAT_ANSWERED if link.v5 else rules.QOS2_RECEIVER,
            delivered.time,
            delivered.event,
            f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) delivers {_what(used[0])} "
            "once more",
            "a message taken at QoS 2 is delivered onward once, not duplicated",
            DUPLICATE,
        )

    def _replaces(self, expectation: Expectation) -> bool:
        """A subscription the copy goes under replaced one of the same filter [MQTT-3.8.4-3] (cached)."""
        for subscription in expectation.subscriptions:
            known = self._replacing.get(id(subscription))
            if known is None:
                known = self._replacing[id(subscription)] = existed(subscription) is True
            if known:
                return True
        return False

    def _check_order(self, link: Link) -> None:
        """[MQTT-4.6.0-5, -6] On a 5.0 connection's non-shared subscriptions, the messages of one publishing
        connection, topic and QoS arrive in the order the publisher sent them."""
        last = self._memory.last.setdefault(link.name, {})
        for delivered, expectation in self._arrivals:
            if expectation.group is not None:
                continue  # a shared subscription's topics need not be Ordered Topics [MQTT-4.6.0-6]
            message = expectation.message
            key = (message.link.name, message.publish.topic, delivered.message.qos)
            earlier = last.get(key)
            if earlier is None or earlier[1].message.event < message.event:
                if earlier is not None:
                    self._held(link, rules_5.ORDERED_TOPIC)
                    self._held(link, rules_5.NON_SHARED_ORDERED)
                last[key] = (delivered, expectation)
                continue
            for rule in (rules_5.NON_SHARED_ORDERED, rules_5.ORDERED_TOPIC):
                self._fail(
                    link,
                    rule,
                    delivered.time,
                    delivered.event,
                    f"PUBLISH to {quoted(message.publish.topic)} (event {delivered.event}) delivers "
                    f"{_what(expectation)} after event {earlier[0].event}, which delivered "
                    f"{_what(earlier[1])}, published after it",
                    EXPECTED[rule],
                )

    def _retain_flag(self, link: Link, delivered: Delivered, expectation: Expectation) -> None:
        """[MQTT-3.3.1-8] RETAIN 1 when sent for a new subscription; [MQTT-3.3.1-9] RETAIN 0 for an established one
        (MQTT 5.0: with Retain As Published 0 [MQTT-3.3.1-12]; with 1, the flag it was published with
        [MQTT-3.3.1-13])."""
        published = expectation.message.publish.retain
        if not expectation.retained and expectation.as_published is not False:
            retain = delivered.message.retain
            # With both options among the subscriptions, a copy whose flag is RETAIN 0 answers to one with Retain
            # As Published 0, one with the flag as published to one with 1; only RETAIN 1 on a RETAIN 0 message
            # answers to neither.
            if expectation.as_published is None and not retain:
                kept = rules_5.RETAIN_CLEARED
            else:
                kept = rules_5.RETAIN_AS_PUBLISHED
            self._settled(link, kept, delivered.event)
            if retain == published or (expectation.as_published is None and not retain):
                self._held(link, kept)
                return
            self._fail(
                link,
                kept,
                delivered.time,
                delivered.event,
                f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) has RETAIN {int(retain)}, "
                f"but it forwards {_what(expectation)}, published with RETAIN {int(published)}, under Retain As "
                "Published 1",
                EXPECTED[kept],
            )
            return
        rule = rules.RETAIN_SET_ON_NEW_SUBSCRIPTION if expectation.retained else rules.RETAIN_CLEARED_ON_ESTABLISHED
        self._settled(link, rule, delivered.event)
        if delivered.message.retain == expectation.retained:
            self._held(link, rule)
            return
        self._fail(
            link,
            rule,
            delivered.time,
            delivered.event,
            f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) has RETAIN "
            f"{int(delivered.message.retain)}, but it delivers {_what(expectation)}",
            EXPECTED[rule],
        )

    def _expiry(self, link: Link, delivered: Delivered, expectation: Expectation) -> None:
        """[MQTT-3.3.2-5] A copy whose Message Expiry Interval passed before the server started to send it is
        deleted, not sent (a re-sent copy, DUP 1, started before)."""
        interval = expectation.message.expiry
        if interval is None or delivered.message.dup:
            return
        state = expiry_5.state_at(expectation.message.window, interval, delivered.time)
        rule = rules_5.EXPIRED_NOT_DELIVERED
        if state == expiry_5.ALIVE:
            self._held(link, rule)
        elif state == expiry_5.UNSURE:
            reason = reasons.reason(
                reasons.AMBIGUOUS,
                f"event {delivered.event} comes within {expiry_5.GRANULARITY:g} s of the end of the Message Expiry "
                f"Interval of {_what(expectation)}",
            )
            self._undecided(link, rule, reason, delivered.event, delivered.time)
        else:
            self._fail(
                link,
                rule,
                delivered.time,
                delivered.event,
                f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) delivers {_what(expectation)} "
                f"{reasons.elapsed(delivered.time - expectation.message.window[1])} after the server took it, "
                f"past its Message Expiry Interval of {interval:g} s",
                EXPECTED[rule],
            )

    def _forwarded(self, link: Link, delivered: Delivered, expectation: Expectation) -> None:
        """What a 5.0 subscriber's copy carries: the publisher's properties unaltered, the remaining Message Expiry
        Interval, and the Subscription Identifiers of subscriptions made on earlier connections of the session
        (those made on this one are the conversation judge's: :mod:`.deliveries_5`)."""
        message = expectation.message
        checks: list[forwarding_5.Check] = []
        siblings = [message, *(m for m in self._held_messages(message.key, delivered.time) if m.name != message.name)]
        shapes = {forwarding_5.compared(m.publish.properties) for m in siblings}
        if len(shapes) > 1:
            why = reasons.reason(
                reasons.AMBIGUOUS,
                f"event {delivered.event} has the topic and payload of {len(siblings)} messages published with "
                "different properties",
            )
            checks += [forwarding_5.Check(rule, forwarding_5.UNDECIDED, why) for _, rule, _ in forwarding_5.UNALTERED]
        else:
            checks += forwarding_5.unaltered(message.publish.properties, delivered.message.properties)
            if message.will and message.link.v5:
                checks += _will_order(checks)
        interval = message.expiry
        if interval is not None:
            expiries = {m.expiry for m in siblings}
            if len(expiries) == 1:
                checks.append(
                    forwarding_5.remaining(interval, message.window[0], delivered.time, delivered.message.properties)
                )
            else:
                why = (
                    f"event {delivered.event} has the topic and payload of messages published with different "
                    "Message Expiry Intervals"
                )
                checks.append(forwarding_5.Check(rules_5.EXPIRY_REMAINING, forwarding_5.UNDECIDED, why))
        subscriptions = expectation.subscriptions
        if subscriptions and any(s.link.name != link.name for s in subscriptions):
            if expectation.sure:
                held = {s.identifier: s.full_filter for s in subscriptions if s.identifier is not None}
                carried = forwarding_5.carried_identifiers(delivered.message.properties)
                checks.append(forwarding_5.identifiers(carried, held, len(subscriptions)))
            else:
                why = "which of the matching subscriptions held when the message was taken is not known"
                checks.append(forwarding_5.Check(rules_5.IDENTIFIERS_SENT, forwarding_5.UNDECIDED, why))
        for check in checks:
            if check.outcome != forwarding_5.UNDECIDED:
                self._settled(link, check.rule, delivered.event)
            if check.outcome == forwarding_5.HELD:
                self._held(link, check.rule)
            elif check.outcome == forwarding_5.BROKEN:
                detail = f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) forwards " + (
                    f"{_what(expectation)}: {check.detail}"
                )
                self._fail(link, check.rule, delivered.time, delivered.event, detail, check.expected)
            else:
                tagged = reasons.tag_of(check.detail)
                reason = check.detail if tagged else reasons.reason(reasons.AMBIGUOUS, check.detail)
                self._undecided(link, check.rule, reason, delivered.event, delivered.time)

    def _qos_at_most(self, link: Link, delivered: Delivered, expectation: Expectation) -> None:
        """[MQTT-3.8.4-6] Never above the lower of the publish QoS and the granted QoS (a share group's member:
        its own granted QoS [MQTT-4.8.2-3])."""
        if delivered.message.qos <= expectation.highest:
            if expectation.group is not None:
                self._held(link, expectation.qos_rule)
            return
        self._fail(
            link,
            expectation.qos_rule,
            delivered.time,
            delivered.event,
            f"PUBLISH to {quoted(delivered.message.topic)} (event {delivered.event}) arrives at QoS "
            f"{delivered.message.qos}; published at QoS {expectation.message.publish.qos}, its subscriptions allow "
            f"{expectation.highest}",
            EXPECTED[expectation.qos_rule],
            QOS,
        )

    def _dup_not_propagated(self, link: Link, delivered: Delivered, expectation: Expectation) -> None:
        """[MQTT-3.3.1-3] The first copy sent to a subscriber has DUP 0, whatever the publisher's DUP."""
        if expectation.retained:
            return
        if expectation.rule == rules.OFFLINE_MESSAGES_KEPT:
            reason = reasons.reason(
                reasons.EARLIER_SESSION,
                f"event {delivered.event} may re-send a copy first sent on an earlier connection of the session",
            )
            self._undecided(link, rules.DUP_NOT_PROPAGATED, reason, delivered.event, delivered.time)
            return
        if not delivered.message.dup:
            self._held(link, rules.DUP_NOT_PROPAGATED)
            return
        self._fail(
            link,
            rules.DUP_NOT_PROPAGATED,
            delivered.time,
            delivered.event,
            f"the first copy of {_what(expectation)} arrives with DUP 1 (event {delivered.event})",
            EXPECTED[rules.DUP_NOT_PROPAGATED],
        )

    def _settle(self, link: Link, expectation: Expectation) -> None:
        """Settles one expectation once every delivery of its connection was matched."""
        if expectation.forbidden:
            self._settle_forbidden(link, expectation)
        elif expectation.delivered:
            if expectation.must or expectation.withheld_by is not None:
                for rule in (expectation.rule, *expectation.also):
                    self._held(link, rule)
                self._qos_reached(link, expectation)
                if "\ufeff" in expectation.message.publish.topic:
                    self._held(link, rules.BOM_KEPT)  # the copy matched by its topic, U+FEFF and all
        elif expectation.must:
            elsewhere = expectation.elsewhere
            if elsewhere is not None and elsewhere.delivered:
                self._held(link, expectation.rule)  # the session got it on its previous connection
            else:
                self._settle_missing(link, expectation)
        elif expectation.withheld_by is not None:
            for rule in (expectation.rule, *expectation.also):
                self._undecided(link, rule, expectation.withheld_by, time=expectation.after)

    def _settle_forbidden(self, link: Link, expectation: Expectation) -> None:
        if expectation.delivered:
            return  # reported when it arrived
        for rule in (expectation.rule, *expectation.also):
            # [MQTT-3.3.2-3] is decided on every delivery as well: an early close leaves nothing undecided there.
            early = None if rule == rules.DELIVERY_MATCHES_SUBSCRIPTION else _what(expectation)
            self._settle_absence(link, rule, expectation.deadline, early)

    def _settle_absence(self, link: Link, rule: str, deadline: float, what: str | None) -> None:
        """Something that must not arrive did not: ``rule`` held if the connection was seen open past ``deadline``
        with every byte the server sent observed; otherwise not assessable (about ``what``, when given)."""
        unseen = self._unseen_bytes(link, what or "a delivery")
        if unseen is not None:
            self._undecided(link, rule, unseen)
        elif link.ended >= deadline:
            self._held(link, rule)
        elif what is not None:
            self._undecided(link, rule, self._cut_short(link, deadline, f"{what}, which must not arrive, could arrive"))

    def _settle_missing(self, link: Link, expectation: Expectation) -> None:
        """Missing while the connection was seen open past the deadline: a finding, held back until the session ends
        (:meth:`_late_copies`: a copy later than the late window makes it not assessable). Missing because it closed
        first: a CleanSession 0 session owes a QoS 1 or 2 message on its next connection [MQTT-3.1.2-5];
        otherwise, and when observation of the connection stopped first, not assessable."""
        # [MQTT-1.5.3-3] A copy whose topic holds U+FEFF would show whether the server kept it: unseen, undecided.
        bom = (rules.BOM_KEPT,) if "\ufeff" in expectation.message.publish.topic else ()
        rules_at_stake = (expectation.rule, *expectation.also, expectation.qos_rule, *bom)
        unnamed = [d for d in self._within(link, expectation.after, expectation.deadline) if not d.message.topic]
        if unnamed:
            # A delivery named only by a Topic Alias whose mapping was not seen may be this message.
            reason = reasons.reason(
                reasons.AMBIGUOUS,
                f"event {unnamed[0].event} names its topic only by a Topic Alias not resolved here: it may be "
                f"{_what(expectation)}",
            )
            for rule in rules_at_stake:
                self._undecided(link, rule, reason, time=expectation.after)
            return
        unseen = self._unseen_bytes(link, _what(expectation))
        if unseen is not None:
            for rule in rules_at_stake:
                self._undecided(link, rule, unseen, time=expectation.after)
            return
        if link.ended >= expectation.deadline:
            early = _published_early(link, expectation)
            failures: list[tuple[str, float, int, str, str]] = []
            for rule in (expectation.rule, *expectation.also):
                if rule == rules_5.WILL_STORED and _arrived_early(link, expectation, self._config.late_window):
                    # The Will reached this connection before its delay ran out: the server held it (stored), and
                    # published it too soon, which [MQTT-3.1.2-8] reports; 5.0 statement 3.1.2-7 (key WILL_STORED)
                    # is kept.
                    self._held(link, rule)
                    continue
                if early:
                    continue  # one act, one finding: the Will went out once, too soon, which its delivery reported
                failures.append(
                    (
                        rule,
                        link.ended,
                        link.transcript.end_event,
                        f"{_what(expectation)} never arrived in time: it was owed from "
                        f"{self._at(_owed_from(expectation))}, due by {self._at(expectation.deadline)}, "
                        f"and the connection was seen open until "
                        f"{self._at(link.ended)}; no copy came within the late window, "
                        f"{self._config.late_window:g} s past the deadline",
                        EXPECTED[rule],
                    )
                )
            if failures:
                self._missing.append(self._held_missing(link, expectation, failures))
            return
        session = link.session
        following = None if session is None else session.link_after(link.ended)
        persistent = session is not None and not session.clean and expectation.qos > 0
        if following is None or not persistent or link.closed is None:
            reason = self._cut_short(link, expectation.deadline, f"{_what(expectation)} was due")
            for rule in rules_at_stake:
                self._undecided(link, rule, reason, time=expectation.after)
        if following is None or not persistent:
            return
        # [MQTT-3.1.2-5] Kept for the next connection: owed there, unless this one may have received it unseen.
        limit = self._config.answer_timeout
        following.expectations.append(
            Expectation(
                following,
                expectation.message,
                link.closed is not None,
                rules.OFFLINE_MESSAGES_KEPT,
                expectation.retained,
                expectation.qos,
                expectation.qos_rule,
                following.opened,
                following.opened + limit,
                expectation.copies,
                ceiling=expectation.ceiling,
            )
        )

    def _held_missing(
        self, link: Link, expectation: Expectation, failures: Sequence[tuple[str, float, int, str, str]]
    ) -> Missing:
        late = self._config.late_window
        decided = closes(expectation, late)
        session = link.session
        until = link.ended if session is None else max(session.ended, *(each.ended for each in session.links))
        message = expectation.message
        return Missing(
            link.name,
            link.v5,
            link.name if session is None else session.links[0].name,
            link.opened,
            message.publish.topic,
            digest(message.publish.payload),
            expectation.highest,
            _owed_from(expectation),
            expectation.deadline,
            max(expectation.deadline + late, decided),
            until,
            (decided, *message.name, expectation.rule),
            _what(expectation),
            tuple(failures),
        )

    def _late_copies(self, end: float) -> None:
        """The messages decided missing in this call are held (at most :attr:`.JudgeConfig.late_copies_held` per
        connection, in the order :attr:`Missing.order`; past that, reported at once); each delivery matched to
        nothing, in the order they came, is the late copy of the first held message it can be (its rules are then
        not assessable); a held message whose session can get no more copies by ``end`` is missing."""
        memory = self._memory
        cap = self._config.late_copies_held
        for missing in sorted(self._missing, key=lambda m: m.order):
            held, _ = memory.held_missing.get(missing.link, (0, missing.until))
            if held >= cap:
                self._report_missing(
                    missing,
                    f"; a later copy was not looked for: {cap} missing messages of this connection were held for "
                    "one already (the cap)",
                )
                continue
            memory.held_missing[missing.link] = (held + 1, missing.until)
            memory.missing.append(missing)
        self._missing = []
        index: dict[tuple[str, str, bytes], list[Missing]] = {}
        for missing in memory.missing:
            index.setdefault((missing.session, missing.topic, missing.digest), []).append(missing)
        copied: set[int] = set()
        for link, delivered in sorted(self._strays, key=lambda stray: (stray[1].time, stray[0].name, stray[1].event)):
            session = link.name if link.session is None else link.session.links[0].name
            same = index.get((session, delivered.message.topic, digest(delivered.message.payload)))
            if same:
                copied |= self._late_copy(link, delivered, same)
        self._strays = []
        kept: list[Missing] = []
        for missing in memory.missing:
            if id(missing) in copied:
                continue
            if self._due(missing.until, end):
                self._report_missing(missing, "; none came later while its session lasted")
            else:
                kept.append(missing)
        memory.missing = kept
        # A session that ended is owed nothing more: what its connections held is forgotten.
        for name, (_, until) in list(memory.held_missing.items()):
            if self._due(until, end):
                del memory.held_missing[name]

    def _late_copy(self, link: Link, delivered: Delivered, held: list[Missing]) -> set[int]:
        """``delivered``, matched to nothing, as the late copy of the first of ``held`` (the missing messages of its
        session, topic and payload) it can be: that one's rules are not assessable, and it is no longer held.
        Returns the ``id`` of the message it was taken as (none: an empty set)."""
        publish = delivered.message
        candidates = [
            missing
            for missing in held
            if missing.opened <= link.opened and publish.qos <= missing.highest and delivered.time > missing.after
        ]
        if not candidates:
            return set()
        missing = min(candidates, key=lambda m: m.order)
        held.remove(missing)
        late = self._config.late_window
        where = "" if link.name == missing.link else f" on {quoted(link.name)}"
        reason = reasons.reason(
            reasons.LATE_COPY,
            f"a copy (event {delivered.event}{where}, at {self._at(delivered.time)}) came "
            f"{reasons.elapsed(delivered.time - missing.owed_from)} after the server took {missing.what}, due by "
            f"{self._at(missing.deadline)}: after the late window of {late:g} s past that; the specification sets "
            "no time limit on delivery",
        )
        for rule, *_ in missing.failures:
            ledger = self._ledger_of(missing.link, missing.v5, rule)
            ledger.undecided(rule, reason, side=SERVER, event=-1, time=missing.owed_from)
        return {id(missing)}

    def _report_missing(self, missing: Missing, note: str) -> None:
        for rule, time, event, detail, expected in missing.failures:
            self._ledger_of(missing.link, missing.v5, rule).fail(
                rule, SERVER, time, event, detail + note, expected, MISSING
            )

    def _settle_group(self, group: GroupDelivery) -> None:
        """A message owed to a share group: one member's copy keeps [MQTT-4.5.0-1] for the group; none, while every
        member that could get it was seen open past the deadline with all its bytes, breaks it once, for the
        group; otherwise the group's share is not assessable."""
        got = [copy for copy in group.members if copy.delivered]
        first = group.members[0]
        if got:
            self._held(got[0].link, rules.MESSAGE_ROUTED)
            self._chosen_member(group, min(got, key=lambda copy: copy.arrivals[0].time))
            return
        if not group.must:
            return
        names = ", ".join(quoted(copy.link.name) for copy in group.members)
        what = f"{_what(first)} to share group {quoted(group.share)} ({quoted(group.topic_filter)}; members {names})"
        for copy in group.members:
            unseen = self._unseen_bytes(copy.link, what)
            if unseen is not None:
                self._undecided(first.link, rules.MESSAGE_ROUTED, unseen, time=first.after)
                return
            if copy.link.ended < group.deadline:
                reason = self._cut_short(copy.link, group.deadline, f"{what} was due")
                self._undecided(first.link, rules.MESSAGE_ROUTED, reason, time=first.after)
                return
        self._fail(
            first.link,
            rules.MESSAGE_ROUTED,
            first.link.ended,
            first.link.transcript.end_event,
            f"{what} reached no member: it was owed from {self._at(_owed_from(first))}, due by "
            f"{self._at(group.deadline)}, and every member was seen open past it",
            "the server sends each message matching a shared subscription to one member session of the group",
            MISSING,
        )

    def _chosen_member(self, group: GroupDelivery, chosen: Expectation) -> None:
        """What becomes of a share group's message once its first copy went to ``chosen``: refused there with
        PUBACK or PUBREC 0x80 or above, it is discarded [MQTT-4.8.2-6]; a QoS 2 copy whose connection broke before
        the PUBREC is completed to that member when its session reconnects [MQTT-4.8.2-4], and if the session ends
        first it goes to no other member [MQTT-4.8.2-5]."""
        link = chosen.link
        arrival = chosen.arrivals[0]
        answer = link.transcript.answers.get(arrival.event)
        if answer is not None and answer[0] >= 0x80:
            what = f"{_what(chosen)}, refused by {quoted(link.name)} with Reason Code 0x{answer[0]:02x}"
            self._not_to_others(group, chosen, answer[1], INF, rules_5.SHARED_REFUSED_DISCARDED, what)
            return
        closed = link.closed
        session = link.session
        if arrival.message.qos != 2 or answer is not None or closed is None or session is None:
            return
        following = session.link_after(link.ended)
        if following is not None:
            self._completed_on_return(group, chosen, following)
        elif session.ended != INF:
            what = f"{_what(chosen)}, whose QoS 2 delivery to {quoted(link.name)} broke off before its session ended"
            self._not_to_others(
                group, chosen, closed.time, session.ended + expiry_5.GRANULARITY, rules_5.SHARED_NOT_REASSIGNED, what
            )

    def _completed_on_return(self, group: GroupDelivery, chosen: Expectation, following: Link) -> None:
        """[MQTT-4.8.2-4] The member's next connection gets the interrupted QoS 2 message again (a re-sent PUBLISH,
        DUP 1), and no other member gets it after the break."""
        rule = rules_5.SHARED_QOS2_COMPLETED
        closed = chosen.link.closed
        if closed is None:
            return
        what = f"{_what(chosen)}, whose QoS 2 delivery to {quoted(chosen.link.name)} broke off"
        if self._not_to_others(group, chosen, closed.time, following.opened, rule, what):
            return
        deadline = following.opened + self._config.answer_timeout
        key = chosen.key
        again = [
            d
            for d in self._within(following, following.opened, deadline)
            if (d.message.topic, d.message.payload) == key
        ]
        if again:
            self._held(following, rule)
            return
        unseen = self._unseen_bytes(following, what)
        if unseen is not None:
            self._undecided(following, rule, unseen)
        elif following.ended >= deadline:
            self._fail(
                following,
                rule,
                following.ended,
                following.transcript.end_event,
                f"{what}: the session connected again on {quoted(following.name)} and was not sent it by "
                f"{self._at(deadline)} (seen open until {self._at(following.ended)})",
                "a QoS 2 delivery to a shared subscriber that broke off is completed when the client reconnects",
                MISSING,
            )
        else:
            self._undecided(following, rule, self._cut_short(following, deadline, f"the re-sent {what} was due"))

    def _not_to_others(
        self, group: GroupDelivery, chosen: Expectation, since: float, until: float, rule: str, what: str
    ) -> bool:
        """No member but the chosen one gets the message after ``since``; decided once every other member was
        seen open past ``until`` (or ``since`` plus the answer timeout). True when one did (``rule`` broken)."""
        for copy in group.members:
            if copy is chosen or copy.link.session is chosen.link.session:
                continue
            late = [arrival for arrival in copy.arrivals if arrival.time > since]
            if late:
                self._fail(
                    copy.link,
                    rule,
                    late[0].time,
                    late[0].event,
                    f"PUBLISH to {quoted(late[0].message.topic)} (event {late[0].event}) delivers {what} to another "
                    f"member of share group {quoted(group.share)}",
                    EXPECTED[rule],
                    LEAK,
                )
                return True
        deadline = (since if until == INF else max(since, until)) + self._config.answer_timeout
        for copy in group.members:
            if copy is chosen or copy.link.session is chosen.link.session:
                continue
            unseen = self._unseen_bytes(copy.link, what)
            if unseen is not None:
                self._undecided(copy.link, rule, unseen)
                return False
            if copy.link.ended < deadline:
                self._undecided(copy.link, rule, self._cut_short(copy.link, deadline, f"{what} could arrive"))
                return False
        self._held(chosen.link, rule)
        return False

    def _qos_reached(self, link: Link, expectation: Expectation) -> None:
        """[MQTT-3.8.4-6, 3.3.5-1] At least one copy arrives at the QoS owed."""
        best = max(publish.qos for publish in expectation.delivered)
        if best >= expectation.qos:
            self._held(link, expectation.qos_rule)
            return
        self._fail(
            link,
            expectation.qos_rule,
            link.ended,
            link.transcript.end_event,
            f"{_what(expectation)} arrived at QoS {best} at best; QoS {expectation.qos} was owed",
            EXPECTED[expectation.qos_rule],
            QOS,
        )


def closes(expectation: Expectation, late_window: float) -> float:
    """The time after which no copy can change what ``expectation`` decides: its deadline plus the late window, or
    the end of its connection if earlier; and no sooner than the copy allowed on the session's earlier connection
    instead (:attr:`.model.Expectation.elsewhere`) is decided."""
    own = min(expectation.deadline + late_window, expectation.link.ended)
    elsewhere = expectation.elsewhere
    if elsewhere is None:
        return own
    return max(own, min(elsewhere.deadline + late_window, elsewhere.link.ended))


def group_closes(group: GroupDelivery, config: JudgeConfig) -> float:
    """When a share group's message can be decided: every member's copy is (:func:`closes`), and so is what the
    session of each member may be re-sent on its next connection (its deadline plus the late window)."""
    late = config.late_window
    times = [closes(member, late) for member in group.members]
    for member in group.members:
        session = member.link.session
        following = None if session is None else session.link_after(member.link.ended)
        if following is not None:
            times.append(min(following.opened + config.answer_timeout + late, following.ended))
    return max(times)


def _unacknowledged(link: Link) -> dict[int, Delivered]:
    """The QoS 1 and 2 PUBLISH packets the server sent on ``link`` that the client never answered (no PUBACK, no
    PUBREC), per Packet Identifier: only the last use of an identifier counts."""
    last: dict[int, Delivered] = {}
    for delivered in link.transcript.delivered:
        packet_id = delivered.message.packet_id
        if delivered.message.qos and packet_id is not None:
            last[packet_id] = delivered
    answers = link.transcript.answers
    return {packet_id: sent for packet_id, sent in last.items() if sent.event not in answers}


def _same_message(resent: Publish, sent: Publish) -> bool:
    return (resent.topic, resent.payload, resent.qos) == (sent.topic, sent.payload, sent.qos)


def _expired_before(sent: Delivered, time: float) -> bool:
    """A QoS 2 copy whose Message Expiry Interval (as sent) surely passed before ``time``."""
    interval = expiry_5.message_expiry(sent.message.properties)
    if sent.message.qos != 2 or interval is None:
        return False
    return expiry_5.state_at((sent.time, sent.time), interval, time) == expiry_5.EXPIRED


def _will_order(checks: list[forwarding_5.Check]) -> list[forwarding_5.Check]:
    """5.0 statement 3.1.3-10 (key WILL_USER_PROPERTIES_IN_ORDER): the Will's User Properties are published in
    their order; a copy that lacks some of them keeps no order of them either."""
    found = []
    for check in checks:
        if check.rule in (rules_5.USER_PROPERTIES_IN_ORDER, rules_5.USER_PROPERTIES_FORWARDED):
            if check.rule == rules_5.USER_PROPERTIES_FORWARDED and check.outcome == forwarding_5.HELD:
                continue  # the order is the other check's
            expected = "the server publishes the Will with its User Properties in the order the CONNECT gave them"
            found.append(
                forwarding_5.Check(rules_5.WILL_USER_PROPERTIES_IN_ORDER, check.outcome, check.detail, expected)
            )
    return found


def _retain_rules(owed: list[Expectation]) -> list[str]:
    """The rules the RETAIN flag of a copy that may be any of ``owed`` (retained and live) answers to: RETAIN 1
    for a new subscription, and what the live copies' Retain As Published asks."""
    found: list[str] = [rules.RETAIN_SET_ON_NEW_SUBSCRIPTION]
    for option in {e.as_published for e in owed if not e.retained}:
        if option is not True and rules_5.RETAIN_CLEARED not in found:
            found.append(rules_5.RETAIN_CLEARED)
        if option is not False and rules_5.RETAIN_AS_PUBLISHED not in found:
            found.append(rules_5.RETAIN_AS_PUBLISHED)
    return found


def _published_early(link: Link, expectation: Expectation) -> bool:
    """``expectation`` is a Will that reached ``link`` before its Will Delay Interval ran out (a copy matched to the
    forbidden early window, reported where it arrived): the server published it then, once, so its absence when it
    was due is no second finding."""
    message = expectation.message
    return message.will and any(
        other.forbidden
        and other.delivered
        and other.rule == rules.WILL_PUBLISHED
        and other.message.name == message.name
        for other in link.expectations
    )


def _arrived_early(link: Link, expectation: Expectation, late_window: float) -> bool:
    """A copy of ``expectation``'s message (same Topic Name and payload) reached ``link`` before it was owed (and
    no earlier than the late window before that)."""
    publish = expectation.message.publish
    return any(
        d.message.topic == publish.topic
        and d.message.payload == publish.payload
        and expectation.after - late_window <= d.time < expectation.after
        for d in link.transcript.delivered
    )


def _what(expectation: Expectation) -> str:
    message = expectation.message
    kind = "the Will" if message.will else "the message"
    retained = " as retained message" if expectation.retained else ""
    return f"{kind} to {quoted(message.publish.topic)} (event {message.event} of {quoted(message.link.name)}){retained}"


#: What the spec requires, per rule the model decides.
#: What a delivery of a message sent in or after a client's protocol violation breaks (whichever rule that was).
ACTING_ON_A_VIOLATION: Final = "the server closes on a protocol violation and acts on nothing sent in or after it"
EXPECTED: Final[dict[str, str]] = {
    rules.MESSAGE_ROUTED: "the server sends each message it accepts to every session whose subscriptions match it",
    rules_5.NO_LOCAL: "with No Local set the server does not forward a message to the connection that published it",
    rules_5.RETAIN_AS_PUBLISHED: "with Retain As Published 1 a forwarded copy keeps the RETAIN flag as published",
    rules_5.RETAINED_IF_NEW: "Retain Handling 1 sends retained messages only when the subscription did not exist",
    rules_5.NO_RETAINED: "Retain Handling 2 sends no retained messages when the subscription is made",
    rules_5.REPLACED_RESENDS_RETAINED: "a subscription replaced with Retain Handling 0 gets the retained messages",
    rules_5.EXACT_MATCH_DELETES: "an UNSUBSCRIBE deletes only the subscription of the same filter, compared "
    "character by character (no wildcard matching)",
    rules_5.SAME_FILTER_REPLACES: "a SUBSCRIBE of a filter the session holds replaces it: one copy per message",
    rules_5.ORDERED_TOPIC: "messages of one topic and QoS reach a subscriber in the order their publisher sent them",
    rules_5.NON_SHARED_ORDERED: "every topic is an Ordered Topic on a non-shared subscription",
    rules_5.SHARED_GRANTED_QOS: "a shared subscription's message goes at most at the QoS granted to the chosen member",
    rules_5.EXPIRED_NOT_DELIVERED: "a message whose Message Expiry Interval passed before delivery began is not sent",
    rules_5.WILL_DELAY: "a connection to the session before the Will Delay Interval passes means the Will is not sent",
    rules.SESSION_RESUMED: "a resumed CleanSession 0 session keeps its subscriptions",
    rules.OFFLINE_MESSAGES_KEPT: "a CleanSession 0 session keeps QoS 1 and 2 messages for its next connection",
    rules.CLEAN_SESSION_DISCARDED: "a CleanSession 1 connection discards the previous session; nothing of it is reused",
    rules.WILL_PUBLISHED: (
        "the server publishes the Will when the connection closes without DISCONNECT (MQTT 5.0: once the Will Delay "
        "Interval has passed, and unless DISCONNECT had Reason Code 0x00)"
    ),
    rules.WILL_RETAINED: "a Will with Will Retain 1 is published as a retained message",
    rules.WILL_NOT_RETAINED: "a Will with Will Retain 0 is published as a non-retained message",
    rules.WILL_DISCARDED_ON_DISCONNECT: "DISCONNECT discards the Will without publishing it",
    rules.NOTHING_PROCESSED_AFTER_REFUSAL: "a server that refuses a CONNECT processes nothing sent after it",
    rules.RETAINED_SENT_ON_SUBSCRIBE: "a new subscription gets the last retained message of each matching topic",
    rules.RETAINED_QOS0_REPLACES: "a retained QoS 0 message discards the topic's previously retained message",
    rules.RETAIN_SET_ON_NEW_SUBSCRIPTION: "a message sent because of a new subscription has RETAIN 1",
    rules.RETAIN_CLEARED_ON_ESTABLISHED: "a message sent to an established subscription has RETAIN 0",
    rules.ZERO_BYTE_RETAINED_CLEARS: "a zero-byte retained message removes the topic's retained message",
    rules.ZERO_BYTE_RETAINED_NOT_STORED: "a zero-byte retained message is never stored as retained",
    rules.NON_RETAINED_KEEPS_RETAINED: "a RETAIN 0 message is not stored and leaves the retained message alone",
    rules.UNSUBSCRIBED_STOPS_DELIVERY: "after an UNSUBSCRIBE no new message is delivered under its filter",
    rules.DOLLAR_TOPICS_NOT_MATCHED_BY_WILDCARDS: "a filter starting with '#' or '+' does not match a '$' topic",
    rules.NO_NORMALISATION: "matching compares names and filters as written: no normalisation, no character replaced",
    rules.BOM_KEPT: "EF BB BF in a Topic Name is U+FEFF: the server neither skips nor strips it",
    rules_5.WILL_STORED: "a Will is stored with the session and published when its connection ends",
    rules_5.KEPT_WHILE_OPEN: "no session state is discarded while the connection is open",
    rules_5.NEW_SESSION: "Clean Start 0 with no session held for the ClientId starts a new session: Session Present 0",
    rules_5.CLEAN_START_PROCESSED: "the server processes Clean Start as section 3.1.2.4 says",
    rules_5.SESSION_BY_CLIENT_ID: "session state is identified by the ClientId: no other ClientId resumes it",
    rules_5.SHARED_REFUSED_DISCARDED: "a shared subscription's message refused with 0x80 or above is discarded, "
    "not sent to another member",
    rules_5.SHARED_QOS2_COMPLETED: "a QoS 2 delivery to a shared subscriber that broke off is completed to that "
    "client when it reconnects, not sent to another member",
    rules_5.SHARED_NOT_REASSIGNED: "if the chosen member's session ends before it reconnects, no other member gets "
    "the message",
    rules_5.WILL_DROPPED: "a Will is dropped once published or discarded: it is never published again",
    rules_5.DISCARDED_AFTER_EXPIRY: "a session whose Session Expiry Interval passed is discarded with what it held",
    rules.DUP_ON_REDELIVERY: "a PUBLISH re-sent on a resumed session (unacknowledged before) has DUP 1",
    rules_5.QOS2_SENT_NOT_EXPIRED: "a QoS 2 sender applies no Message Expiry to a PUBLISH it has sent: unacknowledged "
    "when the connection ended, it is re-sent on the resumed session",
    rules.DUP_NOT_PROPAGATED: "the DUP flag of an outgoing PUBLISH says only whether it is a retransmission",
    rules.DELIVERY_QOS: "a message is delivered at the lower of its publish QoS and the granted QoS",
    rules.HIGHEST_QOS_OF_OVERLAPPING: "overlapping subscriptions get the message at the highest QoS among them",
}


def _owed_from(expectation: Expectation) -> float:
    """When ``expectation``'s message was owed, as a finding names it: when the server took it. (A Will may be seen
    a moment before the close it is published for, and its expectation starts that moment earlier; the moment is
    an allowance for the capture's clock, not when the Will was owed.)"""
    message = expectation.message
    if message.early and expectation.after == message.window[0] - message.early:
        return message.window[0]
    return expectation.after
