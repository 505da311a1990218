"""trec_eval's measures for incomplete judgements and its counts, as vectorized functions of a GainMatrix.

Each takes the gain matrix (with its judged-0 and negatively judged ranked documents, `metrics/gain.py`)
and returns one float64 per query. The formulas are trec_eval 9's (`m_bpref.c`, `m_infap.c`,
`m_unjudged.c`, `m_num_*.c`; `unj` is trec_eval 10.0's); a ranked document is one of:
relevant (grade >= level), judged not relevant (0 <= grade < level), in the pool but not judged (a
negative grade) or not in the pool (no judgement at all).

- bpref = (1/R) * sum over relevant retrieved d of (1 - min(n_d, R) / min(N, R)), where n_d is the number
  of judged non-relevant documents ranked above d (the term is 1 when n_d = 0) and N the number of judged
  non-relevant documents (Buckley and Voorhees 2004);
- infAP (Yilmaz and Aslam 2006): for the relevant document at 0-based rank j, with r relevant, n judged
  non-relevant and u in-pool-unjudged documents at or above it: 1 when j = 0, else
  1/(j+1) + j/(j+1) * (r-1+n+u)/j * (r-1+eps)/(r-1+n+2 eps), eps = 1e-5; summed and divided by R;
- unj@k = documents in the top k with no judgement (or a negative one) / k;
- num_ret, num_rel, num_rel_ret, num_nonrel_judged_ret: counts, summed over queries by trec_eval;
  num_q: 1 per query (trec_eval prints the count).
"""

from __future__ import annotations

import numpy as np

from retbench.metrics.gain import GainMatrix, check_level, pair_order

INFAP_EPSILON = 1e-5  # trec_eval's INFAP_EPSILON


def _keys(gm: GainMatrix, rows: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """One sortable int64 per (row, rank): row-major, so keys of a row are contiguous."""
    return rows * (gm.depth + 1) + ranks


def count_before(gm: GainMatrix, rows: np.ndarray, ranks: np.ndarray, at_rows: np.ndarray, at_ranks: np.ndarray):
    """For each position (at_rows, at_ranks): how many of the (rows, ranks) pairs (sorted by row, rank)
    sit in the same row above it."""
    keys = _keys(gm, rows, ranks)
    return np.searchsorted(keys, _keys(gm, at_rows, at_ranks)) - np.searchsorted(keys, _keys(gm, at_rows, 0 * at_rows))


def _nonrel_positions(gm: GainMatrix, level: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, ranks) of the ranked documents judged not relevant at `level`, sorted by row then rank."""
    low = gm.hit_grades < level
    rows = np.concatenate([gm.zero_rows, gm.hit_rows[low]])
    ranks = np.concatenate([gm.zero_ranks, gm.hit_ranks[low]])
    order = pair_order(rows, ranks)
    return rows[order], ranks[order]


def _relevant_hits(gm: GainMatrix, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, 0-based ranks, 1-based count of relevant documents up to each) of the relevant ranked documents."""
    check_level(level)
    rel = gm.hit_grades >= level
    rows, ranks = gm.hit_rows[rel], gm.hit_ranks[rel]
    return rows, ranks, nth_in_row(rows)


def nth_in_row(rows: np.ndarray) -> np.ndarray:
    """1-based position of each entry within its row (entries sorted by row)."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    start = np.ones(len(rows), dtype=bool)
    start[1:] = rows[1:] != rows[:-1]
    idx = np.arange(len(rows), dtype=np.int64)
    return idx - np.maximum.accumulate(np.where(start, idx, 0)) + 1


def _per_row(gm: GainMatrix, rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(rows, weights=weights, minlength=len(gm)).astype(np.float64)


def _over_r(total: np.ndarray, r: np.ndarray) -> np.ndarray:
    return np.divide(total, r, out=np.zeros(len(total)), where=r > 0)


def bpref(gm: GainMatrix, level: int = 1) -> np.ndarray:
    """Binary preference (trec_eval bpref)."""
    rows, ranks, _ = _relevant_hits(gm, level)
    nrows, nranks = _nonrel_positions(gm, level)
    before = count_before(gm, nrows, nranks, rows, ranks).astype(np.float64)
    r = gm.n_relevant(level).astype(np.float64)
    big_n = gm.n_nonrelevant(level).astype(np.float64)
    rr, nn = r[rows], big_n[rows]
    den = np.minimum(nn, rr)
    frac = np.divide(np.minimum(before, rr), den, out=np.zeros(len(rows)), where=den > 0)
    terms = np.where(before > 0, 1.0 - frac, 1.0)
    return _over_r(_per_row(gm, rows, terms), r)


def infap(gm: GainMatrix, level: int = 1) -> np.ndarray:
    """Inferred AP (trec_eval infAP)."""
    rows, ranks, nth = _relevant_hits(gm, level)
    nrows, nranks = _nonrel_positions(gm, level)
    n = count_before(gm, nrows, nranks, rows, ranks).astype(np.float64)
    u = count_before(gm, gm.pool_rows, gm.pool_ranks, rows, ranks).astype(np.float64)
    j = ranks.astype(np.float64)
    r1 = nth - 1.0
    safe_j = np.where(j > 0, j, 1.0)
    later = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((r1 + n + u) / safe_j) * (
        (r1 + INFAP_EPSILON) / (r1 + n + 2 * INFAP_EPSILON)
    )
    terms = np.where(j == 0, 1.0, later)
    return _over_r(_per_row(gm, rows, terms), gm.n_relevant(level).astype(np.float64))


def unjudged(gm: GainMatrix, k: np.ndarray) -> np.ndarray:
    """Share of the top k with no judgement or a negative one, divided by k (trec_eval 10 unj_k)."""
    seen = np.minimum(gm.lengths, k)
    judged = _per_row(gm, gm.hit_rows[gm.hit_ranks < k[gm.hit_rows]])
    judged += _per_row(gm, gm.zero_rows[gm.zero_ranks < k[gm.zero_rows]])
    return np.divide(seen - judged, k, out=np.zeros(len(gm)), where=k > 0)


def num_ret(gm: GainMatrix) -> np.ndarray:
    return gm.lengths.astype(np.float64)


def num_rel(gm: GainMatrix, level: int = 1) -> np.ndarray:
    return gm.n_relevant(level).astype(np.float64)


def num_rel_ret(gm: GainMatrix, level: int = 1) -> np.ndarray:
    check_level(level)
    return _per_row(gm, gm.hit_rows[gm.hit_grades >= level])


def num_nonrel_judged_ret(gm: GainMatrix, level: int = 1) -> np.ndarray:
    """Retrieved documents judged (grade >= 0) but below `level`."""
    check_level(level)
    return _per_row(gm, gm.zero_rows) + _per_row(gm, gm.hit_rows[gm.hit_grades < level])


def num_q(gm: GainMatrix) -> np.ndarray:
    return np.ones(len(gm), dtype=np.float64)
