"""The fixed cost of an audit: ``mqttaudit audit`` of an 18-packet capture beside tshark on the same file.

What is measured
    The capture is ``peafowl/mqtt-1.pcapng`` of the third-party capture corpus (``../shared/captures`` beside the
    checkout, or the folder ``MQTTAUDIT_CAPTURES`` names; ``--capture FILE`` for another), the issue's "18-packet
    capture" (19 frames, 20 MQTT packets on 2 connections). Its packets cost nothing to judge: what the audit takes
    is its fixed cost (Python start-up and imports; on Spark, the JVM, the Spark jobs of each stage and the queries
    of the summary and the report data; the reports). The three commands run in turn, each in a fresh subprocess,
    ``--runs`` times (5 by default) after one warm-up run of each that is not counted:

    * ``mqttaudit audit FILE --out DIR`` with the default engine (``auto``: for a capture this small on the
      default master, ``local[*]``, the local engine, in one process without Spark);
    * the same with ``--engine spark`` (the Spark engine on ``local[*]``);
    * ``tshark -r FILE -Y mqtt -T fields -e frame.number -e mqtt.msgtype -e mqtt.topic``, output to /dev/null.

    Each run is watched as ``bench/audit_bench.py`` watches its tools (``/usr/bin/time -v`` when it exists, and
    psutil polling the whole process tree: the Python driver, the JVM, Spark's Python workers). The table gives
    wall seconds and the CPU seconds of the whole tree, each as median and spread (min-max), and the other CPU
    seconds the machine spent meanwhile (work that competed for the cores: on a busy machine, compare medians of
    runs taken in turn, not single figures). Written to ``bench/fixed_cost.json`` and ``bench/fixed_cost.md``.

How to reproduce
    make bench                                              # among the other benchmarks
    PYTHONPATH=src .venv/bin/python bench/fixed_cost_bench.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from audit_bench import ROOT, child_env, fmt, run_tool, source_revision, versions  # noqa: E402

CAPTURE = Path("peafowl") / "mqtt-1.pcapng"
PACKETS = 20


def default_capture() -> Path:
    """The corpus capture, where the tests find the corpus (``tests/corpus.py``)."""
    folder = os.environ.get("MQTTAUDIT_CAPTURES")
    return (Path(folder).expanduser() if folder else ROOT.parent / "shared" / "captures") / CAPTURE


def tshark_command(capture: Path) -> list[str]:
    fields = ["-e", "frame.number", "-e", "mqtt.msgtype", "-e", "mqtt.topic"]
    return ["tshark", "-r", str(capture), "-Y", "mqtt", "-T", "fields", *fields]


def spread(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    values = [float(row[key]) for row in rows]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def render(results: dict[str, Any]) -> str:
    lines = [
        f"{results['capture']} (19 frames, {PACKETS} MQTT packets), {results['runs']} runs of each tool in turn:",
        "",
        "| tool | wall s, median (min-max) | CPU s of the process tree, median (min-max) | other CPU s, median |",
        "| --- | ---: | ---: | ---: |",
    ]
    for tool in results["tools"]:
        wall, cpu, other = tool["wall_s"], tool["cpu_s"], tool["other_cpu_s"]
        lines.append(
            f"| `{tool['command']}` | {fmt(wall['median'], 2)} ({fmt(wall['min'], 2)}-{fmt(wall['max'], 2)}) "
            f"| {fmt(cpu['median'], 2)} ({fmt(cpu['min'], 2)}-{fmt(cpu['max'], 2)}) | {fmt(other['median'], 1)} |"
        )
    audit, spark, tshark = results["tools"]
    lines += [
        "",
        f"median wall: audit (local engine) / tshark {audit['wall_s']['median'] / tshark['wall_s']['median']:.1f}x, "
        f"audit on Spark / tshark {spark['wall_s']['median'] / tshark['wall_s']['median']:.1f}x, "
        f"local engine / Spark {audit['wall_s']['median'] / spark['wall_s']['median']:.2f}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--capture", type=Path, default=None, help="the capture (default: the corpus's peafowl one)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_FIXED_RUNS", "5")))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    parser.add_argument("--poll", type=float, default=0.1, help="seconds between polls of the process tree")
    parser.add_argument("--json", type=Path, default=BENCH_DIR / "fixed_cost.json")
    parser.add_argument("--md", type=Path, default=BENCH_DIR / "fixed_cost.md")
    args = parser.parse_args(argv)
    capture = (args.capture or default_capture()).resolve()
    if not capture.is_file():
        print(f"fixed_cost_bench: no capture at {capture} (set MQTTAUDIT_CAPTURES or give --capture)", file=sys.stderr)
        return 2
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if shutil.which("tshark") is None:
        print("fixed_cost_bench: tshark is not installed (make bench installs it)", file=sys.stderr)
        return 2
    (BENCH_DIR / "out").mkdir(exist_ok=True)
    env = child_env()
    measured: dict[str, list[dict[str, Any]]] = {"audit": [], "audit on spark": [], "tshark": []}
    with tempfile.TemporaryDirectory(prefix="mqttaudit-fixed-") as scratch:
        out_dir = Path(scratch) / "audit"
        audit = [sys.executable, "-m", "mqttaudit", "audit", str(capture), "--out", str(out_dir), "--force"]
        commands = (
            ("audit", audit, (0, 1)),
            ("audit on spark", [*audit, "--engine", "spark"], (0, 1)),
            ("tshark", tshark_command(capture), (0,)),
        )
        for run in range(args.runs + 1):  # the first of each is a warm-up
            for name, command, success in commands:
                row = run_tool(
                    f"fixed cost {name}",
                    command,
                    capture=capture,
                    packets=PACKETS,
                    env=env,
                    timeout=args.timeout,
                    poll=args.poll,
                    success=success,
                )
                row.pop("_lines", None)
                if not row["finished"]:
                    print(f"fixed_cost_bench: {name} did not finish: {row.get('note')}", file=sys.stderr)
                    return 1
                if run:
                    measured[name].append(row)
    results = {
        "capture": str(CAPTURE) if args.capture is None else capture.name,
        "runs": args.runs,
        "versions": versions(),
        "source": source_revision(),
        "tools": [
            {
                "tool": name,
                "command": rows[0]["command"]
                .replace(f"{sys.executable} -m mqttaudit", "mqttaudit")
                .replace(str(capture), "FILE")
                .replace(str(out_dir), "DIR"),
                "wall_s": spread(rows, "wall_s"),
                "cpu_s": spread(rows, "cpu_s"),
                "other_cpu_s": spread(rows, "other_cpu_s"),
                "runs": rows,
            }
            for name, rows in measured.items()
        ],
    }
    table = render(results)
    args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    args.md.write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
