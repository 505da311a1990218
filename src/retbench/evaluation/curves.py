"""The interpolated precision-recall curve per system: trec_eval's 11 `iprec_at_recall` points.

At recall level r the interpolated precision of a query is the highest precision reached at any rank whose
recall is at least r (trec_eval's `iprec_at_recall`, the curve of the TREC overviews; trec_eval 10.0 reads "recall
at least r" as "at least round(r * R) of the R relevant documents found", trec_eval 9 and pytrec_eval as "at least
(long)(r * R + 0.9)": the evaluation's `recall_rounding` says which); the curve is the mean over the counted
queries at r = 0.0, 0.1, ..., 1.0. Where the study asked for the 11 points their stored means are used;
otherwise they are computed from the stored run with the evaluation's own settings (the queries it counted, its
relevance level), so the curve and the tables never disagree on what was counted. `report/prcurve.py` draws it.

The metric@k curves: recall@k, nDCG@k and hit@k for every k from 1 to the run's depth (at most MAX_CURVE_K), from a
cell's own table (`curve_means`, what a study stores) or from the stored run with the evaluation's own settings
(`k_curves`), so the values at the config's cutoffs equal the reported means.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from retbench.data import Qrels, Run
from retbench.evaluation.scoring import evaluate
from retbench.evaluation.table import Evaluation
from retbench.metrics.registry import parse_metrics

LEVELS = tuple(round(i / 10, 1) for i in range(11))
MAX_CURVE_K = 1000
CURVE_FAMILIES = ("recall", "ndcg", "hit")


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


def curve_metrics(run: Run) -> list[str]:
    """The metric names of a run's k curves: each family at every k from 1 to the run's depth (at most MAX_CURVE_K)."""
    depth = min(max(run.depth, 1), MAX_CURVE_K)
    return [f"{f}@{k}" for f in CURVE_FAMILIES for k in range(1, depth + 1)]


def curve_means(ev: Evaluation, names: list[str]) -> dict[str, list[float]]:
    """family -> [mean at k = 1 .. depth] of the `names` (`curve_metrics`) columns of a table (NaN: no query counted)."""
    values = np.ascontiguousarray(ev.values[:, [ev.metrics.index(n) for n in names]])  # row-major: same sums
    means = values.mean(axis=0) if len(ev.query_ids) else np.full(len(names), np.nan)
    depth = len(names) // len(CURVE_FAMILIES)
    return {f: means[i * depth : (i + 1) * depth].tolist() for i, f in enumerate(CURVE_FAMILIES)}


def k_curves(
    evs: Mapping[str, Evaluation],
    runs: Mapping[str, Run],
    qrels: Qrels,
    given: Mapping[str, Mapping[str, list[float]]] | None = None,
) -> dict[str, dict[str, list[float]]]:
    """family -> system -> [mean at k = 1 .. depth], each system evaluated as its stored table was.

    `given` (system -> family -> means) are curves the study computed with the system's own table;
    only the other systems are evaluated here.
    """
    out: dict[str, dict[str, list[float]]] = {f: {} for f in CURVE_FAMILIES}
    for system, ev in evs.items():
        if given is not None and system in given:
            means = given[system]
        else:
            run = runs[system]
            judged = list(ev.query_ids) + list(ev.excluded) + list(ev.skipped)
            names = curve_metrics(run)
            curve = evaluate(run, qrels.subset([q for q in judged if q in qrels]), names, ev.settings())
            means = curve_means(curve, names)
        for f in CURVE_FAMILIES:
            out[f][system] = list(means[f])
    return out
