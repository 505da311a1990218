"""Seeded Monte-Carlo permutation estimate of document Shapley values, for any retriever and top-K utility.

What a coalition's utility is. A retriever ranks the whole corpus once per query (a full-depth run, or the
scores of every document); the ranking of a coalition S is that ranking with the documents outside S left out,
and U_q(S) is a top-K metric of the first K documents of S. For flat dense retrieval this is exactly retrieval
from S (the exact values of `values.exact` are the same quantity). For BM25 it holds the collection statistics
(IDF, average length) at their full-corpus values, and for hybrid fusion the normalisation of each list: the
estimate values a document's place in the ranking, not its effect on those statistics. A document missing from
a truncated run ranks below every returned one (ties by id descending), as retrieval at that depth implies.

The estimator (Castro et al. 2009; Ghorbani & Zou 2019, "Data Shapley"): draw permutations of the documents;
adding them one by one, a document's marginal contribution is U(before + d) - U(before), averaged over the
queries. The mean over permutations is unbiased; the standard error is the standard deviation over permutations
divided by sqrt(permutations). Only a document that enters a query's current top K changes its utility, so each
step touches the (permutation, query) pairs it enters; permutations run in batches as one array.

Utilities (gains g of the top K in rank order, missing positions 0): precision@K = sum g_bin / K, recall@K =
sum g_bin / R, nDCG@K = sum g / log2(rank + 1) / IDCG@K (linear gains, trec_eval's ndcg_cut).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from retbench.errors import InputError

#: (gains of the top K in rank order (M, K), query rows (M,)) -> utility (M,)
UtilityFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Utility:
    """A top-K utility of a coalition's ranking, per query."""

    name: str
    k: int
    fn: UtilityFn

    def __call__(self, gains: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self.fn(gains, rows)


def precision_at(k: int, level: float = 1.0) -> Utility:
    return Utility(f"precision@{k}", k, lambda g, rows: (g >= level).sum(axis=1) / k)


def recall_at(k: int, n_relevant: np.ndarray, level: float = 1.0) -> Utility:
    r = np.asarray(n_relevant, dtype=np.float64)
    if np.any(r <= 0):
        raise InputError("recall needs at least one relevant document per query")
    return Utility(f"recall@{k}", k, lambda g, rows: (g >= level).sum(axis=1) / r[rows])


def ndcg_at(k: int, ideal_gains: list[np.ndarray]) -> Utility:
    """nDCG@K with linear gains; `ideal_gains[q]` are the query's judged positive grades (any order)."""
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    idcg = np.array([np.sort(np.asarray(g, float))[::-1][:k] @ disc[: min(k, len(g))] for g in ideal_gains])
    if np.any(idcg <= 0):
        raise InputError("nDCG needs a relevant document per query")
    return Utility(f"ndcg@{k}", k, lambda g, rows: (g @ disc) / idcg[rows])


@dataclass
class Estimate:
    """Per-document mean value over the queries, its standard error, and how many permutations made it."""

    values: np.ndarray
    stderr: np.ndarray
    permutations: int
    seed: int
    utility: str


def ranks_from_order(order: np.ndarray) -> np.ndarray:
    """(Q, N) position of each document (0 = first) from (Q, N) document indices in rank order."""
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(order.shape[1])[None, :].repeat(len(order), 0), axis=1)
    return ranks


def permutation_shapley(
    ranks: np.ndarray,
    gains: np.ndarray,
    utility: Utility,
    *,
    permutations: int = 200,
    seed: int = 0,
    batch: int = 32,
    progress: Callable[[int, int], None] | None = None,
) -> Estimate:
    """Monte-Carlo Shapley values from `ranks` (Q, N: each document's position per query, a permutation of
    0..N-1 per row) and `gains` (Q, N: each document's judged grade per query)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    q, n = ranks.shape
    if gains.shape != ranks.shape:
        raise InputError(f"gains {gains.shape} must match ranks {ranks.shape}")
    if permutations < 2:
        raise InputError("at least 2 permutations are needed for a standard error")
    k = utility.k
    by_pos = np.zeros((q, n + 1))  # gain of the document at each position; position n: nobody, gain 0
    np.put_along_axis(by_pos, ranks, np.asarray(gains, dtype=np.float64), axis=1)
    rng = np.random.default_rng(seed)
    total = np.zeros(n)
    total_sq = np.zeros(n)
    done = 0
    while done < permutations:
        b = min(batch, permutations - done)
        perms = np.argsort(rng.random((b, n)), axis=1)
        top = np.full((b, q, k), n, dtype=np.int64)  # each coalition's top-K positions, ascending; n = empty
        current = np.zeros((b, q))
        phi = np.zeros((b, n))
        for t in range(n):
            d = perms[:, t]
            pos = ranks[:, d].T  # (b, q)
            bi, qi = np.nonzero(pos < top[:, :, k - 1])
            if not len(bi):
                continue
            rows = np.concatenate([top[bi, qi], pos[bi, qi][:, None]], axis=1)
            rows.sort(axis=1)
            rows = rows[:, :k]
            top[bi, qi] = rows
            u = utility(by_pos[qi[:, None], rows], qi)
            np.add.at(phi, (bi, d[bi]), (u - current[bi, qi]) / q)
            current[bi, qi] = u
        total += phi.sum(axis=0)
        total_sq += (phi**2).sum(axis=0)
        done += b
        if progress is not None:
            progress(done, permutations)
    mean = total / done
    var = np.maximum(total_sq / done - mean**2, 0.0) * done / (done - 1)
    return Estimate(mean, np.sqrt(var / done), done, seed, utility.name)


def leave_one_out_ranked(ranks: np.ndarray, gains: np.ndarray, utility: Utility) -> np.ndarray:
    """(N,) mean over queries of U(all) - U(all without d), from the same `ranks` and `gains` (only the top K + 1
    of each query can change: removing a document from the top K lets the next one in)."""
    q, n = ranks.shape
    k = utility.k
    m = min(n, k + 1)
    order = np.argsort(ranks, axis=1)[:, :m]
    rows = np.arange(q)
    g = np.zeros((q, k + 1))
    g[:, :m] = np.take_along_axis(np.asarray(gains, dtype=np.float64), order, axis=1)
    full = utility(g[:, :k], rows)
    out = np.zeros(n)
    for i in range(min(k, n)):
        without = np.delete(g, i, axis=1)
        np.add.at(out, order[:, i], full - utility(without, rows))
    return out / q
