"""Deliveries near the end of observation: the routing replay judges only what the capture shows.

A delivery the capture holds always settles what the broker model expected, however long the tolerance window
after it; an expectation whose window outlives the observation of the subscriber's connection, and that no
delivery settled, is a not-assessable row naming the rule, the connection, the message and why ("no activity
captured after", "capture ends before the deadline", "peer closed first").

The first tests record mosquitto with tcpdump while Debian's mosquitto_sub receives one QoS 0 message from
mosquitto_pub, cut the recording with the project's capture writer and replay it the way the audit does (capture
layer, ``judge_flow``, ``replay_broker``); the unit tests below them write the edge cases as events.
"""

from __future__ import annotations

import pickle
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mqttaudit import codec
from mqttaudit.capture import FlowOptions, Record, audit_records, read_records
from mqttaudit.capture.segments import decode_segment, format_endpoint
from mqttaudit.capture.writer import PcapWriter
from mqttaudit.codec.properties import make
from mqttaudit.judge import Closed, JudgeConfig, Judgement, Quiet
from mqttaudit.judge import reasons as tags
from mqttaudit.judge.model import Expectation, Model, build
from mqttaudit.judge.routing import Routing
from mqttaudit.judge.transcript import Transcript
from mqttaudit.pipeline.conversations import Columns, Flow, judge_flow
from mqttaudit.pipeline.replay import replay_broker
from mqttaudit.probe.brokers import BrokerUnavailable, start_broker
from mqttaudit.probe.recorder import tcpdump_recording

from .talk import DISCONNECT, C, S, Talk, connected, publish, publisher, suback, subscribe, transcribe, unsubscribe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROUTED = "MQTT-4.5.0-1"
QOS = "MQTT-3.8.4-6"
TOPIC = "probe/end-of-capture"
HOST = "127.0.0.1"
#: A capture's clock: times are seconds since the epoch, named as UTC times.
CONFIG = JudgeConfig(wall_clock=True)
SECOND = 1_000_000_000

# -- a real capture ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """A recording of one delivery: its records, the broker's port, and where the parts of the story are."""

    records: list[Record]
    port: int
    #: The client ports of the subscriber's and the publisher's connections.
    subscriber: int
    publisher: int
    #: Indexes (in ``records``) of the records carrying the publisher's PUBLISH and the server's PUBLISH to the
    #: subscriber.
    published: int
    delivery: int


def _mqtt_first_byte(record: Record, *, source: int | None = None, target: int | None = None) -> int | None:
    """The first payload byte of a record's TCP segment from port ``source`` / to port ``target`` (None when the
    segment has no payload or other ports)."""
    segment = decode_segment(record[0], record[1], record[2])
    if isinstance(segment, str) or not segment[8]:
        return None
    if (source is not None and segment[2] != source) or (target is not None and segment[4] != target):
        return None
    return segment[8][0]


def _client_port(records: Sequence[Record], port: int, first_byte: int) -> int:
    """The client port of the connection whose client sent a packet starting with ``first_byte``."""
    for record in records:
        if _mqtt_first_byte(record, target=port) == first_byte:
            segment = decode_segment(record[0], record[1], record[2])
            assert not isinstance(segment, str)
            return segment[2]
    raise AssertionError(f"no client sent a packet starting with {first_byte:#04x}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """mosquitto_sub subscribed at QoS 0, mosquitto_pub publishes one QoS 0 message, mosquitto_sub leaves after
    it (``-C 1``): all of it recorded by tcpdump."""
    folder = tmp_path_factory.mktemp("routing-observation")
    try:
        broker = start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    path = folder / "delivery.pcap"
    with broker, tcpdump_recording(path, broker.port, settle=0.5):
        where = ["-h", HOST, "-p", str(broker.port)]
        command = ["stdbuf", "-oL", "mosquitto_sub", *where, "-d", "-q", "0", "-C", "1", "-W", "10", "-t", TOPIC]
        subscriber = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert subscriber.stdout is not None
        for line in subscriber.stdout:
            if "received SUBACK" in line:
                break
        subprocess.run(["mosquitto_pub", *where, "-q", "0", "-t", TOPIC, "-m", "edge"], check=True, timeout=10)
        out, _ = subscriber.communicate(timeout=10)
        assert subscriber.returncode == 0, out
    records = list(read_records(path))
    sub_port = _client_port(records, broker.port, 0x82)  # SUBSCRIBE
    pub_port = _client_port(records, broker.port, 0x30)  # PUBLISH QoS 0
    published, delivery = (
        next(index for index, record in enumerate(records) if _mqtt_first_byte(record, source=source) == 0x30)
        for source in (pub_port, broker.port)
    )
    return Recorded(records, broker.port, sub_port, pub_port, published, delivery)


def _write(path: Path, records: Sequence[Record]) -> Path:
    with path.open("wb") as out:
        writer = PcapWriter(out, records[0][1], nanoseconds=True)
        for record in records:
            writer.write(record[0], record[2], orig_len=record[3])
    return path


@dataclass(frozen=True)
class Replayed:
    flows: dict[int, Flow]
    transcripts: dict[int, Transcript]
    deliveries: list[dict[str, object]]
    findings: list[dict[str, object]]
    undecided: list[dict[str, object]]


def _rows(columns: Columns) -> list[dict[str, object]]:
    names = list(columns.data)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.data.values(), strict=True)]


def replay(path: Path, port: int) -> Replayed:
    """The audit's pure path: the capture layer, ``judge_flow`` per connection, the routing replay of the broker.
    Connections are keyed by their client port."""
    flows: dict[int, Flow] = {}
    blobs: list[tuple[str, bytes]] = []
    transcripts: dict[int, Transcript] = {}
    for audit in audit_records(read_records(path), options=FlowOptions(broker_ports=frozenset({port}))):
        if audit.client is None or not audit.total.stream:
            continue
        client = audit.endpoints[audit.client]
        flow = Flow(
            path.name,
            f"flow-{client[1]}",
            format_endpoint(*client),
            format_endpoint(*audit.endpoints[1 - audit.client]),
            audit.events,
            [None] * len(audit.events),
            mid_stream=audit.mid_stream,
            roles=audit.direction_reason,
            version=audit.version,
        )
        judged = judge_flow(flow, CONFIG)
        flows[client[1]] = flow
        transcripts[client[1]] = judged.replayed
        blobs.append((flow.flow, pickle.dumps(judged.replayed)))
    deliveries, findings, undecided = replay_broker(f"{HOST}:{port}", blobs, CONFIG)
    return Replayed(flows, transcripts, _rows(deliveries), _rows(findings), _rows(undecided))


def _published_event(replayed: Replayed, port: int) -> int:
    [published] = replayed.transcripts[port].published
    return published.event


def test_a_qos_0_delivery_right_before_the_capture_ends_settles_its_expectation(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The defect: the capture ends right after the server forwards the message; its tolerance window runs far
    past the end, yet the delivery is in the table, observed, and nothing is a finding or left undecided."""
    cut = _write(tmp_path / "cut-after-delivery.pcap", recorded.records[: recorded.delivery + 1])
    replayed = replay(cut, recorded.port)
    subscriber = replayed.flows[recorded.subscriber]
    assert isinstance(subscriber.events[-1], Quiet)  # still open when the capture ends
    [delivery] = [row for row in replayed.deliveries if row["subscriber_flow"] == f"flow-{recorded.subscriber}"]
    assert delivery == {
        "broker": f"{HOST}:{recorded.port}",
        "publisher_flow": f"flow-{recorded.publisher}",
        "publisher_event": _published_event(replayed, recorded.publisher),
        "topic": TOPIC,
        "will": False,
        "subscriber_flow": f"flow-{recorded.subscriber}",
        "client_id": delivery["client_id"],
        "expected": "owed",
        "rule": ROUTED,
        "retain": False,
        "observed": True,
        "copies_allowed": 1,
        "copies_observed": 1,
        "qos_expected": 0,
        "qos_observed": 0,
    }
    assert replayed.findings == []
    assert replayed.undecided == []


def test_the_whole_recording_shows_the_delivery_before_the_subscriber_leaves(
    recorded: Recorded, tmp_path: Path
) -> None:
    """mosquitto_sub disconnects right after the message, long before its window closes: the delivery still
    settles the expectation."""
    replayed = replay(_write(tmp_path / "whole.pcap", recorded.records), recorded.port)
    subscriber = replayed.flows[recorded.subscriber]
    assert isinstance(subscriber.events[-1], Closed)
    rows = [row for row in replayed.deliveries if row["subscriber_flow"] == f"flow-{recorded.subscriber}"]
    assert [(row["rule"], row["observed"], row["copies_observed"], row["qos_observed"]) for row in rows] == [
        (ROUTED, True, 1, 0)
    ]
    assert replayed.findings == []
    assert replayed.undecided == []


def test_a_capture_that_ends_before_the_delivery_leaves_it_not_assessable(recorded: Recorded, tmp_path: Path) -> None:
    """Everything from the delivery on dropped: the capture ends before the window closes. Not a finding, and not
    silence either: one row per rule the delivery answers to, on the subscriber's connection, naming the message
    (the publisher's connection and event) and why."""
    replayed = replay(_write(tmp_path / "cut-before.pcap", recorded.records[: recorded.delivery]), recorded.port)
    subscriber, event = f"flow-{recorded.subscriber}", _published_event(replayed, recorded.publisher)
    [delivery] = [row for row in replayed.deliveries if row["subscriber_flow"] == subscriber]
    assert (delivery["expected"], delivery["observed"], delivery["publisher_event"]) == ("owed", False, event)
    assert replayed.findings == []
    rows = {(row["flow"], row["rule"], row["actor"], row["origin"], row["tag"]) for row in replayed.undecided}
    assert rows == {(subscriber, rule, "server", "routing", tags.CAPTURE_ENDS) for rule in (ROUTED, QOS)}
    for row in replayed.undecided:
        reason = str(row["reason"])
        assert f"event {event} of 'flow-{recorded.publisher}'" in reason
        assert "nothing of this server was captured after" in reason


def test_a_subscriber_not_seen_after_the_message_while_the_capture_goes_on_is_no_activity(
    recorded: Recorded, tmp_path: Path
) -> None:
    """The cut before the delivery, with the rest of the publisher's connection after its PUBLISH (DISCONNECT,
    FINs, ACKs) moved 20 s later: the capture goes on past the deadline, but the subscriber's connection is not
    seen after a time before it."""
    moved = {
        index
        for index, record in enumerate(recorded.records)
        if index > recorded.published and recorded.publisher in _ports(record)
    }
    assert moved, "the publisher's connection goes on after its PUBLISH"
    kept = [record for index, record in enumerate(recorded.records[: recorded.delivery]) if index not in moved]
    later = [(record[0] + 20 * SECOND, *record[1:]) for index, record in enumerate(recorded.records) if index in moved]
    replayed = replay(_write(tmp_path / "pause.pcap", kept + later), recorded.port)
    subscriber = replayed.flows[recorded.subscriber]
    assert isinstance(subscriber.events[-1], Quiet)
    last_seen = subscriber.events[-1].time
    assert replayed.findings == []
    rows = {(row["flow"], row["rule"], row["tag"]) for row in replayed.undecided}
    assert rows == {(f"flow-{recorded.subscriber}", rule, tags.NO_ACTIVITY) for rule in (ROUTED, QOS)}
    for row in replayed.undecided:
        assert str(row["reason"]).startswith(f"{tags.NO_ACTIVITY} {tags.utc(last_seen)}: ")


def _ports(record: Record) -> tuple[int, int]:
    segment = decode_segment(record[0], record[1], record[2])
    assert not isinstance(segment, str)
    return segment[2], segment[4]


@pytest.mark.parametrize("cut", ["after", "before"])
def test_the_spark_audit_tables_say_the_same(recorded: Recorded, tmp_path: Path, spark: SparkSession, cut: str) -> None:
    """The audit on Spark: the deliveries table holds the delivery the capture ends with as observed; without it,
    the not_assessable table holds the routing replay's two rows on the subscriber's connection."""
    import pyarrow.parquet as pq

    from mqttaudit.pipeline.audit import run_audit

    end = recorded.delivery + 1 if cut == "after" else recorded.delivery
    path = _write(tmp_path / f"cut-{cut}.pcap", recorded.records[:end])
    out = tmp_path / "audit"
    run_audit([str(path)], out, ports=[recorded.port], spark=spark, engine="spark")
    tables = {name: pq.read_table(out / name).to_pylist() for name in ("connections", "deliveries", "not_assessable")}
    port_of = {row["flow"]: int(row["client"].rsplit(":", 1)[1]) for row in tables["connections"]}
    [delivery] = [row for row in tables["deliveries"] if port_of[row["subscriber_flow"]] == recorded.subscriber]
    assert (delivery["rule"], delivery["expected"], delivery["observed"]) == (ROUTED, "owed", cut == "after")
    assert pq.read_table(out / "routing_findings").num_rows == 0
    routing = {
        (port_of[row["flow"]], row["rule"], row["actor"], row["tag"])
        for row in tables["not_assessable"]
        if row["origin"] == "routing"
    }
    if cut == "after":
        assert routing == set()
    else:
        assert routing == {(recorded.subscriber, rule, "server", tags.CAPTURE_ENDS) for rule in (ROUTED, QOS)}


# -- the edge cases, written as events -----------------------------------------------------------------------------

SUB = "sub"


def replay_talks(talks: dict[str, Talk], config: JudgeConfig = CONFIG) -> tuple[Model, Judgement]:
    """Each conversation judged alone, then the broker model and the routing judgement of them all."""
    transcripts = transcribe(talks, config)
    model = build(transcripts, config)
    return model, Routing(model, transcripts, config).judgement()


def subscriber(client_id: str = SUB, *, qos: int = 0, clean_session: bool = True, at: float = 0.0) -> Talk:
    talk = connected(client_id, clean_session=clean_session, at=at)
    return talk.client(subscribe(1, (TOPIC, qos))).server(suback(1, qos))


def owed(model: Model, name: str = SUB) -> list[Expectation]:
    return [e for link in model.links if link.name == name for e in link.expectations if not e.forbidden]


def rows(judgement: Judgement) -> set[tuple[str, str, str]]:
    """(connection, rule, reason tag) of every routing not-assessable row."""
    return {(row.conversation, row.rule, tags.tag_of(row.reason)) for row in judgement.undecided}


#: Publishes one QoS 0 message at 1.02 s; its PINGRESP at 1.04 s shows the server had taken it: due by 6.04 s.
PUBLISHER = publisher(publish(TOPIC), at=1.0)
DEADLINE = 1.04 + CONFIG.answer_timeout


def test_the_publisher_s_message_is_due_when_the_tests_say() -> None:
    model, _ = replay_talks({SUB: subscriber().quiet(at=30.0), "pub": PUBLISHER})
    [expectation] = owed(model)
    assert expectation.deadline == pytest.approx(DEADLINE)


def test_a_delivery_a_tenth_of_a_millisecond_after_the_publish_settles_the_expectation_at_the_end() -> None:
    publisher_talk = connected("pub", at=1.0).client(publish(TOPIC))
    published = publisher_talk.now
    sub = subscriber().server(publish(TOPIC), at=published + 0.0001).quiet(at=published + 0.0002)
    model, judgement = replay_talks({SUB: sub, "pub": publisher_talk.quiet(at=published + 0.0002)})
    [expectation] = owed(model)
    assert expectation.must and expectation.deadline > published + CONFIG.answer_timeout
    assert [p.topic for p in expectation.delivered] == [TOPIC]
    assert (judgement.findings, rows(judgement)) == ((), set())
    assert {ROUTED, QOS} <= judgement.passed


def test_a_delivery_right_before_the_subscriber_closes_settles_the_expectation() -> None:
    publisher_talk = connected("pub", at=1.0).client(publish(TOPIC))
    published = publisher_talk.now
    sub = subscriber().server(publish(TOPIC), at=published + 0.0001).closed(C, at=published + 0.0002)
    model, judgement = replay_talks({SUB: sub, "pub": publisher_talk.quiet(at=published + 0.0002)})
    [expectation] = owed(model)
    assert len(expectation.delivered) == 1
    assert (judgement.findings, rows(judgement)) == ((), set())


def test_a_window_that_ends_exactly_at_the_last_observation_is_judged() -> None:
    _, judgement = replay_talks({SUB: subscriber().quiet(at=DEADLINE), "pub": PUBLISHER})
    assert [(f.conversation, rule, f.kind) for f in judgement.findings for rule in f.rules] == [
        (SUB, ROUTED, "missing")
    ]
    assert rows(judgement) == set()


def test_a_missing_delivery_names_its_times_as_utc_times_not_seconds_since_the_epoch() -> None:
    model, judgement = replay_talks({SUB: subscriber().quiet(at=DEADLINE), "pub": PUBLISHER})
    [expectation] = owed(model)
    [finding] = judgement.findings
    assert f"owed from {tags.utc(expectation.after)}, due by {tags.utc(expectation.deadline)}" in finding.detail
    assert f"seen open until {tags.utc(DEADLINE)}" in finding.detail and " s," not in finding.detail


def test_on_the_probers_clock_a_missing_delivery_names_its_times_in_seconds_not_as_dates_of_1970() -> None:
    """The prober's times count from the start of its observation: as UTC times they would read 1970-01-01."""
    model, judgement = replay_talks({SUB: subscriber().quiet(at=DEADLINE), "pub": PUBLISHER}, JudgeConfig())
    [expectation] = owed(model)
    [finding] = judgement.findings
    assert f"owed from {expectation.after:.3f} s, due by {expectation.deadline:.3f} s" in finding.detail
    assert f"seen open until {DEADLINE:.3f} s" in finding.detail and "1970" not in finding.detail


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5.51e-05, "55.1 µs"),
        (0.0125, "12.5 ms"),
        (3.2, "3.2 s"),
        (250, "4 min 10 s"),
        (7500, "2 h 5 min"),
        (-0.5, "-500 ms"),
    ],
)
def test_durations_in_reasons_and_details_read_as_people_write_them(seconds: float, text: str) -> None:
    assert tags.elapsed(seconds) == text


def test_a_window_that_ends_just_after_the_end_of_the_capture_is_not_assessable() -> None:
    _, judgement = replay_talks({SUB: subscriber().quiet(at=DEADLINE - 0.001), "pub": PUBLISHER})
    assert judgement.findings == ()
    assert rows(judgement) == {(SUB, ROUTED, tags.CAPTURE_ENDS), (SUB, QOS, tags.CAPTURE_ENDS)}
    for row in judgement.undecided:
        assert row.side is S and row.event == -1 and row.time == pytest.approx(1.02)
        assert "the message to 'probe/end-of-capture' (event 2 of 'pub')" in row.reason


def test_a_subscriber_not_seen_after_a_time_before_the_deadline_is_no_activity_while_others_are_seen() -> None:
    watcher = connected("watcher", at=0.5).quiet(at=60.0)
    talks = {SUB: subscriber().quiet(at=3.0), "pub": PUBLISHER, "watcher": watcher}
    _, judgement = replay_talks(talks)
    assert judgement.findings == ()
    assert rows(judgement) == {(SUB, ROUTED, tags.NO_ACTIVITY), (SUB, QOS, tags.NO_ACTIVITY)}
    for row in judgement.undecided:
        assert row.reason.startswith(f"{tags.NO_ACTIVITY} {tags.utc(3.0)}: ")


@pytest.mark.parametrize(("closer", "tag"), [(C, tags.PEER_CLOSED), (S, tags.CLOSED_INSTEAD), (None, tags.PEER_CLOSED)])
def test_a_subscriber_closed_before_the_deadline_leaves_the_delivery_not_assessable(
    closer: codec.Direction | None, tag: str
) -> None:
    _, judgement = replay_talks({SUB: subscriber().closed(closer, at=3.0), "pub": PUBLISHER})
    assert judgement.findings == ()
    assert rows(judgement) == {(SUB, ROUTED, tag), (SUB, QOS, tag)}


def test_a_subscriber_closed_before_the_server_surely_had_the_message_was_owed_nothing() -> None:
    """It closed between the PUBLISH and the PINGRESP that shows the server had taken it: the server may have
    taken it after the close, so nothing was owed (allowed only)."""
    model, judgement = replay_talks({SUB: subscriber().closed(C, at=1.03), "pub": PUBLISHER})
    assert (judgement.findings, rows(judgement)) == ((), set())
    [expectation] = owed(model)  # a delivery before the close would have been this message
    assert (expectation.must, expectation.rule) == (False, ROUTED)


def test_a_persistent_session_closed_first_is_owed_the_message_on_its_next_connection() -> None:
    first = subscriber(qos=1, clean_session=False).closed(C, at=3.0)
    second = connected(SUB, clean_session=False, session_present=True, at=20.0).quiet(at=60.0)
    _, judgement = replay_talks({"first": first, "second": second, "pub": publisher(publish(TOPIC, qos=1))})
    assert [(f.conversation, rule, f.kind) for f in judgement.findings for rule in f.rules] == [
        ("second", "MQTT-3.1.2-5", "missing")
    ]


def test_a_persistent_session_not_seen_closed_may_have_had_the_message_before_its_next_connection() -> None:
    """Observation of the first connection stopped before the deadline: the message may have reached it unseen,
    so the next connection is not held to it, and the first one's delivery is not assessable."""
    first = subscriber(qos=1, clean_session=False).quiet(at=3.0)
    second = connected(SUB, clean_session=False, session_present=True, at=20.0).quiet(at=60.0)
    model, judgement = replay_talks({"first": first, "second": second, "pub": publisher(publish(TOPIC, qos=1))})
    assert judgement.findings == ()
    assert {("first", ROUTED, tags.NO_ACTIVITY), ("first", QOS, tags.NO_ACTIVITY)} <= rows(judgement)
    [kept] = owed(model, "second")
    assert (kept.rule, kept.must) == ("MQTT-3.1.2-5", False)


def test_a_connection_not_seen_when_its_client_id_connects_again_leaves_the_takeover_not_assessable() -> None:
    first = connected("twice", at=0.0).quiet(at=2.0)
    second = connected("twice", at=10.0).quiet(at=60.0)
    _, judgement = replay_talks({"first": first, "second": second})
    assert judgement.findings == ()
    assert rows(judgement) == {("first", "MQTT-3.1.4-2", tags.NO_ACTIVITY)}


def test_connections_with_an_empty_client_id_are_sessions_of_their_own() -> None:
    """mosquitto_sub and mosquitto_pub connect with an empty ClientId: the publisher's CONNECT neither takes the
    subscriber's connection over nor ends its session, so the message is owed to it."""
    sub = subscriber("").quiet(at=30.0)
    model, judgement = replay_talks({SUB: sub, "pub": publisher(publish(TOPIC), client_id="")})
    assert len({id(link.session) for link in model.links}) == 2
    assert [(f.conversation, rule, f.kind) for f in judgement.findings for rule in f.rules] == [
        (SUB, ROUTED, "missing")
    ]
    assert rows(judgement) == set()


def test_messages_published_after_the_subscriber_was_last_seen_are_counted_in_one_row_per_rule() -> None:
    """Nothing of the subscriber's connection is captured after 0.5 s, and three messages follow: owed to it only
    if it was still open. No expectation each (no delivery of them can be in the capture), one row per rule."""
    sub = subscriber().quiet(at=0.5)
    model, judgement = replay_talks({SUB: sub, "pub": publisher(*[publish(TOPIC, bytes([n])) for n in range(3)])})
    assert owed(model) == []
    assert judgement.findings == ()
    assert {(row.conversation, row.rule, row.reason) for row in judgement.undecided} == {
        (
            SUB,
            rule,
            f"{tags.NO_ACTIVITY} {tags.utc(0.5)}: the connection is not seen after it; 3 messages published later "
            "would be owed to it if it was still open",
        )
        for rule in (ROUTED, QOS)
    }


def test_a_copy_delivered_on_the_previous_connection_of_a_session_is_not_owed_again() -> None:
    """A persistent session reconnects while the server is taking a QoS 1 message: the copy the first connection
    got just before it closed settles the message (before, the delivery matched nothing and the second connection
    was held to the message)."""
    pub = connected("pub", at=1.0).client(publish(TOPIC, qos=1, packet_id=7))
    published = pub.now
    first = subscriber(qos=1, clean_session=False)
    first.server(publish(TOPIC, qos=1, packet_id=1), at=published + 0.001)
    first.client(codec.Puback(packet_id=1), at=published + 0.002).closed(C, at=published + 0.003)
    second = connected(SUB, clean_session=False, session_present=True, at=published + 0.004).quiet(at=60.0)
    pub.server(codec.Puback(packet_id=7), at=published + 0.05).quiet(at=60.0)
    model, judgement = replay_talks({"first": first, "second": second, "pub": pub})
    [there] = owed(model, "first")
    [here] = owed(model, "second")
    assert (len(there.delivered), here.must, here.elsewhere) == (1, True, there)
    assert judgement.findings == ()
    assert "MQTT-3.1.2-5" not in judgement.not_assessable


def test_a_message_published_after_a_persistent_session_was_last_seen_may_arrive_on_its_next_connection() -> None:
    """The first connection is not seen after 0.5 s (nor seen to close); the QoS 1 message published at 1 s reaches
    the session's next connection: the delivery meets the message, allowed there (the first connection may have
    had it unseen), and the first connection's row counts it."""
    first = subscriber(qos=1, clean_session=False).quiet(at=0.5)
    second = connected(SUB, clean_session=False, session_present=True, at=20.0)
    second.server(publish(TOPIC, qos=1, packet_id=1)).client(codec.Puback(packet_id=1)).quiet(at=60.0)
    model, judgement = replay_talks({"first": first, "second": second, "pub": publisher(publish(TOPIC, qos=1))})
    [kept] = owed(model, "second")
    assert (kept.rule, kept.must, len(kept.delivered)) == ("MQTT-3.1.2-5", False, 1)
    assert judgement.findings == ()
    assert rows(judgement) == {
        ("first", ROUTED, tags.NO_ACTIVITY),
        ("first", QOS, tags.NO_ACTIVITY),
        ("first", "MQTT-3.1.4-2", tags.NO_ACTIVITY),  # the takeover: the first connection is not seen then
        ("first", "MQTT-3.2.2-2", tags.EARLIER_SESSION),  # Session Present of a ClientId first seen here
        ("first", "MQTT-3.2.2-3", tags.EARLIER_SESSION),
        ("second", "MQTT-3.3.1-3", tags.EARLIER_SESSION),  # DUP 0: the copy may repeat one sent before
    }


# -- the late window: how late a copy may be and still be the message it repeats -----------------------------------

LATE = CONFIG.late_window


def test_a_copy_after_the_deadline_but_within_the_late_window_is_the_message_delivered() -> None:
    sub = subscriber().server(publish(TOPIC), at=DEADLINE + LATE - 1).quiet(at=DEADLINE + LATE + 5)
    model, judgement = replay_talks({SUB: sub, "pub": PUBLISHER})
    [expectation] = owed(model)
    assert len(expectation.delivered) == 1
    assert (judgement.findings, rows(judgement)) == ((), set())
    assert ROUTED in judgement.passed


def test_a_copy_past_the_late_window_leaves_the_message_not_assessable_and_without_one_it_is_missing() -> None:
    """A copy 90 s after the server took the message, past its late window: matched to no message (the owed one is
    not observed within its window), it breaks no rule of its own, and the message owed is not missing: MQTT sets no
    time limit on delivery, so its routing rule is not assessable, the reason naming how late the copy came. With
    no copy, the message is missing and the finding names the window. A larger window (the setting) takes the copy
    in."""
    late_at = 1.04 + 90.0
    assert late_at > DEADLINE + LATE
    sub = subscriber().server(publish(TOPIC), at=late_at).quiet(at=late_at + 5)
    model, judgement = replay_talks({SUB: sub, "pub": PUBLISHER})
    [expectation] = owed(model)
    assert expectation.delivered == []
    assert judgement.findings == ()
    assert rows(judgement) == {(SUB, ROUTED, tags.LATE_COPY)}
    [row] = judgement.undecided
    assert "came 1 min 30 s after the server took" in row.reason
    assert f"after the late window of {LATE:g} s" in row.reason
    assert "the specification sets no time limit on delivery" in row.reason

    alone = subscriber().quiet(at=late_at + 5)
    _, judgement = replay_talks({SUB: alone, "pub": PUBLISHER})
    assert [(f.conversation, rule, f.kind) for f in judgement.findings for rule in f.rules] == [
        (SUB, ROUTED, "missing")
    ]
    assert f"no copy came within the late window, {LATE:g} s past the deadline" in judgement.findings[0].detail
    assert "none came later while its session lasted" in judgement.findings[0].detail
    assert rows(judgement) == set()

    other = subscriber().server(publish(TOPIC, b"other"), at=late_at).quiet(at=late_at + 5)
    _, judgement = replay_talks({SUB: other, "pub": PUBLISHER})
    assert [f.kind for f in judgement.findings] == ["missing"]  # another payload is no copy of it

    wider = JudgeConfig(wall_clock=True, late_window=100.0)
    model, judgement = replay_talks({SUB: sub, "pub": PUBLISHER}, wider)
    assert len(owed(model)[0].delivered) == 1 and judgement.findings == () and rows(judgement) == set()


def test_a_late_copy_on_the_session_s_next_connection_leaves_the_message_not_assessable() -> None:
    """The persistent session's first connection stays open past the message's late window with no copy, closes,
    and its next connection gets a copy: that may be the message, late; not missing."""
    first = subscriber(qos=1, clean_session=False).client(DISCONNECT, at=DEADLINE + LATE + 3).closed(C)
    second = connected(SUB, clean_session=False, session_present=True, at=DEADLINE + LATE + 10)
    second.server(publish(TOPIC, qos=1, packet_id=1)).client(codec.Puback(packet_id=1)).quiet(at=DEADLINE + 100)
    _, judgement = replay_talks({"first": first, "second": second, "pub": publisher(publish(TOPIC, qos=1))})
    assert judgement.findings == ()
    assert ("first", ROUTED, tags.LATE_COPY) in rows(judgement)
    [row] = [row for row in judgement.undecided if tags.tag_of(row.reason) == tags.LATE_COPY]
    assert "on 'second'" in row.reason


def test_past_the_cap_a_connection_s_missing_messages_are_reported_at_once_and_say_so() -> None:
    """With one missing message held per connection (the cap), the second one is missing at once though a copy came
    later, and its finding names the cap; the first, held, is left not assessable by its own late copy."""
    pub = publisher(publish(TOPIC, b"one"), publish(TOPIC, b"two"))
    sub = subscriber()
    sub.server(publish(TOPIC, b"one"), at=DEADLINE + LATE + 5).server(publish(TOPIC, b"two"), at=DEADLINE + LATE + 6)
    sub.quiet(at=DEADLINE + LATE + 10)
    capped = JudgeConfig(wall_clock=True, late_copies_held=1)
    _, judgement = replay_talks({SUB: sub, "pub": pub}, capped)
    [finding] = judgement.findings
    assert finding.kind == "missing"
    assert "1 missing messages of this connection were held for one already (the cap)" in finding.detail
    assert rows(judgement) == {(SUB, ROUTED, tags.LATE_COPY)}
    _, judgement = replay_talks({SUB: sub, "pub": pub})
    assert judgement.findings == ()


def test_a_copy_of_a_message_that_must_not_arrive_is_a_leak_only_within_the_late_window() -> None:
    """After its UNSUBSCRIBE the subscriber must not get the message [MQTT-3.10.4-2]: a copy just past the deadline
    is that message leaked; one past the late window matches no message held, and is no finding."""
    unsubscribed = "MQTT-3.10.4-2"

    def leaks(at: float) -> list[tuple[str, str]]:
        sub = subscriber().client(unsubscribe(2, TOPIC), at=0.5).server(codec.Unsuback(packet_id=2), at=0.51)
        sub.server(publish(TOPIC), at=at).quiet(at=at + 5)
        _, judgement = replay_talks({SUB: sub, "pub": PUBLISHER})
        return [(rule, f.kind) for f in judgement.findings for rule in f.rules]

    assert leaks(DEADLINE + 1) == [(unsubscribed, "leak")]
    assert leaks(DEADLINE + LATE + 1) == []


def test_a_delivery_named_only_by_an_unresolved_topic_alias_leaves_undecided_only_what_it_could_be() -> None:
    """A delivery whose Topic Alias was never mapped may be any message owed then: within the message's window
    (deadline plus the late window) it leaves the missing message undecided; later, it cannot be that message."""
    config = JudgeConfig(wall_clock=True, supported_protocol_levels=frozenset({4, 5}))

    def outcome(at: float) -> tuple[list[str], set[tuple[str, str, str]]]:
        talk = Talk(version="5")
        talk.client(codec.Connect(client_id=SUB, protocol_level=5), at=0.0).server(codec.Connack())
        talk.client(subscribe(1, (TOPIC, 0))).server(suback(1, 0))
        talk.server(codec.Publish(topic="", payload=b"x", properties=make(topic_alias=3)), at=at).quiet(at=at + 1)
        _, judgement = replay_talks({SUB: talk, "pub": PUBLISHER}, config)
        return [f.kind for f in judgement.findings], {r for r in rows(judgement) if r[1] == ROUTED}

    assert outcome(DEADLINE + 1) == ([], {(SUB, ROUTED, tags.AMBIGUOUS)})
    assert outcome(DEADLINE + LATE + 1)[0] == ["missing"]


def test_a_missing_will_is_owed_from_the_close_not_from_the_allowance_for_the_two_sockets_order() -> None:
    """A Will may be seen a moment before the server's close it is published for (one act, two sockets): that
    moment widens the match, but the finding says the Will was owed from the close (on the prober's clock, a close
    just after the start read as owed from a negative time)."""
    will = codec.Will(topic=TOPIC, message=b"gone")
    dropped = connected("will", will=will, at=0.01).closed(S)
    model, judgement = replay_talks({SUB: subscriber().quiet(at=30.0), "will": dropped}, JudgeConfig())
    [expectation] = owed(model)
    assert expectation.message.will and expectation.message.early > 0  # the allowance this test is about
    [finding] = judgement.findings
    assert f"owed from {expectation.message.window[0]:.3f} s," in finding.detail
    assert f"owed from {expectation.after:.3f} s," not in finding.detail and "owed from -" not in finding.detail
