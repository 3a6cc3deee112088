"""The declared budgets at the capture layer, on captures written with the project's capture writer (pure, no
Spark): a packet above the per-message budget is skipped as it arrives and recorded, never buffered, whether it
ends or is cut short (a PUBLISH declaring 256 MB sent in pieces); 100,000 tiny out-of-order segments behind a hole
never hold more than the out-of-order budget. (The exact bounds of the reassembler: tests/test_capture_reassembly.py;
the per-flow budget and the whole command: tests/test_pipeline_budgets.py.)"""

from __future__ import annotations

import io
import tracemalloc

from mqttaudit.capture import FlowOptions, flow_events, read_records, segments, writer
from mqttaudit.capture.budgets import Budgets, message_reason
from mqttaudit.capture.conversation import CUT_BY_END, ConnectionAudit, FlowAudit
from mqttaudit.capture.link import RAW
from mqttaudit.capture.resync import MAX_PIECES, BoundaryHunt
from mqttaudit.codec import Connack, Connect, Direction, encode
from mqttaudit.judge import JudgeConfig
from mqttaudit.pipeline.conversations import connection_flow, judge_flow

EPOCH = 1_700_000_000 * 10**9
#: What the huge PUBLISH declares: 256 MiB whole (a valid four-byte Remaining Length, 268,435,451).
DECLARED = 256 << 20
PINGREQ, PINGRESP = bytes.fromhex("c0 00"), bytes.fromhex("d0 00")


def publish_head(declared: int) -> bytes:
    """The first bytes of a QoS 0 PUBLISH to ``a`` declaring ``declared`` bytes in all (fixed header included)."""
    remaining = declared - 5  # a type byte and four Remaining Length bytes
    length = bytes(((remaining >> shift) & 0x7F) | (0x80 if shift < 21 else 0) for shift in (0, 7, 14, 21))
    return b"\x30" + length + b"\x00\x01a"


def huge_publish(
    sent: int, *, declared: int = DECLARED, client: tuple[str, int] = ("10.0.0.1", 50000), start: int = EPOCH
) -> list[tuple[int, bytes]]:
    """(time, IP packet) of a connection whose client, after CONNECT and CONNACK, sends the first ``sent`` bytes of
    a PUBLISH declaring ``declared`` in 1,448-byte segments; when that is all of it, a PINGREQ and its PINGRESP
    follow. The capture ends there, the connection open."""
    session = writer.TcpSession(client, ("10.0.0.2", 1883))
    packets = session.handshake()
    packets += [session.send(0, encode(Connect(client_id="huge"))), session.send(1, encode(Connack()))]
    head = publish_head(declared)
    body = head + bytes(sent - len(head))
    packets += [session.send(0, body[at : at + 1448]) for at in range(0, len(body), 1448)]
    if sent == declared:
        packets += [session.send(0, PINGREQ), session.send(1, PINGRESP)]
    return [(start + index * 1000, packet) for index, packet in enumerate(packets)]


def out_of_order(
    count: int, *, client: tuple[str, int] = ("10.0.0.3", 50001), start: int = EPOCH
) -> list[tuple[int, bytes]]:
    """(time, IP packet) of a connection whose client, after CONNECT and CONNACK, leaves a 100-byte hole and sends
    ``count`` one-byte segments behind it, none of them acknowledged."""
    session = writer.TcpSession(client, ("10.0.0.2", 1883))
    packets = session.handshake()
    packets += [session.send(0, encode(Connect(client_id="disorder"))), session.send(1, encode(Connack()))]
    packets += [session.segment(0, bytes([index % 251]), at=100 + index) for index in range(count)]
    return [(start + index * 1000, packet) for index, packet in enumerate(packets)]


def audited(packets: list[tuple[int, bytes]], budgets: Budgets | None = None) -> tuple[FlowAudit, int]:
    """The one connection of ``packets``, audited with ``budgets``, and the most memory the audit allocated
    (tracemalloc, beyond the segments already read)."""
    data = writer.pcap_bytes(packets, linktype=RAW)
    flow = [segment for _index, segment in segments(read_records(lambda: io.BytesIO(data)))]
    tracemalloc.start()
    try:
        (audit,) = flow_events(flow, options=FlowOptions(budgets=budgets or Budgets()))
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return audit, peak


def test_a_packet_above_the_message_budget_is_skipped_recorded_and_the_connection_goes_on() -> None:
    budget = 64 * 1024
    audit, _peak = audited(huge_publish(200_000, declared=200_000), Budgets(max_message_bytes=budget))
    client = audit.counts[0]
    assert (audit.oversized_messages, audit.oversized_bytes) == (1, 200_000)
    (skipped,) = [row for row in audit.unassessable if row.length == 200_000]
    assert skipped.reason == message_reason(200_000, budget)
    assert client.malformed == 0 and client.unassessable == 200_000 and client.reconciles
    # The connection goes on: the PINGREQ after it is decoded, and the judge hears of the skipped packet.
    kinds = [side_frame.frame.raw[:1] for side_frame in audit.frames]
    assert kinds[-2:] == [PINGREQ[:1], PINGRESP[:1]]
    (undecoded,) = [side_frame.frame for side_frame in audit.frames if side_frame.frame.packet is None]
    assert undecoded.length == 200_000 and len(undecoded.raw) <= 64
    judged = judge_flow(connection_flow("huge.pcap", audit), JudgeConfig(wall_clock=True))
    assert not [level for level in judged.violations.data["level"] if level == "MUST"]


def test_a_256_mb_publish_sent_in_pieces_is_never_buffered_at_the_default_budget_or_a_small_one() -> None:
    sent = 4 << 20
    for budgets in (Budgets(), Budgets(max_message_bytes=64 * 1024)):
        audit, peak = audited(huge_publish(sent), budgets)
        assert (audit.oversized_messages, audit.oversized_bytes) == (1, sent)
        (cut,) = [row for row in audit.unassessable if row.offset == audit.counts[0].packets]
        assert cut.length == sent
        assert cut.reason == f"{message_reason(DECLARED, budgets.max_message_bytes)}; {CUT_BY_END}"
        assert audit.counts[0].reconciles and audit.counts[0].malformed == 0
        # Buffered, the packet's 4 MiB would be held at least once; skipped, the audit allocates a fraction of it.
        assert peak < 2 << 20, f"{peak} bytes allocated"


def test_a_hundred_thousand_tiny_out_of_order_segments_are_bounded_and_the_gap_is_named() -> None:
    """Unfixed, the 100,000 pieces were all held (13 MB of Python objects for 100 KB) and delivering them at the end
    of the input took 5.5 s; the hunt for a packet boundary after the gap then kept a record per byte (9.5 MB at
    its peak here, a quarter of a gigabyte for a megabyte of such segments)."""
    budgets = Budgets()
    data = writer.pcap_bytes(out_of_order(0), linktype=RAW)
    start = [segment for _index, segment in segments(read_records(lambda: io.BytesIO(data)))]
    time, src, sport, dst, dport, _seq, ack, flags, _payload = start[-1]  # the server's CONNACK
    client_next = 1001 + len(encode(Connect(client_id="disorder")))
    connection = ConnectionAudit(FlowOptions(budgets=budgets))
    for segment in start:
        connection.feed(segment)
    most = 0
    for index in range(100_000):
        connection.feed((time + index, dst, dport, src, sport, client_next + 100 + index, ack, flags, b"\x01"))
        most = max(most, connection.reassembler.held(0))
    audit = connection.finish()
    assert 0 < most <= budgets.max_out_of_order_bytes
    (gap,) = audit.gaps
    assert gap.budget and gap.length == 100
    client = audit.counts[0]
    assert client.reconciles and (client.gaps, client.unassessable) == (100, 100_000)


def test_a_boundary_hunt_keeps_a_bounded_number_of_piece_records() -> None:
    hunt = BoundaryHunt(Direction.FROM_CLIENT, 0)
    for offset in range(20_000):
        assert hunt.feed(offset, b"\x01", offset, offset) is None
    pieces = hunt.pieces_from(0)
    assert len(pieces) <= MAX_PIECES and sum(len(piece[1]) for piece in pieces) == hunt.end - pieces[0][0]
