"""Framing: the StreamDecoder turns a byte stream of one direction into frames, whatever the split of its input."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from . import rules
from .errors import ProtocolViolation, Violation
from .packets import Direction, Packet
from .readers import read_packet
from .remaining_length import NEED_MORE, TOO_LONG, is_shortest, read_remaining_length

#: Default bound on one packet (fixed header included). Larger packets are reported and skipped, never buffered.
DEFAULT_MAX_PACKET_SIZE: Final = 16 * 1024 * 1024
#: How many bytes of an oversized or unframeable run are kept as evidence.
EVIDENCE_BYTES: Final = 64


@dataclass(frozen=True, slots=True)
class Frame:
    """One framed packet, or a run of bytes that could not be framed (``packet`` is None).

    ``offset`` is the stream offset of its first byte and ``length`` how many stream bytes it covers; ``raw`` holds
    those bytes, except for oversized and unframeable runs, where it holds the first ``EVIDENCE_BYTES``.
    """

    offset: int
    length: int
    raw: bytes
    packet: Packet | None
    violations: tuple[Violation, ...] = ()


class StreamDecoder:
    """Incremental decoder of one direction of one connection.

    ``feed`` returns the frames completed by the new bytes; ``close`` reports an unfinished packet at the end of
    the stream. The frames are the same for any split of the input. A Remaining Length of five bytes makes the
    rest of the stream unframeable (there is no way to find the next packet): those bytes come back as frames with
    ``packet=None``. A packet declared larger than ``max_packet_size`` is reported and its bytes are skipped as
    they arrive, so memory stays bounded by ``max_packet_size``.

    With ``strict=True`` the first frame holding a MUST-level violation raises :class:`ProtocolViolation`
    (carrying the frame's violations and best-effort packet); otherwise violations ride on the frames.
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
        self._offset = offset  # stream offset of _pending[0]
        self._skip = 0  # bytes of an oversized packet still to discard
        self._skipped: Frame | None = None  # the oversized packet being skipped
        self._unframeable = False

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet returned in a frame."""
        return self._offset

    @property
    def buffered(self) -> int:
        return len(self._pending)

    def feed(self, data: bytes) -> list[Frame]:
        if not data and not self._pending:
            return []
        frames: list[Frame] = []
        if self._unframeable:
            if not data:
                return frames
            frames.append(Frame(self._offset, len(data), bytes(data[:EVIDENCE_BYTES]), None))
            self._offset += len(data)
            return frames
        if self._skip:
            data = self._discard(data, frames)
            if not data:
                return frames
        buf = self._pending + data if self._pending else bytes(data)
        self._pending = b""
        self._frame(buf, frames)
        return frames

    def close(self) -> list[Frame]:
        """Ends the stream: a packet still incomplete is reported as [MQTT-2.2.3-truncated]."""
        frames = self.feed(b"") if self._pending else []  # after a strict raise, whole packets may wait here
        if self._skipped is not None:
            done = self._skipped.length - self._skip
            frames.append(
                Frame(
                    self._skipped.offset,
                    done,
                    self._skipped.raw,
                    None,
                    (
                        *self._skipped.violations,
                        Violation(
                            rules.TRUNCATED,
                            self._offset,
                            f"stream ended {self._skip} byte(s) before the packet's end",
                        ),
                    ),
                )
            )
            self._skipped = None
            self._skip = 0
        elif self._pending:
            pending = self._pending
            frames.append(
                Frame(
                    self._offset,
                    len(pending),
                    pending,
                    None,
                    (Violation(rules.TRUNCATED, self._offset, _truncation_detail(pending)),),
                )
            )
            self._offset += len(pending)
            self._pending = b""
        return frames

    def _discard(self, data: bytes, frames: list[Frame]) -> bytes:
        taken = min(self._skip, len(data))
        self._skip -= taken
        self._offset += taken
        if not self._skip and self._skipped is not None:
            frames.append(self._skipped)
            self._skipped = None
        return data[taken:]

    def _frame(self, buf: bytes, frames: list[Frame]) -> None:
        pos = 0
        size = len(buf)
        base = self._offset
        direction = self.direction
        while pos + 1 < size:
            length_byte = buf[pos + 1]
            if length_byte < 0x80:
                remaining, body = length_byte, pos + 2
            else:
                remaining, body = read_remaining_length(buf, pos + 1, size)
                if body == NEED_MORE:
                    break
                if body == TOO_LONG:
                    self._become_unframeable(buf, pos, frames)
                    return
            end = body + remaining
            if end - pos > self.max_packet_size:
                pos = self._skip_oversized(buf, pos, body, end, frames)
                if self._skip:
                    return
                continue
            if end > size:
                break
            out: list[Violation] = []
            if body - pos > 2 and not is_shortest(remaining, body - pos - 1):
                out.append(
                    Violation(
                        rules.REMAINING_LENGTH_SHORTEST,
                        base + pos + 1,
                        f"Remaining Length {remaining} written in {body - pos - 1} bytes; fewer suffice",
                    )
                )
            packet = read_packet(buf, pos, body, end, direction, out)
            frame = Frame(base + pos, end - pos, buf[pos:end], packet, tuple(out))
            frames.append(frame)
            pos = end
            if out and self.strict:
                self._pending = buf[pos:]
                self._offset = base + pos
                _raise_first(frames)
        self._pending = buf[pos:]
        self._offset = base + pos

    def _become_unframeable(self, buf: bytes, pos: int, frames: list[Frame]) -> None:
        base = self._offset
        violation = Violation(
            rules.REMAINING_LENGTH_FOUR_BYTES,
            base + pos + 5,
            f"Remaining Length continues past its fourth byte ({buf[pos + 1 : pos + 5].hex(' ')} ...); "
            "the rest of the stream cannot be framed",
        )
        rest = buf[pos:]
        frame = Frame(base + pos, len(rest), rest[:EVIDENCE_BYTES], None, (violation,))
        frames.append(frame)
        self._unframeable = True
        self._pending = b""
        self._offset = base + len(buf)
        if self.strict:
            _raise_first(frames)

    def _skip_oversized(self, buf: bytes, pos: int, body: int, end: int, frames: list[Frame]) -> int:
        base = self._offset
        declared = end - pos
        violation = Violation(
            rules.SIZE_LIMIT,
            base + pos + 1,
            f"packet declares {declared} bytes, above the {self.max_packet_size}-byte bound; skipped undecoded",
        )
        available = min(end, len(buf))
        self._skipped = Frame(base + pos, declared, buf[pos : min(available, pos + EVIDENCE_BYTES)], None, (violation,))
        self._skip = end - available
        if not self._skip:
            frames.append(self._skipped)
            self._skipped = None
            return end
        self._offset = base + available
        self._pending = b""
        return available

    def __repr__(self) -> str:
        return f"StreamDecoder(direction={self.direction}, offset={self._offset}, buffered={len(self._pending)})"


def _truncation_detail(pending: bytes) -> str:
    if len(pending) < 2:
        return "stream ended inside a fixed header"
    remaining, body = read_remaining_length(pending, 1, len(pending))
    if body < 0:
        return "stream ended inside the Remaining Length"
    return f"packet declares {remaining} byte(s) after its fixed header, {len(pending) - body} arrived"


def _raise_first(frames: list[Frame]) -> None:
    frame = frames[-1]
    violations = [v for v in frame.violations if not rules.is_advisory(v.rule)]
    if violations:
        raise ProtocolViolation(violations[0], violations=frame.violations, packet=frame.packet, frames=tuple(frames))
