"""Scope miss: did the scope stage (retrievers/scope.py) exclude every gold support of a question?

Strict definition (the one the scope stage is specified by): for an answerable question whose system chose a
scope (`folder_mode: on` or `on_with_fallback`),

    scope_miss(q) = 1  if no gold support of q lies inside the scope chosen for q before any fallback search
                    0  otherwise
    scope miss rate = mean of scope_miss(q) over those questions

A gold support is what recall matches, judged the same way: with qrels, a document judged relevant at the
evaluation's relevance level (a golden set's `expected_output` ids become qrels); with a passage judge's
`Judgement` (anchors: rel_path + heading-path prefix + optional snippet; spans: character overlap), a gold item,
which lies inside the scope when one of the collection's chunks that the judge matches to it does (an item no
chunk matches lies inside no scope). A query whose selector chose no scope searched everything, so any
support some document or chunk carries is inside it. Not applicable (NaN) where scoping is off, the question has no gold support, or the judge does not
list its items' chunks (text, cosine); a failed search does not change it (the scope was chosen before the search).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retbench.metrics.base import MetricContext


def gold_supports(ctx: MetricContext, level: int) -> list[list[Sequence[str]]] | None:
    """Per gain-matrix row, its gold supports, each as the ids that carry it (None: relevance cannot say)."""
    if ctx.items is not None:
        return getattr(ctx.items, "supports", None)
    if ctx.qrels is None:
        return None
    qrels = ctx.qrels
    return [[(d,) for d, g in (qrels.get(q) or {}).items() if g >= level] for q in ctx.gm.query_ids]


def scope_miss(ctx: MetricContext, level: int) -> np.ndarray:
    """Per row: 1.0 when the chosen scope holds none of the gold supports, 0.0 when it holds one, NaN otherwise."""
    qids = ctx.gm.query_ids
    out = np.full(len(qids), np.nan)
    supports = gold_supports(ctx, level) if ctx.scopes is not None else None
    if ctx.scopes is None or supports is None:
        return out
    for i, q in enumerate(qids):
        inside = ctx.scopes.get(q)
        if inside is not None and supports[i]:
            out[i] = 0.0 if any(inside(d) for item in supports[i] for d in item) else 1.0
    return out
