"""Which metric a study ranks systems on when its config names no `primary:` (`default_primary`).

A results table often lists measures that say something true about a run without measuring how well the system
retrieves: counts summed over queries (`num_rel`, `num_ret`), measures of the judgements or of how far the labels
cover a ranking (`num_q`, `judged@k`, `holes@k`, `unj`, `rbp_resid`), and diagnostics that only some systems have
(`scope_miss_rate`, n/a for a system without a scope stage). Ranking systems on one of those would put a system
that misses every answer above one that finds them, so the default skips them; a config may still name any metric
it computes as `primary:`. Every ranking then reads the metric's direction from `registry.lower_is_better`.
"""

from __future__ import annotations

from collections.abc import Sequence

from retbench.errors import InputError
from retbench.metrics.registry import JUDGEMENT_MEASURES, parse_metric

#: measures of how far the labels cover a ranking: they describe the labels, so they never rank systems by default
COVERAGE_MEASURES = JUDGEMENT_MEASURES | {"judged"}


def ranks_systems(name: str) -> bool:
    """Whether `name` can be the metric a study ranks systems on by default: not a count (aggregate "sum"), not a
    measure of the judgements (`keeps_unanswered`: num_q, scope_miss_rate) and not the labels' coverage."""
    try:
        spec = parse_metric(name)
    except InputError:
        return False
    return not (spec.row.aggregate == "sum" or spec.row.keeps_unanswered or spec.metric.name in COVERAGE_MEASURES)


def default_primary(metrics: Sequence[str]) -> str | None:
    """The metric studies rank systems on when a config names no `primary:`: the first of `metrics` that
    `ranks_systems`, else the first of `metrics` (None for no metric)."""
    return next((m for m in metrics if ranks_systems(m)), metrics[0] if metrics else None)


__all__ = ["COVERAGE_MEASURES", "default_primary", "ranks_systems"]
