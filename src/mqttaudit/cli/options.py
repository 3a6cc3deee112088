"""Options the commands share: ``--out`` (published whole when the run completes), ``--force`` (write beside
files mqttaudit did not write) and ``--format`` (text, or one JSON document)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

Command = TypeVar("Command", bound=Callable[..., Any])


def output_options(default: str, holds: str) -> Callable[[Command], Command]:
    """``--out DIR`` (default ``default``; what it ``holds``, in words) and ``--force``."""

    def decorate(command: Command) -> Command:
        command = click.option(
            "--force",
            is_flag=True,
            help="Write into an --out folder that holds other files: they are kept, and one named like an output "
            "is never replaced (the run is refused instead).",
        )(command)
        return click.option(
            "--out",
            "out_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path(default),
            show_default=True,
            help=f"{holds}; published whole when the run completes, never left half-written.",
        )(command)

    return decorate


def format_option(json_says: str) -> Callable[[Command], Command]:
    """``--format text|json`` (into ``output_format``): with json, ``json_says`` what the one JSON document on standard
    output holds (the lines for people stay on standard error)."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help=f"json: {json_says}",
    )
