"""Resampled tests run for many delta vectors at once give each vector's own numbers, quickly.

The references below are the one-vector-at-a-time loops (a fresh seeded generator per test, drawing
the same blocks): the batched path shares one draw among the vectors of one length, so a p-value must
be the same number and a CI bound the same up to float summation order.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.comparison import compare, compare_pair
from retbench.evaluation import Evaluation
from retbench.stats.paired import _chunks, bootstrap_ci, bootstrap_cis, randomization_test, randomization_tests


def one_randomization(d: np.ndarray, n_resamples: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    observed = abs(d.sum())
    tol = 1e-9 * max(1.0, float(np.abs(d).sum()))
    count = 0
    for size in _chunks(n_resamples, d.size):
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, d.size), dtype=np.int8).astype(np.float64)
        count += sum(abs(float((row * d).sum())) >= observed - tol for row in signs)
    return (count + 1) / (n_resamples + 1)


def one_bootstrap(d: np.ndarray, n_resamples: int, seed: int, confidence: float = 0.95) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [d[rng.integers(0, d.size, size=(size, d.size))].mean(axis=1) for size in _chunks(n_resamples, d.size)]
    )
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def deltas() -> list[np.ndarray]:
    """Metric-like deltas: on a 1/1000 grid (so sums tie), of several lengths, one all zero, one empty."""
    rng = np.random.default_rng(11)
    sizes = [60] * 6 + [17] * 3 + [1, 2]
    out = [np.round(rng.normal(0.03, 0.2, size=n), 3) for n in sizes]
    return [*out, np.zeros(60), np.array([])]


def test_batched_randomization_p_values_are_those_of_each_vector_tested_alone():
    ds = deltas()
    batched = randomization_tests(ds, 3_000, seed=5)
    for d, p in zip(ds, batched, strict=True):
        if d.size == 0:
            assert math.isnan(p)
            continue
        assert p == one_randomization(d, 3_000, 5)
        assert p == randomization_test(d, 3_000, 5)
    assert batched[-2] == 1.0  # nothing changed: every resample is as extreme


def test_batched_bootstrap_cis_are_those_of_each_vector_resampled_alone():
    ds = deltas()
    batched = bootstrap_cis(ds, 3_000, seed=5, confidence=0.9)
    for d, (low, high) in zip(ds, batched, strict=True):
        if d.size == 0:
            assert math.isnan(low) and math.isnan(high)
            continue
        ref = one_bootstrap(d, 3_000, 5, 0.9)
        assert low == pytest.approx(ref[0], abs=1e-12) and high == pytest.approx(ref[1], abs=1e-12)
        assert bootstrap_ci(d, 3_000, 5, 0.9) == pytest.approx((low, high), abs=1e-12)


def test_batches_that_bound_memory_give_the_same_numbers(monkeypatch):
    import retbench.stats.paired as stats

    ds = deltas()
    whole = (randomization_tests(ds, 2_000, 3), bootstrap_cis(ds, 2_000, 3))
    monkeypatch.setattr(stats, "_KEPT_CELLS", 1)  # one vector per batch, the seeded draws redone each time
    assert randomization_tests(ds, 2_000, 3) == whole[0]
    for got, want in zip(bootstrap_cis(ds, 2_000, 3), whole[1], strict=True):
        assert got == pytest.approx(want, abs=1e-12, nan_ok=True)


def test_progress_counts_every_resample_block_up_to_the_total():
    seen: list[tuple[int, int]] = []
    randomization_tests(deltas(), 50_000, 0, progress=lambda done, total: seen.append((done, total)))
    totals = {t for _, t in seen}
    assert len(totals) == 1 and [d for d, _ in seen] == list(range(1, totals.pop() + 1)) and len(seen) > 3


def evaluations() -> list[Evaluation]:
    rng = np.random.default_rng(2)
    qids = [f"q{i}" for i in range(40)]
    base = rng.uniform(size=(40, 3))
    out = []
    for s in range(4):
        v = np.round(np.clip(base + rng.normal(0.03 * s, 0.2, size=base.shape), 0, 1), 2)
        v[5 * s, 2] = np.nan  # an answer metric that does not apply to one query: that test has 39 pairs
        out.append(Evaluation(f"s{s}", ["ndcg@10", "recall@10", "mrr"], qids, v, ["ok"] * 40))
    return out


def test_an_all_pairs_comparison_gives_each_pair_the_numbers_it_gets_compared_alone():
    evs = evaluations()
    stages: dict[str, int] = {}
    cmp = compare(evs, n_resamples=2_000, seed=9, progress=lambda s, done, total: stages.__setitem__(s, total))
    assert cmp.family == 6 * 3 and set(stages) == {"randomization test", "bootstrap CI"}
    by_name = {e.system: e for e in evs}
    for pair in cmp.pairs:
        alone = compare_pair(by_name[pair.system_a], by_name[pair.system_b], n_resamples=2_000, seed=9)
        for m, ref in zip(pair.metrics, alone.metrics, strict=True):
            assert m.pvalues == ref.pvalues
            assert (m.ci_low, m.ci_high) == pytest.approx((ref.ci_low, ref.ci_high), abs=1e-12)
        assert [m.n for m in pair.metrics][:2] == [40, 40] and pair.metrics[2].n in (38, 39)
