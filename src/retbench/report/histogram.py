"""The per-query delta histogram: how many queries got better, stayed the same or got worse.

Its counts are the data's counts. "Unchanged" means a delta within `TIE_TOLERANCE` of 0 (the tolerance
the comparison's W / T / L column uses, only there to absorb floating-point rounding), and those queries
get a bar of their own at 0. Every other bin has an edge at 0 and holds one sign only: losses fall in
[-k·w, -(k-1)·w), gains in ((k-1)·w, k·w] for bin width w and k = 1, 2, ... So a bar's colour is the
sign of every query in it, and the legend's counts are the sums of the bars of its colour. Each bar
carries `data-kind`, `data-count`, `data-lo` and `data-hi`, so a test (or a reader's script) can read
the chart back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from retbench.comparison import TIE_TOLERANCE
from retbench.report.svg import LOSS, TIE, WIN, Frame, axes, legend, nice_ticks, open_svg


@dataclass(frozen=True)
class Bin:
    """One bar: the queries whose delta lies between `lo` and `hi` (see the module docstring for which end is open)."""

    kind: str  # "worse", "unchanged" or "better"
    lo: float
    hi: float
    count: int


def delta_bins(deltas: Sequence[float], bin_width: float = 0.1, lower: bool = False) -> list[Bin]:
    """Non-empty bins of `deltas`, negative first (most negative first), then the unchanged bar, then positive.

    A negative change is "worse", a positive one "better"; the reverse for a `lower` is better metric."""
    losses: dict[int, int] = {}
    gains: dict[int, int] = {}
    ties = 0
    for d in deltas:
        if abs(d) <= TIE_TOLERANCE:
            ties += 1
            continue
        k = max(1, math.ceil(abs(d) / bin_width - 1e-9))  # 1e-9: 0.3 / 0.1 = 3.0000000000000004 is bin 3
        side = gains if d > 0 else losses
        side[k] = side.get(k, 0) + 1
    down, up = ("better", "worse") if lower else ("worse", "better")
    out = [Bin(down, -k * bin_width, -(k - 1) * bin_width, losses[k]) for k in sorted(losses, reverse=True)]
    if ties:
        out.append(Bin("unchanged", 0.0, 0.0, ties))
    out += [Bin(up, (k - 1) * bin_width, k * bin_width, gains[k]) for k in sorted(gains)]
    return out


def _tip(b: Bin) -> str:
    q = "query" if b.count == 1 else "queries"
    if b.kind == "unchanged":
        return f"{b.count} {q} unchanged (change 0)"
    if b.hi <= 0:  # a bin left of 0
        return f"{b.count} {q} with change in [{b.lo:+.2f}, {b.hi:+.2f})"
    return f"{b.count} {q} with change in ({b.lo:+.2f}, {b.hi:+.2f}]"


def delta_histogram(
    deltas: Sequence[float],
    *,
    title: str,
    x_label: str,
    width: int = 640,
    height: int = 300,
    bin_width: float = 0.1,
    lower: bool = False,
) -> str:
    """The SVG: sign-pure bins of `bin_width` with an edge at 0, and a narrow bar at 0 for the unchanged queries."""
    if not len(deltas):
        return ""
    bins = delta_bins(deltas, bin_width, lower)
    span = max(1.0, max(abs(d) for d in deltas))
    n_side = math.ceil(span / bin_width - 1e-9)
    lo, hi = -n_side * bin_width, n_side * bin_width
    top = max(b.count for b in bins)
    f = Frame(width, height, 62, 20, 44, 48, lo, hi, 0, top * 1.08 or 1)
    out = open_svg("delta-histogram", title, width, height)
    out += axes(f, nice_ticks(lo, hi, 8), nice_ticks(0, top * 1.08 or 1, 5), x_label, "queries")
    gap = bin_width * 0.2  # the unchanged bar takes [-gap, gap]; the bins beside it start past it
    colour = {"worse": LOSS, "unchanged": TIE, "better": WIN}
    for b in bins:
        if b.kind == "unchanged":
            x0, x1 = -gap, gap
        else:
            x0, x1 = (b.lo, min(b.hi, -gap)) if b.hi <= 0 else (max(b.lo, gap), b.hi)
        x, w = f.px(x0) + 1, f.px(x1) - f.px(x0) - 2
        y = f.py(b.count)
        out.append(
            f'<rect class="bar" data-kind="{b.kind}" data-count="{b.count}" data-lo="{b.lo:g}" data-hi="{b.hi:g}" '
            f'x="{x:.1f}" y="{y:.1f}" width="{max(w, 1.0):.1f}" height="{f.py(0) - y:.1f}" fill="{colour[b.kind]}">'
            f"<title>{_tip(b)}</title></rect>"
        )
    total = {k: sum(b.count for b in bins if b.kind == k) for k in colour}
    out += legend(
        [
            (f"worse: {total['worse']}", LOSS),
            (f"unchanged: {total['unchanged']}", TIE),
            (f"better: {total['better']}", WIN),
        ],
        f.left,
        22,
        shape="box",
    )
    out.append("</svg>")
    return "\n".join(out)


def caption(metric: str, bin_width: float = 0.1) -> str:
    """What the bars mean, for the figure's caption (plain text; the caller escapes it)."""
    return (
        f"How many queries got better, stayed the same or got worse on {metric}. Unchanged: the two systems "
        f"score the query the same (|change| ≤ {TIE_TOLERANCE:g}, floating-point rounding only), drawn as its own "
        f"bar at 0; the other bars are bins of {bin_width:g} with an edge at 0, so each holds gains only or losses "
        "only, and the legend's counts are the sums of the bars."
    )
