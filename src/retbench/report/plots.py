"""Inline SVG charts with axes, ticks, gridlines and legends: no JavaScript, no network, no plotting library.

Every chart is a self-contained `<svg>` string that inherits its font from the page, carries a
`<title>` for screen readers and a `data-chart` attribute naming what it shows. Colours are the
Okabe-Ito palette, which stays distinguishable for colour-blind readers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#8C6D00", "#000000")
GRID = "#e3e6ea"
AXIS = "#59626d"
INK = "#1f2328"
WIN, TIE, LOSS = "#0072B2", "#9aa3ad", "#D55E00"


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


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
    """Lines (or ECDF-style steps) per series, with a legend above the plot."""
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
    f = Frame(width, height, 62, 20, 44, 48, x0, x1, y0, y1, x_log)
    xticks = log_ticks(x0, x1) if x_log else nice_ticks(x0, x1)
    if not x_log and all(float(x).is_integer() for x in xs) and len(set(xs)) <= 12:
        xticks = sorted(set(xs))
    out = _open(kind, title, width, height)
    out += _axes(f, xticks, nice_ticks(y0, y1), x_label, y_label, x_unit, y_unit)
    for i, s in enumerate(series):
        col = s.color or color(i)
        pts = [(f.px(x), f.py(y)) for x, y in zip(s.xs, s.ys, strict=True)]
        if step:
            path = [pts[0]]
            for (_, ya), (xb, yb) in itertools.pairwise(pts):
                path += [(xb, ya), (xb, yb)]
            pts_line = path
        else:
            pts_line = pts
        d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts_line)
        out.append(
            f'<polyline class="series" data-series="{escape(s.name)}" points="{d}" fill="none" stroke="{col}" '
            f'stroke-width="2.2" stroke-linejoin="round"/>'
        )
        if markers and not step:
            for (x, y), xv, yv in zip(pts, s.xs, s.ys, strict=True):
                out.append(
                    f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{col}"><title>{escape(s.name)}: '
                    f"{escape(_label(xv, x_unit))} → {escape(_label(yv, y_unit) if y_unit else f'{yv:.4f}')}</title></circle>"
                )
    out += _legend([(s.name, s.color or color(i)) for i, s in enumerate(series)], f.left, 22)
    out.append("</svg>")
    return "\n".join(out)


def delta_histogram(
    deltas: Sequence[float],
    *,
    title: str,
    x_label: str,
    width: int = 640,
    height: int = 300,
    bin_width: float = 0.1,
) -> str:
    """Per-query deltas in bins centred on multiples of `bin_width`: losses, ties and wins coloured apart."""
    if not len(deltas):
        return ""
    half = bin_width / 2
    lo = min(-1.0, min(deltas))
    hi = max(1.0, max(deltas))
    n_side = math.ceil(max(-lo, hi) / bin_width - 1e-9)
    centres = [i * bin_width for i in range(-n_side, n_side + 1)]
    counts = [0] * len(centres)
    ties = 0
    for d in deltas:
        if abs(d) <= 1e-12:
            ties += 1
        idx = min(max(round(d / bin_width) + n_side, 0), len(centres) - 1)
        counts[idx] += 1
    top = max(counts)
    f = Frame(width, height, 62, 20, 44, 48, centres[0] - half, centres[-1] + half, 0, top * 1.08 or 1)
    xt = nice_ticks(centres[0], centres[-1], 8)
    out = _open("delta-histogram", title, width, height)
    out += _axes(f, xt, nice_ticks(0, top * 1.08 or 1, 5), x_label, "queries")
    for c, n in zip(centres, counts, strict=True):
        if not n:
            continue
        col = TIE if abs(c) < half - 1e-12 else WIN if c > 0 else LOSS
        x, w = f.px(c - half) + 1, f.px(c + half) - f.px(c - half) - 2
        y = f.py(n)
        out.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{f.py(0) - y:.1f}" fill="{col}">'
            f"<title>{n} quer{'y' if n == 1 else 'ies'} with change ≈ {c:+.2f}</title></rect>"
        )
    wins = sum(1 for d in deltas if d > 1e-12)
    losses = sum(1 for d in deltas if d < -1e-12)
    out += _legend(
        [(f"worse: {losses}", LOSS), (f"unchanged: {ties}", TIE), (f"better: {wins}", WIN)], f.left, 22, shape="box"
    )
    out.append("</svg>")
    return "\n".join(out)


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
    label_w = min(220, 20 + 7 * max(len(r[0]) for r in rows))
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
    """Means with confidence intervals: one row per metric, one dot and whisker per system."""
    if not metrics or not systems:
        return ""
    row_h = 14 * len(systems) + 14
    height = 70 + len(metrics) * row_h + 30
    label_w = min(160, 24 + 7 * max(len(m) for m in metrics))
    values = [v for _, vals in systems for row in vals if row is not None for v in row]
    lo = max(0.0, math.floor(min(values) * 10 - 1e-9) / 10)
    hi = min(1.0, math.ceil(max(values) * 10 + 1e-9) / 10) if max(values) <= 1 else max(values)
    f = Frame(width, height, label_w, 24, 44, 48, lo, hi, 0, 1)
    out = _open("mean-ci", title, width, height)
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
            y = y0 + 8 + j * 14
            col = color(j)
            lo_x, hi_x = f.px(low), f.px(high)
            out.append(f'<line x1="{lo_x:.1f}" x2="{hi_x:.1f}" y1="{y}" y2="{y}" stroke="{col}" stroke-width="2"/>')
            out.append(
                f'<circle cx="{f.px(mean):.1f}" cy="{y}" r="4" fill="{col}"><title>{escape(name)} {escape(m)}: '
                f"{mean:.4f} [{low:.4f}, {high:.4f}]</title></circle>"
            )
    out += _legend([(name, color(j)) for j, (name, _) in enumerate(systems)], f.left, 22)
    out.append("</svg>")
    return "\n".join(out)
