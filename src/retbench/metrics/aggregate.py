"""How per-query values become a metric's one number, the way trec_eval's `all` line does it.

Each metric row declares its kind (`base.AGGREGATES`): `mean` (almost all), `gmean` (trec_eval's gm_map and
gm_bpref: exp of the mean of log(max(value, 1e-5)), trec_eval's `te_calc_avg_meas_s_gm`) or `sum`
(trec_eval's num_ret, num_rel, num_rel_ret, num_nonrel_judged_ret, and num_q, which sums a 1 per query).
NaN (a metric that does not apply to a query) is left out, as for means.

A bootstrap interval is computed for the same number: each kind is a mean of transformed values put back
by a monotone map (gmean: the mean of logs, then exp; sum: the mean times the number of queries), so the
percentile interval of the mean maps onto the interval of the aggregate exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retbench.errors import ConfigError
from retbench.metrics.base import AGGREGATES, MIN_GEO_MEAN
from retbench.metrics.prefs import COUNTS as PREF_COUNTS
from retbench.metrics.registry import parse_metric
from retbench.stats.paired import column_means

__all__ = ["AGGREGATES", "aggregate_kind", "aggregate_kinds", "from_means", "summarize", "to_means"]


def aggregate_kind(metric: str, default_k: int = 5) -> str:
    """The aggregate kind of a metric name (`mean` for names the registry does not know: read-back tables)."""
    try:
        return parse_metric(metric, default_k).aggregate
    except ConfigError:  # trec_eval's preference counts (made from -R prefs, not from the registry) are summed
        return "sum" if metric in PREF_COUNTS else "mean"


def aggregate_kinds(metrics: Sequence[str], default_k: int = 5) -> list[str]:
    return [aggregate_kind(m, default_k) for m in metrics]


def to_means(values: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """The values whose plain mean each aggregate is a monotone map of (logs for gmean; NaN kept)."""
    out = np.array(values, dtype=np.float64, copy=True)
    for j, kind in enumerate(kinds):
        if kind == "gmean":
            col = out[..., j]
            with np.errstate(invalid="ignore"):
                out[..., j] = np.where(np.isnan(col), np.nan, np.log(np.maximum(col, MIN_GEO_MEAN)))
        elif kind not in AGGREGATES:
            raise ConfigError(f"unknown aggregate {kind!r}; expected one of {', '.join(AGGREGATES)}")
    return out


def from_means(means: np.ndarray, kinds: Sequence[str], counts: np.ndarray) -> np.ndarray:
    """Map means of `to_means` values back to the aggregates (`counts`: values averaged, per metric)."""
    out = np.array(means, dtype=np.float64, copy=True)
    for j, kind in enumerate(kinds):
        if kind == "gmean":
            out[..., j] = np.exp(out[..., j])
        elif kind == "sum":
            out[..., j] = out[..., j] * counts[j]
    return out


def summarize(values: np.ndarray, kinds: Sequence[str]) -> np.ndarray:
    """One number per column of a query x metric table: each column's aggregate."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.count_nonzero(~np.isnan(values), axis=0)
    if all(k == "mean" for k in kinds):
        return column_means(values)
    out = from_means(column_means(to_means(values, kinds)), kinds, counts)
    sums = [j for j, k in enumerate(kinds) if k == "sum"]
    if sums:  # a plain sum, not mean * n: trec_eval adds the counts (exact integers)
        out[sums] = np.where(counts[sums] > 0, np.nansum(values[:, sums], axis=0), np.nan)
    return out
