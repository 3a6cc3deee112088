"""``mqttaudit schema NAME``: the JSON Schema of an output, as shipped in the package, for a log pipeline to
validate against."""

from __future__ import annotations

import json

import click

from .exits import exit_status_help

#: The outputs whose schema ships, by the name the command takes.
SCHEMAS = ("findings.jsonl",)


@click.command("schema", epilog=exit_status_help(ok="the schema was printed", findings=None, incomplete=None))
@click.argument("name", type=click.Choice(SCHEMAS))
def schema_command(name: str) -> int:
    """Print the JSON Schema (draft 2020-12) of an output: findings.jsonl (one line of it: a violation or a routing
    finding of mqttaudit audit, with the EVE flow keys and the Community ID)."""
    from mqttaudit.report.audit_jsonl import findings_schema

    click.echo(json.dumps(findings_schema(), indent=2))
    return 0
