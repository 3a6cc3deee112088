"""The pieces of the tests' hand-written captures: one broker, two clients, raw IP, written with the project's
capture writer (``mqttaudit.capture.writer``) at a fixed start time, so a report's dates and times are known; and
a capture read by the audit's reading stage without Spark."""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mqttaudit.capture import writer

if TYPE_CHECKING:
    import pyarrow as pa

    from mqttaudit.capture import Chunk
    from mqttaudit.pipeline.options import AuditOptions

#: 2026-05-28 20:26:40 UTC.
CRAFTED_START = 1_780_000_000
BROKER = ("10.0.0.1", 1883)
CLIENT_A = ("10.0.0.5", 50122)
CLIENT_B = ("10.0.0.6", 40001)
CONNACK_ACCEPTED = bytes.fromhex("20 02 00 00")
#: PUBLISH QoS 1, id 7, to 'a/b', payload 'hi'.
PUBLISH_QOS1 = bytes.fromhex("32 09 00 03 61 2f 62 00 07 68 69")
#: Linktype 101: raw IP, the packets as the capture writer's TCP sessions give them.
RAW_IP = 101


def connect(client_id: bytes) -> bytes:
    """CONNECT 'MQTT' level 4, clean session, Keep Alive 60."""
    body = bytes.fromhex("00 04") + b"MQTT" + bytes.fromhex("04 02 00 3c") + len(client_id).to_bytes(2, "big")
    return bytes([0x10, len(body) + len(client_id)]) + body + client_id


def sessions() -> tuple[writer.TcpSession, writer.TcpSession]:
    """Client A's and client B's TCP sessions with the broker (distinct initial sequence numbers)."""
    return writer.TcpSession(CLIENT_A, BROKER), writer.TcpSession(CLIENT_B, BROKER, client_isn=7000, server_isn=9000)


def write_capture(path: Path, records: Iterable[tuple[float, bytes]]) -> Path:
    """Writes ``records`` (seconds after :data:`CRAFTED_START`, a raw IP packet) to the pcap file ``path``, in time
    order, with nanosecond times."""
    frames = sorted((round((CRAFTED_START + offset) * 1e9), packet) for offset, packet in records)
    path.write_bytes(writer.pcap_bytes(frames, linktype=RAW_IP))
    return path


def chunk_rows(captures: Sequence[tuple[Path, Sequence[Chunk]]], out_dir: str) -> list[dict[str, object]]:
    """The chunks of each capture (``(path, chunks)``) as the audit hands them to its engine
    (:data:`~mqttaudit.pipeline.tables.CHUNK_SCHEMA` rows), the tables' folders made in ``out_dir`` first."""
    from mqttaudit.pipeline import tables
    from mqttaudit.pipeline.task_files import TRANSCRIPTS_DIR

    for table in (*tables.TABLE_COLUMNS, TRANSCRIPTS_DIR):
        (Path(out_dir) / table).mkdir(parents=True, exist_ok=True)
    return [
        {"capture": path.name, "path": str(path), "chunk": pickle.dumps(chunk)}
        for path, chunks in captures
        for chunk in chunks
    ]


def ordered_runs(captures: Sequence[tuple[Path, Sequence[Chunk]]], options: AuditOptions) -> pa.Table:
    """The audit's reading stage without Spark: the chunks of each capture (``(path, chunks)``, :func:`chunk_rows`)
    read and ordered for the judging stage by the local engine (:func:`~mqttaudit.pipeline.local.ordered_runs`)."""
    from mqttaudit.pipeline import local

    return local.ordered_runs(chunk_rows(captures, options.out_dir), options)
