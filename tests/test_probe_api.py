"""``mqttaudit.probe.run`` / ``run_async`` as a library: the result, its exit status by the CLI's rules, the case
registry without import order, selection, baselines, confirmation of timing-dependent failures, and the reports of
incomplete runs. Brokers are real (mosquitto, or a TCP server of this module on 127.0.0.1); the pure parts are
unit-tested with recorded results."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

import mqttaudit.probe
from mqttaudit.codec import Direction
from mqttaudit.judge import Finding
from mqttaudit.probe import ProbeResult, run, run_async
from mqttaudit.probe.baseline import Baseline, BaselineError, compare, load_baseline
from mqttaudit.probe.brokers import RunningBroker, free_port
from mqttaudit.probe.case import CASES, Case, CaseContext, Target, all_cases
from mqttaudit.probe.cases.malformed import STIMULI
from mqttaudit.probe.confirm import UNSTABLE, confirm_timing_failures
from mqttaudit.probe.outcome import exit_status, nothing_judged, parse_share, too_inconclusive
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, LENIENT, NOT_APPLICABLE, PASS, CaseResult, ProbeRun
from mqttaudit.probe.selection import NoCaseSelected, select_cases
from mqttaudit.report import probe_run_to_junit, probe_run_to_markdown
from mqttaudit.report.statements import default_catalogue
from mqttaudit.report.terminal import BarProgress, MarksProgress, fail_line, summary_lines

# --- the registry ---------------------------------------------------------------------------------------------------


def test_the_case_registry_is_complete_whatever_was_imported_first() -> None:
    code = "from mqttaudit.probe.case import CASES, all_cases; print(len(CASES), len(all_cases()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == [str(len(all_cases()))] * 2
    assert len(all_cases()) > 100


def test_timing_cases_are_flagged() -> None:
    timing = {case.id for case in CASES.values() if case.timing}
    assert "keep-alive/server-disconnects-silent-client" in timing
    assert "will/published-on-abnormal-close" in timing
    assert "ping/pingresp" not in timing
    # of the malformed shapes, only a DISCONNECT waits on a deadline: the Will published some time after the close
    assert (
        {c for c in timing if c.startswith("malformed/")}
        == {f"malformed/{s.case_id}" for s in STIMULI if s.with_will}
        == {f"malformed/disconnect-flag-bit-{bit}" for bit in range(4)} | {"malformed/disconnect-length-1"}
    )


# --- the API against real targets -------------------------------------------------------------------------------


def test_run_returns_a_result_with_the_cli_exit_status(mosquitto: RunningBroker) -> None:
    result = run(mosquitto.url, cases=["ping/*", "malformed/pingreq-flag-bit-0"], timeout=1.0)

    assert isinstance(result, ProbeResult) and result.target == mosquitto.url
    assert [(r.case_id, r.verdict) for r in result.results] == [  # the library's order
        ("ping/pingresp", PASS),
        ("malformed/pingreq-flag-bit-0", FAIL),
    ]
    assert result.counts == {PASS: 1, FAIL: 1, INCONCLUSIVE: 0, NOT_APPLICABLE: 0, LENIENT: 0}
    assert [r.case_id for r in result.findings] == ["malformed/pingreq-flag-bit-0"]
    assert FAIL in result.findings[0].statements.values()
    assert result.exit_status == 1 and result.incomplete is None
    data = result.to_json()
    assert json.loads(json.dumps(data))["summary"] == result.counts


def test_run_async_runs_inside_a_running_loop(mosquitto: RunningBroker) -> None:
    async def inside() -> ProbeResult:
        return await run_async(mosquitto.url, cases="ping/*", timeout=1.0)

    result = asyncio.run(inside())
    assert result.exit_status == 0 and result.counts[PASS] == 1


def test_an_unreachable_target_is_a_result_not_an_exception() -> None:
    port = free_port()
    result = run(f"mqtt://127.0.0.1:{port}", timeout=0.5)

    assert result.exit_status == 4
    assert result.incomplete == f"cannot reach mqtt://127.0.0.1:{port}: connection refused — nothing was probed"
    assert len(result.results) == len(CASES) and all(r.error for r in result.results)
    assert result.refusal is not None and result.refusal.kind == "unreachable"


def test_a_preflight_costs_one_timeout_not_one_per_case() -> None:
    """A server that accepts TCP but never answers: one CONNECT wait per version, then nothing is probed."""
    with listening_but_silent() as url:
        started = time.monotonic()
        result = run(url, cases="ping/*", timeout=0.3)
    assert result.exit_status == 4 and result.counts[INCONCLUSIVE] == 1
    assert time.monotonic() - started < 10  # bounded: not a timing assertion on the probe's own waits


@pytest.mark.parametrize("target", ["http://x:1", "mqtt://x:0", "", "amqp://u:p@h:port/"])
def test_a_malformed_target_raises_value_error(target: str) -> None:
    with pytest.raises(ValueError) as raised:
        run(target)
    assert ":p@" not in str(raised.value)


def test_a_selection_of_nothing_raises_value_error() -> None:
    with pytest.raises(ValueError, match="no case matches"):
        run("mqtt://127.0.0.1:1", cases="no-such-suite/*")


@contextlib.contextmanager
def listening_but_silent() -> Iterator[str]:
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"mqtt://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for connection in held:
            connection.close()


# --- timing-dependent failures are confirmed ------------------------------------------------------------------------


class KeepAliveOnSecondTry:
    """A TCP server that accepts every CONNECT; on the first connection with Keep Alive it never enforces Keep
    Alive, on every later one it closes the connection after one second, as Keep Alive 1 requires."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"mqtt://127.0.0.1:{self._socket.getsockname()[1]}"
        self._keep_alive_connections = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._socket.accept()
                threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            connect = connection.recv(4096)
            connection.sendall(bytes((0x20, 0x02, 0x00, 0x00)))
            keep_alive = len(connect) > 11 and connect[10:12] != b"\x00\x00"  # 3.1.1 CONNECT: bytes 10-11
            if keep_alive:
                with self._lock:
                    self._keep_alive_connections += 1
                    enforce = self._keep_alive_connections > 1
                if enforce:
                    connection.settimeout(1.0)
                    with contextlib.suppress(TimeoutError):
                        while connection.recv(4096):
                            pass
                    return
            connection.settimeout(None)
            while connection.recv(4096):
                pass

    def close(self) -> None:
        self._socket.close()


def test_a_keep_alive_failure_is_its_lone_runs_and_is_not_run_again() -> None:
    """The Keep Alive case (quiet: its stimulus is silence) runs alone, with nothing beside it: its failure is a lone
    run's already, reported as it is (the server would have enforced Keep Alive on a second run)."""
    server = KeepAliveOnSecondTry()
    try:
        # Above the judge's Keep Alive slack (1 s): the case watches 1.5 s + timeout, the deadline is 1.5 s + slack.
        result = run(server.url, cases="keep-alive/*", timeout=1.2)
    finally:
        server.close()
    (only,) = result.results
    assert only.case.quiet
    assert only.verdict == FAIL and "MQTT-3.1.2-24" in only.reason and "second run" not in only.reason
    assert result.exit_status == 1


def recorded(case: Case, verdict: str, reason: str = "") -> CaseResult:
    return CaseResult(case, verdict, reason, {s: verdict for s in case.statements})


async def _never_run(context: CaseContext) -> None:
    raise AssertionError("recorded cases are not run")


def test_confirmation_reruns_only_failed_timing_cases_and_keeps_repeated_failures() -> None:
    flaky = Case("t/flaky", ("MQTT-3.1.2-24",), "flaky", _never_run, timing=True)
    steady = Case("t/steady", ("MQTT-3.1.2-24",), "steady", _never_run, timing=True)
    plain = Case("t/plain", ("MQTT-3.12.4-1",), "plain", _never_run)
    quiet = Case("t/quiet", ("MQTT-3.1.2-24",), "quiet", _never_run, timing=True, quiet=True)  # ran alone already
    second_runs = {"t/flaky": PASS, "t/steady": FAIL}
    rerun_of: list[str] = []

    async def rerun(case: Case) -> CaseResult:
        rerun_of.append(case.id)
        return recorded(case, second_runs[case.id])

    first = [
        recorded(flaky, FAIL, "late"),
        recorded(steady, FAIL, "never"),
        recorded(plain, FAIL, "no"),
        recorded(quiet, FAIL, "open"),
    ]
    confirmed = asyncio.run(confirm_timing_failures(first, rerun))

    assert rerun_of == ["t/flaky", "t/steady"]
    assert [(r.case.id, r.verdict) for r in confirmed] == [
        ("t/flaky", INCONCLUSIVE),
        ("t/steady", FAIL),
        ("t/plain", FAIL),
        ("t/quiet", FAIL),
    ]
    assert confirmed[0].reason == f"{UNSTABLE}; first run: late"
    assert confirmed[0].statements == {"MQTT-3.1.2-24": INCONCLUSIVE}
    assert confirmed[1].reason == "never (failed again on a second run)"


# --- selection, baseline, outcome (pure) ------------------------------------------------------------------------


def test_selection_takes_globs_exclusions_and_suites() -> None:
    malformed = [c.id for c in select_cases("malformed/*")]
    assert [c.id for c in select_cases(["malformed/*"], "malformed/pingreq-*")] == [
        c for c in malformed if not c.startswith("malformed/pingreq-")
    ]
    assert select_cases("malformed/*,!malformed/pingreq-*") == select_cases("malformed/*", ["malformed/pingreq-*"])
    with pytest.raises(NoCaseSelected):
        select_cases("!*")
    assert {c.id for c in select_cases(None, suite="ping")} == {"ping/pingresp"}
    assert all("MQTT-4.7.3-1" in c.statements for c in select_cases("MQTT-4.7.3-1"))


def test_a_baseline_compares_by_case_id(tmp_path: Path) -> None:
    path = tmp_path / "findings.json"
    path.write_text(json.dumps({"results": [{"case": "a", "verdict": "fail"}, {"case": "b", "verdict": "fail"}]}))
    diff = compare(load_baseline(path), [("a", FAIL), ("b", PASS), ("c", FAIL), ("d", PASS)])
    assert (diff.new, diff.known, diff.fixed) == (("c",), ("a",), ("b",))


@pytest.mark.parametrize(
    "content", ["", "[1, 2]", '{"results": {}}', '{"results": [{"case": "a"}]}', '{"results": [{"verdict": "x"}]}']
)
def test_a_baseline_that_is_not_a_findings_json_is_refused_by_name(content: str, tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(content)
    with pytest.raises(BaselineError, match=str(path)):
        load_baseline(path)


def test_share_accepts_fractions_and_percentages() -> None:
    assert parse_share("10%") == parse_share("0.1") == 0.1
    assert parse_share("0") == 0.0 and parse_share(1) == 1.0
    for bad in ("110%", "-1", "ten"):
        with pytest.raises(ValueError):
            parse_share(bad)


def run_of(*results: CaseResult, incomplete: str | None = None) -> ProbeRun:
    return ProbeRun(Target("127.0.0.1", 1883), "2026-01-01T00:00:00+00:00", list(results), 1.0, incomplete=incomplete)


MUST_CASE = Case("s/must", ("MQTT-3.12.4-1",), "must", _never_run)
SHOULD_CASE = Case("s/should", ("MQTT-1.5.3-control-characters",), "should", _never_run)


def test_exit_status_findings_win_over_incomplete_and_baseline_known_failures_do_not_count() -> None:
    rules = default_catalogue()
    assert exit_status(run_of(recorded(MUST_CASE, PASS)), rules) == 0
    assert exit_status(run_of(recorded(SHOULD_CASE, FAIL)), rules) == 0
    assert exit_status(run_of(recorded(MUST_CASE, FAIL)), rules) == 1
    assert exit_status(run_of(recorded(MUST_CASE, FAIL), incomplete="broker down"), rules) == 1
    assert exit_status(run_of(recorded(MUST_CASE, PASS), incomplete="broker down"), rules) == 4
    known = run_of(recorded(MUST_CASE, FAIL))
    known.baseline = compare(Baseline("old.json", {"s/must": FAIL}), [("s/must", FAIL)])
    assert exit_status(known, rules) == 0


def test_too_inconclusive_counts_only_inconclusive_cases() -> None:
    results = [recorded(MUST_CASE, INCONCLUSIVE)] + [recorded(MUST_CASE, NOT_APPLICABLE)] * 9
    assert too_inconclusive(results, 0.1) is None
    reason = too_inconclusive(results, 0.05)
    assert reason is not None and reason.startswith("1 of 10 cases inconclusive (10%)")


def test_a_run_that_judged_no_case_is_incomplete_whatever_the_inconclusive_share() -> None:
    results = [recorded(MUST_CASE, INCONCLUSIVE)] + [recorded(MUST_CASE, NOT_APPLICABLE)] * 9
    assert nothing_judged(results) == "no case could be judged (9 not-applicable, 1 inconclusive)"
    assert nothing_judged([recorded(MUST_CASE, NOT_APPLICABLE), recorded(MUST_CASE, PASS)]) is None
    assert nothing_judged([recorded(MUST_CASE, FAIL)]) is None


# --- reports of incomplete runs -------------------------------------------------------------------------------------


def test_junit_reports_unreachable_cases_as_errors_and_other_undecided_ones_as_skipped() -> None:
    lost = CaseResult(Case("session/x", ("MQTT-3.1.2-5",), "x", _never_run), INCONCLUSIVE, "broker gone", error=True)
    undecided = recorded(Case("delivery/y", ("MQTT-3.12.4-1",), "y", _never_run), INCONCLUSIVE, "no SUBACK")
    not_applicable = recorded(Case("delivery/z", ("MQTT-3.12.4-1",), "z", _never_run), NOT_APPLICABLE, "QoS 1")
    suite = probe_run_to_junit(run_of(lost, undecided, not_applicable, incomplete="the broker went down"))
    suite = ET.fromstring(ET.tostring(suite))

    assert (suite.get("errors"), suite.get("skipped"), suite.get("failures")) == ("1", "2", "0")
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "mqttaudit.probe.session",
        "mqttaudit.probe.delivery",
        "mqttaudit.probe.delivery",
    ]
    error = cases[0].find("error")
    assert error is not None and error.get("message") == "broker gone"
    assert cases[1].find("skipped") is not None and cases[2].find("skipped") is not None
    incomplete = suite.find("properties/property[@name='incomplete']")
    assert incomplete is not None and incomplete.get("value") == "the broker went down"


def test_markdown_says_why_a_run_is_incomplete() -> None:
    markdown = probe_run_to_markdown(run_of(recorded(MUST_CASE, INCONCLUSIVE), incomplete="1 of 1 cases inconclusive"))
    assert "- **Incomplete run:** 1 of 1 cases inconclusive." in markdown


# --- terminal lines -------------------------------------------------------------------------------------------------


def test_fail_lines_escape_control_characters_and_are_cut_with_an_ellipsis() -> None:
    detail = "the server delivered topic 'a\x1b[31mb\nc' " + "x" * 200
    failed = recorded(MUST_CASE, FAIL, "MQTT-3.12.4-1: " + detail)
    failed.findings = [Finding("MQTT-3.12.4-1", Direction.FROM_SERVER, 0.0, 1, detail, "", "c1")]
    line = fail_line(failed, 100)
    assert line.startswith("FAIL s/must [MQTT-3.12.4-1]: the server delivered topic 'a\\x1b[31mb\\nc' xxx")
    assert len(line) == 100 and line.endswith("…")
    assert line.count("MQTT-3.12.4-1") == 1
    assert all(len(text) <= 60 for text in summary_lines(run_of(failed), 60))


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_without_colour_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    stream = FakeTerminal()
    bar = BarProgress(stream, "mqtt://127.0.0.1:1883")
    bar.started(2)
    bar.finished(recorded(MUST_CASE, FAIL))
    bar.finished(recorded(MUST_CASE, PASS))
    bar.close()
    shown = stream.getvalue()
    assert "2/2" in shown and "1 failed" in shown
    assert "\x1b[3" not in shown and "\x1b[9" not in shown  # no foreground colours

    marks = io.StringIO()
    plain = MarksProgress(marks)
    plain.finished(recorded(MUST_CASE, FAIL))
    plain.finished(recorded(MUST_CASE, PASS))
    plain.close()
    assert marks.getvalue() == "F.\n"


def test_the_package_exports_the_api_lazily() -> None:
    assert mqttaudit.probe.run is run and mqttaudit.probe.run_async is run_async
    with pytest.raises(AttributeError):
        mqttaudit.probe.no_such_name  # noqa: B018
