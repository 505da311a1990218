"""`retbench plan` in words: per gate, the drop the gold set can detect and the labelled queries a target needs.

`retbench.planning` computes; this module says it, with the same "detectable" sentence the gate's PR
comment uses (`detects_sentence`), so the two cannot disagree. Sizes read in the metric's unit (`fmt.size`):
percentage points for shares (recall, precision, hit rate), absolute decimals for scores (MRR, nDCG, MAP).
"""

from __future__ import annotations

import math

from retbench.metrics.registry import lower_is_better
from retbench.planning import MetricPlan, Plan
from retbench.power import MAX_QUERIES
from retbench.report import fmt


def size(metric: str, value: float | None) -> str:
    """A size of drop without its sign in the metric's unit: recall 0.051 -> '5.1 pp', MRR 0.051 -> '0.051'
    ('n/a' when unknown)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    return fmt.size(metric, value)


def detects_sentence(metric: str, detectable: float, limit: float | None, change: str = "drop") -> str:
    """'this gold set detects a drop of 5.1 pp; the limit is 3.0 pp' for a share, '... of 0.051; the limit is
    0.030' for a score (the limit part only when there is one)."""
    if not math.isfinite(detectable):
        head = f"this gold set cannot detect a {change} at 80% power"
    else:
        head = f"this gold set detects a {change} of {size(metric, detectable)}"
    return head + (f"; the limit is {size(metric, limit)}" if limit is not None else "")


def _count(n: int | None, possible: bool = False) -> str:
    """A count of labelled queries; None is "more than" the simulation's bound where the drop is possible
    (the normal approximation found a count), else no count at all."""
    if n is not None:
        return f"{n:,}"
    return f"more than {MAX_QUERIES:,}" if possible else "none"


def _labels(n: int | None) -> str:
    return f"{n:,} human labels" if n is not None else "more human labels than any number (the judge adds noise)"


def _power(p: float) -> str:
    return fmt.pct(p, 0) if math.isfinite(p) else "n/a"


def _model_note(plan: Plan) -> str:
    if plan.candidate is None:
        return (
            "No candidate was given, so a drop is modelled as queries that lose their value entirely and nothing "
            "else moving: the easiest drop to see. Real changes also move other queries and need more; "
            "pass --candidate for the per-query changes of a real one."
        )
    note = (
        f"Per-query changes are those of `{plan.candidate}` against `{plan.baseline}`, re-centred on each target drop."
    )
    lost = [m.gate for m in plan.metrics if m.model == "lost"]
    if lost:
        note += (
            f" The candidate changed no query on {', '.join(lost)}, so there the lost-queries model stands in "
            "(the easiest drop to see)."
        )
    return note


def render_plan(plan: Plan) -> str:
    """Markdown (it reads as plain text in a terminal): verdict sentences first, then the table."""
    lines = [
        f"### Label budget for {plan.criteria}",
        "",
        f"Baseline `{plan.baseline}`"
        + (f", candidate `{plan.candidate}`" if plan.candidate else "")
        + f"; paired two-sided randomization test at alpha {plan.alpha:g}, {fmt.pct(plan.power, 0)} power.",
        "",
    ]
    for m in plan.metrics:
        lines.append(f"- {m.gate} ({fmt.metric_label(m.metric)}): {_sentence(m)}.")
    lines += [
        "",
        "| Gate | Metric | Labelled queries | Detectable | Limit | Target drop | Power now (normal / simulated) "
        "| Queries needed (normal / simulated) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in plan.metrics:
        lines.append(
            f"| {m.gate} ({m.severity}) | {fmt.metric_label(m.metric)} | {m.n:,} | {size(m.metric, m.detectable)} | "
            f"{size(m.metric, m.limit) if m.limit is not None else '—'} | {size(m.metric, m.effect)} | "
            f"{_power(m.power_normal)} / {_power(m.power_simulated)} | "
            f"{_count(m.needed_normal)} / {_count(m.needed_simulated, m.needed_normal is not None)} |"
        )
    budgets = [m for m in plan.metrics if m.ppi is not None]
    if budgets:
        lines += ["", "With LLM labels (prediction-powered inference, classical PPI):"]
        for m in budgets:
            b = m.ppi
            assert b is not None
            lines.append(
                f"- {m.gate} ({fmt.metric_label(m.metric)}): for the interval width that {b.n_human:,} "
                f"human-labelled queries give alone, PPI needs {_labels(b.needed)} beside the {b.n_llm:,} "
                f"LLM-labelled queries, and {_labels(b.needed_unlimited)} beside unlimited LLM-labelled ones."
            )
    lines += [
        "",
        _model_note(plan),
        f"Detectable: the smallest drop found with {fmt.pct(plan.power, 0)} power with the queries at hand "
        "(normal approximation). Queries needed: labelled queries for the target drop, by the normal "
        f"approximation and by simulation ({plan.n_sims:,} resampled data sets, each tested with "
        f"{plan.n_flips:,} sign flips, seed {plan.seed}). The two differ where few queries change: the exact "
        "test is then coarser than its approximation.",
    ]
    return "\n".join(lines) + "\n"


def _sentence(m: MetricPlan) -> str:
    change = "rise" if lower_is_better(m.metric) else "drop"
    text = detects_sentence(m.metric, m.detectable, m.limit, change)
    if m.sees_limit is False:
        target = f"a {change} of {size(m.metric, m.effect)}"
        if m.needed_normal is None:
            text += f" (no number of labelled queries would detect {target}: the model of the data has no {change} that large)"
        else:
            text += f" (about {m.needed_normal:,} labelled queries would detect {target})"
    return text
