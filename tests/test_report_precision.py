"""report.html as an operator reads it, after an audit on Spark of captures spanning ten years: real captures of
other projects' suites (Zeek's 2016 trace of two MQTT 3.1 connections, a 2020 Suricata capture of a client sending a
packet of reserved type, Arkime's 2023 synthetic capture whose server never answers, of MQTT 3.1, 3.1.1 and 5.0)
and a 2026 capture written here with the project's capture writer, in which two clients with an empty ClientId send
a SUBSCRIBE with an empty Topic Filter and one server answers it, then never answers a QoS 1 PUBLISH it received.

The page is parsed and what a reader sees is checked: who is charged with what, the labels of the time axis, rule
ids never cut, the packet a missing answer was owed for, the words of the byte account, the connections per
version and the rule instances not assessable with their reasons."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest

from mqttaudit.capture.conversation import handling as handling_of
from mqttaudit.judge import reasons
from mqttaudit.pipeline.audit import run_audit
from mqttaudit.pipeline.report_data import report_data
from mqttaudit.report import AuditReportData, audit_html, audit_to_markdown
from mqttaudit.report.audit_charts import CHAR_WIDTH
from mqttaudit.report.audit_data import ViolationRow
from mqttaudit.report.audit_format import frame_label, time_axis
from mqttaudit.report.audit_junit import evidence_lines
from mqttaudit.report.evidence import packet_label

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
from .test_report_audit_outputs import audit_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: 2016, 2020 and 2023, of the third-party capture corpus: read where they lie, never copied.
THIRD_PARTY = (
    "zeek/mqtt.pcap",
    "suricata-verify/mqtt-events-unassigned-msgtype.pcap",
    "arkime/mqtt_synthetic.pcap",
)
#: [MQTT-4.7.3-1] a Topic Filter of length 0.
SUBSCRIBE_EMPTY_FILTER = bytes.fromhex("82 05 00 01 00 00 00")
SUBACK = bytes.fromhex("90 03 00 01 00")


def crafted_capture(folder: Path) -> Path:
    """Two connections to one broker, raw IP, written with the project's capture writer."""
    records: list[tuple[float, bytes]] = []
    a, b = sessions()
    records += [(0.001 * i, packet) for i, packet in enumerate(a.handshake())]
    records += [
        (0.010, a.send(0, connect(b""))),
        (0.020, a.send(1, CONNACK_ACCEPTED)),
        (0.030, a.send(0, PUBLISH_QOS1)),
        (0.040, a.segment(1)),  # the broker's TCP acknowledges the PUBLISH; no PUBACK ever follows
        (0.050, a.send(0, SUBSCRIBE_EMPTY_FILTER)),
        (0.060, a.send(1, SUBACK)),  # answers what it had to close the connection on
        (0.070, a.segment(0)),
        (30.00, a.fin(0)),  # the client gives up: the missing PUBACK and the missing close show at this silence
        (30.001, a.fin(1)),
        (30.002, a.segment(0)),
    ]
    records += [(40 + 0.001 * i, packet) for i, packet in enumerate(b.handshake())]
    records += [
        (40.010, b.send(0, connect(b""))),
        (40.020, b.send(1, CONNACK_ACCEPTED)),
        (40.030, b.send(0, SUBSCRIBE_EMPTY_FILTER)),
        (40.040, b.fin(1)),  # the broker closes at once, as it must
        (40.050, b.fin(0)),
        (40.060, b.segment(1)),
    ]
    return write_capture(folder / "empty-client-ids-2026.pcap", records)


# -- the page as a reader sees it --------------------------------------------------------------------------------

#: Elements whose text a reader does not see on the page (a chart's <title> is a tooltip).
HIDDEN = {"title", "style", "script", "head"}
VOID = {"br", "meta", "hr", "img", "input", "link", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The text a reader sees in the element (tooltips and styles left out), spaces collapsed."""
        parts = [
            child if isinstance(child, str) else " " if child.tag == "br" else child.text
            for child in self.children
            if isinstance(child, str) or child.tag not in HIDDEN
        ]
        return re.sub(r"\s+", " ", "".join(parts)).strip()

    def all(self, tag: str, **attrs: str) -> list[Node]:
        """Every descendant ``tag`` whose attributes hold ``attrs`` (``class_`` for a class among its classes)."""
        found = []
        for child in self.children:
            if isinstance(child, str):
                continue
            wanted_class = attrs.get("class_")
            if (
                child.tag == tag
                and (wanted_class is None or wanted_class in child.attrs.get("class", "").split())
                and all(child.attrs.get(k) == v for k, v in attrs.items() if k != "class_")
            ):
                found.append(child)
            found += child.all(tag, **attrs)
        return found

    def one(self, tag: str, **attrs: str) -> Node:
        [node] = self.all(tag, **attrs)
        return node

    def rows(self) -> list[list[str]]:
        """The text of each cell of each body row of a table."""
        return [[cell.text for cell in row.all("td")] for body in self.all("tbody") for row in body.all("tr")]


class Page(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self._open = [self.root]
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {name: value or "" for name, value in attrs})
        self._open[-1].children.append(node)
        if tag not in VOID:
            self._open.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open[-1].children.append(Node(tag, {name: value or "" for name, value in attrs}))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        while self._open[-1].tag != tag:  # an element the page left open
            self._open.pop()
        self._open.pop()

    def handle_data(self, data: str) -> None:
        self._open[-1].children.append(data)

    def section(self, anchor: str) -> Node:
        return self.root.one("section", id=anchor)

    def chart(self, title: str) -> Node:
        return self.root.one("svg", **{"aria-label": title})


# -- the audit -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Audited:
    page: Page
    markdown: str
    tables: dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    folder = tmp_path_factory.mktemp("precision")
    out = folder / "out"
    run_audit([*(str(capture(name)) for name in THIRD_PARTY), str(crafted_capture(folder))], out, spark=spark)
    tables = {
        name: pq.read_table(out / name).to_pylist()
        for name in ("violations", "connections", "packets", "not_assessable")
    }
    page = Page((out / "report.html").read_text(encoding="utf-8"))
    return Audited(page, (out / "findings.md").read_text(encoding="utf-8"), tables)


def connection_of(audited: Audited, client: tuple[str, int]) -> dict[str, Any]:
    [row] = [row for row in audited.tables["connections"] if row["client"] == f"{client[0]}:{client[1]}"]
    return row


def own_violations(audited: Audited, actor: str) -> Counter[str]:
    """Violations committed by ``actor``, per connection."""
    return Counter(row["flow"] for row in audited.tables["violations"] if row["actor"] == actor)


@pytest.mark.captures
def test_each_client_is_charged_with_its_own_violations_and_none_has_a_blank_name(audited: Audited) -> None:
    a, b = connection_of(audited, CLIENT_A), connection_of(audited, CLIENT_B)
    assert a["client_id"] == b["client_id"] == ""
    by_client, by_server = own_violations(audited, "client"), own_violations(audited, "server")
    assert by_client[a["flow"]] == by_client[b["flow"]] == 1  # one empty Topic Filter each
    assert by_server[a["flow"]] > 0  # and A's server broke rules of its own
    rows = audited.page.section("clients").one("table").rows()
    expected = []
    for row in audited.tables["connections"]:
        if by_client[row["flow"]]:
            name = row["client_id"] or f"(empty ClientId) {row['client']}"
            expected.append([name, row["capture"], row["client"], str(by_client[row["flow"]]), "1"])
    assert sorted(rows) == sorted(expected)
    assert ["(empty ClientId) 10.0.0.5:50122", "empty-client-ids-2026.pcap", "10.0.0.5:50122", "1", "1"] in rows
    assert all(cell.strip() for row in rows for cell in row)
    bars = audited.page.chart("Clients with the most violations")
    labels = [text.text for text in bars.all("text", class_="label")]
    assert sorted(labels) == sorted(row[0] for row in rows)
    assert {rect.attrs["data-label"]: int(rect.attrs["data-value"]) for rect in bars.all("rect", class_="bar")} == {
        row[0]: int(row[3]) for row in rows
    }


@pytest.mark.captures
def test_server_faults_are_ranked_by_server(audited: Audited) -> None:
    by_server = own_violations(audited, "server")
    per_server: Counter[str] = Counter()
    connections: Counter[str] = Counter()
    for row in audited.tables["connections"]:
        per_server[row["server"]] += by_server[row["flow"]]
        connections[row["server"]] += 1
    expected = sorted([server, str(n), str(connections[server])] for server, n in per_server.items() if n)
    assert expected and expected[0][0] == "10.0.0.1:1883"
    assert sorted(audited.page.section("servers").one("table").rows()) == expected
    chart = audited.page.chart("Servers with the most violations")
    assert [text.text for text in chart.all("text", class_="label")] == ["10.0.0.1:1883"]


@pytest.mark.captures
def test_the_time_axis_of_a_capture_spanning_years_names_the_years(audited: Audited) -> None:
    chart = audited.page.chart("Violations over time, per side")
    ticks = [text.text for text in chart.all("text", class_="tick") if "-" in text.text]
    assert len(ticks) == 3 and all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", tick) for tick in ticks), ticks
    # The axis spans the audited traffic (Zeek's 2016 capture to ours of 2026), not only the violations' times.
    assert ticks[0].startswith("2016-") and ticks[-1].startswith("2026-")
    assert chart.one("text", class_="axis-note").text == "date (UTC)"


@pytest.mark.captures
def test_no_rule_id_is_cut_anywhere_on_the_page(audited: Audited) -> None:
    rules = {row["rule"] for row in audited.tables["violations"]}
    assert "MQTT-2.2.1-reserved-type" in rules  # 24 characters: cut at 22 before
    chart = audited.page.chart("Violations by statement, split by the side that broke it")
    labels = [text.text for text in chart.all("text", class_="label")]
    assert sorted(labels) == sorted(rules)
    # Each label (monospace, right-aligned at x) starts inside the chart and ends before the bars begin.
    bars_start = min(float(rect.attrs["x"]) for rect in chart.all("rect", class_="bar"))
    for text in chart.all("text", class_="label"):
        right = float(text.attrs["x"])
        assert right - CHAR_WIDTH * len(text.text) >= 0 and right < bars_start, text.text
    visible = audited.page.root.text
    assert "…" not in " ".join(labels)
    for rule in rules | {row["rule"] for row in audited.tables["not_assessable"]}:
        assert re.search(rf"(?<![\w-]){re.escape(rule)}(?![\w-])", visible), rule
    statements = audited.page.section("by-rule").all("td", class_="statement")
    assert sorted({cell.text for cell in statements}) == sorted(rules)


@pytest.mark.captures
def test_a_missing_answer_names_the_packet_it_was_owed_for_and_shows_its_bytes(audited: Audited) -> None:
    a = connection_of(audited, CLIENT_A)
    [publish] = [p for p in audited.tables["packets"] if p["flow"] == a["flow"] and p["type"] == "PUBLISH"]
    [finding] = [v for v in audited.tables["violations"] if v["rule"] == "MQTT-4.3.2-2"]
    assert (finding["flow"], finding["cause_event"]) == (a["flow"], publish["event"])
    assert finding["cause_frame"] == publish["frame"] and finding["frame"] is None  # it shows at the close
    row = audited.page.root.one("tr", id="rule-MQTT-4.3.2-2-server-sample-1")
    owed = (
        f"answer owed for PUBLISH id 7, QoS 1, topic 'a/b', 11 bytes, at frame {publish['frame']}, "
        f"event {publish['event']}"
    )
    assert owed in row.text
    assert "PUBLISH, 11 bytes: the unanswered packet" in row.text
    assert "bytes of the unanswered packet: " + PUBLISH_QOS1.hex(" ") in row.text
    assert "no frame of its own (it shows at a silence or a close)" in row.text
    assert owed in audited.markdown and f"Bytes of the unanswered packet:\n\n```text\n{PUBLISH_QOS1.hex(' ')}" in (
        audited.markdown
    )


@pytest.mark.captures
def test_the_byte_account_calls_only_malformed_frames_malformed(audited: Audited) -> None:
    parts = audited.page.root.one("table", class_="bytes").rows()
    account = {row[0]: int(row[1].replace(",", "")) for row in parts if len(row) == 2}
    versions = {row["flow"]: row["version"] for row in audited.tables["connections"]}
    assert {"3.1", "5.0"} <= set(versions.values())
    own_version = sum(p["length"] for p in audited.tables["packets"] if versions[p["flow"]] in ("3.1", "5.0"))
    broken = {(v["flow"], v["event"]) for v in audited.tables["violations"] if v["origin"] == "codec"}
    malformed = sum(p["length"] for p in audited.tables["packets"] if (p["flow"], p["event"]) in broken)
    [(whole_label, whole)] = [(k, v) for k, v in account.items() if k.startswith("in whole MQTT packets")]
    [broken_bytes] = [v for k, v in account.items() if k.startswith("in malformed frames")]
    assert "of the version of their connection, MQTT 3.1.1, 5.0 or 3.1" in whole_label
    assert broken_bytes == malformed == 26 + 7 + 7  # the reserved type 0 packet and the two empty Topic Filters
    assert whole >= own_version > 0  # those connections' packets, decoded as their version and well formed
    assert "could not be framed" not in audited.page.section("details").text


@pytest.mark.captures
def test_the_not_assessable_section_lists_every_row_with_its_reason(audited: Audited) -> None:
    section = audited.page.section("not-assessable")
    table = audited.tables["not_assessable"]
    tags = Counter(row["tag"] for row in table)
    assert tags[reasons.NOT_ACCEPTED] and tags[reasons.NO_ANSWER]  # Arkime's silent server, our unanswered PUBLISH
    summary = {
        row[0]: int(row[2].replace(",", "")) for row in section.one("table", class_="not-assessable-tags").rows()
    }
    assert summary == dict(tags)
    shown = []
    for group in section.all("table", class_="not-assessable"):
        tag = group.attrs["data-tag"]
        for rule, side, where, event, _time, reason in group.rows():
            assert reason.startswith(tag), reason
            flow = re.search(r"flow (\S+)", where)
            assert flow is not None, where
            shown.append((rule, side, flow.group(1), event, reason))
    assert sorted(shown) == sorted(
        (row["rule"], row["actor"], row["flow"], f"event {row['event']} {frame_label(row['frame'])}", row["reason"])
        for row in table
    )
    assert "client (empty ClientId) 10.0.0.5:50122" in section.text  # whom the row is about, never a blank
    assert "## Not assessable" in audited.markdown
    assert all(row["reason"] in audited.markdown for row in table)


@pytest.mark.captures
def test_the_versions_seen_and_their_handling_are_listed(audited: Audited) -> None:
    handling: dict[str, set[str]] = {}
    for row in audited.tables["connections"]:
        handling.setdefault(row["version"], set()).add(row["handling"])
    counts = Counter(row["version"] for row in audited.tables["connections"])
    rows = audited.page.section("versions").one("table").rows()
    assert sorted((version, int(n), text) for version, n, _packets, text in rows) == sorted(
        (version, counts[version], "; ".join(sorted(handling[version]))) for version in counts
    )
    assert rows[0][0] == "3.1.1" and rows[0][3] == "judged against MQTT 3.1.1"
    decoded = {row[0]: row[3] for row in rows if row[0] in ("3.1", "5.0")}
    assert decoded == {version: handling_of(version) for version in ("3.1", "5.0")}
    assert "not judged" in decoded["3.1"] and decoded["5.0"] == "judged against MQTT 5.0"
    assert "| 5.0 | " in audited.markdown


@pytest.mark.captures
def test_the_connack_code_is_shown_with_its_meaning(audited: Audited) -> None:
    table = audited.page.section("connections").one("table")
    header = [cell.text for cell in table.all("th")]
    at, code_at = header.index("Client, its ClientId"), header.index("CONNACK")
    seen = {row[at].split()[0]: row[code_at] for row in table.rows()}
    assert seen["10.0.0.5:50122"] == seen["10.0.0.6:40001"] == "0 (accepted)"
    assert seen["192.168.1.10:54321"] == "-"  # Arkime's server never answered
    clients = [row[at] for row in table.rows()]
    assert "10.0.0.5:50122 (empty ClientId)" in clients


# -- pure rendering: what no capture here shows --------------------------------------------------------------------


def test_the_time_axis_labels_follow_the_span() -> None:
    day = time_axis(1_746_093_600, 1_746_093_600 + 3600)  # 2025-05-01, one hour
    assert (day.label(1_746_093_600), day.note) == ("10:00:00", "time of day (UTC) on 2025-05-01")
    weeks = time_axis(1_746_093_600, 1_746_093_600 + 9 * 86_400)
    assert (weeks.label(1_746_093_600), weeks.note) == ("05-01 10:00", "date and time (UTC) in 2025")
    new_year = time_axis(1_767_139_200, 1_767_139_200 + 3 * 86_400)  # 2025-12-31 to 2026-01-03
    assert new_year.label(1_767_139_200) == "2025-12-31 00:00" and new_year.note == "date and time (UTC)"
    months = time_axis(1_746_093_600, 1_746_093_600 + 90 * 86_400)
    assert (months.label(1_746_093_600), months.note) == ("05-01", "date (UTC) in 2025")
    assert time_axis(0.5, 12.0).label(3.0) == "3 s"


def test_a_missing_answer_shown_at_a_packet_keeps_that_packets_bytes_and_names_the_cause() -> None:
    row = ViolationRow(
        capture="c.pcap",
        flow="f",
        event=9,
        rule="MQTT-3.1.4-4",
        level="MUST",
        section="3.1.4",
        actor="server",
        origin="judge",
        kind="missing",
        frame=40,
        offset=30,
        time=1_700_000_002.1,
        detail="the server did not send CONNACK within 2 s of event 0",
        expected="the server answers CONNECT with CONNACK",
        evidence="30 05 00 01 61 68 69",
        cause_event=0,
        cause_frame=31,
        cause_packet="CONNECT, 20 bytes",
    )
    page = Page(audit_html(AuditReportData(violation_samples=[row])))
    shown = page.root.one("tr", id="rule-MQTT-3.1.4-4-server-sample-1").text
    assert "answer owed for CONNECT, 20 bytes, at frame 31, event 0" in shown
    assert "PUBLISH, 7 bytes" in shown and "unanswered" not in shown  # the bytes are the packet it shows at
    assert "frame 40" in shown


def test_a_frame_of_a_version_that_is_not_judged_is_not_called_malformed() -> None:
    framed = {"t": 0.0, "from": "server", "offset": 0, "hex": "20 03 00 00 00", "packet": None, "violations": []}
    assert packet_label({**framed, "version": "5.0"}) == "MQTT 5.0 packet, not decoded: 20 03 00 00 00"
    assert packet_label(framed) == "a packet, not decoded: 20 03 00 00 00"
    broken = {**framed, "violations": [{"rule": "MQTT-2.2.3-four-bytes", "offset": 0, "detail": "x"}]}
    assert packet_label(broken) == "malformed: 20 03 00 00 00"


def test_a_long_client_id_from_the_wire_is_cut_in_the_chart_but_a_rule_id_never_is() -> None:
    long_id = "sensor-" + "x" * 200 + "<b>"
    rule = "MQTT-1.5.3-control-characters-and-more-words"
    data = AuditReportData(
        top_clients=[{"client": "10.0.0.9:1", "client_id": long_id, "violations": 3, "connections": 1}],
        violations_by_rule=[
            {
                "rule": rule,
                "level": "SHOULD",
                "section": "1.5.3",
                "actor": "client",
                "origin": "codec",
                "count": 3,
                "first_time": None,
                "summary": "",
            }
        ],
    )
    page = Page(audit_html(data))
    [client] = page.chart("Clients with the most violations").all("text", class_="label")
    assert client.text.endswith("…") and len(client.text) == 48 and "<b>" not in client.text
    assert long_id in client.one("title").text  # whole in the tooltip
    [statement] = page.chart("Violations by statement, split by the side that broke it").all("text", class_="label")
    assert statement.text == rule


# -- report_data on hand-made tables: groupings no capture here shows ----------------------------------------------


def test_a_client_id_seen_on_several_connections_is_one_client_and_one_without_a_connect_is_named_by_address(
    spark: SparkSession, tmp_path: Path
) -> None:
    def connection(flow: str, client: str, client_id: str | None, start: float) -> dict[str, Any]:
        return {
            "capture": "c.pcap",
            "flow": flow,
            "client": client,
            "server": "10.0.0.1:1883",
            "client_id": client_id,
            "start": start,
        }

    def violation(flow: str, actor: str, event: int) -> dict[str, Any]:
        return {"capture": "c.pcap", "flow": flow, "event": event, "rule": "MQTT-4.7.3-1", "actor": actor}

    connections = [
        {**connection("f1", "10.0.0.2:2000", "dev-1", 20.0), "packets": 3, "version": "3.1.1"},
        {**connection("f2", "10.0.0.3:2001", "dev-1", 10.0), "packets": 3, "version": "3.1.1"},  # the first
        {**connection("f3", "10.0.0.4:2002", None, 30.0), "packets": 2, "version": "unknown"},
    ]
    violations = [violation("f1", "client", 1), violation("f2", "client", 2), violation("f2", "server", 3)]
    violations += [violation("f3", "client", 1), violation("f3", "server", 2), violation("f3", "server", 3)]
    out = audit_dir(
        tmp_path,
        {
            "violations": violations,
            "connections": connections,
            "routing_findings": [],
            "deliveries": [],
            "gaps": [],
            "not_assessable": [],
            "lenient": [],
            "packets": [],
        },
    )
    summary = {
        "counts": {"flows": 3, "connections": 3, "packets": 8},
        "bytes": {},
        "time_span": [None, None],
        "versions": {
            "3.1.1": {"connections": 2, "handling": "", "packets": 6},
            "unknown": {"connections": 1, "handling": "", "packets": 2},
        },
        "not_assessable": {"rows": 0, "by_tag": {}},
    }
    data = report_data(spark, out, summary, samples=5, rows=200)
    assert data.top_clients == [
        {"client": "10.0.0.3:2001", "client_id": "dev-1", "violations": 2, "connections": 2, "capture": "c.pcap"},
        {"client": "10.0.0.4:2002", "client_id": None, "violations": 1, "connections": 1, "capture": "c.pcap"},
    ]
    assert data.top_servers == [{"server": "10.0.0.1:1883", "violations": 3, "connections": 3}]
    page = Page(audit_html(data))
    rows = page.section("clients").one("table").rows()
    assert rows == [
        ["dev-1", "c.pcap", "10.0.0.3:2001 (the first that broke a rule)", "2", "2"],
        ["(no CONNECT captured) 10.0.0.4:2002", "c.pcap", "10.0.0.4:2002", "1", "1"],
    ]
    assert data.summary["versions"] == {
        "3.1.1": {"connections": 2, "handling": "", "packets": 6},
        "unknown": {"connections": 1, "handling": "", "packets": 2},
    }
    assert data.summary["not_assessable"] == 0 and data.summary["not_assessable_by_tag"] == {}
    assert "None: every rule the traffic exercised could be decided." in page.section("not-assessable").text


def test_the_junit_failure_names_the_packet_a_missing_answer_was_owed_for() -> None:
    row = {
        "capture": "c.pcap",
        "flow": "f",
        "event": 5,
        "frame": None,
        "rule": "MQTT-4.3.2-2",
        "actor": "server",
        "evidence": PUBLISH_QOS1.hex(" "),
        "cause_event": 2,
        "cause_frame": 5,
    }
    lines = dict(evidence_lines(row))
    assert lines["answer owed for"] == "frame 5, event 2"
    assert lines["evidence (hex), the unanswered packet"] == PUBLISH_QOS1.hex(" ")


def test_a_not_assessable_row_of_the_routing_replay_names_no_client_it_does_not_know() -> None:
    row = {
        "capture": "c.pcap",
        "flow": "sub@7",
        "client": None,
        "server": None,
        "client_id": None,
        "rule": "MQTT-3.3.2-3",
        "level": "MUST",
        "section": "3.3.2",
        "actor": "server",
        "event": 4,
        "frame": None,
        "time": None,
        "origin": "routing",
        "tag": reasons.CAPTURE_ENDS,
        "reason": f"{reasons.CAPTURE_ENDS}: the delivery was due after the capture's end",
    }
    data = AuditReportData(not_assessable_rows=[row])  # type: ignore[list-item]
    [cells] = Page(audit_html(data)).section("not-assessable").one("table", class_="not-assessable").rows()
    assert cells[2] == "capture c.pcap flow sub@7 left by the routing replay"
    assert cells[5] == row["reason"]
    assert "| `sub@7`, left by the routing replay |" in audit_to_markdown(data)


def test_every_reason_tag_has_a_meaning_for_the_reader() -> None:
    from mqttaudit.judge import reasons
    from mqttaudit.report.audit_findings import TAG_MEANINGS

    assert set(TAG_MEANINGS) == set(reasons.TAGS)
    assert all(reasons.tag_of(reasons.reason(tag, "details")) == tag for tag in reasons.TAGS)
