"""The interpolated precision-recall curve per system: trec_eval's 11 `iprec_at_recall` points.

At recall level r the interpolated precision of a query is the highest precision reached at any rank whose
recall is at least r (trec_eval's `iprec_at_recall`, the curve of the TREC overviews; trec_eval 10.0 reads "recall
at least r" as "at least round(r * R) of the R relevant documents found", trec_eval 9 and pytrec_eval as "at least
(long)(r * R + 0.9)": the evaluation's `recall_rounding` says which); the curve is the mean over the counted
queries at r = 0.0, 0.1, ..., 1.0. Where the study asked for the 11 points their stored means are used;
otherwise they are computed from the stored run with the evaluation's own settings (the queries it counted, its
relevance level), so the curve and the tables never disagree on what was counted. `report/prcurve.py` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping

from retbench.data import Qrels, Run
from retbench.evaluation.scoring import evaluate
from retbench.evaluation.table import Evaluation
from retbench.metrics.registry import parse_metrics

LEVELS = tuple(round(i / 10, 1) for i in range(11))


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
