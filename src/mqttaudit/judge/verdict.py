"""What the judge concludes: findings, the rules it could and could not decide, and the ledger that collects them.

A rule passes only when every instance a conversation exercised was decided and none failed: one instance that
could not be decided makes the rule *not assessable* (unless another instance failed), never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mqttaudit.codec import Direction
from mqttaudit.spec import identity, registry

#: The kinds of routing finding.
LEAK = "leak"
MISSING = "missing"
DUPLICATE = "duplicate"
QOS = "qos"


def binds(rule: str, side: Direction) -> bool:
    """Whether the statement ``rule`` (a registry id) binds ``side``: its actor is that side or both. A finding
    against a side cites only a statement that binds it; a rule outside the MQTT catalogues binds whoever it names."""
    entry = registry.rule_of(rule, identity.V3_1_1)
    return entry is None or entry.binds("client" if side is Direction.FROM_CLIENT else "server")


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule: the statement id, the side at fault, and the event that shows it."""

    #: The statement broken, in the version the conversation speaks: a registry id
    #: (:class:`mqttaudit.spec.registry.StatementId`) whose ``version`` and ``rule`` give its text, level and section.
    #: (The AMQP checks of the probe name their own rules, outside the MQTT catalogues.)
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
    #: For a missing answer or close, the event that called for it (the unanswered request, the violation); -1
    #: when the finding has no such cause or ``event`` is that packet itself.
    cause: int = -1


@dataclass(frozen=True, slots=True)
class Undecided:
    """One instance of a rule the events could not decide, and why: the side it concerned and the event that
    called for it, when there is one."""

    rule: str
    reason: str
    #: The side whose conduct could not be judged (None: the rule concerns the conversation, or either side).
    side: Direction | None = None
    #: The event that opened the question (the request, the violation), -1 when none does.
    event: int = -1
    time: float | None = None
    conversation: str = ""


@dataclass(frozen=True, slots=True)
class Leniency:
    """A receiver accepted a packet (did not close on it, or acted on it) that broke a rule the receiver was not
    bound to detect: MQTT 5.0 binds a Server to close on a Malformed Packet or Protocol Error "when" it detects one
    [MQTT-4.13.1-1] and calls the rigour of checking a compromise (section 4.13.1). Not a failure of the receiver:
    its own class, counted apart (``--strict`` makes it fail a probe run)."""

    #: The statement the offending packet broke (its sender's), in the version the conversation speaks.
    rule: str
    #: The receiver that accepted it.
    side: Direction
    time: float
    #: The event that shows the acceptance (the answer, or the offending packet when nothing followed but silence).
    event: int
    #: What was accepted and how, concretely.
    detail: str
    #: Why the receiver was not bound to detect it, from the text of the version (the basis of the verdict).
    basis: str
    conversation: str = ""
    #: The offending packet's event, -1 when ``event`` is that packet itself.
    cause: int = -1
    #: The other statements the same packet broke (its sender's), in the version the conversation speaks: one act,
    #: one entry, under ``rule``.
    others: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judgement:
    findings: tuple[Finding, ...]
    #: Rules the conversation exercised and could decide: pass = assessed and no finding.
    assessed: frozenset[str]
    #: Rule -> why it could not be decided (the first reason; every instance is in ``undecided``).
    not_assessable: Mapping[str, str]
    #: Every instance that could not be decided, rules that failed elsewhere included, in the order met.
    undecided: tuple[Undecided, ...] = ()
    #: Malformed packets and Protocol Errors accepted by a receiver not bound to detect them (not failures).
    lenient: tuple[Leniency, ...] = ()

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
    rows = tuple({row: None for part in parts for row in part.undecided})
    lenient = tuple({row: None for part in parts for row in part.lenient})
    return Judgement(tuple(findings), frozenset(assessed), MappingProxyType(undecided), rows, lenient)


@dataclass
class Ledger:
    """Collects, per rule, the instances a conversation decided (pass or finding) and those it could not.

    Checks name rules by key (see :mod:`mqttaudit.spec.identity`); the ledger records each under the statement id of
    the connection's ``version``, and leaves out a rule that version does not state."""

    conversation: str = ""
    #: The protocol version the conversation speaks ("3.1.1" until a CONNECT says otherwise).
    version: str = identity.V3_1_1
    findings: list[Finding] = field(default_factory=list)
    held_rules: set[str] = field(default_factory=set)
    undecided_rules: dict[str, str] = field(default_factory=dict)
    undecided_rows: dict[Undecided, None] = field(default_factory=dict)
    lenient_rows: dict[Leniency, None] = field(default_factory=dict)

    def fail(
        self,
        rule: str,
        side: Direction,
        time: float,
        event: int,
        detail: str,
        expected: str,
        kind: str = "",
        cause: int = -1,
    ) -> Finding | None:
        """One instance of ``rule`` failed; None when the conversation's version does not state the rule, or the
        rule does not bind ``side`` (see :func:`binds`)."""
        named = identity.statement_id(rule, self.version)
        if named is None:
            return None
        if not binds(named, side):
            # The other side's rule, broken by the packet this side received: this side is charged with its own
            # duty toward that packet (the close, not acting on it), which the caller fails beside it.
            return None
        finding = Finding(named, side, time, event, detail, expected, self.conversation, kind, cause)
        self.findings.append(finding)
        return finding

    def held(self, rule: str, side: Direction | None = None) -> None:
        """One instance of ``rule`` was decided and passed (by ``side``, when one side's conduct decided it: not
        recorded when the rule does not bind that side, as :meth:`fail` records no such finding)."""
        named = identity.statement_id(rule, self.version)
        if named is not None and (side is None or binds(named, side)):
            self.held_rules.add(named)

    def undecided(
        self,
        rule: str,
        reason: str,
        *,
        side: Direction | None = None,
        event: int = -1,
        time: float | None = None,
        conversation: str | None = None,
    ) -> None:
        """One instance of ``rule`` could not be decided: a row for it (once per rule, event and reason); the
        rule's first reason is its reason in ``not_assessable``."""
        named = identity.statement_id(rule, self.version)
        if named is None or (side is not None and not binds(named, side)):
            return
        rule = named
        self.undecided_rules.setdefault(rule, reason)
        where = self.conversation if conversation is None else conversation
        self.undecided_rows.setdefault(Undecided(rule, reason, side, event, time, where))

    def lenient(
        self,
        rule: str,
        side: Direction,
        time: float,
        event: int,
        detail: str,
        basis: str,
        cause: int = -1,
        others: tuple[str, ...] = (),
    ) -> Leniency | None:
        """A receiver accepted a packet breaking ``rule`` (a key), and ``others``, that it was not bound to detect;
        None when the conversation's version does not state the rule."""
        named = identity.statement_id(rule, self.version)
        if named is None:
            return None
        also = (identity.statement_id(other, self.version) for other in others)
        rest = tuple(dict.fromkeys(other for other in also if other is not None and other != named))
        row = Leniency(named, side, time, event, detail, basis, self.conversation, cause, rest)
        self.lenient_rows.setdefault(row)
        return row

    def judgement(self) -> Judgement:
        part = Judgement(
            (),
            frozenset(self.held_rules),
            MappingProxyType(dict(self.undecided_rules)),
            tuple(self.undecided_rows),
            tuple(self.lenient_rows),
        )
        return combine([part, Judgement(tuple(self.findings), frozenset(), MappingProxyType({}))])
