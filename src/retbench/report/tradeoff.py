"""The trade-off picture: each system's quality against its latency (mean, p50 and p95) and its cost, with the Pareto
front marked. The cost is per 1,000 queries from the experiment's stated prices (`costs:`, report/costs.py, with a
table of every system's costs, the prices' sources and the front over quality, latency and cost together), else
the LLM usage's recorded cost. A system timed as batches (report/latency.py) has a mean but
no per-query percentiles, so it is on the mean chart only (the section says so).

A system is on the **Pareto front** of a chart when no other system is at least as good on both axes and strictly
better on one (higher quality, lower latency or cost; computed by `retbench.pareto`): the front is the set of
choices worth considering, the rest are beaten outright. Dependency-free SVG in the style of `report.plots` (colour-blind palette, one style per
system, a `<title>` on every point).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from retbench.pareto import Point, pareto_front
from retbench.report import fmt
from retbench.report.costs import COST_HEADER, cost_table, front_points
from retbench.report.model import ReportData
from retbench.report.svg import (
    AXIS,
    Frame,
    axes,
    legend_height,
    log_ticks,
    marker,
    nice_ticks,
    open_svg,
    series_legend,
    style,
)
from retbench.results.costs import gather_costs


def tradeoff_svg(points: Sequence[Point], *, x_label: str, y_label: str, title: str, width: int = 560) -> str:
    """Quality (y) against a cost (x, log scale when it spans more than 20x); the front joined by a dashed line."""
    if len(points) < 2:
        return ""
    names = [p.name for p in points]
    height = 300
    xs, ys = [p.cost for p in points], [p.quality for p in points]
    log = min(xs) > 0 and max(xs) / min(xs) > 20
    x0, x1 = (min(xs) / 1.5, max(xs) * 1.5) if log else (0.0, max(xs) * 1.1 or 1.0)
    ypad = (max(ys) - min(ys)) * 0.15 or 0.05
    y0, y1 = max(0.0, min(ys) - ypad), max(ys) + ypad
    f = Frame(width, height, 64, 16, 16, 44, x0, x1, y0, y1, log)
    xticks = [t for t in (log_ticks(x0, x1) if log else nice_ticks(x0, x1, 5)) if x0 <= t <= x1]
    # the legend below the plot wraps into as many rows as the names need: the SVG grows to hold them all
    legend_h = 2 + legend_height(names, width - f.left)
    out = open_svg("tradeoff", title, width, height + max(40, legend_h))
    out += axes(f, xticks, [t for t in nice_ticks(y0, y1, 5) if y0 <= t <= y1], x_label, y_label)
    front = pareto_front(points)
    by_name = {p.name: p for p in points}
    path = " ".join(f"{f.px(by_name[n].cost):.1f},{f.py(by_name[n].quality):.1f}" for n in front)
    out.append(f'<polyline class="pareto-front" points="{path}" fill="none" stroke="{AXIS}" stroke-dasharray="5 4"/>')
    for i, p in enumerate(points):
        on = p.name in front
        tip = f"{p.name}: {y_label} {p.quality:.4f}, {x_label} {p.cost:.4g}" + (" (Pareto front)" if on else "")
        mark = marker(style(i), f.px(p.cost), f.py(p.quality), 5 if on else 3.5, tip, p.name)
        out.append(f'<g data-pareto="{int(on)}">{mark}</g>')
    out += series_legend([(n, style(i)) for i, n in enumerate(names)], f.left, height + 2, width - f.left)
    out.append("</svg>")
    return "\n".join(out)


def _usage_cost(usage: dict) -> float | None:
    costs = [b.get("cost") for b in usage.values() if isinstance(b, dict)]
    known = [float(c) for c in costs if isinstance(c, int | float) and math.isfinite(c)]
    return sum(known) if known and sum(known) > 0 else None


def tradeoff_section(data: ReportData) -> list[tuple[str, str, str]]:
    """The HTML report's trade-off section: one chart per latency percentile, one for cost when recorded."""
    label = fmt.metric_label(data.primary)
    # a system with no scored query (a NaN mean) has no place on a quality axis
    ok = [
        s for s in data.systems if s.error is None and data.primary in s.means and math.isfinite(s.means[data.primary])
    ]
    charts = []
    for key in ("mean", "p50", "p95"):
        pts = [
            Point(s.name, s.means[data.primary], s.latency[key])
            for s in ok
            if isinstance(s.latency.get(key), int | float) and math.isfinite(s.latency[key]) and s.latency[key] > 0
        ]
        charts.append(
            tradeoff_svg(pts, x_label=f"{key} latency (ms)", y_label=label, title=f"{label} vs {key} latency")
        )
    costs = gather_costs(data.result)
    if costs:  # stated prices: cost per 1,000 queries, unpriced systems left off the chart (and said)
        pts = [Point(n, q, c) for n, q, _, c in front_points(data, costs)]
        currency = next(iter(costs.values()))["currency"]
        x_label = f"cost per 1,000 queries ({currency})"
    else:
        priced = [(s, _usage_cost(s.usage)) for s in ok]
        pts = [Point(s.name, s.means[data.primary], c) for s, c in priced if c is not None]
        x_label = "LLM cost (estimated)"
    charts.append(tradeoff_svg(pts, x_label=x_label, y_label=label, title=f"{label} vs cost"))
    body = "".join(c for c in charts if c)
    if costs:
        rows, notes = cost_table(data, costs)
        th = "".join(f"<th>{escape(h)}</th>" for h in COST_HEADER)
        trs = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        body += f'<table class="costs"><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>'
        body += "".join(f"<p>{escape(n)}</p>" for n in notes)
    if not body:
        return []
    text = (
        f"<p>Each system's {escape(label)} against its latency per query (and its LLM cost when recorded). Larger "
        "points joined by the dashed line are the <b>Pareto front</b>: no other system is at least as good on "
        "both axes and better on one; any other point is beaten outright.</p>"
    )
    batched = [s.name for s in ok if s.latency and s.latency.get("p50") is None]
    if batched:
        text += f"<p>Timed as batches (a mean, no per-query percentiles), so on the mean chart only: {escape(', '.join(batched))}.</p>"
    return [("tradeoff", "Trade-offs", text + body)]


__all__ = ["tradeoff_section", "tradeoff_svg"]
