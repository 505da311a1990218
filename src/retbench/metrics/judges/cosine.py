"""Cosine relevance: a chunk matches when its embedding's cosine with a gold embedding reaches a threshold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from retbench.data import Run
from retbench.metrics.judges.common import Groups, Judgement, _block_pairs, _check_groups, _entries, _pool_counts


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def judge_cosine(
    run: Run,
    vectors: tuple[Sequence[str], np.ndarray],
    gold: Mapping[str, np.ndarray],
    *,
    threshold: float = 0.8,
    groups: Groups | None = None,
) -> Judgement:
    """Similarity relevance: cosine(chunk embedding, a gold embedding) >= threshold.

    `vectors` is (chunk ids, matrix) for every ranked chunk, ideally for every chunk of the
    collection (the pool that the GainMatrix's relevant count is taken over); `gold` maps a query to a
    [n_gold, dim] matrix (gold chunks or excerpts embedded with the same model). Vectors need not
    be normalized; the comparison allows float32 rounding (1e-6) so a cosine of exactly the
    threshold counts.
    """
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"cosine threshold must be in [-1, 1], got {threshold}")
    ids, mat = vectors
    row_of = {c: i for i, c in enumerate(ids)}
    qids = list(gold)
    ent = _entries(run, qids)
    ranked = run.doc_ids[ent.index].tolist()
    missing = [c for c in ranked if c not in row_of]
    if missing:
        raise ValueError(f"no embedding for ranked chunk {missing[0]!r}")
    emb = _unit(np.asarray(mat))[np.fromiter((row_of[c] for c in ranked), dtype=np.int64, count=len(ranked))]
    dim = emb.shape[1] if emb.ndim == 2 else 0
    n_items = np.asarray([len(gold[q]) for q in qids], dtype=np.int64)
    width = int(n_items.max(initial=0))
    gpad = np.zeros((len(qids), width, dim), dtype=np.float32)
    for i, q in enumerate(qids):
        if n_items[i]:
            gpad[i, : n_items[i]] = _unit(np.asarray(gold[q]).reshape(n_items[i], -1))
    sims = np.einsum("nd,ngd->ng", emb, gpad[ent.rows]) if len(ranked) else np.zeros((0, width))
    valid = np.arange(width)[None, :] < n_items[ent.rows][:, None]
    match = (sims >= threshold - 1e-6) & valid
    # pool: every given vector against every gold vector
    every = _unit(np.asarray(mat))
    gi, gj = np.nonzero(np.arange(width)[None, :] < n_items[:, None])
    items = gpad[gi, gj]
    pp, pt = _block_pairs(len(every), len(gi), lambda b: every @ items[b].T >= threshold - 1e-6)
    pool = _pool_counts(len(qids), gi, pt, pp, len(every))
    return Judgement(qids, ent, match, n_items, pool, _check_groups(qids, n_items, groups))
