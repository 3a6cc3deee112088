"""Stage 3: the routing replay of one broker endpoint in time slices
(:class:`~mqttaudit.judge.stream.SlicedRouting`), by tasks that never hold the broker's whole traffic: one per core
(at most :data:`~.audit.MAX_REPLAY_SHARDS`), side by side, each deciding the verdicts of one shard of the broker's
connections (:func:`~mqttaudit.judge.stream.shard_connections`) while it reads every message.

The judging stage hands each connection on as its *skeleton* (:func:`~mqttaudit.judge.stream.skeleton`: CONNECT,
subscriptions, retained messages, how it ended) followed by its traffic in time-ordered *pieces* of at most
:data:`PIECE_BYTES` each (:func:`connection_pieces`): the non-retained messages it published, by the time sent, and
the deliveries it received with the client's answers, by the time sent. The replay task (:func:`replay_sliced`)
reads the skeletons of all the broker's connections, then merges the pieces of all connections in time order
(:func:`staggered_merge`: a connection's pieces are opened when the merge reaches its first message, one piece per
connection and kind loaded at a time); the messages sent are cut into slices of at most
:attr:`.AuditOptions.slice_bytes` (:func:`~mqttaudit.judge.stream.cut_slices`), each judged with the deliveries in
:func:`~mqttaudit.judge.stream.sight` of it (from :func:`~mqttaudit.judge.stream.reach` before it to its end), and the
rows it decides are written at once. A slice spans at least :attr:`.AuditOptions.slice_span` seconds, by default a
third of that reach (:data:`SPAN_OF_REACH`): the deliveries in sight of a slice are held and walked by every slice
that sees them: slices much shorter than the reach walk each delivery many times over (74 times in a 68 s capture
of 200,000 packets cut by 256 KiB alone) for little memory saved.

What the task holds: the skeletons, the state :class:`~mqttaudit.judge.stream.SlicedRouting` hands on (bounded by what
the broker keeps and by the late window; the messages decided missing wait, with their findings, until their session
ends for a later copy, at most :attr:`.JudgeConfig.late_copies_held` per connection), one slice's messages and the
deliveries in sight of it, and one piece per connection that has begun and not ended. The checks of
:func:`~mqttaudit.judge.scenario.across_connections` run on the skeletons (unique Assigned Client Identifiers need only
CONNECTs, CONNACKs and ends), except the discarded-message rule [MQTT-3.1.2-25]: when a 5.0 subscriber of the broker
declared a Maximum Packet Size, the connections that published a message too large for it are found by reading one
connection's messages at a time, and the rule is judged on the whole transcripts of those publishers and
subscribers alone, rebuilt from the pieces (:meth:`Pieces.discarding`: what this part holds grows with their
traffic, not the broker's; nothing when no message was too large).
"""

from __future__ import annotations

import heapq
import pickle
from collections import deque
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import replace
from typing import Any, TypeVar

import pyarrow as pa

from mqttaudit.codec import Publish
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.discarded_5 import declared_maximum, too_large_for
from mqttaudit.judge.model import INF, Expectation
from mqttaudit.judge.scenario import across_connections
from mqttaudit.judge.stream import SlicedRouting, cut_slices, reach, shard_connections, sight, skeleton
from mqttaudit.judge.transcript import Delivered, Published, Transcript
from mqttaudit.judge.verdict import Judgement

from .conversations import judged_version
from .options import AuditOptions
from .replay import connect_client_id, delivery_batches, finding_rows, undecided_rows
from .replaying import SHARD, merge_reasons, replay_writers, replayed_row
from .sealed import seal, unseal
from .task_files import TableWriter, TranscriptFiles, TranscriptWriter, transcript_blobs
from .worker_gc import ReplayGarbage, tune_gc

#: Bytes of a connection's traffic per piece at most (payloads are digests: a piece is a few thousand messages).
PIECE_BYTES = 256 * 1024

#: The least time a slice spans by default, as a share of :func:`~mqttaudit.judge.stream.reach` (45 s at the
#: judge's defaults). A slice's task holds its messages and the deliveries in its sight (the reach before it and
#: itself): slices as long as the reach held 130,000 messages and 345,000 deliveries at 8,000,000 packets, 1,100 MB
#: in the replay task; a third of it, 44,000 and 230,000, 730 MB. Shorter slices walk each delivery more times
#: (each is in the sight of reach / span + 1 slices) and build more slice models, for little memory saved.
SPAN_OF_REACH = 1 / 3

#: A message sent: (time sent, event, record).
Sent = tuple[float, int, Published]
#: A delivery: (time sent, event, delivery, the client's answer (Reason Code, time) or None).
Received = tuple[float, int, Delivered, tuple[int, float] | None]


#: What an event costs in a task's memory beside its topic and payload (its record, its packet, the tuple that
#: carries it: a few hundred bytes of Python objects), so that a piece or a slice of many small messages stays small.
EVENT_BYTES = 256


def _weight(message: Publish) -> int:
    """The bytes a message counts for in a piece and a slice."""
    return len(message.payload) + len(message.topic) + EVENT_BYTES


def _cut(items: Sequence[object], size: Callable[[int], int], limit: int) -> list[bytes]:
    """``items`` in pieces of at most ``limit`` bytes (``size``: of the item at an index; one item at least each),
    each pickled."""
    pieces: list[bytes] = []
    start, held = 0, 0
    for index in range(len(items)):
        length = size(index)
        if held and held + length > limit:
            pieces.append(pickle.dumps(list(items[start:index])))
            start, held = index, 0
        held += length
    if start < len(items):
        pieces.append(pickle.dumps(list(items[start:])))
    return pieces


def connection_pieces(transcript: Transcript, limit: int = PIECE_BYTES) -> list[bytes]:
    """What the judging stage hands the sliced replay of one connection: its head (the pickled :func:`skeleton`
    with the number of pieces of each kind and the time of the first message of each, :data:`INF` for none), then
    its messages sent, then its deliveries, each kind in time order in pieces of at most ``limit`` bytes."""
    sent: list[Sent] = sorted(
        ((r.sent, r.event, r) for r in transcript.published if not r.message.retain), key=lambda item: item[:2]
    )
    received: list[Received] = sorted(
        ((d.time, d.event, d, transcript.answers.get(d.event)) for d in transcript.delivered), key=lambda item: item[:2]
    )
    sent_pieces = _cut(sent, lambda index: _weight(sent[index][2].message), limit)
    received_pieces = _cut(received, lambda index: _weight(received[index][2].message), limit)
    firsts = (sent[0][0] if sent else INF, received[0][0] if received else INF)
    head = pickle.dumps((skeleton(transcript), len(sent_pieces), len(received_pieces), firsts))
    return [head, *sent_pieces, *received_pieces]


def write_pieces(writer: TranscriptWriter, transcript: Transcript, key: bytes | None, limit: int = PIECE_BYTES) -> int:
    """Writes what the judging stage hands the sliced replay of one connection (:func:`connection_pieces`, each
    sealed with ``key``): its head, then its pieces on the rows after it; returns the head's row."""
    head, *pieces = connection_pieces(transcript, limit)
    at = writer.add_transcript(seal(key, head))
    for piece in pieces:
        writer.add_transcript(seal(key, piece))
    return at


class SliceRows(TableWriter):
    """A table's rows as the sliced replay writes them: in row groups of few rows, so that what the task holds
    before writing stays small beside a slice (the rows are those the whole model's replay writes, :mod:`.replay`)."""

    BATCH = 2048


class Pieces:
    """Where the head and pieces of the broker's connections are, read one piece at a time (or, :meth:`whole`,
    every connection's transcript rebuilt: what the tests' whole-model replay reads)."""

    def __init__(self, table: pa.Table, options: AuditOptions, files: TranscriptFiles) -> None:
        self._files, self._key = files, options.seal_key
        self.flows: list[str] = table.column("flow").to_pylist()
        self.skeletons: dict[str, Transcript] = {}
        self._places: dict[str, tuple[str, range, range]] = {}
        #: Per kind (sent, received), when each connection's first message of that kind was sent: (time, flow).
        self.firsts: tuple[list[tuple[float, str]], list[tuple[float, str]]] = ([], [])
        names = table.column("transcripts").to_pylist()
        rows = table.column("transcript_row").to_pylist()
        heads = transcript_blobs(
            options.out_dir, [(name, row, "transcript") for name, row in zip(names, rows, strict=True)]
        )
        for flow, name, row, blob in zip(self.flows, names, rows, heads, strict=True):
            head, sent, received, (first_sent, first_received) = pickle.loads(unseal(self._key, blob.to_pybytes()))
            self.skeletons[flow] = head
            self.firsts[0].append((first_sent, flow))
            self.firsts[1].append((first_received, flow))
            first = row + 1
            self._places[flow] = (name, range(first, first + sent), range(first + sent, first + sent + received))

    def weights(self) -> dict[str, int]:
        """Per connection, the pieces of deliveries it received: what replaying it weighs (by bytes)."""
        return {flow: len(received) for flow, (_, _, received) in self._places.items()}

    def _load(self, name: str, row: int) -> Any:
        return pickle.loads(unseal(self._key, self._files.blob(name, row, "transcript")))

    def sent(self, flow: str) -> Iterator[tuple[float, str, int, Published]]:
        """The messages ``flow`` sent, in time order, keyed as :func:`~mqttaudit.judge.stream.traffic` orders them."""
        name, rows, _ = self._places[flow]
        for row in rows:
            piece: list[Sent] = self._load(name, row)
            for time, event, record in piece:
                yield time, flow, event, record

    def received(self, flow: str) -> Iterator[tuple[float, str, int, Delivered, tuple[int, float] | None]]:
        """The deliveries ``flow`` received, in time order, with the client's answers."""
        name, _, rows = self._places[flow]
        for row in rows:
            piece: list[Received] = self._load(name, row)
            for time, event, delivery, answer in piece:
                yield time, flow, event, delivery, answer

    def whole(self) -> dict[str, Transcript]:
        """Every connection's whole transcript again (what the tests' whole-model replay reads)."""
        return {flow: self.whole_of(flow) for flow in self.skeletons}

    def whole_of(self, flow: str, *, received: bool = True) -> Transcript:
        """The whole transcript of connection ``flow`` again (without the deliveries it received unless
        ``received``)."""
        transcript = self.skeletons[flow]
        published = sorted([*transcript.published, *(r for *_, r in self.sent(flow))], key=lambda r: r.event)
        if not received:
            return replace(transcript, published=published)
        got = list(self.received(flow))
        delivered = sorted((d for _, _, _, d, _ in got), key=lambda d: d.event)
        answers = {event: answer for _, _, event, _, answer in got if answer is not None}
        return replace(transcript, published=published, delivered=delivered, answers=answers)

    def discarding(self) -> dict[str, Transcript]:
        """The whole transcripts the discarded-message rule [MQTT-3.1.2-25] reads: of each 5.0 subscriber that
        declared a Maximum Packet Size and each connection that published a message too large for it, found by
        reading one connection's messages at a time (none when no subscriber declared one)."""
        limited = {flow: t for flow, t in self.skeletons.items() if declared_maximum(t) is not None}
        concerned: set[str] = set()
        for flow in self.skeletons if limited else ():
            found = too_large_for(limited, flow, self.whole_of(flow, received=False))
            if found:
                concerned |= {flow, *found}
        return {flow: self.whole_of(flow) for flow in self.skeletons if flow in concerned}


def replay_sliced(
    table: pa.Table, options: AuditOptions, config: JudgeConfig | None = None, shard: tuple[int, int] = (0, 1)
) -> pa.Table:
    """The routing replay of one broker (every row of ``table`` a connection to it: where its head and pieces
    are), slice after slice; writes the deliveries, routing findings and not-assessable rows as each slice
    decides them and returns their counts. ``config``: the judge's (the audit's when not given). ``shard``: (this
    task's index, how many): the task decides the routing verdicts of one set of the broker's connections
    (:func:`~mqttaudit.judge.stream.shard_connections`), reading every message: the tasks of one broker, side by
    side, write between them what one task writes alone."""
    tune_gc()
    files = TranscriptFiles(options.out_dir)
    try:
        return _replay(table, options, config or options.judge_config, Pieces(table, options, files), shard)
    finally:
        files.close()


def broker_rows(table: pa.Table) -> tuple[str, dict[str, str | None]]:
    """The broker of a replay task's rows (every row a connection to it), and the capture of each connection."""
    captures = dict(zip(table.column("flow").to_pylist(), table.column("capture").to_pylist(), strict=True))
    return table.column("server")[0].as_py(), captures


def _replay(
    table: pa.Table, options: AuditOptions, config: JudgeConfig, pieces: Pieces, shard: tuple[int, int]
) -> pa.Table:
    """:func:`replay_sliced` with its pieces' files open."""
    broker, captures = broker_rows(table)
    skeletons = pieces.skeletons
    index, shards = shard
    subscribers = None if shards == 1 else shard_connections(skeletons, pieces.weights(), shards)[index]
    writers = replay_writers(broker, options, SliceRows, index)
    versions = {flow: judged_version(transcript, config) for flow, transcript in skeletons.items()}
    client_ids = {flow: connect_client_id(transcript) for flow, transcript in skeletons.items()}
    reasons: dict[str, str] = {}

    def write(judgement: Judgement) -> None:
        writers["routing_findings"].add(finding_rows(broker, judgement, versions))
        left = undecided_rows(broker, judgement, versions, captures, client_ids)
        writers["not_assessable"].add(left)
        merge_reasons(reasons, zip(left.data["rule"], left.data["reason"], strict=True))

    span = reach(config) * SPAN_OF_REACH if options.slice_span is None else options.slice_span
    # Closed however this loop ends: a replay left open keeps the worker's collector off and its objects frozen
    # (ReplayGarbage) for as long as anything holds the generator (a frame kept by a traceback would).
    with closing(_slices(pieces, config, options.slice_bytes, span, subscribers)) as slices:
        for decided, judgement in slices:
            for batch in delivery_batches(broker, decided, SliceRows.BATCH):
                writers["deliveries"].add(batch)
            write(judgement)
            del decided, judgement  # unreferenced when the next slice's garbage is collected
    if index == 0:  # the checks across the broker's connections, once
        write(across_connections(skeletons, pieces.discarding()))
    return replayed_row(broker, writers, reasons)


def _slices(
    pieces: Pieces, config: JudgeConfig, budget: int, span: float, subscribers: Collection[str] | None = None
) -> Generator[tuple[list[Expectation], Judgement], None, None]:
    """What :class:`~mqttaudit.judge.stream.SlicedRouting` decides slice after slice: the messages sent merged in
    time order and cut into slices of ``budget`` bytes that span ``span`` seconds at least, each judged with the
    deliveries in :func:`~mqttaudit.judge.stream.sight` of it (a window that moves on with the slices).
    ``subscribers``: the connections of the task's shard, whose deliveries alone it reads (None: all)."""
    sliced = SlicedRouting(pieces.skeletons, config, subscribers)
    sent = staggered_merge(pieces.firsts[0], pieces.sent)
    mine = [first for first in pieces.firsts[1] if subscribers is None or first[1] in subscribers]
    received = staggered_merge(mine, pieces.received)
    upcoming = next(received, None)
    window: deque[tuple[float, str, int, Delivered, tuple[int, float] | None]] = deque()
    # The window per connection, kept as it moves (each delivery is in the sight of several slices).
    seen: dict[str, deque[Delivered]] = {}
    answers: dict[str, dict[int, tuple[int, float]]] = {}
    with ReplayGarbage() as garbage:  # the slices' models are reference cycles: see ReplayGarbage
        for part, messages in cut_slices(sent, budget, lambda item: (item[0], _weight(item[3].message)), span):
            first, end = sight(part, config)
            while upcoming is not None and upcoming[0] < end:
                _, flow, event, delivery, answer = upcoming
                window.append(upcoming)
                seen.setdefault(flow, deque()).append(delivery)
                if answer is not None:
                    answers.setdefault(flow, {})[event] = answer
                upcoming = next(received, None)
            while window and window[0][0] < first:
                _, flow, event, _, answer = window.popleft()
                seen[flow].popleft()  # the oldest of its connection's too: the window is first in, first out
                if not seen[flow]:
                    del seen[flow]
                if answer is not None:
                    del answers[flow][event]
                    if not answers[flow]:
                        del answers[flow]
            yield sliced.run(part, [(flow, record) for _, flow, _, record in messages], seen, answers)
            garbage.sliced()


Item = TypeVar("Item", bound=tuple[Any, ...])


def staggered_merge(firsts: Iterable[tuple[float, str]], stream: Callable[[str], Iterator[Item]]) -> Iterator[Item]:
    """The items of every connection's ``stream`` (each in order of its first three fields: time, connection,
    event) merged in that order, a connection's stream opened only once the merge reaches the time of its first item
    (``firsts``: (that time, connection); :data:`INF` for a stream with none, never opened). A stream holds a piece
    loaded while it is open: merging all of them from the start (``heapq.merge``) held the first piece of every
    connection of the broker at once, most of a capture's traffic when most connections are short (684 MiB of
    messages sent at 8,000,000 packets, 8,104 connections); now what is held is a piece per connection that has
    begun and not ended."""
    waiting = sorted(first for first in firsts if first[0] != INF)
    heap: list[tuple[tuple[Any, ...], Item, Iterator[Item]]] = []
    index = 0
    while True:
        while index < len(waiting) and (not heap or waiting[index][0] <= heap[0][0][0]):
            items = stream(waiting[index][1])
            index += 1
            item = next(items, None)
            if item is not None:
                heapq.heappush(heap, (item[:3], item, items))
        if not heap:
            return
        _, item, items = heap[0]
        yield item
        following = next(items, None)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (following[:3], following, items))


def sliced_replayer(options: AuditOptions, shards: int = 1) -> Callable[[pa.Table], pa.Table]:
    """:func:`replay_sliced` bound to ``options``: a task of one group of rows, every row a connection of one broker
    with its shard's index (column ``shard``, 0 when absent) of ``shards``."""

    def run(table: pa.Table) -> pa.Table:
        index = table.column(SHARD)[0].as_py() if SHARD in table.column_names else 0
        return replay_sliced(table, options, shard=(index, shards))

    return run


def replay_groups(rows: Iterable[dict[str, Any]], replayer: Callable[[pa.Table], pa.Table]) -> list[dict[str, Any]]:
    """The rows ``replayer`` (:func:`sliced_replayer`) returns for each group of ``rows`` by broker and shard, the
    groups one after another in the order of their keys."""
    found: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        found.setdefault((row["server"], row.get(SHARD, 0)), []).append(row)
    return [
        replayed for _, group in sorted(found.items()) for replayed in replayer(pa.Table.from_pylist(group)).to_pylist()
    ]
