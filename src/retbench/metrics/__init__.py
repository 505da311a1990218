"""The metric engine: judges build a GainMatrix, metrics are vectorized functions of it.

Public entry points: `judge_qrels` (Run + Qrels -> GainMatrix), `parse_metric` (metric names)
and `register` (the catalog), and `retbench.evaluation.evaluate` for the whole pipeline.
"""

from retbench.metrics.base import Metric, MetricContext
from retbench.metrics.catalog import available, register
from retbench.metrics.gain import GainMatrix
from retbench.metrics.judges.qrels import judge_qrels
from retbench.metrics.registry import MetricSpec, parse_metric, parse_metrics

__all__ = [
    "GainMatrix",
    "Metric",
    "MetricContext",
    "MetricSpec",
    "available",
    "judge_qrels",
    "parse_metric",
    "parse_metrics",
    "register",
]
