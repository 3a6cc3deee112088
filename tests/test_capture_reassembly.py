"""TCP reassembly of one connection: order, holes, duplicates and disagreements, sequence wrap-around, who the
client is, and where each stream starts and ends. Segments are built as tuples: reassembly runs on no file."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit.capture import Conflict, Data, End, Gap, Reassembler
from mqttaudit.capture.budgets import PIECE_COST
from mqttaudit.capture.reassembly import Output
from mqttaudit.capture.segments import ACK, FIN, PSH, RST, SYN, Segment
from mqttaudit.codec import Direction

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=150)
MASK = 0xFFFFFFFF
CLIENT = (bytes([10, 0, 0, 1]), 50000)
SERVER = (bytes([10, 0, 0, 2]), 1883)


def seg(time: int, side: int, seq: int, payload: bytes = b"", flags: int = ACK, ack: int = 0) -> Segment:
    (src, sport), (dst, dport) = (CLIENT, SERVER) if side == 0 else (SERVER, CLIENT)
    return (time, src, sport, dst, dport, seq & MASK, ack & MASK, flags, payload)


def run(segments: list[Segment], *, max_buffered: int = 1 << 20) -> tuple[Reassembler, list[Output]]:
    reassembler = Reassembler(max_buffered=max_buffered)
    outputs: list[Output] = []
    for segment in segments:
        outputs += reassembler.feed(segment)
    outputs += reassembler.finish()
    return reassembler, outputs


def stream(outputs: list[Output], side: int) -> bytes:
    """The bytes delivered for ``side``, checking that data and gaps tile the stream from offset 0."""
    data = b""
    at = 0
    for item in outputs:
        if isinstance(item, Data) and item.side == side:
            assert item.offset == at
            data += item.data
            at += len(item.data)
        elif isinstance(item, Gap) and item.side == side:
            assert item.offset == at
            data += b"?" * item.length
            at += item.length
    return data


def of(kind: type, outputs: list[Output]) -> list[Output]:
    return [item for item in outputs if isinstance(item, kind)]


def handshake(client_isn: int = 1000, server_isn: int = 5000) -> list[Segment]:
    return [
        seg(1, 0, client_isn, flags=SYN),
        seg(2, 1, server_isn, flags=SYN | ACK, ack=client_isn + 1),
        seg(3, 0, client_isn + 1, ack=server_isn + 1),
    ]


def test_the_handshake_names_the_client_and_the_initial_sequence_numbers() -> None:
    reassembler, outputs = run([*handshake(), seg(4, 0, 1001, b"hello", PSH | ACK, 5001)])
    assert reassembler.client == 0 and reassembler.direction(0) is Direction.FROM_CLIENT
    assert reassembler.direction_reason == "handshake: 10.0.0.1:50000 sent the SYN"
    assert (reassembler.isn(0), reassembler.isn(1)) == (1000, 5000)
    assert reassembler.started_with_syn(0) and reassembler.started_with_syn(1)
    assert outputs == [Data(0, 0, b"hello", 4)]


def test_a_syn_ack_seen_first_makes_its_peer_the_client() -> None:
    reassembler, _outputs = run([seg(2, 1, 5000, flags=SYN | ACK, ack=1001), seg(3, 0, 1001, ack=5001)])
    assert reassembler.client == 1 and reassembler.direction(1) is Direction.FROM_CLIENT
    assert "sent the SYN-ACK" in reassembler.direction_reason


def test_without_a_handshake_the_broker_port_decides_and_says_so() -> None:
    reassembler, _outputs = run([seg(1, 1, 777, b"\xd0\x00")])
    assert reassembler.client == 1  # side 0 is the first sender (the broker here), side 1 its peer
    assert reassembler.direction(0) is Direction.FROM_SERVER
    assert reassembler.direction_reason == "no handshake seen; 10.0.0.2:1883 uses a broker port"
    assert not reassembler.started_with_syn(0)


@pytest.mark.parametrize(
    ("ports", "which"), [(frozenset({8883}), "neither port is"), (frozenset({1883, 50000}), "both ports are")]
)
def test_without_a_handshake_or_a_single_broker_port_the_direction_is_unknown(
    ports: frozenset[int], which: str
) -> None:
    reassembler = Reassembler(broker_ports=ports)
    reassembler.feed(seg(1, 0, 100, b"x"))
    assert reassembler.client is None and reassembler.direction(0) is None
    assert reassembler.direction_reason.startswith(f"unknown: no handshake seen and {which} a broker port")


def test_out_of_order_data_waits_for_the_hole_and_takes_the_time_of_the_segment_that_filled_it() -> None:
    _reassembler, outputs = run([*handshake(), seg(5, 0, 1006, b"world"), seg(6, 0, 1001, b"hello")])
    assert outputs == [Data(0, 0, b"hello", 6), Data(0, 5, b"world", 6)]


def test_an_exact_retransmission_is_dropped_and_counted() -> None:
    reassembler, outputs = run(
        [*handshake(), seg(4, 0, 1001, b"hello"), seg(5, 0, 1001, b"hello"), seg(6, 0, 1003, b"llo!")]
    )
    assert stream(outputs, 0) == b"hello!" and not of(Conflict, outputs)
    assert reassembler.stats(0).retransmitted == 5 + 3


def test_an_overlap_with_different_bytes_keeps_the_first_and_records_the_conflict() -> None:
    reassembler, outputs = run(
        [
            *handshake(),
            seg(4, 0, 1001, b"hello"),
            seg(5, 0, 1004, b"LOworld"),  # the first two bytes overlap delivered data and differ
            seg(6, 0, 1019, b"abcdef"),  # out of order ...
            seg(7, 0, 1023, b"CDxy"),  # ... and overlapped, differently, before delivery
            seg(8, 0, 1011, b"12345678"),
        ]
    )
    assert stream(outputs, 0) == b"helloworld12345678abcdefxy"
    assert of(Conflict, outputs) == [Conflict(0, 3, 2, 5), Conflict(0, 22, 2, 7)]
    assert reassembler.stats(0).conflicting == 4


def test_a_keep_alive_probe_is_not_a_conflict() -> None:
    reassembler, outputs = run([*handshake(), seg(4, 0, 1001, b"hello"), seg(5, 0, 1005, b"\x00")])
    assert stream(outputs, 0) == b"hello" and not of(Conflict, outputs)
    assert reassembler.stats(0).keepalive == 1


def test_a_hole_becomes_a_gap_when_the_peer_acknowledges_past_it() -> None:
    _reassembler, outputs = run(
        [*handshake(), seg(4, 0, 1011, b"second"), seg(5, 1, 5001, ack=1017), seg(6, 0, 1017, b"third")],
        max_buffered=1 << 20,
    )
    assert outputs[:2] == [Gap(0, 0, 10, 5), Data(0, 10, b"second", 5)]
    assert stream(outputs, 0) == b"?" * 10 + b"secondthird"


def test_a_peer_acknowledgement_short_of_the_hole_keeps_waiting() -> None:
    reassembler = Reassembler()
    for segment in [*handshake(), seg(4, 0, 1011, b"second"), seg(5, 1, 5001, ack=1001)]:
        assert not of(Gap, reassembler.feed(segment))
    assert reassembler.feed(seg(6, 0, 1001, b"0123456789")) == [
        Data(0, 0, b"0123456789", 6),
        Data(0, 10, b"second", 6),
    ]


def test_a_hole_becomes_a_gap_when_too_much_waits_behind_it() -> None:
    reassembler = Reassembler(max_buffered=2 * PIECE_COST + 10)  # each piece costs its bytes and PIECE_COST
    for segment in [*handshake(), seg(4, 0, 1004, b"abcdef")]:
        assert not of(Gap, reassembler.feed(segment))
    assert reassembler.held(0) == 6 + PIECE_COST
    assert reassembler.feed(seg(5, 0, 1010, b"ghijkl")) == [
        Gap(0, 0, 3, 5, budget=True),
        Data(0, 3, b"abcdef", 5),
        Data(0, 9, b"ghijkl", 5),
    ]
    assert reassembler.held(0) == 0


def test_a_hole_the_peer_acknowledged_is_no_budget_gap_even_when_the_budget_runs_out() -> None:
    reassembler = Reassembler(max_buffered=PIECE_COST + 10)
    for segment in [*handshake(), seg(4, 1, 5001, ack=1004)]:
        reassembler.feed(segment)
    # Declared at the budget, but the peer had acknowledged the whole hole: sent and not captured, no budget gap.
    assert reassembler.feed(seg(5, 0, 1004, b"abcdefghijkl")) == [Gap(0, 0, 3, 5), Data(0, 3, b"abcdefghijkl", 5)]


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
def test_a_hundred_thousand_tiny_out_of_order_segments_never_hold_more_than_the_budget(descending: bool) -> None:
    """A hole at the start, then 100,000 one-byte segments behind it (never acknowledged), in order or in reverse.
    Unbounded, they were 100,000 pieces held (13 MB of Python objects for 100 KB of payload) and delivering them
    was quadratic (5.5 s at the end of the input); now what is held stays within the budget, counted with what
    the pieces cost, and the oldest holes become gaps named as budget gaps."""
    budget = 64 * 1024
    reassembler = Reassembler(max_buffered=budget)
    outputs: list[Output] = []
    for segment in handshake():
        outputs += reassembler.feed(segment)
    count = 100_000
    order = range(count - 1, -1, -1) if descending else range(count)
    most = 0
    for index, at in enumerate(order):
        outputs += reassembler.feed(seg(10 + index, 0, 1001 + 100 + at, bytes([at % 251])))
        most = max(most, reassembler.held(0))
    outputs += reassembler.finish()
    assert 0 < most <= budget
    gaps = of(Gap, outputs)
    assert gaps and gaps[0] == Gap(0, 0, gaps[0].length, gaps[0].time, budget=True)
    data = stream(outputs, 0)
    assert len(data) == 100 + count  # every offset delivered or declared a gap, once
    delivered = sum(len(item.data) for item in of(Data, outputs))
    if not descending:  # in order behind the hole: every byte is delivered, the hole alone is lost
        assert delivered == count and data[100:] == bytes(at % 251 for at in range(count))
    else:  # in reverse: what had passed the window's edge is a retransmission the stream no longer takes
        stats = reassembler.stats(0)
        assert delivered + stats.unverified + stats.retransmitted == count


def test_an_old_retransmission_counts_its_own_bytes_as_unverified_not_its_distance() -> None:
    reassembler, _outputs = run([*handshake(), seg(4, 0, 1101, b"x" * 10), seg(5, 0, 1001, b"abc")], max_buffered=1)
    assert reassembler.stats(0).unverified == 3


def test_holes_left_at_the_end_of_input_are_gaps_and_so_are_acknowledged_bytes_never_seen() -> None:
    _reassembler, outputs = run(
        [*handshake(), seg(4, 0, 1005, b"tail"), seg(5, 0, 1001, b"he"), seg(6, 1, 5001, ack=1020)]
    )
    assert stream(outputs, 0) == b"he??tail" + b"?" * 11


def test_a_fin_does_not_close_a_hole_that_a_retransmission_fills_later() -> None:
    _reassembler, outputs = run(
        [*handshake(), seg(4, 0, 1006, b"world"), seg(5, 0, 1011, flags=FIN | ACK), seg(6, 0, 1001, b"hello")]
    )
    assert stream(outputs, 0) == b"helloworld" and not of(Gap, outputs)
    assert of(End, outputs) == [End(0, False, 10, 6)]


def test_the_peer_acknowledging_a_fin_closes_the_hole_before_it() -> None:
    _reassembler, outputs = run(
        [*handshake(), seg(4, 0, 1006, b"world"), seg(5, 0, 1011, flags=FIN | ACK), seg(6, 1, 5001, ack=1012)]
    )
    assert stream(outputs, 0) == b"?????world"
    assert of(End, outputs) == [End(0, False, 10, 6)]


def test_fin_and_reset_say_who_ended_and_nothing_counts_after_the_end() -> None:
    reassembler, outputs = run(
        [
            *handshake(),
            seg(4, 0, 1001, b"bye", PSH | ACK),
            seg(5, 0, 1004, flags=FIN | ACK),
            seg(6, 1, 5001, b"late", PSH | ACK),
            seg(7, 1, 5005, flags=RST | ACK),
            seg(8, 1, 5005, b"more"),
        ]
    )
    assert of(End, outputs) == [End(0, False, 3, 5), End(1, True, 4, 7)]
    assert stream(outputs, 1) == b"late"
    assert reassembler.closed and reassembler.stats(1).after_end == 4


def test_data_beyond_the_fin_is_not_part_of_the_stream() -> None:
    reassembler, outputs = run([*handshake(), seg(4, 0, 1001, b"ab", FIN | ACK), seg(5, 0, 1001, b"abcd")])
    assert stream(outputs, 0) == b"ab" and reassembler.stats(0).after_end == 2


def test_sequence_numbers_wrap_around() -> None:
    isn = MASK - 4  # the fifth data byte has sequence number 0
    _reassembler, outputs = run(
        [
            *handshake(client_isn=isn),
            seg(4, 0, isn + 9, b"ij"),  # out of order, past the wrap
            seg(5, 0, isn + 1, b"abcdef"),  # across the wrap
            seg(6, 0, isn + 7, b"ghi"),  # overlaps the waiting "ij" with the same byte
            seg(7, 0, isn + 11, flags=FIN | ACK),
        ]
    )
    assert stream(outputs, 0) == b"abcdefghij" and not of(Gap, outputs) and not of(Conflict, outputs)
    assert of(End, outputs) == [End(0, False, 10, 7)]


def test_a_flow_seen_from_the_middle_starts_at_its_first_byte_and_earlier_bytes_are_counted_apart() -> None:
    reassembler, outputs = run([seg(1, 0, 90_000, b"middle"), seg(2, 0, 89_990, b"0123456789"), seg(3, 1, 4, b"r")])
    assert not reassembler.started_with_syn(0)
    assert stream(outputs, 0) == b"middle" and stream(outputs, 1) == b"r"
    assert reassembler.stats(0).before_start == 10


def test_a_bare_ack_does_not_start_a_mid_stream_flow() -> None:
    # A keep-alive sits one byte before the next byte: starting there would invent a one-byte gap.
    _reassembler, outputs = run([seg(1, 0, 99, b""), seg(2, 0, 100, b"data")])
    assert outputs == [Data(0, 0, b"data", 2)]


def test_a_new_syn_between_the_same_endpoints_is_a_new_connection() -> None:
    reassembler, _outputs = run(handshake())
    assert not reassembler.is_new_connection(seg(9, 0, 1000, flags=SYN))
    assert reassembler.is_new_connection(seg(9, 0, 77_000, flags=SYN))
    assert not reassembler.is_new_connection(seg(9, 0, 77_000, flags=ACK))


def test_a_segment_of_another_flow_is_refused() -> None:
    reassembler = Reassembler()
    reassembler.feed(seg(1, 0, 1))
    other = (2, bytes([10, 0, 0, 9]), 1, bytes([10, 0, 0, 2]), 1883, 0, 0, ACK, b"")
    with pytest.raises(ValueError, match=r"10\.0\.0\.9:1 -> 10\.0\.0\.2:1883 is not of this flow"):
        reassembler.feed(other)


@st.composite
def reordered_connections(draw: st.DrawFn) -> tuple[list[Segment], bytes, bytes]:
    """A connection whose two streams are cut into segments twice over (so that copies overlap with different
    boundaries), some copies kept, every byte covered, the data segments shuffled, and no acknowledgement that
    runs ahead of the capture."""
    streams = (draw(st.binary(min_size=1, max_size=300)), draw(st.binary(max_size=300)))
    isns = (draw(st.integers(0, MASK)), draw(st.sampled_from([0, MASK, MASK - 3, draw(st.integers(0, MASK))])))
    segments: list[Segment] = []
    for side, data in enumerate(streams):
        for _copy in range(draw(st.integers(1, 2))):
            cuts = sorted(set(draw(st.lists(st.integers(1, max(len(data) - 1, 1)), max_size=12))))
            bounds = [0, *(cut for cut in cuts if cut < len(data)), len(data)]
            segments += [
                seg(0, side, isns[side] + 1 + start, data[start:end], PSH | ACK, isns[1 - side] + 1)
                for start, end in itertools.pairwise(bounds)
                if end > start
            ]
    order = draw(st.permutations(range(len(segments))))
    shuffled = [segments[index] for index in order]
    timed = [(time + 10, *segment[1:]) for time, segment in enumerate(shuffled)]
    opening = [
        seg(1, 0, isns[0], flags=SYN),
        seg(2, 1, isns[1], flags=SYN | ACK, ack=isns[0] + 1),
    ]
    closing = [
        seg(1000, 0, isns[0] + 1 + len(streams[0]), flags=FIN | ACK),
        seg(1001, 1, isns[1] + 1 + len(streams[1]), flags=FIN | ACK),
    ]
    return [*opening, *timed, *closing], streams[0], streams[1]


@SETTINGS
@given(reordered_connections())
def test_any_segmentation_and_reordering_without_loss_reassembles_to_the_same_bytes(
    connection: tuple[list[Segment], bytes, bytes],
) -> None:
    segments, client, server = connection
    _reassembler, outputs = run(segments)
    assert stream(outputs, 0) == client and stream(outputs, 1) == server
    assert not of(Gap, outputs) and not of(Conflict, outputs)
    assert of(End, outputs) == [End(0, False, len(client), 1000), End(1, False, len(server), 1001)]


def test_a_large_shuffled_stream_with_duplicates_across_the_wrap() -> None:
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(200_000))
    isn = MASK - 50_000
    pieces = []
    at = 0
    while at < len(data):
        size = rng.randrange(1, 1500)
        pieces.append(seg(0, 0, isn + 1 + at, data[at : at + size], PSH | ACK))
        at += size
    pieces += rng.sample(pieces, 40)
    window = 64  # reordering within a window of segments, as a network does
    shuffled = []
    for start in range(0, len(pieces), window):
        block = pieces[start : start + window]
        rng.shuffle(block)
        shuffled += block
    _reassembler, outputs = run([seg(0, 0, isn, flags=SYN), *shuffled])
    assert stream(outputs, 0) == data and not of(Gap, outputs) and not of(Conflict, outputs)


# -- connection identity is continuity, not the 4-tuple: what starts another connection on the same endpoints --


def closed_connection() -> list[Segment]:
    """Handshake, ``hello`` from the client, then both FINs: a connection ended on the wire."""
    return [
        *handshake(),
        seg(4, 0, 1001, b"hello", PSH | ACK, 5001),
        seg(5, 0, 1006, flags=FIN | ACK, ack=5001),
        seg(6, 1, 5001, flags=FIN | ACK, ack=1007),
        seg(7, 0, 1007, ack=5002),
    ]


def fed(segments: list[Segment]) -> Reassembler:
    reassembler = Reassembler()
    for segment in segments:
        reassembler.feed(segment)
    return reassembler


def test_a_syn_with_the_same_initial_sequence_number_after_data_starts_another_connection() -> None:
    # A device that reboots may pick the same ISN: once data has flowed, its SYN is no retransmission.
    reassembler = fed([*handshake(), seg(4, 0, 1001, b"hello", PSH | ACK, 5001)])
    assert reassembler.is_new_connection(seg(9, 0, 1000, flags=SYN))
    assert reassembler.is_new_connection(seg(9, 1, 5000, flags=SYN | ACK, ack=1001)) is False  # the server sent none
    assert fed(closed_connection()).is_new_connection(seg(9, 0, 1000, flags=SYN))


def test_a_syn_retransmitted_before_any_data_stays_in_its_connection() -> None:
    reassembler = fed(handshake())
    assert not reassembler.is_new_connection(seg(4, 0, 1000, flags=SYN))
    assert not reassembler.is_new_connection(seg(4, 1, 5000, flags=SYN | ACK, ack=1001))


def test_new_data_after_both_fins_starts_another_connection_even_at_the_same_sequence_numbers() -> None:
    reassembler = fed(closed_connection())
    assert reassembler.ended
    assert reassembler.is_new_connection(seg(9, 0, 1001, b"world", PSH | ACK, 5001))  # other bytes, same place
    assert reassembler.is_new_connection(seg(9, 1, 5001, b"x", PSH | ACK, 1007))
    # An exact retransmission of what the side sent, a bare ACK or a FIN again: still this connection.
    assert not reassembler.is_new_connection(seg(9, 0, 1001, b"hello", PSH | ACK, 5001))
    assert not reassembler.is_new_connection(seg(9, 0, 1007, ack=5002))
    assert not reassembler.is_new_connection(seg(9, 0, 1006, flags=FIN | ACK, ack=5002))


def test_new_data_after_a_reset_starts_another_connection() -> None:
    reassembler = fed([*handshake(), seg(4, 0, 1001, b"hello", PSH | ACK, 5001), seg(5, 1, 5001, flags=RST | ACK)])
    assert reassembler.is_new_connection(seg(9, 0, 1001, b"again", PSH | ACK, 5001))
    assert reassembler.is_new_connection(seg(9, 1, 5001, b"x", PSH | ACK, 1006))


def test_bytes_beyond_the_senders_fin_start_another_connection_but_its_peer_may_still_send() -> None:
    reassembler = fed([*handshake(), seg(4, 0, 1001, b"hello", PSH | ACK, 5001), seg(5, 0, 1006, flags=FIN | ACK)])
    assert reassembler.is_new_connection(seg(9, 0, 1007, b"more", PSH | ACK, 5001))
    assert reassembler.is_new_connection(seg(9, 0, 1001, b"HELLO", PSH | ACK, 5001))  # other content, FIN reached
    assert not reassembler.is_new_connection(seg(9, 1, 5001, b"answer", PSH | ACK, 1007))  # a half-close


def test_a_sequence_jump_beyond_any_window_starts_another_connection() -> None:
    reassembler = fed([*handshake(), seg(4, 0, 1001, b"hello", PSH | ACK, 5001)])
    assert reassembler.is_new_connection(seg(9, 0, 1006 + (1 << 30) + 1, b"far", PSH | ACK, 5001))
    assert reassembler.is_new_connection(seg(9, 0, 1006 - (1 << 30) - 10, b"far", PSH | ACK, 5001))
    assert not reassembler.is_new_connection(seg(9, 0, 1006 + 60_000, b"ahead", PSH | ACK, 5001))  # a hole
