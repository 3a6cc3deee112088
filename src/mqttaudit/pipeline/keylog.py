"""The audit's key log as its tasks reach it: where the user's file is and a digest of its content, never a secret.

A task closure (and any broadcast) is pickled and may be written to Spark's local folders; the secrets of a key log
must not be. So what the tasks get is a :class:`KeyLogFile`, a few dozen bytes: each Python worker reads the file
itself, through the filesystem layer the captures use (:mod:`.sources`), once, checks it is the content the driver
read, and keeps the parsed secrets in its memory for the later tasks it runs (:func:`_loaded`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Final

from mqttaudit.capture.tls import KeyLog, SessionSecrets

from . import sources

#: Key logs parsed in this process, by digest: the latest only (an audit has one).
_LOADED: dict[str, KeyLog] = {}
_READ_BYTES: Final = 1 << 20


class KeyLogChanged(RuntimeError):
    """The key log file a task read is not the one the audit started with."""


def _digest_of(location: str) -> tuple[str, bytes]:
    digest = hashlib.blake2b(digest_size=32)
    content = bytearray()
    with sources.opener(location)() as file:
        while block := file.read(_READ_BYTES):
            digest.update(block)
            content += block
    return digest.hexdigest(), bytes(content)


@dataclass(frozen=True)
class KeyLogFile:
    """The key log at ``location`` (a path made absolute, or a URL) whose content has ``digest``: a
    :class:`~mqttaudit.capture.layers.KeyLookup` for the TLS layer and a set of client randoms for the port
    detection, loaded on first use in each process. Pickles as its location and digest only."""

    location: str
    digest: str

    @classmethod
    def at(cls, location: str) -> KeyLogFile:
        """The key log at ``location`` as it is now (read once, for its digest)."""
        located = location if sources.is_url(location) else os.path.abspath(location)
        digest, _content = _digest_of(located)
        return cls(located, digest)

    def secrets_for(self, client_random: bytes) -> SessionSecrets | None:
        return _loaded(self).secrets_for(client_random)

    def __contains__(self, client_random: object) -> bool:
        return client_random in _loaded(self)

    def __repr__(self) -> str:
        return f"KeyLogFile({self.location!r})"


def _loaded(keylog: KeyLogFile) -> KeyLog:
    """The parsed key log of this process, read when first asked for."""
    parsed = _LOADED.get(keylog.digest)
    if parsed is None:
        digest, content = _digest_of(keylog.location)
        if digest != keylog.digest:
            raise KeyLogChanged(f"the key log {keylog.location} changed while the audit ran")
        parsed = KeyLog.parse(content.decode("utf-8", errors="replace"))
        _LOADED.clear()
        _LOADED[digest] = parsed
    return parsed
