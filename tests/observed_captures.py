"""Real captures for the observation tests: traffic of real clients recorded with tcpdump, cut and edited with the
project's capture writer, then judged through the pure path of an audit (the capture layer, then ``judge_flow``,
as the pipeline's per-flow stage does).

- Talking: :func:`mosquitto_client` runs Debian's ``mosquitto_pub`` / ``mosquitto_sub``; :class:`RawClient` sends
  encoded packets on a socket where timing or bytes matter; :func:`silent_server` accepts TCP, reads, never writes
  (:class:`SilentServer`).
- Editing: :class:`Recording` holds a capture's records with their TCP segments; :func:`write_capture` writes the
  chosen frames (times may be shifted: that is how a long pause or a late close is made without waiting);
  :func:`bare_ack` is a segment's acknowledgement without its data.
- Judging: :func:`observe` gives one :class:`Observed` connection per client port: its findings, its not-assessable
  rows and the judgement's passed rules.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mqttaudit import codec
from mqttaudit.capture import FlowAudit, FlowOptions, Record, Segment, audit_records, read_records, segments
from mqttaudit.capture.conversation import NOT_JUDGED
from mqttaudit.capture.segments import ACK, FIN, RST, SYN
from mqttaudit.capture.tls import KeyLog
from mqttaudit.capture.writer import PcapWriter, ethernet, ip_tcp
from mqttaudit.judge import JudgeConfig, Judgement
from mqttaudit.judge.conversation import ConversationJudge
from mqttaudit.pipeline.conversations import Flow, FlowResult, connection_flow, judge_flow
from mqttaudit.pipeline.options import AuditOptions
from mqttaudit.probe.brokers import free_port

HOST = "127.0.0.1"
SECOND = 1_000_000_000
#: The judge configuration of an audit (MQTT 5.0 among the supported Protocol Levels).
CONFIG = AuditOptions().judge_config

# -- talking -------------------------------------------------------------------------------------------------------


def mosquitto_client(tool: str, port: int, *args: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    """Runs ``mosquitto_pub`` or ``mosquitto_sub`` against 127.0.0.1:``port`` to completion."""
    command = [tool, "-h", HOST, "-p", str(port), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)


def subscribed_client(port: int, *args: str) -> subprocess.Popen[str]:
    """``mosquitto_sub -d`` started and returned once the broker's SUBACK has reached it (its output line
    buffered, so the debug line shows at once)."""
    command = ["stdbuf", "-oL", "mosquitto_sub", "-h", HOST, "-p", str(port), "-d", *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    timer = threading.Timer(10, process.kill)  # a client that never subscribes fails the test, not hangs it
    timer.start()
    try:
        for line in process.stdout:
            if "received SUBACK" in line:
                return process
    finally:
        timer.cancel()
    process.wait(timeout=5)
    raise AssertionError(f"mosquitto_sub exited with status {process.returncode} before it subscribed")


class RawClient:
    """An MQTT client on a plain socket: sends the packets it is given, encoded by the codec in ``version`` (without
    validation: a test's client may break rules on purpose), and reads the server's packets with a StreamDecoder."""

    def __init__(self, port: int, version: int = 4) -> None:
        self.socket = socket.create_connection((HOST, port), timeout=5)
        self.version = version
        self._decoder = codec.StreamDecoder(codec.Direction.FROM_SERVER, version=version)
        self._received: list[codec.Packet] = []
        #: The client's own port: the connection's name in the capture.
        self.port: int = self.socket.getsockname()[1]

    def send(self, *packets: codec.Packet) -> None:
        """Sends the packets in one write (one TCP segment on loopback)."""
        self.socket.sendall(b"".join(codec.encode(p, version=self.version, validate=False) for p in packets))

    def receive(self, kind: type) -> codec.Packet:
        """Reads until the server sends a packet of type ``kind``; returns it."""
        packet = self.expect(kind)
        if packet is None:
            raise AssertionError(f"the server closed before sending {kind.__name__}")
        return packet

    def expect(self, kind: type) -> codec.Packet | None:
        """Reads until the server sends a packet of type ``kind`` (returned), or closes (None)."""
        while True:
            for index, packet in enumerate(self._received):
                if isinstance(packet, kind):
                    del self._received[: index + 1]
                    return packet
            data = self.socket.recv(65536)
            if not data:
                return None
            self._received += [frame.packet for frame in self._decoder.feed(data) if frame.packet is not None]

    def close(self) -> None:
        self.socket.close()


class SilentServer:
    """A TCP server on a free port of 127.0.0.1 that accepts every connection and reads it to its end, never
    writing a byte (it closes its side once the client has closed)."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, free_port()))
        self._listener.listen()
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        #: Bytes read so far, per connection accepted.
        self._read: list[int] = []
        self._readers: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _address = self._listener.accept()
            except OSError:  # the listener was closed: the server stops
                return
            with self._lock:
                self._read.append(0)
                index = len(self._read) - 1
            reader = threading.Thread(target=self._read_to_end, args=(connection, index), daemon=True)
            reader.start()
            self._readers.append(reader)

    def _read_to_end(self, connection: socket.socket, index: int) -> None:
        with connection:
            while data := connection.recv(65536):
                with self._lock:
                    self._read[index] += len(data)

    def wait_for_bytes(self, connections: int, timeout: float = 5.0) -> None:
        """Returns once ``connections`` connections have each sent something."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if sum(1 for count in self._read if count) >= connections:
                    return
            time.sleep(0.01)
        raise AssertionError(f"fewer than {connections} clients sent bytes within {timeout:g} s")

    def stop(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._acceptor.join(timeout=5)
        for reader in self._readers:
            reader.join(timeout=5)


@contextlib.contextmanager
def silent_server() -> Iterator[SilentServer]:
    """A :class:`SilentServer`, stopped when the block ends."""
    server = SilentServer()
    try:
        yield server
    finally:
        server.stop()


# -- editing -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    """One record of a capture and the TCP segment it holds."""

    record: Record
    segment: Segment

    @property
    def time(self) -> int:
        return self.record[0]

    @property
    def frame(self) -> bytes:
        return self.record[2]

    @property
    def from_port(self) -> int:
        return self.segment[2]

    @property
    def flags(self) -> int:
        return self.segment[7]

    @property
    def payload(self) -> bytes:
        return bytes(self.segment[8])

    @property
    def seq(self) -> int:
        return self.segment[5]

    @property
    def ack(self) -> int:
        return self.segment[6]

    @property
    def is_syn(self) -> bool:
        return bool(self.flags & SYN) and not self.flags & ACK

    @property
    def is_syn_ack(self) -> bool:
        return bool(self.flags & SYN) and bool(self.flags & ACK)

    @property
    def is_close(self) -> bool:
        return bool(self.flags & (FIN | RST))

    def frame_at(self, shift_ns: int = 0) -> tuple[int, bytes]:
        """The record as ``(time, frame)`` for :func:`write_capture`, ``shift_ns`` later."""
        return self.time + shift_ns, self.frame


@dataclass(frozen=True)
class Recording:
    """The records of a tcpdump recording on one broker port, with their segments."""

    linktype: int
    captured: tuple[Captured, ...]
    broker_port: int

    @classmethod
    def read(cls, path: Path, broker_port: int) -> Recording:
        records = {record[4]: record for record in read_records(path)}
        captured = tuple(Captured(records[index], segment) for index, segment in segments(records.values()))
        assert captured, f"{path.name} holds no TCP segment"
        return cls(captured[0].record[1], captured, broker_port)

    def connection(self, client_port: int) -> list[Captured]:
        """Every record of the connection from ``client_port``, both directions, in capture order."""
        found = [c for c in self.captured if client_port in (c.segment[2], c.segment[4])]
        assert found, f"no segment of client port {client_port} in the recording"
        return found

    def from_client(self, client_port: int) -> list[Captured]:
        return [c for c in self.connection(client_port) if c.from_port == client_port]

    def from_server(self, client_port: int) -> list[Captured]:
        return [c for c in self.connection(client_port) if c.from_port != client_port]

    def acknowledging(self, client_port: int, captured: Captured) -> Captured:
        """The first segment of the other side that acknowledges every byte of ``captured``."""
        end = captured.seq + len(captured.payload)
        other = self.from_server(client_port) if captured.from_port == client_port else self.from_client(client_port)
        # Sequence numbers wrap at 2**32: "at or after end" is a difference below 2**31.
        return next(c for c in other if c.flags & ACK and (c.ack - end) % (1 << 32) < 1 << 31)

    def carrying(self, client_port: int, first_byte: int, *, from_client: bool) -> Captured:
        """The first segment of one side whose data starts with a packet of fixed-header byte ``first_byte``."""
        side = self.from_client(client_port) if from_client else self.from_server(client_port)
        return next(c for c in side if c.payload[:1] == bytes([first_byte]))

    @property
    def end(self) -> int:
        return max(c.time for c in self.captured)


def write_capture(path: Path, linktype: int, frames: Iterable[tuple[int, bytes]]) -> Path:
    """A pcap file of ``(time_ns, frame)`` pairs, written in time order by the project's writer."""
    with path.open("wb") as out:
        writer = PcapWriter(out, linktype, nanoseconds=True)
        for time_ns, frame in sorted(frames, key=lambda pair: pair[0]):
            writer.write(time_ns, frame)
    return path


def bare_ack(captured: Captured) -> tuple[int, bytes]:
    """The acknowledgement a data segment also carried, as the bare ACK segment it would be without its data
    (same time, addresses, sequence and acknowledgement numbers). Loopback frames are Ethernet."""
    time_ns, _src, src_port, _dst, dst_port, seq, ack, _flags, _payload = captured.segment
    frame = captured.frame
    packet = ip_tcp(captured.segment[1], captured.segment[3], src_port, dst_port, seq=seq, ack=ack, flags=ACK)
    return time_ns, ethernet(packet, src=frame[6:12], dst=frame[0:6])


# -- judging -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One not-assessable row: the side, the rule, the type of the packet that called for it (None when no
    packet did), the reason's tag and the whole reason."""

    actor: str
    rule: str
    packet: str | None
    tag: str
    reason: str

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        return (self.actor, self.rule, self.packet, self.tag)


@dataclass(frozen=True)
class Observed:
    """One connection of an edited capture: the capture layer's audit, judge_flow's rows, and the judgement."""

    audit: FlowAudit
    flow: Flow
    result: FlowResult
    judgement: Judgement | None

    @property
    def client_port(self) -> int:
        assert self.audit.client is not None
        return self.audit.endpoints[self.audit.client][1]

    @property
    def findings(self) -> set[tuple[str, str]]:
        """(side, statement) of every violation row, the codec's and the judge's."""
        rows = self.result.violations.data
        return set(zip(rows["actor"], rows["rule"], strict=True))

    def details(self, rule: str) -> list[str]:
        rows = self.result.violations.data
        return [detail for r, detail in zip(rows["rule"], rows["detail"], strict=True) if r == rule]

    @property
    def rows(self) -> list[Row]:
        """Every not-assessable row, with the packet type of the event it names."""
        data = self.result.not_assessable.data
        return [
            Row(actor, rule, self.packet_type(event), tag, reason)
            for actor, rule, event, tag, reason in zip(
                data["actor"], data["rule"], data["event"], data["tag"], data["reason"], strict=True
            )
        ]

    @property
    def undecided(self) -> set[tuple[str, str, str | None, str]]:
        """(side, statement, packet type of its event, reason tag) of every not-assessable row."""
        return {row.key for row in self.rows}

    def reasons(self, rule: str, actor: str | None = None) -> list[str]:
        return [row.reason for row in self.rows if row.rule == rule and actor in (None, row.actor)]

    def packet_type(self, event: int | None) -> str | None:
        """The packets table's type of event ``event``; for an event that is no packet its kind ("Lost", "Quiet",
        "Closed"); None for no event."""
        if event is None:
            return None
        data = self.result.packets.data
        types = dict(zip(data["event"], data["type"], strict=True))
        return types[event] if event in types else type(self.flow.events[event]).__name__

    @property
    def types(self) -> list[str | None]:
        """The type of every packet, in order."""
        return list(self.result.packets.data["type"])

    @property
    def connection_row(self) -> dict[str, object]:
        return {name: values[0] for name, values in self.result.connection.data.items()}

    @property
    def passed(self) -> frozenset[str]:
        assert self.judgement is not None, "a connection of a version not judged has no judgement"
        return self.judgement.passed


def as_flow(name: str, audit: FlowAudit) -> Flow:
    """The Flow the pipeline builds from a FlowAudit, without frame numbers."""
    return connection_flow(name, audit)


def observe(
    path: Path, broker_port: int, config: JudgeConfig = CONFIG, *, keylog: KeyLog | None = None
) -> dict[int, Observed]:
    """Every connection of the capture at ``path`` on ``broker_port``, judged, by client port; its TLS connections
    decrypted with ``keylog``'s secrets when given."""
    found: dict[int, Observed] = {}
    options = FlowOptions(broker_ports=frozenset({broker_port}), keylog=keylog)
    for audit in audit_records(read_records(path), options=options):
        flow = as_flow(path.name, audit)
        judgement = None
        if flow.version not in NOT_JUDGED:
            judge = ConversationJudge(config, conversation=flow.flow, mid_stream=flow.mid_stream)
            for event in flow.events:
                judge.feed(event)
            judgement = judge.finish()
        # Every captured byte of the connection is a packet, malformed, a gap or set aside with a reason.
        assert audit.total.reconciles and all(counts.reconciles for counts in audit.counts), audit.total
        observed = Observed(audit, flow, judge_flow(flow, config), judgement)
        assert observed.client_port not in found, f"two connections from port {observed.client_port}"
        found[observed.client_port] = observed
    return found
