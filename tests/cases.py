"""Rule cases for the judge: for each rule it decides, a conversation that breaks it, one that keeps it and one
that cannot decide it. Every test module of the judge holds a table of them; one test runs each column."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mqttaudit import codec
from mqttaudit.judge import Judgement, judge, judge_scenario

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
    lines.append(f"passed: {sorted(judgement.passed)}")
    lines += [f"not assessable {rule}: {why}" for rule, why in sorted(judgement.not_assessable.items())]
    return "\n".join(lines)


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
