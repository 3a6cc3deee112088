"""Real TLS sessions without a network: Python's ``ssl`` (OpenSSL) on both ends, joined by memory BIOs, with the
client writing a key log. What each side wrote (its record stream) is kept, for the TLS layer to decrypt.

Python 3.11 cannot choose the TLS 1.3 cipher suites of a context (``SSLContext.set_ciphersuites`` is missing);
OpenSSL reads them from its configuration file, so a session with a chosen TLS 1.3 suite is made in a child
process started with ``OPENSSL_CONF`` naming a file that sets ``Ciphersuites``
(``python -m tests.tls_sessions SUITE`` prints the session as JSON).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trustme

HOSTNAME = "broker.test"
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


@dataclass(frozen=True)
class Session:
    """A TLS session: each side's record stream, the key log the client wrote, what each side's application wrote
    and what the other side's application read, and the version and suite OpenSSL reports."""

    client_stream: bytes
    server_stream: bytes
    keylog: str
    client_wrote: bytes
    server_wrote: bytes
    server_read: bytes
    client_read: bytes
    version: str
    cipher: str

    def to_json(self) -> str:
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return json.dumps({k: v.hex() if isinstance(v, bytes) else v for k, v in fields.items()})

    @classmethod
    def from_json(cls, text: str) -> Session:
        raw = json.loads(text)
        return cls(**{k: v if k in ("keylog", "version", "cipher") else bytes.fromhex(v) for k, v in raw.items()})


@functools.cache
def certificates() -> tuple[trustme.CA, trustme.LeafCert]:
    """A CA and the broker's certificate, RSA, so that the ECDHE-RSA TLS 1.2 suites can be chosen."""
    ca = trustme.CA(key_type=trustme.KeyType.RSA)
    return ca, ca.issue_cert(HOSTNAME, key_type=trustme.KeyType.RSA)


def session(
    client_writes: Sequence[bytes],
    server_writes: Sequence[bytes],
    *,
    maximum: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3,
    ciphers: str | None = None,
    close: bool = True,
) -> Session:
    """Runs one session in memory: handshake, then each client write answered by the server's write at the same
    index (when there is one), then close_notify from both sides when ``close``."""
    ca, leaf = certificates()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    leaf.configure_cert(server_context)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(client_context)
    client_context.maximum_version = maximum
    if ciphers is not None:
        client_context.set_ciphers(ciphers)
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "keys.log"
        client_context.keylog_filename = str(log)
        to_server, from_client, to_client, from_server = (ssl.MemoryBIO() for _ in range(4))
        client = client_context.wrap_bio(to_client, from_client, server_hostname=HOSTNAME)
        server = server_context.wrap_bio(to_server, from_server, server_side=True)
        streams = (bytearray(), bytearray())

        def carry() -> None:
            sent = from_client.read()
            streams[0].extend(sent)
            to_server.write(sent)
            answered = from_server.read()
            streams[1].extend(answered)
            to_client.write(answered)

        for _ in range(6):
            for end in (client, server):
                with contextlib.suppress(ssl.SSLWantReadError):
                    end.do_handshake()
            carry()
        server_read, client_read = bytearray(), bytearray()
        for index, data in enumerate(client_writes):
            client.write(data)
            carry()
            server_read += _read_all(server)
            if index < len(server_writes):
                server.write(server_writes[index])
                carry()
                client_read += _read_all(client)
        for data in server_writes[len(client_writes) :]:
            server.write(data)
            carry()
            client_read += _read_all(client)
        if close:
            for end in (client, server):
                with contextlib.suppress(ssl.SSLWantReadError):
                    end.unwrap()
                carry()
        version, cipher = client.version() or "", (client.cipher() or ("",))[0]
        keylog = log.read_text()
    return Session(
        bytes(streams[0]),
        bytes(streams[1]),
        keylog,
        b"".join(client_writes),
        b"".join(server_writes),
        bytes(server_read),
        bytes(client_read),
        version,
        cipher,
    )


def _read_all(end: ssl.SSLObject) -> bytes:
    data = bytearray()
    while True:
        try:
            chunk = end.read(65536)
        except ssl.SSLWantReadError:
            return bytes(data)
        if not chunk:
            return bytes(data)
        data += chunk


def tls13_session(suite: str, client_writes: Sequence[bytes], server_writes: Sequence[bytes]) -> Session:
    """A TLS 1.3 session with ``suite``, made in a child process whose OpenSSL configuration allows that suite
    only."""
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "openssl.cnf"
        config.write_text(
            "openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n[ssl_sect]\n"
            "system_default = system_default_sect\n[system_default_sect]\n"
            f"Ciphersuites = {suite}\n"
        )
        request = json.dumps({"client": [d.hex() for d in client_writes], "server": [d.hex() for d in server_writes]})
        done = subprocess.run(
            [sys.executable, "-m", "tests.tls_sessions", request],
            env={**os.environ, "OPENSSL_CONF": str(config)},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
    return Session.from_json(done.stdout)


def main(argv: Sequence[str]) -> None:
    request = json.loads(argv[0])
    made = session([bytes.fromhex(d) for d in request["client"]], [bytes.fromhex(d) for d in request["server"]])
    print(made.to_json())


if __name__ == "__main__":
    main(sys.argv[1:])
