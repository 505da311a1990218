"""Novelty and diversity measures over subtopic judgements, as ndeval computes them (TREC Web track 2009-2014).

Inputs are `SubtopicHits` (metrics/judges/subtopics.py): the relevant (row, rank, subtopic) triples of
a run, where a judgement is relevant at grade >= the relevance level (ndeval reads subtopic judgements as
binary). M is the number of the query's subtopics with at least one relevant document; every measure is 0
when M is 0. Ranks are 0-based below (i = 0 is the top).

Novelty gain: the gain of rank i is g_i = sum over the subtopics s that doc i is relevant to of
(1 - alpha)^c(s, i), with c(s, i) the number of documents above rank i relevant to s (Clarke et al. 2008,
"Novelty and diversity in information retrieval evaluation"), summed in subtopic order as ndeval sums.

- alpha-nDCG@k = DCG@k of the run / DCG@k of the ideal ranking, DCG@k = sum_{i<k} g_i * d_i with
  d_i = log(2) / log(i + 2); the ideal ranking is ndeval's greedy one (the document with the largest
  gain next, ties to the larger doc id; the exact ideal is NP-hard), so 1.0 is "as good as greedy".
- ERR-IA@k (Chapelle et al. 2009, "Expected reciprocal rank for graded relevance", made intent-aware as
  Agrawal et al. 2009, "Diversifying search results", define it) with ndeval's collection-independent
  normalization: sum_{i<k} g_i / (i + 1) divided by the same sum for a ranking whose every document is
  relevant to all M subtopics, sum_{i<k} M (1 - alpha)^i / (i + 1). ndeval leaves ERR-IA@1 undivided
  (its loop starts at the second rank), so ERR-IA@1 = g_0, which can exceed 1; it is kept that way.
  alpha is ndeval's 0.5.
- NRBP (Clarke, Kolla and Vechtomova 2009) = (1 - (1 - alpha) beta) / M * sum_i g_i beta^i over the whole
  ranking.
- alpha-DCG@k (ndeval's alpha-DCG) = DCG@k of the run divided by the DCG@k of a ranking whose every document is
  relevant to all M subtopics, sum_{i<k} M (1 - alpha)^i d_i (undivided at k = 1, as ndeval leaves it).
- nERR-IA@k = the run's sum_{i<k} g_i / (i + 1) over the same sum for ndeval's greedy ideal ranking (0 when the
  run has no relevant document in the top k); nNRBP = NRBP over the greedy ideal ranking's NRBP (the whole ideal
  ranking: every document relevant to some subtopic).
- AP-IA (ndeval's MAP-IA) = (1/M) sum over subtopics s with a relevant document of AP_s, AP_s = (1/R_s) sum over
  the ranks i of documents relevant to s of (documents relevant to s at or above i) / (i + 1), R_s the documents
  judged relevant to s; over the whole ranking.
- P-IA@k (Agrawal et al. 2009) = (relevant (document, subtopic) pairs in the top k) / (k M).
- STREC@k (subtopic recall, Zhai, Cohen and Lafferty 2003) = subtopics with a relevant document in the top
  k / M.

ndeval stops at rank 20 (pyndeval refuses larger cutoffs); the formulas here take any cutoff. Reference:
pyndeval 0.0.8 (ndeval 4.5's C code), checked in tests/parity/metrics/test_diversity_ndeval.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from retbench.metrics.judges.subtopics import SubtopicHits

MAX_DIVERSITY_CUTOFF = 1_000_000  # the ideal-ideal normalizers are tables as long as the largest cutoff
_BLOCK = 256  # queries per greedy-ideal block


def _powers(base: float, n: int) -> np.ndarray:
    """[1, base, base^2, ...] by repeated multiplication, as ndeval's running products compute them."""
    t = np.full(max(n, 1), base, dtype=np.float64)
    t[0] = 1.0
    return np.cumprod(t)


def _discount(n: int) -> np.ndarray:
    """ndeval's DCG discount log(2) / log(i + 2) for 0-based ranks i < n."""
    return np.log(2.0) / np.log(np.arange(n, dtype=np.float64) + 2.0)


def _group_starts(*keys: np.ndarray) -> np.ndarray:
    """True where any of the (sorted) key arrays changes value: the first element of each group."""
    start = np.ones(len(keys[0]), dtype=bool)
    if len(start) > 1:
        same = np.ones(len(start) - 1, dtype=bool)
        for key in keys:
            same &= key[1:] == key[:-1]
        start[1:] = ~same
    return start


def _positions(start: np.ndarray) -> np.ndarray:
    idx = np.arange(len(start))
    return idx - np.maximum.accumulate(np.where(start, idx, 0))


def novelty_gains(h: SubtopicHits, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, rank, g) for every ranked position with a relevant subtopic; g as in the module docstring."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if not len(h.rows):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    by_subtopic = np.lexsort((h.ranks, h.subtopics, h.rows))
    seen = np.empty(len(h.rows), dtype=np.int64)
    seen[by_subtopic] = _positions(_group_starts(h.rows[by_subtopic], h.subtopics[by_subtopic]))
    gain = _powers(1.0 - alpha, int(seen.max()) + 1)[seen]
    start = _group_starts(h.rows, h.ranks)
    group = np.cumsum(start) - 1
    return h.rows[start], h.ranks[start], np.bincount(group, weights=gain)  # summed in subtopic order


def _at_k(rows: np.ndarray, ranks: np.ndarray, values: np.ndarray, k: np.ndarray | None, n: int) -> np.ndarray:
    keep = np.ones(len(rows), dtype=bool) if k is None else ranks < k[rows]
    return np.bincount(rows[keep], weights=values[keep], minlength=n).astype(np.float64)


def _ideal_ideal(m: np.ndarray, k: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """sum_{i<k} M w_i per row (w_0 left out of nothing: ndeval divides from the second rank on)."""
    return m * np.cumsum(weights)[k - 1]


def _checked_k(k: np.ndarray) -> int:
    top = int(k.max(initial=1))
    if top > MAX_DIVERSITY_CUTOFF:
        raise ValueError(f"diversity measures take cutoffs up to {MAX_DIVERSITY_CUTOFF:,}, got {top:,}")
    return top


def _normalized(raw: np.ndarray, m: np.ndarray, k: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """raw / ideal-ideal, except at k = 1, which ndeval leaves undivided; 0 where M = 0."""
    ii = _ideal_ideal(m.astype(np.float64), k, weights)
    out = np.where(k > 1, np.divide(raw, ii, out=np.zeros_like(raw), where=ii > 0), raw)
    return np.where(m > 0, out, 0.0)


def err_ia(h: SubtopicHits, k: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """ndeval's ERR-IA@k (collection-independent normalization)."""
    rows, ranks, g = novelty_gains(h, alpha)
    raw = _at_k(rows, ranks, g / (ranks + 1.0), k, len(h))
    top = _checked_k(k)
    return _normalized(raw, h.n_subtopics, k, _powers(1.0 - alpha, top) / np.arange(1.0, top + 1.0))


def alpha_ndcg(h: SubtopicHits, k: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """ndeval's alpha-nDCG@k: the run's alpha-DCG@k over the greedy ideal ranking's."""
    rows, ranks, g = novelty_gains(h, alpha)
    top = _checked_k(k)
    disc = _discount(int(max(top, ranks.max(initial=0) + 1)))
    run = _at_k(rows, ranks, g * disc[ranks], k, len(h))
    ideal = greedy_ideal_dcg(h, k, alpha)
    return np.divide(run, ideal, out=np.zeros(len(h)), where=(run != 0) & (ideal > 0))


def nrbp(h: SubtopicHits, alpha: float = 0.5, beta: float = 0.5) -> np.ndarray:
    """ndeval's NRBP over the whole ranking (collection-independent normalization)."""
    if not 0.0 < beta <= 1.0:
        raise ValueError(f"beta must be in (0, 1], got {beta!r}")
    rows, ranks, g = novelty_gains(h, alpha)
    raw = _at_k(rows, ranks, g * np.power(beta, ranks.astype(np.float64)), None, len(h))
    m = h.n_subtopics.astype(np.float64)
    return np.divide(raw * (1.0 - (1.0 - alpha) * beta), m, out=np.zeros(len(h)), where=m > 0)


def alpha_dcg(h: SubtopicHits, k: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """ndeval's alpha-DCG@k (normalized by the all-subtopics ranking, as ndeval reports it)."""
    rows, ranks, g = novelty_gains(h, alpha)
    top = _checked_k(k)
    disc = _discount(int(max(top, ranks.max(initial=0) + 1)))
    raw = _at_k(rows, ranks, g * disc[ranks], k, len(h))
    return _normalized(raw, h.n_subtopics, k, _powers(1.0 - alpha, top) * disc[:top])


def n_err_ia(h: SubtopicHits, k: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """ndeval's nERR-IA@k: the run's ERR-IA@k over the greedy ideal ranking's."""
    rows, ranks, g = novelty_gains(h, alpha)
    run = _at_k(rows, ranks, g / (ranks + 1.0), k, len(h))
    ideal = greedy_ideal(h, k, alpha, lambda n: 1.0 / np.arange(1.0, n + 1.0))
    return np.divide(run, ideal, out=np.zeros(len(h)), where=(run != 0) & (ideal > 0))


def n_nrbp(h: SubtopicHits, alpha: float = 0.5, beta: float = 0.5) -> np.ndarray:
    """ndeval's nNRBP: the run's NRBP over the greedy ideal ranking's."""
    run = nrbp(h, alpha, beta)
    everything = np.full(len(h), max(len(h.pairs[0]), 1), dtype=np.int64)
    ideal = greedy_ideal(h, everything, alpha, lambda n: _powers(beta, n))
    ideal = ideal * (1.0 - (1.0 - alpha) * beta) / np.maximum(h.n_subtopics, 1)
    return np.divide(run, ideal, out=np.zeros(len(h)), where=ideal > 0)


def ap_ia(h: SubtopicHits) -> np.ndarray:
    """ndeval's MAP-IA: average precision per subtopic, averaged over the query's M subtopics."""
    out = np.zeros(len(h), dtype=np.float64)
    if not len(h.rows):
        return out
    order = np.lexsort((h.ranks, h.subtopics, h.rows))
    rows, ranks, subs = h.rows[order], h.ranks[order], h.subtopics[order]
    found = _positions(_group_starts(rows, subs)) + 1.0
    jrow, _, jsub = h.pairs
    width = int(max(subs.max(), jsub.max())) + 1
    judged = np.bincount(jrow * width + jsub, minlength=len(h) * width)
    precision = found / (ranks + 1.0) / judged[rows * width + subs]
    out += np.bincount(rows, weights=precision, minlength=len(h))
    m = h.n_subtopics.astype(np.float64)
    return np.divide(out, m, out=np.zeros(len(h)), where=m > 0)


def precision_ia(h: SubtopicHits, k: np.ndarray) -> np.ndarray:
    """Relevant (document, subtopic) pairs in the top k / (k M)."""
    pairs = _at_k(h.rows, h.ranks, np.ones(len(h.rows)), k, len(h))
    den = k * h.n_subtopics.astype(np.float64)
    return np.divide(pairs, den, out=np.zeros(len(h)), where=den > 0)


def subtopic_recall(h: SubtopicHits, k: np.ndarray) -> np.ndarray:
    """Subtopics with a relevant document in the top k / M."""
    order = np.lexsort((h.ranks, h.subtopics, h.rows))
    first = _group_starts(h.rows[order], h.subtopics[order])
    rows, ranks = h.rows[order][first], h.ranks[order][first]
    covered = _at_k(rows, ranks, np.ones(len(rows)), k, len(h))
    m = h.n_subtopics.astype(np.float64)
    return np.divide(covered, m, out=np.zeros(len(h)), where=m > 0)


def greedy_ideal_dcg(h: SubtopicHits, k: np.ndarray, alpha: float) -> np.ndarray:
    """alpha-DCG@k of ndeval's greedy ideal ranking of each query's relevant documents."""
    return greedy_ideal(h, k, alpha, _discount)


def greedy_ideal(h: SubtopicHits, k: np.ndarray, alpha: float, weights: Callable[[int], np.ndarray]) -> np.ndarray:
    """sum_{i<k} g_i w_i over ndeval's greedy ideal ranking of each query's relevant documents (`weights(n)`:
    the per-rank weights w_0..w_{n-1}: DCG's discount, ERR's 1 / (i + 1), NRBP's beta^i)."""
    jrow, jdoc, jsub = h.pairs
    out = np.zeros(len(h), dtype=np.float64)
    if not len(jrow):
        return out
    docs = np.asarray(jdoc.tolist(), dtype=str)  # code-point order: strcmp's order on UTF-8 bytes
    order = np.lexsort((jsub, docs, jrow))
    jrow, docs, jsub = jrow[order], docs[order], jsub[order]
    doc_start = _group_starts(jrow, docs)
    doc_pos = _positions(_group_starts(jrow[doc_start]))[np.cumsum(doc_start) - 1]  # doc's place in its row
    sub_order = np.lexsort((jsub, jrow))
    sub_start = _group_starts(jrow[sub_order], jsub[sub_order])
    sub_pos = np.empty(len(jrow), dtype=np.int64)
    sub_pos[sub_order] = _positions(_group_starts(jrow[sub_order][sub_start]))[np.cumsum(sub_start) - 1]
    for lo in range(0, len(h), _BLOCK):
        sel = (jrow >= lo) & (jrow < lo + _BLOCK)
        if sel.any():
            rows = jrow[sel] - lo
            block = min(_BLOCK, len(h) - lo)
            rel = np.zeros((block, int(doc_pos[sel].max()) + 1, int(sub_pos[sel].max()) + 1), dtype=bool)
            rel[rows, doc_pos[sel], sub_pos[sel]] = True
            out[lo : lo + block] = _greedy_block(rel, k[lo : lo + block], alpha, weights)
    return out


def _greedy_block(rel: np.ndarray, k: np.ndarray, alpha: float, weights: Callable[[int], np.ndarray]) -> np.ndarray:
    """Greedy ideal sum_{i<k} g_i w_i for a block: rel[query, doc (doc id order), subtopic (subtopic order)]."""
    n, n_docs, n_subs = rel.shape
    steps = int(min(k.max(), n_docs))
    gain = np.ones((n, n_subs))
    left = np.asarray(rel.any(axis=2))  # documents relevant to some subtopic, not yet placed
    scores = np.zeros((n, steps))
    at = np.arange(n)
    for step in range(steps):
        score = np.zeros((n, n_docs))
        for j in range(n_subs):  # ndeval adds the subtopics' gains in this order
            score = score + np.where(rel[:, :, j], gain[:, j : j + 1], 0.0)
        score = np.where(left, score, -1.0)
        pick = n_docs - 1 - np.argmax(score[:, ::-1], axis=1)  # ties go to the larger doc id
        best = score[at, pick]
        placed = best >= 0
        scores[:, step] = np.where(placed, best, 0.0)
        left[at[placed], pick[placed]] = False
        gain = gain * np.where(rel[at, pick] & placed[:, None], 1.0 - alpha, 1.0)
    contrib = np.cumsum(scores * weights(steps), axis=1)
    return contrib[at, np.minimum(k, steps) - 1]
