"""Routing oracle throughput: mqttaudit's TopicTrie against paho-mqtt's matcher and the brute-force reference.

What is measured
    A deterministic (seeded) set of MQTT subscriptions, 100,000 by default, spread over 100 namespaces (a
    namespace stands for one broker mountpoint: ``("mqtt://broker-3:1883", "/tenant-017")``). Each namespace
    holds a few tenants with sites, devices and sensors, and its subscriptions look like the ones a fleet has:
    mostly one device's sensor (``acme/site-3/device-0017/temperature``), then one metric across a site
    (``acme/site-3/+/temperature``), everything of one device or site (``.../device-0017/#``, ``acme/site-3/#``),
    alarms of every device (``acme/+/+/alarm``), a few tenant-wide and global archivers (``acme/#``, ``#``) and
    broker monitors (``$SYS/#``, ``$SYS/broker/+/load``). Several clients often share one filter.

    Then 1,000,000 topics are published, drawn like telemetry: a tenant's device publishes one of its sensors
    (most topics), a status or command topic one level deeper, or a ``$SYS`` statistic. Most topics match a few
    filters; the run reports how many deliveries that makes on average. Matches per second (topics matched per
    second, each answered with every matching subscription) are measured for:

    * ``TopicTrie.match(namespace, topic)`` over all 1,000,000 topics: the judged figure;
    * paho-mqtt's ``paho.mqtt.client.topic_matches_sub(filter, topic)`` tried against every distinct filter of the
      topic's namespace (about 800 per namespace): the brute force a router without a trie does. It builds a
      matcher per call, so it is slow: it runs on the first topics of the same stream (1,000 by default) and the
      rate is per topic over that subset;
    * paho-mqtt's own trie, ``paho.mqtt.matcher.MQTTMatcher`` (one per namespace, each filter mapped to the list of
      its clients), on the first 100,000 topics: informational, a trie against a trie;
    * ``ReferenceMatcher.match``, the test oracle (every subscription of every namespace checked in turn), on the
      first 200 topics.

    Every implementation's deliveries on its subset are compared with the trie's (the same values in the same
    order for the reference, the same multiset for paho), so a run cannot silently measure a wrong answer. Each
    measurement is repeated (best of 3 by default; the median is reported too), with ``time.perf_counter`` for
    wall time and ``time.process_time`` for CPU time; the garbage collector stays on and runs before each
    repetition, with the harness's own data frozen (``gc.freeze``). The process is single threaded and pinned to
    the first CPU it may use (``os.sched_setaffinity``) where the platform allows.

    Target (best of the repetitions): TopicTrie matches >= 250,000 topics/s on one core. The figures are printed
    as a Markdown table and written to ``bench/results-trie.json``.

How to reproduce
    make bench                                      # runs this after bench/codec_throughput.py
    .venv/bin/python bench/trie_throughput.py --topics 200000 --repeat 5
    .venv/bin/python bench/trie_throughput.py --profile   # cProfile of TopicTrie.match, top 25
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import io
import json
import platform
import pstats
import random
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from machine import cpu_model, pin_to_one_cpu  # bench/machine.py
from mqttaudit import codec
from mqttaudit.topics import ReferenceMatcher, TopicTrie
from mqttaudit.topics import trie as trie_module

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_JSON = BENCH_DIR / "results-trie.json"
TARGET_MPS = 250_000

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell", "cyberdyne", "wonka")
SENSORS = ("temperature", "humidity", "pressure", "co2", "power", "vibration")
DEEPER = ("status/online", "status/firmware", "cmd/reboot", "cmd/config", "event/alarm")
SYS_TOPICS = (
    "$SYS/broker/load/messages/received/1min",
    "$SYS/broker/load/bytes/sent/1min",
    "$SYS/broker/clients/connected",
    "$SYS/broker/uptime",
)

Namespace = tuple[str, str]
Stream = list[tuple[Namespace, str]]


# ----------------------------------------------------------------------------------------------------------
# Workload
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Tenant:
    name: str
    sites: int
    devices: int  # per site


@dataclasses.dataclass
class Workload:
    subscriptions: list[tuple[Namespace, str, str]]
    tenants: dict[Namespace, list[Tenant]]
    stream: Stream


class WorkloadGenerator:
    """Subscriptions and published topics of IoT fleets, one namespace per broker mountpoint."""

    def __init__(self, seed: int, namespaces: int) -> None:
        self.rng = random.Random(seed)
        self.namespaces: list[Namespace] = [
            (f"mqtt://broker-{k % 7}:1883", f"/tenant-{k:03d}") for k in range(namespaces)
        ]
        self.tenants = {
            namespace: [
                Tenant(name, self.rng.randint(3, 8), self.rng.randint(20, 60))
                for name in self.rng.sample(TENANTS, self.rng.randint(3, 5))
            ]
            for namespace in self.namespaces
        }

    def device(self, tenant: Tenant) -> str:
        rng = self.rng
        return f"{tenant.name}/site-{rng.randint(1, tenant.sites)}/device-{rng.randint(1, tenant.devices):04d}"

    def topic_filter(self, namespace: Namespace) -> str:
        rng = self.rng
        tenant = rng.choice(self.tenants[namespace])
        site = f"{tenant.name}/site-{rng.randint(1, tenant.sites)}"
        roll = rng.random()
        if roll < 0.70:
            return f"{self.device(tenant)}/{rng.choice(SENSORS)}"
        if roll < 0.78:
            return f"{site}/+/{rng.choice(SENSORS)}"
        if roll < 0.90:
            return f"{self.device(tenant)}/#"
        if roll < 0.95:
            return f"{self.device(tenant)}/status/+"
        if roll < 0.97:
            return f"{site}/#"
        if roll < 0.995:
            return f"{tenant.name}/+/+/event/alarm"
        if roll < 0.998:
            return f"{tenant.name}/#"
        if roll < 0.999:
            return "#"
        return rng.choice(("$SYS/#", "$SYS/broker/load/#", "$SYS/broker/clients/+"))

    def subscriptions(self, count: int) -> list[tuple[Namespace, str, str]]:
        """``count`` distinct subscriptions; one client in eight reuses a filter another client of the same
        namespace already has (dashboards, replicas)."""
        rng = self.rng
        seen: set[tuple[Namespace, str, str]] = set()
        out: list[tuple[Namespace, str, str]] = []
        recent: dict[Namespace, list[str]] = {namespace: [] for namespace in self.namespaces}
        while len(out) < count:
            namespace = self.namespaces[len(out) % len(self.namespaces)]
            if recent[namespace] and rng.random() < 0.125:
                topic_filter = rng.choice(recent[namespace])
            else:
                topic_filter = self.topic_filter(namespace)
                recent[namespace].append(topic_filter)
            subscription = (namespace, topic_filter, f"client-{rng.randrange(1_000_000):06d}")
            if subscription not in seen:
                seen.add(subscription)
                out.append(subscription)
        return out

    def topic(self, namespace: Namespace) -> str:
        rng = self.rng
        roll = rng.random()
        tenant = rng.choice(self.tenants[namespace])
        if roll < 0.82:
            return f"{self.device(tenant)}/{rng.choice(SENSORS)}"
        if roll < 0.97:
            return f"{self.device(tenant)}/{rng.choice(DEEPER)}"
        return rng.choice(SYS_TOPICS)

    def stream(self, count: int, distinct: int) -> Stream:
        """``count`` publications drawn from ``distinct`` topics (a live fleet repeats its topics)."""
        pool = [(namespace, self.topic(namespace)) for namespace in self.rng.choices(self.namespaces, k=distinct)]
        return self.rng.choices(pool, k=count)

    def build(self, subscriptions: int, topics: int) -> Workload:
        subs = self.subscriptions(subscriptions)
        return Workload(subs, self.tenants, self.stream(topics, min(topics, 250_000)))


# ----------------------------------------------------------------------------------------------------------
# Matchers
# ----------------------------------------------------------------------------------------------------------


def build_trie(subscriptions: Sequence[tuple[Namespace, str, str]]) -> TopicTrie[str]:
    trie: TopicTrie[str] = TopicTrie("mqtt")
    for namespace, topic_filter, client in subscriptions:
        trie.add(namespace, topic_filter, client)
    return trie


def build_reference(subscriptions: Sequence[tuple[Namespace, str, str]]) -> ReferenceMatcher[str]:
    reference: ReferenceMatcher[str] = ReferenceMatcher("mqtt")
    for namespace, topic_filter, client in subscriptions:
        reference.add(namespace, topic_filter, client)
    return reference


def filters_by_namespace(
    subscriptions: Sequence[tuple[Namespace, str, str]],
) -> dict[Namespace, list[tuple[str, list[str]]]]:
    """Each namespace's distinct filters, each with the clients subscribed with it."""
    grouped: dict[Namespace, dict[str, list[str]]] = {}
    for namespace, topic_filter, client in subscriptions:
        grouped.setdefault(namespace, {}).setdefault(topic_filter, []).append(client)
    return {namespace: list(filters.items()) for namespace, filters in grouped.items()}


def paho_matchers(by_namespace: dict[Namespace, list[tuple[str, list[str]]]]) -> dict[Namespace, Any]:
    from paho.mqtt.matcher import MQTTMatcher

    matchers: dict[Namespace, Any] = {}
    for namespace, filters in by_namespace.items():
        matcher = MQTTMatcher()
        for topic_filter, clients in filters:
            matcher[topic_filter] = clients
        matchers[namespace] = matcher
    return matchers


def run_trie(trie: TopicTrie[str], stream: Stream) -> int:
    match = trie.match
    deliveries = 0
    for namespace, topic in stream:
        deliveries += len(match(namespace, topic))
    return deliveries


def collect_trie(trie: TopicTrie[str], stream: Stream) -> list[list[str]]:
    return [trie.match(namespace, topic) for namespace, topic in stream]


def run_paho_brute_force(by_namespace: dict[Namespace, list[tuple[str, list[str]]]], stream: Stream) -> list[list[str]]:
    from paho.mqtt.client import topic_matches_sub

    out = []
    for namespace, topic in stream:
        out.append([c for f, clients in by_namespace[namespace] if topic_matches_sub(f, topic) for c in clients])
    return out


def run_paho_matcher(matchers: dict[Namespace, Any], stream: Stream) -> list[list[str]]:
    return [[c for clients in matchers[ns].iter_match(topic) for c in clients] for ns, topic in stream]


def run_reference(reference: ReferenceMatcher[str], stream: Stream) -> list[list[str]]:
    return [reference.match(namespace, topic) for namespace, topic in stream]


# ----------------------------------------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Measurement:
    matcher: str
    topics: int
    deliveries: int
    walls: list[float]
    cpus: list[float]
    note: str = ""
    ratio: float | None = None
    judged: bool = False

    @property
    def best_wall(self) -> float:
        return min(self.walls)

    @property
    def best_cpu(self) -> float:
        return self.cpus[self.walls.index(self.best_wall)]

    @property
    def mps(self) -> float:
        return self.topics / self.best_wall

    @property
    def median_mps(self) -> float:
        return self.topics / statistics.median(self.walls)

    def as_json(self) -> dict[str, Any]:
        return {
            "matcher": self.matcher,
            "topics": self.topics,
            "deliveries": self.deliveries,
            "wall_s_best": round(self.best_wall, 6),
            "cpu_s_of_best": round(self.best_cpu, 6),
            "matches_per_s_best": round(self.mps),
            "matches_per_s_median": round(self.median_mps),
            "ratio_vs_paho_brute_force": None if self.ratio is None else round(self.ratio, 3),
            "wall_s_all": [round(wall, 6) for wall in self.walls],
            "cpu_s_all": [round(cpu, 6) for cpu in self.cpus],
            "note": self.note,
        }


def measure(
    name: str, run: Callable[[], Any], deliveries: Callable[[Any], int], topics: int, repeat: int
) -> tuple[Measurement, Any]:
    """Times ``run`` ``repeat`` times; every run must make the same number of deliveries. Returns the last result."""
    walls: list[float] = []
    cpus: list[float] = []
    counts: set[int] = set()
    result: Any = None
    for _ in range(repeat):
        result = None
        gc.collect()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        result = run()
        wall1, cpu1 = time.perf_counter(), time.process_time()
        counts.add(deliveries(result))
        walls.append(wall1 - wall0)
        cpus.append(cpu1 - cpu0)
    assert len(counts) == 1, f"{name}: the repetitions made different numbers of deliveries: {sorted(counts)}"
    print(f"  {name}: best {min(walls):.3f} s, median {statistics.median(walls):.3f} s", file=sys.stderr)
    return Measurement(name, topics, counts.pop(), walls, cpus), result


def flattened(results: Sequence[Sequence[str]]) -> int:
    return sum(len(found) for found in results)


def verify_same(name: str, got: Sequence[list[str]], expected: Sequence[list[str]], *, ordered: bool) -> None:
    assert len(got) == len(expected), f"{name}: {len(got)} answers, expected {len(expected)}"
    for index, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        same = mine == theirs if ordered else Counter(mine) == Counter(theirs)
        assert same, f"{name}: topic #{index} answered {sorted(mine)}, the trie {sorted(theirs)}"


def trie_memory(subscriptions: Sequence[tuple[Namespace, str, str]]) -> int:
    """Bytes the trie holds (tracemalloc), without the filter and client strings, which the caller owns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        trie = build_trie(subscriptions)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del trie
    return held


# ----------------------------------------------------------------------------------------------------------
# Environment and reporting
# ----------------------------------------------------------------------------------------------------------


def paho_version() -> str:
    import paho.mqtt

    return str(paho.mqtt.__version__)


def render_table(rows: Sequence[Measurement]) -> str:
    lines = [
        "| matcher | topics | deliveries | wall s | CPU s | matches/s | matches/s (median) | vs paho brute force |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ratio = "-" if row.ratio is None else f"{row.ratio:,.0f}x" if row.ratio >= 10 else f"{row.ratio:.2f}x"
        lines.append(
            f"| {row.matcher} | {row.topics:,} | {row.deliveries:,} | {row.best_wall:.3f} | {row.best_cpu:.3f} "
            f"| {row.mps:,.0f} | {row.median_mps:,.0f} | {ratio} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------
# Entry points
# ----------------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--subscriptions", type=int, default=100_000, help="subscriptions (default 100,000)")
    parser.add_argument("--namespaces", type=int, default=100, help="namespaces they spread over (default 100)")
    parser.add_argument("--topics", type=int, default=1_000_000, help="topics matched (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=20240601, help="seed of the workload generator")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement (default 3)")
    parser.add_argument("--paho-sample", type=int, default=1_000, help="topics for paho brute force (1,000)")
    parser.add_argument("--matcher-sample", type=int, default=100_000, help="topics for paho MQTTMatcher (100,000)")
    parser.add_argument("--reference-sample", type=int, default=200, help="topics for ReferenceMatcher (200)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    parser.add_argument("--profile", action="store_true", help="cProfile TopicTrie.match instead; top 25")
    args = parser.parse_args(argv)
    counts = (args.subscriptions, args.namespaces, args.topics, args.repeat)
    samples = (args.paho_sample, args.matcher_sample, args.reference_sample)
    if min(counts) < 1 or min(samples) < 1:
        parser.error("counts, --repeat and the samples must be positive")
    return args


def profile(trie: TopicTrie[str], stream: Stream, top: int = 25) -> None:
    profiler = cProfile.Profile()
    gc.collect()
    profiler.enable()
    run_trie(trie, stream)
    profiler.disable()
    report = io.StringIO()
    pstats.Stats(profiler, stream=report).sort_stats(pstats.SortKey.TIME).print_stats(top)
    print(f"cProfile of TopicTrie.match over {len(stream):,} topics (inflated by the profiler); top {top} by tottime")
    print(report.getvalue())


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    pinned = pin_to_one_cpu()
    print(
        f"building {args.subscriptions:,} subscriptions over {args.namespaces} namespaces and {args.topics:,} topics "
        f"(seed {args.seed}) ...",
        file=sys.stderr,
    )
    workload = WorkloadGenerator(args.seed, args.namespaces).build(args.subscriptions, args.topics)
    subscriptions, stream = workload.subscriptions, workload.stream
    build0 = time.perf_counter()
    trie = build_trie(subscriptions)
    build_s = time.perf_counter() - build0
    assert len(trie) == len(subscriptions)
    by_namespace = filters_by_namespace(subscriptions)
    distinct_filters = sum(len(filters) for filters in by_namespace.values())
    gc.collect()
    gc.freeze()

    if args.profile:
        profile(trie, stream[: min(len(stream), 200_000)])
        return 0

    print(f"measuring on CPU {pinned}, best of {args.repeat} ...", file=sys.stderr)
    trie_row, deliveries = measure(
        "mqttaudit TopicTrie.match", lambda: run_trie(trie, stream), int, len(stream), args.repeat
    )
    trie_row.judged = True
    trie_row.note = f"all {len(stream):,} topics; {deliveries / len(stream):.2f} deliveries per topic on average"

    paho_stream = stream[: args.paho_sample]
    expected_paho = collect_trie(trie, paho_stream)
    paho_row, answers = measure(
        "paho topic_matches_sub, every filter of the namespace",
        lambda: run_paho_brute_force(by_namespace, paho_stream),
        flattened,
        len(paho_stream),
        args.repeat,
    )
    verify_same(paho_row.matcher, answers, expected_paho, ordered=False)
    per_namespace = distinct_filters / len(by_namespace)
    paho_row.note = (
        f"measured on the first {len(paho_stream):,} of the {len(stream):,} topics; each tried against all "
        f"~{per_namespace:,.0f} distinct filters of its namespace ({len(paho_stream) * per_namespace:,.0f} calls); "
        "same deliveries as the trie (as multisets)"
    )
    paho_row.ratio = 1.0

    matcher_stream = stream[: args.matcher_sample]
    matchers = paho_matchers(by_namespace)
    gc.collect()
    gc.freeze()
    matcher_row, answers = measure(
        "paho MQTTMatcher.iter_match, one trie per namespace",
        lambda: run_paho_matcher(matchers, matcher_stream),
        flattened,
        len(matcher_stream),
        args.repeat,
    )
    verify_same(matcher_row.matcher, answers, collect_trie(trie, matcher_stream), ordered=False)
    del answers
    matcher_row.note = (
        f"informational: paho's own trie, on the first {len(matcher_stream):,} topics; "
        "same deliveries as the trie (as multisets)"
    )

    reference = build_reference(subscriptions)
    reference_stream = stream[: args.reference_sample]
    reference_row, answers = measure(
        "mqttaudit ReferenceMatcher.match (test oracle)",
        lambda: run_reference(reference, reference_stream),
        flattened,
        len(reference_stream),
        args.repeat,
    )
    verify_same(reference_row.matcher, answers, collect_trie(trie, reference_stream), ordered=True)
    reference_row.note = (
        f"measured on the first {len(reference_stream):,} topics; checks all {len(subscriptions):,} subscriptions "
        "per topic; the same values in the same order as the trie"
    )

    rows = [trie_row, paho_row, matcher_row, reference_row]
    for row in rows:
        row.ratio = row.mps / paho_row.mps
    held = trie_memory(subscriptions)
    met = trie_row.mps >= TARGET_MPS

    print(f"## Routing oracle throughput ({len(subscriptions):,} subscriptions, {args.namespaces} namespaces)\n")
    build = "compiled (mypyc)" if codec.COMPILED else "pure Python"
    trie_build = "pure Python" if (trie_module.__file__ or "").endswith(".py") else "compiled (mypyc)"
    print(
        f"Python {platform.python_version()}, codec build: {build}, trie build: {trie_build}, "
        f"paho-mqtt {paho_version()}, CPU: {cpu_model()} (pinned: {pinned})"
    )
    print(
        f"Subscriptions: {len(subscriptions):,} with {distinct_filters:,} distinct (namespace, filter) pairs; "
        f"trie: {trie.node_count():,} nodes, {held / 1e6:.1f} MB (tracemalloc), built in {build_s:.2f} s "
        f"({len(subscriptions) / build_s:,.0f} adds/s)\n"
    )
    print(render_table(rows))
    print()
    for row in rows:
        if row.note:
            print(f"- {row.matcher}: {row.note}")
    status = "met" if met else "NOT MET"
    print(f"\nTarget (best of {args.repeat}): TopicTrie >= {TARGET_MPS:,} matches/s: {trie_row.mps:,.0f} -> {status}")

    result = {
        "benchmark": "trie_throughput",
        "python": platform.python_version(),
        "codec_build": "compiled" if codec.COMPILED else "pure-python",
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "pinned_cpu": pinned,
        "paho_mqtt": paho_version(),
        "config": {
            "subscriptions": len(subscriptions),
            "namespaces": args.namespaces,
            "topics": len(stream),
            "seed": args.seed,
            "repeat": args.repeat,
            "paho_sample": len(paho_stream),
            "matcher_sample": len(matcher_stream),
            "reference_sample": len(reference_stream),
        },
        "trie": {
            "nodes": trie.node_count(),
            "bytes_tracemalloc": held,
            "build_s": round(build_s, 3),
            "distinct_filters": distinct_filters,
        },
        "deliveries_per_topic": round(deliveries / len(stream), 3),
        "results": [row.as_json() for row in rows],
        "target": {"matches_per_s": TARGET_MPS, "value": round(trie_row.mps), "met": met},
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
