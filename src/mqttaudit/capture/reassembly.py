"""TCP reassembly of one connection, both directions, sans-I/O: segments in (in capture order), the bytes of each
direction out in stream order, with every hole, duplicate and disagreement reported rather than hidden.

Each direction is a *side*: side 0 is the endpoint that sent the first segment seen, side 1 its peer. Stream
offsets count the bytes a side sent, from 0 at the byte after its SYN (or at the first byte seen, when its SYN was
not captured: a *mid-stream* start). Sequence numbers are mapped to offsets by their signed 32-bit distance from the
next expected byte, so wrap-around at 2**32 needs no special case.

What comes out, in order: :class:`Data` (in-order bytes of one segment, timed by the segment that made them
deliverable), :class:`Gap` (bytes that were sent but never captured), :class:`Conflict` (bytes that arrived twice
with different content; the first copy is kept) and :class:`End` (the side's FIN reached in order, or a reset).

A hole is declared a gap once the window has moved past it: the peer acknowledges bytes beyond its start, a reset
ends the connection, or the input ends. A FIN alone does not close a hole: TCP still retransmits the missing bytes
after the FIN, and the peer's acknowledgement settles it. What a side holds behind holes is bounded
(``max_buffered``, each piece charged its bytes plus :data:`~.budgets.PIECE_COST`): at the bound the oldest holes
are declared gaps (``Gap.budget``) until half of it is free.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from mqttaudit.codec import Direction

from .budgets import DEFAULT_MAX_OUT_OF_ORDER_BYTES, PIECE_COST
from .segments import ACK, FIN, RST, SYN, Segment, format_endpoint

#: An endpoint: packed IP address and port.
Endpoint = tuple[bytes, int]

DEFAULT_BROKER_PORTS: Final = frozenset({1883})
#: Delivered bytes kept per direction (at least this many, at most twice), to tell an exact retransmission from one
#: with different content.
DEFAULT_HISTORY: Final = 64 * 1024
#: Data further ahead of the next expected byte than the largest TCP window (2**30) is not of this connection.
MAX_WINDOW: Final = 1 << 30

_MASK: Final = 0xFFFFFFFF
_HALF: Final = 1 << 31
_WRAP: Final = 1 << 32


class Data(NamedTuple):
    """In-order bytes of ``side`` at stream ``offset``, deliverable since the segment captured at ``time`` (ns)."""

    side: int
    offset: int
    data: bytes
    time: int


class Gap(NamedTuple):
    """``length`` bytes of ``side`` at ``offset`` were sent but not captured; decided at ``time``. ``budget``: the
    gap was declared because the out-of-order bytes held behind it reached the budget (the bytes had not been
    captured by then; a later retransmission of them is no longer taken)."""

    side: int
    offset: int
    length: int
    time: int
    budget: bool = False


class Conflict(NamedTuple):
    """``length`` bytes of ``side`` at ``offset`` arrived again, at ``time``, with different content (first kept)."""

    side: int
    offset: int
    length: int
    time: int


class End(NamedTuple):
    """``side`` ended its stream at ``offset``: its FIN, reached in order, or a reset (``abrupt``)."""

    side: int
    abrupt: bool
    offset: int
    time: int


Output = Data | Gap | Conflict | End


@dataclass(slots=True)
class SideStats:
    """Bytes a side sent that are not part of its stream, by why they were left out."""

    retransmitted: int = 0  # exact copies of bytes already held
    conflicting: int = 0  # copies with different content (the first copy is kept)
    unverified: int = 0  # copies of bytes delivered too long ago to compare
    keepalive: int = 0  # the garbage byte of keep-alive probes (sequence number one below the next byte)
    before_start: int = 0  # bytes before the first byte of a mid-stream start, or before the SYN
    after_end: int = 0  # bytes beyond the FIN, in a reset, or after the connection ended
    out_of_window: int = 0  # bytes too far ahead to belong to this connection


@dataclass(slots=True)
class _Half:
    """One direction of the connection: what one side sent."""

    started: bool = False
    syn: bool = False  # the stream started at a captured SYN (offset 0 is its first byte)
    isn: int | None = None
    next_seq: int = 0  # sequence number of the next expected byte
    next_offset: int = 0  # its stream offset: delivered bytes plus gap bytes so far
    pending: list[tuple[int, bytes]] = field(default_factory=list)  # out-of-order pieces, sorted, disjoint
    buffered: int = 0  # what the pieces cost: their bytes plus PIECE_COST each
    history: bytearray = field(default_factory=bytearray)  # the last delivered bytes, ending at next_offset
    acked: int = 0  # highest offset the peer acknowledged beyond what was delivered (it declares gaps)
    acked_through: int = 0  # highest offset the peer acknowledged at all: what surely reached it
    fin: int | None = None  # offset of the FIN
    ended: bool = False
    stats: SideStats = field(default_factory=SideStats)

    def start(self, seq: int) -> None:
        self.started = True
        self.next_seq = seq & _MASK

    def offset_of(self, seq: int) -> int:
        distance = (seq - self.next_seq) & _MASK
        return self.next_offset + (distance - _WRAP if distance >= _HALF else distance)


class Reassembler:
    """Reassembles one TCP connection; feed it that connection's segments in capture order.

    The client is the SYN sender (or the peer of a SYN-ACK sender) when the handshake is seen; otherwise the side
    whose peer uses one of ``broker_ports``; otherwise unknown (``client`` is None), with the reason in
    ``direction_reason``. The choice is made on the first segment.
    """

    def __init__(
        self,
        *,
        broker_ports: frozenset[int] = DEFAULT_BROKER_PORTS,
        max_buffered: int = DEFAULT_MAX_OUT_OF_ORDER_BYTES,
        history: int = DEFAULT_HISTORY,
    ) -> None:
        self.broker_ports = broker_ports
        self.max_buffered = max_buffered
        self.history = history
        self.endpoints: tuple[Endpoint, Endpoint] | None = None
        self.client: int | None = None
        self.direction_reason = ""
        self.closed = False
        #: Both FINs were reached in order, or a reset came: the connection ended on the wire (not the input).
        self.ended = False
        self.first_time: int | None = None
        self.last_time: int | None = None
        self._halves = (_Half(), _Half())

    def direction(self, side: int) -> Direction | None:
        """Who sent the bytes of ``side``, when the client is known."""
        if self.client is None:
            return None
        return Direction.FROM_CLIENT if side == self.client else Direction.FROM_SERVER

    def started_with_syn(self, side: int) -> bool:
        """Whether the stream of ``side`` starts where its handshake puts it: at its captured SYN, or where the
        acknowledgement of its peer's captured SYN-ACK says (else at the first byte seen: mid-stream)."""
        return self._halves[side].syn

    def acked_through(self, side: int) -> int:
        """The stream offset of ``side`` up to which its peer's TCP acknowledged receipt, in what was captured."""
        return self._halves[side].acked_through

    def isn(self, side: int) -> int | None:
        """The initial sequence number of ``side``, when its SYN was captured."""
        return self._halves[side].isn

    def stats(self, side: int) -> SideStats:
        return self._halves[side].stats

    def held(self, side: int) -> int:
        """What ``side`` holds behind its holes: the pieces' bytes plus :data:`~.budgets.PIECE_COST` each (never
        more than ``max_buffered`` once :meth:`feed` has returned)."""
        return self._halves[side].buffered

    def next_offset(self, side: int) -> int:
        """How far the stream of ``side`` has been delivered (data and gaps)."""
        return self._halves[side].next_offset

    def stream_start(self, side: int) -> int | None:
        """The sequence number of stream offset 0 of ``side`` (None before its stream started)."""
        half = self._halves[side]
        return (half.next_seq - half.next_offset) & _MASK if half.started else None

    def side_of(self, segment: Segment) -> int:
        """0 or 1 for a segment of this connection; ValueError for another connection's."""
        source, destination = (segment[1], segment[2]), (segment[3], segment[4])
        if self.endpoints is None:
            raise ValueError("no segment fed yet")
        if self.endpoints == (source, destination):
            return 0
        if self.endpoints == (destination, source):
            return 1
        raise ValueError(f"segment {format_endpoint(*source)} -> {format_endpoint(*destination)} is not of this flow")

    def is_new_connection(self, segment: Segment) -> bool:
        """True for a segment that cannot belong to this connection although it has its endpoints: the start of
        another one (port reuse, a device that rebooted, even with the same initial sequence numbers).

        Connection identity is continuity, not the 4-tuple: a new connection starts at a SYN or SYN-ACK other than
        a retransmission of this one's (another sequence number, or this one already carried data, a FIN or a
        reset); at new data after this one ended (both FINs or a reset) or after its sender's FIN (bytes beyond
        the FIN, or bytes the sender already delivered with other content after its stream ended); and at data
        further from the next expected byte than any TCP window (a sequence jump)."""
        if self.endpoints is None:
            return False
        _time, _source, _sport, _destination, _dport, seq, _ack, flags, payload = segment
        side = self.side_of(segment)
        half = self._halves[side]
        if flags & SYN:
            if half.isn is None:
                return half.started  # a SYN for a stream already seen from its middle
            if half.isn != seq:
                return True
            progressed = half.next_offset > 0 or bool(half.pending) or half.fin is not None
            if not flags & ACK:  # the SYN sender: nothing may have come from either side yet
                peer = self._halves[1 - side]
                progressed = progressed or peer.next_offset > 0 or bool(peer.pending) or peer.fin is not None
            return progressed or self.ended
        if not payload or not half.started:
            return self.ended and bool(payload)
        offset = half.offset_of(seq)
        end = offset + len(payload)
        if offset - half.next_offset > MAX_WINDOW or half.next_offset - end > MAX_WINDOW:
            return True  # a sequence jump: no window of this connection reaches it
        if self.ended or half.ended:
            return not self._repeats(half, offset, payload)
        return half.fin is not None and end > half.fin

    def _repeats(self, half: _Half, offset: int, payload: bytes) -> bool:
        """Whether ``payload`` at ``offset`` is an exact copy of bytes the side already delivered (a retransmission
        after its stream ended), as far as the kept history shows."""
        history_start = half.next_offset - len(half.history)
        if offset < history_start or offset + len(payload) > half.next_offset:
            return False
        return half.history[offset - history_start : offset - history_start + len(payload)] == payload

    def feed(self, segment: Segment) -> list[Output]:
        time, _source, _source_port, _destination, _destination_port, seq, ack, flags, payload = segment
        if self.endpoints is None:
            self._begin(segment)
        side = self.side_of(segment)
        if self.first_time is None:
            self.first_time = time
        self.last_time = time
        half = self._halves[side]
        out: list[Output] = []
        if self.closed:
            half.stats.after_end += len(payload)
            return out
        if flags & RST:
            half.stats.after_end += len(payload)
            self._reset(side, time, out)
            return out
        data_seq = seq
        if flags & SYN:
            if half.isn is None and not half.started:
                half.isn, half.syn = seq, True
                half.start(seq + 1)
            elif half.isn != seq:  # another connection's SYN: the caller splits on is_new_connection()
                half.stats.out_of_window += len(payload)
                return out
            data_seq = seq + 1
            peer = self._halves[1 - side]
            if flags & ACK and peer.isn is None and not peer.started:
                # A SYN-ACK acknowledges the SYN: the SYN sender's stream starts at its acknowledgement number.
                peer.isn, peer.syn = (ack - 1) & _MASK, True
                peer.start(ack)
        if flags & ACK:
            # First what the acknowledgement settles of the peer's stream: its sender received those bytes before it
            # sent this segment, so a gap it declares, or peer data it releases, comes before this segment's data.
            peer = self._halves[1 - side]
            if peer.started:
                acked = peer.offset_of(ack)
                if peer.fin is not None:
                    acked = min(acked, peer.fin)  # the FIN takes one sequence number, no stream byte
                if acked <= peer.next_offset + MAX_WINDOW and acked > peer.acked_through:
                    peer.acked_through = acked
                if peer.next_offset < acked <= peer.next_offset + MAX_WINDOW and acked > peer.acked:
                    peer.acked = acked
                self._advance(1 - side, peer, time, out, force=False)
        if not half.started and (payload or flags & FIN):
            half.start(data_seq)  # mid-stream; a bare ACK does not start it (keep-alives sit one byte back)
        if half.started:
            offset = half.offset_of(data_seq)
            if payload:
                self._accept(side, half, offset, payload, time, out)
            if flags & FIN and half.fin is None:
                self._set_fin(half, offset + len(payload))
        self._advance(side, half, time, out, force=False)
        return out

    def finish(self) -> list[Output]:
        """Ends the input: every hole still open is a gap, and bytes the peer acknowledged beyond the last byte
        seen are a gap too (a FIN whose segment was not captured counts as one such byte)."""
        out: list[Output] = []
        if not self.closed and self.last_time is not None:
            for side, half in enumerate(self._halves):
                self._drain(side, half, self.last_time, out)
            self.closed = True
        return out

    def _begin(self, segment: Segment) -> None:
        _time, source, source_port, destination, destination_port, _seq, _ack, flags, _payload = segment
        self.endpoints = ((source, source_port), (destination, destination_port))
        names = format_endpoint(source, source_port), format_endpoint(destination, destination_port)
        if flags & (SYN | ACK) == SYN:
            self.client, self.direction_reason = 0, f"handshake: {names[0]} sent the SYN"
        elif flags & SYN:
            self.client, self.direction_reason = 1, f"handshake: {names[0]} sent the SYN-ACK"
        elif (source_port in self.broker_ports) != (destination_port in self.broker_ports):
            self.client = 1 if source_port in self.broker_ports else 0
            server = 1 - self.client
            self.direction_reason = f"no handshake seen; {names[server]} uses a broker port"
        else:
            which = "both ports are" if source_port in self.broker_ports else "neither port is"
            ports = ", ".join(str(port) for port in sorted(self.broker_ports))
            self.direction_reason = f"unknown: no handshake seen and {which} a broker port ({ports})"

    def _accept(self, side: int, half: _Half, offset: int, payload: bytes, time: int, out: list[Output]) -> None:
        stats = half.stats
        end = offset + len(payload)
        if half.fin is not None and end > half.fin:
            keep = max(0, half.fin - offset)
            stats.after_end += len(payload) - keep
            payload, end = payload[:keep], offset + keep
        if offset < 0:
            cut = min(-offset, len(payload))
            stats.before_start += cut
            payload, offset = payload[cut:], offset + cut
        if not payload:
            return
        if offset - half.next_offset > MAX_WINDOW:
            stats.out_of_window += len(payload)
            return
        if offset < half.next_offset:
            if len(payload) == 1 and end == half.next_offset:
                stats.keepalive += 1
                return
            seen = min(end, half.next_offset) - offset
            self._compare_delivered(side, half, offset, payload[:seen], time, out)
            payload, offset = payload[seen:], offset + seen
            if not payload:
                return
        if offset == half.next_offset and not half.pending:  # in order, nothing waiting: the common case
            self._deliver(side, half, payload, time, out)
            return
        self._insert(side, half, offset, payload, time, out)

    def _compare_delivered(
        self, side: int, half: _Half, offset: int, payload: bytes, time: int, out: list[Output]
    ) -> None:
        history_start = half.next_offset - len(half.history)
        known = max(offset, history_start)
        half.stats.unverified += min(known, offset + len(payload)) - offset  # the copy's bytes, not its distance
        if known >= offset + len(payload):
            return
        old = half.history[known - history_start : offset + len(payload) - history_start]
        new = payload[known - offset :]
        self._compare(side, half, known, old, new, time, out)

    def _compare(
        self, side: int, half: _Half, offset: int, old: bytes | bytearray, new: bytes, time: int, out: list[Output]
    ) -> None:
        if old == new:
            half.stats.retransmitted += len(new)
        else:
            half.stats.conflicting += len(new)
            out.append(Conflict(side, offset, len(new), time))

    def _insert(self, side: int, half: _Half, offset: int, payload: bytes, time: int, out: list[Output]) -> None:
        """Adds the parts of ``payload`` no earlier piece holds; the overlapping parts are compared (first wins)."""
        pending = half.pending
        end = offset + len(payload)
        index = bisect.bisect_right(pending, offset, key=lambda piece: piece[0])
        if index and pending[index - 1][0] + len(pending[index - 1][1]) > offset:
            index -= 1
        pieces: list[tuple[int, bytes]] = []
        cursor = offset
        while index < len(pending) and pending[index][0] < end:
            start, data = pending[index]
            if start > cursor:
                pieces.append((cursor, payload[cursor - offset : start - offset]))
            overlap_start, overlap_end = max(start, cursor), min(start + len(data), end)
            if overlap_start < overlap_end:
                old = data[overlap_start - start : overlap_end - start]
                new = payload[overlap_start - offset : overlap_end - offset]
                self._compare(side, half, overlap_start, old, new, time, out)
            cursor = max(cursor, overlap_end)
            index += 1
        if cursor < end:
            pieces.append((cursor, payload[cursor - offset :]))
        for piece in pieces:
            bisect.insort(pending, piece, key=lambda item: item[0])
            half.buffered += len(piece[1]) + PIECE_COST

    def _set_fin(self, half: _Half, fin: int) -> None:
        fin = max(fin, half.next_offset)
        half.fin = fin
        kept: list[tuple[int, bytes]] = []
        for start, data in half.pending:
            if start + len(data) <= fin:
                kept.append((start, data))
                continue
            half.stats.after_end += start + len(data) - max(start, fin)
            half.buffered -= len(data) + PIECE_COST
            if start < fin:
                kept.append((start, data[: fin - start]))
                half.buffered += fin - start + PIECE_COST
        half.pending = kept
        half.acked = min(half.acked, fin)

    def _advance(self, side: int, half: _Half, time: int, out: list[Output], *, force: bool) -> None:
        """Delivers what is in order; declares holes the window has moved past, and (past the out-of-order budget)
        the oldest holes until half of the budget is free. Delivered pieces leave the list at once, at the end."""
        pending = half.pending
        over = half.buffered > self.max_buffered
        taken = 0
        while True:
            if taken < len(pending) and pending[taken][0] == half.next_offset:
                data = pending[taken][1]
                taken += 1
                half.buffered -= len(data) + PIECE_COST
                self._deliver(side, half, data, time, out)
                continue
            hole_end = pending[taken][0] if taken < len(pending) else half.fin
            if hole_end is None or hole_end <= half.next_offset:
                break
            budget = False
            if force:
                lost_to = hole_end
            elif over and half.buffered > self.max_buffered // 2:
                lost_to, budget = hole_end, half.acked < hole_end
            else:
                lost_to = min(half.acked, hole_end)
            if lost_to <= half.next_offset:
                break
            self._gap(side, half, lost_to - half.next_offset, time, out, budget=budget)
        if taken:
            del pending[:taken]
        if half.fin is not None and half.next_offset == half.fin and not half.ended:
            half.ended = True
            out.append(End(side, False, half.fin, time))
            if all(other.ended for other in self._halves):
                self.closed = self.ended = True

    def _drain(self, side: int, half: _Half, time: int, out: list[Output]) -> None:
        self._advance(side, half, time, out, force=True)
        if half.fin is None and half.acked > half.next_offset:
            self._gap(side, half, half.acked - half.next_offset, time, out)

    def _deliver(self, side: int, half: _Half, data: bytes, time: int, out: list[Output]) -> None:
        out.append(Data(side, half.next_offset, data, time))
        half.next_offset += len(data)
        half.next_seq = (half.next_seq + len(data)) & _MASK
        history = half.history
        history += data
        if len(history) > 2 * self.history:  # trimmed now and then, not on every segment
            del history[: len(history) - self.history]

    def _gap(self, side: int, half: _Half, length: int, time: int, out: list[Output], *, budget: bool = False) -> None:
        out.append(Gap(side, half.next_offset, length, time, budget))
        half.next_offset += length
        half.next_seq = (half.next_seq + length) & _MASK
        half.history.clear()

    def _reset(self, side: int, time: int, out: list[Output]) -> None:
        for index, half in enumerate(self._halves):
            self._drain(index, half, time, out)
        out.append(End(side, True, self._halves[side].next_offset, time))
        self.closed = self.ended = True
