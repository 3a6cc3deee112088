"""Entry point: ``main(argv) -> exit status``.

Exit status: 0 conformant, 1 findings, 2 usage error, 3 internal error, 4 incomplete, 130 interrupted (Ctrl-C or
SIGTERM). An interrupted run prints one line and leaves the previous complete output untouched: every command
writes into a staging directory that is published only when it completes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from collections.abc import Iterator, Sequence
from types import FrameType

import click

from mqttaudit import __version__, interrupts
from mqttaudit.extras import explain
from mqttaudit.probe.target_url import mask_given_passwords

from .audit import audit_command
from .decode import decode_command
from .demo import demo_command
from .exits import (
    EXIT_INCOMPLETE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STATUS_HELP,
    EXIT_USAGE,
    CannotRun,
    Incomplete,
)
from .pipes import reader_may_leave
from .probe import matrix_command, probe_command
from .rules import rules_command
from .schema import schema_command
from .serve import serve_command
from .terminal import printable_line

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_STATUS_HELP)
@click.version_option(__version__, prog_name="mqttaudit")
def cli() -> None:
    """mqttaudit: MQTT conformance auditor. Every finding names the rule it breaks and the bytes that show it."""


cli.add_command(decode_command)
cli.add_command(rules_command)
cli.add_command(demo_command)
cli.add_command(probe_command)
cli.add_command(matrix_command)
cli.add_command(audit_command)
cli.add_command(schema_command)
cli.add_command(serve_command)


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the run stops, cleans up its staging directory and exits 130."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread while a command runs (only the main thread may set
    handlers: a library caller in another thread keeps its own)."""
    interrupts.reset()
    try:
        previous = signal.signal(signal.SIGTERM, interrupts.recording(_on_sigterm))
    except ValueError:  # not the main thread
        yield
        return
    # SIGINT keeps Python's own handler here (asyncio.run replaces only that one with its graceful Ctrl-C); the
    # Spark session, whose context installs a handler of its own, wraps that one to record the interrupt.
    previous_int = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _say(message: str) -> None:
    click.echo(printable_line(message), err=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        with _interruptible(), reader_may_leave():
            result = cli.main(
                args=list(argv) if argv is not None else None, prog_name="mqttaudit", standalone_mode=False
            )
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except Incomplete as exc:
        _say(f"mqttaudit: incomplete: {exc}")
        return EXIT_INCOMPLETE
    except (click.Abort, KeyboardInterrupt):
        _say("interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # the last line of defence: a bug must not look like a finding
        if _while_interrupted(exc) or interrupts.seen():
            _say("interrupted")
            return EXIT_INTERRUPTED
        missing = explain(exc)  # a package of an extra, not installed: named with its pip command
        if missing is not None:
            CannotRun(str(missing)).show()
            return EXIT_USAGE
        sys.stderr.write(mask_given_passwords(traceback.format_exc()))  # a message may quote a password
        _say("mqttaudit: internal error (the traceback above is a bug; please report it)")
        jvm_log = _spark_log()
        if jvm_log:
            _say(f"mqttaudit: Spark's own messages of this run are kept in {jvm_log}")
        return EXIT_INTERNAL
    if interrupts.seen():  # the signal's exception was lost on the way (raised in a finalizer): still interrupted
        _say("interrupted")
        return EXIT_INTERRUPTED
    return result if isinstance(result, int) else EXIT_OK


def _spark_log() -> str | None:
    """The JVM's log of this run when Spark was started (its messages are hidden unless --verbose)."""
    spark = sys.modules.get("mqttaudit.pipeline.spark")
    return None if spark is None else spark.keep_jvm_log()


def _while_interrupted(exc: BaseException) -> bool:
    """An error raised while an interrupt unwound the run (Py4J's connection to the JVM, cut in the middle of a
    call, fails the clean-up that follows): the run was interrupted, not broken."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
