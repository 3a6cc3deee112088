"""The exit statuses of every ``mqttaudit`` command, and the text ``--help`` shows for them."""

from __future__ import annotations

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

#: One line per status, for ``--help`` epilogs and the README.
EXIT_STATUS_HELP = (
    "Exit status: 0 conformant; 1 findings; 2 usage error (bad arguments, unreadable input, not a capture, "
    "missing Java or pyspark); 3 internal error; 4 incomplete (the target was unreachable or refused us, or "
    "nothing or too little could be judged); 130 interrupted (Ctrl-C or SIGTERM)."
)


class Incomplete(Exception):
    """Nothing, or too little, could be judged: the run must not pass. Its message says why, in one line."""


class CannotRun(click.ClickException):
    """The command cannot run as asked: unreadable input, not a capture, a missing Java or pyspark, an output
    folder of someone else's files. Exit status 2, one line, no usage text (the arguments were well formed)."""

    exit_code = EXIT_USAGE
