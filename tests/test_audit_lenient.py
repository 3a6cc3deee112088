"""The capture audit makes MQTT 5.0's distinction between a broken MUST and leniency (section 4.13.1), end to end:
a capture written by the project's capture writer, through ``mqttaudit audit`` on Spark, into the ``lenient`` table,
``summary.json`` and ``report_data.json``, apart from the violations.

The capture: a 5.0 client subscribes to an empty Topic Filter (``82 06 00 01 00 00 00 00``) and the server SUBACKs it
(``90 04 00 01 00 00``), then the connection stays open 3 s (past the 1 s tolerance) before the client closes: a
leniency of the server (MQTT-4.7.3-1 binds the sender). A second 5.0 client subscribes with the reserved
Subscription Options bits set (``... 61 c0``) and the server SUBACKs that too: a violation of MQTT-3.8.3-5, which
binds the server."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit.capture import writer
from mqttaudit.capture.link import RAW
from mqttaudit.codec import Connack, Connect, ProtocolVersion, encode
from mqttaudit.pipeline.conversations import LENIENT_COLUMNS

from .cli_in_process import run_mqttaudit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EPOCH = 1_700_000_000 * 10**9
V5 = ProtocolVersion.V5
EMPTY_FILTER = bytes.fromhex("82 06 00 01 00 00 00 00")
RESERVED_BITS = bytes.fromhex("82 07 00 01 00 00 01 61 c0")
SUBACK = bytes.fromhex("90 04 00 01 00 00")


def accepting(client: tuple[str, int], client_id: str, subscribe: bytes) -> list[tuple[int, bytes]]:
    """A 5.0 connection whose server SUBACKs ``subscribe``; the client closes 3 s later, the server after it."""
    session = writer.TcpSession(client, ("10.0.0.2", 1883))
    packets = [
        *session.handshake(),
        session.send(0, encode(Connect(client_id=client_id, protocol_level=5), version=V5)),
        session.send(1, encode(Connack(), version=V5)),
        session.send(0, subscribe),
        session.send(1, SUBACK),
        session.segment(0),  # the client's TCP acknowledges the SUBACK
    ]
    timed = [(EPOCH + index * 1_000_000, packet) for index, packet in enumerate(packets)]
    return timed + [
        (EPOCH + 3 * 10**9 + index * 1_000_000, p) for index, p in enumerate([session.fin(0), session.fin(1)])
    ]


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("lenient")
    traffic = accepting(("10.0.0.1", 50000), "lenient", EMPTY_FILTER)
    traffic += accepting(("10.0.0.3", 50001), "strict", RESERVED_BITS)
    capture = folder / "lenient.pcap"
    capture.write_bytes(writer.pcap_bytes(sorted(traffic), linktype=RAW))
    out = folder / "out"
    ran = run_mqttaudit("audit", str(capture), "--out", str(out), "--master", "local[2]", "--tolerance", "1")
    assert ran.returncode in (0, 1), ran.stderr
    names = ("lenient", "violations", "connections")
    return {
        "tables": {name: pq.read_table(out / name).to_pylist() for name in names},
        "summary": json.loads((out / "summary.json").read_text()),
        "report_data": json.loads((out / "report_data.json").read_text()),
        "ran": ran,
    }


def test_the_server_that_subacks_an_empty_filter_is_a_lenient_row_with_its_basis(audited: dict[str, Any]) -> None:
    clients = {c["flow"]: c["client_id"] for c in audited["tables"]["connections"]}
    (row,) = audited["tables"]["lenient"]
    assert set(row) == set(LENIENT_COLUMNS)
    assert clients[row["flow"]] == "lenient"
    assert (row["rule"], row["actor"], row["rule_version"], row["level"]) == ("MQTT-4.7.3-1", "server", "5.0", "MUST")
    assert row["evidence"] == SUBACK.hex(" ") and "SUBACK" in row["detail"]
    assert "[MQTT-4.13.1-1]" in row["basis"] and row["frame"] is not None and row["cause_frame"] is not None
    server_violations = {
        (clients[v["flow"]], v["rule"], tuple(v["also"] or ()))
        for v in audited["tables"]["violations"]
        if v["actor"] == "server"
    }
    # the bound one fails: each act (the SUBACK, the close not made) one row, citing the binding statement with the
    # close [MQTT-4.13.1-1] in 'also'
    assert server_violations == {("strict", "MQTT-3.8.3-5", ("MQTT-4.13.1-1",))}


def test_leniency_is_counted_apart_in_the_summary_and_the_report_data(audited: dict[str, Any]) -> None:
    summary = audited["summary"]
    assert summary["lenient"] == {"rows": 1, "by_actor": {"server": 1}, "by_rule": {"MQTT-4.7.3-1": 1}}
    assert summary["counts"]["violations"] == len(audited["tables"]["violations"])  # leniency is not among them
    connections = {c["client_id"]: c for c in audited["tables"]["connections"]}
    assert connections["lenient"]["lenient"] == 1 and connections["strict"]["lenient"] == 0
    data = audited["report_data"]
    assert data["summary"]["lenient"] == 1
    [count] = data["lenient_counts"]
    assert {k: count[k] for k in ("rule", "rule_version", "level", "section", "actor", "count")} == {
        "rule": "MQTT-4.7.3-1",
        "rule_version": "5.0",
        "level": "MUST",
        "section": "4.7.3",
        "actor": "server",
        "count": 1,
    }
    assert "4.13.1" in count["basis"] and count["first_time"] is not None
    assert [row["rule"] for row in data["lenient_rows"]] == ["MQTT-4.7.3-1"]
