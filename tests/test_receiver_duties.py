"""The receiver duties of the rule registry (spec.duties): one row per version, rule and receiver for every rule a
received packet can break that the codec or the judge enforces; every binding statement is a MUST of that version
that binds that receiver; 3.1.1 binds every receiver (MQTT-4.8.0-1), 5.0 only where a statement says so."""

from __future__ import annotations

import pytest

from mqttaudit.judge import lifecycle, limits
from mqttaudit.judge import rules as judge_rules
from mqttaudit.spec import duties, identity, load_catalogue
from mqttaudit.spec.ids import R5, R311

#: The judge's own rules whose breach it treats as an offence the receiver owes a close (beside the codec's).
JUDGE_OFFENCES = {
    identity.V3_1_1: (judge_rules.CONNECT_FIRST, judge_rules.SECOND_CONNECT),
    identity.V5: (
        judge_rules.CONNECT_FIRST,
        judge_rules.SECOND_CONNECT,
        lifecycle.AUTHENTICATING_CLIENT_WAITS,
        lifecycle.NO_CLIENT_AUTH_WITHOUT_METHOD,
        lifecycle.CLIENT_AUTH_CONTINUES,
        lifecycle.REAUTHENTICATION_SAME_METHOD,
        lifecycle.SAME_AUTHENTICATION_METHOD,
        limits.CLIENT_ALIAS_WITHIN_MAXIMUM,
        limits.CLIENT_ALIAS_WITHIN_DECLARED,
        limits.CLIENT_NO_ALIAS_WITHOUT_MAXIMUM,
        limits.ALIAS_MAPPED,
        limits.ALIAS_PER_CONNECTION,
        limits.CLIENT_RECEIVE_MAXIMUM,
        limits.CLIENT_PACKET_SIZE,
    ),
}
ENFORCED = {
    identity.V3_1_1: judge_rules.ENFORCED_CODEC_RULES | judge_rules.TRANSPORT_RULES,
    identity.V5: judge_rules.ENFORCED_CODEC_RULES_5_0 | judge_rules.TRANSPORT_RULES,
}
VERSIONS = (identity.V3_1_1, identity.V5)


def enforced_ids(version: str) -> set[str]:
    """The statements of ``version`` the codec and the judge hold a received packet to."""
    keys = (*ENFORCED[version], *JUDGE_OFFENCES[version])
    return {str(named) for key in keys if (named := identity.statement_id(key, version)) is not None}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_enforced_rule_has_a_row_per_receiver_and_no_row_is_for_another_rule(version: str) -> None:
    table = duties.load_duties(version)
    wanted = enforced_ids(version)
    assert table.rules == wanted
    for rule in wanted:
        assert {row.receiver for row in duties.duties_of(rule, version)} == set(duties.RECEIVERS), rule


@pytest.mark.parametrize("version", VERSIONS)
def test_every_binding_is_a_must_of_that_version_that_binds_that_receiver(version: str) -> None:
    catalogue = load_catalogue(version)
    table = duties.load_duties(version)
    for row in table.bindings:
        assert row.binding is not None and row.binding.version == version
        statement = catalogue[str(row.binding)]
        assert statement.level == "MUST", row
        assert statement.actor in ("both", row.receiver), row
        assert row.basis.strip() and "\t" not in row.basis


def test_3_1_1_binds_every_receiver_of_every_rule() -> None:
    """MQTT-4.8.0-1: a Client or Server that encounters a protocol violation closes; no 3.1.1 row is unbound."""
    table = duties.load_duties(identity.V3_1_1)
    assert all(row.bound for row in table.rows)
    assert {table.general(side).binding for side in duties.RECEIVERS} == {R311.MQTT_4_8_0_1}


def test_5_0_binds_only_where_a_statement_names_the_receiver() -> None:
    """The 5.0 Server is bound to detect what its statements name (a SUBSCRIBE with reserved option bits, invalid
    PUBREL/SUBSCRIBE/UNSUBSCRIBE flags, the whole CONNECT); nothing else."""
    table = duties.load_duties(identity.V5)
    assert table.general(duties.SERVER).binding is None and table.general(duties.CLIENT).binding is None
    assert "MQTT-4.13.1-1" in table.general(duties.SERVER).basis and "4.13.1" in table.general(duties.CLIENT).basis
    bound = {
        (str(row.rule), row.receiver, str(row.binding))
        for row in table.rows
        if row.binding is not None and row.binding != R5.MQTT_3_1_4_1
    }
    assert bound == {
        ("MQTT-3.6.1-1", "server", "MQTT-3.6.1-1"),
        ("MQTT-3.8.1-1", "server", "MQTT-3.8.1-1"),
        ("MQTT-3.10.1-1", "server", "MQTT-3.10.1-1"),
        ("MQTT-3.8.3-5", "server", "MQTT-3.8.3-5"),
        ("MQTT-3.1.2-3", "server", "MQTT-3.1.2-3"),
        ("MQTT-3.1.0-2", "server", "MQTT-3.1.0-2"),
        ("MQTT-3.14.1-1", "server", "MQTT-3.14.1-1"),
        ("MQTT-3.14.1-1", "client", "MQTT-3.14.1-1"),
        ("MQTT-3.15.1-1", "server", "MQTT-3.15.1-1"),
        ("MQTT-3.15.1-1", "client", "MQTT-3.15.1-1"),
        ("MQTT-6.0.0-1", "server", "MQTT-6.0.0-1"),
        ("MQTT-6.0.0-1", "client", "MQTT-6.0.0-1"),
        ("MQTT-3.3.2-7", "server", "MQTT-3.3.2-7"),
        ("MQTT-3.3.2-7", "client", "MQTT-3.3.2-7"),
    }


def test_an_empty_topic_filter_binds_the_sender_only_in_5_0_and_the_receiver_too_in_3_1_1() -> None:
    five = duties.receiver_duty(R311.MQTT_4_7_3_1, identity.V5, duties.SERVER, "SUBSCRIBE")
    assert five is not None and not five.bound and five.rule == R5.MQTT_4_7_3_1
    assert "MQTT-4.13.1-1" in five.basis
    old = duties.receiver_duty(R311.MQTT_4_7_3_1, identity.V3_1_1, duties.SERVER, "SUBSCRIBE")
    assert old is not None and old.binding == R311.MQTT_4_8_0_1


def test_a_rule_is_looked_up_by_its_key_by_its_id_and_on_its_typed_id() -> None:
    by_key = duties.receiver_duty(R311.MQTT_3_8_3_4, identity.V5, duties.SERVER)  # 3.1.1's key, 5.0's MQTT-3.8.3-5
    by_id = duties.receiver_duty(R5.MQTT_3_8_3_5, identity.V5, duties.SERVER)
    assert by_key == by_id == R5.MQTT_3_8_3_5.duty(duties.SERVER)
    assert by_id is not None and by_id.binding == R5.MQTT_3_8_3_5
    assert by_id.binding_key == R311.MQTT_3_8_3_4  # the key the judge names it by
    assert R5.MQTT_3_8_3_4.duty(duties.SERVER) is not None  # No Local on a Shared Subscription: its own row
    assert R5.MQTT_4_13_1_1.duty(duties.SERVER) is None  # not a rule a received packet breaks


def test_a_whole_connect_binds_the_5_0_server_but_a_rules_own_binding_comes_first() -> None:
    """MQTT-3.1.4-1: the Server validates the CONNECT against section 3.1, whichever rule it breaks."""
    utf8 = duties.receiver_duty(R5.MQTT_1_5_4_1, identity.V5, duties.SERVER, "CONNECT")
    assert utf8 is not None and utf8.binding == R5.MQTT_3_1_4_1 and utf8.rule == R5.MQTT_1_5_4_1
    assert duties.receiver_duty(R5.MQTT_1_5_4_1, identity.V5, duties.SERVER, "PUBLISH") == R5.MQTT_1_5_4_1.duty(
        duties.SERVER
    )
    flag = duties.governing([R311.MQTT_2_2_2_1, R311.MQTT_3_1_2_3], identity.V5, duties.SERVER, "CONNECT")
    assert flag.binding == R5.MQTT_3_1_2_3


def test_the_first_binding_of_the_table_governs_a_packet_that_breaks_several_rules() -> None:
    """Invalid SUBSCRIBE flags break the general flags rule and SUBSCRIBE's own: its own statement is cited."""
    for version, general in ((identity.V3_1_1, R311.MQTT_2_2_2_2), (identity.V5, None)):
        duty = duties.governing([R311.MQTT_2_2_2_1, R311.MQTT_3_8_1_1], version, duties.SERVER, "SUBSCRIBE")
        assert duty.binding_key == R311.MQTT_3_8_1_1
        client = duties.governing([R311.MQTT_2_2_2_1, R311.MQTT_3_6_1_1], version, duties.CLIENT, "PUBREL")
        assert client.binding == general  # 3.6.1 names the Server only
    unbound = duties.governing([R311.MQTT_4_7_3_1, R311.MQTT_4_7_1_2], identity.V5, duties.SERVER, "SUBSCRIBE")
    assert not unbound.bound and unbound.rule == R5.MQTT_4_7_3_1  # the first rule broken names the leniency


HEADER = "rule\tpacket\treceiver\tbinding\tbasis\n*\t*\tserver\t-\tg\n*\t*\tclient\t-\tg\n"


@pytest.mark.parametrize(
    ("row", "error"),
    [
        ("MQTT-4.7.3-1\t*\tbroker\t-\tx", "line 4: receiver 'broker'"),
        ("MQTT-4.7.3-1\t*\tserver\tMQTT-9.9.9-9\tx", "line 4: MQTT 5.0 states no rule MQTT-9.9.9-9"),
        ("MQTT-4.7.3-9\t*\tserver\t-\tx", "line 4: MQTT 5.0 states no rule MQTT-4.7.3-9"),
        ("MQTT-4.7.3-1\tFOO\tserver\t-\tx", "line 4: packet 'FOO'"),
        ("MQTT-4.7.3-1\t*\tserver\t-\t ", "line 4: no basis"),
        ("MQTT-4.7.3-1\tCONNECT\tserver\t-\tx", "line 4: a rule's row covers every packet type"),
    ],
)
def test_a_bad_table_row_is_refused_with_its_line(row: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        duties.parse_duties(identity.V5, HEADER + row + "\n", "duties.tsv")


def test_a_table_without_a_general_duty_is_refused() -> None:
    with pytest.raises(ValueError, match="no general duty for client"):
        duties.parse_duties(identity.V5, "rule\tpacket\treceiver\tbinding\tbasis\n*\t*\tserver\t-\tg\n", "d.tsv")
    with pytest.raises(ValueError, match="no receiver 'broker'"):
        duties.receiver_duty(R5.MQTT_4_7_3_1, identity.V5, "broker")
