"""Rows of the per-group breakdown, the latency-by-stage and the LLM usage tables.

Gathered from metrics.json blocks into `SystemSummary` (report/model.py) and shared by the Markdown,
HTML and terminal renderers, so every output shows the same numbers formatted the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retbench.report import fmt

BREAKDOWN_NOTE = (
    "Means over the questions of each group (tags, `category:<name>`, answerable / unanswerable); "
    "n/a: no question of the group is one the metric applies to."
)
STAGE_HEADER = ("system", "stage", "queries", "p50 ms", "p95 ms", "mean ms", "total s", "suite s")
STAGE_NOTE = (
    "`search`: wall time retbench measured around each query's whole search (for an http system the whole "
    "request; a scope's selector and a rerank stage included); `scope`: the scope selector's own time; other stages "
    "are those the system reports in its answers (`retrieval`, `generation`, ...). p50/p95 are linear-interpolation "
    "percentiles over queries, `not measured` where the search was timed as batches (each query's share of its "
    "batch's wall time: only the mean is measured); suite s is the wall time of the cell's stages (encode, index, "
    "search, rerank, evaluate) in the process that finished it."
)
USAGE_HEADER = ("system", "LLM stage", "calls", "cached", "input tokens", "output tokens", "estimated cost")
USAGE_NOTE = (
    "Calls made (cache hits cost nothing); cost = input tokens / 1000 x price_input_per_1k + output tokens / "
    "1000 x price_output_per_1k at the llm block's prices (0 unless configured); tokens marked ~ were estimated "
    "as characters / 4 where the server reported no usage."
)


def breakdown_header(metrics: Sequence[str]) -> list[str]:
    return ["group", "n", *(fmt.metric_label(m) for m in metrics)]


def breakdown_rows(summary: Any, metrics: Sequence[str]) -> list[list[str]]:
    """One row per group of one system: its size and the mean of every metric over it."""
    rows = []
    for group, block in summary.breakdown.items():
        means = block.get("means") or {}
        rows.append([group, fmt.count(block.get("n")), *(fmt.num(means.get(m)) for m in metrics)])
    return rows


def stage_rows(systems: Sequence[Any]) -> list[list[str]]:
    """One row per (system, stage) with p50/p95/mean in ms, the total over queries and the suite time."""
    rows = []
    for s in systems:
        stages = (s.stages or {}).get("stages") or {}
        suite = fmt.num((s.stages or {}).get("suite_seconds"), 2)
        for stage, v in stages.items():
            pct = ["not measured"] * 2 if v.get("amortised") else [fmt.ms(v.get("p50_s")), fmt.ms(v.get("p95_s"))]
            rows.append(
                [
                    s.name,
                    stage,
                    fmt.count(v.get("n")),
                    *pct,
                    fmt.ms(v.get("mean_s")),
                    fmt.num(v.get("total_s"), 2),
                    suite,
                ]
            )
    return rows


def usage_rows(systems: Sequence[Any]) -> list[list[str]]:
    """One row per (system, LLM stage): calls, cache hits, tokens and estimated cost."""
    rows = []
    for s in systems:
        for stage, u in (s.usage or {}).items():
            mark = "~" if u.get("tokens_estimated") else ""
            rows.append(
                [
                    s.name,
                    stage,
                    fmt.count(u.get("calls")),
                    fmt.count(u.get("cached")),
                    mark + fmt.count(u.get("input_tokens")),
                    mark + fmt.count(u.get("output_tokens")),
                    fmt.num(u.get("cost"), 6),
                ]
            )
    return rows
