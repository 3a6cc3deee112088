"""The audit's three budgets (:mod:`mqttaudit.capture.budgets`) as the outputs name them: one row each, read by the
exit status and the terminal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class BudgetText:
    """One budget: its entry in ``summary.json``'s ``budgets``, its flag, its title, and the counter that is not
    zero when it applied (it then left bytes unjudged)."""

    key: str
    flag: str
    title: str
    applied: str


BUDGET_TEXTS: Final = (
    BudgetText("message", "--max-message-bytes", "per-message budget", "messages_skipped"),
    BudgetText("out_of_order", "--max-out-of-order-bytes", "out-of-order budget", "gaps_declared"),
    BudgetText("flow", "--max-flow-bytes", "per-flow budget", "flows_stopped"),
)


def applied_budgets(summary: Mapping[str, Any]) -> list[BudgetText]:
    """The budgets that applied in an audit (each left bytes unjudged), from its summary's counters."""
    counters = summary.get("budgets") or {}
    return [text for text in BUDGET_TEXTS if (counters.get(text.key) or {}).get(text.applied)]
