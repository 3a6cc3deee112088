"""The case library, without a broker: every case names real statements, and together they cover at least 80."""

from __future__ import annotations

import json

import pytest

from mqttaudit.cli.main import main
from mqttaudit.cli.probe import select_cases
from mqttaudit.codec import Direction, StreamDecoder
from mqttaudit.judge import CHECKED_RULES
from mqttaudit.judge import rules as judge_rules
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.cases.malformed import STIMULI, provoked, targeted
from mqttaudit.probe.connection import client_frames
from mqttaudit.spec import load_catalogue

CATALOGUE = load_catalogue("3.1.1")
#: The statements that oblige the receiver of a malformed or forbidden packet to close the connection (the registry's
#: receiver duties), and the refusal of an unsupported level (CONNACK 0x01, then close).
CLOSE_RULES = judge_rules.RECEIVER_DUTIES | {judge_rules.UNSUPPORTED_PROTOCOL_LEVEL}


def numbered(statements: set[str]) -> set[str]:
    return {s for s in statements if CATALOGUE[s].origin == "statement"}


def test_every_case_targets_statements_of_the_catalogue() -> None:
    for case in CASES.values():
        assert case.statements, case.id
        unknown = [s for s in case.statements if s not in load_catalogue(case.protocol.value)]
        assert not unknown, f"{case.id} targets unknown ids {unknown}"
        assert case.title and case.stimulus and case.expected, case.id


def test_the_library_covers_at_least_65_numbered_statements() -> None:
    """Numbered statements the 3.1.1 cases judge a broker on (the Client's they provoke are not among them)."""
    covered = numbered({s for case in CASES.values() if case.protocol.value == "3.1.1" for s in case.statements})
    assert len(covered) >= 65, sorted(covered)


def test_every_malformed_stimulus_really_breaks_what_its_case_targets() -> None:
    for stimulus in STIMULI:
        frames, _begun = client_frames(StreamDecoder(Direction.FROM_CLIENT), stimulus.data)
        broken = {v.rule for frame in frames for v in frame.violations}
        statements = targeted(stimulus)
        if judge_rules.UNSUPPORTED_PROTOCOL_LEVEL in statements:  # well-formed, but of a level 3.1.1 is not
            broken = {judge_rules.UNSUPPORTED_PROTOCOL_LEVEL}
        elif not stimulus.as_connect or stimulus.data[0] >> 4 == 1:
            assert broken, f"{stimulus.case_id}: the stimulus decodes cleanly"
        else:  # a valid packet other than CONNECT opening the connection
            broken = {"MQTT-3.1.0-1"}
        close_rules = set(statements) & CLOSE_RULES
        assert close_rules, f"{stimulus.case_id}: no statement obliges the broker to close"
        # what it breaks is judged (a rule that binds the broker too) or provoked (the Client's alone)
        assert broken & {*statements, *provoked(stimulus)}, stimulus.case_id


def test_every_case_targets_only_statements_the_judge_decides() -> None:
    """A targeted statement the judge cannot decide would leave its case inconclusive on every broker."""
    for case in CASES.values():
        if case.protocol.value != "3.1.1":
            continue  # the judge's 5.0 rules are judged by tests of their own
        assert set(case.statements) <= CHECKED_RULES, (case.id, sorted(set(case.statements) - CHECKED_RULES))


def test_select_cases_by_id_glob_and_by_statement() -> None:
    assert [c.id for c in select_cases("malformed/subscribe-empty-filter")] == ["malformed/subscribe-empty-filter"]
    by_statement = select_cases("MQTT-4.7.3-1")
    assert by_statement and all("MQTT-4.7.3-1" in c.statements for c in by_statement)
    assert {c.id for c in select_cases("retain/*")} == {c for c in CASES if c.startswith("retain/")}


def test_probe_list_json_gives_id_and_statements(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == len(CASES)
    assert all(isinstance(row["id"], str) and row["statements"] for row in rows)


def test_rules_show_probe_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--format", "json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert "probe" in rows["MQTT-3.12.4-1"]["checked_by"]
    assert "probe" not in rows["MQTT-7.1.2-1"]["checked_by"]


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [("mqtt://127.0.0.1:1884", "127.0.0.1", 1884), ("localhost", "localhost", 1883), ("mqtt://[::1]:9", "::1", 9)],
)
def test_targets_parse(text: str, host: str, port: int) -> None:
    assert Target.parse(text) == Target(host, port)


@pytest.mark.parametrize("text", ["http://x:1", "mqtt://x:0", "mqtt://x:port", ""])
def test_bad_targets_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Target.parse(text)


def test_probe_without_target_is_a_usage_error() -> None:
    assert main(["probe"]) == 2


def test_every_routing_row_agrees_with_the_matcher() -> None:
    """The table's own answer (delivered or not) is what section 4.7 says for its filter and topic."""
    from mqttaudit.probe.cases.routing import TABLE
    from mqttaudit.topics import matches

    prefix = "mqttaudit/run/routing/case"
    for row in TABLE:
        topic_filter = row.topic_filter.format(p=prefix, rest=prefix.split("/", 1)[1])
        topic = row.topic.format(p=prefix, rest=prefix.split("/", 1)[1])
        assert matches(topic_filter, topic) is row.delivered, row.name


def test_no_case_that_a_stale_retained_message_would_fail_runs_after_one_that_leaves_them() -> None:
    """The cases that leave retained messages run one at a time, last, in the library's order. A broker may keep a
    retained message past the clean-up and send it to every later client (amqtt 0.12.1): a case that targets
    MQTT-3.3.2-3 (no message the client did not subscribe to) must therefore run before every case that leaves one,
    or it would be judged on another case's leftovers."""
    alone = [case for case in CASES.values() if case.runs_alone]
    leak_judged = [index for index, case in enumerate(alone) if "MQTT-3.3.2-3" in case.statements]
    last = [case.id for case in alone].index("routing/retained-to-wildcard-subscribers")
    assert leak_judged == [0, last], [case.id for case in alone]
    # its own leftovers reach only cases that judge no delivery (a malformed PUBLISH with RETAIN set, closed on)
    assert all(set(case.statements) <= {"MQTT-3.3.1-4", "MQTT-4.13.1-1"} for case in alone[last + 1 :])
