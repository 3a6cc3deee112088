"""``python -m tests.judging_child MIB BUDGET OUT``: the judging stage (``judge_partition``, no Spark) in a process
of its own, fed one flow run by run as Spark feeds it: a client that declares a 256 MB PUBLISH and sends ``MIB`` MiB
of it in 1,448-byte segments, judged at a per-flow budget of ``BUDGET`` bytes into the folder ``OUT``. Prints one
JSON line: the process's peak resident set size (the kernel's high-water mark) and what the connection's row says
was not held. The segments are made here, a run at a time, so that nothing but the stage holds the flow."""

from __future__ import annotations

import json
import resource
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from mqttaudit.capture.budgets import Budgets
from mqttaudit.codec import Connack, Connect, encode
from mqttaudit.pipeline import tables
from mqttaudit.pipeline.judging import judge_partition
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.task_files import TRANSCRIPTS_DIR
from tests.test_capture_budgets import DECLARED, publish_head

CLIENT, BROKER = (b"\x0a\x00\x00\x01", 50000), (b"\x0a\x00\x00\x02", 1883)
SEGMENT = 1448
RUN = 5792  # segments per run: 8 MiB of payload, the reading stage's largest run


def runs(sent: int) -> Iterator[pa.RecordBatch]:
    """The flow's runs (:data:`~mqttaudit.pipeline.tables.SEGMENT_SCHEMA` rows), one batch each."""
    connect, connack = encode(Connect(client_id="huge")), encode(Connack())
    head = publish_head(DECLARED)
    rows = [  # (time, sender, seq, ack, flags, payload): handshake, CONNECT, CONNACK
        (0, 0, 1000, 0, 0x02, b""),
        (1, 1, 5000, 1001, 0x12, b""),
        (2, 0, 1001, 5001, 0x10, b""),
        (3, 0, 1001, 5001, 0x18, connect),
        (4, 1, 5001, 1001 + len(connect), 0x18, connack),
    ]
    seq, ack = 1001 + len(connect), 5001 + len(connack)
    record = 0

    def batch(part: list[tuple[int, int, int, int, int, bytes]]) -> pa.RecordBatch:
        nonlocal record
        ends = [(CLIENT, BROKER) if sender == 0 else (BROKER, CLIENT) for _t, sender, *_rest in part]
        columns = {
            "record": list(range(record, record + len(part))),
            "time_ns": [10**18 + time * 1000 for time, *_rest in part],
            "src_ip": [src[0] for src, _dst in ends],
            "src_port": [src[1] for src, _dst in ends],
            "dst_ip": [dst[0] for _src, dst in ends],
            "dst_port": [dst[1] for _src, dst in ends],
            "seq": [row[2] for row in part],
            "ack": [row[3] for row in part],
            "flags": [row[4] for row in part],
            "payload": [row[5] for row in part],
        }
        run = pa.RecordBatch.from_pydict(columns, schema=tables.RUN_SCHEMA)
        first, record = record, record + len(part)
        return pa.RecordBatch.from_pydict(
            {
                "flow": ["10.0.0.1:50000|10.0.0.2:1883"],
                "capture": ["huge.pcap"],
                "first_record": [first],
                "first_time_ns": [run.column("time_ns")[0].as_py()],
                "segments": [run.serialize().to_pybytes()],
                "note": [None],
            },
            schema=tables.SEGMENT_SCHEMA,
        )

    time = len(rows)
    zeros = bytes(SEGMENT)
    for at in range(0, sent, SEGMENT):  # the PUBLISH's pieces, made as they are sent: its head, then zeros
        piece = (head + zeros)[: min(SEGMENT, sent - at)] if at == 0 else zeros[: min(SEGMENT, sent - at)]
        rows.append((time, 0, seq, ack, 0x18, piece))
        time, seq = time + 1, seq + len(piece)
        if len(rows) == RUN:
            yield batch(rows)
            rows = []
    if rows:
        yield batch(rows)


def main() -> None:
    mib, budget, out = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    tracemalloc.start()
    for table in (*tables.TABLE_COLUMNS, TRANSCRIPTS_DIR):
        (out / table).mkdir(parents=True, exist_ok=True)
    options = AuditOptions(out_dir=str(out), budgets=Budgets(max_message_bytes=64 * 1024, max_flow_bytes=budget))
    judged = [row for batch in judge_partition(runs(mib << 20), options) for row in batch.to_pylist()]
    (row,) = [row for row in judged if row["note"] is None]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    # What the stage held at most: Python's objects (traced) and Arrow's buffers (its pool's high-water mark). The
    # process's peak resident size also counts what the allocators keep of memory already freed, which varies from
    # run to run (one run under a loaded CI peaked at 513 MB where others peak at 257 MB).
    held = tracemalloc.get_traced_memory()[1] + pa.default_memory_pool().max_memory()
    print(
        json.dumps(
            {"peak": peak, "held": held, "unheld_bytes": row["unheld_bytes"], "stream_bytes": row["stream_bytes"]}
        )
    )


if __name__ == "__main__":
    main()
