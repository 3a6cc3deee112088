"""Rule cases for the judge: for each rule it decides, a conversation that breaks it, one that keeps it and one
that cannot decide it. Every test module of the judge holds a table of them; one test runs each column."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mqttaudit import codec
from mqttaudit.judge import Judgement, judge, judge_scenario
from mqttaudit.judge.verdict import binds
from mqttaudit.spec import identity

from .talk import Talk

Conversation = Talk | dict[str, Talk]


@dataclass(frozen=True)
class Case:
    rule: str
    #: The side at fault when the rule breaks.
    side: codec.Direction
    fails: Callable[[], Conversation]
    passes: Callable[[], Conversation]
    undecided: Callable[[], Conversation]
    #: Tells apart several cases of one rule.
    name: str = ""

    @property
    def id(self) -> str:
        return "-".join(part for part in (self.rule, self.side.value, self.name) if part)


def case_id(case: Case) -> str:
    return case.id


def binding(rules: tuple[str, ...] | list[str] | set[str], side: codec.Direction, version: str = "3.1.1") -> set[str]:
    """The rules (keys) among ``rules`` that bind ``side`` in ``version``: the only ones a finding against that side
    may cite (the statements of the other side, which its packet broke, are charged to it as its own duty)."""
    return {rule for rule in rules if (named := identity.statement_id(rule, version)) and binds(named, side)}


def verdict(conversation: Conversation) -> Judgement:
    if isinstance(conversation, Talk):
        return judge(conversation.events)
    return judge_scenario({name: talk.events for name, talk in conversation.items()})


def explain(judgement: Judgement) -> str:
    lines = [
        f"{f.conversation}#{f.event} {rule} ({f.side.value}): {f.detail}"
        for f in judgement.findings
        for rule in f.rules
    ]
    lines += [f"{x.conversation}#{x.event} lenient {x.rule} ({x.side.value}): {x.detail}" for x in judgement.lenient]
    lines.append(f"passed: {sorted(judgement.passed)}")
    lines += [f"not assessable {rule}: {why}" for rule, why in sorted(judgement.not_assessable.items())]
    return "\n".join(lines)


def lenient_of(judgement: Judgement, side: codec.Direction | None = None) -> set[str]:
    """The rules whose breach a receiver (``side``, or either) accepted without being bound to detect it."""
    return {entry.rule for entry in judgement.lenient if side is None or entry.side is side}


def check_fails(case: Case) -> None:
    judgement = verdict(case.fails())
    assert any(rule == case.rule and f.side is case.side for f in judgement.findings for rule in f.rules), explain(
        judgement
    )


def check_passes(case: Case) -> None:
    judgement = verdict(case.passes())
    assert case.rule in judgement.passed, explain(judgement)


def check_undecided(case: Case) -> None:
    judgement = verdict(case.undecided())
    assert case.rule in judgement.not_assessable, explain(judgement)
    assert case.rule not in judgement.assessed, explain(judgement)
