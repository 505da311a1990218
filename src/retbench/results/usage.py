"""What a system's results cost: time per stage, LLM tokens and money; blocks of its `SystemResult`.

Latency by stage (`stage_latency`), per query, in seconds:
- `search`: the wall time retbench measured around the system's search call for that query (the run's
  latency): for an `http` system the whole request, for a `generate:` block the retrieval alone;
- every stage a system reports in its answers' `latency` (`retrieval`, `rerank`, `generation`,
  `judge`, ...: an http RAG endpoint's own figures, or the generate block's `retrieval` and
  `generation`; a cached generation counts 0 s).
Each stage gives p50 and p95 (numpy's linear-interpolation percentiles), the mean, the total over
queries and how many queries reported it. A search timed as a batch (`Run.latency_batch`: the batch's
wall time shared evenly by its queries) is no per-query measurement: its stage says `amortised` and
gives the mean and total only (p50/p95 None), since percentiles of equal shares are no distribution.
`suite_seconds` is the wall time of the cell's own stages (encode, index, search, rerank, evaluate)
in the process that finished it: after a resume, the part done by that process.

What a query's latency measured (`query`), so no number is read without its conditions:
- `timing`: `per_query` (each query timed alone) or `batch` (shares of batches; `largest_batch` queries at
  most, `amortised` of the queries);
- `includes`: the parts inside the total, in order: `search` alone, or a composite's parts (`scope` +
  `search`, `search` + `rerank`, a hybrid's `component <name>` searches + `fusion`);
- `parts`: {part: {total_s, n}} for the parts measured (a hybrid's from its `PartTimes`, a scope's from its
  records, a rerank's from its stage's wall seconds, the first stage's as the rest of the total), each
  inside the total;
- `caches`: [{what, from_cache, of}]: query vectors answered from the embedding cache and rerank pairs
  answered from the pair cache, over the queries searched in this process (a warm cache makes a dense
  search or a rerank look fast); absent when this process searched nothing (answers read back from the
  journal) or searched on other machines (Ray workers).

Tokens and cost (`llm_usage`): every `<stage>_calls.jsonl` call log beside the results
(`generate_calls.jsonl` for a generate block, `judge_calls.jsonl` for judged metrics) is summed:
calls made (cache hits are not calls and cost nothing), input and output tokens, whether any count
was estimated (characters / 4, when the server reports no usage), and the estimated cost,
input tokens / 1000 x price_input_per_1k + output tokens / 1000 x price_output_per_1k, with the
prices of the llm block that made each call (0 unless configured). A log accumulates every call made
for the cell's results, across resumed runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Run
from retbench.io.files import appended_records

CALL_LOG_SUFFIX = "_calls.jsonl"


def _summary(seconds: list[float], amortised: bool = False) -> dict[str, float | None]:
    arr = np.asarray(seconds, dtype=np.float64)
    p50, p95 = (None, None) if amortised else (float(v) for v in np.percentile(arr, [50, 95]))
    out: dict[str, float | None] = {
        "p50_s": p50,
        "p95_s": p95,
        "mean_s": float(arr.mean()),
        "total_s": float(arr.sum()),
        "n": int(arr.size),
    }
    return {**out, "amortised": True} if amortised else out


def latency_summary(latencies_s: list[float], amortised: bool = False) -> tuple[list[float], dict[str, Any]]:
    """Sorted latencies in ms and their p50/p95/p99/mean/max; for `amortised` latencies (even shares of batches,
    `Run.latency_batch`) the mean only: percentiles and the max of equal shares describe no query (None)."""
    if not latencies_s:
        return [], {}
    ms = np.sort(np.asarray(latencies_s, dtype=np.float64) * 1000.0)
    p50, p95, p99 = (None, None, None) if amortised else (float(v) for v in np.percentile(ms, [50, 95, 99]))
    return ms.tolist(), {
        "p50": p50,
        "p95": p95,
        "p99": p99,
        "mean": float(ms.mean()),
        "max": None if amortised else float(ms[-1]),
        "n": int(ms.size),
    }


def stage_latency(
    run: Run,
    answers: Mapping[str, object],
    timings: Mapping[str, float],
    *,
    scopes: Mapping[str, object] | None = None,
    searched: Mapping[str, Any] | None = None,
    rerank: Mapping[str, Any] | None = None,
) -> dict[str, object]:
    """{"stages": {stage: {p50_s, p95_s, mean_s, total_s, n}}, "suite_seconds": s, "query": {...}} (module
    docstring). `scopes`: the scope records (their seconds are the `scope` stage); `searched`: what the executor
    said about this process's search (`studies/executors.search_conditions`); `rerank`: the rerank stage's
    manifest block (its `pairs` figures)."""
    per_stage: dict[str, list[float]] = {}
    timed = [q for q in run.query_ids if run.latency.get(q) is not None]
    if timed:
        per_stage["search"] = [float(run.latency[q]) for q in timed]
    for q in run.query_ids:
        for source in (answers, scopes or {}):
            for stage, seconds in (getattr(source.get(q), "latency", None) or {}).items():
                per_stage.setdefault(stage, []).append(float(seconds))
    batched = [q for q in timed if q in run.latency_batch]
    suite = sum(float(v) for k, v in timings.items() if k.endswith("_seconds"))
    return {
        "stages": {s: _summary(v, amortised=s == "search" and bool(batched)) for s, v in per_stage.items()},
        "suite_seconds": round(suite, 3),
        "query": _conditions(run, batched, per_stage.get("scope"), searched, rerank),
    }


def _conditions(
    run: Run,
    batched: list[str],
    scope: list[float] | None,
    searched: Mapping[str, Any] | None,
    rerank: Mapping[str, Any] | None,
) -> dict[str, object]:
    """What the queries' latencies measured: timing, the parts inside the total, the caches' state."""
    total = sum(run.latency.values())
    parts: dict[str, dict[str, float | int]] = {}
    if scope is not None:
        parts["scope"] = {"total_s": sum(scope), "n": len(scope)}
        parts["search"] = {"total_s": max(total - sum(scope), 0.0), "n": len(run.latency)}
    for name, part in ((searched or {}).get("parts") or {}).items():
        parts[name] = dict(part)
    pairs = (rerank or {}).get("pairs") or {}
    if "wall_seconds" in pairs:
        reranked = float(pairs["wall_seconds"])
        parts = {"first stage": {"total_s": max(total - reranked, 0.0), "n": len(run.latency)}, **parts}
        parts["rerank"] = {"total_s": reranked, "n": len(run.latency)}
    caches = []
    vectors = (searched or {}).get("query_vectors")
    if vectors:
        caches.append({"what": "query vectors", "from_cache": vectors["from_cache"], "of": sum(vectors.values())})
    if pairs:
        cached = int(pairs.get("pairs_cached", 0))
        caches.append({"what": "rerank pairs", "from_cache": cached, "of": cached + int(pairs.get("pairs_scored", 0))})
    out: dict[str, object] = {
        "timing": "batch" if batched else "per_query",
        "includes": list(parts) or ["search"],
        "parts": parts,
    }
    if batched:
        out |= {"largest_batch": max(run.latency_batch[q] for q in batched), "amortised": len(batched)}
    if searched is not None or pairs:
        out["caches"] = caches
    warmup = (searched or {}).get("query_warmup")
    if warmup:  # query vectors encoded before the timed search (studies/executors.warm_query_vectors)
        out["warmup"] = {"query_vectors": int(warmup["of"]), "encoded": int(warmup["encoded"])}
    return out


def _log_usage(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {
        "calls": 0,
        "cached": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "tokens_estimated": False,
        "cost": 0.0,
    }
    for rec in appended_records(path):  # a line cut by a kill is not counted
        if rec.get("cached"):
            out["cached"] += 1
            continue
        out["calls"] += 1
        out["input_tokens"] += int(rec.get("input_tokens") or 0)
        out["output_tokens"] += int(rec.get("output_tokens") or 0)
        out["tokens_estimated"] = out["tokens_estimated"] or bool(rec.get("tokens_estimated"))
        cost = rec.get("cost")
        out["cost"] = None if cost is None or out["cost"] is None else out["cost"] + float(cost)
    if out["cost"] is not None:
        out["cost"] = round(out["cost"], 6)
    return out


def llm_usage(folder: Path) -> dict[str, dict[str, Any]]:
    """{stage: {calls, cached, input_tokens, output_tokens, tokens_estimated, cost}} from the call logs in
    `folder` (cost None when a log predates per-call costs)."""
    if not folder.is_dir():
        return {}
    return {
        p.name[: -len(CALL_LOG_SUFFIX)]: _log_usage(p)
        for p in sorted(folder.glob(f"*{CALL_LOG_SUFFIX}"))
        if p.is_file()
    }


#: a result's blocks that measure what producing the results cost, not the results themselves
COST_BLOCKS = ("latency", "usage", "resources")


def scores_only(metrics_json: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json without its cost blocks: what two runs of the same config must agree on (wall times,
    memory and cache hits differ between any two runs; the scores, coverage and breakdowns do not).
    Either layout: version 2 (`systems` beside `schema_version`) or the earlier one (system -> row)."""
    if "schema_version" in metrics_json:
        return {**metrics_json, "systems": scores_only(metrics_json.get("systems") or {})}
    return {
        system: {k: v for k, v in row.items() if k not in COST_BLOCKS} if isinstance(row, Mapping) else row
        for system, row in metrics_json.items()
    }
