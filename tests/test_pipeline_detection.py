"""MQTT found on any TCP port by the audit on Spark (``local[2]``), on captures recorded here with tcpdump: mosquitto
on a random free port with no ``--ports``, HTTP and MQTT side by side, HTTP alone, no TCP at all, and flows whose
start the capture missed, on a port proven by another flow's CONNECT and on one nothing proves."""

from __future__ import annotations

import contextlib
import http.server
import pickle
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit.capture import decode_segment, plan_chunks, read_records, writer
from mqttaudit.capture.segments import ACK, SYN, Segment
from mqttaudit.cli.audit import summarize
from mqttaudit.cli.main import main
from mqttaudit.pipeline.audit import run_audit
from mqttaudit.pipeline.detection import CONNECT_AT_START, no_mqtt_message, proven_ports
from mqttaudit.probe.brokers import BrokerUnavailable, free_port, start_broker
from mqttaudit.probe.recorder import tcpdump_recording
from mqttaudit.probe.traffic import MISBEHAVIOUR, run_traffic

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOST = "127.0.0.1"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def http_server(folder: Path) -> Iterator[int]:
    """Python's HTTP server on a free port of 127.0.0.1, serving ``folder``."""
    (folder / "index.html").write_text("<p>not MQTT</p>\n" * 50)
    handler = lambda *args: _Quiet(*args, directory=str(folder))  # noqa: E731
    server = http.server.ThreadingHTTPServer((HOST, free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def fetch(port: int, times: int) -> None:
    for _ in range(times):
        with urllib.request.urlopen(f"http://{HOST}:{port}/index.html", timeout=5) as response:
            assert response.status == 200 and response.read()


def mqtt_client(port: int, name: str) -> Any:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=name, protocol=mqtt.MQTTv311)
    client.connect(HOST, port, keepalive=30)
    client.loop_start()
    return client


def _segments(path: Path) -> list[tuple[int, Segment]]:
    out = []
    for index, record in enumerate(read_records(str(path))):
        segment = decode_segment(record[0], record[1], record[2])
        if not isinstance(segment, str):
            out.append((index, segment))
    return out


@pytest.fixture(scope="module")
def broker() -> Iterator[Any]:
    try:
        running = start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with running:
        yield running


@pytest.fixture(scope="module")
def traffic(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """paho clients and misbehaving raw clients through mosquitto on a random free port (as test_pipeline_audit)."""
    path = tmp_path_factory.mktemp("traffic") / "traffic.pcap"
    with tcpdump_recording(path, broker.port):
        run_traffic(HOST, broker.port, rounds=2)
    return path, broker.port


@pytest.fixture(scope="module")
def side_by_side(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """One tcpdump of an HTTP server and mosquitto: three HTTP requests, a subscriber that connects first, then a
    publisher that connects two seconds later and publishes to it, more HTTP, both clients gone."""
    folder = tmp_path_factory.mktemp("side")
    path = folder / "side.pcap"
    received = threading.Event()
    with http_server(folder) as web, tcpdump_recording(path, (web, broker.port)):
        fetch(web, 2)
        subscriber = mqtt_client(broker.port, "side-subscriber")
        subscribed = threading.Event()
        subscriber.on_message = lambda *args: received.set()
        subscriber.on_subscribe = lambda *args: subscribed.set()
        subscriber.subscribe("side/topic", qos=1)
        assert subscribed.wait(5)
        time.sleep(2.0)
        publisher = mqtt_client(broker.port, "side-publisher")
        publisher.publish("side/topic", b"hello", qos=1).wait_for_publish(timeout=5)
        assert received.wait(5)
        fetch(web, 1)
        for client in (publisher, subscriber):
            client.disconnect()
            client.loop_stop()
    return path, broker.port, web


def _audit(spark: SparkSession, paths: list[Path], out: Path, **kwargs: Any) -> dict[str, Any]:
    result = run_audit([str(p) for p in paths], out, tolerance=2.0, spark=spark, **kwargs)
    tables = {name: pq.read_table(out / name).to_pylist() for name in ("connections", "violations", "packets")}
    return {"summary": result.summary, **tables}


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def test_without_ports_the_audit_finds_what_ports_finds(
    spark: SparkSession, traffic: tuple[Path, int], tmp_path: Path
) -> None:
    capture, port = traffic
    given = _audit(spark, [capture], tmp_path / "given", ports=[port])
    found = _audit(spark, [capture], tmp_path / "found")
    assert given["summary"]["counts"] == found["summary"]["counts"]
    assert given["summary"]["bytes"] == found["summary"]["bytes"]
    assert {client_id for client_id, _, _ in MISBEHAVIOUR} <= {row["client_id"] for row in found["connections"]}
    for table, key in (("connections", ("flow", "client", "server", "client_id", "roles")), ("violations", None)):

        def rows(audit: dict[str, Any], table: str = table, key: Any = key) -> list[Any]:
            return sorted(
                tuple(sorted(row.items())) if key is None else tuple(row[k] for k in key) for row in audit[table]
            )

        assert rows(given) == rows(found), table
    assert found["summary"]["detection"]["ports"] == [
        {"port": port, "how": CONNECT_AT_START, "connections": found["summary"]["counts"]["connections"]}
    ]
    assert given["summary"]["detection"]["ports"][0]["how"] == "--ports"


def test_the_first_pass_matches_handshakes_and_connects_across_small_chunks(
    spark: SparkSession, traffic: tuple[Path, int]
) -> None:
    capture, port = traffic
    for size in (600, 4096, 1 << 30):
        chunks = plan_chunks(str(capture), size)
        rows = [{"capture": "t", "path": str(capture), "chunk": pickle.dumps(chunk)} for chunk in chunks]
        assert proven_ports(spark, rows) == frozenset({port}), size


def test_http_beside_mqtt_is_counted_as_other_tcp_and_not_judged(
    spark: SparkSession, side_by_side: tuple[Path, int, int], tmp_path: Path
) -> None:
    capture, mqtt_port, web = side_by_side
    audit = _audit(spark, [capture], tmp_path / "out")
    summary = audit["summary"]
    assert {row["client_id"] for row in audit["connections"]} == {"side-subscriber", "side-publisher"}
    assert {_port(row["server"]) for row in audit["connections"]} == {mqtt_port}
    assert all(web not in (_port(row["client"]), _port(row["server"])) for row in audit["connections"])
    assert summary["detection"]["ports"] == [{"port": mqtt_port, "how": CONNECT_AT_START, "connections": 2}]
    other = summary["detection"]["other_tcp"]
    http_frames = sum(1 for _, s in _segments(capture) if web in (s[2], s[4]))
    assert other["ports"][0]["port"] == web and other["frames"] == other["ports"][0]["frames"] == http_frames
    assert other["flows"] >= 3  # one connection per urllib request
    assert summary["segments"] + other["frames"] == len(_segments(capture))
    assert summary["broker_ports"] == sorted({1883, mqtt_port})
    said = summarize(summary).splitlines()
    assert f"MQTT on port(s) {mqtt_port} ({CONNECT_AT_START}, 2 connection(s))" in said
    assert f"other TCP, not judged: {http_frames} frame(s) in {other['flows']} flow(s) on port(s) {web}" in said


def test_a_capture_of_http_alone_says_no_mqtt_connection_and_names_the_http_port(
    spark: SparkSession, side_by_side: tuple[Path, int, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capture, _mqtt_port, web = side_by_side
    records = list(read_records(str(capture)))
    http_only = {index for index, s in _segments(capture) if web in (s[2], s[4])}
    cut = tmp_path / "http.pcap"
    cut.write_bytes(writer.pcap_bytes([(r[0], r[2]) for i, r in enumerate(records) if i in http_only], linktype=1))
    status = main(["audit", str(cut), "--out", str(tmp_path / "out"), "--master", "local[2]"])
    said = capsys.readouterr()
    assert status == 4
    message = f"no MQTT connection found: {len(http_only)} frames on TCP port {web}, none of them starting with an"
    assert message in said.err, said.err
    assert f"try --ports {web}" in said.err


def test_a_capture_without_tcp_says_so(spark: SparkSession, tmp_path: Path) -> None:
    udp = [writer.ipv4("10.0.0.1", "10.0.0.2", b"\x04\xd2\x07\x5b\x00\x0c\x00\x00data", protocol=17)] * 12
    capture = tmp_path / "udp.pcap"
    capture.write_bytes(writer.pcap_bytes([(i * 1000, frame) for i, frame in enumerate(udp)], linktype=101))
    result = run_audit([str(capture)], tmp_path / "out", spark=spark)
    assert result.summary["counts"]["connections"] == 0
    assert no_mqtt_message(result.summary) == "no MQTT connection found: 12 frames, none of them TCP"


def _cut_after_first_connection_started(capture: Path, mqtt_port: int, tmp_path: Path) -> tuple[Path, Path]:
    """Two cuts of the side-by-side capture, from the second MQTT handshake on: all of it (the subscriber's flow
    mid-stream, the publisher's whole) and the subscriber's flow alone (nothing proves its port)."""
    records = list(read_records(str(capture)))
    segments = _segments(capture)
    syns = [(i, s) for i, s in segments if s[7] & (SYN | ACK) == SYN and s[4] == mqtt_port]
    assert len(syns) == 2, syns
    (_, first), (second_index, _) = syns
    subscriber = {(first[1], first[2]), (first[3], first[4])}
    own = {i for i, s in segments if {(s[1], s[2]), (s[3], s[4])} == subscriber}
    both, alone = tmp_path / "both.pcap", tmp_path / "alone.pcap"
    both.write_bytes(writer.pcap_bytes([(r[0], r[2]) for r in records[second_index:]], linktype=1))
    kept = [(r[0], r[2]) for i, r in enumerate(records) if i >= second_index and i in own]
    alone.write_bytes(writer.pcap_bytes(kept, linktype=1))
    return both, alone


def test_a_mid_stream_flow_is_audited_on_a_port_another_flow_proved_and_not_on_an_unproven_one(
    spark: SparkSession, side_by_side: tuple[Path, int, int], tmp_path: Path
) -> None:
    capture, mqtt_port, _web = side_by_side
    both, alone = _cut_after_first_connection_started(capture, mqtt_port, tmp_path)
    proved = _audit(spark, [both], tmp_path / "proved")
    by_client = {row["client_id"]: row for row in proved["connections"]}
    assert set(by_client) == {"side-publisher", None}  # the subscriber's CONNECT is before the cut
    mid = by_client[None]
    assert mid["mid_stream"] and _port(mid["server"]) == mqtt_port and "uses a broker port" in mid["roles"]
    assert [p["type"] for p in proved["packets"] if p["flow"] == mid["flow"]].count("PUBLISH") >= 1
    unproven = _audit(spark, [alone], tmp_path / "unproven")
    assert unproven["connections"] == []
    # No handshake and a single flow: nothing tells which side serves, so both ports are named.
    [seen] = unproven["summary"]["detection"]["other_tcp"]["ports"]
    assert seen["port"] is None and mqtt_port in seen["ports"] and len(seen["ports"]) == 2
    low, high = seen["ports"]
    message = no_mqtt_message(unproven["summary"])
    assert message is not None and f"on TCP ports {low} or {high}, none of them starting with" in message
    assert message.endswith(f"try --ports with the server's port ({low} or {high})")
    # Named with --ports, the same flow is audited, mid-stream, as before.
    given = _audit(spark, [alone], tmp_path / "given", ports=[mqtt_port])
    assert [row["mid_stream"] for row in given["connections"]] == [True]


def _summary(records: int, kept: int, other: list[tuple[int, int]], mode: str = "any port", **extra: Any) -> Any:
    return {
        "records": records,
        "segments": kept,
        "counts": {"connections": 0},
        "detection": {
            "mode": mode,
            "ports": extra.get("ports", []),
            "other_tcp": {"frames": sum(f for _, f in other), "ports": [{"port": p, "frames": f} for p, f in other]},
        },
        "broker_ports": extra.get("broker_ports", [1883]),
    }


def test_the_nothing_found_sentence_names_what_was_seen() -> None:
    assert no_mqtt_message({**_summary(5, 5, []), "counts": {"connections": 1}}) is None
    decrypted = {**_summary(5, 5, []), "counts": {"connections": 2}}
    decrypted["versions"] = {"encrypted": {"connections": 1}, "not MQTT": {"connections": 1}}
    assert no_mqtt_message(decrypted) == (
        "nothing could be judged: 1 connection(s) encrypted (TLS without the session's keys), "
        "1 decrypted connection(s) not MQTT, 0 bytes not assessable"
    )
    assert no_mqtt_message({**decrypted, "versions": {"not MQTT": {"connections": 1}}}) is None
    assert no_mqtt_message(_summary(1, 0, [])) == "no MQTT connection found: 1 frame, none of them TCP"
    assert no_mqtt_message(_summary(300, 0, [(46091, 200), (39812, 84)])) == (
        "no MQTT connection found: 284 frames on TCP ports 46091 and 39812, none of them starting with an MQTT "
        "CONNECT: try --ports 46091"
    )
    requested = _summary(90, 0, [(80, 50), (443, 30), (22, 5), (25, 5)], "--ports", ports=[{"port": 1883}])
    assert no_mqtt_message(requested) == (
        "no MQTT connection found on --ports 1883: 90 frames on TCP ports 80, 443 and 22 and others, outside "
        "--ports: try --ports 80"
    )
    assert (
        no_mqtt_message(_summary(3, 3, [])) == "no MQTT connection found: 3 frames on port 1883 carried no MQTT bytes"
    )
    unknown = _summary(7, 0, [])
    unknown["detection"]["other_tcp"] = {"frames": 7, "ports": [{"port": None, "ports": [36815, 59919], "frames": 7}]}
    assert no_mqtt_message(unknown) == (
        "no MQTT connection found: 7 frames on TCP ports 36815 or 59919, none of them starting with an MQTT CONNECT: "
        "try --ports with the server's port (36815 or 59919)"
    )


def test_ill_formed_utf8_from_the_wire_reaches_the_tables_escaped(spark: SparkSession, tmp_path: Path) -> None:
    """A ClientId and a Topic Name with bytes that are not UTF-8 (the codec keeps them as lone surrogates) are
    written to Parquet with each ill-formed byte as ``\\xNN``, on a port found by its CONNECT, rather than failing the
    task."""
    session = writer.TcpSession(("10.0.0.1", 50000), ("10.0.0.2", 46091))
    connect = bytes.fromhex("10 0e 00 04") + b"MQTT" + bytes.fromhex("04 02 00 3c 00 02 ff 61")
    publish = bytes.fromhex("30 06 00 02 fe 62 78 79")
    packets = [*session.handshake(), session.send(0, connect), session.send(1, bytes.fromhex("20 02 00 00"))]
    packets += [session.send(0, publish), session.fin(0), session.fin(1)]
    capture = tmp_path / "utf8.pcap"
    capture.write_bytes(writer.pcap_bytes([(i * 1000, p) for i, p in enumerate(packets)], linktype=101))
    audit = _audit(spark, [capture], tmp_path / "out")
    assert [row["client_id"] for row in audit["connections"]] == ["\\xffa"]
    assert [p["topic"] for p in audit["packets"] if p["type"] == "PUBLISH"] == ["\\xfeb"]
    assert {v["rule"] for v in audit["violations"]} >= {"MQTT-1.5.3-1"}
