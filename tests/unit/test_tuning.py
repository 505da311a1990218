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


def test_a_lower_is_better_metric_is_tuned_down_and_its_optimism_and_gain_keep_their_signs():
    rng = np.random.default_rng(4)
    base = rng.random(200)
    # a rate of errors (hallucination_rate, holes@10): setting 1 makes fewer, setting 2 more
    scores = np.stack([base, base - 0.05 + rng.normal(0, 0.01, 200), base + 0.05])
    r = cross_validate(scores, folds=5, seed=0, default=0, n_resamples=500, higher_is_better=False)
    assert [f.chosen for f in r.folds] == [1] * 5 and r.chosen == r.in_sample_best == 1
    assert r.in_sample_mean == pytest.approx(scores[1].mean())
    assert r.optimism == pytest.approx(r.out_of_sample - r.in_sample_mean)  # positive: flattered by selection
    assert r.delta_vs_default is not None and r.delta_vs_default < 0  # fewer errors than the default
    assert r.delta_ci is not None and r.delta_ci[1] < 0 and not r.within_noise
    assert r.p_vs_default is not None and r.p_vs_default < 0.01


def test_with_groups_the_bootstrap_draws_whole_groups_so_its_interval_covers_the_truth():
    """Ten tags of eight queries sharing a tag effect: resampling single queries made the 95% CI cover the true
    mean in about half the trials; drawing whole tags (a cluster bootstrap) brings it back near 95%."""
    rng = np.random.default_rng(1)
    cover, trials = 0, 30
    groups = [f"g{g}" for g in range(10) for _ in range(8)]
    for t in range(trials):
        base = 0.5 + np.repeat(rng.normal(0, 0.2, 10), 8)  # the tag effect every setting shares
        scores = base[None, :] + rng.normal(0, 0.05, (4, 80))  # four settings equal in truth
        lo, hi = cross_validate(scores, folds=5, seed=t, groups=groups, n_resamples=100).out_of_sample_ci
        cover += lo <= 0.5 <= hi
    assert cover / trials >= 0.8  # 0.5 when single queries are drawn


def test_the_p_against_the_default_agrees_with_its_interval_and_holds_its_level_for_equal_settings():
    """Ten settings equal in truth on 100 independent queries: p < 0.05 as often as the CI leaves out 0, and
    rarely (a sign-flip test on the held-out differences, which are not independent, said so in 13% of trials)."""
    rng = np.random.default_rng(2)
    significant, trials = 0, 40
    for t in range(trials):
        scores = rng.normal(0.5, 0.2, 100)[None, :] + rng.normal(0, 0.1, (10, 100))
        r = cross_validate(scores, folds=5, seed=t, n_resamples=100)
        assert r.p_vs_default is not None and 0 < r.p_vs_default <= 1
        assert (r.p_vs_default < 0.05) == (not r.within_noise), (r.p_vs_default, r.delta_ci)
        significant += r.p_vs_default < 0.05
    assert significant / trials <= 0.05  # 0.125 with the sign-flip test
