"""Anytime-valid confidence sequences for what compare, the gate and history report (`retbench.sequential`).

Each sequence runs over the queries in the order the evaluation lists them (the order a CI job or a
labelling effort adds them in), or over a history's runs in time order. Its latest interval may be looked
at after every query or every run, and a watcher may stop the first time it crosses a limit: the chance
that any look misses the truth stays at most alpha. A fixed-sample interval watched that way does not keep
its level. Metrics with a declared range get the betting sequence; others the asymptotic normal mixture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retbench.alignment import PerQueryScores, align
from retbench.comparison import Comparison
from retbench.metrics.registry import value_range
from retbench.sequential import ConfidenceSequence, diff_cs, mean_cs

#: said wherever a sequence is shown
WATCHING = "anytime-valid: may be looked at after every query and stopped at any time"


def paired_sequences(a: np.ndarray, b: np.ndarray, metric: str, alpha: float) -> dict[str, Any]:
    """The sequences of A's mean, B's mean and B − A over the same queries, as JSON-ready summaries."""
    bounds = value_range(metric)
    out: dict[str, Any] = {"delta": diff_cs(a, b, bounds, alpha).summary()}
    out["a"] = mean_cs(a, bounds, alpha).summary()
    out["b"] = mean_cs(b, bounds, alpha).summary()
    return out


def attach_sequences(cmp: Comparison, evaluations: Sequence[PerQueryScores], alpha: float | None = None) -> None:
    """Give every compared (pair, metric) its sequences (`MetricComparison.sequence`), in place.

    `alpha` defaults to 1 − the comparison's confidence, so the sequence sits beside the CI at its level.
    """
    level = 1.0 - cmp.confidence if alpha is None else alpha
    by_name = {ev.system: ev for ev in evaluations}
    for pair in cmp.pairs:
        al = align(by_name[pair.system_a], by_name[pair.system_b], [m.metric for m in pair.metrics])
        for j, m in enumerate(pair.metrics):
            rows = ~np.isnan(al.a[:, j])
            m.sequence = paired_sequences(al.a[rows, j], al.b[rows, j], m.metric, level)


def series_sequence(values: Sequence[float], metric: str, alpha: float = 0.05) -> ConfidenceSequence:
    """A nightly series' mean over its runs in time order (each run's value one observation)."""
    return mean_cs(np.asarray(values, dtype=np.float64), value_range(metric), alpha)
