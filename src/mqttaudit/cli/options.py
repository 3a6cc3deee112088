"""Options the commands share: ``--out`` (published whole when the run completes), ``--force`` (write beside
files mqttaudit did not write) and ``--format`` (text, or one JSON document)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

Command = TypeVar("Command", bound=Callable[..., Any])


def output_options(default: str, holds: str, *, urls: bool = False) -> Callable[[Command], Command]:
    """``--out DIR`` (default ``default``; what it ``holds``, in words) and ``--force``. With ``urls``, ``--out``
    may also be a URL of another filesystem (``s3://bucket/prefix``, ``hdfs://...``), kept as text; a ``file://``
    URL is a local folder."""

    def decorate(command: Command) -> Command:
        command = click.option(
            "--force",
            is_flag=True,
            help="Write into an --out folder that holds other files: they are kept, and one named like an output "
            "is never replaced (the run is refused instead).",
        )(command)
        folder = click.Path(file_okay=False, path_type=Path)
        return click.option(
            "--out",
            "out_dir",
            type=click.STRING if urls else folder,
            callback=_output_location(folder) if urls else None,
            default=default if urls else Path(default),
            show_default=True,
            help=f"{holds}; published whole when the run completes, never left half-written."
            + (
                " A URL (s3://bucket/prefix, hdfs://..., file://...) writes there through pyarrow.fs: see the README."
                if urls
                else ""
            ),
        )(command)

    return decorate


def _output_location(folder: click.Path) -> Callable[[click.Context, click.Parameter, str], Path | str]:
    """``--out`` as a local folder (as ``click.Path`` checks it), or as a URL of another filesystem, kept as text."""

    def convert(ctx: click.Context, param: click.Parameter, value: str) -> Path | str:
        from mqttaudit.locations import is_remote, local_path

        if is_remote(value):
            return value.rstrip("/")
        return Path(os.fsdecode(folder.convert(local_path(value), param, ctx)))

    return convert


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
