"""``mqttaudit rules``: the rule catalogue of one MQTT version and which part of mqttaudit checks each rule today;
``mqttaudit rules RULE...`` explains rules one by one, in every version that states them unless one is chosen."""

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
from mqttaudit.spec import VERSIONS, Catalogue, Rule, duties, identity, load_catalogue, parse_version, registry

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
ENFORCED_5_0 = "ENFORCED_CODEC_RULES_5_0"
#: The statements that bind a receiver to detect a defect and close on it (mqttaudit.spec.duties), per version.
DUTIES = "RECEIVER_DUTIES"
DUTIES_5_0 = "RECEIVER_DUTIES_5_0"
#: The judge's references that name a set of rules, not a check of its own (shown without their module).
RULE_SETS = (ENFORCED, ENFORCED_5_0, DUTIES, DUTIES_5_0)


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
def _references() -> dict[tuple[str, str], tuple[registry.Reference, ...]]:
    """(statement id, version) -> the codec, judge and probe references that name it there, read from the rule
    registry once every part that refers to rules is imported. A reference names a rule by its key (a 3.1.1 id, or a
    5.0 id for a rule only 5.0 states); :mod:`mqttaudit.spec.identity` gives each key its statement in each version,
    and a 5.0 probe case cites 5.0 ids itself."""
    from mqttaudit.judge import deliveries_5, forwarding_5, lifecycle, limits, model_rules_5  # noqa: F401
    from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library

    found: dict[tuple[str, str], dict[registry.Reference, None]] = {}
    for (text, own), refs in registry.references().items():
        key = registry.StatementId(text, own)
        for version in VERSIONS:
            for ref in refs:
                named = key if ref.component == "probe" else identity.statement_id(key, version)
                if named is None or named.version != version:
                    continue
                if ref.module == judge_rules.__name__ and not _judge_rule_counts(ref, key, version):
                    continue
                found.setdefault((str(named), version), {})[ref] = None
    return {where: tuple(refs) for where, refs in found.items()}


def _judge_rule_counts(ref: registry.Reference, key: str, version: str) -> bool:
    """Whether a reference of :mod:`mqttaudit.judge.rules` checks ``key`` in ``version``: in 3.1.1 each of its names
    and the codec rules it enforces by a close; in 5.0 its own rules and the codec rules a 5.0 receiver closes on."""
    if ref.name in (ENFORCED, DUTIES):
        return version == identity.V3_1_1
    if ref.name in (ENFORCED_5_0, DUTIES_5_0):
        return version == identity.V5
    return version == identity.V3_1_1 or key in judge_rules.OWN_RULES


def coverage(rule: Rule) -> Coverage:
    """What checks ``rule`` in its version, from the references the rule registry holds: the codec constants, the
    judge checks and the probe cases whose keys that version states as ``rule``."""
    refs = _references().get((rule.id, rule.version), ())

    def names(component: str, qualified: bool) -> tuple[str, ...]:
        chosen = [ref for ref in refs if ref.component == component]
        if component == "judge" and rule.version == identity.V3_1_1:
            chosen = [ref for ref in chosen if ref.module == judge_rules.__name__]
        own = [ref.name if not qualified or ref.name in RULE_SETS else f"{ref.name} in {ref.module}" for ref in chosen]
        return tuple(dict.fromkeys(own))

    v5 = rule.version == identity.V5
    return Coverage(names("codec", False), names("judge", v5), names("probe", False))


def checked_by(rule: Rule) -> list[str]:
    """The components that check ``rule``: the codec (in bytes), the judge (in a conversation, live or
    captured), the probe (a case targets it)."""
    return coverage(rule).checked_by


def also_in(rule: Rule) -> list[Rule]:
    """The rules of the other versions that carry ``rule``'s id (often with another meaning: 5.0 renumbers)."""
    return [other for other in (load_catalogue(v).get(rule.id) for v in VERSIONS if v != rule.version) if other]


def rule_to_dict(rule: Rule) -> dict[str, Any]:
    """The rule's catalogue entry, who checks it and how."""
    covered = coverage(rule)
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
        "also_in": [other.version for other in also_in(rule)],
        "receiver_duties": [
            {"receiver": duty.receiver, "packet": duty.packet, "binding": duty.binding, "basis": duty.basis}
            for duty in receiver_duties(rule)
        ],
        "mqttaudit_version": __version__,
    }


def receiver_duties(rule: Rule) -> list[duties.Duty]:
    """What the receiver of a packet breaking ``rule`` owes, per receiver (the rule's own row, then the duty a whole
    packet of one type puts on it where that differs): empty for a rule no received packet breaks."""
    table = duties.load_duties(rule.version)
    found = []
    for row in duties.duties_of(rule.id, rule.version):
        found.append(row)
        for packet in sorted(duties.PACKETS):
            wide = table.duty(rule.id, row.receiver, packet)
            if wide is not None and wide != row:
                found.append(wide)
    return found


def _duty_lines(rule: Rule) -> list[str]:
    """The receiver duties of ``rule`` in words: who must detect a packet breaking it and close, on what basis."""
    lines = []
    for duty in receiver_duties(rule):
        where = "" if duty.packet == duties.ANY else f" in a {duty.packet}"
        if duty.binding is None:
            verdict = "not bound to detect it (accepting it is leniency, not a failure)"
        else:
            verdict = f"bound by {duty.binding} to detect it and close"
        lines.append(f"{duty.receiver}{where}: {verdict}; {duty.basis}")
    return lines


def find_rules(catalogue: Catalogue, wanted: Sequence[str]) -> list[Rule]:
    """The rules named, in the order given, any case. Raises ``click.UsageError`` naming the unknown ids with the
    closest known ones."""
    return find_in_versions([catalogue], wanted)


def find_in_versions(catalogues: Sequence[Catalogue], wanted: Sequence[str]) -> list[Rule]:
    """The rules named, in the order given, any case: each id from the first catalogue that has it (the others name
    it in its explanation). Raises ``click.UsageError`` naming the ids no catalogue has, with the closest known
    ones of each catalogue."""
    by_key = [{rule.id.casefold(): rule for rule in catalogue} for catalogue in catalogues]
    found, lines = [], []
    for text in wanted:
        key = text.strip().casefold()
        rule = next((rules[key] for rules in by_key if key in rules), None)
        if rule is not None:
            found.append(rule)
            continue
        for catalogue, rules in zip(catalogues, by_key, strict=True):
            close = difflib.get_close_matches(key, list(rules), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(rules[match].id for match in close)}?" if close else ""
            lines.append(f"no rule {text!r} in the MQTT {catalogue.version} catalogue{hint}")
    if lines:
        raise click.UsageError("\n".join(lines) + "\n(`mqttaudit rules` lists them all)")
    return found


def explain(rule: Rule) -> list[str]:
    """The rule in words: what it says, where, how strong, whom it binds, how it shows and what checks it."""
    covered = coverage(rule)
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
    lines += _labelled("Receiver duty:", _duty_lines(rule)) if receiver_duties(rule) else []
    if rule.version == identity.V5:
        lines += _labelled("Checked by:", _checks_5_0(covered))
        lines += _labelled("Probe cases:", list(covered.probe) or ["none"])
        return lines
    checks = []
    if covered.codec:
        checks.append(f"codec: {', '.join(covered.codec)} in mqttaudit.codec.rules (in the bytes of every packet)")
    own = [name for name in covered.judge if name not in RULE_SETS]
    if own:
        checks.append(f"judge: {', '.join(own)} in mqttaudit.judge.rules (over a connection, live or captured)")
    if ENFORCED in covered.judge:
        checks.append("judge: the receiver must close the connection on a packet that breaks it (ENFORCED_CODEC_RULES)")
    if DUTIES in covered.judge:
        checks.append(f"judge: it binds the receiver of a defective packet to detect it and close ({DUTIES})")
    lines += _labelled("Checked by:", checks or ["nothing yet: no finding can name this rule"])
    lines += _labelled("Probe cases:", list(covered.probe) or ["none"])
    return lines


def _checks_5_0(covered: Coverage) -> list[str]:
    """What checks a 5.0 rule, in words: the codec constants and the judge checks whose key maps to it."""
    checks = []
    if covered.codec:
        names = [_with_key(name) for name in covered.codec]
        checks.append(f"codec: {', '.join(names)} in mqttaudit.codec.rules (in the bytes of every MQTT 5.0 packet)")
    for check in covered.judge:
        if check == ENFORCED_5_0:
            checks.append(
                "judge: the receiver closes on a packet that breaks it where a statement binds it to detect that, "
                f"and is lenient otherwise ({ENFORCED_5_0})"
            )
        elif check == DUTIES_5_0:
            checks.append(f"judge: it binds the receiver of a defective packet to detect it and close ({DUTIES_5_0})")
        else:
            checks.append(f"judge: {check} (over MQTT 5.0 connections)")
    return checks or ["nothing yet: no finding can name this rule"]


def _with_key(name: str) -> str:
    """A codec constant's name, with the key it holds when that is not the 5.0 id (mqttaudit.spec.identity maps
    it)."""
    key = str(getattr(codec_rules, name))
    return name if identity.statement_id(key, identity.V5) == key else f"{name} (key {key})"


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
@click.option(
    "--protocol",
    type=click.Choice(["3.1.1", "5", "5.0"]),
    default=None,
    help="The MQTT version whose rules to list or explain (5 is 5.0).  [default: 3.1.1; with RULE ids, every "
    "version that has them]",
)
@click.option("--version", "version_alias", type=click.Choice(["3.1.1", "5", "5.0"]), default=None, hidden=True)
@click.option("--checked/--unchecked", "checked", default=None, help="Only rules that are (or are not) checked.")
def rules_command(
    rule_ids: tuple[str, ...],
    output_format: str,
    protocol: str | None,
    version_alias: str | None,
    checked: bool | None,
) -> int:
    """List the rules of an MQTT version with id, section, level, actor, observability and who checks them; with
    RULE ids (any case, e.g. MQTT-4.7.3-1), explain those rules: what they say, whom they bind, which codec and
    judge checks and which probe cases cover them."""
    version = _chosen_version(protocol, version_alias)
    if rule_ids:
        if checked is not None:
            raise click.UsageError("give RULE ids or --checked/--unchecked, not both")
        versions = [version] if version else list(VERSIONS)
        found = find_in_versions([load_catalogue(v) for v in versions], rule_ids)
        if output_format == "json":
            click.echo(json.dumps([rule_to_dict(rule) for rule in found], indent=2))
        else:
            click.echo("\n\n".join("\n".join(explain(rule)) for rule in found))
        if version is None:
            for note in other_version_notes(found):
                click.echo(note, err=True)
        return 0
    catalogue = load_catalogue(version or VERSIONS[0])
    selected = [r for r in catalogue if checked is None or bool(checked_by(r)) == checked]
    if output_format == "json":
        click.echo(json.dumps([rule_to_dict(r) for r in selected], indent=2))
        return 0
    width = max(len(r.id) for r in catalogue)
    for r in selected:
        by = ",".join(checked_by(r)) or "-"
        click.echo(f"{r.id:<{width}}  {r.level:<6} {r.actor:<6} {r.observability:<22} {by:<11} {r.summary}")
    click.echo("\n" + summary_line(catalogue))
    return 0


def other_version_notes(found: Sequence[Rule]) -> list[str]:
    """One line per rule explained that another version also states, pointing at the command that explains it
    there (5.0 renumbers, so the same id may say something else)."""
    return [
        f"note: MQTT {other.version} also has {other.id} (section {other.section}: {other.summary}); "
        f"`mqttaudit rules --protocol {other.version} {other.id}` explains it"
        for rule in found
        for other in also_in(rule)
    ]


def summary_line(catalogue: Catalogue) -> str:
    """How many rules the catalogue has, of each origin, and how many each component checks."""
    statements = sum(r.origin == "statement" for r in catalogue)
    by_codec = sum("codec" in checked_by(r) for r in catalogue)
    counts = f"{len(catalogue)} rules of MQTT {catalogue.version}: {statements} numbered statements, "
    counts += f"{len(catalogue) - statements} derived rules; {by_codec} checked by the codec, "
    by_probe = sum("probe" in checked_by(r) for r in catalogue if r.origin == "statement")
    by_judge = sum("judge" in checked_by(r) for r in catalogue)
    counts += f"{by_judge} by the judge, {by_probe} numbered statements covered by probe cases"
    return counts + "; `mqttaudit rules RULE` explains one"


def _chosen_version(protocol: str | None, version_alias: str | None) -> str | None:
    """The version --protocol (or its older name --version) chose, None when neither was given."""
    chosen = {parse_version(text) for text in (protocol, version_alias) if text is not None}
    if len(chosen) > 1:
        raise click.UsageError("--protocol and --version name different versions; give one")
    return chosen.pop() if chosen else None
