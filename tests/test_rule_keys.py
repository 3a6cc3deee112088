"""Rule keys across versions: the codec names a finding in the version it read, keeps the key beside it, and the
judge's ledger names the rules it records in the conversation's version."""

from __future__ import annotations

from mqttaudit.codec import Direction, Violation, decode
from mqttaudit.judge.verdict import Ledger

CLIENT = Direction.FROM_CLIENT


def test_a_5_0_finding_keeps_its_key() -> None:
    # PINGREQ with a reserved flag bit set: [MQTT-2.2.2-1] in 3.1.1, [MQTT-2.1.3-1] in 5.0.
    frame_311 = decode(b"\xc1\x00", CLIENT, version="3.1.1")
    frame_5 = decode(b"\xc1\x00", CLIENT, version="5")
    (v311,) = [v for v in frame_311.violations if v.rule_key == "MQTT-2.2.2-1"]
    (v5,) = [v for v in frame_5.violations if v.rule_key == "MQTT-2.2.2-1"]
    assert (v311.rule, v311.key) == ("MQTT-2.2.2-1", "")
    assert (v5.rule, v5.key) == ("MQTT-2.1.3-1", "MQTT-2.2.2-1")


def test_the_key_does_not_change_equality() -> None:
    assert Violation("MQTT-2.1.3-1", 0, "x", "MQTT-2.2.2-1") == Violation("MQTT-2.1.3-1", 0, "x")


def test_the_ledger_names_rules_in_its_version() -> None:
    ledger = Ledger("c", version="5.0")
    finding = ledger.fail("MQTT-2.2.2-1", CLIENT, 0.0, 1, "detail", "expected")
    assert finding is not None and finding.rule == "MQTT-2.1.3-1"
    assert ledger.fail("MQTT-3.1.2-22", CLIENT, 0.0, 1, "d", "e") is None  # 5.0 allows a Password alone
    ledger.held("MQTT-3.1.2-22")
    ledger.held("MQTT-3.1.2-14")
    ledger.undecided("MQTT-3.1.2-15", "why")
    judgement = ledger.judgement()
    assert judgement.assessed == {"MQTT-2.1.3-1", "MQTT-3.1.2-12"}
    assert dict(judgement.not_assessable) == {"MQTT-3.1.2-13": "why"}


def test_a_3_1_1_ledger_names_rules_by_their_keys() -> None:
    ledger = Ledger("c")
    finding = ledger.fail("MQTT-2.2.2-1", CLIENT, 0.0, 1, "detail", "expected")
    assert finding is not None and finding.rule == "MQTT-2.2.2-1"
