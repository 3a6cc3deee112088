"""The broker model: what a conforming server owes each connection of a scenario, given what it accepted on all
of them (one common clock).

From the transcripts it rebuilds sessions (by ClientId and CleanSession), subscriptions (with the windows in
which each may and surely did hold), the messages the server took (PUBLISH and Wills, with the window in which
it took each) and the retained message of every topic, and turns them into :class:`Expectation` records: a
message that must (or may) reach a connection, with the QoS, the RETAIN flag and the rule it answers to.

Overlapping subscriptions follow MQTT 3.1.1 section 3.3.5 [MQTT-3.3.5-1]: a message matching several filters of
one session is owed once at the highest QoS of the matching subscriptions (capped by its publish QoS), and the
server MAY send one further copy per additional matching subscription, each at most at that subscription's QoS.
So the model owes one copy at that QoS and allows up to one copy per matching subscription: both broker designs
the spec permits (one copy, as mosquitto does, or a copy per subscription) pass, and only a missing copy, a copy
too many or a copy below the owed QoS is a finding. (MQTT 5.0 adds subscription identifiers, not a new rule.)

Assumptions, each of which errs towards "not assessable" rather than a finding: the scenario holds all traffic
on its topics, except retained messages older than the scenario (unknown, never a finding); the server
processes a request within ``answer_timeout``; state from before a CleanSession 0 session first seen here is
unknown.

Observation: a connection's end is where it was last seen. One never seen to close may have stayed open, so it is
still the receiver of a message the server took after that (a delivery the capture holds always meets an
expectation); whether a message it did not get was owed is decided only if it was seen past the deadline.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mqttaudit.codec import Publish
from mqttaudit.topics import InvalidTopic, TopicIndex, TopicTrie, matches, matches_but_for_dollar_rule

from . import rules
from .config import JudgeConfig
from .events import Closed
from .transcript import Subscribed, Transcript, Unsubscribed

INF: Final = math.inf
#: Up to this many sessions, every message is held against every session.
EXHAUSTIVE_SESSIONS: Final = 64
#: The one namespace of the broker-wide trie.
BROKER: Final = "broker"
Window = tuple[float, float]


def overlaps(a: Window, b: Window) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def covers(outer: Window, inner: Window) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


@dataclass(eq=False)
class Link:
    """One accepted connection: the conversation, its client, and when it was open."""

    name: str
    transcript: Transcript
    client_id: str
    clean: bool
    opened: float
    #: Last observation of the connection: its close, or (``closed`` None) the last time it was seen, after
    #: which it may have stayed open or closed unseen.
    ended: float
    closed: Closed | None
    session: Session | None = None
    #: Session Present the server owed this connection (None: unknown).
    owed_session_present: bool | None = None
    expectations: list[Expectation] = field(default_factory=list)
    #: What new subscriptions must not receive as retained, per matching topic (see :class:`RetainedWatch`).
    watches: list[RetainedWatch] = field(default_factory=list)
    #: Messages published after the connection was last seen (never seen to close), owed to it only if it was
    #: still open: how many, per rule (counted rather than expected: no delivery of them can be in the capture).
    unobserved: dict[str, int] = field(default_factory=dict)

    def open_at(self, time: float) -> bool:
        """Observed open at ``time``."""
        return self.opened <= time <= self.ended

    def may_be_open_at(self, time: float) -> bool:
        """Observed open at ``time``, or opened by then and never seen to close (observation stopped earlier)."""
        return self.opened <= time and (time <= self.ended or self.closed is None)


@dataclass(eq=False)
class Session:
    client_id: str
    clean: bool
    #: The scenario saw the session start empty, so all of its subscriptions are known.
    known: bool
    links: list[Link] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    #: When the server discarded it (a CleanSession 1 connection ended or replaced it).
    ended: float = INF

    def link_at(self, time: float) -> Link | None:
        """The connection the session had at ``time``: one observed open then, else the last one opened by then
        if it was never seen to close (a later connection of the session would have replaced it)."""
        latest = None
        for link in self.links:
            if link.open_at(time):
                return link
            if link.opened <= time:
                latest = link
        return latest if latest is not None and latest.closed is None else None

    def link_during(self, window: Window) -> Link | None:
        """The last connection of the session observed open at some time in ``window``."""
        found = None
        for link in self.links:
            if link.opened <= window[1] and window[0] <= link.ended:
                found = link
        return found

    def link_after(self, time: float) -> Link | None:
        return next((link for link in self.links if link.opened > time), None)


@dataclass(frozen=True, eq=False)
class Subscription:
    link: Link
    event: int
    topic_filter: str
    #: The granted QoS once a SUBACK said, the requested one before.
    qos: int
    #: When it may have been in effect, and when it surely was (None: never surely).
    possible: Window
    definite: Window | None


@dataclass(frozen=True, eq=False)
class Message:
    """An Application Message the server may have taken: a client PUBLISH or a Will."""

    link: Link
    event: int
    publish: Publish
    #: Between these times the server took it.
    window: Window
    #: The server surely took it (acknowledged, or a QoS 0 PUBLISH on a healthy connection, or a due Will).
    certain: bool
    will: bool = False

    @property
    def key(self) -> tuple[str, bytes]:
        return (self.publish.topic, self.publish.payload)


#: The retained state of a topic nobody in the scenario set: unknown, never a finding.
UNKNOWN: Final = "unknown"
RetainedState = Message | None | str  # a message, None (nothing retained), or UNKNOWN


@dataclass(eq=False)
class Expectation:
    """A message the server must (or may) send one connection."""

    link: Link
    message: Message
    must: bool
    #: The rule broken when it never arrives.
    rule: str
    #: Sent because of a new subscription (RETAIN 1) rather than an established one (RETAIN 0).
    retained: bool
    #: The QoS at least one copy must arrive with (when ``must``).
    qos: int
    qos_rule: str
    #: Deliveries before this time cannot be it; after ``deadline`` it is missing.
    after: float
    deadline: float
    #: How many copies may arrive (one per matching subscription [MQTT-3.3.5-1]).
    copies: int = 1
    #: The highest QoS any copy may use (a subscription that may have held allows more than a sure one).
    ceiling: int | None = None
    #: The message must NOT arrive (as retained, when ``retained``): ``rule`` is broken if it does.
    forbidden: bool = False
    delivered: list[Publish] = field(default_factory=list)
    #: The same message allowed on an earlier connection of the session, open while the server may have taken
    #: it: delivered there, it is not owed here.
    elsewhere: Expectation | None = None

    @property
    def key(self) -> tuple[str, bytes]:
        return self.message.key

    @property
    def highest(self) -> int:
        return self.qos if self.ceiling is None else self.ceiling


@dataclass(eq=False)
class RetainedWatch:
    """A new subscription's view of one matching topic: as retained messages, only the topic's retained state
    may arrive [MQTT-3.3.1-6]; any other message published there before is forbidden, under the rule that says
    why (:func:`not_retained_rule`). Held as one watch rather than one forbidden expectation per message ever
    published on the topic (which grows with the capture for every subscription); a RETAIN 1 delivery is
    checked against it when it arrives."""

    topic: str
    #: From the SUBSCRIBE to its SUBACK.
    window: Window
    #: The retained states the topic may have had then (these may arrive).
    states: set[RetainedState]
    #: The rules the forbidden messages of the topic answer to.
    rules: frozenset[str]
    deadline: float


@dataclass(frozen=True)
class ExpectedDelivery:
    """One delivery a conforming broker makes (``must``) or may make: the message, to whom, how."""

    #: The subscriber's connection (the conversation name) and ClientId.
    subscriber: str
    client_id: str
    topic: str
    payload: bytes
    #: The QoS at least one copy must arrive with, and the highest any copy may use.
    qos: int
    highest_qos: int
    #: RETAIN 1: sent because of a new subscription (the topic's retained message) [MQTT-3.3.1-8].
    retain: bool
    #: Owed (a finding when missing) rather than allowed.
    must: bool
    #: The statement the delivery answers to.
    rule: str
    #: The connection that published it and the event of its PUBLISH (a Will: the close of that connection).
    publisher: str
    event: int
    will: bool
    #: How many copies may arrive: one per matching subscription [MQTT-3.3.5-1].
    copies: int
    #: Deliveries before ``after`` cannot be it; after ``deadline`` it is missing.
    after: float
    deadline: float


def deliveries_of(model: Model) -> list[ExpectedDelivery]:
    """The model's expectations as plain records (forbidden deliveries left out), in the order messages were
    taken, then by subscriber."""
    records = [
        ExpectedDelivery(
            subscriber=link.name,
            client_id=link.client_id,
            topic=e.message.publish.topic,
            payload=e.message.publish.payload,
            qos=e.qos,
            highest_qos=e.highest,
            retain=e.retained,
            must=e.must,
            rule=e.rule,
            publisher=e.message.link.name,
            event=e.message.event,
            will=e.message.will,
            copies=e.copies,
            after=e.after,
            deadline=e.deadline,
        )
        for link in model.links
        for e in link.expectations
        if not e.forbidden
    ]
    return sorted(records, key=lambda r: (r.after, r.publisher, r.event, r.subscriber))


class SessionFilters:
    """The subscriptions of every session in a topic trie rooted per session: which of a session's subscriptions
    match a Topic Name, without comparing every filter. Filters the trie refuses (invalid, so a conforming server
    never granted them) and Topic Names it refuses are compared pair by pair instead."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self._trie: TopicTrie[int] = TopicTrie("mqtt")
        self._refused: dict[int, list[Subscription]] = {}
        self._subscriptions: dict[int, list[Subscription]] = {}
        #: Every session's filters in one namespace (value: the session's position), to find the sessions a
        #: message concerns without asking each of them.
        self._broker: TopicTrie[int] = TopicTrie("mqtt")
        self._sessions = sessions
        self._odd: set[int] = set()  # sessions some filter of which only a pair-by-pair comparison can judge
        self._same_client: dict[str, list[int]] = {}
        self._concerned: dict[str, list[Session]] = {}
        self._matching: dict[tuple[int, str], list[Subscription]] = {}
        for position, session in enumerate(sessions):
            key = id(session)
            self._subscriptions[key] = session.subscriptions
            if session.client_id:  # each empty ClientId is a ClientId of its own [MQTT-3.1.3-6]
                self._same_client.setdefault(session.client_id, []).append(position)
            for index, subscription in enumerate(session.subscriptions):
                topic_filter = subscription.topic_filter
                if topic_filter.startswith(("+", "#")):
                    self._odd.add(position)  # it may concern '$' topics under [MQTT-4.7.2-1]
                try:
                    self._trie.add(key, topic_filter, index)
                    self._broker.add(BROKER, topic_filter, position)
                except InvalidTopic:
                    self._refused.setdefault(key, []).append(subscription)
                    self._odd.add(position)

    def concerned(self, topic: str) -> list[Session]:
        """The sessions a message to ``topic`` may concern, in their order: those with a matching filter (live or
        ended), the other sessions of their ClientIds (a discarded session [MQTT-3.1.2-6]), and those whose
        filters a trie cannot judge for this topic. Remembered per topic: messages repeat their topics."""
        found = self._concerned.get(topic)
        if found is None:
            found = self._concerned[topic] = self._find_concerned(topic)
        return found

    def _find_concerned(self, topic: str) -> list[Session]:
        try:
            positions = set(self._broker.match(BROKER, topic))
        except InvalidTopic:
            return list(self._sessions)
        for position in list(positions):
            positions.update(self._same_client.get(self._sessions[position].client_id, ()))
        positions |= self._odd
        return [self._sessions[position] for position in sorted(positions)]

    def matching(self, session: Session, topic: str) -> list[Subscription]:
        """The subscriptions of ``session`` that match ``topic`` (remembered per session and topic)."""
        found = self._matching.get((id(session), topic))
        if found is None:
            found = self._matching[(id(session), topic)] = self._find_matching(session, topic)
        return found

    def _find_matching(self, session: Session, topic: str) -> list[Subscription]:
        key = id(session)
        subscriptions = self._subscriptions.get(key, session.subscriptions)
        try:
            found = [subscriptions[index] for index in sorted(set(self._trie.match(key, topic)))]
        except InvalidTopic:
            return [s for s in subscriptions if matches(s.topic_filter, topic)]
        return found + [s for s in self._refused.get(key, ()) if matches(s.topic_filter, topic)]


@dataclass
class Model:
    links: list[Link]
    sessions: list[Session]
    messages: list[Message]
    #: The messages that set each topic's retained message.
    retained: dict[str, list[Message]]
    filters: SessionFilters
    #: The Topic Names of every message, to find those a filter matches.
    topics: TopicIndex
    #: The messages of each topic and payload, in the order they were taken.
    by_key: dict[tuple[str, bytes], list[Message]] = field(default_factory=dict)
    #: Per topic, when the server first took a RETAIN 0 message there, by the rule it answers to as retained.
    first_unretained: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The sessions of each ClientId (none for the empty ClientId: the server assigns each a unique one).
    by_client: dict[str, list[Session]] = field(default_factory=dict)
    #: The last time any connection to the broker was observed: after it, the capture shows nothing of it.
    horizon: float = INF
    #: Connections left out of the replay: MQTT 5.0 ones, whose routing (Topic Aliases, subscription options,
    #: expiry, shared subscriptions) this model does not follow.
    not_replayed: tuple[str, ...] = ()


def build(
    transcripts: Mapping[str, Transcript], config: JudgeConfig, subscribers: Collection[str] | None = None
) -> Model:
    """The model of one broker from the transcripts of its connections.

    ``subscribers`` limits it to the sessions of those ClientIds (None: every session). Every transcript is still
    a source of messages, so a model per disjoint set of ClientIds (a shard) owes each session exactly what the
    whole model would: a session's expectations depend only on its own connections and on every message. The
    transcripts of other ClientIds need only what they published (their subscriptions and deliveries unused).
    """
    not_replayed = tuple(name for name, transcript in transcripts.items() if speaks_5_0(transcript))
    if not_replayed:
        transcripts = {name: t for name, t in transcripts.items() if name not in not_replayed}
    every_link = sorted(_links(transcripts), key=lambda link: link.opened)
    sessions = _sessions(every_link)
    # Decided on the whole broker, so that every shard decides alike.
    exhaustive = len(sessions) <= EXHAUSTIVE_SESSIONS
    messages, unowned = _messages(transcripts, every_link, config)
    if subscribers is None:
        links = every_link
    else:
        links = [link for link in every_link if link.client_id in subscribers]
        sessions = [session for session in sessions if session.client_id in subscribers]
    for session in sessions:
        session.subscriptions = list(_subscriptions(session))
    retained: dict[str, list[Message]] = {}
    for message in messages:
        if message.publish.retain:
            retained.setdefault(message.publish.topic, []).append(message)
    topics = TopicIndex(dict.fromkeys(message.publish.topic for message in messages))  # each topic once
    model = Model(links, sessions, messages, retained, SessionFilters(sessions), topics)
    model.horizon = max((transcript.end for transcript in transcripts.values()), default=INF)
    model.not_replayed = not_replayed
    for message in messages:
        model.by_key.setdefault(message.key, []).append(message)
        if not message.publish.retain:
            rule = unretained_rule(message)
            firsts = model.first_unretained.setdefault(message.publish.topic, {})
            firsts[rule] = min(firsts.get(rule, INF), message.window[1])
    for session in sessions:
        if session.client_id:
            model.by_client.setdefault(session.client_id, []).append(session)
    # Which messages concern which session: every pair when there are few sessions (a probe's scenario), else
    # through the broker-wide trie. Only the check that nothing leaked to an unrelated subscriber, which never
    # makes a finding of its own (a leak is found where it is delivered), is left out for large scenarios.
    routed: dict[int, list[Message]] = {id(session): [] for session in sessions}
    # A session that did not exist while the server took a message can neither get it nor be owed it: only the
    # sessions alive then are asked (without this, every message of a topic meets every session that ever
    # subscribed to it, which grows with the square of the capture).
    alive = {id(session): _lifetime(session) for session in sessions}
    for message in messages:
        begin, end = message.window
        for session in sessions if exhaustive else model.filters.concerned(message.publish.topic):
            first, last = alive[id(session)]
            if first <= end and begin <= last:
                routed[id(session)].append(message)
    for session in sessions:
        for message in routed[id(session)]:
            _route(model, message, session, config)
        for message, rule in unowned:
            _forbid_unowned(message, rule, session, config)
        for subscription in session.subscriptions:
            _send_retained(model, subscription, config)
    return model


def speaks_5_0(transcript: Transcript) -> bool:
    """The connection opened with an MQTT 5.0 CONNECT (Protocol Level 5)."""
    return transcript.connect is not None and transcript.connect.protocol_level == 5


def _lifetime(session: Session) -> Window:
    """From the session's first connection to its end, or to the end of its last connection if that is later
    (a connection taken over lives on after the session was replaced)."""
    return (session.links[0].opened, max(session.ended, *(link.ended for link in session.links)))


def _links(transcripts: Mapping[str, Transcript]) -> Iterable[Link]:
    for name, transcript in transcripts.items():
        connect = transcript.connect
        if connect is None or not transcript.accepted:
            continue
        closed = transcript.closed
        yield Link(
            name, transcript, connect.client_id, connect.clean_session, transcript.connack_time, transcript.end, closed
        )


def _sessions(links: list[Link]) -> list[Session]:
    """Assigns each connection its session [MQTT-3.1.2-4, -6] and the Session Present it is owed [3.2.2-2, -3]."""
    sessions: list[Session] = []
    current: dict[str, Session] = {}  # the session the server holds per ClientId
    seen: set[str] = set()
    for link in links:
        if not link.client_id:
            # [MQTT-3.1.3-6] The server gives an empty ClientId a unique one: a new session, shared with nobody.
            session = Session("", link.clean, True)
            session.ended = link.closed.time if link.clean and link.closed is not None else INF
            link.owed_session_present = None if link.clean else False
            sessions.append(session)
            session.links.append(link)
            link.session = session
            continue
        held = current.get(link.client_id)
        if held is not None and held.ended <= link.opened:
            held = None
        if link.clean:
            if held is not None:
                held.ended = min(held.ended, link.transcript.connect_time)
            session = Session(link.client_id, True, True)
            session.ended = link.closed.time if link.closed is not None else INF
            sessions.append(session)
        elif held is not None and not held.clean:
            session = held
            link.owed_session_present = True
        else:
            if held is not None:  # a CleanSession 1 session still open: replaced, its state never reused
                held.ended = min(held.ended, link.transcript.connect_time)
            session = Session(link.client_id, False, link.client_id in seen)
            link.owed_session_present = False if session.known else None
            sessions.append(session)
        seen.add(link.client_id)
        current[link.client_id] = session
        session.links.append(link)
        link.session = session
    return sessions


def _subscriptions(session: Session) -> Iterable[Subscription]:
    """Each granted (or still unanswered) filter with its windows: it ends where the session ends, where an
    UNSUBSCRIBE of the same filter starts, or where a new SUBSCRIBE of it replaces it [MQTT-3.8.4-3]."""
    asked = [(link, record) for link in session.links for record in link.transcript.subscribed]
    # Per filter: what may end a subscription to it (a later SUBSCRIBE or an UNSUBSCRIBE of the same filter).
    by_filter: dict[str, list[Subscribed | Unsubscribed]] = {}
    for _, record in asked:
        by_filter.setdefault(record.topic_filter, []).append(record)
    for other in session.links:
        for unsubscribed in other.transcript.unsubscribed:
            by_filter.setdefault(unsubscribed.topic_filter, []).append(unsubscribed)
    for link, record in asked:
        if record.acked is not None and record.granted is None:
            continue  # refused
        possible_end = definite_end = session.ended
        enders = [
            r
            for r in by_filter[record.topic_filter]
            if (r.sent > record.sent if isinstance(r, Subscribed) else r.sent >= record.sent)
        ]
        for ender in enders:
            definite_end = min(definite_end, ender.sent)
            possible_end = min(possible_end, ender.acked if ender.acked is not None else INF)
        qos = record.granted if record.granted is not None else record.requested
        definite = None if record.acked is None else (record.acked, definite_end)
        if definite is not None and definite[0] > definite[1]:
            definite = None
        yield Subscription(link, record.event, record.topic_filter, qos, (record.sent, possible_end), definite)


def _messages(
    transcripts: Mapping[str, Transcript], links: list[Link], config: JudgeConfig
) -> tuple[list[Message], list[tuple[Message, str]]]:
    """The messages the server took, and those it must not have: sent on a refused connection [MQTT-3.1.4-5], in
    or after a client's protocol violation (its delivery acts on the violation), or a Will discarded by DISCONNECT
    [MQTT-3.14.4-3]."""
    by_name = {link.name: link for link in links}
    routed: list[Message] = []
    unowned: list[tuple[Message, str]] = []
    for name, transcript in transcripts.items():
        link = by_name.get(name)
        source = link or Link(name, transcript, "", True, transcript.connect_time, transcript.end, None)
        refused = transcript.connack is not None and transcript.connack.return_code != 0
        for record in transcript.published:
            taken = record.accepted if record.accepted is not None else record.sent + config.answer_timeout
            message = Message(source, record.event, record.message, (record.sent, taken), record.certain)
            if link is not None and (transcript.client_offence is None or record.event < transcript.client_offence):
                routed.append(message)
            elif refused:
                unowned.append((message, rules.NOTHING_PROCESSED_AFTER_REFUSAL))
            elif transcript.client_offence is not None and transcript.client_offence_rule:
                unowned.append((message, transcript.client_offence_rule))
        will = None if transcript.connect is None else transcript.connect.will
        if link is None or will is None:
            continue
        publish = Publish(topic=will.topic, payload=will.message, qos=will.qos, retain=will.retain)
        closing = (link.ended, link.ended)
        if transcript.disconnected and transcript.client_offence is None:
            unowned.append(
                (Message(link, transcript.end_event, publish, closing, True, True), rules.WILL_DISCARDED_ON_DISCONNECT)
            )
        elif transcript.closed is not None:
            routed.append(Message(link, transcript.end_event, publish, closing, True, True))
    return routed, unowned


def _route(model: Model, message: Message, session: Session, config: JudgeConfig) -> None:
    """The live delivery of ``message`` to ``session``: owed when a matching subscription surely held for the
    whole time the server was taking the message [MQTT-4.5.0-1]; forbidden when the session has a reason not
    to get it."""
    topic = message.publish.topic
    possible = [s for s in model.filters.matching(session, topic) if overlaps(s.possible, message.window)]
    if not possible:
        _forbid_live(model, message, session, config)
        return
    definite = [s for s in possible if s.definite is not None and covers(s.definite, message.window)]
    must = message.certain and bool(definite)
    qos = min(message.publish.qos, max(s.qos for s in (definite or possible)))
    ceiling = min(message.publish.qos, max(s.qos for s in possible))
    qos_rule = rules.HIGHEST_QOS_OF_OVERLAPPING if len(possible) > 1 else rules.DELIVERY_QOS
    taken = message.window[1]
    # The connection open when the server surely had the message (or that may still have been: observation of it
    # stopped earlier), else the last one open while it may have taken it: a delivery there is this message,
    # and its absence is settled by how the connection ended.
    link = session.link_at(taken) or session.link_during(message.window)
    earlier = None
    if link is not None:
        if link.opened > message.window[0]:
            # The server may have taken it before this connection opened, while the session was offline: then
            # only a persistent session keeps it, and only at QoS 1 or 2 [MQTT-3.1.2-5].
            must = must and not session.clean and qos > 0
            earlier = _open_before(session, link, message.window[0])
        rule = _live_rule(message, definite, link)
        if link.ended < message.window[0]:
            if must:
                for name in (rule, qos_rule):
                    link.unobserved[name] = link.unobserved.get(name, 0) + 1
            following = session.link_after(taken)
            if following is not None and not session.clean and qos > 0:
                # Kept for the next connection if this one was gone [MQTT-3.1.2-5]: allowed there, not owed.
                limit = following.opened + config.answer_timeout
                following.expectations.append(
                    Expectation(
                        following,
                        message,
                        False,
                        rules.OFFLINE_MESSAGES_KEPT,
                        False,
                        qos,
                        qos_rule,
                        following.opened,
                        limit,
                        len(possible),
                        ceiling=ceiling,
                    )
                )
            return
        after, deadline = message.window[0], taken + config.answer_timeout
    else:
        # [MQTT-3.1.2-5] Offline: a persistent session keeps QoS 1 and 2 messages for its next connection.
        link = session.link_after(taken)
        if link is None:
            return
        must = must and not session.clean and qos > 0
        rule, after, deadline = rules.OFFLINE_MESSAGES_KEPT, link.opened, link.opened + config.answer_timeout
    expectation = Expectation(
        link, message, must, rule, False, qos, qos_rule, after, deadline, len(possible), ceiling=ceiling
    )
    link.expectations.append(expectation)
    if earlier is not None:
        # The session's previous connection was open while the server may have taken the message: a copy may
        # have gone there instead.
        rule = _live_rule(message, definite, earlier)
        expectation.elsewhere = Expectation(
            earlier, message, False, rule, False, qos, qos_rule, after, deadline, len(possible), ceiling=ceiling
        )
        earlier.expectations.append(expectation.elsewhere)


def _live_rule(message: Message, definite: list[Subscription], link: Link) -> str:
    """The rule a live delivery to ``link`` answers to."""
    if message.will:
        return rules.WILL_PUBLISHED
    if definite and all(s.link is not link for s in definite):
        return rules.SESSION_RESUMED
    return rules.MESSAGE_ROUTED


def _open_before(session: Session, link: Link, since: float) -> Link | None:
    """The connection of ``session`` before ``link`` if it was seen open at or after ``since``."""
    index = session.links.index(link)
    if index == 0:
        return None
    previous = session.links[index - 1]
    return previous if previous.ended >= since else None


def _forbid_live(model: Model, message: Message, session: Session, config: JudgeConfig) -> None:
    """A message no subscription of the session matched while the server took it must not arrive, where a
    rule says why: the filter was unsubscribed [MQTT-3.10.4-2], belonged to a discarded session [MQTT-3.1.2-6],
    or would match but for the '$' rule [MQTT-4.7.2-1]."""
    link = session.link_at(message.window[1])
    if link is None or not session.known or link.ended < message.window[0]:
        return
    topic = message.publish.topic
    mine = model.filters.matching(session, topic)
    if any(s.possible[1] < message.window[0] for s in mine):
        rule = rules.UNSUBSCRIBED_STOPS_DELIVERY
    elif not mine and any(
        model.filters.matching(other, topic)
        for other in model.by_client.get(session.client_id, ())
        if other is not session and other.ended <= message.window[0]
    ):
        rule = rules.CLEAN_SESSION_DISCARDED
    elif topic.startswith("$") and any(
        matches_but_for_dollar_rule(s.topic_filter, topic) and overlaps(s.possible, message.window)
        for s in session.subscriptions
    ):
        rule = rules.DOLLAR_TOPICS_NOT_MATCHED_BY_WILDCARDS
    elif any(s.definite is not None and covers(s.definite, message.window) for s in session.subscriptions):
        # A subscriber none of whose filters matches: the message would leak to it [MQTT-3.3.2-3]. Its arrival
        # is reported where it is seen (deliveries); its absence past the deadline keeps the rule.
        rule = rules.DELIVERY_MATCHES_SUBSCRIPTION
    else:
        return
    _forbid(link, message, rule, config)


def _forbid_unowned(message: Message, rule: str, session: Session, config: JudgeConfig) -> None:
    """A message the server must not have taken reaches no subscriber that would match it."""
    for subscription in session.subscriptions:
        if matches(subscription.topic_filter, message.publish.topic) and overlaps(
            subscription.possible, message.window
        ):
            link = session.link_at(message.window[1])
            if link is not None and link.ended >= message.window[0]:
                _forbid(link, message, rule, config)
            return


def _forbid(link: Link, message: Message, rule: str, config: JudgeConfig) -> None:
    window = message.window
    forbid(link, message, rule, retained=False, after=window[0], deadline=window[1] + config.answer_timeout)


def forbid(link: Link, message: Message, rule: str, *, retained: bool, after: float, deadline: float) -> Expectation:
    """``message`` must not reach ``link`` (as a retained message, when ``retained``) between ``after`` and
    ``deadline``: ``rule`` is broken if it does."""
    expectation = Expectation(link, message, False, rule, retained, 0, rule, after, deadline, forbidden=True)
    link.expectations.append(expectation)
    return expectation


def retained_states(changes: list[Message], window: Window) -> set[RetainedState]:
    """The retained message a topic may hold at some time in ``window``, given the retained PUBLISHes (and
    Wills) that set it: a zero-byte one clears it [MQTT-3.3.1-10, -11], a QoS 0 one may be dropped any time
    [MQTT-3.3.1-7], and before the first one the state is unknown."""
    settled = [c for c in changes if c.certain and c.window[1] <= window[0]]
    last = max(settled, key=lambda c: c.window[1], default=None)
    states: set[RetainedState] = {UNKNOWN} if last is None else set()
    for change in changes:
        if change.window[0] > window[1] or (last is not None and change.window[1] < last.window[0]):
            continue
        if not change.certain:
            states.add(UNKNOWN if last is None else last)
        if change.publish.payload:
            states.add(change)
            if change.publish.qos == 0:
                states.add(None)
        else:
            states.add(None)
    return states


def _send_retained(model: Model, subscription: Subscription, config: JudgeConfig) -> None:
    """[MQTT-3.3.1-6] A new subscription gets the retained message of every matching topic (with RETAIN 1,
    [MQTT-3.3.1-8]) and, as retained, nothing else that was published there."""
    if subscription.definite is None:
        return
    window = (subscription.possible[0], subscription.definite[0])
    link = subscription.link
    for topic in model.topics.matching(subscription.topic_filter):
        changes = model.retained.get(topic, [])
        states = retained_states(changes, window)
        for state in states:
            if isinstance(state, Message):
                must = len(states) == 1 and state.publish.qos > 0
                rule = rules.WILL_RETAINED if state.will else rules.RETAINED_SENT_ON_SUBSCRIBE
                qos = min(state.publish.qos, subscription.qos)
                deadline = window[1] + config.answer_timeout
                link.expectations.append(
                    Expectation(link, state, must, rule, True, qos, rules.DELIVERY_QOS, window[0], deadline)
                )
        # Every other message taken there before is forbidden as retained: RETAIN 0 ones (by when the first was
        # taken) and retained ones the topic no longer held.
        forbidden = {rule for rule, first in model.first_unretained.get(topic, {}).items() if first <= window[0]}
        for change in changes:
            superseded = None if change in states else not_retained_rule(change, changes, window)
            if superseded is not None:
                forbidden.add(superseded)
        if forbidden:
            deadline = window[1] + config.answer_timeout
            link.watches.append(RetainedWatch(topic, window, states, frozenset(forbidden), deadline))


def unretained_rule(message: Message) -> str:
    """Why a RETAIN 0 message (or Will) never becomes its topic's retained message."""
    return rules.WILL_NOT_RETAINED if message.will else rules.NON_RETAINED_KEEPS_RETAINED


def not_retained_rule(message: Message, changes: list[Message], window: Window) -> str | None:
    """Why ``message`` is not the retained message of its topic during ``window``: never retained
    [MQTT-3.3.1-12, 3.1.2-16], zero-byte [MQTT-3.3.1-11], or superseded before by a zero-byte [-10], a QoS 0
    [-7] or another [-6] retained message. None when it was published too late to tell."""
    if message.window[1] > window[0]:
        return None
    if not message.publish.retain:
        return unretained_rule(message)
    if not message.publish.payload:
        return rules.ZERO_BYTE_RETAINED_NOT_STORED
    later = [c for c in changes if c.certain and message.window[1] <= c.window[0] and c.window[1] <= window[0]]
    if not later:
        return None
    replacement = min(later, key=lambda c: c.window[0])
    if not replacement.publish.payload:
        return rules.ZERO_BYTE_RETAINED_CLEARS
    if replacement.publish.qos == 0:
        return rules.RETAINED_QOS0_REPLACES
    return rules.RETAINED_SENT_ON_SUBSCRIBE
