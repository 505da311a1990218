"""The leaderboard of an experiment over several datasets: dataset x system on one metric, ranked.

Ranks are per dataset, 1 = best (the lowest value for a lower-is-better metric such as hallucination_rate), tied
scores share their average rank (as in MTEB/BEIR tables), and a system with no score on a dataset (its backend
failed) takes the last rank there; a system with no score on any dataset (a metric it does not have, such as
scope_miss_rate for a system without a scope stage) is not ranked. The mean over datasets is given only for
systems scored on every dataset: a mean over fewer datasets is not comparable. Systems are ordered by average
rank, then by mean. `resolution` adds each system's rank interval over datasets and queries and the group tied
for first (`retbench.resolution`), for the systems scored on every dataset. The terminal, Markdown and HTML
reports render a `Leaderboard` (`retbench.report.leaderboard`) and compute nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from retbench.metrics.registry import lower_is_better
from retbench.resolution import RankResolution, resolve_suite
from retbench.results.model import StudyResult

SEPARATOR = "/"  # results keys of multi-dataset experiments are "<dataset>/<system>"


@dataclass
class Leaderboard:
    """`metric` per system and dataset, each system's mean over datasets and average rank, best first; with the
    rank intervals and the group tied for first (`resolution`) for the systems scored on every dataset."""

    metric: str
    datasets: list[str]
    systems: list[str]  # best first
    scores: dict[str, dict[str, float | None]]  # system -> dataset -> mean (None: no score)
    mean: dict[str, float | None]  # system -> mean over datasets (None unless scored on all)
    avg_rank: dict[str, float | None]  # None: not ranked (no score of the metric on any dataset)
    resolution: RankResolution | None = None

    def rows(self) -> list[tuple[str, list[float | None], float | None, float | None]]:
        """(system, score per dataset, mean, average rank), best first."""
        return [
            (s, [self.scores[s].get(d) for d in self.datasets], self.mean[s], self.avg_rank[s]) for s in self.systems
        ]

    def best(self, dataset: str) -> float | None:
        """The best score on a dataset (the smallest for a lower-is-better metric); None when none was scored."""
        values = [v for v in (self.scores[s].get(dataset) for s in self.systems) if v is not None]
        if not values:
            return None
        return min(values) if lower_is_better(self.metric) else max(values)


def average_ranks(values: list[float | None], lower: bool = False) -> list[float]:
    """1-based ranks, best value first (highest, or lowest for a `lower` is better metric); ties share their
    average rank; None ranks last."""
    n = len(values)
    sign = 1.0 if lower else -1.0
    order = sorted(range(n), key=lambda i: (values[i] is None, sign * (values[i] or 0.0)))
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        for pos in range(i, j + 1):
            ranks[order[pos]] = (i + j) / 2.0 + 1.0 if values[order[i]] is not None else float(n)
        i = j + 1
    return ranks


def split_key(key: str) -> tuple[str, str]:
    dataset, _, system = key.partition(SEPARATOR)
    return dataset, system


def build_leaderboard(result: StudyResult, metric: str) -> Leaderboard | None:
    """The leaderboard of `metric`, or None when the results hold a single dataset."""
    if not result.systems or not all(SEPARATOR in k for k in result.systems):
        return None
    datasets: list[str] = []
    systems: list[str] = []
    scores: dict[str, dict[str, float | None]] = {}
    for key, row in result.systems.items():
        d, s = split_key(key)
        datasets += [d] if d not in datasets else []
        systems += [s] if s not in systems else []
        value = row.value(metric)
        scores.setdefault(s, {})[d] = None if value is None or math.isnan(value) else value
    if len(datasets) < 2:
        return None
    rank_sum = dict.fromkeys(systems, 0.0)
    lower = lower_is_better(metric)
    for d in datasets:
        for s, r in zip(systems, average_ranks([scores[s].get(d) for s in systems], lower), strict=True):
            rank_sum[s] += r
    # a system with no score on any dataset (scope_miss_rate of an unscoped system) is not ranked, not last
    avg_rank: dict[str, float | None] = {
        s: rank_sum[s] / len(datasets) if any(v is not None for v in scores[s].values()) else None for s in systems
    }
    mean: dict[str, float | None] = {}
    for s in systems:
        vals = [scores[s].get(d) for d in datasets]
        mean[s] = sum(v for v in vals if v is not None) / len(vals) if all(v is not None for v in vals) else None
    sign = 1.0 if lower else -1.0

    def by_mean(s: str) -> float:  # the best mean first among equal average ranks; no mean after any
        m = mean.get(s)
        return sign * m if m is not None else math.inf

    order = sorted(systems, key=lambda s: (avg_rank[s] is None, avg_rank[s] or 0.0, by_mean(s)))
    resolution = resolve_suite(result, datasets, order, metric, SEPARATOR)
    return Leaderboard(metric, datasets, order, scores, mean, avg_rank, resolution)
