"""The probe's reports for people, from real runs: report.html (failures first, grouped by statement and family,
passes collapsed, leniency apart, not-assessed cases with their reasons, every peer value escaped, nothing
external), findings.md (failures first, the table of every case last), the matrix (each statement's summary in its
row, the "only rows where targets differ" filter) and the reproducers, which replay a case against a real broker
(mosquitto, and the scripted broker with a known deviation) and show the reaction the probe recorded."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from mqttaudit.codec import Publish, encode
from mqttaudit.probe.brokers import RunningBroker
from mqttaudit.probe.case import CASES, Target
from mqttaudit.probe.runner import FAIL, PASS, CaseResult, run_probe
from mqttaudit.report.probe_html import probe_html, probe_view
from mqttaudit.report.reproducer import reproducer

from .hostile_server import CONNACK, HostileServer
from .probe_process import probe
from .scripted_broker import ScriptedBroker
from .test_report_probe import (
    make_case,
    run,  # noqa: F401  (the recorded run of three failures, as a fixture)
)

#: A 3.1.1 case mosquitto 2.0.11 fails: PINGREQ with a reserved flag bit set (c1 00) is answered with PINGRESP
#: (d0 00), the connection left open, where MQTT-2.2.2-2 binds the server to close it.
MOSQUITTO_FAILS = "malformed/pingreq-flag-bit-0"
#: The SUBSCRIBE of an empty Topic Filter, 82 05 00 01 00 00 00: mosquitto closes on it (a pass).
EMPTY_FILTER = "malformed/subscribe-empty-filter"
#: A filter whose one level holds a wildcard not alone ('x#'): the 'one-level-wildcards' scripted broker grants it
#: (SUBACK 90 03 00 01 00) where the conforming one closes.
ONE_LEVEL = "malformed/subscribe-hash-last-char-only-level"
UNDER_PREFIX = "malformed/subscribe-hash-last-char-last-level"
#: What the hostile broker puts in the topic of a PUBLISH it sends unasked, to land in every report's evidence.
HOSTILE_TOPIC = "<script>alert(1)</script><img src=x onerror=alert(2)>"
LINE = re.compile(r"^\s*\d+\.\d{3} s  (?P<connection>\S+)  (?P<what>.*)$")


# --- what a replay printed, and what the probe recorded --------------------------------------------------------


def replayed(stdout: str) -> dict[str, tuple[list[str], str]]:
    """Per connection, the broker's packets (hex) in the order printed, and how the connection ended: "closed",
    "reset" or "open"."""
    seen: dict[str, tuple[list[str], str]] = {}
    for line in stdout.splitlines():
        match = LINE.match(line)
        assert match, line
        packets, _ = seen.setdefault(match["connection"], ([], "open"))
        what = match["what"]
        if what.startswith("<- "):
            packets.append(what[3:])
        elif what.startswith("closed by the broker"):
            seen[match["connection"]] = (packets, "closed")
        elif what.startswith("reset"):
            seen[match["connection"]] = (packets, "reset")
    return seen


def recorded(connections: Sequence[Mapping[str, Any]]) -> dict[str, tuple[list[str], str]]:
    """The same from the probe's evidence: the server's frames, and whether the server closed the connection."""
    seen = {}
    for connection in connections:
        packets = [event["hex"] for event in connection["events"] if event.get("from") == "server"]
        closes = [event for event in connection["events"] if "closed_by" in event]
        ended = "open"
        if closes and closes[0]["closed_by"] == "server":
            ended = "reset" if closes[0]["how"] == "rst" else "closed"
        seen[str(connection["name"])] = (packets, ended)
    return seen


def run_script(path: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The reproducer as a newcomer runs it: the system's python3 on the file, nothing of mqttaudit on its path."""
    return subprocess.run(
        ["python3", str(path), *args], capture_output=True, text=True, timeout=30, env=dict(env or {}), check=False
    )


def case_of(report: Mapping[str, Any], case_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(result for result in report["results"] if result["case"] == case_id)
    return found


# --- reproducers against real brokers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mosquitto_out(mosquitto: RunningBroker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mosquitto") / "reports"
    outcome = probe(f"mqtt://127.0.0.1:{mosquitto.port}", out, "--cases", f"{MOSQUITTO_FAILS},{EMPTY_FILTER}", limit=60)
    assert outcome.status == 1, outcome.stderr
    return out


def test_a_failing_cases_reproducer_shows_mosquitto_answering_as_the_probe_saw(
    mosquitto: RunningBroker, mosquitto_out: Path
) -> None:
    result = case_of(json.loads((mosquitto_out / "findings.json").read_text()), MOSQUITTO_FAILS)
    assert result["verdict"] == FAIL
    script = mosquitto_out / result["reproducer"]["script"]
    assert result["reproducer"]["script"] == "reproducers/malformed/pingreq-flag-bit-0.py"
    replay = run_script(script, "--wait", "2.5")
    assert replay.returncode == 0, replay.stderr
    assert "-> c1 00" in replay.stdout  # the stimulus, as recorded
    # the same answer (CONNACK, then PINGRESP to the malformed PINGREQ) and the same missing close
    assert replayed(replay.stdout) == recorded(result["evidence"]["connections"])
    assert replayed(replay.stdout) == {"c1": (["20 02 00 00", "d0 00"], "open")}
    # the one-liner: bash's /dev/tcp and coreutils, the answer in hex
    line = result["reproducer"]["shell"]
    assert line.startswith("bash -c '") and f"/dev/tcp/127.0.0.1/{mosquitto.port};" in line
    shell = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=30, check=False)
    assert shell.stdout.split() == ["20", "02", "00", "00", "d0", "00"], shell.stderr


def test_the_empty_topic_filter_subscribe_replayed_gets_mosquittos_close(
    mosquitto: RunningBroker, tmp_path: Path
) -> None:
    target = Target("127.0.0.1", mosquitto.port)
    (result,) = asyncio.run(run_probe(target, [CASES[EMPTY_FILTER]], timeout=2.0)).results
    assert result.verdict == PASS
    rep = reproducer(result, target)
    path = tmp_path / "replay.py"
    path.write_text(rep.script(), encoding="utf-8")
    replay = run_script(path)
    assert "-> 82 05 00 01 00 00 00" in replay.stdout
    assert replayed(replay.stdout) == recorded(result.connections) == {"c1": (["20 02 00 00"], "closed")}


def test_a_deviation_of_the_scripted_broker_replays_as_recorded(tmp_path: Path) -> None:
    with ScriptedBroker("one-level-wildcards") as broker:
        outcome = probe(broker.url, tmp_path / "out", "--cases", ONE_LEVEL, limit=60)
        assert outcome.status == 1, outcome.stderr
        result = case_of(outcome.report(), ONE_LEVEL)
        replay = run_script(outcome.out / result["reproducer"]["script"], "--wait", "2.5")
        shell = subprocess.run(
            result["reproducer"]["shell"], shell=True, capture_output=True, text=True, timeout=30, check=False
        )
    # the filter 'x#' granted (SUBACK 90 03 00 01 00) and the connection kept, as the probe saw it
    assert replayed(replay.stdout) == recorded(result["evidence"]["connections"])
    (packets, ended), *_ = replayed(replay.stdout).values()
    assert packets[:2] == ["20 02 00 00", "90 03 00 01 00"] and ended == "open"
    server_bytes = " ".join(
        event["hex"] for event in result["evidence"]["connections"][0]["events"] if event.get("from") == "server"
    )
    assert " ".join(shell.stdout.split()) == server_bytes


def test_a_reproducer_never_holds_the_password_and_takes_it_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "s3cr3t-Pässwort"
    monkeypatch.setenv("MQTTAUDIT_PASSWORD", secret)
    with ScriptedBroker("one-level-wildcards") as broker:
        outcome = probe(broker.url, tmp_path / "out", "--cases", ONE_LEVEL, "--username", "audit", limit=60)
        assert outcome.status == 1, outcome.stderr
        result = case_of(outcome.report(), ONE_LEVEL)
        script = outcome.out / result["reproducer"]["script"]
        without = run_script(script, "--wait", "0.5")
        given = run_script(script, "--wait", "2.5", env={"MQTTAUDIT_PASSWORD": secret})
    assert result["reproducer"]["password_from"] == "MQTTAUDIT_PASSWORD"
    assert result["reproducer"]["shell"] is None  # a one-liner would have to hold it
    for path in [*outcome.out.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert without.returncode != 0 and "set MQTTAUDIT_PASSWORD" in without.stderr
    assert replayed(given.stdout) == recorded(result["evidence"]["connections"])
    # the CONNECT sent carries the user name and the password of the environment, framed again
    connect = next(line for line in given.stdout.splitlines() if "-> 10 " in line).split("-> ")[1]
    assert bytes.fromhex(connect).endswith(len(secret.encode()).to_bytes(2, "big") + secret.encode())


# --- report.html and findings.md of a hostile broker's run ------------------------------------------------------


class Page(HTMLParser):
    """Every tag with its attributes, the ids of the sections in order, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def ids(self, tag: str) -> list[str]:
        return [str(attrs.get("id")) for name, attrs in self.tags if name == tag and attrs.get("id")]


def parsed(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def hostile_out(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A broker that answers every CONNECT with CONNACK and a PUBLISH nobody asked for, whose topic and payload are
    markup, and closes on nothing: the PINGREQ with a reserved flag fails, the subscriptions' cases differ."""
    unasked = encode(Publish(topic=HOSTILE_TOPIC, payload=b"</pre><a href='https://evil.example'>x</a>"))
    with HostileServer("answering", connack=CONNACK + unasked) as server:
        out = tmp_path_factory.mktemp("hostile") / "reports"
        outcome = probe(server.url, out, "--cases", f"{MOSQUITTO_FAILS},{EMPTY_FILTER}", limit=60)
    assert outcome.status == 1, outcome.stderr
    yield out


def test_report_html_escapes_what_a_hostile_broker_sends_and_loads_nothing(hostile_out: Path) -> None:
    html = (hostile_out / "report.html").read_text(encoding="utf-8")
    page = parsed(html)
    assert HOSTILE_TOPIC not in html and "<script" not in html and "https://evil" not in html.replace("&#39;", "'")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html
    assert HOSTILE_TOPIC in "".join(page.text)  # shown, as text
    tags = {name for name, _ in page.tags}
    assert not tags & {"script", "img", "iframe", "link", "object", "embed", "form", "input"}
    assert not [attrs for _, attrs in page.tags if any(name.startswith("on") for name in attrs)]
    urls = [str(attrs[key]) for _, attrs in page.tags for key in ("href", "src") if key in attrs]
    assert urls and all(url.startswith("#") or re.fullmatch(r"reproducers/[\w./-]+\.py", url) for url in urls)
    for url in urls:
        if url.startswith("reproducers/"):
            assert (hostile_out / url).is_file()
        else:
            assert url[1:] in page.ids("section") + page.ids("article") + page.ids("a"), url


def test_report_html_puts_failures_first_and_collapses_the_passes(hostile_out: Path) -> None:
    html = (hostile_out / "report.html").read_text(encoding="utf-8")
    page = parsed(html)
    sections = page.ids("section")
    assert sections[0] == "failures" and sections[-1] == "passes"
    assert sections.index("lenient") < sections.index("not-assessed") < sections.index("passes")
    failing = html.split('<section id="failures">')[1].split('<section id="lenient">')[0]
    # under the statement it breaks, with the expected behaviour, the bytes in hex and the reproducer
    assert '<section class="statement-group" id="statement-MQTT-3.1.1-MQTT-2.2.2-' in failing
    assert f'id="fail-{MOSQUITTO_FAILS}"' in failing
    assert "Expected of a conforming broker" in failing
    assert "c1 00" in failing and "bytes at offset" in failing
    assert f'href="reproducers/{MOSQUITTO_FAILS}.py"' in failing and "bash -c &#39;" in failing
    assert "<td><code>malformed" in failing  # the family table
    passes = html.split('<section id="passes">')[1]
    assert "<details><summary>0 cases passed (show)</summary>" in passes


def test_report_html_collapses_the_passes_and_keeps_them_out_of_the_failures(run: Any) -> None:  # noqa: F811
    html = probe_html(run)
    failing, rest = html.split('<section id="failures">')[1].split('<section id="lenient">')
    passes = rest.split('<section id="passes">')[1]
    not_assessed = rest.split('<section id="not-assessed">')[1].split('<section id="passes">')[0]
    assert "<details><summary>2 cases passed (show)</summary>" in passes and "<details open" not in passes
    for result in run.results:
        shown_in = {"pass": passes, "fail": failing, "inconclusive": not_assessed, "not-applicable": not_assessed}
        assert f"<code>{result.case.id}</code>" in shown_in[result.verdict], result.case.id
        if result.verdict != FAIL:
            assert f"<code>{result.case.id}</code>" not in failing
    # the reasons of what could not be assessed
    assert "setup: no SUBACK for packet id 1 on c1" in not_assessed


def test_findings_md_opens_with_the_failures_and_ends_with_every_case(hostile_out: Path) -> None:
    markdown = (hostile_out / "findings.md").read_text(encoding="utf-8")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Failures" and headings[-1] == "## All cases"
    lines = markdown.splitlines()
    first_failure = next(i for i, line in enumerate(lines) if line.startswith("### "))
    first_row = next(i for i, line in enumerate(lines) if re.match(r"\| \[?`", line))
    assert first_failure < 20 < first_row  # the header, then the first failure; the table at the end
    assert f"](reproducers/{MOSQUITTO_FAILS}.py)" in markdown
    assert "#### Reproducer" in markdown and "bash -c '" in markdown


def test_the_report_groups_failures_by_statement_and_family(run: Any) -> None:  # noqa: F811
    view = probe_view(run)
    groups = {group.statement.id: [case.result.case.id for case in group.cases] for group in view.groups}
    failing = [result.case.id for result in run.results if result.verdict == FAIL]
    assert sorted(case for cases in groups.values() for case in cases) == sorted(failing)  # each case once
    assert all(group.statement.level == "MUST" and group.statement.summary for group in view.groups)
    assert sum(number for _, number, _ in view.families) == len(failing)
    html = probe_html(run)
    for group in view.groups:
        assert f'<section class="statement-group" id="{group.statement.anchor}">' in html
        assert group.statement.summary.replace("'", "&#39;") in html


# --- the matrix ------------------------------------------------------------------------------------------------


def test_the_matrix_shows_summaries_and_filters_the_rows_where_targets_differ(tmp_path: Path) -> None:
    with ScriptedBroker() as strict, ScriptedBroker("one-level-wildcards") as lenient:
        command = [
            sys.executable,
            "-m",
            "mqttaudit",
            "matrix",
            f"strict={strict.url}",
            f"granting={lenient.url}",
            "--cases",
            f"{ONE_LEVEL},{UNDER_PREFIX},ping/pingresp",
            "--timeout",
            "0.5",
            "--out",
            str(tmp_path / "m"),
        ]
        env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin"}
        every = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
        only = subprocess.run(
            [*command[:-1], str(tmp_path / "d"), "--only-differing"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert every.returncode == only.returncode == 1, every.stderr + only.stderr
    all_rows = _matrix_rows((tmp_path / "m" / "matrix.md").read_text(encoding="utf-8"))
    differing = _matrix_rows((tmp_path / "d" / "matrix.md").read_text(encoding="utf-8"))
    assert differing and set(differing) < set(all_rows)
    assert all(cells[0] != cells[1] for _, cells in differing.values())
    assert any(cells[0] == cells[1] for _, cells in all_rows.values())
    assert differing["MQTT-4.8.0-1"][1] == ("pass", "FAIL")
    assert "close the connection" in differing["MQTT-4.8.0-1"][0]  # the statement's summary, in its row
    assert (
        "Only the rows where the targets' verdicts differ (--only-differing)"
        in (tmp_path / "d" / "matrix.md").read_text()
    )
    page = (tmp_path / "d" / "matrix.html").read_text(encoding="utf-8")
    toggle = next(attrs for name, attrs in parsed(page).tags if name == "input")
    assert toggle.get("id") == "only-differing" and "checked" in toggle
    assert "#only-differing:checked ~ .statements tr.same { display: none; }" in page
    assert '<tr class="differs">' in page and '<tr class="same">' in page
    assert page.index("<h2>Failing cases</h2>") < page.index("<h2>Statements</h2>")  # failures first
    unfiltered = (tmp_path / "m" / "matrix.html").read_text(encoding="utf-8")
    assert "checked" not in next(attrs for name, attrs in parsed(unfiltered).tags if name == "input")
    for folder in ("strict", "granting"):
        assert f'href="{folder}/report.html"' in page and (tmp_path / "d" / folder / "report.html").is_file()
    assert (tmp_path / "d" / "granting" / "reproducers" / f"{ONE_LEVEL}.py").is_file()


def _matrix_rows(markdown: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Statement -> (its summary, its cells) of matrix.md's statement tables."""
    rows = {}
    for line in markdown.splitlines():
        if line.startswith("| MQTT-"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0]] = (cells[3], tuple(cells[4:]))
    return rows


def test_a_will_cases_reproducer_tells_the_deviating_broker_from_a_conforming_one(tmp_path: Path) -> None:
    """The 'will-any-disconnect' broker discards the Will on DISCONNECT 0x80 (mosquitto 2.0.11 does, mosquitto#3743):
    the replay of the prober's three connections, its DISCONNECT and its close at the recorded times, shows the
    watcher getting no Will from it, as the probe saw, and the Will from a broker that keeps the rule."""
    case = "v5/will/disconnect-0x80-sends-qos1"
    with ScriptedBroker("will-any-disconnect") as deviating:
        outcome = probe(deviating.url, tmp_path / "out", "--cases", case, limit=60)
        assert outcome.status == 1, outcome.stderr
        result = case_of(outcome.report(), case)
        script = outcome.out / result["reproducer"]["script"]
        against_deviating = replayed(run_script(script, "127.0.0.1", str(deviating.port)).stdout)
    with ScriptedBroker() as conforming:
        against_conforming = replayed(run_script(script, "127.0.0.1", str(conforming.port)).stdout)
    watcher = recorded(result["evidence"]["connections"])["watcher"][0]
    assert not [packet for packet in watcher if packet.startswith("3")]  # no PUBLISH: the failure
    assert against_deviating["watcher"][0] == watcher
    assert [packet[:2] for packet in against_conforming["watcher"][0]][2:] == ["32"]  # the Will, QoS 1


# --- what a reproducer cannot replay, said ----------------------------------------------------------------------


def _connection(events: list[dict[str, Any]], omitted: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": "c1", "client_id": "c1", "events": events, "omitted": omitted}


def _sent(t: float, raw: bytes, length: int | None = None) -> dict[str, Any]:
    return {"t": t, "from": "client", "offset": 0, "length": length or len(raw), "hex": raw.hex(" "), "violations": []}


def _script_globals(source: str, tmp_path: Path) -> dict[str, Any]:
    """The script's module-level names, as Python reads them (its main() not run)."""
    import runpy

    path = tmp_path / "replay.py"
    path.write_text(source, encoding="utf-8")
    return runpy.run_path(str(path), run_name="not_main")


def test_a_frame_held_by_its_start_is_padded_to_its_length_and_said(tmp_path: Path) -> None:
    head = bytes.fromhex("30 ff 27 00 01 74") + b"x" * 1018  # the first 1,024 bytes of a 5,000-byte PUBLISH
    result = CaseResult(
        case=make_case("big/publish", ("MQTT-4.8.0-1",), "A big PUBLISH"),
        verdict=FAIL,
        connections=[
            _connection(
                [_sent(0.01, bytes.fromhex("10 0c 00 04 4d 51 54 54 04 02 00 3c 00 00")), _sent(0.02, head, 5000)]
            )
        ],
    )
    rep = reproducer(result, Target("127.0.0.1", 1883))
    assert rep.one_liner() is None
    assert any("a frame of 5,000 bytes was recorded by its first 1,024" in limit for limit in rep.limits)
    sends = _script_globals(rep.script(), tmp_path)["SENDS"]
    assert [len(data) for _, _, data in sends] == [14, 5000]
    assert sends[1][2].startswith(head) and sends[1][2].endswith(b"x")


def test_client_packets_past_the_evidence_withhold_the_one_liner(tmp_path: Path) -> None:
    connect = bytes.fromhex("10 0c 00 04 4d 51 54 54 04 02 00 3c 00 00")
    omitted = {"events": 40, "client_packets": 5, "client_events": [_sent(1.0, bytes.fromhex("c0 00"))]}
    result = CaseResult(
        case=make_case("many/pings", ("MQTT-3.12.4-1",), "Pings"),
        verdict=FAIL,
        connections=[_connection([_sent(0.01, connect)], omitted)],
    )
    rep = reproducer(result, Target("127.0.0.1", 1883))
    assert [send.data for send in rep.sends] == [connect, bytes.fromhex("c0 00")]  # the kept later packet too
    assert rep.one_liner() is None
    assert "connection c1: 4 client packets past the evidence's bounds are not replayed" in rep.limits


def test_a_hostile_host_stays_a_literal_in_the_script_and_gets_no_one_liner(tmp_path: Path) -> None:
    host = "x'; import os; os.system('id') #\n\"\"\""
    result = CaseResult(
        case=make_case("one/connect", ("MQTT-3.2.0-1",), 'Title with\nnewline and """ quotes'),
        verdict=FAIL,
        reason="reason\n import os",
        connections=[_connection([_sent(0.01, bytes.fromhex("10 0c 00 04 4d 51 54 54 04 02 00 3c 00 00"))])],
    )
    rep = reproducer(result, Target(host, 1883))
    assert rep.one_liner() is None
    names = _script_globals(rep.script(), tmp_path)
    assert names["HOST"] == host and "os" in names  # the script's own import, nothing run from the text
    assert "\nimport os;" not in rep.script() and "\n import os" not in rep.script()
