"""RBO's bounds (RBO_min, RBO_max, the residual) against the `rbo` package, and RBO against the worked figures of
Webber, Moffat and Zobel, "A similarity measure for indefinite rankings" (TOIS 2010).

The `rbo` package has no bound functions, but it computes RBO's prefix sum (1 - p) Σ_{d≤D} A_d p^(d-1) over two
lists of any depth D (its `rbo(p=...)`, the paper's eq. 7). The bounds are RBO itself on two particular
continuations of the top k, so the package checks them: RBO_min is the continuation in which nothing unseen ever
matches (after depth D the overlap stays X_D, so the rest of the sum is (1-p)/p X_D Σ_{d>D} p^d/d, exact in
closed form), RBO_max the one in which every unseen item matches as early as it can (each list next takes the
other's unmatched items, then both take the same new ones: from depth s + l on the agreement is 1, so the rest
is p^D).

From the paper: its Figure 5 pair S = <a b c d e f g>, T = <z c a v w x y> (overlap X_d = 0, 0, 2, 2, 2, 2, 2 by
depth, worked by hand), with RBO_EXT by eq. 30, RBO_min by eq. 11 as the paper writes it, and RBO_max from
f = 2k - X_k, the depth by which the maximum continuation agrees fully; and eq. 21, the weight of the first d
ranks, which the paper quotes as 86% for p = 0.9, d = 10 (and p = 0.98, d = 50): it is RBO_min of two lists that
agree on their first d ranks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.metrics.overlap import overlap_measures

rbo = pytest.importorskip("rbo", reason="the rbo package is not installed (scripts/setup.sh installs it)")


def _measures(s: list[int], t: list[int], p: float) -> dict[str, float]:
    k = max(len(s), len(t), 1)
    a = np.full((1, k), -1, dtype=np.int64)
    b = np.full((1, k), -1, dtype=np.int64)
    a[0, : len(s)], b[0, : len(t)] = s, t
    return {n: float(v[0]) for n, v in overlap_measures(a, b, p).items()}


def _prefix_rbo(s: list[int], t: list[int], p: float) -> float:
    """The package's RBO over the whole of two equally long lists (no extrapolation)."""
    assert len(s) == len(t)
    return float(rbo.RankingSimilarity(s, t).rbo(p=p))


def _cases(n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 13))
        vocab = int(rng.integers(k, 3 * k + 2))
        la, lb = int(rng.integers(1, k + 1)), int(rng.integers(1, k + 1))
        out.append((rng.permutation(vocab)[:la].tolist(), rng.permutation(vocab)[:lb].tolist()))
    return out


@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
def test_rbo_min_is_the_packages_rbo_of_the_continuation_where_nothing_more_matches(p: float) -> None:
    for s, t in _cases(150, 11):
        depth = len(s) + len(t) + 5
        fresh_s = [10_000 + i for i in range(depth - len(s))]
        fresh_t = [20_000 + i for i in range(depth - len(t))]
        cs, ct = s + fresh_s, t + fresh_t
        x_depth = len(set(cs) & set(ct))
        rest = (1 - p) / p * x_depth * (-math.log1p(-p) - sum(p**d / d for d in range(1, depth + 1)))
        assert _measures(s, t, p)["rbo_min"] == pytest.approx(_prefix_rbo(cs, ct, p) + rest, abs=1e-12)


@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
def test_rbo_max_is_the_packages_rbo_of_the_continuation_that_matches_as_early_as_it_can(p: float) -> None:
    for s, t in _cases(150, 12):
        fresh = [30_000 + i for i in range(5)]
        cs = s + [u for u in t if u not in s] + fresh
        ct = t + [u for u in s if u not in t] + fresh
        depth = len(cs)  # >= s + l: both lists agree fully from here on, so the rest of the sum is p^depth
        m = _measures(s, t, p)
        assert m["rbo_max"] == pytest.approx(_prefix_rbo(cs, ct, p) + p**depth, abs=1e-12)
        assert m["rbo_res"] == pytest.approx(m["rbo_max"] - m["rbo_min"], abs=1e-15)


def test_the_papers_figure_5_pair_worked_by_hand() -> None:
    s, t = list("abcdefg"), list("zcavwxy")
    codes = {c: i for i, c in enumerate(dict.fromkeys(s + t))}
    x = [0, 0, 2, 2, 2, 2, 2]  # |S:d ∩ T:d|: {a, c} are shared from depth 3 on
    k, xk = 7, 2
    for p in (0.5, 0.9, 0.98):
        got = _measures([codes[c] for c in s], [codes[c] for c in t], p)
        seen = sum(x[d - 1] / d * p**d for d in range(1, k + 1))
        # eq. 30 (equal lengths): RBO_EXT = X_k/k p^k + (1-p)/p Σ_{d≤k} X_d/d p^d
        assert got["rbo_ext"] == pytest.approx(xk / k * p**k + (1 - p) / p * seen, abs=1e-12)
        # eq. 11: RBO_min = (1-p)/p (Σ_{d≤k} (X_d - X_k)/d p^d - X_k ln(1-p))
        eq11 = (1 - p) / p * (sum((x[d - 1] - xk) / d * p**d for d in range(1, k + 1)) - xk * math.log(1 - p))
        assert got["rbo_min"] == pytest.approx(eq11, abs=1e-12)
        # maximum: from depth k each list can take two more shared items a rank (one of the other's, and one
        # new item both take), full agreement from f = 2k - X_k = 12; the rest of the sum is then p^f
        f = 2 * k - xk
        deeper = sum(min(d, xk + 2 * (d - k)) / d * p**d for d in range(k + 1, f + 1))
        assert got["rbo_max"] == pytest.approx((1 - p) / p * (seen + deeper) + p**f, abs=1e-12)
        # the package's extrapolation of the same pair
        assert got["rbo_ext"] == pytest.approx(rbo.RankingSimilarity(s, t).rbo_ext(p=p), abs=1e-12)


@pytest.mark.parametrize(("p", "d"), [(0.9, 10), (0.98, 50), (0.5, 3), (0.8, 7)])
def test_eq_21_weight_of_the_first_d_ranks_is_rbo_min_of_lists_agreeing_there(p: float, d: int) -> None:
    same = list(range(d))
    got = _measures(same, same, p)["rbo_min"]
    # eq. 21: W(1:d) = 1 - p^(d-1) + (1-p)/p d (ln(1/(1-p)) - Σ_{i<d} p^i/i)
    eq21 = 1 - p ** (d - 1) + (1 - p) / p * d * (math.log(1 / (1 - p)) - sum(p**i / i for i in range(1, d)))
    assert got == pytest.approx(eq21, abs=1e-12)
    assert got == pytest.approx(float(rbo.RankingSimilarity(same, same).top_weightness(p=p, d=d)), abs=1e-12)
    if (p, d) in ((0.9, 10), (0.98, 50)):
        assert got == pytest.approx(0.86, abs=0.01)  # the paper: "about 86%" of the weight (0.856 and 0.852)
