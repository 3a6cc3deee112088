"""Markdown building blocks shared by the reports: escaped inline text, tables and fenced blocks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .evidence import printable

# Characters that would start markup inside a line or a table cell: code spans, emphasis, HTML, cell borders.
_MARKUP = re.compile(r"([\\`*<|])")


def inline(text: str) -> str:
    """``text`` as literal Markdown on one line: non-printables escaped, markup characters backslash-escaped."""
    return _MARKUP.sub(r"\\\1", printable(" ".join(str(text).splitlines())))


def code(text: str) -> str:
    """An inline code span that holds ``text`` whatever backticks it contains (``|`` still escaped for tables)."""
    body = printable(" ".join(str(text).splitlines())).replace("|", "\\|")
    ticks = "`" * (_longest_backtick_run(body) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{ticks}{pad}{body}{pad}{ticks}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A pipe table; cells must already be inline Markdown."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines


def fenced(text: str, info: str = "text") -> list[str]:
    """A fenced code block whose fence is longer than any backtick run inside ``text``."""
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return [fence + info, *text.splitlines(), fence]


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)
