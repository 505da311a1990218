"""Ship criteria: absolute floors and regression limits against a baseline, with severities.

A typical criteria file lets recall@5 gate merges and keeps MRR as a diagnostic (a warning):

    alpha: 0.05                   # significance level for require_significance
    require_significance: false   # default for every gate
    max_failed_queries: 0         # candidate backend failures tolerated before exit 3
    gates:
      - name: retrieval_recall_at_5
        metric: recall@5          # optional: without it the name is read as a metric name
        threshold: 0.85           # absolute floor for the candidate's mean
        regression_max: 0.03      # may not drop more than 3 pp below the baseline
        severity: error           # error blocks the merge; warning only reports
        require_significance: true  # a drop beyond regression_max blocks only when p < alpha
        sequential: true          # optional: anytime-valid sequences (see below)
        tags:                     # optional per-tag floors and drop limits
          multi_hop: {threshold: 0.70, regression_max: 0.05}
    movement:                     # optional label-free limits against the baseline run (no qrels needed)
      - {name: churn, measure: changed_set, k: 10, max: 0.20}   # at most 20% of queries change their top 10
      - {name: rbo, measure: rbo_ext, p: 0.9, min: 0.80}        # RBO_EXT at p = 0.9 at least 0.8

With `sequential: true` (top level: every gate's default) a gate also reports anytime-valid confidence
sequences of the candidate's mean and of candidate − baseline (`retbench.sequential`), and its
require_significance asks whether that sequence excludes 0 on the worse side instead of p < alpha: a CI job
that re-runs the gate after every batch of queries and stops at the first failure keeps its error rate.

The file's model is `retbench.config.criteria.CriteriaModel` (`retbench schema criteria`); loading
checks every key and names the file, line and field of a bad one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from retbench.config import field_lines, load, validate
from retbench.config.criteria import CriteriaModel
from retbench.config.criteria import Limits as LimitsBlock
from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metric
from retbench.metrics.registry import value_range as declared_range

SEVERITIES = ("error", "warning")
EPS = 1e-12


@dataclass
class Limits:
    """A floor and a drop limit (either may be absent)."""

    threshold: float | None = None
    regression_max: float | None = None


@dataclass
class Gate:
    name: str
    metric: str  # canonical registry name, e.g. "recall@5"
    limits: Limits
    severity: str = "error"
    require_significance: bool = False
    tags: dict[str, Limits] = field(default_factory=dict)
    line: int | None = None
    sequential: bool = False  # anytime-valid sequences (retbench.sequential) judge and report the gate


@dataclass
class Movement:
    """A label-free gate (`movement:` in the file): a `retbench diff` measure's mean held under `max` or above
    `min`, between the baseline's and the candidate's top k."""

    name: str
    measure: str  # a key of metrics.overlap.MEASURES
    k: int = 10
    p: float = 0.9
    max: float | None = None
    min: float | None = None
    severity: str = "error"
    line: int | None = None


@dataclass
class Criteria:
    gates: list[Gate]
    alpha: float = 0.05
    max_failed_queries: int = 0
    path: str = "<criteria>"
    movement: list[Movement] = field(default_factory=list)

    @property
    def needs_baseline(self) -> bool:
        return any(
            g.limits.regression_max is not None or any(t.regression_max is not None for t in g.tags.values())
            for g in self.gates
        )


# -- reading the criteria file ------------------------------------------------------------------
def value_range(name: str) -> tuple[float, float] | None:
    return declared_range(name)


def resolve_metric(name: str) -> str:
    """Canonical metric name from the registry, which also reads underscore spellings (`retrieval_recall_at_5`)."""

    return parse_metric(name).name


def _limits(block: LimitsBlock, where: str, path: str, span: tuple[float, float] | None) -> Limits:
    """The limits of a gate or tag, refused when they cannot be met on the metric's range."""
    lim = Limits(block.threshold, block.regression_max)
    if span is not None:
        lo, hi = span
        if lim.threshold is not None and not lo <= lim.threshold <= hi:
            raise ConfigError(
                f"threshold {lim.threshold:g} is outside the metric's range [{lo:g}, {hi:g}]"
                + (" (write 0.85, not 85)" if hi == 1.0 and lim.threshold > 1 else ""),
                path=path,
                field=f"{where}.threshold",
            )
        if lim.regression_max is not None and lim.regression_max > hi - lo:
            raise ConfigError(
                f"regression_max {lim.regression_max:g} is larger than the metric's whole range [{lo:g}, {hi:g}]",
                path=path,
                field=f"{where}.regression_max",
            )
    return lim


def parse_criteria(raw: object, path: str = "<criteria>", text: str = "") -> Criteria:
    """Validate a loaded criteria mapping (`config.criteria.CriteriaModel`); errors name the field.

    `text` (the file's) gives each gate the line that gate-time errors name.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("a criteria file is a mapping with a 'gates' list", path=path)
    model = validate(CriteriaModel, raw, path)
    lines = field_lines(text) if text else {}
    gates: list[Gate] = []
    for i, g in enumerate(model.gates):
        where = f"gates[{i}]"
        metric = resolve_metric(g.metric if g.metric is not None else g.name)
        span = value_range(metric)
        sig = g.require_significance if g.require_significance is not None else model.require_significance
        limits = _limits(g, where, path, span)
        tags = {str(t): _limits(v, f"{where}.tags.{t}", path, span) for t, v in g.tags.items()}
        seq = g.sequential if g.sequential is not None else model.sequential
        gates.append(Gate(g.name, metric, limits, g.severity, sig, tags, lines.get(where), seq))
    movement = [
        Movement(m.name, m.measure, m.k, m.p, m.max, m.min, m.severity, lines.get(f"movement[{i}]"))
        for i, m in enumerate(model.movement)
    ]
    return Criteria(gates, float(model.alpha), model.max_failed_queries, path, movement)


def _parse_file(raw: object, source: str) -> Criteria:
    return parse_criteria(raw, source, Path(source).read_text(encoding="utf-8"))


def load_criteria(path: str | Path) -> Criteria:
    """Read and validate a ship-criteria YAML file (errors name file:line and field)."""
    return load(path, _parse_file, what="criteria file")
