"""Paired significance tests on per-query delta vectors: randomization, bootstrap CI, t-test, Wilcoxon, Holm.

Each works on the vector of per-query differences (b - a) of two systems aligned by query id; see
`comparison.py` for how vectors are aligned and how failed or missing queries count.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np
from numpy.typing import ArrayLike

from retbench.errors import InputError

# Resample matrices are built in chunks of about this many cells to bound memory; the resampled
# statistics of the tests resampled together are kept up to about _KEPT_CELLS values (64 MB).
_CHUNK_CELLS = 2_000_000
_KEPT_CELLS = 8_000_000


@dataclass(frozen=True)
class TestResult:
    statistic: float
    pvalue: float


#: The most resamples a test or an interval takes. A randomization p cannot go below 1 / (R + 1), so a million
#: resolve p = 1e-6: enough for Holm over 5,000 tests at alpha 0.05 with a tenfold margin (what
#: `comparison.resamples_for` asks for). More only costs time: a test over n queries draws R x n signs and a
#: bootstrap R x n indices (a million of each over 300 queries take seconds; 10**8 would take minutes per test).
MAX_RESAMPLES = 1_000_000


def check_resamples(n_resamples: object, name: str = "n_resamples") -> int:
    """`n_resamples` as an int from 1 to MAX_RESAMPLES: zero or negative resamples give no distribution (numpy
    would fail deep inside with an error that names nothing), a bool or float is a caller's slip, and more than
    MAX_RESAMPLES buys no resolution any test here can use (see MAX_RESAMPLES)."""
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise InputError(f"must be a whole number of resamples, at least 1 (got {n_resamples!r})", field=name)
    if n_resamples > MAX_RESAMPLES:
        raise InputError(
            f"at most {MAX_RESAMPLES:,} resamples (got {n_resamples:,}): a million already resolve p = 1e-6, "
            "and each further million costs seconds per test",
            field=name,
        )
    return int(n_resamples)


def check_seed(seed: object, name: str = "seed") -> int:
    """A seed of NumPy's generator: a whole number >= 0 (a negative one fails deep inside NumPy)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"a seed is a whole number >= 0 (got {seed!r})", field=name)
    return int(seed)


def check_alpha(alpha: object, name: str = "alpha") -> float:
    """A miscoverage level strictly between 0 and 1 (0 or 1 has no normal quantile; NaN has no meaning)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise InputError(f"must be a number between 0 and 1 (got {alpha!r})", field=name)
    if not 0.0 < float(alpha) < 1.0:
        raise InputError(f"must be strictly between 0 and 1 (got {alpha!r})", field=name)
    return float(alpha)


def _chunks(n_resamples: int, n: int) -> list[int]:
    size = max(1, _CHUNK_CELLS // max(n, 1))
    return [min(size, n_resamples - start) for start in range(0, n_resamples, size)]


Progress = Callable[[int, int], None]  # (resample blocks done, blocks in all)


def _batches(deltas: Sequence[np.ndarray], rows: Callable[[int], int]) -> list[tuple[int, list[int]]]:
    """(length, positions) of the delta vectors to resample together: vectors of one length share one
    resample matrix, at most `_KEPT_CELLS // rows(length)` of them at once so the resampled statistics
    kept stay bounded (a batch redraws the same seeded matrix)."""
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(deltas):
        groups.setdefault(int(np.asarray(d).size), []).append(i)
    out = []
    for n, members in groups.items():
        if n:
            step = max(1, _KEPT_CELLS // max(rows(n), 1))
            out += [(n, members[i : i + step]) for i in range(0, len(members), step)]
    return out


def randomization_test(deltas: np.ndarray, n_resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired sign-flip randomization test of mean(deltas) = 0.

    Each resample flips the sign of every delta with probability 1/2 (exchangeability of A and B
    under the null). p = (number of resamples with |mean| >= observed |mean| + 1) / (resamples + 1),
    which is never 0 and is a valid p-value for a Monte Carlo test.
    """
    return randomization_tests([deltas], n_resamples, seed)[0]


def randomization_tests(
    deltas: Sequence[np.ndarray], n_resamples: int = 10_000, seed: int = 0, progress: Progress | None = None
) -> list[float]:
    """`randomization_test` of every delta vector, the resamples drawn once per vector length.

    A test's sign flips depend only on the seed and the number of deltas, so every vector of one length
    is tested against the same seeded matrix of flips, applied to all of them in one matrix product per
    block: the p-values equal those of testing each vector alone (the flips are the same draws, and a sum
    equal to the observed one up to float rounding counts as extreme either way).
    """
    n_resamples = check_resamples(n_resamples)
    check_seed(seed)
    out = [math.nan] * len(deltas)
    batches = _batches(deltas, lambda n: _chunks(n_resamples, n)[0])
    total, done = sum(len(_chunks(n_resamples, n)) for n, _ in batches), 0
    for n, members in batches:
        d = np.stack([np.asarray(deltas[i], dtype=np.float64) for i in members])  # [tests, n]
        rng = np.random.default_rng(seed)
        total_sum = d.sum(axis=1)
        observed = np.abs(total_sum)
        # relative tolerance so sums equal up to float rounding count as "as extreme"
        tol = 1e-9 * np.maximum(1.0, np.abs(d).sum(axis=1))
        count = np.zeros(len(members), dtype=np.int64)
        for size in _chunks(n_resamples, n):
            flips = rng.integers(0, 2, size=(size, n), dtype=np.int8).astype(np.float64)
            sums = total_sum - 2.0 * (flips @ d.T)  # signs = 1 - 2 * flips; [size, tests]
            count += np.count_nonzero(np.abs(sums) >= observed - tol, axis=0)
            done += 1
            if progress is not None:
                progress(done, total)
        for j, i in enumerate(members):
            out[i] = (int(count[j]) + 1) / (n_resamples + 1)
    return out


def bootstrap_ci(
    deltas: np.ndarray, n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float]:
    """Paired percentile bootstrap CI of the mean delta (queries resampled with replacement)."""
    return bootstrap_cis([deltas], n_resamples, seed, confidence)[0]


def bootstrap_cis(
    deltas: Sequence[np.ndarray],
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    progress: Progress | None = None,
) -> list[tuple[float, float]]:
    """`bootstrap_ci` of every delta vector, the resampled query indices drawn once per vector length.

    A resample's indices depend only on the seed and the number of deltas, so vectors of one length share
    them: each block of resamples becomes a matrix of counts (how often each query was drawn) and every
    vector's resampled means are one matrix product, counts @ deltas / n.
    """
    n_resamples = check_resamples(n_resamples)
    check_seed(seed)
    check_alpha(confidence, "confidence")
    alpha = (1.0 - confidence) / 2.0
    out = [(math.nan, math.nan)] * len(deltas)
    batches = _batches(deltas, lambda n: n_resamples)
    total, done = sum(len(_chunks(n_resamples, n)) for n, _ in batches), 0
    for n, members in batches:
        d = np.stack([np.asarray(deltas[i], dtype=np.float64) for i in members])  # [tests, n]
        rng = np.random.default_rng(seed)
        means = np.empty((n_resamples, len(members)), dtype=np.float64)
        start = 0
        for size in _chunks(n_resamples, n):
            idx = rng.integers(0, n, size=(size, n))
            flat = (idx + n * np.arange(size)[:, None]).ravel()
            counts = np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)
            means[start : start + size] = (counts @ d.T) / n
            start += size
            done += 1
            if progress is not None:
                progress(done, total)
        bounds = np.quantile(means, [alpha, 1.0 - alpha], axis=0)  # [2, tests]
        for j, i in enumerate(members):
            out[i] = (float(bounds[0, j]), float(bounds[1, j]))
    return out


def _scipy_stats() -> ModuleType:
    """scipy.stats, imported on first use (it is the optional `stats` extra)."""
    try:
        from scipy import stats
    except ImportError:
        raise InputError(
            "the t-test and Wilcoxon p-values need scipy: pip install 'retbench[stats]'", field="scipy"
        ) from None
    return stats


def paired_ttest(a: np.ndarray, b: np.ndarray) -> TestResult:
    """Paired t-test of b - a (as scipy.stats.ttest_rel(b, a)).

    Differs from scipy only where scipy returns NaN: identical vectors give t = 0, p = 1.
    """
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    n = d.size
    if n < 2:
        return TestResult(math.nan, math.nan)
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return TestResult(0.0, 1.0) if mean == 0.0 else TestResult(math.copysign(math.inf, mean), 0.0)
    stats = _scipy_stats()
    t = mean / (sd / math.sqrt(n))
    return TestResult(t, float(min(1.0, 2.0 * stats.t.sf(abs(t), n - 1))))


def _midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]
    avg = (starts + ends + 1) / 2.0
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def _signed_rank_exact_pvalue(ranks: np.ndarray, r_plus: float) -> float:
    """Exact two-sided p of the signed-rank sum under random signs, given (possibly tied) ranks.

    Mid-ranks are multiples of 1/2, so doubled ranks are integers and the null distribution of
    the doubled sum is a subset-sum count built by dynamic programming.
    """
    doubled = np.rint(2 * ranks).astype(np.int64)
    total = int(doubled.sum())
    counts = np.zeros(total + 1, dtype=np.float64)
    counts[0] = 1.0
    reach = 0
    for r in doubled:
        counts[r : reach + r + 1] += counts[: reach + 1].copy()
        reach += int(r)
    probs = counts / counts.sum()
    k = round(2 * r_plus)
    lower = probs[: k + 1].sum()
    upper = probs[k:].sum()
    return float(min(1.0, 2.0 * min(lower, upper)))


def wilcoxon_signed_rank(a: np.ndarray, b: np.ndarray, exact_max: int = 50) -> TestResult:
    """Wilcoxon signed-rank test of b - a; statistic is the rank sum of positive deltas.

    zero_method "wilcox": zero deltas are dropped before ranking. With at most `exact_max`
    non-zero deltas the p-value is exact (conditional on ties); above, the normal approximation
    with tie correction and no continuity correction (scipy's method="asymptotic").
    """
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    d = d[d != 0.0]
    n = d.size
    if n == 0:
        return TestResult(0.0, 1.0)
    ranks = _midranks(np.abs(d))
    r_plus = float(ranks[d > 0].sum())
    if n <= exact_max:
        return TestResult(r_plus, _signed_rank_exact_pvalue(ranks, r_plus))
    stats = _scipy_stats()
    _, tie_counts = np.unique(np.abs(d), return_counts=True)
    mean = n * (n + 1) / 4.0
    var = (n * (n + 1) * (2 * n + 1) - float(np.sum(tie_counts**3 - tie_counts)) / 2.0) / 24.0
    z = (r_plus - mean) / math.sqrt(var)
    return TestResult(r_plus, float(min(1.0, 2.0 * stats.norm.sf(abs(z)))))


def holm(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN entries stay NaN and are not counted)."""
    p = np.asarray(pvalues, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def effect_size(deltas: np.ndarray) -> float:
    """Cohen's d_z: mean delta over the standard deviation of deltas (0 when nothing changed)."""
    d = np.asarray(deltas, dtype=np.float64)
    if d.size < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 0.0 if float(d.mean()) == 0.0 else math.copysign(math.inf, float(d.mean()))
    return float(d.mean()) / sd


def bootstrap_means(values: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """[n_boot, n_metrics] means of queries resampled with replacement (batched to bound memory)."""
    n, m = values.shape
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, m), dtype=np.float64)
    batch = max(1, min(n_boot, 4_000_000 // max(n * m, 1)))
    for start in range(0, n_boot, batch):
        b = min(batch, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        out[start : start + b] = column_means(values[idx], axis=1)
    return out


def column_means(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Means along `axis` that leave NaN (a metric that does not apply to a query) out; NaN if all are."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[axis] == 0:
        shape = list(values.shape)
        del shape[axis]
        return np.full(shape, np.nan)
    missing = np.isnan(values)
    if not missing.any():
        return values.mean(axis=axis)
    counts = (~missing).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, np.where(missing, 0.0, values).sum(axis=axis) / counts, np.nan)


# -- prediction-powered inference ---------------------------------------------------------------
# Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, "Prediction-powered inference", Science 382 (2023);
# the power-tuned variant (lam) is PPI++: Angelopoulos, Duchi, Zrnic, arXiv:2311.01453 (2023).
#
# n queries carry human labels Y and LLM labels f; N further queries carry LLM labels only. The estimate
#   theta = lam * mean(f_unlabelled) + mean(Y - lam * f_labelled)
# is unbiased for the human-label mean whatever the judge's bias (lam = 1 is classical PPI, lam = 0 the
# human labels alone), with the CLT interval theta -/+ z_(1-alpha/2) * sqrt(var(lam f_unl) / N +
# var(Y - lam f_lab) / n). Variances are population variances (ddof = 0) and lam = None picks the
# variance-minimising lam clipped to [0, 1], both exactly as the authors' package `ppi_py`
# (ppi_mean_ci, ppi_mean_pointestimate), against which tests/test_ppi.py checks these to 1e-9.


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


def z_quantile(p: float) -> float:
    """Standard normal quantile (stdlib, so the core install needs no scipy)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


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
