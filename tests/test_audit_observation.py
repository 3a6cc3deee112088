"""The audit judges only what a capture shows, on real captures: mosquitto and its own clients (and a server that
accepts TCP but never answers) recorded with tcpdump here, then cut or edited with the project's capture writer the
way real captures come: a CONNECT segment lost, a capture that starts at the SYN-ACK, a connection of which nothing
is captured after a PUBLISH (with and without the receiver's TCP acknowledgement of it), two recordings merged into
one file with a long pause between them, a server that never sends CONNACK.

Each test names the exact findings and the exact not-assessable rows of the connection it edits: the side, the
statement, the packet (or event) that called for it and the tag of the reason (``mqttaudit.judge.reasons``), and
checks the words of the reason that say what could not be seen. The captures are judged through the pure path of an
audit (the capture layer, then ``judge_flow``); one of them also goes through ``mqttaudit.audit`` on Spark.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
import pytest

import mqttaudit
from mqttaudit import codec
from mqttaudit.capture import frame_number
from mqttaudit.capture.conversation import handling
from mqttaudit.judge import Quiet, Sent
from mqttaudit.judge.reasons import (
    CAPTURE_ENDS,
    GAP_BEFORE_CONNECT,
    LOST_BYTES,
    MID_STREAM,
    NEVER_ACKNOWLEDGED,
    NO_ACTIVITY,
    NO_ANSWER,
    NOT_ACCEPTED,
    PEER_CLOSED,
    TOO_SHORT,
    utc,
)
from mqttaudit.pipeline.tables import NOT_ASSESSABLE_COLUMNS
from mqttaudit.probe.brokers import BrokerUnavailable, RunningBroker, start_broker
from mqttaudit.probe.recorder import tcpdump_recording

from .observed_captures import (
    SECOND,
    Observed,
    RawClient,
    Recording,
    bare_ack,
    mosquitto_client,
    observe,
    silent_server,
    subscribed_client,
    write_capture,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The statements the edits bring into play, by the names the judge gives them.
CONNECT_FIRST = "MQTT-3.1.0-1"
CLIENT_KEEP_ALIVE = "MQTT-3.1.2-23"
SERVER_DROPS_SILENT_CLIENT = "MQTT-3.1.2-24"
CONNACK_FOR_VALID_CONNECT = "MQTT-3.1.4-4"
CONNACK_FIRST = "MQTT-3.2.0-1"
SESSION_PRESENT_0 = "MQTT-3.2.2-1"
PUBACK_ID = "MQTT-2.3.1-6"
RESPONSE_BY_QOS = "MQTT-3.3.4-1"
SUBACK_SENT = "MQTT-3.8.4-1"
SUBACK_ID = "MQTT-3.8.4-2"
SUBACK_CODES = "MQTT-3.8.4-5"
SUBACK_ORDER = "MQTT-3.9.3-1"
#: [MQTT-2.3.1-7] SUBACK and UNSUBACK carry the Packet Identifier of their request.
ACK_ID = "MQTT-2.3.1-7"
CLOSE_AFTER_DISCONNECT = "MQTT-3.14.4-1"
QOS1_RECEIVER_PUBACK = "MQTT-4.3.2-2"
CLIENT_PUBACK_ORDER = "MQTT-4.6.0-2"

#: What a missing PUBACK leaves undecided: the PUBACK itself, its Packet Identifier and its type (both judged on
#: the PUBACK), and for a client the order of its PUBACKs.
PUBACK_RULES = {
    "server": (QOS1_RECEIVER_PUBACK, PUBACK_ID, RESPONSE_BY_QOS),
    "client": (QOS1_RECEIVER_PUBACK, PUBACK_ID, RESPONSE_BY_QOS, CLIENT_PUBACK_ORDER),
}
#: What a missing SUBACK leaves undecided: the SUBACK, its Packet Identifier, its return codes and their order.
SUBACK_RULES = (SUBACK_SENT, SUBACK_ID, SUBACK_CODES, SUBACK_ORDER, ACK_ID)

Key = tuple[str, str, str | None, str]


def start_or_fail() -> RunningBroker:
    try:
        return start_broker("mosquitto")
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with start_or_fail() as running:
        yield running


def client_port(recording: Recording, client_id: str) -> int:
    """The port of the client whose CONNECT names ``client_id``."""
    wanted = client_id.encode()
    return next(c.from_port for c in recording.captured if c.payload[:1] == b"\x10" and wanted in c.payload)


def closed_first_by_server(recording: Recording, port: int) -> bool:
    first = next(c for c in recording.connection(port) if c.is_close)
    return first.from_port != port


def clean_session_rows(recording: Recording, port: int) -> set[Key]:
    """The rows of a whole mosquitto session that ends with the client's DISCONNECT: none, unless mosquitto's FIN
    came before the client's (a race on loopback): then the client's duty to close after DISCONNECT could not be
    shown."""
    if closed_first_by_server(recording, port):
        return {("client", CLOSE_AFTER_DISCONNECT, "DISCONNECT", PEER_CLOSED)}
    return set()


# -- sessions through mosquitto, recorded once ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sessions:
    folder: Path
    recording: Recording

    def port(self, client_id: str) -> int:
        return client_port(self.recording, client_id)

    def edited(self, name: str, frames: list[tuple[int, bytes]]) -> Path:
        return write_capture(self.folder / f"{name}.pcap", self.recording.linktype, frames)


@pytest.fixture(scope="module")
def sessions(broker: RunningBroker, tmp_path_factory: pytest.TempPathFactory) -> Sessions:
    """One recording of mosquitto's clients talking through mosquitto: a subscription (``mosquitto_sub -E``), a
    QoS 1 publish, a QoS 1 delivery to a subscriber, and a publish in MQTT 5.0 and in MQTT 3.1."""
    folder = tmp_path_factory.mktemp("sessions")
    port = broker.port
    v311 = ("-V", "mqttv311", "-q", "1")
    with tcpdump_recording(folder / "sessions.pcap", port):
        mosquitto_client("mosquitto_sub", port, *v311, "-i", "observed-sub", "-t", "observed/e", "-E")
        mosquitto_client("mosquitto_pub", port, *v311, "-i", "observed-pub", "-t", "observed/p", "-m", "hello")
        receiver = subscribed_client(port, *v311, "-i", "observed-receiver", "-t", "observed/d", "-C", "1")
        mosquitto_client("mosquitto_pub", port, *v311, "-i", "observed-sender", "-t", "observed/d", "-m", "hi")
        output, _ = receiver.communicate(timeout=5)  # -C 1: it exits once the message has come
        assert receiver.returncode == 0 and "observed/d" in output
        for version, client_id in (("mqttv5", "observed-v5"), ("mqttv31", "observed-v31")):
            mosquitto_client("mosquitto_pub", port, "-V", version, "-q", "1", "-i", client_id, "-t", "o/v", "-m", "v")
    return Sessions(folder, Recording.read(folder / "sessions.pcap", port))


def only(path: Path, broker_port: int, port: int) -> Observed:
    return observe(path, broker_port)[port]


# 1. A CONNECT the capture does not hold ---------------------------------------------------------------------------


def test_a_connection_whose_connect_segment_is_lost_is_judged_from_its_connack_on(sessions: Sessions) -> None:
    # mosquitto_sub -E: CONNECT, CONNACK 0, SUBSCRIBE, SUBACK, DISCONNECT. The client's first data segment (the
    # CONNECT) is dropped; the server's TCP ACK of it and its CONNACK 0 stay: the connection was accepted.
    recording, port = sessions.recording, sessions.port("observed-sub")
    connect = recording.carrying(port, 0x10, from_client=True)
    assert not recording.acknowledging(port, connect).payload  # a bare ACK, before the CONNACK
    path = sessions.edited("connect-lost", [c.frame_at() for c in recording.connection(port) if c is not connect])

    observed = only(path, recording.broker_port, port)
    assert [gap.length for gap in observed.audit.gaps] == [len(connect.payload)]
    assert observed.types == ["CONNACK", "SUBSCRIBE", "SUBACK", "DISCONNECT"]
    assert observed.findings == set()  # no MQTT-3.1.0-1 against either side, no MQTT-4.8.0-1
    [reason] = observed.reasons(CONNECT_FIRST)
    assert f"{len(connect.payload)} bytes the client sent first" in reason and "CONNECT may be among them" in reason
    # The CONNACK 0 proves an accepted connection: the SUBSCRIBE is answered and its SUBACK judged as usual.
    assert {CONNACK_FIRST, *SUBACK_RULES} <= observed.passed
    assert observed.connection_row["connack_code"] == 0
    # The client's silences cannot be measured across bytes nobody captured (its Keep Alive is in them too): the
    # row names the client, whose duty it is, and the lost bytes.
    assert observed.undecided == {
        ("client", CONNECT_FIRST, "SUBSCRIBE", GAP_BEFORE_CONNECT),
        ("client", CLIENT_KEEP_ALIVE, "Lost", LOST_BYTES),
    } | clean_session_rows(recording, port)


def test_a_capture_that_begins_after_the_connect_judges_what_follows(sessions: Sessions) -> None:
    # The same session captured from the server's TCP ACK of the CONNECT on: no handshake, no CONNECT.
    recording, port = sessions.recording, sessions.port("observed-sub")
    connect = recording.carrying(port, 0x10, from_client=True)
    path = sessions.edited("after-connect", [c.frame_at() for c in recording.connection(port) if c.time > connect.time])

    observed = only(path, recording.broker_port, port)
    assert observed.audit.mid_stream and observed.audit.version == "unknown"
    assert observed.types == ["CONNACK", "SUBSCRIBE", "SUBACK", "DISCONNECT"]
    assert observed.findings == set()
    assert {CONNACK_FIRST, CONNECT_FIRST} & observed.passed == set()
    assert set(SUBACK_RULES) <= observed.passed
    assert observed.connection_row["handling"] == handling("unknown")
    # Whether the CONNACK and the SUBSCRIBE were the first packets of their sides is what the capture cannot show.
    assert observed.undecided == {
        ("client", CONNECT_FIRST, "SUBSCRIBE", MID_STREAM),
        ("server", CONNACK_FIRST, "CONNACK", MID_STREAM),
    } | clean_session_rows(recording, port)


# 2. A capture that starts at the SYN-ACK ---------------------------------------------------------------------------


def test_a_capture_that_starts_at_the_syn_ack_judges_the_connect(sessions: Sessions) -> None:
    recording, port = sessions.recording, sessions.port("observed-pub")
    connection = recording.connection(port)
    assert connection[0].is_syn and connection[1].is_syn_ack
    path = sessions.edited("from-syn-ack", [c.frame_at() for c in connection[1:]])

    observed = only(path, recording.broker_port, port)
    assert not observed.audit.mid_stream and observed.audit.gaps == ()
    assert observed.audit.total.packets == observed.audit.total.stream
    assert observed.types == ["CONNECT", "CONNACK", "PUBLISH", "PUBACK", "DISCONNECT"]
    assert observed.findings == set()
    assert observed.undecided == clean_session_rows(recording, port)
    assert MID_STREAM not in {row.tag for row in observed.rows}
    assert CONNECT_FIRST in observed.passed
    assert observed.connection_row["version"] == "3.1.1" and observed.connection_row["client_id"] == "observed-pub"
    # The same as the whole connection.
    whole = only(sessions.edited("whole", [c.frame_at() for c in connection]), recording.broker_port, port)
    assert (whole.findings, whole.undecided, whole.passed) == (observed.findings, observed.undecided, observed.passed)


# 3. Nothing captured after a QoS 1 PUBLISH ----------------------------------------------------------------------


@dataclass(frozen=True)
class Cut:
    client_id: str
    #: The side that receives the PUBLISH and owes the PUBACK.
    receiver: str
    #: The receiver's TCP acknowledgement of the PUBLISH is kept.
    acknowledged: bool
    #: Another connection is captured 20 s later: the capture goes on without this one.
    goes_on: bool
    #: The tag of the reason the PUBACK is not assessable.
    tag: str

    @property
    def client_last(self) -> str:
        """The client's last packet: its silence, and the server's duty to end it, count from there."""
        return "PUBLISH" if self.receiver == "server" else "SUBSCRIBE"

    def keep_alive_rows(self) -> set[Key]:
        """Keep Alive (60 s) on both sides: due after the capture ends. A PUBLISH the server's TCP never
        acknowledged does not excuse its duty to drop a silent client: without it the silence began earlier, and
        the deadline with it, so what blocks the judgement is still the end of the capture."""
        return {
            ("client", CLIENT_KEEP_ALIVE, self.client_last, CAPTURE_ENDS),
            ("server", SERVER_DROPS_SILENT_CLIENT, self.client_last, CAPTURE_ENDS),
        }


CUTS = {
    "to-the-server-acknowledged": Cut("observed-pub", "server", True, True, NO_ACTIVITY),
    "to-the-server-never-acknowledged": Cut("observed-pub", "server", False, True, NEVER_ACKNOWLEDGED),
    "to-the-server-capture-ends": Cut("observed-pub", "server", True, False, CAPTURE_ENDS),
    "to-a-subscriber-acknowledged": Cut("observed-receiver", "client", True, True, NO_ACTIVITY),
    "to-a-subscriber-never-acknowledged": Cut("observed-receiver", "client", False, True, NEVER_ACKNOWLEDGED),
}


@pytest.mark.parametrize("name", sorted(CUTS))
def test_a_publish_after_which_the_connection_is_not_captured_owes_no_puback(sessions: Sessions, name: str) -> None:
    cut = CUTS[name]
    recording, port = sessions.recording, sessions.port(cut.client_id)
    from_publisher = cut.receiver == "server"
    publish = recording.carrying(port, 0x32, from_client=from_publisher)
    # The receiver's first segment acknowledging the PUBLISH (on loopback often its PUBACK), without its data.
    acknowledgement = recording.acknowledging(port, publish)
    frames = [c.frame_at() for c in recording.connection(port) if c.time <= publish.time]
    if cut.acknowledged:
        frames.append(bare_ack(acknowledgement))
    if cut.goes_on:
        later = recording.connection(sessions.port("observed-sender"))
        frames += [c.frame_at(publish.time + 20 * SECOND - later[0].time) for c in later]
    path = sessions.edited(name, frames)

    observed = only(path, recording.broker_port, port)
    assert observed.types[-1] == "PUBLISH" and isinstance(observed.audit.events[-1], Quiet)
    [sent_publish] = [
        e for e in observed.audit.events if isinstance(e, Sent) and isinstance(e.frame.packet, codec.Publish)
    ]
    assert sent_publish.acked is cut.acknowledged
    assert observed.findings == set()  # no MQTT-4.3.2-2
    puback_rows = {(cut.receiver, rule, "PUBLISH", cut.tag) for rule in PUBACK_RULES[cut.receiver]}
    assert observed.undecided == puback_rows | cut.keep_alive_rows()
    [reason] = observed.reasons(QOS1_RECEIVER_PUBACK)
    event = observed.audit.events.index(sent_publish)
    if cut.tag == NO_ACTIVITY:
        assert reason.startswith(f"{NO_ACTIVITY} {utc(acknowledgement.time / SECOND)}: "), reason
        assert "the capture goes on 20 s" in reason and "PUBACK for PUBLISH id 1" in reason
    elif cut.tag == NEVER_ACKNOWLEDGED:
        assert f"the {cut.receiver}'s TCP never acknowledged event {event}" in reason
    else:
        assert f"after event {event}, before the server had to send PUBACK for PUBLISH id 1" in reason
    for row in observed.rows:
        if row.rule in (CLIENT_KEEP_ALIVE, SERVER_DROPS_SILENT_CLIENT) and row.tag == CAPTURE_ENDS:
            assert "(Keep Alive 60 s)" in row.reason, row.reason


# 4. Two recordings merged into one file -------------------------------------------------------------------------


@dataclass(frozen=True)
class Merged:
    path: Path
    first: Recording
    second: Recording
    left_open: int
    later: int


@pytest.fixture(scope="module")
def merged(broker: RunningBroker, tmp_path_factory: pytest.TempPathFactory) -> Merged:
    """A subscriber (Keep Alive 60 s) recorded until it has its SUBACK and left connected when the recording stops;
    then a second recording of a QoS 1 publish. The two are merged into one file, the second shifted to start
    338 s after the first ends."""
    folder = tmp_path_factory.mktemp("merged")
    port = broker.port
    v311 = ("-V", "mqttv311", "-q", "1")
    with tcpdump_recording(folder / "first.pcap", port):
        left = subscribed_client(port, *v311, "-i", "observed-left-open", "-t", "observed/left")
    left.terminate()  # after its recording stopped: its close is in no capture
    left.communicate(timeout=5)
    with tcpdump_recording(folder / "second.pcap", port):
        mosquitto_client("mosquitto_pub", port, *v311, "-i", "observed-later", "-t", "observed/later", "-m", "x")
    first, second = Recording.read(folder / "first.pcap", port), Recording.read(folder / "second.pcap", port)
    shift = first.end + 338 * SECOND - second.captured[0].time
    frames = [c.frame_at() for c in first.captured] + [c.frame_at(shift) for c in second.captured]
    path = write_capture(folder / "merged.pcap", first.linktype, frames)
    return Merged(path, first, second, client_port(first, "observed-left-open"), client_port(second, "observed-later"))


def test_a_connection_left_open_when_its_recording_stopped_is_not_judged_across_the_pause(merged: Merged) -> None:
    connections = observe(merged.path, merged.first.broker_port)
    observed = connections[merged.left_open]
    assert observed.types == ["CONNECT", "CONNACK", "SUBSCRIBE", "SUBACK"]
    [quiet] = [e for e in observed.audit.events if isinstance(e, Quiet)]
    assert quiet.time == pytest.approx(merged.first.end / SECOND, abs=1e-6)  # its last captured segment, an ACK
    assert quiet.capture_end is not None and quiet.capture_end - quiet.time > 338
    # No Keep Alive finding on either side, no "did not close": the pause is no silence anybody saw.
    assert observed.findings == set()
    # The second recording's connection is judged on its own.
    later = connections[merged.later]
    assert later.findings == set() and later.undecided == clean_session_rows(merged.second, merged.later)
    # Both Keep Alive deadlines (61 s and 91 s after the SUBSCRIBE, the client's last packet) fall inside the
    # capture, after the connection was last seen: not assessable, for that reason.
    for row in observed.rows:
        assert row.reason.startswith(f"{NO_ACTIVITY} {utc(quiet.time)}: "), row.reason
    assert observed.undecided == {
        ("client", CLIENT_KEEP_ALIVE, "SUBSCRIBE", NO_ACTIVITY),
        ("server", SERVER_DROPS_SILENT_CLIENT, "SUBSCRIBE", NO_ACTIVITY),
    }


def test_the_audit_on_spark_judges_merged_recordings_as_the_pure_path_does(
    spark: SparkSession, merged: Merged, tmp_path: Path
) -> None:
    """The pipeline takes the end of the capture from the whole file and the last observation from the connection:
    no violation, and the left-open connection's rows are those of the pure path."""
    broker_port = merged.first.broker_port
    result = mqttaudit.audit(merged.path, out=tmp_path / "out", master="local[2]", ports=[broker_port])
    out = result.out_dir
    port_of = {
        row["flow"]: int(row["client"].rsplit(":", 1)[1]) for row in pq.read_table(out / "connections").to_pylist()
    }
    assert sorted(port_of.values()) == sorted([merged.left_open, merged.later])
    assert pq.read_table(out / "violations").num_rows == 0
    rows = pq.read_table(out / "not_assessable").to_pylist()
    pure = observe(merged.path, broker_port)
    assert {(port_of[r["flow"]], r["actor"], r["rule"], r["tag"]) for r in rows} == {
        (port, actor, rule, tag) for port, observed in pure.items() for actor, rule, _packet, tag in observed.undecided
    }
    left_open = {(r["actor"], r["rule"], r["tag"]) for r in rows if port_of[r["flow"]] == merged.left_open}
    assert left_open == {
        ("client", CLIENT_KEEP_ALIVE, NO_ACTIVITY),
        ("server", SERVER_DROPS_SILENT_CLIENT, NO_ACTIVITY),
    }


# 5. A server that accepts TCP and never answers CONNECT ---------------------------------------------------------


@dataclass(frozen=True)
class NeverAnswered:
    path: Path
    recording: Recording
    eager: int
    waiting: int


@pytest.fixture(scope="module")
def never_answered(tmp_path_factory: pytest.TempPathFactory) -> NeverAnswered:
    """Two clients of a server that reads and never writes: one sends CONNECT, SUBSCRIBE (QoS 1) and a QoS 1
    PUBLISH at once, the other is mosquitto_pub waiting for its CONNACK; both give up after 0.3 s. Their closes
    are shifted 6 s later, past the 5 s a CONNACK may take."""
    folder = tmp_path_factory.mktemp("never-answered")
    with silent_server() as server, tcpdump_recording(folder / "silent.pcap", server.port):
        port = server.port
        eager = RawClient(port)
        eager.send(
            codec.Connect(client_id="observed-eager", keep_alive=60),
            codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="observed/s", qos=1)]),
            codec.Publish(topic="observed/s", payload=b"eager", qos=1, packet_id=2),
        )
        command = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port), "-V", "mqttv311", "-q", "1"]
        waiting = subprocess.Popen([*command, "-i", "observed-waiting", "-t", "observed/w", "-m", "w"])
        server.wait_for_bytes(2)
        time.sleep(0.3)
        eager.close()
        waiting.terminate()
        waiting.wait(timeout=5)
    recording = Recording.read(folder / "silent.pcap", port)
    frames = []
    for client in (eager.port, client_port(recording, "observed-waiting")):
        connection = recording.connection(client)
        assert not any(c.payload for c in recording.from_server(client))
        close = next(c for c in connection if c.is_close)
        assert close.from_port == client
        frames += [c.frame_at(6 * SECOND if c.time >= close.time else 0) for c in connection]
    path = write_capture(folder / "never-answered.pcap", recording.linktype, frames)
    return NeverAnswered(path, Recording.read(path, port), eager.port, client_port(recording, "observed-waiting"))


def test_a_server_that_never_answers_connect_is_charged_with_the_connack_only(never_answered: NeverAnswered) -> None:
    connections = observe(never_answered.path, never_answered.recording.broker_port)
    eager = connections[never_answered.eager]
    assert eager.types == ["CONNECT", "SUBSCRIBE", "PUBLISH"]
    assert all(isinstance(e, Sent) and e.acked for e in eager.audit.events[:3])  # the server's TCP took them
    assert list(eager.result.violations.data["rule"]) == [CONNACK_FOR_VALID_CONNECT]
    assert eager.findings == {("server", CONNACK_FOR_VALID_CONNECT)}
    [detail] = eager.details(CONNACK_FOR_VALID_CONNECT)
    assert "did not send CONNACK within 5 s of event 0" in detail
    assert list(eager.result.violations.data["cause_event"]) == [0]  # the CONNECT left unanswered
    assert eager.undecided == {
        *(("server", rule, "SUBSCRIBE", NOT_ACCEPTED) for rule in SUBACK_RULES),
        *(("server", rule, "PUBLISH", NOT_ACCEPTED) for rule in PUBACK_RULES["server"]),
        ("server", SESSION_PRESENT_0, "CONNECT", NO_ANSWER),  # judged on a CONNACK that never came
    }
    for rule in (SUBACK_SENT, QOS1_RECEIVER_PUBACK):
        [reason] = eager.reasons(rule)
        assert "no CONNACK accepted the CONNECT (event 0)" in reason

    waiting = connections[never_answered.waiting]
    assert waiting.types == ["CONNECT"]
    assert list(waiting.result.violations.data["rule"]) == [CONNACK_FOR_VALID_CONNECT]
    assert waiting.findings == {("server", CONNACK_FOR_VALID_CONNECT)}
    assert waiting.undecided == {
        ("server", SESSION_PRESENT_0, "CONNECT", NO_ANSWER),
        ("client", CLIENT_KEEP_ALIVE, "Closed", TOO_SHORT),  # 6.3 s seen of a 60 s Keep Alive
    }


def test_the_audit_on_spark_writes_the_not_assessable_rows_of_a_server_that_never_answered(
    spark: SparkSession, never_answered: NeverAnswered, tmp_path: Path
) -> None:
    """``mqttaudit.audit`` (on the test session, ``local[2]``): its not_assessable table holds the rows of the pure
    path, each located by its connection, event and frame; the violations name the CONNECT left unanswered."""
    recording = never_answered.recording
    result = mqttaudit.audit(
        never_answered.path, out=tmp_path / "out", master="local[2]", ports=[recording.broker_port]
    )
    out = result.out_dir
    connections = {row["flow"]: row for row in pq.read_table(out / "connections").to_pylist()}
    port_of = {flow: int(row["client"].rsplit(":", 1)[1]) for flow, row in connections.items()}
    pure = observe(never_answered.path, recording.broker_port)
    record_of = {
        port: {event: record for event, record in zip(*carried(recording, observed), strict=True)}
        for port, observed in pure.items()
    }

    table = pq.read_table(out / "not_assessable")
    assert table.column_names == list(NOT_ASSESSABLE_COLUMNS)
    rows = table.to_pylist()
    assert {(port_of[r["flow"]], r["actor"], r["rule"], r["tag"]) for r in rows} == {
        (port, actor, rule, tag) for port, observed in pure.items() for actor, rule, _packet, tag in observed.undecided
    }
    for row in rows:
        port = port_of[row["flow"]]
        assert row["capture"] == never_answered.path.name and row["level"] == "MUST" and row["section"]
        assert row["client_id"] == connections[row["flow"]]["client_id"]
        assert row["frame"] == record_of[port].get(row["event"]), row
        assert row["reason"].startswith(row["tag"] + ":")
    subscribe_frame = {r["frame"] for r in rows if r["rule"] == SUBACK_SENT}
    assert subscribe_frame == {frame_number(recording.carrying(never_answered.eager, 0x10, from_client=True).record[4])}

    violations = pq.read_table(out / "violations").to_pylist()
    assert sorted((port_of[v["flow"]], v["actor"], v["rule"]) for v in violations) == sorted(
        (port, "server", CONNACK_FOR_VALID_CONNECT) for port in pure
    )
    for violation in violations:
        port = port_of[violation["flow"]]
        assert violation["cause_event"] == 0
        assert violation["cause_frame"] == frame_number(recording.carrying(port, 0x10, from_client=True).record[4])
        assert violation["evidence"].startswith("10 ")  # the CONNECT's bytes
    for flow, row in connections.items():
        assert row["not_assessable"] == sum(1 for r in rows if r["flow"] == flow)
        assert (row["version"], row["handling"]) == ("3.1.1", handling("3.1.1"))
    summary = result.summary
    assert summary["not_assessable"]["rows"] == len(rows)
    assert sum(summary["not_assessable"]["by_tag"].values()) == len(rows)
    assert summary["not_assessable"]["by_tag"][NOT_ACCEPTED] == len(SUBACK_RULES) + len(PUBACK_RULES["server"])


def carried(recording: Recording, observed: Observed) -> tuple[list[int], list[int]]:
    """(event, frame number) of every packet of a connection: the record whose segment completed it."""
    events = [index for index, event in enumerate(observed.audit.events) if isinstance(event, Sent)]
    times = [frame.time for frame in observed.audit.frames]
    by_time = {c.time: frame_number(c.record[4]) for c in recording.connection(observed.client_port)}
    return events, [by_time[t] for t in times]


# 6. Other protocol versions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("client_id", "version"), [("observed-v5", "5.0"), ("observed-v31", "3.1")])
def test_mqtt_5_sessions_are_judged_as_5_0_and_mqtt_3_1_sessions_decoded_and_not_judged(
    sessions: Sessions, client_id: str, version: str
) -> None:
    recording, port = sessions.recording, sessions.port(client_id)
    path = sessions.edited(client_id, [c.frame_at() for c in recording.connection(port)])
    observed = only(path, recording.broker_port, port)
    judged = version == "5.0"
    assert observed.audit.version == version and observed.audit.judged is judged
    assert (observed.judgement is not None) is judged
    assert (observed.connection_row["version"], observed.connection_row["handling"]) == (version, handling(version))
    assert observed.types == ["CONNECT", "CONNACK", "PUBLISH", "PUBACK", "DISCONNECT"]
    # Decoded with their own version: every packet read whole, none breaks a rule of that version (mosquitto's
    # client and broker), so nothing is reported. The 5.0 session is judged and owes nothing (CONNACK 0x00, the
    # PUBACK of the QoS 1 PUBLISH, DISCONNECT then the close); the 3.1 one is not judged, so nothing is owed either.
    assert all(frame.packet is not None and not frame.violations for _side, _time, frame in observed.audit.frames)
    total = observed.audit.total
    assert total.reconciles and total.packets == total.stream > 0
    assert len(observed.result.violations) == 0
    # Unless mosquitto's FIN came before the client's (a race on loopback): then the 5.0 client's duty to close after
    # its DISCONNECT [MQTT-3.14.4-2] could not be shown.
    raced = judged and closed_first_by_server(recording, port)
    assert observed.undecided == ({("client", "MQTT-3.14.4-2", "DISCONNECT", PEER_CLOSED)} if raced else set())
    if judged:
        assert {"MQTT-3.1.4-5", "MQTT-4.3.2-4", "MQTT-3.14.4-1"} <= observed.passed
    assert observed.connection_row["connack_code"] == 0
    assert observed.connection_row["client_id"] == client_id
    assert observed.connection_row["protocol_level"] == {"5.0": 5, "3.1": 3}[version]
    packets = observed.result.packets.data
    assert packets["version"] == [version] * 5
    assert [topic for topic in packets["topic"] if topic is not None] == ["o/v"]
    # The CONNACK's code, and the PUBACK's: in MQTT 5.0 mosquitto answers 0x10 (No matching subscribers: nobody
    # subscribed to o/v); MQTT 3.1's PUBACK has none.
    assert (packets["reason_code"][1], packets["reason_code"][3]) == (0, {"5.0": 0x10, "3.1": None}[version])
