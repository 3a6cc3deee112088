"""Recognising MQTT on any TCP port, as heuristic dissectors do: a TCP stream is MQTT when it starts with a
well-formed CONNECT, and a server port is *proven* once one stream to it does.

The recogniser (:func:`connect_start`) looks at the first bytes of a stream only: first byte 0x10, a Remaining
Length of at most four bytes, then the protocol name "MQTT" with level 4 (3.1.1) or 5 (5.0), or "MQIsdp" with
level 3 (3.1), and a Remaining Length that holds at least the rest of the variable header.

Other starts prove a port too: on any port, an HTTP GET that asks for an Upgrade to WebSocket and offers the
``mqtt`` subprotocol (MQTT section 6; "mqttv3.1" was MQTT 3.1's); on the IANA MQTT-over-TLS port 8883, a TLS
handshake record (the ClientHello: the audit reports such a connection as encrypted when it has no keys); and, on
any port, a ClientHello whose client random is in the key log the audit was given (:func:`hello_start`): the
audit decrypts that connection and looks at what its client sends first (a session of a browser's key log that
carries no MQTT is reported as not MQTT, see :mod:`.layers`). Each proof has a name (:data:`PROOFS`), which the
summary shows per port.

The stream start is the initial sequence number plus one, known from a captured SYN or SYN-ACK, or the
acknowledgement number of a SYN-ACK for the SYN sender. :class:`StartScanner` looks at the segments of one chunk
of a capture: what it can decide in the chunk becomes a proven port; a handshake whose first data byte lies in
another chunk, and a CONNECT whose handshake does, are handed on (:class:`Loose`) for the caller to match
across chunks.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import Final, NamedTuple

from mqttaudit.codec.remaining_length import NEED_MORE, TOO_LONG, read_remaining_length

from .segments import ACK, SYN, Segment, format_endpoint

#: What :func:`connect_start` says of the first bytes of a stream.
NOT_CONNECT: Final = 0
IS_CONNECT: Final = 1
NEEDS_MORE: Final = 2

#: The longest prefix the recogniser reads: fixed header (5), protocol name (2 + 6), level (1).
PREFIX_BYTES: Final = 14
#: The IANA MQTT port, treated as MQTT without proof.
KNOWN_MQTT_PORTS: Final = frozenset({1883})
#: The IANA MQTT-over-TLS port: a stream to it that starts with a TLS handshake record proves it.
KNOWN_TLS_PORTS: Final = frozenset({8883})
#: The longest HTTP head of a WebSocket Upgrade request the recogniser reads.
UPGRADE_HEAD_BYTES: Final = 4096
#: The first bytes of a ClientHello that hold its client random: record header (5), handshake header (4), the
#: legacy version (2), the random (32).
HELLO_BYTES: Final = 43
RANDOM_BYTES: Final = 32

#: How a port was proven to carry MQTT, strongest first (a port proven several ways is named by the first).
BY_CONNECT: Final = "CONNECT at stream start"
BY_UPGRADE: Final = "WebSocket Upgrade offering mqtt at stream start"
BY_KEYLOG: Final = "TLS session in the key log"
BY_TLS_PORT: Final = "TLS ClientHello on the MQTT-over-TLS port"
PROOFS: Final = (BY_CONNECT, BY_UPGRADE, BY_KEYLOG, BY_TLS_PORT)

_CONNECT: Final = 0x10
_GET: Final = b"GET "
_G: Final = _GET[0]
_TLS_HANDSHAKE: Final = 0x16
_CLIENT_HELLO: Final = 1
_END_OF_HEAD: Final = b"\r\n\r\n"
#: The subprotocols of MQTT over WebSocket.
_MQTT_SUBPROTOCOLS: Final = frozenset({b"mqtt", b"mqttv3.1"})
_MQTT: Final = b"\x00\x04MQTT"
_MQISDP: Final = b"\x00\x06MQIsdp"
_MASK: Final = 0xFFFFFFFF


def connect_start(data: bytes) -> int:
    """:data:`IS_CONNECT` when ``data`` starts with a well-formed CONNECT's first bytes (see the module
    documentation), :data:`NOT_CONNECT` when it cannot, :data:`NEEDS_MORE` when it is a prefix too short to
    decide."""
    size = len(data)
    if size == 0:
        return NEEDS_MORE
    if data[0] != _CONNECT:
        return NOT_CONNECT
    remaining, pos = read_remaining_length(data, 1, size)
    if pos == TOO_LONG:
        return NOT_CONNECT
    if pos == NEED_MORE:
        return NEEDS_MORE
    for name, level in ((_MQTT, 4), (_MQISDP, 3)):
        seen = data[pos : pos + len(name)]
        if seen != name[: len(seen)]:
            continue
        if len(seen) < len(name) or size <= pos + len(name):
            return NEEDS_MORE
        found = data[pos + len(name)]
        if found != level and not (level == 4 and found == 5):
            return NOT_CONNECT
        # The protocol name and level, then Connect Flags and Keep Alive must fit in the Remaining Length.
        return IS_CONNECT if remaining >= len(name) + 4 else NOT_CONNECT
    return NOT_CONNECT


def upgrade_start(data: bytes) -> int:
    """:data:`IS_CONNECT` when ``data`` starts with an HTTP GET head that asks for an Upgrade to WebSocket and
    offers an MQTT subprotocol, :data:`NOT_CONNECT` when it cannot, :data:`NEEDS_MORE` while the head is not whole
    (up to :data:`UPGRADE_HEAD_BYTES`)."""
    if data[: len(_GET)] != _GET[: len(data)]:
        return NOT_CONNECT
    end = data.find(_END_OF_HEAD, 0, UPGRADE_HEAD_BYTES)
    if end < 0:
        return NEEDS_MORE if len(data) < UPGRADE_HEAD_BYTES else NOT_CONNECT
    upgrade = False
    offered: set[bytes] = set()
    for line in data[:end].split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        name = name.strip().lower()
        tokens = {token.strip() for token in value.split(b",")}
        if name == b"upgrade":
            upgrade = upgrade or any(token.lower() == b"websocket" for token in tokens)
        elif name == b"sec-websocket-protocol":
            offered |= tokens
    return IS_CONNECT if upgrade and offered & _MQTT_SUBPROTOCOLS else NOT_CONNECT


def tls_start(data: bytes) -> int:
    """:data:`IS_CONNECT` when ``data`` starts with a TLS handshake record of version 3.x (a ClientHello)."""
    if len(data) < 2:
        return NEEDS_MORE if data[:1] in (b"", bytes([_TLS_HANDSHAKE])) else NOT_CONNECT
    return IS_CONNECT if data[0] == _TLS_HANDSHAKE and data[1] == 3 else NOT_CONNECT


def hello_start(data: bytes, randoms: Container[bytes]) -> int:
    """:data:`IS_CONNECT` when ``data`` starts with a TLS handshake record holding a ClientHello whose client random
    is one of ``randoms`` (the sessions of a key log), :data:`NOT_CONNECT` when it cannot, :data:`NEEDS_MORE` while
    the random is not whole."""
    verdict = tls_start(data)
    if verdict != IS_CONNECT:
        return verdict
    if len(data) > 5 and data[5] != _CLIENT_HELLO:
        return NOT_CONNECT
    if len(data) < HELLO_BYTES:
        return NEEDS_MORE
    return IS_CONNECT if bytes(data[HELLO_BYTES - RANDOM_BYTES : HELLO_BYTES]) in randoms else NOT_CONNECT


def mqtt_start(data: bytes) -> int:
    """What the first bytes of a stream say: an MQTT CONNECT (:func:`connect_start`), an Upgrade to MQTT over
    WebSocket (:func:`upgrade_start`) or a TLS ClientHello (:func:`tls_start`: only a caller that knows the stream
    goes to a TLS port asks)."""
    if not data:
        return NEEDS_MORE
    first = data[0]
    if first == _CONNECT:
        return connect_start(data)
    if first == _G:
        return upgrade_start(data)
    if first == _TLS_HANDSHAKE:
        return tls_start(data)
    return NOT_CONNECT


def _prefix_bytes(first: int) -> int:
    """How many first bytes of a stream the scanner reads, by its first byte."""
    if first == _G:
        return UPGRADE_HEAD_BYTES
    return HELLO_BYTES if first == _TLS_HANDSHAKE else PREFIX_BYTES


def start_proof(data: bytes, port: int, randoms: Container[bytes]) -> tuple[int, str]:
    """What the first bytes of a stream to server ``port`` say (:data:`IS_CONNECT`, :data:`NOT_CONNECT`,
    :data:`NEEDS_MORE`), and the name of the proof (one of :data:`PROOFS`) when they prove the port."""
    first = data[0] if data else -1
    if first == _TLS_HANDSHAKE:
        if port in KNOWN_TLS_PORTS:
            return tls_start(data), BY_TLS_PORT
        return hello_start(data, randoms), BY_KEYLOG
    return mqtt_start(data), BY_UPGRADE if first == _G else BY_CONNECT


#: The MQTT version each (protocol name, Protocol Level) of a CONNECT names.
VERSIONS: Final = {(_MQTT, 4): "3.1.1", (_MQTT, 5): "5.0", (_MQISDP, 3): "3.1"}
#: The version of a connection whose CONNECT was not seen.
UNKNOWN_VERSION: Final = "unknown"


def connect_version(raw: bytes) -> str | None:
    """The MQTT version a whole CONNECT packet's bytes name ("3.1.1", "5.0", "3.1"; "other" for another protocol
    name or level), or None when ``raw`` is no CONNECT."""
    size = len(raw)
    if size < 2 or raw[0] != _CONNECT:
        return None
    _remaining, pos = read_remaining_length(raw, 1, size)
    if pos < 0 or pos + 2 > size:
        return None
    end = pos + 2 + int.from_bytes(raw[pos : pos + 2], "big")
    if end >= size:
        return None
    return VERSIONS.get((raw[pos:end], raw[end]), "other")


#: One direction of a flow: (source address, source port, destination address, destination port).
DirectionKey = tuple[bytes, int, bytes, int]


class Loose(NamedTuple):
    """What one chunk could not decide alone: a stream start (``kind`` "start") whose first data byte was not in
    the chunk, or a CONNECT (``kind`` "connect", or another proving start: ``how`` names it) not at a stream start
    known in the chunk; ``direction`` names the sender and receiver (``10.0.0.1:50000>10.0.0.2:1883``), ``port``
    is the receiver's port."""

    kind: str
    direction: str
    seq: int
    port: int
    how: str | None = None


def direction_name(key: DirectionKey) -> str:
    return f"{format_endpoint(key[0], key[1])}>{format_endpoint(key[2], key[3])}"


class StartScanner:
    """Looks for streams that start with a CONNECT, an Upgrade to MQTT over WebSocket, a TLS ClientHello to a port
    of :data:`KNOWN_TLS_PORTS`, or a ClientHello whose client random is one of ``tls_randoms`` (the sessions of
    the audit's key log, to any port), among the TCP segments of one chunk (fed in capture order).

    Per segment it costs a flag test and a byte test, and a dictionary look-up only while a handshake awaits its
    first data byte or a start's first bytes are split across segments. A ClientHello's random is read from its
    first 43 bytes; when they are split across segments, the next segment of the stream completes them only if it
    comes in the same chunk: a ClientHello whose random lies beyond a chunk's end proves nothing."""

    #: CONNECT candidates kept per chunk at most (a stream carries one; more are handed on unchecked).
    MAX_CANDIDATES: Final = 65536

    def __init__(self, tls_randoms: Container[bytes] = frozenset()) -> None:
        self._randoms = tls_randoms
        self._starts: dict[DirectionKey, set[int]] = {}  # stream starts known from a handshake
        self._awaiting: dict[DirectionKey, set[int]] = {}  # of those, the ones whose first byte was not seen yet
        self._split: dict[DirectionKey, tuple[int, bytes]] = {}  # a start's first bytes, still too short
        self._connects: list[tuple[DirectionKey, int, str]] = []

    def feed(self, segment: Segment) -> None:
        _time, src, src_port, dst, dst_port, seq, ack, flags, payload = segment
        if flags & SYN:
            key = (src, src_port, dst, dst_port)
            start = (seq + 1) & _MASK
            self._starts.setdefault(key, set()).add(start)
            self._awaiting.setdefault(key, set()).add(start)
            if flags & ACK:  # the SYN-ACK says where the SYN sender's stream starts
                peer = (dst, dst_port, src, src_port)
                self._starts.setdefault(peer, set()).add(ack & _MASK)
                self._awaiting.setdefault(peer, set()).add(ack & _MASK)
            if not payload:
                return
            seq += 1
        if not payload:
            return
        if self._awaiting or self._split:
            key = (src, src_port, dst, dst_port)
            awaiting = self._awaiting.get(key)
            if awaiting is not None:
                awaiting.discard(seq & _MASK)
                if not awaiting:
                    del self._awaiting[key]
            split = self._split.pop(key, None)
            if split is not None and (split[0] + len(split[1])) & _MASK == seq & _MASK:
                limit = _prefix_bytes(split[1][0])
                self._candidate(key, split[0], split[1] + payload[: limit - len(split[1])], limit)
                return
        first = payload[0]
        if first in (_CONNECT, _G) or (first == _TLS_HANDSHAKE and (self._randoms or dst_port in KNOWN_TLS_PORTS)):
            limit = _prefix_bytes(first)
            self._candidate((src, src_port, dst, dst_port), seq & _MASK, payload[:limit], limit)

    def _candidate(self, key: DirectionKey, seq: int, prefix: bytes, limit: int) -> None:
        verdict, how = start_proof(prefix, key[3], self._randoms)
        if verdict == IS_CONNECT and len(self._connects) < self.MAX_CANDIDATES:
            self._connects.append((key, seq, how))
        elif verdict == NEEDS_MORE and len(prefix) < limit:
            self._split[key] = (seq, prefix)

    def proofs(self) -> dict[int, str]:
        """The server ports on which a stream of this chunk started with a proving start, each with the name of
        its strongest proof (:data:`PROOFS`)."""
        found: dict[int, str] = {}
        for key, seq, how in self._connects:
            if seq in self._starts.get(key, ()):
                found[key[3]] = stronger(found.get(key[3]), how)
        return found

    def proven_ports(self) -> set[int]:
        """The server ports on which a stream of this chunk started with a proving start."""
        return set(self.proofs())

    def loose(self) -> list[Loose]:
        """What other chunks must decide: the stream starts whose first byte was not in this chunk, and the
        CONNECTs that are not at a stream start known here."""
        out = [
            Loose("start", direction_name(key), start, key[3])
            for key, starts in self._awaiting.items()
            for start in sorted(starts)
        ]
        out += [
            Loose("connect", direction_name(key), seq, key[3], how)
            for key, seq, how in self._connects
            if seq not in self._starts.get(key, ())
        ]
        return out


def stronger(known: str | None, how: str) -> str:
    """The stronger of two proofs of one port (the first in :data:`PROOFS`)."""
    if known is None:
        return how
    return known if PROOFS.index(known) <= PROOFS.index(how) else how


def proven_ports(segments: Iterable[Segment], tls_randoms: Container[bytes] = frozenset()) -> frozenset[int]:
    """The server ports proven to carry MQTT among ``segments`` (one whole capture, in memory)."""
    scanner = StartScanner(tls_randoms)
    for segment in segments:
        scanner.feed(segment)
    return frozenset(scanner.proven_ports())
