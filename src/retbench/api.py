"""The Python one-liners: score and compare runs given as dicts, DataFrames, paths or Run/Qrels.

Argument order follows pytrec_eval and ranx (`qrels` first). Inputs are read by `io/frames.py`;
the numbers come from the same `evaluation.evaluate` and `compare.compare` the CLI uses, so a dict
scored here and a TREC file scored by `retbench eval` give identical values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retbench.compare import Comparison
from retbench.compare import compare as compare_evaluations
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.evaluation import evaluate as evaluate_run
from retbench.io.frames import as_qrels, as_run
from retbench.metrics.registry import EVAL_METRICS

__all__ = ["compare", "evaluate"]

DEFAULT_METRICS = EVAL_METRICS


def evaluate(
    qrels: Any,
    run: Any,
    metrics: Sequence[str] | str = DEFAULT_METRICS,
    *,
    relevance_level: int = 1,
    no_relevant: str = "skip",
    mode: str = "trec_eval",
    default_k: int = 5,
    ignore_identical_ids: bool = False,
    split: str = "test",
    name: str = "",
) -> Evaluation:
    """Score `run` against `qrels`; each may be a dict, a DataFrame, a TREC/BEIR path, or a Run/Qrels.

    Settings are those of `retbench eval` (trec_eval counting: a judged query the run lacks scores 0).

    >>> evaluate({"q1": {"d1": 1, "d3": 1}}, {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}}, ["P@2", "recall@3"]).means()
    {'P@2': 0.5, 'recall@3': 1.0}
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    ranked = as_run(run, name)
    return evaluate_run(
        ranked,
        as_qrels(qrels, split),
        names,
        relevance_level=relevance_level,
        no_relevant=no_relevant,
        mode=mode,
        default_k=default_k,
        system=name or ranked.name or "run",
        ignore_identical_ids=ignore_identical_ids,
    )


def compare(
    runs: Mapping[str, Any],
    qrels: Any,
    metrics: Sequence[str] | str = DEFAULT_METRICS,
    *,
    baseline: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    **settings: Any,
) -> Comparison:
    """Paired comparison of `{name: run}` (each run in any form `evaluate` takes): deltas, CIs, Holm-adjusted p-values.

    Pairs are every system against `baseline`, or all pairs when it is None.

    >>> qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    >>> cmp = compare({"a": {"q1": {"d1": 1.0}, "q2": {"d9": 1.0}}, "b": {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}}, qrels, ["mrr"])
    >>> cmp.pair("a", "b").metric("mrr").delta
    0.5
    """
    if not isinstance(runs, Mapping) or len(runs) < 2:
        raise InputError("compare needs a {name: run} mapping with at least two runs", field="runs")
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    judged = as_qrels(qrels, settings.pop("split", "test"))
    evaluations = [evaluate(judged, run, names, name=str(n), **settings) for n, run in runs.items()]
    pairs = None
    if baseline is not None:
        from retbench.compare import all_pairs

        pairs = all_pairs([str(n) for n in runs], baseline)
    return compare_evaluations(evaluations, pairs, evaluations[0].metrics, n_resamples=n_resamples, seed=seed)
