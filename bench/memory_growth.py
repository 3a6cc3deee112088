"""Peak memory of the audit against capture size: the whole audit's process tree at a small and a large capture.

What is measured
    ``mqttaudit audit FILE --out DIR --master local[1] --ports 1883`` on two captures of ``bench/capture_gen.py``
    (same seed: the small one is the start of the large one), ``BENCH_MEMORY_SMALL`` MQTT packets (default
    1,000,000) and ``BENCH_MEMORY_LARGE`` (default 8,000,000), each in a fresh subprocess, one after the other,
    under ``bench/audit_bench.py``'s tree watch: psutil polls the driver, the Spark JVM and the Python workers
    every ``--poll`` seconds and keeps the largest sum of their resident set sizes. The target: the peak at the
    large size at most :data:`LIMIT` times the peak at the small one (a streaming audit holds no more as the
    capture grows). Printed, and written to ``bench/out/memory_growth.json``.

How to reproduce
    .venv/bin/python bench/memory_growth.py                                       # 1,000,000 and 8,000,000
    BENCH_MEMORY_SMALL=250000 BENCH_MEMORY_LARGE=2000000 PYTHONPATH=src .venv/bin/python bench/memory_growth.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import audit_bench  # noqa: E402
import capture_gen  # noqa: E402

#: Peak memory at the large capture over the peak at the small one, at most (issue 31: 8,000,000 vs 1,000,000).
LIMIT = 1.25
SMALL = 1_000_000
LARGE = 8_000_000
MASTER = "local[1]"


def measure(packets: int, *, timeout: float, poll: float) -> dict[str, Any]:
    """One audit of the ``packets`` capture (generated when missing), watched as ``bench/audit_bench.py`` does."""
    capture_gen.main(["--packets", str(packets), "--only"])
    path = capture_gen.capture_path(packets)
    out_dir = BENCH_DIR / "out" / f"memory-{packets}"
    shutil.rmtree(out_dir, ignore_errors=True)
    command = [*audit_bench.audit_command(path, MASTER, out_dir), "--ports", "1883"]
    row = audit_bench.run_tool(
        f"mqttaudit audit --master {MASTER}",
        command,
        capture=path,
        packets=packets,
        env=audit_bench.child_env(),
        timeout=timeout,
        poll=poll,
        success=(0, 1),  # 1: the capture holds deliberate violations
    )
    row.pop("_lines")
    shutil.rmtree(out_dir, ignore_errors=True)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=int(os.environ.get("BENCH_MEMORY_SMALL", SMALL)))
    parser.add_argument("--large", type=int, default=int(os.environ.get("BENCH_MEMORY_LARGE", LARGE)))
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("BENCH_TIMEOUT", "3600")))
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args(argv)
    if not 0 < args.small < args.large:
        parser.error("--small must be positive and below --large")
    rows = [measure(packets, timeout=args.timeout, poll=args.poll) for packets in (args.small, args.large)]
    small, large = rows
    finished = small["finished"] and large["finished"]
    ratio = round(large["peak_rss_tree_mb"] / small["peak_rss_tree_mb"], 3) if finished else None
    for row in rows:
        print(
            f"audit {row['packets']:>11,} packets: peak RSS of the process tree {row['peak_rss_tree_mb']:>9,.1f} MB, "
            f"wall {row['wall_s']:,.1f} s" + ("" if row["finished"] else f" ({row.get('note')})")
        )
    verdict = "not measured" if ratio is None else ("met" if ratio <= LIMIT else "NOT met")
    print(f"peak memory at {args.large:,} / at {args.small:,} packets: {ratio} (target <= {LIMIT:g}): {verdict}")
    met = ratio is not None and ratio <= LIMIT
    result = {"small": small, "large": large, "ratio": ratio, "limit": LIMIT, "met": met}
    (BENCH_DIR / "out" / "memory_growth.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
