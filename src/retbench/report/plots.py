"""Inline SVG charts with axes, ticks, gridlines and legends: no network, no plotting library.

Every chart is a self-contained `<svg>` string that inherits its font from the page, carries a
`<title>` for screen readers and a `data-chart` attribute naming what it shows.

Telling series apart at any count: series i is drawn in colour i mod 8 of the Okabe-Ito palette
(distinguishable for the common colour-vision deficiencies; Okabe & Ito 2008, "Color Universal Design"),
with the dash pattern and marker shape of block i // 8 (solid + circle, dashed + square, dotted + triangle,
dash-dot + diamond, ...), so the first 160 series each get a unique (colour, dash, marker) triple and 24 systems never share
one. The legend sits below the plot and wraps onto as many rows as it needs, so every series has an entry;
line ends carry direct labels when they fit beside the plot without overlapping. Every element of a
series carries `data-series`, and a legend entry is a `legend-item`: the report's small script
(`LEGEND_JS`) hides and shows a series when its entry is clicked. Without the script the charts still read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C6D00", "#000000")
DASHES = ("", "7 4", "2 3", "10 3 2 3")  # solid, dashed, dotted, dash-dot
MARKERS = ("circle", "square", "triangle", "diamond", "triangle-down")
GRID = "#e3e6ea"
AXIS = "#59626d"
INK = "#1f2328"
WIN, TIE, LOSS = "#0072B2", "#9aa3ad", "#D55E00"
CHAR_W = 7.4  # a conservative average advance of a 12px sans-serif character, to lay text out without a browser
LABEL_GAP = 13  # the least vertical distance between two direct labels


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@dataclass(frozen=True)
class Style:
    """How series i is drawn: colour, stroke dash pattern ('' = solid) and marker shape."""

    color: str
    dash: str
    marker: str


def style(i: int, override: str = "") -> Style:
    """Series i's unique (colour, dash, marker) triple (see the module docstring); `override` replaces the colour."""
    block = i // len(PALETTE)
    return Style(override or color(i), DASHES[block % len(DASHES)], MARKERS[block % len(MARKERS)])


def text_width(text: str) -> float:
    """Estimated width in px of `text` at the charts' 12px font (generous, so laid-out text stays inside)."""
    return CHAR_W * len(text)


def _marker_d(shape: str, x: float, y: float, r: float) -> str:
    """SVG path data of a marker centred on (x, y) with radius about r."""
    if shape == "square":
        a = r * 0.9
        return f"M{x - a:.1f},{y - a:.1f}h{2 * a:.1f}v{2 * a:.1f}h{-2 * a:.1f}z"
    if shape == "triangle":
        return f"M{x:.1f},{y - r * 1.2:.1f}L{x + r * 1.1:.1f},{y + r * 0.8:.1f}L{x - r * 1.1:.1f},{y + r * 0.8:.1f}z"
    if shape == "triangle-down":
        return f"M{x:.1f},{y + r * 1.2:.1f}L{x + r * 1.1:.1f},{y - r * 0.8:.1f}L{x - r * 1.1:.1f},{y - r * 0.8:.1f}z"
    if shape == "diamond":
        a = r * 1.25
        return f"M{x:.1f},{y - a:.1f}L{x + a:.1f},{y:.1f}L{x:.1f},{y + a:.1f}L{x - a:.1f},{y:.1f}z"
    return f"M{x - r:.1f},{y:.1f}a{r:.1f},{r:.1f} 0 1,0 {2 * r:.1f},0a{r:.1f},{r:.1f} 0 1,0 {-2 * r:.1f},0"


def marker(st: Style, x: float, y: float, r: float = 3.5, title: str = "", series: str = "") -> str:
    """One marker (a `<circle>` for the circle shape, else a `<path>`), with an optional tooltip."""
    attrs = f' data-marker="{st.marker}"' + (f' class="series-mark" data-series="{escape(series)}"' if series else "")
    tip = f"<title>{escape(title)}</title>" if title else ""
    if st.marker == "circle":
        return f'<circle{attrs} cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{st.color}">{tip}</circle>'
    return f'<path{attrs} d="{_marker_d(st.marker, x, y, r)}" fill="{st.color}">{tip}</path>'


def _dash(st: Style) -> str:
    return f' stroke-dasharray="{st.dash}"' if st.dash else ""


@dataclass
class Series:
    name: str
    xs: Sequence[float]
    ys: Sequence[float]
    color: str = ""


@dataclass
class Frame:
    """The plotting area inside the margins, and the mapping from data to pixels."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x0: float
    x1: float
    y0: float
    y1: float
    x_log: bool = False

    def _fx(self, x: float) -> float:
        if self.x_log:
            return (math.log10(x) - math.log10(self.x0)) / (math.log10(self.x1) - math.log10(self.x0))
        return (x - self.x0) / (self.x1 - self.x0) if self.x1 != self.x0 else 0.5

    def px(self, x: float) -> float:
        return self.left + self._fx(x) * (self.width - self.left - self.right)

    def py(self, y: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return self.height - self.bottom - (y - self.y0) / span * (self.height - self.top - self.bottom)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 x 10^k ticks inside [lo, hi] (only powers of ten when the range is wide)."""
    out = []
    steps = (1, 2, 5) if math.log10(hi / lo) <= 3 else (1,)
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in steps:
            v = m * 10.0**e
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append(v)
    return out


def _label(v: float, unit: str = "") -> str:
    if unit == "%":
        return f"{100 * v:.0f}%"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:.3f}".rstrip("0").rstrip(".")
    return (text if text not in ("-0", "") else "0") + unit


def _open(kind: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(kind)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" font-size="12" fill="{INK}">',
        f"<title>{escape(title)}</title>",
    ]


def _axes(
    f: Frame,
    xticks: Sequence[float],
    yticks: Sequence[float],
    x_label: str,
    y_label: str,
    x_unit: str = "",
    y_unit: str = "",
    x_names: Sequence[str] | None = None,
) -> list[str]:
    out = []
    for t in yticks:
        y = f.py(t)
        out.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{AXIS}">{escape(_label(t, y_unit))}</text>'
        )
    for i, t in enumerate(xticks):
        x = f.px(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.height - f.bottom}" y2="{f.height - f.bottom + 4}" stroke="{AXIS}"/>'
        )
        name = x_names[i] if x_names is not None else _label(t, x_unit)
        out.append(
            f'<text x="{x:.1f}" y="{f.height - f.bottom + 17}" text-anchor="middle" fill="{AXIS}">{escape(name)}</text>'
        )
    base = f.height - f.bottom
    out.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{base}" y2="{base}" stroke="{AXIS}"/>')
    out.append(f'<line x1="{f.left}" x2="{f.left}" y1="{f.top}" y2="{base}" stroke="{AXIS}"/>')
    cx = (f.left + f.width - f.right) / 2
    out.append(f'<text x="{cx:.1f}" y="{f.height - 8}" text-anchor="middle" font-weight="600">{escape(x_label)}</text>')
    cy = (f.top + base) / 2
    out.append(
        f'<text transform="translate(14 {cy:.1f}) rotate(-90)" text-anchor="middle" font-weight="600">{escape(y_label)}</text>'
    )
    return out


def _legend(items: Sequence[tuple[str, str]], x: float, y: float, *, shape: str = "line") -> list[str]:
    """Legend entries laid out left to right, wrapping is left to the caller's width."""
    out = ['<g class="legend">']
    cx = x
    for name, col in items:
        if shape == "line":
            out.append(
                f'<line x1="{cx:.1f}" x2="{cx + 18:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{col}" stroke-width="3"/>'
            )
        else:
            out.append(f'<rect x="{cx:.1f}" y="{y - 6:.1f}" width="12" height="12" rx="2" fill="{col}"/>')
        out.append(f'<text x="{cx + 24:.1f}" y="{y + 4:.1f}">{escape(name)}</text>')
        cx += 34 + 7.2 * len(name)
    out.append("</g>")
    return out


LEGEND_ROW = 18
SWATCH = 30  # width of a legend entry's line sample


def _legend_rows(names: Sequence[str], width: float) -> list[list[int]]:
    """Legend entries (indices) in a grid of equal columns, as many columns as fit in `width`, row by row."""
    col = _legend_col(names)
    per_row = max(1, int(width // col))
    return [list(range(i, min(i + per_row, len(names)))) for i in range(0, len(names), per_row)]


def _legend_col(names: Sequence[str]) -> float:
    return SWATCH + 6 + max((text_width(n) for n in names), default=0) + 16


def legend_height(names: Sequence[str], width: float) -> int:
    """Height the series legend below a chart takes (0 when there are no series)."""
    return len(_legend_rows(names, width)) * LEGEND_ROW + 10 if names else 0


def series_legend(items: Sequence[tuple[str, Style]], x: float, y: float, width: float) -> list[str]:
    """Every series' entry (line sample in its dash, its marker, its full name), wrapped into rows from (x, y).

    Each entry is a `legend-item` carrying `data-series`, focusable, so the report's script can toggle it.
    """
    out = ['<g class="legend series-legend">']
    names = [n for n, _ in items]
    col = _legend_col(names)
    for r, row in enumerate(_legend_rows(names, width)):
        cy = y + r * LEGEND_ROW + 8
        for c, i in enumerate(row):
            cx = x + c * col
            name, st = items[i]
            out.append(
                f'<g class="legend-item" data-series="{escape(name)}" tabindex="0" role="button" aria-pressed="true">'
                f"<title>{escape(name)}</title>"
            )
            out.append(
                f'<rect x="{cx - 2:.1f}" y="{cy - 8:.1f}" width="{SWATCH + 10 + text_width(name):.1f}" '
                'height="16" fill="transparent"/>'
            )
            out.append(
                f'<line x1="{cx:.1f}" x2="{cx + SWATCH:.1f}" y1="{cy:.1f}" y2="{cy:.1f}" stroke="{st.color}" '
                f'stroke-width="2.2"{_dash(st)}/>'
            )
            out.append(marker(st, cx + SWATCH / 2, cy, 4))
            out.append(f'<text x="{cx + SWATCH + 6:.1f}" y="{cy + 4:.1f}">{escape(name)}</text></g>')
    out.append("</g>")
    return out


def direct_labels(
    ends: Sequence[tuple[str, Style, float, float]], x: float, top: float, bottom: float
) -> list[str] | None:
    """Names at the right of the plot beside each line's last point, nudged apart so none overlap.

    `ends`: (name, style, x, y) of each line's last point. None when the labels cannot all fit between
    `top` and `bottom` at LABEL_GAP apart (the legend alone then identifies the series).
    """
    if not ends or len(ends) * LABEL_GAP > bottom - top:
        return None
    order = sorted(range(len(ends)), key=lambda i: ends[i][3])
    ys = [min(max(ends[i][3], top + 4), bottom) for i in order]
    for j in range(1, len(ys)):
        ys[j] = max(ys[j], ys[j - 1] + LABEL_GAP)
    shift = ys[-1] - bottom
    if shift > 0:
        ys = [y - shift for y in ys]
        for j in range(len(ys) - 2, -1, -1):
            ys[j] = min(ys[j], ys[j + 1] - LABEL_GAP)
    if ys[0] < top:
        return None
    out = ['<g class="direct-labels">']
    for j, i in enumerate(order):
        name, st, ex, ey = ends[i]
        ly = ys[j]
        out.append(
            f'<g class="direct-label" data-series="{escape(name)}"><line x1="{ex + 3:.1f}" x2="{x - 2:.1f}" '
            f'y1="{ey:.1f}" y2="{ly:.1f}" stroke="{st.color}" stroke-width="0.8" stroke-opacity="0.7"/>'
            f"{marker(st, x + 6, ly, 3.5)}"
            f'<text x="{x + 14:.1f}" y="{ly + 4:.1f}">{escape(name)}</text></g>'
        )
    out.append("</g>")
    return out


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    kind: str = "line",
    x_log: bool = False,
    y_range: tuple[float, float] | None = None,
    x_range: tuple[float, float] | None = None,
    y_unit: str = "",
    x_unit: str = "",
    step: bool = False,
    markers: bool = True,
    width: int = 640,
    height: int = 340,
) -> str:
    """Lines (or ECDF-style steps) per series, the legend below the plot, direct labels where they fit.

    `width` x `height` is the plot with its axes; direct labels widen the chart to their right and the
    legend adds rows below. With `markers=False` (dense lines) each line still carries a few markers of
    its shape, staggered between series, so the shape identifies it where lines cross.
    """
    xs = [x for s in series for x in s.xs]
    ys = [y for s in series for y in s.ys]
    if not xs:
        return ""
    x0, x1 = x_range if x_range else (min(xs), max(xs))
    if x_log:
        x0, x1 = max(x0, 1e-9), max(x1, x0 * 10)
    elif x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    y0, y1 = y_range if y_range else (min(0.0, min(ys)), max(ys) * 1.05 or 1.0)
    styles = [style(i, s.color) for i, s in enumerate(series)]
    f = Frame(width, height, 62, 20, 18, 48, x0, x1, y0, y1, x_log)
    ends = [(s.name, st, f.px(s.xs[-1]), f.py(s.ys[-1])) for s, st in zip(series, styles, strict=True) if len(s.xs)]
    label_w = 20 + max(text_width(s.name) for s in series)
    labels = direct_labels(ends, width - f.right + 8, f.top, height - f.bottom) if label_w <= width / 2 else None
    total_w = width + (int(label_w) if labels else 0)
    legend_y = height + 2
    total_h = height + legend_height([s.name for s in series], total_w - f.left)
    xticks = log_ticks(x0, x1) if x_log else nice_ticks(x0, x1)
    if not x_log and all(float(x).is_integer() for x in xs) and len(set(xs)) <= 12:
        xticks = sorted(set(xs))
    out = _open(kind, title, total_w, total_h)
    out += _axes(f, xticks, nice_ticks(y0, y1), x_label, y_label, x_unit, y_unit)
    for i, (s, st) in enumerate(zip(series, styles, strict=True)):
        pts = [(f.px(x), f.py(y)) for x, y in zip(s.xs, s.ys, strict=True)]
        if not pts:
            continue
        if step:
            path = [pts[0]]
            for (_, ya), (xb, yb) in itertools.pairwise(pts):
                path += [(xb, ya), (xb, yb)]
            pts_line = path
        else:
            pts_line = pts
        d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts_line)
        out.append(
            f'<polyline class="series" data-series="{escape(s.name)}" points="{d}" fill="none" stroke="{st.color}" '
            f'stroke-width="2.2" stroke-linejoin="round"{_dash(st)}/>'
        )
        if markers and not step:
            for (x, y), xv, yv in zip(pts, s.xs, s.ys, strict=True):
                tip = f"{s.name}: {_label(xv, x_unit)} → {_label(yv, y_unit) if y_unit else f'{yv:.4f}'}"
                out.append(marker(st, x, y, 3.5, tip, s.name))
        else:
            for j in _sparse_marks(len(pts), i, len(series)):
                xv, yv = s.xs[j], s.ys[j]
                tip = f"{s.name}: {_label(xv, x_unit)} → {_label(yv, y_unit) if y_unit else f'{yv:.4f}'}"
                out.append(marker(st, pts[j][0], pts[j][1], 3.5, tip, s.name))
    if labels:
        out += labels
    out += series_legend(
        [(s.name, st) for s, st in zip(series, styles, strict=True)], f.left, legend_y, total_w - f.left
    )
    out.append("</svg>")
    return "\n".join(out)


def _sparse_marks(n: int, i: int, count: int, per_line: int = 4) -> list[int]:
    """Indices of a few points of a dense line to mark: evenly spaced, offset by the series' place among
    `count` series so markers of different lines do not sit on top of each other."""
    if n <= per_line:
        return list(range(n))
    step = n / per_line
    offset = step * (i % max(count, 1)) / max(count, 1)
    return sorted({min(n - 1, int(offset + k * step)) for k in range(per_line)} | {n - 1})


def stacked_bars(
    rows: Sequence[tuple[str, Sequence[tuple[str, float, str]]]],
    *,
    title: str,
    x_label: str,
    kind: str = "stacked-bars",
    width: int = 640,
) -> str:
    """One horizontal bar per row, split into (segment, value, colour) parts."""
    if not rows:
        return ""
    label_w = int(20 + max(text_width(r[0]) for r in rows))
    width = max(width, label_w + 380)  # a long name widens the chart rather than running off its left edge
    bar_h, gap = 22, 12
    height = 70 + len(rows) * (bar_h + gap) + 30
    total = max(sum(v for _, v, _ in parts) for _, parts in rows) or 1
    f = Frame(width, height, label_w, 24, 44, 48, 0, total, 0, 1)
    out = _open(kind, title, width, height)
    ticks = nice_ticks(0, total, 5)
    for t in ticks:
        x = f.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{height - f.bottom}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{height - f.bottom + 17}" text-anchor="middle" fill="{AXIS}">{escape(_label(t))}</text>'
        )
    out.append(
        f'<text x="{(f.left + width - f.right) / 2:.1f}" y="{height - 8}" text-anchor="middle" font-weight="600">{escape(x_label)}</text>'
    )
    segments: dict[str, str] = {}
    for i, (name, parts) in enumerate(rows):
        y = f.top + 10 + i * (bar_h + gap)
        out.append(f'<text x="{f.left - 8}" y="{y + bar_h / 2 + 4:.1f}" text-anchor="end">{escape(name)}</text>')
        x = 0.0
        for seg, v, col in parts:
            segments.setdefault(seg, col)
            if v <= 0:
                continue
            x0, x1 = f.px(x), f.px(x + v)
            out.append(
                f'<rect class="bar" data-row="{escape(name)}" data-segment="{escape(seg)}" x="{x0:.1f}" y="{y}" '
                f'width="{max(x1 - x0, 1):.1f}" height="{bar_h}" fill="{col}"><title>{escape(name)}: {escape(seg)} {v:g}</title></rect>'
            )
            if x1 - x0 > 34:
                out.append(
                    f'<text x="{(x0 + x1) / 2:.1f}" y="{y + bar_h / 2 + 4:.1f}" text-anchor="middle" fill="#fff">{v:g}</text>'
                )
            x += v
    out += _legend(list(segments.items()), f.left, 22, shape="box")
    out.append("</svg>")
    return "\n".join(out)


def interval_chart(
    metrics: Sequence[str],
    systems: Sequence[tuple[str, Sequence[tuple[float, float, float] | None]]],
    *,
    title: str,
    x_label: str,
    width: int = 640,
) -> str:
    """Means with confidence intervals: one row per metric, one marker and whisker per system (its style)."""
    if not metrics or not systems:
        return ""
    step = 14 if len(systems) <= 8 else 11
    row_h = step * len(systems) + 14
    plot_h = len(metrics) * row_h
    label_w = int(24 + max(text_width(m) for m in metrics))
    names = [name for name, _ in systems]
    height = 24 + plot_h + 48
    total_h = height + legend_height(names, width - label_w)
    values = [v for _, vals in systems for row in vals if row is not None for v in row]
    lo = max(0.0, math.floor(min(values) * 10 - 1e-9) / 10)
    hi = min(1.0, math.ceil(max(values) * 10 + 1e-9) / 10) if max(values) <= 1 else max(values)
    f = Frame(width, height, label_w, 24, 16, 48, lo, hi, 0, 1)
    styles = [style(j) for j in range(len(systems))]
    out = _open("mean-ci", title, width, total_h)
    for t in nice_ticks(lo, hi, 5):
        x = f.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{height - f.bottom}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{height - f.bottom + 17}" text-anchor="middle" fill="{AXIS}">{_label(t)}</text>'
        )
    out.append(
        f'<text x="{(f.left + width - f.right) / 2:.1f}" y="{height - 8}" text-anchor="middle" font-weight="600">{escape(x_label)}</text>'
    )
    for i, m in enumerate(metrics):
        y0 = f.top + 8 + i * row_h
        out.append(f'<text x="{f.left - 8}" y="{y0 + row_h / 2:.1f}" text-anchor="end">{escape(m)}</text>')
        for j, (name, vals) in enumerate(systems):
            v = None if vals is None else vals[i]
            if v is None:
                continue
            mean, low, high = v
            y = y0 + 8 + j * step
            st = styles[j]
            lo_x, hi_x = f.px(low), f.px(high)
            out.append(
                f'<line class="series" data-series="{escape(name)}" x1="{lo_x:.1f}" x2="{hi_x:.1f}" y1="{y}" y2="{y}" '
                f'stroke="{st.color}" stroke-width="2"{_dash(st)}/>'
            )
            out.append(marker(st, f.px(mean), y, 4, f"{name} {m}: {mean:.4f} [{low:.4f}, {high:.4f}]", name))
    out += series_legend(list(zip(names, styles, strict=True)), f.left, height + 2, width - f.left)
    out.append("</svg>")
    return "\n".join(out)


LEGEND_CSS = """
svg.chart .legend-item { cursor: pointer; }
svg.chart .legend-item.off { opacity: 0.3; }
svg.chart .legend-item:focus { outline: 2px solid #0072B2; }
"""

# Click a legend entry: hide or show that series in its chart; double-click: show only that series (again: all).
LEGEND_JS = """
(function () {
  function parts(svg, name) {
    return Array.prototype.filter.call(svg.querySelectorAll('[data-series]'), function (el) {
      return el.getAttribute('data-series') === name && !el.classList.contains('legend-item');
    });
  }
  function set(item, on) {
    item.setAttribute('aria-pressed', on ? 'true' : 'false');
    item.classList.toggle('off', !on);
    parts(item.ownerSVGElement, item.getAttribute('data-series')).forEach(function (el) {
      el.style.display = on ? '' : 'none';
    });
  }
  function items(svg) { return Array.prototype.slice.call(svg.querySelectorAll('.legend-item')); }
  Array.prototype.forEach.call(document.querySelectorAll('svg.chart .legend-item'), function (item) {
    var svg = item.ownerSVGElement;
    item.addEventListener('click', function () { set(item, item.getAttribute('aria-pressed') !== 'true'); });
    item.addEventListener('dblclick', function (e) {
      e.preventDefault();
      var others = items(svg).filter(function (x) { return x !== item; });
      var solo = others.every(function (x) { return x.getAttribute('aria-pressed') !== 'true'; });
      others.forEach(function (x) { set(x, solo); });
      set(item, true);
    });
    item.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); item.dispatchEvent(new MouseEvent('click')); }
    });
  });
})();
"""
