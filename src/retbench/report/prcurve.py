"""The interpolated precision-recall curve per system: trec_eval's 11 `iprec_at_recall` points, drawn as SVG.

At recall level r the interpolated precision of a query is the highest precision reached at any rank whose
recall is at least r (trec_eval's `iprec_at_recall`, the curve of the TREC overviews; trec_eval 10.0 reads "recall
at least r" as "at least round(r * R) of the R relevant documents found", trec_eval 9 and pytrec_eval as "at least
(long)(r * R + 0.9)": the evaluation's `recall_rounding` says which, and the caption names it); the curve is the mean
over the counted queries at r = 0.0, 0.1, ..., 1.0. Where the study asked for the 11 points their stored means
are drawn; otherwise they are computed from the stored run with the evaluation's own settings (the queries it
counted, its relevance level), so the curve and the tables never disagree on what was counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

import numpy as np

from retbench.data import Qrels, Run
from retbench.evaluation import Evaluation, evaluate
from retbench.metrics.registry import parse_metrics
from retbench.report import plots

LEVELS = tuple(round(i / 10, 1) for i in range(11))
#: how the caption states each recall rounding (metrics.settings.RECALL_ROUNDINGS)
RULES = {
    "round": "round(r × R) of a query's R relevant documents, halves up (trec_eval 10.0's rule)",
    "floor_plus_0.9": "floor(r × R + 0.9) of a query's R relevant documents (trec_eval 9's and pytrec_eval's rule)",
}


def point_names() -> list[str]:
    """The canonical names of the 11 points (`iprec_at_recall(recall=0)` .. `(recall=1)`), in recall order."""
    return [s.name for s in parse_metrics(["iprec_at_recall"])]


def pr_curves(
    evs: Mapping[str, Evaluation],
    runs: Mapping[str, Run],
    qrels: Qrels | None,
    means: Mapping[str, Mapping[str, float]],
) -> dict[str, list[float]]:
    """system -> mean interpolated precision at the 11 recall levels (stored means first, else from the run).

    A system whose points are not stored and whose qrels cannot be read is left out."""
    names = point_names()
    out: dict[str, list[float]] = {}
    for system, ev in evs.items():
        stored = means.get(system, {})
        if all(n in stored for n in names):
            out[system] = [float(stored[n]) for n in names]
            continue
        if qrels is None:
            continue
        judged = [q for q in [*ev.query_ids, *ev.excluded, *ev.skipped] if q in qrels]
        table = evaluate(runs[system], qrels.subset(judged), names, ev.settings())
        cols = table.values[:, [table.metrics.index(n) for n in names]]
        out[system] = cols.mean(axis=0).tolist() if len(table.query_ids) else [float("nan")] * len(names)
    return out


def curve_rounding(evs: Mapping[str, Evaluation]) -> str:
    """The recall rounding the systems' curves were computed with (`round` when there are none; the rules
    joined with " / " when results scored under different rules are shown together)."""
    rules = sorted({ev.recall_rounding for ev in evs.values()})
    return " / ".join(rules) if rules else "round"


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
