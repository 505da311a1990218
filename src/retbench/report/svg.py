"""The SVG primitives every chart draws with: the palette and each series' (colour, dash, marker) style, text
widths, frames with axes and ticks, and the legends (below the plot, or direct labels at line ends).

`report.plots` builds the charts from these (see its docstring for how series are told apart); a report module
with a chart of its own (tradeoff, histogram) draws with them too, so every chart looks the same.
"""

from __future__ import annotations

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


def dash_attr(st: Style) -> str:
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


def tick_label(v: float, unit: str = "") -> str:
    if unit == "%":
        return f"{100 * v:.0f}%"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    text = f"{v:.3f}".rstrip("0").rstrip(".")
    return (text if text not in ("-0", "") else "0") + unit


def open_svg(kind: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{escape(kind)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" font-size="12" fill="{INK}">',
        f"<title>{escape(title)}</title>",
    ]


def axes(
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
            f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{AXIS}">{escape(tick_label(t, y_unit))}</text>'
        )
    for i, t in enumerate(xticks):
        x = f.px(t)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.height - f.bottom}" y2="{f.height - f.bottom + 4}" stroke="{AXIS}"/>'
        )
        name = x_names[i] if x_names is not None else tick_label(t, x_unit)
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


def legend(items: Sequence[tuple[str, str]], x: float, y: float, *, shape: str = "line") -> list[str]:
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
                f'stroke-width="2.2"{dash_attr(st)}/>'
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
