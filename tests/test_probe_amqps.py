"""The AMQP 0-9-1 routing suite over TLS (``amqps://``) against a real RabbitMQ with a TLS listener whose
certificate the test makes: the same verdicts as over plain AMQP, and a CA that does not vouch for the broker
stops the run in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttaudit.cli.main import main
from mqttaudit.probe.amqp import AMQP_CASES
from mqttaudit.probe.brokers import RunningBroker

from .transports import TlsMaterial, rabbitmq_tls, tls_material


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return tls_material(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def rabbitmq(material: TlsMaterial, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with rabbitmq_tls(tmp_path_factory.mktemp("rabbitmq"), material) as broker:
        yield broker


def verdicts(folder: Path) -> dict[str, str]:
    report = json.loads((folder / "findings.json").read_text())
    return {result["case"]: result["verdict"] for result in report["results"]}


def test_the_routing_suite_over_amqps_gives_the_verdicts_of_plain_amqp(
    rabbitmq: RunningBroker, material: TlsMaterial, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain, tls = tmp_path / "amqp", tmp_path / "amqps"
    assert main(["probe", rabbitmq.urls["amqp"], "--timeout", "1", "--out", str(plain)]) == 0
    amqps = ["probe", rabbitmq.urls["amqps"], "--cafile", str(material.cafile), "--timeout", "1", "--out", str(tls)]
    assert main(amqps) == 0
    capsys.readouterr()
    assert verdicts(tls) == verdicts(plain) == dict.fromkeys(AMQP_CASES, "pass")
    assert json.loads((tls / "findings.json").read_text())["target"].startswith("amqps://guest@127.0.0.1:")


def test_amqps_with_a_ca_that_does_not_vouch_for_the_broker_exits_4_in_one_line(
    rabbitmq: RunningBroker, material: TlsMaterial, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["probe", rabbitmq.urls["amqps"], "--cafile", str(material.other_cafile), "--out", str(tmp_path)]
    status = main([*argv, "--timeout", "1"])
    err = capsys.readouterr().err
    assert status == 4
    assert "TLS: certificate verify failed" in err and err.count("\n") == 1, err
    assert "guest:guest" not in err
