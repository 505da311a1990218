"""Exact document values for flat inner-product (or cosine) retrieval: KNN-Shapley and leave-one-out.

The utility. For one query, rank the documents of a coalition S by score (descending; ties broken by document
id descending, as trec_eval does) and take the top K. With y_d the document's label (1 if relevant at the
relevance level, else 0) the utility is

    U_q(S) = (1 / Z_q) * sum of y_d over the top K of S        (fewer than K documents: the sum over all of S)

- Z_q = K: precision@K with binary relevance (trec_eval's P@K, which divides by K even when fewer than K are
  returned). This is exactly the KNN utility of Jia et al. (VLDB 2019, "Efficient task-specific data valuation
  for nearest neighbor algorithms", eq. 6) with the label "is relevant".
- Z_q = R_q, the number of relevant documents of the query (judged, in the corpus or not): recall@K.

A document's value is the mean over the evaluation queries of its Shapley value for U_q (Shapley values are
linear in the utility), so the values sum to U(all) - U(empty) = the mean precision@K (or recall@K) of the whole
corpus: the efficiency axiom. nDCG@K has a rank discount and no closed form here: use `values.montecarlo`.

The recursion (Jia et al., Theorem 1), over the documents sorted by score, positions i = 1..N:

    s_N = y_N * min(K, N) / N / Z
    s_i = s_{i+1} + (y_i - y_{i+1}) / Z * min(K, i) / i

(Jia et al. state s_N = y_N / N, which is the same when N >= K.) Unrolled, only the labelled documents matter:

    s_i = ( y_i * min(K, i) / i  -  K * sum over labelled j with position p_j > max(i, K) of y_j / (p_j (p_j - 1)) ) / Z

so a relevant document ranked below K charges every document ranked above it K / (p (p - 1)) / Z: documents that
crowd relevant ones out of the top K get negative values. `shapley_sorted` runs the recursion (O(N log N) per
query, the per-query matrix, for small corpora and for reports); `shapley_streamed` uses the unrolled form
(O(N) per labelled pair, no sort, queries in blocks: the path for a million documents).

Leave-one-out: U(all) - U(all without d) = (y_d - y_{K+1}) / Z for d in the top K (y_d / Z when N <= K), else 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from retbench.errors import InputError


def id_tiebreak(doc_ids: Sequence[str]) -> np.ndarray:
    """Per document, its position in ascending id order: of two equal scores the larger id ranks first."""
    order = sorted(range(len(doc_ids)), key=lambda i: doc_ids[i])
    out = np.empty(len(doc_ids), dtype=np.int64)
    out[order] = np.arange(len(doc_ids))
    return out


def ranking_order(scores: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """(Q, N) document indices in rank order: score descending, then `tiebreak` descending."""
    tb = np.broadcast_to(-np.asarray(tiebreak), scores.shape)
    return np.lexsort((tb, -scores), axis=-1)


def _check(scores: np.ndarray, labels: np.ndarray, k: int, denominators: np.ndarray) -> None:
    if scores.ndim != 2 or labels.shape != scores.shape:
        raise InputError(f"scores {scores.shape} and labels {labels.shape} must be the same (queries, documents)")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    if denominators.shape != (scores.shape[0],) or np.any(denominators <= 0):
        raise InputError("every query needs a positive denominator (K, or its number of relevant documents)")
    if not np.all(np.isfinite(scores)):
        raise InputError("scores must be finite")


def _ranked_labels(
    scores: np.ndarray, labels: np.ndarray, k: int, denominators: np.ndarray, tiebreak: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked inputs as (each query's ranking order, its labels in that order, the denominators Z_q)."""
    scores, labels = np.asarray(scores), np.asarray(labels, dtype=np.float64)
    denominators = np.asarray(denominators, dtype=np.float64)
    _check(scores, labels, k, denominators)
    order = ranking_order(scores, tiebreak)
    return order, np.take_along_axis(labels, order, axis=1), denominators


def shapley_sorted(
    scores: np.ndarray, labels: np.ndarray, k: int, denominators: np.ndarray, tiebreak: np.ndarray
) -> np.ndarray:
    """(Q, N) exact Shapley value of every document for every query's utility (Jia et al.'s recursion)."""
    order, y, denominators = _ranked_labels(scores, labels, k, denominators, tiebreak)
    n = y.shape[1]
    pos = np.arange(1, n + 1, dtype=np.float64)
    c = np.minimum(k, pos) / pos
    steps = np.empty_like(y)
    steps[:, :-1] = (y[:, :-1] - y[:, 1:]) * c[:-1]
    steps[:, -1] = y[:, -1] * c[-1]
    ranked = np.cumsum(steps[:, ::-1], axis=1)[:, ::-1] / denominators[:, None]
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, ranked, axis=1)
    return out


def leave_one_out_sorted(
    scores: np.ndarray, labels: np.ndarray, k: int, denominators: np.ndarray, tiebreak: np.ndarray
) -> np.ndarray:
    """(Q, N) U(all) - U(all without d) for every query and document."""
    order, y, denominators = _ranked_labels(scores, labels, k, denominators, tiebreak)
    ranked = np.zeros_like(y)
    top = min(k, y.shape[1])
    after = y[:, k][:, None] if y.shape[1] > k else 0.0
    ranked[:, :top] = (y[:, :top] - after) / denominators[:, None]
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, ranked, axis=1)
    return out


@dataclass(frozen=True)
class Judged:
    """The labelled (query, document) pairs of the evaluation queries, as arrays (labels are non-zero)."""

    query: np.ndarray  # (P,) query row
    doc: np.ndarray  # (P,) document index
    label: np.ndarray  # (P,) label y (1.0 for binary relevance)
    denominators: np.ndarray  # (Q,) Z_q

    def __post_init__(self) -> None:
        if not (len(self.query) == len(self.doc) == len(self.label)):
            raise InputError("judged pairs: query, doc and label must have one entry each")

    def dense(self, n_docs: int) -> np.ndarray:
        """(Q, N) label matrix (for the small-corpus paths)."""
        out = np.zeros((len(self.denominators), n_docs))
        out[self.query, self.doc] = self.label
        return out


@dataclass
class StreamedValues:
    """Per-document values (mean over queries) from `shapley_streamed`, with leave-one-out and U(all)."""

    shapley: np.ndarray  # (N,)
    leave_one_out: np.ndarray  # (N,)
    utility: np.ndarray  # (Q,) U_q(all)
    positions: np.ndarray  # (P,) 1-based position of each judged pair's document in its query's ranking
    pair_scores: np.ndarray  # (P,) the score of each judged pair's document for its query


def _beats(rows: np.ndarray, t: np.ndarray, docs: np.ndarray, tiebreak: np.ndarray) -> np.ndarray:
    """(P, N) which documents rank above each judged document (strictly higher score, or equal and larger id)."""
    above = rows > t[:, None]
    tied = np.count_nonzero(rows == t[:, None], axis=1) > 1
    for p in np.flatnonzero(tied):  # rare: exact duplicates or identical vectors
        above[p] |= (rows[p] == t[p]) & (tiebreak > tiebreak[docs[p]])
    return above


def _top_labels(block: np.ndarray, labels_of: Callable[[np.ndarray], np.ndarray], k: int, tb: np.ndarray) -> tuple:
    """Per query of a block, the documents at positions 1..K+1 (ties resolved exactly) and their labels."""
    n = block.shape[1]
    m = min(n, k + 1)
    extra = min(n, m + 8)
    cand = (
        np.argpartition(-block, extra - 1, axis=1)[:, :extra] if extra < n else np.tile(np.arange(n), (len(block), 1))
    )
    cs = np.take_along_axis(block, cand, axis=1)
    order = np.lexsort((-tb[cand], -cs), axis=1)
    cand, cs = np.take_along_axis(cand, order, axis=1), np.take_along_axis(cs, order, axis=1)
    if extra < n:  # a tie across the candidate boundary: sort that query in full
        for r in np.flatnonzero(cs[:, m - 1] <= cs[:, -1]):
            cand[r, :m] = ranking_order(block[r][None, :], tb)[0, :m]
    cand = cand[:, :m]
    return cand, labels_of(cand)


def shapley_streamed(
    queries: np.ndarray,
    documents: np.ndarray,
    judged: Judged,
    k: int,
    tiebreak: np.ndarray,
    *,
    block: int = 32,
    progress: Callable[[int, int], None] | None = None,
) -> StreamedValues:
    """Exact values of every document, mean over queries, for scores = queries @ documents.T, in query blocks.

    Memory: the documents, plus a (block, N) score block and, for the judged pairs of the block, a (pairs, N)
    copy of their queries' score rows and a (pairs, N) boolean mask at a time.
    """
    q, n = len(queries), len(documents)
    if documents.ndim != 2 or queries.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise InputError(f"queries {queries.shape} and documents {documents.shape} must share their dimension")
    if k < 1 or judged.denominators.shape != (q,) or np.any(judged.denominators <= 0):
        raise InputError("k must be at least 1 and every query needs a positive denominator")
    tb = np.asarray(tiebreak)
    shap = np.zeros(n)
    loo = np.zeros(n)
    util = np.zeros(q)
    positions = np.zeros(len(judged.query), dtype=np.int64)
    pair_scores = np.zeros(len(judged.query))
    by_query = np.argsort(judged.query, kind="stable")
    starts = np.searchsorted(judged.query[by_query], np.arange(q + 1))
    for b0 in range(0, q, block):
        b1 = min(q, b0 + block)
        scores = queries[b0:b1] @ documents.T
        if not np.all(np.isfinite(scores)):
            raise InputError("scores must be finite (a NaN or infinite embedding)")
        pairs = by_query[starts[b0] : starts[b1]]
        qp, dp, yp = judged.query[pairs], judged.doc[pairs], judged.label[pairs]
        zp = judged.denominators[qp]
        rows = scores[qp - b0]
        t = rows[np.arange(len(pairs)), dp]
        above = _beats(rows, t, dp, tb)
        pos = np.count_nonzero(above, axis=1) + 1
        positions[pairs], pair_scores[pairs] = pos, t
        np.add.at(shap, dp, yp * np.minimum(k, pos) / pos / zp)
        below = pos > k  # only a judged document ranked below K charges the documents above it
        charge = np.zeros(len(pairs))
        charge[below] = k * yp[below] / (pos[below] * (pos[below] - 1.0)) / zp[below]
        for p in np.flatnonzero(charge):
            np.subtract(shap, charge[p], out=shap, where=above[p])
        np.add.at(util, qp, np.where(pos <= k, yp, 0.0) / zp)
        lab = {(int(a), int(d)): float(y) for a, d, y in zip(qp, dp, yp, strict=True)}

        def labels_of(cand: np.ndarray, b0: int = b0, lab: dict = lab) -> np.ndarray:
            return np.array(
                [[lab.get((b0 + r, int(d)), 0.0) for d in row] for r, row in enumerate(cand)], dtype=np.float64
            ).reshape(cand.shape)

        top, ytop = _top_labels(scores, labels_of, k, tb)
        kk = min(k, n)
        after = ytop[:, k] if n > k else np.zeros(len(top))
        z = judged.denominators[b0:b1, None]
        np.add.at(loo, top[:, :kk], (ytop[:, :kk] - after[:, None]) / z)
        if progress is not None:
            progress(b1, q)
    return StreamedValues(shap / q, loo / q, util, positions, pair_scores)


@dataclass(frozen=True)
class Displaced:
    """A judged document of a query that `doc` ranks above while it sits below the top K."""

    query: int
    doc: int
    position: int  # 1-based, in the whole corpus's ranking


def charges(
    doc: int, doc_scores: np.ndarray, judged: Judged, values: StreamedValues, k: int, tiebreak: np.ndarray
) -> tuple[np.ndarray, list[Displaced]]:
    """Where a document's value comes from: its (Q,) per-query Shapley values, and the judged documents below the
    top K that it outranks (what it crowds out), from its scores (Q,) and the judged pairs' positions."""
    q = len(judged.denominators)
    per_query = np.zeros(q)
    mine = judged.doc == doc
    pos_of_doc = np.zeros(q, dtype=np.int64)  # 0: not judged for that query
    pos_of_doc[judged.query[mine]] = values.positions[mine]
    y = judged.label
    z = judged.denominators[judged.query]
    s_self = doc_scores[judged.query]
    above = (s_self > values.pair_scores) | ((s_self == values.pair_scores) & (tiebreak[doc] > tiebreak[judged.doc]))
    crowd = above & (values.positions > k) & ~mine
    np.add.at(
        per_query,
        judged.query[crowd],
        -k * y[crowd] / (values.positions[crowd] * (values.positions[crowd] - 1.0)) / z[crowd],
    )
    own = np.flatnonzero(mine)
    pos = values.positions[own]
    np.add.at(per_query, judged.query[own], y[own] * np.minimum(k, pos) / pos / z[own])
    out = [Displaced(int(judged.query[p]), int(judged.doc[p]), int(values.positions[p])) for p in np.flatnonzero(crowd)]
    return per_query, sorted(out, key=lambda d: (d.query, d.position))
