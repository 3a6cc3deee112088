"""Recognising MQTT on any TCP port: the CONNECT-start recogniser (every well-formed CONNECT prefix, never HTTP,
random bytes almost never, short prefixes undecided), and the scanner that proves server ports from streams that
start with a CONNECT, within a chunk and across chunks, or with a TLS ClientHello whose session is in the key
log."""

from __future__ import annotations

import io
import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.capture import audit_records, decode_segment, read_records, writer
from mqttaudit.capture.detect import (
    BY_CONNECT,
    BY_KEYLOG,
    BY_TLS_PORT,
    BY_UPGRADE,
    HELLO_BYTES,
    IS_CONNECT,
    NEEDS_MORE,
    NOT_CONNECT,
    PREFIX_BYTES,
    StartScanner,
    connect_start,
    hello_start,
    proven_ports,
)
from mqttaudit.capture.flows import OtherTcp, broker_segments
from mqttaudit.capture.link import RAW
from mqttaudit.capture.segments import Segment
from mqttaudit.capture.tls import KeyLog

from .strategies import valid_connects
from .tls_sessions import session as tls_session


def _needed(packet: bytes) -> int:
    """Bytes the recogniser needs to decide: fixed header, protocol name, level (read off the packet here)."""
    length_bytes = next(i for i in range(1, 5) if packet[i] < 0x80)
    name_length = packet[length_bytes + 1] << 8 | packet[length_bytes + 2]
    return length_bytes + 1 + 2 + name_length + 1


@given(valid_connects())
def test_every_prefix_of_a_valid_connect_is_recognised_once_long_enough(connect: codec.Connect) -> None:
    packet = codec.encode(connect)
    needed = _needed(packet)
    assert needed <= PREFIX_BYTES
    for size in range(len(packet) + 1):
        assert connect_start(packet[:size]) == (IS_CONNECT if size >= needed else NEEDS_MORE), size
    assert connect_start(packet + b"\x30\x00") == IS_CONNECT  # whatever follows the CONNECT


@given(st.sampled_from([("MQIsdp", 3), ("MQTT", 5), ("MQTT", 4)]), st.text(max_size=30), st.binary(max_size=300))
def test_mqtt_3_1_and_5_0_connects_are_recognised_too(protocol: tuple[str, int], client_id: str, tail: bytes) -> None:
    name, level = protocol
    packet = codec.encode(codec.Connect(protocol_name=name, protocol_level=level, client_id=client_id), validate=False)
    assert connect_start(packet) == IS_CONNECT
    assert connect_start(packet[:PREFIX_BYTES] + tail) == IS_CONNECT


@given(st.sampled_from([("MQIsdp", 4), ("MQTT", 3), ("MQTT", 6), ("MQIsdp", 5), ("mqtt", 4), ("MQTX", 4)]))
def test_a_wrong_protocol_name_or_level_is_not_a_connect(protocol: tuple[str, int]) -> None:
    name, level = protocol
    packet = codec.encode(codec.Connect(protocol_name=name, protocol_level=level, client_id="c"), validate=False)
    assert connect_start(packet) == NOT_CONNECT


def test_a_five_byte_remaining_length_or_one_too_short_for_the_header_is_not_a_connect() -> None:
    assert connect_start(bytes.fromhex("10 ff ff ff ff 01 00 04") + b"MQTT\x04") == NOT_CONNECT
    assert connect_start(bytes.fromhex("10 06 00 04") + b"MQTT\x04\x02\x00\x3c") == NOT_CONNECT  # 6 < 10
    assert connect_start(bytes.fromhex("10 0a 00 04") + b"MQTT\x04\x02\x00\x3c") == IS_CONNECT


@given(st.sampled_from(["GET", "POST", "HEAD", "PUT"]), st.text(max_size=200), st.binary(max_size=200))
def test_http_requests_and_responses_are_never_a_connect(method: str, path: str, body: bytes) -> None:
    request = f"{method} /{path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() + body
    assert connect_start(request) == NOT_CONNECT
    assert connect_start(b"HTTP/1.0 200 OK\r\n" + body) == NOT_CONNECT


@given(st.binary(min_size=1, max_size=64).filter(lambda data: data[0] != 0x10))
def test_a_stream_that_does_not_start_with_0x10_is_never_a_connect(data: bytes) -> None:
    assert connect_start(data) == NOT_CONNECT


def test_random_bytes_are_almost_never_a_connect() -> None:
    """Even with the first byte forced to 0x10, random streams pass the name and level check 0 times in 50,000
    (the chance is about 2**-48 each)."""
    rng = random.Random(1883)
    streams = [b"\x10" + rng.randbytes(PREFIX_BYTES) for _ in range(50_000)]
    verdicts = [connect_start(stream) for stream in streams]
    assert verdicts.count(IS_CONNECT) == 0
    assert verdicts.count(NOT_CONNECT) >= 49_000  # a long run of continuation bytes is the only undecided case


# -- the scanner: proven server ports ------------------------------------------------------------------------------

CONNECT = codec.encode(codec.Connect(client_id="sensor"))
CONNACK = codec.encode(codec.Connack())
HTTP = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _segments(packets: list[bytes]) -> list[Segment]:
    out: list[Segment] = []
    for index, packet in enumerate(packets):
        segment = decode_segment(index * 1000, RAW, packet)
        assert not isinstance(segment, str)
        out.append(segment)
    return out


def _session(port: int, client_port: int = 50000) -> writer.TcpSession:
    return writer.TcpSession(("10.0.0.1", client_port), ("10.0.0.2", port))


def test_a_connect_at_the_stream_start_proves_its_server_port_and_http_does_not() -> None:
    mqtt, http = _session(46091), _session(8080, 50001)
    packets = mqtt.handshake() + http.handshake()
    packets += [http.send(0, HTTP), mqtt.send(0, CONNECT), mqtt.send(1, CONNACK), http.send(1, b"HTTP/1.0 200 OK\r\n")]
    assert proven_ports(_segments(packets)) == frozenset({46091})


def test_a_connect_split_over_two_segments_is_recognised() -> None:
    mqtt = _session(46091)
    packets = [*mqtt.handshake(), mqtt.send(0, CONNECT[:3]), mqtt.send(0, CONNECT[3:]), mqtt.send(1, CONNACK)]
    assert proven_ports(_segments(packets)) == frozenset({46091})


def test_a_connect_that_is_not_at_the_stream_start_proves_nothing() -> None:
    """A CONNECT after other bytes, or in a flow whose handshake was not captured: no stream start to be at."""
    late, headless = _session(46091), _session(46092, 50001)
    packets = [*late.handshake(), late.send(0, b"0\x03\x00\x01a"), late.send(0, CONNECT)]
    headless.handshake()  # the handshake happened, but is not in the capture
    packets += [headless.send(0, CONNECT), headless.send(1, CONNACK)]
    assert proven_ports(_segments(packets)) == frozenset()


def test_a_handshake_in_one_chunk_and_the_connect_in_the_next_are_matched_by_direction_and_seq() -> None:
    mqtt, http = _session(46091), _session(8080, 50001)
    first = _segments(mqtt.handshake() + http.handshake())
    second = _segments([mqtt.send(0, CONNECT), http.send(0, HTTP)])
    chunks = [StartScanner(), StartScanner()]
    for scanner, part in zip(chunks, (first, second), strict=True):
        for segment in part:
            scanner.feed(segment)
    assert chunks[0].proven_ports() == set() and chunks[1].proven_ports() == set()
    starts = {(item.direction, item.seq) for item in chunks[0].loose() if item.kind == "start"}
    connects = [item for item in chunks[1].loose() if item.kind == "connect"]
    assert [item.port for item in connects if (item.direction, item.seq) in starts] == [46091]
    # The HTTP stream's start was announced too; no CONNECT ever arrived at it.
    assert any(direction.endswith(":8080") for direction, _seq in starts)


def test_audit_records_with_detection_judges_the_mqtt_flow_and_leaves_http_out() -> None:
    mqtt, http = _session(46091), _session(8080, 50001)
    packets = mqtt.handshake() + http.handshake()
    packets += [mqtt.send(0, CONNECT), http.send(0, HTTP), mqtt.send(1, CONNACK), mqtt.fin(0), mqtt.fin(1)]
    data = writer.pcap_bytes([(i * 1000, p) for i, p in enumerate(packets)], linktype=101)

    def records() -> list[tuple[int, int, bytes, int, int, int]]:
        return list(read_records(lambda: io.BytesIO(data)))

    assert audit_records(records()) == []  # neither is on 1883
    [flow] = audit_records(records(), detect=True)
    assert flow.endpoints[1][1] == 46091 and flow.client == 0
    assert [type(event).__name__ for event in flow.events] == ["Sent", "Sent", "Closed"]


def test_left_out_flows_are_counted_per_service_port_named_by_handshake_or_by_the_busier_endpoint() -> None:
    """A handshake names the server's port; without one, the endpoint in more flows of the chunk serves; a lone
    flow without handshake is counted under both its ports."""
    opened = [_session(8080, 50000 + i) for i in range(3)]
    packets = [p for session in opened for p in session.handshake()] + [s.send(0, HTTP) for s in opened]
    busy = [_session(8443, 51000 + i) for i in range(2)]  # handshakes not captured: 8443 is in both flows
    for session in busy:
        session.handshake()
    packets += [s.send(1, b"x" * 10) for s in busy]
    lone = _session(36815, 59919)
    lone.handshake()
    packets += [lone.send(0, b"y" * 5), lone.send(1, b"z" * 5)]
    mqtt = _session(1883, 52000)
    packets += [*mqtt.handshake(), mqtt.send(0, CONNECT)]
    data = writer.pcap_bytes([(i * 1000, p) for i, p in enumerate(packets)], linktype=101)
    other = OtherTcp()
    records = read_records(lambda: io.BytesIO(data))
    kept = [row for rows in broker_segments(records, frozenset({1883}), Counter(), 100, other) for row in rows]
    assert len(kept) == 4
    assert other.by_service() == {
        "8080": [12, 3 * len(HTTP), 3],
        "8443": [2, 20, 2],
        "36815/59919": [2, 10, 1],
    }


# -- TLS sessions in the key log ----------------------------------------------------------------------------------

UPGRADE = b"GET /mqtt HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"


def _hello(random_bytes: bytes, tail: bytes = b"\x00" * 40) -> bytes:
    """A ClientHello's first bytes, made by hand: record header, handshake header, legacy version, random."""
    body = b"\x03\x03" + random_bytes + tail
    handshake = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + len(handshake).to_bytes(2, "big") + handshake


def _real_hello() -> tuple[bytes, frozenset[bytes]]:
    """The first client bytes of a real TLS session, and the client randoms its key log holds."""
    made = tls_session([b"hello"], [b"world"])
    return made.client_stream, KeyLog.parse(made.keylog).client_randoms


def test_hello_start_needs_the_random_and_finds_it_in_the_key_log_only() -> None:
    wanted, other = bytes(range(32)), bytes(range(1, 33))
    hello = _hello(wanted)
    randoms = frozenset({wanted})
    assert hello_start(hello, randoms) == IS_CONNECT
    assert hello_start(_hello(other), randoms) == NOT_CONNECT
    assert all(hello_start(hello[:size], randoms) == NEEDS_MORE for size in range(HELLO_BYTES))
    assert hello_start(hello, frozenset()) == NOT_CONNECT
    # A handshake record of another message (a ServerHello, type 2), or no handshake record at all.
    assert hello_start(hello[:5] + b"\x02" + hello[6:], randoms) == NOT_CONNECT
    assert hello_start(b"\x17\x03\x03" + hello[3:], randoms) == NOT_CONNECT


def test_a_real_client_hello_in_the_key_log_proves_its_port_and_one_outside_it_does_not() -> None:
    stream, randoms = _real_hello()
    assert len(randoms) == 1
    logged, unlogged = _session(8884), _session(443, 50001)
    packets = logged.handshake() + unlogged.handshake()
    packets += [logged.send(0, stream[:600]), unlogged.send(0, _hello(bytes(32)))]
    assert proven_ports(_segments(packets), randoms) == frozenset({8884})
    assert proven_ports(_segments(packets)) == frozenset()  # without a key log no ClientHello proves 8884


def test_a_client_hello_split_within_its_random_is_completed_by_the_next_segment() -> None:
    stream, randoms = _real_hello()
    for cut in (1, 6, 20, HELLO_BYTES - 1):
        logged = _session(8081)
        packets = [*logged.handshake(), logged.send(0, stream[:cut]), logged.send(0, stream[cut:600])]
        assert proven_ports(_segments(packets), randoms) == frozenset({8081}), cut


def test_a_client_hello_not_at_the_stream_start_proves_nothing() -> None:
    stream, randoms = _real_hello()
    late, headless = _session(8081), _session(8082, 50001)
    packets = [*late.handshake(), late.send(0, b"\x00"), late.send(0, stream[:600])]
    headless.handshake()
    packets.append(headless.send(0, stream[:600]))
    assert proven_ports(_segments(packets), randoms) == frozenset()


def test_each_port_is_named_by_its_strongest_proof() -> None:
    stream, randoms = _real_hello()
    sessions = {port: _session(port, 50000 + port % 1000) for port in (8883, 8884, 8080, 46091)}
    packets = [p for made in sessions.values() for p in made.handshake()]
    packets += [sessions[8883].send(0, _hello(bytes(32))), sessions[8884].send(0, stream[:600])]
    packets += [sessions[8080].send(0, UPGRADE), sessions[46091].send(0, CONNECT)]
    also = _session(8884, 51000)  # a CONNECT in the clear on the key-log port too: the stronger proof names it
    packets += [*also.handshake(), also.send(0, CONNECT)]
    scanner = StartScanner(randoms)
    for segment in _segments(packets):
        scanner.feed(segment)
    assert scanner.proofs() == {8883: BY_TLS_PORT, 8884: BY_CONNECT, 8080: BY_UPGRADE, 46091: BY_CONNECT}
    alone = StartScanner(randoms)
    for segment in _segments(packets[: -len(also.handshake()) - 1]):
        alone.feed(segment)
    assert alone.proofs()[8884] == BY_KEYLOG


def test_a_client_hello_whose_handshake_is_in_another_chunk_is_handed_on_with_its_proof() -> None:
    stream, randoms = _real_hello()
    logged = _session(8884)
    chunks = [StartScanner(randoms), StartScanner(randoms)]
    for scanner, part in zip(
        chunks, (_segments(logged.handshake()), _segments([logged.send(0, stream[:600])])), strict=True
    ):
        for segment in part:
            scanner.feed(segment)
    starts = {(item.direction, item.seq) for item in chunks[0].loose() if item.kind == "start"}
    [connect] = [item for item in chunks[1].loose() if item.kind == "connect"]
    assert (connect.direction, connect.seq) in starts and (connect.port, connect.how) == (8884, BY_KEYLOG)
