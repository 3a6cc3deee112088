"""What reaches a terminal or a log: one line per line, control characters escaped (a file name or a broker's
topic may hold ESC or a newline)."""

from __future__ import annotations

import click

from mqttaudit.report.evidence import printable


def printable_line(text: str) -> str:
    """``text`` as one line with every control character escaped (``\\x1b``, ``\\n``)."""
    return printable(text)


def echo_lines(text: str, *, err: bool = False) -> None:
    """Each line of ``text`` (a summary the program built) with whatever it quotes made printable."""
    for line in text.split("\n"):
        click.echo(printable(line), err=err)
