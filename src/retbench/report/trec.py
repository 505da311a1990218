"""trec_eval's own text output for an Evaluation, so retbench's figures can be diffed against trec_eval line by line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retbench.errors import ConfigError
from retbench.metrics.registry import parse_metric, trec_order

if TYPE_CHECKING:
    from retbench.evaluation import Evaluation


def _value(v: float, integer: bool) -> str:
    """trec_eval's formats: `%ld` for its counts (num_ret, num_rel, ...), `%6.4f` for the rest."""
    if integer:
        return str(int(v)) if v == v else "nan"
    return f"{v:6.4f}"


def trec_lines(ev: Evaluation, *, per_query: bool = False) -> list[str]:
    """trec_eval's own output (`measure<TAB>query-or-all<TAB>value`, name padded to 22, `%6.4f`).

    Measures use trec_eval's names and its order (its measure table, then each family's parameters in
    ascending order), read from the metric rows; per-query lines (trec_eval -q) come first, query ids in
    trec_eval's (byte) order, every counted query included (trec_eval 10 -c -q prints the unanswered ones,
    scored 0), without the measures trec_eval prints only in the summary (gm_map, gm_bpref, num_q); then the
    `all` lines, each the metric's aggregate (mean, geometric mean or sum). Measures trec_eval lacks keep
    their retbench names and come last.
    """
    names = [t or m for t, m in zip(ev.trec_names, ev.metrics, strict=True)]
    order = sorted(range(len(names)), key=lambda j: (trec_order(names[j]) if ev.trec_names[j] else (1e9, 0.0), j))
    rows = [_row(m, ev.default_k) for m in ev.metrics]
    lines: list[str] = []
    if per_query:
        for q, i in sorted((q, i) for i, q in enumerate(ev.query_ids)):
            lines.extend(f"{names[j]:<22}\t{q}\t{_value(ev.values[i, j], rows[j][1])}" for j in order if rows[j][0])
    means = ev.means()
    lines.extend(f"{names[j]:<22}\tall\t{_value(means[ev.metrics[j]], rows[j][1])}" for j in order)
    return lines


def _row(metric: str, default_k: int) -> tuple[bool, bool]:
    """(printed per query, printed as an integer) for a metric name."""
    try:
        m = parse_metric(metric, default_k).metric
    except ConfigError:  # a read-back table's metric no longer registered (a plugin): printed like any other
        return True, False
    return bool(getattr(m, "per_query_line", True)), getattr(m, "aggregate", "mean") == "sum"
