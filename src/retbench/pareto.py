"""Pareto fronts: the choices worth considering when quality is traded against latency or cost.

A point is on the front when no other point is at least as good on every axis and strictly better on one
(quality higher; latency and cost lower). Two axes (`pareto_front`: quality against one cost, latency or money)
and three (`pareto_front_3`: quality, mean latency and cost per 1,000 queries together). Equal points are all
kept. The reports (`retbench.report.tradeoff`, `report.costs`, `report.tune`) draw and name the fronts given here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One system or setting: its quality (higher is better) and a cost (latency in ms, or money: lower is better)."""

    name: str
    quality: float
    cost: float


def pareto_front(points: Sequence[Point]) -> list[str]:
    """Names of the points no other point dominates (quality >= and cost <=, one of them strictly), cheapest first."""
    front = [
        p
        for p in points
        if not any(
            q.quality >= p.quality and q.cost <= p.cost and (q.quality > p.quality or q.cost < p.cost) for q in points
        )
    ]
    return [p.name for p in sorted(front, key=lambda p: (p.cost, -p.quality))]


def pareto_front_3(points: Sequence[tuple[str, float, float, float]]) -> list[str]:
    """Names of the (name, quality, latency, cost) points no other point dominates, cheapest first."""

    def beats(q: tuple[str, float, float, float], p: tuple[str, float, float, float]) -> bool:
        no_worse = q[1] >= p[1] and q[2] <= p[2] and q[3] <= p[3]
        return no_worse and (q[1] > p[1] or q[2] < p[2] or q[3] < p[3])

    front = [p for p in points if not any(beats(q, p) for q in points)]
    return [p[0] for p in sorted(front, key=lambda p: (p[3], p[2], -p[1]))]
