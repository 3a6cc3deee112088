"""A child process for a memory test: one TCP connection whose client sends its ClientHello and then ``MEGABYTES``
of TLS application data records that no ServerHello ever precedes, fed to the capture layer one segment at a time
(generated, never held). Prints, as JSON, how much the process's peak resident memory grew while the connection was
audited, and what the audit said of it.

    python -m tests.tls_waiting_flow CLIENT_HELLO_HEX MEGABYTES
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections.abc import Iterator

from mqttaudit.capture.conversation import FlowOptions
from mqttaudit.capture.flows import flow_events
from mqttaudit.capture.segments import ACK, PSH, SYN, Segment
from mqttaudit.capture.tls import KeyLog, hello_client_random

CLIENT, SERVER = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
PORT = 8883
#: One application data record of 16 KB (its bytes are never decrypted: no ServerHello says how).
RECORD = bytes([23, 3, 3, 0x40, 0]) + os.urandom(0x4000)


def segments(hello: bytes, megabytes: int) -> Iterator[Segment]:
    seq, now = 1000, 10**18
    yield (now, CLIENT, 40000, SERVER, PORT, seq, 0, SYN, b"")
    yield (now + 1, SERVER, PORT, CLIENT, 40000, 5000, seq + 1, SYN | ACK, b"")
    seq += 1
    yield (now + 2, CLIENT, 40000, SERVER, PORT, seq, 5001, PSH | ACK, hello)
    seq += len(hello)
    for number in range(megabytes * 1024 * 1024 // len(RECORD)):
        yield (now + 3 + number, CLIENT, 40000, SERVER, PORT, seq, 5001, PSH | ACK, RECORD)
        seq += len(RECORD)


def main() -> None:
    hello, megabytes = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
    random = hello_client_random(hello)
    assert random is not None
    keylog = KeyLog.parse(f"CLIENT_RANDOM {random.hex()} {'ab' * 48}\n")
    options = FlowOptions(broker_ports=frozenset({PORT}), keylog=keylog, mqtt_ports_named=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    (audit,) = flow_events(segments(hello, megabytes), options=options)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    said = {
        "grown_kb": grown,
        "records_bytes": megabytes * 1024 * 1024 // len(RECORD) * len(RECORD),
        "version": audit.version,
        "unassessable": audit.total.unassessable,
        "notes": [note.text for note in audit.layer_notes],
    }
    print(json.dumps(said))


if __name__ == "__main__":
    main()
