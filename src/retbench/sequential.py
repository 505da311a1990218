"""Anytime-valid confidence sequences: intervals that may be looked at after every query, or every run.

A fixed-sample 95% interval is right 95% of the time *when it is looked at once*, at a sample size chosen
in advance. A CI gate or a nightly dashboard looks after every batch and stops (or alarms) the first time
the interval crosses a limit; over many looks the chance that one of them misses the truth grows far past
5%. A confidence sequence (CS) is a sequence of intervals C_1, C_2, ... with

    P(for all t: mean ∈ C_t) >= 1 - alpha,

so any look, any number of looks, and stopping whenever it likes keep the 1 - alpha guarantee.

Two constructions:

* **Betting (hedged capital)** for metrics with a declared range [lo, hi] (every built-in rank metric):
  Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86 (2024),
  Theorem 3 with the predictable plug-in bets of their eq. (26). Values are scaled to y in [0, 1]. For a
  candidate mean m, two gamblers bet for and against m:

      K+_t(m) = prod_{i<=t} (1 + l+_i(m) (y_i - m)),   K-_t(m) = prod_{i<=t} (1 - l-_i(m) (y_i - m)),

  with the bet l_i = sqrt(2 log(2/alpha) / (s2_{i-1} i log(1 + i))) from the regularised running variance
  s2_{i-1} = (1/4 + sum_{j<i} (y_j - mu_j)^2) / i, mu_j = (1/2 + sum_{k<=j} y_k) / (j + 1), truncated at
  1/(2m) for K+ and 1/(2(1-m)) for K-. Under the null mean m, max(K+/2, K-/2) is a nonnegative
  supermartingale, so by Ville's inequality C_t = {m : max(K+_t(m), K-_t(m)) / 2 < 1/alpha} is a CS. C_t is
  found on a grid of `breaks` + 1 values of m and widened by one grid step, then intersected with every
  earlier C_s (still a CS). This is exactly `confseq.betting.hedged_cs` (Waudby-Smith's package, 0.0.11),
  which tests/parity checks point by point.

* **Normal mixture (asymptotic)** for metrics without a declared range: Howard, Ramdas, McAuliffe and
  Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Ann. Statist. 49 (2021),
  two-sided normal-mixture boundary u(v) = sqrt((v + rho) (log(1 + v/rho) + 2 log(1/alpha))) with
  rho = v_opt / (2 log(1/alpha) + log(1 + 2 log(1/alpha))) (tuned to be tightest at intrinsic time v_opt),
  applied to v = t s2_t with the running sample variance s2_t: mean_t -/+ u(t s2_t) / t. With an estimated
  variance this is the *asymptotic* CS of Waudby-Smith, Arbour, Sinha, Kennedy and Ramdas, "Time-uniform
  central limit theory and asymptotic confidence sequences", Ann. Statist. (2024): valid as t grows, not
  at every small t, and the result says so (`exact` is False).

A CS is wider than the fixed-sample interval at the same n: that is the price of looking as often as one
likes. Pick the sequence's tightest point with `v_opt` (normal mixture) or accept the betting default,
which adapts to the data's variance on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from retbench.errors import InputError
from retbench.stats.paired import check_alpha

BETTING = "betting (hedged capital, Waudby-Smith and Ramdas 2024)"
NORMAL_MIXTURE = "normal mixture, asymptotic (Howard et al. 2021; Waudby-Smith et al. 2024)"
#: grid cells of (candidate means x queries) computed at once by the betting CS, to bound memory (~64 MB)
_GRID_CELLS = 8_000_000


@dataclass(frozen=True)
class ConfidenceSequence:
    """Running estimates and anytime-valid bounds after each of n observations (arrays of length n)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    alpha: float
    method: str
    #: True for a nonasymptotic guarantee at every n (betting); False for the asymptotic normal mixture
    exact: bool

    @property
    def n(self) -> int:
        return int(self.estimate.size)

    def at(self, t: int) -> tuple[float, float, float]:
        """(estimate, low, high) after the first t observations (t = n: the latest look)."""
        if not 1 <= t <= self.n:
            raise InputError(f"a confidence sequence of {self.n} observations has no look at {t}")
        return float(self.estimate[t - 1]), float(self.low[t - 1]), float(self.high[t - 1])

    def first_excluding(self, value: float) -> int | None:
        """The first n at which the sequence no longer holds `value` (where a monitor may stop), or None."""
        out = np.flatnonzero((self.low > value) | (self.high < value))
        return int(out[0]) + 1 if out.size else None

    def summary(self) -> dict[str, object]:
        """The latest look, for JSON and reports: it may be looked at any time, and says so."""
        est, low, high = self.at(self.n)
        return {
            "estimate": est,
            "low": low,
            "high": high,
            "n": self.n,
            "alpha": self.alpha,
            "method": self.method,
            "exact": self.exact,
            "anytime_valid": True,
        }


def _finite(values: ArrayLike, name: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise InputError(f"{name}: a confidence sequence needs a non-empty 1-D array of values")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{name}: values must be finite numbers (found NaN or infinity)")
    return x


def predictable_bets(y: np.ndarray, alpha: float, t_opt: int | None = None) -> np.ndarray:
    """The predictable plug-in bets l_i of Waudby-Smith and Ramdas (2024), eq. (26), for y in [0, 1].

    Each uses only y_1..y_{i-1}: prior mean 1/2 and variance 1/4 count as one observation. With `t_opt`
    (chosen before the data) the bets are sqrt(2 log(1/alpha) / (t_opt s2_{i-1})) instead: still a valid
    sequence at every n, tightest near n = t_opt (their eq. (27) and Remark 1).
    """
    t = np.arange(1, y.size + 1, dtype=np.float64)
    mu = np.minimum((0.5 + np.cumsum(y)) / (t + 1.0), 1.0)
    s2 = (0.25 + np.cumsum((y - mu) ** 2)) / (t + 1.0)
    s2_prev = np.concatenate(([0.25], s2[:-1]))
    scale = t * np.log1p(t) if t_opt is None else float(t_opt)
    with np.errstate(divide="ignore", invalid="ignore"):
        bets = np.sqrt(2.0 * math.log(1.0 / alpha) / (scale * s2_prev))
    return np.nan_to_num(bets, nan=0.0, posinf=0.0)


def _unit_betting_cs(
    y: np.ndarray, alpha: float, breaks: int, side: str = "both", t_opt: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The hedged-capital CS for the mean of y in [0, 1] (module docstring), lower and upper bounds.

    `side` "both" splits alpha between the two gamblers; "lower" (only K+: a lower bound, the upper one
    stays 1) or "upper" (only K-) spends all of it on one side.
    """
    share = alpha / 2.0 if side == "both" else alpha
    bets = predictable_bets(y, share, t_opt)
    grid = np.linspace(0.0, 1.0, breaks + 1)
    log_thr = math.log(1.0 / share)  # a gambler's capital K reaching 1/share rules the candidate mean out
    n = y.size
    lower = np.zeros(n)
    upper = np.ones(n)
    step = max(1, _GRID_CELLS // n)
    first = np.full(n, grid.size, dtype=np.int64)  # first grid index inside C_t (grid.size: none)
    last = np.full(n, -1, dtype=np.int64)
    for start in range(0, grid.size, step):
        m = grid[start : start + step, None]
        inside = np.ones((m.shape[0], n), dtype=bool)
        with np.errstate(divide="ignore"):
            if side != "upper":
                up = np.minimum(bets, 0.5 / m)  # truncations keep every factor >= 1/2
                inside &= np.cumsum(np.log1p(up * (y - m)), axis=1) <= log_thr
            if side != "lower":
                down = np.minimum(bets, 0.5 / (1.0 - m))
                inside &= np.cumsum(np.log1p(-down * (y - m)), axis=1) <= log_thr
        any_in = inside.any(axis=0)
        idx = np.arange(start, start + m.shape[0])[:, None]
        first = np.where(any_in, np.minimum(first, np.where(inside, idx, grid.size).min(axis=0)), first)
        last = np.where(any_in, np.maximum(last, np.where(inside, idx, -1).max(axis=0)), last)
    found = last >= 0
    lower[found] = grid[first[found]]
    upper[found] = grid[last[found]]
    lower = np.maximum(0.0, lower - 1.0 / breaks)
    upper = np.minimum(1.0, upper + 1.0 / breaks)
    if side == "lower":
        upper[:] = 1.0
    elif side == "upper":
        lower[:] = 0.0
    return np.maximum.accumulate(lower), np.minimum.accumulate(upper)


SIDES = ("both", "lower", "upper")


def _check_plan(t_opt: object, side: object) -> None:
    if t_opt is not None and (not isinstance(t_opt, int) or isinstance(t_opt, bool) or t_opt < 1):
        raise InputError("t_opt: a positive integer (the number of observations to be tightest at) or None")
    if side not in SIDES:
        raise InputError(f"side: one of {', '.join(SIDES)}, got {side!r}")


def betting_cs(
    values: ArrayLike,
    bounds: tuple[float, float] = (0.0, 1.0),
    alpha: float = 0.05,
    breaks: int = 1000,
    *,
    t_opt: int | None = None,
    side: str = "both",
) -> ConfidenceSequence:
    """Anytime-valid CS for the mean of values known to lie in `bounds` (betting; module docstring).

    `t_opt`: tune the bets to be tightest near that many observations (chosen before seeing them; None:
    the schedule of the paper, 1/sqrt(t log t)). `side`: "lower" or "upper" for a one-sided sequence.
    """
    alpha = check_alpha(alpha)
    _check_plan(t_opt, side)
    x = _finite(values, "values")
    lo, hi = float(bounds[0]), float(bounds[1])
    if not hi > lo:
        raise InputError(f"bounds: need low < high, got [{lo:g}, {hi:g}]")
    if x.min() < lo - 1e-12 or x.max() > hi + 1e-12:
        raise InputError(f"values: the betting sequence needs every value in [{lo:g}, {hi:g}]")
    if not isinstance(breaks, int) or breaks < 10:
        raise InputError("breaks: an integer of at least 10")
    y = np.clip((x - lo) / (hi - lo), 0.0, 1.0)
    low, high = _unit_betting_cs(y, alpha, breaks, side, t_opt)
    est = np.cumsum(x) / np.arange(1, x.size + 1)
    return ConfidenceSequence(est, lo + (hi - lo) * low, lo + (hi - lo) * high, alpha, BETTING, True)


def mixture_rho(v_opt: float, alpha: float) -> float:
    """Howard et al. (2021)'s rho that makes the two-sided normal mixture tightest at intrinsic time v_opt."""
    la = math.log(1.0 / alpha)
    return v_opt / (2.0 * la + math.log1p(2.0 * la))


def normal_mixture_bound(v: ArrayLike, alpha: float, v_opt: float) -> np.ndarray:
    """The two-sided normal-mixture uniform boundary u(v) on the running sum (module docstring)."""
    rho = mixture_rho(v_opt, alpha)
    v = np.asarray(v, dtype=np.float64)
    return np.sqrt((v + rho) * (np.log1p(v / rho) + 2.0 * math.log(1.0 / alpha)))


def normal_mixture_cs(values: ArrayLike, alpha: float = 0.05, t_opt: int | None = None) -> ConfidenceSequence:
    """Asymptotic anytime-valid CS for the mean of unbounded values, tightest near n = `t_opt` (None: 100).

    The boundary is applied to the standardised running sum (intrinsic time v = t, v_opt = t_opt, chosen
    before seeing the data) and scaled back by the running standard deviation (ddof 0).
    """
    alpha = check_alpha(alpha)
    _check_plan(t_opt, "both")
    x = _finite(values, "values")
    t = np.arange(1, x.size + 1, dtype=np.float64)
    est = np.cumsum(x) / t
    var = np.maximum(np.cumsum(x * x) / t - est * est, 0.0)
    half = np.sqrt(var) * normal_mixture_bound(t, alpha, float(t_opt or 100)) / t
    return ConfidenceSequence(est, est - half, est + half, alpha, NORMAL_MIXTURE, False)


def _bounded(bounds: tuple[float, float] | None) -> bool:
    return bounds is not None and all(math.isfinite(b) for b in bounds)


def mean_cs(
    values: ArrayLike,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    *,
    breaks: int = 1000,
    t_opt: int | None = None,
) -> ConfidenceSequence:
    """A system's running mean: betting when the metric declares its range, else the normal mixture."""
    if _bounded(bounds):
        assert bounds is not None
        return betting_cs(values, bounds, alpha, breaks, t_opt=t_opt)
    return normal_mixture_cs(values, alpha, t_opt)


def diff_cs(
    a: ArrayLike,
    b: ArrayLike,
    bounds: tuple[float, float] | None,
    alpha: float = 0.05,
    *,
    breaks: int = 1000,
    t_opt: int | None = None,
) -> ConfidenceSequence:
    """The paired difference b - a, query by query in the given order (both sides aligned by query).

    With the metric in [lo, hi], b - a lies in [-(hi - lo), hi - lo] and the betting CS applies to it.
    """
    av, bv = _finite(a, "a"), _finite(b, "b")
    if av.size != bv.size:
        raise InputError(f"a and b: a paired sequence needs as many values on each side ({av.size} vs {bv.size})")
    if _bounded(bounds):
        assert bounds is not None
        w = float(bounds[1]) - float(bounds[0])
        return betting_cs(bv - av, (-w, w), alpha, breaks, t_opt=t_opt)
    return normal_mixture_cs(bv - av, alpha, t_opt)
