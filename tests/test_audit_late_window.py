"""``mqttaudit audit --late-window``: how long past its deadline a delivery still counts as the copy of its message
(the bound that lets the routing replay forget a message). A delivery 90 s after its message was taken is past the
default 60 s late window (after a 5 s tolerance): it settles nothing and is no leak, but MQTT sets no time limit on
delivery, so the message is not assessable (the reason says how late the copy came), not missing; with no copy at
all it is missing; a 120 s window takes the copy in (the sliced replay; the whole model agrees in
:mod:`tests.test_judge_stream`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mqttaudit.judge import reasons

from .cli_in_process import run_mqttaudit
from .crafted import CONNACK_ACCEPTED, PUBLISH_QOS1, connect, sessions, write_capture

#: SUBSCRIBE id 1 to 'a/b' at QoS 1, its SUBACK; the broker's copy to A (QoS 1, id 1) and A's PUBACK of it.
SUBSCRIBE = bytes.fromhex("82 08 00 01 00 03 61 2f 62 01")
SUBACK = bytes.fromhex("90 03 00 01 01")
COPY = bytes.fromhex("32 09 00 03 61 2f 62 00 01 68 69")
PUBACK_OF_COPY, PUBACK_OF_PUBLISH = bytes.fromhex("40 02 00 01"), bytes.fromhex("40 02 00 07")
PINGREQ, PINGRESP, DISCONNECT = bytes.fromhex("c0 00"), bytes.fromhex("d0 00"), bytes.fromhex("e0 00")
ROUTED = "MQTT-4.5.0-1"


def late_delivery(path: Path, copy_at: float | None) -> Path:
    """A subscribes to 'a/b' at QoS 1; B publishes 'hi' there at 2 s; the broker delivers it to A at ``copy_at``
    (None: never), A acknowledges; A pings every 20 s (within its Keep Alive of 60 s) until 112 s. B leaves at 3 s."""
    a, b = sessions()
    records = [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [(0.1, a.send(0, connect(b"sub"))), (0.11, a.send(1, CONNACK_ACCEPTED))]
    records += [(0.2, a.send(0, SUBSCRIBE)), (0.21, a.send(1, SUBACK))]
    records += [(1 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [(1.1, b.send(0, connect(b"pub"))), (1.11, b.send(1, CONNACK_ACCEPTED))]
    records += [(2.0, b.send(0, PUBLISH_QOS1)), (2.01, b.send(1, PUBACK_OF_PUBLISH))]
    records += [(3.0, b.send(0, DISCONNECT)), (3.01, b.fin(0)), (3.02, b.fin(1))]
    later = [(float(second), 0, PINGREQ) for second in range(20, 101, 20)] + [(112.0, 0, PINGREQ)]
    later += [(time + 0.01, 1, PINGRESP) for time, _, _ in later]
    if copy_at is not None:
        later += [(copy_at, 1, COPY), (copy_at + 0.01, 0, PUBACK_OF_COPY)]
    records += [(time, a.send(side, packet)) for time, side, packet in sorted(later)]  # in order: one TCP stream
    return write_capture(path, records)


@pytest.mark.parametrize(
    ("copy_at", "window", "status", "kinds", "tags"),
    [
        (92.0, None, 0, [], [reasons.LATE_COPY]),
        (None, None, 1, ["missing"], []),
        (92.0, "120", 0, [], []),
    ],
    ids=["late-copy-default-60s", "no-copy-default-60s", "late-copy-120s"],
)
def test_a_copy_later_than_the_late_window_is_no_leak_and_leaves_the_message_not_assessable_not_missing(
    tmp_path: Path,
    copy_at: float | None,
    window: str | None,
    status: int,
    kinds: list[str],
    tags: list[str],
) -> None:
    capture = late_delivery(tmp_path / "late.pcap", copy_at)
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
        assert "none came later while its session lasted" in findings[0]["detail"]
    routed = [row for row in pq.read_table(out / "not_assessable").to_pylist() if row["rule"] == ROUTED]
    assert [row["tag"] for row in routed] == tags
    if tags:
        assert "came 1 min 30 s after the server took the message to 'a/b'" in routed[0]["reason"]
        assert "after the late window of 60 s" in routed[0]["reason"]
        assert "the specification sets no time limit on delivery" in routed[0]["reason"]
    owed = [row for row in pq.read_table(out / "deliveries").to_pylist() if row["expected"] == "owed"]
    # Observed: a copy came within the window (a copy after it is not counted as the delivery).
    assert [(row["client_id"], row["observed"]) for row in owed] == [("sub", window is not None)]


def test_the_late_window_refuses_a_negative_value(tmp_path: Path) -> None:
    done = run_mqttaudit("audit", str(tmp_path), "--out", str(tmp_path / "out"), "--late-window", "-1")
    assert done.returncode == 2 and "--late-window" in done.stderr
