"""Paired A/B comparison of retrieval systems: deltas, confidence intervals and significance.

Two systems are compared query by query on the same queries: the unit of evidence is the
per-query delta `d = B - A` of one metric. Everything here is a function of such delta vectors:

- **randomization test** (the primary test, as in Smucker et al. 2007): sign-flip permutation of
  the deltas, two-sided on |mean|, p = (count + 1) / (resamples + 1), seeded so it is reproducible;
- **paired bootstrap** percentile 95% CI of the mean delta;
- **paired t-test** and **Wilcoxon signed-rank** (zero_method "wilcox": zero deltas are dropped,
  they are ties; exact null distribution up to 50 non-zero deltas, conditional on tied ranks,
  else the normal approximation with tie correction and no continuity correction);
- **Holm** step-down correction across every (metric, pair) compared, separately for each test;
- effect size d_z = mean delta / sd of deltas, and win/tie/loss counts.

What is compared is kept small on purpose: by default each system against a baseline (the first system,
or the config's `baseline:`) on the primary metrics (the config's `primary:` list, else its first
metric), not every pair on every metric. Holm's strictest step needs the smallest p below
alpha / (number of tests), and a randomization p cannot go below 1 / (resamples + 1); so with 300 tests
at 10,000 resamples the smallest Holm-adjusted p is 300 / 10,001 = 0.03 and most rows read 1.00. The
number of resamples, unless given, is sized from the family (`resamples_for`), and a comparison whose
resamples are too few for its family says so (`Comparison.note`).

Systems are put on the same query rows by `retbench.alignment` first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from retbench.alignment import Aligned, PerQueryScores, align, column_index, side_counts
from retbench.errors import InputError
from retbench.io.files import json_safe
from retbench.metrics.registry import lower_is_better
from retbench.results.layout import all_pairs
from retbench.stats.paired import (
    bootstrap_cis,
    check_alpha,
    check_resamples,
    check_seed,
    effect_size,
    holm,
    paired_ttest,
    randomization_tests,
    wilcoxon_signed_rank,
)

TIE_TOLERANCE = 1e-12
TESTS = ("randomization", "ttest", "wilcoxon")
ALPHA = 0.05
DEFAULT_RESAMPLES = 10_000
MAX_AUTO_RESAMPLES = 200_000  # about 2 s per test over 1,000 queries; beyond it the family is too large to test
RESOLUTION_MARGIN = 10


def resamples_for(family: int, alpha: float = ALPHA) -> int:
    """Resamples for a family of `family` tests: enough that the smallest reachable randomization p,
    1 / (R + 1), is at most alpha / (10 x family) -- so a test can pass Holm's strictest step even with a
    few resamples as extreme as the observed delta -- at least 10,000, at most 200,000."""
    need = math.ceil(RESOLUTION_MARGIN * max(family, 1) / alpha) - 1
    return min(max(DEFAULT_RESAMPLES, need), MAX_AUTO_RESAMPLES)


def resolution_note(family: int, n_resamples: int, alpha: float = ALPHA) -> str | None:
    """A sentence when no randomization p of a `family`-test comparison can pass Holm at `alpha` (its
    smallest p, 1 / (R + 1), is not below alpha / family), else None."""
    floor = 1.0 / (n_resamples + 1)
    if family < 1 or floor < alpha / family:
        return None
    need = math.floor(family / alpha) + 1  # the fewest R with 1 / (R + 1) < alpha / family
    return (
        f"with {family} tests, p cannot go below {min(1.0, family * floor):.2g} (Holm-adjusted) at "
        f"{n_resamples:,} resamples, so no randomization p can be below {alpha:g}: use --resamples {need:,} "
        "or more, or test fewer pairs or metrics"
    )


# -- results ------------------------------------------------------------------------------------
@dataclass
class QueryChange:
    query_id: str
    text: str
    a: float
    b: float
    delta: float
    status_a: str
    status_b: str


@dataclass
class MetricComparison:
    """One metric of one pair: means, delta with CI, tests (raw and Holm-adjusted), W/T/L."""

    metric: str
    n: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    effect_size: float
    wins: int  # B better than A (B's value lower, for a lower-is-better metric)
    ties: int
    losses: int
    pvalues: dict[str, float]
    adjusted: dict[str, float] = field(default_factory=dict)
    statistics: dict[str, float] = field(default_factory=dict)
    top_changes: list[QueryChange] = field(default_factory=list)
    #: anytime-valid sequences of A, B and B − A ({"a", "b", "delta"}: `anytime.attach_sequences`), if asked
    sequence: dict[str, Any] | None = None

    @property
    def p(self) -> float:
        """The primary p-value: randomization test, Holm-adjusted when adjusted."""
        return self.adjusted.get("randomization", self.pvalues["randomization"])


@dataclass
class PairComparison:
    system_a: str
    system_b: str
    counts_a: dict[str, int]
    counts_b: dict[str, int]
    metrics: list[MetricComparison]
    # metric -> why it was not compared: no query has a value on both sides (it applies to one system only,
    # as scope_miss_rate applies to scoped systems); such a metric gets no means, tests or Holm slot
    unpaired: dict[str, str] = field(default_factory=dict)

    def metric(self, name: str) -> MetricComparison:
        for m in self.metrics:
            if m.metric == name:
                return m
        raise KeyError(name)


@dataclass
class Comparison:
    """All pairs compared, with Holm applied across every (metric, pair) for each test."""

    pairs: list[PairComparison]
    n_resamples: int
    seed: int
    confidence: float = 0.95
    correction: str = "holm"
    wilcoxon_zero_method: str = "wilcox"
    alpha: float = ALPHA

    @property
    def family(self) -> int:
        """How many tests Holm corrects across (every metric of every pair)."""
        return sum(len(p.metrics) for p in self.pairs)

    @property
    def metrics(self) -> list[str]:
        """The metrics tested, in order."""
        return list(dict.fromkeys(m.metric for p in self.pairs for m in p.metrics))

    @property
    def note(self) -> str | None:
        """Said beside the tables when the resamples are too few for the family to reach significance."""
        return resolution_note(self.family, self.n_resamples, self.alpha)

    def to_dict(self) -> dict[str, Any]:
        return json_safe({**asdict(self), "family": self.family, "note": self.note})

    def rows(self) -> list[dict[str, str | int | float]]:
        """One flat row per (pair, metric): means, delta, CI, W/T/L and raw and adjusted p-values."""
        out = []
        for p in self.pairs:
            for m in p.metrics:
                row: dict[str, str | int | float] = {
                    "system_a": p.system_a,
                    "system_b": p.system_b,
                    "metric": m.metric,
                    "n": m.n,
                }
                row.update(mean_a=m.mean_a, mean_b=m.mean_b, delta=m.delta, ci_low=m.ci_low, ci_high=m.ci_high)
                row.update(effect_size=m.effect_size, wins=m.wins, ties=m.ties, losses=m.losses)
                row.update({f"p_{t}": v for t, v in m.pvalues.items()})
                row.update({f"p_{t}_{self.correction}": v for t, v in m.adjusted.items()})
                out.append(row)
        return out

    def to_pandas(self) -> Any:
        """`rows()` as a DataFrame (needs pandas: `pip install 'retbench[pandas]'`)."""
        from retbench.io.frames import pandas

        return pandas().DataFrame(self.rows())

    def pair(self, a: str, b: str) -> PairComparison:
        for p in self.pairs:
            if (p.system_a, p.system_b) == (a, b):
                return p
        raise KeyError((a, b))


Progress = Callable[[str, int, int], None]  # (stage, done, total): long comparisons report as they go


def compare_pair(
    a: PerQueryScores,
    b: PerQueryScores,
    metrics: Sequence[str] | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    top: int = 5,
) -> PairComparison:
    """Compare system B against system A on each metric (unadjusted p-values).

    `top_changes` lists the `top` queries B improved most and the `top` it hurt most, with their text.
    """
    n_resamples = check_resamples(n_resamples)
    check_alpha(confidence, "confidence")
    return _compare_pairs([(a, b)], metrics, queries, n_resamples, seed, confidence, top)[0]


@dataclass
class _Cell:
    """One metric of one aligned pair before its tests: the queries it applies to and their values."""

    metric: str
    rows: np.ndarray
    a: np.ndarray
    b: np.ndarray

    @property
    def deltas(self) -> np.ndarray:
        return self.b - self.a


def _cells(al: Aligned) -> list[_Cell]:
    out = []
    for j, metric in enumerate(al.metrics):
        rows = np.flatnonzero(~np.isnan(al.a[:, j]))  # the queries this metric applies to
        out.append(_Cell(metric, rows, al.a[rows, j], al.b[rows, j]))
    return out


def _compare_pairs(
    sides: Sequence[tuple[PerQueryScores, PerQueryScores]],
    metrics: Sequence[str] | None,
    queries: Mapping[str, str] | None,
    n_resamples: int,
    seed: int,
    confidence: float,
    top: int,
    progress: Progress | None = None,
) -> list[PairComparison]:
    """Every pair's metrics, the resampled tests of all of them at once (`stats.randomization_tests` and
    `stats.bootstrap_cis` share one seeded resample matrix among the delta vectors of one length, so each
    number is the one a test of that vector alone gives)."""
    aligned = [align(a, b, metrics) for a, b in sides]
    every = [_cells(al) for al in aligned]
    cells = [[c for c in pair if c.rows.size] for pair in every]
    flat = [c.deltas for pair in cells for c in pair]

    def stage(name: str) -> Callable[[int, int], None] | None:
        return None if progress is None else lambda done, total: progress(name, done, total)

    pvalues = iter(randomization_tests(flat, n_resamples, seed, progress=stage("randomization test")))
    cis = iter(bootstrap_cis(flat, n_resamples, seed, confidence, progress=stage("bootstrap CI")))
    out = []
    for (a, b), al, pair, all_cells in zip(sides, aligned, cells, every, strict=True):
        ms = [_metric_comparison(c, al, next(pvalues), next(cis), queries, top) for c in pair]
        unpaired = {c.metric: _why_unpaired(a, b, c.metric) for c in all_cells if not c.rows.size}
        out.append(PairComparison(a.system, b.system, side_counts(a, al, "a"), side_counts(b, al, "b"), ms, unpaired))
    return out


def _why_unpaired(a: PerQueryScores, b: PerQueryScores, metric: str) -> str:
    """Why a metric has no query with a value on both sides: which system it does not apply to."""
    none = [
        ev.system
        for ev in (a, b)
        if np.isnan(np.asarray(ev.values, dtype=np.float64)[:, column_index(ev, metric)]).all()
    ]
    if none:
        who = " and ".join(repr(n) for n in none)
        return f"{who} {'have' if len(none) > 1 else 'has'} no value on any query (the metric does not apply to it)"
    return "no query has a value on both sides"


def _metric_comparison(
    cell: _Cell,
    al: Aligned,
    p_randomization: float,
    ci: tuple[float, float],
    queries: Mapping[str, str] | None,
    top: int,
) -> MetricComparison:
    """A cell's means, delta, CI, tests, W/T/L and most changed queries."""
    va, vb, d, rows = cell.a, cell.b, cell.deltas, cell.rows
    qids = [al.query_ids[i] for i in rows.tolist()]
    tt = paired_ttest(va, vb)
    wx = wilcoxon_signed_rank(va, vb)
    # the `top` biggest gains and the `top` biggest losses, best first; a gain of a lower-is-better metric
    # (hallucination_rate, holes@10) is a fall
    better = -d if lower_is_better(cell.metric) else d
    desc = np.argsort(-better, kind="stable")
    gains = [i for i in desc[:top].tolist() if better[i] > TIE_TOLERANCE]
    losses = [i for i in desc[::-1][:top].tolist() if better[i] < -TIE_TOLERANCE][::-1]
    changes = [
        QueryChange(
            qids[i],
            (queries or {}).get(qids[i], ""),
            float(va[i]),
            float(vb[i]),
            float(d[i]),
            al.status_a[rows[i]],
            al.status_b[rows[i]],
        )
        for i in gains + losses
    ]
    return MetricComparison(
        metric=cell.metric,
        n=int(d.size),
        mean_a=float(va.mean()),
        mean_b=float(vb.mean()),
        delta=float(d.mean()),
        ci_low=ci[0],
        ci_high=ci[1],
        effect_size=effect_size(d),
        wins=int(np.count_nonzero(better > TIE_TOLERANCE)),
        ties=int(np.count_nonzero(np.abs(d) <= TIE_TOLERANCE)),
        losses=int(np.count_nonzero(better < -TIE_TOLERANCE)),
        pvalues={"randomization": p_randomization, "ttest": tt.pvalue, "wilcoxon": wx.pvalue},
        statistics={"ttest": tt.statistic, "wilcoxon": wx.statistic},
        top_changes=changes,
    )


def adjust(pairs: Sequence[PairComparison]) -> None:
    """Holm-adjust each test's p-values across every (metric, pair), in place."""
    cells = [m for p in pairs for m in p.metrics]
    for test in TESTS:
        adjusted = holm([m.pvalues[test] for m in cells])
        for m, v in zip(cells, adjusted.tolist(), strict=True):
            m.adjusted[test] = v


def compare(
    evaluations: Sequence[PerQueryScores],
    pairs: Sequence[tuple[str, str]] | None = None,
    metrics: Sequence[str] | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    n_resamples: int | None = None,
    seed: int = 0,
    confidence: float = 0.95,
    top: int = 5,
    progress: Progress | None = None,
) -> Comparison:
    """Compare the given pairs of systems (default: all pairs) and Holm-correct across them all.

    `n_resamples` None: sized from the number of tests (`resamples_for`). `progress(stage, done, total)`
    is called as the resampled tests advance (a comparison of hundreds of tests takes seconds)."""
    if n_resamples is not None:  # checked before any work, so a bad count fails fast
        check_resamples(n_resamples)
    check_seed(seed)
    check_alpha(confidence, "confidence")
    by_name: dict[str, PerQueryScores] = {}
    for ev in evaluations:
        if ev.system in by_name:
            raise InputError(f"two systems are named {ev.system!r}; give them distinct names", field="system")
        by_name[ev.system] = ev
    if pairs is None:
        pairs = all_pairs(list(by_name))
    if not pairs:
        raise InputError("nothing to compare: need at least two systems", field="system")
    for x, y in pairs:
        for s in (x, y):
            if s not in by_name:
                raise InputError(f"unknown system {s!r} (have: {', '.join(by_name)})", field="system")
    if metrics is None:
        names = {s for p in pairs for s in p}
        metrics = [m for m in by_name[pairs[0][0]].metrics if all(m in by_name[s].metrics for s in names)]
    if n_resamples is None:
        n_resamples = resamples_for(len(pairs) * len(metrics))
    sides = [(by_name[x], by_name[y]) for x, y in pairs]
    result = _compare_pairs(sides, metrics, queries, n_resamples, seed, confidence, top, progress)
    adjust(result)
    return Comparison(result, n_resamples, seed, confidence)
