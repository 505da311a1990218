"""Confidence sequences against a reference written from the papers, and against `fewhumans` on SciFact.

`confseq` 0.0.11 (Waudby-Smith and Howard's package) does not build here: its C++ part needs Boost and pins
a pybind11 that fails on Python 3.11 (`PyFrameObject` is incomplete), and its Python part names `np.float_`,
which NumPy 2 removed. So the betting sequence is checked point by point against `reference_hedged_cs`
below: Waudby-Smith and Ramdas (2024), Theorem 3 with the predictable plug-in bets of eq. (26), written as
plain loops over candidate means and observations, one factor at a time (no shared code with
`retbench.sequential`). benchmarks/RESULTS.md records a one-off check of the same equality against
confseq's own `betting.hedged_cs` source. `fewhumans`' anytime sequence (a union-bound Hoeffding CS, a
different construction) is compared on the same SciFact values: both must hold a common mean at every look.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.sequential import betting_cs, diff_cs


def reference_hedged_cs(
    y: list[float], alpha: float, breaks: int, t_opt: int | None = None, side: str = "both"
) -> tuple[list[float], list[float]]:
    """The hedged-capital CS for y in [0, 1], one candidate mean and one observation at a time.

    Bets: l_i = sqrt(2 log(1/a) / (s2_{i-1} c_i)), c_i = i log(1 + i) (or t_opt), with the regularised
    estimates mu_i = (1/2 + y_1 + ... + y_i) / (i + 1) (capped at 1) and s2_i = (1/4 + sum_{j<=i}
    (y_j - mu_j)^2) / (i + 1), s2_0 = 1/4; a = alpha/2 for each of the two gamblers (alpha one-sided).
    K+ bets min(l_i, 1/(2m)) on y > m, K- bets min(l_i, 1/(2(1-m))) on y < m; m stays while each K < 1/a.
    The grid's extreme kept values are widened by 1/breaks and intersected over time.
    """
    a = alpha / 2 if side == "both" else alpha
    n = len(y)
    bets, total, sq = [], 0.0, 0.0
    s2_prev = 0.25
    for i in range(1, n + 1):
        c = i * math.log(1 + i) if t_opt is None else t_opt
        bets.append(math.sqrt(2 * math.log(1 / a) / (s2_prev * c)))
        total += y[i - 1]
        mu = min((0.5 + total) / (i + 1), 1.0)
        sq += (y[i - 1] - mu) ** 2
        s2_prev = (0.25 + sq) / (i + 1)
    grid = [k / breaks for k in range(breaks + 1)]
    kept: list[list[float]] = [[] for _ in range(n)]
    for m in grid:
        kp = km = 1.0
        for i in range(n):
            up = bets[i] if m == 0 else min(bets[i], 0.5 / m)
            down = bets[i] if m == 1 else min(bets[i], 0.5 / (1 - m))
            kp *= 1 + up * (y[i] - m)
            km *= 1 - down * (y[i] - m)
            ok = (side == "upper" or kp <= 1 / a) and (side == "lower" or km <= 1 / a)
            if ok:
                kept[i].append(m)
    low, high, lo_run, hi_run = [], [], 0.0, 1.0
    for i in range(n):
        lo_i = max(0.0, kept[i][0] - 1 / breaks) if kept[i] and side != "upper" else 0.0
        hi_i = min(1.0, kept[i][-1] + 1 / breaks) if kept[i] and side != "lower" else 1.0
        lo_run, hi_run = max(lo_run, lo_i), min(hi_run, hi_i)
        low.append(lo_run)
        high.append(hi_run)
    return low, high


@pytest.mark.parametrize(
    ("n", "alpha", "t_opt", "side"),
    [
        (1, 0.05, None, "both"),
        (40, 0.05, None, "both"),
        (150, 0.1, None, "both"),
        (150, 0.05, 100, "both"),
        (150, 0.05, None, "upper"),
        (150, 0.05, 60, "lower"),
    ],
)
def test_the_betting_sequence_equals_the_paper_reference_point_by_point(n, alpha, t_opt, side):
    y = np.random.default_rng(n).beta(2, 5, size=n)
    low, high = reference_hedged_cs(y.tolist(), alpha, 200, t_opt, side)
    ours = betting_cs(y, (0.0, 1.0), alpha, 200, t_opt=t_opt, side=side)
    np.testing.assert_allclose(ours.low, low, atol=1e-12)
    np.testing.assert_allclose(ours.high, high, atol=1e-12)


def test_the_paired_scifact_sequence_equals_the_reference_on_rescaled_deltas(scifact_ndcg):
    """Per-query nDCG@10 deltas of two BM25 settings in [-1, 1], mapped to [0, 1] as (d + 1) / 2."""
    a, b = scifact_ndcg
    low, high = reference_hedged_cs(((b - a + 1) / 2).tolist(), 0.05, 200)
    ours = diff_cs(a, b, (0.0, 1.0), 0.05, breaks=200)
    np.testing.assert_allclose(ours.low, 2 * np.array(low) - 1, atol=1e-12)
    np.testing.assert_allclose(ours.high, 2 * np.array(high) - 1, atol=1e-12)


def test_fewhumans_and_retbench_sequences_agree_on_scifact_and_betting_is_tighter(scifact_ndcg):
    from fewhumans.sequential.cs import cs_human_only

    values = scifact_ndcg[1]
    ours = betting_cs(values, (0.0, 1.0), 0.05)
    for t in (10, 50, 150, values.size):
        theirs = cs_human_only(values[:t], confidence=0.95)
        est, low, high = ours.at(t)
        assert est == pytest.approx(theirs.value)
        assert max(low, theirs.lo) <= min(high, theirs.hi)  # both hold a common mean
    assert high - low < theirs.hi - theirs.lo


@pytest.fixture(scope="module")
def scifact_ndcg(scifact):
    """nDCG@10 per SciFact test query: BM25 without stemming (a) and the default BM25 (b)."""
    from retbench.evaluation import evaluate
    from retbench.retrievers import create

    qrels = scifact.split("test")
    qids = list(qrels)
    out = []
    for params in ({"k1": 0.9, "b": 0.4, "stopwords": "en", "stemmer": None}, {}):
        retriever = create("bm25s", params)
        retriever.index(scifact.corpus)
        run = retriever.search(scifact.queries.subset(qids), 10)
        out.append(evaluate(run, qrels, ["ndcg@10"]).values[:, 0])
    return out[0], out[1]
