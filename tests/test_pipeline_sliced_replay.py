"""The audit's routing replay (:mod:`mqttaudit.pipeline.slicing`): the judging stage's heads and pieces, merged in
time order and judged slice by slice in one task per broker, give the tables of the whole model
(:func:`~mqttaudit.pipeline.replay.replay_batches` over whole transcripts): the same ``deliveries``,
``routing_findings`` and ``not_assessable`` rows, on every routing scenario of the judge's tests with pieces and
slices far smaller than the traffic, and on Spark on captures with routing findings and on the shared captures as
one fleet of brokers (against the whole model run by the local engine, :mod:`tests.whole_replay`; the shared
captures' Spark audit is the test session's, :mod:`tests.shared_captures_on_spark`)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.codec.properties import make
from mqttaudit.judge import JudgeConfig
from mqttaudit.judge.discarded_5 import declared_maximum, judge_discarded
from mqttaudit.judge.model import INF
from mqttaudit.judge.stream import skeleton
from mqttaudit.judge.transcript import Transcript
from mqttaudit.pipeline import slicing
from mqttaudit.pipeline.audit import AuditResult, run_audit
from mqttaudit.pipeline.conversations import Columns
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.pipeline.replay import replay_batches
from mqttaudit.pipeline.slicing import replay_sliced, staggered_merge

from .crafted import CONNACK_ACCEPTED, connect, sessions, write_capture
from .replay_pieces import BROKER, piece_table
from .shared_captures_on_spark import GROUP, SharedCapturesAudit
from .talk import DISCONNECT, C, Talk, connected, publish, publish5, suback, subscribe, transcribe, unsubscribe, wire
from .test_judge_stream import CONFIG, SCENARIOS, V5, busy_broker, offline_scenarios, scenarios
from .whole_replay import audited_tables, whole_model_audit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TABLES = ("deliveries", "routing_findings", "not_assessable")


def _rows(columns: Columns) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*columns.data.values(), strict=True))


def whole_tables(transcripts: Mapping[str, Transcript], config: JudgeConfig) -> dict[str, Counter[tuple[Any, ...]]]:
    """The tables of the whole model's replay of one broker (every transcript held at once)."""
    blobs = [(name, pickle.dumps(transcript)) for name, transcript in transcripts.items()]
    captures = {name: "capture.pcap" for name in transcripts}
    batches, findings, undecided = replay_batches(BROKER, blobs, config, captures=captures)
    deliveries: Counter[tuple[Any, ...]] = Counter()
    for batch in batches:
        deliveries += _rows(batch)
    return {"deliveries": deliveries, "routing_findings": _rows(findings), "not_assessable": _rows(undecided)}


def sliced_tables(
    transcripts: Mapping[str, Transcript],
    config: JudgeConfig,
    folder: Path,
    slice_bytes: int,
    piece_bytes: int,
    slice_span: float | None = 0.0,
    shards: int = 1,
) -> dict[str, Counter[tuple[Any, ...]]]:
    """The tables the sliced replay tasks write, from the heads and pieces the judging stage writes (slices by
    bytes alone unless ``slice_span`` says otherwise), one task per shard of the broker's connections."""
    table = piece_table(transcripts, folder, piece_bytes)
    options = AuditOptions(out_dir=str(folder), slice_bytes=slice_bytes, slice_span=slice_span)
    replayed = [
        row for index in range(shards) for row in replay_sliced(table, options, config, (index, shards)).to_pylist()
    ]
    tables = {}
    for name in TABLES:
        files = sorted((folder / name).glob("*.parquet"))
        read = [pq.read_table(path).to_pylist() for path in files]
        tables[name] = Counter(tuple(row.values()) for rows_ in read for row in rows_)
    assert sum(row["deliveries"] for row in replayed) == sum(tables["deliveries"].values())
    assert sum(row["routing_findings"] for row in replayed) == sum(tables["routing_findings"].values())
    return tables


@pytest.mark.parametrize(("name", "conversation", "config"), SCENARIOS, ids=[name for name, *_ in SCENARIOS])
def test_the_sliced_replay_task_writes_the_whole_model_s_tables_on_the_routing_tests_scenarios(
    name: str, conversation: dict[str, Any], config: JudgeConfig, tmp_path: Path
) -> None:
    """Slices of one message and pieces of one event each: every boundary the traffic has is a slice's. In one
    task, and in two and three tasks side by side (shards of the connections, some of them empty)."""
    transcripts = transcribe(conversation, config)
    whole = whole_tables(transcripts, config)
    assert sliced_tables(transcripts, config, tmp_path / "small", 1, 1) == whole
    assert sliced_tables(transcripts, config, tmp_path / "large", 1 << 30, 1 << 30) == whole
    assert sliced_tables(transcripts, config, tmp_path / "two", 1, 1, shards=2) == whole
    assert sliced_tables(transcripts, config, tmp_path / "three", 1 << 30, 1 << 30, shards=3) == whole


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(scenarios(), scenarios(overlapping=True), offline_scenarios()),
    st.sampled_from((0.5, 3.0, 60.0)),
    st.integers(1, 3),
)
def test_the_sliced_replay_task_writes_the_whole_model_s_tables_on_generated_scenarios(
    conversation: dict[str, Any], late: float, shards: int
) -> None:
    config = dataclasses.replace(V5, late_window=late)
    transcripts = transcribe(conversation, config)
    with tempfile.TemporaryDirectory() as folder:
        sliced = sliced_tables(transcripts, config, Path(folder), 40, 200, shards=shards)
        assert sliced == whole_tables(transcripts, config)


def test_a_busy_broker_s_traffic_in_many_pieces_and_slices_gives_the_same_tables(tmp_path: Path) -> None:
    transcripts = busy_broker(600)
    whole = whole_tables(transcripts, CONFIG)
    assert sum(whole["deliveries"].values()) == 600
    assert sliced_tables(transcripts, CONFIG, tmp_path, 500, 2000) == whole
    assert len(list((tmp_path / "_transcripts").iterdir())) == 1
    # The default span (the judge's reach): slices of many seconds each, by bytes past it, the same tables.
    assert sliced_tables(transcripts, CONFIG, tmp_path / "span", 500, 2000, None) == whole
    # Its connections in two shards replayed side by side: the same tables between them.
    assert sliced_tables(transcripts, CONFIG, tmp_path / "shards", 500, 2000, None, shards=2) == whole


def routed_capture(path: Path, messages: int) -> Path:
    """A broker that forwards a publisher's QoS 1 messages to a subscriber of ``t/+``, one a second, but leaves
    out every fifth (missing), and forwards one to ``x/leak`` ten seconds after the subscriber unsubscribed from
    ``x/#`` (a leak)."""
    a, b = sessions()
    records: list[tuple[float, bytes]] = [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [
        (0.010, a.send(0, connect(b"sub"))),
        (0.020, a.send(1, CONNACK_ACCEPTED)),
        (0.030, a.send(0, wire(subscribe(1, ("t/+", 1), ("x/#", 1))))),
        (0.040, a.send(1, wire(suback(1, 1, 1)))),
    ]
    records += [(0.5 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [(0.510, b.send(0, connect(b"pub"))), (0.520, b.send(1, CONNACK_ACCEPTED))]
    for index in range(messages):
        at, packet_id = 1.0 + index, index + 1
        if index == messages - 10:
            unsuback = codec.Unsuback(packet_id=2)
            records += [(at - 0.5, a.send(0, wire(unsubscribe(2, "x/#")))), (at - 0.4, a.send(1, wire(unsuback)))]
        message = publish(f"t/{index % 3}", b"%d" % index, 1, packet_id)
        records += [(at, b.send(0, wire(message))), (at + 0.01, b.send(1, wire(codec.Puback(packet_id=packet_id))))]
        if index % 5 != 4:
            delivered = [a.send(1, wire(message)), a.send(0, wire(codec.Puback(packet_id=packet_id)))]
            records += [(at + 0.02, delivered[0]), (at + 0.03, delivered[1])]
    end = 1.0 + messages
    leak = publish("x/leak", b"!", 1, 60000)
    records += [(end, b.send(0, wire(leak))), (end + 0.01, b.send(1, wire(codec.Puback(packet_id=60000))))]
    records += [(end + 0.02, a.send(1, wire(leak))), (end + 0.03, a.send(0, wire(codec.Puback(packet_id=60000))))]
    records += [(end + 1, b.send(0, wire(codec.Disconnect()))), (end + 1.01, b.fin(0)), (end + 1.02, b.fin(1))]
    records += [(end + 2, a.segment(1)), (end + 3, a.segment(0))]
    return write_capture(path, records)


def assert_audit_is_the_whole_model_s(
    audited: AuditResult, out: Path, whole: AuditResult, whole_out: Path
) -> dict[str, Counter[str]]:
    """``audited`` (into ``out``) wrote the tables, summary counts and exit status of the whole model's audit, and
    one row per broker in ``routing_replays`` (one replay task each), adding up to its tables."""
    tables = audited_tables(whole_out)
    assert audited_tables(out) == tables
    assert audited.summary["counts"] == whole.summary["counts"] and audited.exit_status == whole.exit_status
    replays = audited.summary["routing_replays"]
    brokers = {json.loads(row)["server"] for row in tables["connections"]} - {"unknown"}
    assert sorted(row["broker"] for row in replays) == sorted(brokers)
    assert sum(row["deliveries"] for row in replays) == sum(tables["deliveries"].values())
    assert sum(row["routing_findings"] for row in replays) == sum(tables["routing_findings"].values())
    return tables


def test_the_audit_writes_the_whole_model_s_routing_tables(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Spark, a crafted broker with missing deliveries and a leak, its traffic in slices of about five messages:
    the deliveries, routing findings and not-assessable rows and the summary counts of the whole model."""
    capture = routed_capture(tmp_path / "routed.pcap", 40)
    whole = whole_model_audit(monkeypatch, [capture], tmp_path / "whole", tolerance=2.0)
    sliced = run_audit(
        [str(capture)], tmp_path / "sliced", spark=spark, engine="spark", slice_bytes=200, slice_span=0, tolerance=2.0
    )
    assert sliced.summary["engine"] == "spark"
    tables = assert_audit_is_the_whole_model_s(sliced, tmp_path / "sliced", whole, tmp_path / "whole")
    kinds = Counter(json.loads(row)["kind"] for row in tables["routing_findings"])
    assert kinds["missing"] == 8 and kinds["leak"] == 1, kinds
    assert sum(tables["deliveries"].values()) == 41


def test_the_local_engine_writes_the_whole_model_s_routing_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local engine (a small audit without Spark) replays slice by slice as well, with the whole model's tables."""
    capture = routed_capture(tmp_path / "routed.pcap", 40)
    whole = whole_model_audit(monkeypatch, [capture], tmp_path / "whole", tolerance=2.0)
    sliced = run_audit(
        [str(capture)], tmp_path / "sliced", engine="local", slice_bytes=200, slice_span=0, tolerance=2.0
    )
    assert sliced.summary["engine"] == "local"
    tables = assert_audit_is_the_whole_model_s(sliced, tmp_path / "sliced", whole, tmp_path / "whole")
    # The default slices (each spans at least the judge's reach) give the same tables.
    spanned = run_audit([str(capture)], tmp_path / "spanned", engine="local", slice_bytes=200, tolerance=2.0)
    assert_audit_is_the_whole_model_s(spanned, tmp_path / "spanned", whole, tmp_path / "whole")
    kinds = Counter(json.loads(row)["kind"] for row in tables["routing_findings"])
    assert kinds["missing"] == 8 and kinds["leak"] == 1, kinds


@pytest.mark.captures
@GROUP
def test_the_audit_of_the_shared_captures_as_one_fleet_is_the_whole_model_s(
    shared_captures_on_spark: SharedCapturesAudit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 31 shared captures, several brokers, on Spark with small slices (the test session's audit of them): each
    broker replayed in one task, the tables of the whole model."""
    sliced = shared_captures_on_spark
    whole = whole_model_audit(monkeypatch, sliced.paths, tmp_path / "whole")
    tables = assert_audit_is_the_whole_model_s(sliced.result, sliced.out, whole, tmp_path / "whole")
    assert len(sliced.result.summary["routing_replays"]) > 1  # several brokers
    assert sum(tables["deliveries"].values()) and sum(tables["not_assessable"].values())


def discard_scenario(delivered: bool, bystanders: int = 0) -> dict[str, Talk]:
    """A 5.0 subscriber that declared a Maximum Packet Size of 40 bytes, a message too large for it (the server
    must discard it) and the next one that fits (delivered, or not: [MQTT-3.1.2-25]); ``bystanders``: more
    publishers whose messages all fit, each also delivered."""
    connect = codec.Connect(client_id="small", protocol_level=5, properties=make(maximum_packet_size=40))
    sub = Talk(version="5").client(connect, at=0.0).server(codec.Connack())
    sub.client(subscribe(1, "t")).server(suback(1, 0))
    pub = Talk(version="5").client(codec.Connect(client_id="pub", protocol_level=5), at=1.0).server(codec.Connack())
    small = publish5("t", b"fits")
    pub.client(publish5("t", b"x" * 100), at=2.0).client(small, at=3.0)
    if delivered:
        sub.server(small, at=3.1)
    talks = {"pub": pub.quiet(at=20.0)}
    for index in range(bystanders):
        other = Talk(version="5").client(codec.Connect(client_id=f"o{index}", protocol_level=5), at=4.0 + index)
        message = publish5("t", b"o%d" % index)
        talks[f"o{index}"] = other.server(codec.Connack()).client(message, at=4.5 + index).quiet(at=20.0)
        sub.server(message, at=4.6 + index)
    return {"sub": sub.quiet(at=20.0), **talks}


@pytest.mark.parametrize("delivered", [True, False])
def test_a_subscriber_with_a_maximum_packet_size_has_the_discarded_message_rule_judged_on_its_whole_traffic(
    delivered: bool, tmp_path: Path
) -> None:
    """The one check judged on whole transcripts rebuilt from the pieces (:mod:`.slicing`): the same rows."""
    transcripts = transcribe(discard_scenario(delivered), V5)
    assert [declared_maximum(t) for t in transcripts.values()] == [40, None]
    skeletons = {name: skeleton(transcript) for name, transcript in transcripts.items()}
    assert judge_discarded(transcripts) != judge_discarded(skeletons)  # the skeletons would not do
    assert sliced_tables(transcripts, V5, tmp_path, 1, 1) == whole_tables(transcripts, V5)


def test_the_discarded_message_rule_rebuilds_only_the_subscriber_and_the_publisher_of_a_message_too_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a broker whose subscriber declared a Maximum Packet Size, only that subscriber and the publisher of a message
    too large for it are rebuilt whole for the rule (the bystanders' messages all fit): the same rows as the whole
    model's, the rule's row among them; and with no message too large, nothing is rebuilt."""
    import mqttaudit.judge.scenario as scenario_module

    read: list[list[str]] = []
    across = scenario_module.across_connections

    def spy(transcripts: Mapping[str, Transcript], discarding: Mapping[str, Transcript] | None = None) -> Any:
        read.append(sorted(discarding or {}))
        return across(transcripts, discarding)

    monkeypatch.setattr(slicing, "across_connections", spy)
    transcripts = transcribe(discard_scenario(False, bystanders=3), V5)
    whole = whole_tables(transcripts, V5)
    assert any("MQTT-3.1.2-25" in row for row in whole["not_assessable"])  # no later message of its publisher came
    assert sliced_tables(transcripts, V5, tmp_path / "large", 1, 1) == whole
    assert read == [["pub", "sub"]]
    fitting = {name: t for name, t in transcribe(discard_scenario(True, bystanders=3), V5).items() if name != "pub"}
    assert sliced_tables(fitting, V5, tmp_path / "fitting", 1, 1) == whole_tables(fitting, V5)
    assert read[1:] == [[]]


def replay_peaks(transcripts: Mapping[str, Transcript], folder: Path) -> tuple[int, int]:
    """The most memory (bytes, traced) the whole model's replay of one broker and the sliced replay task (slices
    and pieces of 64 KiB) held at once, beyond their inputs."""
    import tracemalloc

    blobs = [(name, pickle.dumps(transcript)) for name, transcript in transcripts.items()]
    tracemalloc.start()
    try:
        batches, _, _ = replay_batches(BROKER, blobs, CONFIG)
        for _ in batches:
            pass
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    table = piece_table(transcripts, folder, 64 * 1024)
    tracemalloc.start()
    try:
        replay_sliced(table, AuditOptions(out_dir=str(folder), slice_bytes=64 * 1024), CONFIG)
        return whole, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_sliced_replay_task_holds_memory_bounded_by_its_slices_not_by_the_broker_s_traffic(tmp_path: Path) -> None:
    """Four times the traffic (a subscriber of one long connection, one message a second), the same slices: the
    sliced replay task's peak stays flat while the whole model's grows with the traffic."""
    replay_peaks(busy_broker(100), tmp_path / "warm-up")  # the first writers and imports are not the replay's
    whole_small, sliced_small = replay_peaks(busy_broker(3000), tmp_path / "small")
    whole_large, sliced_large = replay_peaks(busy_broker(12000), tmp_path / "large")
    # Measured: whole model 4.9 MB -> 19.3 MB, sliced 1.62 MB -> 1.64 MB.
    assert whole_large > 3 * whole_small
    assert sliced_large < 1.5 * sliced_small and sliced_large < whole_large / 4


def relay_broker(publishers: int) -> dict[str, Transcript]:
    """One subscriber seen all along, and ``publishers`` short connections one after another (each opens 20 s after
    the last, sends 300 QoS 0 messages within 3 s and says DISCONNECT): most of the traffic is in connections that
    have not begun, or have ended, at any one time, as in a fleet whose devices reconnect."""
    sub = connected("s", at=0.0).client(subscribe(1, ("d/#", 0))).server(suback(1, 0))
    talks = {}
    for index in range(publishers):
        start = 1.0 + 20 * index
        pub = connected(f"p{index}", at=start)
        for number in range(300):
            message = publish(f"d/{index}/{number % 3}", b"reading %05d" % number, 0)
            pub.client(message, at=start + 0.1 + number * 0.01)
            sub.server(message, at=start + 0.105 + number * 0.01)
        talks[f"p{index}"] = pub.client(DISCONNECT, at=start + 3.5).closed(C, after=0.01)
    return transcribe({"s": sub.quiet(at=20.0 * publishers + 10), **talks})


def test_the_sliced_replay_task_opens_a_connection_s_pieces_only_when_the_merge_reaches_it(tmp_path: Path) -> None:
    """Four times as many short connections, each as busy, the same slices: the sliced replay task's peak stays flat
    (merged all from the start, the first piece of every connection was held at once: it grew with the connections,
    as the whole model does)."""
    replay_peaks(relay_broker(2), tmp_path / "warm-up")
    whole_small, sliced_small = replay_peaks(relay_broker(20), tmp_path / "small")
    whole_large, sliced_large = replay_peaks(relay_broker(80), tmp_path / "large")
    assert whole_large > 3 * whole_small
    # Measured: whole model 11.5 MB -> 45.4 MB; sliced 9.4 MB -> 10.8 MB (15.7 MB when every connection's pieces
    # were opened at the start).
    assert sliced_large < 1.5 * sliced_small and sliced_large < whole_large / 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 50), max_size=6), max_size=8))
def test_the_staggered_merge_gives_heapq_s_order_and_opens_a_stream_only_at_its_first_item(
    times: list[list[int]],
) -> None:
    """Streams of (time, connection, event) merged: every item once, in order; a stream is opened only once every
    item before its first has been handed on, and one with no item (first time INF) never."""
    streams = {
        f"c{index}": [(float(t), f"c{index}", event) for event, t in enumerate(sorted(ts))]
        for index, ts in enumerate(times)
    }
    firsts = [(items[0][0] if items else INF, name) for name, items in streams.items()]
    every = sorted(item for items in streams.values() for item in items)
    handed: list[tuple[float, str, int]] = []
    opened: list[str] = []

    def stream(name: str) -> Iterator[tuple[float, str, int]]:
        earlier = [item for item in every if item[0] < streams[name][0][0]]
        assert handed[: len(earlier)] == earlier  # the merge reached its first time: every earlier item is out
        opened.append(name)
        return iter(streams[name])

    for item in staggered_merge(firsts, stream):
        handed.append(item)  # noqa: PERF402 (each item seen by the next stream opened, as it comes)
    assert handed == every
    assert sorted(opened) == sorted(name for name, items in streams.items() if items)


@pytest.mark.parametrize("slots", [1, 2, 3, 4, 8])
def test_each_replay_slot_value_lands_in_a_partition_of_its_own(spark: SparkSession, slots: int) -> None:
    """The values the Spark engine places a broker's shards by (:func:`~mqttaudit.pipeline.audit._slot_values`):
    hash partitioning into ``slots`` partitions puts the i-th in partition i, each alone (grouped by broker and shard
    alone, Spark merged both shards into one task, which ran them one after the other)."""
    from pyspark.sql import functions as F

    from mqttaudit.pipeline.audit import _slot_values

    values = _slot_values(spark, slots)
    frame = spark.createDataFrame([(value,) for value in values for _ in range(3)], "slot long").repartition(
        slots, "slot"
    )
    placed = {(row["slot"], row["at"]) for row in frame.select("slot", F.spark_partition_id().alias("at")).collect()}
    assert len(set(values)) == slots and placed == set(zip(values, range(slots), strict=True))


def test_a_replay_that_fails_between_slices_leaves_the_collector_as_it_found_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing a slice's rows fails while the replay runs (its collector off, what existed before it frozen): the
    error reaches the caller, and the worker's collector is on and nothing frozen, for the tasks it runs next."""
    import gc

    def failing(*args: Any) -> Any:
        raise OSError("no space left on device")

    monkeypatch.setattr(slicing, "delivery_batches", failing)
    table = piece_table(busy_broker(50), tmp_path, 1)
    gc.enable()
    with pytest.raises(OSError, match="no space left") as caught:
        replay_sliced(table, AuditOptions(out_dir=str(tmp_path), slice_bytes=1, slice_span=0.0), CONFIG)
    # The traceback, still held, holds the replay's frames (as an error kept in a cycle would): the replay is
    # ended all the same.
    assert caught.traceback
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
