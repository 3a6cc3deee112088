"""A probe case's verdict from its judgement with leniency told apart (MQTT 5.0, section 4.13.1), for the tests of the
case libraries: :func:`mqttaudit.probe.runner.decide`'s verdict, except that a case the broker broke nothing of, but
whose defect it accepted without being bound to detect it, is :data:`LENIENT`."""

from __future__ import annotations

from collections.abc import Sequence

from mqttaudit.codec import Direction
from mqttaudit.judge import Judgement, Leniency
from mqttaudit.judge.rules import RECEIVER_DUTIES_5_0
from mqttaudit.probe.case import Case
from mqttaudit.probe.outcome import FAIL
from mqttaudit.probe.runner import CaseResult, decide

LENIENT = "lenient"


def lenient_on(case: Case, entries: Sequence[Leniency]) -> bool:
    """The broker accepted, leniently, a defect of a rule the case targets."""
    targets = set(case.statements)
    return any(entry.side is Direction.FROM_SERVER and ({entry.rule, *entry.others} & targets) for entry in entries)


def verdict(case: Case, judgement: Judgement) -> str:
    decided = decide(case, judgement).verdict
    return LENIENT if decided != FAIL and lenient_on(case, judgement.lenient) else decided


def verdict_of(result: CaseResult) -> str:
    """The same for a case the runner ran."""
    return LENIENT if result.verdict != FAIL and lenient_on(result.case, result.lenient) else result.verdict


def accepting(case: Case) -> str:
    """The verdict of a broker that carries on as if the case's malformed or forbidden packet were good: a fail where
    a statement the case targets binds the server to detect the defect (every 3.1.1 case: MQTT-4.8.0-1), leniency
    otherwise."""
    if case.protocol.value != "5.0" or set(case.statements) & RECEIVER_DUTIES_5_0:
        return FAIL
    return LENIENT
