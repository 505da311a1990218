"""Rank fusion of one query's rankings: every unsupervised method of `ranx.fuse`, plus retbench's own two.

A fusion takes the rankings one query got from several systems (each a list of (doc id, score) in rank
order) and returns one ranking. It runs in two steps, as in ranx (Bassani and Romelli, CIKM 2022):

1. **Normalise** each system's scores per query (`normalization`):
   - `none`: raw scores (only sensible when the systems share a scale);
   - `minmax`: (s - min) / max(max - min, 1e-9), so all-equal scores give 0 (ranx's `min-max`);
   - `max`: s / max(max, 1e-9);
   - `sum`: (s - min) / max(sum - n * min, 1e-9);
   - `zscore`: (s - mean) / max(std, 1e-9), std over the system's n returned documents (ranx's `zmuv`);
   - `rank`: 1 - (rank - 1) / n;
   - `borda`: over the query's candidates C (every document any system returned), 1 - (rank - 1) / |C| for
     a document the system returned and 0.5 - (n - 1) / (2 |C|) for one it did not.
2. **Combine** the normalised scores of each candidate. With s_i(d) system i's normalised score, w_i its weight,
   R(d) the systems that returned d and r_i(d) its 1-based rank there:
   - `combsum` sum_i s_i(d) (a missing document adds 0) (Fox and Shaw, TREC 1993); `wsum` sum_i w_i s_i(d);
   - `combmnz` |R(d)| * sum_{R(d)} s_i(d); `combanz` the mean over R(d); `combgmnz` sum_{R(d)} s_i(d) * |R(d)|^gamma;
     `combmax`, `combmin`, `combmed` the max, min and median over R(d);
   - `wmnz` sum_{R(d)} s_i(d) * sum_{R(d)} w_i; `mixed` sum_{R(d)} w_i s_i(d) * sqrt(|R(d)|);
   - `rrf` sum_{R(d)} w_i / (rrf_k + r_i(d)), rrf_k = 60 by default (Cormack et al., SIGIR 2009);
   - `isr` |R(d)| * sum_{R(d)} 1 / r_i(d)^2; `log_isr` log |R(d)| * sum_{R(d)} 1 / r_i(d)^2; `logn_isr` the same
     with log(|R(d)| + sigma), sigma = 0.01 (Mourão et al., 2015);
   - `rbc` sum_{R(d)} (1 - phi) phi^(r_i(d) - 1), phi = 0.8 by default (Bailey et al., SIGIR 2017);
   - `borda` sum_i B_i(d) with B_i(d) = |C| - r_i(d) + 1, and (|C| - n_i + 1) / 2 for a document system i did not
     return; `weighted_borda` sum_i w_i B_i(d) (Aslam and Montague, SIGIR 2001);
   - `condorcet` orders the candidates by pairwise majority: d comes before e when more systems rank d above e
     (a returned document is above an unreturned one; two unreturned ones cast no vote); the fused score is
     |C| - position + 1. `weighted_condorcet` counts votes by weight (Montague and Aslam, CIKM 2002). The
     majority relation can have cycles; the order is then that of a stable merge sort over the candidates in
     doc-id order, so it is deterministic, and where the relation is a total order it is that order.
   - `weighted` (retbench's own, kept for its configs): sum_i w_i s_i(d) where a document missing from system i
     gets min(0, system i's lowest normalised score for the query): the lowest z-score under zscore (a missing
     document is not better than the worst returned one), 0 otherwise; it equals `wsum` unless scores go below 0.

Rank-based methods (rrf, isr, log_isr, logn_isr, rbc, borda, weighted_borda, condorcet) read each system's
ranks, so the normalisation does not change them. Scores are compared with `ranx.fuse` in the parity tier
(tests/parity/retrievers/test_fusion_ranx.py). Ranx's supervised methods (probfuse, segfuse, slidefuse,
posfuse, mapfuse, bayesfuse) learn from qrels and are not offered here.

Fused rankings are ordered by fused score, ties by doc id descending (trec_eval's rule), so the cut at k
matches evaluation; ranx leaves ties in an unspecified order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import cmp_to_key
from typing import Any

import numpy as np

from retbench.retrievers.fusion_options import (
    RANK_BASED,
    WEIGHTED,
    canonical_fusion,
    canonical_normalization,
    method_param,
)

Ranking = list[tuple[str, float]]

_EPS = 1e-9


def normalize_scores(scores: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    """One system's scores for one query (in rank order), normalised; `borda` needs `normalize_all`."""
    s = np.asarray(scores, dtype=np.float64)
    method = canonical_normalization(method)
    if len(s) == 0 or method == "none":
        return s.copy()
    if method == "minmax":
        return (s - s.min()) / max(float(s.max() - s.min()), _EPS)
    if method == "max":
        return s / max(float(s.max()), _EPS)
    if method == "sum":
        return (s - s.min()) / max(float(s.sum() - len(s) * s.min()), _EPS)
    if method == "zscore":
        return (s - s.mean()) / max(float(s.std()), _EPS)
    if method == "rank":
        return 1.0 - np.arange(len(s), dtype=np.float64) / len(s)
    raise ValueError("the borda normalisation needs every system's ranking: use normalize_all")


def dedup(ranking: Sequence[tuple[str, float]], depth: int | None = None) -> Ranking:
    """First occurrence of each doc, cut to depth (rank order as given)."""
    seen: set[str] = set()
    out: Ranking = []
    for d, s in ranking:
        d = str(d)
        if d not in seen:
            seen.add(d)
            out.append((d, float(s)))
            if depth is not None and len(out) >= depth:
                break
    return out


def candidates(rankings: Sequence[Ranking]) -> list[str]:
    """Every document any system returned, in first-seen order."""
    return list(dict.fromkeys(d for r in rankings for d, _ in r))


def normalize_all(rankings: Sequence[Ranking], method: str) -> list[dict[str, float]]:
    """Each system's normalised scores (dict in the system's rank order; borda also fills unreturned docs)."""
    method = canonical_normalization(method)
    if method != "borda":
        return [
            dict(zip([d for d, _ in r], normalize_scores([s for _, s in r], method).tolist(), strict=True))
            for r in rankings
        ]
    pool = candidates(rankings)
    if not pool:  # no system returned anything for this query: nothing to rank, an empty fused ranking
        return [{} for _ in rankings]
    out = []
    for r in rankings:
        n = len(r)
        part = {d: 1.0 - i / len(pool) for i, (d, _) in enumerate(r)}
        missing = 0.5 - (n - 1) / (2 * len(pool))
        part.update({d: missing for d in pool if d not in part})
        out.append(part)
    return out


def per_system(value: float | Sequence[Any] | None, n: int, what: str) -> list[Any]:
    """One value per system: a scalar (or None) repeated, or a list of exactly n."""
    if value is None or isinstance(value, (int, float)):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{what} has {len(values)} entries for {n} rankings")
    return values


# -- combining: each takes the normalised parts, the weights and the method parameter ---------------------
Combine = Callable[[list[dict[str, float]], list[float], float], dict[str, float]]


def _present(parts: list[dict[str, float]]) -> dict[str, list[int]]:
    """doc -> the systems that returned it (first-seen doc order)."""
    where: dict[str, list[int]] = {}
    for i, p in enumerate(parts):
        for d in p:
            where.setdefault(d, []).append(i)
    return where


def _over_present(reduce: Callable[[list[float], list[float]], float]) -> Combine:
    """A combination of the scores (and weights) of the systems that returned each document."""

    def combine(parts: list[dict[str, float]], weights: list[float], _: float) -> dict[str, float]:
        return {d: reduce([parts[i][d] for i in idx], [weights[i] for i in idx]) for d, idx in _present(parts).items()}

    return combine


def _gmnz(parts: list[dict[str, float]], weights: list[float], gamma: float) -> dict[str, float]:
    return _over_present(lambda s, _: sum(s) * len(s) ** gamma)(parts, weights, gamma)


def _wsum(parts: list[dict[str, float]], weights: list[float], floor: float) -> dict[str, float]:
    """sum_i w_i s_i(d); a missing document counts as s = 0, or (floor = 1) as min(0, the system's lowest score)."""
    floors = [min(min(p.values(), default=0.0), 0.0) if floor else 0.0 for p in parts]
    docs = _present(parts)
    return {d: sum(w * p.get(d, f) for p, w, f in zip(parts, weights, floors, strict=True)) for d in docs}


def _by_rank(gain: Callable[[int, float], float], reduce: Callable[[list[float], float], float]) -> Combine:
    """A rank-based method: each system gives gain(rank) to a document it returned; reduce combines them."""

    def combine(parts: list[dict[str, float]], weights: list[float], param: float) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for p in parts:
            for rank, d in enumerate(p, start=1):
                per.setdefault(d, []).append(gain(rank, param))
        return {d: reduce(v, param) for d, v in per.items()}

    return combine


def _isr(r: int, _: float) -> float:
    return 1.0 / r**2


def _borda(weighted: bool) -> Combine:
    def combine(parts: list[dict[str, float]], weights: list[float], _: float) -> dict[str, float]:
        pool = candidates([list(p.items()) for p in parts])
        out = dict.fromkeys(pool, 0.0)
        for p, w in zip(parts, weights, strict=True):
            unranked = (len(pool) - len(p) + 1) / 2
            points = {d: float(len(pool) - i) for i, d in enumerate(p)}
            for d in pool:
                out[d] += (w if weighted else 1.0) * points.get(d, unranked)
        return out

    return combine


def _condorcet(weighted: bool) -> Combine:
    def combine(parts: list[dict[str, float]], weights: list[float], _: float) -> dict[str, float]:
        pool = sorted(candidates([list(p.items()) for p in parts]), reverse=True)
        ranks = [{d: i for i, d in enumerate(p)} for p in parts]
        ws = weights if weighted else [1.0] * len(parts)

        def order(x: str, y: str) -> int:
            votes = 0.0
            for r, w in zip(ranks, ws, strict=True):
                rx, ry = r.get(x), r.get(y)
                if rx is None and ry is None:
                    continue
                if ry is None or (rx is not None and rx < ry):
                    votes += w
                else:
                    votes -= w
            return -1 if votes > 0 else (1 if votes < 0 else 0)

        ordered = sorted(pool, key=cmp_to_key(order))
        return {d: float(len(ordered) - i) for i, d in enumerate(ordered)}

    return combine


COMBINE: dict[str, Combine] = {
    "weighted": lambda parts, w, _: _wsum(parts, w, 1.0),
    "wsum": lambda parts, w, _: _wsum(parts, w, 0.0),
    "combsum": _over_present(lambda s, _: sum(s)),
    "combmnz": _over_present(lambda s, _: sum(s) * len(s)),
    "combanz": _over_present(lambda s, _: sum(s) / len(s)),
    "combgmnz": _gmnz,
    "combmax": _over_present(lambda s, _: max(s)),
    "combmin": _over_present(lambda s, _: min(s)),
    "combmed": _over_present(lambda s, _: float(np.median(s))),
    "wmnz": _over_present(lambda s, w: sum(s) * sum(w)),
    "mixed": _over_present(lambda s, w: sum(si * wi for si, wi in zip(s, w, strict=True)) * math.sqrt(len(s))),
    "isr": _by_rank(_isr, lambda v, _: sum(v) * len(v)),
    "log_isr": _by_rank(_isr, lambda v, _: sum(v) * math.log(len(v))),
    "logn_isr": _by_rank(_isr, lambda v, sigma: sum(v) * math.log(len(v) + sigma)),
    "rbc": _by_rank(lambda r, phi: (1 - phi) * phi ** (r - 1), lambda v, _: sum(v)),
    "borda": _borda(weighted=False),
    "weighted_borda": _borda(weighted=True),
    "condorcet": _condorcet(weighted=False),
    "weighted_condorcet": _condorcet(weighted=True),
}


def finish(scores: Mapping[str, float], k: int | None) -> Ranking:
    """Fused scores as a ranking: score descending, ties by doc id descending (trec_eval), cut at k."""
    ranked = sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    return ranked[:k] if k is not None else ranked


def fuse_rrf(
    rankings: Sequence[Sequence[tuple[str, float]]],
    *,
    rrf_k: float = 60,
    weights: Sequence[float] | None = None,
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
) -> Ranking:
    """Reciprocal rank fusion of one query's rankings (each in rank order)."""
    if rrf_k < 0:
        raise ValueError("rrf_k must be >= 0")
    ws = per_system(weights if weights is not None else 1.0, len(rankings), "weights")
    depths = per_system(depth, len(rankings), "depth")
    fused: dict[str, float] = {}
    for ranking, w, dep in zip(rankings, ws, depths, strict=True):
        for rank, (d, _) in enumerate(dedup(ranking, dep), start=1):
            fused[d] = fused.get(d, 0.0) + float(w) / (rrf_k + rank)
    return finish(fused, k)


def fuse(
    rankings: Sequence[Sequence[tuple[str, float]]],
    fusion: str = "rrf",
    *,
    rrf_k: float = 60,
    normalization: str | None = "minmax",
    weights: Sequence[float] | None = None,
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
    param: float | None = None,
) -> Ranking:
    """One query's fusion by name (see the module docstring); `param` is the method's gamma, sigma or phi."""
    method = canonical_fusion(fusion)
    if method == "rrf":
        return fuse_rrf(rankings, rrf_k=rrf_k, weights=weights, depth=depth, k=k)
    ws = [float(w) for w in per_system(weights if weights is not None else 1.0, len(rankings), "weights")]
    if method not in WEIGHTED and any(w != 1.0 for w in ws):
        raise ValueError(f"{method} takes no weights; weighted methods: {', '.join(WEIGHTED)}")
    depths = per_system(depth, len(rankings), "depth")
    cut = [dedup(r, dep) for r, dep in zip(rankings, depths, strict=True)]
    norm = "none" if method in RANK_BASED else canonical_normalization(normalization)
    return finish(COMBINE[method](normalize_all(cut, norm), ws, method_param(method, param)), k)


def fuse_weighted(
    rankings: Sequence[Sequence[tuple[str, float]]],
    *,
    weights: Sequence[float] | None = None,
    normalization: str = "minmax",
    depth: int | Sequence[int | None] | None = None,
    k: int | None = None,
) -> Ranking:
    """retbench's weighted fusion (missing documents at the system's lowest normalised score)."""
    return fuse(rankings, "weighted", weights=weights, normalization=normalization, depth=depth, k=k)


__all__ = [
    "Ranking",
    "dedup",
    "finish",
    "fuse",
    "fuse_rrf",
    "fuse_weighted",
    "normalize_all",
    "normalize_scores",
]
