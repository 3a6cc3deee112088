"""The exit statuses of every ``mqttaudit`` command, and the text ``--help`` shows for them."""

from __future__ import annotations

import textwrap

import click

from mqttaudit.status import (
    EXIT_FINDINGS,
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INCOMPLETE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STATUS_HELP",
    "EXIT_USAGE",
    "CannotRun",
    "Incomplete",
]

_MEANINGS = {
    EXIT_OK: "conformant: everything that was judged conforms",
    EXIT_FINDINGS: "findings: a MUST-level rule was broken",
    EXIT_USAGE: "usage error: bad arguments, unreadable input, not a capture, an --out that cannot be used or a "
    "folder of other files, an option file over its size cap, no Java or pyspark",
    EXIT_INTERNAL: "internal error (a bug: please report it)",
    EXIT_INCOMPLETE: "incomplete: nothing, or too little, could be judged",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C or SIGTERM); the previous output is left as it was",
}


def exit_status_help(scope: str = "", **meanings: str | None) -> str:
    """The ``--help`` epilog: one row per status, a command's own words (``ok=``, ``findings=``, ``usage=``,
    ``incomplete=``) replacing the generic ones; ``None`` leaves out a status the command never exits with."""
    names = {"ok": EXIT_OK, "findings": EXIT_FINDINGS, "usage": EXIT_USAGE, "incomplete": EXIT_INCOMPLETE}
    rows: dict[int, str | None] = {**_MEANINGS, **{names[key]: text for key, text in meanings.items()}}
    lines = ["\b", f"Exit status{scope}:"]
    for status, text in rows.items():
        if text is None:
            continue
        wrapped = textwrap.wrap(text, 70)
        lines.append(f"  {status:<4} {wrapped[0]}")
        lines += [f"       {more}" for more in wrapped[1:]]
    return "\n".join(lines)


#: The generic epilog, for the group and the commands without words of their own.
EXIT_STATUS_HELP = exit_status_help()


class Incomplete(Exception):
    """Nothing, or too little, could be judged: the run must not pass. Its message says why, in one line."""


class CannotRun(click.ClickException):
    """The command cannot run as asked: unreadable input, not a capture, a missing Java or pyspark, an output
    folder of someone else's files. Exit status 2, one line, no usage text (the arguments were well formed)."""

    exit_code = EXIT_USAGE
