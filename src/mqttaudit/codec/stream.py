"""Framing: the StreamDecoder turns a byte stream of one direction into frames, whatever the split of its input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from mqttaudit.spec import identity

from . import rules
from .buffer import BytesLike, to_bytes
from .errors import ProtocolViolation, Violation
from .packets import Direction, Packet, PacketType, Value
from .readers import check_first_byte, read_packet
from .remaining_length import NEED_MORE, TOO_LONG, is_shortest, read_remaining_length
from .version import ProtocolVersion

#: Default bound on one packet (fixed header included). Larger packets are reported and skipped, never buffered.
DEFAULT_MAX_PACKET_SIZE: Final = 16 * 1024 * 1024
#: The smallest ``max_packet_size``: a type byte and four Remaining Length bytes come before a packet's size is
#: known (or known to be unframeable), and they must be held meanwhile.
MIN_MAX_PACKET_SIZE: Final = 5
_CONNECT: Final = int(PacketType.CONNECT)
#: How many bytes of an oversized packet or an unframeable run are kept as evidence.
EVIDENCE_BYTES: Final = 64


class Frame(Value):
    """One framed packet, or a run of bytes that could not be decoded (``packet`` is None).

    ``offset`` is the stream offset of its first byte and ``length`` how many stream bytes it covers. ``raw`` holds
    those bytes, except for oversized packets and unframeable runs, where it holds the first ``EVIDENCE_BYTES``.
    """

    FIELDS = ("offset", "length", "raw", "packet", "violations")

    def __init__(
        self, offset: int, length: int, raw: BytesLike, packet: Packet | None, violations: tuple[Violation, ...] = ()
    ) -> None:
        self.offset: Final = offset
        self.length: Final = length
        self.raw: Final = raw if isinstance(raw, bytes) else to_bytes(raw, "raw")  # no call in the common case
        self.packet: Final = packet
        self.violations: Final = violations


@dataclass(slots=True)
class _Run:
    """Bytes passed over without decoding: an oversized packet (``remaining`` known) or, after a five-byte
    Remaining Length, the rest of the stream (``remaining`` None)."""

    offset: int
    remaining: int | None
    violations: tuple[Violation, ...]
    length: int = 0
    evidence: bytearray = field(default_factory=bytearray)

    def frame(self, extra: tuple[Violation, ...] = ()) -> Frame:
        return Frame(self.offset, self.length, bytes(self.evidence), None, self.violations + extra)


class StreamDecoder:
    """Incremental decoder of one direction of one connection.

    ``feed`` returns the frames completed by the new bytes and ``close`` those left at the end of the stream; the
    frames are the same for any split of the input, and their lengths add up to every byte fed. A packet declared
    larger than ``max_packet_size`` is reported and its bytes are skipped as they arrive, so memory stays bounded
    by ``max_packet_size``. After a Remaining Length of five bytes no packet boundary can be found again: the rest
    of the stream is returned by ``close`` as one frame with ``packet=None``.

    Framing is linear in the bytes fed: while a packet of known size is incomplete, the bytes fed are appended
    in place and the packet is joined once, when its last byte arrives, however small the pieces.

    With ``strict=True`` the first frame holding a MUST-level violation raises :class:`ProtocolViolation`, whose
    ``frames`` are the frames completed in that call, the offending one last; the decoder can go on afterwards.

    ``max_packet_size`` below :data:`MIN_MAX_PACKET_SIZE` is a ``ValueError``: a fixed header alone may take that
    many bytes before the packet's size is known, so no smaller bound could be kept.

    ``version`` is the MQTT version the bytes are read as (3.1.1 by default). ``version=None`` learns it from the
    first CONNECT of the stream (read as 3.1.1 until then; the CONNECT itself is read as the version it names). A
    decoder given ``peer`` (the decoder of the other direction) reads as that decoder's version at each packet:
    the server direction of a connection follows the client's CONNECT.
    """

    def __init__(
        self,
        direction: Direction | str | None,
        *,
        max_packet_size: int = DEFAULT_MAX_PACKET_SIZE,
        strict: bool = False,
        offset: int = 0,
        version: ProtocolVersion | str | int | None = ProtocolVersion.V3_1_1,
        peer: StreamDecoder | None = None,
    ) -> None:
        self.direction = Direction.parse(direction)
        chosen = ProtocolVersion.parse(version)
        self._version = chosen or ProtocolVersion.V3_1_1
        self._learn = chosen is None and peer is None  # learn from the first CONNECT
        self._peer = peer
        self._max_packet_size = check_max_packet_size(max_packet_size)
        self.strict = strict
        self._pending = b""  # bytes not framed yet: an incomplete packet (after a strict raise, whole ones too)
        self._more = bytearray()  # bytes of that packet fed since, while it waits for a known number of bytes
        self._need = 0  # the whole size of the packet _pending starts, once its fixed header is complete
        self._offset = offset  # stream offset of _pending[0], or of the next byte a run will take
        self._run: _Run | None = None
        self._counting = False
        self._counted: dict[int, int] = {}  # packet type -> whole packets passed over since ``take_counted``
        self._counted_size = 0  # the bytes of those packets

    @property
    def version(self) -> ProtocolVersion:
        """The version the next packet will be read as."""
        return self._peer.version if self._peer is not None else self._version

    @property
    def max_packet_size(self) -> int:
        """Packets declared larger (fixed header included) are reported and skipped undecoded."""
        return self._max_packet_size

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet accounted for in a returned frame or a run."""
        return self._offset

    @property
    def skipping(self) -> int | None:
        """The declared size of the packet being skipped for being above ``max_packet_size`` (fixed header
        included), from the moment its fixed header arrives; None when no packet is being skipped."""
        run = self._run
        return None if run is None or run.remaining is None else run.length + run.remaining

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the rest of a packet: never more than ``max_packet_size`` once ``feed``
        has returned (after a strict-mode raise, the rest of that call's bytes wait here for the next call)."""
        return len(self._pending) + len(self._more)

    @property
    def counting(self) -> bool:
        """Whole packets are counted by type, not decoded (see :meth:`count_only`)."""
        return self._counting

    def count_only(self) -> None:
        """From now on whole packets are framed and counted by the type of their first byte, never decoded nor
        returned (see :meth:`take_counted`): for a reader that keeps nothing more of the stream yet must account
        for it. Framing stays exact, so offsets go on; an oversized packet, an unframeable run and the truncated
        end are still returned as frames."""
        self._counting = True

    def take_counted(self) -> tuple[dict[int, int], int]:
        """Packets counted since the last call, by packet type, and the bytes they covered."""
        counted, size = self._counted, self._counted_size
        self._counted, self._counted_size = {}, 0
        return counted, size

    def feed(self, data: BytesLike) -> list[Frame]:
        """The frames completed by ``data`` (``bytes``, ``bytearray`` or ``memoryview``; what is kept is copied, so
        the caller may reuse its buffer)."""
        buf = data if isinstance(data, bytes) else to_bytes(data, "data")
        need = self._need
        if need and len(self._pending) + len(self._more) + len(buf) < need:
            self._more += buf  # amortised in place: joining on every call would be quadratic
            return []
        frames: list[Frame] = []
        pos = 0
        # ``_running()`` rather than ``self._run is None``: the calls in between change it, which a narrowed
        # attribute type would hide (and compiled code would trust).
        while True:
            if self._running():
                pos = self._extend_run(buf, pos, frames)
                if self._running():
                    return frames
            if self._need:  # first pass only (no run waits then, pos is 0): the packet waiting is whole now
                buf = b"".join((self._pending, self._more, buf))
                self._more = bytearray()
            elif self._pending:
                buf = self._pending + (buf[pos:] if pos else buf)  # a header's few bytes, or what a strict raise left
                pos = 0
            elif pos == len(buf):
                return frames
            self._pending = b""
            self._need = 0
            pos = self._frame(buf, pos, frames)
            if not self._running():  # no run started: whatever is left waits in _pending
                return frames

    def _running(self) -> bool:
        return self._run is not None

    def waiting(self) -> Frame | None:
        """The packet still arriving, as a frame of its bytes so far (``packet`` None) with what its first byte
        already breaks (a reserved type, a type its sender never sends, reserved flags); None when no packet is
        incomplete or its first byte breaks nothing. A receiver may close on those bytes before the rest comes. The
        decoder is unchanged: the packet is framed as usual once it is whole."""
        if self._run is not None or not self._pending:
            return None
        pending = self._pending + self._more if self._more else self._pending
        found: list[Violation] = []
        version = self.version
        check_first_byte(pending[0], self.direction, self._offset, found, version is ProtocolVersion.V5)
        if not found:
            return None
        more = f"; the rest is still arriving ({_arrived(pending, 'its Remaining Length is not whole yet')})"
        violations = tuple(
            Violation(rule, v.offset, v.detail + more, v.rule)
            for v in found
            if (rule := identity.statement_id(v.rule, version.value)) is not None
        )
        if not violations:
            return None
        return Frame(self._offset, len(pending), pending, None, violations)

    def close(self) -> list[Frame]:
        """Ends the stream: a packet still incomplete is reported as [MQTT-2.2.3-truncated]."""
        frames = self.feed(b"") if self._pending else []  # after a strict raise, whole packets may wait here
        run = self._run
        if run is not None:
            self._run = None
            if run.remaining:
                detail = f"stream ended {run.remaining} byte(s) before the end of the oversized packet"
                frames.append(run.frame((self._violation(rules.TRUNCATED, self._offset, detail),)))
            elif run.length:
                frames.append(run.frame())
        elif self._pending:
            pending = self._pending + self._more if self._more else self._pending
            violation = self._violation(rules.TRUNCATED, self._offset, _truncation_detail(pending))
            frames.append(Frame(self._offset, len(pending), pending, None, (violation,)))
            self._offset += len(pending)
            self._pending = b""
            self._more = bytearray()
            self._need = 0
        if self.strict:
            for index, frame in enumerate(frames):
                _raise_if_error(frame, frames[: index + 1])
        return frames

    def _extend_run(self, buf: bytes, pos: int, frames: list[Frame]) -> int:
        """Gives the run the bytes of ``buf`` from ``pos`` it covers; returns the position after them."""
        run = self._run
        assert run is not None
        available = len(buf) - pos
        taken = available if run.remaining is None else min(run.remaining, available)
        if len(run.evidence) < EVIDENCE_BYTES:
            run.evidence += buf[pos : pos + min(taken, EVIDENCE_BYTES - len(run.evidence))]
        run.length += taken
        self._offset += taken
        if run.remaining is not None:
            run.remaining -= taken
            if not run.remaining:
                self._run = None
                frames.append(run.frame())
        return pos + taken

    def _frame(self, buf: bytes, pos: int, frames: list[Frame]) -> int:
        """Frames whole packets of ``buf`` from ``pos``; keeps an incomplete tail pending and returns ``len(buf)``,
        or returns the position where a new run takes over."""
        size = len(buf)
        base = self._offset - pos  # stream offset of buf[0]
        direction = self.direction
        version = self.version
        learn = self._learn
        limit = self._max_packet_size
        need = 0
        counting = self._counting
        out: list[Violation] = []  # reused: a clean packet, the common case, allocates no list
        while pos + 1 < size:
            length_byte = buf[pos + 1]
            if length_byte < 0x80:
                remaining, body = length_byte, pos + 2
            else:
                remaining, body = read_remaining_length(buf, pos + 1, size)
                if body == NEED_MORE:
                    break
                if body == TOO_LONG:
                    return self._start_unframeable(buf, pos, base, frames)
            end = body + remaining
            if end - pos > limit:
                return self._start_oversized(buf, pos, base, end - pos)
            if end > size:
                need = end - pos
                break
            if counting:
                kind = buf[pos] >> 4
                self._counted[kind] = self._counted.get(kind, 0) + 1
                self._counted_size += end - pos
                pos = end
                continue
            if learn and buf[pos] >> 4 == _CONNECT:
                self._learn = learn = False
                self._version = version = connect_version(buf, body, end) or version
            packet = read_packet(buf, pos, body, end, direction, out, version)
            if body - pos > 2 and not is_shortest(remaining, body - pos - 1):
                detail = f"Remaining Length {remaining} written in {body - pos - 1} bytes; fewer suffice"
                out.insert(0, self._violation(rules.REMAINING_LENGTH_SHORTEST, pos + 1, detail))
            if out:
                # checks count offsets in ``buf``; findings count stream bytes
                moved = [Violation(v.rule, v.offset + base, v.detail, v.key) for v in out] if base else out
                found = tuple(moved)
                out.clear()
                frame = Frame(base + pos, end - pos, buf[pos:end], packet, found)
            else:
                frame = Frame(base + pos, end - pos, buf[pos:end], packet)
            frames.append(frame)
            pos = end
            if frame.violations and self.strict:
                self._pending = buf[pos:]
                self._offset = base + pos
                _raise_if_error(frame, frames)
                # Advisory findings only: nothing was raised, and the loop goes on with these bytes itself (kept
                # pending too, a run they start would count them twice).
                self._pending = b""
        self._pending = buf[pos:]
        self._need = need
        self._offset = base + pos
        return size

    def _start_unframeable(self, buf: bytes, pos: int, base: int, frames: list[Frame]) -> int:
        header = buf[pos : pos + 6]
        violation = self._violation(
            rules.REMAINING_LENGTH_FOUR_BYTES,
            base + pos + 5,
            f"Remaining Length has a fifth byte ({header[1:].hex(' ')}); the rest of the stream cannot be framed",
        )
        frame = Frame(base + pos, len(header), header, None, (violation,))
        frames.append(frame)
        self._offset = base + pos + len(header)
        self._run = _Run(self._offset, None, ())
        # The rest of the stream is the run's, before a strict raise too, so the decoder can go on afterwards.
        end = self._extend_run(buf, pos + len(header), frames)
        if self.strict:
            _raise_if_error(frame, frames)
        return end

    def _start_oversized(self, buf: bytes, pos: int, base: int, declared: int) -> int:
        detail = f"packet declares {declared} bytes, above the {self._max_packet_size}-byte bound; skipped undecoded"
        self._offset = base + pos
        self._run = _Run(self._offset, declared, (self._violation(rules.SIZE_LIMIT, self._offset + 1, detail),))
        return pos

    def _violation(self, key: str, offset: int, detail: str) -> Violation:
        """A framing rule broken, named in the version being read (every version states the framing rules)."""
        rule = identity.statement_id(key, self.version.value) or key
        return Violation(rule, offset, detail, "" if rule == key else key)

    def __repr__(self) -> str:
        return (
            f"StreamDecoder(direction={self.direction}, version={self.version.value}, offset={self._offset}, "
            f"buffered={self.buffered})"
        )


def connect_version(data: bytes, body: int, end: int) -> ProtocolVersion | None:
    """The version a CONNECT body ``data[body:end]`` names by its Protocol Level, or None when the bytes stop
    before the level or name no version."""
    if body + 2 > end:
        return None
    level_at = body + 2 + ((data[body] << 8) | data[body + 1])
    return ProtocolVersion.from_level(data[level_at]) if level_at < end else None


def check_max_packet_size(value: int) -> int:
    """``value`` when it is a bound the decoder can keep, else a ``ValueError`` (a ``TypeError`` if no integer)."""
    if not isinstance(value, int):  # the compiled build refuses it at the call already
        raise TypeError(f"max_packet_size must be an integer, not {type(value).__name__}")
    if value < MIN_MAX_PACKET_SIZE:
        raise ValueError(
            f"max_packet_size must be at least {MIN_MAX_PACKET_SIZE}, not {value}: a decoder holds up to "
            f"{MIN_MAX_PACKET_SIZE} bytes of a fixed header before it knows the packet's size"
        )
    return value


def _truncation_detail(pending: bytes) -> str:
    if len(pending) < 2:
        return "stream ended inside a fixed header"
    return _arrived(pending, "stream ended inside the Remaining Length")


def _arrived(pending: bytes, inside_length: str) -> str:
    """How much of an incomplete packet has arrived (``inside_length`` when its Remaining Length is not whole)."""
    if len(pending) < 2:
        return "only its first byte has arrived"
    remaining, body = read_remaining_length(pending, 1, len(pending))
    if body < 0:
        return inside_length
    return f"packet declares {remaining} byte(s) after its fixed header, {len(pending) - body} arrived"


def _raise_if_error(frame: Frame, frames: list[Frame]) -> None:
    errors = [v for v in frame.violations if not rules.is_advisory(v.rule)]
    if errors:
        raise ProtocolViolation(errors[0], violations=frame.violations, packet=frame.packet, frames=tuple(frames))
