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

MQTT 5.0 connections are replayed by the same model, with what 5.0 changes: Clean Start and the Session Expiry
Interval (CONNECT's, or DISCONNECT's) decide when a session ends; a Will waits for its Will Delay Interval (or the
session's end) and is dropped by DISCONNECT 0x00 only; No Local, Retain As Published and Retain Handling shape
what each subscription gets; a shared subscription's message is owed to its share group, one member of it
(:class:`GroupDelivery`); a message whose Message Expiry Interval passed is owed to nobody. Servers count these
intervals in whole seconds, so a time within :data:`expiry_5.GRANULARITY` of an interval's end decides nothing.
Topics named only by a Topic Alias are resolved in the transcripts. A 5.0 client's message sent on to a 3.1.1
subscriber is held to the 5.0 rules it carries (its expiry).

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
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from mqttaudit.codec import Direction, Publish
from mqttaudit.codec.properties import MAXIMUM_PACKET_SIZE, SESSION_EXPIRY_INTERVAL, TOPIC_ALIAS_MAXIMUM, first
from mqttaudit.topics import (
    InvalidTopic,
    TopicIndex,
    TopicTrie,
    matches,
    matches_but_for_dollar_rule,
    parse_shared,
)

from . import expiry_5, reasons, rules
from . import model_rules_5 as rules_5
from .config import JudgeConfig
from .discarded_5 import smallest_forwarded
from .events import Closed
from .transcript import Delivered, Published, Subscribed, Transcript, Unsubscribed

INF: Final = math.inf
#: Up to this many sessions, every message is held against every session.
EXHAUSTIVE_SESSIONS: Final = 64
#: Seconds within which two events of different connections are one instant: the order of their times says
#: nothing. Each connection's events are stamped when its own reader handles its bytes (the live prober: one
#: connection after another on one event loop, so bytes that arrive together are stamped up to one turn of the
#: loop apart, in whatever order it serves them: well under a millisecond alone; on a loaded machine the loop runs
#: a reader tens of milliseconds late, and a round trip between two of its sockets (a Will the prober acknowledges
#: before the close comes) took more than 5 ms in the suite; a capture: when each segment passed the interface,
#: microseconds). And a server that closes a connection and publishes its Will writes the two to two sockets in an
#: order no statement fixes: real brokers write the Will first, 0.1-0.2 ms before the close. So a Will seen less
#: than this before the close of its connection is seen after it: the evidence cannot order them more finely.
SAME_INSTANT: Final = 0.05
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
    #: An MQTT 5.0 connection: Clean Start rather than CleanSession, the session outlives it by ``expiry``.
    v5: bool = False
    #: MQTT 5.0: the Session Expiry Interval in effect when it ended (CONNECT's, or the DISCONNECT's), seconds.
    expiry: float = 0.0
    #: Why the Session Present owed is unknown when it is (None: the session is known, or never seen before).
    present_unknown: str | None = None
    #: Rules the model cannot decide on this connection, with why and when: (rule, reason, time).
    unknown: list[tuple[str, str, float]] = field(default_factory=list)
    #: MQTT 5.0 Clean Start 0: the session its ClientId had was discarded before it connected because its Session
    #: Expiry Interval had passed (5.0 statement 4.1.0-2).
    after_expiry: bool = False

    def open_at(self, time: float) -> bool:
        """Observed open at ``time``."""
        return self.opened <= time <= self.ended

    def may_be_open_at(self, time: float) -> bool:
        """Observed open at ``time``, or opened by then and never seen to close (observation stopped earlier)."""
        return self.opened <= time and (time <= self.ended or self.closed is None)


@dataclass(eq=False)
class Session:
    client_id: str
    #: The session ends with its connection: CleanSession 1, or (5.0) a Session Expiry Interval of 0 when its
    #: latest connection ended.
    clean: bool
    #: The scenario saw the session start empty, so all of its subscriptions are known.
    known: bool
    links: list[Link] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    #: Its MQTT 5.0 shared subscriptions (``$share/{ShareName}/{filter}``), routed per share group.
    shared: list[Subscription] = field(default_factory=list)
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
    #: The filter messages are matched against (a shared subscription's without ``$share/{ShareName}/``).
    topic_filter: str
    #: The granted QoS once a SUBACK said, the requested one before.
    qos: int
    #: When it may have been in effect, and when it surely was (None: never surely).
    possible: Window
    definite: Window | None
    #: The filter as subscribed, and the MQTT 5.0 Subscription Options and Identifier (3.1.1: off, 0, none).
    full_filter: str = ""
    no_local: bool = False
    as_published: bool = False
    retain_handling: int = 0
    identifier: int | None = None
    #: The ShareName of a shared subscription (None: not shared).
    share: str | None = None

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        link: Link,
        event: int,
        topic_filter: str,
        qos: int,
        possible: Window,
        definite: Window | None,
        full_filter: str = "",
        no_local: bool = False,
        as_published: bool = False,
        retain_handling: int = 0,
        identifier: int | None = None,
        share: str | None = None,
    ) -> None:
        object.__setattr__(self, "link", link)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "topic_filter", topic_filter)
        object.__setattr__(self, "qos", qos)
        object.__setattr__(self, "possible", possible)
        object.__setattr__(self, "definite", definite)
        object.__setattr__(self, "full_filter", full_filter)
        object.__setattr__(self, "no_local", no_local)
        object.__setattr__(self, "as_published", as_published)
        object.__setattr__(self, "retain_handling", retain_handling)
        object.__setattr__(self, "identifier", identifier)
        object.__setattr__(self, "share", share)


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
    #: A Will: how long before ``window`` a copy may be seen and still be this message (see :func:`_same_instant`).
    early: float = 0.0

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        link: Link,
        event: int,
        publish: Publish,
        window: Window,
        certain: bool,
        will: bool = False,
        early: float = 0.0,
    ) -> None:
        object.__setattr__(self, "link", link)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "publish", publish)
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "certain", certain)
        object.__setattr__(self, "will", will)
        object.__setattr__(self, "early", early)

    @property
    def key(self) -> tuple[str, bytes]:
        return (self.publish.topic, self.publish.payload)

    @property
    def name(self) -> tuple[str, int, bool]:
        """What names it in any model of the broker: its connection, event and whether it is a Will."""
        return (self.link.name, self.event, self.will)

    @property
    def expiry(self) -> float | None:
        """Its MQTT 5.0 Message Expiry Interval (None: it does not expire)."""
        return expiry_5.message_expiry(self.publish.properties)


def in_memory(message: Message, time: float, config: JudgeConfig) -> bool:
    """A copy observed at ``time`` may repeat ``message``: the broker's state holds it (a retained PUBLISH or a
    Will, kept in the skeleton of :mod:`.stream`), or ``time`` falls between when the server could start taking it
    and its deadline plus the late window (:attr:`.JudgeConfig.late_window`)."""
    if message.will or message.publish.retain:
        return True
    begin, end = message.window
    return begin - message.early <= time <= end + config.answer_timeout + config.late_window


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
    #: The deliveries matched to it (as ``delivered``, with their events and times).
    arrivals: list[Delivered] = field(default_factory=list)
    #: The same message allowed on an earlier connection of the session, open while the server may have taken
    #: it: delivered there, it is not owed here.
    elsewhere: Expectation | None = None
    #: MQTT 5.0 Retain As Published of the subscriptions a live copy goes under: True or False when they agree,
    #: None when they differ (either flag may be right).
    as_published: bool | None = False
    #: The subscriptions the delivery answers to, and whether each of them surely held (their identifiers are
    #: owed only then).
    subscriptions: tuple[Subscription, ...] = ()
    #: Rules decided together with ``rule`` (held, broken or undecided with it).
    also: tuple[str, ...] = ()
    sure: bool = True
    #: The share group it is one member's copy of (one member gets it, not all).
    group: GroupDelivery | None = None
    #: Why the server may withhold a message it would otherwise owe here (see :func:`withheld`): delivered, it is
    #: judged as an owed one; absent, its rules are not assessable for this reason.
    withheld_by: str | None = None
    #: The routing verdicts decided it (no later copy can change it).
    decided: bool = False

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        link: Link,
        message: Message,
        must: bool,
        rule: str,
        retained: bool,
        qos: int,
        qos_rule: str,
        after: float,
        deadline: float,
        copies: int = 1,
        ceiling: int | None = None,
        forbidden: bool = False,
        delivered: list[Publish] | None = None,
        arrivals: list[Delivered] | None = None,
        elsewhere: Expectation | None = None,
        as_published: bool | None = False,
        subscriptions: tuple[Subscription, ...] = (),
        also: tuple[str, ...] = (),
        sure: bool = True,
        group: GroupDelivery | None = None,
        withheld_by: str | None = None,
        decided: bool = False,
    ) -> None:
        self.link = link
        self.message = message
        self.must = must
        self.rule = rule
        self.retained = retained
        self.qos = qos
        self.qos_rule = qos_rule
        self.after = after
        self.deadline = deadline
        self.copies = copies
        self.ceiling = ceiling
        self.forbidden = forbidden
        self.delivered = [] if delivered is None else delivered
        self.arrivals = [] if arrivals is None else arrivals
        self.elsewhere = elsewhere
        self.as_published = as_published
        self.subscriptions = subscriptions
        self.also = also
        self.sure = sure
        self.group = group
        self.withheld_by = withheld_by
        self.decided = decided

    @property
    def key(self) -> tuple[str, bytes]:
        return self.message.key

    @property
    def highest(self) -> int:
        return self.qos if self.ceiling is None else self.ceiling

    def matches_at(self, time: float, late_window: float) -> bool:
        """A copy observed at ``time`` may be this delivery: not before it could be sent, and no later than its
        deadline plus the late window (:attr:`.JudgeConfig.late_window`)."""
        return self.after <= time <= self.deadline + late_window


@dataclass(eq=False)
class GroupDelivery:
    """A message owed to one member session of a share group [MQTT 5.0 section 4.8.2]: each member's copy is
    allowed, and the group (not any one member) misses the message when none arrives."""

    message: Message
    share: str
    topic_filter: str
    members: list[Expectation]
    must: bool
    deadline: float
    #: The routing verdicts decided it.
    decided: bool = False


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
    #: The routing verdicts decided it.
    decided: bool = False


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
                if not unchanged_by_normalising(topic_filter):
                    self._odd.add(position)  # it may match once normalised what it does not match [MQTT-4.7.3-4]
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
            if not unchanged_by_normalising(topic):
                # [MQTT-4.7.3-4] A filter that matches it only once both are normalised: one that normalising
                # changes is odd (above), one it leaves as it is matches the normalised topic as written.
                positions.update(self._broker.match(BROKER, normalised(topic)))
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
    #: MQTT 5.0 messages owed to one member of a share group.
    groups: list[GroupDelivery] = field(default_factory=list)
    #: Every session of the broker, when the model holds some of them only (``subscribers`` of :func:`build`):
    #: whether another ClientId's session was held is a question about all of them [MQTT-3.1.3-2].
    every_session: list[Session] | None = None


def build(
    transcripts: Mapping[str, Transcript],
    config: JudgeConfig,
    owns: Callable[[float], bool] | None = None,
    subscribers: Collection[str] | None = None,
    exhaustive: bool | None = None,
) -> Model:
    """The model of one broker from the transcripts of its connections.

    ``owns`` limits it to one slice of time (None: all of it): only the messages the server started taking then,
    and the subscriptions asked for then, are routed (see :func:`.stream.slice_model`).

    ``subscribers`` limits it to the sessions of those connections (None: every session), given whole: every
    connection of a ClientId, and every connection of a session in a share group with one of them (see
    :func:`.stream.shard_connections`). Every transcript is still a source of messages, so a model per such set
    of connections (a shard) owes each session exactly what the whole model owes it: a session's expectations
    depend only on its own connections, its share groups and every message.

    ``exhaustive``: every message is put to every session (True) or only to the sessions its topic concerns
    (False, :meth:`SessionFilters.concerned`); None decides by the number of sessions
    (:data:`EXHAUSTIVE_SESSIONS`).
    """
    mine = owns or _always
    every_link = sorted(_links(transcripts), key=lambda link: link.opened)
    sessions = _sessions(every_link)
    # Decided on the whole broker, so that every shard decides alike.
    if exhaustive is None:
        exhaustive = len(sessions) <= EXHAUSTIVE_SESSIONS
    messages, unowned = _messages(transcripts, every_link, config)
    every_session = sessions
    if subscribers is None:
        links = every_link
    else:
        links = [link for link in every_link if link.name in subscribers]
        sessions = [session for session in sessions if session.links[0].name in subscribers]
    for session in sessions:
        every = list(_subscriptions(session))
        session.subscriptions = [s for s in every if s.share is None]
        session.shared = [s for s in every if s.share is not None]
    retained: dict[str, list[Message]] = {}
    for message in messages:
        if message.publish.retain:
            retained.setdefault(message.publish.topic, []).append(message)
    topics = TopicIndex(dict.fromkeys(message.publish.topic for message in messages))  # each topic once
    model = Model(links, sessions, messages, retained, SessionFilters(sessions), topics)
    model.every_session = every_session
    model.horizon = max((transcript.end for transcript in transcripts.values()), default=INF)
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

    def asked(message: Message) -> Iterator[Session]:
        """The sessions alive while the server took ``message`` among those its topic concerns."""
        begin, end = message.window
        for session in sessions if exhaustive else model.filters.concerned(message.publish.topic):
            first, last = alive[id(session)]
            if first <= end and begin <= last:
                yield session

    for message in messages:
        if mine(message.window[0] - message.early):  # a slice owns the messages a copy observed in it may be first
            for session in asked(message):
                routed[id(session)].append(message)
    # A message the server must not have taken is barred only from sessions with a connection open while it was
    # taken and a filter that matches its topic (all :func:`_forbid_unowned` and :func:`_forbid_again` act on).
    # (Every session asked of every such message of the capture, in every slice, grew with the square of it.)
    barred: dict[int, list[tuple[Message, str]]] = {id(session): [] for session in sessions}
    for message, rule in unowned:
        if mine(message.window[0]):
            for session in asked(message):
                barred[id(session)].append((message, rule))
    for session in sessions:
        for message in routed[id(session)]:
            route(model, message, session, config)
        for message, rule in barred[id(session)]:
            if rule == rules_5.WILL_DROPPED:
                _forbid_again(message, session, config)
            else:
                _forbid_unowned(message, rule, session, config)
        for subscription in session.subscriptions:
            if mine(subscription.possible[0]):
                _send_retained(model, subscription, config)
    share_groups(model, config, mine)
    return model


def _always(time: float) -> bool:
    return True


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
        link = Link(
            name, transcript, connect.client_id, connect.clean_session, transcript.connack_time, transcript.end, closed
        )
        if transcript.speaks_5_0:
            link.v5 = True
            # [MQTT-3.1.2-23] The CONNECT's Session Expiry Interval (absent: 0), unless DISCONNECT changed it.
            expiry = expiry_5.seconds(connect.properties, SESSION_EXPIRY_INTERVAL) or 0.0
            if transcript.disconnect_expiry is not None:
                changed = transcript.disconnect_expiry
                expiry = INF if changed == expiry_5.NEVER else float(changed)
            link.expiry = expiry
        yield link


def _session_end(link: Link) -> float:
    """When the server discards the session of ``link`` once it closes: at the close for CleanSession 1 (3.1.1)
    or a Session Expiry Interval of 0 (5.0), that long after it otherwise; never while no close was seen."""
    if link.closed is None:
        return INF
    if link.v5:
        return link.closed.time + link.expiry
    return link.closed.time if link.clean else INF


def _sessions(links: list[Link]) -> list[Session]:
    """Assigns each connection its session [MQTT-3.1.2-4, -6] and the Session Present it is owed [3.2.2-2, -3]."""
    sessions: list[Session] = []
    current: dict[str, Session] = {}  # the session the server holds per ClientId
    seen: set[str] = set()
    for link in links:
        if link.v5:
            _session_5_0(link, sessions, current, seen)
            continue
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


def _session_5_0(link: Link, sessions: list[Session], current: dict[str, Session], seen: set[str]) -> None:
    """An MQTT 5.0 connection's session: Clean Start 1 discards the one held [MQTT-3.1.2-4], Clean Start 0
    resumes it if it has not expired [MQTT-3.1.2-5] (else a new one [MQTT-3.1.2-6]); whatever the connection,
    the session then lasts its Session Expiry Interval past the close [MQTT-3.1.2-23]. A connection within the
    timers' granularity of the expiry may find the session or not: a new session whose prior state is unknown."""
    client_id = link.client_id
    held = current.get(client_id) if client_id else None
    unsure = held is not None and held.ended != INF and abs(held.ended - link.opened) < expiry_5.GRANULARITY
    if held is not None and (unsure or held.ended <= link.opened):
        # 5.0 statement 4.1.0-2 (key DISCARDED_AFTER_EXPIRY): a session kept past its connection (expiry above 0)
        # that ran out before this CONNECT.
        link.after_expiry = not unsure and not held.clean and not link.clean
        held = None
    if link.clean or held is None:
        if held is not None:
            held.ended = min(held.ended, link.transcript.connect_time)
        # [MQTT-3.1.3-6] an empty ClientId gets a unique one: a new session, shared with nobody.
        session = Session(client_id, True, link.clean or not client_id or (client_id in seen and not unsure))
        sessions.append(session)
        if not link.clean:
            link.owed_session_present = False if session.known else None
            if unsure:
                link.present_unknown = (
                    "the session may or may not have expired when the client connected again (its Session Expiry "
                    f"Interval ends within {expiry_5.GRANULARITY:g} s of the CONNECT)"
                )
    else:
        session = held
        link.owed_session_present = True
    session.clean = link.expiry == 0
    session.ended = _session_end(link)
    if client_id:
        seen.add(client_id)
        current[client_id] = session
    session.links.append(link)
    link.session = session


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
        topic_filter, share = record.topic_filter, None
        if link.v5:
            try:
                shared = parse_shared(topic_filter)
            except InvalidTopic:
                shared = None  # never granted by a conforming server: matched as it is
            if shared is not None:
                share, topic_filter = shared
        yield Subscription(
            link,
            record.event,
            topic_filter,
            qos,
            (record.sent, possible_end),
            definite,
            record.topic_filter,
            record.no_local,
            record.retain_as_published,
            record.retain_handling,
            record.identifier,
            share,
        )


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
        source = sender(name, transcript, link)
        for record in transcript.published:
            taken = message_of(record, source, link is not None, config)
            if taken is None:
                continue
            message, rule = taken
            if rule is None:
                routed.append(message)
            else:
                unowned.append((message, rule))
        will = None if transcript.connect is None else transcript.connect.will
        if link is None or will is None:
            continue
        publish = Publish(
            topic=will.topic, payload=will.message, qos=will.qos, retain=will.retain, properties=will.properties
        )
        if link.v5:
            _will_5_0(link, publish, routed, unowned, config)
            continue
        closing = (link.ended, link.ended)
        if transcript.disconnected and transcript.client_offence is None:
            unowned.append(
                (Message(link, transcript.end_event, publish, closing, True, True), rules.WILL_DISCARDED_ON_DISCONNECT)
            )
        elif transcript.closed is not None:
            routed.append(Message(link, transcript.end_event, publish, closing, True, True, _same_instant(link)))
    return routed, unowned


def sender(name: str, transcript: Transcript, link: Link | None) -> Link:
    """The connection ``name`` as the sender of its messages: its link when the server accepted it."""
    return link or Link(name, transcript, "", True, transcript.connect_time, transcript.end, None)


def message_of(
    record: Published, source: Link, accepted: bool, config: JudgeConfig
) -> tuple[Message, str | None] | None:
    """The message of a client's PUBLISH ``record`` on ``source`` (``accepted``: a connection the server
    accepted), with None when the server takes it to route, or with the rule it breaks by taking it; None when
    neither applies (nothing to model)."""
    transcript = source.transcript
    taken = record.accepted if record.accepted is not None else record.sent + config.answer_timeout
    message = Message(source, record.event, record.message, (record.sent, taken), record.certain)
    if accepted and (transcript.client_offence is None or record.event < transcript.client_offence):
        return message, None
    if transcript.connack is not None and transcript.connack.return_code != 0:
        return message, rules.NOTHING_PROCESSED_AFTER_REFUSAL
    if transcript.client_offence is not None and transcript.client_offence_rule:
        return message, transcript.client_offence_rule
    return None


def _will_5_0(
    link: Link, publish: Publish, routed: list[Message], unowned: list[tuple[Message, str]], config: JudgeConfig
) -> None:
    """An MQTT 5.0 Will: discarded by a DISCONNECT with Reason Code 0x00 only [MQTT-3.14.4-3] (0x04 asks for it),
    else published once the Will Delay Interval has passed or the session ended, whichever comes first
    [MQTT-3.1.2-8], unless a connection to the session came first (5.0 statement 3.1.3-9, key WILL_DELAY). Once
    published or discarded it is dropped [MQTT-3.1.2-10]: never published (again) while the session lasts."""
    transcript = link.transcript
    session = link.session
    ended = INF if session is None else session.ended
    if transcript.client_offence is None and transcript.disconnected and (transcript.disconnect_reason or 0) == 0:
        discarded = Message(link, transcript.end_event, publish, (link.ended, link.ended), True, True)
        unowned.append((discarded, rules.WILL_DISCARDED_ON_DISCONNECT))
        # Later, until the session ends (when a Will kept with it would go out at the latest), nothing either.
        if ended != INF:
            start = link.ended + config.answer_timeout
            later = (start, max(start, ended + expiry_5.GRANULARITY))
            unowned.append((Message(link, transcript.end_event, publish, later, True, True), rules_5.WILL_DROPPED))
        return
    if link.closed is None:
        return  # never seen to close: the Will may still be pending
    closed = link.closed.time
    delay = expiry_5.seconds(publish.properties, expiry_5.WILL_DELAY_INTERVAL) or 0.0
    due = min(closed + delay, ended)
    index = -1 if session is None else session.links.index(link)
    following = None if session is None or index + 1 >= len(session.links) else session.links[index + 1]
    grain = expiry_5.GRANULARITY if delay else 0.0
    window = (max(closed, due - grain), due + grain)
    if following is not None and following.transcript.connect_time < window[0] and due < ended:
        # The session resumed before the delay passed: the Will is never sent.
        suppressed = Message(link, transcript.end_event, publish, (closed, window[1]), True, True)
        unowned.append((suppressed, rules_5.WILL_DELAY))
        return
    resumed_near = following is not None and following.transcript.connect_time <= window[1] and due < ended
    early = _same_instant(link) if window[0] == closed else 0.0
    routed.append(Message(link, transcript.end_event, publish, window, not resumed_near, True, early))
    if not resumed_near and ended != INF:
        # Published once: a copy beyond the one owed, until the session ends, was sent again.
        again = (window[0], max(window[1], ended + expiry_5.GRANULARITY))
        unowned.append((Message(link, transcript.end_event, publish, again, True, True), rules_5.WILL_DROPPED))
    if window[0] > closed:
        # Not before the delay: a copy sent while it runs breaks [MQTT-3.1.2-8] as well.
        unowned.append(
            (Message(link, transcript.end_event, publish, (closed, window[0]), True, True), rules.WILL_PUBLISHED)
        )


def _too_large_for(link: Link, message: Message, qos: int) -> bool:
    """Forwarded at ``qos`` to the 5.0 connection ``link``, ``message`` cannot keep within the Maximum Packet Size
    its CONNECT declared, however the server wrote it (:func:`.discarded_5.smallest_forwarded`)."""
    connect = link.transcript.connect
    maximum = None if connect is None or not link.v5 else first(connect.properties, MAXIMUM_PACKET_SIZE)
    if not isinstance(maximum, int) or connect is None:
        return False
    aliases = bool(first(connect.properties, TOPIC_ALIAS_MAXIMUM))
    return smallest_forwarded(message.publish, qos, aliases=aliases) > maximum


def _same_instant(link: Link) -> float:
    """How long before the close of ``link`` a Will published for it may be seen: :data:`SAME_INSTANT` when the
    server closed it (or nobody knows who did), since the server's close and the Will it publishes for it are one
    act written to two sockets in either order; none for a close of the client's own, seen before the server can
    learn of it."""
    closed = link.closed
    return 0.0 if closed is None or closed.by is Direction.FROM_CLIENT else SAME_INSTANT


def route(model: Model, message: Message, session: Session, config: JudgeConfig) -> None:
    """The live delivery of ``message`` to ``session``: owed when a matching subscription surely held for the
    whole time the server was taking the message [MQTT-4.5.0-1]; forbidden when the session has a reason not
    to get it."""
    topic = message.publish.topic
    possible = [s for s in model.filters.matching(session, topic) if overlaps(s.possible, message.window)]
    if not possible:
        _forbid_live(model, message, session, config)
        return
    if _own(message, session):
        # [MQTT-3.8.3-3] No Local: the publisher's own message never comes back through such a subscription.
        local = [s for s in possible if s.no_local]
        if len(local) == len(possible):
            _forbid_local(message, session, local, config)
            return
        possible = [s for s in possible if not s.no_local]
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
        # [MQTT-3.1.2-25] Too large for the subscriber's Maximum Packet Size: discarded, never owed
        # (:mod:`.discarded_5` judges the discarding).
        must = must and not _too_large_for(link, message, qos)
        if link.ended < message.window[0]:
            if must:
                for name in (rule, qos_rule):
                    link.unobserved[name] = link.unobserved.get(name, 0) + 1
            following = session.link_after(taken)
            if following is not None and not session.clean and qos > 0 and not _expired_for(following, message):
                # Kept for the next connection if this one was gone [MQTT-3.1.2-5]: allowed there, not owed.
                limit = following.opened + config.answer_timeout
                kept = Expectation(
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
                following.expectations.append(_with_options(kept, possible, definite))
            return
        after, deadline = message.window[0] - message.early, taken + config.answer_timeout
    else:
        # [MQTT-3.1.2-5] Offline: a persistent session keeps QoS 1 and 2 messages for its next connection.
        link = session.link_after(taken)
        if link is None:
            if definite and not session.clean and qos > 0:
                _forbid_after_expiry(model, message, session, config)
            return
        must = must and not session.clean and qos > 0
        rule, after, deadline = rules.OFFLINE_MESSAGES_KEPT, link.opened, link.opened + config.answer_timeout
        if _expired_for(link, message):
            return
    expiry = message.expiry
    if must and expiry is not None and expiry_5.state_at(message.window, expiry, deadline) != expiry_5.ALIVE:
        # [MQTT-3.3.2-5] It may expire before the server has to start sending it: allowed, not owed.
        must = False
        why = (
            f"the message to {topic!r} (event {message.event} of {message.link.name!r}) may expire (Message Expiry "
            f"Interval {expiry:g} s) before the server has to send it"
        )
        link.unknown.append((rule, why, after))
    dollar = withheld(message) if must else None
    expectation = Expectation(
        link,
        message,
        must and dollar is None,
        rule,
        False,
        qos,
        qos_rule,
        after,
        deadline,
        len(possible),
        ceiling=ceiling,
    )
    expectation.withheld_by = dollar
    link.expectations.append(_with_options(expectation, possible, definite))
    if earlier is not None:
        # The session's previous connection was open while the server may have taken the message: a copy may
        # have gone there instead.
        rule = _live_rule(message, definite, earlier)
        elsewhere = Expectation(
            earlier, message, False, rule, False, qos, qos_rule, after, deadline, len(possible), ceiling=ceiling
        )
        expectation.elsewhere = _with_options(elsewhere, possible, definite)
        earlier.expectations.append(elsewhere)


def share_groups(model: Model, config: JudgeConfig, owns: Callable[[float], bool] = _always) -> None:
    """MQTT 5.0 shared subscriptions (section 4.8.2): each message matching a share group's filter goes to one
    member session of the group. Every member open while the server took it may get it (at most at the QoS
    granted to that member [MQTT-4.8.2-3]); the group is owed it when a member surely held throughout."""
    groups: dict[tuple[str, str], list[Subscription]] = {}
    for session in model.sessions:
        for subscription in session.shared:
            groups.setdefault((subscription.share or "", subscription.topic_filter), []).append(subscription)
    for (share, topic_filter), members in groups.items():
        for message in model.messages:
            if not owns(message.window[0]) or not matches(topic_filter, message.publish.topic):
                continue
            window = message.window
            copies: list[Expectation] = []
            must = False
            for subscription in members:
                if not overlaps(subscription.possible, window):
                    continue
                holder = subscription.link.session
                link = None if holder is None else holder.link_at(window[1]) or holder.link_during(window)
                if link is None or link.opened > window[0] or link.ended < window[0]:
                    continue  # not open throughout: whether the server chose it is not for the model to say
                sure = subscription.definite is not None and covers(subscription.definite, window)
                must = must or (sure and message.certain)
                qos = min(message.publish.qos, subscription.qos)
                copy = Expectation(
                    link,
                    message,
                    False,
                    rules.MESSAGE_ROUTED,
                    False,
                    qos,
                    rules_5.SHARED_GRANTED_QOS,
                    window[0],
                    window[1] + config.answer_timeout,
                )
                copies.append(_with_options(copy, [subscription], [subscription] if sure else []))
            if not copies:
                continue
            expiry = message.expiry
            deadline = window[1] + config.answer_timeout
            if expiry is not None and expiry_5.state_at(window, expiry, deadline) != expiry_5.ALIVE:
                must = False
            group = GroupDelivery(message, share, topic_filter, copies, must, deadline)
            for copy in copies:
                copy.group = group
                copy.link.expectations.append(copy)
            model.groups.append(group)


def withheld(message: Message) -> str | None:
    """Why the server may withhold ``message`` from another client although a subscription matches it, or None.
    Section 4.7.2: "The Server SHOULD prevent Clients from using such Topic Names [starting with '$'] to exchange
    messages with other Clients": a server that follows the SHOULD withholds it, one that does not delivers it, and
    neither is a failure (a SHOULD is never a fail)."""
    topic = message.publish.topic
    if not topic.startswith("$"):
        return None
    return reasons.reason(
        reasons.NOT_OWED,
        f"the message to {topic!r} (event {message.event} of {message.link.name!r}) has a Topic Name starting with "
        "'$', which section 4.7.2 says the server SHOULD keep clients from exchanging messages on: it may withhold it",
    )


def _own(message: Message, session: Session) -> bool:
    """The message was published by a connection with the session's ClientId (an empty one: the session's own
    connection, whose ClientId the server assigned)."""
    publisher = message.link
    if publisher.session is session:
        return True
    return bool(session.client_id) and publisher.client_id == session.client_id


def _forbid_local(message: Message, session: Session, local: list[Subscription], config: JudgeConfig) -> None:
    """[MQTT-3.8.3-3] Every matching subscription has No Local and the message is the client's own."""
    link = session.link_at(message.window[1])
    if link is not None and link.ended >= message.window[0] and all(s.definite is not None for s in local):
        _forbid(link, message, rules_5.NO_LOCAL, config)


def _expired_for(link: Link, message: Message) -> bool:
    """[MQTT-3.3.2-5] A message kept for a connection that opens after its Message Expiry Interval passed is
    deleted: recorded as forbidden there, and True. (Close to the expiry, it is allowed, never owed.)"""
    expiry = message.expiry
    if expiry is None or expiry_5.state_at(message.window, expiry, link.opened) != expiry_5.EXPIRED:
        return False
    forbid(link, message, rules_5.EXPIRED_NOT_DELIVERED, retained=False, after=link.opened, deadline=link.opened)
    return True


def _with_options(expectation: Expectation, possible: list[Subscription], definite: list[Subscription]) -> Expectation:
    """Notes on ``expectation`` the MQTT 5.0 options of the subscriptions it answers to: Retain As Published, and
    which subscriptions (for their identifiers); and the rules its delivery decides besides its own."""
    link = expectation.link
    flags = {s.as_published for s in possible}
    expectation.as_published = flags.pop() if len(flags) == 1 else None
    expectation.subscriptions = tuple(possible)
    expectation.sure = len(definite) == len(possible)
    message = expectation.message
    if (
        expectation.link.v5
        and expectation.must
        and not message.will
        and any(_kept_past_unsubscribe(s, message.window[0]) for s in definite)
    ):
        expectation.also = (*expectation.also, rules_5.EXACT_MATCH_DELETES)
    if (
        expectation.must
        and message.will
        and message.link.v5
        and expiry_5.seconds(message.publish.properties, expiry_5.WILL_DELAY_INTERVAL)
    ):
        # 5.0 statement 3.1.2-7 (key WILL_STORED): a Will due only after a delay outlives its connection: stored
        # with the session.
        expectation.also = (*expectation.also, rules_5.WILL_STORED)
    if expectation.must and not message.will and any(_outlived_expiry(s, link, message) for s in definite):
        expectation.also = (*expectation.also, rules_5.KEPT_WHILE_OPEN)
    return expectation


def _outlived_expiry(subscription: Subscription, link: Link, message: Message) -> bool:
    """5.0 statement 4.1.0-1 (key KEPT_WHILE_OPEN): ``subscription`` was made on ``link``, a 5.0 connection open
    throughout, longer before the server took ``message`` than the Session Expiry Interval its CONNECT asked: the
    subscription is session state the server kept while the connection was open (the interval runs from the close)."""
    connect = link.transcript.connect
    if not link.v5 or subscription.link is not link or subscription.definite is None or connect is None:
        return False
    asked = expiry_5.seconds(connect.properties, SESSION_EXPIRY_INTERVAL) or 0.0
    return message.window[0] - subscription.definite[0] > asked + expiry_5.GRANULARITY


def _kept_past_unsubscribe(subscription: Subscription, before: float) -> bool:
    """[MQTT-3.10.4-1] The session unsubscribed, after ``subscription`` and before ``before``, a filter that is not
    its filter but matches it or is matched by it as a wildcard: compared character by character, it deletes
    nothing of this subscription."""
    session = subscription.link.session
    if session is None:
        return False
    own = subscription.full_filter
    for link in session.links:
        for record in link.transcript.unsubscribed:
            other = record.topic_filter
            if record.acked is None or record.sent <= subscription.possible[0] or record.acked > before:
                continue
            if other != own and (matches(other, own) or matches(own, other)):
                return True
    return False


def _live_rule(message: Message, definite: list[Subscription], link: Link) -> str:
    """The rule a live delivery to ``link`` answers to."""
    if message.will:
        return rules.WILL_PUBLISHED
    if definite and all(s.link is not link for s in definite):
        return rules.SESSION_RESUMED
    return rules.MESSAGE_ROUTED


def _forbid_after_expiry(model: Model, message: Message, session: Session, config: JudgeConfig) -> None:
    """5.0 statement 4.1.0-2 (key DISCARDED_AFTER_EXPIRY): a message queued for an offline session whose Session
    Expiry Interval then passed was discarded with it: the ClientId's next connection (Clean Start 0, a new
    session) must not get it."""
    if message.window[1] > session.ended - expiry_5.GRANULARITY:
        return  # the session may have ended before the server took it
    later = [s for s in model.by_client.get(session.client_id, ()) if s.links and s.links[0].opened > session.ended]
    if not later:
        return
    link = min(later, key=lambda s: s.links[0].opened).links[0]
    if link.after_expiry:
        forbid(
            link,
            message,
            rules_5.DISCARDED_AFTER_EXPIRY,
            retained=False,
            after=link.opened,
            deadline=link.opened + config.answer_timeout,
        )


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
    elif any(
        s.definite is not None and covers(s.definite, message.window) and matches_once_normalised(s.topic_filter, topic)
        for s in session.subscriptions
    ):
        # [MQTT-4.7.3-4] A filter that matches the topic only once one of them is normalised: delivered, the server
        # normalised; [MQTT-1.5.3-3] where a BOM makes the difference, it skipped or stripped it as well.
        expectation = forbid(
            link,
            message,
            rules.NO_NORMALISATION,
            retained=False,
            after=message.window[0],
            deadline=message.window[1] + config.answer_timeout,
        )
        bom = "\ufeff" in topic or any("\ufeff" in s.topic_filter for s in session.subscriptions)
        expectation.also = (rules.DELIVERY_MATCHES_SUBSCRIPTION, *((rules.BOM_KEPT,) if bom else ()))
        return
    elif any(s.definite is not None and covers(s.definite, message.window) for s in session.subscriptions):
        # A subscriber none of whose filters matches: the message would leak to it [MQTT-3.3.2-3]. Its arrival
        # is reported where it is seen (deliveries); its absence past the deadline keeps the rule.
        rule = rules.DELIVERY_MATCHES_SUBSCRIPTION
    else:
        return
    _forbid(link, message, rule, config)


def normalised(text: str) -> str:
    """``text`` as a server that normalised names would compare it: Unicode NFKC, case folded, U+FEFF dropped and
    empty levels left out."""
    folded = unicodedata.normalize("NFKC", text).replace("\ufeff", "").casefold()
    return "/".join(level for level in folded.split("/") if level)


def unchanged_by_normalising(text: str) -> bool:
    """``text`` is its own :func:`normalised` form (lower-case ASCII with no empty level, at once)."""
    if text.isascii():
        return text == text.lower() and "//" not in text and not text.startswith("/") and not text.endswith("/")
    return normalised(text) == text


def matches_once_normalised(topic_filter: str, topic: str) -> bool:
    """``topic_filter`` does not match ``topic`` as written, but would once both are normalised [MQTT-4.7.3-4]."""
    try:
        return not matches(topic_filter, topic) and matches(normalised(topic_filter), normalised(topic))
    except InvalidTopic:
        return False


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


def _forbid_again(message: Message, session: Session, config: JudgeConfig) -> None:
    """[MQTT-3.1.2-10] A dropped Will (published, or discarded by DISCONNECT 0x00) reaches no subscriber of its
    topic during ``message.window``: the connection of ``session`` open in it, if its subscription held."""
    window = message.window
    for subscription in session.subscriptions:
        if not matches(subscription.topic_filter, message.publish.topic) or subscription.definite is None:
            continue
        if not covers(subscription.definite, (window[0], window[0])):
            continue
        link = session.link_during(window)
        if link is not None and link.opened <= window[0] and link.v5:
            _forbid(link, message, rules_5.WILL_DROPPED, config)
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
    # MQTT 5.0 Retain Handling: 0 sends them [MQTT-3.3.1-9], 1 only for a subscription that did not exist
    # [MQTT-3.3.1-10], 2 never [MQTT-3.3.1-11]. None: whether they are sent is not known.
    sent: bool | None = True
    handling_rule: str = rules.RETAINED_SENT_ON_SUBSCRIBE
    # [MQTT-3.8.4-4] A replacement with Retain Handling 0 re-sends them too (decided with the rule above).
    replaced = link.v5 and subscription.retain_handling == 0 and subscription.share is None
    also = (rules_5.REPLACED_RESENDS_RETAINED,) if replaced and existed(subscription) else ()
    if subscription.retain_handling == 2:
        sent, handling_rule = False, rules_5.NO_RETAINED
    elif subscription.retain_handling == 1:
        held_before = existed(subscription)
        sent, handling_rule = (None if held_before is None else not held_before), rules_5.RETAINED_IF_NEW
        if held_before is None:
            why = (
                f"whether the session already had a subscription to {subscription.full_filter!r} when it "
                "subscribed again is not known"
            )
            link.unknown.append((handling_rule, why, window[0]))
    for topic in model.topics.matching(subscription.topic_filter):
        changes = model.retained.get(topic, [])
        states = retained_states(changes, window)
        deadline = window[1] + config.answer_timeout
        for state in states:
            if not isinstance(state, Message):
                continue
            if sent is False:
                forbid(link, state, handling_rule, retained=True, after=window[0], deadline=deadline)
                continue
            expiry = state.expiry
            alive = expiry_5.ALIVE if expiry is None else expiry_5.state_at(state.window, expiry, deadline)
            if expiry is not None and expiry_5.state_at(state.window, expiry, window[0]) == expiry_5.EXPIRED:
                # [MQTT-3.3.2-5] An expired retained message is not sent.
                forbid(link, state, rules_5.EXPIRED_NOT_DELIVERED, retained=True, after=window[0], deadline=deadline)
                continue
            must = len(states) == 1 and state.publish.qos > 0 and sent is True and alive == expiry_5.ALIVE
            rule = rules.WILL_RETAINED if state.will else handling_rule
            qos = min(state.publish.qos, subscription.qos)
            dollar = withheld(state) if must else None
            expectation = Expectation(
                link, state, must and dollar is None, rule, True, qos, rules.DELIVERY_QOS, window[0], deadline
            )
            expectation.withheld_by = dollar
            expectation.subscriptions = (subscription,)
            expectation.also = () if state.will else also
            link.expectations.append(expectation)
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


def existed(subscription: Subscription) -> bool | None:
    """Whether the session already had a subscription to the same filter when ``subscription`` was asked for
    (None: it may or may not have, or the session's earlier state is unknown)."""
    session = subscription.link.session
    if session is None:
        return None
    asked = subscription.possible[0]
    maybe = False
    for other in session.subscriptions:
        if other is subscription or other.full_filter != subscription.full_filter or other.possible[0] >= asked:
            continue
        if other.definite is not None and other.definite[0] <= asked <= other.definite[1]:
            return True
        maybe = maybe or other.possible[1] >= asked
    if maybe or not session.known:
        return None
    return False


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
