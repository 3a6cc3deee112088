"""``mqttaudit rules RULE...``: one rule explained, in words and as JSON, with the checks and probe cases that cover
it; unknown ids are usage errors that suggest the closest known ones."""

from __future__ import annotations

import json

import pytest

from mqttaudit import __version__
from mqttaudit.cli.main import main
from mqttaudit.codec import rules as codec_rules
from mqttaudit.judge import rules as judge_rules
from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
from mqttaudit.probe.case import CASES
from mqttaudit.spec import load_catalogue

CATALOGUE = load_catalogue("3.1.1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def cases_of(rule: str) -> list[str]:
    return [case.id for case in CASES.values() if rule in case.statements]


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
    assert qos3["judge_checks"] == ["CLOSE_ON_QOS_3", "ENFORCED_CODEC_RULES"]
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
