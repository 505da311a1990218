"""Scope miss: did the scope stage (retrievers/scope.py) exclude every gold support of a question?

Strict definition (the one the scope stage is specified by): for an answerable question whose system chose a
scope (`folder_mode: on` or `on_with_fallback`), the value is 1 when *no* gold support lies inside the scope
chosen before any fallback search, else 0; its mean over questions is the scope miss rate. A gold support is a
document judged relevant at the evaluation's relevance level (ids from qrels; a golden set's `expected_output`
ids and anchors become qrels the same way recall judges them). Not applicable (NaN) where scoping is off or the
question has no gold support; a failed search does not change it (the scope was chosen before the search).
"""

from __future__ import annotations

import numpy as np

from retbench.metrics.base import MetricContext


def scope_miss(ctx: MetricContext, level: int) -> np.ndarray:
    """Per row: 1.0 when the chosen scope holds none of the gold supports, 0.0 when it holds one, NaN otherwise."""
    qids = ctx.gm.query_ids
    out = np.full(len(qids), np.nan)
    if ctx.scopes is None or ctx.qrels is None:
        return out
    for i, q in enumerate(qids):
        inside = ctx.scopes.get(q)
        gold = [d for d, g in (ctx.qrels.get(q) or {}).items() if g >= level]
        if inside is not None and gold:
            out[i] = 0.0 if any(inside(d) for d in gold) else 1.0
    return out
