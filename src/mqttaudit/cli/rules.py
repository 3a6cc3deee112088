"""``mqttaudit rules``: the rule catalogue, and which part of mqttaudit checks each rule today."""

from __future__ import annotations

import json

import click

from mqttaudit.codec import rules as codec_rules
from mqttaudit.judge import CHECKED_RULES
from mqttaudit.spec import Rule, load_catalogue

from .probe import probe_coverage


def checked_by(rule: Rule) -> list[str]:
    """The components that check ``rule``: the codec (in bytes), the judge (in a conversation, live or
    captured), the probe (a case targets it)."""
    checkers = (
        ("codec", codec_rules.CHECKED),
        ("judge", CHECKED_RULES),
        ("probe", probe_coverage()),
    )
    return [name for name, rules in checkers if rule.id in rules]


@click.command("rules")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--version", "version", type=click.Choice(["3.1.1"]), default="3.1.1", show_default=True)
@click.option("--checked/--unchecked", "checked", default=None, help="Only rules that are (or are not) checked.")
def rules_command(output_format: str, version: str, checked: bool | None) -> int:
    """List the rules of MQTT VERSION with id, section, level, actor, observability and who checks them."""
    catalogue = load_catalogue(version)
    selected = [r for r in catalogue if checked is None or bool(checked_by(r)) == checked]
    if output_format == "json":
        rows = [
            {
                "id": r.id,
                "version": r.version,
                "section": r.section,
                "level": r.level,
                "actor": r.actor,
                "observability": r.observability,
                "origin": r.origin,
                "summary": r.summary,
                "basis": r.basis,
                "checked_by": checked_by(r),
            }
            for r in selected
        ]
        click.echo(json.dumps(rows, indent=2))
        return 0
    width = max(len(r.id) for r in catalogue)
    for r in selected:
        by = ",".join(checked_by(r)) or "-"
        click.echo(f"{r.id:<{width}}  {r.level:<6} {r.actor:<6} {r.observability:<22} {by:<11} {r.summary}")
    statements = sum(r.origin == "statement" for r in catalogue)
    by_codec = sum("codec" in checked_by(r) for r in catalogue)
    by_judge = sum("judge" in checked_by(r) for r in catalogue)
    by_probe = sum("probe" in checked_by(r) for r in catalogue if r.origin == "statement")
    click.echo(
        f"\n{len(catalogue)} rules of MQTT {version}: {statements} numbered statements, "
        f"{len(catalogue) - statements} derived rules; {by_codec} checked by the codec, {by_judge} by the judge, "
        f"{by_probe} numbered statements covered by probe cases"
    )
    return 0
