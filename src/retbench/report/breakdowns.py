"""Rows of the per-group breakdown, the latency-by-stage and the LLM usage tables.

Gathered from metrics.json blocks into `SystemSummary` (report/model.py) and shared by the Markdown,
HTML and terminal renderers, so every output shows the same numbers formatted the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retbench.report import fmt

BREAKDOWN_NOTE = (
    "Means over the questions of each group (tags, `category:<name>`, answerable / unanswerable, "
    "`doc_type:<type>`: the type of the question's gold documents); n/a: no question of the group is one the metric "
    "applies to. error / timeout / empty: share of the group's questions whose search failed, timed out or returned "
    "nothing."
)
RATES = ("error", "timeout", "empty")  # the failure statuses a breakdown group counts (studies/cell.breakdown)
RATE_HEADER = ("system", "group", "n", *RATES)
RATE_NOTE = "Groups with a failed, timed-out or empty search: share of the group's questions with each status."
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


def has_rates(summary: Any) -> bool:
    """Did the system's breakdown record failure rates (results written before they existed did not)?"""
    return any("rates" in block for block in summary.breakdown.values())


def breakdown_header(metrics: Sequence[str], rates: bool = False) -> list[str]:
    return ["group", "n", *(fmt.metric_label(m) for m in metrics), *(RATES if rates else ())]


def breakdown_rows(summary: Any, metrics: Sequence[str]) -> list[list[str]]:
    """One row per group of one system: its size, the mean of every metric over it and its failure rates
    (when recorded: `has_rates`)."""
    rows = []
    rated = has_rates(summary)
    for group, block in summary.breakdown.items():
        means, rates = block.get("means") or {}, block.get("rates") or {}
        row = [group, fmt.count(block.get("n")), *(fmt.num(means.get(m)) for m in metrics)]
        rows.append(row + ([fmt.pct(rates.get(r)) for r in RATES] if rated else []))
    return rows


def rate_rows(systems: Sequence[Any]) -> list[list[str]]:
    """One row per (system, group) where some question failed, timed out or came back empty: the short view the
    terminal shows (where failures cluster, by document type say)."""
    rows = []
    for s in systems:
        for group, block in (s.breakdown or {}).items():
            rates = block.get("rates") or {}
            if any(rates.get(r) for r in RATES):
                rows.append([s.name, group, fmt.count(block.get("n")), *(fmt.pct(rates.get(r)) for r in RATES)])
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
