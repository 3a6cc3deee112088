"""Text a peer controls (topics, client ids, packet renderings, reasons, file names) made fit for people: every
character printable, and long values cut in the human reports. The JSON outputs keep the values, whole or within
their own far larger bounds."""

from __future__ import annotations

from mqttaudit.codec.describe import wire_text

#: Characters of a peer value a human report shows; a longer value is cut in the middle, its length noted.
LIMIT = 300
#: Where more of a cut value is kept, unless a report names its own JSON file.
WHOLE_IN = "the JSON report"


def printable(text: str) -> str:
    """``text`` with control and other non-printable characters as Python escapes (``\\x1b``, ``\\n``, ``\\u202e``),
    so no terminal, Markdown or XML sees them raw; an ill-formed byte from the wire (a lone surrogate) is ``\\xNN``,
    as in the audit's tables (:func:`~mqttaudit.codec.describe.wire_text`)."""
    if text.isprintable():
        return text
    text = wire_text(text)
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def cut(text: str, limit: int | None = LIMIT, whole_in: str = WHOLE_IN) -> str:
    """``text`` if it has at most ``limit`` characters (None: no limit), else its start and its end around a note
    of its length and of where more of it is: ``abc… (60,000 characters, more in findings.json) …xyz``.
    The end is kept because a sentence that quotes a long value says what it means after it."""
    if limit is None or len(text) <= limit:
        return text
    tail = limit // 4
    head = limit - tail
    return f"{text[:head]}… ({len(text):,} characters, more in {whole_in}) …{text[len(text) - tail :]}"


def shown(text: object, limit: int | None = LIMIT, whole_in: str = WHOLE_IN) -> str:
    """A peer value as a human report shows it: cut to ``limit`` characters, then made printable."""
    return printable(cut(str(text), limit, whole_in))
