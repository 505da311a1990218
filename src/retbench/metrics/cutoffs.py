"""Metrics that differ only in their cutoff, grouped into families: the curves a report draws over k."""

from __future__ import annotations

from retbench.errors import InputError
from retbench.metrics.registry import parse_metric


def metric_curves(metrics: list[str]) -> dict[str, list[tuple[int, str]]]:
    """Metrics that differ only in their cutoff, grouped (recall@1, recall@5, recall@100 -> 'recall').

    A family is the metric's registry name plus every parameter set away from its default (`recall(rel=2)`), so
    `recall@10(rel=2)` and `recall@10` never share a curve; only families with two or more cutoffs are kept,
    each sorted by k. Names the registry does not know, and metrics without a cutoff, are left out."""
    fams: dict[str, list[tuple[int, str]]] = {}
    for m in metrics:
        try:
            spec = parse_metric(m)
        except InputError:
            continue
        if spec.k is None:
            continue
        extra = {p: v for p, v in spec.params.items() if v != spec.row.params.get(p)}
        label = spec.metric.name + (
            "(" + ",".join(f"{p}={v:g}" for p, v in sorted(extra.items())) + ")" if extra else ""
        )
        fams.setdefault(label, []).append((spec.k, m))
    return {f: sorted(v) for f, v in fams.items() if len({k for k, _ in v}) >= 2}
