"""Charts as inline SVG, so a report needs no script and no external asset: horizontal bars split by series, and one
line per series over time. Every text is escaped; a long label is cut, with the whole of it in the tooltip."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from .peer_text import printable, shown

WIDTH = 560
#: Height of one bar's row, and of the legend.
ROW = 26
LABEL_WIDTH = 200
VALUE_WIDTH = 56
#: Characters of a label shown before it is cut.
LABEL_CHARS = 22
#: Up to this many points a line also gets a marker (with a tooltip) per point.
MARKED_POINTS = 60
_LINE_HEIGHT = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 24, 12, 36


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


def bar_chart(title: str, series: Sequence[Series], bars: Sequence[Bar]) -> Markup:
    """One horizontal bar per ``Bar``, its segments one per series, with the total at its end."""
    top = ROW if len(series) > 1 else 0
    height = top + ROW * len(bars) + 6
    scale = max((sum(bar.values) for bar in bars), default=0) or 1
    area = WIDTH - LABEL_WIDTH - VALUE_WIDTH
    out = [_open(title, height)]
    if top:
        out += _legend(series)
    for row, bar in enumerate(bars):
        y = top + row * ROW
        tip = shown(bar.label) + (f": {shown(bar.note)}" if bar.note else "")
        label = (
            f'<text class="label" x="{LABEL_WIDTH - 8}" y="{y + ROW * 0.68:.1f}" text-anchor="end">'
            f"<title>{escape(tip)}</title>{escape(_cut(bar.label))}</text>"
        )
        out.append(f'<a href="#{escape(bar.link)}">{label}</a>' if bar.link else label)
        x = float(LABEL_WIDTH)
        for part, value in zip(series, bar.values, strict=True):
            if value <= 0:
                continue
            width = max(1.0, area * value / scale)
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
    x_label: Callable[[float], str],
) -> Markup:
    """One line per series through its (x, y) points, y from 0; axis labels at the ends and the middle."""
    top = _TOP + (ROW if len(series) > 1 else 0)
    xs = [x for name in points for x, _ in points[name]]
    x0, x1 = min(xs, default=0.0), max(xs, default=0.0)
    y1 = _nice(max((y for name in points for _, y in points[name]), default=0))
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, _LINE_HEIGHT - top - _BOTTOM

    def px(x: float) -> float:
        return _LEFT + (plot_w / 2 if x1 == x0 else plot_w * (x - x0) / (x1 - x0))

    def py(y: float) -> float:
        return top + plot_h * (1 - y / y1)

    out = [_open(title, _LINE_HEIGHT)]
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
                f'fill="{escape(part.colour)}"><title>{escape(x_label(x))}, {escape(part.label)}: {y:,}</title>'
                "</circle>"
                for x, y in line
            ]
    out.append("</svg>")
    return Markup("".join(out))


def _open(title: str, height: int) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    )


def _legend(series: Sequence[Series]) -> list[str]:
    out, x = [], LABEL_WIDTH
    for part in series:
        out.append(
            f'<rect class="key {escape(part.name)}" x="{x}" y="6" width="13" height="13" fill="{escape(part.colour)}"/>'
            f'<text class="legend" x="{x + 18}" y="18">{escape(part.label)}</text>'
        )
        x += 30 + 8 * len(part.label)
    return out


def _cut(label: str) -> str:
    text = printable(label)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _nice(value: int) -> int:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``value`` (1 for nothing)."""
    if value <= 1:
        return 1
    magnitude = int(10 ** (len(str(value)) - 1))
    return next(step * magnitude for step in (1, 2, 5, 10) if value <= step * magnitude)
