"""A TCP server on 127.0.0.1 that plays one hostile broker, for the probe's robustness tests.

Each accepted connection runs in a thread with one behaviour (``MODES``). The server bounds itself: it stops
accepting and ends every connection after ``lifetime`` seconds, and sends at most ``max_bytes`` per connection,
so a test that forgets it cannot flood the machine. The ``ws_`` modes are WebSocket servers (``ws://`` targets):
they accept the upgrade with the ``mqtt`` subprotocol, then misbehave in WebSocket frames.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from wsproto.frame_protocol import FrameProtocol

from mqttaudit.codec import (
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    Pingreq,
    Pingresp,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    StreamDecoder,
    Suback,
    Subscribe,
    Unsuback,
    Unsubscribe,
    decode,
    encode,
)
from mqttaudit.codec.properties import MAXIMUM_PACKET_SIZE, first

CONNACK = encode(Connack(return_code=0))
#: One burst of the flood: QoS 0 PUBLISH packets on many topics, about 64 KiB.
FLOOD = b"".join(encode(Publish(topic=f"flood/{n}", payload=bytes(100))) for n in range(512))
#: A PUBLISH fixed header declaring 268,435,455 bytes (the largest Remaining Length), then a topic length.
HUGE_HEADER = bytes.fromhex("30 ff ff ff 7f 00 05")
#: A binary WebSocket frame header declaring 2^63 bytes (an 8-byte length with its top bit set: RFC 6455 forbids it).
GIANT_FRAME_HEADER = b"\x82\x7f" + (1 << 63).to_bytes(8, "big")
#: The largest packet the ``scripted_v5`` broker decodes; a larger one is read and dropped as it arrives.
SCRIPTED_DECODE_BOUND = 64 * 1024
#: What the ``scripted_v5`` broker answers a 3.1.1 CONNECT with: accepted, in 3.1.1's form.
CONNACK_3_1_1 = bytes.fromhex("20 02 00 00")
#: WebSocket frames as a server writes them (unmasked).
SERVER_FRAMES = FrameProtocol(client=False, extensions=[])
#: About 64 KiB of Pings with the largest payload a control frame may carry (125 bytes).
PINGS = bytes(SERVER_FRAMES.ping(b"p" * 125)) * 512
WEBSOCKET_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: How the ``broker`` mode takes a CONNECT of a version (see :meth:`HostileServer._broker`): serves it, closes on it
#: without a word, or reads and never answers.
SERVE, CLOSE, HANG = "serve", "close", "hang"


class HostileServer:
    """``with HostileServer("flooding") as server: ... server.url``. ``tail`` is what the ``hanging`` mode sends
    after its CONNACK (the start of a packet it never finishes); ``connack`` is what the ``answering`` and
    ``scripted_v5`` modes answer every CONNECT with; ``enforce_maximum`` makes ``scripted_v5`` close on a packet
    above the Maximum Packet Size its CONNACK declares."""

    def __init__(
        self,
        mode: str,
        *,
        lifetime: float = 60.0,
        max_bytes: int = 256 << 20,
        tail: bytes = b"\x30\x05\x00",
        connack: bytes = CONNACK,
        v311: bytes | str = SERVE,
        v5: bytes | str = SERVE,
        refuse_dollar: bool = False,
        enforce_maximum: bool = False,
    ) -> None:
        self.behaviour: Callable[[socket.socket], None] = getattr(self, f"_{mode}")
        self.mode = mode
        self.tail = tail
        self.connack = connack
        #: How the ``broker`` mode takes a CONNECT of each version: :data:`SERVE`, :data:`CLOSE`, :data:`HANG`, or
        #: the bytes it answers with before it closes. ``refuse_dollar``: a 5.0 PUBLISH to a '$' topic gets PUBACK
        #: (or PUBREC) 0x87 Not authorized, a 5.0 SUBSCRIBE to a '$' filter SUBACK 0x87.
        self.v311 = v311
        self.v5 = v5
        self.refuse_dollar = refuse_dollar
        #: Protocol Level -> CONNECTs of that level received (``broker`` mode).
        self.connects: dict[int, int] = {}
        self.enforce_maximum = enforce_maximum
        self.max_bytes = max_bytes
        self.deadline = time.monotonic() + lifetime
        self.stopped = threading.Event()
        self.connections = 0
        #: The largest packet a client sent (``scripted_v5``), in bytes, fixed header included.
        self.largest_packet = 0
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self._socket.settimeout(0.2)
        self.port: int = self._socket.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name=f"hostile-{mode}", daemon=True)
        self._acceptor.start()

    @property
    def url(self) -> str:
        if self.mode.startswith("ws_"):
            return f"ws://127.0.0.1:{self.port}/mqtt"
        return f"mqtt://127.0.0.1:{self.port}"

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopped.set()
        self._acceptor.join(5)
        for thread in self._threads:
            thread.join(5)
        self._socket.close()

    def _over(self) -> bool:
        return self.stopped.is_set() or time.monotonic() > self.deadline

    def _accept(self) -> None:
        while not self._over():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        connection.settimeout(0.2)
        with connection, contextlib.suppress(OSError):  # the prober closed or reset: a hostile server shrugs
            self.behaviour(connection)

    # -- the behaviours -------------------------------------------------------------------------------------------

    def _read_until_closed(self, connection: socket.socket) -> None:
        while not self._over():
            try:
                if not connection.recv(65536):
                    return
            except TimeoutError:
                continue

    def _drain_in_background(self, connection: socket.socket) -> None:
        """Reads (and drops) what the prober sends, so its writes never block on a full window."""

        def drain() -> None:
            with contextlib.suppress(OSError):
                self._read_until_closed(connection)

        thread = threading.Thread(target=drain, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _await_connect(self, connection: socket.socket) -> bool:
        while not self._over():
            try:
                return bool(connection.recv(65536))
            except TimeoutError:
                continue
        return False

    def _send_until_over(
        self, connection: socket.socket, chunk: Callable[[], bytes], *, limit: int | None = None
    ) -> None:
        sent = 0
        while sent < (self.max_bytes if limit is None else limit) and not self._over():
            data = chunk()
            try:
                connection.sendall(data)
            except TimeoutError:
                continue
            sent += len(data)

    def _silent(self, connection: socket.socket) -> None:
        """Accepts and reads, never answers."""
        self._read_until_closed(connection)

    def _resetting(self, connection: socket.socket) -> None:
        """Resets the connection as soon as it opens (SO_LINGER 0, then close: RST)."""
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _flooding(self, connection: socket.socket) -> None:
        """CONNACK, then QoS 0 PUBLISH packets as fast as the socket takes them."""
        if self._await_connect(connection):
            self._drain_in_background(connection)
            connection.sendall(CONNACK)
            self._send_until_over(connection, lambda: FLOOD)

    def _random(self, connection: socket.socket) -> None:
        """Endless random bytes from the first moment, whatever the prober sends."""
        self._drain_in_background(connection)
        self._send_until_over(connection, lambda: os.urandom(65536))

    def _dribbling(self, connection: socket.socket) -> None:
        """CONNACK, then a PUBLISH declaring 256 MB whose bytes come one every 5 ms."""
        if self._await_connect(connection):
            self._drain_in_background(connection)
            connection.sendall(CONNACK + HUGE_HEADER)

            def one_byte() -> bytes:
                time.sleep(0.005)
                return b"x"

            self._send_until_over(connection, one_byte)

    def _hanging(self, connection: socket.socket) -> None:
        """CONNACK, then the start of a packet (``tail``), and nothing more."""
        if self._await_connect(connection):
            connection.sendall(CONNACK + self.tail)
            self._read_until_closed(connection)

    def _answering(self, connection: socket.socket) -> None:
        """``connack`` for the CONNECT, then reads until the prober closes."""
        if self._await_connect(connection):
            connection.sendall(self.connack)
            self._read_until_closed(connection)

    def _deaf(self, connection: socket.socket) -> None:
        """``connack`` for the CONNECT, then reads nothing more (with a small receive buffer) until it stops."""
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if self._await_connect(connection):
            connection.sendall(self.connack)
            self.stopped.wait(max(0.0, self.deadline - time.monotonic()))

    def _closing(self, connection: socket.socket) -> None:
        """``connack`` for the CONNECT, then a FIN: the prober's socket is left half open unless it closes it."""
        if self._await_connect(connection):
            connection.sendall(self.connack)

    def _broker(self, connection: socket.socket) -> None:
        """A small broker that never delivers anything: a CONNECT of each version is served, closed on, left
        unanswered or answered with fixed bytes and closed (``v311``, ``v5``); a served connection gets CONNACK 0x00,
        a SUBACK granting the QoS asked, PUBACK, PUBREC and PUBCOMP, UNSUBACK and PINGRESP."""
        decoder = StreamDecoder(Direction.FROM_CLIENT, version=None)  # the version of the CONNECT
        served: ProtocolVersion | None = None
        while not self._over():
            try:
                data = connection.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            for frame in decoder.feed(data):
                packet = frame.packet
                if isinstance(packet, Connect) and served is None:
                    self.connects[packet.protocol_level] = self.connects.get(packet.protocol_level, 0) + 1
                    how = self.v5 if packet.protocol_level == ProtocolVersion.V5.level else self.v311
                    if how == HANG:
                        self._read_until_closed(connection)
                        return
                    if how != SERVE:
                        if isinstance(how, bytes):
                            connection.sendall(how)
                        return  # then the close
                    served = (
                        ProtocolVersion.V5
                        if packet.protocol_level == ProtocolVersion.V5.level
                        else ProtocolVersion.V3_1_1
                    )
                    connection.sendall(encode(Connack(), version=served))
                elif served is not None and packet is not None:
                    answer = self._answer(packet, served)
                    if answer is None and isinstance(packet, Disconnect):
                        return
                    if answer is not None:
                        connection.sendall(encode(answer, version=served))

    def _answer(self, packet: Packet | None, version: ProtocolVersion) -> Packet | None:
        """As :func:`_scripted_answer`, but with ``refuse_dollar`` a 5.0 PUBLISH to a '$' topic gets PUBACK (or
        PUBREC) 0x87 Not authorized and a SUBSCRIBE to a '$' filter SUBACK 0x87 (0x80 in 3.1.1)."""
        if self.refuse_dollar and isinstance(packet, Subscribe):
            refused = 0x87 if version is ProtocolVersion.V5 else 0x80
            codes = tuple(refused if s.topic_filter.startswith("$") else s.qos for s in packet.subscriptions)
            return Suback(packet_id=packet.packet_id, return_codes=codes)
        if (
            self.refuse_dollar
            and version is ProtocolVersion.V5
            and isinstance(packet, Publish)
            and packet.qos
            and packet.topic.startswith("$")
        ):
            kind = Puback if packet.qos == 1 else Pubrec
            return kind(packet_id=packet.packet_id, reason_code=0x87)
        return _scripted_answer(packet, version)

    def _scripted_v5(self, connection: socket.socket) -> None:
        """A minimal MQTT 5.0 broker that routes nothing: ``connack`` for a 5.0 CONNECT (``20 02 00 00`` for a 3.1.1
        one); SUBACK granting each QoS asked (Reason Codes 0x00-0x02); UNSUBACK 0x00 per filter; PUBACK 0x00 for
        QoS 1, PUBREC 0x00 for QoS 2, PUBCOMP 0x00 for PUBREL; PINGRESP; a FIN after DISCONNECT. Anything else,
        malformed or not, is read and ignored; a packet above ``SCRIPTED_DECODE_BOUND`` is read and dropped as it
        arrives, never held. With ``enforce_maximum``, a fixed header declaring a packet above the CONNACK's Maximum
        Packet Size gets DISCONNECT 0x95 (Packet too large) and a FIN at once, before the rest of it is read (and then
        dropped until the prober closes)."""
        decoder = StreamDecoder(Direction.FROM_CLIENT, max_packet_size=SCRIPTED_DECODE_BOUND, version=None)
        version = ProtocolVersion.V5
        declared = [f.packet for f in decode(self.connack, Direction.FROM_SERVER, version=ProtocolVersion.V5).frames]
        maximum = next((first(p.properties, MAXIMUM_PACKET_SIZE) for p in declared if isinstance(p, Connack)), None)
        while not self._over():
            try:
                data = connection.recv(1 << 20)
            except TimeoutError:
                continue
            if not data:
                return
            frames = decoder.feed(data)
            sizes = [frame.length for frame in frames] + [decoder.skipping or 0]
            self.largest_packet = max(self.largest_packet, *sizes)
            if self.enforce_maximum and isinstance(maximum, int) and max(sizes) > maximum:
                connection.sendall(encode(Disconnect(reason_code=0x95), version=ProtocolVersion.V5))
                # The FIN right behind it; what is still on its way is read and dropped until the prober closes, so
                # the close is a FIN: a close with unread bytes would be a reset, which may discard the DISCONNECT
                # before the prober reads it.
                connection.shutdown(socket.SHUT_WR)
                self._read_until_closed(connection)
                return
            for frame in frames:
                packet = frame.packet
                if isinstance(packet, Connect):
                    version = ProtocolVersion.from_level(packet.protocol_level) or ProtocolVersion.V5
                    connection.sendall(self.connack if version is ProtocolVersion.V5 else CONNACK_3_1_1)
                    continue
                if isinstance(packet, Disconnect):
                    return
                answer = _scripted_answer(packet, version)
                if answer is not None:
                    connection.sendall(encode(answer, validate=False, version=version))

    # -- WebSocket behaviours -------------------------------------------------------------------------------------

    def _websocket_upgrade(self, connection: socket.socket) -> bytes | None:
        """Reads the prober's upgrade request; the 101 reply that accepts it with the ``mqtt`` subprotocol (not sent
        yet: a mode may send more in the same write), or None when the prober went first."""
        request = b""
        while b"\r\n\r\n" not in request:
            if self._over() or len(request) > 65536:
                return None
            try:
                data = connection.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return None
            request += data
        key = re.search(rb"(?im)^sec-websocket-key:[ \t]*(\S+)", request)
        if key is None:
            return None
        accept = base64.b64encode(hashlib.sha1(key.group(1) + WEBSOCKET_GUID).digest())
        return (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
        )

    def _ws_giant_frame(self, connection: socket.socket) -> None:
        """The 101 and a frame header declaring 2^63 bytes in one write, then 64 KiB chunks as fast as they go."""
        reply = self._websocket_upgrade(connection)
        if reply is not None:
            self._drain_in_background(connection)
            connection.sendall(reply + GIANT_FRAME_HEADER)
            chunk = bytes(65536)
            self._send_until_over(connection, lambda: chunk)

    def _ws_ping_flood(self, connection: socket.socket) -> None:
        """The 101, then Pings as fast as the socket takes them, reading nothing (and buffering little): no Pong,
        no MQTT."""
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reply = self._websocket_upgrade(connection)
        if reply is not None:
            connection.sendall(reply)
            self._send_until_over(connection, lambda: PINGS)

    def _ws_pinging(self, connection: socket.socket) -> None:
        """The 101, 1 MiB of Pings, a CONNACK in a binary frame, then Pings as fast as the socket takes them,
        reading nothing after the upgrade (and buffering little): a prober that answers every Ping fills its send
        buffer before the CONNACK comes, so when its case closes (a Close frame) its socket goes on reading, and it
        reads Pings after its Close."""
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reply = self._websocket_upgrade(connection)
        if reply is not None:
            connection.sendall(reply)
            self._send_until_over(connection, lambda: PINGS, limit=1 << 20)
            connection.sendall(bytes(SERVER_FRAMES.send_data(self.connack)))
            self._send_until_over(connection, lambda: PINGS)

    def _ws_early_connack(self, connection: socket.socket) -> None:
        """The 101 and ``connack`` in a binary frame in one write, before the prober has sent anything more."""
        reply = self._websocket_upgrade(connection)
        if reply is not None:
            connection.sendall(reply + bytes(SERVER_FRAMES.send_data(self.connack)))
            self._read_until_closed(connection)

    def _ws_huge_message(self, connection: socket.socket) -> None:
        """The 101, then one binary frame declaring 32 MiB, its bytes as fast as the socket takes them."""
        reply = self._websocket_upgrade(connection)
        if reply is not None:
            self._drain_in_background(connection)
            connection.sendall(reply + b"\x82\x7f" + (32 << 20).to_bytes(8, "big"))
            chunk = bytes(65536)
            self._send_until_over(connection, lambda: chunk, limit=32 << 20)


def _scripted_answer(packet: Packet | None, version: ProtocolVersion) -> Packet | None:
    """What the ``scripted_v5`` broker answers ``packet`` with (None: nothing)."""
    code = 0x00 if version is ProtocolVersion.V5 else None
    if isinstance(packet, Subscribe):
        return Suback(packet_id=packet.packet_id, return_codes=tuple(s.qos for s in packet.subscriptions))
    if isinstance(packet, Unsubscribe):
        codes = (0x00,) * len(packet.topic_filters) if version is ProtocolVersion.V5 else ()
        return Unsuback(packet_id=packet.packet_id, reason_codes=codes)
    if isinstance(packet, Publish) and packet.packet_id is not None and packet.qos in (1, 2):
        kind = Puback if packet.qos == 1 else Pubrec
        return kind(packet_id=packet.packet_id, reason_code=code)
    if isinstance(packet, Pubrel):
        return Pubcomp(packet_id=packet.packet_id, reason_code=code)
    if isinstance(packet, Pingreq):
        return Pingresp()
    return None


@contextlib.contextmanager
def servers_in_a_process(mode: str, connacks: Sequence[bytes], *, lifetime: float = 300.0) -> Iterator[list[str]]:
    """One ``mode`` server per CONNACK of ``connacks``, all in a Python process of their own (their threads then
    never take the interpreter lock from the prober under test); yields their URLs, in order, and stops them on
    exit. Each is bounded as :class:`HostileServer` is, and the process ends with the ``with`` block."""
    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "tests.hostile_server", mode, str(lifetime), *(c.hex() for c in connacks)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(root / "src"), str(root)))}
    child = subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        urls = [child.stdout.readline().strip() for _ in connacks]
        if not all(urls):
            raise RuntimeError(f"the servers' process ended before it listened (status {child.poll()})")
        yield urls
    finally:
        if child.stdin is not None:
            child.stdin.close()  # the child stops its servers when its stdin closes
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _serve_until_stdin_closes(mode: str, lifetime: float, connacks: Sequence[str]) -> None:
    """``python -m tests.hostile_server MODE LIFETIME CONNACK_HEX...``: the servers' URLs on stdout, one a line."""
    with contextlib.ExitStack() as servers:
        for connack in connacks:
            server = servers.enter_context(HostileServer(mode, lifetime=lifetime, connack=bytes.fromhex(connack)))
            print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    _serve_until_stdin_closes(sys.argv[1], float(sys.argv[2]), sys.argv[3:])
