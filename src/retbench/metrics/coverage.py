"""How much of a ranking the labels cover: `judged@k` and `holes@k`.

judged@k = |top-min(k, returned) documents with any label (any grade, 0 included)| / min(k, returned);
holes@k = 1 - judged@k over the same documents. A query that returned nothing scores 0 on both
(there is nothing to be judged or unjudged). Pooled qrels leave holes that read as "not relevant"
and bias comparisons against systems that were not in the pool (Buckley and Voorhees 2004, bpref);
these two metrics show how large that bias can be, per system, under whichever labels are in use
(human, LLM, or human-then-LLM).
"""

from __future__ import annotations

import numpy as np


def _labelled_share(ctx, k: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    n = len(ctx.gm)
    judged = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=np.float64)
    qrels = ctx.qrels or {}
    for i, qid in enumerate(ctx.gm.query_ids):
        ranked = ctx.ranked(i, int(k[i]) if k is not None else None)
        if not ranked:
            continue
        labels = qrels.get(qid, {}) if qid in qrels else {}
        seen[i] = len(ranked)
        judged[i] = sum(1 for d in ranked if d in labels)
    return judged, seen


def judged_at_k(ctx, k: np.ndarray | None) -> np.ndarray:
    judged, seen = _labelled_share(ctx, k)
    return np.divide(judged, seen, out=np.zeros_like(judged), where=seen > 0)


def holes_at_k(ctx, k: np.ndarray | None) -> np.ndarray:
    judged, seen = _labelled_share(ctx, k)
    return np.divide(seen - judged, seen, out=np.zeros_like(judged), where=seen > 0)
