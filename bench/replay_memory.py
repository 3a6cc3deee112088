"""Peak memory of one broker's routing replay task (it walks the broker's traffic in time slices), at two capture
sizes.

What is measured
    The audit's stages without Spark, on the captures of ``bench/capture_gen.py`` (same seed: the small one is the
    start of the large one; one broker; :data:`CLIENTS` clients): the reading and judging stages run in this
    process and write what they hand the replay (each connection's skeleton and pieces); then the replay task of
    the broker (:func:`mqttaudit.pipeline.slicing.replay_sliced`) runs alone in a fresh subprocess. Reported per
    run: the
    subprocess's peak resident set (``ru_maxrss``, the interpreter and pyarrow included) and the peak Python
    allocation traced by tracemalloc over the replay call with ``--traced``, and the rows written. Printed as JSON
    lines.

How to reproduce
    PYTHONPATH=src .venv/bin/python bench/replay_memory.py --packets 100000 400000 [--traced]
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))
import capture_gen  # noqa: E402

BROKER_PORT = 1883
#: Clients of the generated captures: few enough that the traffic spans many times the sliced replay's reach
#: (:func:`mqttaudit.judge.stream.reach`, 135 s by default: twice the late window and three answer timeouts),
#: within which the sliced replay holds every delivery; the default 400 clients send 20,000 packets in 7 s.
CLIENTS = 20


def prepare(capture: Path, folder: Path, slice_bytes: int) -> Path:
    """The reading and judging stages of ``capture`` into ``folder``; returns the file of the
    replay task's rows (the judged connections of the busiest broker) and its options."""
    import pyarrow as pa
    from tests.crafted import ordered_runs

    from mqttaudit.capture import plan_chunks
    from mqttaudit.pipeline import sources
    from mqttaudit.pipeline.judging import judge_partition
    from mqttaudit.pipeline.options import AuditOptions
    from mqttaudit.pipeline.tables import JUDGED_SCHEMA

    options = AuditOptions(
        broker_ports=frozenset({BROKER_PORT}),
        out_dir=str(folder),
        requested_ports=frozenset({BROKER_PORT}),
        slice_bytes=slice_bytes,
    )
    chunks = plan_chunks(sources.opener(str(capture)), 64 * 1024 * 1024, name=capture.name)
    runs = ordered_runs([(capture, chunks)], options)
    judged = pa.Table.from_batches(list(judge_partition(iter(runs.to_batches()), options)), JUDGED_SCHEMA)
    rows = judged.filter(pa.compute.and_(pa.compute.is_null(judged.column("note")), judged.column("replayed")))
    servers = rows.column("server").to_pylist()
    busiest = max(set(servers) - {"unknown"}, key=servers.count)
    rows = rows.filter(pa.compute.equal(rows.column("server"), busiest))
    table = pa.table(
        {
            "server": rows.column("server"),
            "flow": rows.column("flow"),
            "capture": rows.column("capture"),
            "transcripts": rows.column("transcripts"),
            "transcript_row": rows.column("transcript_row"),
        }
    )
    path = folder / "replay-task.pickle"
    path.write_bytes(pickle.dumps((table, options)))
    return path


def replay_task(path: Path, traced: bool) -> dict[str, Any]:
    """Runs the replay task of ``path`` (in the measuring subprocess) and reports its peaks (``traced``: the
    Python allocations too, which tracemalloc's own bookkeeping then adds to the resident set)."""
    import tracemalloc

    from mqttaudit.pipeline.slicing import replay_sliced

    table, options = pickle.loads(path.read_bytes())
    started = time.perf_counter()
    if traced:
        tracemalloc.start()
    result = replay_sliced(table, options).to_pylist()[0]
    peak = tracemalloc.get_traced_memory()[1] if traced else None
    tracemalloc.stop()
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "traced_peak_mb": None if peak is None else round(peak / 2**20, 1),
        "rss_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "deliveries": result["deliveries"],
        "routing_findings": result["routing_findings"],
        "connections": table.num_rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, nargs="+", default=[100_000, 400_000])
    parser.add_argument("--clients", type=int, default=CLIENTS, help="clients of the generated captures")
    parser.add_argument("--slice-bytes", type=int, default=None, help="the replay's slices (the default's)")
    parser.add_argument("--traced", action="store_true", help="trace the Python allocations (slower)")
    parser.add_argument("--task", type=Path, help=argparse.SUPPRESS)  # the measuring subprocess
    args = parser.parse_args(argv)
    if args.task is not None:
        print(json.dumps(replay_task(args.task, args.traced)))
        return 0
    from mqttaudit.pipeline.options import SLICE_BYTES

    for packets in args.packets:
        out = BENCH_DIR / "out" / f"replay-memory-{args.clients}"
        capture_gen.main(["--packets", str(packets), "--only", "--clients", str(args.clients), "--out-dir", str(out)])
        capture = capture_gen.capture_path(packets, out)
        with tempfile.TemporaryDirectory() as folder:
            task = prepare(capture, Path(folder), args.slice_bytes or SLICE_BYTES)
            command = [sys.executable, __file__, "--task", str(task), *(["--traced"] if args.traced else [])]
            ran = subprocess.run(command, capture_output=True, text=True, check=True)
            row = {"packets": packets, **json.loads(ran.stdout.splitlines()[-1])}
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
