"""The rule catalogue: complete for 3.1.1, well-formed, and consistent with what the codec reports."""

from __future__ import annotations

import csv

from mqttaudit.codec import rules
from mqttaudit.spec import load_catalogue

from .corpus import spec_list


def test_catalogue_holds_all_141_numbered_statements_of_3_1_1() -> None:
    catalogue = load_catalogue("3.1.1")
    statements = [r for r in catalogue if r.origin == "statement"]
    assert len(statements) == 141
    assert all(r.level in {"MUST", "SHOULD", "MAY"} for r in catalogue)


def test_catalogue_ids_match_the_shared_statement_list() -> None:
    # The package data is the catalogue; this compares it with the independent list, where that list is present.
    with spec_list("mqtt-3.1.1-statements.tsv").open(encoding="utf-8") as handle:
        shared = {row["id"] for row in csv.DictReader(handle, delimiter="\t")}
    ours = {r.id for r in load_catalogue("3.1.1") if r.origin == "statement"}
    assert ours == shared


def test_every_rule_the_codec_reports_is_in_the_catalogue() -> None:
    catalogue = load_catalogue("3.1.1")
    assert sorted(rules.CHECKED - {r.id for r in catalogue}) == []


def test_codec_treats_as_advisory_exactly_the_rules_below_must() -> None:
    catalogue = load_catalogue("3.1.1")
    below_must = {r.id for r in catalogue if r.level != "MUST" and r.id in rules.CHECKED}
    assert below_must == set(rules.ADVISORY)


def test_derived_rules_say_what_they_rest_on() -> None:
    derived = [r for r in load_catalogue("3.1.1") if r.origin == "derived"]
    assert {"MQTT-2.2.3-four-bytes", "MQTT-2.2.3-shortest-encoding", "MQTT-3.4.1-remaining-length"} <= {
        r.id for r in derived
    }
    assert all(r.basis for r in derived)


def test_catalogue_is_in_section_order() -> None:
    keys = [r.section_key() for r in load_catalogue("3.1.1")]
    assert keys == sorted(keys)
