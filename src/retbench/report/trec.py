"""trec_eval's own text output for an Evaluation, so retbench's figures can be diffed against trec_eval line by line."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from retbench.data.status import MISSING
from retbench.report import fmt
from retbench.stats import column_means

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation

# trec_eval prints measures in the order of its measure table, whatever the order of -m
_TREC_ORDER = ["map", "Rprec", "recip_rank", "P", "recall", "ndcg", "ndcg_cut", "map_cut", "success"]


def _trec_sort_key(name: str) -> tuple[int, int]:
    base, _, k = name.rpartition("_") if name[-1].isdigit() else (name, "", "")
    if base in _TREC_ORDER and k:
        return _TREC_ORDER.index(base), int(k)
    return (_TREC_ORDER.index(name), 0) if name in _TREC_ORDER else (len(_TREC_ORDER), 0)


def trec_lines(ev: Evaluation, *, per_query: bool = False) -> list[str]:
    """trec_eval's own output (`measure<TAB>query-or-all<TAB>value`, name padded to 22, 4 decimals).

    Measures use trec_eval's names and order; per-query lines (trec_eval -q) come first, query ids in
    trec_eval's (string) order, then the `all` lines. Judged queries the system did not answer print
    no per-query line (as with trec_eval -c -q) but count in `all`. Measures trec_eval lacks keep
    their retbench names and come last.
    """
    names = [t or m for t, m in zip(ev.trec_names, ev.metrics, strict=True)]
    order = sorted(
        range(len(names)),
        key=lambda j: (_trec_sort_key(names[j]), j) if ev.trec_names[j] else ((len(_TREC_ORDER) + 1, 0), j),
    )
    lines: list[str] = []
    if per_query:
        rows = sorted((q, i) for i, q in enumerate(ev.query_ids) if ev.status[i] != MISSING)
        for q, i in rows:
            lines.extend(f"{names[j]:<22}\t{q}\t{fmt.num(ev.values[i, j]):>6}" for j in order)
    means = column_means(ev.values) if len(ev.query_ids) else np.zeros(len(names))
    lines.extend(f"{names[j]:<22}\tall\t{fmt.num(means[j]):>6}" for j in order)
    return lines
