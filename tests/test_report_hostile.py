"""Reports fed what a hostile broker or a crafted capture puts in them: every value a peer controls reads as text
in Markdown (rendered here by markdown-it, as a viewer renders findings.md), in HTML, in XML and in a terminal;
long values are cut; and every report stays bounded however many frames, findings and failures a run holds."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from mqttaudit.cli.terminal import printable_line
from mqttaudit.codec import Connack, Connect, Direction, Subscribe, Subscription
from mqttaudit.judge import Finding
from mqttaudit.probe.case import Target
from mqttaudit.probe.runner import FAIL, INCONCLUSIVE, CaseResult, ProbeRun
from mqttaudit.report import (
    AuditReportData,
    audit_html,
    audit_to_markdown,
    build_matrix,
    junit_bytes,
    matrix_html,
    matrix_markdown,
    probe_html,
    probe_run_to_junit,
    probe_run_to_markdown,
    write_matrix,
    write_probe_reports,
)
from mqttaudit.report.audit_junit import FindingTally, audit_to_junit, junit_document
from mqttaudit.report.evidence import printable, transcript
from mqttaudit.report.markdown import code, inline
from mqttaudit.report.peer_text import LIMIT, cut
from mqttaudit.report.terminal import summary_lines
from tests.test_report_audit import audit_data
from tests.test_report_probe import Conversation, make_case

CLIENT, SERVER = Direction.FROM_CLIENT, Direction.FROM_SERVER

#: What a broker, a client or a capture's file name may hold, one attack each.
HOSTILE = (
    "![beacon](https://evil.example/t.png)",
    '[click me](https://evil.example/phish "title")',
    "<https://evil.example/auto> and https://evil.example/bare",
    "www.evil.com and evil.com/path and //localhost/x",
    "write to someone@evil.com or mailto:someone@evil.com",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "</script><script>alert(2)</script>",
    "``` fence\n~~~\n`` ` `` end",
    "a | b | c",
    "# heading",
    "line\n# heading\n> quote\n- item\n1. one\n---\n<div>block</div>",
    "- item",
    "1. one",
    "> quote",
    "\x1b[2J\x1b[31mred\x07\r\n0 violations",
    "&lt;b&gt; &#x3C;i&#x3E; &amp; &copy;",
    "[ref]: https://evil.example/ref",
    "**bold** _em_ ~~gone~~ $x$ \\*not\\*",
    "\u202eevil\u2028line\u2029",
    "bad \udc80\udcff utf-8",
)
#: What a viewer turns into a link by itself (GFM extended autolinks, linkify's fuzzy links), in one text run.
AUTOLINK = re.compile(r"[a-z][a-z0-9+.-]*://|//\w|www\.|\w@\w|\w\.(?:com|example|org|net)\b", re.IGNORECASE)
#: The only raw HTML the reports write: the anchors their links land on.
ANCHOR = re.compile(r'^(?:<a id="[A-Za-z0-9._/-]+">(?:</a>)?|</a>)\n?$')
#: A link of findings.md to a case's reproducer script in the report folder (relative, a safe file name).
REPRODUCER_LINK = re.compile(r"reproducers(?:/[A-Za-z0-9_][A-Za-z0-9._-]*)+\.py")


def markdown_parser(*, linkify: bool = False) -> MarkdownIt:
    """CommonMark with GFM tables and strikethrough; escapes kept as their own tokens (``text_join`` off), so the
    text runs are those a linkifier looks at."""
    parser = MarkdownIt("commonmark", {"linkify": linkify}).enable(["table", "strikethrough"]).disable("text_join")
    return parser.enable("linkify") if linkify else parser


def tokens(markdown: str, parser: MarkdownIt | None = None) -> list[Token]:
    """Every token of the document, children included."""

    def walk(items: list[Token]) -> Iterator[Token]:
        for token in items:
            yield token
            yield from walk(token.children or [])

    return list(walk((parser or markdown_parser()).parse(markdown)))


def structure(markdown: str) -> Counter[str]:
    """The document's elements by type, its text runs left out (escapes split those differently)."""
    return Counter(token.type for token in tokens(markdown) if token.type not in ("text", "text_special"))


def visible(markdown: str) -> str:
    """The text a reader sees: the content of every inline run, code span and code block."""
    runs = []
    for token in tokens(markdown):
        if token.type == "inline":
            runs.append("".join(child.content for child in token.children or []))
        elif token.type in ("fence", "code_block"):
            runs.append(token.content)
    return "\n".join(runs)


def assert_inert(markdown: str) -> None:
    """No image, no link but to an anchor of the document or to a reproducer script the report folder holds (a
    relative path named after a library case), no raw HTML but those anchors, no autolink."""
    every = tokens(markdown)
    anchors = {m.group(1) for m in re.finditer(r'<a id="([^"]+)"></a>', markdown)}
    assert not [t for t in every if t.type == "image"]
    hrefs = [str(t.attrs.get("href")) for t in every if t.type == "link_open"]
    assert all((href.startswith("#") and href[1:] in anchors) or REPRODUCER_LINK.fullmatch(href) for href in hrefs), (
        hrefs
    )
    html = [t.content for t in every if t.type in ("html_inline", "html_block")]
    assert all(ANCHOR.match(content) for content in html), html
    runs = [t.content for t in every if t.type == "text"]
    assert not [run for run in runs if AUTOLINK.search(run)]
    try:
        import linkify_it  # noqa: F401  (optional: the check above stands in for it when it is missing)
    except ImportError:
        return
    linked = tokens(markdown, markdown_parser(linkify=True))
    linked_hrefs = [str(t.attrs.get("href")) for t in linked if t.type == "link_open"]
    assert all(href.startswith("#") or REPRODUCER_LINK.fullmatch(href) for href in linked_hrefs), linked_hrefs


# --- a probe run whose every peer-controlled value is hostile ----------------------------------------------------


def topic_bytes(text: str) -> bytes:
    """``text`` as the bytes of a Topic Name on the wire; lone surrogates stand for bytes that are not UTF-8."""
    return text.encode("utf-8", "surrogateescape")


def publish_frame(topic: str, payload: bytes) -> bytes:
    """A QoS 0 PUBLISH built byte by byte, so that its topic may be anything a broker sends."""
    name = topic_bytes(topic)
    body = len(name).to_bytes(2, "big") + name + payload
    length, encoded = len(body), b""
    while True:
        digit, length = length % 128, length // 128
        encoded += bytes([digit | (0x80 if length else 0)])
        if not length:
            return b"\x30" + encoded + body


def hostile_run(value: str, label_port: int = 1883) -> ProbeRun:
    """One failing and one inconclusive case in which the broker, the client id, the findings and the reasons all
    carry ``value``; the target's host is ``value`` too."""
    conversation = Conversation(value, client_id=value)
    conversation.send(0.0, CLIENT, Connect(client_id="probe"))
    conversation.send(0.004, SERVER, Connack(return_code=0))
    conversation.send(0.01, CLIENT, Subscribe(packet_id=1, subscriptions=(Subscription(topic_filter="t/#", qos=0),)))
    conversation.send(0.02, SERVER, publish_frame(value, topic_bytes(value)))
    conversation.closed(2.0, CLIENT)
    case = make_case("hostile/failing", ("MQTT-4.7.3-1",), "A case the broker fails", expected="refuse it")
    finding = Finding("MQTT-4.7.3-1", SERVER, 0.02, 3, f"PUBLISH topic {value!r}: {value}", value, value, "")
    failing = CaseResult(case, FAIL, value, {"MQTT-4.7.3-1": FAIL}, [finding], [finding])
    failing.connections = [conversation.evidence()]
    undecided = CaseResult(make_case("hostile/undecided", ("MQTT-3.1.0-1",), "Undecided"), INCONCLUSIVE, value)
    return ProbeRun(Target(value, label_port), value, [failing, undecided], 1.0, broker_down=value, incomplete=value)


@pytest.mark.parametrize("value", HOSTILE)
def test_peer_text_in_findings_md_renders_as_text_only(value: str, tmp_path: Path) -> None:
    findings = write_probe_reports(hostile_run(value), tmp_path / "hostile")[1].read_text(encoding="utf-8")
    benign = write_probe_reports(hostile_run("benign value"), tmp_path / "benign")[1].read_text(encoding="utf-8")
    assert_inert(findings)
    # The same elements as with a harmless value: no heading, list, quote, table cell or emphasis came from it.
    assert structure(findings) == structure(benign)
    # And the reader sees the value itself, made printable, not a mangled or over-escaped form of it.
    assert printable(value) in visible(findings)


@pytest.mark.parametrize("value", HOSTILE)
def test_peer_text_in_matrix_md_renders_as_text_only(value: str, tmp_path: Path) -> None:
    runs = [(value, hostile_run(value)), ("", hostile_run(value, 1884))]
    matrix = write_matrix(runs, tmp_path / "hostile")[0].read_text(encoding="utf-8")
    plain = [("benign label", hostile_run("benign value")), ("", hostile_run("benign value", 1884))]
    benign = write_matrix(plain, tmp_path / "benign")[0].read_text(encoding="utf-8")
    assert_inert(matrix)
    assert structure(matrix) == structure(benign)
    assert printable(value) in visible(matrix)


def hostile_audit(value: str) -> AuditReportData:
    """The audit's report data with every value that comes from the traffic or the captures set to ``value``."""
    peer_keys = {"capture", "flow", "client", "client_id", "server", "detail", "expected", "reason", "file", "broker"}

    def replaced(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: value if k in peer_keys and isinstance(v, str) else replaced(v) for k, v in item.items()}
        if isinstance(item, list):
            return [replaced(element) for element in item]
        return item

    return AuditReportData.from_dict(replaced(audit_data().to_dict()))


@pytest.mark.parametrize("value", HOSTILE)
def test_peer_text_in_the_audits_findings_md_renders_as_text_only(value: str) -> None:
    findings = audit_to_markdown(hostile_audit(value))
    benign = audit_to_markdown(hostile_audit("benign value"))
    assert_inert(findings)
    assert structure(findings) == structure(benign)
    assert printable(value) in visible(findings)


def test_the_reports_own_links_tables_and_headings_still_render(tmp_path: Path) -> None:
    findings = write_probe_reports(hostile_run(HOSTILE[0]), tmp_path)[1].read_text(encoding="utf-8")
    every = tokens(findings)
    headings = [
        "".join(child.content for child in every[i + 1].children or [])
        for i, t in enumerate(every)
        if t.type == "heading_open"
    ]
    # the failures first, the table of every case last
    assert headings[:2] == [f"mqttaudit probe findings: mqtt://{HOSTILE[0]}:1883", "Failures"]
    assert headings[-1] == "All cases"
    # the header links to the sections, the failure to its reproducer script, the table to the failure
    assert [str(t.attrs["href"]) for t in every if t.type == "link_open"] == [
        "#violations",
        "#failures",
        "#violations",
        "#all-cases",
        "reproducers/hostile/failing.py",
        "reproducers/hostile/failing.py",
        "#fail-hostile/failing",
    ]
    anchors = [t.content for t in every if t.type in ("html_inline", "html_block")]
    assert '<a id="fail-hostile/failing">' in anchors and any('<a id="violations">' in a for a in anchors)
    assert sum(t.type == "table_open" for t in every) == 2  # all cases, expected behaviour
    assert [t.info for t in every if t.type == "fence"] == ["text"]
    audit = tokens(audit_to_markdown(hostile_audit(HOSTILE[0])))
    assert any(str(t.attrs.get("href")).startswith("#rule-MQTT-4.7.3-1") for t in audit if t.type == "link_open")
    assert sum(t.type == "table_open" for t in audit) >= 4


def test_code_spans_hold_any_backtick_run_and_pipes_in_cells() -> None:
    value = "a`b``c```d | e"
    rendered = tokens("| x |\n|---|\n| " + code(value, cell=True) + " |\n\n" + code(value) + "\n")
    assert [t.content for t in rendered if t.type == "code_inline"] == [value, value]
    assert tokens(inline("`` x"))[1].children is not None
    assert not [t for t in tokens(inline("``x`` `y`")) if t.type == "code_inline"]


# --- long values ---------------------------------------------------------------------------------------------------

TOPIC_60K = "t/" + "x" * 59_994 + "/end"


def test_a_long_peer_value_is_cut_with_its_length_and_where_more_of_it_is() -> None:
    shown = cut(TOPIC_60K, whole_in="findings.json")
    assert len(shown) < LIMIT + 80
    assert shown.startswith("t/xxx") and shown.endswith("xxx/end")
    assert "… (60,000 characters, more in findings.json) …" in shown
    assert cut("short") == "short"


def test_a_60k_topic_repeated_in_a_run_is_cut_everywhere_in_the_human_reports(tmp_path: Path) -> None:
    conversation = Conversation("c1", client_id="c1").connected()
    for n in range(104):
        conversation.send(0.1 + n / 1000, SERVER, publish_frame(TOPIC_60K, b""))
    case = make_case("long/topic", ("MQTT-4.7.3-1",), "A long topic")
    finding = Finding("MQTT-4.7.3-1", SERVER, 0.1, 2, f"PUBLISH on {TOPIC_60K!r}", "refuse it", "c1")
    result = CaseResult(case, FAIL, TOPIC_60K, {"MQTT-4.7.3-1": FAIL}, [finding] * 104)
    result.connections = [conversation.evidence()]
    run = ProbeRun(Target("127.0.0.1", 1883), "2025-05-01T10:00:00+00:00", [result], 1.0)
    paths = write_probe_reports(run, tmp_path)
    markdown = paths[1].read_text(encoding="utf-8")
    for name, text in [("findings.md", visible(markdown)), ("junit.xml", paths[2].read_text(encoding="utf-8"))]:
        assert "x" * 1000 not in text, name
        assert "(60,000 characters, more in findings.json)" in text, name  # the reason
        assert len(text) < 400_000, name
    assert "(60,013 characters, more in findings.json)" in visible(markdown)  # a finding's detail quoting it
    assert "more events not shown here" in paths[1].read_text(encoding="utf-8")
    lines = summary_lines(run, 100)
    assert all(len(line) <= 100 for line in lines)


# --- bounded size --------------------------------------------------------------------------------------------------

BOUND = 2_000_000


def flood_run(cases: int = 300, frames: int = 5000) -> ProbeRun:
    """A synthetic run against a broker that floods every connection with 1 KB PUBLISH packets on a 60 KB topic and
    breaks a rule with each: ``cases`` failing cases of three connections of ``frames`` frames each."""
    frame = {
        "t": 0.5,
        "from": "server",
        "offset": 0,
        "hex": " ".join(["31"] * 1024),
        "packet": f"PUBLISH topic={TOPIC_60K!r} qos=0 payload={'ab ' * 300}",
        "violations": [{"rule": "MQTT-4.7.3-1", "offset": 2, "detail": f"topic {TOPIC_60K!r}"}] * 3,
    }
    events = [frame] * frames + [{"t": 9.0, "closed_by": "client", "how": "fin"}]
    finding = Finding("MQTT-4.7.3-1", SERVER, 0.5, 10, f"PUBLISH on {TOPIC_60K!r}", "refuse it", "c1")
    results = []
    for n in range(cases):
        case = make_case(f"flood/case-{n}", ("MQTT-4.7.3-1", "MQTT-3.3.2-3"), f"Flooded case {n}")
        result = CaseResult(case, FAIL, f"MQTT-4.7.3-1: {TOPIC_60K}", {"MQTT-4.7.3-1": FAIL}, [finding] * 500)
        result.other_findings = [finding] * 500
        result.connections = [{"name": f"c{i}", "client_id": TOPIC_60K, "events": events} for i in (1, 2, 3)]
        results.append(result)
    return ProbeRun(Target("127.0.0.1", 1883), "2025-05-01T10:00:00+00:00", results, 60.0)


def test_every_probe_report_stays_bounded_and_says_what_it_left_out() -> None:
    run = flood_run()  # its findings.json is bounded by the prober, not here: only the human reports are written
    findings_md = probe_run_to_markdown(run).encode("utf-8")
    junit_xml = junit_bytes(probe_run_to_junit(run))
    matrix = build_matrix([("a", run), ("b", run)])
    matrix_md, matrix_page = matrix_markdown(matrix).encode("utf-8"), matrix_html(matrix).encode("utf-8")
    report_html = probe_html(run).encode("utf-8")
    for name, document in [
        ("findings.md", findings_md),
        ("junit.xml", junit_xml),
        ("matrix", matrix_md),
        ("report.html", report_html),
    ]:
        assert len(document) < BOUND, name
    assert "evidence left out: this report shows at most" in report_html.decode("utf-8")
    assert len(matrix_page) < BOUND
    text = findings_md.decode("utf-8")
    assert "more events not shown here (4,951 packets" in text  # the middle of each connection
    assert "more failing cases' sections (this report's size bound) not shown; see findings.json." in text
    assert "Failing cases without a section: `flood/case-" in text
    assert "… and 480 more findings not shown; see findings.json." in text
    assert "evidence left out: this report shows at most" in text
    assert_inert(text)
    suite = ET.fromstring(junit_xml)
    # every case stays a test case (only the evidence is bounded), and the rule broken outside them is one more
    assert len(suite.findall("testcase")) == 300 + 1
    assert "evidence left out" in junit_xml.decode("utf-8")


def test_an_audit_with_thousands_of_unreadable_captures_stays_bounded() -> None:
    data = audit_data().to_dict()
    long_name = "capture-" + "n" * 60_000 + ".pcap"
    data["summary"]["errors"] = [{"file": long_name, "offset": n, "reason": "bad header " * 5000} for n in range(5000)]
    data["summary"]["captures"] = [{"file": long_name, "bytes": 1, "records": 1}] * 5000
    report = AuditReportData.from_dict(data)
    markdown, html = audit_to_markdown(report), audit_html(report)
    assert len(markdown.encode()) < BOUND and len(html.encode()) < BOUND
    assert "… and 4,900 more captures that could not be read not shown; see report_data.json." in markdown
    assert "4,900 more captures not shown" in html
    assert "60,013 characters, more in report_data.json" in html and "n" * 1000 not in html
    assert "60,013 characters, more in report_data.json" in markdown
    tally = FindingTally()
    document = junit_document(audit_to_junit(tally, captures=[long_name] * 5000, checked=[]))
    assert len(document) < 100_000
    properties = {p.attrib["name"]: p.attrib["value"] for p in ET.fromstring(document).iter("property")}
    assert properties["captures_not_named"] == "4900"


# --- HTML ----------------------------------------------------------------------------------------------------------


class Elements(HTMLParser):
    """The start tags, attributes and text of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.attributes: list[tuple[str, str]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self.attributes += [(name, value or "") for name, value in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def page(html: str) -> Elements:
    parsed = Elements()
    parsed.feed(html)
    parsed.close()
    return parsed


@pytest.mark.parametrize("value", HOSTILE)
def test_peer_text_in_the_html_reports_is_text_only(value: str, tmp_path: Path) -> None:
    audit, benign_audit = audit_html(hostile_audit(value)), audit_html(hostile_audit("benign value"))
    matrix = write_matrix([(value, hostile_run(value))], tmp_path / "h")[1].read_text(encoding="utf-8")
    benign_matrix = write_matrix([("benign", hostile_run("benign value"))], tmp_path / "b")[1].read_text("utf-8")
    for html, benign in [(audit, benign_audit), (matrix, benign_matrix)]:
        parsed = page(html)
        assert parsed.tags == page(benign).tags  # no element came from the value
        assert "script" not in parsed.tags and "img" not in parsed.tags
        assert not [name for name, _ in parsed.attributes if name.startswith("on")]
        assert all(link.startswith("#") for name, link in parsed.attributes if name == "href")
        assert "<script" not in html.lower() and "</script" not in html.lower()
        assert printable(value) in "".join(parsed.text)


# --- XML and terminal ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE)
def test_peer_text_in_junit_xml_is_escaped_text(value: str, tmp_path: Path) -> None:
    document = write_probe_reports(hostile_run(value), tmp_path)[2].read_bytes()
    suite = ET.fromstring(document)
    assert not any(byte < 0x20 and byte not in b"\n\t" for byte in document)
    failure = next(suite.iter("failure"))
    assert failure.attrib["message"] == printable(value)
    assert printable(value) in (failure.text or "")


TERMINAL_ATTACKS = ("file\x1b[2J.pcap", "topic\n0 violations", "x\rOK: conformant", "bell\x07", "bad \udc80")


@pytest.mark.parametrize("value", TERMINAL_ATTACKS)
def test_every_line_for_the_terminal_has_its_control_characters_escaped(value: str) -> None:
    lines = summary_lines(hostile_run(value), 400)
    assert len(lines) >= 3  # the counts, the incomplete run, the failure
    for line in [*lines, printable_line(value)]:
        assert line.isprintable(), line
        assert not line.startswith(("0 violations", "OK"))
    assert any(printable(value) in line for line in lines)
    assert "\\x1b" in printable_line("file\x1b[2J.pcap") and "\\n" in printable_line("a\nb")


def test_a_transcript_shows_what_the_json_itself_left_out_and_how_the_connection_ended() -> None:
    head = Conversation("c1", client_id="c1").connected().send(0.1, SERVER, publish_frame("t", b"x" * 5000))
    events = head.evidence()["events"]
    events[-1] = {**events[-1], "hex": events[-1]["hex"][: 3 * 4096 - 1], "length": 5005}  # the JSON's own cut
    omitted = {
        "events": 12_004,
        "from_server": {"summary": "then 1,048,576 more bytes in 12,003 PUBLISH packets"},
        "client_packets": 0,
        "end": {"t": 9.5, "closed_by": "client", "how": "fin"},
    }
    text = transcript([{"name": "c1", "client_id": "c1", "events": events, "omitted": omitted}])
    assert "(first 256 of 5,005 bytes)" in text
    assert (
        "… 12,003 more events not recorded in findings.json (from the server: then 1,048,576 more bytes in 12,003 "
        "PUBLISH packets; 0 client packets), then the last one"
    ) in text
    assert text.splitlines()[-1] == "[12006]     9.500 s  closed by the client (FIN)".rjust(len(text.splitlines()[-1]))


def test_a_transcript_is_printable_whatever_the_broker_sent() -> None:
    text = transcript(hostile_run(HOSTILE[15]).results[0].connections)
    assert all(line.isprintable() for line in text.splitlines())
    assert "\\x1b[2J" in text
