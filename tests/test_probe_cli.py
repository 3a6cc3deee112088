"""``mqttaudit probe`` and ``matrix`` as CI uses them: targets that judge nothing never pass (exit status 4, one
line), exclusions, baselines, the exit statuses in --help, and terminal lines that fit and hold no control bytes.
Every target is real: a free port with nothing on it, a mosquitto started here, or a TCP server of this module."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from mqttaudit.cli.main import main
from mqttaudit.probe.brokers import RunningBroker, _locate_mosquitto, free_port, launch_broker

TIMEOUT = "0.5"
PASSING = "ping/pingresp"
FAILING = "malformed/pingreq-flag-bit-0"  # mosquitto answers PINGRESP and stays open (pinned)


class TcpServer:
    """A TCP server on 127.0.0.1 in a thread: reads the client's bytes and answers each connection with ``reply``
    (nothing when empty; only the first ``replies`` connections when given), then keeps it open until the client
    closes."""

    def __init__(self, reply: bytes = b"", replies: int | None = None) -> None:
        self.reply = reply
        self.replies = replies
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            try:
                if connection.recv(4096) and self.reply and self.replies != 0:
                    self.replies = None if self.replies is None else self.replies - 1
                    connection.sendall(self.reply)
                while connection.recv(4096):
                    pass
            except OSError:
                pass

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def silent() -> Iterator[TcpServer]:
    server = TcpServer()
    yield server
    server.close()


@pytest.fixture
def silent_after_preflight() -> Iterator[TcpServer]:
    """Accepts the preflight's CONNECT (CONNACK 0x00), then answers no other connection."""
    server = TcpServer(bytes.fromhex("20 02 00 00"), replies=1)
    yield server
    server.close()


@pytest.fixture(scope="module")
def locked_mosquitto() -> Iterator[RunningBroker]:
    """A mosquitto that takes only the user 'ci' with its password: anonymous clients get CONNACK 0x05."""
    # mosquitto reads the password file after dropping root for the user 'mosquitto': a world-readable place.
    workdir = Path(tempfile.mkdtemp(prefix="mqttaudit-locked-"))
    workdir.chmod(0o755)
    passwords = workdir / "passwords"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), "ci", "secret"], check=True)
    passwords.chmod(0o644)
    port = free_port()
    config = workdir / "mosquitto.conf"
    config.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwords}\n"
        "persistence false\nlog_dest stderr\nlog_type all\n"
    )
    command = [_locate_mosquitto(), "-c", str(config)]
    try:
        with launch_broker(
            "mosquitto", command, port=port, workdir=workdir, ready=r"mosquitto version \S+ running"
        ) as b:
            yield b
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def probe(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["probe", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --- targets that judge nothing ----------------------------------------------------------------------------------


def test_nothing_listening_exits_4_with_one_line_and_writes_the_reports(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = free_port()
    status, out, err = probe(capsys, f"mqtt://127.0.0.1:{port}", "--timeout", TIMEOUT, "--out", str(tmp_path))

    assert status == 4
    assert out == ""
    assert err == f"mqttaudit: cannot reach mqtt://127.0.0.1:{port}: connection refused — nothing was probed\n"
    report = json.loads((tmp_path / "findings.json").read_text())
    assert report["incomplete"].startswith(f"cannot reach mqtt://127.0.0.1:{port}: connection refused")
    assert {r["verdict"] for r in report["results"]} == {"inconclusive"} and all(r["error"] for r in report["results"])
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.get("errors") == suite.get("tests") == str(len(report["results"]))
    assert suite.get("skipped") == "0" and len(suite.findall("testcase/error")) == len(report["results"])
    assert "Incomplete run" in (tmp_path / "findings.md").read_text()


def test_an_unresolvable_host_exits_4_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, out, err = probe(capsys, "mqtt://no-such-host.invalid:1883", "--out", str(tmp_path))

    assert status == 4 and out == ""
    assert err.startswith("mqttaudit: cannot resolve no-such-host.invalid") and err.count("\n") == 1


def test_json_format_prints_only_json_even_for_an_unreachable_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = probe(
        capsys, f"mqtt://127.0.0.1:{free_port()}", "--format", "json", "--cases", PASSING, "--out", str(tmp_path)
    )

    assert status == 4
    assert json.loads(out)["incomplete"].endswith("nothing was probed")
    assert "cannot reach" in err


def test_a_broker_that_refuses_anonymous_clients_is_authentication_refused(
    locked_mosquitto: RunningBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = probe(capsys, locked_mosquitto.url, "--timeout", TIMEOUT, "--out", str(tmp_path))

    assert status == 4 and out == ""
    assert err == (
        f"mqttaudit: {locked_mosquitto.url}: authentication refused (CONNACK 0x05: not authorised) "
        "— nothing was probed\n"
    )


def test_a_bad_user_name_or_password_refusal_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    server = TcpServer(reply=bytes((0x20, 0x02, 0x00, 0x04)))  # CONNACK 0x04
    try:
        status, _, err = probe(capsys, server.url, "--timeout", TIMEOUT, "--out", str(tmp_path))
    finally:
        server.close()

    assert status == 4
    assert "authentication refused (CONNACK 0x04: bad user name or password)" in err


def test_a_target_that_never_answers_a_connect_is_stopped_before_any_case(
    silent: TcpServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = probe(capsys, silent.url, "--cases", PASSING, "--timeout", "0.3", "--out", str(tmp_path))
    assert status == 4
    assert err == (
        f"mqttaudit: {silent.url}: it did not answer a plain 3.1.1 CONNECT within 0.3 s; it did not answer a plain "
        "5.0 CONNECT within 0.3 s: not an MQTT broker? — nothing was probed\n"
    )


def test_a_broker_that_stops_answering_is_incomplete_and_its_findings_still_count(
    silent_after_preflight: TcpServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    silent = silent_after_preflight
    status, out, _ = probe(capsys, silent.url, "--cases", PASSING, "--timeout", "0.3", "--out", str(tmp_path))

    assert status == 4
    assert "INCOMPLETE: 1 of 1 cases inconclusive (100%), more than the 10% allowed" in out
    assert json.loads((tmp_path / "findings.json").read_text())["incomplete"].startswith("1 of 1 cases")

    # Never answering CONNECT fails connect/accepted (MUST): a real finding, so 1 rather than 4.
    silent.replies = 1
    status, out, _ = probe(
        capsys, silent.url, "--cases", f"{PASSING},connect/accepted", "--timeout", "0.3", "--out", str(tmp_path)
    )
    assert status == 1
    assert "INCOMPLETE: 1 of 2 cases inconclusive (50%)" in out and "FAIL connect/accepted" in out


def test_max_inconclusive_allows_a_share_but_a_run_that_judged_nothing_stays_incomplete(
    silent_after_preflight: TcpServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = (
        silent_after_preflight.url,
        "--cases",
        PASSING,
        "--timeout",
        "0.3",
        "--out",
        str(tmp_path),
        "--max-inconclusive",
        "100%",
    )
    status, out, _ = probe(capsys, *args)
    assert status == 4
    assert "INCOMPLETE: no case could be judged (1 inconclusive)" in out and "more than the" not in out
    status, _, err = probe(capsys, *args[:-1], "lots")
    assert status == 2 and "not a fraction or a percentage" in err


def test_an_unreachable_amqp_broker_exits_4_and_its_password_is_never_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = free_port()
    status, out, err = probe(capsys, f"amqp://admin:s3cret@127.0.0.1:{port}/%2F", "--out", str(tmp_path))

    assert status == 4
    assert (
        err == f"mqttaudit: cannot reach amqp://admin@127.0.0.1:{port}/%2F: connection refused — nothing was probed\n"
    )
    written = "".join(path.read_text() for path in tmp_path.iterdir())
    assert "s3cret" not in out + err + written
    status, _, err = probe(capsys, "amqp://admin:s3cret@127.0.0.1:port/%2F")
    assert status == 2 and "amqp://admin:***@127.0.0.1:port" in err and "s3cret" not in err


# --- help ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "default"), [("probe", "mqttaudit-out"), ("matrix", "mqttaudit-matrix")])
def test_help_lists_the_exit_statuses_and_the_default_out(
    command: str, default: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for status in (
        "0 conformant",
        "1 findings",
        "2 usage error",
        "3 internal error",
        "4 incomplete",
        "130 interrupted",
    ):
        assert status in text, status
    assert f"[default: {default}]" in text


# --- selection ----------------------------------------------------------------------------------------------------


def listed(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["probe", "--list", "--format", "json", *args]) == 0
    return [row["id"] for row in json.loads(capsys.readouterr().out)]


def test_skip_and_bang_globs_leave_cases_out(capsys: pytest.CaptureFixture[str]) -> None:
    malformed = listed(capsys, "--cases", "malformed/*")
    wanted = [case for case in malformed if not case.startswith("malformed/pingreq-")]
    assert len(wanted) < len(malformed)
    assert listed(capsys, "--cases", "malformed/*", "--skip", "malformed/pingreq-*") == wanted
    assert listed(capsys, "--cases", "malformed/*,!malformed/pingreq-*") == wanted
    repeated = listed(capsys, "--cases", "malformed/*", "--skip", "malformed/pingreq-*", "--skip", "*/puback-*")
    assert repeated == [case for case in wanted if "/puback-" not in case]


def test_a_selection_that_matches_nothing_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = probe(capsys, "mqtt://127.0.0.1:1", "--cases", "ping/*", "--skip", "ping/*")
    assert status == 2 and "no case matches 'ping/*' once 'ping/*' is skipped" in err
    assert main(["matrix", "mqtt://127.0.0.1:1", "--cases", "nothing/*"]) == 2


# --- against a real broker: baseline, reports, terminal lines ------------------------------------------------------


def run_json(capsys: pytest.CaptureFixture[str], url: str, out: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    status, stdout, _ = probe(
        capsys, url, "--cases", f"{PASSING},{FAILING}", "--timeout", "1", "--out", str(out), *args
    )
    return status, json.loads((out / "findings.json").read_text()), stdout


def test_a_baseline_fails_the_run_only_on_new_failures(
    mosquitto: RunningBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, first, _ = run_json(capsys, mosquitto.url, tmp_path / "first")
    assert status == 1 and {r["case"]: r["verdict"] for r in first["results"]} == {PASSING: "pass", FAILING: "fail"}

    status, known, out = run_json(
        capsys, mosquitto.url, tmp_path / "known", "--baseline", str(tmp_path / "first/findings.json")
    )
    assert status == 0
    assert (
        known["baseline"]["new"] == [] and known["baseline"]["known"] == [FAILING] and known["baseline"]["fixed"] == []
    )
    assert "0 new failures, 1 known, 0 fixed" in out and f"FAIL {FAILING} [" in out

    # A baseline in which the failing case passed and the passing one failed: one new failure, one fixed.
    for row in first["results"]:
        row["verdict"] = "fail" if row["verdict"] == "pass" else "pass"
    swapped = tmp_path / "swapped.json"
    swapped.write_text(json.dumps(first))
    status, diff, out = run_json(capsys, mosquitto.url, tmp_path / "new", "--baseline", str(swapped))
    assert status == 1
    expected = {
        "file": str(swapped),
        "new": [FAILING],
        "known": [],
        "fixed": [PASSING],
        "known_violations": [],
        "known_lenient": [],
    }
    assert diff["baseline"] == expected
    assert out.index("new failures:") < out.index(f"FAIL {FAILING}") < out.index("fixed since the baseline:")
    assert f"FIXED {PASSING}" in out
    markdown = (tmp_path / "new/findings.md").read_text()
    assert "### New failures (not failing in the baseline)\n\n- `malformed/pingreq-flag-bit-0`" in markdown
    assert "### Fixed (failed in the baseline, pass now)\n\n- `ping/pingresp`" in markdown


@pytest.mark.parametrize(
    ("content", "why"),
    [(None, "cannot read the baseline"), ("{", "is not JSON"), ('{"cases": []}', "no 'results' list")],
)
def test_an_unusable_baseline_is_a_usage_error_naming_the_file(
    content: str | None, why: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    baseline = tmp_path / "old-findings.json"
    if content is not None:
        baseline.write_text(content)
    status, _, err = probe(capsys, f"mqtt://127.0.0.1:{free_port()}", "--baseline", str(baseline))
    assert status == 2 and why in err and str(baseline) in err


def test_terminal_lines_fit_100_columns_and_hold_no_control_characters(
    mosquitto: RunningBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = probe(capsys, mosquitto.url, "--cases", "malformed/*", "--timeout", "1", "--out", str(tmp_path))

    assert status == 1
    lines = out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL ")]
    assert fails and all(len(line) <= 100 for line in lines[:-1])  # the last line names the report files
    assert re.match(r"FAIL malformed/\S+ \[MQTT-[^\]]+\]: ", fails[0])
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f]", out + err)
    # Not a terminal: one mark per case on stderr, no progress bar.
    assert set(err.strip()) <= set(".F?-") and err.count("F") == len(fails)


def test_matrix_with_an_unreachable_broker_is_incomplete(
    mosquitto: RunningBroker, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = free_port()
    status = main(
        [
            "matrix",
            f"ok={mosquitto.url}",
            f"gone=mqtt://127.0.0.1:{port}",
            "--cases",
            "ping/*,malformed/pingreq-*",
            "--skip",
            "malformed/*",
            "--out",
            str(tmp_path),
            "--timeout",
            TIMEOUT,
        ]
    )
    captured = capsys.readouterr()

    assert status == 4
    assert f"mqttaudit: cannot reach mqtt://127.0.0.1:{port}: connection refused — nothing was probed" in captured.err
    assert (tmp_path / "matrix.md").exists() and (tmp_path / "gone/junit.xml").exists()
    ok = json.loads((tmp_path / "ok/findings.json").read_text())
    assert [r["case"] for r in ok["results"]] == [PASSING] and ok["incomplete"] is None
