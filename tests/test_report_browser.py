"""report.html of an audit as a reader's browser shows it: Debian's chromium, headless, at a common laptop width
(1366 px), renders the page of two real audits on Spark, and a script the test adds to the page measures what the
reader sees and writes it into the DOM that chromium dumps.

The audits read real captures of other projects' suites (Suricata's, in which one ClientId connects in six
captures and breaks a rule at byte 125 of one CONNECT, and whose brokers leave routing instances undecided on
connections that did send a CONNECT), and one written here with the project's capture writer: a SUBSCRIBE that
breaks three statements at once, and a connection whose capture ends 55 µs after a packet that is owed an answer.
One audit spans years; the other, one capture of two seconds.

Checked: nothing overflows the page and every table fits its box; the verdict and the findings come before the
charts and the reading guide, which is collapsed; a line over time only where the traffic spans enough time; human
durations and times, never ``5.51e-05 s`` nor epoch seconds; one block of evidence per packet, naming every
statement it broke; the offending byte shown and marked; each client charged per capture at the address of its
offending connection; routing rows with their capture and ClientId; every group of not-assessable rows labelled."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit.judge import reasons
from mqttaudit.pipeline.audit import run_audit
from mqttaudit.report import AuditReportData, audit_html

from .corpus import capture
from .crafted import (
    CLIENT_A,
    CLIENT_B,
    CONNACK_ACCEPTED,
    PUBLISH_QOS1,
    connect,
    sessions,
    write_capture,
)
from .test_report_precision import Page

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Suricata's captures of 2020: the same ClientId ("myvoiceismypassport") in each; only the first one's CONNECT breaks
#: a rule (a Will Payload Format Indicator of 0x90, at byte 125); the MQTT 3.1.1 ones leave routing undecided.
SURICATA = (
    "suricata-verify/mqtt5-sub-mosquittoprops.pcap",
    "suricata-verify/mqtt5-pub-qos1.pcap",
    "suricata-verify/mqtt5-sub-userpass.pcap",
    "suricata-verify/mqtt311-pub-qos1.pcap",
    "suricata-verify/mqtt311-sub-userpass.pcap",
    "suricata-verify/mqtt311-unsub-qos2.pcap",
)
OFFENDING_CLIENT = "[::1]:38848"
#: Flags 0000 where SUBSCRIBE must have 0010 [MQTT-2.2.2-1, MQTT-3.8.1-1], and an empty Topic Filter
#: [MQTT-4.7.3-1]: one packet, three statements.
SUBSCRIBE_BROKEN_THRICE = bytes.fromhex("80 05 00 01 00 00 00")
WIDTH, HEIGHT = 1366, 768

#: Added to the page before </body>: measures the layout and writes it into the DOM as JSON.
MEASURE = """
(() => {
  const root = document.documentElement;
  const top = (selector) => {
    const element = document.querySelector(selector);
    return element ? element.getBoundingClientRect().top + window.scrollY : null;
  };
  const tables = [...document.querySelectorAll('table')].map((table) => {
    const box = table.parentElement, own = table.getBoundingClientRect(), around = box.getBoundingClientRect();
    return {table: table.className, section: (table.closest('section') || {}).id || '', right: own.right,
            boxRight: around.right, width: own.width};
  });
  const guide = document.querySelector('#how-to-read');
  const out = document.createElement('pre');
  out.id = 'measured';
  out.textContent = JSON.stringify({
    viewport: root.clientWidth, scrollWidth: root.scrollWidth, tables,
    guideOpen: guide ? guide.open : null, guideHeight: guide ? guide.getBoundingClientRect().height : null,
    tops: {verdict: top('.headline'), findings: top('#by-rule'), charts: top('#charts'), guide: top('#how-to-read'),
           evidence: top('#evidence')},
  });
  document.body.appendChild(out);
})();
"""


def crafted_capture(folder: Path) -> Path:
    """A client that sends a SUBSCRIBE breaking three statements (the broker closes), and one whose QoS 1 PUBLISH
    the capture ends 55 µs after, before any PUBACK could show."""
    records: list[tuple[float, bytes]] = []
    a, b = sessions()
    records += [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [
        (0.010, a.send(0, connect(b"dev-a"))),
        (0.020, a.send(1, CONNACK_ACCEPTED)),
        (0.030, a.send(0, SUBSCRIBE_BROKEN_THRICE)),
        (0.040, a.fin(1)),
        (0.050, a.fin(0)),
        (0.060, a.segment(1)),
    ]
    records += [(1 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [
        (1.010, b.send(0, connect(b"dev-b"))),
        (1.020, b.send(1, CONNACK_ACCEPTED)),
        (1.030, b.send(0, PUBLISH_QOS1)),
        (1.030055, b.segment(1)),  # the capture ends here, 55 µs after the PUBLISH
    ]
    return write_capture(folder / "three-statements-2026.pcap", records)


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is missing: scripts/install-test-deps.sh installs it (apt-get install chromium)")
    return found


def measured(page: Path, profile: Path) -> dict[str, Any]:
    """What chromium lays out for ``page`` at :data:`WIDTH` px: the measurements of :data:`MEASURE`."""
    html = page.read_text(encoding="utf-8")
    probe = page.with_name(page.stem + "-measured.html")
    probe.write_text(html.replace("</body>", f"<script>{MEASURE}</script></body>"), encoding="utf-8")
    command = [
        chromium(),
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        "--dump-dom",
        probe.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found, f"chromium exited {done.returncode} without the page's measurements: {done.stderr[-2000:]}"
    text = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    result: dict[str, Any] = json.loads(text)
    return result


@dataclass(frozen=True)
class Audited:
    page: Page
    html: str
    layout: dict[str, Any]
    data: AuditReportData
    tables: dict[str, list[dict[str, Any]]]


def audit(spark: SparkSession, folder: Path, paths: list[str]) -> Audited:
    out = folder / "out"
    run_audit(paths, out, spark=spark)
    html = (out / "report.html").read_text(encoding="utf-8")
    tables = {name: pq.read_table(out / name).to_pylist() for name in ("violations", "connections", "not_assessable")}
    data = AuditReportData.from_json((out / "report_data.json").read_text(encoding="utf-8"))
    return Audited(Page(html), html, measured(out / "report.html", folder / "chromium"), data, tables)


@pytest.fixture(scope="module")
def years(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """Six Suricata captures of 2020 and ours of 2026 in one audit."""
    folder = tmp_path_factory.mktemp("browser-years")
    return audit(spark, folder, [*(str(capture(name)) for name in SURICATA), str(crafted_capture(folder))])


@pytest.fixture(scope="module")
def seconds(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """One Suricata capture of two seconds."""
    return audit(spark, tmp_path_factory.mktemp("browser-seconds"), [str(capture(SURICATA[0]))])


# -- the page in the browser ---------------------------------------------------------------------------------------


@pytest.mark.captures
@pytest.mark.parametrize("run", ["years", "seconds"])
def test_nothing_overflows_the_page_and_every_table_fits_its_box_at_1366_px(
    run: str, request: pytest.FixtureRequest
) -> None:
    layout = request.getfixturevalue(run).layout
    assert layout["viewport"] > 1300 and layout["scrollWidth"] <= layout["viewport"], layout
    wide = [table for table in layout["tables"] if table["right"] > table["boxRight"] + 1]
    assert wide == [], wide
    assert "connections" in {table["table"] for table in layout["tables"]}


@pytest.mark.captures
@pytest.mark.parametrize("run", ["years", "seconds"])
def test_the_verdict_and_the_findings_come_before_the_charts_and_the_collapsed_reading_guide(
    run: str, request: pytest.FixtureRequest
) -> None:
    layout = request.getfixturevalue(run).layout
    tops = layout["tops"]
    assert tops["verdict"] < tops["findings"] < tops["charts"] < tops["guide"], tops
    assert layout["guideOpen"] is False and layout["guideHeight"] < 60, layout  # one line until opened


# -- what the page says --------------------------------------------------------------------------------------------


@pytest.mark.captures
def test_a_line_over_time_only_where_the_traffic_spans_enough_time(years: Audited, seconds: Audited) -> None:
    assert years.page.chart("Violations over time, per side")
    assert not seconds.page.root.all("svg", **{"aria-label": "Violations over time, per side"})
    [note] = seconds.page.section("charts").all("p", class_="timeline-note")
    assert note.text.startswith("The audited traffic spans 2 s, from 2020-03-24 16:21:54."), note.text


@pytest.mark.captures
def test_durations_and_times_are_written_for_people(years: Audited) -> None:
    text = years.page.root.text
    assert not re.search(r"\d(\.\d+)?e-\d+ s\b", text)
    assert not re.search(r"\b1\d{9}\.\d+ s\b", text)  # no epoch seconds
    b = f"{CLIENT_B[0]}:{CLIENT_B[1]}"
    ends = [r["reason"] for r in years.tables["not_assessable"] if r["client"] == b and "after event 2" in r["reason"]]
    assert ends and all(re.match(rf"{reasons.CAPTURE_ENDS}: it ends 5\d(\.\d)? µs after event 2", e) for e in ends)
    assert re.search(r"it ends 5\d(\.\d)? µs after event 2", years.page.section("not-assessable").text)


@pytest.mark.captures
def test_one_packet_breaking_three_statements_is_one_block_of_evidence_naming_them_all(years: Audited) -> None:
    flow = next(r["flow"] for r in years.tables["connections"] if r["client"] == f"{CLIENT_A[0]}:{CLIENT_A[1]}")
    rows = [r for r in years.tables["violations"] if r["flow"] == flow and r["actor"] == "client"]
    statements = {r["rule"] for r in rows}
    assert len(rows) == len(statements) == 3 and len({r["event"] for r in rows}) == 1, rows
    samples = [row for row in years.page.section("evidence").all("tr") if "three-statements-2026.pcap" in row.text]
    assert len(samples) == 3
    with_bytes = [row for row in samples if row.all("code", class_="hex")]
    assert len(with_bytes) == 1 and with_bytes[0].one("code", class_="hex").text == SUBSCRIBE_BROKEN_THRICE.hex(" ")
    assert [mark.text for mark in with_bytes[0].all("mark")] == ["80"]  # the flags, the first statement's byte
    assert sum("the same packet as sample 1 of" in row.text for row in samples) == 2
    for row in samples:
        [own] = [statement for statement in statements if row.attrs["id"].startswith(f"rule-{statement}-")]
        others = ", ".join(sorted(statements - {own}))
        assert f"the same packet, by other acts, also breaks {others}" in row.text, row.text


@pytest.mark.captures
def test_the_offending_byte_at_offset_125_is_shown_and_marked(years: Audited, seconds: Audited) -> None:
    for run in (years, seconds):
        [row] = [r for r in run.tables["violations"] if r["offset"] == 125]
        assert "[90]" in row["evidence"] and len(row["evidence"].replace("…", "").split()) <= 64
        marks = [mark.text for mark in run.page.section("evidence").all("mark")]
        assert "90" in marks


@pytest.mark.captures
def test_a_client_id_of_six_captures_is_charged_per_capture_at_its_offending_connection(years: Audited) -> None:
    rows = years.page.section("clients").one("table").rows()
    assert ["myvoiceismypassport", "mqtt5-sub-mosquittoprops.pcap", OFFENDING_CLIENT, "1", "1"] in rows
    assert [row for row in years.data.top_clients if row["client_id"] == "myvoiceismypassport"] == [
        {
            "client": OFFENDING_CLIENT,
            "client_id": "myvoiceismypassport",
            "violations": 1,
            "connections": 1,
            "capture": "mqtt5-sub-mosquittoprops.pcap",
        }
    ]


@pytest.mark.captures
def test_routing_rows_name_the_capture_and_client_id_of_their_connection(years: Audited) -> None:
    connections = {row["flow"]: row for row in years.tables["connections"]}
    routing = [row for row in years.tables["not_assessable"] if row["origin"] == "routing"]
    assert routing
    for row in routing:
        connection = connections[row["flow"]]
        assert (row["capture"], row["client_id"]) == (connection["capture"], connection["client_id"]), row
    text = years.page.section("not-assessable").text
    assert "(no CONNECT captured)" not in text and "capture flow" not in text


def test_every_group_of_not_assessable_rows_has_a_label() -> None:
    def row(tag: str | None) -> dict[str, Any]:
        return {
            "capture": "c.pcap",
            "flow": "f",
            "client": None,
            "server": None,
            "client_id": None,
            "rule": "MQTT-3.3.4-1",
            "level": "MUST",
            "section": "3.3.4",
            "actor": "server",
            "event": 1,
            "frame": 2,
            "time": None,
            "tag": tag,
            "reason": "something the capture did not show",
        }

    data = AuditReportData.from_dict(
        {
            "summary": {"not_assessable": 3, "not_assessable_by_tag": {"": 1, "null": 1, " ": 1}},
            "not_assessable_rows": [row(""), row(None), row(" ")],
        }
    )
    page = Page(audit_html(data))
    labels = [cells[0] for cells in page.section("not-assessable").one("table", class_="not-assessable-tags").rows()]
    assert labels == ["other reasons (no known tag)"]
    assert all(h3.text for h3 in page.section("not-assessable").all("h3"))
