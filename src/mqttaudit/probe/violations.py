"""What the broker broke outside the statements of the cases that saw it, over a whole run: grouped by rule, every
act (one finding) counted, every case named, never hidden. A MUST-level one fails the run (see :mod:`.outcome`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..judge import Finding
from ..spec import Catalogue, load_catalogue
from .runner import CaseResult, ProbeRun, count_acts, finding_to_dict, owed


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

    @property
    def counted(self) -> bool:
        """Whether it fails the run: a MUST-level act that the baseline does not know."""
        return self.level == "MUST" and not self.known and not self.owed

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "protocol": self.protocol,
            "level": self.level,
            "section": self.section,
            "summary": self.summary,
            "side": self.first.side.value,
            "owed": self.owed,
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
    groups: dict[tuple[str, str, bool], tuple[list[str], list[int], Finding]] = {}
    levels: dict[tuple[str, str], tuple[str, str, str]] = {}
    known = run.baseline.violations if run.baseline is not None else frozenset()
    for result in run.results:
        acts, owed_answers = result.other_acts, result.other_owed
        if not (acts or owed_answers):  # a result not made by run_case: its findings were never cut
            acts = count_acts(f for f in result.other_findings if not owed(f))
            owed_answers = count_acts(f for f in result.other_findings if owed(f))
        counts = {(rule, False): n for rule, n in acts.items()} | {(rule, True): n for rule, n in owed_answers.items()}
        firsts: dict[tuple[str, bool], Finding] = {}
        for finding in result.other_findings:
            firsts.setdefault((finding.rule, owed(finding)), finding)
        version = result.case.protocol.value
        for (rule, is_owed), count in counts.items():
            if (rule, is_owed) not in firsts:
                continue
            cases, total, _ = groups.setdefault((rule, version, is_owed), ([], [0], firsts[rule, is_owed]))
            cases.append(result.case.id)
            total[0] += count
            if (rule, version) not in levels:
                entry = _catalogue_of(result, catalogue).get(rule)
                levels[rule, version] = (
                    (entry.level, entry.section, entry.summary) if entry is not None else ("MUST", "unknown", "")
                )
    found = [
        OtherViolation(
            rule, *levels[rule, version], total[0], tuple(cases), first, cases[0], rule in known, is_owed, version
        )
        for (rule, version, is_owed), (cases, total, first) in groups.items()
    ]
    return sorted(found, key=lambda v: (not v.counted, v.level != "MUST", -v.acts, v.rule, v.protocol))


def not_counted(violation: OtherViolation) -> str:
    """Why a violation does not fail the run, in a few words ("" when it does)."""
    if violation.owed:
        return "owed and not given within the deadline of a case that does not target it; it does not fail the run"
    if violation.level != "MUST":
        return f"{violation.level}-level: it does not fail the run"
    return "known to the baseline: it does not fail the run" if violation.known else ""


def _catalogue_of(result: CaseResult, catalogue: Catalogue) -> Catalogue:
    """The catalogue of the version a case spoke: the run's, unless that is the other MQTT version's."""
    version = result.case.protocol.value
    if catalogue.version != version and catalogue.version in ("3.1.1", "5.0"):
        return load_catalogue(version)
    return catalogue
