"""Which TCP ports carry MQTT, when ``--ports`` does not say: a cheap first pass over the chunks of the captures
(record headers and TCP headers, and the first bytes of streams) finds the server ports on which a stream starts
with a CONNECT, an Upgrade to MQTT over WebSocket, or a TLS ClientHello (to port 8883, or of a session in the key
log) (:mod:`mqttaudit.capture.detect`); the reading stage then keeps the flows on those ports and on the IANA MQTT
port, and counts the other TCP flows per port without keeping their segments.

Also: the summary's ``detection`` section, and the sentence that says an audit found no MQTT connection.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mqttaudit.capture import CaptureError, Chunk, read_chunk, segments
from mqttaudit.capture.conversation import ENCRYPTED_VERSION, NOT_DECODED, NOT_MQTT_VERSION
from mqttaudit.capture.detect import BY_CONNECT, KNOWN_MQTT_PORTS, StartScanner, stronger

from . import sources
from .options import AuditOptions
from .tables import CHUNK_SCHEMA, LOOSE_STARTS_SCHEMA, STARTS_SCHEMA, ddl
from .worker_gc import tune_gc

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Ports listed in the summary's ``other_tcp`` (by frames) and named in the "no MQTT connection" sentence.
TOP_PORTS = 10
NAMED_PORTS = 3

#: Tasks per core of the first pass (its work per chunk is small: fewer, larger tasks cost less to schedule).
PASS_TASKS_PER_CORE = 4

CONNECT_AT_START = BY_CONNECT
KNOWN_PORT = "known MQTT port"
REQUESTED = "--ports"


def start_scanner(
    tls_randoms: Container[bytes] = frozenset(),
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`scan_starts` with the sessions of the key log shipped to the tasks: its :class:`~.keylog.KeyLogFile`,
    which holds neither a secret nor a client random."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return scan_starts(batches, tls_randoms)

    return run


def scan_starts(
    batches: Iterator[pa.RecordBatch], tls_randoms: Container[bytes] = frozenset()
) -> Iterator[pa.RecordBatch]:
    """Chunk descriptors in (``mapInArrow``), :data:`STARTS_SCHEMA` rows out. A chunk that cannot be read is
    scanned as far as it can be: the reading stage reports it."""
    tune_gc()
    for batch in batches:
        for path, blob in zip(batch.column("path").to_pylist(), batch.column("chunk").to_pylist(), strict=True):
            chunk: Chunk = pickle.loads(blob)
            scanner = StartScanner(tls_randoms)
            try:
                for _index, segment in segments(read_chunk(sources.opener(path), chunk)):
                    scanner.feed(segment)
            except (CaptureError, OSError, sources.AuditInputError):
                pass
            rows: dict[str, list[Any]] = {name: [] for name in STARTS_SCHEMA.names}
            for port, how in sorted(scanner.proofs().items()):
                proof = (("kind", "proven"), ("direction", None), ("seq", None), ("port", port), ("how", how))
                for name, value in proof:
                    rows[name].append(value)
            for item in scanner.loose():
                for name in STARTS_SCHEMA.names:
                    rows[name].append(getattr(item, name))
            if rows["kind"]:
                yield pa.RecordBatch.from_pydict(rows, schema=STARTS_SCHEMA)


def proven_ports(
    session: SparkSession, chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes] = frozenset()
) -> frozenset[int]:
    """The server ports :func:`port_proofs` finds."""
    return frozenset(port_proofs(session, chunk_rows, tls_randoms))


def port_proofs(
    session: SparkSession, chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes] = frozenset()
) -> dict[int, str]:
    """The server ports on which some stream of the captures starts with a proving start (a CONNECT, an Upgrade to
    MQTT over WebSocket, a ClientHello to port 8883 or of a session whose client random is in ``tls_randoms``),
    each with the name of its strongest proof: decided in a chunk, or by a start in one chunk at the stream start a
    handshake in another announced.

    The chunks' stream starts (one per handshake whose first data byte another chunk holds) stay on the executors;
    only those some loose CONNECT needs are looked up, in a second query, when there is such a CONNECT."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    parallelism = max(session.sparkContext.defaultParallelism, 1)
    chunks = session.createDataFrame(
        session.sparkContext.parallelize(
            [tuple(row[name] for name in CHUNK_SCHEMA.names) for row in chunk_rows],
            max(min(len(chunk_rows), parallelism * PASS_TASKS_PER_CORE), 1),
        ),
        schema=ddl(CHUNK_SCHEMA),
    )
    scan = start_scanner(tls_randoms)
    found = chunks.mapInArrow(scan, ddl(STARTS_SCHEMA)).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        proofs, loose = decided_proofs(found.where("kind != 'start'").collect())
        if loose:
            wanted = session.createDataFrame(list(loose), ddl(LOOSE_STARTS_SCHEMA))
            starts = found.where("kind = 'start'").join(F.broadcast(wanted), ["direction", "seq"])
            add_started(proofs, loose, starts.select("direction", "seq").collect())
    finally:
        found.unpersist()
    return proofs


def local_port_proofs(chunk_rows: list[dict[str, Any]], tls_randoms: Container[bytes] = frozenset()) -> dict[int, str]:
    """The local twin of :func:`port_proofs`: the same scan, over the chunks in this process."""
    chunks = pa.Table.from_pylist(chunk_rows, schema=CHUNK_SCHEMA)
    found = pa.Table.from_batches(list(scan_starts(iter(chunks.to_batches()), tls_randoms)), schema=STARTS_SCHEMA)
    rows = found.to_pylist()
    proofs, loose = decided_proofs([row for row in rows if row["kind"] != "start"])
    add_started(
        proofs, loose, [row for row in rows if row["kind"] == "start" and (row["direction"], row["seq"]) in loose]
    )
    return proofs


#: Loose CONNECTs (a chunk's first data byte of a stream, whose handshake another chunk holds), by (direction, seq):
#: the port and the proof they give when the stream does start there.
Loose = dict[tuple[str, int], tuple[int, str]]


def decided_proofs(decided: Iterable[Any]) -> tuple[dict[int, str], Loose]:
    """The proofs decided within a chunk, and the loose CONNECTs, from the scan's rows other than stream starts
    (Spark rows or dictionaries)."""
    proofs: dict[int, str] = {}
    loose: Loose = {}
    for row in decided:
        if row["kind"] == "proven":
            proofs[int(row["port"])] = stronger(proofs.get(int(row["port"])), row["how"] or BY_CONNECT)
        elif row["kind"] == "connect":
            loose[(row["direction"], int(row["seq"]))] = (int(row["port"]), row["how"] or BY_CONNECT)
    return proofs, loose


def add_started(proofs: dict[int, str], loose: Loose, started: Iterable[Any]) -> None:
    """Adds to ``proofs`` those of the loose CONNECTs at a stream start (``started``: rows of its direction, seq)."""
    for row in started:
        port, how = loose[(row["direction"], int(row["seq"]))]
        proofs[port] = stronger(proofs.get(port), how)


def detection_summary(
    options: AuditOptions, connections: dict[int, int], notes: list[dict[str, Any]]
) -> dict[str, Any]:
    """The summary's ``detection`` section: which ports the audit treated as MQTT and why, with the connections
    judged on each; and the TCP flows it left out, per port."""
    ports: list[dict[str, Any]] = []
    if options.requested_ports is not None:
        ports += [
            {"port": port, "how": REQUESTED, "connections": connections.get(port, 0)}
            for port in sorted(options.requested_ports)
        ]
    else:
        proofs = dict(options.port_proofs)
        for port in sorted(options.proven_ports):
            how = proofs.get(port, CONNECT_AT_START)
            ports.append({"port": port, "how": how, "connections": connections.get(port, 0)})
        for port in sorted(KNOWN_MQTT_PORTS - options.proven_ports):
            if connections.get(port):
                ports.append({"port": port, "how": KNOWN_PORT, "connections": connections[port]})
    frames: Counter[str] = Counter()
    payload: Counter[str] = Counter()
    flows: Counter[str] = Counter()
    totals = Counter[str]()
    for note in notes:
        other = note.get("other_tcp")
        if not other:
            continue
        for key in ("frames", "bytes", "flows"):
            totals[key] += other[key]
        for label, (label_frames, label_bytes, label_flows) in other["ports"].items():
            frames[label] += label_frames
            payload[label] += label_bytes
            flows[label] += label_flows
    return {
        "mode": "--ports" if options.requested_ports is not None else "any port",
        "ports": ports,
        "other_tcp": {
            "flows": totals["flows"],
            "frames": totals["frames"],
            "bytes": totals["bytes"],
            "ports": [
                {**_service(label), "frames": count, "bytes": payload[label], "flows": flows[label]}
                for label, count in sorted(frames.items(), key=lambda item: (-item[1], item[0]))[:TOP_PORTS]
            ],
        },
    }


def _service(label: str) -> dict[str, Any]:
    """A reading task's service label as summary fields: ``port`` (None when which side serves is not known) and
    ``ports`` (that port, or both ports of the flows)."""
    ports = [int(port) for port in label.split("/")]
    return {"port": ports[0] if len(ports) == 1 else None, "ports": ports}


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def no_mqtt_message(summary: dict[str, Any]) -> str | None:
    """What to say when an audit judged no MQTT connection, naming what it did see; None when it judged some."""
    connections = int(summary["counts"]["connections"])
    if connections:
        versions = summary.get("versions") or {}
        counted = {version: int(versions.get(version, {}).get("connections", 0)) for version in NOT_DECODED}
        if sum(counted.values()) < connections:
            return None
        unsynced = int((summary.get("bytes") or {}).get("unsynced_bytes", 0))
        encrypted, not_mqtt = counted.pop(ENCRYPTED_VERSION), counted.pop(NOT_MQTT_VERSION)
        said = [f"{encrypted} connection(s) encrypted (TLS without the session's keys)"] if encrypted else []
        said += [f"{not_mqtt} decrypted connection(s) not MQTT"] if not_mqtt else []
        # A session the key log names that could not be decrypted, by the reason.
        said += [f"{count} connection(s) {NOT_DECODED[version]}" for version, count in counted.items() if count]
        return f"nothing could be judged: {', '.join(said)}, {unsynced} bytes not assessable"
    records = int(summary.get("records", 0))
    detection = summary.get("detection") or {}
    other = detection.get("other_tcp") or {"frames": 0, "ports": []}
    mqtt_frames = int(summary.get("segments", 0))
    tcp = mqtt_frames + int(other["frames"])
    if not tcp:
        return f"no MQTT connection found: {_frames(records)}, none of them TCP"
    requested = detection.get("mode") == "--ports"
    listed = [str(entry["port"]) for entry in detection.get("ports", [])]
    mqtt_ports = listed or [str(port) for port in summary.get("broker_ports", [])]
    parts: list[str] = []
    if mqtt_frames:  # segments of flows on MQTT ports, none with a byte of a connection (the last ACKs of one)
        where = f" on port{'s' if len(mqtt_ports) > 1 else ''} {_and(mqtt_ports)}" if mqtt_ports else ""
        parts.append(f"{_frames(mqtt_frames)}{where} carried no MQTT bytes")
    top = other["ports"][:NAMED_PORTS]
    named = [" or ".join(str(port) for port in entry.get("ports") or [entry["port"]]) for entry in top]
    if named:
        more = len(other["ports"]) > NAMED_PORTS
        where = _and(named) + (" and others" if more else "")
        plural = len(named) > 1 or top[0].get("port", 0) is None
        why = "outside --ports" if requested else "none of them starting with an MQTT CONNECT"
        parts.append(f"{_frames(int(other['frames']))} on TCP port{'s' if plural else ''} {where}, {why}")
        if top[0].get("port", 0) is None:  # no handshake captured, and nothing else tells which side serves
            parts.append(f"try --ports with the server's port ({named[0]})")
        else:
            parts.append(f"try --ports {named[0]}")
    head = "no MQTT connection found" + (f" on --ports {','.join(listed)}" if requested and listed else "")
    return head + ": " + ": ".join(parts)


def _frames(count: int) -> str:
    return f"{count} frame{'' if count == 1 else 's'}"
