"""Active statistical inference for a mean: people label the units where the judge is least sure.

After Zrnic and Candès, "Active Statistical Inference", ICML 2024. The unit is a query q = 1..N. Every query
has a prediction f̂_q (its metric, or the B-minus-A difference, from LLM labels) and an uncertainty u_q (the
expected squared error of f̂_q, from the judge's grade probabilities). People label query q (every pooled pair
of it) with probability π_q, which gives f_q (the same value from human labels). The estimate

    θ̂ = (1/N) Σ_q [ λ f̂_q + (ξ_q / π_q) (f_q − λ f̂_q) ],    ξ_q = 1 when q was labelled by people,

is unbiased for the mean of f_q over the N queries for any fixed λ and any π_q > 0 (E[ξ_q] = π_q); λ = 1 is
their estimator, λ = 0 the Horvitz-Thompson mean of the human labels alone, and a tuned λ (clipped to [0, 1],
as PPI++ does; cross-fitted over two folds so each query's λ comes from the other fold's labels, which keeps
the estimate exactly unbiased) keeps a useless judge from widening the interval much.

Sampling. The variance Σ (1 − π_q)/π_q · E(f_q − f̂_q)² under a label budget Σ π_q m_q = B (m_q pairs of q)
is smallest for π_q ∝ sqrt(u_q / m_q) (Zrnic and Candès, Section 3, with a cost per unit). Weights mix that rule
with the uniform one (`mix` of the weight is uniform) so no π_q is near 0, then π_q = min(1, t w_q) with t set
so the budget is met. The queue: each query draws U_q ~ Uniform(0, 1) once (seeded) and queries are labelled
in order of the key U_q / w_q. Labelling the queue up to key t labels exactly {q : U_q < t w_q}, which is
Poisson sampling with π_q = min(1, t w_q) for that t; people may stop anywhere, and the estimate uses the t of
the first query not yet labelled (order sampling: Rosén 1997, asymptotically unbiased at a data-chosen stop).

Two estimands, two intervals (normal, level 1 − alpha):
- `logged`: the mean of f_q over these N queries (a finite population; the only randomness is which queries
  people labelled): var = (1/N²) Σ_labelled a_q, a_q = (1 − π_q)/π_q² (f_q − λ f̂_q)², Horvitz-Thompson's
  unbiased variance estimator; queries labelled with π_q = 1 add nothing. That estimate rests on the few
  labelled queries whose residual is large (with a good judge most residuals are 0), so it is itself noisy and
  a normal interval built on it covers less than its level (about 1 point under 95% with a good judge and a
  small budget, in `benchmarks/label_simulation.py`, though the estimate is unbiased for the variance). The
  interval therefore uses Student's t with Satterthwaite's (1946) degrees of freedom for that estimate under
  Poisson sampling: matching a scaled χ² to its mean and variance, df = 2 V̂² / Var̂(V̂) with
  Var(V̂) = Σ_q π_q (1 − π_q) a_q² / N⁴, estimated without bias by Σ_labelled (1 − π_q) a_q² / N⁴.
  Many labelled queries with comparable residuals give a large df (the normal interval); a variance carried by
  two or three queries gives a small df and a wider interval.
- `population`: the mean over the population the N queries were drawn from (iid): var = s²(Z)/N with
  Z_q = λ f̂_q + (ξ_q/π_q)(f_q − λ f̂_q) and s² the sample variance (their Theorem 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from retbench.errors import InputError
from retbench.stats.paired import check_alpha, z_quantile

ESTIMANDS = ("logged", "population")


def sampling_weights(uncertainty: ArrayLike, cost: ArrayLike | None = None, mix: float = 0.2) -> np.ndarray:
    """w_q ∝ sqrt(u_q / m_q) mixed with the uniform weight (`mix` of it), normalised to mean 1.

    All-zero uncertainty (a judge with nothing to say, or no probabilities) gives the uniform design.
    """
    u = np.asarray(uncertainty, dtype=np.float64)
    if u.ndim != 1 or u.size == 0 or not np.all(np.isfinite(u)) or np.any(u < 0):
        raise InputError("uncertainty must be a non-empty 1-D array of finite values >= 0", field="uncertainty")
    if not 0.0 < mix <= 1.0:
        raise InputError(f"mix must be in (0, 1] (got {mix!r}): 0 would let a query's probability reach 0", field="mix")
    m = np.ones_like(u) if cost is None else np.asarray(cost, dtype=np.float64)
    if m.shape != u.shape or np.any(m <= 0):
        raise InputError("cost must hold one positive value per query", field="cost")
    s = np.sqrt(u / m)
    active = s / s.mean() if s.sum() > 0 else np.ones_like(s)
    w = (1.0 - mix) * active + mix
    return w / w.mean()


def threshold_for_budget(weights: ArrayLike, budget: float, cost: ArrayLike | None = None) -> float:
    """The t with Σ min(1, t w_q) m_q = budget (expected pairs labelled); inf when the budget covers everything."""
    w = np.asarray(weights, dtype=np.float64)
    m = np.ones_like(w) if cost is None else np.asarray(cost, dtype=np.float64)
    if budget >= m.sum():
        return math.inf
    if budget <= 0:
        return 0.0
    # Σ min(1, t w) m is piecewise linear and increasing in t: walk the breakpoints t = 1/w_q, largest w first.
    order = np.argsort(-w)
    w_sorted, m_sorted = w[order], m[order]
    full_cost = np.concatenate([[0.0], np.cumsum(m_sorted)])  # cost of the first j queries at π = 1
    rest_wm = np.concatenate([np.cumsum((w_sorted * m_sorted)[::-1])[::-1], [0.0]])  # Σ w m of queries j..
    for j in range(w.size):
        t = (budget - full_cost[j]) / rest_wm[j]
        if t * w_sorted[j] <= 1.0:
            return float(t)
    return math.inf


def inclusion(weights: ArrayLike, t: float) -> np.ndarray:
    """π_q = min(1, t w_q)."""
    return np.minimum(1.0, t * np.asarray(weights, dtype=np.float64))


def queue_keys(weights: ArrayLike, seed: int) -> np.ndarray:
    """U_q / w_q with U_q ~ Uniform(0, 1) from `seed`: people label queries in increasing key."""
    w = np.asarray(weights, dtype=np.float64)
    u = np.random.default_rng(seed).uniform(size=w.size)
    return u / w


def queue_threshold(keys: ArrayLike, cost: ArrayLike, budget: float, done: ArrayLike | None = None) -> float:
    """The t reached when people label `budget` more pairs down the queue: the key of the first query (not
    `done`) whose pairs (`cost`) no longer fit; inf when the whole queue fits."""
    k = np.asarray(keys, dtype=np.float64)
    m = np.asarray(cost, dtype=np.float64)
    finished = np.zeros(k.size, dtype=bool) if done is None else np.asarray(done, dtype=bool)
    left = float(budget)
    for q in np.argsort(k, kind="stable"):
        if finished[q]:
            continue
        if m[q] > left:
            return float(k[q])
        left -= m[q]
    return math.inf


def labelled_at(keys: ArrayLike, t: float) -> np.ndarray:
    """ξ_q for a queue labelled up to threshold t: key_q < t."""
    return np.asarray(keys, dtype=np.float64) < t


@dataclass(frozen=True)
class ActiveEstimate:
    """An actively sampled mean: estimate, standard errors for both estimands, λ, and the counts."""

    estimate: float
    se_logged: float
    se_population: float
    lam: float
    n_labelled: int
    n: int
    df_logged: float = math.inf  # Satterthwaite degrees of freedom of the logged variance estimate

    def interval(self, alpha: float = 0.05, estimand: str = "logged") -> tuple[float, float]:
        """Two-sided interval at level 1 − alpha: Student's t with `df_logged` for `logged` (these queries),
        normal for `population`."""
        if estimand not in ESTIMANDS:
            raise InputError(f"estimand must be one of {', '.join(ESTIMANDS)} (got {estimand!r})", field="estimand")
        p = 1.0 - check_alpha(alpha) / 2.0
        if estimand == "logged":
            se, q = self.se_logged, t_quantile(p, self.df_logged)
        else:
            se, q = self.se_population, z_quantile(p)
        return (self.estimate - q * se, self.estimate + q * se)


def _tuned_lam(pred: np.ndarray, human: np.ndarray, pi: np.ndarray, xi: np.ndarray) -> float:
    """The λ minimising the logged variance Σ ξ (1 − π)/π² (f − λ f̂)², clipped to [0, 1] (1 without data)."""
    w = np.where(xi, (1.0 - pi) / pi**2, 0.0)
    den = float(np.sum(w * pred * pred))
    return 1.0 if den <= 0 else float(np.clip(np.sum(w * pred * human) / den, 0.0, 1.0))


def cross_fitted_lam(pred: np.ndarray, human: np.ndarray, pi: np.ndarray, xi: np.ndarray) -> np.ndarray:
    """λ_q tuned on the other fold (queries split by position parity): λ_q never reads ξ_q or f_q, so
    E[λ_q f̂_q + (ξ_q/π_q)(f_q − λ_q f̂_q)] = f_q holds exactly and the interval is not made narrower by
    fitting λ to the very labels it is judged on (tuning on all queries covered about 1 point under nominal)."""
    fold = np.arange(pred.size) % 2
    lam = np.empty(pred.size)
    for k in (0, 1):
        other = fold != k
        lam[fold == k] = _tuned_lam(pred[other], human[other], pi[other], xi[other])
    return lam


def active_mean(
    prediction: ArrayLike, human: ArrayLike, labelled: ArrayLike, pi: ArrayLike, lam: float | None = 1.0
) -> ActiveEstimate:
    """θ̂ and its standard errors (module docstring). `human[q]` is read only where `labelled[q]` (NaN elsewhere
    is fine); `pi[q]` is the probability with which q was to be labelled; `lam=None` tunes λ."""
    f_hat = np.asarray(prediction, dtype=np.float64)
    xi = np.asarray(labelled, dtype=bool)
    p = np.asarray(pi, dtype=np.float64)
    if not (f_hat.ndim == 1 and f_hat.shape == xi.shape == p.shape == np.shape(human)):
        raise InputError("prediction, human, labelled and pi must hold one value per query", field="prediction")
    if f_hat.size == 0 or np.any(~np.isfinite(f_hat)):
        raise InputError("prediction must hold a finite value for every query", field="prediction")
    if np.any(~(p > 0) | (p > 1)):
        raise InputError("every inclusion probability must be in (0, 1]", field="pi")
    f = np.where(xi, np.asarray(human, dtype=np.float64), 0.0)
    if np.any(~np.isfinite(f)):
        raise InputError("a labelled query has no human value", field="human")
    lam_q = cross_fitted_lam(f_hat, f, p, xi) if lam is None else np.full(f_hat.size, float(lam))
    resid = np.where(xi, (f - lam_q * f_hat) / p, 0.0)
    z = lam_q * f_hat + resid
    n = f_hat.size
    terms = np.where(xi, (1.0 - p) * resid**2, 0.0)  # a_q of the module docstring
    var_logged = float(np.sum(terms)) / n**2
    var_population = float(z.var(ddof=1)) / n if n > 1 else math.inf
    lam_used = float(lam_q.mean())
    return ActiveEstimate(
        float(z.mean()),
        math.sqrt(var_logged),
        math.sqrt(var_population),
        lam_used,
        int(xi.sum()),
        n,
        satterthwaite_df(terms, p),
    )


def satterthwaite_df(terms: np.ndarray, pi: np.ndarray) -> float:
    """df = 2 (Σ a_q)² / Σ (1 − π_q) a_q² over the labelled queries' variance terms a_q (0 elsewhere):
    the χ² whose mean and variance match the Horvitz-Thompson variance estimate's under Poisson sampling
    (inf when that estimate is 0, where no t is needed)."""
    spread = float(np.sum((1.0 - pi) * terms**2))
    return 2.0 * float(np.sum(terms)) ** 2 / spread if spread > 0 else math.inf


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile for any df > 0 (inf: the normal one), by bisection on the t distribution function
    (stdlib and NumPy only, so the core install needs no scipy)."""
    if math.isinf(df):
        return z_quantile(p)
    if not df > 0:
        raise InputError(f"degrees of freedom must be > 0 (got {df!r})", field="df")
    if p == 0.5:
        return 0.0
    upper = 1.0 - p if p > 0.5 else p  # the tail beyond the quantile
    lo, hi = 0.0, 1.0
    while _t_tail(hi, df) > upper:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_tail(mid, df) > upper:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi) if p > 0.5 else -0.5 * (lo + hi)


def _t_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: half the regularized incomplete beta I_x(df/2, 1/2) at x = df / (df + t²)."""
    return 0.5 * _betainc(0.5 * df, 0.5, df / (df + t * t))


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) by its continued fraction (modified Lentz; Press et al.,
    Numerical Recipes, 3rd ed., section 6.4), using the symmetry I_x(a, b) = 1 − I_{1−x}(b, a) where the
    fraction converges slowly."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(log_front) * h / a


def expected_half_width(
    uncertainty: ArrayLike, pi: ArrayLike, alpha: float = 0.05, spread: float = 0.0, n: int | None = None
) -> float:
    """The logged interval's expected half-width for inclusion probabilities `pi`, reading u_q as E(f_q − f̂_q)²:
    z sqrt(Σ (1 − π_q)/π_q u_q) / N; `spread` (the variance of f over queries) adds the population term."""
    u = np.asarray(uncertainty, dtype=np.float64)
    p = np.asarray(pi, dtype=np.float64)
    size = n or u.size
    var = float(np.sum((1.0 - p) / p * u)) / size**2 + spread / size
    return z_quantile(1.0 - check_alpha(alpha) / 2.0) * math.sqrt(var)
