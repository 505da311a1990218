"""What a system costs, from what its run measured and the prices the experiment states (`config.costs`).

Two figures per system, each an itemised sum with every item's quantity, unit price and source:

- **per 1,000 queries**: the search stage's machine time (its wall seconds, on the device it ran on: a CPU or a
  GPU machine, billed per second as cloud instances are), scaled to 1,000 queries; for a system that encodes
  its queries, their encoding, measured apart from the embedding cache (the same whichever system ran first;
  a hosted embedding API's queries are listed as not measured); and the hosted-model calls
  and tokens of the answering stages (`generate`: calls, input and output tokens per 1,000 queries). The LLM
  judge is the evaluation's cost, not the system's, and is left out.
- **indexing** (once): the encode and index stages' machine time; and, per month, the saved index's size in
  GB (10^9 bytes) times the GB-month price. Document vectors read from the embedding cache were not encoded by
  this run, so their encoding is listed as not measured and the indexing total is unknown.

Nothing is priced without a stated price: an item the run measured (quantity > 0) whose price is not given is
listed under `missing`, and the total is None (shown as missing), never a sum that quietly counts it as 0. An
item the run did not measure (no saved index, no per-stage time) is listed under `not_measured`, and the total
is None too: an unmeasured part is unknown, not free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retbench.config import validate
from retbench.config.costs import CostsBlock, Price
from retbench.errors import ConfigError
from retbench.results.model import StudyResult, SystemResult

#: LLM stages whose calls are the system's own work (the judge's are the evaluation's)
SERVING_STAGES = ("generate",)


def _device_unit(resources: Mapping[str, Any]) -> str:
    devices = [str(d) for d in resources.get("devices") or []]
    return "gpu_second" if any(d.startswith(("cuda", "mps", "gpu")) for d in devices) else "cpu_second"


def _itemise(quantities: list[tuple[str, str, float | None]], prices: Mapping[str, Price]) -> dict[str, Any]:
    """(what, price key, quantity) -> {"total", "items", "missing", "not_measured"} (module docstring)."""
    items: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    unmeasured: list[str] = []
    for what, key, qty in quantities:
        if qty is None:
            unmeasured.append(what)
            continue
        if qty <= 0:
            continue
        price = prices.get(key)
        if price is None:
            missing.append({"item": what, "unit": key, "quantity": qty})
            continue
        items.append(
            {
                "item": what,
                "unit": key,
                "quantity": qty,
                "price": price.price,
                "cost": qty * price.price,
                "source": price.source,
                "example": price.example,
            }
        )
    total = None if missing or unmeasured else float(sum(i["cost"] for i in items))
    return {"total": total, "items": items, "missing": missing, "not_measured": unmeasured}


def timed_search_seconds(resources: Mapping[str, Any]) -> tuple[float | None, Mapping[str, Any] | None]:
    """(the search stage's seconds without the query-vector warm-up, the warm-up's figures or None).

    The warm-up encodes every query before the timed search, and only those the embedding cache lacks, so
    its seconds depend on which system ran first; left in, a dense system run first would cost more per query
    than the same system run second (`studies.executors.warm_query_vectors`)."""
    search = resources.get("search_seconds")
    warmup = (resources.get("search_on") or {}).get("query_warmup")
    if search is None or not isinstance(warmup, Mapping):
        return search, None
    return max(0.0, float(search) - float(warmup.get("seconds") or 0.0)), warmup


def system_costs(
    costs: CostsBlock,
    system: str,
    resources: Mapping[str, Any] | None,
    usage: Mapping[str, Any] | None,
    n_queries: int,
) -> dict[str, Any]:
    """{"currency", "per_1k_queries", "indexing", "index_per_month", "examples"} for one system (module docstring)."""
    prices = costs.for_system(system)
    res = dict(resources or {})
    unit = _device_unit(res)
    scale = 1000.0 / n_queries if n_queries > 0 else None
    search, warmup = timed_search_seconds(res)
    per_query: list[tuple[str, str, float | None]] = [
        ("search machine seconds", unit, search * scale if search is not None and scale else None)
    ]
    if warmup is not None:  # a system that encodes its queries: their encoding, whatever the cache held
        rate = warmup.get("encode_seconds_per_query")
        per_query.append(("query encoding machine seconds", unit, None if rate is None else float(rate) * 1000.0))
    for stage in SERVING_STAGES:
        block = (usage or {}).get(stage)
        if isinstance(block, Mapping) and scale:
            per_query.append((f"{stage} calls", "per_call", float(block.get("calls") or 0) * scale))
            per_query.append(
                (f"{stage} input tokens (1k)", "per_1k_input_tokens", (block.get("input_tokens") or 0) / 1000 * scale)
            )
            per_query.append(
                (
                    f"{stage} output tokens (1k)",
                    "per_1k_output_tokens",
                    (block.get("output_tokens") or 0) / 1000 * scale,
                )
            )
    index_s = [res.get("encode_seconds"), res.get("index_seconds")]
    building = sum(s for s in index_s if s is not None) if any(s is not None for s in index_s) else None
    encode = res.get("encode_on") or {}
    cached = int(encode.get("of") or 0) - int(encode.get("encoded") or 0)
    building_items: list[tuple[str, str, float | None]] = [("encode and index machine seconds", unit, building)]
    if cached > 0:  # vectors the embedding cache held were not encoded (or timed) by this run: unknown, not free
        building_items.append((f"document encoding ({cached:,} vectors from the embedding cache)", unit, None))
    size = res.get("index_bytes")
    out: dict[str, Any] = {
        "currency": costs.currency,
        "per_1k_queries": _itemise(per_query, prices),
        "indexing": _itemise(building_items, prices),
        "index_per_month": _itemise(
            [("saved index (GB)", "index_gb_month", size / 1e9 if size is not None else None)], prices
        ),
    }
    out["examples"] = any(
        bool(i["example"]) for k in ("per_1k_queries", "indexing", "index_per_month") for i in out[k]["items"]
    )
    return out


def stated_prices(result: StudyResult | None) -> CostsBlock | None:
    """The experiment's `costs:` block, or None when it states no prices (or the results hold no config)."""
    if result is None:
        return None
    raw = result.manifest.costs
    if raw is None:
        return None
    try:
        return validate(CostsBlock, raw, "manifest.json:config.costs")
    except ConfigError:  # checked when the run started; a hand-edited manifest is not priced at all
        return None


def _queries(s: SystemResult) -> int:
    """The queries the search stage timed (what its seconds cover), else those the coverage counted."""
    search = (s.latency.get("stages") or {}).get("search") or {}
    return int(search.get("n") or s.coverage.get("judged") or 0)


def gather_costs(result: StudyResult | None) -> dict[str, dict[str, Any]]:
    """{system: system_costs(...)} for every system that ran, {} when the experiment states no prices."""
    prices = stated_prices(result)
    if prices is None or result is None:
        return {}
    return {s.name: system_costs(prices, s.name, s.resources, s.usage, _queries(s)) for s in result if not s.failed}
