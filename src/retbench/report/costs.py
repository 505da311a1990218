"""What each system costs, for the reports: cost per 1,000 queries, indexing, and the three-way Pareto front.

The figures come from `results.costs.gather_costs` (per system, measured quantities times the experiment's
stated prices); this module says them, with each price's source, "missing" where a measured item has no price
(never 0), and "example prices" where the prices are marked as examples.

A system is on the **Pareto front over quality, latency and cost** when no other system is at least as good on
all three (quality higher or equal, mean latency and cost per 1,000 queries lower or equal) and strictly better
on one (`retbench.pareto.pareto_front_3`); systems without a known cost are left out of that front and named.
"""

from __future__ import annotations

import math
from typing import Any

from retbench.pareto import pareto_front_3
from retbench.report.model import ReportData


def money(value: float | None, currency: str) -> str:
    """0.000123 USD -> '0.000123 USD'; None -> 'missing'."""
    return "missing" if value is None else f"{value:.3g} {currency}"


COST_HEADER = ["system", "per 1,000 queries", "indexing (once)", "index storage per month", "missing prices"]
_PARTS = ("per_1k_queries", "indexing", "index_per_month")


def cost_table(data: ReportData | None, costs: dict[str, dict[str, Any]]) -> tuple[list[list[str]], list[str]]:
    """(rows under COST_HEADER, notes): each system's costs and gaps; the prices' sources; with the report's data,
    the three-way front."""
    rows, sources = [], {}
    for name, c in costs.items():
        missing = sorted({m["unit"] for k in _PARTS for m in c[k]["missing"]})
        unmeasured = [f"{u} (not measured)" for k in _PARTS for u in c[k]["not_measured"]]
        rows.append(
            [name, *(money(c[k]["total"], c["currency"]) for k in _PARTS), ", ".join(missing + unmeasured) or "none"]
        )
        for k in _PARTS:
            for item in c[k]["items"]:
                sources[item["unit"]] = item["source"] + (" (example)" if item["example"] else "")
    notes = []
    if sources:
        notes.append("Prices: " + "; ".join(f"{u}: {src}" for u, src in sources.items()) + ".")
    if any(c["examples"] for c in costs.values()):
        notes.append("Prices marked (example) are examples to show the arithmetic, not quotes for a deployment.")
    front = front_points(data, costs) if data is not None else []
    if len(front) >= 2:
        notes.append(
            "Pareto front over quality, latency and cost (no other system at least as good on all three): "
            + ", ".join(pareto_front_3(front))
            + "."
        )
    return rows, notes


def front_points(data: ReportData, costs: dict[str, dict[str, Any]]) -> list[tuple[str, float, float, float]]:
    """(name, primary mean, mean latency ms, cost per 1,000 queries) of the systems with all three known."""
    out = []
    for s in data.systems:
        total = costs.get(s.name, {}).get("per_1k_queries", {}).get("total")
        mean, lat = s.means.get(data.primary, math.nan), s.latency.get("mean")
        if total is not None and isinstance(lat, int | float) and math.isfinite(mean):
            out.append((s.name, float(mean), float(lat), float(total)))
    return out
