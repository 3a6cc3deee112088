"""What the live MQTT 5.0 probe tests share: a mosquitto started with settings of its own, and a family of cases
run at once against a real broker, every one required to reach a verdict."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from mqttaudit.probe.brokers import HOST, RunningBroker, free_port, launch_broker, start_broker
from mqttaudit.probe.case import Case, Target
from mqttaudit.probe.profile import NO_PROFILE, BrokerProfile
from mqttaudit.probe.runner import FAIL, NOT_APPLICABLE, PASS, CaseResult, run_case

from .verdicts import LENIENT, verdict_of

#: The verdicts a case may reach against a real broker (never inconclusive, never an error of the case): leniency
#: (tests.verdicts) is one.
VERDICTS = (PASS, FAIL, NOT_APPLICABLE, LENIENT)
#: Seconds per wait: the brokers answer on loopback within milliseconds.
TIMEOUT = 1.0


@contextmanager
def configured_mosquitto(
    workdir: Path,
    *settings: str,
    port: int | None = None,
    other_ports: Sequence[int] = (),
    urls: Mapping[str, str] | None = None,
) -> Iterator[RunningBroker]:
    """mosquitto on ``port`` (a free port when None) of 127.0.0.1 with ``settings`` (configuration lines such as
    ``max_qos 1``) added, which its CONNACK then declares.

    ``settings`` may open further listeners (``listener PORT 127.0.0.1`` and the lines for it); their ports go in
    ``other_ports``, so that it counts as started once each accepts connections, and their URLs in ``urls``
    (:attr:`RunningBroker.urls`)."""
    found = start_broker("mosquitto")  # finds the binary the way the tests always do; only its command is wanted
    binary = found.command[0]
    found.stop()
    port = free_port() if port is None else port
    config = workdir / "mosquitto.conf"
    lines = [f"listener {port} {HOST}", "allow_anonymous true", "persistence false", "log_dest stderr", "log_type all"]
    config.write_text("\n".join([*lines, *settings]) + "\n")
    command = [binary, "-c", str(config)]
    ready = r"mosquitto version \S+ running"
    with launch_broker(
        "mosquitto", command, port=port, workdir=workdir, ready=ready, other_ports=other_ports, urls=urls
    ) as b:
        yield b


def run_together(
    broker: RunningBroker, cases: Iterable[Case], run_id: str, profile: BrokerProfile = NO_PROFILE
) -> dict[str, CaseResult]:
    """Every case at once against ``broker`` (with the operator's ``profile``), by case id; each must reach one of
    :data:`VERDICTS`."""

    async def everything() -> list[CaseResult]:
        target = Target(broker.host, broker.port)
        return list(
            await asyncio.gather(*(run_case(c, target, timeout=TIMEOUT, run_id=run_id, profile=profile) for c in cases))
        )

    results = {result.case.id: result for result in asyncio.run(everything())}
    for result in results.values():  # for the record of the run (-rA shows it)
        print(result.case.id, result.verdict, result.reason)
    assert not [(r.case.id, r.verdict, r.reason) for r in results.values() if verdict_of(r) not in VERDICTS or r.error]
    return results
