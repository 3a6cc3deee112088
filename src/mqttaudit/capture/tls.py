"""TLS in captures: the records of a TLS 1.2 or 1.3 connection decrypted with the secrets of a key log, so that
the MQTT inside can be audited.

A *key log* is the text file, in the NSS format, that browsers, curl, OpenSSL (``SSLKEYLOGFILE``) and Python's
``ssl.SSLContext.keylog_filename`` write: one line per secret, ``LABEL CLIENT_RANDOM SECRET`` in hexadecimal.
:class:`KeyLog` reads it; the secrets never appear in its repr, in a note or in an exception.

:class:`TlsLayer` follows one connection's two record streams (RFC 5246 and RFC 8446): it reassembles records
across TCP segments, reads the ClientHello and ServerHello in the clear (client and server random, the version
and cipher suite chosen), derives each direction's keys (the TLS 1.2 PRF key block, or HKDF-Expand-Label from the
TLS 1.3 traffic secrets), and hands on the application data of each side, in order, as :class:`~.layers.Piece`s.
Every cipher and hash comes from the ``cryptography`` package (the ``tls`` extra), imported only when a
connection is decrypted: AES-GCM (RFC 5288), ChaCha20-Poly1305 (RFC 7905) and the three TLS 1.3 suites.

What cannot be followed stops the layer for that side, with a note that says why (rule None) and the bytes it
left undecrypted counted in :attr:`TlsLayer.lost`: no secrets for the session, a cipher suite without an AEAD
cipher (CBC, CCM), a record that fails its authentication tag, bytes that are no TLS record, a gap, more than
:data:`MAX_WAITING` bytes of records waiting for a ServerHello. Ciphertext is never handed on as MQTT. A session
whose client's stream stops that way before its first decrypted byte is *not decrypted*
(:attr:`TlsLayer.undecrypted`): its connection is not assessable, with the reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, NamedTuple

from ..extras import missing
from .layers import KeyLookup, LayerNote, Piece

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305


class TlsUnavailable(RuntimeError):
    """The ``cryptography`` package is missing: the key log cannot be used."""


def require_cryptography() -> None:
    """Raises :class:`TlsUnavailable` (with the install hint) when the ciphers are missing, so that a command
    given a key log fails before it reads any capture."""
    try:
        import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401
    except ImportError as error:
        raise TlsUnavailable(str(missing("tls", error))) from error


# -- key logs -----------------------------------------------------------------------------------------------------

#: TLS 1.2 (and earlier): the 48-byte master secret.
CLIENT_RANDOM: Final = "CLIENT_RANDOM"
CLIENT_HANDSHAKE: Final = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE: Final = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC: Final = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC: Final = "SERVER_TRAFFIC_SECRET_0"
#: The labels this layer uses, and the field of :class:`SessionSecrets` each fills.
_FIELDS: Final = {
    CLIENT_RANDOM: "master_secret",
    CLIENT_HANDSHAKE: "client_handshake",
    SERVER_HANDSHAKE: "server_handshake",
    CLIENT_TRAFFIC: "client_traffic",
    SERVER_TRAFFIC: "server_traffic",
}
#: The labels this layer uses.
USED_LABELS: Final = frozenset(_FIELDS)
_LABELS: Final = {name: label for label, name in _FIELDS.items()}
#: Labels of the format this layer has no use for (exporter and 0-RTT secrets, RSA pre-master secrets).
IGNORED_LABELS: Final = frozenset(
    {"EXPORTER_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET", "EARLY_EXPORTER_SECRET", "RSA", "PMS_CLIENT_RANDOM"}
)
_RANDOM_BYTES: Final = 32
_MASTER_SECRET_BYTES: Final = 48
#: TLS 1.3 secrets are as long as the suite's hash: SHA-256 or SHA-384.
_TRAFFIC_SECRET_BYTES: Final = frozenset({32, 48})


@dataclass(frozen=True, slots=True)
class SessionSecrets:
    """What a key log holds for one session (one client random). Its repr names the secrets present, never their
    values."""

    master_secret: bytes | None = field(default=None, repr=False)
    client_handshake: bytes | None = field(default=None, repr=False)
    server_handshake: bytes | None = field(default=None, repr=False)
    client_traffic: bytes | None = field(default=None, repr=False)
    server_traffic: bytes | None = field(default=None, repr=False)

    @property
    def present(self) -> tuple[str, ...]:
        """The labels of the secrets held."""
        return tuple(label for label, name in _FIELDS.items() if getattr(self, name) is not None)

    def __repr__(self) -> str:
        return f"SessionSecrets(present={self.present!r})"


class KeyLogProblem(NamedTuple):
    """A key log line that could not be used: its number (from 1) and why; never its secret."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class KeyLog:
    """The secrets of a key log, by client random. Picklable, so that it can be shipped to the workers; its repr
    counts sessions and never shows a secret."""

    sessions: dict[bytes, SessionSecrets] = field(default_factory=dict, repr=False)
    #: Lines of a known label that could not be used, and why.
    problems: tuple[KeyLogProblem, ...] = ()
    #: Lines read of the labels this layer uses.
    usable_lines: int = 0

    @classmethod
    def parse(cls, text: str) -> KeyLog:
        """Reads NSS key log text: comments (``#``), blank lines, unknown labels and the exporter and early
        secrets are skipped; a line of a used label that is malformed is a problem, reported by its number."""
        found: dict[bytes, dict[str, bytes]] = {}
        problems: list[KeyLogProblem] = []
        usable = 0
        for number, raw_line in enumerate(text.splitlines(), start=1):
            line = keylog_line(number, raw_line)
            if line is None:
                continue
            if isinstance(line, KeyLogProblem):
                problems.append(line)
                continue
            name, client_random, secret = line
            held = found.setdefault(client_random, {})
            if name in held and held[name] != secret:
                problems.append(KeyLogProblem(number, second_secret(name)))
                continue
            held[name] = secret
            usable += 1
        sessions = {client_random: SessionSecrets(**held) for client_random, held in found.items()}
        return cls(sessions, tuple(problems), usable)

    def secrets_for(self, client_random: bytes) -> SessionSecrets | None:
        return self.sessions.get(client_random)

    @property
    def client_randoms(self) -> frozenset[bytes]:
        """The client randoms of the sessions held (no secret): what proves a port by its ClientHello, cheap to ship
        to the tasks of a first pass."""
        return frozenset(self.sessions)

    def __contains__(self, client_random: object) -> bool:
        return client_random in self.sessions

    def __len__(self) -> int:
        return len(self.sessions)

    def __repr__(self) -> str:
        return f"KeyLog(sessions={len(self.sessions)}, problems={len(self.problems)})"


def keylog_line(number: int, raw_line: str) -> tuple[str, bytes, bytes] | KeyLogProblem | None:
    """Line ``number`` of a key log: (the secret's field in :class:`SessionSecrets`, the client random, the secret)
    for a usable line of a label used, its problem for a malformed one, None for any other line (a comment, a
    blank line, a label not used)."""
    line = raw_line.strip()
    if not line or line.startswith("#"):
        return None
    parts = line.split()
    label = parts[0]
    if label not in _FIELDS:
        return None
    if len(parts) != 3:
        return KeyLogProblem(number, f"{label}: expected 3 fields, found {len(parts)}")
    random_hex, secret_hex = parts[1], parts[2]
    client_random = _hex(random_hex)
    if client_random is None or len(client_random) != _RANDOM_BYTES:
        return KeyLogProblem(number, f"{label}: the client random is not {2 * _RANDOM_BYTES} hex digits")
    secret = _hex(secret_hex)
    if secret is None:
        return KeyLogProblem(number, f"{label}: the secret is not hexadecimal")
    expected = {_MASTER_SECRET_BYTES} if label == CLIENT_RANDOM else _TRAFFIC_SECRET_BYTES
    if len(secret) not in expected:
        sizes = " or ".join(str(size) for size in sorted(expected))
        return KeyLogProblem(number, f"{label}: the secret is {len(secret)} bytes, not {sizes}")
    return _FIELDS[label], client_random, secret


def second_secret(name: str) -> str:
    """Why a line that gives a session's secret ``name`` again, with another value, is not used."""
    return f"{_LABELS[name]}: a second, different secret for one client random"


def _hex(text: str) -> bytes | None:
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


# -- records and hellos -------------------------------------------------------------------------------------------

CHANGE_CIPHER_SPEC: Final = 20
ALERT: Final = 21
HANDSHAKE: Final = 22
APPLICATION_DATA: Final = 23
_RECORD_TYPES: Final = frozenset({CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA})
_HEADER: Final = 5
#: The longest record: 2**14 bytes of plaintext plus the expansion TLS 1.2 allows (RFC 5246 6.2.3).
MAX_RECORD: Final = (1 << 14) + 2048
#: Bytes of one side's records held at most while they wait for the ServerHello (the session's version and suite):
#: a client sends its ClientHello and waits, so a real session holds a few records here. At the cap the side
#: stops, named ("no ServerHello within N bytes"), and the rest of it is counted, never kept.
MAX_WAITING: Final = 1 << 20

#: Why a session the key log names could not be decrypted at all (its client's stream stopped before its first
#: decrypted byte), by class: the version label of its connection (the reports group connections by it), and the
#: sentence the reports print for it. The stop itself, with its byte offset, is in the layer's notes.
TAG_MISMATCH: Final = "not decrypted: authentication tag mismatch"
NO_SERVER_HELLO: Final = "not decrypted: no ServerHello"
NOT_DECRYPTED: Final = "not decrypted"
NOT_DECRYPTED_REASONS: Final = {
    TAG_MISMATCH: "a TLS session of the key log, not decrypted: a record's authentication tag does not match "
    "(a wrong secret in the key log, or a corrupted record): not assessable",
    NO_SERVER_HELLO: "a TLS session of the key log, not decrypted: no ServerHello was captured "
    f"(the client's records wait for it, {MAX_WAITING:,} bytes at most): not assessable",
    NOT_DECRYPTED: "a TLS session of the key log, not decrypted: the TLS layer stopped before the first decrypted "
    "byte (the gaps table says where and why): not assessable",
}

CLIENT_HELLO: Final = 1
SERVER_HELLO: Final = 2
NEW_SESSION_TICKET: Final = 4
FINISHED: Final = 20
KEY_UPDATE: Final = 24
_SUPPORTED_VERSIONS: Final = 43
TLS12: Final = 0x0303
TLS13: Final = 0x0304
#: The random of a ServerHello that is a HelloRetryRequest (RFC 8446 4.1.3): SHA-256 of "HelloRetryRequest".
HELLO_RETRY_RANDOM: Final = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

_VERSION_NAMES: Final = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", TLS12: "TLS 1.2", TLS13: "TLS 1.3"}
_ALERTS: Final = {
    0: "close_notify",
    10: "unexpected_message",
    20: "bad_record_mac",
    22: "record_overflow",
    40: "handshake_failure",
    42: "bad_certificate",
    43: "unsupported_certificate",
    44: "certificate_revoked",
    45: "certificate_expired",
    46: "certificate_unknown",
    47: "illegal_parameter",
    48: "unknown_ca",
    49: "access_denied",
    50: "decode_error",
    51: "decrypt_error",
    70: "protocol_version",
    71: "insufficient_security",
    80: "internal_error",
    86: "inappropriate_fallback",
    90: "user_canceled",
    109: "missing_extension",
    110: "unsupported_extension",
    112: "unrecognized_name",
    116: "certificate_required",
    120: "no_application_protocol",
}


def version_name(version: int) -> str:
    return _VERSION_NAMES.get(version, f"version 0x{version:04x}")


def starts_tls(data: bytes) -> bool:
    """Whether a stream's first bytes are those of a TLS handshake record (a ClientHello's): 0x16 0x03 0x0N."""
    return len(data) >= 3 and data[0] == HANDSHAKE and data[1] == 3 and data[2] <= 4


def hello_client_random(data: bytes) -> bytes | None:
    """The client random of the ClientHello a client's stream starts with, once ``data`` holds the first record's
    first 43 bytes; None before (or when the stream starts with something else)."""
    if not starts_tls(data) or len(data) < _HEADER + 4 + 2 + _RANDOM_BYTES or data[_HEADER] != CLIENT_HELLO:
        return None
    start = _HEADER + 4 + 2
    return bytes(data[start : start + _RANDOM_BYTES])


class Hello(NamedTuple):
    """What a ClientHello or ServerHello says in the clear: its random, the versions (offered, or the one
    chosen) and, for a ServerHello, the cipher suite chosen."""

    random: bytes
    versions: tuple[int, ...]
    cipher_suite: int | None


class _Reader:
    """Bounds-checked reading of a handshake message body; a short body raises ValueError."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if end > len(self.data):
            raise ValueError("the message ends early")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def number(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def vector(self, length_size: int) -> bytes:
        return self.take(self.number(length_size))

    @property
    def left(self) -> int:
        return len(self.data) - self.pos


def _extensions(reader: _Reader) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    if reader.left == 0:
        return found
    block = _Reader(reader.vector(2))
    while block.left:
        kind = block.number(2)
        found[kind] = block.vector(2)
    return found


def parse_client_hello(body: bytes) -> Hello:
    """A ClientHello's random and offered versions (its supported_versions extension, else its legacy version)."""
    reader = _Reader(body)
    legacy = reader.number(2)
    random = reader.take(_RANDOM_BYTES)
    reader.vector(1)  # session id
    reader.vector(2)  # cipher suites
    reader.vector(1)  # compression methods
    offered = _extensions(reader).get(_SUPPORTED_VERSIONS)
    if offered is None:
        return Hello(random, (legacy,), None)
    listed = _Reader(_Reader(offered).vector(1))
    versions = tuple(listed.number(2) for _ in range(listed.left // 2))
    return Hello(random, versions, None)


def parse_server_hello(body: bytes) -> Hello:
    """A ServerHello's random, chosen version (its supported_versions extension, else its legacy version) and
    chosen cipher suite."""
    reader = _Reader(body)
    legacy = reader.number(2)
    random = reader.take(_RANDOM_BYTES)
    reader.vector(1)  # session id
    suite = reader.number(2)
    reader.take(1)  # compression method
    chosen = _extensions(reader).get(_SUPPORTED_VERSIONS)
    version = legacy if chosen is None else _Reader(chosen).number(2)
    return Hello(random, (version,), suite)


# -- cipher suites and keys ---------------------------------------------------------------------------------------

AES_GCM: Final = "AES-GCM"
CHACHA20_POLY1305: Final = "ChaCha20-Poly1305"


class CipherSuite(NamedTuple):
    """An AEAD cipher suite: its cipher, key length and hash (the TLS 1.2 PRF's, or the TLS 1.3 HKDF's)."""

    name: str
    cipher: str
    key_length: int
    hash_name: str
    tls13: bool

    @property
    def hash_length(self) -> int:
        return 48 if self.hash_name == "sha384" else 32

    @property
    def fixed_iv_length(self) -> int:
        """The IV the key block holds for TLS 1.2: the 4-byte GCM salt, or ChaCha20-Poly1305's 12 bytes."""
        return 4 if self.cipher == AES_GCM and not self.tls13 else 12


def _suites() -> dict[int, CipherSuite]:
    table: dict[int, CipherSuite] = {
        0x1301: CipherSuite("TLS_AES_128_GCM_SHA256", AES_GCM, 16, "sha256", True),
        0x1302: CipherSuite("TLS_AES_256_GCM_SHA384", AES_GCM, 32, "sha384", True),
        0x1303: CipherSuite("TLS_CHACHA20_POLY1305_SHA256", CHACHA20_POLY1305, 32, "sha256", True),
    }
    # TLS 1.2: only the record cipher matters (the key log gives the master secret whatever the key exchange).
    gcm = {
        0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256",
        0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384",
        0x009E: "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
        0x009F: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
        0x00A8: "TLS_PSK_WITH_AES_128_GCM_SHA256",
        0x00A9: "TLS_PSK_WITH_AES_256_GCM_SHA384",
        0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    }
    for code, name in gcm.items():
        wide = name.endswith("SHA384")
        table[code] = CipherSuite(name, AES_GCM, 32 if wide else 16, "sha384" if wide else "sha256", False)
    chacha = {
        0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        0xCCAA: "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        0xCCAB: "TLS_PSK_WITH_CHACHA20_POLY1305_SHA256",
        0xCCAC: "TLS_ECDHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
        0xCCAD: "TLS_DHE_PSK_WITH_CHACHA20_POLY1305_SHA256",
    }
    for code, name in chacha.items():
        table[code] = CipherSuite(name, CHACHA20_POLY1305, 32, "sha256", False)
    return table


#: The cipher suites this layer decrypts, by their code.
CIPHER_SUITES: Final = _suites()


def tls12_prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_name: str) -> bytes:
    """The TLS 1.2 PRF (RFC 5246 section 5): P_hash over HMAC with the suite's hash."""
    from cryptography.hazmat.primitives import hashes, hmac

    algorithm: hashes.HashAlgorithm = hashes.SHA384() if hash_name == "sha384" else hashes.SHA256()

    def mac(data: bytes) -> bytes:
        signer = hmac.HMAC(secret, algorithm)
        signer.update(data)
        digest: bytes = signer.finalize()
        return digest

    seed = label + seed
    output = bytearray()
    a = seed
    while len(output) < length:
        a = mac(a)
        output += mac(a + seed)
    return bytes(output[:length])


def hkdf_expand_label(secret: bytes, label: bytes, context: bytes, length: int, hash_name: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 section 7.1)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    algorithm: hashes.HashAlgorithm = hashes.SHA384() if hash_name == "sha384" else hashes.SHA256()
    full = b"tls13 " + label
    info = struct.pack("!HB", length, len(full)) + full + struct.pack("!B", len(context)) + context
    derived: bytes = HKDFExpand(algorithm, length, info).derive(secret)
    return derived


TAG_DOES_NOT_MATCH: Final = "its authentication tag does not match"


class _Keys:
    """One direction's record protection: an AEAD, its IV and the next record's sequence number."""

    def __init__(self, suite: CipherSuite, key: bytes, iv: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

        self.suite = suite
        self.aead: AESGCM | ChaCha20Poly1305 = AESGCM(key) if suite.cipher == AES_GCM else ChaCha20Poly1305(key)
        self.iv = iv
        self.sequence = 0

    def __repr__(self) -> str:
        return f"_Keys({self.suite.name}, sequence={self.sequence})"

    def _nonce(self) -> bytes:
        padded = self.sequence.to_bytes(len(self.iv), "big")
        return bytes(a ^ b for a, b in zip(self.iv, padded, strict=True))

    def open12(self, kind: int, version: bytes, fragment: bytes) -> bytes:
        """A TLS 1.2 record's plaintext (RFC 5288: explicit nonce; RFC 7905: IV XOR sequence number)."""
        from cryptography.exceptions import InvalidTag

        if self.suite.cipher == AES_GCM:
            if len(fragment) < 8 + 16:
                raise ValueError("shorter than its nonce and tag")
            nonce, sealed = self.iv + fragment[:8], fragment[8:]
        else:
            if len(fragment) < 16:
                raise ValueError("shorter than its tag")
            nonce, sealed = self._nonce(), fragment
        aad = struct.pack("!QB2sH", self.sequence, kind, version, len(sealed) - 16)
        try:
            plain: bytes = self.aead.decrypt(nonce, sealed, aad)
        except InvalidTag as error:
            raise ValueError(TAG_DOES_NOT_MATCH) from error
        self.sequence += 1
        return plain

    def open13(self, header: bytes, fragment: bytes) -> bytes:
        """A TLS 1.3 record's inner plaintext (RFC 8446 5.2: IV XOR sequence number, the header as data)."""
        from cryptography.exceptions import InvalidTag

        if len(fragment) < 17:
            raise ValueError("shorter than its tag and content type")
        try:
            plain: bytes = self.aead.decrypt(self._nonce(), fragment, header)
        except InvalidTag as error:
            raise ValueError(TAG_DOES_NOT_MATCH) from error
        self.sequence += 1
        return plain


def _keys13(suite: CipherSuite, secret: bytes) -> _Keys:
    key = hkdf_expand_label(secret, b"key", b"", suite.key_length, suite.hash_name)
    iv = hkdf_expand_label(secret, b"iv", b"", 12, suite.hash_name)
    return _Keys(suite, key, iv)


# -- the layer ----------------------------------------------------------------------------------------------------

_HANDSHAKE_PHASE: Final = "handshake"
_APPLICATION_PHASE: Final = "application"


@dataclass(slots=True)
class _Side:
    """One direction's record stream."""

    buffer: bytearray = field(default_factory=bytearray)
    #: The TCP stream offset of the buffer's first byte.
    consumed: int = 0
    time: int = 0
    #: Why the layer stopped following this side; None while it follows.
    stopped: str | None = None
    #: A ChangeCipherSpec was seen: in TLS 1.2 every later record is encrypted.
    changed_cipher: bool = False
    keys: _Keys | None = None
    phase: str = _HANDSHAKE_PHASE
    #: The current TLS 1.3 application traffic secret (for a KeyUpdate).
    traffic_secret: bytes | None = None
    #: Handshake bytes not yet a whole message (plaintext, or decrypted).
    handshake: bytearray = field(default_factory=bytearray)
    #: After a Finished (TLS 1.3) or a KeyUpdate, this side's next record has new keys.
    rekey: bool = False
    finished: bool = False
    inner: int = 0
    lost: int = 0
    records: int = 0


class TlsLayer:
    """Decrypts one TCP connection's TLS records with a key log's secrets (see the module documentation).

    ``client`` is the side (0 or 1) that sent the ClientHello. Sides are fed in their own stream order; a side's
    encrypted records wait for the peer's ServerHello when they come first.
    """

    name = "tls"

    def __init__(self, keylog: KeyLookup, client: int) -> None:
        require_cryptography()
        self._keylog = keylog
        self.client = client
        self._sides = (_Side(), _Side())
        self._notes: list[LayerNote] = []
        self.client_random: bytes | None = None
        self.server_random: bytes | None = None
        #: The version and cipher suite the ServerHello chose, once read.
        self.version: int | None = None
        self.suite: CipherSuite | None = None
        self._secrets: SessionSecrets | None = None
        self._server_hello: Hello | None = None
        #: Why the client's side stopped, as a class of :data:`NOT_DECRYPTED_REASONS`, when that was a failure.
        self._failure: str | None = None

    @property
    def notes(self) -> list[LayerNote]:
        return self._notes

    @property
    def lost(self) -> tuple[int, int]:
        return (self._sides[0].lost, self._sides[1].lost)

    @property
    def undecrypted(self) -> str | None:
        """The class (a key of :data:`NOT_DECRYPTED_REASONS`) of the failure that stopped the client's side before
        its first decrypted byte; None when the client's side carried bytes, or did not stop by a failure."""
        return None if self._sides[self.client].inner else self._failure

    @property
    def description(self) -> str:
        """The session in a few words: version and cipher suite, as far as they are known."""
        if self.version is None:
            return "TLS (no ServerHello read)"
        suite = "" if self.suite is None else f", {self.suite.name}"
        return f"{version_name(self.version)}{suite}"

    def feed(self, side: int, data: bytes, time: int) -> list[Piece]:
        state = self._sides[side]
        state.time = time
        if state.stopped is not None:
            state.lost += len(data)
            return []
        state.buffer += data
        return self._pump(side)

    def gap(self, side: int, length: int, time: int) -> None:
        state = self._sides[side]
        state.time = time
        if state.stopped is None:
            self._stop(
                side,
                f"{length} bytes of the TLS stream were not captured: the records after them cannot be found",
                failure=NOT_DECRYPTED,
            )

    def end(self, side: int, time: int) -> list[Piece]:
        state = self._sides[side]
        state.time = time
        pieces = self._pump(side) if state.stopped is None else []
        if state.stopped is None and state.buffer:
            failure = NOT_DECRYPTED
            if self.version is None and self._waiting(side, state):
                why = "records that need the session's keys, and the ClientHello and ServerHello were not both read"
                failure = NO_SERVER_HELLO
            else:
                why = "a TLS record cut short by the end of the stream"
            self._stop(side, why, failure=failure)
        return pieces

    # -- records --------------------------------------------------------------------------------------------------

    def _waiting(self, side: int, state: _Side) -> bool:
        """Whether the next record of ``side`` needs the session (its version and suite) before it can be read."""
        if not state.buffer:
            return False
        return self.version is None and (state.buffer[0] == APPLICATION_DATA or state.changed_cipher)

    def _pump(self, side: int) -> list[Piece]:
        state = self._sides[side]
        pieces: list[Piece] = []
        while state.stopped is None and len(state.buffer) >= _HEADER:
            buffer = state.buffer
            kind, version, length = buffer[0], bytes(buffer[1:3]), int.from_bytes(buffer[3:5], "big")
            if kind not in _RECORD_TYPES or buffer[1] != 3 or length > MAX_RECORD:
                self._stop(
                    side,
                    f"no TLS record at byte {state.consumed} of the stream",
                    raw=bytes(buffer[:_HEADER]),
                    failure=NOT_DECRYPTED,
                )
                break
            if self._waiting(side, state):
                if len(buffer) > MAX_WAITING:  # the cap on what waits: the rest of the side is counted, not kept
                    why = f"no ServerHello within {MAX_WAITING:,} bytes of this side's records, which wait for it"
                    self._stop(side, why, failure=NO_SERVER_HELLO)
                break
            if len(buffer) < _HEADER + length:
                break
            header, fragment = bytes(buffer[:_HEADER]), bytes(buffer[_HEADER : _HEADER + length])
            at = state.consumed
            del buffer[: _HEADER + length]
            state.consumed += _HEADER + length
            state.records += 1
            try:
                self._record(side, state, kind, version, header, fragment, pieces)
            except _Stopped:
                break
            except _Stop as stop:
                state.lost += _HEADER + length
                self._stop(side, f"the record at byte {at} of the stream: {stop}", raw=header, failure=stop.failure)
        return pieces

    def _record(
        self, side: int, state: _Side, kind: int, version: bytes, header: bytes, fragment: bytes, pieces: list[Piece]
    ) -> None:
        if self.version == TLS13:
            if kind == CHANGE_CIPHER_SPEC:  # the middlebox-compatibility record: no key change in TLS 1.3
                return
            encrypted = kind == APPLICATION_DATA
        else:  # TLS 1.2, or a record before the ServerHello (never one that needs keys: those wait)
            encrypted = state.changed_cipher
        if not encrypted:
            self._clear_record(side, state, kind, fragment)
            return
        keys = self._keys_for(side, state)
        try:
            if self.version == TLS13:
                inner = keys.open13(header, fragment)
                stripped = inner.rstrip(b"\x00")
                if not stripped:
                    raise _Stop("its decrypted content has no content type")
                content, plain = stripped[-1], stripped[:-1]
            else:
                content, plain = kind, keys.open12(kind, version, fragment)
        except ValueError as error:
            failure = TAG_MISMATCH if str(error) == TAG_DOES_NOT_MATCH else NOT_DECRYPTED
            raise _Stop(f"does not decrypt ({error}): a wrong key log, or a corrupted record", failure) from error
        self._content(side, state, content, plain, pieces)
        if state.rekey:
            state.rekey = False
            self._next_keys(side, state)

    def _clear_record(self, side: int, state: _Side, kind: int, fragment: bytes) -> None:
        if kind == HANDSHAKE:
            state.handshake += fragment
            self._handshake_messages(side, state, encrypted=False)
        elif kind == CHANGE_CIPHER_SPEC:
            state.changed_cipher = True
        elif kind == ALERT:
            self._alert(side, state, fragment)
        else:
            raise _Stop("application data before the handshake set the keys")

    def _content(self, side: int, state: _Side, content: int, plain: bytes, pieces: list[Piece]) -> None:
        if content == APPLICATION_DATA:
            if self.version == TLS13 and state.phase != _APPLICATION_PHASE:
                raise _Stop("application data under the handshake keys")
            if plain:
                pieces.append(Piece(state.inner, plain, state.time))
                state.inner += len(plain)
        elif content == HANDSHAKE:
            state.handshake += plain
            self._handshake_messages(side, state, encrypted=True)
        elif content == ALERT:
            self._alert(side, state, plain)
        else:
            raise _Stop(f"a record of content type {content} inside the encryption")

    def _handshake_messages(self, side: int, state: _Side, *, encrypted: bool) -> None:
        buffer = state.handshake
        while len(buffer) >= 4:
            length = int.from_bytes(buffer[1:4], "big")
            if len(buffer) < 4 + length:
                return
            kind = buffer[0]
            body = bytes(buffer[4 : 4 + length])
            del buffer[: 4 + length]
            if encrypted:
                self._encrypted_message(state, kind)
            else:
                self._clear_message(side, kind, body)

    def _clear_message(self, side: int, kind: int, body: bytes) -> None:
        try:
            if kind == CLIENT_HELLO and side == self.client:
                hello = parse_client_hello(body)
                if self.client_random is None:
                    self.client_random = hello.random
            elif kind == SERVER_HELLO and side != self.client:
                hello = parse_server_hello(body)
                if hello.random != HELLO_RETRY_RANDOM:
                    self._server_hello = hello
            else:
                return
        except ValueError as error:
            raise _Stop(f"a hello that cannot be read: {error}") from error
        # The peer's stream may be fed behind this one (a hole in it): the session is known once both are read.
        if self._server_hello is not None and self.client_random is not None and self.version is None:
            self._session(self._server_hello)

    def _session(self, hello: Hello) -> None:
        """Both hellos are read: the session's version, suite and secrets, or why it cannot be followed."""
        self.server_random = hello.random
        version = hello.versions[0]
        self.version = version
        suite = None if hello.cipher_suite is None else CIPHER_SUITES.get(hello.cipher_suite)
        self.suite = suite
        reason = None
        if version not in (TLS12, TLS13):
            reason = f"{version_name(version)} is not decrypted (TLS 1.2 and 1.3 are)"
        elif suite is None or suite.tls13 != (version == TLS13):
            code = hello.cipher_suite or 0
            reason = f"cipher suite 0x{code:04x} is not decrypted (AES-GCM and ChaCha20-Poly1305 suites are)"
        else:
            assert self.client_random is not None
            found = self._keylog.secrets_for(self.client_random)
            secrets = found if isinstance(found, SessionSecrets) else None
            needed: tuple[str, ...] = (CLIENT_HANDSHAKE, SERVER_HANDSHAKE, CLIENT_TRAFFIC, SERVER_TRAFFIC)
            if version == TLS12:
                needed = (CLIENT_RANDOM,)
            missing = [label for label in needed if secrets is None or label not in secrets.present]
            if missing:
                reason = f"the key log has no {', '.join(missing)} for client random {self.client_random.hex()}"
            else:
                self._secrets = secrets
        if reason is not None:
            for each in (self.client, 1 - self.client):
                if self._sides[each].stopped is None:
                    self._stop(each, reason, failure=NOT_DECRYPTED)
            raise _Stopped

    def _encrypted_message(self, state: _Side, kind: int) -> None:
        """A handshake message under encryption. TLS 1.3: a side's Finished moves it to its application keys, a
        KeyUpdate to the next ones, after the record that holds it (RFC 8446 4.6.3, 5.1); the other messages
        (certificates, tickets, post-handshake authentication) change nothing here. TLS 1.2: the Finished only;
        anything else is a renegotiation, which is not followed."""
        if self.version == TLS13:
            if (kind == FINISHED and state.phase == _HANDSHAKE_PHASE) or (
                kind == KEY_UPDATE and state.phase == _APPLICATION_PHASE
            ):
                state.rekey = True
                if state.handshake:
                    raise _Stop("a handshake message spans a key change")
        elif kind == FINISHED and not state.finished:
            state.finished = True
        else:
            raise _Stop(f"a handshake message of type {kind} after the Finished (renegotiation is not followed)")

    def _keys_for(self, side: int, state: _Side) -> _Keys:
        keys = state.keys
        if keys is not None:
            return keys
        suite, secrets = self.suite, self._secrets
        assert suite is not None and secrets is not None
        from_client = side == self.client
        if self.version == TLS13:
            secret = secrets.client_handshake if from_client else secrets.server_handshake
            assert secret is not None
            keys = _keys13(suite, secret)
        else:
            assert secrets.master_secret is not None and self.client_random and self.server_random
            key_length, iv_length = suite.key_length, suite.fixed_iv_length
            block = tls12_prf(
                secrets.master_secret,
                b"key expansion",
                self.server_random + self.client_random,
                2 * (key_length + iv_length),
                suite.hash_name,
            )
            keys_at = 0 if from_client else key_length
            ivs_at = 2 * key_length + (0 if from_client else iv_length)
            keys = _Keys(suite, block[keys_at : keys_at + key_length], block[ivs_at : ivs_at + iv_length])
        state.keys = keys
        return keys

    def _next_keys(self, side: int, state: _Side) -> None:
        """TLS 1.3: after a side's Finished, its application traffic keys; after a KeyUpdate, the next ones."""
        suite, secrets = self.suite, self._secrets
        assert suite is not None and secrets is not None
        if state.phase == _HANDSHAKE_PHASE:
            state.phase = _APPLICATION_PHASE
            secret = secrets.client_traffic if side == self.client else secrets.server_traffic
            assert secret is not None
        else:
            assert state.traffic_secret is not None
            secret = hkdf_expand_label(state.traffic_secret, b"traffic upd", b"", suite.hash_length, suite.hash_name)
        state.traffic_secret = secret
        state.keys = _keys13(suite, secret)

    def _alert(self, side: int, state: _Side, body: bytes) -> None:
        if len(body) != 2:
            raise _Stop(f"an alert of {len(body)} bytes (an alert has 2)")
        level, description = body
        name = _ALERTS.get(description, f"alert {description}")
        if description == 0:
            self._stop(side, "close_notify: the sender's TLS stream ends here")
        elif level == 2:
            self._stop(side, f"fatal alert {name}: the sender's TLS stream ends here", raw=body)
        else:
            self._notes.append(LayerNote(side, state.time, None, f"TLS warning alert {name}", body))

    def _stop(self, side: int, why: str, raw: bytes = b"", *, failure: str | None = None) -> None:
        """Stops following ``side``; ``failure``: the stop is a failure of that class (:data:`NOT_DECRYPTED_REASONS`),
        not the end of the sender's stream (close_notify, a fatal alert)."""
        state = self._sides[side]
        if state.stopped is not None:
            return
        if side == self.client and failure is not None and self._failure is None:
            self._failure = failure
        state.stopped = why
        left = len(state.buffer)
        state.lost += left
        state.buffer.clear()
        text = why if not left else f"{why}; {left} bytes after it not decrypted"
        self._notes.append(LayerNote(side, state.time, None, text, raw))


class _Stop(Exception):
    """The record being read stops the layer for its side; the message says why, ``failure`` its class."""

    def __init__(self, why: str = "", failure: str = NOT_DECRYPTED) -> None:
        super().__init__(why)
        self.failure = failure


class _Stopped(_Stop):
    """The layer has already stopped (and said why)."""
