"""The Python one-liners: score and compare runs given as dicts, DataFrames, paths or Run/Qrels; gate a
candidate against ship criteria (`gate`, the same flow as `retbench gate`).

Argument order follows pytrec_eval and ranx (`qrels` first). Inputs are read by `io/frames.py`;
the numbers come from the same `evaluation.evaluate` and `compare.compare` the CLI uses, so a dict
scored here and a TREC file scored by `retbench eval` give identical values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retbench.comparison import Comparison, all_pairs
from retbench.comparison import compare as compare_evaluations
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.evaluation import evaluate as evaluate_run
from retbench.gates import GateRun, gate
from retbench.io.frames import as_qrels, as_run
from retbench.metrics.registry import EVAL_METRICS, trec_cut_families
from retbench.stats.paired import check_resamples

# `gate` is the gate's whole flow (`gates.flow.gate`): what `retbench gate` runs, so both give one verdict
__all__ = ["GateRun", "compare", "evaluate", "gate", "metric_names"]

DEFAULT_METRICS = EVAL_METRICS

# trec_eval's measure families of several measures, asked for by family name as pytrec_eval users write them
# (`RelevanceEvaluator(qrels, {"ndcg_cut", "P"})`): each expands to trec_eval's defaults, read from the metric
# rows (`P`: 5 10 15 20 30 100 200 500 1000; `success`: 1 5 10; `iprec_at_recall`: 0, 0.1, ..., 1)
TREC_FAMILIES = trec_cut_families()


def metric_names(metrics: Sequence[str] | str | set[str]) -> list[str]:
    """The metric names to compute: a name, a list, or a pytrec_eval-style set of measures.

    A trec_eval family of several measures spelled exactly as trec_eval does (`P`, `recall`, `ndcg_cut`,
    `map_cut`, `success`, `iprec_at_recall`, ...; `TREC_FAMILIES`) expands to its defaults, as pytrec_eval
    computes it: `ndcg_cut` is `ndcg_cut_5` ... `ndcg_cut_1000`; so do trec_eval's nicknames (`official`,
    `all_trec`). Any other spelling (`P@10`, `ndcg_cut_10`, `ndcg`) is one metric.
    A set is taken in sorted order, so the same set always gives the same columns.
    """
    given = (
        [metrics]
        if isinstance(metrics, str)
        else sorted(metrics)
        if isinstance(metrics, (set, frozenset))
        else list(metrics)
    )
    out: list[str] = []
    for name in given:
        if not isinstance(name, str):
            raise InputError(f"a metric name must be a string, got {type(name).__name__} {name!r:.40}", field="metrics")
        cuts = TREC_FAMILIES.get(name)
        out.extend([f"{name}_{k:g}" for k in cuts] if cuts else [name])
    return out


def evaluate(
    qrels: object,
    run: object,
    metrics: Sequence[str] | str | set[str] = DEFAULT_METRICS,
    *,
    relevance_level: int = 1,
    no_relevant: str = "skip",
    mode: str = "trec_eval",
    default_k: int = 5,
    ignore_identical_ids: bool | None = None,  # None: by the mode (dropped in pytrec_eval mode, as BEIR does)
    split: str = "test",
    name: str = "",
) -> Evaluation:
    """Score `run` against `qrels`; each may be a dict, a DataFrame, a TREC/BEIR path, a Run/Qrels or a ranx Run/Qrels.

    Settings are those of `retbench eval` (trec_eval counting: a judged query the run lacks scores 0).
    `metrics` takes retbench and trec_eval names, and pytrec_eval's families (`{"ndcg_cut", "P"}`:
    see `metric_names`). Ids, scores and grades are held to the rules of the files (a NaN score or a
    fractional grade is refused, naming where it is).

    >>> evaluate({"q1": {"d1": 1, "d3": 1}}, {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}}, ["P@2", "recall@3"]).means()
    {'P@2': 0.5, 'recall@3': 1.0}
    """
    names = metric_names(metrics)
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
    runs: Mapping[str, object] | Sequence[object],
    qrels: object,
    metrics: Sequence[str] | str | set[str] = DEFAULT_METRICS,
    *,
    baseline: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    **settings: Any,
) -> Comparison:
    """Paired comparison of `{name: run}` (each run in any form `evaluate` takes): deltas, CIs, Holm-adjusted p-values.

    A list of named runs (ranx `Run`s, or `Run`s, as `ranx.compare(qrels, runs=[...])` takes them) is
    named by each run's `name`. Pairs are every system against `baseline`, or all pairs when it is None.

    >>> qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    >>> cmp = compare({"a": {"q1": {"d1": 1.0}, "q2": {"d9": 1.0}}, "b": {"q1": {"d1": 1.0}, "q2": {"d2": 1.0}}}, qrels, ["mrr"])
    >>> cmp.pair("a", "b").metric("mrr").delta
    0.5
    """
    check_resamples(n_resamples)  # before any run is scored
    if not isinstance(runs, Mapping) and isinstance(runs, Sequence) and not isinstance(runs, (str, bytes)):
        runs = _named(runs)
    if not isinstance(runs, Mapping) or len(runs) < 2:
        raise InputError("compare needs a {name: run} mapping with at least two runs", field="runs")
    names = metric_names(metrics)
    judged = as_qrels(qrels, settings.pop("split", "test"))
    evaluations = [evaluate(judged, run, names, name=str(n), **settings) for n, run in runs.items()]
    pairs = None
    if baseline is not None:
        pairs = all_pairs([str(n) for n in runs], baseline)
    return compare_evaluations(evaluations, pairs, evaluations[0].metrics, n_resamples=n_resamples, seed=seed)


def _named(runs: Sequence[object]) -> dict[str, object]:
    """A list of runs keyed by their own names (each must have a distinct, non-empty `name`)."""
    out: dict[str, object] = {}
    for i, run in enumerate(runs):
        name = getattr(run, "name", None)
        if not isinstance(name, str) or not name:
            raise InputError(f"run {i + 1} of the list has no name; pass {{name: run}} instead", field="runs")
        if name in out:
            raise InputError(f"two runs are named {name!r}; pass {{name: run}} instead", field="runs")
        out[name] = run
    return out
