"""Cross-validated selection: each query scored by a setting chosen without it; optimism and noise said."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.errors import InputError
from retbench.tuning import assign_folds, cross_validate


def test_each_query_is_scored_by_the_setting_chosen_on_the_other_folds():
    # setting 1 wins on queries 0-1, setting 0 on queries 2-3; two folds of two queries each
    scores = np.array([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.2]])
    folds = assign_folds(4, 2, seed=3)
    result = cross_validate(scores, folds=2, seed=3, n_resamples=200)
    held = np.empty(4)
    for f in range(2):
        train = folds != f
        pick = int(np.argmax(scores[:, train].mean(axis=1)))
        assert result.folds[f].chosen == pick
        held[folds == f] = scores[pick, folds == f]
    assert result.out_of_sample == pytest.approx(held.mean())
    assert result.in_sample_best == 1 and result.in_sample_mean == pytest.approx(0.55)
    assert result.optimism == pytest.approx(0.55 - held.mean())


def test_a_grid_of_equal_settings_is_optimistic_in_sample_and_within_noise_out_of_sample():
    rng = np.random.default_rng(0)
    results = [cross_validate(rng.random((30, 40)), folds=5, seed=s, n_resamples=300) for s in range(20)]
    # thirty settings equal in expectation: the best in-sample mean beats its out-of-sample score on average
    # (by about 0.1 here: 40 queries make noisy means), and the edge over the default is called noise
    assert np.mean([r.optimism for r in results]) > 0.05
    assert sum(r.within_noise for r in results) >= 19
    assert all(r.out_of_sample_ci[0] < r.out_of_sample < r.out_of_sample_ci[1] for r in results)


def test_a_truly_better_setting_is_chosen_by_every_fold_and_its_edge_is_outside_the_noise():
    rng = np.random.default_rng(2)
    base = rng.random(200)
    scores = np.stack([base, base + 0.05 + rng.normal(0, 0.01, 200), base - 0.05])
    result = cross_validate(scores, folds=5, seed=0, default=0, n_resamples=2000)
    assert result.chosen == 1 and result.chosen_by_folds == 5
    assert result.delta_ci is not None and result.delta_ci[0] > 0 and not result.within_noise
    assert result.p_vs_default is not None and result.p_vs_default < 0.01


def test_groups_stay_whole_within_a_fold():
    groups = [f"g{i % 7}" for i in range(70)]
    folds = assign_folds(70, 3, seed=0, groups=groups)
    for g in set(groups):
        assert len({int(f) for f, h in zip(folds, groups, strict=True) if h == g}) == 1
    assert sorted(np.bincount(folds)) == [20, 20, 30]  # ten queries per group, seven groups over three folds


def test_bad_fold_counts_are_input_errors_naming_the_field():
    with pytest.raises(InputError, match="folds"):
        assign_folds(10, 1)
    with pytest.raises(InputError, match="cannot make"):
        assign_folds(3, 5)
    with pytest.raises(InputError, match="groups"):
        assign_folds(4, 3, groups=["a", "a", "b", "b"])
    with pytest.raises(InputError, match="n_resamples"):
        cross_validate(np.zeros((2, 10)), n_resamples=0)
