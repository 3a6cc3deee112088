"""``report.html`` of an audit: one self-contained page (inline CSS, inline SVG charts, no script, no external asset)
with the verdict and every rule broken with its plain-language summary first, then the charts and a collapsed
reading guide, the evidence rows they link to (one block of bytes per packet, the offending byte marked),
the clients and servers that broke rules (each charged with its own), the connections per MQTT version and the
rule instances the capture could not decide, with their reasons."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

import jinja2
from markupsafe import Markup, escape

from ..spec import Catalogue
from .audit_charts import Bar, Series, bar_chart, line_chart
from .audit_data import AuditReportData, ClientCount, TimeBucket, TimeSpan
from .audit_findings import KINDS, LENIENCY_TEXT, ORIGINS, SIDES, AuditView, audit_view, expected_of, side_counts
from .audit_format import (
    MAX_ROWS,
    WHOLE_IN,
    also_text,
    cause_text,
    client_label,
    connack_text,
    count,
    duration,
    evidence_is_cause,
    frame_label,
    packet_shape,
    plural,
    shown_at,
    size,
    time_axis,
    when,
)
from .evidence import MAX_HEX_BYTES, printable
from .peer_text import shown

SIDE_SERIES = (Series("client", "by clients", "#2563eb"), Series("server", "by the server", "#d97706"))
OTHER_COLOUR = "#6b7280"
ROUTING_SERIES = (Series("routing", "routing findings", "#7c3aed"),)
#: Bars per chart; the tables list the rest.
MAX_BARS = 20
#: Buckets a time series is filled out to (empty buckets count 0); beyond it only the buckets given are drawn.
MAX_BUCKETS = 2000
#: The shortest span of traffic a line of violations over time is drawn for; a shorter one gets a sentence.
MIN_TIMELINE_SECONDS = 60.0
#: The offending byte of a finding's evidence, as the audit writes it (``[90]``).
_MARKED_BYTE = re.compile(r"\[([0-9a-f]{2})\]")


def audit_html(data: AuditReportData, catalogue: Catalogue | None = None) -> str:
    view = audit_view(data, catalogue)
    return (
        html_environment()
        .get_template("audit.html.j2")
        .render(
            view=view,
            charts=charts(view),
            timeline_note=timeline_note(view),
            kinds=KINDS,
            origins=ORIGINS,
            expected_of=expected_of,
            cause_text=cause_text,
            also_text=also_text,
            evidence_is_cause=evidence_is_cause,
            client_label=client_label,
            connack_text=connack_text,
            shown_at=shown_at,
            leniency_text=LENIENCY_TEXT,
            marks_a_byte=marks_a_byte,
        )
    )


def charts(view: AuditView) -> dict[str, Markup]:
    """The page's charts, by name; a chart with nothing to show is left out."""
    out = {}
    rules = list(dict.fromkeys(finding.rule for finding in view.findings))
    if rules:
        anchors = {finding.rule: finding.anchor for finding in reversed(view.findings)}
        summaries = {finding.rule: finding.reference.summary for finding in view.findings}
        bars = [
            Bar(rule, tuple(side_counts(view.findings, rule).values()), anchors[rule], summaries[rule])
            for rule in rules
        ]
        bars = sorted(bars, key=lambda bar: -sum(bar.values))[:MAX_BARS]
        out["rules"] = bar_chart(
            "Violations by statement, split by the side that broke it", SIDE_SERIES, bars, label_chars=None
        )
    buckets = view.data.violations_over_time
    if buckets and not timeline_note(view):
        series = [*SIDE_SERIES]
        series += [Series(a, f"by {a}", OTHER_COLOUR) for a in sorted({b["actor"] for b in buckets} - set(SIDES))]
        span = view.data.summary.get("time_span") or TimeSpan(start=None, end=None)
        start, end = span.get("start"), span.get("end")
        whole = None if start is None or end is None else (float(start), float(end))
        points = time_points(buckets, view.data.bucket_seconds, whole)
        xs = sorted({x for line in points.values() for x, _ in line})
        width = view.data.bucket_seconds or min((b - a for a, b in itertools.pairwise(xs)), default=0.0)
        out["time"] = line_chart(
            "Violations over time, per side",
            series,
            points,
            time_axis(xs[0], xs[-1]),
            lambda x: f"{when(x)} to {when(x + width)}" if width else when(x),
        )
    clients = view.data.top_clients[:MAX_BARS]
    if clients:
        out["clients"] = bar_chart(
            "Clients with the most violations",
            (Series("violations", "violations by the client", SIDE_SERIES[0].colour),),
            [
                Bar(
                    client_label(row["client"], row["client_id"]),
                    (row["violations"],),
                    note=_client_note(row),
                )
                for row in clients
            ],
        )
    servers = view.data.top_servers[:MAX_BARS]
    if servers:
        out["servers"] = bar_chart(
            "Servers with the most violations",
            (Series("violations", "violations by the server", SIDE_SERIES[1].colour),),
            [
                Bar(row["server"], (row["violations"],), note=plural(row["connections"], "connection"))
                for row in servers
            ],
        )
    if view.routing:
        out["routing"] = bar_chart(
            "Routing findings by kind",
            ROUTING_SERIES,
            [Bar(group.kind, (group.count,), group.anchor, group.description) for group in view.routing],
        )
    return out


def timeline_note(view: AuditView) -> str:
    """Why no line of violations over time is drawn: the traffic spans less than :data:`MIN_TIMELINE_SECONDS`, so a
    line would show a point or two; "" when one is drawn (or there is nothing to draw)."""
    buckets = view.data.violations_over_time
    if not buckets:
        return ""
    span = view.data.summary.get("time_span") or TimeSpan(start=None, end=None)
    start, end = span.get("start"), span.get("end")
    if start is None or end is None:
        starts = [float(b["bucket_start"]) for b in buckets]
        start, end = min(starts), max(starts) + view.data.bucket_seconds
    seconds = float(end) - float(start)
    if seconds >= MIN_TIMELINE_SECONDS:
        return ""
    total = sum(b["count"] for b in buckets)
    return (
        f"The audited traffic spans {duration(seconds)}, from {when(float(start))} to {when(float(end))}: "
        f"{plural(total, 'violation')} in so short a time make no line over time worth drawing (one is drawn for "
        f"{duration(MIN_TIMELINE_SECONDS)} or more). The evidence below gives the time of each."
    )


def time_points(
    buckets: Sequence[TimeBucket], width: float = 0.0, span: tuple[float, float] | None = None
) -> dict[str, list[tuple[float, int]]]:
    """Violations per side per bucket start. With a bucket width (given, or the smallest step between starts), the
    buckets missing count 0: between the first and the last, or over the whole ``span`` of the capture when given
    (the buckets start at its start), so that the axis shows the capture's time, not only the violations'."""
    if not buckets:
        return {}
    starts = sorted({float(b["bucket_start"]) for b in buckets})
    steps = [b - a for a, b in itertools.pairwise(starts) if b > a]
    width = width or min(steps, default=0.0)
    origin, last = starts[0], starts[-1]
    if span is not None and width > 0 and span[0] <= origin and last <= span[1]:
        origin, last = span[0], span[0] + width * int((span[1] - span[0]) / width)
    filled = width > 0 and (last - origin) / width <= MAX_BUCKETS
    grid = [origin + i * width for i in range(round((last - origin) / width) + 1)] if filled else starts
    position = {start: index for index, start in enumerate(starts)}
    sums: dict[str, dict[int, int]] = {}
    for bucket in buckets:
        start = float(bucket["bucket_start"])
        index = round((start - origin) / width) if filled else position[start]
        per_side = sums.setdefault(bucket["actor"], {})
        per_side[index] = per_side.get(index, 0) + bucket["count"]
    return {side: [(x, counts.get(i, 0)) for i, x in enumerate(grid)] for side, counts in sums.items()}


def _client_note(row: ClientCount) -> str:
    client_id, connections = row["client_id"], row["connections"]
    named = f"client id {shown(client_id, whole_in=WHOLE_IN)!r}, " if client_id else ""
    where = f" in {shown(row['capture'], whole_in=WHOLE_IN)}" if row.get("capture") else ""
    first = f", the first that broke a rule from {shown(row['client'], whole_in=WHOLE_IN)}" if connections > 1 else ""
    return named + plural(connections, "connection") + where + first


def _shown(value: object) -> object:
    """Every value the template writes: None as "-", text with its control characters made visible."""
    if value is None:
        return "-"
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value)
    return value


@functools.cache
def html_environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("mqttaudit.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
    )
    environment.filters.update(
        when=when,
        count=count,
        size=size,
        duration=duration,
        frame_label=frame_label,
        packet_shape=packet_shape,
        plural=plural,
        printable=printable,
        peer=peer_text,
        hex=hex_text,
    )
    environment.globals["max_rows"] = MAX_ROWS
    return environment


def peer_text(value: object) -> object:
    """A value from the traffic or the captures as the page shows it: cut, every character printable (None stays
    None, shown as "-")."""
    return None if value is None else shown(value, whole_in=WHOLE_IN)


def hex_text(value: object) -> Markup:
    """Evidence bytes in hex, cut like a frame of the probe's transcripts, the offending byte marked; "" for none."""
    if not value:
        return Markup("")
    text = escape(shown(value, 3 * MAX_HEX_BYTES, WHOLE_IN))
    return Markup(_MARKED_BYTE.sub(r'<mark title="the offending byte">\1</mark>', str(text)))


def marks_a_byte(value: object) -> bool:
    """Whether evidence bytes mark the offending one."""
    return bool(value) and _MARKED_BYTE.search(str(value)) is not None
