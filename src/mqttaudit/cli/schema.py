"""``mqttaudit schema NAME``: the JSON Schema of an output, as shipped in the package, for a log pipeline to
validate against."""

from __future__ import annotations

import json

import click

from mqttaudit.report.output_schemas import SCHEMAS, output_schema

from .exits import exit_status_help


@click.command("schema", epilog=exit_status_help(ok="the schema was printed", findings=None, incomplete=None))
@click.argument("name", type=click.Choice(sorted(SCHEMAS)))
def schema_command(name: str) -> int:
    """Print the JSON Schema (draft 2020-12) of an output: findings.json (a probe run: every case, its verdict,
    statements, evidence and reproducer) or findings.jsonl (one line of it: a violation or a routing finding of
    mqttaudit audit, with the EVE flow keys and the Community ID)."""
    click.echo(json.dumps(output_schema(name), indent=2))
    return 0
