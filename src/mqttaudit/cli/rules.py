"""``mqttaudit rules``: the rule catalogue and which part of mqttaudit checks each rule today;
``mqttaudit rules RULE...`` explains rules one by one."""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from mqttaudit import __version__
from mqttaudit.codec import rules as codec_rules
from mqttaudit.judge import rules as judge_rules
from mqttaudit.spec import Catalogue, Rule, load_catalogue

from .exits import exit_status_help

#: What each observability means, in words.
OBSERVABLE = {
    "bytes": "in the bytes of one packet",
    "stateful": "across the packets of one connection",
    "conversation": "in how one side answers the other",
    "not-observable": "not from the traffic (inside an implementation)",
}
#: The judge upholds these codec rules by asking the receiver to close on a packet that breaks them.
ENFORCED = "ENFORCED_CODEC_RULES"


@dataclass(frozen=True, slots=True)
class Coverage:
    """What checks one rule: codec checks and judge checks (by their names in ``mqttaudit.codec.rules`` and
    ``mqttaudit.judge.rules``) and the probe cases that target it."""

    codec: tuple[str, ...]
    judge: tuple[str, ...]
    probe: tuple[str, ...]

    @property
    def checked_by(self) -> list[str]:
        return [
            name for name, checks in (("codec", self.codec), ("judge", self.judge), ("probe", self.probe)) if checks
        ]


@functools.cache
def _names(module: Any) -> dict[str, tuple[str, ...]]:
    """Rule id -> the names of the module's constants that hold it."""
    names: dict[str, list[str]] = {}
    for name, value in vars(module).items():
        if name.isupper() and isinstance(value, str) and value.startswith("MQTT-"):
            names.setdefault(value, []).append(name)
    return {rule: tuple(found) for rule, found in names.items()}


@functools.cache
def probe_cases() -> dict[str, tuple[str, ...]]:
    """Statement id -> the ids of the probe cases that target it."""
    from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
    from mqttaudit.probe.case import CASES

    found: dict[str, list[str]] = {}
    for case in CASES.values():
        for statement in case.statements:
            found.setdefault(statement, []).append(case.id)
    return {statement: tuple(ids) for statement, ids in found.items()}


def coverage(rule_id: str) -> Coverage:
    judge = _names(judge_rules).get(rule_id, ())
    if rule_id in judge_rules.ENFORCED_CODEC_RULES:
        judge += (ENFORCED,)
    return Coverage(_names(codec_rules).get(rule_id, ()), judge, probe_cases().get(rule_id, ()))


def checked_by(rule: Rule) -> list[str]:
    """The components that check ``rule``: the codec (in bytes), the judge (in a conversation, live or
    captured), the probe (a case targets it)."""
    return coverage(rule.id).checked_by


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    """The rule's catalogue entry, who checks it and how."""
    covered = coverage(rule.id)
    return {
        "id": rule.id,
        "version": rule.version,
        "section": rule.section,
        "level": rule.level,
        "actor": rule.actor,
        "observability": rule.observability,
        "origin": rule.origin,
        "summary": rule.summary,
        "basis": rule.basis,
        "checked_by": covered.checked_by,
        "codec_checks": list(covered.codec),
        "judge_checks": list(covered.judge),
        "probe_cases": list(covered.probe),
        "mqttaudit_version": __version__,
    }


def find_rules(catalogue: Catalogue, wanted: Sequence[str]) -> list[Rule]:
    """The rules named, in the order given, any case. Raises ``click.UsageError`` naming the unknown ids with the
    closest known ones."""
    by_key = {rule.id.casefold(): rule for rule in catalogue}
    found, unknown = [], []
    for text in wanted:
        rule = by_key.get(text.strip().casefold())
        if rule is None:
            unknown.append(text)
        else:
            found.append(rule)
    if unknown:
        lines = []
        for text in unknown:
            close = difflib.get_close_matches(text.strip().casefold(), list(by_key), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(by_key[key].id for key in close)}?" if close else ""
            lines.append(f"no rule {text!r} in the MQTT {catalogue.version} catalogue{hint}")
        raise click.UsageError("\n".join(lines) + "\n(`mqttaudit rules` lists them all)")
    return found


def explain(rule: Rule) -> list[str]:
    """The rule in words: what it says, where, how strong, whom it binds, how it shows and what checks it."""
    covered = coverage(rule.id)
    kind = "a numbered normative statement" if rule.origin == "statement" else "stated there without a number"
    binds = {"both": "the client and the server"}.get(rule.actor, f"the {rule.actor}")
    observable = " and ".join(OBSERVABLE.get(part, part) for part in rule.observability.split("+"))
    lines = [
        f"{rule.id}: {rule.summary}",
        "",
        f"  Section:       {rule.section} of MQTT {rule.version} ({kind})",
        f"  Level:         {rule.level} (a violation is reported as {_article(rule.severity)} {rule.severity})",
        f"  Binds:         {binds}",
        f"  Observable:    {observable} ({rule.observability})",
    ]
    if rule.basis:
        lines.append(f"  Basis:         {rule.basis}")
    checks = []
    if covered.codec:
        checks.append(f"codec: {', '.join(covered.codec)} in mqttaudit.codec.rules (in the bytes of every packet)")
    own = [name for name in covered.judge if name != ENFORCED]
    if own:
        checks.append(f"judge: {', '.join(own)} in mqttaudit.judge.rules (over a connection, live or captured)")
    if ENFORCED in covered.judge:
        checks.append("judge: the receiver must close the connection on a packet that breaks it (ENFORCED_CODEC_RULES)")
    lines += _labelled("Checked by:", checks or ["nothing yet: no finding can name this rule"])
    lines += _labelled("Probe cases:", list(covered.probe) or ["none"])
    return lines


def _labelled(label: str, values: list[str]) -> list[str]:
    return [f"  {label if index == 0 else '':<14} {value}" for index, value in enumerate(values)]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


@click.command(
    "rules",
    epilog=exit_status_help(
        ok="the rules were shown", findings=None, usage="usage error: an unknown rule id", incomplete=None
    ),
)
@click.argument("rule_ids", nargs=-1, metavar="[RULE]...")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--version", "version", type=click.Choice(["3.1.1"]), default="3.1.1", show_default=True)
@click.option("--checked/--unchecked", "checked", default=None, help="Only rules that are (or are not) checked.")
def rules_command(rule_ids: tuple[str, ...], output_format: str, version: str, checked: bool | None) -> int:
    """List the rules of MQTT VERSION with id, section, level, actor, observability and who checks them; with RULE
    ids (any case, e.g. MQTT-4.7.3-1), explain those rules: what they say, whom they bind, which codec and judge
    checks and which probe cases cover them."""
    catalogue = load_catalogue(version)
    if rule_ids:
        if checked is not None:
            raise click.UsageError("give RULE ids or --checked/--unchecked, not both")
        found = find_rules(catalogue, rule_ids)
        if output_format == "json":
            click.echo(json.dumps([rule_to_dict(rule) for rule in found], indent=2))
        else:
            click.echo("\n\n".join("\n".join(explain(rule)) for rule in found))
        return 0
    selected = [r for r in catalogue if checked is None or bool(checked_by(r)) == checked]
    if output_format == "json":
        click.echo(json.dumps([rule_to_dict(r) for r in selected], indent=2))
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
        f"{by_probe} numbered statements covered by probe cases; `mqttaudit rules RULE` explains one"
    )
    return 0
