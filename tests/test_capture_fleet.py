"""One TCP flow held by several files (:mod:`mqttaudit.capture.fleet`): the files of a rotation are one connection,
a second connection on the same 4-tuple is another, the same bytes in two files are deduplicated, and copies that
disagree are judged apart with the first stream offset where they differ. Segments are built by the project's
capture writer (:class:`~mqttaudit.capture.writer.TcpSession`) and decoded by the capture layer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mqttaudit.capture import fleet
from mqttaudit.capture.segments import Segment, decode_segment
from mqttaudit.capture.writer import TcpSession

from .crafted import BROKER, CLIENT_A, CONNACK_ACCEPTED, PUBLISH_QOS1, RAW_IP, connect

SECOND = 1_000_000_000
PUBACK = bytes.fromhex("40 02 00 07")


def timed(packets: Sequence[bytes], start: int = 0) -> list[Segment]:
    """The packets as segments one second apart from ``start`` seconds."""
    out = []
    for number, packet in enumerate(packets):
        segment = decode_segment((start + number) * SECOND, RAW_IP, packet)
        assert not isinstance(segment, str)
        out.append(segment)
    return out


def conversation(session: TcpSession, client_id: bytes = b"a", *, publish: bytes = PUBLISH_QOS1) -> list[bytes]:
    """Handshake, CONNECT/CONNACK, a PUBLISH and its PUBACK, both FINs."""
    return [
        *session.handshake(),
        session.send(0, connect(client_id)),
        session.send(1, CONNACK_ACCEPTED),
        session.send(0, publish),
        session.send(1, PUBACK),
        session.fin(0),
        session.fin(1),
    ]


def planned(files: dict[str, list[Segment]]) -> tuple[fleet.FleetPlan, list[str], list[Segment]]:
    """The plan for the files' segments, merged in capture-time order as the judging stage merges them."""
    merged = sorted(((segment, name) for name, held in files.items() for segment in held), key=lambda x: x[0][0])
    segments = [segment for segment, _name in merged]
    captures = [name for _segment, name in merged]

    def segment_at(rows: list[int]) -> Iterator[Segment]:
        return iter([segments[row] for row in rows])

    return fleet.plan(segment_at, fleet.pieces(captures, segments)), captures, segments


def test_a_connection_rotated_across_files_is_one_copy_with_nothing_dropped() -> None:
    segments = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    plan, _captures, _ = planned({"cap.pcap": segments[:4], "cap.pcap1": segments[4:6], "cap.pcap2": segments[6:]})
    assert plan.copies == [list(range(len(segments)))]
    assert (plan.conflicts, plan.duplicates) == ([], [])


def test_the_same_bytes_in_two_files_are_one_copy_and_the_duplicate_is_left_out() -> None:
    segments = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    plan, captures, _ = planned({"aa.pcap": segments, "bb.pcap": list(segments)})
    assert len(plan.copies) == 1
    assert {captures[row] for row in plan.copies[0]} == {"aa.pcap"}
    assert plan.conflicts == []
    payload = sum(len(segment[8]) for segment in segments)
    assert plan.duplicates == [fleet.Duplicate("bb.pcap", "aa.pcap", payload, len(segments))]


def test_copies_whose_bytes_differ_are_judged_apart_with_the_first_differing_offset() -> None:
    clean = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    # The same connection with one payload byte of the PUBLISH changed: 'hi' -> 'hI'.
    edited = timed(conversation(TcpSession(CLIENT_A, BROKER), publish=PUBLISH_QOS1[:-1] + b"I"))
    plan, captures, _ = planned({"aa-clean.pcap": clean, "zz-edited.pcap": edited})
    assert [{captures[row] for row in copy} for copy in plan.copies] == [{"aa-clean.pcap"}, {"zz-edited.pcap"}]
    assert plan.duplicates == []
    (conflict,) = plan.conflicts
    assert conflict.captures == ("aa-clean.pcap", "zz-edited.pcap")
    assert (conflict.side, conflict.sender) == ("client", "10.0.0.5:50122")
    # The client's stream: the CONNECT, then the PUBLISH, whose last byte is the one edited.
    assert conflict.offset == len(connect(b"a")) + len(PUBLISH_QOS1) - 1
    assert conflict.copies == (0, 1)
    assert plan.label(1, clean[0][0], clean[-1][0]) == "zz-edited.pcap"


def test_a_second_connection_on_the_same_ports_in_another_file_is_not_a_copy() -> None:
    first = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    # The same 4-tuple a minute later, with other initial sequence numbers; by chance its first bytes are equal.
    second = timed(conversation(TcpSession(CLIENT_A, BROKER, client_isn=1000 + 10, server_isn=5000)), start=60)
    plan, _captures, _ = planned({"one.pcap": first, "two.pcap": second})
    assert plan.copies == [list(range(len(first) + len(second)))]
    assert (plan.conflicts, plan.duplicates) == ([], [])
    pieces = fleet.pieces(["one.pcap"] * len(first) + ["two.pcap"] * len(second), first + second)
    assert [(piece.capture, len(piece.rows)) for piece in pieces] == [("one.pcap", 9), ("two.pcap", 9)]


def test_a_file_holding_part_of_what_a_later_named_file_holds_is_the_duplicate_left_out() -> None:
    segments = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    # The file first by name began recording mid-connection: every byte it holds, the other holds too.
    plan, captures, _ = planned({"aa-late.pcap": segments[4:], "bb-whole.pcap": list(segments)})
    assert [{captures[row] for row in copy} for copy in plan.copies] == [{"bb-whole.pcap"}]
    assert plan.conflicts == []
    payload = sum(len(segment[8]) for segment in segments[4:])
    assert plan.duplicates == [fleet.Duplicate("aa-late.pcap", "bb-whole.pcap", payload, len(segments) - 4)]


def test_files_that_each_hold_bytes_the_other_lacks_are_merged_into_one_copy() -> None:
    segments = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    # Overlapping halves (the CONNACK and the PUBLISH in both): neither holds the other, so nothing is left out.
    plan, captures, _ = planned({"aa.pcap": segments[:6], "bb.pcap": segments[4:]})
    assert (plan.conflicts, plan.duplicates) == ([], [])
    (copy,) = plan.copies
    assert [captures[row] for row in copy].count("aa.pcap") == 6
    assert [captures[row] for row in copy].count("bb.pcap") == len(segments) - 4


def test_one_comparison_gives_both_directions_of_holding() -> None:
    whole = [(0, b"abcdef"), (6, b"gh")]
    part = [(2, b"cd")]
    assert fleet._compare(whole, part, 0) == fleet.Comparison(None, 2, True, False)
    assert fleet._compare(part, whole, 0) == fleet.Comparison(None, 2, False, True)
    # ``theirs`` starting 2 bytes later: their 'cd' at offset 0 lies over the 'cd' of ``whole``.
    assert fleet._compare(whole, [(0, b"cd")], 2) == fleet.Comparison(None, 2, True, False)
    differs = fleet._compare(whole, [(1, b"bX")], 0)
    assert (differs.differs_at, differs.mine_holds_theirs, differs.theirs_holds_mine) == (2, False, False)


def _taken(files: dict[str, list[Segment]]) -> list[tuple[str, tuple[bytes, int], int, int]]:
    """The files' segments as :func:`fleet.files_apart` takes them (SYN and FIN take a sequence number each)."""
    return [
        (
            name,
            (segment[1], segment[2]),
            segment[5],
            len(segment[8]) + bool(segment[7] & 0x02) + bool(segment[7] & 0x01),
        )
        for name, held in files.items()
        for segment in held
    ]


def test_files_of_a_rotation_or_of_a_reused_four_tuple_are_apart_and_copies_are_not() -> None:
    segments = timed(conversation(TcpSession(CLIENT_A, BROKER)))
    later = timed(conversation(TcpSession(CLIENT_A, BROKER, client_isn=900_000, server_isn=700_000)), start=60)
    assert fleet.files_apart(_taken({"r.pcap": segments[:4], "r.pcap1": segments[4:6], "r.pcap2": segments[6:]}))
    assert fleet.files_apart(_taken({"one.pcap": segments, "two.pcap": later}))
    # Any byte, SYN or FIN two files both hold: the plan decides.
    assert not fleet.files_apart(_taken({"aa.pcap": segments, "bb.pcap": list(segments)}))
    assert not fleet.files_apart(_taken({"aa.pcap": segments[:6], "bb.pcap": segments[4:]}))
    assert not fleet.files_apart(_taken({"aa.pcap": segments, "bb.pcap": segments[-1:]}))
