"""Choosing a setting without fooling yourself: k-fold cross-validation over queries.

Tuning a knob (fusion weights, BM25 k1/b, a rerank depth) and reporting the best mean on the same queries
is optimistic by construction: with enough settings one wins by noise. `cross_validate` takes every
setting's per-query scores and, for each of k folds of the queries (seeded; whole groups kept together when
groups are given), picks the setting with the best mean on the other k - 1 folds and scores it on the held-out
fold. Each query is thus scored once, by a setting chosen without it:

- the **out-of-sample estimate** is the mean of those held-out scores. Its CI bootstraps the whole procedure:
  queries resampled (whole groups when groups are given, a cluster bootstrap, as the folds keep them whole), folds
  drawn again, every fold's choice made again on the resample. The held-out scores are not independent (each
  fold's choice read the other folds' queries), so resampling them alone gives intervals too narrow (in a
  simulation of 30 equal settings on 200 queries a plain bootstrap of the held-out differences covered 0 in 87% of
  trials at a nominal 95%; this one in all of them, about 20% wider than the true spread): conservative rather
  than optimistic (Bengio and Grandvalet, JMLR 2004, on why the variance of a k-fold estimate has no unbiased
  estimator). Queries of one tag are correlated: with ten tags of eight queries, drawing queries one by one gave
  a 95% CI that covered the truth in 51% of trials, drawing whole tags in 88% (ten clusters make any bootstrap
  somewhat narrow); on independent queries without groups it covers in 94%;
- the **in-sample best** is the best setting's mean over all queries (what hand tuning would report), and the
  **optimism** is how much better the in-sample best looks than the out-of-sample estimate (in-sample minus
  out-of-sample, or the reverse for a lower-is-better metric: positive means flattered by selection noise);
- the **chosen setting** (what to ship) is the in-sample best, with how many folds chose it;
- against the untuned **default**, the difference (out-of-sample minus default, in the metric's units: negative is
  the gain for a lower-is-better metric) gets a CI and a two-sided p from the same bootstrap: p = 2 min(share of
  resampled differences <= 0, share >= 0), at least 1 / n_resamples, so p < 0.05 exactly when the 95% CI leaves
  out 0 (up to ties at 0). A randomization test on the held-out differences would treat them as independent, which
  they are not: with ten equal settings on 100 queries it gave p < 0.05 in 13% of trials at a nominal 5%, this p
  in none of 100. When the CI holds 0 the edge is inside the noise and the report says so.

`higher_is_better=False` (a rate of errors: hallucination_rate, holes@k; the registry's `lower_is_better`) makes
every choice pick the lowest mean: the folds', the in-sample best and the chosen setting.

Ties in a fold's means go to the setting listed first, so a grid written default-first prefers the default.
This is the cross-validated protocol of e.g. Kohavi (IJCAI 1995) applied to queries as the unit of sampling.

`candidates` gathers each setting as the tune's reports show it (`Candidate`: in-sample mean, the folds'
votes, latency read from its stored run); `retbench.report.tune` renders them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from retbench.errors import InputError
from retbench.results.model import StudyResult
from retbench.results.usage import latency_summary


@dataclass(frozen=True)
class Fold:
    """One fold: the setting chosen on the other folds, its mean there, and its mean on this fold's queries."""

    index: int
    n_queries: int
    chosen: int
    train_mean: float
    test_mean: float


@dataclass(frozen=True)
class TuneResult:
    """What cross-validation says about a grid of settings (indices into the grid)."""

    folds: list[Fold]
    out_of_sample: float
    out_of_sample_ci: tuple[float, float]
    in_sample_best: int
    in_sample_mean: float
    optimism: float
    chosen: int
    chosen_by_folds: int
    default: int | None
    default_mean: float | None
    delta_vs_default: float | None
    delta_ci: tuple[float, float] | None
    p_vs_default: float | None
    setting_means: list[float]
    higher_is_better: bool = True

    @property
    def within_noise(self) -> bool:
        """The out-of-sample edge over the default is not distinguishable from 0 (its CI holds 0)."""
        return self.delta_ci is not None and self.delta_ci[0] <= 0.0 <= self.delta_ci[1]


def assign_folds(n: int, k: int, *, seed: int = 0, groups: Sequence[str] | None = None) -> np.ndarray:
    """A fold number per query: a seeded shuffle cut into k near-equal parts, or whole groups spread over k."""
    if k < 2:
        raise InputError(f"folds must be at least 2, got {k}", field="folds")
    rng = np.random.default_rng(seed)
    if groups is None:
        if n < k:
            raise InputError(f"{n} queries cannot make {k} folds", field="folds")
        folds = np.empty(n, dtype=np.int64)
        folds[rng.permutation(n)] = np.arange(n) % k
        return folds
    if len(groups) != n:
        raise InputError(f"{len(groups)} group labels for {n} queries", field="group_by")
    names = sorted(set(groups))
    if len(names) < k:
        raise InputError(f"{len(names)} groups cannot make {k} folds; use fewer folds", field="folds")
    sizes = {g: 0 for g in names}
    for g in groups:
        sizes[g] += 1
    order = [names[i] for i in rng.permutation(len(names))]
    order.sort(key=lambda g: -sizes[g])  # largest first into the emptiest fold: near-equal folds
    load = np.zeros(k, dtype=np.int64)
    fold_of: dict[str, int] = {}
    for g in order:
        f = int(np.argmin(load))
        fold_of[g] = f
        load[f] += sizes[g]
    return np.array([fold_of[g] for g in groups], dtype=np.int64)


def _means(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each setting's mean over the queries in `mask` (NaN scores, a metric not applying, left out)."""
    sub = scores[:, mask]
    counts = np.sum(~np.isnan(sub), axis=1)
    sums = np.nansum(sub, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _best(means: np.ndarray, higher: bool = True) -> int:
    """The first setting with the best mean: the highest, or the lowest when `higher` is False (NaN never wins)."""
    if np.all(np.isnan(means)):
        return 0
    return int(np.nanargmax(means) if higher else np.nanargmin(means))


def _held_out(
    s: np.ndarray, fold_of: np.ndarray, k: int, higher: bool = True
) -> tuple[np.ndarray, list[tuple[int, float, float]]]:
    """Each query's score under the setting chosen on the other folds; per fold (choice, train mean, test mean)."""
    held = np.full(s.shape[1], np.nan)
    picks = []
    for f in range(k):
        test = fold_of == f
        train_means = _means(s, ~test)
        pick = _best(train_means, higher)
        held[test] = s[pick, test]
        picks.append((pick, float(train_means[pick]), float(_means(s, test)[pick])))
    return held, picks


def _nanmean(x: np.ndarray) -> float:
    valid = ~np.isnan(x)
    return float(x[valid].mean()) if valid.any() else math.nan


def _units(n: int, groups: Sequence[str] | None) -> list[np.ndarray]:
    """The units the bootstrap draws: each query alone, or each group's queries together."""
    if groups is None:
        return [np.array([i]) for i in range(n)]
    unit = np.unique(np.asarray(groups), return_inverse=True)[1]
    return [np.flatnonzero(unit == u) for u in range(int(unit.max()) + 1)]


def _percentile_ci(x: np.ndarray) -> tuple[float, float]:
    x = x[~np.isnan(x)]
    if not x.size:
        return (math.nan, math.nan)
    lo, hi = np.quantile(x, [0.025, 0.975])
    return (float(lo), float(hi))


def _bootstrap_p(x: np.ndarray) -> float:
    """Two-sided p of "the difference is 0" from its bootstrap distribution: 2 min(P(x <= 0), P(x >= 0))."""
    x = x[~np.isnan(x)]
    if not x.size:
        return math.nan
    tail = min(int((x <= 0).sum()), int((x >= 0).sum()))
    return min(1.0, max(2.0 * tail, 1.0) / x.size)


def _procedure_bootstrap(
    s: np.ndarray,
    k: int,
    groups: Sequence[str] | None,
    default: int | None,
    n_resamples: int,
    seed: int,
    higher: bool = True,
) -> tuple[tuple[float, float], np.ndarray | None]:
    """The percentile CI of the out-of-sample mean and the resampled differences to the default, the whole CV
    redone per resample: units (queries, or whole groups) drawn with replacement, each drawn copy of a unit kept
    in one fold."""
    rng = np.random.default_rng(seed + 1)
    units = _units(s.shape[1], groups)
    sizes = np.array([u.size for u in units])
    oos = np.empty(n_resamples)
    delta = np.empty(n_resamples)
    for b in range(n_resamples):
        drawn = rng.integers(0, len(units), len(units))
        idx = np.concatenate([units[u] for u in drawn])
        fold_of = (rng.permutation(len(units)) % k)[np.repeat(drawn, sizes[drawn])]
        sb = s[:, idx]
        held, _ = _held_out(sb, fold_of, k, higher)
        oos[b] = _nanmean(held)
        if default is not None:
            delta[b] = _nanmean(held - sb[default])
    return _percentile_ci(oos), (delta if default is not None else None)


def cross_validate(
    scores: np.ndarray,
    *,
    folds: int = 5,
    seed: int = 0,
    groups: Sequence[str] | None = None,
    default: int | None = 0,
    n_resamples: int = 1000,
    higher_is_better: bool = True,
) -> TuneResult:
    """k-fold selection over `scores` [settings x queries]; see the module docstring."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 1:
        raise InputError("scores must be a settings x queries matrix with at least one of each")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be positive, got {n_resamples}", field="n_resamples")
    if default is not None and not 0 <= default < s.shape[0]:
        raise InputError(f"default setting {default} is not in a grid of {s.shape[0]}", field="default")
    fold_of = assign_folds(s.shape[1], folds, seed=seed, groups=groups)
    higher = higher_is_better
    held_out, picks = _held_out(s, fold_of, folds, higher)
    out = [Fold(f, int((fold_of == f).sum()), *picks[f]) for f in range(folds)]
    all_means = _means(s, np.ones(s.shape[1], dtype=bool))
    best = _best(all_means, higher)
    oos = _nanmean(held_out)
    ci, deltas = _procedure_bootstrap(s, folds, groups, default, n_resamples, seed, higher)
    delta = p = default_mean = delta_ci = None
    if default is not None and deltas is not None:
        pair = ~np.isnan(held_out) & ~np.isnan(s[default])
        d = held_out[pair] - s[default, pair]
        default_mean = float(all_means[default])
        delta = float(d.mean()) if d.size else math.nan
        delta_ci, p = _percentile_ci(deltas), _bootstrap_p(deltas)
    return TuneResult(
        folds=out,
        out_of_sample=oos,
        out_of_sample_ci=ci,
        in_sample_best=best,
        in_sample_mean=float(all_means[best]),
        optimism=(float(all_means[best]) - oos) * (1.0 if higher else -1.0),
        chosen=best,
        chosen_by_folds=sum(f.chosen == best for f in out),
        default=default,
        default_mean=default_mean,
        delta_vs_default=delta,
        delta_ci=delta_ci,
        p_vs_default=p,
        setting_means=[float(m) for m in all_means],
        higher_is_better=higher,
    )


@dataclass(frozen=True)
class Candidate:
    """One setting of a tune as its reports show it: in-sample mean, rank interval, latency per query."""

    index: int  # the setting's number: `[3]` in every table, and its name in the rank resolution
    key: str  # the derived experiment's system (`bm25-03`)
    label: str  # its changes (`params.k1=0.9`)
    mean: float
    folds_chose: int
    # p50, p95, mean (ms) over its queries (p50/p95 None when timed as batches); empty when the run recorded none
    latency: dict[str, float | None]
    # the run's `latency.query` block (how it was timed: per query or batch mean; the caches' state), None when
    # the run recorded no latency or no such block
    query: Mapping[str, object] | None = None


def candidates(result: TuneResult, keys: Sequence[str], labels: Sequence[str], runs: StudyResult) -> list[Candidate]:
    """Each setting with its in-sample mean, how many folds chose it and its latency (read from its stored run).

    A setting whose queries were timed as batches (`Run.latency_batch`) has a batch mean only: p50 and p95 of
    equal shares describe no query, so they are None ("not measured per query"), as in the run report."""
    chose = [sum(f.chosen == i for f in result.folds) for i in range(len(keys))]
    out = []
    for i, key in enumerate(keys):
        try:
            run = runs.run(key)
            values = [v for v in run.latency.values() if v is not None and math.isfinite(v)]
            _, lat = latency_summary(values, amortised=bool(run.latency_batch))
        except (InputError, OSError):
            lat = {}
        try:
            query = (runs[key].latency or {}).get("query") or None
        except (InputError, KeyError):
            query = None
        out.append(Candidate(i, key, labels[i], result.setting_means[i], chose[i], lat, query if lat else None))
    return out


__all__ = ["Candidate", "Fold", "TuneResult", "assign_folds", "candidates", "cross_validate"]
