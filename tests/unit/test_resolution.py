"""Rank intervals from a paired bootstrap: separable systems get single ranks, noise gets a shared first place."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.errors import InputError
from retbench.resolution import queries_to_separate, rank_intervals


def test_clearly_separated_systems_each_get_their_own_rank():
    rng = np.random.default_rng(0)
    base = rng.random(300)
    table = np.stack([base + 0.2, base + 0.1, base], axis=1)  # paired, large gaps
    res = rank_intervals(table, ["a", "b", "c"], n_resamples=500)
    assert (res.rank, res.low, res.high) == ([1, 2, 3], [1, 2, 3], [1, 2, 3])
    assert res.tied_first == ["a"] and res.p_first == [1.0, 0.0, 0.0]
    assert res.interval("b") == "2"


def test_systems_equal_in_truth_share_first_place_and_their_intervals_span_the_field():
    rng = np.random.default_rng(1)
    table = rng.random((60, 4))  # four systems, the same in expectation, few queries
    res = rank_intervals(table, list("abcd"), n_resamples=1000)
    assert sorted(res.tied_first) == list("abcd")
    assert all(lo == 1 and hi >= 3 for lo, hi in zip(res.low, res.high, strict=True))
    assert sum(res.p_first) == pytest.approx(1.0)


def test_the_observed_rank_and_the_intervals_follow_lower_is_better_when_asked():
    table = np.array([[1.0, 2.0], [1.0, 2.0], [1.5, 2.5]])  # a latency: lower wins
    res = rank_intervals(table, ["fast", "slow"], n_resamples=200, higher_is_better=False)
    assert res.rank == [1, 2] and res.tied_first == ["fast"]


def test_a_suite_bootstraps_datasets_too_so_a_system_that_wins_on_one_dataset_only_is_not_sure_of_first():
    rng = np.random.default_rng(2)
    d1 = np.stack([rng.random(200) + 0.3, rng.random(200)], axis=1)  # a wins big on dataset 1
    d2 = np.stack([rng.random(200), rng.random(200) + 0.25], axis=1)  # b wins on dataset 2
    one = rank_intervals([d1], ["a", "b"], n_resamples=500)
    both = rank_intervals([d1, d2], ["a", "b"], n_resamples=500)
    assert one.tied_first == ["a"]
    assert sorted(both.tied_first) == ["a", "b"]  # resampling the two datasets can put either first


def test_queries_needed_to_separate_two_systems_follows_the_normal_approximation():
    rng = np.random.default_rng(3)
    a = rng.normal(0.52, 0.2, 400)
    b = a - rng.normal(0.02, 0.1, 400)
    d = a - b
    want = ((1.959964 + 0.841621) * d.std(ddof=1) / d.mean()) ** 2
    assert queries_to_separate(a, b) == int(np.ceil(want))
    assert queries_to_separate(a, a) is None


def test_bad_tables_are_input_errors():
    with pytest.raises(InputError):
        rank_intervals(np.zeros((3, 2)), ["a", "b", "c"])
    with pytest.raises(InputError, match="n_resamples"):
        rank_intervals(np.zeros((3, 2)), ["a", "b"], n_resamples=0)


def test_those_tied_for_first_on_a_lower_is_better_metric_are_listed_smallest_mean_first():
    rng = np.random.default_rng(3)
    base = rng.random(40)
    a = base + 0.01 + rng.normal(0, 0.2, 40)  # a and b inseparable on 40 queries, c far worse
    table = np.stack([a, base, base + 1.0], axis=1)
    res = rank_intervals(table, ["a", "b", "c"], n_resamples=500, higher_is_better=False)
    assert res.means[0] < res.means[1]  # the noise leaves a slightly lower
    assert res.tied_first == ["a", "b"] and res.rank == [1, 2, 3]
