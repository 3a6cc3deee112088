"""Verdicts a broker maintainer could contest, each pinned on a scripted broker (tests/scripted_broker.py) that
behaves as a conforming broker but for one act, described in bytes, driven by the real ``mqttaudit probe``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mqttaudit.codec import Pingreq, Pingresp
from mqttaudit.probe.case import CASES, REPEATS, Case, CaseContext, Target, all_cases
from mqttaudit.probe.runner import FAIL, PASS, phases, run_probe
from mqttaudit.spec.ids import R311

from .cli_in_process import run_mqttaudit
from .scripted_broker import (
    ACCEPTS_ANY_AUTHENTICATION_METHOD,
    CLOSES_ON_SECOND_REPEAT,
    DISCONNECTS_3_1_1_IN_5_0_FORM,
    DUP_ON_QOS0,
    IGNORES_WILL_DELAY,
    LAZY_KEEP_ALIVE,
    LEAKS_WILL_DELAY,
    PUBREL_0X80,
    REFUSES_LEVEL_IN_5_0_FORM,
    WILL_BEFORE_CLOSE,
    ScriptedBroker,
)

TIMEOUT = "1.0"


def probe(
    broker: ScriptedBroker, out: Path, cases: str, *args: str
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """The exit status of ``mqttaudit probe`` against ``broker``, and the results and the run's violations in its
    findings.json."""
    ran = run_mqttaudit("probe", broker.url, "--out", str(out), "--timeout", TIMEOUT, "--cases", cases, *args)
    findings = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    return ran.returncode, findings["results"], findings["violations"]


def event_time(result: dict[str, Any], connection: str, test: str) -> float:
    """The time of the first event of ``connection`` whose packet description or close matches ``test``."""
    [events] = [c["events"] for c in result["evidence"]["connections"] if c["name"] == connection]
    return next(e["t"] for e in events if test in (e.get("packet") or "") or test == e.get("closed_by"))


# Cross-socket order: the Will a moment before the close it is published for ------------------------------------


@pytest.mark.parametrize("case", ["malformed/disconnect-flag-bit-0", "v5/malformed/disconnect-flag-bit-0"])
def test_a_will_the_watcher_sees_just_before_the_close_is_seen_is_a_will_after_the_close(
    case: str, tmp_path: Path
) -> None:
    """The broker answers ``e1 00`` (DISCONNECT with a reserved flag bit) on c2 by publishing its Will (QoS 1) to
    the watcher and, once the watcher acknowledged it, (5.0) ``e0 02 81 00`` and the close: the watcher's socket
    shows the Will before the prober's shows the close, as real brokers' 0.1-0.2 ms do."""
    with ScriptedBroker(WILL_BEFORE_CLOSE) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    will, close = event_time(result, "watcher", "PUBLISH"), event_time(result, "c2", "server")
    assert will < close  # the order the judge must take as one instant
    assert result["verdict"] == "pass", result["reason"]
    assert result["evidence"]["statements"]["MQTT-3.1.2-8"] == "pass"
    assert status == 0


# An offending delivery is a delivery, and a finding --------------------------------------------------------------


def test_a_will_sent_before_its_delay_with_the_delay_property_left_in_fails_the_delay_statement(
    tmp_path: Path,
) -> None:
    """The broker publishes the Will of a dropped 5.0 connection at once, its Will Delay Interval (2 s) copied into
    the PUBLISH (``18 00 00 00 02``, a property no PUBLISH may carry), although the session came back within the
    delay: the Will went out when it must not (5.0 statement 3.1.3-9), and the leaked property is named too."""
    with ScriptedBroker(IGNORES_WILL_DELAY, LEAKS_WILL_DELAY) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", "v5/will/delay-reconnect-suppresses")

    assert result["verdict"] == "fail", result["reason"]
    [finding] = result["evidence"]["findings"]
    assert (finding["rule"], finding["conversation"], finding["kind"]) == ("MQTT-3.1.3-9", "watcher", "leak")
    assert "MQTT-2.2.2-property-packet" in finding["also"]  # one act, one finding
    assert status == 1


def test_a_will_with_a_leaked_property_published_after_its_delay_arrived(tmp_path: Path) -> None:
    """The same leaked property on a Will the broker publishes when its 2 s delay has passed: the Will arrived
    (MQTT-3.1.2-8 holds, where it was "never arrived"), and the PUBLISH breaks the property rule, which fails the
    case."""
    with ScriptedBroker(LEAKS_WILL_DELAY) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", "v5/will/delay-then-published")

    assert result["verdict"] == "fail", result["reason"]
    assert result["evidence"]["statements"]["MQTT-3.1.2-8"] == "pass"
    assert result["evidence"]["statements"]["MQTT-2.2.2-property-packet"] == "fail"
    assert status == 1


def test_a_will_published_once_before_its_delay_is_one_finding(tmp_path: Path) -> None:
    """The broker publishes a Will at the drop, before its Will Delay Interval of 2 s, and never again: one act,
    one finding (published too soon, MQTT-3.1.2-8), not also "never arrived" when it was due."""
    with ScriptedBroker(IGNORES_WILL_DELAY) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", "v5/will/delay-then-published")

    assert result["verdict"] == "fail", result["reason"]
    [finding] = result["evidence"]["findings"]
    assert (finding["rule"], finding["kind"]) == ("MQTT-3.1.2-8", "leak")
    assert status == 1


def test_a_will_forwarded_with_dup_on_qos_0_is_a_delivery_and_a_failure(tmp_path: Path) -> None:
    """The broker forwards a QoS 0 message with DUP 1 (``38 ...``): the message arrived (MQTT-3.8.4-6, the QoS it
    came at, is decided, where it was "not assessable" as if nothing came), and its first copy carries DUP 1
    (MQTT-3.3.1-3, the codec's MQTT-3.3.1-2 named with it: one packet, one finding)."""
    with ScriptedBroker(DUP_ON_QOS0) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", "subscribe/granted-qos-caps-delivery")

    assert result["verdict"] == "fail", result["reason"]
    assert result["evidence"]["statements"]["MQTT-3.8.4-6"] == "pass"
    [finding] = result["evidence"]["findings"]
    assert finding["rule"] == "MQTT-3.3.1-3" and "MQTT-3.3.1-2" in finding["also"]
    assert status == 1


# A MUST broken by the broker's own act fails the case that saw it --------------------------------------------------


def test_a_pubrel_with_reason_code_0x80_fails_a_case_about_something_else(tmp_path: Path) -> None:
    """The broker's PUBREL for a QoS 2 delivery carries Reason Code 0x80 (``62 03 00 01 80``), which no PUBREL may:
    the case (about overlapping subscriptions) fails on it, as one finding of that act, and the run lists it no
    more among its violations."""
    with ScriptedBroker(PUBREL_0X80) as broker:
        status, [result], violations = probe(broker, tmp_path / "out", "v5/overlapping/highest-qos2")

    assert "MQTT-4.3.3-4" not in result["statements"]
    assert result["verdict"] == "fail", result["reason"]
    [finding] = result["evidence"]["findings"]
    assert (finding["rule"], finding["conversation"]) == ("MQTT-4.3.3-4", "watcher")
    assert "MQTT-3.6.2-1" in finding["also"]
    assert result["evidence"]["statements"]["MQTT-4.3.3-4"] == "fail"
    assert violations == []
    assert status == 1


def test_a_5_0_disconnect_sent_to_a_3_1_1_client_fails_the_case_it_stopped(tmp_path: Path) -> None:
    """The broker answers a 3.1.1 SUBSCRIBE with 5.0's DISCONNECT 0x80 (``e0 02 80 00``) and closes: 3.1.1 has no
    DISCONNECT from the server (Table 2.1), so the case, which could not go on without its SUBACK, fails on
    MQTT-2.2.1-direction instead of ending inconclusive."""
    with ScriptedBroker(DISCONNECTS_3_1_1_IN_5_0_FORM) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", "routing/plus-level")

    assert result["verdict"] == "fail", result["reason"]
    assert result["reason"].startswith("MQTT-2.2.1-direction: ")
    assert "(the case itself ended inconclusive: setup: " in result["reason"]
    [finding] = result["evidence"]["findings"]
    # The two-byte body breaks 3.1.1's DISCONNECT Remaining Length too, a statement that binds the Client (only a
    # client sends DISCONNECT in 3.1.1): not the broker's to break, so the direction alone is cited.
    assert (finding["rule"], finding["also"]) == ("MQTT-2.2.1-direction", [])
    assert status == 1


# An Authentication Method accepted without being taken up -----------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    ["v5/no-early-disconnect/unknown-authentication-method", "v5/forbidden/connect-unsupported-authentication-method"],
)
def test_an_unknown_authentication_method_accepted_fails_mqtt_4_12_0_1(case: str, tmp_path: Path) -> None:
    """The broker answers a 5.0 CONNECT naming an Authentication Method no server implements with CONNACK 0x00 that
    names none (``20 03 00 00 00``) and keeps the connection: it does not support the method (one that does names it
    in the CONNACK) and did not close, as MQTT-4.12.0-1 requires. Both cases fail on it (the first targets it), where
    they ended inconclusive."""
    with ScriptedBroker(ACCEPTS_ANY_AUTHENTICATION_METHOD) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    assert result["verdict"] == "fail", result["reason"]
    assert result["evidence"]["statements"]["MQTT-4.12.0-1"] == "fail"
    assert [f["rule"] for f in result["evidence"]["findings"]] == ["MQTT-4.12.0-1"]
    assert status == 1


# An unknown Protocol Level refused as 5.0 refuses it ----------------------------------------------------------------


@pytest.mark.parametrize("case", ["connect/protocol-level-unsupported", "malformed/connect-protocol-level-6"])
def test_a_broker_that_speaks_5_0_may_refuse_an_unknown_level_with_connack_0x84(case: str, tmp_path: Path) -> None:
    """The broker answers a CONNECT of Protocol Level 9 (or 6) with 5.0's CONNACK 0x84 ``20 03 00 84 00`` and
    closes: 5.0's MQTT-3.1.2-2 allows it of a server that speaks 5.0, as 3.1.1's allows ``20 02 00 01``."""
    with ScriptedBroker(REFUSES_LEVEL_IN_5_0_FORM) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    assert result["verdict"] == "pass", result["reason"]
    assert result["evidence"]["statements"]["MQTT-3.1.2-2"] == "pass"
    assert status == 0


# Repeated packets are repeated enough -----------------------------------------------------------------------------

#: The repeated-packet cases, with the statement that binds the receiver of a repeat to answer it.
REPEAT_CASES = {
    "publish/qos2-no-duplicate-delivery": "MQTT-4.3.3-2",
    "v5/flows/qos2-repeat-before-pubrel": "MQTT-4.3.3-10",
}


def repeats(result: dict[str, Any]) -> int:
    """The DUP 1 PUBLISH packets the prober sent in ``result``'s conversations."""
    return sum(
        1
        for connection in result["evidence"]["connections"]
        for event in connection["events"]
        if event.get("from") == "client"
        and (event.get("packet") or "").startswith("PUBLISH")
        and "DUP" in event["packet"]
    )


@pytest.mark.parametrize("case", REPEAT_CASES)
def test_a_qos_2_publish_is_repeated_three_times_before_its_pubrel(case: str, tmp_path: Path) -> None:
    """A conforming broker answers every repeat with PUBREC and delivers the message once: the case passes, and
    its evidence shows the three repeats (REPEATS)."""
    with ScriptedBroker() as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    assert result["verdict"] == "pass", result["reason"]
    assert repeats(result) == REPEATS == 3
    assert status == 0


@pytest.mark.parametrize("case", REPEAT_CASES)
def test_a_broker_that_closes_on_the_second_repeat_no_longer_passes(case: str, tmp_path: Path) -> None:
    """The broker answers the first repeat with PUBREC and closes on the second, without PUBREC (mosquitto#3602,
    there with DISCONNECT 0x82): with one repeat the case passed. A server may close instead of answering (the
    probe's client breaks MQTT-4.4.0-1 by repeating on purpose), so what is owed there is not assessable, and the
    case says so."""
    with ScriptedBroker(CLOSES_ON_SECOND_REPEAT) as broker:
        status, [result], _ = probe(broker, tmp_path / "out", case)

    assert result["verdict"] == "inconclusive", result["reason"]
    assert result["evidence"]["statements"][REPEAT_CASES[case]] == "inconclusive"
    assert "closed the connection instead" in result["reason"]
    assert repeats(result) >= 2
    assert status == 4


# Timing cases are judged alone ------------------------------------------------------------------------------------


def test_every_timing_case_is_judged_after_every_other_case_and_keep_alive_with_nothing_beside_it() -> None:
    plan = phases(all_cases())
    order = [case for batch, _ in plan for case in batch]
    assert sorted(case.id for case in order) == sorted(CASES)
    first_timing = min(index for index, case in enumerate(order) if case.timing)
    assert all(case.timing for case in order[first_timing:])  # no case that is not timing comes after one
    assert {case.id for case in order if case.timing} >= {"v5/will/delay-then-published", "v5/session/expired"}
    *_, (quiet, side_by_side) = plan
    assert not side_by_side and {case.id for case in quiet} == {case.id for case in order if case.quiet}
    assert {case.id for case in quiet} == {
        "keep-alive/server-disconnects-silent-client",
        "v5/keep-alive/server-disconnects-silent-client",
        "v5/keep-alive/client-value-applies",
    }


async def _talking(context: CaseContext) -> None:
    """A client that sends PINGREQ every 0.2 s for 6 s: traffic that keeps a broker's event loop awake."""
    connection = await context.connect()
    for _ in range(30):
        await connection.send(Pingreq())
        await connection.wait_type(Pingresp, 0.2)
        await asyncio.sleep(0.2)
    await context.leave(connection)


TALKING = Case("test/talking", (R311.MQTT_3_12_4_1,), "a client that talks for 6 s", _talking)


def test_a_broker_that_checks_keep_alive_only_when_woken_fails_the_keep_alive_case_judged_alone() -> None:
    """The broker checks Keep Alive only when a packet comes in (or every 8 s): beside a case whose client talks,
    it closes each silent Keep Alive 1 client at 1.5 s, alone seconds late. The Keep Alive case, judged after the
    talking one and with nothing beside it, fails, as it does when run alone; it passed beside it."""
    keep_alive = CASES["keep-alive/server-disconnects-silent-client"]
    with ScriptedBroker(LAZY_KEEP_ALIVE) as broker:
        run = asyncio.run(run_probe(Target.parse(broker.url), [keep_alive, TALKING], timeout=1.0))

    verdicts = {result.case.id: result for result in run.results}
    assert verdicts[TALKING.id].verdict == PASS, verdicts[TALKING.id].reason
    failed = verdicts[keep_alive.id]
    assert failed.verdict == FAIL and "MQTT-3.1.2-24" in failed.reason, failed.reason
