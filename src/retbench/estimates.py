"""Which labels a number comes from: human, LLM or prediction-powered, with n human / n LLM and its interval.

A metric's mean is labelled by where its relevance labels came from: human qrels alone (`human`), LLM qrels alone
(`llm`, the judge's bias not corrected: a classical interval over the LLM-labelled queries), or LLM labels
corrected by the queries that carry human labels too (`ppi`, `stats.ppi_mean`: Angelopoulos et al., Science
2023). The report, `retbench eval` and the typed results carry the block `estimate_block` builds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from retbench.data import Run
from retbench.metrics.registry import parse_metric, value_range
from retbench.stats.paired import column_means
from retbench.stats.ppi import classical_mean_ci, ppi_mean

#: one metric's `estimate` entry: source, note (str), n_human, n_llm (int), mean, ci_low, ci_high (float)
Estimate = dict[str, str | int | float]

# -- which labels a number comes from ------------------------------------------------------------------
LABEL_SOURCE_NOTES = {
    "human": "human labels",
    "llm": "LLM labels: judge bias not corrected",
    "ppi": "prediction-powered: LLM labels corrected by the queries that carry human labels too",
}


def estimate_block(
    source: str,
    n_human: int,
    n_llm: int,
    mean: float,
    low: float,
    high: float,
    bounds: tuple[float, float] | None = None,
) -> Estimate:
    """One metric's `estimate` entry: which labels the number comes from, how many queries of each, its CI.

    With `bounds` (the metric's `value_range`), a mean or interval end outside them is clipped to them and the entry
    says so (`clipped`: "[0, 1]"): a PPI estimate adds a correction to the LLM mean, so it can leave the range of
    the metric (a share below 0 or above 1), which no value of the metric can."""
    block: Estimate = {
        "source": source,
        "n_human": int(n_human),
        "n_llm": int(n_llm),
        "mean": mean,
        "ci_low": low,
        "ci_high": high,
        "note": LABEL_SOURCE_NOTES[source],
    }
    if bounds is not None:
        lo, hi = bounds
        inside = [min(max(float(v), lo), hi) if v == v else v for v in (mean, low, high)]  # NaN stays NaN
        if inside != [mean, low, high]:
            block.update(mean=inside[0], ci_low=inside[1], ci_high=inside[2], clipped=f"[{lo:g}, {hi:g}]")
    return block


def llm_estimate(values: np.ndarray, alpha: float = 0.05) -> Estimate:
    """The `llm` entry: the mean of LLM-made per-query values with the classical (CLT) interval, NaN left out."""
    vals = values[~np.isnan(values)]
    nan = float("nan")
    mean, low, high = classical_mean_ci(vals, alpha) if vals.size >= 2 else (column_means(vals[:, None])[0], nan, nan)
    return estimate_block("llm", 0, int(vals.size), float(mean), low, high)


def doubly_labelled(
    run: Run, human: Mapping[str, Mapping[str, int]], llm: Mapping[str, Mapping[str, int]], depth: int
) -> list[str]:
    """The queries that carry both label sources, for prediction-powered estimates (human qrels order).

    Labels come per (query, document), so a query counts as doubly labelled when it is in both qrels and
    every document in the run's top `depth` for it that either source judges has a human label AND an LLM
    label: its metric is then computed once wholly from human labels and once wholly from LLM labels over
    the same ranking. (`judge-relevance` labels only pairs the human qrels leave open, so the doubly
    labelled queries are those a person and the judge both graded: a gold-set tier, a calibration sample.)
    """
    out = []
    for q in human:
        if q not in llm:
            continue
        h, m = human[q], llm[q]
        top = run.docs(q)[:depth] if q in run else []
        if all((d in h) == (d in m) for d in map(str, top)):
            out.append(q)
    return out


class ScoredTable(Protocol):
    """What `label_estimates` reads of a per-query table (`evaluation.Evaluation` has it; the evaluation package
    imports this module, so the function names only these members)."""

    @property
    def query_ids(self) -> Sequence[str]: ...
    @property
    def metrics(self) -> Sequence[str]: ...
    @property
    def default_k(self) -> int: ...
    def column(self, metric: str) -> np.ndarray: ...


def label_estimates(
    reported: ScoredTable,
    llm: ScoredTable,
    human: ScoredTable | None,
    doubly: Sequence[str],
    alpha: float = 0.05,
) -> dict[str, Estimate]:
    """{metric: estimate entry} for a table scored with LLM labels (`reported`: LLM or human+LLM qrels).

    `ppi` (`stats.ppi_mean`, classical PPI) where at least 2 doubly labelled queries and 1 other LLM-labelled
    query have a value: the human-label values of the doubly labelled queries (`human`), the LLM-label values
    of the same queries and of the LLM-labelled queries without human labels (`llm`, scored with the LLM
    qrels alone). A query enters where both tables count it (a query either source skips for having no
    relevant document is left out of that side). n_human counts the doubly labelled queries, n_llm every
    LLM-labelled one. Otherwise `llm`: the reported values with the classical interval, judge bias uncorrected.
    Answer metrics (references, judge verdicts) do not read relevance labels and get no entry here.
    """
    both = set(doubly)
    hpos = {q: i for i, q in enumerate(human.query_ids)} if human is not None else {}
    lab = [(hpos[q], i) for i, q in enumerate(llm.query_ids) if q in both and q in hpos]
    unl = [i for i, q in enumerate(llm.query_ids) if q not in both]
    out: dict[str, Estimate] = {}
    for m in reported.metrics:
        if parse_metric(m, reported.default_k).row.answer_side:
            continue  # answer metrics read references or verdicts, not relevance labels
        if human is not None and m in human.metrics and m in llm.metrics:
            hcol, lcol = human.column(m), llm.column(m)
            pairs = [(hcol[h], lcol[i]) for h, i in lab if not (np.isnan(hcol[h]) or np.isnan(lcol[i]))]
            fu = lcol[unl][~np.isnan(lcol[unl])]
            if len(pairs) >= 2 and fu.size >= 1:
                y, f = np.array(pairs).T
                est, low, high = ppi_mean(y, f, fu, alpha=alpha)
                out[m] = estimate_block("ppi", len(pairs), len(pairs) + fu.size, est, low, high, value_range(m))
                continue
        out[m] = llm_estimate(reported.column(m), alpha)
    return out


def source_label(estimate: Mapping[str, object] | None, *, value: bool = False) -> str:
    """How a report names an estimate's source ("" for human labels, the ordinary case):
    "PPI, 120 human / 300 LLM" or "LLM labels, judge bias uncorrected"; with `value`, a PPI label leads
    with its own mean and interval (it differs from the mean of the labels scored), and says when that interval
    was clipped to the metric's range ("clipped to [0, 1]")."""
    if not estimate or estimate.get("source") in (None, "human"):
        return ""
    if estimate["source"] == "ppi":
        head = "PPI"
        if value and estimate.get("mean") is not None:
            head += f" {estimate['mean']:.4f}"
            if estimate.get("ci_low") is not None and estimate.get("ci_high") is not None:
                head += f" [{estimate['ci_low']:.4f}, {estimate['ci_high']:.4f}]"
            if estimate.get("clipped"):
                head += f" (clipped to {estimate['clipped']})"
        return f"{head}, {estimate['n_human']} human / {estimate['n_llm']} LLM"
    return "LLM labels, judge bias uncorrected"
