"""Entry point: ``main(argv) -> exit status``.

Exit status: 0 conformant, 1 findings, 2 usage error, 3 internal error, 130 interrupted.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence

import click

from mqttaudit import __version__

from .audit import audit_command
from .decode import decode_command
from .demo import demo_command
from .probe import matrix_command, probe_command
from .rules import rules_command

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mqttaudit")
def cli() -> None:
    """mqttaudit: MQTT conformance auditor. Every finding names the rule it breaks and the bytes that show it."""


cli.add_command(decode_command)
cli.add_command(rules_command)
cli.add_command(demo_command)
cli.add_command(probe_command)
cli.add_command(matrix_command)
cli.add_command(audit_command)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="mqttaudit", standalone_mode=False)
    except click.UsageError as exc:
        exc.show()
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Exception:  # the last line of defence: a bug must not look like a finding
        traceback.print_exc(file=sys.stderr)
        click.echo("mqttaudit: internal error (the traceback above is a bug; please report it)", err=True)
        return EXIT_INTERNAL
    return result if isinstance(result, int) else EXIT_OK
