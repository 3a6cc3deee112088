"""What the broker broke outside the statements of the cases that saw it, over a whole run: grouped by rule, every
act (one finding) counted, every case named, never hidden. A MUST-level one fails the run (see :mod:`.outcome`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..judge import Finding
from ..spec import Catalogue
from .runner import ACT, AFTER_MALFORMED, OWED, ProbeRun, count_acts, finding_to_dict, other_kind
from .statements import case_catalogue


@dataclass(frozen=True)
class OtherViolation:
    """One rule the broker broke outside the statements of the cases that saw it, over the whole run: every act
    (one finding) counted, every case it was seen in named, the first finding kept as the example."""

    rule: str
    #: MUST, SHOULD or MAY in the catalogue of the version the cases spoke (an uncatalogued rule counts as MUST).
    level: str
    section: str
    summary: str
    acts: int
    #: The ids of the cases whose conversations show it, in run order.
    cases: tuple[str, ...]
    #: The first case's first finding of it, and that case.
    first: Finding
    first_case: str
    #: Known to the baseline (a rule its run saw broken too): listed, but it does not fail the run.
    known: bool = False
    #: Answers or closes the broker owed and did not give within a case's deadline, rather than acts: the case's
    #: deadline was set for its own statements, not this one, so they are listed but do not fail the run (a case
    #: that could not go on for want of them is inconclusive with that reason).
    owed: bool = False
    #: The MQTT version the cases that saw it spoke ("3.1.1", "5.0"), whose statement the id names.
    protocol: str = ""
    #: Acts after a malformed packet of the prober that the broker did not close on (each case's own failure):
    #: they follow from the broker's reading of that packet, which is not the judge's, so they do not fail the run.
    after_malformed: bool = False

    @property
    def counted(self) -> bool:
        """Whether it fails the run: a MUST-level act that the baseline does not know."""
        return self.level == "MUST" and not self.known and not self.owed and not self.after_malformed

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "protocol": self.protocol,
            "level": self.level,
            "section": self.section,
            "summary": self.summary,
            "side": self.first.side.value,
            "owed": self.owed,
            "after_malformed": self.after_malformed,
            "acts": self.acts,
            "cases": list(self.cases),
            "first": {"case": self.first_case, **finding_to_dict(self.first)},
            "known": self.known,
            "counted": self.counted,
        }


def other_violations(run: ProbeRun, catalogue: Catalogue) -> list[OtherViolation]:
    """The rules the broker broke that the cases seeing them do not target, one entry per rule of each protocol
    version (5.0 renumbers 3.1.1's statements; acts and owed answers apart; counted ones first, then most acts):
    the same behaviour in many cases is grouped, with the count of its acts, never hidden. A case that targets the
    rule reports it as its own failure instead."""
    groups: dict[tuple[str, str, str], tuple[list[str], list[int], Finding]] = {}
    levels: dict[tuple[str, str], tuple[str, str, str]] = {}
    known = run.baseline.violations if run.baseline is not None else frozenset()
    for result in run.results:
        kinds = [(finding, other_kind(finding, result.malformed_at)) for finding in result.other_findings]
        by_kind = {ACT: result.other_acts, OWED: result.other_owed, AFTER_MALFORMED: result.other_after}
        if not any(by_kind.values()):  # a result not made by run_case: its findings were never cut
            by_kind = {kind: count_acts(f for f, k in kinds if k == kind) for kind in by_kind}
        firsts: dict[tuple[str, str], Finding] = {}
        for finding, kind in kinds:
            firsts.setdefault((finding.rule, kind), finding)
        version = result.case.protocol.value
        for kind, acts in by_kind.items():
            for rule, count in acts.items():
                if (rule, kind) not in firsts:
                    continue
                cases, total, _ = groups.setdefault((rule, version, kind), ([], [0], firsts[rule, kind]))
                cases.append(result.case.id)
                total[0] += count
                if (rule, version) not in levels:
                    entry = case_catalogue(result.case, catalogue).get(rule)
                    levels[rule, version] = (
                        (entry.level, entry.section, entry.summary) if entry is not None else ("MUST", "unknown", "")
                    )
    found = [
        OtherViolation(
            rule,
            *levels[rule, version],
            total[0],
            tuple(cases),
            first,
            cases[0],
            rule in known,
            kind == OWED,
            version,
            kind == AFTER_MALFORMED,
        )
        for (rule, version, kind), (cases, total, first) in groups.items()
    ]
    return sorted(found, key=lambda v: (not v.counted, v.level != "MUST", -v.acts, v.rule, v.protocol))


def not_counted(violation: OtherViolation) -> str:
    """Why a violation does not fail the run, in a few words ("" when it does)."""
    if violation.owed:
        return "owed and not given within the deadline of a case that does not target it; it does not fail the run"
    if violation.after_malformed:
        return (
            "after a malformed packet of the prober that the broker did not close on (that case's failure or "
            "leniency), it follows from the broker's reading of the packet; it does not fail the run"
        )
    if violation.level != "MUST":
        return f"{violation.level}-level: it does not fail the run"
    return "known to the baseline: it does not fail the run" if violation.known else ""
