"""The TLS layer of captures: real TLS sessions (OpenSSL through Python's ``ssl``, and the ``openssl`` command for a
KeyUpdate) decrypted with the key log their client wrote, fed in segments of every size."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import json
import pickle
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqttaudit import codec
from mqttaudit.capture import audit_records, read_records, tls, writer
from mqttaudit.capture.conversation import NOT_MQTT_VERSION, FlowAudit, FlowOptions, handling
from mqttaudit.capture.layers import NOT_MQTT_REASON, Piece
from mqttaudit.capture.link import ETHERNET
from mqttaudit.capture.tls import KeyLog, TlsLayer
from mqttaudit.codec import Direction, PacketType, StreamDecoder
from mqttaudit.judge import Sent
from mqttaudit.probe.brokers import free_port

from .tls_sessions import TLS13_SUITES, Session, certificates, session, tls13_session

CLIENT_PACKETS = [
    codec.encode(codec.Connect(client_id="tls-client", keep_alive=30)),
    codec.encode(codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="sensors/#", qos=1)])),
    codec.encode(codec.Publish(topic="sensors/t", payload=b"21.5" * 300, qos=1, packet_id=2)),
    codec.encode(codec.Pingreq()),
]
SERVER_PACKETS = [
    codec.encode(codec.Connack()),
    codec.encode(codec.Suback(packet_id=1, return_codes=[1])),
    codec.encode(codec.Puback(packet_id=2)),
    codec.encode(codec.Pingresp()),
]
TLS12_CIPHERS = {
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}
_SESSIONS: dict[str, Session] = {}


def made(name: str) -> Session:
    """One session per suite for the whole module (a TLS 1.3 suite costs a child process)."""
    if name not in _SESSIONS:
        if name in TLS12_CIPHERS:
            _SESSIONS[name] = session(CLIENT_PACKETS, SERVER_PACKETS, maximum=ssl.TLSVersion.TLSv1_2, ciphers=name)
        else:
            _SESSIONS[name] = tls13_session(name, CLIENT_PACKETS, SERVER_PACKETS)
    return _SESSIONS[name]


def run(layer: TlsLayer, made: Session, cuts: tuple[list[int], list[int]] | None = None) -> tuple[bytes, bytes]:
    """Feeds both streams, interleaved segment by segment (the client's first), cut at ``cuts`` (default: whole),
    and returns each side's inner bytes, checking that the pieces are contiguous and their times are the
    feeding ones."""
    streams = (made.client_stream, made.server_stream)
    segments = []
    for side, stream in enumerate(streams):
        bounds = sorted({0, len(stream), *(c for c in (cuts[side] if cuts else []) if 0 < c < len(stream))})
        segments.append([stream[a:b] for a, b in itertools.pairwise(bounds)])
    pieces: tuple[list[Piece], list[Piece]] = ([], [])
    clock = 0
    for index in range(max(len(segments[0]), len(segments[1]))):
        for side in (0, 1):
            if index < len(segments[side]):
                clock += 1
                fed = layer.feed(side, segments[side][index], clock)
                assert all(piece.time == clock for piece in fed)
                pieces[side].extend(fed)
    for side in (0, 1):
        pieces[side].extend(layer.end(side, clock + 1))
    inner = []
    for side_pieces in pieces:
        offset = 0
        for piece in side_pieces:
            assert piece.offset == offset and piece.data
            offset += len(piece.data)
        inner.append(b"".join(piece.data for piece in side_pieces))
    return inner[0], inner[1]


def packet_types(data: bytes, direction: Direction) -> list[PacketType]:
    frames = StreamDecoder(direction).feed(data)
    assert all(frame.packet is not None and not frame.violations for frame in frames)
    return [PacketType(frame.raw[0] >> 4) for frame in frames]


@pytest.mark.parametrize("name", [*TLS12_CIPHERS, *TLS13_SUITES])
def test_each_suite_decrypts_to_what_the_applications_wrote(name: str) -> None:
    made_session = made(name)
    expected_suite = TLS12_CIPHERS.get(name, name)
    assert made_session.cipher == name
    assert made_session.server_read == made_session.client_wrote  # the session really carried the packets
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    client, server = run(layer, made_session)
    assert layer.description == ("TLS 1.2, " if name in TLS12_CIPHERS else "TLS 1.3, ") + expected_suite
    assert client == made_session.client_wrote
    assert server == made_session.server_wrote
    assert packet_types(client, Direction.FROM_CLIENT) == [
        PacketType.CONNECT,
        PacketType.SUBSCRIBE,
        PacketType.PUBLISH,
        PacketType.PINGREQ,
    ]
    assert packet_types(server, Direction.FROM_SERVER)[0] is PacketType.CONNACK
    # Both sides ended with close_notify: a note each, nothing lost.
    assert layer.lost == (0, 0)
    assert sorted(note.side for note in layer.notes) == [0, 1]
    assert all("close_notify" in note.text and note.rule is None for note in layer.notes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from([*TLS12_CIPHERS, "TLS_AES_128_GCM_SHA256"]),
    client_cuts=st.lists(st.integers(min_value=1, max_value=3000), max_size=40),
    server_cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=40),
    small=st.booleans(),
)
def test_segments_of_every_size(name: str, client_cuts: list[int], server_cuts: list[int], small: bool) -> None:
    made_session = made(name)
    if small:  # every byte its own segment, up to the first application record and a little beyond
        client_cuts += list(range(1, 700))
        server_cuts += list(range(1, 300))
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    client, server = run(layer, made_session, (client_cuts, server_cuts))
    assert (client, server) == (made_session.client_wrote, made_session.server_wrote)
    assert layer.lost == (0, 0)


def test_the_server_side_may_come_first() -> None:
    """The client's encrypted records wait for the ServerHello when the server's bytes are fed later."""
    made_session = made("ECDHE-RSA-AES128-GCM-SHA256")
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    early = layer.feed(0, made_session.client_stream, 1)
    assert early == []
    server = layer.feed(1, made_session.server_stream, 2) + layer.end(1, 3)
    client = layer.end(0, 4)
    assert b"".join(p.data for p in client) == made_session.client_wrote
    assert b"".join(p.data for p in server) == made_session.server_wrote


def test_a_key_log_without_the_session_stops_both_sides() -> None:
    made_session = made("TLS_AES_128_GCM_SHA256")
    other = session([b"x"], [b"y"])  # another session: its key log lacks this one's client random
    layer = TlsLayer(KeyLog.parse(other.keylog), client=0)
    client, server = run(layer, made_session)
    assert client == server == b""
    assert len(layer.notes) == 2
    assert all("the key log has no" in note.text and note.rule is None for note in layer.notes)
    assert layer.client_random is not None and layer.client_random.hex() in layer.notes[0].text
    # The server's stream stops after its ServerHello; the client's (fed first, whole) after its ClientHello and
    # its middlebox-compatibility ChangeCipherSpec, at its first encrypted record, which waited for the ServerHello.
    server_hello = 5 + int.from_bytes(made_session.server_stream[3:5], "big")
    first_encrypted = next(o for o, kind, _ in _records(made_session.client_stream) if kind == tls.APPLICATION_DATA)
    assert layer.lost == (
        len(made_session.client_stream) - first_encrypted,
        len(made_session.server_stream) - server_hello,
    )


def test_a_wrong_secret_fails_to_decrypt() -> None:
    made_session = made("ECDHE-RSA-AES256-GCM-SHA384")
    [random_hex] = [line.split()[1] for line in made_session.keylog.splitlines() if line.startswith("CLIENT_RANDOM")]
    wrong = KeyLog.parse(f"CLIENT_RANDOM {random_hex} {'ab' * 48}\n")
    layer = TlsLayer(wrong, client=0)
    client, server = run(layer, made_session)
    assert client == server == b""
    assert len(layer.notes) == 2
    assert all("does not decrypt" in note.text for note in layer.notes)
    assert "ab" * 48 not in repr(layer.notes)


@pytest.mark.parametrize("broken", ["a wrong secret", "no ServerHello"])
def test_a_session_the_key_log_names_that_cannot_be_decrypted_is_not_decrypted_with_its_reason(broken: str) -> None:
    made_session = made("ECDHE-RSA-AES128-GCM-SHA256")
    if broken == "a wrong secret":
        [random_hex] = [line.split()[1] for line in made_session.keylog.splitlines() if "CLIENT_RANDOM" in line]
        made_session = dataclasses.replace(made_session, keylog=f"CLIENT_RANDOM {random_hex} {'ab' * 48}\n")
        label, said = tls.TAG_MISMATCH, "its authentication tag does not match"
    else:
        made_session = dataclasses.replace(made_session, server_stream=b"")
        label, said = tls.NO_SERVER_HELLO, "the ClientHello and ServerHello were not both read"
    audit = audited_tls(made_session, named=True)
    assert (audit.version, audit.transport, audit.frames) == (label, "tls", ())
    assert handling(audit.version) == tls.NOT_DECRYPTED_REASONS[label]
    assert not audit.judged
    assert said in audit.layer_notes[0].text
    client = audit.counts[0]
    assert client.unassessable == client.stream > 0 and client.packets == 0


def test_records_that_wait_for_a_server_hello_that_never_comes_stop_at_the_cap_in_bounded_memory() -> None:
    """A client's ClientHello, then 128 MB of application data records and no ServerHello: the layer holds at most
    :data:`~mqttaudit.capture.tls.MAX_WAITING` bytes, then stops the side with the cap named; every byte is counted
    as not assessable, and the connection is not decrypted. Peak memory measured in a process of its own: it grew
    by 12 MB for 200 MB of records (by 213 MB when the layer held the whole stream)."""
    client_stream = made("ECDHE-RSA-AES128-GCM-SHA256").client_stream
    hello = client_stream[: 5 + int.from_bytes(client_stream[3:5], "big")]
    ran = subprocess.run(
        [sys.executable, "-m", "tests.tls_waiting_flow", hello.hex(), "128"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).parent.parent,
    )
    said = json.loads(ran.stdout)
    assert said["version"] == tls.NO_SERVER_HELLO
    assert said["unassessable"] == said["records_bytes"]
    [note] = said["notes"]
    assert note.startswith(f"no ServerHello within {tls.MAX_WAITING:,} bytes of this side's records")
    assert said["grown_kb"] < 48 * 1024, said


def _records(stream: bytes) -> list[tuple[int, int, int]]:
    """(offset, content type, length with header) of each record of a stream."""
    found, offset = [], 0
    while offset < len(stream):
        length = 5 + int.from_bytes(stream[offset + 3 : offset + 5], "big")
        found.append((offset, stream[offset], length))
        offset += length
    return found


@pytest.mark.parametrize("name", ["ECDHE-RSA-CHACHA20-POLY1305", "TLS_AES_256_GCM_SHA384"])
def test_a_corrupted_record_stops_its_side_with_the_byte_count(name: str) -> None:
    made_session = made(name)
    records = [r for r in _records(made_session.client_stream) if r[1] == tls.APPLICATION_DATA]
    offset, _kind, length = records[-3]  # an application record (TLS 1.3: not the client's Finished either)
    broken = bytearray(made_session.client_stream)
    broken[offset + length - 1] ^= 0x01  # a tag byte
    corrupted = Session(**{**made_session.__dict__, "client_stream": bytes(broken)})
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    client, server = run(layer, corrupted)
    assert server == made_session.server_wrote
    assert made_session.client_wrote.startswith(client) and len(client) < len(made_session.client_wrote)
    [note] = [note for note in layer.notes if note.side == 0]
    assert f"the record at byte {offset} of the stream" in note.text and "does not decrypt" in note.text
    assert note.raw == bytes(broken[offset : offset + 5])
    assert layer.lost[0] == len(broken) - offset
    assert layer.lost[1] == 0


def test_a_gap_stops_the_side() -> None:
    made_session = made("ECDHE-RSA-AES128-GCM-SHA256")
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    half = len(made_session.client_stream) // 2
    layer.feed(1, made_session.server_stream, 1)
    first = layer.feed(0, made_session.client_stream[:half], 2)
    layer.gap(0, 100, 3)
    assert layer.feed(0, made_session.client_stream[half + 100 :], 4) == []
    layer.end(0, 5)
    [note] = [note for note in layer.notes if note.side == 0]
    assert "100 bytes of the TLS stream were not captured" in note.text
    held = half - sum(
        length for offset, _kind, length in _records(made_session.client_stream) if offset + length <= half
    )
    assert layer.lost[0] == held + len(made_session.client_stream) - half - 100
    assert made_session.client_wrote.startswith(b"".join(p.data for p in first))


def test_bytes_that_are_no_tls_record_stop_the_side() -> None:
    made_session = made("ECDHE-RSA-AES128-GCM-SHA256")
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    layer.feed(1, made_session.server_stream, 1)
    layer.feed(0, made_session.client_stream[:-31] + b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00", 2)
    layer.end(0, 3)
    assert any("no TLS record at byte" in note.text for note in layer.notes if note.side == 0)


def test_an_unsupported_cipher_suite_is_said() -> None:
    cbc = session([b"a"], [b"b"], maximum=ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-RSA-AES128-SHA256")
    layer = TlsLayer(KeyLog.parse(cbc.keylog), client=0)
    assert run(layer, cbc) == (b"", b"")
    assert layer.notes and all("cipher suite 0xc027 is not decrypted" in note.text for note in layer.notes)


def test_hello_helpers() -> None:
    made_session = made("TLS_AES_128_GCM_SHA256")
    stream = made_session.client_stream
    assert tls.starts_tls(stream) and not tls.starts_tls(CLIENT_PACKETS[0])
    random = tls.hello_client_random(stream[:43])
    assert random is not None and random in KeyLog.parse(made_session.keylog)
    assert tls.hello_client_random(stream[:42]) is None


# -- key logs -----------------------------------------------------------------------------------------------------

RANDOM = "11" * 32
MASTER = "5e" * 48
TRAFFIC = "7a" * 32


def test_key_log_lines() -> None:
    text = "\n".join(
        [
            "# a comment",
            "",
            f"CLIENT_RANDOM {RANDOM} {MASTER}",
            f"CLIENT_HANDSHAKE_TRAFFIC_SECRET {'22' * 32} {TRAFFIC}",
            f"EXPORTER_SECRET {'22' * 32} {TRAFFIC}",
            f"CLIENT_EARLY_TRAFFIC_SECRET {'22' * 32} {TRAFFIC}",
            f"SOME_FUTURE_LABEL {'22' * 32} {TRAFFIC}",
            f"CLIENT_RANDOM {RANDOM[:-2]} {MASTER}",  # line 8: short random
            f"CLIENT_RANDOM {'33' * 32} {MASTER[:-2]}",  # line 9: short secret
            f"SERVER_TRAFFIC_SECRET_0 {'33' * 32} zz{TRAFFIC[2:]}",  # line 10: not hex
            f"CLIENT_RANDOM {RANDOM}",  # line 11: two fields
            f"CLIENT_RANDOM {RANDOM} {'5f' * 48}",  # line 12: a second, different master secret
        ]
    )
    keylog = KeyLog.parse(text)
    assert len(keylog) == 2 and keylog.usable_lines == 2
    secrets = keylog.secrets_for(bytes.fromhex(RANDOM))
    assert secrets is not None and secrets.master_secret == bytes.fromhex(MASTER)
    assert secrets.present == ("CLIENT_RANDOM",)
    assert [problem.line for problem in keylog.problems] == [8, 9, 10, 11, 12]
    shown = repr(keylog) + repr(secrets) + " ".join(str(problem) for problem in keylog.problems)
    for secret in (MASTER, TRAFFIC, TRAFFIC[2:], MASTER[:-2], "5f" * 48):
        assert secret not in shown
    assert "line 9: CLIENT_RANDOM: the secret is 47 bytes, not 48" in shown
    copy = pickle.loads(pickle.dumps(keylog))
    assert copy.sessions == keylog.sessions and copy.problems == keylog.problems


def test_without_cryptography_the_hint_is_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(tls.TlsUnavailable, match=r"pip install 'mqttaudit\[tls\]'"):
        TlsLayer(KeyLog(), client=0)
    KeyLog.parse(f"CLIENT_RANDOM {RANDOM} {MASTER}")  # reading a key log needs no cipher


# -- KeyUpdate ----------------------------------------------------------------------------------------------------


class _Relay:
    """A TCP relay on 127.0.0.1 that keeps what each side sent: the record streams of a session between two
    programs."""

    def __init__(self, target: int) -> None:
        self.port = free_port()
        self.streams = (bytearray(), bytearray())
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._target = target
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        inbound, _ = self._listener.accept()
        outbound = socket.create_connection(("127.0.0.1", self._target))
        pumps = [
            threading.Thread(target=self._pump, args=(inbound, outbound, self.streams[0]), daemon=True),
            threading.Thread(target=self._pump, args=(outbound, inbound, self.streams[1]), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        inbound.close()
        outbound.close()
        self._listener.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, kept: bytearray) -> None:
        while data := source.recv(65536):
            kept += data
            sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the KeyUpdate")
def test_a_key_update_is_followed(tmp_path: Path) -> None:
    """``openssl s_client`` sends a KeyUpdate asking for one back when it reads "K" on a line (Python 3.11's ssl
    cannot); both sides' records after it decrypt with the next secrets."""
    ca, leaf = certificates()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "leaf.pem"))
    port = free_port()
    server = subprocess.Popen(
        ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(tmp_path / "leaf.pem"), "-tls1_3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = None
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "s_server did not listen"
                time.sleep(0.1)
        relay = _Relay(port)
        keylog = tmp_path / "keys.log"
        client = subprocess.Popen(
            [
                "openssl",
                "s_client",
                "-connect",
                f"127.0.0.1:{relay.port}",
                "-tls1_3",
                "-CAfile",
                str(tmp_path / "ca.pem"),
                "-servername",
                "broker.test",
                "-keylogfile",
                str(keylog),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert client.stdin is not None and server.stdin is not None
        for line in (b"before the update\n", b"K\n", b"after the update\n"):
            time.sleep(0.5)
            client.stdin.write(line)
            client.stdin.flush()
        time.sleep(0.5)
        server.stdin.write(b"the server after the update\n")
        server.stdin.flush()
        time.sleep(0.5)
        client.stdin.close()
        client.wait(10)
        relay.join(10)
    finally:
        for process in (client, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    made_session = Session(
        bytes(relay.streams[0]), bytes(relay.streams[1]), keylog.read_text(), b"", b"", b"", b"", "", ""
    )
    layer = TlsLayer(KeyLog.parse(made_session.keylog), client=0)
    client_bytes, server_bytes = run(layer, made_session)
    assert client_bytes == b"before the update\nafter the update\n"
    assert server_bytes == b"the server after the update\n"
    assert layer.lost == (0, 0)
    assert all("close_notify" in note.text for note in layer.notes)


# -- a decrypted connection that carries no MQTT ---------------------------------------------------------------------

HTTP_REQUEST = b"GET / HTTP/1.1\r\nHost: broker.test\r\n\r\n"
HTTP_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
WS_UPGRADE = (
    b"GET /chat HTTP/1.1\r\nHost: broker.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
)


def audited_tls(made_session: Session, *, named: bool, port: int = 443) -> FlowAudit:
    """The one connection of a capture of ``made_session`` over TCP (each side's records in segments of 500 bytes,
    the client's first), audited with the session's key log; ``named``: the port was named with ``--ports``."""
    tcp = writer.TcpSession(server=("10.0.0.2", port))
    packets = [*tcp.handshake()]
    streams = (made_session.client_stream, made_session.server_stream)
    pieces = [[stream[at : at + 500] for at in range(0, len(stream), 500)] for stream in streams]
    for index in range(max(len(pieces[0]), len(pieces[1]))):
        packets += [tcp.send(side, pieces[side][index]) for side in (0, 1) if index < len(pieces[side])]
    packets += [tcp.fin(0), tcp.fin(1), tcp.segment(0)]
    data = writer.pcap_bytes([(10**18 + i * 10**7, writer.ethernet(p)) for i, p in enumerate(packets)], ETHERNET)
    options = FlowOptions(
        broker_ports=frozenset({port}), keylog=KeyLog.parse(made_session.keylog), mqtt_ports_named=named
    )
    (audit,) = audit_records(read_records(lambda: io.BytesIO(data)), options=options)
    return audit


@pytest.mark.parametrize("client_first", [HTTP_REQUEST, WS_UPGRADE, b"\x10\x02\x00\x00"])
def test_a_decrypted_stream_that_starts_with_no_mqtt_is_not_mqtt_on_a_port_nobody_named(client_first: bytes) -> None:
    made_session = session([client_first], [HTTP_RESPONSE])
    audit = audited_tls(made_session, named=False)
    assert audit.transport == "tls" and audit.version == NOT_MQTT_VERSION and not audit.judged
    assert not audit.frames and not any(isinstance(event, Sent) for event in audit.events)
    assert {hole.reason for hole in audit.unassessable} == {NOT_MQTT_REASON}
    assert all(counts.reconciles for counts in audit.counts)
    assert audit.counts[0].stream == audit.counts[0].unassessable == len(client_first)
    assert audit.counts[1].unassessable == len(HTTP_RESPONSE)
    assert handling(NOT_MQTT_VERSION) == NOT_MQTT_REASON
    # On a port named with --ports the user said it is MQTT: read as a TCP stream at its start is (an HTTP GET by
    # the WebSocket layer, which says what it found; anything else by the MQTT framing).
    named = audited_tls(made_session, named=True)
    assert named.version != NOT_MQTT_VERSION and NOT_MQTT_REASON not in {hole.reason for hole in named.unassessable}
    assert named.layer_notes if client_first.startswith(b"GET ") else named.frames


def test_a_decrypted_stream_that_starts_with_a_connect_is_mqtt_either_way() -> None:
    made_session = made("ECDHE-RSA-AES128-GCM-SHA256")
    for named in (False, True):
        audit = audited_tls(made_session, named=named, port=8884)
        assert audit.transport == "tls" and audit.version == "3.1.1" and audit.judged
        sent = [event.frame.raw for event in audit.events if isinstance(event, Sent)]
        assert sorted(sent) == sorted(CLIENT_PACKETS + SERVER_PACKETS)
        assert not audit.unassessable and all(counts.reconciles for counts in audit.counts)


def test_a_connect_split_across_records_still_proves_the_inner_stream() -> None:
    connect = CLIENT_PACKETS[0]
    made_session = session([connect[:3], connect[3:]], [SERVER_PACKETS[0]])
    audit = audited_tls(made_session, named=False)
    assert audit.version == "3.1.1" and [f.frame.raw for f in audit.frames] == [connect, SERVER_PACKETS[0]]
