"""Framing: the StreamDecoder turns a byte stream of one direction into frames, whatever the split of its input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from . import rules
from .errors import ProtocolViolation, Violation
from .packets import Direction, Packet, Value
from .readers import read_packet
from .remaining_length import NEED_MORE, TOO_LONG, is_shortest, read_remaining_length

#: Default bound on one packet (fixed header included). Larger packets are reported and skipped, never buffered.
DEFAULT_MAX_PACKET_SIZE: Final = 16 * 1024 * 1024
#: How many bytes of an oversized packet or an unframeable run are kept as evidence.
EVIDENCE_BYTES: Final = 64


class Frame(Value):
    """One framed packet, or a run of bytes that could not be decoded (``packet`` is None).

    ``offset`` is the stream offset of its first byte and ``length`` how many stream bytes it covers. ``raw`` holds
    those bytes, except for oversized packets and unframeable runs, where it holds the first ``EVIDENCE_BYTES``.
    """

    FIELDS = ("offset", "length", "raw", "packet", "violations")

    def __init__(
        self, offset: int, length: int, raw: bytes, packet: Packet | None, violations: tuple[Violation, ...] = ()
    ) -> None:
        self.offset: Final = offset
        self.length: Final = length
        self.raw: Final = raw
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

    With ``strict=True`` the first frame holding a MUST-level violation raises :class:`ProtocolViolation`, whose
    ``frames`` are the frames completed in that call, the offending one last; the decoder can go on afterwards.
    """

    def __init__(
        self,
        direction: Direction | str | None,
        *,
        max_packet_size: int = DEFAULT_MAX_PACKET_SIZE,
        strict: bool = False,
        offset: int = 0,
    ) -> None:
        self.direction = Direction.parse(direction)
        self.max_packet_size = max_packet_size
        self.strict = strict
        self._pending = b""
        self._offset = offset  # stream offset of _pending[0], or of the next byte a run will take
        self._run: _Run | None = None

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet accounted for in a returned frame or a run."""
        return self._offset

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the rest of a packet (never more than ``max_packet_size``)."""
        return len(self._pending)

    def feed(self, data: bytes) -> list[Frame]:
        frames: list[Frame] = []
        # ``_running()`` rather than ``self._run is None``: the calls in between change it, which a narrowed
        # attribute type would hide (and compiled code would trust).
        while True:
            if self._running():
                data = self._extend_run(data, frames)
                if self._running():
                    return frames
            if not data and not self._pending:
                return frames
            buf = self._pending + data if self._pending else bytes(data)
            self._pending = b""
            data = self._frame(buf, frames)
            if not self._running():  # no run started: whatever is left waits in _pending
                return frames

    def _running(self) -> bool:
        return self._run is not None

    def close(self) -> list[Frame]:
        """Ends the stream: a packet still incomplete is reported as [MQTT-2.2.3-truncated]."""
        frames = self.feed(b"") if self._pending else []  # after a strict raise, whole packets may wait here
        run = self._run
        if run is not None:
            self._run = None
            if run.remaining:
                detail = f"stream ended {run.remaining} byte(s) before the end of the oversized packet"
                frames.append(run.frame((Violation(rules.TRUNCATED, self._offset, detail),)))
            elif run.length:
                frames.append(run.frame())
        elif self._pending:
            pending = self._pending
            violation = Violation(rules.TRUNCATED, self._offset, _truncation_detail(pending))
            frames.append(Frame(self._offset, len(pending), pending, None, (violation,)))
            self._offset += len(pending)
            self._pending = b""
        if self.strict:
            for index, frame in enumerate(frames):
                _raise_if_error(frame, frames[: index + 1])
        return frames

    def _extend_run(self, data: bytes, frames: list[Frame]) -> bytes:
        run = self._run
        assert run is not None
        taken = len(data) if run.remaining is None else min(run.remaining, len(data))
        if len(run.evidence) < EVIDENCE_BYTES:
            run.evidence += data[: min(taken, EVIDENCE_BYTES - len(run.evidence))]
        run.length += taken
        self._offset += taken
        if run.remaining is not None:
            run.remaining -= taken
            if not run.remaining:
                self._run = None
                frames.append(run.frame())
        return data[taken:]

    def _frame(self, buf: bytes, frames: list[Frame]) -> bytes:
        """Frames whole packets of ``buf``; keeps an incomplete tail pending, or returns the bytes a new run takes."""
        pos = 0
        size = len(buf)
        base = self._offset
        direction = self.direction
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
                    return self._start_unframeable(buf, pos, frames)
            end = body + remaining
            if end - pos > self.max_packet_size:
                return self._start_oversized(buf, pos, end - pos)
            if end > size:
                break
            packet = read_packet(buf, pos, body, end, direction, out)
            if body - pos > 2 and not is_shortest(remaining, body - pos - 1):
                detail = f"Remaining Length {remaining} written in {body - pos - 1} bytes; fewer suffice"
                out.insert(0, Violation(rules.REMAINING_LENGTH_SHORTEST, pos + 1, detail))
            if out:
                # checks count offsets in ``buf``; findings count stream bytes
                found = tuple([Violation(v.rule, v.offset + base, v.detail) for v in out]) if base else tuple(out)
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
        self._pending = buf[pos:]
        self._offset = base + pos
        return b""

    def _start_unframeable(self, buf: bytes, pos: int, frames: list[Frame]) -> bytes:
        base = self._offset
        header = buf[pos : pos + 6]
        violation = Violation(
            rules.REMAINING_LENGTH_FOUR_BYTES,
            base + pos + 5,
            f"Remaining Length has a fifth byte ({header[1:].hex(' ')}); the rest of the stream cannot be framed",
        )
        frame = Frame(base + pos, len(header), header, None, (violation,))
        frames.append(frame)
        self._offset = base + pos + len(header)
        self._run = _Run(self._offset, None, ())
        if self.strict:
            _raise_if_error(frame, frames)
        return buf[pos + len(header) :]

    def _start_oversized(self, buf: bytes, pos: int, declared: int) -> bytes:
        detail = f"packet declares {declared} bytes, above the {self.max_packet_size}-byte bound; skipped undecoded"
        self._offset += pos
        self._run = _Run(self._offset, declared, (Violation(rules.SIZE_LIMIT, self._offset + 1, detail),))
        return buf[pos:]

    def __repr__(self) -> str:
        return f"StreamDecoder(direction={self.direction}, offset={self._offset}, buffered={len(self._pending)})"


def _truncation_detail(pending: bytes) -> str:
    if len(pending) < 2:
        return "stream ended inside a fixed header"
    remaining, body = read_remaining_length(pending, 1, len(pending))
    if body < 0:
        return "stream ended inside the Remaining Length"
    return f"packet declares {remaining} byte(s) after its fixed header, {len(pending) - body} arrived"


def _raise_if_error(frame: Frame, frames: list[Frame]) -> None:
    errors = [v for v in frame.violations if not rules.is_advisory(v.rule)]
    if errors:
        raise ProtocolViolation(errors[0], violations=frame.violations, packet=frame.packet, frames=tuple(frames))
