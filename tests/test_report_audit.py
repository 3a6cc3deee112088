"""Audit reports: report.html and findings.md written from the aggregated data the driver collects."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from mqttaudit.report import AuditReportData, write_audit_reports
from mqttaudit.report.audit_data import (
    ConnectionRow,
    RoutingRow,
    RuleCount,
    TimeBucket,
    ViolationRow,
)
from mqttaudit.report.audit_html import time_points
from mqttaudit.spec import load_catalogue

HOSTILE = "<script>alert(1)</script>"
HOSTILE_CLIENT = 'sensor-<b onload="x()">7</b>'
T0 = 1746093600.0  # 2025-05-01 10:00:00 UTC
CAPTURE = "edge-gateway-2025-05-01.pcapng"
BROKER = "10.0.0.1:1883"
EMPTY_FILTER_HEX = "82 05 00 01 00 00 00"
SUBACK_HEX = "90 03 00 01 00"
CATALOGUE = load_catalogue("3.1.1")


def by_rule(rule: str, actor: str, origin: str, number: int, first: float) -> RuleCount:
    entry = CATALOGUE[rule]
    return RuleCount(
        rule=rule,
        level=entry.level,
        section=entry.section,
        actor=actor,
        origin=origin,
        count=number,
        first_time=first,
        summary=entry.summary,
    )


def violation(**row: Any) -> ViolationRow:
    base: dict[str, Any] = {
        "capture": CAPTURE,
        "flow": "f1",
        "kind": "",
        "expected": "",
        "level": "MUST",
    }
    return ViolationRow(**{**base, **row})  # type: ignore[typeddict-item]


def routing(kind: str, rule: str, event: int, time: float, detail: str, expected: str) -> RoutingRow:
    entry = CATALOGUE[rule]
    return RoutingRow(
        broker=BROKER,
        flow="sub",
        event=event,
        kind=kind,
        rule=rule,
        level=entry.level,
        section=entry.section,
        time=time,
        detail=detail,
        expected=expected,
    )


def connection(flow: str, client: str, client_id: str, violations: int) -> ConnectionRow:
    return ConnectionRow(
        capture=CAPTURE,
        flow=flow,
        client=client,
        server=BROKER,
        client_id=client_id,
        protocol_level=4,
        clean_session=True,
        keep_alive=60,
        connack_code=0,
        start=T0 + 0.01,
        end=T0 + 5.04,
        ended_by=None,
        how="capture-end",
        mid_stream=False,
        roles="handshake",
        packets=4,
        violations=violations,
        not_assessable=0,
    )


def audit_data() -> AuditReportData:
    """A client sends SUBSCRIBE with an empty Topic Filter, the server answers it and keeps the connection open;
    on the same broker a message leaks to a subscriber and another never arrives; one capture is corrupt."""
    offending = "client SUBSCRIBE id 1 (event 2) breaking MQTT-4.7.3-1: Topic Filter is empty (length 0x0000)"
    return AuditReportData(
        summary={
            "captures": [
                {"file": CAPTURE, "bytes": 48_213_556, "records": 120_344},
                {"file": "broken.pcap", "bytes": 1_048_576, "records": 3_000},
            ],
            "flows": 412,
            "connections": 412,
            "packets": 98_765,
            "bytes": {
                "mqtt_bytes": 10_000_000,
                "packet_bytes": 9_990_000,
                "malformed_bytes": 1_200,
                "gap_bytes": 8_000,
                "unsynced_bytes": 800,
            },
            "time_span": {"start": T0, "end": T0 + 3600},
            "spark_master": "local[*]",
            "duration": 73.4,
            "started": "2025-05-01T11:00:00+00:00",
            "skipped": {"not-tcp": 312, "truncated-tcp-payload": 4},
            "errors": [
                {"file": "broken.pcap", "offset": 524_312, "reason": "record header announces 4294967295 bytes"}
            ],
            "not_assessable": 17,
        },
        violations_by_rule=[
            by_rule("MQTT-4.7.3-1", "client", "codec", 3, T0 + 0.03),
            by_rule("MQTT-4.7.3-1", "server", "judge", 2, T0 + 0.04),
            by_rule("MQTT-4.8.0-1", "server", "judge", 2, T0 + 0.04),
        ],
        violations_over_time=[
            TimeBucket(bucket_start=T0, actor="client", count=2),
            TimeBucket(bucket_start=T0, actor="server", count=4),
            TimeBucket(bucket_start=T0 + 180, actor="client", count=1),
        ],
        bucket_seconds=60.0,
        top_clients=[
            {"client": "10.0.0.2:5000", "client_id": "c1", "violations": 2, "connections": 1},
            {"client": HOSTILE_CLIENT, "client_id": HOSTILE_CLIENT, "violations": 1, "connections": 3},
        ],
        violation_samples=[
            violation(
                event=2,
                rule="MQTT-4.7.3-1",
                section="4.7.3",
                actor="client",
                origin="codec",
                frame=2,
                offset=20,
                time=T0 + 0.03,
                detail="Topic Filter is empty (length 0x0000)",
                evidence=EMPTY_FILTER_HEX,
            ),
            violation(
                flow="f7",
                event=5,
                rule="MQTT-4.7.3-1",
                section="4.7.3",
                actor="client",
                origin="codec",
                frame=911,
                offset=64,
                time=T0 + 180.5,
                detail=f"Topic Filter is empty (length 0x0000); the next one is {HOSTILE}",
                evidence="82 " + " ".join(["41"] * 63) + " …",
            ),
            violation(
                event=3,
                rule="MQTT-4.8.0-1",
                section="4.8",
                actor="server",
                origin="judge",
                frame=3,
                offset=4,
                time=T0 + 0.04,
                detail=f"server SUBACK id 1 (event 3) answers the offending packet: {offending}",
                expected="the server closes the connection on SUBSCRIBE id 1 without acting on it",
                evidence=SUBACK_HEX,
            ),
            violation(
                event=4,
                rule="MQTT-4.8.0-1",
                section="4.8",
                actor="server",
                origin="judge",
                frame=4,
                offset=None,
                time=T0 + 5.04,
                detail="the server did not close the connection within 2 s of event 2: still open 5.01 s after it",
                expected=f"the server closes the connection within 2 s of {offending}",
                evidence="",
            ),
            violation(
                event=3,
                rule="MQTT-4.7.3-1",
                section="4.7.3",
                actor="server",
                origin="judge",
                frame=3,
                offset=4,
                time=T0 + 0.04,
                detail=f"server SUBACK id 1 (event 3) answers the offending packet: {offending}",
                expected="the server closes the connection on SUBSCRIBE id 1 without acting on it",
                evidence=SUBACK_HEX,
            ),
        ],
        routing_findings=[
            routing(
                "leak",
                "MQTT-3.3.2-3",
                2,
                T0 + 1.0,
                "server PUBLISH to 'u/1' (event 2) matches no Topic Filter the client subscribed to on this connection",
                "the server sends a client only messages whose Topic Name matches one of its subscriptions",
            ),
            routing(
                "missing",
                "MQTT-4.5.0-1",
                4,
                T0 + 10.0,
                "the message to 't/1' (event 2 of 'pub') never arrived: it was owed from 1.02 s, due by 3.03 s, and "
                "the connection was open until 10 s",
                "the server sends each message it accepts to every session whose subscriptions match it",
            ),
        ],
        routing_counts={"leak": 1, "missing": 1},
        deliveries_summary={"owed": 2, "observed": 1, "missing": 1, "leaked": 1},
        connections_sample=[
            connection("f1", "10.0.0.2:5000", "c1", 5),
            connection("sub", "10.0.0.3:5001", "sub", 0),
        ],
        gaps=[{"capture": CAPTURE, "flow": "f7", "direction": "client", "offset": 1200, "length": 8000, "time": T0}],
        gaps_total=1,
    )


@pytest.fixture
def data() -> AuditReportData:
    return audit_data()


class Page(HTMLParser):
    """Every tag, id and link of a page; the bars, lines and texts (tooltips aside) of each inline SVG chart; the
    text of each table row that has an id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.resources: list[str] = []
        self.bars: dict[str, dict[tuple[str, str], int]] = {}
        self.lines: dict[str, dict[str, int]] = {}
        self.chart_texts: dict[str, list[str]] = {}
        self.rows: dict[str, str] = {}
        self._chart: str | None = None
        self._row: str | None = None
        self._in_text = False
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {name: value or "" for name, value in attrs}
        self.tags.append(tag)
        if "id" in a:
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids.add(a["id"])
        if "href" in a:
            self.links.append(a["href"])
        self.resources += [a[name] for name in ("src", "srcset", "data", "poster") if name in a]
        if tag == "svg":
            self._chart = a["aria-label"]
            self.bars[self._chart], self.lines[self._chart], self.chart_texts[self._chart] = {}, {}, []
        elif tag == "rect" and self._chart and "bar" in a.get("class", "").split():
            self.bars[self._chart][(a["data-label"], a["data-series"])] = int(a["data-value"])
        elif tag == "polyline" and self._chart:
            self.lines[self._chart][a["data-series"]] = int(a["data-total"])
        elif tag == "text":
            self._in_text = True
        elif tag == "title":
            self._in_title = True
        elif tag == "tr" and "id" in a:
            self._row = a["id"]
            self.rows[self._row] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self._chart = None
        elif tag == "text":
            self._in_text = False
        elif tag == "title":
            self._in_title = False
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._chart and self._in_text and not self._in_title:
            self.chart_texts[self._chart].append(data)
        if self._row:
            self.rows[self._row] += data


def written(data: AuditReportData, out: Path) -> tuple[str, str, Page]:
    paths = write_audit_reports(out, data)
    assert [path.name for path in paths] == ["report.html", "findings.md"]
    html, markdown = (path.read_text(encoding="utf-8") for path in paths)
    page = Page()
    page.feed(html)
    page.close()
    return html, markdown, page


def markdown_sections(markdown: str, level: str = "### ") -> dict[str, str]:
    """Heading -> body, for the headings of one level."""
    parts = re.split(rf"^{level}(.+)$", markdown, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_html_is_one_self_contained_page(data: AuditReportData, tmp_path: Path) -> None:
    html, _, page = written(data, tmp_path)
    assert html.startswith("<!DOCTYPE html>") and page.tags.count("html") == 1
    assert not {"script", "link", "img", "iframe", "object", "embed", "base"} & set(page.tags)
    assert page.resources == []
    assert page.links and all(link.startswith("#") for link in page.links)
    assert not re.search(r"https?://", html)
    assert "url(" not in html and "@import" not in html
    assert "<style>" in html and "@media print" in html and 'name="viewport"' in html


def test_headline_counts_violations_per_side_and_routing_findings(data: AuditReportData, tmp_path: Path) -> None:
    html, markdown, _ = written(data, tmp_path)
    headline = "7 violations: 3 by clients, 4 by servers; 2 routing findings"
    assert f'<p class="headline">{headline}</p>' in html
    assert f"**{headline}.**" in markdown


def test_html_has_a_how_to_read_box_collapsed_after_the_findings_and_the_charts(
    data: AuditReportData, tmp_path: Path
) -> None:
    html, _, _ = written(data, tmp_path)
    box = html[html.index('<details class="howto" id="how-to-read">') : html.index("</details>")]
    assert html.index('<section id="by-rule">') < html.index('<section id="charts">') < html.index(box)
    assert "Who broke the rule" in box
    assert "<em>codec</em>: seen in the bytes" in box and "<em>judge</em>: seen in the behaviour" in box
    assert "Not assessable is not a pass" in box


def test_html_charts_are_inline_svg_with_the_right_bars(data: AuditReportData, tmp_path: Path) -> None:
    _, _, page = written(data, tmp_path)
    rules = "Violations by statement, split by the side that broke it"
    assert page.bars[rules] == {
        ("MQTT-4.7.3-1", "client"): 3,
        ("MQTT-4.7.3-1", "server"): 2,
        ("MQTT-4.8.0-1", "server"): 2,
    }
    assert page.chart_texts[rules][:3] == ["by clients", "by the server", "MQTT-4.7.3-1"]  # legend, then rows
    assert page.lines["Violations over time, per side"] == {"client": 3, "server": 4}
    assert "10:00:00" in page.chart_texts["Violations over time, per side"]
    assert page.bars["Routing findings by kind"] == {("leak", "routing"): 1, ("missing", "routing"): 1}
    clients = page.bars["Clients with the most violations"]
    assert clients == {("c1", "violations"): 2, (HOSTILE_CLIENT, "violations"): 1}  # named by their ClientIds


def test_time_series_fills_empty_buckets_with_zero() -> None:
    buckets = [
        TimeBucket(bucket_start=0.0, actor="client", count=2),
        TimeBucket(bucket_start=180.0, actor="client", count=1),
        TimeBucket(bucket_start=60.0, actor="server", count=5),
    ]
    assert time_points(buckets) == {
        "client": [(0.0, 2), (60.0, 0), (120.0, 0), (180.0, 1)],
        "server": [(0.0, 0), (60.0, 5), (120.0, 0), (180.0, 0)],
    }


def test_html_escapes_hostile_text(data: AuditReportData, tmp_path: Path) -> None:
    html, _, page = written(data, tmp_path)
    assert HOSTILE not in html and "<b onload" not in html
    assert "the next one is &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "sensor-&lt;b onload=&#34;x()&#34;&gt;7&lt;/b&gt;" in html  # the client's label in the chart
    assert HOSTILE_CLIENT in page.chart_texts["Clients with the most violations"]  # whole, escaped
    assert "script" not in page.tags and "b" not in page.tags


def test_every_link_lands_on_an_element_of_the_page(data: AuditReportData, tmp_path: Path) -> None:
    _, _, page = written(data, tmp_path)
    assert {link[1:] for link in page.links} <= page.ids


def test_by_rule_rows_link_to_their_samples_and_samples_show_the_evidence(
    data: AuditReportData, tmp_path: Path
) -> None:
    html, _, page = written(data, tmp_path)
    table = html[html.index('<table class="by-rule">') : html.index("</table>", html.index('<table class="by-rule">'))]
    rows = table.split("<tr>")[2:]
    assert [re.findall(r'href="#([^"]+)"', row)[0] for row in rows] == [
        "rule-MQTT-4.7.3-1-client",
        "rule-MQTT-4.7.3-1-server",
        "rule-MQTT-4.8.0-1-server",
    ]
    samples = re.findall(r'href="#(rule-MQTT-4\.7\.3-1-client-sample-\d+)"', rows[0])
    assert samples == ["rule-MQTT-4.7.3-1-client-sample-1", "rule-MQTT-4.7.3-1-client-sample-2"]
    first = page.rows[samples[0]]
    for shown in (EMPTY_FILTER_HEX, CAPTURE, "frame 2", "stream offset 20", "f1"):
        assert shown in first
    assert "SUBSCRIBE, 7 bytes" in first and "Topic Filter is empty (length 0x0000)" in first
    assert "Every Topic Name and Topic Filter must be at least one character long" in first  # expected
    assert "SUBSCRIBE, more than 64 bytes" in page.rows[samples[1]] and "…" in page.rows[samples[1]]
    assert '<a href="#flow-f1"><code>f1</code></a>' in html  # the flow links to its connection row
    quiet = page.rows["rule-MQTT-4.8.0-1-server-sample-2"]
    assert "(no bytes)" in quiet and "no packet" in quiet


def test_each_rule_shows_its_plain_language_summary_and_level(data: AuditReportData, tmp_path: Path) -> None:
    html, _, _ = written(data, tmp_path)
    closing = CATALOGUE["MQTT-4.8.0-1"].summary
    section = html[html.index('id="rule-MQTT-4.8.0-1-server"') :]
    assert '<span class="level MUST">MUST</span> Section 4.8, statement <strong>MQTT-4.8.0-1</strong>' in section
    assert closing in section


def test_html_routing_rows_capture_errors_and_bytes(data: AuditReportData, tmp_path: Path) -> None:
    html, _, page = written(data, tmp_path)
    assert "matches no Topic Filter the client subscribed to" in page.rows["routing-leak-1"]
    assert "never arrived" in page.rows["routing-missing-1"]
    assert "owed 2, observed 1, missing 1, leaked 1" in html
    assert '<td><code>broken.pcap</code></td><td class="number">524,312</td>' in html
    assert "1 capture could not be read to the end" in html
    assert "17 rule checks could not be decided" in html
    assert "The byte counts reconcile" in html


def test_bytes_that_do_not_reconcile_are_flagged(data: AuditReportData, tmp_path: Path) -> None:
    data.summary["bytes"]["gap_bytes"] = 7_000
    html, markdown, _ = written(data, tmp_path)
    assert "The byte counts do not reconcile: 1,000 bytes unaccounted for." in html
    assert "The byte counts do not reconcile" in markdown


def test_should_level_and_uncatalogued_rules_come_after_must_and_say_what_they_are(tmp_path: Path) -> None:
    derived = "MQTT-1.5.3-control-characters"
    data = AuditReportData(
        violations_by_rule=[
            by_rule(derived, "client", "codec", 40, T0),
            RuleCount(
                rule="MQTT-9.9.9-9",
                level="MUST",
                section="",
                actor="server",
                origin="judge",
                count=1,
                first_time=None,
                summary="",
            ),
            by_rule("MQTT-4.7.3-1", "client", "codec", 2, T0),
        ],
        connections_sample=[connection("f1", "10.0.0.2:5000", "c1", 2), connection("f1", "10.0.0.2:5000", "c1", 2)],
    )
    html, markdown, page = written(data, tmp_path)
    titles = [title for title in markdown_sections(markdown) if title.startswith("MQTT-")]
    assert titles == [
        "MQTT-4.7.3-1 broken by clients",
        "MQTT-9.9.9-9 broken by the server",
        f"{derived} broken by clients",
    ]
    should = markdown_sections(markdown)[f"{derived} broken by clients"]
    assert f"Stated without a number: {CATALOGUE[derived].basis}." in should
    assert "The statement is SHOULD-level" in should
    assert "- Section 9.9.9, [MQTT-9.9.9-9] (MUST): not in the rule catalogue." in markdown
    assert "Expected: not in the rule catalogue. No sample was kept." in markdown
    assert "none kept" in html and "No sample kept" in html
    assert '<span class="level SHOULD">SHOULD</span>' in html
    assert sum(1 for anchor in page.ids if anchor.startswith("flow-f1")) == 1  # a flow listed twice, one anchor


def test_markdown_has_one_finding_section_per_rule_and_side(data: AuditReportData, tmp_path: Path) -> None:
    _, markdown, _ = written(data, tmp_path)
    sections = markdown_sections(markdown)
    titles = [title for title in sections if title.startswith("MQTT-")]
    assert titles == [
        "MQTT-4.7.3-1 broken by clients",
        "MQTT-4.7.3-1 broken by the server",
        "MQTT-4.8.0-1 broken by the server",
    ]
    for title in titles:
        parts = list(markdown_sections(sections[title], "#### "))
        assert parts == ["Summary", "Standard reference", "Expected behaviour", "Evidence", "What it means for users"]


def test_markdown_finding_has_the_reference_table_and_hex_evidence(data: AuditReportData, tmp_path: Path) -> None:
    _, markdown, _ = written(data, tmp_path)
    parts = markdown_sections(markdown_sections(markdown)["MQTT-4.7.3-1 broken by clients"], "#### ")
    assert (
        "Clients broke MQTT-4.7.3-1 (MUST) 3 times in the audited traffic, first at 2025-05-01 10:00:00.030 UTC"
        in (parts["Summary"])
    )
    assert "Source: OASIS MQTT Version 3.1.1." in parts["Standard reference"]
    assert (
        "- Section 4.7.3, statement [MQTT-4.7.3-1] (MUST, binds the client and the server): "
        "Every Topic Name and Topic Filter must be at least one character long." in parts["Standard reference"]
    )
    expected = parts["Expected behaviour"]
    assert "| Sample | Packet shape | Expected | Observed |" in expected
    assert (
        "| [1](#rule-MQTT-4.7.3-1-client-sample-1) | SUBSCRIBE, 7 bytes | Every Topic Name and Topic Filter must be at "
        "least one character long | Topic Filter is empty (length 0x0000) |" in expected
    )
    assert "the next one is \\<script>alert(1)\\</script>" in expected  # escaped as Markdown
    evidence = parts["Evidence"]
    assert '<a id="rule-MQTT-4.7.3-1-client-sample-1"></a>' in evidence
    assert (
        f"**Sample 1** (codec): capture `{CAPTURE}`, flow `f1`, frame 2, event 2, "
        "stream offset 20, at 2025-05-01 10:00:00.030 UTC." in evidence
    )
    assert f"```text\n{EMPTY_FILTER_HEX}\n```" in evidence
    assert "2 of 3 shown" in evidence


def test_markdown_judge_finding_uses_the_judges_expectation(data: AuditReportData, tmp_path: Path) -> None:
    _, markdown, _ = written(data, tmp_path)
    section = markdown_sections(markdown)["MQTT-4.8.0-1 broken by the server"]
    assert "| SUBACK, 5 bytes | the server closes the connection on SUBSCRIBE id 1 without acting on it |" in section
    assert "No bytes: the finding is about what the connection did." in section
    assert "The broker behaves in a way the specification rules out." in section


def test_markdown_routing_findings_are_grouped_by_kind(data: AuditReportData, tmp_path: Path) -> None:
    _, markdown, _ = written(data, tmp_path)
    routing = markdown[markdown.index("## Routing findings") :]
    assert (
        "| [leak](#routing-leak) | a subscriber received a message that none of its subscriptions matches | 1 | 1 |"
        in (routing)
    )
    sections = markdown_sections(routing)
    assert [title for title in sections if "deliveries" in title.lower()] == [
        "Leaked deliveries",
        "Missing deliveries",
    ]
    leak = markdown_sections(sections["Leaked deliveries"], "#### ")
    assert list(leak) == ["Summary", "Standard reference", "Expected behaviour", "Evidence", "What it means for users"]
    assert "statement [MQTT-3.3.2-3] (MUST, binds the server)" in leak["Standard reference"]
    assert "| [1](#routing-leak-1) | `sub`, event 2 |" in leak["Expected behaviour"]
    assert '<a id="routing-leak-1"></a>' in leak["Evidence"]
    assert f"broker `{BROKER}`, flow `sub`, event 2" in leak["Evidence"]


def test_markdown_lists_capture_errors_and_gaps(data: AuditReportData, tmp_path: Path) -> None:
    _, markdown, _ = written(data, tmp_path)
    captures = markdown[markdown.index("## Captures") :]
    assert "| `broken.pcap` | 524,312 | record header announces 4294967295 bytes |" in captures
    assert "1 gap in all" in captures
    assert "- **Warning:** 1 capture could not be read to the end" in markdown


def test_report_data_survives_a_json_round_trip(data: AuditReportData, tmp_path: Path) -> None:
    path = tmp_path / "report_data.json"
    path.write_text(data.to_json(), encoding="utf-8")
    again = AuditReportData.from_json(path.read_text(encoding="utf-8"))
    assert again == data
    assert json.loads(data.to_json())["routing_counts"] == {"leak": 1, "missing": 1}
    assert write_audit_reports(tmp_path / "a", again)[0].read_text(encoding="utf-8") == (
        write_audit_reports(tmp_path / "b", data)[0].read_text(encoding="utf-8")
    )


def test_report_data_refuses_unknown_keys_and_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="unknown audit report data keys: violations"):
        AuditReportData.from_json('{"violations": []}')
    with pytest.raises(ValueError, match="violation_samples: expected a list of objects"):
        AuditReportData.from_json('{"violation_samples": {}}')
    with pytest.raises(ValueError, match="JSON object"):
        AuditReportData.from_json("[]")


def test_an_audit_without_violations_says_so_plainly(tmp_path: Path) -> None:
    data = AuditReportData(
        summary={"captures": [{"file": "quiet.pcap", "bytes": 2048, "records": 12}], "connections": 1, "packets": 6}
    )
    html, markdown, page = written(AuditReportData.from_json(data.to_json()), tmp_path)
    assert '<p class="headline clean">No violations found: 0 by clients, 0 by servers; no routing findings</p>' in html
    assert "No rule was found broken in the audited traffic." in html
    assert "Nothing to chart" in html and not page.bars
    assert "rule-" not in html
    assert "**No violations found: 0 by clients, 0 by servers; no routing findings.**" in markdown
    assert "No violations: no client and no server broke a rule" in markdown
    assert "No routing findings." in markdown
    assert "### " not in markdown


def test_a_5_0_finding_is_named_and_summarised_by_the_5_0_catalogue_and_5_0_behaviour_is_said_unjudged(
    tmp_path: Path,
) -> None:
    # MQTT-3.1.2-17 is a User Name statement in MQTT 5.0 and a Will statement in MQTT 3.1.1: the same id, two
    # findings, each summarised by its own catalogue.
    v5 = load_catalogue("5.0")
    rule = "MQTT-3.1.2-17"
    counts = [
        RuleCount(
            rule=rule,
            level="MUST",
            section="3.1.2.8",
            actor="client",
            origin="codec",
            count=2,
            first_time=T0,
            summary="",
            rule_version="5.0",
        ),
        RuleCount(
            rule=rule,
            level="MUST",
            section="3.1.2.8",
            actor="server",
            origin="judge",
            count=1,
            first_time=T0,
            summary="",
        ),
    ]
    sample = violation(
        flow="v5",
        event=0,
        rule=rule,
        section="3.1.2.8",
        actor="client",
        origin="codec",
        frame=3,
        offset=0,
        time=T0,
        detail="User Name flag is 1 but no User Name follows",
        evidence="10 0d",
        rule_version="5.0",
    )
    row = connection("v5", "10.0.0.9:5009", "meter-5", 2)
    decoded = "decoded as MQTT 5.0 (every byte-level rule); its behaviour is not judged yet"
    data = AuditReportData(
        summary={
            "connections": 2,
            "versions": {
                "3.1.1": {"connections": 1, "handling": "judged against MQTT 3.1.1", "packets": 4},
                "5.0": {"connections": 1, "handling": decoded, "packets": 4},
            },
        },
        violations_by_rule=counts,
        violation_samples=[sample],
        connections_sample=[{**row, "version": "5.0", "handling": decoded, "protocol_level": 5}],
    )
    html, markdown, _page = written(AuditReportData.from_json(data.to_json()), tmp_path)
    sections = markdown_sections(markdown)
    v5_section = sections["MQTT-3.1.2-17 (MQTT 5.0) broken by clients"]
    assert v5[rule].summary in v5_section and "of MQTT 5.0, statement [MQTT-3.1.2-17]" in v5_section
    assert CATALOGUE[rule].summary not in v5_section and "Source: OASIS MQTT Version 5.0." in v5_section
    assert CATALOGUE[rule].summary in sections["MQTT-3.1.2-17 broken by the server"]
    assert v5[rule].summary in html and CATALOGUE[rule].summary in html
    # The behaviour of the 5.0 connection was not judged: the warning, the versions table and its own row say so.
    warning = "The behaviour of 1 connection was not judged (5.0: 1, " + decoded + ")."
    assert warning in markdown and warning in html
    connections = markdown_sections(markdown, "## ")["Protocol versions"]
    assert f"| `v5` | `meter-5` | 5.0 | {decoded} | 4 | 2 |" in connections
    assert f"5.0 (level 5)<br><small>{decoded}</small>" in html
