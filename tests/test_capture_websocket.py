"""MQTT over WebSocket in captures, pure: the WebSocket layer on hand-built handshakes and frames (masked and
unmasked, fragmented, control frames between fragments, split at every byte), its defects with their statements,
the layer inside ``ConnectionAudit`` (the choice from the client's first bytes, the byte account), TLS without keys,
and the start scanner's proof of a port."""

from __future__ import annotations

import base64
import hashlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.capture import audit_records, read_records, writer
from mqttaudit.capture.conversation import ENCRYPTED_VERSION, FlowOptions, handling
from mqttaudit.capture.detect import IS_CONNECT, NEEDS_MORE, NOT_CONNECT, StartScanner, upgrade_start
from mqttaudit.capture.layers import ENCRYPTED, ENCRYPTED_REASON, PLAIN, TLS, WEBSOCKET, Stack, opening_kind
from mqttaudit.capture.link import ETHERNET
from mqttaudit.capture.websocket import WebSocketLayer
from mqttaudit.judge import Sent
from mqttaudit.pipeline.conversations import connection_flow, judge_flow
from mqttaudit.pipeline.options import AuditOptions

EPOCH = 1_700_000_000 * 10**9
CLIENT, SERVER = 0, 1
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="
MASK = b"\x37\xfa\x21\x3d"
CONNECT = codec.encode(codec.Connect(client_id="ws-1"))
CONNACK = codec.encode(codec.Connack())
PUBLISH = codec.encode(codec.Publish(topic="a/b", payload=b"x" * 300))


def request(protocols: str | None = "mqtt") -> bytes:
    lines = [
        b"GET /mqtt HTTP/1.1",
        b"Host: 127.0.0.1:8080",
        b"Upgrade: websocket",
        b"Connection: Upgrade",
        b"Sec-WebSocket-Key: " + KEY,
        b"Sec-WebSocket-Version: 13",
    ]
    if protocols is not None:
        lines.append(b"Sec-WebSocket-Protocol: " + protocols.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def response(protocol: str | None = "mqtt", status: bytes = b"101 Switching Protocols") -> bytes:
    accept = base64.b64encode(hashlib.sha1(KEY + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    lines = [b"HTTP/1.1 " + status, b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Accept: " + accept]
    if protocol is not None:
        lines.append(b"Sec-WebSocket-Protocol: " + protocol.encode())
    if not status.startswith(b"101"):
        lines = [b"HTTP/1.1 " + status, b"Content-Length: 9"]
        return b"\r\n".join(lines) + b"\r\n\r\nnot found"
    return b"\r\n".join(lines) + b"\r\n\r\n"


def frame(payload: bytes, opcode: int = 2, *, fin: bool = True, mask: bytes | None = MASK, rsv: int = 0) -> bytes:
    """One RFC 6455 frame, built by hand."""
    first = (0x80 if fin else 0) | rsv | opcode
    size = len(payload)
    if size < 126:
        length = bytes([size])
    elif size < 1 << 16:
        length = bytes([126]) + size.to_bytes(2, "big")
    else:
        length = bytes([127]) + size.to_bytes(8, "big")
    if mask is None:
        return bytes([first]) + length + payload
    masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    return bytes([first, length[0] | 0x80]) + length[1:] + mask + masked


def server_frame(payload: bytes, opcode: int = 2, *, fin: bool = True) -> bytes:
    return frame(payload, opcode, fin=fin, mask=None)


def carried(layer: WebSocketLayer, side: int, chunks: list[bytes]) -> bytes:
    """Feeds the chunks; the inner bytes they gave, checked to come with contiguous offsets."""
    out = b""
    for index, chunk in enumerate(chunks):
        for piece in layer.feed(side, chunk, EPOCH + index):
            assert piece.offset == len(out)
            out += piece.data
    return out


def rules(layer: WebSocketLayer) -> list[tuple[int, str]]:
    return [(note.side, note.rule) for note in layer.notes if note.rule is not None]


def open_layer(client_protocols: str | None = "mqtt", server_protocol: str | None = "mqtt") -> WebSocketLayer:
    layer = WebSocketLayer()
    assert layer.feed(CLIENT, request(client_protocols), EPOCH) == []
    assert layer.feed(SERVER, response(server_protocol), EPOCH) == []
    return layer


# -- the layer ------------------------------------------------------------------------------------------------------


def test_binary_frames_carry_the_mqtt_bytes_of_both_sides_with_no_finding() -> None:
    layer = open_layer()
    assert carried(layer, CLIENT, [frame(CONNECT), frame(PUBLISH)]) == CONNECT + PUBLISH
    assert carried(layer, SERVER, [server_frame(CONNACK)]) == CONNACK
    assert rules(layer) == [] and layer.lost == (0, 0)


def test_a_fragmented_message_with_pings_and_pongs_between_its_fragments_is_reassembled() -> None:
    layer = open_layer()
    stream = CONNECT + PUBLISH
    wire = (
        frame(stream[:5], fin=False)
        + frame(b"ping", 0x9)
        + frame(stream[5:100], 0x0, fin=False)
        + frame(b"", 0xA)
        + frame(stream[100:], 0x0)
    )
    assert carried(layer, CLIENT, [wire]) == stream
    assert rules(layer) == []


@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(min_value=1, max_value=900), max_size=12))
def test_frames_split_anywhere_across_segments_carry_the_same_bytes(cuts: list[int]) -> None:
    wire = request() + frame(CONNECT) + frame(PUBLISH[:7], fin=False) + frame(b"", 0x9) + frame(PUBLISH[7:], 0x0)
    points = sorted({cut % len(wire) for cut in cuts} - {0})
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    layer = WebSocketLayer()
    assert layer.feed(SERVER, response(), EPOCH) == []
    assert carried(layer, CLIENT, chunks) == CONNECT + PUBLISH
    assert rules(layer) == [] and layer.lost == (0, 0)


def test_every_single_byte_boundary_gives_the_same_bytes() -> None:
    wire = request() + frame(CONNECT) + frame(b"", 0x9) + frame(PUBLISH)
    layer = WebSocketLayer()
    layer.feed(SERVER, response(), EPOCH)
    assert carried(layer, CLIENT, [wire[i : i + 1] for i in range(len(wire))]) == CONNECT + PUBLISH


def test_a_text_frame_breaks_mqtt_6_0_0_1_and_its_bytes_go_on_marked_as_text() -> None:
    """The sender's defect is noted once per text message; its bytes (a fragmented message's too) are handed on
    marked, so that the judge sees the packet and what its recipient does about it."""
    layer = open_layer()
    wire = [
        frame(CONNECT),
        frame(b"\xc0\x00", 0x1),
        frame(b"\xc0", 0x1, fin=False),
        frame(b"\x00", 0x0),
        frame(PUBLISH),
    ]
    pieces = [piece for data in wire for piece in layer.feed(CLIENT, data, EPOCH)]
    assert [(piece.data, piece.text) for piece in pieces] == [
        (CONNECT, False),
        (b"\xc0\x00", True),
        (b"\xc0", True),
        (b"\x00", True),
        (PUBLISH, False),
    ]
    assert rules(layer) == [(CLIENT, "MQTT-6.0.0-1"), (CLIENT, "MQTT-6.0.0-1")]
    note = next(note for note in layer.notes if note.rule)
    assert note.raw[:1] == b"\x81" and "text frame" in note.text
    assert layer.lost == (0, 0)


def test_a_client_that_does_not_offer_mqtt_and_a_server_that_does_not_select_it_are_named() -> None:
    assert rules(open_layer(client_protocols="chat")) == [(CLIENT, "MQTT-6.0.0-3")]
    assert rules(open_layer(client_protocols=None)) == [(CLIENT, "MQTT-6.0.0-3")]
    layer = open_layer(server_protocol=None)
    assert rules(layer) == [(SERVER, "MQTT-6.0.0-4")]
    assert "selected: none" in next(note.text for note in layer.notes if note.rule)
    assert rules(open_layer(client_protocols="mqtt, chat", server_protocol="chat")) == [(SERVER, "MQTT-6.0.0-4")]
    # The server could not select what the client did not offer: the client is at fault only.
    assert rules(open_layer(client_protocols="chat", server_protocol=None)) == [(CLIENT, "MQTT-6.0.0-3")]


def test_masking_in_the_wrong_direction_opcodes_and_close_codes_are_websocket_defects() -> None:
    layer = open_layer()
    assert carried(layer, CLIENT, [frame(CONNECT, mask=None)]) == b""
    assert rules(layer) == [(CLIENT, "websocket-unmasked")]
    assert layer.lost[CLIENT] == len(frame(CONNECT, mask=None))
    layer = open_layer()
    assert carried(layer, SERVER, [frame(CONNACK)]) == b""
    assert rules(layer) == [(SERVER, "websocket-masked")]
    layer = open_layer()
    carried(layer, CLIENT, [frame(b"", 0x3)])
    assert rules(layer) == [(CLIENT, "websocket-opcode")]
    layer = open_layer()
    carried(layer, CLIENT, [frame(CONNECT, rsv=0x40)])
    assert rules(layer) == [(CLIENT, "websocket-opcode")]
    layer = open_layer()
    carried(layer, SERVER, [server_frame((1005).to_bytes(2, "big"), 0x8)])
    assert rules(layer) == [(SERVER, "websocket-close")]
    layer = open_layer()
    carried(layer, CLIENT, [frame(CONNECT[:3], 0x0)])
    assert rules(layer) == [(CLIENT, "websocket-fragments")]


def test_after_a_close_frame_nothing_is_mqtt() -> None:
    layer = open_layer()
    close = frame((1000).to_bytes(2, "big"), 0x8)
    assert carried(layer, CLIENT, [frame(CONNECT) + close + frame(PUBLISH)]) == CONNECT
    assert rules(layer) == []
    assert layer.lost == (len(frame(PUBLISH)), 0)
    assert any(note.rule is None and "Close frame" in note.text for note in layer.notes)


def test_a_refused_upgrade_leaves_no_websocket_connection() -> None:
    layer = WebSocketLayer()
    layer.feed(CLIENT, request(), EPOCH)
    refusal = response(status=b"404 Not Found")
    assert layer.feed(SERVER, refusal, EPOCH) == []
    assert layer.feed(CLIENT, frame(CONNECT), EPOCH) == []
    reasons = [note.text for note in layer.notes if note.rule is None]
    assert reasons and "HTTP 404 Not Found" in reasons[0]
    assert layer.lost == (len(frame(CONNECT)), len(b"not found"))


def test_after_a_gap_the_side_is_lost_and_the_other_goes_on() -> None:
    layer = open_layer()
    assert carried(layer, CLIENT, [frame(CONNECT)[:4]]) == b""
    layer.gap(CLIENT, 100, EPOCH)
    assert layer.feed(CLIENT, frame(PUBLISH), EPOCH) == []
    assert layer.lost == (4 + len(frame(PUBLISH)), 0)
    assert carried(layer, SERVER, [server_frame(CONNACK)]) == CONNACK


def test_a_stack_chains_its_layers() -> None:
    stack = Stack([open_layer()])
    assert b"".join(piece.data for piece in stack.feed(CLIENT, frame(CONNECT), EPOCH)) == CONNECT
    assert stack.name == "websocket" and stack.lost == (0, 0)


def test_the_client_s_first_bytes_choose_the_transport() -> None:
    assert opening_kind(b"GET ") == WEBSOCKET
    assert opening_kind(b"GE") is None
    assert opening_kind(b"\x16\x03\x01\x02") == TLS
    assert opening_kind(b"\x10\x0c") == PLAIN
    assert opening_kind(b"POST") == PLAIN


# -- inside ConnectionAudit ---------------------------------------------------------------------------------------


def audited(turns: list[tuple[int, bytes]], port: int = 8080) -> list:  # type: ignore[type-arg]
    session = writer.TcpSession(server=("10.0.0.2", port))
    packets = [*session.handshake()]
    for side, data in turns:
        packets.append(session.send(side, data))
    packets += [session.fin(0), session.fin(1), session.segment(0)]
    data = writer.pcap_bytes([(EPOCH + i * 10**7, writer.ethernet(p)) for i, p in enumerate(packets)], ETHERNET)
    return audit_records(read_records(lambda: io.BytesIO(data)), options=FlowOptions(broker_ports=frozenset({port})))


def test_a_websocket_connection_is_decoded_and_judged_as_on_plain_tcp() -> None:
    disconnect = codec.encode(codec.Disconnect())
    (audit,) = audited(
        [
            (CLIENT, request()),
            (SERVER, response()),
            (CLIENT, frame(CONNECT) + frame(PUBLISH[:10], fin=False)),
            (SERVER, server_frame(CONNACK)),
            (CLIENT, frame(PUBLISH[10:], 0x0) + frame(disconnect)),
        ]
    )
    assert audit.transport == WEBSOCKET and audit.version == "3.1.1"
    sent = [(event.sender.value, event.frame.raw) for event in audit.events if isinstance(event, Sent)]
    assert [raw for _sender, raw in sent] == [CONNECT, CONNACK, PUBLISH, disconnect]
    assert all(counts.reconciles for counts in audit.counts)
    assert audit.total.stream == audit.total.packets == len(CONNECT + CONNACK + PUBLISH + disconnect)
    result = judge_flow(connection_flow("ws.pcap", audit), AuditOptions().judge_config)
    assert result.violations.data["rule"] == []
    assert result.connection.data["transport"] == ["websocket"]


def test_a_websocket_defect_is_a_violation_row_with_its_side_bytes_and_expectation() -> None:
    (audit,) = audited(
        [
            (CLIENT, request()),
            (SERVER, response(protocol=None)),
            (CLIENT, frame(CONNECT)),
            (SERVER, server_frame(CONNACK)),
            (CLIENT, frame(b"\xc0\x00", 0x1)),
            (SERVER, server_frame(b"\xd0\x00")),
        ]
    )
    result = judge_flow(connection_flow("ws.pcap", audit), AuditOptions().judge_config)
    rows = result.violations.data
    found = set(zip(rows["actor"], rows["rule"], rows["origin"], strict=True))
    # The sender's text frame is one transport row (not a codec row besides); the server that answers the PINGREQ
    # in it with PINGRESP acts on a packet it had to close on: the judge's finding against the recipient.
    assert found == {
        ("server", "MQTT-6.0.0-4", "transport"),
        ("client", "MQTT-6.0.0-1", "transport"),
        ("server", "MQTT-6.0.0-1", "judge"),
    }
    text_row = next(
        row
        for row, (rule, origin) in enumerate(zip(rows["rule"], rows["origin"], strict=True))
        if (rule, origin) == ("MQTT-6.0.0-1", "transport")
    )
    assert rows["evidence"][text_row].startswith("81 82") and "binary" in rows["expected"][text_row]
    assert rows["level"][text_row] == "MUST" and rows["section"][text_row]
    # Nothing is set aside now, and every byte is accounted for.
    assert all(counts.reconciles for counts in audit.counts)
    assert audit.unassessable == ()


def test_tls_without_keys_is_encrypted_not_assessable_with_its_byte_count() -> None:
    hello = b"\x16\x03\x01\x00\x30" + bytes(range(48))
    answer = b"\x16\x03\x03\x00\x20" + bytes(32)
    (audit,) = audited([(CLIENT, hello), (SERVER, answer), (CLIENT, b"\x17\x03\x03\x00\x05hello")], port=8883)
    assert audit.transport == ENCRYPTED and audit.version == ENCRYPTED_VERSION
    assert not audit.frames and not audit.judged
    assert audit.total.stream == audit.total.unassessable == len(hello) + len(answer) + 10
    assert {hole.reason for hole in audit.unassessable} == {ENCRYPTED_REASON}
    assert sorted(hole.length for hole in audit.unassessable) == sorted([len(hello), 10, len(answer)])
    assert handling(ENCRYPTED_VERSION) == ENCRYPTED_REASON
    result = judge_flow(connection_flow("tls.pcap", audit), AuditOptions().judge_config)
    assert result.violations.data["rule"] == [] and result.packets.data["type"] == []


# -- detection ------------------------------------------------------------------------------------------------------


def scanned(turns: list[tuple[int, bytes]], port: int) -> set[int]:
    session = writer.TcpSession(server=("10.0.0.2", port))
    packets = [*session.handshake(), *(session.send(side, data) for side, data in turns)]
    data = writer.pcap_bytes([(EPOCH + i, writer.ethernet(p)) for i, p in enumerate(packets)], ETHERNET)
    from mqttaudit.capture import segments

    scanner = StartScanner()
    for _index, segment in segments(read_records(lambda: io.BytesIO(data))):
        scanner.feed(segment)
    return scanner.proven_ports()


def test_an_upgrade_to_mqtt_over_websocket_proves_its_port() -> None:
    assert scanned([(CLIENT, request())], 8080) == {8080}
    assert scanned([(CLIENT, request("mqttv3.1"))], 9001) == {9001}
    head = request()
    assert scanned([(CLIENT, head[:20]), (CLIENT, head[20:])], 8080) == {8080}  # a head split across segments
    assert scanned([(CLIENT, request("chat"))], 8080) == set()
    assert scanned([(CLIENT, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")], 80) == set()


def test_a_client_hello_proves_the_mqtt_over_tls_port_only() -> None:
    hello = b"\x16\x03\x01\x00\x30" + bytes(48)
    assert scanned([(CLIENT, hello)], 8883) == {8883}
    assert scanned([(CLIENT, hello)], 443) == set()


def test_the_upgrade_recogniser_needs_the_whole_head() -> None:
    assert upgrade_start(request()[:30]) == NEEDS_MORE
    assert upgrade_start(b"GE") == NEEDS_MORE
    assert upgrade_start(request()) == IS_CONNECT
    assert upgrade_start(b"POST / HTTP/1.1\r\n\r\n") == NOT_CONNECT
