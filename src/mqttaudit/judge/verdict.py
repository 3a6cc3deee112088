"""What the judge concludes: findings, the rules it could and could not decide, and the ledger that collects them.

A rule passes only when every instance a conversation exercised was decided and none failed: one instance that
could not be decided makes the rule *not assessable* (unless another instance failed), never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mqttaudit.codec import Direction

#: The kinds of routing finding.
LEAK = "leak"
MISSING = "missing"
DUPLICATE = "duplicate"
QOS = "qos"


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule: the statement id, the side at fault, and the event that shows it."""

    rule: str
    side: Direction
    time: float
    #: Index of the event that shows it (evidence), in the conversation named by ``conversation``.
    event: int
    #: What was observed, concretely (packet ids, codes, seconds).
    detail: str
    #: What the spec requires here, in one line.
    expected: str
    #: The conversation the event index refers to ("" for a lone conversation).
    conversation: str = ""
    #: For routing findings, what went wrong with a delivery: ``leak`` (delivered, should not have been),
    #: ``missing``, ``duplicate`` or ``qos``; "" for every other finding.
    kind: str = ""


@dataclass(frozen=True)
class Judgement:
    findings: tuple[Finding, ...]
    #: Rules the conversation exercised and could decide: pass = assessed and no finding.
    assessed: frozenset[str]
    #: Rule -> why it could not be decided.
    not_assessable: Mapping[str, str]

    @property
    def failed(self) -> frozenset[str]:
        return frozenset(finding.rule for finding in self.findings)

    @property
    def passed(self) -> frozenset[str]:
        return self.assessed - self.failed


def _order(finding: Finding) -> tuple[float, str, int, str]:
    return (finding.time, finding.conversation, finding.event, finding.rule)


def combine(judgements: Iterable[Judgement]) -> Judgement:
    """One judgement over several: a rule that passed in one and could not be decided in another is not
    assessable; a rule that failed anywhere failed."""
    parts = list(judgements)
    findings = sorted({f: None for part in parts for f in part.findings}, key=_order)
    failed = {finding.rule for finding in findings}
    undecided: dict[str, str] = {}
    for part in parts:
        for rule, reason in part.not_assessable.items():
            if rule not in failed:
                undecided.setdefault(rule, reason)
    assessed = {rule for part in parts for rule in part.assessed} - undecided.keys() | failed
    return Judgement(tuple(findings), frozenset(assessed), MappingProxyType(undecided))


@dataclass
class Ledger:
    """Collects, per rule, the instances a conversation decided (pass or finding) and those it could not."""

    conversation: str = ""
    findings: list[Finding] = field(default_factory=list)
    held_rules: set[str] = field(default_factory=set)
    undecided_rules: dict[str, str] = field(default_factory=dict)

    def fail(
        self, rule: str, side: Direction, time: float, event: int, detail: str, expected: str, kind: str = ""
    ) -> Finding:
        finding = Finding(rule, side, time, event, detail, expected, self.conversation, kind)
        self.findings.append(finding)
        return finding

    def held(self, rule: str) -> None:
        """One instance of ``rule`` was decided and passed."""
        self.held_rules.add(rule)

    def undecided(self, rule: str, reason: str) -> None:
        """One instance of ``rule`` could not be decided; the first reason given is kept."""
        self.undecided_rules.setdefault(rule, reason)

    def judgement(self) -> Judgement:
        part = Judgement((), frozenset(self.held_rules), MappingProxyType(dict(self.undecided_rules)))
        return combine([part, Judgement(tuple(self.findings), frozenset(), MappingProxyType({}))])
