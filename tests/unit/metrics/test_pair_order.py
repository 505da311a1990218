"""`pair_order` and the ideal-grade sort stand in for `np.lexsort` on hot paths: same order, always."""

from __future__ import annotations

import numpy as np

from retbench.metrics.gain import _ideal_csr, pair_order


def test_pair_order_is_lexsort_on_random_columns_small_and_huge():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(0, 60))
        major = rng.integers(0, int(rng.choice([2, 5, 1000, 2**40])), n)
        minor = rng.integers(0, int(rng.choice([1, 3, 100, 2**40])), n)  # 2**40: past the combined key's range
        assert np.array_equal(pair_order(major, minor), np.lexsort((minor, major)))


def test_ideal_grades_sort_descending_within_rows_for_integer_and_fractional_grades():
    rng = np.random.default_rng(1)
    for trial in range(2000):
        n = int(rng.integers(0, 40))
        grades = (
            rng.choice([-1.0, 0.0, 1.0, 2.0, 3.0, 0.5, 2.5], n) if trial % 2 else rng.integers(-2, 4, n).astype(float)
        )
        rows = np.sort(rng.integers(0, 7, n))
        offsets, got = _ideal_csr(rows, grades, 7)
        keep = grades > 0
        assert np.array_equal(got, grades[keep][np.lexsort((-grades[keep], rows[keep]))])
        assert np.array_equal(offsets, np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=7))]))
