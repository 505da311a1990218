"""The stage tables of the results report: rerank stages and agreement with the reference system.

Rows come from the blocks of each system's result (`rerank`, `first_stage`,
`reference`); the HTML and Markdown renderers show the same rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from retbench.report import fmt
from retbench.results.blocks import Ceiling
from retbench.results.model import SystemResult

if TYPE_CHECKING:
    from retbench.report.model import ReportData

__all__ = ["AGREEMENT_HEADER", "AGREEMENT_NOTE", "RERANK_HEADER", "RERANK_NOTE", "agreement_rows", "rerank_rows"]


AGREEMENT_NOTE = (
    "overlap@k = |top k ∩ reference top k| / |reference top k|, averaged over queries whose reference ranking is "
    "not empty; with exact search as the reference it is the index's recall against exact search (filtered: on the "
    "queries that carry a metadata filter)."
)
AGREEMENT_HEADER = ("system", "reference", "overlap@k", "queries", "filtered overlap@k", "filtered queries")


def agreement_rows(data: ReportData) -> list[list[str]]:
    """Overlap@k of each system's top k with the reference system's (config `reference:`), overall and on
    the queries with a metadata filter: an ANN store's recall against exact (filtered) search."""
    rows = []
    for s in data.systems:
        block = _result(data, s.name).reference
        if not isinstance(block, dict):
            continue
        k = block.get("k")
        filtered = block.get("filtered_queries")
        rows.append(
            [
                s.name,
                f"{block.get('system')} (k={k})",
                fmt.num(block.get("overlap"), 3),
                str(block.get("queries", 0)),
                fmt.num(block.get("filtered_overlap"), 3) if filtered is not None else "no filtered queries",
                str(filtered or 0),
            ]
        )
    return rows


RERANK_HEADER = (
    "system",
    "depth",
    "first-stage recall@depth",
    "metric",
    "first stage",
    "reranked",
    "delta [95% CI]",
    "p",
    "W/T/L",
)
RERANK_NOTE = (
    "A reranker only re-orders the first stage's top `depth`, so the first stage's recall@depth is the ceiling of the "
    "reranked run's recall@depth. Reranked vs first stage is paired on the same queries (bootstrap CI of the mean "
    "delta, randomization-test p); the first-stage run is kept in systems/<name>/first_stage/."
)


def rerank_rows(data: ReportData) -> list[list[str]]:
    """One row per reranked system, on the primary metric (else the first one compared): the first-stage ceiling
    and the paired reranked-vs-first-stage test from the result's `rerank` block (studies/rerank.py)."""
    rows = []
    for s in data.systems:
        res = _result(data, s.name)
        block = res.rerank
        if not isinstance(block, dict):
            continue
        ceiling: Ceiling | Mapping[str, None] = block.get("ceiling") or {}
        first = {m: v.value for m, v in (res.first_stage or {}).items()}
        pairs = block.get("vs_first_stage") or {}
        shown = [data.primary] if data.primary in pairs else list(pairs)[:1]
        for m in shown:
            p = pairs[m]
            ci = p.get("ci") or [None, None]
            rows.append(
                [
                    s.name,
                    str(block.get("depth")),
                    f"{ceiling.get('metric')} = {fmt.num(ceiling.get('value'))}",
                    m,
                    fmt.num(first.get(m)),
                    fmt.num(s.means.get(m)),
                    f"{fmt.signed(p.get('delta'))} [{fmt.signed(ci[0])}, {fmt.signed(ci[1])}]",
                    fmt.pvalue(p.get("p")),
                    f"{p.get('wins', 0)}/{p.get('ties', 0)}/{p.get('losses', 0)}",
                ]
            )
    return rows


def _result(data: ReportData, name: str) -> SystemResult:
    """The system's typed result (an empty one when the report holds none)."""
    found = data.result.systems.get(name) if data.result is not None else None
    return found if found is not None else SystemResult(name)
