"""Label-free gates (`movement:` in a criteria file): how far the candidate's top k may move from the baseline's.

Each limit is checked on the mean of one `retbench diff` measure over the queries of either run (a query one run
lacks or failed on is an empty ranking there, so it counts as moved): `max` caps it (e.g. at most 20% of queries
change their top 10: `changed_set`, max 0.2), `min` floors it (RBO_EXT at p = 0.9 at least 0.8). The outcome
joins the metric gates' (`gates.apply.GateReport`): a failed error limit blocks the merge (exit 1), a warning
reports. The bootstrap interval of the mean is reported beside it, as with every number, but the verdict reads
the mean: movement is measured on the whole query log, not sampled from it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from retbench.criteria import EPS, Movement
from retbench.data import Run
from retbench.movement import RunDiff, diff


@dataclass
class MovementCheck:
    """One movement limit applied: the measure's mean (with its interval) against `max` and/or `min`."""

    limit: Movement
    value: float
    low: float
    high: float
    n: int
    changed: int  # queries whose top k changed as a set (what a reviewer reads first)
    queries: int

    @property
    def passed(self) -> bool:
        if math.isnan(self.value):
            return False
        ok_max = self.limit.max is None or self.value <= self.limit.max + EPS
        ok_min = self.limit.min is None or self.value >= self.limit.min - EPS
        return ok_max and ok_min

    @property
    def blocks(self) -> bool:
        return not self.passed and self.limit.severity == "error"

    def sentence(self) -> str:
        """One line for the comment and the failure message."""
        bound = " and ".join(
            f"{word} {v:g}" for word, v in (("at most", self.limit.max), ("at least", self.limit.min)) if v is not None
        )
        return (
            f"{self.limit.name} ({self.limit.measure}@{self.limit.k}) is {self.value:.3f}, limit {bound}"
            f" ({self.changed} of {self.queries} queries change their top {self.limit.k})"
        )

    def to_dict(self) -> dict[str, object]:
        m = self.limit
        return {
            "name": m.name,
            "measure": m.measure,
            "k": m.k,
            "p": m.p,
            "max": m.max,
            "min": m.min,
            "severity": m.severity,
            "value": self.value,
            "ci_low": self.low,
            "ci_high": self.high,
            "n": self.n,
            "changed": self.changed,
            "queries": self.queries,
            "passed": self.passed,
            "blocks": self.blocks,
        }


def movement_checks(
    limits: Sequence[Movement], baseline: Run, candidate: Run, *, n_resamples: int = 10_000, seed: int = 0
) -> list[MovementCheck]:
    """Every movement limit checked between the two runs (one diff per distinct (k, p))."""
    diffs: dict[tuple[int, float], RunDiff] = {}
    out = []
    for lim in limits:
        key = (lim.k, lim.p)
        if key not in diffs:
            diffs[key] = diff(baseline, candidate, k=lim.k, p=lim.p, top=0, n_resamples=n_resamples, seed=seed)
        d = diffs[key]
        m = d.measure(lim.measure)
        out.append(MovementCheck(lim, m.mean, m.low, m.high, m.n, d.counts["changed_set"], d.counts["queries"]))
    return out
