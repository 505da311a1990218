"""Inline SVG charts with axes, ticks, gridlines and legends: no network, no plotting library.

The charts (line, stacked bars, means with intervals) live here; the primitives they draw with (palette, styles,
frames, axes, legends) in `report.svg`.

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
from html import escape

from retbench.report.svg import (
    AXIS,
    GRID,
    LOSS,
    PALETTE,
    TIE,
    WIN,
    Frame,
    Series,
    Style,
    axes,
    dash_attr,
    direct_labels,
    legend,
    legend_height,
    log_ticks,
    marker,
    nice_ticks,
    open_svg,
    series_legend,
    style,
    text_width,
    tick_label,
)

# the primitives the report modules and tests reach through `plots` (the charts' one public namespace)
__all__ = [
    "LEGEND_CSS",
    "LEGEND_JS",
    "LOSS",
    "PALETTE",
    "TIE",
    "WIN",
    "Series",
    "Style",
    "interval_chart",
    "line_chart",
    "nice_ticks",
    "stacked_bars",
    "style",
    "text_width",
]


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
    out = open_svg(kind, title, total_w, total_h)
    out += axes(f, xticks, nice_ticks(y0, y1), x_label, y_label, x_unit, y_unit)
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
            f'stroke-width="2.2" stroke-linejoin="round"{dash_attr(st)}/>'
        )
        if markers and not step:
            for (x, y), xv, yv in zip(pts, s.xs, s.ys, strict=True):
                tip = f"{s.name}: {tick_label(xv, x_unit)} → {tick_label(yv, y_unit) if y_unit else f'{yv:.4f}'}"
                out.append(marker(st, x, y, 3.5, tip, s.name))
        else:
            for j in _sparse_marks(len(pts), i, len(series)):
                xv, yv = s.xs[j], s.ys[j]
                tip = f"{s.name}: {tick_label(xv, x_unit)} → {tick_label(yv, y_unit) if y_unit else f'{yv:.4f}'}"
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
    out = open_svg(kind, title, width, height)
    ticks = nice_ticks(0, total, 5)
    for t in ticks:
        x = f.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{height - f.bottom}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{height - f.bottom + 17}" text-anchor="middle" fill="{AXIS}">{escape(tick_label(t))}</text>'
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
    out += legend(list(segments.items()), f.left, 22, shape="box")
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
    out = open_svg("mean-ci", title, width, total_h)
    for t in nice_ticks(lo, hi, 5):
        x = f.px(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{height - f.bottom}" stroke="{GRID}"/>')
        out.append(
            f'<text x="{x:.1f}" y="{height - f.bottom + 17}" text-anchor="middle" fill="{AXIS}">{tick_label(t)}</text>'
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
                f'stroke="{st.color}" stroke-width="2"{dash_attr(st)}/>'
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
