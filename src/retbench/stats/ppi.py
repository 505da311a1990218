"""Prediction-powered inference: a mean under human labels from LLM labels on every query, corrected on the
queries that carry both (`ppi_mean`, `ppi_mean_diff`), and the classical interval from human labels alone.

Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-powered inference", Science 382 (2023); the
power-tuned variant (lam) is PPI++: Angelopoulos, Duchi, Zrnic, arXiv:2311.01453 (2023).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from retbench.errors import InputError
from retbench.stats.paired import check_alpha, z_quantile

# n queries carry human labels Y and LLM labels f; N further queries carry LLM labels only. The estimate
#   theta = lam * mean(f_unlabelled) + mean(Y - lam * f_labelled)
# is unbiased for the human-label mean whatever the judge's bias (lam = 1 is classical PPI, lam = 0 the
# human labels alone), with the CLT interval theta -/+ z_(1-alpha/2) * sqrt(var(lam f_unl) / N +
# var(Y - lam f_lab) / n). Variances are population variances (ddof = 0) and lam = None picks the
# variance-minimising lam clipped to [0, 1], both exactly as the authors' package `ppi_py`
# (ppi_mean_ci, ppi_mean_pointestimate), against which tests/parity/test_ppi.py checks these to 1e-9.


@dataclass(frozen=True)
class PPIEstimate:
    """A prediction-powered mean: the estimate, its standard error, the lam used, and both sample sizes."""

    estimate: float
    se: float
    lam: float
    n_labelled: int
    n_unlabelled: int

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """Two-sided normal (CLT) interval at level 1 - alpha."""
        z = z_quantile(1.0 - check_alpha(alpha) / 2.0)
        return (self.estimate - z * self.se, self.estimate + z * self.se)


def _vector(values: ArrayLike, name: str) -> np.ndarray:
    """`values` as a 1-D float array of finite numbers: one value per query, nothing else.

    A 2-D array would be flattened into queries that do not exist, strings and booleans are not
    metric values, and a NaN makes every estimate NaN without saying why.
    """
    try:
        raw = np.asarray(values)
    except ValueError:  # ragged nested lists
        raise InputError("must be a flat sequence of numbers, one per query", field=name) from None
    if raw.ndim != 1:
        raise InputError(f"must be 1-D, one value per query (got shape {raw.shape})", field=name)
    if raw.dtype.kind not in "iuf":
        raise InputError(f"must hold numbers (got {raw.dtype.name} values; booleans: pass 0 and 1)", field=name)
    v = raw.astype(np.float64)
    if not np.all(np.isfinite(v)):
        raise InputError(f"{name} has NaN or infinite values", field=name)
    return v


def _check_lam(lam: object) -> float | None:
    """None (PPI++ picks lam, clipped to [0, 1] as ppi_py does) or a fixed lam in [0, 1].

    Any fixed lam keeps the estimate unbiased, but [0, 1] is the range between the human labels alone
    (0) and classical PPI (1) that the tuned value is clipped to; outside it the interval only widens
    (lam = 1e9 gives an absurd width) and a NaN makes every number NaN.
    """
    if lam is None:
        return None
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)):
        raise InputError(f"must be a number in [0, 1] or None (got {lam!r})", field="lam")
    if not 0.0 <= float(lam) <= 1.0:
        raise InputError(f"must be in [0, 1] (0: human labels alone, 1: classical PPI; got {lam!r})", field="lam")
    return float(lam)


def ppi_lambda(human: ArrayLike, llm_on_labelled: ArrayLike, llm_on_unlabelled: ArrayLike) -> float:
    """PPI++'s variance-minimising lam for a mean, clipped to [0, 1]:
    lam = cov(Y, f_lab) / ((1 + n / N) * var(f_lab and f_unl pooled)), population covariance over the
    labelled queries and sample variance (ddof 1) over all, as ppi_py's _calc_lam_glm computes it."""
    y, f, fu = _ppi_inputs(human, llm_on_labelled, llm_on_unlabelled)
    pooled = np.concatenate([f, fu])
    var = float(pooled.var(ddof=1))
    if var == 0.0:
        return 0.0  # a constant judge carries no information
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    return float(np.clip(cov / ((1.0 + y.size / fu.size) * var), 0.0, 1.0))


def _ppi_inputs(human: ArrayLike, llm_on_labelled: ArrayLike, llm_on_unlabelled: ArrayLike) -> tuple[np.ndarray, ...]:
    y = _vector(human, "human")
    f = _vector(llm_on_labelled, "llm_on_labelled")
    fu = _vector(llm_on_unlabelled, "llm_on_unlabelled")
    if y.size != f.size:
        raise InputError(
            f"human ({y.size} values) and llm_on_labelled ({f.size}) must hold the same queries in the same order",
            field="llm_on_labelled",
        )
    if y.size < 2 or fu.size < 1:
        raise InputError(
            f"prediction-powered inference needs at least 2 doubly labelled queries and 1 LLM-labelled one "
            f"(got {y.size} and {fu.size})",
            field="human",
        )
    return y, f, fu


def ppi_estimate(
    human: ArrayLike, llm_on_labelled: ArrayLike, llm_on_unlabelled: ArrayLike, lam: float | None = 1.0
) -> PPIEstimate:
    """The prediction-powered mean with its standard error (see the formulas above)."""
    lam = _check_lam(lam)
    y, f, fu = _ppi_inputs(human, llm_on_labelled, llm_on_unlabelled)
    lam_used = ppi_lambda(y, f, fu) if lam is None else lam
    estimate = float(lam_used * fu.mean() + (y - lam_used * f).mean())
    se = math.sqrt(float((lam_used * fu).var()) / fu.size + float((y - lam_used * f).var()) / y.size)
    return PPIEstimate(estimate, se, lam_used, int(y.size), int(fu.size))


def ppi_mean(
    human: ArrayLike,
    llm_on_labelled: ArrayLike,
    llm_on_unlabelled: ArrayLike,
    alpha: float = 0.05,
    lam: float | None = 1.0,
) -> tuple[float, float, float]:
    """(estimate, low, high): the mean a metric would have under human labels, from LLM labels on every
    query corrected by the human-minus-LLM difference on the queries that carry both.

    `human[i]` and `llm_on_labelled[i]` are one query's metric value under each label source;
    `llm_on_unlabelled` holds the queries without human labels. `lam=1` is classical PPI, `None` PPI++.
    """
    check_alpha(alpha)
    est = ppi_estimate(human, llm_on_labelled, llm_on_unlabelled, lam)
    low, high = est.interval(alpha)
    return (est.estimate, low, high)


def ppi_mean_diff(
    human_a: ArrayLike,
    human_b: ArrayLike,
    llm_a_labelled: ArrayLike,
    llm_b_labelled: ArrayLike,
    llm_a_unlabelled: ArrayLike,
    llm_b_unlabelled: ArrayLike,
    alpha: float = 0.05,
    lam: float | None = 1.0,
) -> tuple[float, float, float]:
    """(estimate, low, high) of the paired difference mean(B - A) under human labels.

    Pairing is per query, so this is `ppi_mean` on the per-query deltas: human deltas on the doubly
    labelled queries, LLM deltas on both samples. Each pair of arrays holds the same queries in order.
    """
    check_alpha(alpha)
    _check_lam(lam)
    pairs = {
        "human": (human_a, human_b),
        "llm_on_labelled": (llm_a_labelled, llm_b_labelled),
        "llm_on_unlabelled": (llm_a_unlabelled, llm_b_unlabelled),
    }
    deltas: dict[str, np.ndarray] = {}
    for name, (a, b) in pairs.items():
        va, vb = _vector(a, f"{name} (system A)"), _vector(b, f"{name} (system B)")
        if va.size != vb.size:
            raise InputError(f"{name}: system A has {va.size} values, system B {vb.size}", field=name)
        deltas[name] = vb - va
    return ppi_mean(deltas["human"], deltas["llm_on_labelled"], deltas["llm_on_unlabelled"], alpha=alpha, lam=lam)


def classical_mean_ci(values: ArrayLike, alpha: float = 0.05) -> tuple[float, float, float]:
    """(mean, low, high): the CLT interval from human labels alone, with the same (ddof 0) variance as
    `ppi_mean`, so the two widths compare like for like (ppi_py's classical_mean_ci)."""
    check_alpha(alpha)
    y = _vector(values, "values")
    if y.size < 2:
        raise InputError(f"a confidence interval needs at least 2 values (got {y.size})", field="values")
    half = z_quantile(1.0 - alpha / 2.0) * float(y.std()) / math.sqrt(y.size)
    return (float(y.mean()), float(y.mean()) - half, float(y.mean()) + half)
