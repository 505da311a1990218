"""The interpolated precision-recall chart: one line per system over trec_eval's 11 `iprec_at_recall` points.

`evaluation.curves` computes the points (its docstring states the definition and the two recall roundings);
this module draws them as SVG with a caption that names the rounding the values were computed with.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

import numpy as np

from retbench.evaluation.curves import LEVELS
from retbench.report import plots

#: how the caption states each recall rounding (metrics.settings.RECALL_ROUNDINGS)
RULES = {
    "round": "round(r × R) of a query's R relevant documents, halves up (trec_eval 10.0's rule)",
    "floor_plus_0.9": "floor(r × R + 0.9) of a query's R relevant documents (trec_eval 9's and pytrec_eval's rule)",
}


def pr_figure(curves: Mapping[str, list[float]], rounding: str = "round") -> str:
    """The chart (one line per system, recall on x, interpolated precision on y) in a captioned figure whose
    caption names the recall rounding (`curve_rounding`)."""
    series = [plots.Series(s, list(LEVELS), v) for s, v in curves.items() if v and bool(np.all(np.isfinite(v)))]
    if not series:
        return '<p class="muted">No precision-recall curve: the qrels of these results could not be read.</p>'
    svg = plots.line_chart(
        series,
        title="Interpolated precision-recall curve per system",
        kind="pr-curve",
        x_label="recall",
        y_label="interpolated precision",
        y_range=(0.0, 1.0),
        x_range=(0.0, 1.0),
    )
    rule = "; ".join(RULES.get(r, r) for r in rounding.split(" / "))
    return (
        f"<figure>{svg}<figcaption>{escape('Interpolated precision at recall 0.0, 0.1, ..., 1.0')} (trec_eval's "
        "iprec_at_recall), mean over the counted queries: at each recall level the best precision reached once "
        f"that share of a query's relevant documents is found. Recall r means {escape(rule, quote=False)}."
        "</figcaption></figure>"
    )
