"""Label-free measures between two runs: how much the top k of each query moves, with no judgements.

Each measure is a vectorized function over two aligned code matrices `a`, `b` of shape [queries, k]
(`top_k_codes`): row q holds the first k doc ids of query q in each run as integer codes in rank order,
-1 padding a ranking shorter than k. Codes are shared by both runs, so equal codes mean equal doc ids.
With S = a's list (length s) and L = b's (length l), X_d is the overlap |S:d ∩ L:d| of the first d of each,
and A_d = X_d / d the agreement at depth d.

- overlap@k = X_k / k; Jaccard@k = X_k / |S ∪ L| (1 when both are empty).
- changed (as a set): the two top-k sets differ; changed (as an order): the two lists differ (order or length).
- Rank-biased overlap (Webber, Moffat and Zobel, "A similarity measure for indefinite rankings",
  TOIS 2010), RBO = (1 - p) Σ_d A_d p^(d-1), with the persistence p in (0, 1) (p = 0.9 puts 86% of the
  weight on the first 10 ranks). The top k is a prefix of longer rankings, so RBO itself is bounded:
  * RBO_min (their eq. 11, read for lists of unequal length): no unseen item ever matches,
    (1-p)/p [Σ_{d≤l} X_d/d p^d + X_l (-ln(1-p) - Σ_{d≤l} p^d/d)];
  * RBO_max: every unseen item matches as early as it can. At depth d the most overlap possible is
    min(d, X_d + (d-s)⁺ + (d-l)⁺) (the unseen slots of either list may pair with any unmatched item of the
    other, or with each other), reaching d by depth s + l, so
    RBO_max = (1-p)/p Σ_{d≤s+l} Xmax_d/d p^d + p^(s+l);
  * the residual RBO_max - RBO_min (their RBO_RES read against RBO_min): how much the unseen tail could add;
  * RBO_EXT (their eq. 32): the agreement seen at the deepest rank extrapolated to infinity,
    (1-p)/p [Σ_{d≤l} X_d/d p^d + Σ_{s<d≤l} X_s (d-s)/(s d) p^d] + ((X_l - X_s)/l + X_s/s) p^l, with s ≤ l
    the shorter and longer list. RBO_min ≤ RBO_EXT ≤ RBO_max.
  Two empty rankings have RBO 1 (identical), one empty and one not RBO_EXT 0 (as the `rbo` package).
- Kendall's tau (tau-b) and Spearman's rho on the union of the two top-k lists: an item that is in one
  list only takes, in the other, the rank after that list's last (its length + 1), every such item tied
  there (Fagin, Kumar and Sivakumar, "Comparing top k lists", 2003, location parameter l = k + 1).
  Tau-b corrects for those ties: Σ sign(Δx) sign(Δy) / sqrt(untied-in-x pairs · untied-in-y pairs);
  rho is Pearson's correlation of the mid-ranks. These are SciPy's `kendalltau` (variant b) and
  `spearmanr` on those two rank vectors. Fewer than 2 items in the union, or no spread on one side,
  leaves them undefined (NaN).

Every function returns one float64 per row; the work is arrays over all rows at once (memory is bounded by
processing rows in blocks), never a loop over queries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retbench.data.lazy_ids import intern_ids
from retbench.data.run import Run
from retbench.errors import InputError

#: the measures `overlap_measures` returns, in report order, and whether a higher value means less movement
MEASURES: dict[str, str] = {
    "rbo_ext": "rank-biased overlap, extrapolated (RBO_EXT)",
    "rbo_min": "rank-biased overlap, lower bound (nothing unseen matches)",
    "rbo_max": "rank-biased overlap, upper bound (everything unseen matches)",
    "rbo_res": "RBO residual (RBO_max - RBO_min): what the unseen tail could add",
    "overlap": "overlap@k: shared docs / k",
    "jaccard": "Jaccard@k: shared docs / docs in either top k",
    "kendall": "Kendall's tau-b on the union of the two top k",
    "spearman": "Spearman's rho on the union of the two top k",
    "changed_set": "top k changed as a set (1) or not (0)",
    "changed_order": "top k changed as an order (1) or not (0)",
}
#: measures where a higher value means more movement
MORE_IS_MOVEMENT = frozenset({"rbo_res", "changed_set", "changed_order"})

_BLOCK_CELLS = 4_000_000  # rows per block in the pairwise (tau) step: rows * (2k)^2 cells at most


def check_p(p: object) -> float:
    """RBO's persistence, refused outside (0, 1)."""
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 < float(p) < 1.0:
        raise InputError(f"RBO's p must lie strictly between 0 and 1, got {p!r}")
    return float(p)


def check_k(k: object) -> int:
    """A cutoff: a positive integer."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return k


@dataclass(frozen=True)
class TopK:
    """Two runs' top k of the same queries as shared integer codes (-1: no document at that rank)."""

    query_ids: list[str]
    a: np.ndarray  # [queries, k] int64
    b: np.ndarray
    vocab: np.ndarray  # object array: the doc id of each code

    @property
    def k(self) -> int:
        return int(self.a.shape[1])

    def docs(self, side: str, row: int) -> list[str]:
        """The doc ids of one row of one side ("a" or "b"), rank 1 first."""
        codes = (self.a if side == "a" else self.b)[row]
        return self.vocab[codes[codes >= 0]].tolist()


def _top_codes(run: Run, query_ids: Sequence[str], k: int, skip: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """(positions [n, k] into run.doc_ids, valid mask) of each query's first k docs; a query the run lacks,
    or one in `skip` (failed), has none."""
    rows = run.rows(query_ids)
    if skip:
        rows = np.where(np.isin(np.asarray(query_ids, dtype=object), list(skip)), -1, rows)
    safe = np.maximum(rows, 0)
    start = run.offsets[:-1][safe] if len(run) else np.zeros(len(rows), dtype=np.int64)
    length = np.diff(run.offsets)[safe] if len(run) else np.zeros(len(rows), dtype=np.int64)
    length = np.where(rows >= 0, np.minimum(length, k), 0)
    ranks = np.arange(k, dtype=np.int64)
    valid = ranks[None, :] < length[:, None]
    pos = np.where(valid, start[:, None] + ranks[None, :], 0)
    return pos, valid


def top_k_codes(run_a: Run, run_b: Run, query_ids: Sequence[str], k: int) -> TopK:
    """Both runs' first k docs of each query in `query_ids` as shared codes.

    A query one run lacks, or whose status there is a failure (error, timeout, invalid), is an empty ranking
    on that side: missing is not good, so it counts as moved, never as unchanged."""
    k = check_k(k)
    qids = list(query_ids)
    parts = []
    for run in (run_a, run_b):
        pos, valid = _top_codes(run, qids, k, set(run.failed()))
        ids = run.doc_ids[pos[valid]] if valid.any() else np.zeros(0, dtype=object)
        parts.append((valid, ids))
    vocab, codes = intern_ids(np.concatenate([parts[0][1], parts[1][1]]))
    out = []
    cut = len(parts[0][1])
    for (valid, _), chunk in zip(parts, (codes[:cut], codes[cut:]), strict=True):
        m = np.full(valid.shape, -1, dtype=np.int64)
        m[valid] = chunk
        out.append(m)
    return TopK(qids, out[0], out[1], vocab)


def _rank_in(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """For each item of x, its 0-based rank in the same row of y (-1: absent), by one sort of y's keys."""
    n, k = x.shape
    if x.size == 0:
        return np.full(x.shape, -1, dtype=np.int64)
    width = int(max(x.max(), y.max())) + 2
    rows = np.arange(n, dtype=np.int64)[:, None] * width
    ky = np.where(y >= 0, rows + y, -1).ravel()
    kx = np.where(x >= 0, rows + x, -2).ravel()
    order = np.argsort(ky, kind="stable")
    sy = ky[order]
    at = np.minimum(np.searchsorted(sy, kx), len(sy) - 1)
    hit = sy[at] == kx
    return np.where(hit, order[at] % k, -1).reshape(n, k)


def _overlap_by_depth(rank_b_of_a: np.ndarray, depth: int) -> np.ndarray:
    """X_d for d = 1..depth: a shared doc at ranks i (a) and j (b) counts from depth max(i, j) + 1 on."""
    n, k = rank_b_of_a.shape
    i = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k))
    found = rank_b_of_a >= 0
    at = np.maximum(i, rank_b_of_a)[found]
    row = np.broadcast_to(np.arange(n, dtype=np.int64)[:, None], (n, k))[found]
    hist = np.bincount(row * depth + at, minlength=n * depth).reshape(n, depth)
    return np.cumsum(hist, axis=1).astype(np.float64)


def _rbo(x: np.ndarray, la: np.ndarray, lb: np.ndarray, p: float) -> dict[str, np.ndarray]:
    """RBO_EXT, RBO_min and RBO_max from the overlap X_d at depths 1..2k (see the module docstring)."""
    n, depth = x.shape
    d = np.arange(1, depth + 1, dtype=np.float64)
    pd = p**d
    sh, lg = np.minimum(la, lb), np.maximum(la, lb)
    upto_l = d[None, :] <= lg[:, None]
    seen = np.where(upto_l, x / d * pd, 0.0).sum(axis=1)
    rows = np.arange(n)
    x_s = np.where(sh > 0, x[rows, np.maximum(sh - 1, 0)], 0.0)
    x_l = np.where(lg > 0, x[rows, np.maximum(lg - 1, 0)], 0.0)
    c = (1 - p) / p
    with np.errstate(divide="ignore", invalid="ignore"):
        between = upto_l & (d[None, :] > sh[:, None])
        tail_s = np.where(between, x_s[:, None] * (d - sh[:, None]) / (sh[:, None] * d), 0.0)
        tail_s = np.where(between, tail_s * pd, 0.0).sum(axis=1)
        ext = c * (seen + tail_s) + ((x_l - x_s) / lg + x_s / sh) * p**lg
    harmonic = np.cumsum(pd / d)  # Σ_{d'≤d} p^d'/d'
    beyond_l = -math.log1p(-p) - np.where(lg > 0, harmonic[np.maximum(lg - 1, 0)], 0.0)
    rbo_min = c * (seen + x_l * beyond_l)
    spare = np.maximum(d[None, :] - la[:, None], 0) + np.maximum(d[None, :] - lb[:, None], 0)
    xmax = np.minimum(d[None, :], x + spare)
    full = la + lb
    rbo_max = c * np.where(d[None, :] <= full[:, None], xmax / d * pd, 0.0).sum(axis=1) + p ** full.astype(np.float64)
    both_empty, one_empty = full == 0, (sh == 0) & (lg > 0)
    ext = np.where(both_empty, 1.0, np.where(one_empty, 0.0, ext))
    rbo_min = np.where(both_empty, 1.0, rbo_min)
    rbo_max = np.where(both_empty, 1.0, rbo_max)
    return {"rbo_ext": ext, "rbo_min": rbo_min, "rbo_max": rbo_max, "rbo_res": rbo_max - rbo_min}


def _union_ranks(a: np.ndarray, b: np.ndarray, rank_b_of_a: np.ndarray, rank_a_of_b: np.ndarray) -> tuple:
    """Rank vectors over the union of each row's two lists ([n, 2k]: a's items, then b's items not in a),
    an item missing from a list ranked at that list's length + 1; and the mask of slots in use."""
    n, k = a.shape
    la, lb = (a >= 0).sum(axis=1), (b >= 0).sum(axis=1)
    r = np.arange(1, k + 1, dtype=np.float64)
    va, vb_only = a >= 0, (b >= 0) & (rank_a_of_b < 0)
    xa = np.where(va, r, np.nan)
    ya = np.where(rank_b_of_a >= 0, rank_b_of_a + 1.0, lb[:, None] + 1.0)
    xb = np.broadcast_to(la[:, None] + 1.0, (n, k))
    yb = np.broadcast_to(r, (n, k))
    x = np.concatenate([xa, xb], axis=1)
    y = np.concatenate([ya, yb], axis=1)
    mask = np.concatenate([va, vb_only], axis=1)
    return x, y, mask


def _kendall(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Tau-b per row over the masked slots (pairs counted twice in numerator and denominator alike)."""
    n, w = x.shape
    out = np.empty(n, dtype=np.float64)
    step = max(1, _BLOCK_CELLS // max(w * w, 1))
    for lo in range(0, n, step):
        sl = slice(lo, lo + step)
        m = mask[sl][:, :, None] & mask[sl][:, None, :]
        sx = np.where(m, np.sign(x[sl][:, :, None] - x[sl][:, None, :]), 0.0)
        sy = np.where(m, np.sign(y[sl][:, :, None] - y[sl][:, None, :]), 0.0)
        num = (sx * sy).sum(axis=(1, 2))
        den = np.sqrt(np.abs(sx).sum(axis=(1, 2)) * np.abs(sy).sum(axis=(1, 2)))
        with np.errstate(divide="ignore", invalid="ignore"):
            out[sl] = np.where(den > 0, num / den, np.nan)
    return out


def _spearman(x: np.ndarray, y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Pearson's correlation of mid-ranks per row: the items tied at length + 1 share their mean rank."""

    def midranks(v: np.ndarray) -> np.ndarray:
        top = np.where(mask, v, -np.inf).max(axis=1, keepdims=True)  # the tied rank (length + 1) or a rank
        tied = mask & (v == top)
        n_tied = tied.sum(axis=1, keepdims=True)
        # only the value length + 1 is ever shared; a single item there keeps its rank
        return np.where(tied & (n_tied > 1), top + (n_tied - 1) / 2.0, v)

    mx, my = midranks(x), midranks(y)
    cnt = mask.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cx = np.where(mask, mx - np.where(mask, mx, 0).sum(axis=1, keepdims=True) / cnt[:, None], 0.0)
        cy = np.where(mask, my - np.where(mask, my, 0).sum(axis=1, keepdims=True) / cnt[:, None], 0.0)
        den = np.sqrt((cx * cx).sum(axis=1) * (cy * cy).sum(axis=1))
        return np.where((cnt >= 2) & (den > 1e-12), (cx * cy).sum(axis=1) / den, np.nan)


def overlap_measures(a: np.ndarray, b: np.ndarray, p: float = 0.9) -> dict[str, np.ndarray]:
    """Every measure of `MEASURES` per row of two aligned [queries, k] code matrices (see the module docstring)."""
    p = check_p(p)
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 2:
        raise InputError(f"the two top-k matrices must have one shape, got {a.shape} and {b.shape}")
    n, k = a.shape
    la, lb = (a >= 0).sum(axis=1), (b >= 0).sum(axis=1)
    rba, rab = _rank_in(a, b), _rank_in(b, a)
    x = _overlap_by_depth(rba, 2 * k) if k else np.zeros((n, 0))
    xk = x[:, k - 1] if k else np.zeros(n)
    union = la + lb - xk
    out = _rbo(x, la, lb, p)
    out["overlap"] = xk / k
    with np.errstate(divide="ignore", invalid="ignore"):
        out["jaccard"] = np.where(union > 0, xk / union, 1.0)
    ux, uy, mask = _union_ranks(a, b, rba, rab)
    out["kendall"] = _kendall(ux, uy, mask)
    out["spearman"] = _spearman(ux, uy, mask)
    out["changed_set"] = ((xk != la) | (xk != lb)).astype(np.float64)
    out["changed_order"] = (a != b).any(axis=1).astype(np.float64)
    return {name: out[name] for name in MEASURES}
