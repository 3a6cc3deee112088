"""``mqttaudit rules RULE...``: one rule explained, in words and as JSON, with the checks and probe cases that cover
it; unknown ids are usage errors that suggest the closest known ones."""

from __future__ import annotations

import json

import pytest

from mqttaudit import __version__
from mqttaudit.cli.main import main
from mqttaudit.cli.rules import checked_by
from mqttaudit.codec import rules as codec_rules
from mqttaudit.judge import rules as judge_rules
from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
from mqttaudit.probe.case import CASES
from mqttaudit.spec import identity, load_catalogue

CATALOGUE = load_catalogue("3.1.1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def cases_of(rule: str, version: str = "3.1.1") -> list[str]:
    return [case.id for case in CASES.values() if rule in case.statements and case.protocol.value == version]


def test_one_rule_is_explained_with_everything_that_covers_it(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "MQTT-4.7.3-1")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"MQTT-4.7.3-1: {CATALOGUE['MQTT-4.7.3-1'].summary}"
    assert "  Section:       4.7.3 of MQTT 3.1.1 (a numbered normative statement)" in lines
    assert "  Level:         MUST (a violation is reported as an error)" in lines
    assert "  Binds:         the client and the server" in lines
    assert "  Observable:    in the bytes of one packet (bytes)" in lines
    assert "  Checked by:    codec: TOPIC_NOT_EMPTY in mqttaudit.codec.rules (in the bytes of every packet)" in lines
    assert any("the receiver must close the connection" in line and "ENFORCED_CODEC_RULES" in line for line in lines)
    probe = lines[lines.index(next(line for line in lines if line.startswith("  Probe cases:"))) :]
    assert [line.split()[-1] for line in probe] == cases_of("MQTT-4.7.3-1") != []
    assert "Basis" not in out


def test_a_derived_rule_shows_its_basis_and_ids_are_taken_in_any_case(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "mqtt-2.2.3-FOUR-bytes", "mqtt-4.6.0-6")
    assert status == 0
    first, second = out.split("\n\nMQTT-4.6.0-6: ")
    assert first.startswith("MQTT-2.2.3-four-bytes: ")
    assert f"  Basis:         {CATALOGUE['MQTT-2.2.3-four-bytes'].basis}" in first
    assert "(stated there without a number)" in first
    assert second.startswith(CATALOGUE["MQTT-4.6.0-6"].summary)  # in the order asked
    assert "  Checked by:    nothing yet: no finding can name this rule" in second
    assert "  Probe cases:   none" in second


def test_rule_json_names_the_checks_by_their_constants(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "MQTT-3.3.1-4", "MQTT-3.1.2-24", "--format", "json")
    assert status == 0
    qos3, keep_alive = json.loads(out)
    assert qos3["id"] == "MQTT-3.3.1-4" and qos3["level"] == "MUST" and qos3["section"] == "3.3.1.2"
    assert qos3["checked_by"] == ["codec", "judge", "probe"]
    assert qos3["codec_checks"] == ["QOS_3"] and codec_rules.QOS_3 == "MQTT-3.3.1-4"
    assert qos3["judge_checks"] == ["ENFORCED_CODEC_RULES", "RECEIVER_DUTIES"]  # its close statement is a duty
    assert "MQTT-3.3.1-4" in judge_rules.ENFORCED_CODEC_RULES
    assert qos3["probe_cases"] == cases_of("MQTT-3.3.1-4")
    assert qos3["mqttaudit_version"] == __version__
    assert keep_alive["codec_checks"] == [] and keep_alive["judge_checks"] == ["SERVER_DROPS_SILENT_CLIENT"]
    assert keep_alive["checked_by"] == ["judge", "probe"]


def test_an_unknown_rule_is_a_usage_error_that_suggests_close_ids(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "rules", "MQTT-4.7.3-1", "MQTT-4.7.3-9")
    assert status == 2 and out == ""
    assert "no rule 'MQTT-4.7.3-9' in the MQTT 3.1.1 catalogue; did you mean MQTT-4.7.3-" in err
    status, _, err = run(capsys, "rules", "topic-empty")
    assert status == 2 and "no rule 'topic-empty'" in err and "did you mean" not in err


def test_rule_ids_and_a_checked_filter_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "rules", "MQTT-4.7.3-1", "--checked")
    assert status == 2 and "not both" in err


def test_the_listing_is_unchanged_and_every_row_carries_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--format", "json")
    rows = json.loads(out)
    assert status == 0 and len(rows) == len(CATALOGUE)
    assert {row["mqttaudit_version"] for row in rows} == {__version__}
    status, out, _ = run(capsys, "rules")
    assert status == 0 and len(out.splitlines()) == len(CATALOGUE) + 2
    assert "`mqttaudit rules RULE` explains one" in out


CATALOGUE_5 = load_catalogue("5.0")
#: The 5.0 statements the 5.0 probe cases target.
#: The 5.0 rules the per-rule listing says the judge decides (the summary line must count the same).
JUDGED_5_0 = sum("judge" in checked_by(rule) for rule in CATALOGUE_5)
PROBED_5_0 = {
    s
    for case in CASES.values()
    if case.protocol.value == "5.0"
    for s in case.statements
    if CATALOGUE_5[s].origin == "statement"
}


def test_the_5_0_listing_has_every_statement_and_derived_rule_with_honest_counts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(capsys, "rules", "--protocol", "5")
    lines = out.splitlines()
    assert status == 0 and len(lines) == len(CATALOGUE_5) + 2
    assert [line.split()[0] for line in lines[:-2]] == [r.id for r in CATALOGUE_5]
    derived = len(CATALOGUE_5) - 251
    assert lines[-1] == (
        f"{len(CATALOGUE_5)} rules of MQTT 5.0: 251 numbered statements, {derived} derived rules; "
        f"{len(codec_rules.CHECKED_5_0)} checked by the codec, {JUDGED_5_0} by the judge, "
        f"{len(PROBED_5_0)} numbered statements covered by probe cases; `mqttaudit rules RULE` explains one"
    )
    status, out, _ = run(capsys, "rules", "--protocol", "5.0", "--checked")
    checked = {rule.id for rule in CATALOGUE_5 if checked_by(rule)}
    assert checked >= set(codec_rules.CHECKED_5_0) | PROBED_5_0
    assert status == 0 and len(out.splitlines()) == len(checked) + 2


def test_an_id_only_5_0_states_is_explained_as_5_0_with_the_codec_checks_that_name_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "rules", "MQTT-3.3.2-8")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"MQTT-3.3.2-8: {CATALOGUE_5['MQTT-3.3.2-8'].summary}"
    assert "  Section:       3.3.2.3.4 of MQTT 5.0 (a numbered normative statement)" in lines
    assert lines[-4:] == [
        "  Checked by:    codec: TOPIC_ALIAS_ZERO in mqttaudit.codec.rules (in the bytes of every MQTT 5.0 packet)",
        "                 judge: the receiver closes on a packet that breaks it where a statement binds it to detect "
        "that, and is lenient otherwise (ENFORCED_CODEC_RULES_5_0)",
        "  Probe cases:   v5/malformed/publish-topic-alias-0",
        "                 v5/malformed/publish-qos1-topic-alias-0",
    ]
    assert codec_rules.TOPIC_ALIAS_ZERO == "MQTT-3.3.2-8"


def test_a_renumbered_rule_names_the_3_1_1_keys_the_codec_reports_it_under(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--protocol", "5", "MQTT-2.2.1-5", "MQTT-4.2.0-1")
    assert status == 0
    assert (
        "  Checked by:    codec: PUBLISH_ACK_SAME_ID (key MQTT-2.3.1-6), PUBCOMP_SAME_ID (key MQTT-4.3.3-2) in "
        "mqttaudit.codec.rules (in the bytes of every MQTT 5.0 packet)"
    ) in out.splitlines()
    assert "  Checked by:    nothing yet: no finding can name this rule" in out.splitlines()  # MQTT-4.2.0-1
    # the judge's checks are named by the keys 5.0 states under the id
    assert "                 judge: QOS2_RECEIVER in mqttaudit.judge.rules (over MQTT 5.0 connections)" in out
    assert "SERVER_" not in out


def test_an_id_both_versions_state_is_explained_in_3_1_1_and_the_5_0_statement_is_pointed_at(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # MQTT-3.1.2-11 says "Will Flag 0: Will QoS, Will Retain 0, no Will fields" in 3.1.1 and "Will Flag 0: Will QoS
    # 0" in 5.0: the same id, two statements.
    status, out, err = run(capsys, "rules", "MQTT-3.1.2-11")
    assert status == 0
    assert out.splitlines()[0] == f"MQTT-3.1.2-11: {CATALOGUE['MQTT-3.1.2-11'].summary}"
    assert "of MQTT 3.1.1" in out and "of MQTT 5.0" not in out
    assert err.splitlines() == [
        f"note: MQTT 5.0 also has MQTT-3.1.2-11 (section 3.1.2.6: {CATALOGUE_5['MQTT-3.1.2-11'].summary}); "
        "`mqttaudit rules --protocol 5.0 MQTT-3.1.2-11` explains it"
    ]
    status, out, err = run(capsys, "rules", "--protocol", "5", "MQTT-3.1.2-11")
    assert status == 0 and err == ""
    assert "  Section:       3.1.2.6 of MQTT 5.0 (a numbered normative statement)" in out.splitlines()


def test_5_0_json_rows_carry_the_version_and_the_5_0_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "rules", "--protocol", "5", "--format", "json")
    rows = json.loads(out)
    assert status == 0 and len(rows) == len(CATALOGUE_5)
    assert {row["version"] for row in rows} == {"5.0"}
    assert {row["id"] for row in rows if row["codec_checks"]} == set(codec_rules.CHECKED_5_0)
    for row in rows:
        keys = [getattr(codec_rules, name) for name in row["codec_checks"]]
        assert all(identity.statement_id(key, identity.V5) == row["id"] for key in keys), row["id"]
        assert row["probe_cases"] == cases_of(row["id"], "5.0")
        judged = ["judge"] if row["judge_checks"] else []
        assert row["checked_by"] == (["codec"] if keys else []) + judged + (["probe"] if row["probe_cases"] else [])
    assert by_id_of(rows)["MQTT-3.3.2-9"]["judge_checks"] == ["CLIENT_ALIAS_WITHIN_MAXIMUM in mqttaudit.judge.limits"]
    by_id = {row["id"]: row for row in rows}
    assert by_id["MQTT-4.7.3-1"]["also_in"] == ["3.1.1"] and by_id["MQTT-3.3.2-8"]["also_in"] == []


def by_id_of(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {row["id"]: row for row in rows}


def test_a_5_0_statement_is_covered_by_the_5_0_cases_and_the_3_1_1_one_of_the_same_id_is_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # MQTT-3.2.2-16 is the Assigned Client Identifier in 5.0; 3.1.1 has no statement of that id.
    status, out, _ = run(capsys, "rules", "--protocol", "5", "MQTT-3.2.2-16", "MQTT-3.12.4-1")
    assert status == 0
    assert "  Probe cases:   v5/connect/assigned-client-identifier" in out.splitlines()
    assert "  Probe cases:   v5/ping/pingresp" in out.splitlines()
    status, out, _ = run(capsys, "rules", "--protocol", "3.1.1", "MQTT-3.12.4-1")
    assert status == 0 and "v5/" not in out and "ping/" in out


def test_the_older_version_option_still_chooses_the_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "rules", "--version", "5") == run(capsys, "rules", "--protocol", "5.0")
    status, _, err = run(capsys, "rules", "--version", "3.1.1", "--protocol", "5")
    assert status == 2 and "--protocol and --version name different versions" in err
    status, out, _ = run(capsys, "rules", "--help")
    assert status == 0 and "--protocol" in out and "--version" not in out


def test_an_unknown_id_is_a_usage_error_in_every_version_searched(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "rules", "MQTT-3.3.2-88")
    assert status == 2 and out == ""
    assert "no rule 'MQTT-3.3.2-88' in the MQTT 3.1.1 catalogue; did you mean MQTT-3.3.2-" in err
    assert "no rule 'MQTT-3.3.2-88' in the MQTT 5.0 catalogue; did you mean MQTT-3.3.2-8" in err
    status, out, err = run(capsys, "rules", "--protocol", "5", "MQTT-2.2.3-four-bytes")
    assert status == 2 and out == ""
    assert "no rule 'MQTT-2.2.3-four-bytes' in the MQTT 5.0 catalogue" in err and "3.1.1 catalogue" not in err
    status, _, err = run(capsys, "rules", "--protocol", "4")
    assert status == 2 and "'4'" in err


def test_the_5_0_judge_coverage_names_the_checks_of_a_connection_and_of_the_broker_model() -> None:
    judged = {rule.id for rule in CATALOGUE_5 if "judge" in checked_by(rule)}
    assert {"MQTT-3.3.2-9", "MQTT-3.2.0-2", "MQTT-4.13.1-1", "MQTT-3.1.4-5", "MQTT-3.3.4-9"} <= judged
    # the broker model: the Will after its delay, retained messages by Retain Handling, message expiry
    assert {"MQTT-3.1.2-8", "MQTT-3.3.1-9", "MQTT-3.3.1-10", "MQTT-3.3.2-5"} <= judged
    # a statement no check names stays unclaimed
    assert "MQTT-4.2.0-1" not in judged  # a transport property: not observable
