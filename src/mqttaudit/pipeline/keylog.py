"""The audit's key log as its tasks reach it: where the user's file is and a digest of its content, never a secret.

A task closure (and any broadcast) is pickled and may be written to Spark's local folders; the secrets of a key log
must not be. So what the tasks get is a :class:`KeyLogFile`, a few hundred bytes whatever the key log's size. Each
Python worker reads the file itself, through the filesystem layer the captures use (:mod:`.sources`), once: it
checks that the content is the one the driver read and keeps an index of it, the first 8 bytes of each line's
client random and where the line starts (16 bytes a line: 16 MB for a million lines, no secret). A session's
secrets are read from their lines when its ClientHello asks for them, and only those are kept.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from typing import Final

from mqttaudit.capture.tls import USED_LABELS, KeyLog, SessionSecrets

from . import sources

_READ_BYTES: Final = 1 << 20
#: A key log line is at most a label, 64 hex digits of client random and 96 of secret: what one read of a line takes.
_LINE_BYTES: Final = 1024
_PREFIX_DIGITS: Final = 16
#: A line of a label used: where it starts, and the first 16 hex digits of its client random (what a malformed
#: line holds beyond them, the driver's check named; a ClientHello that asks for it finds no secret).
_LINE: Final = re.compile(
    rb"^[ \t]*(?:" + b"|".join(sorted(label.encode() for label in USED_LABELS)) + rb")[ \t]+([0-9a-fA-F]{16})",
    re.MULTILINE,
)


class KeyLogChanged(RuntimeError):
    """The key log file a task read is not the one the audit started with."""


class _Index:
    """Where the lines of the labels used start in a key log, by the first 8 bytes of their client random
    (sorted), and the sessions looked up so far."""

    def __init__(self, location: str) -> None:
        self.location = location
        digest = hashlib.blake2b(digest_size=32)
        prefixes, starts = array("Q"), array("Q")
        offset, tail = 0, b""
        #: Inside a line longer than any key log line: its bytes are passed over up to its end, unread.
        skipping = False
        with sources.opener(location)() as file:
            while True:
                block = file.read(_READ_BYTES)
                digest.update(block)
                data = tail + block
                start = 0
                if skipping:
                    start = data.find(b"\n") + 1
                    skipping = start == 0
                    if skipping:
                        start = len(data)
                end = data.rfind(b"\n", start) + 1 if block else len(data)  # whole lines only, until the last
                end = max(end, start)
                for line in _LINE.finditer(data, start, end):
                    prefixes.append(int(line[1], 16))
                    starts.append(offset + line.start())
                offset, tail = offset + end, data[end:]
                if len(tail) > _LINE_BYTES:  # no key log line is this long: the rest of it is not kept
                    offset, tail, skipping = offset + len(tail), b"", True
                if not block:
                    break
        self.digest = digest.hexdigest()
        order = sorted(range(len(prefixes)), key=prefixes.__getitem__)
        self._prefixes = array("Q", (prefixes[i] for i in order))
        self._starts = array("Q", (starts[i] for i in order))
        self._found: dict[bytes, SessionSecrets] = {}

    def secrets_for(self, client_random: bytes) -> SessionSecrets | None:
        found = self._found.get(client_random)
        if found is None:
            found = self._read(client_random)
            if found is not None:  # only the sessions found are kept (a capture may hold any number of others)
                self._found[client_random] = found
        return found

    def _read(self, client_random: bytes) -> SessionSecrets | None:
        prefix = int.from_bytes(client_random[:8], "big")
        at = bisect_left(self._prefixes, prefix)
        if at == len(self._prefixes) or self._prefixes[at] != prefix:
            return None
        lines = []
        with sources.opener(self.location)() as file:
            while at < len(self._prefixes) and self._prefixes[at] == prefix:
                file.seek(self._starts[at])
                lines.append(bytes(file.read(_LINE_BYTES)).split(b"\n", 1)[0])
                at += 1
        # The lines of this session parsed as a key log of their own: the same rules, the same checks.
        return KeyLog.parse(b"\n".join(lines).decode("utf-8", errors="replace")).secrets_for(client_random)


#: The key log index of this process: the latest only (an audit has one key log).
_INDEXES: dict[str, _Index] = {}


def _index(keylog: KeyLogFile) -> _Index:
    index = _INDEXES.get(keylog.digest)
    if index is None:
        index = _Index(keylog.location)
        if index.digest != keylog.digest:
            raise KeyLogChanged(f"the key log {keylog.location} changed while the audit ran")
        _INDEXES.clear()
        _INDEXES[index.digest] = index
    return index


@dataclass(frozen=True)
class KeyLogFile:
    """The key log at ``location`` (a path made absolute, or a URL) whose content has ``digest``: a
    :class:`~mqttaudit.capture.layers.KeyLookup` for the TLS layer and a set of client randoms for the port
    detection, indexed on first use in each process. Pickles as its location and digest only."""

    location: str
    digest: str

    @classmethod
    def at(cls, location: str) -> KeyLogFile:
        """The key log at ``location`` as it is now (read once, for its digest)."""
        located = location if sources.is_url(location) else os.path.abspath(location)
        digest = hashlib.blake2b(digest_size=32)
        with sources.opener(located)() as file:
            while block := file.read(_READ_BYTES):
                digest.update(block)
        return cls(located, digest.hexdigest())

    def secrets_for(self, client_random: bytes) -> SessionSecrets | None:
        return _index(self).secrets_for(client_random)

    def __contains__(self, client_random: object) -> bool:
        return isinstance(client_random, bytes) and self.secrets_for(client_random) is not None

    def __repr__(self) -> str:
        return f"KeyLogFile({self.location!r})"
