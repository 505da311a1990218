"""Label budgets and detectable effects: how big a change a set of labelled queries can see.

The gate decides with the paired sign-flip randomization test on the per-query deltas
d_i = candidate_i - baseline_i (`retbench.stats.randomization_test`). Its statistic is the sum of the
deltas, judged against random signs, whose spread is sqrt(sum d_i^2); for n queries that is the
standardised T = sum d / sqrt(sum d^2), approximately standard normal when nothing changed. When the
true drop is delta, the delta method over the per-query moments m_k = E[d^k] (m_1 = -delta) gives

    E[T] = sqrt(n) m_1 / sqrt(m_2)
    Var[T] = v = (m_2 - m_1^2) / m_2 - m_1 (m_3 - m_1 m_2) / m_2^2 + m_1^2 (m_4 - m_2^2) / (4 m_2^3)

so, with z = z_(1-alpha/2) and z_p = z_power (Phi the standard normal distribution function):

    power(delta, n) = Phi((|E[T]| - z) / sqrt(v)) + Phi((-|E[T]| - z) / sqrt(v))
    needed(delta)   = ceil(((z + z_p sqrt(v)) sqrt(m_2) / delta)^2)          labelled queries for a drop delta
    detectable(n)   = the delta with sqrt(n) delta / sqrt(m_2) = z + z_p sqrt(v)  (the minimum detectable effect)

When the drop is small next to the spread s of the deltas, v -> 1 and m_2 -> s^2, and these are the
textbook (z + z_p) s / sqrt(n) and ((z + z_p) s / delta)^2 (Cohen, "Statistical Power Analysis for the
Behavioral Sciences", 1988). They differ where a drop is made of a few queries that all move one way: then
the statistic is far less variable than v = 1 assumes, and the textbook formula understates power.

Where the deltas come from (a `DropModel`):

- **paired**: a candidate's observed deltas. Their mean is removed and the target drop put in its place,
  so the shape and spread of real per-query changes (queries that improve, queries that break) is kept.
- **lost**: a baseline alone. A drop of delta is modelled as queries that lose their value entirely: each
  query independently falls to the metric's worst value with probability q = delta / mean(g), where
  g_i = |b_i - worst|, so d_i = -g_i B_i and m_k = q mean((-g)^k). Nothing else moves in this model, so for
  a binary metric (recall@k with one relevant document, hit rate) it is the easiest drop to see: real
  changes that also move other queries need more. Pass a candidate to use real deltas.

The simulation draws `n_sims` data sets of n queries by resampling the model's per-query deltas with
replacement (seeded) and counts the share that the randomization test itself rejects at alpha; the
labelled queries needed is then the smallest n whose simulated power reaches the target (bisection with
the same random numbers at every n). Where few queries change (a small lost-queries drop) the exact test
is coarser than its normal approximation (with k changed queries its smallest p-value is 2 / 2^k), so the
two answers differ: both are shown. tests/test_plan.py checks both against `randomization_test` run on
SciFact per-query values with injected drops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from retbench.errors import InputError
from retbench.stats.paired import z_quantile

# simulated data sets are drawn in blocks of about this many cells to bound memory
_BLOCK_CELLS = 4_000_000
# The simulation searches for the labelled queries needed up to this many; beyond it the answer is "more than
# MAX_QUERIES". Past a few thousand changed queries the sum of the deltas is normal to well within the
# simulation's own noise (central limit theorem), so the normal approximation's count is the answer there, and
# a simulated data set of n queries costs n x flips per data set: at this bound with 1,000 data sets and 500
# flips, about 10**10 multiply-adds per power estimate (seconds).
MAX_QUERIES = 20_000
# Data sets per power estimate and sign flips per test, at most: 10,000 data sets put a simulated power within
# 0.005 (one standard error, sqrt(p (1 - p) / S) <= 0.5 / sqrt(S)), and 2,000 flips resolve p = 5e-4, a hundredth
# of alpha 0.05; more only multiply the time. The flips are one n x flips matrix of signs, so these bounds also
# bound its memory (20,000 x 2,000 float64: 320 MB).
MAX_SIMULATIONS = 10_000
MAX_FLIPS = 2_000


def check_simulation(n_sims: object, n_flips: object) -> tuple[int, int]:
    """(data sets, flips) as whole numbers from 1 to their bounds, or one InputError naming the setting."""
    out = []
    for value, name, most in ((n_sims, "simulations", MAX_SIMULATIONS), (n_flips, "flips", MAX_FLIPS)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= most:
            raise InputError(f"{name} must be a whole number from 1 to {most:,}, got {value!r}", field=name)
        out.append(int(value))
    return out[0], out[1]


def _phi(x: float) -> float:
    return NormalDist().cdf(x)


@dataclass(frozen=True)
class DropModel:
    """What a drop of a given size looks like query by query (see the module docstring)."""

    kind: Literal["paired", "lost"]
    #: paired: the candidate's deltas with their mean removed; lost: g_i = |b_i - worst|, what each query can lose
    values: np.ndarray
    #: paired: the candidate's observed mean delta (candidate - baseline); lost: None
    observed: float | None = None

    @classmethod
    def from_values(cls, baseline: np.ndarray, candidate: np.ndarray | None = None, *, worst: float = 0.0) -> DropModel:
        """Paired deltas when a candidate is given and some query changed; else the lost-queries model.

        A candidate identical to its baseline (the same system gated against itself) shows no spread at
        all, which would claim any drop is detectable; the lost-queries model stands in for it.
        """
        b = np.asarray(baseline, dtype=np.float64)
        if b.ndim != 1 or b.size == 0 or not np.all(np.isfinite(b)):
            raise InputError("baseline values must be a non-empty vector of finite numbers", field="baseline")
        if candidate is not None:
            c = np.asarray(candidate, dtype=np.float64)
            if c.shape != b.shape or not np.all(np.isfinite(c)):
                raise InputError(
                    f"candidate values must be finite and match the baseline's {b.size} queries", field="candidate"
                )
            d = c - b
            if np.ptp(d) > 0.0:
                return cls("paired", d - d.mean(), float(d.mean()))
        return cls("lost", np.abs(b - worst))

    @property
    def n(self) -> int:
        return int(self.values.size)

    @property
    def max_effect(self) -> float:
        """The largest drop the model can express (lost: every query at its worst; paired: unbounded)."""
        return float(self.values.mean()) if self.kind == "lost" else math.inf

    def moments(self, effect: float) -> tuple[float, float, float, float]:
        """E[d], E[d^2], E[d^3], E[d^4] of the per-query deltas of a drop of `effect` (> 0)."""
        if self.kind == "paired":
            d = self.values - effect
            return (float(d.mean()), float(np.mean(d**2)), float(np.mean(d**3)), float(np.mean(d**4)))
        q = effect / float(self.values.mean())
        g = -self.values
        return (-effect, q * float(np.mean(g**2)), q * float(np.mean(g**3)), q * float(np.mean(g**4)))

    def sample(self, rng: np.random.Generator, n_sims: int, n: int, effect: float) -> np.ndarray:
        """[n_sims, n] per-query deltas of simulated data sets with a true mean drop of `effect`."""
        idx = rng.integers(0, self.n, size=(n_sims, n))
        if self.kind == "paired":
            return self.values[idx] - effect
        q = min(1.0, effect / float(self.values.mean()))
        return -self.values[idx] * (rng.random((n_sims, n)) < q)

    def possible(self, effect: float) -> bool:
        """Whether the model can express a drop of this size (a lost-queries drop cannot exceed mean(g))."""
        return 0.0 < effect <= self.max_effect and (self.kind == "paired" or float(self.values.mean()) > 0.0)


def _statistic(model: DropModel, effect: float) -> tuple[float, float]:
    """(E[T] / sqrt(n), sd of T) of the standardised sum for a drop of `effect` (module docstring)."""
    m1, m2, m3, m4 = model.moments(effect)
    if m2 <= 0.0:
        return (0.0, 0.0)
    v = (m2 - m1 * m1) / m2 - m1 * (m3 - m1 * m2) / m2**2 + m1 * m1 * (m4 - m2 * m2) / (4.0 * m2**3)
    return (abs(m1) / math.sqrt(m2), math.sqrt(max(v, 0.0)))


def power_normal(model: DropModel, n: int, effect: float, alpha: float) -> float:
    """Chance that the paired test at alpha rejects with n queries when the true drop is `effect`."""
    if n < 2 or not model.possible(effect):
        return math.nan
    z = z_quantile(1.0 - alpha / 2.0)
    rate, sd = _statistic(model, effect)
    mean = rate * math.sqrt(n)
    if sd == 0.0:
        return 1.0 if mean > z else 0.0
    return _phi((mean - z) / sd) + _phi((-mean - z) / sd)


def needed_normal(model: DropModel, effect: float, alpha: float, power: float = 0.8) -> int | None:
    """Labelled queries needed to detect a drop of `effect` (normal approximation; None: not possible)."""
    if not model.possible(effect):
        return None
    rate, sd = _statistic(model, effect)
    if rate == 0.0:
        return None
    z, zp = z_quantile(1.0 - alpha / 2.0), z_quantile(power)
    return max(2, math.ceil(((z + zp * sd) / rate) ** 2))


def detectable(model: DropModel, n: int, alpha: float, power: float = 0.8) -> float:
    """The minimum detectable drop with n queries (normal approximation; NaN when no drop the model can
    express reaches the power)."""
    if n < 2 or not 0.0 < power < 1.0:
        return math.nan
    z, zp = z_quantile(1.0 - alpha / 2.0), z_quantile(power)

    def reaches(effect: float) -> bool:
        rate, sd = _statistic(model, effect)
        return rate * math.sqrt(n) >= z + zp * sd

    hi = model.max_effect if model.kind == "lost" else 10.0 * float(np.abs(model.values).max()) + 1e-9
    if not model.possible(hi) or not reaches(hi):
        return math.nan
    lo = 0.0
    for _ in range(60):  # bisection to well below any displayed precision
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def power_simulated(
    model: DropModel,
    n: int,
    effect: float,
    alpha: float,
    *,
    n_sims: int = 1000,
    n_flips: int = 1000,
    seed: int = 0,
) -> float:
    """Share of `n_sims` resampled data sets of n queries that the gate's test rejects at alpha.

    The test is `retbench.stats.randomization_test` (two-sided sign flip, p = (count + 1) / (flips + 1)),
    run on every data set at once: one seeded matrix of random signs, applied to all of them by one
    matrix product per block.
    """
    if n < 2 or not model.possible(effect):
        return math.nan
    rng = np.random.default_rng(seed)
    signs = 1.0 - 2.0 * rng.integers(0, 2, size=(n, n_flips)).astype(np.float64)
    rejected = 0
    block = max(1, _BLOCK_CELLS // (n + n_flips))
    for start in range(0, n_sims, block):
        d = model.sample(rng, min(block, n_sims - start), n, effect)
        observed = np.abs(d.sum(axis=1))
        tol = 1e-9 * np.maximum(1.0, np.abs(d).sum(axis=1))  # as randomization_test: float-equal sums tie
        count = np.count_nonzero(np.abs(d @ signs) >= (observed - tol)[:, None], axis=1)
        rejected += int(np.count_nonzero((count + 1) / (n_flips + 1) < alpha))
    return rejected / n_sims


def needed_simulated(
    model: DropModel,
    effect: float,
    alpha: float,
    power: float = 0.8,
    *,
    n_sims: int = 1000,
    n_flips: int = 1000,
    seed: int = 0,
    start: int | None = None,
) -> int | None:
    """Smallest n whose simulated power reaches `power`, to 1% (None: not possible, or more than MAX_QUERIES).

    Brackets the answer in steps of 25% from `start` (default: the normal approximation's answer), then
    bisects until the bracket is within 1% (the simulation's own noise is larger); every n uses the same
    seed, so the simulated power curve is smooth enough to bisect. When the normal approximation already
    needs more than MAX_QUERIES nothing is simulated (see MAX_QUERIES), and no n is simulated twice.
    """
    if not model.possible(effect):
        return None
    normal = needed_normal(model, effect, alpha, power)
    if start is None and normal is not None and normal > MAX_QUERIES:
        return None
    known: dict[int, bool] = {}

    def ok(n: int) -> bool:
        if n not in known:
            got = power_simulated(model, n, effect, alpha, n_sims=n_sims, n_flips=n_flips, seed=seed)
            known[n] = got >= power
        return known[n]

    guess = min(MAX_QUERIES, max(2, start or normal or 2))
    if ok(guess):
        hi = guess
        lo = max(2, int(hi / 1.25))
        while lo > 2 and ok(lo):
            hi, lo = lo, max(2, int(lo / 1.25))
        if lo == 2 and ok(2):
            return 2
    else:
        lo = guess
        hi = min(MAX_QUERIES, math.ceil(lo * 1.25) + 1)
        while not ok(hi):
            if hi >= MAX_QUERIES:
                return None
            lo, hi = hi, min(MAX_QUERIES, math.ceil(hi * 1.25) + 1)
    while hi - lo > max(1, hi // 100):  # invariant: lo falls short, hi reaches the power
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def ppi_labels_needed(
    human: np.ndarray, llm_on_labelled: np.ndarray, n_llm: int | None, n_human: int, lam: float = 1.0
) -> int | None:
    """Human labels PPI needs, next to `n_llm` LLM-labelled queries (None: unlimited), for the interval width
    that `n_human` human-labelled queries give alone (None: the LLM term alone is already that wide).

    From the PPI standard error (retbench.stats): var(Y - lam f) / n + lam^2 var(f) / n_llm = var(Y) / n_human,
    with the variances estimated on the doubly labelled queries given (`human[i]`, `llm_on_labelled[i]`).
    With unlimited LLM labels the second term vanishes: n = n_human var(Y - lam f) / var(Y).
    """
    y = np.asarray(human, dtype=np.float64)
    f = np.asarray(llm_on_labelled, dtype=np.float64)
    if y.shape != f.shape or y.size < 2:
        raise InputError("human and llm_on_labelled must hold the same (at least 2) queries", field="human")
    room = float(y.var()) / n_human - (lam**2 * float(f.var()) / n_llm if n_llm else 0.0)
    if room <= 0.0:
        return None
    return max(2, math.ceil(float((y - lam * f).var()) / room))
