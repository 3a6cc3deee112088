"""The MQTT 5.0 cases against a real mosquitto: what the recorded conversations hold (5.0 packets both ways, read
as 5.0), what the context learns from the CONNACK, how a profile makes a case not applicable, and the CLI's
--protocol and --profile. What the judge decides of these conversations is tested with the judge."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mqttaudit.cli.main import main
from mqttaudit.codec import (
    Connack,
    Connect,
    Direction,
    Disconnect,
    Packet,
    Pingresp,
    ProtocolVersion,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Unsuback,
)
from mqttaudit.codec import properties as props
from mqttaudit.judge.events import Sent
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.capabilities import Capabilities
from mqttaudit.probe.case import CASES, CaseContext, NotApplicable, Target
from mqttaudit.probe.connection import ProbeConnection
from mqttaudit.probe.profile import NO_PROFILE, BrokerProfile, parse_profile
from mqttaudit.probe.runner import NOT_APPLICABLE, judge_config, run_case
from mqttaudit.spec import load_catalogue

V5_CASES = [case for case in CASES.values() if case.protocol is ProtocolVersion.V5]
TIMEOUT = 1.0


async def _play(case_id: str, broker: RunningBroker, profile: BrokerProfile) -> CaseContext:
    context = CaseContext(
        CASES[case_id], Target(broker.host, broker.port), timeout=TIMEOUT, run_id="5e5e5e5e", profile=profile
    )
    try:
        await context.case.script(context)
    finally:
        for connection in context.connections:
            await connection.finish()
    return context


def play(case_id: str, broker: RunningBroker, profile: BrokerProfile = NO_PROFILE) -> CaseContext:
    """Runs one case's script and returns its context, every connection finished (as the runner leaves them)."""
    return asyncio.run(_play(case_id, broker, profile))


def sent(connection: ProbeConnection, by: Direction) -> list[Packet]:
    return [e.frame.packet for e in connection.events if isinstance(e, Sent) and e.sender is by and e.frame.packet]


def clean(connection: ProbeConnection) -> bool:
    """Every frame both ways decoded without a violation."""
    return all(not e.frame.violations for e in connection.events if isinstance(e, Sent))


def named(context: CaseContext, name: str) -> ProbeConnection:
    return next(connection for connection in context.connections if connection.name == name)


CLIENT, SERVER = Direction.FROM_CLIENT, Direction.FROM_SERVER


def test_the_library_has_5_0_cases_that_name_5_0_statements_and_are_judged_as_5_0() -> None:
    assert len(V5_CASES) >= 10
    assert all(case.id.startswith("v5/") and case.family_name.count("/") == 1 for case in V5_CASES)
    assert all(5 in judge_config(case, TIMEOUT).supported_protocol_levels for case in V5_CASES)
    assert all(
        judge_config(case, TIMEOUT).supported_protocol_levels == {4} for case in CASES.values() if case.id[:3] != "v5/"
    )


def test_a_5_0_connect_gets_a_5_0_connack_whose_properties_are_read(mosquitto: RunningBroker) -> None:
    context = play("v5/connect/accepted", mosquitto)
    (connection,) = context.connections
    connect, disconnect = sent(connection, CLIENT)
    assert isinstance(connect, Connect) and connect.protocol_level == 5
    assert isinstance(disconnect, Disconnect) and disconnect.reason_code == 0x00
    connack = sent(connection, SERVER)[0]
    assert isinstance(connack, Connack) and connack.return_code == 0 and connack.properties
    assert connection.connack == connack and clean(connection)
    # mosquitto 2.0.11 declares its Receive Maximum (20) and Topic Alias Maximum (10) by default
    assert context.capabilities == Capabilities.from_connack(connack)
    assert context.capabilities.receive_maximum == props.first(connack.properties, props.RECEIVE_MAXIMUM) == 20
    assert context.capabilities.source("receive_maximum") == "CONNACK"
    assert context.capabilities.maximum_qos == 2 and context.capabilities.source("maximum_qos") == "default"


def test_an_empty_client_identifier_is_assigned_one(mosquitto: RunningBroker) -> None:
    (connection,) = play("v5/connect/assigned-client-identifier", mosquitto).connections
    assert isinstance(sent(connection, CLIENT)[0], Connect) and sent(connection, CLIENT)[0].client_id == ""
    connack, pingresp = sent(connection, SERVER)[:2]
    assert isinstance(connack, Connack) and isinstance(pingresp, Pingresp)
    assigned = props.first(connack.properties, 0x12)
    assert isinstance(assigned, str) and assigned


def test_the_context_takes_the_assigned_client_identifier(mosquitto: RunningBroker) -> None:
    async def scenario() -> tuple[str, object]:
        context = CaseContext(
            CASES["v5/ping/pingresp"], Target(mosquitto.host, mosquitto.port), timeout=TIMEOUT, run_id="5e5e5e5e"
        )
        connection = await context.connect(client_id="")
        await connection.finish()
        assert connection.connack is not None
        return connection.client_id, props.first(connection.connack.properties, 0x12)

    client_id, assigned = asyncio.run(scenario())
    assert client_id and client_id == assigned


def test_suback_and_unsuback_carry_one_reason_code_per_filter(mosquitto: RunningBroker) -> None:
    (connection,) = play("v5/subscribe/reason-code-per-filter", mosquitto).connections
    (suback,) = [p for p in sent(connection, SERVER) if isinstance(p, Suback)]
    assert suback.return_codes == (0x02, 0x00, 0x01)  # read as 3.1.1 its Property Length would be a fourth code
    (connection,) = play("v5/unsubscribe/reason-code-per-filter", mosquitto).connections
    (unsuback,) = [p for p in sent(connection, SERVER) if isinstance(p, Unsuback)]
    assert unsuback.reason_codes == (0x00, 0x11, 0x00) and clean(connection)  # 0x11: No subscription existed


def test_no_local_options_are_sent_and_the_own_message_is_not_returned(mosquitto: RunningBroker) -> None:
    (connection,) = play("v5/subscribe/no-local", mosquitto).connections
    subscribe = next(p for p in sent(connection, CLIENT) if type(p).__name__ == "Subscribe")
    (options,) = subscribe.subscriptions  # type: ignore[union-attr]
    assert (options.no_local, options.retain_as_published, options.retain_handling) == (True, True, 2)
    assert not [p for p in sent(connection, SERVER) if isinstance(p, Publish)]
    assert [p for p in sent(connection, SERVER) if isinstance(p, Puback)]


def test_qos_1_and_2_round_trips_carry_reason_codes_and_5_0_acknowledgements(mosquitto: RunningBroker) -> None:
    context = play("v5/publish/qos1-round-trip", mosquitto)
    subscriber, publisher = named(context, "subscriber"), named(context, "publisher")
    (delivery,) = [p for p in sent(subscriber, SERVER) if isinstance(p, Publish)]
    assert delivery.qos == 1
    (ack,) = [p for p in sent(subscriber, CLIENT) if isinstance(p, Puback)]
    assert ack.packet_id == delivery.packet_id and ack.reason_code == 0x00  # written out: the 5.0 form
    assert [p for p in sent(publisher, SERVER) if isinstance(p, Puback)]
    context = play("v5/publish/qos2-round-trip", mosquitto)
    subscriber, publisher = named(context, "subscriber"), named(context, "publisher")
    kinds = [type(p) for p in sent(subscriber, CLIENT) + sent(subscriber, SERVER)]
    assert {Pubrec, Pubrel, Pubcomp} <= set(kinds)
    assert all(p.reason_code == 0x00 for p in sent(subscriber, CLIENT) if isinstance(p, Pubrec | Pubcomp))
    assert [type(p) for p in sent(publisher, SERVER)][1:3] == [Pubrec, Pubcomp]
    assert clean(subscriber) and clean(publisher)


def test_a_qos_1_message_to_nobody_is_acknowledged_with_its_reason_code(mosquitto: RunningBroker) -> None:
    (connection,) = play("v5/publish/qos1-no-subscribers", mosquitto).connections
    (ack,) = [p for p in sent(connection, SERVER) if isinstance(p, Puback)]
    assert ack.reason_code == 0x10  # mosquitto 2.0.11 says No matching subscribers


def test_disconnect_0x04_publishes_the_will_and_0x00_does_not(mosquitto: RunningBroker) -> None:
    context = play("v5/disconnect/with-will-message", mosquitto)
    assert sent(named(context, "leaving"), CLIENT)[-1] == Disconnect(reason_code=0x04)
    assert [p.topic for p in sent(named(context, "watcher"), SERVER) if isinstance(p, Publish)]
    context = play("v5/disconnect/normal-discards-will", mosquitto)
    assert sent(named(context, "leaving"), CLIENT)[-1] == Disconnect(reason_code=0x00)
    assert not [p for p in sent(named(context, "watcher"), SERVER) if isinstance(p, Publish)]


def test_a_resumed_session_is_announced(mosquitto: RunningBroker) -> None:
    context = play("v5/connect/session-resumed", mosquitto)
    again = named(context, "again")
    assert again.connack is not None and again.connack.session_present
    assert [p for p in sent(again, SERVER) if isinstance(p, Publish)]


def test_a_profile_that_declares_qos_1_makes_the_qos_2_case_not_applicable(mosquitto: RunningBroker) -> None:
    profile = parse_profile("maximum_qos = 1", "qos1.toml")
    result = asyncio.run(
        run_case(
            CASES["v5/publish/qos2-round-trip"],
            Target(mosquitto.host, mosquitto.port),
            timeout=TIMEOUT,
            run_id="5e5e5e5e",
            profile=profile,
        )
    )
    assert result.verdict == NOT_APPLICABLE
    assert result.reason == "a QoS 2 round trip: the profile declares maximum_qos = 1"


def test_a_setting_the_profile_does_not_declare_makes_the_case_not_applicable() -> None:
    async def scenario(profile: BrokerProfile) -> object:
        context = CaseContext(V5_CASES[0], Target("127.0.0.1", 1), timeout=TIMEOUT, run_id="5e5e5e5e", profile=profile)
        return context.declared("authentication_methods", "enhanced authentication")

    with pytest.raises(NotApplicable, match="enhanced authentication: no --profile declares no"):
        asyncio.run(scenario(NO_PROFILE))
    assert asyncio.run(scenario(parse_profile('authentication_methods = ["PLAIN"]'))) == ("PLAIN",)


# -- the command line ------------------------------------------------------------------------------------------


def test_probe_list_protocol_5_shows_only_the_5_0_cases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list", "--protocol", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = [line.split() for line in lines if line.startswith("  ")]
    by_family: dict[str, list[str]] = {}  # the text lists each family's cases together, families by first case
    for case in V5_CASES:
        by_family.setdefault(case.family_name, []).append(case.id)
    assert [row[0] for row in listed] == [case_id for ids in by_family.values() for case_id in ids]
    assert {row[1] for row in listed} == {"5.0"}
    catalogue = load_catalogue("5.0")
    numbered = {s for case in V5_CASES for s in case.statements if catalogue[s].origin == "statement"}
    assert lines[-1] == (
        f"{len(V5_CASES)} cases in {len({c.family_name for c in V5_CASES})} families: {len(V5_CASES)} MQTT 5.0 "
        f"cases covering {len(numbered)} of its numbered statements"
    )
    assert main(["probe", "--list", "--protocol", "5.0", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in rows] == [case.id for case in V5_CASES]
    assert {row["protocol"] for row in rows} == {"5.0"}
    assert main(["probe", "--list", "--protocol", "3.1.1", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {row["protocol"] for row in rows} == {"3.1.1"}
    assert main(["probe", "--list", "--format", "json"]) == 0  # all, by default
    assert len(json.loads(capsys.readouterr().out)) == len(CASES)


@pytest.mark.parametrize("protocol", ["4.0", "3.1", "six", ""])
def test_a_bad_protocol_is_a_usage_error(protocol: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--list", "--protocol", protocol]) == 2
    assert "--protocol" in capsys.readouterr().err
    assert main(["matrix", "mqtt://127.0.0.1:1", "--protocol", protocol]) == 2


def test_a_bad_profile_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("receive_maximum = 0\n")
    assert main(["probe", "mqtt://127.0.0.1:1", "--profile", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "receive_maximum must be from 1 to 65535, not 0" in capsys.readouterr().err
    assert main(["probe", "mqtt://127.0.0.1:1", "--profile", str(tmp_path / "none.toml")]) == 2
    assert "cannot read the profile" in capsys.readouterr().err
    assert main(["matrix", "a=mqtt://127.0.0.1:1", "--profile", f"a={bad}"]) == 2
    good = tmp_path / "good.toml"
    good.write_text("receive_maximum = 2\n")
    assert main(["matrix", "a=mqtt://127.0.0.1:1", "--profile", f"b={good}"]) == 2
    assert "--profile names no target labelled 'b'" in capsys.readouterr().err
    assert main(["matrix", "a=mqtt://127.0.0.1:1", "--profile", f"a={good}", "--profile", f"a={good}"]) == 2
    assert not (tmp_path / "out").exists()


def test_probe_runs_the_5_0_cases_with_a_profile(
    mosquitto: RunningBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "mosquitto.toml"
    profile.write_text("maximum_qos = 1\n")
    argv = ["probe", mosquitto.url, "--protocol", "5", "--cases", "v5/publish/*,v5/ping/*", "--format", "json"]
    status = main([*argv, "--profile", str(profile), "--out", str(tmp_path / "out"), "--timeout", "1"])
    document = json.loads(capsys.readouterr().out)
    verdicts = {result["case"]: result["verdict"] for result in document["results"]}
    assert set(verdicts) == {case.id for case in V5_CASES if case.id.startswith(("v5/publish/", "v5/ping/"))}
    assert verdicts["v5/publish/qos2-round-trip"] == NOT_APPLICABLE
    ping = next(result for result in document["results"] if result["case"] == "v5/ping/pingresp")
    packets = [event.get("packet") or "" for c in ping["evidence"]["connections"] for event in c["events"]]
    assert packets[0].startswith("CONNECT 'MQTT' level 5") and "PINGRESP" in packets
    assert status in (0, 1, 4)  # the judge decides; a usage or internal error it is not


def test_the_preflight_of_a_5_0_selection_speaks_5_0(mosquitto: RunningBroker) -> None:
    from mqttaudit.probe.preflight import preflight

    target = Target(mosquitto.host, mosquitto.port)
    assert asyncio.run(preflight(target, TIMEOUT, ProtocolVersion.V5)) is None  # mosquitto accepts the 5.0 CONNECT
