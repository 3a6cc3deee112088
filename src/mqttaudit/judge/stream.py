"""The parts of a routing replay in time slices, proven against the whole model (:func:`.model.build`) and its
routing verdicts (:class:`.routing.Routing`) by the tests: the slices of one broker's traffic by bytes, the broker
state each slice starts from, the model of one slice, and the routing verdicts slice after slice
(:class:`SlicedRouting`: the same deliveries rows and findings, each once). The audit replays every broker so
(:mod:`mqttaudit.pipeline.slicing`); the whole model (:func:`mqttaudit.pipeline.replay.replay_broker`) is the
reference the tests hold it against.

The state at a time ``t`` is what the server must keep across ``t``: its sessions and which of them are offline,
their subscriptions, the retained message of every topic, the Wills it has yet to publish, the QoS 1 and 2
messages it keeps for offline persistent sessions, and the QoS 1 and 2 deliveries not yet acknowledged (a resumed
session re-sends them [MQTT-4.4.0-1]). Bounded by what the broker itself keeps, not by the traffic.

Sessions, subscriptions, retained messages and Wills come from the broker's *skeleton*: each transcript without
the deliveries it received and without the non-retained messages it published (what grows with the traffic).
The broker model built from the skeleton has the sessions, subscriptions, retained messages and Wills of the whole
model, since none of them depends on what was left out. The messages kept for offline sessions and the deliveries
in flight come from one walk over the traffic in time order: each message is routed by the model's own rules
against the skeleton and forgotten at once unless an offline session keeps it; each delivery is forgotten once
acknowledged (or its identifier used again).

What the routing verdicts (:class:`.routing.Routing`) may look back at, so that a replay that forgets can give
them: each look-back is bounded by the late window (:attr:`.JudgeConfig.late_window`, 60 s by default) or by the
state above, in the whole model as in a slice.

- A delivered copy is matched to an expectation only from its ``after`` to its deadline plus the late window
  (:meth:`.model.Expectation.matches_at`), owed or forbidden alike. A copy later than that matches no message held
  and is no finding of routing (as any unmatched copy: whether a subscription of its connection matches it is the
  conversation judge's [MQTT-3.3.2-3]). A message owed and not matched in its window is decided missing, but MQTT
  sets no time limit on delivery: the verdict is held back (:class:`.routing.Missing`: the connection, its session,
  the topic, a digest of the payload, the QoS allowed, the times, and the findings it would make) until the session
  can get no more copies (its last connection's end, or the end of the traffic). A copy matched by nothing, later
  than the late window, on that connection or a later one of its session, with the same topic and payload and a QoS
  allowed, makes the message's rules not assessable (the reason says how late the copy came); with none, the
  findings are made, naming the window. Held per connection: at most :attr:`.JudgeConfig.late_copies_held` (1000)
  in the order they were decided; past the cap a connection's missing messages are reported at once, and their
  findings say a later copy was not looked for (the cap). The whole replay holds them the same way, so both agree.
- A delivery named only by a Topic Alias never resolved leaves a missing message undecided only if it came within
  that message's window; a Will that arrived early counts only within the late window before it was owed; the
  re-sent copies of a resumed session, and of a share group's interrupted QoS 2 message, count only up to the
  re-send's deadline plus the late window.
- A RETAIN 1 copy is held against a new subscription's retained watch up to the watch's deadline plus the late
  window, and against the messages it may repeat that are still held: retained PUBLISHes and Wills (the skeleton
  keeps them) and other messages within their deadline plus the late window (:func:`.model.in_memory`). The same
  messages are the siblings whose properties a forwarded copy is compared with.
- What settles a missing message (the connection's end, the bytes lost, the session's next connection) is state
  of the connections, which the skeleton holds.

Slice after slice (:class:`SlicedRouting`), a slice matches the copies observed in it, and decides what no later
copy can change by its end (:func:`.routing.closes`: an expectation's deadline plus the late window, or its
connection's end); the rest is handed on. A slice owns the messages a copy observed in it may be first: those the
server started taking in it (a Will from when it may be seen, :data:`.model.SAME_INSTANT` before its close). A
copy matches the candidate a deterministic order picks (the one still owed, then by time and name), so that
which slice holds a candidate changes nothing. Handed on: the expectations not decided, the share group messages
and retained watches not decided, the messages within their late window, per connection the unacknowledged QoS 1
and 2 deliveries (last use of each Packet Identifier) and the last copy per publisher, topic and QoS (ordering),
and the count of messages published after a connection was last seen (one row each, at the end). The session
checks of a connection (Session Present, takeover, re-sent copies) are made once its re-sent copies are in and its
session's previous connection ended. A slice's task sees the deliveries from :func:`reach` before it to its end
(:func:`sight`); a decision
made later than that after what it looks up (a session check whose previous connection was seen long after the
next one opened) is the one place where a slice could see less than the whole replay.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Final, TypeVar

from mqttaudit.topics import InvalidTopic, parse_shared

from . import rules
from .config import JudgeConfig
from .model import (
    INF,
    UNKNOWN,
    Expectation,
    GroupDelivery,
    Link,
    Message,
    Model,
    RetainedState,
    RetainedWatch,
    Session,
    build,
    message_of,
    retained_states,
    route,
)
from .routing import Memory, Routing, closes
from .transcript import Delivered, Published, Transcript
from .verdict import Judgement

T = TypeVar("T")

#: A retained state as the broker state names it: the message (``connection#event``), nothing, or unknown.
NOTHING: Final = "nothing"


@dataclass(frozen=True)
class Slice:
    """The messages a client sent from ``start`` (inclusive) to ``end`` (exclusive), ``size`` bytes of them."""

    start: float
    end: float
    size: int


def plan_slices(messages: Iterable[tuple[float, int]], budget: int) -> list[Slice]:
    """Consecutive slices that cover all time, each holding at most ``budget`` bytes of the broker's messages,
    given as (time sent, bytes) in time order; messages sent at one instant stay in one slice, which may then
    hold more."""
    return [part for part, _ in cut_slices(messages, budget, lambda message: message)]


def cut_slices(
    items: Iterable[T], budget: int, weigh: Callable[[T], tuple[float, int]], span: float = 0.0
) -> Iterator[tuple[Slice, list[T]]]:
    """:func:`plan_slices` as the items come (``weigh``: an item's time sent and bytes), each slice with its items,
    handed on as soon as the first item of the next one is seen: only one slice's items are held. ``span``: a slice
    is cut only once its items span that many seconds (from its first item's time), whatever their bytes."""
    if budget < 1:
        raise ValueError(f"a slice budget must be positive, not {budget}")
    start, size, first, last = -INF, 0, -INF, -INF
    held: list[T] = []
    for item in items:
        time, length = weigh(item)
        if time < last:
            raise ValueError(f"messages out of time order: {time} after {last}")
        if size and size + length > budget and time > last and time - first >= span:
            yield Slice(start, time, size), held
            start, size, held = time, 0, []
        if not held:
            first = time
        size += length
        last = time
        held.append(item)
    yield Slice(start, INF, size), held


#: The order of a connection's records by event, and of its deliveries by time then event.
_EVENT: Final = attrgetter("event")
_SENT: Final = attrgetter("time", "event")
_TIME: Final = attrgetter("time")


def skeleton(transcript: Transcript) -> Transcript:
    """``transcript`` without what grows with the traffic: the deliveries it received and the messages it published
    without RETAIN (a retained one sets the state of its topic)."""
    return replace(
        transcript,
        published=[record for record in transcript.published if record.message.retain],
        delivered=[],
        answers={},
    )


def traffic(transcripts: Mapping[str, Transcript]) -> Iterator[tuple[str, Published]]:
    """Every non-retained PUBLISH of the clients, (connection, record), in the order they were sent."""
    streams = [_sent(name, transcript) for name, transcript in transcripts.items()]
    for _, name, _, record in heapq.merge(*streams, key=lambda item: item[:3]):
        yield name, record


def _sent(name: str, transcript: Transcript) -> Iterator[tuple[float, str, int, Published]]:
    for record in transcript.published:
        if not record.message.retain:
            yield record.sent, name, record.event, record


def deliveries(transcripts: Mapping[str, Transcript]) -> Iterator[tuple[str, Delivered, float | None]]:
    """Every PUBLISH the server sent, in the order it sent them: (connection, delivery, when the client answered
    it, None if it did not)."""
    streams = [_delivered(name, transcript) for name, transcript in transcripts.items()]
    for _, name, _, delivered, answer in heapq.merge(*streams, key=lambda item: item[:3]):
        yield name, delivered, answer


def _delivered(name: str, transcript: Transcript) -> Iterator[tuple[float, str, int, Delivered, float | None]]:
    for delivered in transcript.delivered:
        answer = transcript.answers.get(delivered.event)
        yield delivered.time, name, delivered.event, delivered, None if answer is None else answer[1]


@dataclass(frozen=True)
class BrokerState:
    """The broker state at ``time``, each part named by connections (a session by its first connection, a
    message by ``connection#event``) so that states of two models compare."""

    time: float
    sessions: frozenset[str]
    offline: frozenset[str]
    #: Subscriptions that may be in effect: (connection, event of the SUBSCRIBE, filter as subscribed).
    subscriptions: frozenset[tuple[str, int, str]]
    #: Per topic ever retained, the retained states it may have (``connection#event``, :data:`NOTHING`, unknown).
    retained: tuple[tuple[str, frozenset[str]], ...]
    #: Connections closed whose Will is not due yet.
    wills: frozenset[str]
    #: Messages taken before ``time`` kept for a connection of the session opening at ``time`` or later:
    #: (that connection, message).
    kept: frozenset[tuple[str, str]]
    #: Per connection of a live session, the QoS 1 and 2 deliveries sent before ``time`` and not answered by then
    #: (the last use of each Packet Identifier): (connection, delivery event).
    in_flight: frozenset[tuple[str, int]]


def named(message: Message) -> str:
    return f"{message.link.name}#{message.event}"


def _state_name(state: RetainedState) -> str:
    if isinstance(state, Message):
        return named(state)
    return NOTHING if state is None else UNKNOWN


def alive(session: Session, time: float) -> bool:
    """The server holds ``session`` at ``time``."""
    return session.links[0].opened <= time < session.ended


def model_state(model: Model, time: float) -> BrokerState:
    """The parts of the broker state at ``time`` a model of the broker holds whole: sessions, subscriptions,
    retained messages and Wills (the rest, kept messages and deliveries in flight, left empty)."""
    sessions = [session for session in model.sessions if alive(session, time)]
    subscriptions = frozenset(
        (s.link.name, s.event, s.full_filter)
        for session in sessions
        for s in (*session.subscriptions, *session.shared)
        if s.possible[0] <= time <= s.possible[1]
    )
    retained = tuple(
        (topic, frozenset(_state_name(state) for state in retained_states(changes, (time, time))))
        for topic, changes in sorted(model.retained.items())
    )
    wills = frozenset(
        m.link.name
        for m in model.messages
        if m.will and m.link.closed is not None and m.link.closed.time <= time < m.window[0]
    )
    return BrokerState(
        time,
        frozenset(session.links[0].name for session in sessions),
        frozenset(session.links[0].name for session in sessions if session.link_at(time) is None),
        subscriptions,
        retained,
        wills,
        frozenset(),
        frozenset(),
    )


def kept(expectation: Expectation, time: float) -> bool:
    """``expectation`` is a message taken before ``time`` that an offline session keeps for a connection opening
    at ``time`` or later [MQTT-3.1.2-5]."""
    return (
        not expectation.forbidden
        and expectation.rule == rules.OFFLINE_MESSAGES_KEPT
        and expectation.message.window[0] < time <= expectation.link.opened
    )


def boundary_states(
    skeletons: Mapping[str, Transcript],
    sent: Iterable[tuple[str, Published]],
    delivered: Iterable[tuple[str, Delivered, float | None]],
    config: JudgeConfig,
    times: Sequence[float],
) -> list[BrokerState]:
    """The broker state at each of ``times`` (ascending), from the broker's :func:`skeleton` and one walk over its
    traffic: ``sent``, the non-retained messages of the clients in the order they were sent (:func:`traffic`), and
    ``delivered``, the server's PUBLISHes in the order it sent them (:func:`deliveries`). What the walk holds at a
    time is what the state names then: the messages kept for offline sessions and the unanswered deliveries."""
    model = build(skeletons, config)
    links = {link.name: link for link in model.links}
    holding = [e for link in model.links for e in link.expectations if _kept_rule(e)]
    for link in model.links:
        link.expectations.clear()
    messages, copies = iter(sent), iter(delivered)
    message, copy = next(messages, None), next(copies, None)
    flying: dict[str, dict[int, Delivered]] = {}
    answers: list[tuple[float, str, int, int]] = []  # (time, connection, Packet Identifier, delivery event)
    states = []
    for time in times:
        while message is not None and message[1].sent < time:
            holding += _kept_by(model, links.get(message[0]), message[1], config)
            message = next(messages, None)
        while copy is not None and copy[1].time < time:
            name, delivery, answer = copy
            packet_id = delivery.message.packet_id
            if delivery.message.qos and packet_id is not None and name in links:
                flying.setdefault(name, {})[packet_id] = delivery
                if answer is not None:
                    heapq.heappush(answers, (answer, name, packet_id, delivery.event))
            copy = next(copies, None)
        while answers and answers[0][0] < time:
            _, name, packet_id, event = heapq.heappop(answers)
            pending = flying.get(name, {})
            if packet_id in pending and pending[packet_id].event == event:
                del pending[packet_id]
        # Forgotten: what is owed before this time (the earlier slices' own) and the deliveries of ended sessions.
        holding = [e for e in holding if e.link.opened >= time]
        flying = {name: pending for name, pending in flying.items() if pending and _held(links[name], time)}
        state = model_state(model, time)
        in_flight = frozenset((name, d.event) for name, pending in flying.items() for d in pending.values())
        kept_now = frozenset((e.link.name, named(e.message)) for e in holding if kept(e, time))
        states.append(replace(state, kept=kept_now, in_flight=in_flight))
    return states


def _kept_rule(expectation: Expectation) -> bool:
    return not expectation.forbidden and expectation.rule == rules.OFFLINE_MESSAGES_KEPT


def _held(link: Link, time: float) -> bool:
    """The session of ``link`` is held at ``time`` (the connection may have ended: the session outlives it)."""
    return link.session is not None and alive(link.session, time)


def _kept_by(model: Model, link: Link | None, record: Published, config: JudgeConfig) -> list[Expectation]:
    """Routes one message of the accepted connection ``link`` against the skeleton as the whole model routes it
    (:func:`.model.route`) and returns what offline sessions keep of it; everything else it made is forgotten."""
    if link is None:
        return []  # not taken to route (a refused connection): owed to nobody
    taken = message_of(record, link, True, config)
    if taken is None or taken[1] is not None:
        return []
    message = taken[0]
    begin, end = message.window
    found: list[Expectation] = []
    for session in model.filters.concerned(message.publish.topic):
        last = max(session.ended, *(each.ended for each in session.links))
        if not (session.links[0].opened <= end and begin <= last):
            continue  # the session did not exist while the server took it (as :func:`.model.build` asks)
        route(model, message, session, config)
        # Its expectations land on the session's connections, and forbidden ones on a later session of its ClientId.
        for other in (session, *model.by_client.get(session.client_id, ())):
            for each in other.links:
                found += [e for e in each.expectations if _kept_rule(e)]
                each.expectations.clear()
    return found


class FirstTaken:
    """Per topic, the non-retained message the server took first (by when it surely had it): all a slice needs of
    the messages before it to say what a new subscription must not get as retained [MQTT-3.3.1-6] (see
    :func:`.model.not_retained_rule`). Fed the traffic in order; holds one message per topic."""

    def __init__(self, model: Model, config: JudgeConfig) -> None:
        self._links = {link.name: link for link in model.links}
        self._config = config
        self._first: dict[str, tuple[float, str, Published]] = {}

    def add(self, name: str, record: Published) -> None:
        link = self._links.get(name)
        taken = None if link is None else message_of(record, link, True, self._config)
        if taken is None or taken[1] is not None:
            return  # not routed: it sets nothing (as :func:`.model.build` counts only routed messages)
        topic, when = record.message.topic, taken[0].window[1]
        if topic not in self._first or when < self._first[topic][0]:
            self._first[topic] = (when, name, record)

    def records(self) -> list[tuple[str, Published]]:
        return [(name, record) for _, name, record in self._first.values()]


def slice_model(
    skeletons: Mapping[str, Transcript],
    part: Slice,
    sent: Iterable[tuple[str, Published]],
    earlier: Iterable[tuple[str, Published]],
    config: JudgeConfig,
    subscribers: Collection[str] | None = None,
) -> Model:
    """The broker model of one slice of its traffic: the expectations (and retained watches, undecided rules and
    uncounted messages) of the messages the server started taking in ``part`` (``sent``: every non-retained PUBLISH
    of the clients sent in it; the retained ones and the Wills are in the skeleton) and of the subscriptions asked
    for in it (the retained messages they get). ``earlier``: :meth:`FirstTaken.records` of the traffic before
    ``part``. What the models of all slices hold is what the whole model (:func:`.model.build`) holds, each once.
    ``subscribers``: the connections of one shard (:func:`shard_connections`; None: all of them)."""
    added: dict[str, list[Published]] = {}
    for name, record in (*earlier, *sent):
        added.setdefault(name, []).append(record)
    # A connection that sent nothing in the slice keeps its skeleton (the model reads it, never changes it): a copy
    # of each of the broker's transcripts in each slice grew with the connections times the slices. One with
    # several retained records is still sorted by event, as every transcript the model reads is.
    transcripts = dict(skeletons)
    for name, t in skeletons.items():
        if name in added or len(t.published) > 1:
            published = [*t.published, *added.get(name, ())]
            published.sort(key=_EVENT)
            transcripts[name] = replace(t, published=published)
    return build(transcripts, config, owns=lambda time: part.start <= time < part.end, subscribers=subscribers)


def reach(config: JudgeConfig) -> float:
    """How far before its start a slice's task sees the deliveries (it matches only those in the slice): what a
    decision made in the slice may look up (a copy re-sent, an unresolved Topic Alias, a Will seen early) lies
    within the late window and the answer timeout before it."""
    return 2 * config.late_window + 3 * config.answer_timeout


def sight(part: Slice, config: JudgeConfig) -> tuple[float, float]:
    """The times of the deliveries the task of ``part`` sees, from :func:`reach` before its start to its end
    (excluded). Nothing later: a slice matches only the copies observed in it, and what it decides by its end looks
    up only copies before the decision (each look-up ends at the decision's own time: a re-send's deadline plus the
    late window, or the connection's end). The window of a slice that spans the reach is then two reaches long,
    not three: at 8,000,000 packets it held 518,238 deliveries with a reach after its end as well, as many as a
    capture of 338 s holds in all."""
    return part.start - reach(config), part.end


def shard_connections(skeletons: Mapping[str, Transcript], weights: Mapping[str, int], shards: int) -> list[set[str]]:
    """The broker's connections in ``shards`` disjoint sets whose routing verdicts can be decided apart, side by
    side (:class:`SlicedRouting` with ``subscribers``; see :func:`.model.build`). Each set is whole: every connection
    of a ClientId is in it (a session and its takeovers, and the later session a forbidden copy lands on), with
    every connection that subscribed with the same ShareName (a message owed to one member of a share group: a
    5.0 shared subscription as the broker model reads it, :func:`share_name`), while a connection with no
    ClientId is a session of its own [MQTT-3.1.3-6]. The sets are balanced by ``weights`` (per connection: the
    deliveries it received, what a shard's replay works through, plus one), the heaviest group first onto the
    lightest set: every task that computes them from the same skeletons gets the same sets."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    key_of: dict[str, str] = {}
    for flow, transcript in sorted(skeletons.items()):
        connect = transcript.connect
        key = f"client {connect.client_id}" if connect is not None and connect.client_id else f"connection {flow}"
        key_of[flow] = root(key)
        for subscribed in transcript.subscribed if transcript.speaks_5_0 else ():
            share = share_name(subscribed.topic_filter)
            if share is not None:
                parent[root(key)] = root(f"share {share}")
    groups: dict[str, list[str]] = {}
    for flow, key in key_of.items():
        groups.setdefault(root(key), []).append(flow)
    weighed = sorted((-sum(weights.get(f, 0) + 1 for f in flows), min(flows), flows) for flows in groups.values())
    loads = [0] * max(shards, 1)
    sets: list[set[str]] = [set() for _ in loads]
    for minus_weight, _, flows in weighed:
        lightest = min(range(len(loads)), key=lambda index: (loads[index], index))
        sets[lightest].update(flows)
        loads[lightest] -= minus_weight
    return sets


def share_name(topic_filter: str) -> str | None:
    """The ShareName of a 5.0 shared subscription's filter, as the broker model reads it (:func:`.model.build`:
    a filter :func:`~mqttaudit.topics.parse_shared` refuses is no share, matched as it is); None for any other."""
    try:
        shared = parse_shared(topic_filter)
    except InvalidTopic:
        return None
    return None if shared is None else shared[0]


class SlicedRouting:
    """The routing verdicts of one broker, one slice of time after another, holding only what the broker keeps
    and what is still within its late window: the union of what :meth:`run` decides over the slices is what
    :class:`.routing.Routing` decides over the whole model (the tests prove it).

    Each slice's model is :func:`slice_model` (the messages sent in it and the subscriptions asked for in it).
    Handed on from one slice to the next: the expectations no later copy can change yet (until the late window
    after they are decided: a Will's early copy is looked up once more), the retained watches and share group
    messages not decided, the messages still within their late window, and :class:`.routing.Memory` (which holds the
    messages decided missing until their session ends, for a later copy: at most
    :attr:`.JudgeConfig.late_copies_held` per connection)."""

    def __init__(
        self, skeletons: Mapping[str, Transcript], config: JudgeConfig, subscribers: Collection[str] | None = None
    ) -> None:
        self._skeletons = skeletons
        self._config = config
        self._subscribers = subscribers
        # Its connections only: a model that routes nothing (the whole skeleton's retained messages and Wills routed
        # made an expectation per message and subscriber of the whole capture, 155,092 at 8,000,000 packets, held
        # as long as the replay ran).
        self._firsts = FirstTaken(build(skeletons, config, owns=lambda time: False), config)
        self._memory = Memory(unacknowledged={})
        self._expectations: list[Expectation] = []
        self._watches: list[tuple[str, RetainedWatch]] = []
        self._groups: list[GroupDelivery] = []
        #: Per connection, the messages published after it was last seen, per rule: one row each, at the end.
        self._unobserved: dict[str, dict[str, int]] = {}

    def run(
        self,
        part: Slice,
        sent: Sequence[tuple[str, Published]],
        seen: Mapping[str, Sequence[Delivered]],
        answers: Mapping[str, Mapping[int, tuple[int, float]]],
    ) -> tuple[list[Expectation], Judgement]:
        """Judges slice ``part``, given the non-retained messages sent in it (:func:`traffic`), per connection the
        deliveries observed in :func:`sight` of it (from :func:`reach` before its start to its end), and the answers to
        them (per delivery event: Reason Code and time). Returns the expectations it decided (one ``deliveries``
        row each) and the judgement of what it decided."""
        config = self._config
        model = slice_model(self._skeletons, part, sent, self._firsts.records(), config, self._subscribers)
        links = {link.name: link for link in model.links}
        for link in model.links:
            got = seen.get(link.name)
            if got:  # else the skeleton's: no delivery, no answer
                given = dict(answers.get(link.name, {}))
                link.transcript = replace(link.transcript, delivered=sorted(got, key=_SENT), answers=given)
        carried: dict[str, list[Expectation]] = {}
        for expectation in self._expectations:  # onto this model's connections, before its own
            expectation.link = links[expectation.link.name]
            carried.setdefault(expectation.link.name, []).append(expectation)
        for name, expectations in carried.items():
            links[name].expectations[:0] = expectations
        already = {id(e) for e in self._expectations if e.decided}
        for name, watch in self._watches:
            links[name].watches.append(watch)
        model.groups[:0] = self._groups
        for link in model.links:
            counts = self._unobserved.setdefault(link.name, {})
            for rule, count in link.unobserved.items():
                counts[rule] = counts.get(rule, 0) + count
            link.unobserved = counts if part.end == INF else {}
        owned = [m for m in model.messages if part.start <= m.window[0] - m.early < part.end]
        self._memory.messages += [m for m in owned if not (m.will or m.publish.retain)]
        self._acknowledge(part, links)
        transcripts = {name: links[name].transcript if name in links else t for name, t in self._skeletons.items()}
        judgement = Routing(model, transcripts, config, self._memory).between(part.start, part.end)
        for name, record in sent:
            self._firsts.add(name, record)
        return self._hand_on(model, part.end, already), judgement

    def _acknowledge(self, part: Slice, links: Mapping[str, Link]) -> None:
        """Per connection, the last use of each Packet Identifier by a QoS 1 or 2 delivery of the slice, and whether
        the client ever answered it (what a resumed session is re-sent [MQTT-4.4.0-1])."""
        unacknowledged = self._memory.unacknowledged
        assert unacknowledged is not None
        for name, link in links.items():
            pending = unacknowledged.setdefault(name, {})
            every = link.transcript.delivered  # in time order: the slice's are those from its start to its end
            for index in range(bisect_left(every, part.start, key=_TIME), len(every)):
                delivered = every[index]
                if delivered.time >= part.end:
                    break
                packet_id = delivered.message.packet_id
                if delivered.message.qos and packet_id is not None:
                    if delivered.event in link.transcript.answers:
                        pending.pop(packet_id, None)  # its last use was answered
                    else:
                        pending[packet_id] = delivered

    def _hand_on(self, model: Model, end: float, already: set[int]) -> list[Expectation]:
        """What the next slice needs; returns the expectations decided in this one."""
        config = self._config
        late = config.late_window
        every = [e for link in model.links for e in link.expectations]
        in_groups = {id(member) for group in model.groups if not group.decided for member in group.members}
        decided = [e for e in every if e.decided and id(e) not in already]
        self._expectations = [e for e in every if not e.decided or id(e) in in_groups or closes(e, late) + late >= end]
        self._watches = [(link.name, w) for link in model.links for w in link.watches if not w.decided]
        self._groups = [group for group in model.groups if not group.decided]
        self._memory.messages = [m for m in self._memory.messages if m.window[1] + config.answer_timeout + late >= end]
        # What is handed on still names this model's connections (a message names its publisher's): they keep
        # only what the skeleton holds, so that no slice's deliveries or expectations outlive it.
        for link in model.links:
            link.expectations, link.watches = [], []
            link.transcript = self._skeletons[link.name]
        return decided
