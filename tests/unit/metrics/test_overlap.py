"""Label-free overlap measures: hand-worked RBO values, the bounds holding every continuation of the lists,
and the run-level alignment (a missing or failed query counts as moved, never as unchanged)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.data import QueryStatus, Run
from retbench.errors import InputError
from retbench.metrics.overlap import overlap_measures, top_k_codes


def _rows(*pairs: tuple[list[int], list[int]]) -> tuple[np.ndarray, np.ndarray]:
    k = max(max(len(s), len(t)) for s, t in pairs)
    a = np.full((len(pairs), k), -1, dtype=np.int64)
    b = np.full((len(pairs), k), -1, dtype=np.int64)
    for i, (s, t) in enumerate(pairs):
        a[i, : len(s)], b[i, : len(t)] = s, t
    return a, b


def _rbo_by_definition(s: list[int], t: list[int], p: float) -> float:
    """(1 - p) Σ_d A_d p^(d-1) over the whole of two (long) lists: the rest of the sum is below p^depth."""
    total, seen_s, seen_t, x = 0.0, set(), set(), 0
    for d, (u, v) in enumerate(zip(s, t, strict=True), start=1):
        x += (u in seen_t) + (v in seen_s) + (u == v)
        seen_s.add(u)
        seen_t.add(v)
        total += (1 - p) * (x / d) * p ** (d - 1)
    return total


def test_rbo_of_two_short_lists_worked_by_hand() -> None:
    # S = [a, b], T = [b, c], p = 0.5: X_1 = 0, X_2 = 1
    m = {n: float(v[0]) for n, v in overlap_measures(*_rows(([0, 1], [1, 2])), p=0.5).items()}
    # RBO_EXT = (1-p)/p [X_1/1 p + X_2/2 p^2] + X_2/2 p^2 = 0.125 + 0.125
    assert m["rbo_ext"] == pytest.approx(0.25)
    # RBO_min = (1-p)/p [X_2/2 p^2 + X_2 (-ln(1-p) - p - p^2/2)]
    assert m["rbo_min"] == pytest.approx(0.125 + (math.log(2) - 0.625))
    # RBO_max: the continuations S = [a, b, c, ...], T = [b, c, a, ...] agree fully from depth 3 on:
    # (1-p) [0 + (1/2) p + p^2 + p^3 + ...] = 0.5 (0.25 + 0.5)
    assert m["rbo_max"] == pytest.approx(0.375)
    assert m["rbo_res"] == pytest.approx(m["rbo_max"] - m["rbo_min"])
    assert m["overlap"] == 0.5 and m["jaccard"] == pytest.approx(1 / 3)
    assert m["changed_set"] == 1.0 and m["changed_order"] == 1.0


def test_identical_reversed_and_disjoint_lists() -> None:
    m = overlap_measures(*_rows(([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [3, 2, 1]), ([1, 2, 3], [4, 5, 6])), p=0.9)
    assert m["rbo_ext"][0] == pytest.approx(1.0) and m["rbo_min"][0] < 1.0 < m["rbo_max"][0] + 1e-12
    assert m["kendall"].tolist()[:2] == pytest.approx([1.0, -1.0])
    assert m["spearman"].tolist()[:2] == pytest.approx([1.0, -1.0])
    assert m["changed_set"].tolist() == [0.0, 0.0, 1.0]
    assert m["changed_order"].tolist() == [0.0, 1.0, 1.0]
    assert m["rbo_ext"][2] == 0.0 and m["rbo_min"][2] == 0.0 and m["jaccard"][2] == 0.0
    # disjoint top 3: every item is ranked 4th in the other list, so the ranks run opposite ways
    assert m["kendall"][2] < 0 and m["spearman"][2] < 0


def test_rbo_bounds_hold_every_continuation_and_the_maximum_is_reached() -> None:
    rng = np.random.default_rng(3)
    p, depth = 0.8, 200  # the definition's tail beyond 200 ranks is below 0.8^200
    for _ in range(60):
        k = int(rng.integers(1, 8))
        vocab = rng.permutation(3 * k)
        s, t = vocab[:k].tolist(), rng.permutation(vocab[: 2 * k])[:k].tolist()
        m = {n: float(v[0]) for n, v in overlap_measures(*_rows((s, t)), p=p).items()}
        for _ in range(20):  # random continuations drawn from a shared pool: some overlap, some not
            pool = rng.permutation(np.arange(1000, 1000 + depth)).tolist()
            rest_s = [u for u in rng.permutation(list(set(t) - set(s)) + pool).tolist()][: depth - k]
            rest_t = [u for u in rng.permutation(list(set(s) - set(t)) + pool).tolist()][: depth - k]
            value = _rbo_by_definition(s + rest_s, t + rest_t, p)
            assert m["rbo_min"] - 1e-9 <= value <= m["rbo_max"] + 1e-9
        # the continuation that matches as early as it can: each list takes the other's unmatched items
        # first, then both take the same new items
        fresh = list(range(5000, 5000 + depth))
        best_s = s + [u for u in t if u not in s] + fresh
        best_t = t + [u for u in s if u not in t] + fresh
        assert _rbo_by_definition(best_s[:depth], best_t[:depth], p) == pytest.approx(m["rbo_max"], abs=1e-9)
        # nothing more ever matching: the lower bound
        none_s, none_t = s + fresh[: depth - k], t + [u + 10_000 for u in fresh[: depth - k]]
        assert _rbo_by_definition(none_s, none_t, p) == pytest.approx(m["rbo_min"], abs=1e-9)
        assert m["rbo_min"] - 1e-12 <= m["rbo_ext"] <= m["rbo_max"] + 1e-12


def test_empty_rankings_follow_the_stated_conventions() -> None:
    a = np.array([[-1, -1], [1, -1]])
    b = np.array([[-1, -1], [-1, -1]])
    m = overlap_measures(a, b)
    assert m["rbo_ext"].tolist() == [1.0, 0.0] and m["jaccard"].tolist() == [1.0, 0.0]
    assert m["changed_set"].tolist() == [0.0, 1.0]
    assert np.isnan(m["kendall"]).all()


def test_persistence_outside_the_open_unit_interval_is_refused() -> None:
    a, b = _rows(([1], [1]))
    for p in (0, 1, 1.5, True):
        with pytest.raises(InputError, match="p must lie strictly between 0 and 1"):
            overlap_measures(a, b, p=p)


def test_runs_align_by_query_and_a_missing_or_failed_query_counts_as_moved() -> None:
    run_a = Run.from_dict({"q1": {"d1": 3, "d2": 2, "d3": 1}, "q2": {"d1": 1}, "q3": {"d4": 1}})
    run_b = Run.from_dict(
        {"q1": {"d2": 3, "d1": 2, "d3": 1}, "q2": {}, "q3": {"d4": 1}},
        status={"q2": QueryStatus.ERROR},
    )
    top = top_k_codes(run_a, run_b, ["q1", "q2", "q3", "q4"], k=2)
    assert top.docs("a", 0) == ["d1", "d2"] and top.docs("b", 0) == ["d2", "d1"]
    assert top.docs("b", 1) == [] and top.docs("a", 3) == []
    m = overlap_measures(top.a, top.b)
    assert m["changed_set"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert m["changed_order"].tolist() == [1.0, 1.0, 0.0, 0.0]
