"""Rank metrics as vectorized functions of a GainMatrix.

Each function returns one float64 value per query (row). `k` is a per-row int64 array of cutoffs
(rows may differ: a golden-set sample can carry its own `metadata.k`) or None for "uncut".
`level` is the relevance level of binary measures (grade >= level counts as relevant).

Formulas follow trec_eval 9.x (the numbers people compare with):
- P@k divides by k even when fewer than k documents were returned;
- recall@k, MAP and R-precision divide by R, the number of judged documents with grade >= level,
  retrieved or not; MAP and MRR are uncut unless a k is given (map@k = trec_eval's map_cut_k);
- nDCG uses the grade itself as gain (linear, trec_eval's ndcg / ndcg_cut) and ignores the
  relevance level; the ideal DCG is built from all positive judged grades; `exp=True` gives the
  2^g - 1 variant (Burges et al. 2005, as used in the BEIR papers);
- a value whose denominator is 0 (no relevant document) is 0.0, as in trec_eval; what to do with
  such queries is decided once, in `evaluation.evaluate` (the `no_relevant` policy).

The work is over the sparse hits (relevant ranked documents), so a 1,000-deep ranking costs no more
than a 10-deep one unless it holds more relevant documents.
"""

from __future__ import annotations

import numpy as np

from retbench.metrics.gain import GainMatrix, check_level


def _cut(gm: GainMatrix, k: np.ndarray | None, level: int | None = None) -> np.ndarray:
    """Mask over hits: within each row's cutoff and (for binary measures) at or above `level`."""
    mask = np.ones(len(gm.hit_rows), dtype=bool)
    if k is not None:
        mask &= gm.hit_ranks < k[gm.hit_rows]
    if level is not None:
        check_level(level)
        mask &= gm.hit_grades >= level
    return mask


def _count(gm: GainMatrix, mask: np.ndarray) -> np.ndarray:
    return np.bincount(gm.hit_rows[mask], minlength=len(gm)).astype(np.float64)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(len(num), dtype=np.float64), where=den > 0)


def relevant_retrieved(gm: GainMatrix, k: np.ndarray | None, level: int) -> np.ndarray:
    """Number of relevant documents in the top k."""
    return _count(gm, _cut(gm, k, level))


def hit(gm: GainMatrix, k: np.ndarray | None, level: int = 1) -> np.ndarray:
    """1.0 if any relevant document is in the top k (trec_eval success_k)."""
    return (relevant_retrieved(gm, k, level) > 0).astype(np.float64)


def recall(gm: GainMatrix, k: np.ndarray | None, level: int = 1) -> np.ndarray:
    """|top-k ∩ Rel| / |Rel|."""
    return _ratio(relevant_retrieved(gm, k, level), gm.n_relevant(level))


def precision(gm: GainMatrix, k: np.ndarray, level: int = 1) -> np.ndarray:
    """|top-k ∩ Rel| / k (trec_eval P_k: divides by k even if fewer were returned)."""
    return _ratio(relevant_retrieved(gm, k, level), k)


def f1(gm: GainMatrix, k: np.ndarray, level: int = 1) -> np.ndarray:
    """Harmonic mean of P@k and recall@k (0 when both are 0)."""
    p = precision(gm, k, level)
    r = recall(gm, k, level)
    return _ratio(2.0 * p * r, p + r)


def rprec(gm: GainMatrix, level: int = 1) -> np.ndarray:
    """Precision at rank R, R = number of relevant documents (trec_eval Rprec)."""
    r = gm.n_relevant(level)
    return _ratio(relevant_retrieved(gm, r, level), r)


def reciprocal_rank(gm: GainMatrix, k: np.ndarray | None, level: int = 1) -> np.ndarray:
    """1 / rank of the first relevant document in the top k (uncut when k is None)."""
    mask = _cut(gm, k, level)
    rows, ranks = gm.hit_rows[mask], gm.hit_ranks[mask]
    out = np.zeros(len(gm), dtype=np.float64)
    if len(rows):
        # hits are sorted by (row, rank): the first hit of each row is its best rank
        first = np.ones(len(rows), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        out[rows[first]] = 1.0 / (ranks[first] + 1.0)
    return out


def average_precision(gm: GainMatrix, k: np.ndarray | None, level: int = 1) -> np.ndarray:
    """Sum over relevant retrieved docs (top k) of precision at their rank, divided by R (trec_eval map / map_cut)."""
    mask = _cut(gm, k, level)
    rows, ranks = gm.hit_rows[mask], gm.hit_ranks[mask]
    if len(rows) == 0:
        return np.zeros(len(gm), dtype=np.float64)
    start = np.ones(len(rows), dtype=bool)
    start[1:] = rows[1:] != rows[:-1]
    idx = np.arange(len(rows))
    first_idx = np.maximum.accumulate(np.where(start, idx, 0))
    nth = (idx - first_idx + 1).astype(np.float64)  # 1-based count of relevant docs up to this one
    sums = np.bincount(rows, weights=nth / (ranks + 1.0), minlength=len(gm))
    return _ratio(sums, gm.n_relevant(level))


def _gain(grades: np.ndarray, exp: bool) -> np.ndarray:
    return np.exp2(grades) - 1.0 if exp else grades


def dcg(gm: GainMatrix, k: np.ndarray | None, exp: bool = False) -> np.ndarray:
    """Sum of gain / log2(rank + 1) over the top k."""
    mask = _cut(gm, k)
    ranks = gm.hit_ranks[mask]
    return np.bincount(
        gm.hit_rows[mask], weights=_gain(gm.hit_grades[mask], exp) / np.log2(ranks + 2.0), minlength=len(gm)
    )


def ideal_dcg(gm: GainMatrix, k: np.ndarray | None, exp: bool = False) -> np.ndarray:
    """DCG of the ideal ranking (all positive judged grades, best first), cut at k."""
    pos = gm.ideal_positions
    rows = gm.ideal_rows
    mask = pos < k[rows] if k is not None else np.ones(len(pos), dtype=bool)
    return np.bincount(
        rows[mask], weights=_gain(gm.ideal_grades[mask], exp) / np.log2(pos[mask] + 2.0), minlength=len(gm)
    )


def ndcg(gm: GainMatrix, k: np.ndarray | None, exp: bool = False) -> np.ndarray:
    """DCG@k / IDCG@k with linear gains (trec_eval ndcg_cut_k; uncut = trec_eval ndcg) or 2^g - 1 gains."""
    return _ratio(dcg(gm, k, exp), ideal_dcg(gm, k, exp))


def log_rank_score(rank: np.ndarray, n: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """1 - log(1 + gamma (rank - 1)) / log(1 + gamma (n - 1)) for 1-based `rank` among `n` returned; 1 when n == 1.

    After datapizza's `log_rank_score`: rank 1 scores 1, rank n scores 0, and `gamma`
    sets how steeply the score falls over the first ranks.
    """
    if gamma <= 0:
        raise ValueError(f"gamma must be > 0, got {gamma!r}")
    rank = np.asarray(rank, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    num = np.log1p(gamma * (rank - 1.0))
    den = np.log1p(gamma * (n - 1.0))
    return np.where(n <= 1, 1.0, 1.0 - np.divide(num, den, out=np.zeros_like(num), where=den > 0))


def hybrid_log_rank(
    gm: GainMatrix, k: np.ndarray | None, level: int = 1, alpha: float = 0.5, gamma: float = 1.0
) -> np.ndarray:
    """alpha * recall + (1 - alpha) * rank quality (datapizza's `hybrid_log_rank_score_exact`).

    Over the first N = min(returned, k) documents: recall = relevant found / R, and rank quality =
    sum of `log_rank_score(rank, N, gamma)` over the relevant documents found, divided by R.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    n_ret = gm.lengths if k is None else np.minimum(gm.lengths, k)
    mask = _cut(gm, n_ret, level)
    rows = gm.hit_rows[mask]
    r = gm.n_relevant(level)
    found = np.bincount(rows, minlength=len(gm)).astype(np.float64)
    quality = np.bincount(rows, weights=log_rank_score(gm.hit_ranks[mask] + 1, n_ret[rows], gamma), minlength=len(gm))
    return alpha * _ratio(found, r) + (1.0 - alpha) * _ratio(quality, r)
