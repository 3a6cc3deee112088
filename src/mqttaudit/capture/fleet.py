"""One TCP flow held by several capture files: which of its segments are one connection continued from file to
file (a rotation, ``tcpdump -G``/``-C``), which are the same bytes held twice (copies), and where copies disagree.

Connection identity is continuity, not the 4-tuple (:meth:`~.reassembly.Reassembler.is_new_connection`). Each
file's segments of the flow are first cut into the connections that file shows (*pieces*). Two pieces of different
files whose streams cover the same sequence numbers (and whose captured SYNs, if both hold one, agree) are copies
of one connection; their common bytes are compared:

- the same bytes: a piece whose every byte another piece holds too is a duplicate and is left out (its bytes are
  counted as deduplicated); one that also holds bytes the other lacks is merged with it (the reassembly keeps one
  copy of each byte);
- different bytes: which copy was on the wire is unknown, so neither is dropped: they are judged apart, each as a
  connection of its own named by its file, and the disagreement is a :class:`CopyConflict` (the files, the side,
  the first stream offset where they differ).

Pieces that share no sequence number (the files of a rotation, another connection reusing the 4-tuple) are merged
in capture-time order, where continuity splits them into connections as in one file. When no two files share one
at all (:func:`files_apart`, from the segments' sequence ranges, without reassembling), there is nothing to plan.

Pure: no Spark, no files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Final, NamedTuple

from mqttaudit.judge.sides import side_name

from .reassembly import DEFAULT_BROKER_PORTS, Data, Endpoint, Reassembler
from .segments import Segment, format_endpoint

_MASK: Final = 0xFFFFFFFF
_HALF: Final = 1 << 31


def sequence_distance(distance: int) -> int:
    """A sequence-number distance as a signed 32-bit number (wrap-around needs no special case)."""
    distance &= _MASK
    return distance - (1 << 32) if distance >= _HALF else distance


class Span(NamedTuple):
    """The stream of one sender in a piece: the sequence number of its offset 0, how far it reached (data and
    gaps), and its initial sequence number when its SYN was captured."""

    start: int
    length: int
    isn: int | None


@dataclass
class Piece:
    """The segments of one connection as one file holds them (indices into the flow's segments)."""

    capture: str
    rows: list[int] = field(default_factory=list)
    first_time: int = 0
    last_time: int = 0
    #: Per sending endpoint, its stream (only senders that sent a byte or a SYN).
    spans: dict[Endpoint, Span] = field(default_factory=dict)
    #: The role of each sending endpoint ("client", "server", or "unknown").
    roles: dict[Endpoint, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CopyConflict:
    """Two files hold the same bytes of one connection with different content: the stream of ``sender`` (its role
    ``side``) differs first at ``offset`` (from its first byte after the SYN, or from the first byte either file
    holds when neither captured the SYN). ``captures`` are the two files, the first by name first."""

    captures: tuple[str, str]
    sender: str
    side: str
    offset: int
    #: The capture times (ns) at which each file's piece starts, and the copies (:class:`FleetPlan`) judging them.
    times: tuple[int, int]
    copies: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A piece of ``capture`` left out because ``of`` holds every one of its ``bytes`` with the same content."""

    capture: str
    of: str
    bytes: int
    segments: int


@dataclass
class FleetPlan:
    """How one flow's segments from several files are judged: each entry of ``copies`` is judged as one flow
    (its segment indices in capture-time order), the first holding everything not in conflict; ``labels`` names,
    per copy after the first, the piece spans (first, last capture time, file) judged apart there."""

    copies: list[list[int]]
    conflicts: list[CopyConflict]
    duplicates: list[Duplicate]
    #: Per copy, the (first time, last time, capture) of its pieces that conflict with a piece of another copy.
    apart: list[list[tuple[int, int, str]]]

    def label(self, copy: int, first_time: int, last_time: int) -> str | None:
        """The file that names a connection of ``copy`` spanning those times, when it is a copy judged apart."""
        for start, end, capture in self.apart[copy]:
            if first_time <= end and start <= last_time:
                return capture
        return None


#: How far from a sender's first sequence number :func:`files_apart` reasons; past it, it leaves the question to
#: :func:`pieces` and :func:`plan` (a signed 32-bit distance has no meaning near half the sequence space).
_FAR: Final = 1 << 30


def files_apart(segments: Iterable[tuple[str, Endpoint, int, int]]) -> bool:
    """Whether no two files can hold a common byte of a flow, from its segments as (file, sender, sequence number,
    the sequence numbers it takes: payload, SYN, FIN): per sender, the ranges each file's segments take (from the
    sender's first) are disjoint. Then no piece of one file is a copy of another's (a rotation, or connections
    that reuse the 4-tuple in other files): the files are merged in capture-time order as one file is, and
    :func:`pieces` and :func:`plan`, which reassemble each file's copy to compare them, have nothing to decide."""
    origin: dict[Endpoint, int] = {}
    reach: dict[tuple[Endpoint, str], tuple[int, int]] = {}
    for capture, sender, seq, length in segments:
        if length <= 0:
            continue
        start = sequence_distance(seq - origin.setdefault(sender, seq))
        if abs(start) > _FAR:
            return False
        low, high = reach.get((sender, capture), (start, start + length))
        reach[(sender, capture)] = (min(low, start), max(high, start + length))
    spans: dict[Endpoint, list[tuple[int, int]]] = {}
    for (sender, _capture), span in reach.items():
        spans.setdefault(sender, []).append(span)
    for ranges in spans.values():
        ranges.sort()
        if any(following[0] < previous[1] for previous, following in pairwise(ranges)):
            return False
    return True


def pieces(
    captures: Sequence[str], segments: Iterable[Segment], broker_ports: frozenset[int] = DEFAULT_BROKER_PORTS
) -> list[Piece]:
    """The flow's segments (in capture-time order; ``captures[i]`` holds segment ``i``) cut, file by file, into the
    connections each file shows."""
    open_pieces: dict[str, tuple[Piece, Reassembler]] = {}
    done: list[Piece] = []
    for index, segment in enumerate(segments):
        capture = captures[index]
        current = open_pieces.get(capture)
        if current is not None and current[1].is_new_connection(segment):
            done.append(_closed(*current))
            current = None
        if current is None:
            current = open_pieces[capture] = (
                Piece(capture, first_time=segment[0]),
                Reassembler(broker_ports=broker_ports),
            )
        piece, reassembler = current
        piece.rows.append(index)
        piece.last_time = segment[0]
        reassembler.feed(segment)
    done += [_closed(piece, reassembler) for piece, reassembler in open_pieces.values()]
    return sorted(done, key=lambda piece: (piece.capture, piece.first_time))


def _closed(piece: Piece, reassembler: Reassembler) -> Piece:
    reassembler.finish()
    assert reassembler.endpoints is not None
    for side, sender in enumerate(reassembler.endpoints):
        start = reassembler.stream_start(side)
        if start is not None:
            piece.spans[sender] = Span(start, reassembler.next_offset(side), reassembler.isn(side))
            direction = reassembler.direction(side)
            piece.roles[sender] = "unknown" if direction is None else side_name(direction)
    return piece


def _may_be_copies(first: Piece, second: Piece) -> bool:
    """Whether two pieces of different files cover common sequence numbers of one connection: some sender's
    streams overlap, and no sender's captured SYNs disagree."""
    overlap = False
    for sender, span in first.spans.items():
        other = second.spans.get(sender)
        if other is None:
            continue
        if span.isn is not None and other.isn is not None and span.isn != other.isn:
            return False
        shift = sequence_distance(other.start - span.start)
        if shift < span.length and shift + other.length > 0 and span.length and other.length:
            overlap = True
    return overlap


def _streams(segments: Iterable[Segment]) -> dict[Endpoint, list[tuple[int, bytes]]]:
    """Each sender's delivered bytes in a piece, as (sequence distance from its stream start, bytes) in order."""
    reassembler = Reassembler()
    found: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    for segment in segments:
        for out in reassembler.feed(segment):
            if isinstance(out, Data):
                found[out.side].append((out.offset, out.data))
    for out in reassembler.finish():
        if isinstance(out, Data):
            found[out.side].append((out.offset, out.data))
    if reassembler.endpoints is None:
        return {}
    return {reassembler.endpoints[side]: found[side] for side in (0, 1)}


class Comparison(NamedTuple):
    """Two copies of one sender's stream compared: the first offset (in the first copy) where they differ (None:
    nowhere), the bytes they have in common, and whether each copy holds every byte of the other."""

    differs_at: int | None
    common: int
    mine_holds_theirs: bool
    theirs_holds_mine: bool


def _compare(mine: list[tuple[int, bytes]], theirs: list[tuple[int, bytes]], shift: int) -> Comparison:
    """Compares two copies of one sender's stream (``theirs`` starts ``shift`` bytes after ``mine``) in one pass.
    Each copy's ranges are disjoint (the reassembly delivers each byte once), so the bytes in common are the
    overlap of both: a copy holds the other's every byte when they are all of the other's."""
    common = 0
    index = 0
    for their_offset, data in theirs:
        start, end = their_offset + shift, their_offset + shift + len(data)
        while index < len(mine) and mine[index][0] + len(mine[index][1]) <= start:
            index += 1
        probe = index
        while probe < len(mine) and mine[probe][0] < end:
            offset, held = mine[probe]
            low, high = max(start, offset), min(end, offset + len(held))
            a, b = held[low - offset : high - offset], data[low - start : high - start]
            if a != b:
                at = next(i for i in range(len(a)) if a[i] != b[i])
                return Comparison(low + at, common, False, False)
            common += high - low
            probe += 1
    return Comparison(
        None,
        common,
        common == sum(len(data) for _offset, data in theirs),
        common == sum(len(data) for _offset, data in mine),
    )


def plan(segment_at: Callable[[list[int]], Iterator[Segment]], found: list[Piece]) -> FleetPlan:
    """How to judge a flow whose ``found`` pieces come from several files (``segment_at`` gives the segments of
    the indices it is given, in order)."""
    streams: dict[int, dict[Endpoint, list[tuple[int, bytes]]]] = {}

    def stream(number: int) -> dict[Endpoint, list[tuple[int, bytes]]]:
        if number not in streams:
            streams[number] = _streams(segment_at(found[number].rows))
        return streams[number]

    conflicting: dict[int, set[int]] = {}
    conflicts: list[CopyConflict] = []
    pairs: list[tuple[int, int]] = []
    contained_in: dict[int, tuple[int, int]] = {}  # piece -> (the piece holding all its bytes, bytes in common)
    for i, first in enumerate(found):
        for j in range(i + 1, len(found)):
            second = found[j]
            if first.capture == second.capture or not _may_be_copies(first, second):
                continue
            differs = None
            i_in_j = j_in_i = True
            common = 0
            for sender, span in first.spans.items():
                other = second.spans.get(sender)
                if other is None:
                    i_in_j = i_in_j and not any(data for _o, data in stream(i).get(sender, []))
                    continue
                shift = sequence_distance(other.start - span.start)
                at, same, holds_theirs, holds_mine = _compare(stream(i)[sender], stream(j)[sender], shift)
                common += same
                j_in_i, i_in_j = j_in_i and holds_theirs, i_in_j and holds_mine
                if at is not None and differs is None:
                    base = _stream_base(span, other, shift)
                    differs = CopyConflict(
                        (first.capture, second.capture),
                        format_endpoint(*sender),
                        first.roles.get(sender, "unknown"),
                        at - base,
                        (first.first_time, second.first_time),
                    )
            for sender in second.spans.keys() - first.spans.keys():
                j_in_i = j_in_i and not any(data for _o, data in stream(j).get(sender, []))
            if differs is not None:
                conflicts.append(differs)
                pairs.append((i, j))
                conflicting.setdefault(i, set()).add(j)
                conflicting.setdefault(j, set()).add(i)
            elif j_in_i and j not in contained_in:
                contained_in[j] = (i, common)
            elif i_in_j and i not in contained_in:
                contained_in[i] = (j, common)
    dropped = {number for number in contained_in if number not in conflicting}
    # A piece held by another that is itself dropped stays (both copies are equal: the first by name is kept).
    dropped = {number for number in dropped if contained_in[number][0] not in dropped}
    duplicates = [
        Duplicate(
            found[number].capture,
            found[contained_in[number][0]].capture,
            contained_in[number][1],
            len(found[number].rows),
        )
        for number in sorted(dropped)
    ]
    copy_of: dict[int, int] = {}
    members: list[list[int]] = [[]]
    for number in range(len(found)):
        if number in dropped:
            continue
        rivals = conflicting.get(number, set())
        copy = next(c for c in range(len(members) + 1) if c == len(members) or not rivals & set(members[c]))
        if copy == len(members):
            members.append([])
        members[copy].append(number)
        copy_of[number] = copy
    conflicts = [
        CopyConflict(c.captures, c.sender, c.side, c.offset, c.times, (copy_of[pair[0]], copy_of[pair[1]]))
        for c, pair in zip(conflicts, pairs, strict=True)
    ]
    apart: list[list[tuple[int, int, str]]] = [
        [(found[n].first_time, found[n].last_time, found[n].capture) for n in copy if n in conflicting]
        for copy in members
    ]
    copies = [sorted(row for number in copy for row in found[number].rows) for copy in members]
    return FleetPlan(copies, conflicts, duplicates, apart)


def _stream_base(span: Span, other: Span, shift: int) -> int:
    """Where the sender's stream starts, as a distance from ``span.start``: after its SYN when either copy captured
    it, else at the first byte either copy holds."""
    if span.isn is not None:
        return 0
    if other.isn is not None:
        return shift
    return min(0, shift)
