"""Transport layers of captures: MB/s of MQTT delivered by the TLS layer (decrypting) and the WebSocket layer
(unwrapping), against plain MQTT framing of the same bytes.

What is measured
    A deterministic (seeded) MQTT stream: a CONNECT, then 20,000 QoS 0 PUBLISH packets of 100 to 1,000 bytes each
    (about 11 MB), written packet by packet as a client writes them. Each transport carries it for real, in memory:

    * TLS: Python's ``ssl`` (OpenSSL) client and server joined by memory BIOs, the client writing a key log
      (``keylog_filename``) and one ``write`` per packet (one record per PUBLISH), the server answering the CONNECT
      with a CONNACK. Three sessions: TLS 1.2 ECDHE-RSA-AES128-GCM-SHA256, TLS 1.2 ECDHE-RSA-CHACHA20-POLY1305 and
      TLS 1.3 with the suite OpenSSL chooses by default. ``mqttaudit.capture.tls.TlsLayer`` decrypts both sides
      with the key log's secrets; the figure counts the client's plaintext.
    * WebSocket: wsproto's ``WSConnection`` client and server do the Upgrade handshake (subprotocol ``mqtt``), then
      each packet is one binary message (``BytesMessage``) from the client (masked frames) and from the server
      (unmasked frames). ``mqttaudit.capture.websocket.WebSocketLayer`` unwraps both sides; the figure counts
      both sides' payloads. wsproto draws each mask from ``os.urandom``: the bytes differ from run to run, the
      work does not.
    * Reference: ``mqttaudit.codec.StreamDecoder`` (from the client) framing the plain MQTT stream.

    Each side's bytes reach the layer in 1,448-byte pieces (one TCP MSS), in the order the two ends sent them,
    as a capture hands them on. The sessions and frames are made and cut before the clock starts. Every run
    checks what came out: each side's pieces are contiguous and equal what that side's application wrote, the
    layer lost nothing and found no defect but the close; the reference frames every packet without a violation.
    So a run cannot measure a wrong answer. Best of ``--repeat`` runs (the median is reported too), wall time
    with ``time.perf_counter`` and CPU time with ``time.process_time``, garbage collected before each, the
    harness's own data frozen (``gc.freeze``), pinned to one CPU where the platform allows.

Target
    On one core, best of the runs: TLS decryption >= 30 MB/s of MQTT for each of the three sessions, WebSocket
    unwrapping >= 20 MB/s (both sides' payloads). On the machine this was written on (AMD EPYC, 2 cores shared
    with other work, Python 3.11, OpenSSL 3.0, cryptography 50, wsproto 1.3, pure-Python codec), two runs of the
    default size gave, busy and quiet: TLS 1.2 AES-128-GCM 73 and 115 MB/s, TLS 1.2 ChaCha20-Poly1305 55 and
    84 MB/s, TLS 1.3 (AES-256-GCM) 59 and 91 MB/s, WebSocket 39 and 60 MB/s, framing alone 83 and 124 MB/s. The
    cost relative to framing held in both: 1.1 to 1.5 times for TLS, 2.1 to 2.2 times for WebSocket. Each target
    is about half the busy figure: room for a slower or loaded machine, and still a tripwire for a layer that
    starts copying its buffer per segment or per record (quadratic in the record or message) or decrypts twice.

How to reproduce
    make bench                                                  # runs this after bench/probe_bench.py
    PYTHONPATH=src .venv/bin/python bench/transport_bench.py --repeat 3
    .venv/bin/python bench/transport_bench.py --packets 5000    # smaller, faster
Results are printed as a Markdown table and written to ``bench/results-transport.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import platform
import random
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, Request

from machine import cpu_model, pin_to_one_cpu  # bench/machine.py
from mqttaudit import codec
from mqttaudit.capture.layers import Layer, Piece
from mqttaudit.capture.tls import KeyLog, TlsLayer
from mqttaudit.capture.websocket import WebSocketLayer

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_JSON = BENCH_DIR / "results-transport.json"
MSS = 1448
#: MB/s of MQTT each transport must deliver on one core (see the module documentation).
TARGET_MBPS = {"tls": 30.0, "websocket": 20.0}
HOSTNAME = "broker.test"
CLIENT, SERVER = 0, 1
TLS12_CIPHERS = ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-CHACHA20-POLY1305")
MB = 1e6

#: The bytes each side sent, flight by flight, in the order the two ends sent them.
Flights = list[tuple[int, bytes]]


# ----------------------------------------------------------------------------------------------------------
# Workload
# ----------------------------------------------------------------------------------------------------------


def mqtt_packets(count: int, seed: int) -> list[bytes]:
    """A CONNECT and ``count`` QoS 0 PUBLISH packets of 100 to 1,000 bytes, drawn from ``seed``."""
    rng = random.Random(seed)
    packets = [codec.encode(codec.Connect(client_id="bench-transport"))]
    for _ in range(count):
        topic = f"fleet/site-{rng.randint(1, 40)}/device-{rng.randint(1, 5000):04d}/telemetry"
        size = rng.randint(100, 1000)
        payload = rng.randbytes(size - len(codec.encode(codec.Publish(topic=topic, payload=b""))))
        packet = codec.encode(codec.Publish(topic=topic, payload=payload))
        if len(packet) > size:  # a two-byte Remaining Length
            packet = codec.encode(codec.Publish(topic=topic, payload=payload[: size - len(packet)]))
        assert 100 <= len(packet) <= 1000, len(packet)
        packets.append(packet)
    return packets


def self_signed(directory: Path) -> tuple[Path, Path]:
    """An RSA key and a certificate for :data:`HOSTNAME` (RSA, so that the ECDHE-RSA suites can be chosen)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOSTNAME)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOSTNAME)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = directory / "broker.key", directory / "broker.pem"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


@dataclass(frozen=True)
class TlsSession:
    """One session's flights, the key log its client wrote, what each application wrote, and the version and
    suite OpenSSL reports."""

    flights: Flights
    keylog: str
    client_wrote: bytes
    server_wrote: bytes
    version: str
    cipher: str


def tls_session(
    packets: Sequence[bytes], connack: bytes, ciphers: str | None, directory: Path, certificate: tuple[Path, Path]
) -> TlsSession:
    """A real session in memory: handshake, the CONNECT answered by ``connack``, then one client write per
    packet, then close_notify from both ends. ``ciphers`` (an OpenSSL TLS 1.2 cipher name) caps the version at
    TLS 1.2; None leaves OpenSSL's defaults (TLS 1.3)."""
    cert_path, key_path = certificate
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_path, key_path)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.load_verify_locations(cert_path)
    if ciphers is not None:
        client_context.maximum_version = ssl.TLSVersion.TLSv1_2
        client_context.set_ciphers(ciphers)
    log = directory / f"keys-{ciphers or 'default'}.log"
    client_context.keylog_filename = str(log)
    to_server, from_client, to_client, from_server = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(to_client, from_client, server_hostname=HOSTNAME)
    server = server_context.wrap_bio(to_server, from_server, server_side=True)
    flights: Flights = []
    server_read = bytearray()

    def carry() -> None:
        sent = from_client.read()
        if sent:
            flights.append((CLIENT, sent))
            to_server.write(sent)
        answered = from_server.read()
        if answered:
            flights.append((SERVER, answered))
            to_client.write(answered)

    for _ in range(6):
        for end in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        carry()
    for index, packet in enumerate(packets):
        client.write(packet)
        carry()
        server_read += _read_all(server)
        if index == 0:
            server.write(connack)
            carry()
            _read_all(client)
    for end in (client, server):
        with contextlib.suppress(ssl.SSLWantReadError):
            end.unwrap()
        carry()
    client_wrote = b"".join(packets)
    assert bytes(server_read) == client_wrote, "the TLS session did not carry what the client wrote"
    version, cipher = client.version() or "", (client.cipher() or ("",))[0]
    return TlsSession(flights, log.read_text(), client_wrote, connack, version, cipher)


def _read_all(end: ssl.SSLObject) -> bytes:
    data = bytearray()
    while True:
        try:
            chunk = end.read(65536)
        except ssl.SSLWantReadError:
            return bytes(data)
        if not chunk:
            return bytes(data)
        data += chunk


def websocket_flights(packets: Sequence[bytes]) -> Flights:
    """wsproto's client and server: the Upgrade handshake offering and selecting ``mqtt``, then each packet as
    one binary message from the client (masked) and one from the server."""
    client, server = WSConnection(ConnectionType.CLIENT), WSConnection(ConnectionType.SERVER)
    flights: Flights = []
    request = client.send(Request(host="127.0.0.1:8080", target="/mqtt", subprotocols=["mqtt"]))
    flights.append((CLIENT, request))
    server.receive_data(request)
    events = list(server.events())
    assert isinstance(events[0], Request), events
    response = server.send(AcceptConnection(subprotocol="mqtt"))
    flights.append((SERVER, response))
    client.receive_data(response)
    accepted = list(client.events())
    assert isinstance(accepted[0], AcceptConnection) and accepted[0].subprotocol == "mqtt", accepted
    flights.append((CLIENT, b"".join(client.send(BytesMessage(data=packet)) for packet in packets)))
    flights.append((SERVER, b"".join(server.send(BytesMessage(data=packet)) for packet in packets)))
    return flights


def segments(flights: Flights, size: int = MSS) -> list[tuple[int, bytes]]:
    """The flights as a capture hands them on: a side's consecutive flights are one stretch of its TCP stream,
    cut in ``size``-byte segments."""
    joined: list[tuple[int, bytearray]] = []
    for side, data in flights:
        if joined and joined[-1][0] == side:
            joined[-1][1].extend(data)
        else:
            joined.append((side, bytearray(data)))
    return [
        (side, bytes(stretch[pos : pos + size])) for side, stretch in joined for pos in range(0, len(stretch), size)
    ]


# ----------------------------------------------------------------------------------------------------------
# Runs
# ----------------------------------------------------------------------------------------------------------


def run_layer(layer: Layer, pieces: Sequence[tuple[int, bytes]]) -> tuple[list[Piece], list[Piece]]:
    """Feeds every segment to ``layer`` and ends both sides; the pieces it carried, per side."""
    out: tuple[list[Piece], list[Piece]] = ([], [])
    feed = layer.feed
    for clock, (side, data) in enumerate(pieces):
        out[side].extend(feed(side, data, clock))
    for side in (CLIENT, SERVER):
        out[side].extend(layer.end(side, len(pieces)))
    return out


def inner(pieces: Sequence[Piece]) -> bytes:
    """The pieces' bytes, checked to be contiguous from offset 0."""
    offset = 0
    for piece in pieces:
        assert piece.offset == offset, f"a piece at {piece.offset}, expected {offset}"
        offset += len(piece.data)
    return b"".join(piece.data for piece in pieces)


def run_framing(pieces: Sequence[bytes]) -> list[int]:
    decoder = codec.StreamDecoder(codec.Direction.FROM_CLIENT)
    feed = decoder.feed
    sizes: list[int] = []
    for data in pieces:
        for frame in feed(data):
            assert frame.packet is not None and not frame.violations, f"bad frame at {frame.offset}"
            sizes.append(frame.length)
    assert not decoder.close(), "bytes left at the end of the stream"
    return sizes


@dataclass
class Case:
    name: str
    transport: str
    plaintext: int  # MQTT bytes delivered per run
    wire: int  # bytes fed per run
    segments: int
    walls: list[float]
    cpus: list[float]
    judged: bool = True
    ratio: float = 0.0  # seconds per MB against framing's

    @property
    def best_wall(self) -> float:
        return min(self.walls)

    @property
    def mbps(self) -> float:
        return self.plaintext / MB / self.best_wall

    @property
    def median_mbps(self) -> float:
        return self.plaintext / MB / statistics.median(self.walls)

    def as_json(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "transport": self.transport,
            "mqtt_bytes": self.plaintext,
            "wire_bytes": self.wire,
            "segments": self.segments,
            "wall_s_best": round(self.best_wall, 6),
            "wall_s_median": round(statistics.median(self.walls), 6),
            "cpu_s_best": round(min(self.cpus), 6),
            "mb_per_s": round(self.mbps, 2),
            "mb_per_s_median": round(self.median_mbps, 2),
            "cost_vs_framing": round(self.ratio, 2),
            "judged": self.judged,
        }


def measure(
    name: str, run: Callable[[], Any], check: Callable[[Any], None], repeat: int
) -> tuple[list[float], list[float]]:
    """Times ``run`` ``repeat`` times (checking each answer with ``check``, off the clock)."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(repeat):
        gc.collect()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        answer = run()
        wall1, cpu1 = time.perf_counter(), time.process_time()
        check(answer)
        del answer
        walls.append(wall1 - wall0)
        cpus.append(cpu1 - cpu0)
    print(f"  {name}: best {min(walls):.3f} s, median {statistics.median(walls):.3f} s", file=sys.stderr)
    return walls, cpus


def tls_case(made: TlsSession, repeat: int) -> Case:
    keylog = KeyLog.parse(made.keylog)
    cut = segments(made.flights)
    name = f"TLS {made.version.removeprefix('TLSv')} {made.cipher}"

    def run() -> tuple[tuple[list[Piece], list[Piece]], list[Any], tuple[int, int]]:
        layer = TlsLayer(keylog, client=CLIENT)
        return run_layer(layer, cut), layer.notes, layer.lost

    def check(answer: Any) -> None:
        out, notes, lost = answer
        assert inner(out[CLIENT]) == made.client_wrote, f"{name}: the client's plaintext differs"
        assert inner(out[SERVER]) == made.server_wrote, f"{name}: the server's plaintext differs"
        assert lost == (0, 0), f"{name}: lost {lost}"
        # Both ends closed with close_notify: one note each, no defect.
        assert sorted(note.side for note in notes) == [CLIENT, SERVER], notes
        assert all(note.rule is None and "close_notify" in note.text for note in notes), notes

    walls, cpus = measure(name, run, check, repeat)
    wire = sum(len(data) for _, data in cut)
    return Case(name, "tls", len(made.client_wrote), wire, len(cut), walls, cpus)


def websocket_case(flights: Flights, stream: bytes, repeat: int) -> Case:
    cut = segments(flights)
    name = "WebSocket, client (masked) and server frames"

    def run() -> tuple[tuple[list[Piece], list[Piece]], list[Any], tuple[int, int]]:
        layer = WebSocketLayer(client=CLIENT)
        return run_layer(layer, cut), layer.notes, layer.lost

    def check(answer: Any) -> None:
        out, notes, lost = answer
        assert inner(out[CLIENT]) == stream, f"{name}: the client's payload differs"
        assert inner(out[SERVER]) == stream, f"{name}: the server's payload differs"
        assert not notes and lost == (0, 0), (notes, lost)

    walls, cpus = measure(name, run, check, repeat)
    wire = sum(len(data) for _, data in cut)
    return Case(name, "websocket", 2 * len(stream), wire, len(cut), walls, cpus)


def framing_case(stream: bytes, packets: int, repeat: int) -> Case:
    cut = [stream[pos : pos + MSS] for pos in range(0, len(stream), MSS)]
    name = "plain MQTT: StreamDecoder framing (reference)"

    def check(sizes: Any) -> None:
        assert len(sizes) == packets and sum(sizes) == len(stream), f"{name}: framed {len(sizes)} packets"

    walls, cpus = measure(name, lambda: run_framing(cut), check, repeat)
    return Case(name, "tcp", len(stream), len(stream), len(cut), walls, cpus, judged=False)


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------


def render_table(cases: Sequence[Case]) -> str:
    lines = [
        "| case | MQTT MB | wire MB | segments | wall s (best) | CPU s (best) | MB/s (best) | MB/s (median) "
        "| cost vs framing |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(
        f"| {c.name} | {c.plaintext / MB:.1f} | {c.wire / MB:.1f} | {c.segments:,} | {c.best_wall:.3f} "
        f"| {min(c.cpus):.3f} | {c.mbps:,.1f} | {c.median_mbps:,.1f} | {c.ratio:.1f}x |"
        for c in cases
    )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--packets", type=int, default=20_000, help="PUBLISH packets in the stream (default 20,000)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each case (default 3)")
    parser.add_argument("--seed", type=int, default=20_240_611, help="seed of the packets")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write the results")
    args = parser.parse_args(argv)
    if args.packets < 1 or args.repeat < 1:
        parser.error("--packets and --repeat must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    pinned = pin_to_one_cpu()
    packets = mqtt_packets(args.packets, args.seed)
    stream = b"".join(packets)
    sizes = [len(packet) for packet in packets[1:]]
    connack = codec.encode(codec.Connack())
    print(f"making {args.packets:,} PUBLISH packets ({len(stream) / MB:.1f} MB, seed {args.seed}) ...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        certificate = self_signed(directory)
        sessions = [tls_session(packets, connack, cipher, directory, certificate) for cipher in (*TLS12_CIPHERS, None)]
    ws_flights = websocket_flights(packets)
    gc.collect()
    gc.freeze()

    print(f"measuring on CPU {pinned}, best of {args.repeat} ...", file=sys.stderr)
    framing = framing_case(stream, len(packets), args.repeat)
    cases = [*(tls_case(made, args.repeat) for made in sessions), websocket_case(ws_flights, stream, args.repeat)]
    for case in (*cases, framing):
        case.ratio = framing.mbps / case.mbps
    rows = [*cases, framing]
    met = all(case.mbps >= TARGET_MBPS[case.transport] for case in cases)

    build = "compiled (mypyc)" if codec.COMPILED else "pure Python"
    versions = _versions()
    print(
        f"## Transport layers: MQTT delivered by TLS decryption and WebSocket unwrapping ({args.packets:,} PUBLISH)\n"
    )
    print(
        f"Python {platform.python_version()}, {ssl.OPENSSL_VERSION}, cryptography {versions['cryptography']}, "
        f"wsproto {versions['wsproto']}, codec build: {build}, CPU: {cpu_model()} (pinned: {pinned})"
    )
    print(
        f"Packets: a CONNECT and {args.packets:,} QoS 0 PUBLISH of {min(sizes):,} to {max(sizes):,} bytes "
        f"(mean {statistics.mean(sizes):,.0f}); fed in {MSS:,}-byte segments. TLS: one record per packet, the "
        "client's plaintext counted; WebSocket: one binary message per packet each way, both sides counted.\n"
    )
    print(render_table(rows))
    status = "met" if met else "NOT MET"
    print(
        f"\nTargets (best of {args.repeat}, one core): TLS >= {TARGET_MBPS['tls']:g} MB/s of MQTT for each session, "
        f"WebSocket >= {TARGET_MBPS['websocket']:g} MB/s:"
    )
    for case in cases:
        verdict = "met" if case.mbps >= TARGET_MBPS[case.transport] else "NOT MET"
        print(f"- {case.name}: {case.mbps:,.1f} MB/s (target {TARGET_MBPS[case.transport]:g}) -> {verdict}")
    print(f"\nAll targets: {status}")

    result = {
        "benchmark": "transport_bench",
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        **versions,
        "codec_build": "compiled" if codec.COMPILED else "pure-python",
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "pinned_cpu": pinned,
        "config": {
            "packets": args.packets,
            "packet_bytes": [min(sizes), max(sizes)],
            "mqtt_bytes": len(stream),
            "segment_bytes": MSS,
            "seed": args.seed,
            "repeat": args.repeat,
        },
        "results": [row.as_json() for row in rows],
        "target": {
            "mb_per_s": TARGET_MBPS,
            "values": {case.name: round(case.mbps, 2) for case in cases},
            "met": met,
        },
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("cryptography", "wsproto")}


if __name__ == "__main__":
    sys.exit(main())
