"""The audit's key log as its tasks reach it: where the user's file is and a digest of its content, never a secret.

A task closure (and any broadcast) is pickled and may be written to Spark's local folders; the secrets of a key log
must not be. So what the tasks get is a :class:`KeyLogFile`, a few hundred bytes whatever the key log's size. Each
Python worker reads the file itself, through the filesystem layer the captures use (:mod:`.sources`), once: it
checks that the content is the one the driver read and keeps an index of it, the first 8 bytes of each line's
client random and where the line starts (16 bytes a line: 16 MB for a million lines, no secret). A session's
secrets are read from their lines when its ClientHello asks for them, and only those are kept.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import os
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from mqttaudit.capture.tls import USED_LABELS, KeyLog, KeyLogProblem, SessionSecrets, keylog_line, second_secret

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
        located = _located(location)
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


#: Problems of a key log the driver's check keeps, the first by line (the rest are counted).
KEPT_PROBLEMS: Final = 20
#: Where ``str.splitlines`` ends a line (``\r\n`` too): a key log's lines are numbered as it numbers them.
_LINE_ENDS: Final = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_SECRET_NAMES: Final = tuple(field.name for field in dataclasses.fields(SessionSecrets))


@dataclass(frozen=True)
class KeyLogCheck:
    """What the driver's one pass over a key log found, and no secret: the file as the tasks reach it, how many
    lines of a label used are usable, the first :data:`KEPT_PROBLEMS` problems by line and how many more."""

    keylog: KeyLogFile
    usable_lines: int
    problems: tuple[KeyLogProblem, ...]
    more_problems: int


def check_keylog(location: str, blocks: Iterable[bytes], *, kept: int = KEPT_PROBLEMS) -> KeyLogCheck:
    """The key log at ``location`` (a path or a URL), whose bytes are ``blocks``, checked line by line as
    :meth:`KeyLog.parse` reads it (the same line numbers and problems) in one pass that holds neither the file nor
    a secret: a line's secret is only hashed (keyed by this call, 8 bytes) to find a later line that gives a
    session's secret again with another value. A line longer than any key log line is judged by its length."""
    digest = hashlib.blake2b(digest_size=32)
    key = os.urandom(16)
    sessions, secrets, numbers, names = array("Q"), array("Q"), array("Q"), array("B")
    problems: list[KeyLogProblem] = []
    malformed = 0
    for number, text in enumerate(_lines(blocks, digest), start=1):
        line = _long_line(number, text) if len(text) > _LINE_BYTES else keylog_line(number, text)
        if line is None:
            continue
        if isinstance(line, KeyLogProblem):
            malformed += 1
            if len(problems) < kept:
                problems.append(line)
            continue
        name, client_random, secret = line
        sessions.append(_keyed(key, name.encode() + client_random))
        secrets.append(_keyed(key, secret))
        numbers.append(number)
        names.append(_SECRET_NAMES.index(name))
    # A session's secret given again with another value: the first line's is the one used (as KeyLog.parse does).
    ordered = sorted(sessions)
    repeated = {ordered[at] for at in range(1, len(ordered)) if ordered[at] == ordered[at - 1]}
    del ordered
    again = []
    first: dict[int, int] = {}
    for at, session in enumerate(sessions):
        if session in repeated and first.setdefault(session, secrets[at]) != secrets[at]:
            again.append(KeyLogProblem(numbers[at], second_secret(_SECRET_NAMES[names[at]])))
    found = sorted([*problems, *again])
    return KeyLogCheck(
        KeyLogFile(_located(location), digest.hexdigest()),
        len(sessions) - len(again),
        tuple(found[:kept]),
        malformed + len(again) - min(kept, len(found)),
    )


def _located(location: str) -> str:
    """A key log's location as the tasks reach it: a URL, or a path made absolute."""
    return location if sources.is_url(location) else os.path.abspath(location)


def _keyed(key: bytes, data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=key).digest(), "big")


def _long_line(number: int, text: str) -> KeyLogProblem | None:
    """A line longer than any key log line: a problem if it starts with a label used, else passed over."""
    label = text.split(maxsplit=1)[0] if text.strip() else ""
    if label not in USED_LABELS:
        return None
    return KeyLogProblem(number, f"{label}: longer than {_LINE_BYTES:,} characters, which no key log line is")


def _lines(blocks: Iterable[bytes], digest: Any) -> Iterator[str]:
    """The lines of ``blocks`` decoded as UTF-8 (errors replaced), as ``str.splitlines`` gives them from the whole
    text, each cut to its first :data:`_LINE_BYTES` characters and one more (so that a longer one shows it); every
    block goes into ``digest`` as it is read."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    head, open_line, skip_lf = "", False, False
    for block, last in _with_last(blocks):
        digest.update(block)
        text = decoder.decode(block, final=last)
        if skip_lf and text:  # a "\r" ended the previous block: a "\n" here belongs to it
            text, skip_lf = text[1:] if text[0] == "\n" else text, False
        parts = text.splitlines(keepends=True)
        for index, part in enumerate(parts):
            ended = part[-1] in _LINE_ENDS
            content = part[:-2] if part.endswith("\r\n") else part[:-1] if ended else part
            head = (head + content[: _LINE_BYTES + 1])[: _LINE_BYTES + 1]
            open_line = not ended
            if ended:
                yield head
                head = ""
                skip_lf = index == len(parts) - 1 and part.endswith("\r")
    if open_line:
        yield head


def _with_last(blocks: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    """Each block, and whether it is the last (an empty one when there are none)."""
    previous: bytes | None = None
    for block in blocks:
        if previous is not None:
            yield previous, False
        previous = block
    yield previous or b"", True
