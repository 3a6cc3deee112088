"""``mqttaudit audit --late-window``: how long past its deadline a delivery still counts as the copy of its message
(the bound that lets the routing replay forget a message). A delivery 78 s after its message was taken is missing
at the default 60 s past a 5 s tolerance, and settles the message at 120 s; a late copy is never a leak."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .cli_in_process import run_mqttaudit
from .crafted import CONNACK_ACCEPTED, PUBLISH_QOS1, connect, sessions, write_capture

#: SUBSCRIBE id 1 to 'a/b' at QoS 1, its SUBACK; the broker's copy to A (QoS 1, id 1) and A's PUBACK of it.
SUBSCRIBE = bytes.fromhex("82 08 00 01 00 03 61 2f 62 01")
SUBACK = bytes.fromhex("90 03 00 01 01")
COPY = bytes.fromhex("32 09 00 03 61 2f 62 00 01 68 69")
PUBACK_OF_COPY, PUBACK_OF_PUBLISH = bytes.fromhex("40 02 00 01"), bytes.fromhex("40 02 00 07")
PINGREQ, PINGRESP, DISCONNECT = bytes.fromhex("c0 00"), bytes.fromhex("d0 00"), bytes.fromhex("e0 00")


def late_delivery(path: Path) -> Path:
    """A subscribes to 'a/b' at QoS 1; B publishes 'hi' there at 2 s; the broker delivers it to A at 80 s (78 s
    after taking it), A acknowledges; A pings until 100 s. B leaves at 3 s."""
    a, b = sessions()
    records = [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [(0.1, a.send(0, connect(b"sub"))), (0.11, a.send(1, CONNACK_ACCEPTED))]
    records += [(0.2, a.send(0, SUBSCRIBE)), (0.21, a.send(1, SUBACK))]
    records += [(1 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [(1.1, b.send(0, connect(b"pub"))), (1.11, b.send(1, CONNACK_ACCEPTED))]
    records += [(2.0, b.send(0, PUBLISH_QOS1)), (2.01, b.send(1, PUBACK_OF_PUBLISH))]
    records += [(3.0, b.send(0, DISCONNECT)), (3.01, b.fin(0)), (3.02, b.fin(1))]
    for second in range(20, 80, 20):  # within A's Keep Alive of 60 s
        records += [(second, a.send(0, PINGREQ)), (second + 0.01, a.send(1, PINGRESP))]
    records += [(80.0, a.send(1, COPY)), (80.01, a.send(0, PUBACK_OF_COPY))]
    for second in range(85, 101, 5):
        records += [(second, a.send(0, PINGREQ)), (second + 0.01, a.send(1, PINGRESP))]
    return write_capture(path, records)


@pytest.mark.parametrize(
    ("window", "status", "kinds"), [(None, 1, ["missing"]), ("120", 0, [])], ids=["default-60s", "120s"]
)
def test_a_copy_later_than_the_late_window_settles_nothing_and_is_no_leak(
    tmp_path: Path, window: str | None, status: int, kinds: list[str]
) -> None:
    capture = late_delivery(tmp_path / "late.pcap")
    out = tmp_path / "out"
    args = ["audit", str(capture), "--out", str(out), *(["--late-window", window] if window else [])]
    done = run_mqttaudit(*args)
    assert done.returncode == status, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["late_window_s"] == (float(window) if window else 60.0)
    findings = pq.read_table(out / "routing_findings").to_pylist()
    assert [finding["kind"] for finding in findings] == kinds
    if findings:
        assert "no copy came within the late window, 60 s past the deadline" in findings[0]["detail"]
    owed = [row for row in pq.read_table(out / "deliveries").to_pylist() if row["expected"] == "owed"]
    assert [(row["client_id"], row["observed"]) for row in owed] == [("sub", not kinds)]


def test_the_late_window_refuses_a_negative_value(tmp_path: Path) -> None:
    done = run_mqttaudit("audit", str(tmp_path), "--out", str(tmp_path / "out"), "--late-window", "-1")
    assert done.returncode == 2 and "--late-window" in done.stderr
