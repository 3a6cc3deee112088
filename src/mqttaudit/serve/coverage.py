"""Statement coverage of a serve run: of the normative statements that bind a client (72 in MQTT 3.1.1, 133 in
5.0), which ones the run's client connections exercised, and the verdict of each.

A statement is ``fail`` when a client finding cites it, ``pass`` when the conduct of a client connection of that
version decided it and none failed it (a statement binding both sides that only the broker's conduct decided is no
client's pass), ``not assessable`` (with the first reason) when connections met it but could not decide it, and
``not exercised`` otherwise: nothing the clients did touched it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from ..spec import load_catalogue
from .server import ServedClient

FAIL: Final = "fail"
PASS: Final = "pass"
NOT_ASSESSABLE: Final = "not assessable"
NOT_EXERCISED: Final = "not exercised"
VERSIONS: Final = ("3.1.1", "5.0")


@dataclass(frozen=True)
class StatementVerdict:
    statement: str
    level: str
    summary: str
    verdict: str
    #: Client connections whose judgement decided it; for a fail, those that failed it.
    connections: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class Coverage:
    version: str
    statements: tuple[StatementVerdict, ...]

    def count(self, verdict: str) -> int:
        return sum(1 for s in self.statements if s.verdict == verdict)

    @property
    def exercised(self) -> int:
        return len(self.statements) - self.count(NOT_EXERCISED)


def client_statements(version: str) -> list[tuple[str, str, str]]:
    """(id, level, summary) of every numbered statement of ``version`` that binds a client, in spec order."""
    return [
        (rule.id, rule.level, rule.summary)
        for rule in load_catalogue(version)
        if rule.origin == "statement" and rule.binds("client")
    ]


def coverage(clients: Iterable[ServedClient], version: str) -> Coverage:
    """The coverage of the client statements of ``version`` by the connections that spoke it."""
    failed: dict[str, list[str]] = {}
    decided: dict[str, list[str]] = {}
    undecided: dict[str, str] = {}
    for client in clients:
        judgement = client.judgement
        if judgement is None or client.version != version:
            continue
        for finding in client.client_findings:
            for rule in finding.rules:
                failed.setdefault(str(rule), []).append(client.name)
        for rule in judgement.client_assessed:
            decided.setdefault(str(rule), []).append(client.name)
        for rule, reason in judgement.not_assessable.items():
            undecided.setdefault(str(rule), reason)
    rows = []
    for statement, level, summary in client_statements(version):
        if statement in failed:
            rows.append(StatementVerdict(statement, level, summary, FAIL, tuple(dict.fromkeys(failed[statement]))))
        elif statement in decided:
            rows.append(StatementVerdict(statement, level, summary, PASS, tuple(dict.fromkeys(decided[statement]))))
        elif statement in undecided:
            rows.append(StatementVerdict(statement, level, summary, NOT_ASSESSABLE, reason=undecided[statement]))
        else:
            rows.append(StatementVerdict(statement, level, summary, NOT_EXERCISED))
    return Coverage(version, tuple(rows))
