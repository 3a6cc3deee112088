"""MQTT over WebSocket in a capture: the HTTP Upgrade handshake (RFC 6455 section 4) and the frames (section 5)
removed from each side's TCP bytes, the binary frames' payloads handed on as that side's MQTT stream.

The HTTP heads are parsed by h11 and the frames by wsproto's ``FrameDecoder`` (which unmasks, checks the mask bit
of each direction, the opcodes, the reserved bits, the lengths and the control frames' shape); what a frame means
in a message (fragmentation, a text frame, a close) is followed here. A defect of the sender becomes a
:class:`~.layers.LayerNote` with the statement it breaks: a text data frame [MQTT-6.0.0-1], a client that does not
offer the ``mqtt`` subprotocol [MQTT-6.0.0-3], a server that does not select it [MQTT-6.0.0-4], and frames RFC 6455
forbids (rule keys ``websocket-*``). A text message's bytes are still handed on as MQTT, in pieces marked ``text``:
the packets in them carry [MQTT-6.0.0-1], so the judge holds their recipient to closing without acting on them.
Once a side's framing cannot be followed (a broken frame, a gap, a close frame, an upgrade the server refused), the
rest of that side is set aside, not read as MQTT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import h11
from wsproto.frame_protocol import (
    LOCAL_ONLY_CLOSE_REASONS,
    MAX_CLOSE_REASON,
    MAX_PROTOCOL_CLOSE_REASON,
    MIN_CLOSE_REASON,
    CloseReason,
    FrameDecoder,
    Opcode,
    ParseFailed,
)
from wsproto.utilities import generate_accept_token

from mqttaudit.spec.ids import R311

from .layers import LayerNote, Piece

#: The subprotocol MQTT over WebSocket names (MQTT 3.1.1 and 5.0 section 6; "mqttv3.1" was MQTT 3.1's).
SUBPROTOCOL: Final = "mqtt"
SUBPROTOCOLS: Final = frozenset({SUBPROTOCOL, "mqttv3.1"})
#: An HTTP head longer than this without its blank line is no handshake this layer follows.
MAX_HEAD: Final = 16 * 1024
#: Bytes of evidence a note keeps at most.
EVIDENCE: Final = 64
_END_OF_HEAD: Final = b"\r\n\r\n"

#: Rule keys of the WebSocket defects no MQTT statement numbers (RFC 6455 states them).
HANDSHAKE: Final = "websocket-handshake"
UNMASKED: Final = "websocket-unmasked"
MASKED: Final = "websocket-masked"
OPCODE: Final = "websocket-opcode"
FRAME: Final = "websocket-frame"
CLOSE: Final = "websocket-close"
FRAGMENTS: Final = "websocket-fragments"

#: What each WebSocket defect's rule expects, for the finding's "expected" column.
EXPECTED: Final = {
    R311.MQTT_6_0_0_1: "MQTT Control Packets sent in binary data frames (opcode 0x2) only",
    R311.MQTT_6_0_0_3: 'the Client offers the WebSocket subprotocol "mqtt" (Sec-WebSocket-Protocol)',
    R311.MQTT_6_0_0_4: 'the Server selects and returns the WebSocket subprotocol "mqtt" (Sec-WebSocket-Protocol)',
    HANDSHAKE: "a 101 response whose Sec-WebSocket-Accept answers the client's key (RFC 6455 4.2.2)",
    UNMASKED: "every frame from the client masked (RFC 6455 5.1)",
    MASKED: "no frame from the server masked (RFC 6455 5.1)",
    OPCODE: "only the opcodes RFC 6455 defines, and no reserved bit set without an extension (RFC 6455 5.2)",
    FRAME: "frames as RFC 6455 5.2 lays them out",
    CLOSE: "a Close frame without a body, or with a status code an endpoint may send (RFC 6455 5.5.1, 7.4)",
    FRAGMENTS: "a fragmented message continued by continuation frames only, and none without one (RFC 6455 5.4)",
}

_HANDSHAKE_PHASE: Final = 0
_FRAMES_PHASE: Final = 1
_STOPPED_PHASE: Final = 2


@dataclass(slots=True)
class _Side:
    """What one side of the connection has sent, as far as the layer followed it."""

    phase: int = _HANDSHAKE_PHASE
    head: bytearray = field(default_factory=bytearray)
    decoder: FrameDecoder | None = None
    #: TCP bytes of the side fed so far.
    fed: int = 0
    #: Bytes handed on so far: the next piece's offset in the inner stream.
    inner: int = 0
    lost: int = 0
    #: The opcode of the data message in progress (a fragmented one), None between messages.
    message: Opcode | None = None
    #: A frame's first chunk came out and the frame's payload goes on.
    in_frame: bool = False
    #: Where the frame in progress started (in the side's TCP stream), and its first bytes.
    frame_start: int = 0
    frame_bytes: bytes = b""
    #: The side closed (its Close frame) or refused: why the rest of it is set aside.
    stop_reason: str = ""


def _tokens(headers: list[tuple[bytes, bytes]], name: bytes) -> list[str]:
    """The comma-separated tokens of every header ``name`` (h11 lowercases names), in order."""
    return [
        token.strip()
        for key, value in headers
        if key == name
        for token in value.decode("latin-1").split(",")
        if token.strip()
    ]


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    return next((value for key, value in headers if key == name), None)


def _line(head: bytes, name: bytes) -> bytes:
    """The header line ``name`` of an HTTP head, as evidence (the head's first line when there is none)."""
    for line in head.split(b"\r\n"):
        if line.lower().startswith(name + b":"):
            return line[:EVIDENCE]
    return head.split(b"\r\n", 1)[0][:EVIDENCE]


class WebSocketLayer:
    """One WebSocket connection, both sides: side ``client`` sends the Upgrade request (the side whose first bytes
    chose this layer), the other the response."""

    name = "websocket"

    def __init__(self, client: int = 0) -> None:
        self.client = client
        self._sides = (_Side(), _Side())
        self._notes: list[LayerNote] = []
        self._key: bytes | None = None
        self._offered: list[str] | None = None

    @property
    def notes(self) -> list[LayerNote]:
        return list(self._notes)

    @property
    def lost(self) -> tuple[int, int]:
        return (self._sides[0].lost, self._sides[1].lost)

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]:
        state = self._sides[side]
        state.fed += len(data)
        if state.phase == _STOPPED_PHASE:
            state.lost += len(data)
            return []
        if state.phase == _HANDSHAKE_PHASE:
            state.head += data
            end = state.head.find(_END_OF_HEAD)
            if end < 0:
                if len(state.head) > MAX_HEAD:
                    self._stop(side, time, f"no end of the HTTP head within {MAX_HEAD} bytes: no WebSocket handshake")
                return []
            head, rest = bytes(state.head[: end + len(_END_OF_HEAD)]), bytes(state.head[end + len(_END_OF_HEAD) :])
            state.head = bytearray()
            if side == self.client:
                self._request(head, time)
            else:
                self._response(head, time)
            if state.phase == _STOPPED_PHASE:
                state.lost += len(rest)
                return []
            state.phase = _FRAMES_PHASE
            # Frames from the client are masked, from the server not (RFC 6455 5.1): the decoder of the server's
            # frames is the one a client runs.
            state.decoder = FrameDecoder(client=side != self.client)
            data = rest
        return self._frames(side, state, data, time)

    def gap(self, side: int, length: int, time: int) -> None:
        state = self._sides[side]
        if state.phase != _STOPPED_PHASE:
            self._stop(side, time, f"{length} bytes not captured: the WebSocket framing is lost for the rest of it")
        else:
            state.stop_reason = f"{length} bytes not captured, after {state.stop_reason}"

    def end(self, side: int, time: int) -> list[Piece]:
        state = self._sides[side]
        if state.phase == _HANDSHAKE_PHASE and state.head:
            self._stop(side, time, "an HTTP head cut short by the end of the stream")
        elif state.phase == _FRAMES_PHASE and state.decoder is not None and len(state.decoder.buffer):
            self._stop(side, time, "a WebSocket frame header cut short by the end of the stream")
        return []

    # -- the handshake ----------------------------------------------------------------------------------------------

    def _request(self, head: bytes, time: int) -> None:
        """The client's Upgrade request (RFC 6455 4.1)."""
        connection = h11.Connection(h11.SERVER)
        connection.receive_data(head)
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            self._refused(time, f"the client's HTTP request does not parse ({exc}): no WebSocket handshake")
            return
        if not isinstance(event, h11.Request):
            self._refused(time, "the client's HTTP request is incomplete: no WebSocket handshake")
            return
        headers = list(event.headers)
        upgrade = [token.lower() for token in _tokens(headers, b"upgrade")]
        if event.method != b"GET" or "websocket" not in upgrade:
            self._refused(time, "an HTTP request that asks for no WebSocket upgrade: not MQTT")
            return
        self._key = _header(headers, b"sec-websocket-key")
        offered = self._offered = _tokens(headers, b"sec-websocket-protocol")
        if SUBPROTOCOL not in offered:  # [MQTT-6.0.0-3]
            named = ", ".join(f'"{token}"' for token in offered) if offered else "none"
            self._note(
                self.client,
                time,
                R311.MQTT_6_0_0_3,
                f'the client\'s WebSocket upgrade does not offer the subprotocol "mqtt" (offered: {named})',
                _line(head, b"sec-websocket-protocol"),
            )

    def _response(self, head: bytes, time: int) -> None:
        """The server's answer to the Upgrade request (RFC 6455 4.2.2)."""
        server = 1 - self.client
        connection = h11.Connection(h11.CLIENT)
        # h11 reads a 101 only as the answer to a request that proposed an upgrade.
        proposal = [("Host", "mqtt"), ("Upgrade", "websocket"), ("Connection", "Upgrade")]
        connection.send(h11.Request(method="GET", target="/", headers=proposal))
        connection.receive_data(head)
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            self._refused(time, f"the server's HTTP response does not parse ({exc}): no WebSocket connection")
            return
        if not isinstance(event, (h11.InformationalResponse, h11.Response)):
            self._refused(time, "the server's HTTP response is incomplete: no WebSocket connection")
            return
        if event.status_code != 101:
            reason = event.reason.decode("latin-1")
            self._refused(
                time,
                f"the server answered the WebSocket upgrade with HTTP {event.status_code} {reason}".rstrip()
                + ": no WebSocket connection, nothing of it is MQTT",
            )
            return
        headers = list(event.headers)
        accept = _header(headers, b"sec-websocket-accept")
        if self._key is not None and accept != generate_accept_token(self._key):
            self._note(
                server,
                time,
                HANDSHAKE,
                "the server's Sec-WebSocket-Accept does not answer the client's Sec-WebSocket-Key"
                if accept is not None
                else "the server's 101 response has no Sec-WebSocket-Accept",
                _line(head, b"sec-websocket-accept"),
            )
        selected = _tokens(headers, b"sec-websocket-protocol")
        if self._offered is not None and SUBPROTOCOL in self._offered and selected != [SUBPROTOCOL]:  # [MQTT-6.0.0-4]
            named = ", ".join(f'"{token}"' for token in selected) if selected else "none"
            self._note(
                server,
                time,
                R311.MQTT_6_0_0_4,
                f'the server does not select the WebSocket subprotocol "mqtt" (selected: {named})',
                _line(head, b"sec-websocket-protocol"),
            )

    def _refused(self, time: int, reason: str) -> None:
        """No WebSocket connection came about: neither side's bytes are MQTT from here on."""
        for side in (0, 1):
            if self._sides[side].phase != _STOPPED_PHASE:
                self._stop(side, time, reason)

    # -- the frames ---------------------------------------------------------------------------------------------------

    def _frames(self, side: int, state: _Side, data: bytes, time: int) -> list[Piece]:
        decoder = state.decoder
        assert decoder is not None
        decoder.receive_bytes(data)
        pieces: list[Piece] = []
        while state.phase == _FRAMES_PHASE:
            starting = not state.in_frame and decoder.header is None
            if starting:
                state.frame_start = state.fed - len(decoder.buffer)
                state.frame_bytes = bytes(decoder.buffer.buffer[:EVIDENCE])
            try:
                frame = decoder.process_buffer()
            except ParseFailed as exc:
                self._broken(side, state, time, str(exc))
                break
            if frame is None:
                break
            first_chunk = not state.in_frame
            state.in_frame = not frame.frame_finished
            if first_chunk and not self._frame_start(side, state, frame.opcode, time):
                break
            payload = frame.payload
            assert isinstance(payload, (bytes, bytearray))
            if frame.opcode.iscontrol():
                if frame.opcode is Opcode.CLOSE:
                    self._close(side, state, bytes(payload), time)
                continue
            if payload:
                pieces.append(Piece(state.inner, bytes(payload), time, state.message is Opcode.TEXT))
                state.inner += len(payload)
            if frame.frame_finished and frame.message_finished:
                state.message = None
        if state.phase == _STOPPED_PHASE and decoder.buffer:
            state.lost += len(decoder.buffer)
            decoder.buffer.buffer.clear()
        return pieces

    def _frame_start(self, side: int, state: _Side, opcode: Opcode, time: int) -> bool:
        """A frame begins: it must fit the message in progress (RFC 6455 5.4), and carry binary data [MQTT-6.0.0-1].
        False when the side's framing stops here."""
        if opcode.iscontrol():
            return True
        if opcode is Opcode.CONTINUATION:
            if state.message is None:
                self._defect_stop(side, state, time, FRAGMENTS, "a continuation frame without a message to continue")
                return False
            return True
        if state.message is not None:
            self._defect_stop(side, state, time, FRAGMENTS, "a new data frame before the fragmented message ended")
            return False
        if opcode is Opcode.TEXT:  # [MQTT-6.0.0-1]
            self._note(
                side,
                time,
                R311.MQTT_6_0_0_1,
                f"the {self._who(side)} sent MQTT in a WebSocket text frame (opcode 0x1), not a binary one",
                state.frame_bytes,
            )
        state.message = opcode
        return True

    def _close(self, side: int, state: _Side, payload: bytes, time: int) -> None:
        """A Close frame (RFC 6455 5.5.1): its body is empty, or a status code an endpoint may send and UTF-8."""
        problem = ""
        if len(payload) == 1:
            problem = "a Close frame with a one-byte body"
        elif payload:
            code = int.from_bytes(payload[:2], "big")
            known = {int(reason) for reason in CloseReason}
            if (
                not MIN_CLOSE_REASON <= code <= MAX_CLOSE_REASON
                or code in {int(reason) for reason in LOCAL_ONLY_CLOSE_REASONS}
                or (code <= MAX_PROTOCOL_CLOSE_REASON and code not in known)
            ):
                problem = f"a Close frame with status code {code}, which no endpoint may send"
            else:
                try:
                    payload[2:].decode("utf-8")
                except UnicodeDecodeError:
                    problem = "a Close frame whose reason is not UTF-8"
        if problem:
            self._note(side, time, CLOSE, f"the {self._who(side)} sent {problem}", state.frame_bytes)
        state.phase = _STOPPED_PHASE
        state.stop_reason = "after the WebSocket Close frame: not MQTT"
        self._notes.append(LayerNote(side, time, None, state.stop_reason, b""))

    def _broken(self, side: int, state: _Side, time: int, problem: str) -> None:
        """wsproto could not read the side's next frame: the sender broke RFC 6455 5.1 or 5.2."""
        lowered = problem.lower()
        if "unmasked" in lowered:
            rule = UNMASKED
        elif "masked" in lowered:
            rule = MASKED
        elif "opcode" in lowered or "reserved bit" in lowered:
            rule = OPCODE
        else:
            rule = FRAME
        decoder = state.decoder
        assert decoder is not None
        raw = bytes(decoder.buffer.buffer[:EVIDENCE])
        self._note(side, time, rule, f"the {self._who(side)} sent a broken WebSocket frame: {problem}", raw)
        self._stop(side, time, "after a broken WebSocket frame: its framing cannot be followed")

    def _defect_stop(self, side: int, state: _Side, time: int, rule: str, problem: str) -> None:
        self._note(side, time, rule, f"the {self._who(side)} sent {problem}", state.frame_bytes)
        self._set_aside_frame(side, state, time, f"after {problem}: the framing cannot be followed")

    def _set_aside_frame(self, side: int, state: _Side, time: int, reason: str) -> None:
        """The frame in progress, from its first byte, and all that follows are set aside."""
        decoder = state.decoder
        assert decoder is not None
        state.lost += state.fed - state.frame_start - len(decoder.buffer)
        self._stop(side, time, reason)

    # -- notes ----------------------------------------------------------------------------------------------------

    def _stop(self, side: int, time: int, reason: str) -> None:
        """The side's framing is not followed from here: what it still holds and all it sends later are lost."""
        state = self._sides[side]
        state.phase = _STOPPED_PHASE
        state.stop_reason = reason
        state.lost += len(state.head)
        state.head = bytearray()
        decoder = state.decoder
        if decoder is not None and decoder.buffer:
            state.lost += len(decoder.buffer)
            decoder.buffer.buffer.clear()
        self._notes.append(LayerNote(side, time, None, reason, b""))

    def _note(self, side: int, time: int, rule: str, text: str, raw: bytes) -> None:
        self._notes.append(LayerNote(side, time, rule, text, raw[:EVIDENCE]))

    def _who(self, side: int) -> str:
        return "client" if side == self.client else "server"
