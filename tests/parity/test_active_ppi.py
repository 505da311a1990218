"""The label study's estimator (retbench.active) against the packages that implement the same formulas.

- fewhumans (`estimators.active_mean`, its "E5-active" IPW estimator): θ̂ = mean of f̂_q + ξ_q (f_q − f̂_q)/π_q
  with var = s²/N (ddof 1): retbench's λ = 1 estimate and its `population` standard error, to 1e-12. fewhumans
  scales by a t quantile with n_labelled − 1 degrees of freedom where retbench uses the normal one, so the
  standard errors are compared, not the interval ends.
- ppi_py (`ppi_mean_pointestimate` / `ppi_mean_ci`, Angelopoulos et al. 2023): with a uniform design (every
  π_q = n/N, n queries labelled) retbench's λ = 1 estimate is classical PPI with the LLM values of all N
  queries as the unlabelled sample, to 1e-12. The intervals are two estimators of one asymptotic variance
  (ppi_py's var(f̂)/N + var(f − f̂)/n, which treats its two samples as independent, against retbench's var(Z)/N,
  which also counts the covariance of a labelled query's f̂ with its own residual); with errors independent of
  the prediction that covariance is 0 and the widths agree to a few percent at N = 2,000.
"""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest

from retbench.active import active_mean, inclusion, queue_keys, sampling_weights, threshold_for_budget

fewhumans = pytest.importorskip("fewhumans.estimators", reason="fewhumans is in the dev extra")


def _population(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.beta(2, 3, size=n)
    noise = rng.normal(0, 0.05 + 0.25 * rng.uniform(size=n))
    f_hat = np.clip(f + noise, 0, 1)
    return f, f_hat, noise**2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_active_estimate_and_its_standard_error_equal_fewhumans_e5(seed):
    from scipy.stats import t as student_t

    f, f_hat, u = _population(800, seed)
    w = sampling_weights(u)
    pi = inclusion(w, threshold_for_budget(w, 150))
    xi = queue_keys(w, seed) < threshold_for_budget(w, 150)
    ours = active_mean(f_hat, f, xi, pi, lam=1.0)
    ids = [str(i) for i in range(f.size)]
    theirs = fewhumans.active_mean(
        dict(zip(ids, f_hat, strict=True)),
        {ids[i]: f[i] for i in np.flatnonzero(xi)},
        {ids[i]: pi[i] for i in np.flatnonzero(xi)},
        confidence=0.95,
    )
    assert ours.estimate == pytest.approx(theirs.value, abs=1e-12)
    se_theirs = theirs.halfwidth / student_t.ppf(0.975, int(xi.sum()) - 1)
    assert ours.se_population == pytest.approx(se_theirs, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_with_a_uniform_design_the_estimate_is_ppi_py_s_classical_ppi(seed):
    rng = np.random.default_rng(100 + seed)
    f_hat = rng.beta(2, 3, size=2000)
    f = f_hat + rng.normal(0, 0.2, size=2000)  # errors independent of the prediction, as ppi_py's variance assumes
    xi = np.zeros(f.size, dtype=bool)
    xi[rng.choice(f.size, size=300, replace=False)] = True
    pi = np.full(f.size, 300 / f.size)
    ours = active_mean(f_hat, f, xi, pi, lam=1.0)
    point = ppi_py.ppi_mean_pointestimate(f[xi], f_hat[xi], f_hat, lam=1.0)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-12)
    low, high = ppi_py.ppi_mean_ci(f[xi], f_hat[xi], f_hat, alpha=0.05, lam=1.0)
    ours_low, ours_high = ours.interval(0.05, "population")
    assert (ours_high - ours_low) == pytest.approx(float(np.ravel(high)[0] - np.ravel(low)[0]), rel=0.05)
