"""Files of one fleet audited together on Spark (``local[2]``): a connection rotated across files (``tcpdump -C``)
is one connection, a 4-tuple reused by a second connection gives two, a file that repeats another's bytes is
deduplicated, and a byte-edited copy is judged apart and reported as a conflicting copy, with both files and the
first differing offset, never silently.

The rotation is real traffic through a real mosquitto, recorded by two tcpdumps at once: one rotating its file
every million bytes, one writing a single file; both recordings must audit to the same connections and findings.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit import codec
from mqttaudit.codec import Connect, Disconnect, Puback, Publish, Suback, Subscribe, Subscription
from mqttaudit.pipeline.audit import run_audit
from mqttaudit.probe.brokers import BrokerUnavailable, start_broker
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.spec.ids import R311
from mqttaudit.status import EXIT_FINDINGS, EXIT_INCOMPLETE, EXIT_OK

from .cli_in_process import run_mqttaudit
from .crafted import BROKER, CLIENT_A, CONNACK_ACCEPTED, PUBLISH_QOS1, connect, write_capture
from .observed_captures import RawClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Messages of :data:`MESSAGE_BYTES` published (several million bytes in all: a rotation every million bytes
#: gives several files, and the publisher's and subscriber's connections span them).
MESSAGES = 12
MESSAGE_BYTES = 200_000
PUBACK = bytes.fromhex("40 02 00 07")


def _traffic(port: int) -> None:
    """A subscriber at QoS 0, a publisher of :data:`MESSAGES` large QoS 1 messages, and a client that subscribes to
    an empty Topic Filter (the broker closes it)."""
    subscriber = RawClient(port)
    subscriber.send(Connect(client_id="fleet-sub"))
    subscriber.receive(codec.Connack)
    subscriber.send(Subscribe(packet_id=1, subscriptions=[Subscription(topic_filter="fleet/#", qos=0)]))
    subscriber.receive(Suback)
    publisher = RawClient(port)
    publisher.send(Connect(client_id="fleet-pub"))
    publisher.receive(codec.Connack)
    for number in range(MESSAGES):
        payload = bytes([number]) * MESSAGE_BYTES
        publisher.send(Publish(topic=f"fleet/{number}", payload=payload, qos=1, packet_id=number + 1))
        publisher.receive(Puback)
        subscriber.receive(Publish)
    bad = RawClient(port)
    bad.send(Connect(client_id="fleet-bad"))
    bad.receive(codec.Connack)
    bad.socket.sendall(bytes.fromhex("82 05 00 01 00 00 00"))  # SUBSCRIBE to '' [MQTT-4.7.3-1]
    assert bad.socket.recv(16) == b""  # the broker closes it
    for client in (publisher, subscriber):
        client.send(Disconnect())
        client.close()
    bad.close()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """The same traffic recorded twice at once: rotated (``tcpdump -C 1``) and whole."""
    folder = tmp_path_factory.mktemp("fleet")
    (folder / "rotated").mkdir()
    try:
        broker = start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with (
        broker,
        tcpdump_recording(folder / "rotated" / "traffic.pcap", broker.port, rotate_mb=1),
        tcpdump_recording(folder / "whole.pcap", broker.port),
    ):
        _traffic(broker.port)
    rotated = sorted((folder / "rotated").iterdir())
    return rotated, folder / "whole.pcap"


def _tables(out: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: pq.read_table(out / name).to_pylist() for name in ("connections", "violations", "packets")}


def _by_endpoints(connections: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """Each connection by its endpoints (each client has a port of its own), with what was judged of it."""
    return {
        row["flow"].split("@")[0]: (row["client_id"], row["packets"], row["violations"], row["how"], row["mid_stream"])
        for row in connections
    }


def test_a_rotated_recording_audits_as_the_whole_recording_made_at_the_same_time(
    spark: SparkSession, recordings: tuple[list[Path], Path], tmp_path: Path
) -> None:
    rotated, whole = recordings
    assert len(rotated) >= 3, [path.name for path in rotated]  # the rotation did cut the connections
    split = run_audit([str(path) for path in rotated], tmp_path / "rotated", spark=spark)
    one = run_audit([str(whole)], tmp_path / "whole", spark=spark)
    split_tables, whole_tables = _tables(tmp_path / "rotated"), _tables(tmp_path / "whole")
    # The same connections, each judged whole: none starts mid-stream in a later file.
    assert _by_endpoints(split_tables["connections"]) == _by_endpoints(whole_tables["connections"])
    assert {row["client_id"] for row in split_tables["connections"]} == {"fleet-sub", "fleet-pub", "fleet-bad"}
    assert not any(row["mid_stream"] for row in split_tables["connections"])

    def found(tables: dict[str, list[dict[str, Any]]]) -> Counter[tuple[Any, ...]]:
        return Counter(
            (row["flow"].split("@")[0], row["rule"], row["actor"], row["offset"]) for row in tables["violations"]
        )

    assert found(split_tables) == found(whole_tables)
    assert (R311.MQTT_4_7_3_1, "client") in {(row["rule"], row["actor"]) for row in split_tables["violations"]}
    assert split.summary["counts"] == one.summary["counts"]
    assert split.exit_status == one.exit_status == EXIT_FINDINGS
    assert split.summary["conflicting_copies"]["count"] == split.summary["duplicate_copies"]["count"] == 0
    # Each packet is credited to the file that holds it: several files hold the publisher's packets.
    per_file = Counter(row["capture"] for row in split_tables["packets"])
    assert sum(per_file.values()) == len(whole_tables["packets"])
    publisher = next(row["flow"] for row in split_tables["connections"] if row["client_id"] == "fleet-pub")
    assert len({row["capture"] for row in split_tables["packets"] if row["flow"] == publisher}) >= 2


def _conversation(session: Any, *, publish: bytes = PUBLISH_QOS1) -> list[bytes]:
    return [
        *session.handshake(),
        session.send(0, connect(b"a")),
        session.send(1, CONNACK_ACCEPTED),
        session.send(0, publish),
        session.send(1, PUBACK),
        session.fin(0),
        session.fin(1),
    ]


def _write(path: Path, packets: list[bytes], start: float = 0.0) -> Path:
    return write_capture(path, [(start + number * 0.01, packet) for number, packet in enumerate(packets)])


def _edited(source: Path, target: Path, old: bytes, new: bytes) -> Path:
    """A copy of ``source`` with one byte changed: the first ``old`` (a pattern holding it) becomes ``new``."""
    data = source.read_bytes()
    assert data.count(old) == 1
    target.write_bytes(data.replace(old, new))
    return target


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    from mqttaudit.capture.writer import TcpSession

    return _write(tmp_path / "aa-clean.pcap", _conversation(TcpSession(CLIENT_A, BROKER)))


def test_a_byte_edited_copy_is_judged_apart_and_reported_with_both_files_and_the_offset(
    spark: SparkSession, clean: Path, tmp_path: Path
) -> None:
    # The PUBLISH's first byte 0x32 made 0x02: a reserved packet type in the edited copy only.
    edited = _edited(clean, tmp_path / "zz-edited-reserved-type.pcap", b"\x32\x09\x00\x03a/b", b"\x02\x09\x00\x03a/b")
    out = tmp_path / "out"
    ran = run_mqttaudit("audit", str(clean), str(edited), "--ports", "1883", "--out", str(out))
    assert ran.returncode == EXIT_FINDINGS, ran.stderr
    summary = json.loads((out / "summary.json").read_text())
    (record,) = summary["conflicting_copies"]["copies"]
    assert record["captures"] == ["aa-clean.pcap", "zz-edited-reserved-type.pcap"]
    assert (record["side"], record["offset"]) == ("client", len(connect(b"a")))
    assert record["connections"] == [f"{record['connection']}~{capture}" for capture in record["captures"]]
    assert "~" not in record["connection"] and "@" in record["connection"]
    assert (
        f"conflicting copies: aa-clean.pcap and zz-edited-reserved-type.pcap hold the connection "
        f"{record['connection']} with different bytes"
    ) in ran.stderr
    assert f"first at offset {len(connect(b'a'))} of the client's stream" in ran.stderr
    connections = pq.read_table(out / "connections").to_pylist()
    assert sorted(row["capture"] for row in connections) == record["captures"]
    violations = pq.read_table(out / "violations").to_pylist()
    # The edited copy's findings are its own (the crafted broker read on past the malformed packet); the clean
    # copy, judged apart, has none.
    assert {row["capture"] for row in violations} == {"zz-edited-reserved-type.pcap"}
    assert (R311.MQTT_2_2_1_RESERVED_TYPE, "client") in {(row["rule"], row["actor"]) for row in violations}
    packets = Counter(row["capture"] for row in pq.read_table(out / "packets").to_pylist())
    assert packets == {"aa-clean.pcap": 4, "zz-edited-reserved-type.pcap": 4}
    # The report names the connection apart from the files (Markdown escapes its | and @).
    named = record["connection"].replace("|", "\\|").replace("@", "\\@")
    assert f"of the client's stream of {named}." in (out / "findings.md").read_text()


def test_copies_that_differ_in_a_payload_byte_alone_make_the_audit_incomplete(
    spark: SparkSession, clean: Path, tmp_path: Path
) -> None:
    edited = _edited(clean, tmp_path / "zz-edited-payload.pcap", b"a/b\x00\x07hi", b"a/b\x00\x07hI")
    result = run_audit([str(clean), str(edited)], tmp_path / "out", spark=spark)
    assert result.summary["counts"]["violations"] == 0
    assert result.summary["conflicting_copies"]["count"] == 1
    assert result.exit_status == EXIT_INCOMPLETE  # never "conformant" when which copy was on the wire is unknown


def test_a_repeated_file_is_deduplicated_and_a_reused_four_tuple_is_a_second_connection(
    spark: SparkSession, clean: Path, tmp_path: Path
) -> None:
    from mqttaudit.capture.writer import TcpSession

    copy = tmp_path / "bb-copy.pcap"
    shutil.copyfile(clean, copy)
    # The same ports a minute later: a new connection (new SYN, other sequence numbers) in another file.
    again = _write(
        tmp_path / "cc-again.pcap", _conversation(TcpSession(CLIENT_A, BROKER, client_isn=90_000)), start=60.0
    )
    alone = run_audit([str(clean)], tmp_path / "alone", spark=spark)
    ran = run_mqttaudit("audit", str(clean), str(copy), str(again), "--ports", "1883", "--out", str(tmp_path / "out"))
    result_summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "1 copy(ies) of connections left out: another file holds the same bytes" in ran.stdout
    connections = pq.read_table(tmp_path / "out" / "connections").to_pylist()
    assert sorted((row["capture"], row["packets"]) for row in connections) == [
        ("aa-clean.pcap", 4),
        ("cc-again.pcap", 4),
    ]
    assert result_summary["counts"]["flows"] == 1
    duplicates = result_summary["duplicate_copies"]
    assert [(entry["capture"], entry["of"]) for entry in duplicates["copies"]] == [("bb-copy.pcap", "aa-clean.pcap")]
    assert duplicates["segments"] == len(_conversation(TcpSession(CLIENT_A, BROKER)))
    assert result_summary["conflicting_copies"]["count"] == 0
    assert ran.returncode == alone.exit_status == EXIT_OK


def test_fleet_records_are_counted_and_capped_in_spark_in_the_order_the_summary_lists_them(
    spark: SparkSession,
) -> None:
    import random

    from mqttaudit.pipeline.bounded import collect_parts
    from mqttaudit.pipeline.summary import LISTED_COPIES, fleet_parts, fleet_summary

    draw = random.Random(31)
    conflicts = [
        {
            "captures": [f"a{draw.randrange(5)}.pcap", f"z{draw.randrange(5)}.pcap"],
            "connection": f"c{number}",
            "connections": [None if number % 7 == 0 else f"c{number}~x", f"c{number}~y"],
            "sender": "10.0.0.5:50122",
            "side": "client",
            "offset": draw.randrange(1000),
        }
        for number in range(LISTED_COPIES + 50)
    ]
    duplicates = [
        (f"d{draw.randrange(40)}.pcap", {"of": f"o{number}.pcap", "bytes": number, "segments": 2})
        for number in range(LISTED_COPIES + 30)
    ]
    rows = [(json.dumps({"conflicting_copy": c}), c["captures"][1]) for c in conflicts]
    rows += [(json.dumps({"duplicate_copy": record}), capture) for capture, record in duplicates]
    draw.shuffle(rows)
    notes = spark.createDataFrame(rows, "note string, capture string").repartition(4)
    summary = fleet_summary(collect_parts(fleet_parts(notes)))
    # What the driver made of every note before, when each reached it (the keys are distinct: one order).
    assert len({(str(c["captures"]), c["connections"][0], c["offset"]) for c in conflicts}) == len(conflicts)
    conflicts.sort(key=lambda record: (record["captures"], record["connections"][0] or "", record["offset"]))
    listed = [record | {"capture": capture} for capture, record in duplicates]
    listed.sort(key=lambda record: (record["capture"], record["of"]))
    assert summary["conflicting_copies"]["count"] == len(conflicts)
    assert summary["conflicting_copies"]["copies"] == conflicts[:LISTED_COPIES]
    assert summary["duplicate_copies"] == {
        "count": len(duplicates),
        "bytes": sum(record["bytes"] for _capture, record in duplicates),
        "segments": 2 * len(duplicates),
        "copies": listed[:LISTED_COPIES],
    }
