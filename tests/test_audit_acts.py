"""One act, one finding and no under-claim, on captures through ``mqttaudit audit`` (in process, on the test
worker's Spark session): the shared capture that shows a server accepting a bad Property Length
(mqtt5-excessiveproplen.pcap), and a capture written here with the project's capture writer, one connection per
defect, whose bytes are those the held-out captures showed:

- ``reuse``: an MQTT 5.0 client sends QoS 1 PUBLISH id 7, then another message under id 7 before the PUBACK;
- ``order-*``: an MQTT 3.1.1 client's QoS 0 PUBLISH is not captured (a gap, before its SUBSCRIBE) ahead of the
  server's QoS 1 PUBLISHes id 1 and 2, which the client acknowledges in order, or swapped; ``order-open`` loses it
  after the PUBLISHes;
- ``resumed``: an MQTT 3.1.1 session resumed (Session Present 1) subscribes to 'a/+' and gets a PUBLISH to 'a/b';
- ``mid-stream``: a capture that starts after the CONNECT: the server's 52-byte MQTT 5.0 CONNACK, then its FIN.

The judge-level counterparts, byte for byte, are in ``test_judge_acts.py``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit import codec
from mqttaudit.capture import audit_records, read_records, writer
from mqttaudit.capture.conversation import INFERRED_5
from mqttaudit.capture.segments import ACK, FIN, PSH
from mqttaudit.codec.properties import make
from mqttaudit.judge.reasons import LOST_BYTES

from .cli_in_process import run_mqttaudit
from .corpus import capture

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BROKER = ("10.0.0.1", 1883)
START = 1_780_000_000
V5 = codec.ProtocolVersion.V5
PROPERTY_LENGTH_CAPTURE = "suricata-verify/mqtt5-excessiveproplen.pcap"
#: MQTT 5.0 CONNACK 0x00 with 47 bytes of properties: 52 bytes in all.
CONNACK_52 = codec.encode(
    codec.Connack(
        properties=make(
            assigned_client_identifier="auto-" + "0" * 27,
            topic_alias_maximum=10,
            receive_maximum=20,
            maximum_qos=1,
            retain_available=1,
            wildcard_subscription_available=1,
        )
    ),
    version=V5,
)


def enc(packet: codec.Packet, version: codec.ProtocolVersion = codec.ProtocolVersion.V3_1_1) -> bytes:
    return codec.encode(packet, version=version)


def publish(packet_id: int, payload: bytes, version: codec.ProtocolVersion = codec.ProtocolVersion.V3_1_1) -> bytes:
    return enc(codec.Publish(topic="a/b", payload=payload, qos=1, packet_id=packet_id), version)


def subscribe(clean: bool) -> list[bytes]:
    """CONNECT (3.1.1, Keep Alive 0) and its CONNACK, then SUBSCRIBE 'a/+' QoS 1 and its SUBACK."""
    return [
        enc(codec.Connect(client_id="acts", keep_alive=0, clean_session=clean)),
        enc(codec.Connack(session_present=not clean)),
        enc(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="a/+", qos=1),))),
        enc(codec.Suback(packet_id=1, return_codes=(1,))),
    ]


def conversation(port: int, steps: list[tuple[int, bytes | None]], *, handshake: bool = True) -> list[bytes]:
    """The IP packets of one connection: each step is (side, MQTT bytes); ``None`` bytes are a client QoS 0
    PUBLISH that is sent but not captured (its sequence numbers are spent)."""
    session = writer.TcpSession(("10.0.0.5", port), BROKER, client_isn=port * 1000, server_isn=port * 3000)
    packets = session.handshake() if handshake else []
    for side, data in steps:
        if data is None:
            session.send(side, enc(codec.Publish(topic="lost", payload=b"q")))  # not in the capture
        else:
            packets.append(session.send(side, data))
    return [*packets, session.fin(0), session.fin(1), session.segment(0)]


def order(port: int, acknowledged: tuple[int, ...], *, lost_after: bool = False) -> list[bytes]:
    """CONNECT, CONNACK, a client QoS 0 PUBLISH not captured (the SUBACK's acknowledgement shows it was sent), the
    SUBSCRIBE and SUBACK, the server's PUBLISHes id 1 and 2, the client's PUBACKs in the order ``acknowledged``;
    ``lost_after``: the PUBLISH not captured comes after the server's instead."""
    connect, connack, *subscribed = subscribe(True)
    steps: list[tuple[int, bytes | None]] = [(0, connect), (1, connack)]
    lost: list[tuple[int, bytes | None]] = [(0, None)]
    published: list[tuple[int, bytes | None]] = [(1, publish(1, b"1")), (1, publish(2, b"2"))]
    steps += ([] if lost_after else lost) + [(0, subscribed[0]), (1, subscribed[1])] + published
    steps += (lost if lost_after else []) + [(0, enc(codec.Puback(packet_id=i))) for i in acknowledged]
    return conversation(port, [*steps, (0, enc(codec.Disconnect()))])


CONNECTIONS: dict[str, list[bytes]] = {
    "reuse": conversation(
        40001,
        [
            (0, enc(codec.Connect(client_id="reuse", keep_alive=0, protocol_level=5), V5)),
            (1, enc(codec.Connack(), V5)),
            (0, publish(7, b"first", V5)),
            (0, publish(7, b"second", V5)),
            (1, enc(codec.Puback(packet_id=7), V5)),
            (0, enc(codec.Disconnect(), V5)),
        ],
    ),
    "order-kept": order(40002, (1, 2)),
    "order-swapped": order(40003, (2, 1)),
    "order-open": order(40004, (2, 1), lost_after=True),
    "resumed": conversation(
        40005,
        [
            *((i % 2, data) for i, data in enumerate(subscribe(False))),
            (1, publish(5, b"m")),
            (0, enc(codec.Puback(packet_id=5))),
            (0, enc(codec.Disconnect())),
        ],
    ),
}


def mid_stream_connack() -> list[bytes]:
    """No handshake and no client byte: the capture starts after the CONNECT; the server's CONNACK ends with FIN."""
    session = writer.TcpSession(("10.0.0.5", 40006), BROKER, client_isn=9000, server_isn=9500)
    return [session.send(1, CONNACK_52, flags=FIN | PSH | ACK), session.fin(0)]


def crafted(folder: Path) -> Path:
    frames: list[tuple[int, bytes]] = []
    for number, packets in enumerate([*CONNECTIONS.values(), mid_stream_connack()]):
        frames += [((START + 10 * number) * 10**9 + index * 10**6, packet) for index, packet in enumerate(packets)]
    path = folder / "acts-2026.pcap"
    path.write_bytes(writer.pcap_bytes(frames, linktype=101))
    return path


def test_the_crafted_connack_is_52_bytes_and_no_3_1_1_packet() -> None:
    assert len(CONNACK_52) == 52 and CONNACK_52[:2] == bytes.fromhex("20 32")
    assert any(not codec.rules.is_advisory(v.rule) for v in codec.decode(CONNACK_52, "server").violations)


def test_the_capture_layer_frames_the_connack_that_ends_at_the_fin_as_the_5_0_packet_it_is(tmp_path: Path) -> None:
    # Before: the hunt for a boundary read it as 3.1.1 only, so its bytes stayed "mid-stream start, before the first
    # proven packet boundary", never decoded.
    path = tmp_path / "connack.pcap"
    path.write_bytes(writer.pcap_bytes([(START * 10**9 + i, p) for i, p in enumerate(mid_stream_connack())], 101))
    [audit] = audit_records(read_records(path))
    assert audit.mid_stream and audit.version == INFERRED_5 and audit.unassessable == ()
    [(_side, _time, frame)] = audit.frames
    assert isinstance(frame.packet, codec.Connack) and frame.raw == CONNACK_52 and frame.violations == ()


# -- the audit -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("acts")
    out = folder / "out"
    ran = run_mqttaudit("audit", str(crafted(folder)), str(capture(PROPERTY_LENGTH_CAPTURE)), "--out", str(out))
    assert ran.returncode == 1, ran.stderr
    names = ("violations", "not_assessable", "packets", "gaps")
    tables = {name: pq.read_table(out / name).to_pylist() for name in names}
    tables["connections"] = pq.read_table(out / "connections").to_pylist()
    tables["reports"] = [
        (out / name).read_text(encoding="utf-8") for name in ("findings.md", "junit.xml", "report.html")
    ]
    return tables


def rows_of(audited: dict[str, Any], table: str, port: int) -> list[dict[str, Any]]:
    flows = {row["flow"] for row in audited["connections"] if row["client"].endswith(f":{port}")}
    return [row for row in audited[table] if row["flow"] in flows]


@pytest.mark.captures
def test_no_two_violation_rows_name_the_same_act(audited: dict[str, Any]) -> None:
    acts = Counter((row["flow"], row["event"], row["actor"]) for row in audited["violations"])
    assert [act for act, rows in acts.items() if rows > 1] == []


@pytest.mark.captures
def test_a_server_accepting_a_bad_property_length_is_one_row_citing_mqtt_3_1_4_1(audited: dict[str, Any]) -> None:
    server = [
        (row["rule"], row["also"], row["event"])
        for row in rows_of(audited, "violations", 37758)
        if row["actor"] == "server"
    ]
    assert server == [("MQTT-3.1.4-1", ["MQTT-2.2.2-property-length"], 1)]


@pytest.mark.captures
def test_every_report_names_the_statements_the_act_broke_besides_the_one_it_cites(audited: dict[str, Any]) -> None:
    for text in audited["reports"]:
        assert "the same act also breaks MQTT-2.2.2-property-length" in text
        assert "the same act also breaks MQTT-2.2.1-3, MQTT-4.3.2-3" in text


@pytest.mark.captures
def test_a_publish_reusing_an_identifier_in_flight_is_one_row_citing_mqtt_4_3_2_1(audited: dict[str, Any]) -> None:
    rows = [(row["rule"], row["also"], row["actor"]) for row in rows_of(audited, "violations", 40001)]
    assert rows == [("MQTT-4.3.2-1", ["MQTT-2.2.1-3", "MQTT-4.3.2-3"], "client")]


@pytest.mark.captures
def test_client_bytes_lost_before_every_publish_leave_the_answer_order_decided(audited: dict[str, Any]) -> None:
    def order_rows(port: int, table: str) -> list[str]:
        return [row["rule"] for row in rows_of(audited, table, port) if row["rule"] == "MQTT-4.6.0-2"]

    assert order_rows(40002, "violations") == [] and order_rows(40002, "not_assessable") == []
    # The client's QoS 0 PUBLISH not captured (9 bytes) is the one gap of the connection.
    gaps = [(row["kind"], row["direction"], row["length"]) for row in rows_of(audited, "gaps", 40002)]
    assert gaps == [("gap", "client", 9)]
    assert order_rows(40003, "violations") == ["MQTT-4.6.0-2"]
    open_ = [row["tag"] for row in rows_of(audited, "not_assessable", 40004) if row["rule"] == "MQTT-4.6.0-2"]
    assert open_ and set(open_) == {LOST_BYTES} and order_rows(40004, "violations") == []


@pytest.mark.captures
def test_a_delivery_matching_a_captured_subscribe_is_decided_on_a_resumed_session(audited: dict[str, Any]) -> None:
    undecided = {row["rule"] for row in rows_of(audited, "not_assessable", 40005)}
    assert not {"MQTT-3.3.2-3", "MQTT-3.8.4-6"} & undecided
    assert rows_of(audited, "violations", 40005) == []


@pytest.mark.captures
def test_the_mid_stream_connack_at_the_fin_is_decoded(audited: dict[str, Any]) -> None:
    [connection] = [row for row in audited["connections"] if row["client"].endswith(":40006")]
    assert connection["version"] == INFERRED_5 and connection["mid_stream"]
    [packet] = rows_of(audited, "packets", 40006)
    assert (packet["type"], packet["length"], packet["reason_code"], packet["topic_alias_maximum"]) == (
        "CONNACK",
        52,
        0,
        10,
    )
