"""Leniency through the real probe: each case's script runs over a real TCP connection to a scripted broker on
127.0.0.1 that accepts everything, and the judge decides from what the probe recorded.

The scripted broker answers each CONNECT with CONNACK 0x00 in the CONNECT's version (3.1.1: ``20 02 00 00``, 5.0:
``20 03 00 00 00``), each SUBSCRIBE with a SUBACK that grants QoS 0 to every filter (3.1.1: ``90 03 <id> 00``, 5.0:
``90 04 <id> 00 00``), each PINGREQ with PINGRESP, and never closes a connection itself. So it SUBACKs a 5.0 empty
Topic Filter (MQTT-4.7.3-1 binds the sender; nothing binds the 5.0 Server to detect it: lenient), a 5.0 SUBSCRIBE with
reserved Subscription Options bits (MQTT-3.8.3-5 binds the Server to treat it as malformed: a fail), and the 3.1.1
SUBSCRIBE ``82 05 00 01 00 00 00`` (MQTT-4.8.0-1: a fail, as before)."""

from __future__ import annotations

import asyncio
import socket

from mqttaudit.codec import Connect, Direction, Pingreq, StreamDecoder, Subscribe
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.case import CASES, Case, CaseContext, Target
from mqttaudit.probe.outcome import FAIL
from mqttaudit.probe.runner import judge_config, run_case
from mqttaudit.spec.ids import R5, R311

from .hostile_server import HostileServer

TIMEOUT = 0.5
S = Direction.FROM_SERVER


class AcceptingBroker(HostileServer):
    """A broker that accepts every packet: ``with AcceptingBroker() as broker: ... broker.port``."""

    def __init__(self) -> None:
        super().__init__("accepting", lifetime=30.0)
        #: The bytes of every client packet the broker received, in order, for the record.
        self.received: list[bytes] = []

    def _accepting(self, connection: socket.socket) -> None:
        decoder = StreamDecoder(Direction.FROM_CLIENT)
        version_5 = False
        while not self._over():
            try:
                data = connection.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            for frame in decoder.feed(data):
                self.received.append(frame.raw)
                packet = frame.packet
                if isinstance(packet, Connect):
                    version_5 = packet.protocol_level == 5
                    connection.sendall(bytes.fromhex("20 03 00 00 00" if version_5 else "20 02 00 00"))
                elif frame.raw[:1] == b"\x82" and len(frame.raw) >= 4:  # SUBSCRIBE, however malformed
                    filters = len(packet.subscriptions) if isinstance(packet, Subscribe) else 1
                    body = frame.raw[2:4] + (b"\x00" if version_5 else b"") + bytes(filters)
                    connection.sendall(bytes([0x90, len(body)]) + body)
                elif isinstance(packet, Pingreq):
                    connection.sendall(b"\xd0\x00")


async def _scripted(case: Case, port: int) -> Judgement:
    """The case's own script against the broker, judged as :func:`mqttaudit.probe.runner.run_case` judges it."""
    context = CaseContext(case, Target("127.0.0.1", port), timeout=TIMEOUT, run_id="1e1e1e1e")
    try:
        await asyncio.wait_for(case.script(context), 20 * TIMEOUT)
    finally:
        for connection in context.connections:
            await connection.finish()
    conversations = {connection.name: connection.events for connection in context.connections}
    return judge_scenario(conversations, judge_config(case, TIMEOUT))


def test_a_5_0_broker_that_subacks_an_empty_topic_filter_is_lenient_not_failing() -> None:
    case = CASES["v5/malformed/subscribe-empty-filter"]
    with AcceptingBroker() as broker:
        judgement = asyncio.run(_scripted(case, broker.port))
        result = asyncio.run(run_case(case, Target("127.0.0.1", broker.port), timeout=TIMEOUT, run_id="2e2e2e2e"))
    assert bytes.fromhex("82 06 00 01 00 00 00 00") in broker.received  # the stimulus, as the broker got it
    assert [(x.rule, x.side) for x in judgement.lenient] == [(R5.MQTT_4_7_3_1, S)]
    (entry,) = judgement.lenient
    assert "SUBACK" in entry.detail and "[MQTT-4.13.1-1]" in entry.basis and "4.13.1" in entry.basis
    assert not [f for f in judgement.findings if f.side is S and not set(f.rules).isdisjoint(case.statements)]
    assert result.verdict != FAIL and not result.findings, (result.verdict, result.reason)


def test_a_5_0_broker_that_accepts_reserved_subscription_option_bits_fails_3_8_3_5() -> None:
    case = CASES["v5/forbidden/subscribe-reserved-option-bits-0xc0"]
    with AcceptingBroker() as broker:
        judgement = asyncio.run(_scripted(case, broker.port))
        result = asyncio.run(run_case(case, Target("127.0.0.1", broker.port), timeout=TIMEOUT, run_id="3e3e3e3e"))
    assert judgement.lenient == ()
    assert result.verdict == FAIL, result.reason
    assert {(rule, f.side) for f in result.findings for rule in f.rules} >= {(R5.MQTT_3_8_3_5, S)}
    assert all(rule.version == "5.0" for f in result.findings for rule in f.rules)


def test_a_3_1_1_broker_that_subacks_82_05_00_01_00_00_00_still_fails() -> None:
    case = CASES["malformed/subscribe-empty-filter"]
    with AcceptingBroker() as broker:
        judgement = asyncio.run(_scripted(case, broker.port))
        result = asyncio.run(run_case(case, Target("127.0.0.1", broker.port), timeout=TIMEOUT, run_id="4e4e4e4e"))
    assert bytes.fromhex("82 05 00 01 00 00 00") in broker.received
    assert judgement.lenient == ()
    assert result.verdict == FAIL, result.reason
    assert {rule for f in result.findings for rule in f.rules} == {R311.MQTT_4_7_3_1, R311.MQTT_4_8_0_1}
    assert all(f.side is S and rule.version == "3.1.1" for f in result.findings for rule in f.rules)
