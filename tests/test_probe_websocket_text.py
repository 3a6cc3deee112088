"""The cases of probe/cases/websocket.py: MQTT in a WebSocket text frame, which its recipient must close on without
acting on it [MQTT-6.0.0-1]. Pure: the judge keeps the statement when the broker closes and breaks it when the broker
answers (CONNACK, PINGRESP, PUBACK) or delivers the message, in 3.1.1 and 5.0. Live: the verdicts of amqtt 0.12.1's
WebSocket listener, and not applicable over plain TCP (mosquitto)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqttaudit import codec
from mqttaudit.judge import Judgement, judge_scenario
from mqttaudit.probe.api import run
from mqttaudit.probe.case import CASES, Case
from mqttaudit.probe.connection import NOT_WEBSOCKET
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, judge_config

from .live import configured_mosquitto
from .talk import S, Talk, suback, subscribe
from .transports import amqtt_websocket

TIMEOUT = 1.0
TEXT_CASES = [case for case in CASES.values() if case.script.__module__ == "mqttaudit.probe.cases.websocket"]
TOPIC = "mqttaudit/run/case/text"
MESSAGE = codec.Publish(topic=TOPIC, payload=b"text frame", qos=1, packet_id=1)


def connect(version: str, client_id: str = "text") -> codec.Connect:
    return codec.Connect(client_id=client_id, protocol_level=5 if version == "5" else 4)


def connack(_version: str) -> codec.Connack:
    return codec.Connack()


def connected(version: str) -> Talk:
    return Talk(version=version).client(connect(version)).server(connack(version))


def shape(case: Case) -> str:
    return case.id.rsplit("/", 1)[1]


def pair(case: Case) -> tuple[dict[str, Talk], dict[str, Talk]]:
    """(the broker closes on the text frame; the broker acts on it), each as the case's connections."""
    version = "5" if case.protocol is codec.ProtocolVersion.V5 else "3.1.1"
    name = shape(case)
    if name == "connect-in-text-frame":
        kept = Talk(version=version).client(connect(version), text=True).closed(S)
        broken = Talk(version=version).client(connect(version), text=True).server(connack(version)).quiet(after=5)
        return {"c1": kept}, {"c1": broken}
    if name == "publish-in-text-frame":

        def watcher() -> Talk:
            return (
                Talk(version=version)
                .client(connect(version, "watcher"))
                .server(connack(version))
                .client(subscribe(1, (TOPIC, 1)))
                .server(suback(1, 1))
            )

        kept_watcher = watcher().quiet(after=5)
        kept = connected(version).client(MESSAGE, text=True).closed(S)
        broken_watcher = watcher().server(codec.Publish(topic=TOPIC, payload=b"text frame", qos=1, packet_id=9))
        broken = connected(version).client(MESSAGE, text=True).server(codec.Puback(packet_id=1)).closed(S)
        return {"watcher": kept_watcher, "c1": kept}, {"watcher": broken_watcher.quiet(after=5), "c1": broken}
    kept = connected(version).client(codec.Pingreq(), text=True).closed(S)
    broken = connected(version).client(codec.Pingreq(), text=True).server(codec.Pingresp()).quiet(after=5)
    return {"c1": kept}, {"c1": broken}


def judged(case: Case, talks: dict[str, Talk]) -> Judgement:
    return judge_scenario({name: talk.events for name, talk in talks.items()}, judge_config(case, TIMEOUT))


def test_both_versions_have_every_shape() -> None:
    assert sorted(case.id for case in TEXT_CASES) == sorted(
        f"{prefix}websocket/{name}"
        for prefix in ("", "v5/")
        for name in ("connect-in-text-frame", "pingreq-in-text-frame", "publish-in-text-frame", "fragmented-text-frame")
    )
    assert all(case.statements == ("MQTT-6.0.0-1",) and case.family == "websocket/text-frame" for case in TEXT_CASES)


@pytest.mark.parametrize("case", TEXT_CASES, ids=lambda case: case.id)
def test_a_broker_that_closes_keeps_the_statement(case: Case) -> None:
    kept, _broken = pair(case)
    judgement = judged(case, kept)
    assert "MQTT-6.0.0-1" in judgement.passed
    assert not [f for f in judgement.findings if f.side is S]


@pytest.mark.parametrize("case", TEXT_CASES, ids=lambda case: case.id)
def test_a_broker_that_acts_on_the_packet_breaks_the_statement(case: Case) -> None:
    _kept, broken = pair(case)
    judgement = judged(case, broken)
    acting = [f for f in judgement.findings if "MQTT-6.0.0-1" in f.rules and f.side is S]
    assert acting, judgement.findings
    if shape(case) == "publish-in-text-frame":  # the PUBACK and the delivery both act on it
        assert {f.conversation for f in acting} == {"c1", "watcher"}


def _verdicts(url: str) -> dict[str, tuple[str, str]]:
    result = run(url, cases="websocket/*", timeout=TIMEOUT, protocol="3.1.1")
    assert result.refusal is None
    return {r.case.id: (r.verdict, r.reason) for r in result.results}


def test_amqtt_acts_on_a_connect_and_a_publish_in_a_text_frame(tmp_path: Path) -> None:
    """amqtt 0.12.1 (WebSocket through the ``websockets`` library) reads a text frame's bytes as MQTT:

    * a CONNECT in a text frame gets CONNACK 0 and the connection stays open: it acts on a packet it had to close
      on [MQTT-6.0.0-1];
    * a QoS 1 PUBLISH in a text frame gets its PUBACK, and the message reaches the subscriber [MQTT-6.0.0-1].

    The PINGREQ shapes pass: C0 00 is no UTF-8, and ``websockets`` fails the connection for that (Close 1007,
    "invalid start byte at position 0", RFC 6455 8.1) before amqtt sees the packet; the close is what the statement
    asks, whatever the reason the server gives."""
    with amqtt_websocket(tmp_path) as broker:
        verdicts = _verdicts(broker.ws_url)
    assert {case: verdict for case, (verdict, _reason) in verdicts.items()} == {
        "websocket/connect-in-text-frame": FAIL,
        "websocket/pingreq-in-text-frame": PASS,
        "websocket/publish-in-text-frame": FAIL,
        "websocket/fragmented-text-frame": PASS,
    }
    assert "server CONNACK (event 1) answers the offending packet" in verdicts["websocket/connect-in-text-frame"][1]
    assert "PUBACK" in verdicts["websocket/publish-in-text-frame"][1]


def test_over_plain_tcp_the_cases_are_not_applicable(tmp_path: Path) -> None:
    with configured_mosquitto(tmp_path) as broker:
        result = run(f"mqtt://127.0.0.1:{broker.port}", cases="*websocket/*", timeout=TIMEOUT)
    assert {r.case.id for r in result.results} == {case.id for case in TEXT_CASES}
    assert {(r.verdict, r.reason) for r in result.results} == {(NOT_APPLICABLE, NOT_WEBSOCKET)}
