"""A fail cites a MUST that binds the implementation judged: no probe case can fail a broker on a statement that binds
only the Client, and no SHOULD or MAY can fail anything.

Three guards, each tested here: the catalogue says whom each statement binds and at what level; case registration
refuses a case that would judge the broker on anything but a MUST binding the Server (the Client's statements a
stimulus breaks on purpose are named apart, ``Case.provokes``); the judge's ledger records no finding against a side
on a statement that does not bind it, and the runner fails a case on nothing else. The cases the issue named are
checked against scripted brokers (``tests/hostile_server.py``), their bytes described in each test.
"""

from __future__ import annotations

import asyncio

import pytest

from mqttaudit.codec import Direction, ProtocolVersion
from mqttaudit.judge import Finding, Judgement
from mqttaudit.judge.verdict import Ledger
from mqttaudit.probe.case import CASES, Case, CaseRegistry, Target, unjudgeable
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, NOT_APPLICABLE, PASS, ProbeRun, decide, run_probe
from mqttaudit.probe.violations import not_counted, other_violations
from mqttaudit.spec import load_catalogue
from mqttaudit.spec.ids import R5, R311

from .hostile_server import HostileServer

SERVER, CLIENT = Direction.FROM_SERVER, Direction.FROM_CLIENT


async def _never_run(_: object) -> None:
    return None


def test_no_case_of_the_library_can_fail_a_server_on_a_client_statement_or_a_should() -> None:
    """Over the whole library: every statement a case judges is a MUST that binds the Server (or both sides); every
    one it provokes binds the Client alone; every case judges something."""
    assert len(CASES) > 890
    for case in CASES.values():
        assert case.statements, case.id
        for statement in case.statements:
            rule = statement.rule
            assert rule.level == "MUST" and rule.binds("server"), (case.id, statement, rule.level, rule.actor)
            assert statement.version == case.protocol.value, (case.id, statement)
        for statement in case.provokes:
            assert statement.rule.actor == "client", (case.id, statement, statement.rule.actor)
            assert statement not in case.statements, (case.id, statement)


@pytest.mark.parametrize(
    ("statements", "problem"),
    [
        ((R5.MQTT_3_1_0_1,), "MQTT-3.1.0-1 binds the Client only"),
        ((R5.MQTT_4_13_1_1, R5.MQTT_3_3_4_6), "MQTT-3.3.4-6 binds the Client only"),
        ((R311.MQTT_2_2_3_SHORTEST_ENCODING,), "MQTT-2.2.3-shortest-encoding is a SHOULD, never a fail"),
        ((), "it judges no statement binding the Server"),
    ],
    ids=["client-only", "client-beside-server", "should", "nothing"],
)
def test_registration_refuses_a_case_that_would_judge_a_broker_on_what_does_not_bind_it(
    statements: tuple[str, ...], problem: str
) -> None:
    protocol = ProtocolVersion.V5 if statements and statements[0].version == "5.0" else ProtocolVersion.V3_1_1  # type: ignore[attr-defined]
    library = CaseRegistry("never.loaded")
    with pytest.raises(ValueError, match="cannot judge a broker on what it cites") as refused:
        library.register(Case("x/y", statements, "title", _never_run, protocol=protocol))
    assert problem in str(refused.value)
    # the same Client statement, provoked beside a Server MUST judged, registers
    sound = Case("x/z", (R5.MQTT_4_13_1_1,), "t", _never_run, protocol=ProtocolVersion.V5, provokes=(R5.MQTT_3_3_4_6,))
    assert unjudgeable(sound) == []
    library.register(sound)


@pytest.mark.parametrize(
    "statement",
    [R5.MQTT_3_1_0_1, R5.MQTT_4_12_0_7, R5.MQTT_3_3_4_7, R5.MQTT_3_3_4_6],
    ids=str,
)
def test_the_client_statements_the_issue_named_are_provoked_never_judged(statement: str) -> None:
    """5.0's texts: "the first packet sent from the Client to the Server MUST be a CONNECT packet" [3.1.0-1]; "If the
    Client does not include an Authentication Method in the CONNECT, the Client MUST NOT send an AUTH packet"
    [4.12.0-7]; "The Client MUST NOT send more than Receive Maximum QoS 1 and QoS 2 PUBLISH packets" [3.3.4-7]; "A
    PUBLISH packet sent from a Client to a Server MUST NOT contain a Subscription Identifier" [3.3.4-6]."""
    assert load_catalogue("5.0")[statement].actor == "client"
    provoking = [case for case in CASES.values() if statement in case.provokes]
    assert provoking, statement
    assert not [case.id for case in CASES.values() if statement in case.statements]


def test_the_topic_filter_statements_bind_the_client_who_alone_writes_topic_filters() -> None:
    for version, ids in (("3.1.1", ("MQTT-4.7.1-2", "MQTT-4.7.1-3")), ("5.0", ("MQTT-4.7.1-1", "MQTT-4.7.1-2"))):
        assert {load_catalogue(version)[i].actor for i in ids} == {"client"}, version
    assert {load_catalogue("5.0")[i].actor for i in ("MQTT-4.8.2-1", "MQTT-4.8.2-2")} == {"client"}


def test_the_ledger_records_nothing_against_a_side_on_a_statement_that_does_not_bind_it() -> None:
    ledger = Ledger("c", "5.0")
    assert ledger.fail(R5.MQTT_3_3_4_6, SERVER, 1.0, 2, "accepted", "closes") is None
    assert ledger.fail(R5.MQTT_3_3_4_6, CLIENT, 1.0, 2, "sent", "does not send it") is not None
    ledger.held(R5.MQTT_3_1_0_1, SERVER)
    ledger.undecided(R5.MQTT_3_1_0_1, "why", side=SERVER)
    judgement = ledger.judgement()
    assert [(f.rule, f.side) for f in judgement.findings] == [("MQTT-3.3.4-6", CLIENT)]
    assert "MQTT-3.1.0-1" not in judgement.assessed and "MQTT-3.1.0-1" not in judgement.not_assessable


def test_a_case_fails_only_on_a_must_binding_the_server_and_a_should_fails_nothing() -> None:
    """decide() with findings against the broker on a Client statement (as no judge makes) and on a SHOULD: the case
    does not fail, the Client statement is dropped, the SHOULD listed where it fails nothing."""
    case = CASES["malformed/pingreq-length-1"]  # judges MQTT-4.8.0-1, provokes the Client's PINGREQ length
    client_only = Finding(R311.MQTT_3_12_1_REMAINING_LENGTH, SERVER, 1.0, 3, "kept open", "closes", "c1")
    should = Finding(R311.MQTT_2_2_3_SHORTEST_ENCODING, SERVER, 1.0, 4, "padded", "shortest", "c1")
    judgement = Judgement((client_only, should), frozenset({R311.MQTT_4_8_0_1}), {})
    result = decide(case, judgement)
    assert result.verdict == PASS, result.reason
    assert result.findings == [] and result.other_findings == [should]
    [violation] = other_violations(ProbeRun(Target("127.0.0.1", 1), "now", [result], 0.0), load_catalogue("3.1.1"))
    assert violation.rule == "MQTT-2.2.3-shortest-encoding" and not violation.counted
    assert not_counted(violation) == "SHOULD-level: it does not fail the run"


# The named cases against scripted brokers ---------------------------------------------------------------------------


def probe(server: HostileServer, *case_ids: str) -> dict[str, tuple[str, str, list[Finding]]]:
    run = asyncio.run(run_probe(Target.parse(server.url), [CASES[c] for c in case_ids], timeout=0.5))
    return {r.case.id: (r.verdict, r.reason, r.findings) for r in run.results}


@pytest.mark.parametrize("refuse", [True, False], ids=["refuses", "withholds"])
def test_a_broker_that_keeps_clients_off_dollar_topics_is_not_failed_for_it(refuse: bool) -> None:
    """Section 4.7.2: "The Server SHOULD prevent Clients from using such Topic Names to exchange messages with other
    Clients." A 5.0 broker that answers the PUBLISH to '$mqttaudit/..' with PUBACK 0x87 (and SUBACK 0x87 to the '$'
    filter) makes routing/dollar-exact not applicable; one that acknowledges it (PUBACK 0x00, SUBACK 0x01) and
    delivers nothing leaves it not assessable, saying why. Neither fails; a leading wildcard still may not match."""
    with HostileServer("broker", lifetime=60, refuse_dollar=refuse) as server:
        found = probe(server, "v5/routing/dollar-exact", "routing/dollar-exact", "v5/routing/hash-child")
    verdict, reason, findings = found["v5/routing/dollar-exact"]
    assert findings == []
    if refuse:
        assert verdict == NOT_APPLICABLE and "SUBACK 0x87, PUBACK 0x87" in reason and "4.7.2" in reason
    else:
        assert verdict == INCONCLUSIVE and reason.startswith("MQTT-4.5.0-1: allowed to withhold: ")
    verdict, reason, findings = found["routing/dollar-exact"]  # 3.1.1: refused with SUBACK 0x80, or withheld
    assert findings == [] and "4.7.2" in reason
    assert verdict == (NOT_APPLICABLE if refuse else INCONCLUSIVE), reason
    assert found["v5/routing/hash-child"][0] == FAIL  # an ordinary topic withheld is the missing delivery


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        (bytes.fromhex("20 03 00 00 00"), NOT_APPLICABLE),  # accepted, 5.0's form
        (bytes.fromhex("20 02 00 00"), NOT_APPLICABLE),  # accepted, 3.1's form (MQIsdp is 3.1's name)
        (bytes.fromhex("20 02 00 01"), PASS),  # refused in 3.1's form, then the close
        (bytes.fromhex("20 03 00 84 00"), PASS),  # refused with 0x84, then the close
    ],
    ids=["accept-5.0", "accept-3.1", "refuse-0x01", "refuse-0x84"],
)
def test_protocol_name_mqisdp_at_version_5_is_accepted_or_refused_by_closing(answer: bytes, verdict: str) -> None:
    """5.0 section 3.1.2.1: "A Server which support multiple protocols uses the Protocol Name to determine whether
    the data is MQTT ... If the Server does not want to accept the CONNECT ... it MUST close the Network Connection"
    [MQTT-3.1.2-1]. The broker answers every CONNECT of Protocol Version 5 with ``answer`` (then, refusing, closes;
    accepting, waits): it breaks the statement in none of them."""
    accepting = answer[3] == 0
    mode = {"connack": answer} if accepting else {}
    with HostileServer("answering" if accepting else "broker", lifetime=60, v5=answer, **mode) as server:
        found = probe(server, "v5/connect-refused/protocol-name-mqisdp")
    got, reason, findings = found["v5/connect-refused/protocol-name-mqisdp"]
    assert (got, findings) == (verdict, []), reason
    if accepting:
        assert "accepted the Protocol Name 'MQIsdp'" in reason


def test_a_broker_answering_a_packet_before_connect_fails_the_server_statement_not_the_clients() -> None:
    """The broker answers every CONNECT of 5.0 with nothing and closes; what the case sends first is a PINGREQ
    (``c0 00``), which the scripted broker takes for no CONNECT and ignores: it closes after. The case judges
    MQTT-3.2.0-1 and MQTT-4.13.1-1 and passes; it provokes MQTT-3.1.0-1, the Client's."""
    with HostileServer("closing", lifetime=60, connack=b"") as server:
        found = probe(server, "v5/connect-first/pingreq")
    verdict, reason, findings = found["v5/connect-first/pingreq"]
    assert (verdict, findings) == (PASS, []), reason
    with HostileServer("answering", lifetime=60, connack=bytes.fromhex("d0 00")) as server:  # PINGRESP, stays open
        found = probe(server, "v5/connect-first/pingreq")
    verdict, reason, findings = found["v5/connect-first/pingreq"]
    # Its own first packet must be CONNACK [MQTT-3.2.0-1]: a PINGRESP fails it. Staying open on the PINGREQ is no
    # failure of 5.0's: no statement binds a Server to detect a first packet other than CONNECT (section 4.13.1).
    assert verdict == FAIL and {f.rule for f in findings} == {"MQTT-3.2.0-1"}, reason
    assert {f.rule.version for f in findings} == {"5.0"}
