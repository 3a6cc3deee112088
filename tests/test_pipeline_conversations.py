"""A captured connection through the judge as table rows, and the routing replay of one broker (pure, no Spark)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from mqttaudit import codec
from mqttaudit.judge import JudgeConfig
from mqttaudit.pipeline.conversations import Columns, Flow, digested, judge_flow
from mqttaudit.pipeline.replay import replay_broker
from mqttaudit.pipeline.tables import GAP_COLUMNS, PACKET_COLUMNS, ROUTING_COLUMNS

from .talk import CONNACK_OK, Talk, connected, publish, suback, subscribe

CONFIG = JudgeConfig(close_grace=2.0, answer_timeout=2.0)


def flow(name: str, talk: Talk) -> Flow:
    return Flow("cap.pcap", name, "10.0.0.2:5000", "10.0.0.1:1883", talk.events, list(range(len(talk.events))))


def test_packets_violations_and_the_connection_row() -> None:
    talk = connected("c1").client("82050001000000").server(suback(1)).quiet(after=5)
    result = judge_flow(flow("f1", talk), CONFIG)
    assert result.packets.data["type"] == ["CONNECT", "CONNACK", "SUBSCRIBE", "SUBACK"]
    assert result.packets.data["direction"] == ["client", "server", "client", "server"]
    data = result.violations.data
    rows = list(zip(data["rule"], data["actor"], data["origin"], data["event"], data["also"], strict=True))
    assert ("MQTT-4.7.3-1", "client", "codec", 2, None) in rows  # the client sent the empty filter
    # The server accepted it (its SUBACK, event 3): one act, one row, citing the duty to close it broke; the
    # filter rule it upholds by closing is failed by the same act.
    assert ("MQTT-4.8.0-1", "server", "judge", 3, ["MQTT-4.7.3-1"]) in rows
    assert result.connection.data["client_id"] == ["c1"]
    assert result.connection.data["how"] == ["capture-end"]


def test_a_5_0_server_accepting_an_empty_filter_is_a_lenient_row_not_a_violation() -> None:
    """The capture audit's judge makes 5.0's distinction too: the server that SUBACKs an empty Topic Filter is
    lenient (MQTT-4.7.3-1 binds the sender; section 4.13.1), a row of the ``lenient`` table, not of ``violations``."""
    config = JudgeConfig(close_grace=2.0, answer_timeout=2.0, supported_protocol_levels=frozenset({4, 5}))
    talk = Talk(version="5").client(codec.Connect(client_id="c5", protocol_level=5)).server(codec.Connack())
    talk.client("82 06 0001 00 0000 00").server("90 04 0001 00 00").quiet(after=5)
    result = judge_flow(flow("f5", talk), config)
    violations = set(zip(result.violations.data["rule"], result.violations.data["actor"], strict=True))
    assert ("MQTT-4.7.3-1", "client") in violations  # the client's own defect, the codec's row
    assert not {actor for _, actor in violations} & {"server"}
    rows = result.lenient.data
    assert list(zip(rows["rule"], rows["actor"], rows["event"], rows["cause_event"], strict=True)) == [
        ("MQTT-4.7.3-1", "server", 3, 2)
    ]
    assert rows["rule_version"] == ["5.0"] and rows["level"] == ["MUST"] and rows["section"] == ["4.7.3"]
    assert rows["evidence"] == ["90 04 00 01 00 00"]  # the SUBACK that accepted it
    assert "[MQTT-4.13.1-1]" in rows["basis"][0] and "SUBACK" in rows["detail"][0]
    assert result.connection.data["lenient"] == [1]
    old = judge_flow(flow("f3", connected("c3").client("82050001000000").server(suback(1)).quiet(after=5)), CONFIG)
    assert len(old.lenient) == 0 and old.connection.data["lenient"] == [0]  # 3.1.1: a violation, as before


def test_the_replay_finds_a_missing_delivery_and_lists_what_was_owed() -> None:
    message = publish("t/1", b"x" * 40, qos=1, packet_id=1)
    sub = connected("sub").client(subscribe(1, ("t/+", 1))).server(suback(1, 1)).quiet(at=10.0)
    pub = connected("pub", at=1.0).client(message).server(codec.Puback(packet_id=1)).quiet(at=10.0)
    blobs = [
        (name, pickle.dumps(judge_flow(flow(name, talk), CONFIG).replayed))
        for name, talk in (("sub", sub), ("pub", pub))
    ]
    deliveries, findings, _ = replay_broker("10.0.0.1:1883", blobs, CONFIG)
    assert deliveries.data["subscriber_flow"] == ["sub"] and deliveries.data["expected"] == ["owed"]
    assert deliveries.data["observed"] == [False] and deliveries.data["qos_expected"] == [1]
    assert list(zip(findings.data["kind"], findings.data["rule"], strict=True)) == [("missing", "MQTT-4.5.0-1")]


def test_payload_digests_keep_equality_and_emptiness() -> None:
    talk = Talk().client(codec.Connect(client_id="d")).server(CONNACK_OK)
    talk.client(publish("a", b"y" * 100, retain=True), publish("a", b"", retain=True))
    transcript = judge_flow(flow("d", talk), CONFIG).replayed
    big, empty = (p.message.payload for p in transcript.published)
    assert len(big) == 16 and empty == b""
    assert digested(transcript).published[0].message.payload == big


def _scenarios() -> list[tuple[str, dict[str, Talk]]]:
    from .test_judge_scenario import CASES

    scenarios = []
    for case in CASES:
        for column in ("fails", "passes", "undecided"):
            conversation = getattr(case, column)()
            if isinstance(conversation, dict) and len(conversation) > 1:
                scenarios.append((f"{case.id}-{column}", conversation))
    return scenarios


SCENARIOS = _scenarios()


@pytest.mark.parametrize(("name", "conversation"), SCENARIOS, ids=[name for name, _ in SCENARIOS])
def test_the_sliced_replay_of_the_judging_stage_s_transcripts_owes_and_finds_what_the_whole_replay_does(
    name: str, conversation: dict[str, Talk], tmp_path: Path
) -> None:
    """The transcripts as the judging stage hands them on (payloads digested, :func:`judge_flow`), in slices of one
    message and pieces of one event: the whole model's deliveries, routing findings and not-assessable rows."""
    from .test_pipeline_sliced_replay import sliced_tables, whole_tables

    transcripts = {n: judge_flow(flow(n, talk), CONFIG).replayed for n, talk in conversation.items()}
    whole = whole_tables(transcripts, CONFIG)
    assert sliced_tables(transcripts, CONFIG, tmp_path, 1, 1) == whole, name


def test_a_task_table_file_appears_only_when_the_task_completes(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from mqttaudit.pipeline.task_files import TableWriter

    (tmp_path / "gaps").mkdir()
    writer = TableWriter(str(tmp_path), "gaps", "00003")
    writer.BATCH = 2  # several row groups from few rows
    for offset in range(5):
        rows = Columns(GAP_COLUMNS)
        rows.add(capture="c", flow="f", direction="client", offset=offset, length=1, kind="gap", reason="r")
        writer.add(rows)
    assert [p.name for p in (tmp_path / "gaps").iterdir() if not p.name.startswith(".")] == []
    writer.close()
    table = pq.read_table(tmp_path / "gaps")
    assert table.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    assert table.schema.field("time").type == "double" and table.column("time").null_count == 5
    assert pq.ParquetFile(tmp_path / "gaps" / "part-00003.parquet").num_row_groups == 3
    assert [p.name for p in (tmp_path / "gaps").iterdir()] == ["part-00003.parquet"]


def test_a_task_without_rows_writes_no_file(tmp_path: Path) -> None:
    from mqttaudit.pipeline.task_files import TableWriter

    (tmp_path / "packets").mkdir()
    writer = TableWriter(str(tmp_path), "packets", "00000")
    writer.add(Columns(PACKET_COLUMNS))
    writer.close()
    assert list((tmp_path / "packets").iterdir()) == []


def test_the_connack_code_of_a_connection_framed_only_is_read_after_its_remaining_length() -> None:
    # An MQTT 5.0 CONNACK with properties of 129 bytes: its Remaining Length takes two bytes (83 01), so the Reason
    # Code 0x87 (not authorised) is the fifth byte, not the fourth.
    from mqttaudit.judge import Sent
    from mqttaudit.pipeline.conversations import framed_connack_code

    def flow_of(raw: bytes) -> Flow:
        frame = codec.Frame(0, len(raw), raw, None)
        return Flow("c", "f", "a", "b", [Sent(0.0, codec.Direction.FROM_SERVER, frame)], [None])

    assert framed_connack_code(flow_of(bytes.fromhex("20 02 00 05"))) == 5
    assert framed_connack_code(flow_of(bytes.fromhex("20 83 01 00 87") + bytes(129))) == 0x87


def test_a_routing_finding_of_a_5_0_subscriber_is_numbered_and_levelled_by_5_0() -> None:
    config = JudgeConfig(close_grace=2.0, answer_timeout=2.0, supported_protocol_levels=frozenset({4, 5}))

    def opened(client_id: str, at: float) -> Talk:
        connect = codec.Connect(client_id=client_id, protocol_level=5, keep_alive=0)
        return Talk(version="5").client(connect, at=at).server(codec.Connack())

    # Retain Handling 2: no retained message on subscribing; the broker sends one anyway
    retained = codec.Publish(topic="t", payload=b"r", qos=1, retain=True, packet_id=1)
    pub = opened("pub", 0.5).client(retained).server(codec.Puback(packet_id=1)).quiet(at=10.0)
    option = codec.Subscription(topic_filter="t", qos=0, retain_handling=2)
    sub = (
        opened("sub", 2.0)
        .client(codec.Subscribe(packet_id=1, subscriptions=(option,)))
        .server(codec.Suback(packet_id=1, return_codes=(0,)))
    )
    sub = sub.server(codec.Publish(topic="t", payload=b"r", qos=0, retain=True)).quiet(at=10.0)
    blobs = [
        (name, pickle.dumps(judge_flow(flow(name, talk), config).replayed))
        for name, talk in (("pub", pub), ("sub", sub))
    ]
    _deliveries, findings, _ = replay_broker("10.0.0.1:1883", blobs, config)
    rows = list(zip(findings.data["rule"], findings.data["rule_version"], findings.data["section"], strict=True))
    assert rows == [("MQTT-3.3.1-11", "5.0", "3.3.1.3")]  # the 5.0 section of Retain Handling


def test_the_replay_decides_the_rules_of_a_server_s_connections_together_once_sliced_too(tmp_path: Path) -> None:
    """[MQTT-3.1.3-6] two connections open at once, both assigned the Client Identifier 'same': the whole model's
    replay finds it, as the probe's scenarios do, and the sliced replay (slices of one message) finds it once, in
    the later connection."""
    from mqttaudit.codec.properties import make

    from .test_pipeline_sliced_replay import sliced_tables

    config = JudgeConfig(close_grace=2.0, answer_timeout=2.0, supported_protocol_levels=frozenset({4, 5}))

    def assigned(at: float, identifier: str) -> Talk:
        connect = codec.Connect(client_id="", protocol_level=5, keep_alive=0)
        connack = codec.Connack(properties=make(assigned_client_identifier=identifier))
        return Talk(version="5").client(connect, at=at).server(connack).quiet(at=10.0)

    def found(talks: dict[str, Talk], sliced: bool) -> list[tuple[object, ...]]:
        blobs = [(name, pickle.dumps(judge_flow(flow(name, talk), config).replayed)) for name, talk in talks.items()]
        if sliced:
            folder = tmp_path / str(len(list(tmp_path.iterdir())))
            transcripts = {name: pickle.loads(blob) for name, blob in blobs}
            rows = sliced_tables(transcripts, config, folder, 1, 1)["routing_findings"].elements()
            at = ROUTING_COLUMNS.index("flow"), ROUTING_COLUMNS.index("rule")
            return [(row[at[0]], row[at[1]]) for row in rows]
        _deliveries, findings, _ = replay_broker("10.0.0.1:1883", blobs, config)
        return list(zip(findings.data["flow"], findings.data["rule"], strict=True))

    same = {"a": assigned(0.5, "same"), "b": assigned(1.0, "same")}
    assert found(same, False) == [("b", "MQTT-3.1.3-6")]
    assert found(same, True) == [("b", "MQTT-3.1.3-6")]
    assert found({"a": assigned(0.5, "one"), "b": assigned(1.0, "two")}, False) == []
    assert found({"a": assigned(0.5, "one"), "b": assigned(1.0, "two")}, True) == []


LONG = bytes(range(40))  # above the digest's size: the judging stage hands on its digest


def test_a_digest_replaces_the_payload_and_nothing_else() -> None:
    """The replay compares what a 5.0 copy carries with what was published (properties unaltered, the remaining
    Message Expiry Interval, the Subscription Identifiers): the transcript handed on keeps every field of each
    PUBLISH and of the Will but the payload."""
    from mqttaudit.codec.properties import make

    from .test_judge_model_5 import client, copy, message

    will = codec.Will(topic="w", message=LONG, qos=1, properties=make(content_type="text/plain", will_delay_interval=3))
    sent = message("t", LONG, user_property=[("k", "v")], message_expiry_interval=60, content_type="c")
    delivered = copy(sent, properties=(*sent.properties, *make(subscription_identifier=[7])))
    talk = client("d", will=will).client(sent).server(codec.Puback(packet_id=1)).server(delivered)
    talk.client(codec.Puback(packet_id=delivered.packet_id or 0)).quiet(after=5)
    config = JudgeConfig(close_grace=2.0, answer_timeout=2.0, supported_protocol_levels=frozenset({4, 5}))
    transcript = judge_flow(flow("d", talk), config).replayed

    def all_but_payload(value: codec.Publish | codec.Will) -> dict[str, object]:
        fields = value.as_dict()
        fields.pop("payload" if isinstance(value, codec.Publish) else "message")
        return fields

    assert transcript.connect is not None and transcript.connect.will is not None
    assert len(transcript.connect.will.message) == 16
    assert all_but_payload(transcript.connect.will) == all_but_payload(will)
    [published] = transcript.published
    assert len(published.message.payload) == 16 and all_but_payload(published.message) == all_but_payload(sent)
    [arrived] = transcript.delivered
    assert arrived.message.payload == published.message.payload
    assert all_but_payload(arrived.message) == all_but_payload(delivered)


def _routing_cases() -> list[tuple[str, Any, str]]:
    from . import test_judge_model_5 as five

    return [
        ("identifiers carried", lambda: five.identifiers(7, payload=LONG), five.named(five.rules_5.IDENTIFIERS_SENT)),
        ("identifiers missing", lambda: five.identifiers(payload=LONG), five.named(five.rules_5.IDENTIFIERS_SENT)),
        (
            "expired, not delivered",
            lambda: five.expiring(back_at=5.0, got=False, payload=LONG),
            five.named(five.rules_5.EXPIRED_NOT_DELIVERED),
        ),
        (
            "expired, delivered",
            lambda: five.expiring(back_at=5.0, got=True, payload=LONG),
            five.named(five.rules_5.EXPIRED_NOT_DELIVERED),
        ),
        ("expiry counted down", lambda: five.remaining(59, payload=LONG), five.named(five.rules_5.EXPIRY_REMAINING)),
        (
            "expiry not counted down",
            lambda: five.remaining(30, payload=LONG),
            five.named(five.rules_5.EXPIRY_REMAINING),
        ),
        (
            "properties altered",
            lambda: five.forwarded(five.ALTERED, payload=LONG),
            five.named(five.rules_5.CONTENT_TYPE_FORWARDED),
        ),
        (
            "properties forwarded",
            lambda: five.forwarded(five.RICH.properties, payload=LONG),
            five.named(five.rules_5.CONTENT_TYPE_FORWARDED),
        ),
    ]


ROUTING_CASES = _routing_cases()


@pytest.mark.parametrize(("name", "scenario", "rule"), ROUTING_CASES, ids=[case[0] for case in ROUTING_CASES])
def test_the_replay_of_the_judging_stage_s_transcripts_judges_5_0_forwarding_as_the_judge_does(
    name: str, scenario: Any, rule: str
) -> None:
    """5.0 messages whose payloads the judging stage hands on as digests: the audit's replay finds what the judge
    finds over the whole conversations (:func:`~mqttaudit.judge.judge_scenario`, payloads and all; every finding of
    these scenarios is the replay's), the rule's finding or none. (The digest dropped the properties: a copy
    carrying its Subscription Identifier was reported as missing it [MQTT-3.3.4-3], an expired message as one the
    session had to keep [MQTT-3.1.2-23], an altered property and an expiry not counted down were passed.)"""
    from .test_judge_model_5 import V5, judged

    conversation = scenario()
    whole = judged(conversation)
    assert rule in whole.assessed, name  # the scenario decides the rule
    blobs = [(n, pickle.dumps(judge_flow(flow(n, talk), V5).replayed)) for n, talk in conversation.items()]
    _, findings, _ = replay_broker("10.0.0.1:1883", blobs, V5)
    assert sorted(findings.data["rule"]) == sorted(r for f in whole.findings for r in f.rules), name
