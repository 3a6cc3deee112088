"""What reaches a terminal or a log: one line per line, control characters escaped (a file name or a broker's
topic may hold ESC or a newline), colour only on a terminal and never with ``NO_COLOR``."""

from __future__ import annotations

import os
import sys
from typing import TextIO

import click

from mqttaudit.report.evidence import printable


def printable_line(text: str) -> str:
    """``text`` as one line with every control character escaped (``\\x1b``, ``\\n``)."""
    return printable(text)


def echo_lines(text: str, *, err: bool = False) -> None:
    """Each line of ``text`` (a summary the program built) with whatever it quotes made printable."""
    for line in text.split("\n"):
        click.echo(printable(line), err=err)


def colour_wanted(stream: TextIO | None = None) -> bool:
    """Colour on a terminal only, and never when ``NO_COLOR`` is set to anything (https://no-color.org)."""
    stream = stream or sys.stderr
    return not os.environ.get("NO_COLOR") and stream.isatty()
