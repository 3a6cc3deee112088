"""Real captures from other projects' suites (the third-party capture corpus :mod:`tests.corpus` finds): every file
reads whole and in chunks with the frame count tshark reports, every frame parses to the TCP segment dpkt sees, every
flow accounts for every byte, its MQTT packets are the ones tshark decodes, and its events are judged without error.

tshark is used when installed; otherwise the counts tshark 4.0 recorded in the folder's ``INVENTORY.tsv`` stand in,
and dpkt's own count is compared in every case.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import dpkt
import pytest

from mqttaudit.capture import FlowAudit, audit_records, plan_chunks, read_chunk, read_records, segments
from mqttaudit.capture.flows import broker_segments
from mqttaudit.capture.link import ETHERNET, IPV4
from mqttaudit.capture.segments import format_endpoint
from mqttaudit.codec import PacketType, Publish, ReservedPacket, rules
from mqttaudit.judge import Closed, Lost, Quiet, Sent, judge

from .corpus import capture, capture_names, inventory, require_captures

pytestmark = pytest.mark.captures

LINKTYPES = {"ether": ETHERNET, "rawip4": IPV4}
#: Flows seen from the middle whose first client bytes are a CONNECT (MQTT 3.1): its shape proves the boundary.
MID_STREAM_CONNECTS = {"zeek/mqtt.pcap": 2, "peafowl/mqtt-1.pcapng": 2}

INVENTORY = inventory()
FILES = capture_names()


def test_the_corpus_holds_exactly_the_31_captures_its_inventory_lists() -> None:
    folder = require_captures()
    found = sorted(str(path.relative_to(folder)) for path in folder.rglob("*.pcap*"))
    assert found == sorted(INVENTORY) and len(found) == 31


def tshark_count(path: Path) -> int | None:
    tshark = shutil.which("tshark")
    if tshark is None:
        return None
    fields = subprocess.run(
        [tshark, "-r", str(path), "-T", "fields", "-e", "frame.number"], check=True, capture_output=True, text=True
    )
    return len(fields.stdout.splitlines())


def dpkt_packets(path: Path) -> list[tuple[float, bytes]]:
    with path.open("rb") as handle:
        reader = dpkt.pcapng.Reader(handle) if path.suffix == ".pcapng" else dpkt.pcap.Reader(handle)
        return list(reader)


@pytest.mark.parametrize("name", FILES)
def test_every_capture_reads_whole_with_the_frame_count_tshark_and_dpkt_report(name: str) -> None:
    path = capture(name)
    reader = read_records(path)
    records = list(reader)
    assert reader.truncation is None
    expected = tshark_count(path)
    if expected is None:
        expected = int(INVENTORY[name]["frames"])  # tshark 4.0's count, recorded with the file
    assert len(records) == expected == len(dpkt_packets(path))
    assert [record[4] for record in records] == list(range(len(records)))
    assert {record[1] for record in records} == {LINKTYPES[INVENTORY[name]["linktype"]]}


@pytest.mark.parametrize("name", FILES)
def test_every_capture_reads_the_same_in_chunks_of_any_size(name: str) -> None:
    path = capture(name)
    whole = list(read_records(path))
    for target in (1, 150, 4096):
        chunks = plan_chunks(path, target)
        assert [record for chunk in chunks for record in read_chunk(lambda: path.open("rb"), chunk)] == whole


@pytest.mark.parametrize("name", FILES)
def test_every_frame_parses_to_the_tcp_segment_dpkt_sees(name: str) -> None:
    path = capture(name)
    skipped: Counter[str] = Counter()
    found = list(segments(read_records(path), skipped))
    assert not skipped
    theirs = dpkt_packets(path)
    assert len(found) == len(theirs)
    for (_index, segment), (_time, frame) in zip(found, theirs, strict=True):
        ip = dpkt.ip.IP(frame) if INVENTORY[name]["linktype"] == "rawip4" else dpkt.ethernet.Ethernet(frame).data
        tcp = ip.data
        assert isinstance(tcp, dpkt.tcp.TCP)
        _time_ns, src, sport, dst, dport, seq, ack, flags, payload = segment
        assert (src, sport, dst, dport) == (ip.src, tcp.sport, ip.dst, tcp.dport)
        assert (seq, ack, flags & 0xFF, payload) == (tcp.seq, tcp.ack, tcp.flags, bytes(tcp.data))


def audits_of(name: str) -> list[FlowAudit]:
    return audit_records(read_records(capture(name)))


@pytest.mark.parametrize("name", FILES)
def test_every_byte_of_every_flow_is_accounted_for(name: str) -> None:
    path = capture(name)
    payload: Counter[tuple[tuple[bytes, int], tuple[bytes, int]]] = Counter()
    for _index, segment in segments(read_records(path)):
        payload[(segment[1], segment[2]), (segment[3], segment[4])] += len(segment[8])
    for audit in audits_of(name):
        for side in (0, 1):
            counts, tcp = audit.counts[side], audit.tcp[side]
            assert counts.reconciles, counts
            # Every captured payload byte is in the stream once, or counted apart with the reason it is not.
            set_apart = tcp.retransmitted + tcp.conflicting + tcp.unverified + tcp.keepalive
            set_apart += tcp.before_start + tcp.after_end + tcp.out_of_window
            sender, receiver = audit.endpoints[side], audit.endpoints[1 - side]
            assert payload[sender, receiver] == counts.stream - counts.gaps + set_apart


@pytest.mark.parametrize("name", FILES)
def test_the_mqtt_packets_framed_are_the_ones_tshark_decodes(name: str) -> None:
    audits = audits_of(name)
    frames = sum(len(audit.frames) for audit in audits)
    assert frames == int(INVENTORY[name]["mqtt_pdus"])
    assert len(audits) == int(INVENTORY[name]["mqtt_streams"])
    assert not [item for audit in audits for item in audit.unassessable]
    mid_stream_connects = [audit for audit in audits if audit.mid_stream and audit.version != "unknown"]
    assert len(mid_stream_connects) == MID_STREAM_CONNECTS.get(name, 0)
    assert all(audit.client is not None for audit in audits)


@pytest.mark.parametrize("name", FILES)
def test_the_events_of_every_flow_are_judged_in_order(name: str) -> None:
    for audit in audits_of(name):
        times = [event.time for event in audit.events]
        assert times == sorted(times)
        assert isinstance(audit.events[-1], Closed | Quiet)
        assert all(isinstance(event, Sent | Lost) for event in audit.events[:-1])
        lost = [event for event in audit.events if isinstance(event, Lost)]
        assert sum(event.length for event in lost) == audit.total.gaps  # every gap reaches the judge
        judge(audit.events)


def test_a_publish_spread_over_tcp_segments_is_one_frame() -> None:
    [audit] = audits_of("suricata-verify/mqtt-connect-rules.pcap")  # MQTT 5.0: framed, not decoded
    [publish] = [frame for _side, _time, frame in audit.frames if frame.raw[0] >> 4 == PacketType.PUBLISH]
    assert publish.length > 35_000 and len(publish.raw) == publish.length and not publish.violations
    [limit] = audits_of("suricata-verify/mqtt-limit-2.pcap")
    large = [frame.length for _side, _time, frame in limit.frames if frame.length > 100_000]
    assert len(large) == 2


def test_a_packet_of_reserved_type_zero_is_framed_with_its_violation() -> None:
    [audit] = audits_of("suricata-verify/mqtt-events-unassigned-msgtype.pcap")
    [reserved] = [frame for _side, _time, frame in audit.frames if isinstance(frame.packet, ReservedPacket)]
    assert [violation.rule for violation in reserved.violations] == [rules.RESERVED_PACKET_TYPE]


def test_packets_cut_out_of_a_capture_are_gaps() -> None:
    # A copy of another capture with the CONNACK and the DISCONNECT removed: the peers' acknowledgements show it.
    [audit] = audits_of("suricata-verify/mqtt-events-unintroduced.pcap")
    server = 1 - audit.client if audit.client is not None else None
    assert [(gap.side, gap.offset, gap.length) for gap in audit.gaps if gap.side == server] == [(server, 0, 4)]
    assert audit.counts[1 - (server or 0)].gaps >= 2


def test_a_topic_of_8190_bytes_split_over_two_segments_is_one_publish() -> None:
    audits = audits_of("arkime/mqtt_synthetic.pcap")
    topics = [
        len(frame.packet.topic)
        for audit in audits
        for _s, _t, frame in audit.frames
        if isinstance(frame.packet, Publish)
    ]
    assert 8190 in topics


def test_flows_seen_from_the_middle_take_the_client_from_the_broker_port() -> None:
    for audit in audits_of("zeek/mqtt.pcap") + audits_of("suricata-verify/mqtt-ping.pcap"):
        assert audit.mid_stream and audit.direction_reason.endswith(":1883 uses a broker port")


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("ports", [frozenset({1883}), frozenset({1})])
def test_the_reading_tasks_keep_the_segments_of_broker_flows_named_once_per_flow(
    name: str, ports: frozenset[int]
) -> None:
    path = capture(name)
    everything = list(segments(read_records(path)))
    skipped: Counter[str] = Counter()
    batches = list(broker_segments(read_records(path), ports, skipped, 3))
    assert all(0 < len(batch) <= 3 for batch in batches) and all(len(batch) == 3 for batch in batches[:-1])
    kept = [row for batch in batches for row in batch]
    wanted = [(index, segment) for index, segment in everything if segment[2] in ports or segment[4] in ports]
    assert [(row[1], row[2:]) for row in kept] == [(index, segment) for index, segment in wanted]
    # Named by both endpoints in their sorted order, the same for both directions.
    ends = [sorted([(s[1], s[2]), (s[3], s[4])]) for _, s in wanted]
    assert [row[0] for row in kept] == [f"{format_endpoint(*a)}|{format_endpoint(*b)}" for a, b in ends]
    assert skipped["not a broker port"] == len(everything) - len(wanted)
    assert set(skipped) <= {"not a broker port"}
