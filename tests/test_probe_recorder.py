"""The tcpdump recorder: one recording of several ports holds the traffic of each, and what tcpdump says it lost on
exit is read (a recording with holes must not pass for the traffic that was sent)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mqttaudit.capture import decode_segment, read_records
from mqttaudit.capture.segments import ACK, SYN
from mqttaudit.probe.brokers import HOST, free_port
from mqttaudit.probe.recorder import lost_packets, port_filter, tcpdump_path, tcpdump_recording

#: What tcpdump 4.99 writes on standard error when it stops.
CLEAN_EXIT = b"48 packets captured\n96 packets received by filter\n0 packets dropped by kernel\n"
LOSSY_EXIT = b"12 packets captured\n40 packets received by filter\n28 packets dropped by kernel\n"


def test_the_filter_names_every_port() -> None:
    assert port_filter(1883) == "tcp port 1883"
    assert port_filter((1883, 8883)) == "tcp port 1883 or tcp port 8883"
    with pytest.raises(ValueError, match="at least one port"):
        port_filter(())


def test_what_tcpdump_lost_is_read_from_its_last_words() -> None:
    assert lost_packets(CLEAN_EXIT) == 0
    assert lost_packets(LOSSY_EXIT) == 28
    assert lost_packets(b"1 packet dropped by interface\n" + LOSSY_EXIT) == 29
    assert lost_packets(b"") == 0


def test_one_recording_of_two_ports_holds_both_connections(tmp_path: Path) -> None:
    if tcpdump_path() is None:
        pytest.fail("tcpdump is not installed (Debian package tcpdump)", pytrace=False)
    listeners = [socket.create_server((HOST, free_port())) for _ in range(2)]
    ports = [listener.getsockname()[1] for listener in listeners]
    path = tmp_path / "two.pcap"
    try:
        with tcpdump_recording(path, ports, settle=0.5):
            for port in ports:
                with socket.create_connection((HOST, port), timeout=5) as client:
                    client.sendall(b"hello")
    finally:
        for listener in listeners:
            listener.close()
    segments = [decode_segment(r[0], r[1], r[2]) for r in read_records(str(path))]
    syns = {s[4] for s in segments if not isinstance(s, str) and s[7] & (SYN | ACK) == SYN}
    payloads = {s[4]: s[8] for s in segments if not isinstance(s, str) and s[8]}
    assert syns == set(ports)
    assert payloads == dict.fromkeys(ports, b"hello")
