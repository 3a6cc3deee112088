"""From one reassembled TCP connection to what the judge consumes: one ``StreamDecoder`` per direction, boundary
hunts after gaps and mid-stream starts, and an account of every byte.

Every byte of a side's stream ends up in exactly one bucket of :class:`ByteCounts`: a decoded packet, malformed
bytes (a frame without a packet, or a packet with a MUST-level violation), a gap, or not assessable (before a
proven boundary, or a packet cut short by a gap or by the end of the capture). A packet cut short by its own
sender's FIN or reset is the sender's doing and stays a malformed frame.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, NamedTuple

from mqttaudit.codec import Direction, Frame, PacketType, StreamDecoder, decode, rules
from mqttaudit.codec.remaining_length import read_remaining_length
from mqttaudit.codec.version import ProtocolVersion
from mqttaudit.judge.events import Closed, Event, Lost, Quiet, Sent
from mqttaudit.judge.limits import packet_size
from mqttaudit.judge.reasons import CONFLICTING, reason
from mqttaudit.judge.rules import CLOSE_ON_VIOLATION, TRANSPORT_RULES
from mqttaudit.judge.violations import in_text_frame
from mqttaudit.spec import identity

from .budgets import DEFAULT_BUDGETS, Budgets, flow_reason, message_reason
from .detect import IS_CONNECT, PREFIX_BYTES, UNKNOWN_VERSION, connect_start, connect_version
from .layers import (
    ENCRYPTED,
    ENCRYPTED_REASON,
    HELLO_BYTES,
    NOT_MQTT_REASON,
    PLAIN,
    KeyLookup,
    LayerNote,
    Piece,
    Stack,
    choose_stack,
    opening_complete,
)
from .reassembly import (
    DEFAULT_BROKER_PORTS,
    DEFAULT_HISTORY,
    Conflict,
    Data,
    End,
    Endpoint,
    Gap,
    Output,
    Reassembler,
    SideStats,
)
from .resync import DEFAULT_MAX_BYTES, DEFAULT_MIN_PACKETS, DEFAULT_MIN_UNALIGNED_PACKETS, BoundaryHunt, ResyncRule
from .segments import Segment
from .tls import NOT_DECRYPTED_REASONS

if TYPE_CHECKING:
    pass

MID_STREAM: Final = "mid-stream start, before the first proven packet boundary"
AFTER_GAP: Final = "after a gap, before the first proven packet boundary"
CUT_BY_GAP: Final = "packet cut short by a gap"
CUT_BY_END: Final = "packet cut short by the end of the capture"
CUT_BY_RESET: Final = "packet cut short by the peer's reset"
#: The statements that make the receiver of a malformed packet close the connection: 3.1.1's, and 5.0's (which binds
#: a Server that detects the defect; accepting one it need not detect is leniency).
CLOSE_RULES: Final = (
    f"{CLOSE_ON_VIOLATION}; in 5.0 one that detects it, {identity.statement_id(CLOSE_ON_VIOLATION, identity.V5)}"
)
#: Malformed frames kept per connection, each with its evidence: the first ones are; at the next one the sender's
#: stream stops being decoded (see :class:`_Stream`), its bytes from there recorded once, not framed.
DEFAULT_MAX_MALFORMED: Final = 100
#: The bytes a decoder is fed at once, so that one segment of tiny malformed frames never makes more than a few
#: thousand frames before the cap is checked.
FEED_BYTES: Final = 4096
#: Conflicting retransmissions recorded per connection and side as ranges of their own; later ones widen the last.
MAX_CONFLICT_RANGES: Final = 100


#: The policy at the cap of malformed frames, as the summary and the reports name it.
MALFORMED_CAP_POLICY: Final = (
    f"the first {DEFAULT_MAX_MALFORMED} malformed packets of a connection are kept, each with its evidence; at the "
    "next one its sender's stream stops being decoded, and the rest of that stream is one not-assessable row of "
    f"the gaps table with its byte count (the receiver of a malformed packet closes at the first: {CLOSE_RULES})"
)
#: What the audit does with bytes that arrived twice with different content, as the summary and reports name it.
CONFLICT_POLICY: Final = (
    "bytes that arrived twice with different content (a conflicting TCP retransmission) are a conflict row of the "
    "gaps table; the first copy is kept, and the packets decoded from it are not judged: their bytes are not "
    "assessable, and the rules they broke as first captured are not assessable rows (conflicting retransmission)"
)


def malformed_cap_reason(cap: int) -> str:
    """Why the rest of a side's stream was not decoded: the connection reached the cap of malformed frames."""
    return (
        f"not decoded: the connection already holds {cap} malformed packets, the most kept per connection; its "
        f"receiver closes at the first ({CLOSE_RULES}), so what the sender sent from here is no MQTT a strict peer "
        "read"
    )


#: A connection whose CONNECT was not captured, some of whose packets are no MQTT 3.1.1 packets, and every whole
#: packet of which is a well-formed MQTT 5.0 packet: MQTT 5.0, inferred from its packets.
INFERRED_5: Final = "5.0, inferred"
#: Versions whose connections are decoded by their own version's rules (MQTT 3.1 numbers none of its own and shares
#: most of 3.1.1's) but whose behaviour is not judged: the judge knows MQTT 3.1.1 and 5.0 only, and a version no
#: CONNECT named leaves the session and what was negotiated unknown.
DECODED_ONLY: Final = {
    "3.1": "decoded with the MQTT 3.1.1 rules MQTT 3.1 shares; its behaviour is not judged",
    INFERRED_5: (
        "decoded as MQTT 5.0: no CONNECT captured, and its packets are well-formed MQTT 5.0 packets, some of them "
        "no MQTT 3.1.1 packets; its behaviour is not judged"
    ),
}
#: A connection whose CONNECT was not captured and some of whose packets are no MQTT 3.1.1 packets: it may speak
#: MQTT 5.0 (properties, reason codes), so no 3.1.1 rule can be held against it, and no version can read it.
UNKNOWN_NOT_311: Final = "unknown, not 3.1.1"
#: Versions whose connections are framed only (fixed header and Remaining Length, the same in every version).
FRAMED_ONLY: Final = {
    UNKNOWN_NOT_311: "framed only: no CONNECT captured, and some packets are not MQTT 3.1.1 packets (MQTT 5.0?)",
}
#: The version label of a connection whose MQTT bytes are encrypted (TLS without the session's keys).
ENCRYPTED_VERSION: Final = "encrypted"
#: The version label of a decrypted connection whose client's first bytes are no MQTT (see :mod:`.layers`).
NOT_MQTT_VERSION: Final = "not MQTT"
#: Versions whose connections are neither decoded nor framed: their bytes are not assessable.
NOT_DECODED: Final = {ENCRYPTED_VERSION: ENCRYPTED_REASON, NOT_MQTT_VERSION: NOT_MQTT_REASON, **NOT_DECRYPTED_REASONS}
#: Versions whose connections are not fed to the judge.
NOT_JUDGED: Final = frozenset(DECODED_ONLY) | frozenset(FRAMED_ONLY) | frozenset(NOT_DECODED)
#: Framing rules (keys), stated by every version: what a framed-only connection can still break.
FRAMING_RULES: Final = frozenset(
    {rules.REMAINING_LENGTH_FOUR_BYTES, rules.REMAINING_LENGTH_SHORTEST, rules.TRUNCATED, rules.SIZE_LIMIT}
)


def handling(version: str) -> str:
    """How the audit treats a connection of ``version``, in one sentence."""
    if version in DECODED_ONLY:
        return DECODED_ONLY[version]
    if version in FRAMED_ONLY:
        return FRAMED_ONLY[version]
    if version in NOT_DECODED:
        return NOT_DECODED[version]
    if version == UNKNOWN_VERSION:
        return "judged against MQTT 3.1.1 (no CONNECT captured: version unknown)"
    if version == "other":
        return "judged against MQTT 3.1.1 (a CONNECT of another protocol name or level)"
    if version == "5.0":
        return "judged against MQTT 5.0"
    return "judged against MQTT 3.1.1"


_NS: Final = 1e9
_CONNECT: Final = int(PacketType.CONNECT)


@dataclass(frozen=True, slots=True)
class FlowOptions:
    """How connections are reassembled and decoded (the resync knobs are described in :mod:`.resync`)."""

    broker_ports: frozenset[int] = DEFAULT_BROKER_PORTS
    #: The per-message and out-of-order budgets (:mod:`.budgets`; the per-flow one is the judging task's).
    budgets: Budgets = DEFAULT_BUDGETS
    history: int = DEFAULT_HISTORY
    min_packets: int = DEFAULT_MIN_PACKETS
    min_unaligned_packets: int = DEFAULT_MIN_UNALIGNED_PACKETS
    max_hunt_bytes: int = DEFAULT_MAX_BYTES
    #: Malformed frames kept per connection (:data:`DEFAULT_MAX_MALFORMED`).
    max_malformed: int = DEFAULT_MAX_MALFORMED
    #: The TLS sessions' secrets (a key log), by ClientHello random: the TLS connections whose client random it
    #: holds are decrypted and audited; without them a TLS connection is reported as encrypted, its bytes not
    #: assessable.
    keylog: KeyLookup | None = field(default=None, repr=False)
    #: The user named the broker ports (``--ports``): their flows are MQTT, whatever a decrypted stream starts
    #: with. Otherwise a decrypted stream must start with a CONNECT or an Upgrade to MQTT over WebSocket, or it is
    #: reported as not MQTT (:class:`~.layers.InnerChoice`).
    mqtt_ports_named: bool = False

    @property
    def max_buffered(self) -> int:
        """Out-of-order bytes (and piece costs) one direction holds behind its holes."""
        return self.budgets.max_out_of_order_bytes

    @property
    def max_packet_size(self) -> int:
        """The largest packet decoded (fixed header included): larger ones are skipped, their bytes recorded."""
        return self.budgets.max_message_bytes

    @property
    def resync(self) -> ResyncRule:
        return ResyncRule(self.min_packets, self.min_unaligned_packets, self.max_hunt_bytes, self.max_packet_size)


DEFAULT_OPTIONS: Final = FlowOptions()


@dataclass(slots=True)
class ByteCounts:
    """Where the bytes of one side's stream went; ``packets + malformed + gaps + unassessable == stream``."""

    stream: int = 0
    packets: int = 0
    malformed: int = 0
    gaps: int = 0
    unassessable: int = 0

    @property
    def reconciles(self) -> bool:
        return self.packets + self.malformed + self.gaps + self.unassessable == self.stream

    def __add__(self, other: ByteCounts) -> ByteCounts:
        return ByteCounts(
            self.stream + other.stream,
            self.packets + other.packets,
            self.malformed + other.malformed,
            self.gaps + other.gaps,
            self.unassessable + other.unassessable,
        )


@dataclass(frozen=True, slots=True)
class Unassessable:
    """``length`` bytes of ``side`` at stream ``offset`` that could not be framed with confidence, and why."""

    side: int
    offset: int
    length: int
    reason: str


class SideFrame(NamedTuple):
    """A frame decoded from ``side``, completed by data captured at ``time`` (ns)."""

    side: int
    time: int
    frame: Frame


@dataclass(frozen=True, slots=True)
class FlowAudit:
    """One TCP connection: its endpoints and roles, the judge's events, and the account of its bytes.

    ``events`` is empty when the client is unknown (``direction_reason`` says why); ``frames`` holds the decoded
    frames either way (decoded without a direction then). Sent times are capture times in seconds, made
    non-decreasing; ``Closed`` says who ended the connection first and whether that was a reset, and comes last.
    """

    endpoints: tuple[Endpoint, Endpoint]
    client: int | None
    direction_reason: str
    started_with_syn: tuple[bool, bool]
    isn: tuple[int | None, int | None]
    first_time: int
    last_time: int
    events: tuple[Event, ...]
    frames: tuple[SideFrame, ...]
    gaps: tuple[Gap, ...]
    conflicts: tuple[Conflict, ...]
    unassessable: tuple[Unassessable, ...]
    counts: tuple[ByteCounts, ByteCounts]
    tcp: tuple[SideStats, SideStats]
    end: End | None
    #: The MQTT version the client's CONNECT names, the one its packets were read as: "3.1.1", "5.0", "3.1",
    #: "other" (read as 3.1.1), or "unknown" when no CONNECT started the client's stream. A version in
    #: :data:`FRAMED_ONLY` is framed, not decoded; one in :data:`NOT_JUDGED` is not judged.
    version: str = UNKNOWN_VERSION
    #: What carried the MQTT bytes: "tcp", "websocket", "tls", "tls (encrypted)" (see :mod:`.layers`).
    transport: str = PLAIN
    #: What the transport layers found: the senders' defects (``rule`` set) and why a layer stopped.
    layer_notes: tuple[LayerNote, ...] = ()
    #: Frames decoded from bytes a conflicting retransmission contradicts: not judged, their bytes not assessable
    #: (the judge hears of them as bytes it cannot read); their codec violations are not assessable rows.
    withheld: tuple[SideFrame, ...] = ()
    #: Bytes not decoded because the connection reached its cap of malformed frames (``max_malformed``).
    capped_bytes: int = 0
    #: Packets above the per-message budget (skipped undecoded, their bytes a not-assessable record each).
    oversized_messages: int = 0
    oversized_bytes: int = 0
    #: The flow stopped at the per-flow budget while this connection was open: the later segments of the flow and
    #: their payload bytes, counted, not held (see :func:`stopped_at_flow_budget`).
    unheld_segments: int = 0
    unheld_bytes: int = 0
    #: How many connections of the same flow started at the same capture time before this one (0 for nearly all).
    ordinal: int = 0

    @property
    def judged(self) -> bool:
        """Whether the connection's packets are judged (against MQTT 3.1.1, or 5.0 when its CONNECT names 5.0)."""
        return self.version not in NOT_JUDGED

    def direction(self, side: int) -> Direction | None:
        if self.client is None:
            return None
        return Direction.FROM_CLIENT if side == self.client else Direction.FROM_SERVER

    @property
    def mid_stream(self) -> bool:
        """True when a side's stream did not start at its captured SYN: the conversation's start was not seen."""
        return not all(self.started_with_syn)

    @property
    def total(self) -> ByteCounts:
        return self.counts[0] + self.counts[1]


@dataclass(slots=True)
class _Sink:
    """What the two streams of a connection report."""

    frames: list[tuple[int, SideFrame]] = field(default_factory=list)  # (order, frame)
    unassessable: list[Unassessable] = field(default_factory=list)
    #: The version the client's CONNECT named, once the decoder that learns it read one.
    version: str | None = None
    #: The client's decoder that starts the stream and learns the version from its CONNECT; the server's decoders
    #: follow it, and the client's later decoders (after a gap) read as it learned.
    learner: StreamDecoder | None = None

    def reading(self) -> ProtocolVersion:
        """The version the connection's packets are read as, as far as it is known."""
        learner = self.learner
        return ProtocolVersion.V3_1_1 if learner is None else learner.version

    #: Captured bytes no packet was framed from, as the judge hears of them: (order, Lost) per piece.
    undecoded: list[tuple[int, Lost]] = field(default_factory=list)
    #: Malformed frames kept so far on the connection (both sides), up to ``FlowOptions.max_malformed``.
    malformed_kept: int = 0


class _Stream:
    """One direction: a StreamDecoder while framing is certain, a BoundaryHunt while it is not."""

    def __init__(self, side: int, reassembler: Reassembler, options: FlowOptions, sink: _Sink) -> None:
        self.side = side
        self.counts = ByteCounts()
        self._reassembler = reassembler
        self._options = options
        self._sink = sink
        self._decoder: StreamDecoder | None = None
        self._hunt: BoundaryHunt | None = None
        self._hunt_reason = ""
        self._hunted: list[tuple[int, int, int, int]] = []  # (offset, length, time, order) fed to the hunt
        self._after_gap = False
        self._done = False
        self._time = 0
        self._order = 0
        self._aside: int | None = None  # the index of the last row set_aside added
        self._aside_lost: int | None = None  # the index of the judge's Lost event it added
        self._fed_to = 0  # the stream offset after the last byte fed to a decoder
        #: Where the connection's cap of malformed frames stopped decoding this side (None: it did not).
        self._cap_at: int | None = None
        self.capped_bytes = 0  # the side's bytes set aside, not decoded, since
        #: Packets above the per-message budget, skipped undecoded, and their bytes.
        self.oversized_messages = 0
        self.oversized_bytes = 0
        #: Inner stream ranges carried in WebSocket text messages: a frame that starts in one breaks MQTT-6.0.0-1.
        self._texts: list[tuple[int, int]] = []

    def data(self, offset: int, data: bytes, time: int, order: int, *, text: bool = False) -> None:
        if text and data:
            self._texts.append((offset, offset + len(data)))
        self.counts.stream += len(data)
        if self._done:  # the reassembler sends nothing after an end; should it, the bytes stay accounted for
            self._skip(offset, len(data), "after the end of the stream")
            return
        if self._capped:
            self._after_cap(offset, len(data), time, order)
            return
        self._time, self._order = time, order
        decoder, hunt = self._decoder, self._hunt
        if decoder is None and hunt is None:
            if (
                offset == 0
                and not self._after_gap
                and (self._reassembler.started_with_syn(self.side) or self._starts_with_connect(data))
            ):
                decoder = self._decoder = self._new_decoder(offset)
            else:
                hunt = self._hunt = BoundaryHunt(self._direction(), offset, self._options.resync, self._hunt_versions())
                self._hunt_reason = AFTER_GAP if self._after_gap else MID_STREAM
        if hunt is not None:
            hunted = self._hunted
            last = hunted[-1] if hunted else None
            if last is not None and last[3] == order - 1 and last[0] + last[1] == offset:
                # Nothing of the connection came in between: one piece, so a peer's tiny segments cost one record.
                hunted[-1] = (last[0], last[1] + len(data), last[2], order)
            else:
                hunted.append((offset, len(data), time, order))
            boundary = hunt.feed(offset, data, time, order)
            if boundary is not None:
                self._sync(hunt, boundary)
        elif decoder is not None:
            self._decode(decoder, offset, data, time, order)

    def _decode(self, decoder: StreamDecoder, offset: int, data: bytes, time: int, order: int) -> None:
        """Feeds ``data`` (at stream ``offset``) to ``decoder`` a few kilobytes at a time, and stops where the
        connection reaches its cap of malformed frames: the rest is set aside."""
        for start in range(0, max(len(data), 1), FEED_BYTES):
            piece = data[start : start + FEED_BYTES] if len(data) > FEED_BYTES else data
            self._fed_to = offset + start + len(piece)
            self._frames(decoder.feed(piece), time, order, decoder)
            if self._capped:
                self._after_cap(self._fed_to, offset + len(data) - self._fed_to, time, order)
                return

    @property
    def _capped(self) -> bool:
        return self._cap_at is not None

    def _after_cap(self, offset: int, length: int, time: int, order: int) -> None:
        """Bytes of the side after the connection reached its cap of malformed frames: counted, not decoded."""
        if length > 0:
            self.capped_bytes += length
            self._aside_row(offset, length, malformed_cap_reason(self._options.max_malformed), time, order)

    def set_aside(self, offset: int, length: int, reason: str, time: int, order: int) -> None:
        """``length`` captured bytes of the side, at ``offset`` in its TCP stream, that no layer carried to the
        MQTT framing: not assessable, and the judge hears that the side sent something it cannot read."""
        if length <= 0:
            return
        self.counts.stream += length
        self._aside_row(offset, length, reason, time, order)

    def _aside_row(self, offset: int, length: int, reason: str, time: int, order: int) -> None:
        """Counts ``length`` stream bytes as not assessable, in one row per stretch, and tells the judge."""
        self.counts.unassessable += length
        unassessable = self._sink.unassessable
        last = self._aside
        previous = unassessable[-1] if last is not None and last == len(unassessable) - 1 else None
        undecoded = self._sink.undecoded
        sender = self._direction()
        if previous is not None and previous.reason == reason and previous.offset + previous.length == offset:
            # The row before (nothing of the other side in between) grows: one row per stretch, not per segment,
            # and so does what the judge hears of it (at the stretch's first piece).
            unassessable[-1] = Unassessable(self.side, previous.offset, previous.length + length, reason)
            if sender is not None and self._aside_lost == len(undecoded) - 1:
                first_order, lost = undecoded[-1]
                undecoded[-1] = (first_order, Lost(lost.time, sender, lost.length + length, undecoded=True))
                return
        else:
            self._aside = len(unassessable)
            unassessable.append(Unassessable(self.side, offset, length, reason))
        if sender is not None:
            self._aside_lost = len(undecoded)
            undecoded.append((order, Lost(time / _NS, sender, length, undecoded=True)))

    def gap(self, length: int) -> None:
        self._stop(own=False, reason=CUT_BY_GAP)
        self.counts.stream += length
        self.counts.gaps += length
        self._after_gap = True

    def end(self, *, own: bool, reason: str) -> None:
        if not self._done:
            self._stop(own=own, reason=reason)
            self._done = True

    def _direction(self) -> Direction | None:
        return self._reassembler.direction(self.side)

    def _hunt_versions(self) -> ProtocolVersion | tuple[ProtocolVersion, ...]:
        """The versions a boundary hunt reads candidates in: the one a CONNECT named, else (the version is
        unknown: a capture that starts inside the connection) every version the codec reads that may follow a
        CONNECT unseen, so that the packets of either prove their framing."""
        if self._sink.learner is not None:
            return self._sink.learner.version
        return (ProtocolVersion.V3_1_1, ProtocolVersion.V5)

    def _starts_with_connect(self, data: bytes) -> bool:
        """The first client bytes of a mid-stream start are a CONNECT's: a packet boundary, proven by its shape."""
        return self._direction() is Direction.FROM_CLIENT and connect_start(data[:PREFIX_BYTES]) == IS_CONNECT

    def _new_decoder(self, offset: int) -> StreamDecoder:
        """A decoder from ``offset``: the client's first one, at the start of its stream, learns the version from
        its CONNECT; the server's follow that one; any other reads as the version learned so far."""
        direction, sink, size = self._direction(), self._sink, self._options.max_packet_size
        if direction is Direction.FROM_CLIENT and sink.learner is None and offset == 0 and not self._after_gap:
            decoder = sink.learner = StreamDecoder(direction, max_packet_size=size, offset=offset, version=None)
            return decoder
        if direction is Direction.FROM_SERVER and sink.learner is not None:
            return StreamDecoder(direction, max_packet_size=size, offset=offset, peer=sink.learner)
        return StreamDecoder(direction, max_packet_size=size, offset=offset, version=sink.reading())

    def _sync(self, hunt: BoundaryHunt, boundary: int) -> None:
        self._hunt = None
        self._skip(hunt.start, boundary - hunt.start, self._hunt_reason)
        self._not_decoded(boundary)
        decoder = self._decoder = self._new_decoder(boundary)
        for offset, data, time, order in hunt.pieces_from(boundary):
            if self._capped:
                self._after_cap(offset, len(data), time, order)
            else:
                self._decode(decoder, offset, bytes(data), time, order)

    def _stop(self, *, own: bool, reason: str) -> None:
        hunt = self._hunt
        if hunt is not None:
            boundary = hunt.stop()
            if boundary is None:
                self._hunt = None
                self._skip(hunt.start, hunt.end - hunt.start, self._hunt_reason)
                self._not_decoded(hunt.end)
            else:
                self._sync(hunt, boundary)
        decoder = self._decoder
        if decoder is not None:
            self._decoder = None
            for frame in decoder.close():
                if not own and any(violation.rule_key == rules.TRUNCATED for violation in frame.violations):
                    why = reason
                    if above_budget(frame):  # skipped as it arrived, then cut short: both are said
                        self._count_oversized(frame)
                        why = f"{self._message_reason(frame)}; {reason}"
                    self._skip(frame.offset, frame.length, why)
                else:
                    self._frames([frame], self._time, self._order, decoder)

    def _not_decoded(self, boundary: int) -> None:
        """The hunt's bytes before ``boundary`` were captured but not framed: the judge hears of them piece by piece,
        where they arrived, since an answer the side owed may be among them."""
        sender = self._direction()
        if sender is not None:
            for offset, length, time, order in self._hunted:
                skipped = min(offset + length, boundary) - offset
                if skipped > 0:
                    self._sink.undecoded.append((order, Lost(time / _NS, sender, skipped, undecoded=True)))
        self._hunted = []

    def _skip(self, offset: int, length: int, reason: str) -> None:
        if length > 0:
            self.counts.unassessable += length
            self._sink.unassessable.append(Unassessable(self.side, offset, length, reason))

    def _frames(self, frames: list[Frame], time: int, order: int, decoder: StreamDecoder | None = None) -> None:
        """Counts and keeps the frames, up to the connection's cap of malformed frames.

        At a malformed frame past the cap, decoding of this side stops for good and its bytes from that frame on
        are set aside, counted, not framed. The receiver of a malformed packet must close the connection
        [MQTT-4.8.0-1] (5.0: [MQTT-4.13.1-1]), so what its sender sends after one is no MQTT a conforming peer
        reads. Decoding goes on after the first malformed packet all the same, while framing is sure: a receiver
        that did not close reads what follows, and answering any of it is acting on the offence (see
        :mod:`mqttaudit.judge.violations`). Past the cap, nothing more of that side can change a verdict that
        the frames kept have not settled, and each tiny frame would cost a row in every table and report."""
        counts, side, sink = self.counts, self.side, self._sink
        out = sink.frames
        cap = self._options.max_malformed
        for frame in frames:
            if any(start <= frame.offset < end for start, end in self._texts):
                frame = in_text_frame(frame)  # noqa: PLW2901 - the frame as the judge must see it
            if sink.version is None and decoder is not None and decoder is sink.learner:
                sink.version = named_version(frame, decoder.version)
            if is_malformed(frame, framed=False) and not is_oversized(frame) and self._counts_toward_cap(frame):
                if sink.malformed_kept >= cap:
                    self._cap_at = frame.offset
                    self._decoder = None
                    self._after_cap(
                        frame.offset, max(self._fed_to, frame.offset + frame.length) - frame.offset, time, order
                    )
                    return
                sink.malformed_kept += 1
            if above_budget(frame):
                self._count_oversized(frame)
            if is_oversized(frame):
                self._oversized(frame)
            elif is_malformed(frame, framed=False):
                counts.malformed += frame.length
            else:
                counts.packets += frame.length
            out.append((order, SideFrame(side, time, frame)))

    def _oversized(self, frame: Frame) -> None:
        """A packet above the per-message budget, skipped whole as it arrived: the judge still hears of it (its
        type and declared size, from its first bytes), and its bytes are a not-assessable record of what was
        skipped."""
        self.counts.unassessable += frame.length
        self._sink.unassessable.append(Unassessable(self.side, frame.offset, frame.length, self._message_reason(frame)))

    def _count_oversized(self, frame: Frame) -> None:
        """Counts a packet above the per-message budget, however it ended (whole, or cut short)."""
        self.oversized_messages += 1
        self.oversized_bytes += frame.length

    def _message_reason(self, frame: Frame) -> str:
        return message_reason(packet_size(frame) or frame.length, self._options.max_packet_size)

    def _counts_toward_cap(self, frame: Frame) -> bool:
        """Whether a malformed frame counts toward the cap: when no CONNECT named the connection's version, a
        frame read as MQTT 3.1.1 may be a well-formed MQTT 5.0 packet (the connection is then framed only), so it
        counts only when MQTT 5.0 finds it malformed too, or its framing or its transport broke."""
        if self._sink.version is not None or len(frame.raw) != frame.length:
            return True
        if any(violation.rule_key in FRAMING_RULES | TRANSPORT_RULES for violation in frame.violations):
            return True
        read_as_5 = decode(frame.raw, self._direction(), version=ProtocolVersion.V5)
        return any(not rules.is_advisory(violation.rule) for violation in read_as_5.violations)


class _Ranges:
    """Byte ranges ``[low, high)``, asked whether any of them touches another range in logarithmic time."""

    def __init__(self, ranges: list[tuple[int, int]]) -> None:
        ordered = sorted(ranges)
        self._lows = [low for low, _high in ordered]
        self._highest: list[int] = []  # the highest end among the ranges up to each index
        for _low, high in ordered:
            self._highest.append(max(high, self._highest[-1]) if self._highest else high)

    def touch(self, start: int, end: int) -> bool:
        """Whether a range overlaps ``[start, end)``."""
        before = bisect.bisect_left(self._lows, end)  # the ranges that start before ``end``
        return before > 0 and self._highest[before - 1] > start


def fixed_header_length(frame: Frame) -> int:
    """The bytes of a frame that decide its framing: its fixed header (type byte and Remaining Length), or the
    whole frame when it has no whole one."""
    raw = frame.raw
    _remaining, body = read_remaining_length(raw, 1, len(raw)) if len(raw) > 1 else (0, -1)
    return body if 0 < body <= frame.length else frame.length


def named_version(frame: Frame, read_as: ProtocolVersion) -> str | None:
    """The version a whole CONNECT frame names (None for any other frame), given the version its decoder read it
    as: its Protocol Name and Level as the capture layer reads them ("other" for a pair no version has, when it
    was read as 3.1.1), else the version it was read as, so that the label never disagrees with the reading."""
    raw = frame.raw
    if not raw or raw[0] >> 4 != _CONNECT or len(raw) != frame.length:
        return None
    named = connect_version(raw)
    if named is not None and named != "other" and named == read_as.value:
        return named
    if read_as is not ProtocolVersion.V3_1_1:
        return str(read_as.value)
    return named or UNKNOWN_VERSION


def _at(lost: Lost, time: float) -> Lost:
    """``lost`` at ``time`` (made non-decreasing along the conversation)."""
    return Lost(time, lost.sender, lost.length, lost.undecoded)


def not_311(frame: Frame) -> bool:
    """A whole frame whose body breaks an MQTT 3.1.1 rule that is no framing rule: no 3.1.1 packet, maybe a packet
    of another version."""
    return len(frame.raw) == frame.length and any(
        violation.rule_key not in FRAMING_RULES
        and violation.rule_key not in TRANSPORT_RULES
        and not rules.is_advisory(violation.rule)
        for violation in frame.violations
    )


def above_budget(frame: Frame) -> bool:
    """A packet above the decoder's size bound, skipped as it arrived (whole, or cut short)."""
    return frame.packet is None and any(violation.rule_key == rules.SIZE_LIMIT for violation in frame.violations)


def is_oversized(frame: Frame) -> bool:
    """A whole packet above the decoder's size bound, skipped undecoded, that breaks nothing else: its sender kept
    to the protocol as far as is known (one cut short by its own sender is malformed, and stays so)."""
    return (
        above_budget(frame)
        and len(frame.raw) != frame.length
        and all(rules.is_advisory(violation.rule) for violation in frame.violations)
    )


def is_malformed(frame: Frame, *, framed: bool) -> bool:
    """A frame breaking a MUST-level rule, or bytes without a packet: for a connection that is only ``framed``,
    a whole packet's bytes are a packet."""
    if any(not rules.is_advisory(v.rule) for v in frame.violations):
        return True
    return frame.packet is None and (not framed or len(frame.raw) != frame.length)


def framed_only(frame: Frame) -> Frame:
    """A frame of a connection no version can read: its bytes and framing violations, no 3.1.1 reading of its
    body."""
    kept = tuple(violation for violation in frame.violations if violation.rule_key in FRAMING_RULES)
    return Frame(frame.offset, frame.length, frame.raw, None, kept)


class ConnectionAudit:
    """Audits one TCP connection incrementally: :meth:`feed` its segments in capture order, then :meth:`finish`."""

    def __init__(self, options: FlowOptions = DEFAULT_OPTIONS) -> None:
        self.options = options
        self.reassembler = Reassembler(
            broker_ports=options.broker_ports, max_buffered=options.max_buffered, history=options.history
        )
        self._sink = _Sink()
        self._streams = (
            _Stream(0, self.reassembler, options, self._sink),
            _Stream(1, self.reassembler, options, self._sink),
        )
        self._gaps: list[Gap] = []
        self._lost: list[tuple[int, Gap]] = []
        self._conflicts: list[Conflict] = []
        self._end: End | None = None
        self._order = 0
        # The transport, chosen from the client's first bytes (:mod:`.layers`); until then the outputs wait.
        self._transport = PLAIN
        self._stack: Stack | None = None
        self._held: list[tuple[int, Output]] | None = []
        self._opening = b""
        self._fed = [0, 0]  # per side: the TCP offset after the last byte handed to the stack
        self._set_aside = [0, 0]  # per side: the stack's lost bytes already set aside
        self._stack_ended = [False, False]

    def is_new_connection(self, segment: Segment) -> bool:
        """True for a SYN that starts another connection between the same endpoints."""
        return self.reassembler.is_new_connection(segment)

    def feed(self, segment: Segment) -> None:
        self._dispatch(self.reassembler.feed(segment))

    def finish(self, end_time_ns: int | None = None) -> FlowAudit:
        """Ends the input. ``end_time_ns`` is when observation stopped (the end of the capture); by default the
        time of the connection's last segment."""
        reassembler = self.reassembler
        if reassembler.endpoints is None or reassembler.first_time is None or reassembler.last_time is None:
            raise ValueError("no segment was fed")
        self._dispatch(reassembler.finish())
        self._choose(force=True)
        for side, stream in enumerate(self._streams):
            self._end_stack(side, reassembler.last_time, self._order)
            stream.end(own=False, reason=CUT_BY_END)
        stop = reassembler.last_time if end_time_ns is None else max(end_time_ns, reassembler.last_time)
        withheld = self._withhold()
        if (self._sink.version or UNKNOWN_VERSION) == UNKNOWN_VERSION and any(
            not_311(side_frame.frame) for _order, side_frame in self._sink.frames
        ):
            read = self._read_as_5()
            if read is None:
                self._frame_only(UNKNOWN_NOT_311)
            else:
                self._relabel(INFERRED_5, read)
        ordered_pairs = sorted(self._sink.frames, key=lambda item: item[0])
        ordered = [frame for _order, frame in ordered_pairs]
        return FlowAudit(
            endpoints=reassembler.endpoints,
            client=reassembler.client,
            direction_reason=reassembler.direction_reason,
            started_with_syn=(reassembler.started_with_syn(0), reassembler.started_with_syn(1)),
            isn=(reassembler.isn(0), reassembler.isn(1)),
            first_time=reassembler.first_time,
            last_time=reassembler.last_time,
            events=tuple(self._events(ordered_pairs, reassembler.last_time, stop)),
            frames=tuple(ordered),
            gaps=tuple(self._gaps),
            conflicts=tuple(self._conflicts),
            unassessable=tuple(sorted(self._sink.unassessable, key=lambda item: (item.side, item.offset))),
            counts=(self._streams[0].counts, self._streams[1].counts),
            tcp=(reassembler.stats(0), reassembler.stats(1)),
            end=self._end,
            version=self._version(),
            transport=self._transport if self._stack is None else self._stack.name,
            layer_notes=() if self._stack is None else tuple(self._stack.notes),
            withheld=tuple(withheld),
            capped_bytes=sum(stream.capped_bytes for stream in self._streams),
            oversized_messages=sum(stream.oversized_messages for stream in self._streams),
            oversized_bytes=sum(stream.oversized_bytes for stream in self._streams),
        )

    def _conflict(self, conflict: Conflict) -> None:
        """Records a conflicting retransmission: ranges of a side that touch or overlap merge, and past
        :data:`MAX_CONFLICT_RANGES` per side the side's last range widens to cover the new one."""
        side = conflict.side
        ranges = [index for index, known in enumerate(self._conflicts) if known.side == side]
        start, end = conflict.offset, conflict.offset + conflict.length
        for index in reversed(ranges):
            known = self._conflicts[index]
            if (known.offset <= end and start <= known.offset + known.length) or (
                index == ranges[-1] and len(ranges) >= MAX_CONFLICT_RANGES
            ):
                low, high = min(known.offset, start), max(known.offset + known.length, end)
                self._conflicts[index] = Conflict(side, low, high - low, known.time)
                return
        self._conflicts.append(conflict)

    def _withhold(self) -> list[SideFrame]:
        """Takes out of the conversation every frame decoded from bytes a conflicting retransmission contradicts:
        which copy the receiver's TCP kept is unknown, so nothing may rest on them. The judge hears of their bytes
        as bytes it cannot read, and the bytes are not assessable ("conflicting retransmission"). A conflict in a
        frame's fixed header puts the framing of everything after it on that side in doubt too. Of a stream
        carried by another layer (WebSocket, TLS) the TCP offsets of the frames are not known: every frame of a
        side with a conflict is withheld."""
        conflicts: dict[int, list[tuple[int, int]]] = {0: [], 1: []}
        for conflict in self._conflicts:
            conflicts[conflict.side].append((conflict.offset, conflict.offset + conflict.length))
        if not conflicts[0] and not conflicts[1]:
            return []
        plain = self._stack is None and self._transport == PLAIN
        touched = (_Ranges(conflicts[0]), _Ranges(conflicts[1]))
        doubt_from: list[int | None] = [None, None]
        kept: list[tuple[int, SideFrame]] = []
        withheld: list[SideFrame] = []
        for order, side_frame in self._sink.frames:
            side, _time, frame = side_frame
            ranges = conflicts[side]
            if not ranges:
                kept.append((order, side_frame))
                continue
            start, end = frame.offset, frame.offset + frame.length
            why = f"the {self._layer_name()} stream of this side holds bytes that arrived twice with different content"
            if plain:
                if doubt_from[side] is None and touched[side].touch(start, start + fixed_header_length(frame)):
                    doubt_from[side] = start
                doubt = doubt_from[side]
                inside = [f"{low}..{high - 1}" for low, high in ranges if low < end and start < high]
                if inside:
                    why = f"bytes {', '.join(inside[:3])} of this side's stream arrived twice with different content"
                elif doubt is not None and start >= doubt:
                    why = f"framed after the packet at offset {doubt}, whose fixed header arrived twice, differently"
                else:
                    kept.append((order, side_frame))
                    continue
            withheld.append(side_frame)
            self._withhold_frame(order, side_frame, why)
        self._sink.frames = kept
        return withheld

    def _layer_name(self) -> str:
        """The layer that carried the side's MQTT stream: "TCP", or the stack's name."""
        return "TCP" if self._stack is None else self._stack.name

    def _withhold_frame(self, order: int, side_frame: SideFrame, why: str) -> None:
        side, time, frame = side_frame
        counts = self._streams[side].counts
        sender = self.reassembler.direction(side)
        if is_oversized(frame):  # its bytes are a not-assessable record already
            if sender is not None:
                self._sink.undecoded.append((order, Lost(time / _NS, sender, frame.length, undecoded=True)))
            return
        if is_malformed(frame, framed=False):
            counts.malformed -= frame.length
        else:
            counts.packets -= frame.length
        counts.unassessable += frame.length
        self._sink.unassessable.append(Unassessable(side, frame.offset, frame.length, reason(CONFLICTING, why)))
        if sender is not None:
            self._sink.undecoded.append((order, Lost(time / _NS, sender, frame.length, undecoded=True)))

    def _version(self) -> str:
        if self._transport == ENCRYPTED:
            return ENCRYPTED_VERSION
        if self._stack is not None and self._stack.not_mqtt:
            return NOT_MQTT_VERSION
        if self._stack is not None and self._stack.undecrypted is not None:
            return self._stack.undecrypted
        return self._sink.version or UNKNOWN_VERSION

    def _frame_only(self, version: str) -> None:
        """Relabels the connection ``version`` (one of :data:`FRAMED_ONLY`) once all its frames are in: each frame
        keeps its bytes only, and the account of its bytes moves with it."""
        self._relabel(version, [framed_only(frame) for _order, (_side, _time, frame) in self._sink.frames])

    def _read_as_5(self) -> list[Frame] | None:
        """Every frame of a connection no CONNECT named the version of, read as MQTT 5.0 (a frame cut short keeps
        its bytes and framing violations only); None when a whole one is no well-formed MQTT 5.0 packet either."""
        read: list[Frame] = []
        for _order, (side, _time, frame) in self._sink.frames:
            if len(frame.raw) != frame.length:
                read.append(framed_only(frame))
                continue
            decoder = StreamDecoder(self.reassembler.direction(side), offset=frame.offset, version=ProtocolVersion.V5)
            decoded = decoder.feed(frame.raw) + decoder.close()
            if len(decoded) != 1 or decoded[0].packet is None or is_malformed(decoded[0], framed=False):
                return None
            read.append(decoded[0])
        return read

    def _relabel(self, version: str, frames: list[Frame]) -> None:
        """Labels the connection ``version`` once all its frames are in, each frame read anew (``frames``, in the
        same order); the account of their bytes moves with them."""
        sink = self._sink
        sink.version = version
        framed = version in FRAMED_ONLY
        relabelled: list[tuple[int, SideFrame]] = []
        for (order, (side, time, frame)), read in zip(sink.frames, frames, strict=True):
            counts = self._streams[side].counts
            if is_malformed(frame, framed=False) and not is_oversized(frame) and not is_malformed(read, framed=framed):
                counts.malformed -= frame.length
                counts.packets += frame.length
            relabelled.append((order, SideFrame(side, time, read)))
        sink.frames = relabelled

    def _dispatch(self, outputs: list[Output]) -> None:
        for item in outputs:
            order = self._order
            self._order += 1
            if self._held is None:
                self._route(item, order)
            else:
                self._held.append((order, item))
                self._choose(force=False, latest=item)

    def _choose(self, *, force: bool, latest: Output | None = None) -> None:
        """Chooses the transport once the client's first bytes tell (or ``force``: nothing more will come), then
        routes the outputs held until then. Only a client stream that starts at its captured SYN is looked at: of
        a mid-stream start, the first bytes seen are no start of anything."""
        held = self._held
        if held is None:
            return
        reassembler = self.reassembler
        client = reassembler.client
        if client is not None and reassembler.started_with_syn(client):
            if isinstance(latest, Data) and latest.side == client and len(self._opening) < HELLO_BYTES:
                self._opening += latest.data[: HELLO_BYTES - len(self._opening)]
            decided = opening_complete(self._opening, self.options.keylog)
            if not decided and not force and not (isinstance(latest, (Gap, End)) and latest.side == client):
                return
            self._transport, self._stack = choose_stack(
                self._opening, self.options.keylog, client, require_mqtt=not self.options.mqtt_ports_named
            )
        self._held = None
        for order, item in held:
            self._route(item, order)

    def _route(self, item: Output, order: int) -> None:
        streams = self._streams
        stack = self._stack
        if self._transport == ENCRYPTED and isinstance(item, Data):
            streams[item.side].set_aside(item.offset, len(item.data), ENCRYPTED_REASON, item.time, order)
        elif stack is not None and isinstance(item, Data):
            side = item.side
            stream = streams[side]
            for piece in stack.feed(side, item.data, item.time):
                self._carried(stack, stream, piece, order)
            self._fed[side] = item.offset + len(item.data)
            self._account(side, item.time, order)
        elif isinstance(item, Data):
            streams[item.side].data(item.offset, item.data, item.time, order)
        elif isinstance(item, Gap):
            self._gaps.append(item)
            self._lost.append((order, item))
            if stack is not None:
                stack.gap(item.side, item.length, item.time)
                self._account(item.side, item.time, order)
                self._fed[item.side] = item.offset + item.length
            streams[item.side].gap(item.length)
        elif isinstance(item, Conflict):
            self._conflict(item)
        else:
            if self._end is None:
                self._end = item
            self._end_stack(item.side, item.time, order)
            streams[item.side].end(own=True, reason="")
            if item.abrupt:
                self._end_stack(1 - item.side, item.time, order)
                streams[1 - item.side].end(own=False, reason=CUT_BY_RESET)

    def _end_stack(self, side: int, time: int, order: int) -> None:
        """The side ended: the stack hands on what it still held, and sets aside what it cannot carry."""
        stack = self._stack
        if stack is None or self._stack_ended[side]:
            return
        self._stack_ended[side] = True
        stream = self._streams[side]
        for piece in stack.end(side, time):
            self._carried(stack, stream, piece, order)
        self._account(side, time, order)

    @staticmethod
    def _carried(stack: Stack, stream: _Stream, piece: Piece, order: int) -> None:
        """Inner bytes the stack carried: MQTT for the side's stream to frame, or not assessable when the stack
        found they are no MQTT."""
        if stack.not_mqtt:
            stream.set_aside(piece.offset, len(piece.data), NOT_MQTT_REASON, piece.time, order)
        else:
            stream.data(piece.offset, piece.data, piece.time, order, text=piece.text)

    def _account(self, side: int, time: int, order: int) -> None:
        """The bytes the stack set aside since it was last asked: the last ones it was fed, with its reason."""
        stack = self._stack
        assert stack is not None
        lost = stack.lost[side]
        new = lost - self._set_aside[side]
        if new > 0:
            self._set_aside[side] = lost
            reason = next(
                (note.text for note in reversed(stack.notes) if note.side == side and note.rule is None),
                f"not carried by the {stack.name} layer",
            )
            self._streams[side].set_aside(self._fed[side] - new, new, f"{stack.name}: {reason}", time, order)

    def _events(self, frames: list[tuple[int, SideFrame]], last_seen: int, stop: int) -> list[Event]:
        """The judge's events; an open connection ends in a Quiet at its last captured segment (``last_seen``),
        with the end of the capture (``stop``) beside it."""
        reassembler = self.reassembler
        if reassembler.client is None:
            return []
        directions = (reassembler.direction(0), reassembler.direction(1))
        acked_through = (reassembler.acked_through(0), reassembler.acked_through(1))
        events: list[Event] = []
        now = float("-inf")
        # Frames, gaps and bytes not framed in the order the reassembler produced them: a gap tells the judge that
        # what the side owed may have been in the bytes nobody captured (or nobody could frame).
        unseen: list[tuple[int, Lost]] = []
        for order, gap in self._lost:
            sender = directions[gap.side]
            assert sender is not None
            unseen.append((order, Lost(gap.time / _NS, sender, gap.length)))
        unseen = sorted(unseen + self._sink.undecoded, key=lambda item: item[0])
        lost = iter(unseen)
        pending = next(lost, None)
        for order, (side, time, frame) in frames:
            while pending is not None and pending[0] <= order:
                now = max(now, pending[1].time)
                events.append(_at(pending[1], now))
                pending = next(lost, None)
            sender = directions[side]
            assert sender is not None
            now = max(now, time / _NS)
            events.append(Sent(now, sender, frame, frame.offset + frame.length <= acked_through[side]))
        while pending is not None:
            now = max(now, pending[1].time)
            events.append(_at(pending[1], now))
            pending = next(lost, None)
        end = self._end
        if end is None:
            seen_until = max(now, last_seen / _NS)
            events.append(Quiet(seen_until, max(seen_until, stop / _NS)))
        else:
            events.append(Closed(max(now, end.time / _NS), directions[end.side], end.abrupt))
        return events


def stopped_at_flow_budget(
    audit: FlowAudit, unheld: tuple[int, int], segments: int, budget: int, payload: int | None = None
) -> FlowAudit:
    """``audit``, the last connection of a flow that reached the per-flow budget, with what the flow's later
    ``segments`` carried: ``payload`` bytes (all of ``unheld`` when not given), of which ``unheld`` per side lie
    past the bytes held, captured but not held. Each side's are a not-assessable record after its last stream byte,
    and the judge hears, where observation of the connection ends, that each side sent bytes it cannot read (an
    answer a side owed may be among them)."""
    payload = sum(unheld) if payload is None else payload
    counts = list(audit.counts)
    rows = list(audit.unassessable)
    lost: list[Event] = []
    events = list(audit.events)
    quiet = events[-1] if events and isinstance(events[-1], Quiet) else None
    why = flow_reason(budget, segments, payload)
    for side, length in enumerate(unheld):
        if length <= 0:
            continue
        before = counts[side]
        rows.append(Unassessable(side, before.stream, length, why))
        counts[side] = ByteCounts(
            before.stream + length, before.packets, before.malformed, before.gaps, before.unassessable + length
        )
        sender = audit.direction(side)
        if quiet is not None and sender is not None:
            lost.append(Lost(quiet.time, sender, length, undecoded=True))
    if lost:
        events[-1:-1] = lost
    return replace(
        audit,
        counts=(counts[0], counts[1]),
        unassessable=tuple(rows),
        events=tuple(events),
        unheld_segments=segments,
        unheld_bytes=payload,
    )
