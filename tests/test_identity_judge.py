"""The MQTT 5.0 names of the rules the judge and the probe decide: every 3.1.1 key they use has an explicit entry in
the identity table (a 3.1.1 number often means another rule in 5.0), and each entry names a 5.0 statement."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from mqttaudit.codec import ProtocolVersion
from mqttaudit.judge import rules
from mqttaudit.probe import cases as _cases  # noqa: F401 - registers the case library
from mqttaudit.probe.case import CASES
from mqttaudit.spec import identity, load_catalogue

CATALOGUE_3_1_1 = load_catalogue("3.1.1")
CATALOGUE_5 = load_catalogue("5.0")
JUDGE_SOURCES = Path(__file__).resolve().parents[1] / "src" / "mqttaudit" / "judge"
#: The judge modules whose text cites statements beside the checks that decide them.
CITING_MODULES = ("model", "routing", "pairing", "keepalive", "deliveries", "violations")
_CITED = re.compile(r"MQTT-\d+(?:\.\d+)+-(?:\d+|[a-z][a-z0-9-]*[a-z0-9])")


def probe_statements() -> set[str]:
    """The keys the 3.1.1 cases target (a case written for 5.0 lists 5.0 statement ids, which need no entry)."""
    return {
        statement for case in CASES.values() if case.protocol is not ProtocolVersion.V5 for statement in case.statements
    }


def cited_in_judge() -> set[str]:
    text = "\n".join((JUDGE_SOURCES / f"{name}.py").read_text(encoding="utf-8") for name in CITING_MODULES)
    return set(_CITED.findall(text))


def judge_keys() -> set[str]:
    return set(rules.OWN_RULES) | probe_statements() | cited_in_judge()


def test_the_key_sets_are_what_the_judge_and_the_probe_decide() -> None:
    # (the 3.1.1 cases judge only the statements that bind the Server: the Client's their stimuli break are not keys)
    assert len(rules.OWN_RULES) > 60 and len(probe_statements()) > 75
    assert {"MQTT-3.2.2-1", "MQTT-4.8.0-1", "MQTT-2.2.3-overrun"} <= judge_keys()
    assert {"MQTT-3.1.3-6", "MQTT-3.3.5-2", "MQTT-4.4.0-1"} <= cited_in_judge()


def test_every_3_1_1_key_of_the_judge_and_the_probe_has_an_explicit_5_0_entry() -> None:
    # An absent key would be read as a 5.0 id, and 3.1.1's MQTT-3.2.2-1 is not 5.0's MQTT-3.2.2-1.
    keys = {key for key in judge_keys() if getattr(key, "version", "3.1.1") == "3.1.1" and key in CATALOGUE_3_1_1}
    assert sorted(keys - set(identity.IN_5_0)) == []
    assert all(getattr(key, "version", None) in ("3.1.1", "5.0") for key in rules.OWN_RULES)


def test_judge_keys_outside_3_1_1_are_5_0_rules_that_name_themselves() -> None:
    others = {
        key
        for key in judge_keys()
        if getattr(key, "version", None) == "5.0" or (key not in CATALOGUE_3_1_1 and key not in identity.IN_5_0)
    }
    assert sorted(others - {rule.id for rule in CATALOGUE_5}) == []


def test_every_5_0_name_of_a_judge_key_is_in_the_5_0_catalogue() -> None:
    named = {identity.statement_id(key, identity.V5) for key in judge_keys()}
    assert sorted(str(name) for name in named - {None} - {rule.id for rule in CATALOGUE_5}) == []


def test_a_5_0_statement_names_two_keys_only_where_the_table_says_why() -> None:
    keys_of: dict[str, set[str]] = defaultdict(set)
    for key, statement in identity.IN_5_0.items():
        if statement is not None:
            keys_of[statement].add(key)
    shared = {statement: sorted(keys) for statement, keys in keys_of.items() if len(keys) > 1}
    assert set(shared) == set(identity.SHARED_IN_5_0), shared
    assert all(reason.startswith("5.0 ") for reason in identity.SHARED_IN_5_0.values())


@pytest.mark.parametrize(
    ("key", "statement"),
    [
        # Same number, other rule in 5.0: the reason the entries must be explicit.
        ("MQTT-3.2.2-1", "MQTT-3.2.2-2"),  # Session Present 0 with a clean start (5.0 -1: CONNACK reserved flags)
        ("MQTT-3.1.4-2", "MQTT-3.1.4-3"),  # takeover (5.0 -2: further CONNECT checks)
        ("MQTT-3.14.4-1", "MQTT-3.14.4-2"),  # close after DISCONNECT (5.0 -1: send nothing more)
        ("MQTT-3.14.4-2", "MQTT-3.14.4-1"),
        ("MQTT-3.3.1-6", "MQTT-3.3.1-9"),  # retained on subscription (5.0 -6: an empty retained message clears)
        ("MQTT-3.8.4-6", "MQTT-3.8.4-8"),  # delivered QoS (5.0 -6: one reason code per filter)
        ("MQTT-4.3.3-1", "MQTT-4.3.3-4"),  # the QoS 2 sender's PUBREL (5.0 -1: an unused Packet Identifier)
        ("MQTT-3.1.2-24", "MQTT-3.1.2-22"),  # the Server's Keep Alive timer (5.0 -24: Maximum Packet Size)
        ("MQTT-4.8.0-1", "MQTT-4.13.1-1"),  # closing on a violation (5.0 section 4.8: Shared Subscriptions)
        # Rules 5.0 does not state.
        ("MQTT-3.1.3-8", None),  # an empty ClientId needs no clean start in 5.0
        ("MQTT-3.3.1-8", None),  # RETAIN 1 on subscription is prose in 5.0
        ("MQTT-3.3.5-2", None),  # 5.0 answers an unauthorised PUBLISH with reason code 0x87
    ],
)
def test_renumbered_and_dropped_judge_rules_get_their_5_0_names(key: str, statement: str | None) -> None:
    assert identity.statement_id(key, identity.V5) == statement
    assert identity.statement_id(key, identity.V3_1_1) == key
