"""The MQTT 5.0 rule catalogue: all 251 numbered statements of Appendix B, well-formed, in 5.0 sections, and
consistent with what the codec reports for 5.0 bytes and with the rule identity table."""

from __future__ import annotations

import csv
import importlib.resources
import re

import pytest

from mqttaudit.codec import rules
from mqttaudit.spec import VERSIONS, identity, load_catalogue, parse_version

from .corpus import spec_list

CATALOGUE = load_catalogue("5.0")


def data_rows(name: str) -> list[dict[str, str]]:
    text = importlib.resources.files("mqttaudit.spec").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))


def test_the_catalogue_holds_the_251_numbered_statements_once_each() -> None:
    ids = [row["id"] for row in data_rows("mqtt-5.0-statements.tsv")]
    assert len(ids) == len(set(ids)) == 251
    assert sorted(r.id for r in CATALOGUE if r.origin == "statement") == sorted(ids)


def test_statement_ids_match_the_shared_statement_list() -> None:
    # The package data is the catalogue; this compares it with the independent list, where that list is present.
    with spec_list("mqtt-5.0-statements.tsv").open(encoding="utf-8") as handle:
        shared = {row["id"] for row in csv.DictReader(handle, delimiter="\t")}
    assert {r.id for r in CATALOGUE if r.origin == "statement"} == shared


def test_every_numbered_statement_is_a_must() -> None:
    # Appendix B lists the mandatory statements only; SHOULD and MAY rules live among the derived ones.
    assert {r.level for r in CATALOGUE if r.origin == "statement"} == {"MUST"}


def test_every_rule_the_codec_reports_for_5_0_bytes_is_in_the_catalogue() -> None:
    assert sorted(rules.CHECKED_5_0 - {r.id for r in CATALOGUE}) == []


def test_every_5_0_id_of_the_identity_table_is_in_the_catalogue() -> None:
    named = {statement for statement in identity.IN_5_0.values() if statement is not None}
    assert sorted(named - {r.id for r in CATALOGUE}) == []


def test_codec_treats_as_advisory_exactly_the_5_0_rules_below_must() -> None:
    checked = [r for r in CATALOGUE if r.id in rules.CHECKED_5_0]
    assert len(checked) == len(rules.CHECKED_5_0)
    assert {r.id for r in checked if rules.is_advisory(r.id)} == {r.id for r in checked if r.level != "MUST"}
    assert "MQTT-1.5.5-1" not in {r.id for r in checked if r.level != "MUST"}  # a SHOULD in 3.1.1, a MUST in 5.0


def test_derived_rules_say_what_they_rest_on() -> None:
    derived = [r for r in CATALOGUE if r.origin == "derived"]
    assert {"MQTT-1.5.5-four-bytes", "MQTT-2.2.2-property-value", "MQTT-3.8.3-retain-handling"} <= {
        r.id for r in derived
    }
    assert all(r.basis for r in derived)


def test_every_rule_sits_in_the_5_0_section_its_id_names() -> None:
    # MQTT-4.2.0-1 is section 4.2, MQTT-6.0.0-1 chapter 6: a trailing ".0" names the text before the subsections.
    for rule in CATALOGUE:
        named = re.sub(r"(\.0)+$", "", rule.id.split("-")[1])
        assert rule.section == named or rule.section.startswith(named + "."), rule.id


def test_rules_carry_their_version_and_come_in_section_order() -> None:
    assert {r.version for r in CATALOGUE} == {"5.0"}
    keys = [r.section_key() for r in CATALOGUE]
    assert keys == sorted(keys)


@pytest.mark.parametrize(("text", "version"), [("5", "5.0"), ("5.0", "5.0"), (" 5 ", "5.0"), ("3.1.1", "3.1.1")])
def test_a_version_is_parsed_with_5_as_a_name_of_5_0(text: str, version: str) -> None:
    assert parse_version(text) == version
    assert load_catalogue(text) is load_catalogue(version)


@pytest.mark.parametrize("text", ["4", "3.1", "5.1", "v5", ""])
def test_an_unknown_version_is_refused_with_the_known_ones(text: str) -> None:
    with pytest.raises(ValueError, match=r"choose one of 3\.1\.1, 5, 5\.0"):
        parse_version(text)


def test_every_version_has_a_catalogue() -> None:
    assert [load_catalogue(version).version for version in VERSIONS] == ["3.1.1", "5.0"]
