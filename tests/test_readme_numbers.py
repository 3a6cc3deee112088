"""Every number the README states about the project is the project's: case counts, rule and statement counts, the
tables' sizes, read from the library itself; timings name their machine and the command that measured them. (The
commands it shows run in test_readme.py.)"""

from __future__ import annotations

import itertools
import re
import shlex

import pytest

from mqttaudit.cli.rules import checked_by
from mqttaudit.codec.properties import PROPERTIES
from mqttaudit.codec.reason_codes import REASON_CODES
from mqttaudit.probe.case import CASES
from mqttaudit.probe.selection import parse_protocol, select_cases
from mqttaudit.spec import load_catalogue

from .test_readme import README, section, shown_commands

#: The summary line of a probe run: "<target>: N cases in T s: N pass, N fail, ...".
SUMMARY = re.compile(r"^\S+: (\d+) cases in [\d.]+ s: (.*)$")


def stated(pattern: str, text: str = README) -> tuple[int, ...]:
    """The numbers ``pattern`` (a regular expression with a group per number) finds in the README, exactly once."""
    found = re.findall(pattern, text)
    assert len(found) == 1, f"{pattern!r} is in the README {len(found)} times, not once"
    groups = found[0] if isinstance(found[0], tuple) else (found[0],)
    return tuple(int(g.replace(",", "")) for g in groups)


def numbered(version: str) -> list[str]:
    return [rule.id for rule in load_catalogue(version) if rule.origin == "statement"]


def probed(version: str) -> int:
    """Numbered statements of ``version`` that a probe case covers, as ``mqttaudit rules`` counts them."""
    return sum("probe" in checked_by(rule) for rule in load_catalogue(version) if rule.origin == "statement")


def test_the_rule_and_statement_counts_are_the_catalogues() -> None:
    assert stated(r"`mqttaudit rules` lists all (\d+) rules") == (len(load_catalogue("3.1.1")),)
    assert stated(r"MQTT 5\.0 catalogue holds the (\d+)\s+numbered statements") == (len(numbered("5.0")),)
    assert stated(r"numbered normative statement of MQTT 3\.1\.1 \((\d+),") == (len(numbered("3.1.1")),)


def test_the_probe_coverage_the_readme_states_is_what_rules_counts() -> None:
    assert stated(r"\((\d+) of the (\d+) numbered statements of 3\.1\.1, (\d+) of the (\d+) of 5\.0\)") == (
        probed("3.1.1"),
        len(numbered("3.1.1")),
        probed("5.0"),
        len(numbered("5.0")),
    )


def test_the_codec_tables_have_the_sizes_the_readme_states() -> None:
    assert stated(r"one table of the (\d+) property identifiers") == (len(PROPERTIES),)
    assert stated(r"one table of the (\d+) codes") == (len(REASON_CODES),)


def probe_selection(command: str) -> int:
    """How many cases the README's ``mqttaudit probe ...`` command selects, read from its options."""
    argv = shlex.split(command)
    cases = [value for option, value in itertools.pairwise(argv) if option == "--cases"]
    skip = [value for option, value in itertools.pairwise(argv) if option == "--skip"]
    protocol = next((value for option, value in itertools.pairwise(argv) if option == "--protocol"), None)
    return len(select_cases(cases or None, skip or None, protocol=parse_protocol(protocol or "all")))


def probe_summaries() -> list[tuple[str, str]]:
    """(command, the summary line it is shown printing) for every probe run the README shows the output of."""
    found = []
    for command, _status, output in shown_commands():
        if command.split()[1] == "probe" and output and SUMMARY.match(output[0]):
            found.append((command, output[0]))
    return found


def test_every_probe_run_shown_has_the_case_count_of_its_selection() -> None:
    summaries = probe_summaries()
    assert len(summaries) >= 2  # the whole library, and the CI example's selection
    for command, line in summaries:
        match = SUMMARY.match(line)
        assert match, line
        assert int(match.group(1)) == probe_selection(command), f"{command}\n{line}"


def test_the_verdicts_of_a_probe_run_shown_add_up_to_its_cases() -> None:
    for _command, line in probe_summaries():
        match = SUMMARY.match(line)
        assert match, line
        counts = {verdict: int(n) for n, verdict in re.findall(r"(\d+) ([a-z-]+)", match.group(2))}
        assert set(counts) == {"pass", "fail", "inconclusive", "not-applicable", "lenient"}, line
        assert sum(counts.values()) == int(match.group(1)), line


def test_the_probe_benchmark_names_the_library_it_measured_and_the_library_now() -> None:
    """The probe timings are a measurement of their day: the README names the cases each run had, and how many the
    library has now, so a reader can tell whether they still describe it."""
    bench = section("Performance").split("### The probe", 1)[1].split("\n### ", 1)[0]
    now = stated(r"the library now has (\d+) MQTT\s+3\.1\.1 and (\d+) MQTT\s+5\.0\s+cases", bench)
    assert now == tuple(sum(case.protocol.value == v for case in CASES.values()) for v in ("3.1.1", "5.0"))


@pytest.mark.parametrize(
    "heading",
    ["## Setup", "### Running", "## Performance", "### Transport layers", "### The probe", "### The whole audit"],
)
def test_every_timing_names_its_machine_and_how_to_measure_it(heading: str) -> None:
    start = README.index(f"\n{heading}")
    part = README[start : README.find("\n#", start + len(heading) + 2)]
    assert re.search(r"\d+(\.\d+)? ?(s|minutes|packets/s|MB/s)\b", part), f"{heading}: no timing here any more"
    assert re.search(r"\d+-core", part), f"{heading}: a timing without the machine it was measured on"
    measured_by = r"`(make bench|make test|make demo|CI=true bash \.ci/run|[^`]*bench/[a-z_]+\.py[^`]*)`"
    assert re.search(measured_by, part), f"{heading}: a timing without the command that measures it"
