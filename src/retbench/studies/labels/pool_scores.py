"""Per-query metric values of every system from grades of the pooled pairs, as arrays.

A study's pool holds every document any system ranked in its top k, so nDCG@k and P@k of each system need
only the pool's grades: with G[q, p] the grade of pair p of query q and R[s, q, p] its 1-based rank in
system s (0 when outside the top k),

    DCG[s, q] = Σ_p G[q, p] / log2(R[s, q, p] + 1) over R ≤ k,   IDCG[q] = the same for the pool's grades sorted,
    nDCG = DCG / IDCG (0 when IDCG = 0),   P@k = #{R ≤ k, G ≥ 1} / k,

trec_eval's linear-gain ndcg_cut and P with one deliberate difference: the ideal ranking is made of the
pool's judged documents (those are all a study labels), and a query with no relevant pooled document
scores 0 for every system instead of being skipped (a logged query counts, whatever its labels).
Kept as arrays so the judge's uncertainty can be simulated by drawing whole grade matrices at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retbench.errors import InputError


@dataclass
class PoolArrays:
    """The pool as padded arrays: Q queries, at most P pairs each, S systems."""

    qids: list[str]
    pair_ids: np.ndarray  # (Q, P) int, -1 for padding
    ranks: np.ndarray  # (S, Q, P) int, 0 = not in that system's top k
    family: str  # "ndcg" or "P"
    cut: int

    @property
    def mask(self) -> np.ndarray:
        return self.pair_ids >= 0

    def gather(self, by_pair: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """A per-pair array (indexed by pair_id) laid out as (Q, P), padding = `fill`."""
        return np.where(self.mask, by_pair[np.maximum(self.pair_ids, 0)], fill)


def pool_arrays(pairs: list[dict], systems: list[str], family: str, cut: int) -> PoolArrays:
    """Lay out a study's pairs (pair_id order) by query, first appearance order."""
    if family not in ("ndcg", "P"):
        raise InputError(f"a label study scores nDCG@k or P@k (got {family!r})", field="metric")
    by_q: dict[str, list[dict]] = {}
    for p in pairs:
        by_q.setdefault(p["qid"], []).append(p)
    width = max(len(v) for v in by_q.values())
    pair_ids = np.full((len(by_q), width), -1, dtype=np.int64)
    ranks = np.zeros((len(systems), len(by_q), width), dtype=np.int64)
    for i, rows in enumerate(by_q.values()):
        for j, p in enumerate(rows):
            pair_ids[i, j] = p["pair_id"]
            for s, name in enumerate(systems):
                ranks[s, i, j] = int(p["pooled_by"].get(name, 0) or 0)
    ranks[ranks > cut] = 0
    return PoolArrays(list(by_q), pair_ids, ranks, family, cut)


def scores(pool: PoolArrays, grades: np.ndarray) -> np.ndarray:
    """(…, S, Q) metric values for grade matrices of shape (…, Q, P) (padding must hold 0)."""
    g = np.asarray(grades, dtype=np.float64)[..., None, :, :]  # (..., 1, Q, P)
    in_top = pool.ranks > 0
    if pool.family == "P":
        return np.sum((g >= 1) & in_top, axis=-1) / pool.cut
    disc = np.where(in_top, 1.0 / np.log2(np.maximum(pool.ranks, 1) + 1.0), 0.0)
    dcg = np.sum(g * disc, axis=-1)
    top = -np.sort(-g, axis=-1)[..., : pool.cut]
    ideal = np.sum(top / np.log2(np.arange(top.shape[-1]) + 2.0), axis=-1)
    return np.divide(dcg, ideal, out=np.zeros(np.broadcast_shapes(dcg.shape, ideal.shape)), where=ideal > 0)


def target(values: np.ndarray, systems: list[str], decision: dict | None) -> np.ndarray:
    """What the study estimates per query: (…, Q) B − A for a decision, else (…, S, Q) each system's value."""
    if decision:
        a, b = systems.index(decision["a"]), systems.index(decision["b"])
        return values[..., b, :] - values[..., a, :]
    return values


def draw_grades(probs: np.ndarray, scale: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, Q, P) grades drawn pair by pair from (Q, P, G) grade probabilities (rows sum to 1)."""
    cdf = np.cumsum(probs, axis=-1)
    u = rng.uniform(size=(draws, *probs.shape[:-1], 1))
    idx = np.minimum(np.sum(u > cdf, axis=-1), scale.size - 1)
    return scale[idx]


def uncertainty(
    pool: PoolArrays,
    predicted: np.ndarray,
    probs: np.ndarray,
    scale: np.ndarray,
    systems: list[str],
    decision: dict | None,
    draws: int = 200,
    seed: int = 0,
) -> np.ndarray:
    """u_q = E[(f_q − f̂_q)²] with the true grades drawn from the judge's probabilities and f̂ from `predicted`
    grades: (Q,) for a decision, else (S, Q), one row per system."""
    rng = np.random.default_rng(seed)
    f_hat = target(scores(pool, predicted), systems, decision)
    total = np.zeros(f_hat.shape)
    for start in range(0, draws, 50):  # 50 draws at a time bounds memory on large pools
        g = np.where(pool.mask, draw_grades(probs, scale, min(50, draws - start), rng), 0)
        err = (target(scores(pool, g), systems, decision) - f_hat) ** 2
        total += err.sum(axis=0)
    return total / draws
