"""The capture audit end to end, against tshark and scapy: wall time, CPU time and peak memory per tool, scaling
from one core to two, and peak memory against capture size.

What is measured
    The captures come from ``bench/capture_gen.py`` (run here when they are missing): ``bench/out/mqtt-N.pcap``
    with N = ``BENCH_PACKETS`` MQTT packets (default 4,000,000) and a comparison capture of a quarter of that, at
    most 1,000,000 (``BENCH_COMPARE_PACKETS``). Each tool runs in a fresh subprocess, one after the other:

    * ``mqttaudit audit FILE --out DIR --master local[1] --ports 1883``, then the same with ``local[2]``: the
      whole job, from planning the chunks to the HTML report, on the embedded Spark master. The times at which
      its progress lines appear split the run into phases (Python and Spark start-up, planning the chunks, reading
      frames, judging connections and the routing replay (one Spark job: the judging tasks write their tables and
      hand on the transcripts, then one task per broker replays its routing in time slices; their split is not in
      the progress lines: the replay's own time is the row "audit without Spark: routing replay"), the summary,
      the reports). Exit
      status 1 (findings: the capture holds deliberate violations) counts as finished, any other as failed; an
      audit that fails because the JVM ran out of heap is run once more with ``--retry-driver-memory``
      (``BENCH_RETRY_DRIVER_MEMORY``, default 8g; both rows are reported, the ratios use the finished one);
    * ``tshark -r FILE -d tcp.port==1883,mqtt -T fields -e frame.number -e mqtt.msgtype -e mqtt.topic``, output
      to /dev/null: Wireshark's dissector with its TCP reassembly, one pass, one core;
    * scapy's MQTT layer (``scapy.contrib.mqtt``; ``Ether(frame)`` dissects every layer, the MQTT layers are
      walked) over the first frames of the capture that hold about ``--scapy-sample`` MQTT packets (50,000 by
      default), then extrapolated to the whole capture by its share of the frames: the row says so. scapy does
      not reassemble TCP, so packets split across segments are lost to it; the number of MQTT layers it found is
      reported beside the number of packets those frames complete;
    * the parts alone, in one subprocess, each timed inside it: reading the capture and parsing its frames to
      TCP segments (mqttaudit's reader, grouped into one list of payloads per direction of each connection; the
      generated captures have no loss or reordering, so that list is the direction's stream), the codec alone
      (``StreamDecoder.feed`` over those payloads, each frame checked and dropped), and the routing trie alone
      (``TopicTrie`` holding every Topic Filter the capture subscribes, matching the Topic Name of every PUBLISH a
      client sent);
    * the audit's own Python work alone, in one subprocess with the collector settings of the Spark tasks:
      ``audit_records`` (reading, reassembly, decoding), ``judge_flow`` over every connection, writing what the
      judging tasks hand the routing replay (each connection's head and pieces, ``write_pieces``, into a
      temporary folder beside the capture, built as the tests build it: ``tests/replay_pieces.py``), and the
      routing replay of the broker as its one Spark task runs it (``replay_sliced`` over those files, slice by
      slice, the audit's default slices); what is left of an audit's time beyond these is Spark's;
    * on the comparison capture, the audit with ``local[1]`` (with the JVM heap the large capture needed) and
      tshark again, for peak memory against size.

    Every subprocess runs under ``/usr/bin/time -v`` when it exists (its user + system time covers the process
    and every descendant it waited for; its maximum RSS is that of the largest single process) while psutil polls
    the whole process tree every ``--poll`` seconds (0.2 by default): the Python driver, the Spark JVM and the
    Python workers. The peak memory reported is the largest sum of the tree's resident set sizes seen by the
    polling (shared pages of forked workers count once per process, so it errs high); the CPU time reported is
    the larger of the two accounts (each can only miss time: rusage misses children nobody waited for, the
    polling misses the last interval of each process). Without ``/usr/bin/time`` the polling alone is used; the
    results say which. "Other CPU s" is the CPU time the rest of the machine used during a run (work that
    competed for the cores; large values make the run's figures doubtful). A run that exceeds ``--timeout``
    seconds (``BENCH_TIMEOUT``, default 3600) is killed and recorded as not finished, with what was measured
    until then.

    The environment of the benchmark is passed on: with ``PYTHONPATH=src`` the audit (driver and Spark workers)
    runs the source tree, whose codec is the pure-Python build; from an install it runs the compiled codec. The
    results name the codec build that ran.

    Targets: the audit with ``local[1]`` at least 3x faster than tshark (``speedup_vs_tshark`` = tshark wall /
    audit wall); ``local[2]`` at least 1.8x faster than ``local[1]`` (``scaling_2_vs_1``, issue 31); the audit's peak
    memory not growing with capture size (peak at N over peak at the comparison size at most 1.2).
    Written to ``bench/results.json`` (every measurement) and ``bench/results.md`` (the table).

How to reproduce
    make bench                                                   # tshark installed, then every benchmark
    .venv/bin/python bench/audit_bench.py                        # 4,000,000 packets; the compiled codec
    BENCH_PACKETS=200000 PYTHONPATH=src .venv/bin/python bench/audit_bench.py   # quick, source tree
    BENCH_PACKETS=200000 .venv/bin/python bench/audit_bench.py --profile       # cProfile, no Spark
    BENCH_PACKETS=50000 .venv/bin/python bench/audit_bench.py --profile --profile-replay  # and the replay
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

import mqttaudit
from mqttaudit import codec

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(ROOT))  # tests.replay_pieces: the routing replay's input, as the tests build it
import capture_gen  # noqa: E402
from machine import cpu_model  # noqa: E402  (bench/machine.py)

if TYPE_CHECKING:
    import pyarrow as pa

    from mqttaudit.judge.transcript import Transcript

DEFAULT_JSON = BENCH_DIR / "results.json"
DEFAULT_MD = BENCH_DIR / "results.md"
#: The moonshot: three times tshark's speed on one core.
TARGET_SPEEDUP = 3.0
#: What the native per-packet path is to reach first (issue 33): 1.5 times tshark on one core, and a native
#: reading path 20 times the pure one.
TARGET_SPEEDUP_NOW = 1.5
TARGET_NATIVE_READING = 20.0
TARGET_SCALING = 1.8
MEMORY_GROWTH_LIMIT = 1.2
TIME = Path("/usr/bin/time") if Path("/usr/bin/time").exists() else None
PHASES = (
    ("planning chunks", "planning chunks"),
    # One Spark job from here to the summary: the reading and judging stage, then the replay stage (whose progress
    # line is printed when the job is submitted, not when its stage starts).
    ("reading ", "reading frames, judging connections, the routing replay per broker, writing their tables"),
    ("adding up the summary", "summary"),
    ("writing report", "reports"),
)
MB = 1024 * 1024


# ----------------------------------------------------------------------------------------------------------------
# Running one tool in a fresh subprocess
# ----------------------------------------------------------------------------------------------------------------


def role(process: psutil.Process) -> str:
    """What a process of an audit's tree is: the JVM, Spark's Python workers (the daemon and the task workers it
    forks), the Python driver, or something else (``/usr/bin/time``, Spark's launcher shell)."""
    command = " ".join(process.cmdline()[:6])
    if "java" in command.split(" ")[0] or "org.apache.spark" in command:
        return "jvm"
    if "pyspark.daemon" in command or "pyspark.worker" in command:
        return "python workers"
    if "mqttaudit" in command and "python" in command:
        return "driver"
    return "other"


class TreeWatch:
    """Polls a process tree: the largest sum of resident set sizes, and the CPU time each process reached; the
    same per role (:func:`role`), so that an audit's time and memory can be split between the JVM and Python."""

    def __init__(self, root: psutil.Process) -> None:
        self.root = root
        self.peak_rss = 0
        self.peak_processes = 0
        self.cpu: dict[int, float] = {}
        self.roles: dict[int, str] = {}
        #: Per role: the largest sum of its processes' RSS at one poll, and the largest single process.
        self.peak_rss_role: dict[str, int] = {}
        self.peak_rss_process: dict[str, int] = {}
        self.samples = 0

    def poll(self) -> list[psutil.Process]:
        try:
            tree = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        rss = 0
        by_role: dict[str, int] = {}
        alive = []
        for process in tree:
            try:
                with process.oneshot():
                    resident = process.memory_info().rss
                    times = process.cpu_times()
                    # Spark's launcher script execs the JVM in the same process: a process still "other" is
                    # looked at again, or the JVM would keep the role its launcher had when first seen.
                    if self.roles.get(process.pid, "other") == "other":
                        self.roles[process.pid] = role(process)
                self.cpu[process.pid] = times.user + times.system
                alive.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            rss += resident
            kind = self.roles[process.pid]
            by_role[kind] = by_role.get(kind, 0) + resident
            self.peak_rss_process[kind] = max(self.peak_rss_process.get(kind, 0), resident)
        self.samples += 1
        if rss > self.peak_rss:
            self.peak_rss, self.peak_processes = rss, len(alive)
        for kind, resident in by_role.items():
            self.peak_rss_role[kind] = max(self.peak_rss_role.get(kind, 0), resident)
        return alive

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu.values())

    def by_role(self) -> dict[str, dict[str, float]]:
        """CPU seconds, peak RSS (MB, all processes of the role at once) and the largest one process's peak RSS
        (MB), per role."""
        out: dict[str, dict[str, float]] = {}
        for pid, seconds in self.cpu.items():
            kind = self.roles.get(pid, "other")
            entry = out.setdefault(kind, {"cpu_s": 0.0, "processes": 0})
            entry["cpu_s"] += seconds
            entry["processes"] += 1
        for kind, entry in out.items():
            entry["cpu_s"] = round(entry["cpu_s"], 1)
            entry["peak_rss_mb"] = round(self.peak_rss_role.get(kind, 0) / MB, 1)
            entry["peak_rss_one_process_mb"] = round(self.peak_rss_process.get(kind, 0) / MB, 1)
        return out


def machine_busy_s() -> float:
    """CPU seconds the machine spent busy so far, over all CPUs."""
    times = psutil.cpu_times()._asdict()
    # Linux counts guest time inside user time; idle, I/O wait and stolen time are not this machine's work.
    left_out = ("idle", "iowait", "steal", "guest", "guest_nice")
    return float(sum(value for name, value in times.items() if name not in left_out))


def parse_time_v(text: str) -> dict[str, Any]:
    """The figures of GNU time's ``-v`` report that matter here."""
    found: dict[str, Any] = {}
    for key, pattern in (
        ("user_s", r"User time \(seconds\): ([\d.]+)"),
        ("system_s", r"System time \(seconds\): ([\d.]+)"),
        ("max_rss_kb", r"Maximum resident set size \(kbytes\): (\d+)"),
        ("exit_status", r"Exit status: (\d+)"),
    ):
        match = re.search(pattern, text)
        if match:
            found[key] = float(match.group(1)) if "." in match.group(1) else int(match.group(1))
    return found


def run_tool(
    name: str,
    command: Sequence[str],
    *,
    capture: Path,
    packets: int,
    env: dict[str, str],
    timeout: float,
    poll: float,
    stdout: Path | None = None,
    stderr: Path | None = None,
    success: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """Runs ``command`` once, watching its process tree; its stderr lines are kept with their times (and written
    to ``stderr``). The run counts as finished when it ended by itself with an exit status in ``success``."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    time_file = BENCH_DIR / "out" / f"{slug}.time"
    time_file.unlink(missing_ok=True)
    full = [str(TIME), "-v", "-o", str(time_file), *command] if TIME else list(command)
    print(f"  {name}: {' '.join(command)}", file=sys.stderr)
    out = stdout.open("wb") if stdout else subprocess.DEVNULL
    lines: list[tuple[float, str]] = []
    busy0 = machine_busy_s()
    wall0 = time.perf_counter()
    process = psutil.Popen(full, stdout=out, stderr=subprocess.PIPE, env=env, cwd=ROOT, start_new_session=True)

    def read_stderr() -> None:
        assert process.stderr is not None
        lines.extend((time.perf_counter() - wall0, raw.decode(errors="replace").rstrip()) for raw in process.stderr)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    watch = TreeWatch(process)
    timed_out = False
    while process.poll() is None:
        alive = watch.poll()
        if time.perf_counter() - wall0 > timeout:
            timed_out = True
            _kill(process, alive)
            break
        time.sleep(poll)
    process.wait()
    wall = time.perf_counter() - wall0
    busy = machine_busy_s() - busy0
    reader.join(timeout=10)
    if stdout:
        out.close()  # type: ignore[union-attr]
    rusage = parse_time_v(time_file.read_text()) if TIME and time_file.exists() else {}
    status = process.returncode if timed_out else rusage.get("exit_status", process.returncode)
    if stderr:
        stderr.write_text("".join(f"{at:9.3f} {line}\n" for at, line in lines))
    rusage_cpu = rusage.get("user_s", 0.0) + rusage.get("system_s", 0.0) if rusage else None
    result: dict[str, Any] = {
        "tool": name,
        "command": " ".join(command).replace(str(ROOT) + "/", ""),
        "capture": capture.name,
        "packets": packets,
        "wall_s": round(wall, 3),
        "cpu_s": round(max(rusage_cpu or 0.0, watch.cpu_s), 3),
        "cpu_s_rusage": None if rusage_cpu is None else round(rusage_cpu, 3),
        "cpu_s_polled": round(watch.cpu_s, 3),
        "peak_rss_tree_mb": round(watch.peak_rss / MB, 1),
        "processes_at_peak": watch.peak_processes,
        "by_role": watch.by_role(),
        "max_rss_one_process_mb": round(rusage["max_rss_kb"] / 1024, 1) if "max_rss_kb" in rusage else None,
        "memory_method": "psutil tree polling" + (" + /usr/bin/time -v" if TIME else ""),
        # CPU the whole machine spent meanwhile beyond the tool's own: other work that competed with it.
        "other_cpu_s": round(max(0.0, busy - max(rusage_cpu or 0.0, watch.cpu_s)), 2),
        "exit_status": status,
        "finished": not timed_out and status in success,
        "packets_per_s": round(packets / wall) if not timed_out and status in success else None,
        "extrapolated": False,
    }
    if timed_out:
        result["note"] = f"killed after {timeout:g} s: did not finish"
    elif status not in success:
        out_of_memory = any("OutOfMemoryError" in line for _, line in lines)
        result["note"] = f"FAILED: exit status {status}" + (" (JVM OutOfMemoryError: Java heap space)" * out_of_memory)
        result["out_of_memory"] = out_of_memory
    result["stderr_tail"] = [line for _, line in lines if "WARN" not in line][-8:]
    result["_lines"] = lines
    return result


def _kill(process: psutil.Popen, tree: list[psutil.Process]) -> None:
    """Ends the tool this benchmark started: its process group, then any of its processes still alive."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    for member in tree:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            continue


def phases(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """Seconds between the audit's progress lines (Spark is lazy: each phase ends where the next line appears)."""
    marks: list[tuple[float, str]] = []
    for label_start, label in PHASES:
        at = next((t for t, line in lines if line.strip().startswith(label_start)), None)
        if at is not None:
            marks.append((at, label))
    out: dict[str, float] = {}
    if marks:
        out["python start-up, imports and Spark start-up"] = round(marks[0][0], 2)
    for (start, label), end in zip(marks, [m[0] for m in marks[1:]] + [wall], strict=True):
        out[label] = round(end - start, 2)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Workers: scapy on a sample, and the parts alone (run as ``audit_bench.py --run ...`` in a fresh process)
# ----------------------------------------------------------------------------------------------------------------


def worker_scapy(capture: Path, sample_frames: int) -> dict[str, Any]:
    import logging

    logging.getLogger("scapy").setLevel(logging.ERROR)
    from scapy.contrib.mqtt import MQTT
    from scapy.layers.l2 import Ether
    from scapy.packet import NoPayload
    from scapy.utils import RawPcapReader

    frames = found = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for raw, _meta in RawPcapReader(str(capture)):
        if frames >= sample_frames:
            break
        frames += 1
        layer = Ether(raw)
        while not isinstance(layer, NoPayload):
            if isinstance(layer, MQTT):
                found += 1
            layer = layer.payload
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    import scapy

    return {
        "frames": frames,
        "mqtt_layers_found": found,
        "mqtt_packets_in_frames": count_packets(capture, frames),
        "wall_s": wall,
        "cpu_s": cpu,
        "scapy": str(scapy.VERSION),
    }


def read_streams(capture: Path) -> tuple[dict[tuple[bytes, int, bytes, int], list[bytes]], int, Counter[str]]:
    """One list of TCP payloads per direction of each connection, in capture order, and the number of records."""
    from mqttaudit.capture import read_records, segments

    skipped: Counter[str] = Counter()
    streams: dict[tuple[bytes, int, bytes, int], list[bytes]] = {}
    records = 0
    for index, segment in segments(read_records(str(capture)), skipped):
        records = index + 1
        payload = segment[8]
        if payload:
            key = (segment[1], segment[2], segment[3], segment[4])
            pieces = streams.get(key)
            if pieces is None:
                pieces = streams[key] = []
            pieces.append(bytes(payload))
    return streams, records, skipped


def count_packets(capture: Path, frames: int) -> int:
    """MQTT packets completed within the first ``frames`` frames (mqttaudit's codec, untimed)."""
    from mqttaudit.capture import read_records, segments

    streams: dict[tuple[bytes, int, bytes, int], codec.StreamDecoder] = {}
    total = 0
    for index, segment in segments(read_records(str(capture)), Counter()):
        if index >= frames:
            break
        if segment[8]:
            key = (segment[1], segment[2], segment[3], segment[4])
            decoder = streams.get(key)
            if decoder is None:
                decoder = streams[key] = codec.StreamDecoder("server" if segment[2] == 1883 else "client")
            total += sum(1 for frame in decoder.feed(bytes(segment[8])) if frame.packet is not None)
    return total


def reading_stage(capture: Path) -> dict[str, Any]:
    """The audit's reading stage over the whole capture as one chunk (``chunk_segments``: frames -> runs of MQTT
    segments and the chunk's note), the pure path and the native one side by side, batch by batch, each batch
    compared (the bench capture is one of the inputs the two paths must agree on); and the native core alone (the C
    extension walking the records into segment columns, no Arrow)."""
    from mqttaudit.capture import native, whole_file
    from mqttaudit.capture.chunks import resolve
    from mqttaudit.capture.native import NativeChunk
    from mqttaudit.pipeline.options import AuditOptions
    from mqttaudit.pipeline.segments import chunk_segments

    if not native.built():
        return {"native_built": False}
    opener, name = resolve(str(capture))
    chunk = whole_file(opener, name=name)
    options = AuditOptions(frozenset({capture_gen.BROKER_PORT}))
    timings: dict[str, Any] = {"native_built": True}
    outputs: dict[bool, list[pa.RecordBatch]] = {}
    for path in (False, True):
        wall0, cpu0 = time.perf_counter(), time.process_time()
        outputs[path] = list(chunk_segments("bench", str(capture), chunk, options, native_path=path))
        timings["stage_native" if path else "stage_pure"] = {
            "wall_s": time.perf_counter() - wall0,
            "cpu_s": time.process_time() - cpu0,
        }
    timings["identical"] = len(outputs[True]) == len(outputs[False]) and all(
        mine.equals(reference) for mine, reference in zip(outputs[True], outputs[False], strict=True)
    )
    timings["runs"] = sum(batch.num_rows for batch in outputs[True]) - 1
    del outputs
    wall0, cpu0 = time.perf_counter(), time.process_time()
    reading = NativeChunk(opener, chunk, options.broker_ports)
    timings["segments"] = sum(columns.rows for columns in reading.columns())
    timings["native_core"] = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    timings["records"] = reading.reader.records
    return timings


def worker_components(capture: Path) -> dict[str, Any]:
    from mqttaudit.topics import TopicTrie

    wall0, cpu0 = time.perf_counter(), time.process_time()
    streams, records, skipped = read_streams(capture)
    read_wall, read_cpu = time.perf_counter() - wall0, time.process_time() - cpu0

    publish, subscribe = codec.PacketType.PUBLISH, codec.PacketType.SUBSCRIBE
    topics: list[str] = []
    filters: list[tuple[str, str]] = []
    frames = flawed = 0
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for key, pieces in streams.items():
        from_client = key[3] == capture_gen.BROKER_PORT
        decoder = codec.StreamDecoder("client" if from_client else "server")
        feed = decoder.feed
        for piece in pieces:
            for frame in feed(piece):
                frames += 1
                packet = frame.packet
                if frame.violations or packet is None:
                    flawed += 1
                    continue
                if from_client:
                    kind = packet.packet_type
                    if kind is publish:
                        topics.append(packet.topic)  # type: ignore[attr-defined]
                    elif kind is subscribe:
                        connection = f"{key[0].hex()}:{key[1]}"
                        filters += [(s.topic_filter, connection) for s in packet.subscriptions]  # type: ignore[attr-defined]
        frames += len(decoder.close())
    codec_wall, codec_cpu = time.perf_counter() - wall0, time.process_time() - cpu0

    wall0 = time.perf_counter()
    trie: TopicTrie[str] = TopicTrie("mqtt")
    for topic_filter, connection in dict.fromkeys(filters):
        trie.add("broker", topic_filter, connection)
    build_wall = time.perf_counter() - wall0
    match = trie.match
    wall0, cpu0 = time.perf_counter(), time.process_time()
    deliveries = 0
    for topic in topics:
        deliveries += len(match("broker", topic))
    trie_wall, trie_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    return {
        "records": records,
        "skipped": dict(skipped),
        "streams": len(streams),
        "segments_with_payload": sum(len(p) for p in streams.values()),
        "read": {"wall_s": read_wall, "cpu_s": read_cpu},
        "codec": {"wall_s": codec_wall, "cpu_s": codec_cpu, "frames": frames, "flawed_frames": flawed},
        "trie": {
            "wall_s": trie_wall,
            "cpu_s": trie_cpu,
            "topics": len(topics),
            "subscriptions": len(dict.fromkeys(filters)),
            "deliveries": deliveries,
            "build_s": build_wall,
        },
        "codec_build": "compiled" if codec.COMPILED else "pure-python",
        "reading_stage": reading_stage(capture),
    }


def timed_row(tool: str, capture: str, count: int, timing: dict[str, float], note: str) -> dict[str, Any]:
    """A results row for something timed inside a worker process (its wall and CPU seconds over ``count``)."""
    wall = timing["wall_s"]
    return {
        "tool": tool,
        "capture": capture,
        "packets": count,
        "wall_s": round(wall, 3),
        "cpu_s": round(timing["cpu_s"], 3),
        "peak_rss_tree_mb": None,
        "packets_per_s": round(count / wall) if wall else None,
        "us_per_packet": round(wall / count * 1e6, 2) if count else None,
        "finished": True,
        "extrapolated": False,
        "note": note,
    }


def judge_connections(capture: Path, audits: Iterable[Any], transcripts: dict[str, Transcript]) -> int:
    """``judge_flow`` over every connection the capture layer reassembled (as the judging tasks run it), keeping
    each transcript for the replay (its payloads as digests) by flow; returns the packets judged."""
    from mqttaudit.capture.segments import format_endpoint
    from mqttaudit.pipeline.conversations import Flow, judge_flow
    from mqttaudit.pipeline.options import AuditOptions

    config = AuditOptions(frozenset({capture_gen.BROKER_PORT})).judge_config
    packets = 0
    for audit in audits:
        if audit.client is None:
            continue
        ends = [format_endpoint(*endpoint) for endpoint in audit.endpoints]
        client, server = ends[audit.client], ends[1 - audit.client]
        name = f"{server}|{client}@{audit.first_time}"
        flow = Flow(capture.name, name, client, server, audit.events, [None] * len(audit.events))
        result = judge_flow(flow, config)
        packets += len(result.packets)
        transcripts[name] = result.replayed
    return packets


def hand_on(capture: Path, transcripts: dict[str, Transcript], folder: Path) -> pa.Table:
    """What the judging tasks hand the routing replay: each connection's head and pieces written in ``folder`` as
    they write them (:func:`tests.replay_pieces.piece_table`, the audit's pieces), and the rows of the broker's
    replay task. ``transcripts`` is emptied: the replay task holds none of them."""
    from tests.replay_pieces import piece_table

    from mqttaudit.capture.segments import format_endpoint

    broker = format_endpoint(capture_gen.BROKER_IP, capture_gen.BROKER_PORT)
    table = piece_table(transcripts, folder, broker=broker, capture=capture.name)
    transcripts.clear()
    return table


def replay_task(table: pa.Table, folder: Path) -> dict[str, Any]:
    """The routing replay of the broker as its one Spark task runs it: ``replay_sliced`` over the heads and pieces
    in ``folder`` (``table``: from :func:`hand_on`), slice by slice with the audit's default slices, writing its
    tables there; returns the task's row (the deliveries and routing findings it wrote)."""
    from mqttaudit.pipeline.options import AuditOptions
    from mqttaudit.pipeline.slicing import replay_sliced

    options = AuditOptions(frozenset({capture_gen.BROKER_PORT}), out_dir=str(folder))
    [row] = replay_sliced(table, options).to_pylist()
    return row


def worker_pipeline(capture: Path) -> dict[str, Any]:
    """The audit's own Python work, without Spark, in this one process with the tasks' collector settings:
    reading and reassembling every connection and decoding it (``audit_records``), judging each connection
    (``judge_flow``), writing each connection's head and pieces for the routing replay (:func:`hand_on`), and the
    routing replay of the broker slice by slice from those files (``replay_sliced``, :func:`replay_task`). What is
    left of an audit's time beyond these is Spark's."""
    from mqttaudit.capture import audit_records, read_records
    from mqttaudit.pipeline.options import AuditOptions
    from mqttaudit.pipeline.worker_gc import tune_gc

    tune_gc()
    options = AuditOptions(frozenset({capture_gen.BROKER_PORT}))
    timings: dict[str, Any] = {}
    wall0, cpu0 = time.perf_counter(), time.process_time()
    audits = list(audit_records(read_records(str(capture)), options=options.flow_options))
    timings["reassembly"] = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    transcripts: dict[str, Transcript] = {}
    wall0, cpu0 = time.perf_counter(), time.process_time()
    packets = judge_connections(capture, audits, transcripts)
    timings["judge"] = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    del audits
    connections = len(transcripts)
    with tempfile.TemporaryDirectory(prefix="replay-", dir=capture.parent) as folder:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        table = hand_on(capture, transcripts, Path(folder))
        timings["pieces"] = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
        wall0, cpu0 = time.perf_counter(), time.process_time()
        replayed = replay_task(table, Path(folder))
        timings["replay"] = {"wall_s": time.perf_counter() - wall0, "cpu_s": time.process_time() - cpu0}
    return {
        **timings,
        "connections": connections,
        "packets": packets,
        "deliveries": replayed["deliveries"],
        "routing_findings": replayed["routing_findings"],
        "codec_build": "compiled" if codec.COMPILED else "pure-python",
    }


# ----------------------------------------------------------------------------------------------------------------
# Profile: the per-connection path of the audit without Spark
# ----------------------------------------------------------------------------------------------------------------


def profile(capture: Path, *, replay: bool, top: int = 25) -> None:
    """cProfile of what each Spark task of the judging stage runs, in one process: ``audit_records`` (frames ->
    segments -> connections, reassembled and decoded) then ``judge_flow`` per connection; and, with ``replay``,
    the routing replay task of the broker (``replay_sliced`` over the heads and pieces the judging tasks write,
    written beforehand outside the profiler: :func:`hand_on`, :func:`replay_task`), profiled on its own."""
    from mqttaudit.capture import audit_records, read_records
    from mqttaudit.pipeline.options import AuditOptions

    options = AuditOptions(frozenset({capture_gen.BROKER_PORT}))
    transcripts: dict[str, Transcript] = {}

    def judge_all() -> int:
        audits = audit_records(read_records(str(capture)), options=options.flow_options)
        return judge_connections(capture, audits, transcripts)

    profiled("audit_records + judge_flow", capture, judge_all, top)
    if replay:
        with tempfile.TemporaryDirectory(prefix="replay-", dir=capture.parent) as folder:
            table = hand_on(capture, transcripts, Path(folder))
            profiled("replay_sliced", capture, lambda: int(replay_task(table, Path(folder))["deliveries"]), top)


def profiled(title: str, capture: Path, run: Callable[[], int], top: int) -> None:
    """Prints the cProfile of ``run`` (which returns the rows it made), its top ``top`` functions by cumulative
    and by own time."""
    profiler = cProfile.Profile()
    wall0 = time.perf_counter()
    profiler.enable()
    count = run()
    profiler.disable()
    wall = time.perf_counter() - wall0
    build = "compiled" if codec.COMPILED else "pure Python"
    print(f"\n## cProfile of {title} on {capture.name}: {wall:.2f} s under the profiler ({count:,} rows)")
    print(f"codec build: {build}; compiled functions do not show individually\n")
    for key, label in ((pstats.SortKey.CUMULATIVE, "cumulative"), (pstats.SortKey.TIME, "tottime")):
        report = io.StringIO()
        pstats.Stats(profiler, stream=report).sort_stats(key).print_stats(top)
        text = report.getvalue()
        print(f"### top {top} by {label}\n")
        print(text[text.find("   ncalls") :].rstrip() + "\n")


# ----------------------------------------------------------------------------------------------------------------
# Environment and reporting
# ----------------------------------------------------------------------------------------------------------------


def versions() -> dict[str, str | None]:
    def first_line(command: list[str]) -> str | None:
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (done.stdout or done.stderr).strip().splitlines()
        return text[0] if text else None

    import pyspark
    import scapy

    return {
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": first_line(["java", "-version"]),
        "tshark": first_line(["tshark", "--version"]),
        "scapy": str(scapy.VERSION),
        "psutil": psutil.__version__,
    }


def source_revision() -> dict[str, Any]:
    """The commit the source tree is at, and whether ``src`` differs from it (the code that was measured)."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    return {
        "commit": commit or None,
        "src_modified": bool(git("status", "--porcelain", "--", "src")) if commit else None,
    }


def child_env() -> dict[str, str]:
    """The benchmark's own environment; when mqttaudit comes from the source tree, the children use it too."""
    env = dict(os.environ)
    package_root = Path(mqttaudit.__file__).resolve().parents[1]
    if package_root == (ROOT / "src").resolve():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, ["src", env.get("PYTHONPATH", "")]))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def render_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| tool | capture | MQTT packets | wall s | CPU s (tree) | peak RSS MB (tree) | packets/s | other CPU s "
        "| note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        rate = row.get("packets_per_s")
        lines.append(
            f"| {row['tool']} | {row['capture']} | {row['packets']:,} | {fmt(row['wall_s'], 2)} "
            f"| {fmt(row.get('cpu_s'), 2)} | {fmt(row.get('peak_rss_tree_mb'))} "
            f"| {'-' if rate is None else f'{rate:,}'} | {fmt(row.get('other_cpu_s'))} | {row.get('note', '')} |"
        )
    return "\n".join(lines)


def ratio(numerator: dict[str, Any] | None, denominator: dict[str, Any] | None, key: str) -> float | None:
    if not numerator or not denominator or not numerator.get("finished") or not denominator.get("finished"):
        return None
    return numerator[key] / denominator[key] if denominator[key] else None


# ----------------------------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--packets", type=int, default=None, help="MQTT packets (default: BENCH_PACKETS or 4,000,000)")
    parser.add_argument("--timeout", type=float, default=float(os.environ.get("BENCH_TIMEOUT", "3600")))
    parser.add_argument("--poll", type=float, default=0.2, help="seconds between polls of the process tree")
    parser.add_argument("--scapy-sample", type=int, default=50_000, help="MQTT packets scapy dissects (50,000)")
    parser.add_argument("--skip-audit", action="store_true", help="measure everything but the Spark audits")
    parser.add_argument(
        "--retry-driver-memory",
        default=os.environ.get("BENCH_RETRY_DRIVER_MEMORY", "8g"),
        help="JVM heap for a second try of an audit that ran out of it with the defaults ('' for no retry)",
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--md", type=Path, default=DEFAULT_MD)
    parser.add_argument("--profile", action="store_true", help="cProfile the per-connection path without Spark")
    parser.add_argument("--profile-replay", action="store_true", help="with --profile: the routing replay too")
    parser.add_argument("--run", choices=("scapy", "components", "pipeline"), help=argparse.SUPPRESS)
    parser.add_argument("--capture", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--frames", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.poll <= 0 or args.scapy_sample < 1:
        parser.error("--timeout, --poll and --scapy-sample must be positive")
    return args


def ensure_captures(packets: int, compare: int) -> list[tuple[Path, dict[str, Any]]]:
    """The benchmark's captures, generated when missing or out of date (smaller first)."""
    out = []
    for count in [packets] if compare < 1 or compare >= packets else [compare, packets]:
        capture_gen.main(["--packets", str(count), "--only"])
        path = capture_gen.capture_path(count)
        out.append((path, json.loads(capture_gen.manifest_path(path).read_text())))
    return out


def audit_command(capture: Path, master: str, out_dir: Path) -> list[str]:
    return [sys.executable, "-m", "mqttaudit", "audit", str(capture), "--out", str(out_dir), "--master", master]


def audit_row(row: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    row["phases_s"] = phases(row.pop("_lines"), row["wall_s"])
    try:
        summary = json.loads((out_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return row
    counts = summary["counts"]
    row["audit"] = {
        "connections": counts["connections"],
        "packets": counts["packets"],
        "violations": counts["violations"],
        "violations_by_actor": counts["violations_by_actor"],
        "routing_findings": counts["routing_findings"],
        "bytes_reconcile": summary["bytes"]["reconciles"],
    }
    # Exit status 1 means findings (the capture holds deliberate violations), not a failure.
    actors = ", ".join(f"{n} by {actor}s" for actor, n in counts["violations_by_actor"].items())
    row["note"] = f"{counts['violations']} violations ({actors}), {counts['routing_findings']} routing findings"
    return row


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.run:
        workers = {
            "scapy": lambda: worker_scapy(args.capture, args.frames),
            "components": lambda: worker_components(args.capture),
            "pipeline": lambda: worker_pipeline(args.capture),
        }
        result = workers[args.run]()
        print(json.dumps(result))
        return 0
    packets, compare = capture_gen.sizes_from_env(args.packets)
    captures = ensure_captures(packets, compare)
    main_path, main_manifest = captures[-1]
    if args.profile:
        profile(main_path, replay=args.profile_replay)
        return 0
    env = child_env()
    common = {"env": env, "timeout": args.timeout, "poll": args.poll}
    rows: list[dict[str, Any]] = []
    out_root = BENCH_DIR / "out"
    print(f"measuring on {main_path.name} ({packets:,} MQTT packets), one tool at a time ...", file=sys.stderr)

    # The audits: each with the defaults first; one that runs out of JVM heap is run again with more (reported
    # beside the failure, and then used for the ratios). The comparison capture is audited with the heap the
    # large one needed, so that its peak memory compares like with like.
    audits: dict[tuple[str, str], dict[str, Any]] = {}
    audit_rows: list[dict[str, Any]] = []
    plan = [(main_path, main_manifest, master) for master in ("local[1]", "local[2]")]
    if len(captures) > 1:
        plan.append((captures[0][0], captures[0][1], "local[1]"))
    for path, manifest, master in plan if not args.skip_audit else []:
        needed = (audits.get((main_path.name, "local[1]")) or {}).get("driver_memory")
        for memory in (needed,) if path != main_path and needed else ("", args.retry_driver_memory):
            slug = f"audit-{manifest['packets']}-{master.removeprefix('local[').removesuffix(']')}"
            slug += f"-{memory}" if memory else ""
            out_dir = out_root / slug
            shutil.rmtree(out_dir, ignore_errors=True)
            run_env = dict(env)
            if memory:
                # The audit's own setting, and spark-submit's for versions that do not read it.
                run_env["MQTTAUDIT_DRIVER_MEMORY"] = memory
                run_env["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {memory} pyspark-shell"
            row = run_tool(
                f"mqttaudit audit --master {master}" + (f" (driver memory {memory})" if memory else ""),
                audit_command(path, master, out_dir),
                capture=path,
                packets=manifest["packets"],
                stdout=out_root / f"{slug}.stdout",
                stderr=out_root / f"{slug}.stderr",
                success=(0, 1),  # 1: the audit found violations, as it should here
                env=run_env,
                timeout=args.timeout,
                poll=args.poll,
            )
            if memory:
                row["driver_memory"] = memory
            audit_rows.append(audit_row(row, out_dir))
            audits[(path.name, master)] = row
            if row["finished"] or not row.get("out_of_memory") or not args.retry_driver_memory:
                break

    tsharks: dict[str, dict[str, Any]] = {}
    for path, manifest in reversed(captures):
        command = ["tshark", "-r", str(path), "-d", "tcp.port==1883,mqtt", "-T", "fields"]
        command += ["-e", "frame.number", "-e", "mqtt.msgtype", "-e", "mqtt.topic"]
        row = run_tool("tshark", command, capture=path, packets=manifest["packets"], **common)  # type: ignore[arg-type]
        row.pop("_lines")
        row["note"] = "dissects every frame, reassembles TCP; output to /dev/null"
        tsharks[path.name] = row

    sample = min(main_manifest["frames"], round(main_manifest["frames"] * args.scapy_sample / packets))
    worker = [sys.executable, str(Path(__file__).resolve()), "--capture", str(main_path)]
    scapy_out = out_root / "scapy.json"
    scapy_row = run_tool(
        "scapy",
        [*worker, "--run", "scapy", "--frames", str(sample)],
        capture=main_path,
        packets=main_manifest["packets"],
        stdout=scapy_out,
        **common,  # type: ignore[arg-type]
    )
    scapy_row.pop("_lines")
    if scapy_row["finished"] and scapy_row["exit_status"] == 0:
        sampled = json.loads(scapy_out.read_text())
        scale = main_manifest["frames"] / sampled["frames"]
        scapy_row["sample"] = sampled | {"scale": scale, "subprocess_wall_s": scapy_row["wall_s"]}
        scapy_row["wall_s"] = round(sampled["wall_s"] * scale, 2)
        scapy_row["cpu_s"] = round(sampled["cpu_s"] * scale, 2)
        scapy_row["packets_per_s"] = round(packets / scapy_row["wall_s"])
        scapy_row["extrapolated"] = True
        scapy_row["tool"] = "scapy MQTT layer (extrapolated)"
        scapy_row["note"] = (
            f"EXTRAPOLATED from the first {sampled['frames']:,} frames ({sampled['wall_s']:.1f} s, x{scale:,.1f}); "
            f"found {sampled['mqtt_layers_found']:,} MQTT layers where those frames complete "
            f"{sampled['mqtt_packets_in_frames']:,} packets (no TCP reassembly); peak RSS of the sample run"
        )

    def run_worker(tool: str, kind: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A worker of this script in its own process, measured like the tools; what it printed, if it worked."""
        out = out_root / f"{kind}.json"
        row = run_tool(
            tool,
            [*worker, "--run", kind],
            capture=main_path,
            packets=main_manifest["packets"],
            stdout=out,
            **common,  # type: ignore[arg-type]
        )
        row.pop("_lines")
        worked = row["finished"] and row["exit_status"] == 0
        return row, json.loads(out.read_text()) if worked else None

    components_row, measured = run_worker("parts alone", "components")
    parts: dict[str, Any] = measured or {}
    part_rows: list[dict[str, Any]] = []
    if measured is not None:
        for key, label, count, note in (
            ("read", "mqttaudit reader: frames -> TCP segments", packets, f"{parts['records']:,} frames"),
            (
                "codec",
                "mqttaudit codec alone (StreamDecoder)",
                parts["codec"]["frames"],
                f"{parts['streams']:,} streams, {parts['codec']['flawed_frames']} flawed frames",
            ),
            (
                "trie",
                "mqttaudit TopicTrie.match alone",
                parts["trie"]["topics"],
                f"topics matched against {parts['trie']['subscriptions']:,} subscriptions, "
                f"{parts['trie']['deliveries']:,} deliveries (count is topics)",
            ),
        ):
            part_rows.append(timed_row(label, main_path.name, count, parts[key], note + "; timed inside one process"))
        stage = parts["reading_stage"]
        if stage.get("native_built"):
            same = "identical output" if stage["identical"] else "OUTPUTS DIFFER"
            for key, label, note in (
                ("native_core", "native core (C): frames -> MQTT segment columns", "the extension alone, no Arrow"),
                (
                    "stage_native",
                    "reading stage, native path: frames -> runs of MQTT segments",
                    f"chunk_segments, one chunk, {stage['runs']:,} runs; {same} to the pure path's",
                ),
                (
                    "stage_pure",
                    "reading stage, pure path: frames -> runs of MQTT segments",
                    "chunk_segments, one chunk",
                ),
            ):
                part_rows.append(
                    timed_row(label, main_path.name, packets, stage[key], f"{note}; timed inside one process")
                )
        components_row["note"] = "the process that timed the rows above (reading, decoding, matching, reading stage)"

    pipeline_row, work = run_worker("audit's Python work alone", "pipeline")
    work_rows: list[dict[str, Any]] = []
    if work is not None:
        for key, label, what in (
            ("reassembly", "audit without Spark: reading, reassembly, decoding", "audit_records"),
            (
                "judge",
                "audit without Spark: judging every connection",
                f"judge_flow, {work['connections']:,} connections",
            ),
            (
                "pieces",
                "audit without Spark: handing the routing replay each connection's head and pieces",
                f"write_pieces, written as the judging tasks write them, {work['connections']:,} connections",
            ),
            (
                "replay",
                "audit without Spark: routing replay, the broker's one task slice by slice",
                f"replay_sliced, {work['deliveries']:,} deliveries, {work['routing_findings']} routing findings",
            ),
        ):
            note = what + "; timed inside one process, the tasks' collector settings"
            work_rows.append(timed_row(label, main_path.name, work["packets"], work[key], note))
        pipeline_row["note"] = "the process that timed the four rows above (the audit's Python work, no Spark)"

    local1 = audits.get((main_path.name, "local[1]"))
    local2 = audits.get((main_path.name, "local[2]"))
    small1 = audits.get((captures[0][0].name, "local[1]")) if len(captures) > 1 else None
    speedup = ratio(tsharks.get(main_path.name), local1, "wall_s")
    scaling = ratio(local1, local2, "wall_s")
    growth = ratio(local1, small1, "peak_rss_tree_mb")
    tshark_growth = ratio(tsharks.get(main_path.name), tsharks.get(captures[0][0].name), "peak_rss_tree_mb")

    def used(*picked: dict[str, Any] | None) -> str:
        return " vs ".join(f"{row['tool']} on {row['capture']}" for row in picked if row)

    reading = parts.get("reading_stage", {}) if measured is not None else {}
    native_gain = (
        parts["read"]["wall_s"] / reading["native_core"]["wall_s"]
        if reading.get("native_built") and reading["native_core"]["wall_s"]
        else None
    )
    targets = [
        {
            "target": f"speedup_vs_tshark >= {TARGET_SPEEDUP_NOW:g}",
            "value": None if speedup is None else round(speedup, 3),
            "met": speedup is not None and speedup >= TARGET_SPEEDUP_NOW,
            "from": used(tsharks.get(main_path.name), local1),
        },
        {
            "target": f"native reading >= {TARGET_NATIVE_READING:g}x the pure reader (frames -> TCP segments)",
            "value": None if native_gain is None else round(native_gain, 2),
            "met": native_gain is not None and native_gain >= TARGET_NATIVE_READING and bool(reading["identical"]),
            "from": "mqttaudit reader: frames -> TCP segments vs native core (C): frames -> MQTT segment columns",
        },
        {
            "target": f"speedup_vs_tshark >= {TARGET_SPEEDUP:g}",
            "value": None if speedup is None else round(speedup, 3),
            "met": speedup is not None and speedup >= TARGET_SPEEDUP,
            "from": used(tsharks.get(main_path.name), local1),
        },
        {
            "target": f"scaling_2_vs_1 >= {TARGET_SCALING:g}",
            "value": None if scaling is None else round(scaling, 3),
            "met": scaling is not None and scaling >= TARGET_SCALING,
            "from": used(local1, local2),
        },
        {
            "target": f"audit peak memory at {packets:,} / at {compare:,} packets <= {MEMORY_GROWTH_LIMIT:g}",
            "value": None if growth is None else round(growth, 3),
            "met": growth is not None and growth <= MEMORY_GROWTH_LIMIT,
            "from": used(local1, small1),
        },
    ]
    main_rows = [r for r in audit_rows if r["capture"] == main_path.name]
    main_rows += [r for r in (tsharks.get(main_path.name), scapy_row) if r]
    compare_rows = [r for r in audit_rows if r["capture"] != main_path.name]
    compare_rows += [r for r in (tsharks.get(captures[0][0].name),) if r and len(captures) > 1]
    rows = [*main_rows, *part_rows, components_row, *work_rows, pipeline_row, *compare_rows]
    build = parts.get("codec_build") or ("compiled" if codec.COMPILED else "pure-python")
    machine = {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 1),
        "platform": platform.platform(),
    }
    result = {
        "benchmark": "audit_bench",
        "captures": {
            path.name: {k: v for k, v in manifest.items() if k != "topic_filters"} for path, manifest in captures
        },
        "packets": packets,
        "compare_packets": compare if len(captures) > 1 else None,
        "machine": machine,
        "versions": versions(),
        "codec_build": build,
        "source": source_revision(),
        "memory_method": "psutil polling of the process tree (sum of RSS)"
        + (", with /usr/bin/time -v for rusage" if TIME else " only (no /usr/bin/time)"),
        "timeout_s": args.timeout,
        "runs": rows,
        "parts": parts,
        "speedup_vs_tshark": None if speedup is None else round(speedup, 4),
        "scaling_2_vs_1": None if scaling is None else round(scaling, 4),
        "memory_growth_audit": None if growth is None else round(growth, 4),
        "memory_growth_tshark": None if tshark_growth is None else round(tshark_growth, 4),
        "targets": targets,
        # The most a second CPU can give when the one-core run already keeps more than one busy (the JVM's
        # threads beside the Python worker): the one-core wall over its CPU time spread across every CPU.
        "scaling_ceiling_cpu": (
            round(local1["wall_s"] / (local1["cpu_s"] / (machine["cpus"] or 1)), 3)
            if local1 and local1.get("finished") and local1["cpu_s"]
            else None
        ),
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")

    header = (
        f"## Capture audit against tshark and scapy ({packets:,} MQTT packets"
        + (f"; memory also at {compare:,}" if len(captures) > 1 else "")
        + ")\n\n"
        + f"{machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gb']} GB; Python "
        + f"{result['versions']['python']}, PySpark {result['versions']['pyspark']}, "
        + f"{result['versions']['tshark']}, scapy {result['versions']['scapy']}; codec build: {build}. "
        + f"CPU and peak RSS are those of the whole process tree ({result['memory_method']}); "
        + "other CPU s is what the rest of the machine used meanwhile (competition for the cores).\n\n"
    )
    verdicts = "\n".join(
        f"- {t['target']}: {'-' if t['value'] is None else t['value']} -> {'met' if t['met'] else 'NOT MET'}"
        f" ({t['from'] or 'no finished runs to compare'})"
        for t in targets
    )
    phase_lines = "\n".join(
        f"- {row['tool']} ({row['capture']}): "
        + ", ".join(f"{label} {seconds:,.1f} s" for label, seconds in row.get("phases_s", {}).items())
        for row in audit_rows
    )
    role_lines = "\n".join(
        f"- {row['tool']} ({row['capture']}): "
        + "; ".join(
            f"{kind} {entry['cpu_s']:,.1f} CPU s, peak RSS {entry['peak_rss_mb']:,.0f} MB"
            + (f" (largest one {entry['peak_rss_one_process_mb']:,.0f} MB)" if entry["processes"] > 1 else "")
            for kind, entry in sorted(row.get("by_role", {}).items())
            if kind != "other"
        )
        for row in audit_rows
    )
    ceiling = (
        f"\nA bound on scaling from CPU alone: the `local[1]` run used {local1['cpu_s']:,.1f} CPU s, so "
        f"{machine['cpus']} CPUs need at least {local1['cpu_s'] / (machine['cpus'] or 1):,.1f} s for the same work: "
        f"at most {result['scaling_ceiling_cpu']:.2f}x, before any serial part.\n"
        if local1 and result["scaling_ceiling_cpu"]
        else ""
    )
    markdown = (
        f"{header}{render_table(rows)}\n\nPhases of the audit runs:\n\n{phase_lines}\n\n"
        f"CPU and memory per process role (the JVM, Spark's Python workers, the driver):\n\n{role_lines}\n"
        f"{ceiling}\nTargets:\n\n{verdicts}\n"
    )
    args.md.write_text(markdown)
    print(markdown)
    print(f"speedup_vs_tshark = {result['speedup_vs_tshark']}, scaling_2_vs_1 = {result['scaling_2_vs_1']}")
    print(f"wrote {args.json} and {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
