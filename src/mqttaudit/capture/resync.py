"""Finding a packet boundary again, after a gap or when a capture starts in the middle of a connection.

The rule. Framing from a candidate offset means reading fixed headers from it, packet after packet; a packet is
*clean* when the codec decodes it (for the direction of the stream) without any MUST-level violation. A candidate
is a *proven boundary* when the packets framed from it are clean and

(a) at least ``min_packets`` (3) of them follow each other and the last one ends exactly where the data of a TCP
    segment ended (senders write whole packets, so segment ends fall on packet ends), or
(b) at least ``min_unaligned_packets`` (12) of them follow each other, wherever they end (bulk transfers fill
    segments to the MSS, so packet ends rarely meet segment ends), or
(c) the contiguous bytes stop (at a gap or at the end of the stream) and at least one clean packet ends exactly at
    a segment end, with nothing after it but the start of a packet the stop cut short.

Candidates are every offset, in order; any packet of a candidate's chain that is longer than ``max_packet_size``,
or that would end more than ``max_bytes`` after the candidate, rejects it. The first candidate proven wins (when
one piece of data proves several, the earliest). Bytes before it are not assessable. Because a violation disproves
a candidate, a capture that starts on a packet with a violation loses that packet, never invents one.

Clean means clean in the version the connection speaks. While no CONNECT named it (a capture that starts inside
the connection), it may be any version the codec reads: a candidate's chain is proven when it is clean in one of
them, read in that one throughout (a 5.0 CONNACK with properties is no 3.1.1 packet, yet it proves its framing).
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass
from typing import Final

from mqttaudit.codec import Direction, PacketType, ProtocolVersion, Violation, decode, rules
from mqttaudit.codec import validators as check
from mqttaudit.codec.remaining_length import NEED_MORE, TOO_LONG, read_remaining_length
from mqttaudit.codec.stream import DEFAULT_MAX_PACKET_SIZE

DEFAULT_MIN_PACKETS: Final = 3
DEFAULT_MIN_UNALIGNED_PACKETS: Final = 12
#: How far ahead of a candidate a proof may reach; also what a hunt holds at most.
DEFAULT_MAX_BYTES: Final = 1 << 20
#: Pieces a hunt keeps apart at most: each costs about 250 bytes beyond its data (its record and its end), so a
#: megabyte of one-byte segments would cost a quarter of a gigabyte. Past it, a piece that continues the last one
#: joins it (timed and ordered as the last one was; its end is no longer a segment end, which only makes a proof
#: at it ask for more packets).
MAX_PIECES: Final = 4096

_PROVEN: Final = -1
_REJECTED: Final = -2


@dataclass(frozen=True, slots=True)
class ResyncRule:
    """The knobs of the boundary proof (see the module documentation)."""

    min_packets: int = DEFAULT_MIN_PACKETS
    min_unaligned_packets: int = DEFAULT_MIN_UNALIGNED_PACKETS
    max_bytes: int = DEFAULT_MAX_BYTES
    max_packet_size: int = DEFAULT_MAX_PACKET_SIZE


#: A piece of stream data as fed to a hunt: (stream offset, bytes, time in ns, order of arrival).
Piece = tuple[int, bytes, int, int]
_Fed = tuple[int, int, int, int]  # (stream offset, length, time, order)


@functools.cache
def clean_first_bytes(direction: Direction | None, version: ProtocolVersion = ProtocolVersion.V3_1_1) -> bytes:
    """For each first byte, 1 when the fixed header passes the codec's own header checks (type, direction, flags)
    for ``direction`` in ``version``: a candidate starting with another byte is rejected without decoding the rest."""
    table = bytearray(256)
    v5 = version is ProtocolVersion.V5
    for first in range(256):
        packet_type, flags = first >> 4, first & 0x0F
        out: list[Violation] = []
        if check.check_packet_type(packet_type, 0, out, v5):
            if direction is not None:
                check.check_direction(packet_type, direction, 0, out, v5)
            if packet_type == PacketType.PUBLISH:
                check.check_publish_flags(flags >> 1 & 3, bool(flags & 8), 0, out)
            else:
                check.check_fixed_flags(packet_type, flags, 0, out)
        table[first] = all(rules.is_advisory(violation.rule) for violation in out)
    return bytes(table)


class BoundaryHunt:
    """Looks for the first proven boundary in the stream of one direction from offset ``start`` on.

    Feed it the contiguous stream data as it arrives; :meth:`feed` returns the proven boundary once there is one,
    and :meth:`stop` applies clause (c) when the contiguous bytes stop. :meth:`pieces_from` then gives the data
    from the boundary on, split and timed as it was fed. Memory is bounded by ``max_bytes`` and one piece, and by
    :data:`MAX_PIECES` records of pieces.
    """

    def __init__(
        self,
        direction: Direction | None,
        start: int,
        rule: ResyncRule = ResyncRule(),
        version: ProtocolVersion | tuple[ProtocolVersion, ...] = ProtocolVersion.V3_1_1,
    ) -> None:
        self.direction = direction
        #: The versions candidates are decoded as: the one the connection's CONNECT named, when it was seen, else
        #: every version the connection may speak (a chain is clean in one of them).
        self.versions = version if isinstance(version, tuple) else (version,)
        self.start = start
        self.rule = rule
        self._base = start  # stream offset of _buf[0]
        self._buf = b""
        self._pieces: list[_Fed] = []
        self._ends: set[int] = set()  # stream offsets where a segment's data ended
        self._scanned = start  # candidates below this were tried (rejected, or waiting in _waiting)
        self._waiting: list[tuple[int, int]] = []  # (offset the candidate waits for, candidate)
        self._first_bytes = [clean_first_bytes(direction, each) for each in self.versions]

    @property
    def end(self) -> int:
        """Stream offset just past the last byte fed."""
        return self._base + len(self._buf)

    def feed(self, offset: int, data: bytes, time: int, order: int) -> int | None:
        if offset != self.end:
            raise ValueError(f"hunt fed offset {offset}, expected {self.end}")
        if data:
            self._buf += data
            pieces = self._pieces
            if len(pieces) >= MAX_PIECES and pieces[-1][0] + pieces[-1][1] == offset:
                last_offset, length, last_time, last_order = pieces[-1]
                pieces[-1] = (last_offset, length + len(data), last_time, last_order)
            else:
                pieces.append((offset, len(data), time, order))
                self._ends.add(offset + len(data))
        found = self._search()
        if found is None:
            self._trim()
        return found

    def stop(self) -> int | None:
        """The contiguous bytes stop here: the boundary clause (c) proves, if any."""
        proven = [candidate for _wait, candidate in self._waiting if self._try(candidate, stopped=True) == _PROVEN]
        self._waiting.clear()
        return min(proven) if proven else None

    def pieces_from(self, boundary: int) -> list[Piece]:
        """The data fed from ``boundary`` on, split and timed as fed."""
        pieces: list[Piece] = []
        base = self._base
        for offset, length, time, order in self._pieces:
            if offset + length > boundary:
                start = max(offset, boundary)
                pieces.append((start, self._buf[start - base : offset + length - base], time, order))
        return pieces

    def _search(self) -> int | None:
        proven: list[int] = []
        waiting = self._waiting
        end = self.end
        while waiting and waiting[0][0] <= end:
            _wait, candidate = heapq.heappop(waiting)
            self._record(candidate, self._try(candidate, stopped=False), proven)
        if proven:
            return min(proven)
        while self._scanned < end:
            candidate = self._scanned
            self._scanned += 1
            self._record(candidate, self._try(candidate, stopped=False), proven)
            if proven:
                return candidate
        return None

    def _record(self, candidate: int, result: int, proven: list[int]) -> None:
        if result == _PROVEN:
            proven.append(candidate)
        elif result != _REJECTED:
            heapq.heappush(self._waiting, (result, candidate))

    def _try(self, candidate: int, *, stopped: bool) -> int:
        """_PROVEN, _REJECTED, or the stream offset up to which data must arrive before trying again: the best
        of the chain read in each version the connection may speak."""
        waits = []
        for version, first_bytes in zip(self.versions, self._first_bytes, strict=True):
            result = self._try_in(candidate, version, first_bytes, stopped=stopped)
            if result == _PROVEN:
                return _PROVEN
            if result != _REJECTED:
                waits.append(result)
        return min(waits, default=_REJECTED)

    def _try_in(self, candidate: int, version: ProtocolVersion, first_bytes: bytes, *, stopped: bool) -> int:
        """:meth:`_try` with the chain read in ``version``."""
        buf, base, rule = self._buf, self._base, self.rule
        size = len(buf)
        pos = candidate - base
        count = 0
        aligned = False
        while True:
            if pos < size and not first_bytes[buf[pos]]:
                return _REJECTED
            if pos + 2 > size:
                wait = base + pos + 2
                break
            remaining, body = read_remaining_length(buf, pos + 1, size)
            if body == TOO_LONG:
                return _REJECTED
            if body == NEED_MORE:
                wait = base + size + 1
                break
            end = body + remaining
            if end - pos > rule.max_packet_size:
                return _REJECTED
            if end > size:
                wait = base + end
                break
            if not self._clean(buf[pos:end], version):
                return _REJECTED
            count += 1
            pos = end
            aligned = base + pos in self._ends
            if (aligned and count >= rule.min_packets) or count >= rule.min_unaligned_packets:
                return _PROVEN
        if stopped:
            return _PROVEN if count and aligned else _REJECTED
        if wait - candidate > rule.max_bytes:
            return _REJECTED
        return wait

    def _clean(self, packet: bytes, version: ProtocolVersion) -> bool:
        decoded = decode(packet, self.direction, max_packet_size=self.rule.max_packet_size, version=version)
        return not any(not rules.is_advisory(violation.rule) for violation in decoded.violations)

    def _trim(self) -> None:
        """Drops bytes no live candidate can reach: every live one is within ``max_bytes`` of the end."""
        keep_from = min([self._scanned, *(candidate for _wait, candidate in self._waiting)])
        drop = keep_from - self._base
        if drop <= max(len(self._buf) // 2, 64 * 1024):
            return
        self._buf = self._buf[drop:]
        self._base = keep_from
        self._pieces = [piece for piece in self._pieces if piece[0] + piece[1] > keep_from]
        self._ends = {end for end in self._ends if end > keep_from}
