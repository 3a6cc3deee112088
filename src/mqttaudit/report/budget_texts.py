"""The audit's three budgets (:mod:`mqttaudit.capture.budgets`) as the outputs name them: one row each, read by the
exit status, the terminal's lines and the reports' byte account."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

#: How a surface writes a count of a thing: ``(5, "packet")`` -> ``"5 packet(s)"`` or ``"5 packets"``.
Counter = Callable[[int, str], str]


@dataclass(frozen=True, slots=True)
class BudgetText:
    """One budget: its entry in ``summary.json``'s ``budgets``, its flag, its title, what its bound is per (the
    reports say it beside the bound), the counter that is not zero when it applied (it then left bytes unjudged),
    what happened then and what is said when it did not apply. ``happened`` names the budget ``{budget}`` and each
    counter by its key, its format spec the thing counted: ``{gaps_declared:gap}``."""

    key: str
    flag: str
    title: str
    per: str
    applied: str
    happened: str
    never: str

    def outcome(self, counters: Mapping[str, Any], counted: Counter, budget: str) -> str:
        """What the budget did, counted as ``counted`` writes counts, the budget named ``budget``."""
        return self.happened.format(budget=budget, **{k: _Count(v, counted) for k, v in counters.items()})


class _Count:
    """A counter's value, written by :meth:`str.format` as ``counted`` writes a count of the thing its spec names."""

    def __init__(self, value: Any, counted: Counter) -> None:
        self.value, self.counted = value, counted

    def __format__(self, thing: str) -> str:
        return self.counted(int(self.value or 0), thing) if thing else str(self.value)


BUDGET_TEXTS: Final = (
    BudgetText(
        "message",
        "--max-message-bytes",
        "per-message budget",
        "",
        "messages_skipped",
        "{messages_skipped:packet} above {budget}: {bytes_skipped:byte} skipped undecoded, not assessable",
        "No packet was above it.",
    ),
    BudgetText(
        "out_of_order",
        "--max-out-of-order-bytes",
        "out-of-order budget",
        " per direction",
        "gaps_declared",
        "{connections:connection} reached {budget}: {gaps_declared:gap} of {gap_bytes:byte} declared at it",
        "No connection reached it.",
    ),
    BudgetText(
        "flow",
        "--max-flow-bytes",
        "per-flow budget",
        "",
        "flows_stopped",
        "{flows_stopped:flow} stopped at {budget}: {segments_not_held:segment} with {bytes_not_held:payload byte} "
        "not held, not assessable",
        "No flow reached it.",
    ),
)


def applied_budgets(summary: Mapping[str, Any]) -> list[BudgetText]:
    """The budgets that applied in an audit (each left bytes unjudged), from its summary's counters."""
    counters = summary.get("budgets") or {}
    return [text for text in BUDGET_TEXTS if (counters.get(text.key) or {}).get(text.applied)]


def budget_lines(summary: Mapping[str, Any], counted: Counter) -> list[str]:
    """One line per budget that applied in an audit: what it did, the budget named by its bound and its flag."""
    counters = summary.get("budgets") or {}
    lines = []
    for text in applied_budgets(summary):
        budget = counters[text.key]
        bound = counted(int(budget.get("max_bytes", 0)), "byte")
        lines.append(text.outcome(budget, counted, f"the {text.title} of {bound} ({text.flag})"))
    return lines


def budget_notes(summary: Mapping[str, Any], counted: Counter) -> list[tuple[str, str, str]]:
    """(title, policy, what it did) of each budget the summary holds, applied or not."""
    counters = summary.get("budgets") or {}
    notes = []
    for text in BUDGET_TEXTS:
        budget = counters.get(text.key)
        if not budget:
            continue
        title = f"{text.title.capitalize()} ({counted(int(budget.get('max_bytes', 0)), 'byte')}{text.per})"
        did = f"{text.outcome(budget, counted, 'it')}." if budget.get(text.applied) else text.never
        notes.append((title, str(budget.get("policy", "")), did))
    return notes
