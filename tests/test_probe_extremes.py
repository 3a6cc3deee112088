"""Every MQTT 5.0 case against a broker whose CONNACK declares each capability at its legal extremes: no CONNACK
whose values are all legal makes a case crash or the run exit 3, and a case whose stimulus cannot exist for a
declared value says so (not applicable). The oversize cases send one byte over any declared Maximum Packet Size,
up to the largest, streamed so the prober never holds the packet. Each broker is ``scripted_v5`` of
tests/hostile_server.py on 127.0.0.1: it answers the CONNECT with the CONNACK chosen here, acknowledges what it is
sent (SUBACK, UNSUBACK, PUBACK, PUBREC, PUBCOMP, PINGRESP) and routes nothing.

The configurations run side by side in one event loop through the real runner (``probe.api.run_async``), each
against a broker of its own, with a short timeout: most of a case is waiting, so they share it. The brokers run in a
process of their own, so that their threads never hold up the prober's event loop. Each value the
issue names is declared alone, the way a broker would declare it beside defaults, so that no other value turns the
cases that read it off (an "Available" flag at 0 makes its cases not applicable, the smallest Maximum Packet Size
makes most set-ups too large); the largest values are declared together, every flag at 1, the whole library
running against them.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import ExitStack
from pathlib import Path

import pytest

from mqttaudit.codec import Connack, ProtocolVersion, encode
from mqttaudit.codec.properties import make
from mqttaudit.probe import api
from mqttaudit.probe.case import CASES
from mqttaudit.probe.cases import v5_limits
from mqttaudit.probe.runner import FAIL, LENIENT, NOT_APPLICABLE, PASS, VERDICTS
from mqttaudit.spec.ids import R5

from .cli_in_process import run_mqttaudit
from .hostile_server import HostileServer, servers_in_a_process
from .memory import PeakMemory

V5 = ProtocolVersion.V5
TIMEOUT = 0.5
#: Per configuration, another timeout: in "largest", each oversize case streams a 268,435,456-byte PUBLISH, which its
#: script must finish within ``runner.SCRIPT_TIMEOUTS`` timeouts (10 s at 0.5 s, which a run of the whole suite on
#: two loaded cores once missed: the case was inconclusive); 2 s gives it 40 s.
TIMEOUTS = {"largest": 2.0}
#: Cases at once per configuration: about 2 connections each, one broker thread per connection.
CONCURRENCY = 32
LARGEST_MAXIMUM_PACKET_SIZE = 268_435_455


def connack(**declared: int) -> bytes:
    return encode(Connack(return_code=0, properties=make(**declared)), version=V5)


#: The smallest Maximum Packet Size that holds the CONNACK declaring it (the CONNACK with that property alone).
SMALLEST_MAXIMUM_PACKET_SIZE = len(connack(maximum_packet_size=1))
AVAILABLE = (
    "retain_available",
    "wildcard_subscription_available",
    "subscription_identifier_available",
    "shared_subscription_available",
)
#: Per configuration, the CONNACK properties the broker declares.
CONFIGURATIONS: dict[str, dict[str, int]] = {
    "largest": {
        "receive_maximum": 65535,
        "topic_alias_maximum": 65535,
        "maximum_packet_size": LARGEST_MAXIMUM_PACKET_SIZE,
        "server_keep_alive": 65535,
        **dict.fromkeys(AVAILABLE, 1),
    },
    "receive-maximum-1": {"receive_maximum": 1},
    "topic-alias-maximum-0": {"topic_alias_maximum": 0},
    "maximum-packet-size-smallest": {"maximum_packet_size": SMALLEST_MAXIMUM_PACKET_SIZE},
    "server-keep-alive-0": {"server_keep_alive": 0},
    **{f"{name.replace('_', '-')}-0": {name: 0} for name in AVAILABLE},
    "maximum-qos-0": {"maximum_qos": 0},
    "maximum-qos-1": {"maximum_qos": 1},
}
LIBRARY_5_0 = [case.id for case in CASES.values() if case.protocol is V5]


@pytest.fixture(scope="module")
def extremes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[api.ProbeResult, Path]]:
    """The 5.0 library against every configuration at once; each run's reports written to a folder of its own."""

    async def every_configuration(urls: dict[str, str]) -> list[api.ProbeResult]:
        runs = (
            api.run_async(
                url, protocol="5", timeout=TIMEOUTS.get(name, TIMEOUT), concurrency=CONCURRENCY, confirm_timing=False
            )
            for name, url in urls.items()
        )
        return list(await asyncio.gather(*runs))

    declared = [connack(**values) for values in CONFIGURATIONS.values()]
    with servers_in_a_process("scripted_v5", declared) as urls:
        results = asyncio.run(every_configuration(dict(zip(CONFIGURATIONS, urls, strict=True))))
    out = tmp_path_factory.mktemp("extremes")
    written = {}
    for name, result in zip(CONFIGURATIONS, results, strict=True):
        result.write_reports(out / name)
        written[name] = (result, out / name)
    return written


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_no_legal_connack_makes_a_case_crash_or_the_run_exit_3(
    name: str, extremes: dict[str, tuple[api.ProbeResult, Path]]
) -> None:
    result, out = extremes[name]
    print(f"\n{name}: exit {result.exit_status}, {result.counts}")  # the record of the run (pytest -s)
    assert result.exit_status != 3, result.incomplete
    assert [r.case.id for r in result.results] == LIBRARY_5_0
    assert all(r.verdict in VERDICTS for r in result.results)
    broken = [(r.case.id, r.reason) for r in result.results if r.crash is not None or r.error]
    assert not broken, broken[:5]
    report = json.loads((out / "findings.json").read_text(encoding="utf-8"))
    assert [r["case"] for r in report["results"]] == LIBRARY_5_0
    assert not [r["case"] for r in report["results"] if r["error"] or r["evidence"]["crash"]]
    assert (out / "findings.md").stat().st_size and (out / "junit.xml").stat().st_size


#: Per declared limit: what the judge says of a client packet beyond it, what a case that cannot keep to it says,
#: and the cases that go beyond it on purpose (the limit's own cases, and the server DISCONNECT they provoke).
LIMITS = {
    "receive-maximum-1": (
        "exceeds the server's Receive Maximum",
        "unacknowledged at once: the broker's CONNACK declares Receive Maximum 1",
        {c.id for c in CASES.values() if R5.MQTT_3_3_4_7 in c.statements}
        | {"v5/server-disconnect/receive-maximum-exceeded"},
    ),
    "maximum-packet-size-smallest": (
        "above the server's Maximum Packet Size",
        f"the broker's Maximum Packet Size {SMALLEST_MAXIMUM_PACKET_SIZE} is smaller than the",
        {c.id for c in CASES.values() if R5.MQTT_3_2_2_15 in c.statements} | {"v5/server-disconnect/packet-too-large"},
    ),
}


@pytest.mark.parametrize("name", LIMITS)
def test_the_client_steps_keep_to_the_limits_the_broker_declared(
    name: str, extremes: dict[str, tuple[api.ProbeResult, Path]]
) -> None:
    """A broker that declares Receive Maximum 1, or a Maximum Packet Size that holds only its CONNACK, is never
    charged with acting on a packet the prober sent beyond that limit unless the case sends it on purpose: a
    conforming client step waits for a slot of the Receive Maximum, and a case that needs more in flight at once,
    or a packet larger than the maximum, is not applicable and says why."""
    beyond, cannot, on_purpose = LIMITS[name]
    results = extremes[name][0].results
    charged = [
        (r.case.id, f.detail)
        for r in results
        if r.case.id not in on_purpose
        for f in (*r.findings, *r.other_findings)
        if beyond in f.detail
    ]
    assert not charged, charged[:3]
    assert [r for r in results if r.verdict == NOT_APPLICABLE and cannot in r.reason]


def test_topic_alias_maximum_65535_leaves_the_alias_above_it_not_applicable_for_it_cannot_exist(
    extremes: dict[str, tuple[api.ProbeResult, Path]],
) -> None:
    """Alias 65536 does not fit a Two Byte Integer: the cases that send the alias one above the maximum say so
    rather than crash, and the largest alias, 65535, is within the maximum (not applicable either)."""
    results = {r.case.id: r for r in extremes["largest"][0].results}
    for case_id in (
        "v5/topic-alias/maximum-plus-one",
        "v5/topic-alias/maximum-plus-one-qos2",
        "v5/server-disconnect/topic-alias-invalid",
    ):
        result = results[case_id]
        # (the scripted broker's 27-byte CONNACK exceeds the tiny Maximum Packet Size one case declares: its own
        # MUST [MQTT-3.1.2-24] broken by its own act, which fails the case whatever the script concluded)
        assert result.verdict == NOT_APPLICABLE or (
            result.verdict == FAIL and {f.rule for f in result.findings} == {"MQTT-3.1.2-24"}
        ), (
            case_id,
            result.reason,
        )
        assert "Topic Alias 65536 cannot exist" in result.reason, result.reason
    assert results["v5/topic-alias/largest"].verdict == NOT_APPLICABLE


def test_one_byte_over_the_largest_maximum_packet_size_is_sent_and_judged(
    extremes: dict[str, tuple[api.ProbeResult, Path]],
) -> None:
    """Against Maximum Packet Size 268,435,455 each oversize case sends a 268,435,456-byte PUBLISH; the broker
    reads and drops it and stays open (no longer "too large to exceed in reasonable time"). The packet breaks the
    Client's [MQTT-3.2.2-15]; 5.0 names the Server's answer (DISCONNECT 0x95) without a MUST, so staying open is
    leniency, not a failure (section 4.13.1)."""
    results = {r.case.id: r for r in extremes["largest"][0].results}
    for qos in (0, 1):
        result = results[f"v5/maximum-packet-size/from-client-qos{qos}"]
        assert result.verdict == LENIENT and not result.findings, result.reason
        assert [row.rule for row in result.lenient] == ["MQTT-3.2.2-15"]
        assert "the server did not close the connection" in result.reason
        assert _streamed(result.connections[0]["events"])["length"] == LARGEST_MAXIMUM_PACKET_SIZE + 1


def test_a_maximum_packet_size_no_packet_can_exceed_is_not_applicable() -> None:
    """268,435,460 bytes is the largest packet a Remaining Length frames (268,435,455 after a five-byte fixed
    header): a broker declaring that or more cannot be sent a packet over it."""
    url_of = {}
    with ExitStack() as brokers:
        for maximum in (v5_limits.LARGEST_PACKET, 0xFFFFFFFF):
            server = HostileServer("scripted_v5", connack=connack(maximum_packet_size=maximum), lifetime=60)
            url_of[maximum] = brokers.enter_context(server).url
        for maximum, url in url_of.items():
            result = api.run(url, cases="v5/maximum-packet-size/from-client-qos0", timeout=1.0)
            (only,) = result.results
            assert only.verdict == NOT_APPLICABLE, only.reason
            assert f"Maximum Packet Size {maximum:,} is at least the largest packet" in only.reason


def _streamed(events: list[dict[str, object]]) -> dict[str, object]:
    """The one event of a connection's evidence that records a streamed PUBLISH of the prober."""
    (streamed,) = [e for e in events if e.get("from") == "client" and "streamed in chunks" in str(e.get("violations"))]
    assert streamed["packet"] is None and str(streamed["hex"]).startswith(("30 ", "32 "))
    return streamed


#: The Maximum Packet Size of the memory test: 256 MiB.
MAXIMUM_256_MIB = 256 << 20
#: Growth of the test process's resident memory allowed while one 256 MiB + 1 byte PUBLISH goes out: a prober that
#: built the packet, or held it in its evidence, would take 256 MiB at least.
GROWTH_CEILING = 64 << 20


def test_a_publish_one_byte_over_256_mib_is_streamed_never_held(tmp_path: Path) -> None:
    with HostileServer("scripted_v5", connack=connack(maximum_packet_size=MAXIMUM_256_MIB), lifetime=120) as server:
        with PeakMemory() as peak:
            before = peak.tree
            result = api.run(server.url, cases="v5/maximum-packet-size/from-client-qos0", timeout=2.0)
        result.write_reports(tmp_path / "out")
    print(f"\npeak RSS of the test process: {peak.tree / 2**20:.0f} MiB, {(peak.tree - before) / 2**20:.0f} MiB more")
    assert server.largest_packet == MAXIMUM_256_MIB + 1  # the broker read every byte of it
    (only,) = result.results
    assert only.verdict == LENIENT, only.reason  # it read and dropped it, and stayed open
    assert _streamed(only.connections[0]["events"])["length"] == MAXIMUM_256_MIB + 1
    assert peak.tree - before < GROWTH_CEILING
    assert (tmp_path / "out" / "findings.json").stat().st_size < 1 << 20


def test_a_broker_that_closes_on_the_fixed_header_of_an_oversized_publish_passes() -> None:
    """The broker reads the Remaining Length, sends DISCONNECT 0x95 (Packet too large) and closes while the rest
    of the 268,435,456 bytes is still on its way: the prober stops sending, records the PUBLISH (its length what
    went out) before the DISCONNECT, and the broker keeps both statements."""
    declared = connack(maximum_packet_size=LARGEST_MAXIMUM_PACKET_SIZE)
    with HostileServer("scripted_v5", connack=declared, lifetime=60, enforce_maximum=True) as server:
        result = api.run(server.url, cases="v5/maximum-packet-size/from-client-*", timeout=2.0)
    for case in result.results:
        assert case.verdict == PASS, (case.case.id, case.reason)
        events = case.connections[0]["events"]
        assert _streamed(events) is events[2] and events[2]["length"] < LARGEST_MAXIMUM_PACKET_SIZE
        after = [e.get("packet") or f"closed by {e.get('closed_by')}" for e in events[3:]]
        assert after == ["DISCONNECT reason 0x95 Packet too large", "closed by server"], after


def test_a_broker_that_stops_reading_an_oversized_publish_is_not_judged_on_it() -> None:
    """A broker that reads nothing after its CONNACK: the prober gives up on the 10,000,001-byte PUBLISH after a
    timeout without progress and resets the connection itself, which it says; the close the broker owed is not
    judged (the prober closed first), so the case is not a fail."""
    with HostileServer("deaf", connack=connack(maximum_packet_size=10_000_000), lifetime=60) as server:
        result = api.run(server.url, cases="v5/maximum-packet-size/from-client-qos0", timeout=0.5)
    (only,) = result.results
    assert only.verdict != FAIL, only.reason
    assert "so the prober reset the connection" in _streamed(only.connections[0]["events"])["violations"][0]["detail"]
    assert only.connections[0]["events"][-1]["closed_by"] == "client"


def test_a_case_the_prober_fails_on_is_an_error_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception no case expects (here planted in the helper of two alias cases) is a bug of the prober: each
    case it hits is an error naming the exception and where it was raised, every other case is run and judged,
    the reports are written, and the command exits 3 with one line on standard error."""

    def planted(_maximum: int) -> int:
        raise RuntimeError("planted failure")

    monkeypatch.setattr(v5_limits, "_alias_above", planted)
    with HostileServer("scripted_v5", connack=connack(topic_alias_maximum=10), lifetime=60) as server:
        ran = run_mqttaudit(
            "probe",
            server.url,
            "--out",
            str(tmp_path / "out"),
            "--timeout",
            "0.5",
            "--cases",
            "v5/topic-alias/maximum-plus-one*",
            "--cases",
            "v5/topic-alias/largest",
        )
    assert ran.returncode == 3, ran.stderr
    assert "mqttaudit: internal error: the prober failed on 2 case(s)" in ran.stderr
    assert "Traceback" not in ran.stderr + ran.stdout
    report = json.loads((tmp_path / "out" / "findings.json").read_text(encoding="utf-8"))
    assert "the prober failed on 2 case(s)" in report["incomplete"]
    results = {r["case"]: r for r in report["results"]}
    for case_id in ("v5/topic-alias/maximum-plus-one", "v5/topic-alias/maximum-plus-one-qos2"):
        crashed = results[case_id]
        assert crashed["verdict"] == "inconclusive" and crashed["error"], crashed
        crash = crashed["evidence"]["crash"]
        assert crash.startswith("RuntimeError: planted failure (at test_probe_extremes.py:"), crash
        assert "mqttaudit/probe/cases/v5_limits.py:" in crash
        assert str(Path(__file__).parent) not in crash  # no path of the machine in a report
        assert crashed["evidence"]["connections"], "the conversation is kept as evidence"
    assert results["v5/topic-alias/largest"]["verdict"] == "lenient"  # the broker stays open on alias 65535
    junit = (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("<error ") == 2


def test_a_matrix_with_a_case_the_prober_fails_on_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix's status is its worst target's, and an internal error is worse than findings: both brokers fail
    v5/topic-alias/largest (exit status 1 alone), and the planted exception makes the matrix exit 3."""

    def planted(_maximum: int) -> int:
        raise RuntimeError("planted failure")

    monkeypatch.setattr(v5_limits, "_alias_above", planted)
    declared = connack(topic_alias_maximum=10)
    with servers_in_a_process("scripted_v5", [declared, declared]) as urls:
        ran = run_mqttaudit(
            "matrix",
            *urls,
            "--out",
            str(tmp_path / "matrix"),
            "--timeout",
            "0.5",
            "--cases",
            "v5/topic-alias/maximum-plus-one",
            "--cases",
            "v5/topic-alias/largest",
        )
    assert ran.returncode == 3, ran.stderr
    assert (tmp_path / "matrix" / "matrix.md").exists()
