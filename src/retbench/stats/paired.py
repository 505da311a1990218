"""Paired significance tests on per-query delta vectors: randomization, bootstrap CI, t-test, Wilcoxon, Holm.

Each works on the vector of per-query differences (b - a) of two systems aligned by query id; see
`comparison.py` for how vectors are aligned and how failed or missing queries count. Beside them: the checks of
resample counts, seeds and alpha every resampling caller shares, the normal quantile, and NaN-aware column means
with their bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType

import numpy as np

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


def z_quantile(p: float) -> float:
    """Standard normal quantile (stdlib, so the core install needs no scipy)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(p)


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
