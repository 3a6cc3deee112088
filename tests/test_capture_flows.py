"""From reassembled connections to the judge's events: the packets of each direction, who closed, the resync rule
after gaps and mid-stream starts, and the account of every byte (packets + malformed + gaps + not assessable)."""

from __future__ import annotations

import io
import itertools
import random
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.capture import (
    BoundaryHunt,
    FlowAudit,
    FlowOptions,
    ResyncRule,
    audit_records,
    decode_segment,
    flow_events,
    read_records,
    writer,
)
from mqttaudit.capture.conversation import AFTER_GAP, CUT_BY_END, CUT_BY_GAP, CUT_BY_RESET, MID_STREAM
from mqttaudit.capture.link import ETHERNET, RAW
from mqttaudit.capture.segments import ACK, PSH, Segment
from mqttaudit.codec import Direction
from mqttaudit.judge import Closed, Lost, Quiet, Sent, judge

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=80)
EPOCH = 1_700_000_000 * 10**9
CLIENT, SERVER = Direction.FROM_CLIENT, Direction.FROM_SERVER


def enc(packet: codec.Packet) -> bytes:
    return codec.encode(packet)


CONNECT = enc(codec.Connect(client_id="sensor-1"))
CONNACK = enc(codec.Connack())
SUBSCRIBE = enc(codec.Subscribe(packet_id=1, subscriptions=(codec.Subscription(topic_filter="a/+"),)))
SUBACK = enc(codec.Suback(packet_id=1, return_codes=(0,)))
PINGREQ = enc(codec.Pingreq())
PINGRESP = enc(codec.Pingresp())
DISCONNECT = enc(codec.Disconnect())


def publish(index: int, size: int = 20) -> bytes:
    return enc(codec.Publish(topic=f"a/{index}", payload=bytes([97 + index % 26]) * size))


def timed(packets: list[bytes], start: int = EPOCH, step: int = 1_000_000) -> list[Segment]:
    segments: list[Segment] = []
    for index, packet in enumerate(packets):
        segment = decode_segment(start + index * step, RAW, packet)
        assert not isinstance(segment, str)
        segments.append(segment)
    return segments


def only(audits: list[FlowAudit]) -> FlowAudit:
    assert len(audits) == 1
    return audits[0]


def sent(audit: FlowAudit) -> list[tuple[Direction, bytes]]:
    return [(event.sender, event.frame.raw) for event in audit.events if isinstance(event, Sent)]


def assert_accounted(audit: FlowAudit) -> None:
    for counts in audit.counts:
        assert counts.reconciles, counts


def test_a_whole_conversation_read_from_a_capture_becomes_the_judge_s_events() -> None:
    session = writer.TcpSession()
    packets = [
        *session.handshake(),
        session.send(0, CONNECT),
        session.send(1, CONNACK),
        session.send(0, SUBSCRIBE),
        session.send(1, SUBACK + publish(1)),  # two packets in one segment
        session.segment(0),
        session.send(0, PINGREQ),
        session.send(1, PINGRESP),
        session.send(0, DISCONNECT),
        session.fin(0),
        session.fin(1),
        session.segment(0),
    ]
    data = writer.pcap_bytes([(EPOCH + i * 10**8, writer.ethernet(p)) for i, p in enumerate(packets)], ETHERNET)
    audit = only(audit_records(read_records(lambda: io.BytesIO(data))))
    assert sent(audit) == [
        (CLIENT, CONNECT),
        (SERVER, CONNACK),
        (CLIENT, SUBSCRIBE),
        (SERVER, SUBACK),
        (SERVER, publish(1)),
        (CLIENT, PINGREQ),
        (SERVER, PINGRESP),
        (CLIENT, DISCONNECT),
    ]
    assert audit.events[-1] == Closed((EPOCH + 11 * 10**8) / 1e9, CLIENT, False)  # the client's FIN
    assert [event.time for event in audit.events] == sorted(event.time for event in audit.events)
    assert audit.direction_reason == "handshake: 10.0.0.1:50000 sent the SYN" and not audit.mid_stream
    assert audit.isn == (1000, 5000)
    assert audit.total.stream == audit.total.packets == sum(len(raw) for _sender, raw in sent(audit))
    assert not audit.unassessable and not audit.gaps
    assert judge(audit.events).findings == ()


def lossy_client_stream() -> tuple[writer.TcpSession, list[bytes], list[bytes]]:
    """A client sending CONNECT and eight PUBLISHes; the fourth is cut into three segments and the middle one is
    never captured. Returns the session, the captured packets and the MQTT packets."""
    session = writer.TcpSession()
    mqtt = [CONNECT, *(publish(index, 30) for index in range(8))]
    captured = [*session.handshake(), session.send(0, CONNECT)]
    for index, packet in enumerate(mqtt[1:]):
        if index == 3:
            head, middle, tail = packet[:10], packet[10:25], packet[25:]
            captured.append(session.send(0, head))
            session.send(0, middle)  # lost
            captured.append(session.send(0, tail))
        else:
            captured.append(session.send(0, packet))
    captured += [session.fin(0), session.fin(1), session.segment(0)]
    return session, captured, mqtt


def test_a_gap_inside_a_packet_loses_that_packet_only_and_framing_resumes_at_a_proven_boundary() -> None:
    _session, captured, mqtt = lossy_client_stream()
    audit = only(flow_events(timed(captured)))
    offsets = [sum(len(p) for p in mqtt[:index]) for index in range(len(mqtt))]
    cut = offsets[4]
    assert [(g.side, g.offset, g.length) for g in audit.gaps] == [(0, cut + 10, 15)]
    assert [(u.offset, u.length, u.reason) for u in audit.unassessable] == [
        (cut, 10, CUT_BY_GAP),
        (cut + 25, len(mqtt[4]) - 25, AFTER_GAP),
    ]
    frames = [(frame.offset, frame.raw) for _side, _time, frame in audit.frames]
    assert frames == [(offset, packet) for offset, packet in zip(offsets, mqtt, strict=True) if offset != cut]
    assert all(not frame.violations for _side, _time, frame in audit.frames)
    assert audit.counts[0].gaps == 15 and audit.counts[0].unassessable == len(mqtt[4]) - 15
    assert_accounted(audit)
    judge(audit.events)


def test_a_peer_acknowledgement_declares_the_gap_before_the_stream_ends() -> None:
    session, captured, _mqtt = lossy_client_stream()
    # The broker acknowledges everything right after the tail arrives: the hole is decided there, not at the end.
    ack_at = 3 + 4 + 2  # after the handshake, CONNECT, three PUBLISHes, the head and the tail
    captured.insert(ack_at, session.segment(1))
    audit = only(flow_events(timed(captured)))
    assert audit.gaps[0].time == EPOCH + ack_at * 1_000_000


def test_a_capture_that_starts_between_packets_loses_nothing() -> None:
    session = writer.TcpSession()
    packets = [session.send(0, publish(index)) for index in range(4)] + [session.send(1, PINGRESP)]
    audit = only(flow_events(timed(packets)))
    assert audit.mid_stream and audit.direction_reason.startswith("no handshake seen; 10.0.0.2:1883")
    assert sent(audit) == [*((CLIENT, publish(index)) for index in range(4)), (SERVER, PINGRESP)]
    assert not audit.unassessable
    assert isinstance(audit.events[-1], Quiet)


def test_a_capture_that_starts_inside_a_packet_skips_to_the_first_proven_boundary() -> None:
    session = writer.TcpSession()
    first = publish(0)
    packets = [session.send(0, first[7:])] + [session.send(0, publish(index)) for index in range(1, 5)]
    audit = only(flow_events(timed(packets)))
    assert [(u.offset, u.length, u.reason) for u in audit.unassessable] == [(0, len(first) - 7, MID_STREAM)]
    assert sent(audit) == [(CLIENT, publish(index)) for index in range(1, 5)]
    assert_accounted(audit)


def test_a_packet_with_a_violation_never_proves_a_boundary() -> None:
    # [MQTT-4.7.3-1] an empty Topic Filter: this SUBSCRIBE is a violation, so framing from it is not proof.
    bad = bytes.fromhex("82050001000000")
    session = writer.TcpSession()
    packets = [session.send(0, bad + publish(1)), *(session.send(0, publish(index)) for index in range(2, 5))]
    audit = only(flow_events(timed(packets)))
    assert [(u.offset, u.length) for u in audit.unassessable] == [(0, len(bad))]
    assert sent(audit)[0] == (CLIENT, publish(1))


def test_the_first_packet_of_a_short_mid_stream_flow_is_proven_when_the_flow_ends() -> None:
    session = writer.TcpSession()
    audit = only(flow_events(timed([session.send(0, PINGREQ), session.send(1, PINGRESP)])))
    assert sent(audit) == [(CLIENT, PINGREQ), (SERVER, PINGRESP)]
    assert not audit.unassessable


def test_an_unknown_direction_gives_frames_but_no_events_and_says_why() -> None:
    session = writer.TcpSession(client=("10.0.0.1", 40000), server=("10.0.0.2", 41000))
    audit = only(flow_events(timed([session.send(0, PINGREQ), session.send(1, PINGRESP)])))
    assert audit.client is None and audit.events == ()
    assert audit.direction_reason.startswith("unknown: no handshake seen and neither port is a broker port")
    assert [frame.raw for _side, _time, frame in audit.frames] == [PINGREQ, PINGRESP]
    options = FlowOptions(broker_ports=frozenset({41000}))
    assert only(flow_events(timed([session.segment(0, PINGREQ)]), options=options)).client == 0


def test_a_reset_closes_abruptly_and_cuts_the_peer_s_packet_short() -> None:
    session = writer.TcpSession()
    partial = publish(3)[:9]
    packets = [*session.handshake(), session.send(0, CONNECT), session.send(0, partial), session.reset(1)]
    audit = only(flow_events(timed(packets)))
    assert audit.events[-1] == Closed((EPOCH + 5 * 10**6) / 1e9, SERVER, True)
    assert [(u.offset, u.length, u.reason) for u in audit.unassessable] == [(len(CONNECT), 9, CUT_BY_RESET)]
    assert_accounted(audit)


def test_a_sender_that_closes_inside_its_own_packet_sent_a_truncated_packet() -> None:
    session = writer.TcpSession()
    partial = publish(3)[:9]
    packets = [*session.handshake(), session.send(0, CONNECT + partial), session.fin(0)]
    audit = only(flow_events(timed(packets)))
    last = audit.frames[-1].frame
    assert last.raw == partial and [v.rule for v in last.violations] == [codec.rules.TRUNCATED]
    assert audit.counts[0].malformed == 9 and not audit.unassessable


def test_a_capture_that_ends_inside_a_packet_leaves_it_not_assessable_and_the_flow_quiet() -> None:
    session = writer.TcpSession()
    packets = [*session.handshake(), session.send(0, CONNECT + publish(1)[:5])]
    audit = only(flow_events(timed(packets), end_time_ns=EPOCH + 60 * 10**9))
    assert [(u.length, u.reason) for u in audit.unassessable] == [(5, CUT_BY_END)]
    # Seen until its last segment; the capture went on to its end.
    assert audit.events[-1] == Quiet((EPOCH + 3 * 10**6) / 1e9, (EPOCH + 60 * 10**9) / 1e9)


def test_after_a_half_close_the_peer_s_packets_still_come_before_closed() -> None:
    session = writer.TcpSession()
    packets = [
        *session.handshake(),
        session.send(0, CONNECT),
        session.send(1, CONNACK),
        session.send(0, DISCONNECT),
        session.fin(0),
        session.send(1, publish(1)),
        session.fin(1),
    ]
    audit = only(flow_events(timed(packets)))
    assert sent(audit)[-1] == (SERVER, publish(1))
    closed = audit.events[-1]
    assert isinstance(closed, Closed) and closed.by is CLIENT and not closed.abrupt
    assert closed.time >= audit.events[-2].time


def test_events_keep_capture_order_across_directions_while_a_side_is_hunting() -> None:
    session = writer.TcpSession()
    packets: list[bytes] = []
    for index in range(4):
        packets += [session.send(0, publish(index)), session.send(1, PINGRESP)]
    audit = only(flow_events(timed(packets)))
    assert [sender for sender, _raw in sent(audit)] == [CLIENT, SERVER] * 4
    times = [event.time for event in audit.events if isinstance(event, Sent)]
    assert times == sorted(times) and len(set(times)) == 8


def test_a_new_syn_between_the_same_endpoints_starts_a_second_connection() -> None:
    first, second = writer.TcpSession(), writer.TcpSession(client_isn=900_000)
    packets = [*first.handshake(), first.send(0, CONNECT), *second.handshake(), second.send(0, CONNECT)]
    audits = flow_events(timed(packets), end_time_ns=EPOCH + 10**9)
    assert [sent(audit) for audit in audits] == [[(CLIENT, CONNECT)], [(CLIENT, CONNECT)]]
    # Seen until its last segment, observed until the second connection began.
    assert audits[0].events[-1] == Quiet((EPOCH + 3 * 10**6) / 1e9, (EPOCH + 4 * 10**6) / 1e9)
    assert audits[1].events[-1] == Quiet((EPOCH + 7 * 10**6) / 1e9, (EPOCH + 10**9) / 1e9)


# The resync rule, on the hunt alone ---------------------------------------------------------------------------


def hunt_feed(hunt: BoundaryHunt, pieces: list[bytes]) -> int | None:
    found = None
    for order, piece in enumerate(pieces):
        found = hunt.feed(hunt.end, piece, order, order)
        if found is not None:
            return found
    return found


def test_clause_a_three_clean_packets_ending_at_a_segment_end() -> None:
    hunt = BoundaryHunt(CLIENT, 0)
    assert hunt_feed(hunt, [b"garbage" + PINGREQ, PINGREQ]) is None  # two packets: not yet
    assert hunt.feed(hunt.end, PINGREQ, 9, 9) == 7
    assert [piece[0] for piece in hunt.pieces_from(7)] == [7, 9, 11]


def test_clause_b_twelve_clean_packets_wherever_segments_end() -> None:
    stream = b"".join(publish(index, 11) for index in range(13))
    pieces = [stream[at : at + 50] for at in range(0, len(stream), 50)]
    assert all((at + 50) % len(publish(0, 11)) for at in range(0, len(stream) - 50, 50))  # never aligned
    assert hunt_feed(BoundaryHunt(CLIENT, 0), pieces) == 0


def test_clause_c_when_the_bytes_stop_one_clean_packet_at_a_segment_end_is_enough() -> None:
    hunt = BoundaryHunt(SERVER, 0)
    assert hunt_feed(hunt, [b"\x01" + PINGRESP, PINGRESP[:1]]) is None
    assert hunt.stop() == 1
    unaligned = BoundaryHunt(SERVER, 0)
    assert hunt_feed(unaligned, [PINGRESP + PINGRESP[:1]]) is None
    assert unaligned.stop() is None


def test_a_candidate_whose_packet_would_reach_past_the_bound_is_rejected() -> None:
    rule = ResyncRule(max_bytes=1000)
    big = enc(codec.Publish(topic="t", payload=bytes(5000)))
    hunt = BoundaryHunt(CLIENT, 0, rule)
    assert hunt_feed(hunt, [big, PINGREQ, PINGREQ, PINGREQ]) == len(big)


def test_a_long_hunt_through_bytes_that_never_frame_holds_bounded_memory() -> None:
    rng = random.Random(1)
    junk = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(300_000))
    rule = ResyncRule(max_bytes=32 * 1024)
    hunt = BoundaryHunt(CLIENT, 0, rule)
    tracemalloc.start()
    result = hunt_feed(hunt, [junk[at : at + 1400] for at in range(0, len(junk), 1400)])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result is None and hunt.stop() is None
    assert peak < 16 * rule.max_bytes


# Properties ---------------------------------------------------------------------------------------------------

LETTERS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=20)


@st.composite
def client_packets(draw: st.DrawFn) -> list[bytes]:
    """Clean client packets whose every field byte that is not structure is a lowercase letter or a small
    packet id, so that no offset inside a packet can pass for a packet boundary (see the test below)."""
    packets = [CONNECT]
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            qos = draw(st.integers(0, 1))
            packet_id = draw(st.integers(1, 127)) if qos else None
            topic, payload = draw(LETTERS), draw(LETTERS).encode()
            packets.append(enc(codec.Publish(topic=topic, payload=payload, qos=qos, packet_id=packet_id)))
        elif kind == 1:
            packets.append(PINGREQ)
        elif kind == 2:
            subscription = codec.Subscription(topic_filter=draw(LETTERS))
            packets.append(enc(codec.Subscribe(packet_id=draw(st.integers(1, 127)), subscriptions=(subscription,))))
        else:
            packets.append(enc(codec.Unsubscribe(packet_id=draw(st.integers(1, 127)), topic_filters=(draw(LETTERS),))))
    return packets


def segmented(session: writer.TcpSession, stream: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    """(stream offset, captured packet) for each segment of ``stream`` cut at ``cuts``."""
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(stream)}), len(stream)]
    return [
        (start, session.segment(0, stream[start:end], at=start, flags=PSH | ACK))
        for start, end in itertools.pairwise(bounds)
    ]


@SETTINGS
@given(packets=client_packets(), cuts=st.lists(st.integers(1, 2000), max_size=30), data=st.data())
def test_any_segmentation_and_reordering_frames_the_packets_that_were_sent(
    packets: list[bytes], cuts: list[int], data: st.DataObject
) -> None:
    session = writer.TcpSession()
    stream = b"".join(packets)
    opening = session.handshake()
    pieces = [packet for _offset, packet in segmented(session, stream, cuts)]
    order = data.draw(st.permutations(range(len(pieces))))
    session.next[0] += len(stream)
    captured = [*opening, *(pieces[index] for index in order), session.fin(0), session.fin(1)]
    audit = only(flow_events(timed(captured)))
    assert [frame.raw for _side, _time, frame in audit.frames] == packets
    assert audit.total.packets == audit.total.stream == len(stream)


@SETTINGS
@given(packets=client_packets(), cuts=st.lists(st.integers(1, 2000), max_size=30), data=st.data())
def test_with_segments_lost_every_byte_is_accounted_for_and_no_packet_is_invented(
    packets: list[bytes], cuts: list[int], data: st.DataObject
) -> None:
    session = writer.TcpSession()
    stream = b"".join(packets)
    opening = session.handshake()
    pieces = segmented(session, stream, cuts)
    lost = data.draw(st.sets(st.integers(0, len(pieces) - 1), max_size=len(pieces) // 2))
    session.next[0] += len(stream)
    kept = [packet for index, (_offset, packet) in enumerate(pieces) if index not in lost]
    audit = only(flow_events(timed([*opening, *kept, session.fin(0)])))
    starts = {sum(len(p) for p in packets[:index]): packet for index, packet in enumerate(packets)}
    for _side, _time, frame in audit.frames:
        assert starts.get(frame.offset) == frame.raw and not frame.violations
    client = audit.counts[0]
    assert client.reconciles and client.stream == len(stream)
    assert client.gaps == sum(len(pieces_bytes) for pieces_bytes in _lost_bytes(pieces, lost, stream))
    judge(audit.events)


def _lost_bytes(pieces: list[tuple[int, bytes]], lost: set[int], stream: bytes) -> list[bytes]:
    ends = [offset for offset, _packet in pieces[1:]] + [len(stream)]
    return [stream[pieces[index][0] : ends[index]] for index in lost]


def test_the_example_in_the_package_documentation_holds() -> None:
    import doctest

    import mqttaudit.capture

    result = doctest.testmod(mqttaudit.capture)
    assert result.attempted and not result.failed


# -- what the capture cannot show ----------------------------------------------------------------------------------


def test_a_connection_seen_from_its_middle_with_packets_no_3_1_1_peer_sends_is_framed_only() -> None:
    # No handshake, no CONNECT: the version is unknown. The client's PINGREQs prove a boundary; then it answers a
    # QoS 1 PUBLISH with 40 03 00 01 00, MQTT 5.0's PUBACK with a reason code, which no MQTT 3.1.1 peer sends.
    session = writer.TcpSession()
    v5_puback = bytes.fromhex("4003000100")
    packets = [session.send(0, PINGREQ * 3), session.send(1, PINGRESP * 3 + publish(1)), session.send(0, v5_puback)]
    audit = only(flow_events(timed(packets)))
    assert audit.mid_stream and audit.version == "unknown, not 3.1.1" and not audit.judged
    assert sent(audit)[-1] == (CLIENT, v5_puback)
    assert all(not side_frame.frame.violations and side_frame.frame.packet is None for side_frame in audit.frames)
    assert audit.total.malformed == 0 and audit.total.packets == audit.total.stream
    assert_accounted(audit)


def test_a_connection_seen_from_its_middle_whose_packets_are_3_1_1_s_stays_judged() -> None:
    session = writer.TcpSession()
    packets = [session.send(0, PINGREQ * 3), session.send(1, PINGRESP * 3 + publish(1)), session.send(0, PINGREQ)]
    audit = only(flow_events(timed(packets)))
    assert audit.mid_stream and audit.version == "unknown" and audit.judged


def test_bytes_no_packet_was_framed_from_reach_the_judge_where_they_arrived() -> None:
    # Seen from its middle, the server's first 5 bytes are the tail of a packet: not framed, so the PUBACK the
    # client's PUBLISH asks for may be among them (it is not here: the judge cannot know).
    session = writer.TcpSession()
    packets = [
        session.send(0, PINGREQ * 3),
        session.send(1, b"\x00\x01\x02\x03\x04"),
        session.send(0, publish(1)[:2] + b"\x00\x01" + publish(1)[4:]),
        session.send(1, PINGRESP * 3),
    ]
    audit = only(flow_events(timed(packets)))
    lost = [event for event in audit.events if isinstance(event, Lost)]
    assert [(event.sender, event.length, event.undecoded) for event in lost] == [(SERVER, 5, True)]
    [publishing] = [
        i for i, e in enumerate(audit.events) if isinstance(e, Sent) and isinstance(e.frame.packet, codec.Publish)
    ]
    assert audit.events.index(lost[0]) < publishing
    judgement = judge(audit.events)  # as if the stream's start were known: the undecoded bytes still count
    assert (
        judgement.not_assessable["MQTT-3.2.0-1"]
        == "bytes not decoded: 5 bytes the server sent (event 3) could not be framed"
    )


def test_bytes_not_framed_in_many_segments_in_a_row_reach_the_judge_as_one_lost_run() -> None:
    # Seen from its middle, a server that trickles 400 unframeable bytes one per segment costs one Lost event, not
    # one per segment; a client packet in between splits the run where it arrived.
    session = writer.TcpSession()
    packets = [session.send(0, PINGREQ * 3)]
    packets += [session.send(1, b"\x00") for _ in range(200)]
    packets += [session.send(0, PINGREQ)]
    packets += [session.send(1, b"\x00") for _ in range(200)]
    audit = only(flow_events(timed(packets)))
    lost = [(event.sender, event.length) for event in audit.events if isinstance(event, Lost)]
    assert lost == [(SERVER, 200), (SERVER, 200)]
    assert_accounted(audit)
