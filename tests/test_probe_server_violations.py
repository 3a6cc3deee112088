"""The broker's own malformed packets are findings of the codec, per the version the connection speaks."""

from __future__ import annotations

from types import SimpleNamespace

from mqttaudit.codec import Direction, ProtocolVersion, StreamDecoder
from mqttaudit.judge.events import Sent
from mqttaudit.probe.runner import server_violations

SERVER = Direction.FROM_SERVER


def recorded(data: bytes, version: ProtocolVersion) -> SimpleNamespace:
    frames = StreamDecoder(SERVER, version=version).feed(data)
    return SimpleNamespace(name="c", version=version, events=[Sent(0.0, SERVER, frame) for frame in frames])


def test_a_5_0_server_acknowledgement_with_an_undefined_reason_code_is_a_finding() -> None:
    # CONNACK 0, then PUBACK id 1 with 0x11 (an UNSUBACK code): [MQTT-3.4.2-1]
    findings = server_violations(recorded(bytes.fromhex("200300000040030001 11".replace(" ", "")), ProtocolVersion.V5))
    assert [(rule, f.side, f.event) for f in findings for rule in f.rules] == [("MQTT-3.4.2-1", SERVER, 1)]


def test_a_5_0_server_payload_format_indicator_out_of_range_is_its_fault_too() -> None:
    publish = bytes.fromhex("3006000174020102")  # PUBLISH "t", Payload Format Indicator 2
    findings = server_violations(recorded(bytes.fromhex("20030000 00".replace(" ", "")) + publish, ProtocolVersion.V5))
    assert [rule for f in findings for rule in f.rules] == ["MQTT-3.3.2-payload-format"]


def test_a_3_1_1_server_packet_is_held_to_the_3_1_1_rules() -> None:
    findings = server_violations(recorded(bytes.fromhex("20020000d100"), ProtocolVersion.V3_1_1))
    assert [rule for f in findings for rule in f.rules] == ["MQTT-2.2.2-1"]
