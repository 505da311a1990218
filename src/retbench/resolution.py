"""Rank resolution: how sure a ranking of systems is, from a paired bootstrap over queries (and datasets).

A leaderboard that orders systems by mean alone suggests an order the data often cannot separate. Here each
bootstrap resample draws the queries with replacement (the same draw for every system: the comparison is paired),
recomputes every system's mean and ranks the systems (1 = best; tied means share the best rank). A system's
**rank interval** is the 2.5th and 97.5th percentiles of its ranks over the resamples, and the systems whose
interval reaches rank 1 are **tied for first**: the data cannot rule out that any of them is the best.

With several datasets (a suite), a resample first draws the datasets with replacement and then the queries within
each drawn dataset, and ranks the systems on the mean of their per-dataset means (a two-stage bootstrap, so the
interval also says how much the ranking depends on which datasets were chosen). MTEB's rank-stability analysis and
Sakai's work on the discriminative power of IR measures make the same point for benchmarks.

`queries_to_separate` gives the labelled queries a paired test would need to separate the first two systems at 80%
power: n = ((z_(1-alpha/2) + z_power) * sd(d) / mean(d))^2 over their per-query differences d (the normal
approximation `retbench plan` uses for its budgets).

`resolve`, `resolve_result` and `resolve_suite` build the input from stored per-query tables: [queries x systems]
on one metric, paired on the union of the systems' query ids; a query a system did not answer (failed, timed out,
missing) counts 0 for it, as in `comparison.align`, and NaN (the metric does not apply to the query) is left out
of that system's mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from retbench.data.status import UNANSWERED
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.metrics.registry import lower_is_better, parse_metric
from retbench.results.model import StudyResult
from retbench.results.read import FolderTables
from retbench.stats.paired import bootstrap_means, check_resamples, check_seed, column_means, z_quantile

CONFIDENCE = 0.95
N_RESAMPLES = 2000  # resamples of a report's rank intervals


@dataclass(frozen=True)
class RankResolution:
    """Each system's mean, its rank by mean, its bootstrap rank interval and how often it ranked first."""

    names: list[str]
    means: list[float]
    rank: list[int]
    low: list[int]
    high: list[int]
    p_first: list[float]
    n_resamples: int
    higher_is_better: bool = True  # the metric's direction (a rate of errors ranks its smallest mean first)
    unranked: list[str] = field(default_factory=list)  # systems shown beside the ranked ones with no value to rank

    @property
    def tied_first(self) -> list[str]:
        """The systems whose rank interval reaches 1, best mean first."""
        sign = -1.0 if self.higher_is_better else 1.0
        order = sorted(range(len(self.names)), key=lambda i: sign * self.means[i])
        return [self.names[i] for i in order if self.low[i] == 1]

    def interval(self, name: str) -> str:
        """`1`, or `1-3`: the rank interval as a label."""
        i = self.names.index(name)
        return str(self.low[i]) if self.low[i] == self.high[i] else f"{self.low[i]}-{self.high[i]}"


def _ranks(means: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Competition ranks along the last axis (1 = best; equal means share the best rank; NaN ranks last)."""
    m = np.where(np.isnan(means), -np.inf if higher_is_better else np.inf, means)
    key = -m if higher_is_better else m
    return (key[..., None, :] < key[..., :, None]).sum(axis=-1) + 1


def rank_intervals(
    tables: Sequence[np.ndarray] | np.ndarray,
    names: Sequence[str],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    higher_is_better: bool = True,
) -> RankResolution:
    """Rank intervals of systems from per-query values: one [queries x systems] table, or one per dataset."""
    parts = (
        [np.asarray(tables, dtype=np.float64)]
        if isinstance(tables, np.ndarray)
        else [np.asarray(t, dtype=np.float64) for t in tables]
    )
    if not parts or any(t.ndim != 2 or t.shape[1] != len(names) or t.shape[0] == 0 for t in parts):
        raise InputError(f"need one or more [queries x {len(names)} systems] tables, each with a query")
    check_resamples(n_resamples)
    check_seed(seed)
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence}", field="confidence")
    observed = np.mean([column_means(t) for t in parts], axis=0)
    if len(parts) == 1:
        boot = bootstrap_means(parts[0], n_boot=n_resamples, seed=seed)
    else:
        rng = np.random.default_rng(seed)
        boot = np.empty((n_resamples, len(names)))
        for b in range(n_resamples):
            chosen = rng.integers(0, len(parts), len(parts))
            per = [column_means(parts[d][rng.integers(0, parts[d].shape[0], parts[d].shape[0])]) for d in chosen]
            boot[b] = np.mean(per, axis=0)
    ranks = _ranks(boot, higher_is_better)
    tail = (1 - confidence) / 2
    low = np.floor(np.quantile(ranks, tail, axis=0, method="lower")).astype(int)
    high = np.ceil(np.quantile(ranks, 1 - tail, axis=0, method="higher")).astype(int)
    return RankResolution(
        names=list(names),
        means=[float(x) for x in observed],
        rank=[int(r) for r in _ranks(observed, higher_is_better)],
        low=[int(x) for x in low],
        high=[int(x) for x in high],
        p_first=[float(x) for x in (ranks == 1).mean(axis=0)],
        n_resamples=n_resamples,
        higher_is_better=higher_is_better,
    )


def queries_to_separate(a: np.ndarray, b: np.ndarray, *, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Labelled queries a paired test needs to tell a from b at `power` (None when they do not differ at all)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size < 2 or float(d.mean()) == 0.0:
        return None
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 2
    n = ((z_quantile(1 - alpha / 2) + z_quantile(power)) * sd / abs(float(d.mean()))) ** 2
    return max(2, math.ceil(n))


__all__ = ["RankResolution", "Separation", "first_two_separation", "queries_to_separate", "rank_intervals"]


# -- from stored per-query tables --------------------------------------------------------------------
def paired_table(evaluations: Sequence[Evaluation], metric: str) -> np.ndarray:
    """[queries x systems] values of `metric`, rows the union of the systems' query ids (unanswered = 0)."""
    qids = list(dict.fromkeys(q for ev in evaluations for q in ev.query_ids))
    table = np.zeros((len(qids), len(evaluations)), dtype=np.float64)
    for j, ev in enumerate(evaluations):
        pos = {q: i for i, q in enumerate(ev.query_ids)}
        column = ev.column(metric)
        for i, q in enumerate(qids):
            r = pos.get(q)
            if r is None:
                continue
            value = float(column[r])
            table[i, j] = 0.0 if ev.status[r] in UNANSWERED and not np.isnan(value) else value
    return table


def has_tables(result: StudyResult) -> bool:
    """Whether the per-query tables can be read (results built from means alone have none to resample)."""
    return bool(result.tables) or result.source is not None


def has_value(ev: Evaluation, metric: str) -> bool:
    """Whether `ev` carries `metric` with a value on some query (scope_miss_rate is n/a for an unscoped system)."""
    return metric in ev.metrics and bool(np.isfinite(ev.column(metric)).any())


def resolve(evaluations: Sequence[Evaluation], metric: str) -> RankResolution | None:
    """Rank intervals on one dataset, paired over its queries, of the systems with a value of `metric` (the others
    are listed as not ranked); None for fewer than three such systems (two are settled by their paired comparison)."""
    ranked = [ev for ev in evaluations if has_value(ev, metric)]
    if len(ranked) < 3:
        return None
    table = paired_table(ranked, metric)
    res = rank_intervals(
        table,
        [ev.system for ev in ranked],
        n_resamples=N_RESAMPLES,
        confidence=CONFIDENCE,
        higher_is_better=not lower_is_better(metric),
    )
    res.unranked.extend(ev.system for ev in evaluations if not has_value(ev, metric))
    return res


def resolve_result(result: StudyResult, keys: Sequence[str], metric: str) -> RankResolution | None:
    """Rank intervals of a study's systems (`keys`, failed ones left out) on one dataset, from their per-query
    tables: held by the study, read through its source, else read from its results folder (a study that wrote
    its folder before rendering). None when fewer than three can be ranked or a table cannot be read."""
    ranked = [k for k in keys if k in result.systems and not result.systems[k].failed]
    if len(ranked) < 3:
        return None
    try:
        name = parse_metric(metric).name
        if has_tables(result):
            evs = [result.evaluation(k) for k in ranked]
        elif result.root is not None:
            folder = FolderTables(result.root, result.manifest)
            evs = [folder.evaluation(k) for k in ranked]
        else:
            return None
    except (InputError, OSError):  # ConfigError is an InputError: a metric the registry no longer knows
        return None
    for key, ev in zip(ranked, evs, strict=True):
        ev.system = key
    return resolve(evs, name)


def resolve_suite(
    result: StudyResult, datasets: Sequence[str], systems: Sequence[str], metric: str, separator: str = "/"
) -> RankResolution | None:
    """Rank intervals over datasets and queries (two-stage bootstrap) of the systems scored on every dataset.

    None when fewer than two systems have a table on every dataset: there is nothing to rank."""
    ranked = [s for s in systems if all(f"{d}{separator}{s}" in result.systems for d in datasets)]
    ranked = [s for s in ranked if not any(result.systems[f"{d}{separator}{s}"].failed for d in datasets)]
    if len(ranked) < 2 or not has_tables(result):
        return None
    evs = {(d, s): result.evaluation(f"{d}{separator}{s}") for d in datasets for s in ranked}
    unranked = [s for s in ranked if not all(has_value(evs[d, s], metric) for d in datasets)]
    ranked = [s for s in ranked if s not in unranked]
    if len(ranked) < 2:
        return None
    tables = [paired_table([evs[d, s] for s in ranked], metric) for d in datasets]
    res = rank_intervals(
        tables, ranked, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, higher_is_better=not lower_is_better(metric)
    )
    res.unranked.extend(unranked)
    return res


@dataclass(frozen=True)
class Separation:
    """The two best systems on a metric by mean, and the labelled queries a paired test needs to separate them at
    `power` (None: they score the same on every query), beside the queries these results have."""

    metric: str
    first: str
    first_mean: float
    second: str
    second_mean: float
    power: float
    queries_needed: int | None
    queries: int


def first_two_separation(evaluations: Sequence[Evaluation], metric: str, power: float = 0.8) -> Separation | None:
    """How many labelled queries separate the two best systems on `metric` (None for fewer than two carrying it)."""
    evs = [ev for ev in evaluations if metric in ev.metrics]
    if len(evs) < 2:
        return None
    table = paired_table(evs, metric)
    means = np.nanmean(table, axis=0)
    order = np.argsort(means if lower_is_better(metric) else -means, kind="stable")
    a, b = int(order[0]), int(order[1])
    n = queries_to_separate(table[:, a], table[:, b], power=power)
    return Separation(
        metric, evs[a].system, float(means[a]), evs[b].system, float(means[b]), power, n, int(table.shape[0])
    )
