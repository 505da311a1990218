"""Plans for a ship-criteria file: what drop each gated metric can detect with the labelled queries at hand,
and how many labelled queries a target drop needs (`retbench plan`; the gate shows the same figure).

The statistics are in `retbench.power`; this module picks the queries and per-query values the gate
would use (the same alignment, failed or missing queries scoring 0, queries a metric does not apply to
left out) and applies them gate by gate at the criteria's alpha.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from retbench.alignment import PerQueryScores, align
from retbench.criteria import Criteria
from retbench.errors import InputError
from retbench.io.files import json_safe
from retbench.metrics.registry import lower_is_better, value_range
from retbench.power import (
    MAX_QUERIES,
    DropModel,
    check_simulation,
    detectable,
    needed_normal,
    needed_simulated,
    power_normal,
    power_simulated,
    ppi_labels_needed,
)
from retbench.stats.paired import check_seed

#: the drop to plan for when neither --effect nor the gate's regression_max gives one
DEFAULT_EFFECT = 0.03
DEFAULT_POWER = 0.8


def worst_value(metric: str, values: np.ndarray) -> float:
    """The value a query falls to when it is lost: the bottom of the metric's range (the top when lower is
    better), 0 or the worst value seen when the metric declares no range."""
    span = value_range(metric)
    if lower_is_better(metric):
        return span[1] if span is not None else float(np.max(values))
    return span[0] if span is not None else min(0.0, float(np.min(values)))


def drop_model(metric: str, baseline: np.ndarray, candidate: np.ndarray | None = None) -> DropModel:
    """The `DropModel` of one metric's aligned per-query values (paired when a candidate changed anything)."""
    return DropModel.from_values(baseline, candidate, worst=worst_value(metric, baseline))


@dataclass
class LabelBudget:
    """With LLM labels: the human labels prediction-powered inference needs for the interval width that the
    human-labelled queries give alone (see retbench.stats.ppi_mean and retbench.power.ppi_labels_needed)."""

    n_human: int  # queries with both human and LLM labels (the doubly labelled sample the variances come from)
    n_llm: int  # queries with LLM labels
    needed: int | None  # None: the LLM term alone is already wider, no number of human labels will do
    needed_unlimited: int | None  # the same with LLM labels on unlimited queries: the floor PPI can reach


@dataclass
class MetricPlan:
    """One gate's figures: the drop it can see now, and the labelled queries a target drop needs."""

    gate: str
    metric: str
    severity: str
    n: int  # labelled queries the metric applies to
    model: str  # "paired" (a candidate's deltas) or "lost" (the lost-queries model)
    observed: float | None  # the candidate's mean change (candidate - baseline), when given
    limit: float | None  # the gate's regression_max
    effect: float  # the target drop planned for
    detectable: float  # minimum detectable drop with n queries (normal approximation)
    power_normal: float  # power to detect `effect` with n queries
    power_simulated: float
    needed_normal: int | None  # labelled queries needed for `effect` (None: not reachable)
    needed_simulated: int | None
    ppi: LabelBudget | None = None

    @property
    def sees_limit(self) -> bool | None:
        """Whether the gold set detects a drop as small as the limit (None: no limit)."""
        if self.limit is None:
            return None
        return bool(math.isfinite(self.detectable) and self.detectable <= self.limit + 1e-12)


@dataclass
class Plan:
    criteria: str
    baseline: str
    candidate: str | None
    alpha: float
    power: float
    n_sims: int
    n_flips: int
    seed: int
    metrics: list[MetricPlan] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON for machines (NaN and infinities become null)."""
        data = {k: v for k, v in asdict(self).items() if k != "metrics"}
        data["simulation"] = {
            "test": "paired randomization (sign flip), two-sided",
            "data_sets": data.pop("n_sims"),
            "sign_flips": data.pop("n_flips"),
            "seed": data.pop("seed"),
            "resampling": "queries' per-query deltas drawn with replacement",
            "max_queries": MAX_QUERIES,  # a simulated count of null beside a normal count: more than this
        }
        data["metrics"] = [{**asdict(m), "sees_limit": m.sees_limit} for m in self.metrics]
        return dict(json_safe(data))


def plan_criteria(
    criteria: Criteria,
    baseline: PerQueryScores,
    candidate: PerQueryScores | None = None,
    *,
    effect: float | None = None,
    power: float = DEFAULT_POWER,
    n_sims: int = 1000,
    n_flips: int = 1000,
    seed: int = 0,
    llm: PerQueryScores | None = None,
) -> Plan:
    """Plan every gate of `criteria` from the baseline's per-query values (and a paired candidate's).

    The target drop is `effect` when given, else each gate's regression_max, else DEFAULT_EFFECT. `llm`:
    the baseline system scored with LLM labels, for the human labels PPI would need (`LabelBudget`).
    """
    if effect is not None and not effect > 0.0:
        raise InputError(f"the effect to plan for must be a positive drop, got {effect:g}", field="effect")
    if not 0.0 < power < 1.0:
        raise InputError(f"power must lie between 0 and 1, got {power:g}", field="power")
    n_sims, n_flips = check_simulation(n_sims, n_flips)
    check_seed(seed)
    metrics = list(dict.fromkeys(g.metric for g in criteria.gates))
    for ev, role in ((baseline, "baseline"), (candidate, "candidate")):
        if ev is None:
            continue
        lacking = [m for m in metrics if m not in ev.metrics]
        if lacking:
            raise InputError(
                f"the {role} system {ev.system!r} lacks {', '.join(lacking)}, which {criteria.path} gates "
                f"(has: {', '.join(ev.metrics)})",
                field="metric",
            )
    al = align(baseline, candidate if candidate is not None else baseline, metrics)
    out = Plan(
        criteria.path,
        baseline.system,
        candidate.system if candidate else None,
        criteria.alpha,
        power,
        n_sims,
        n_flips,
        seed,
    )
    for gate in criteria.gates:
        j = al.metrics.index(gate.metric)
        rows = np.flatnonzero(~np.isnan(al.a[:, j]))
        a = al.a[rows, j]
        model = drop_model(gate.metric, a, al.b[rows, j] if candidate is not None else None)
        target = effect if effect is not None else gate.limits.regression_max or DEFAULT_EFFECT
        n = int(rows.size)
        alpha = criteria.alpha
        out.metrics.append(
            MetricPlan(
                gate=gate.name,
                metric=gate.metric,
                severity=gate.severity,
                n=n,
                model=model.kind,
                observed=model.observed,
                limit=gate.limits.regression_max,
                effect=float(target),
                detectable=detectable(model, n, alpha, power),
                power_normal=power_normal(model, n, target, alpha),
                power_simulated=power_simulated(model, n, target, alpha, n_sims=n_sims, n_flips=n_flips, seed=seed),
                needed_normal=needed_normal(model, target, alpha, power),
                needed_simulated=needed_simulated(
                    model, target, alpha, power, n_sims=n_sims, n_flips=n_flips, seed=seed
                ),
                ppi=label_budget(gate.metric, baseline, llm) if llm is not None else None,
            )
        )
    return out


def _by_query(ev: PerQueryScores, metric: str) -> dict[str, float]:
    j = ev.metrics.index(metric)
    return {q: float(v) for q, v in zip(ev.query_ids, np.asarray(ev.values)[:, j], strict=True) if np.isfinite(v)}


def label_budget(metric: str, human: PerQueryScores, llm: PerQueryScores) -> LabelBudget:
    """The PPI label budget of one metric from the same system scored with human and with LLM labels."""
    if metric not in llm.metrics:
        raise InputError(f"the LLM-labelled scores lack {metric} (has: {', '.join(llm.metrics)})", field="metric")
    h, f = _by_query(human, metric), _by_query(llm, metric)
    both = [q for q in h if q in f]
    if len(both) < 2:
        raise InputError(
            f"{metric}: {len(both)} queries carry both human and LLM labels; the label budget needs at least 2",
            field="llm-qrels",
        )
    y = np.array([h[q] for q in both])
    yhat = np.array([f[q] for q in both])
    return LabelBudget(
        len(both), len(f), ppi_labels_needed(y, yhat, len(f), len(both)), ppi_labels_needed(y, yhat, None, len(both))
    )
