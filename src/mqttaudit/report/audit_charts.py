"""Charts as inline SVG, so a report needs no script and no external asset: horizontal bars split by series, and one
line per series over time. Every text is escaped. A bar's label is shown whole: its column is as wide as the longest
label (in a monospace font, so the width is known); only a label from the traffic longer than the chart's limit is
cut, with the whole of it in the tooltip."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from .audit_format import TimeAxis
from .peer_text import printable, shown

WIDTH = 560
#: Height of one bar's row, and of the legend.
ROW = 26
#: The narrowest label column, and the width of the bars and of the totals beside them.
LABEL_WIDTH = 200
VALUE_WIDTH = 56
BAR_AREA = WIDTH - LABEL_WIDTH - VALUE_WIDTH
#: Bar labels are set in a monospace font of this size; a character is at most 0.62 em wide in the usual ones.
LABEL_FONT = 'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" font-size="13"'
CHAR_WIDTH = 8.1
#: Characters of a label from the traffic (a ClientId, an address) shown before it is cut.
PEER_LABEL_CHARS = 48
#: Up to this many points a line also gets a marker (with a tooltip) per point.
MARKED_POINTS = 60
_LINE_HEIGHT = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 24, 12, 36
#: Height of the line under a time axis that says what its labels leave out.
_NOTE = 18


@dataclass(frozen=True, slots=True)
class Series:
    #: Also the CSS class of its marks.
    name: str
    label: str
    colour: str


@dataclass(frozen=True, slots=True)
class Bar:
    label: str
    #: One value per series, in the chart's series order.
    values: tuple[int, ...]
    #: Id of the page element the label links to ("" for none).
    link: str = ""
    #: More text for the label's tooltip.
    note: str = ""


def bar_chart(
    title: str, series: Sequence[Series], bars: Sequence[Bar], *, label_chars: int | None = PEER_LABEL_CHARS
) -> Markup:
    """One horizontal bar per ``Bar``, its segments one per series, with the total at its end. Labels are shown
    whole, but for those longer than ``label_chars`` (None: none is cut, as for statement ids)."""
    top = ROW if len(series) > 1 else 0
    height = top + ROW * len(bars) + 6
    scale = max((sum(bar.values) for bar in bars), default=0) or 1
    labels = [_cut(bar.label, label_chars) for bar in bars]
    label_width = max(LABEL_WIDTH, round(16 + CHAR_WIDTH * max((len(text) for text in labels), default=0)))
    out = [_open(title, height, label_width + BAR_AREA + VALUE_WIDTH)]
    if top:
        out += _legend(series, label_width)
    for row, (bar, text) in enumerate(zip(bars, labels, strict=True)):
        y = top + row * ROW
        tip = shown(bar.label) + (f": {shown(bar.note)}" if bar.note else "")
        label = (
            f'<text class="label" x="{label_width - 8}" y="{y + ROW * 0.68:.1f}" text-anchor="end" {LABEL_FONT}>'
            f"<title>{escape(tip)}</title>{escape(text)}</text>"
        )
        out.append(f'<a href="#{escape(bar.link)}">{label}</a>' if bar.link else label)
        x = float(label_width)
        for part, value in zip(series, bar.values, strict=True):
            if value <= 0:
                continue
            width = max(1.0, BAR_AREA * value / scale)
            out.append(
                f'<rect class="bar {escape(part.name)}" x="{x:.1f}" y="{y + 4}" width="{width:.1f}" '
                f'height="{ROW - 8}" fill="{escape(part.colour)}" data-label="{escape(shown(bar.label))}" '
                f'data-series="{escape(part.name)}" data-value="{value}">'
                f"<title>{escape(shown(bar.label))}, {escape(part.label)}: {value:,}</title></rect>"
            )
            x += width
        out.append(f'<text class="value" x="{x + 6:.1f}" y="{y + ROW * 0.68:.1f}">{sum(bar.values):,}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def line_chart(
    title: str,
    series: Sequence[Series],
    points: Mapping[str, Sequence[tuple[float, int]]],
    axis: TimeAxis | Callable[[float], str],
    tip: Callable[[float], str] | None = None,
) -> Markup:
    """One line per series through its (x, y) points, y from 0; axis labels at the ends and the middle, and under
    them the axis's note (what its labels leave out). Each point's tooltip names its x by ``tip`` (by the axis
    label without one)."""
    x_label = axis.label if isinstance(axis, TimeAxis) else axis
    point_label = tip or x_label
    note = axis.note if isinstance(axis, TimeAxis) else ""
    height = _LINE_HEIGHT + (_NOTE if note else 0)
    top = _TOP + (ROW if len(series) > 1 else 0)
    xs = [x for name in points for x, _ in points[name]]
    x0, x1 = min(xs, default=0.0), max(xs, default=0.0)
    y1 = _nice(max((y for name in points for _, y in points[name]), default=0))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, _LINE_HEIGHT - top - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (plot_w / 2 if x1 == x0 else plot_w * (x - x0) / (x1 - x0))

    def py(y: float) -> float:
        return top + plot_h * (1 - y / y1)

    out = [_open(title, height)]
    if len(series) > 1:
        out += _legend(series)
    for tick in (0, y1 // 2, y1) if y1 % 2 == 0 else (0, y1):
        out.append(
            f'<line class="grid" x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" '
            'stroke="#d0d0d5" stroke-width="1"/>'
            f'<text class="tick" x="{_LEFT - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{tick:,}</text>'
        )
    ticks = [(x0, "start"), ((x0 + x1) / 2, "middle"), (x1, "end")] if x1 > x0 else [(x0, "middle")]
    for x, anchor in ticks:
        out.append(
            f'<text class="tick" x="{px(x):.1f}" y="{_LINE_HEIGHT - 12}" text-anchor="{anchor}">'
            f"{escape(x_label(x))}</text>"
        )
    if note:
        out.append(
            f'<text class="axis-note" x="{_LEFT + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
            f"{escape(note)}</text>"
        )
    for part in series:
        line = sorted(points.get(part.name, ()))
        if not line:
            continue
        coordinates = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line)
        out.append(
            f'<polyline class="line {escape(part.name)}" points="{coordinates}" fill="none" '
            f'stroke="{escape(part.colour)}" stroke-width="2" data-series="{escape(part.name)}" '
            f'data-total="{sum(y for _, y in line)}"/>'
        )
        if len(line) <= MARKED_POINTS:
            out += [
                f'<circle class="point {escape(part.name)}" cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" '
                f'fill="{escape(part.colour)}"><title>{escape(point_label(x))}, {escape(part.label)}: {y:,}</title>'
                "</circle>"
                for x, y in line
            ]
    out.append("</svg>")
    return Markup("".join(out))


def _open(title: str, height: int, width: int = WIDTH) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    )


def _legend(series: Sequence[Series], left: int = LABEL_WIDTH) -> list[str]:
    out, x = [], left
    for part in series:
        out.append(
            f'<rect class="key {escape(part.name)}" x="{x}" y="6" width="13" height="13" fill="{escape(part.colour)}"/>'
            f'<text class="legend" x="{x + 18}" y="18">{escape(part.label)}</text>'
        )
        x += 30 + 8 * len(part.label)
    return out


def _cut(label: str, limit: int | None) -> str:
    text = printable(label)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _nice(value: int) -> int:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``value`` (1 for nothing)."""
    if value <= 1:
        return 1
    magnitude = int(10 ** (len(str(value)) - 1))
    return next(step * magnitude for step in (1, 2, 5, 10) if value <= step * magnitude)
