"""The whole 3.1.1 library gives every broker of the test suite the same verdicts one case at a time and eight at a
time: no case can see another's side effects (Client Identifiers, topics and retained messages of its own; cases
that leave retained messages or hang on a broker-side timer run alone), so concurrency only saves time.

Each run gets a fresh broker: what one run leaves behind on a broker that keeps it against the rules (amqtt 0.12.1
keeps retained messages a zero-byte retained PUBLISH should clear, and sends them to every client) must not decide
the other run's verdicts.
"""

from __future__ import annotations

import asyncio

import pytest

from mqttaudit.probe.brokers import BrokerName, BrokerUnavailable, start_broker
from mqttaudit.probe.case import Target, all_cases
from mqttaudit.probe.runner import run_probe

BROKERS: tuple[BrokerName, ...] = ("mosquitto", "aedes", "amqtt", "rabbitmq")


def verdicts(name: BrokerName, concurrency: int) -> dict[str, tuple[str, str]]:
    """Every case's verdict and reason, on a fresh broker."""
    try:
        broker = start_broker(name)
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    with broker:
        run = asyncio.run(run_probe(Target.parse(broker.url), all_cases(), concurrency=concurrency))
    return {result.case.id: (result.verdict, result.reason) for result in run.results}


@pytest.mark.parametrize("name", BROKERS)
def test_the_whole_library_gives_the_same_verdicts_at_concurrency_1_and_8(name: BrokerName) -> None:
    alone, together = verdicts(name, 1), verdicts(name, 8)
    assert list(alone) == list(together) == [case.id for case in all_cases()]
    differ = {
        case_id: (alone[case_id], together[case_id]) for case_id in alone if alone[case_id][0] != together[case_id][0]
    }
    assert not differ, differ
    assert {verdict for verdict, _reason in alone.values()} >= {"pass", "fail"}
