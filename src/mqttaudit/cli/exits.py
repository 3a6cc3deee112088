"""The exit statuses of every ``mqttaudit`` command, and the text ``--help`` shows for them."""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INCOMPLETE = 4
EXIT_INTERRUPTED = 130

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
