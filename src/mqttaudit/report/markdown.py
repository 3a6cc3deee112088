"""Markdown building blocks shared by the reports: escaped inline text, code spans, tables and fenced blocks.

Whatever a peer controls goes through :func:`inline` (or :func:`code`, :func:`fenced`), never into the frame raw:
a topic such as ``![beacon](https://evil.example/t.png)`` must read as that text, not load an image. The escaper
backslash-escapes every character that can start markup inside a line (emphasis, code spans, links and images,
raw HTML, entities, table cells, strikethrough, math), breaks the sequences that renderers turn into links on
their own (``scheme://``, ``//``, ``www.`` and ``host.tld``, ``user@host``), and escapes what would open a block
where the value starts a line (``#``, ``>``, ``-``, ``+``, ``=``, ``1.``). Control characters and line breaks
become visible escapes, so a value stays on its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .peer_text import LIMIT, WHOLE_IN, printable, shown

# Markup inside a line (``_`` between two letters or digits opens no emphasis); what linkifiers turn into links:
# the colon of ``scheme://``, a dot before a letter (``www.``, ``evil.com``), the second slash of ``//``, the ``@``
# of an address.
_INLINE = re.compile(r"[\\`*\[\]<&|~@$]|(?<![^\W_])_|_(?![^\W_])|:(?=/)|\.(?=[^\W\d_])|(?<=/)/")
# What would open a block where the text starts a line: heading, quote, list item, setext underline, ordered list.
_BLOCK_START = re.compile(r"^(\s*)(?:([#>+\-=])|(\d+)([.)])(?=\s|$))")


def inline(text: object, limit: int | None = LIMIT, whole_in: str = WHOLE_IN) -> str:
    """``text`` as literal Markdown on one line, cut to ``limit`` characters (None for the report's own sentences,
    which may be long and hold no peer value of their own)."""
    return _escape(shown(text, limit, whole_in))


def prose(text: object) -> str:
    """The report's own sentence (a catalogue summary, a case title) as literal Markdown, never cut."""
    return _escape(printable(str(text)))


def _escape(text: str) -> str:
    escaped = _INLINE.sub(lambda match: "\\" + match.group(0), text)
    return _BLOCK_START.sub(_escape_block_start, escaped, count=1)


def _escape_block_start(match: re.Match[str]) -> str:
    space, mark, digits, stop = match.groups()
    return f"{space}\\{mark}" if mark else f"{space}{digits}\\{stop}"


def code(text: object, *, cell: bool = False, limit: int | None = LIMIT, whole_in: str = WHOLE_IN) -> str:
    """An inline code span holding ``text`` whatever backticks it contains: its fence is longer than any backtick
    run inside, so the value cannot close it. In a table ``cell``, ``|`` is escaped (the table removes the
    backslash before the code span is read)."""
    body = shown(text, limit, whole_in)
    if cell:
        body = body.replace("|", "\\|")
    ticks = "`" * (_longest_backtick_run(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip(" ") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A pipe table; cells must already be inline Markdown (:func:`inline`, :func:`code` with ``cell=True``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def fenced(text: str, info: str = "text") -> list[str]:
    """A fenced code block of printable lines whose fence is longer than any backtick run inside ``text``, so no
    line of it can close the block."""
    lines = [printable(line) for line in text.splitlines()]
    fence = "`" * max(3, max((_longest_backtick_run(line) for line in lines), default=0) + 1)
    return [fence + info, *lines, fence]


def left_out(shown_count: int, total: int, what: str, where: str) -> list[str]:
    """A blank line and ``… and 1,234 more <what> not shown; see <where>.`` when a table or a list was bounded (the
    blank line ends it), else nothing."""
    if total <= shown_count:
        return []
    return ["", f"… and {total - shown_count:,} more {what} not shown; see {where}."]


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)
