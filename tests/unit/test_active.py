"""Active statistical inference (retbench.active): the estimate is unbiased and its variance estimate too,
checked by exact enumeration of every labelled set on tiny populations, and the sampling design does what
its docstring says (weights rise with uncertainty, stay off 0, meet the budget; the queue is Poisson sampling)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from retbench.active import (
    active_mean,
    cross_fitted_lam,
    expected_half_width,
    inclusion,
    labelled_at,
    queue_keys,
    queue_threshold,
    sampling_weights,
    satterthwaite_df,
    t_quantile,
    threshold_for_budget,
)
from retbench.errors import InputError

F_HAT = np.array([0.2, 0.9, 0.5, 0.0])
F = np.array([0.4, 0.7, 0.5, 1.0])
PI = np.array([0.3, 0.8, 1.0, 0.5])


def _enumerate(pi: np.ndarray):
    """Every labelled set with its probability under independent (Poisson) sampling."""
    for xi in itertools.product([False, True], repeat=pi.size):
        x = np.array(xi)
        yield x, float(np.prod(np.where(x, pi, 1.0 - pi)))


@pytest.mark.parametrize("lam", [1.0, 0.5, 0.0, None])
def test_the_estimate_averages_exactly_to_the_mean_of_the_human_values_over_every_labelled_set(lam):
    """Fixed λ, and λ tuned on the other fold (None): exact over all 2^4 labelled sets."""
    expected = sum(p * active_mean(F_HAT, F, x, PI, lam=lam).estimate for x, p in _enumerate(PI))
    assert expected == pytest.approx(F.mean(), abs=1e-12)


def test_the_logged_variance_estimate_averages_exactly_to_the_design_variance():
    outcomes = [(active_mean(F_HAT, F, x, PI, lam=1.0), p) for x, p in _enumerate(PI)]
    mean = sum(p * e.estimate for e, p in outcomes)
    true_var = sum(p * (e.estimate - mean) ** 2 for e, p in outcomes)
    expected_var = sum(p * e.se_logged**2 for e, p in outcomes)
    assert expected_var == pytest.approx(true_var, abs=1e-12)
    # and it is the closed form Σ (1 − π)/π (f − f̂)² / N²
    assert true_var == pytest.approx(float(np.sum((1 - PI) / PI * (F - F_HAT) ** 2)) / F.size**2, abs=1e-12)


def test_the_variance_of_the_logged_variance_estimate_is_estimated_without_bias():
    """Satterthwaite's df divides by Σ_labelled (1 − π) a²: exact over all 2^4 sets, it averages to Var(V̂)."""
    a = (1 - PI) / PI**2 * (F - F_HAT) ** 2
    outcomes = [(float(np.sum(np.where(x, a, 0.0))), float(np.sum(np.where(x, (1 - PI) * a**2, 0.0))), p)
                for x, p in _enumerate(PI)]  # fmt: skip
    mean_v = sum(p * v for v, _, p in outcomes)
    var_v = sum(p * (v - mean_v) ** 2 for v, _, p in outcomes)
    assert sum(p * s for _, s, p in outcomes) == pytest.approx(var_v, abs=1e-12)
    assert satterthwaite_df(np.where([1, 1, 0, 1], a, 0.0), PI) == pytest.approx(
        2 * (a[0] + a[1] + a[3]) ** 2 / float(np.sum((1 - PI[[0, 1, 3]]) * a[[0, 1, 3]] ** 2))
    )


def test_t_quantiles_match_their_closed_forms_and_tables():
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-9)  # Cauchy
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(2 * 0.975 * 0.025), rel=1e-9)
    assert t_quantile(0.975, 10) == pytest.approx(2.228138851986, rel=1e-9)
    assert t_quantile(0.025, 10) == pytest.approx(-2.228138851986, rel=1e-9)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959963984540, rel=1e-12)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, rel=1e-6)


def test_the_logged_interval_covers_at_its_level_when_few_labelled_queries_carry_the_variance():
    """A judge right on about 70% of 200 queries (residual 0) and off by N(0, 1) on the rest, 15% of queries
    labelled: the variance estimate rests on about 9 labelled queries. Over 3,000 seeded Poisson samples the
    normal interval covers about 91% (its variance estimate is unbiased but noisy); the t interval with
    Satterthwaite's df must cover 95% up to 3 Monte Carlo standard errors (sqrt(.95 · .05 / 3000) each)."""
    rng = np.random.default_rng(0)
    n, reps = 200, 3000
    f_hat = rng.uniform(size=n)
    f = f_hat + np.where(rng.uniform(size=n) < 0.3, rng.normal(size=n), 0.0)
    pi = np.full(n, 0.15)
    covered_t = covered_normal = 0
    for _ in range(reps):
        xi = rng.uniform(size=n) < pi
        est = active_mean(f_hat, np.where(xi, f, np.nan), xi, pi, lam=1.0)
        low, high = est.interval(0.05, "logged")
        covered_t += low <= f.mean() <= high
        covered_normal += abs(est.estimate - f.mean()) <= 1.959964 * est.se_logged
    tolerance = 3 * math.sqrt(0.95 * 0.05 / reps)
    assert covered_t / reps >= 0.95 - tolerance
    assert covered_normal / reps < 0.95 - tolerance  # the problem the t interval solves is real here


def test_a_perfect_judge_gives_the_exact_mean_with_no_logged_width():
    est = active_mean(F, F, np.array([True, False, False, False]), PI, lam=1.0)
    assert est.estimate == pytest.approx(F.mean())
    assert est.se_logged == 0.0 and est.interval(0.05, "logged") == (pytest.approx(F.mean()), pytest.approx(F.mean()))


def test_each_fold_s_lambda_is_the_one_that_minimises_the_other_fold_s_logged_variance():
    rng = np.random.default_rng(0)
    f = rng.uniform(size=400)
    f_hat = 0.3 * f + 0.7 * rng.uniform(size=400)
    pi = rng.uniform(0.2, 0.9, size=400)
    xi = rng.uniform(size=400) < pi
    lam = cross_fitted_lam(f_hat, f, pi, xi)
    for k in (0, 1):
        other = np.arange(400) % 2 != k
        best = min(
            np.linspace(0, 1, 1001),
            key=lambda x: np.sum(xi[other] * (1 - pi[other]) / pi[other] ** 2 * (f[other] - x * f_hat[other]) ** 2),
        )
        assert 0.0 < lam[k] < 1.0 and lam[k] == pytest.approx(best, abs=1e-3)


def test_weights_rise_with_uncertainty_fall_with_cost_and_never_go_below_the_uniform_share():
    w = sampling_weights([0.0, 0.01, 0.04, 0.16], mix=0.2)
    assert np.all(np.diff(w) > 0) and w.mean() == pytest.approx(1.0) and w.min() >= 0.2 - 1e-12
    # π ∝ sqrt(u / m): four times the pairs at four times the uncertainty weighs the same
    w2 = sampling_weights([0.04, 0.16], cost=[1, 4], mix=0.2)
    assert w2[0] == pytest.approx(w2[1])


def test_no_uncertainty_at_all_is_the_uniform_design():
    assert np.allclose(sampling_weights([0.0, 0.0, 0.0]), 1.0)


def test_bad_design_inputs_are_named():
    with pytest.raises(InputError, match="mix"):
        sampling_weights([1.0, 2.0], mix=0.0)
    with pytest.raises(InputError, match="uncertainty"):
        sampling_weights([1.0, float("nan")])
    with pytest.raises(InputError, match="pi"):
        active_mean(F_HAT, F, np.ones(4, bool), np.array([0.0, 1, 1, 1]))


def test_the_threshold_meets_the_budget_in_expected_pairs():
    w = sampling_weights([0.0, 0.5, 3.0, 9.0, 0.1], cost=[3, 1, 2, 5, 1])
    cost = np.array([3, 1, 2, 5, 1])
    for budget in (1.0, 4.0, 9.5):
        t = threshold_for_budget(w, budget, cost)
        assert float(np.sum(inclusion(w, t) * cost)) == pytest.approx(budget)
    assert threshold_for_budget(w, 12, cost) == math.inf


def test_labelling_the_queue_up_to_t_is_poisson_sampling_with_pi_equal_to_min_1_t_w():
    w = sampling_weights([0.0, 0.5, 3.0, 9.0, 0.1])
    u = np.random.default_rng(7).uniform(size=w.size)  # the draws queue_keys makes from seed 7
    keys = queue_keys(w, seed=7)
    for t in (0.1, 0.5, 1.0, 3.0):
        assert np.array_equal(labelled_at(keys, t), u < inclusion(w, t))


def test_the_queue_stops_at_the_first_query_whose_pairs_do_not_fit():
    keys = np.array([0.5, 0.1, 0.9, 0.3])
    cost = np.array([2, 3, 1, 4])
    assert queue_threshold(keys, cost, 7) == 0.5  # 0.1 (3) + 0.3 (4) fit, 0.5 (2 more) does not
    assert queue_threshold(keys, cost, 6, done=[False, True, False, False]) == 0.9  # 0.1 is done already
    assert queue_threshold(keys, cost, 100) == math.inf


def test_expected_half_width_shrinks_as_more_is_labelled():
    u = np.array([0.01, 0.04, 0.09])
    assert expected_half_width(u, np.full(3, 0.2)) > expected_half_width(u, np.full(3, 0.6)) > 0
    assert expected_half_width(u, np.ones(3)) == 0.0
