"""Confidence sequences stay right when watched after every observation; fixed intervals do not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.errors import InputError
from retbench.sequential import (
    betting_cs,
    diff_cs,
    mean_cs,
    mixture_rho,
    normal_mixture_cs,
)
from retbench.stats.paired import z_quantile

STREAMS = 200
LENGTH = 200


def _ever_misses(low: np.ndarray, high: np.ndarray, truth: float) -> bool:
    return bool(np.any((low > truth) | (high < truth)))


def test_a_betting_sequence_watched_at_every_step_misses_the_true_mean_at_most_alpha_of_the_time():
    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(STREAMS):
        x = (rng.random(LENGTH) < 0.3).astype(float)  # Bernoulli(0.3): the mean is exactly 0.3
        cs = betting_cs(x, (0.0, 1.0), alpha=0.05, breaks=200)
        misses += _ever_misses(cs.low, cs.high, 0.3)
    assert misses / STREAMS <= 0.05


def test_a_fixed_sample_interval_watched_at_every_step_misses_far_more_often_than_alpha():
    """The problem the sequences solve, on the same streams: a 95% normal interval looked at after each value."""
    rng = np.random.default_rng(7)
    z = z_quantile(0.975)
    t = np.arange(1, LENGTH + 1)
    misses = 0
    for _ in range(STREAMS):
        x = (rng.random(LENGTH) < 0.3).astype(float)
        mean = np.cumsum(x) / t
        sd = np.sqrt(np.maximum(np.cumsum(x * x) / t - mean**2, 0) * t / np.maximum(t - 1, 1))
        half = z * sd / np.sqrt(t)
        misses += _ever_misses((mean - half)[9:], (mean + half)[9:], 0.3)  # from 10 values on
    assert misses / STREAMS > 0.10


def test_the_betting_sequence_only_narrows_and_always_holds_its_running_mean():
    rng = np.random.default_rng(3)
    x = rng.beta(2, 5, size=400)
    cs = betting_cs(x, (0.0, 1.0))
    assert np.all(np.diff(cs.low) >= 0) and np.all(np.diff(cs.high) <= 0)
    assert np.all(cs.low <= cs.high)
    assert cs.at(1)[1:] == (0.0, 1.0)  # one value cannot rule anything out at 95%
    assert cs.high[-1] - cs.low[-1] < 0.1
    est, low, high = cs.at(400)
    assert est == pytest.approx(x.mean()) and low <= est <= high


def test_bounds_rescale_the_sequence_to_the_metric_units():
    rng = np.random.default_rng(5)
    y = rng.random(300)
    unit = betting_cs(y, (0.0, 1.0), breaks=500)
    scaled = betting_cs(10.0 + 5.0 * y, (10.0, 15.0), breaks=500)
    np.testing.assert_allclose(scaled.low, 10.0 + 5.0 * unit.low)
    np.testing.assert_allclose(scaled.high, 10.0 + 5.0 * unit.high)


def test_a_paired_difference_of_identical_systems_never_excludes_zero_and_a_clear_drop_does():
    rng = np.random.default_rng(11)
    a = rng.random(500)
    same = diff_cs(a, a, (0.0, 1.0))
    assert same.first_excluding(0.0) is None
    b = np.clip(a - 0.2 + rng.normal(0, 0.05, size=500), 0, 1)  # every query about 0.2 worse
    worse = diff_cs(a, b, (0.0, 1.0))
    stop = worse.first_excluding(0.0)
    assert stop is not None and stop < 200
    assert worse.high[stop - 1] < 0


def test_the_normal_mixture_equals_waudby_smith_et_al_closed_form():
    """mean ± s·sqrt(2(tr²+1)/(t²r²)·log(sqrt(tr²+1)/alpha)), with r² = 1/rho (Waudby-Smith et al. 2024, eq. 8)."""
    rng = np.random.default_rng(2)
    x = rng.exponential(2.0, size=300)
    cs = normal_mixture_cs(x, alpha=0.1, t_opt=50)
    t = np.arange(1, 301)
    mean = np.cumsum(x) / t
    s = np.sqrt(np.cumsum(x * x) / t - mean**2)
    r2 = 1.0 / mixture_rho(50.0, 0.1)
    half = s * np.sqrt(2 * (t * r2 + 1) / (t**2 * r2) * np.log(np.sqrt(t * r2 + 1) / 0.1))
    np.testing.assert_allclose(cs.high[1:], (mean + half)[1:], rtol=1e-10)
    np.testing.assert_allclose(cs.low[1:], (mean - half)[1:], rtol=1e-10)
    assert not cs.exact and cs.summary()["anytime_valid"] is True


def test_mean_cs_bets_on_bounded_metrics_and_falls_back_to_the_mixture_without_bounds():
    x = np.linspace(0.1, 0.9, 50)
    assert mean_cs(x, (0.0, 1.0)).exact
    assert not mean_cs(x, None).exact
    assert not mean_cs(x, (0.0, math.inf)).exact


@pytest.mark.parametrize(
    ("values", "bounds", "match"),
    [
        ([0.2, 1.5], (0.0, 1.0), r"every value in \[0, 1\]"),
        ([0.2, float("nan")], (0.0, 1.0), "finite"),
        ([], (0.0, 1.0), "non-empty"),
        ([0.5], (1.0, 0.0), "low < high"),
    ],
)
def test_bad_values_are_refused_with_the_reason(values, bounds, match):
    with pytest.raises(InputError, match=match):
        betting_cs(values, bounds)


def test_a_paired_sequence_needs_equal_lengths():
    with pytest.raises(InputError, match="as many values"):
        diff_cs([0.1, 0.2], [0.3], (0.0, 1.0))


def test_bets_planned_for_a_sample_size_keep_the_sequence_valid_at_every_look():
    rng = np.random.default_rng(13)
    misses = 0
    for _ in range(STREAMS):
        x = (rng.random(LENGTH) < 0.3).astype(float)
        cs = betting_cs(x, (0.0, 1.0), alpha=0.05, breaks=200, t_opt=50)
        misses += _ever_misses(cs.low, cs.high, 0.3)
    assert misses / STREAMS <= 0.05


def test_a_one_sided_sequence_bounds_one_side_only_and_is_tighter_there():
    rng = np.random.default_rng(17)
    x = rng.beta(2, 5, size=300)
    both = betting_cs(x, (0.0, 1.0))
    upper = betting_cs(x, (0.0, 1.0), side="upper")
    assert np.all(upper.low == 0.0)
    assert upper.high[-1] < both.high[-1]


@pytest.mark.parametrize(("kwargs", "match"), [({"t_opt": 0}, "t_opt"), ({"side": "left"}, "side")])
def test_a_bad_plan_is_refused(kwargs, match):
    with pytest.raises(InputError, match=match):
        betting_cs([0.5, 0.6], (0.0, 1.0), **kwargs)
