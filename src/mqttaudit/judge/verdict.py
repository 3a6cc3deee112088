"""What the judge concludes: findings, the rules it could and could not decide, and the ledger that collects them.

A rule passes only when every instance a conversation exercised was decided and none failed: one instance that
could not be decided makes the rule *not assessable* (unless another instance failed), never a pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
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
    return _binds(str(rule), _own_version(rule), side)


def _own_version(rule: str) -> str | None:
    own = getattr(rule, "version", None)
    return own if isinstance(own, str) else None


def _as_key(text: str, version: str | None) -> str:
    """The key or id :func:`binds` and :meth:`Ledger.held` were given, back from its text and its own version."""
    return text if version is None else registry.StatementId(text, version)


@lru_cache(maxsize=8192)
def _binds(text: str, version: str | None, side: Direction) -> bool:
    """:func:`binds` of the id ``text`` of ``version``: a pure function of its arguments, asked for every rule
    decided (millions of times in an audit's judging and routing replay), so remembered."""
    entry = registry.rule_of(_as_key(text, version), identity.V3_1_1)
    return entry is None or entry.binds("client" if side is Direction.FROM_CLIENT else "server")


@lru_cache(maxsize=8192)
def _held_as(text: str, key_version: str | None, version: str, side: Direction | None) -> tuple[str | None, bool]:
    """What :meth:`Ledger.held` records for the key ``text`` (of ``key_version``) in a conversation of ``version``
    decided by ``side``: the statement id (None: not recorded) and whether the client's conduct decided it."""
    named = identity.statement_id(_as_key(text, key_version), version)
    if named is None or (side is not None and not binds(named, side)):
        return None, False
    client = side is Direction.FROM_CLIENT or (side is None and not binds(named, Direction.FROM_SERVER))
    return named, client


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
    #: The other statements the same act breaks (one act, one finding): failed with ``rule``, without a finding of
    #: their own. ``rule`` is the most specific statement of the act (see :meth:`Ledger.fail`).
    also: tuple[str, ...] = ()

    @property
    def rules(self) -> tuple[str, ...]:
        """Every statement the act breaks: the one cited first, then the others."""
        return (self.rule, *self.also)

    @property
    def act(self) -> tuple[str, int, Direction, int, str]:
        """What identifies the act: the conversation, the event that shows it, the side, the event that called
        for it, and the kind of routing finding."""
        return (self.conversation, self.event, self.side, self.cause, self.kind)


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

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        rule: str,
        reason: str,
        side: Direction | None = None,
        event: int = -1,
        time: float | None = None,
        conversation: str = "",
    ) -> None:
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "side", side)
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "conversation", conversation)


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
    #: The rules of ``assessed`` that the client's own conduct decided (a rule binding both sides may have been
    #: decided by the server's alone): what a client's statement coverage counts.
    client_assessed: frozenset[str] = frozenset()

    def __init__(  # written out: the compiled build runs it natively (a generated __init__ is interpreted)
        self,
        findings: tuple[Finding, ...],
        assessed: frozenset[str],
        not_assessable: Mapping[str, str],
        undecided: tuple[Undecided, ...] = (),
        lenient: tuple[Leniency, ...] = (),
        client_assessed: frozenset[str] = frozenset(),
    ) -> None:
        object.__setattr__(self, "findings", findings)
        object.__setattr__(self, "assessed", assessed)
        object.__setattr__(self, "not_assessable", not_assessable)
        object.__setattr__(self, "undecided", undecided)
        object.__setattr__(self, "lenient", lenient)
        object.__setattr__(self, "client_assessed", client_assessed)

    @property
    def failed(self) -> frozenset[str]:
        """Every statement a finding cites or records as broken by the same act."""
        return frozenset(rule for finding in self.findings for rule in finding.rules)

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
    failed = {rule for finding in findings for rule in finding.rules}
    undecided: dict[str, str] = {}
    for part in parts:
        for rule, reason in part.not_assessable.items():
            if rule not in failed:
                undecided.setdefault(rule, reason)
    assessed = {rule for part in parts for rule in part.assessed} - undecided.keys() | failed
    rows = tuple({row: None for part in parts for row in part.undecided})
    lenient = tuple({row: None for part in parts for row in part.lenient})
    by_client = {rule for part in parts for rule in part.client_assessed} & assessed
    by_client |= {rule for finding in findings if finding.side is Direction.FROM_CLIENT for rule in finding.rules}
    return Judgement(
        tuple(findings), frozenset(assessed), MappingProxyType(undecided), rows, lenient, frozenset(by_client)
    )


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
    #: The held rules the client's conduct decided.
    client_held: set[str] = field(default_factory=set)
    undecided_rules: dict[str, str] = field(default_factory=dict)
    undecided_rows: dict[Undecided, None] = field(default_factory=dict)
    lenient_rows: dict[Leniency, None] = field(default_factory=dict)
    #: The index in ``findings`` of each act's finding, by the act and its description (see :meth:`fail`).
    _acts: dict[tuple[int, Direction, int, str, str], int] = field(default_factory=dict, repr=False)

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
        also: Iterable[str] = (),
    ) -> Finding | None:
        """One act broke ``rule`` and, by the same act, the statements ``also`` names: one finding citing ``rule``
        (the most specific statement of the act: the caller names it first), the others recorded as failed with it
        (:attr:`Finding.also`), never as findings of their own. Statements the conversation's version does not
        state are left out, and so are those that do not bind ``side`` (see :func:`binds`): the other side's rules,
        broken by the packet this side received, are not this side's to break (it is charged with its own duty
        toward that packet: the close, not acting on it). None when no statement is left.

        One act, one finding: a call for an act already reported (the same event, side, cause, kind and detail:
        the same thing seen the same way) adds its statements to that act's finding instead of another finding."""
        stated = (identity.statement_id(key, self.version) for key in (rule, *also))
        named = [n for n in stated if n is not None and binds(n, side)]
        if not named:
            return None
        act = (event, side, cause, kind, detail)
        index = self._acts.get(act)
        if index is not None:
            known = self.findings[index]
            more = tuple(n for n in dict.fromkeys(named) if n not in known.rules)
            if not more:
                return known
            said = known.expected if expected in known.expected else f"{known.expected}; {expected}"
            merged = replace(known, also=(*known.also, *more), expected=said)
            self.findings[index] = merged
            return merged
        cited, *others = dict.fromkeys(named)
        finding = Finding(cited, side, time, event, detail, expected, self.conversation, kind, cause, tuple(others))
        self._acts[act] = len(self.findings)
        self.findings.append(finding)
        return finding

    def held(self, rule: str, side: Direction | None = None) -> None:
        """One instance of ``rule`` was decided and passed (by ``side``, when one side's conduct decided it: not
        recorded when the rule does not bind that side, as :meth:`fail` records no such finding)."""
        named, client = _held_as(str(rule), _own_version(rule), self.version, side)
        if named is not None:
            self.held_rules.add(named)
            if client:
                self.client_held.add(named)

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
            frozenset(self.client_held),
        )
        return combine([part, Judgement(tuple(self.findings), frozenset(), MappingProxyType({}))])
