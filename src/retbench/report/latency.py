"""What a query latency measured, said beside it in the terminal, report.md and report.html.

A latency alone misleads: a dense search whose query vectors come from the embedding cache (filled by
an earlier system or run) looks many times faster than one that encodes them; a composite system
(hybrid, scope, rerank) is only comparable when its total holds every part; and a batch's wall time
shared evenly by its queries has no per-query spread, so its p50, p95 and p99 would all equal its
mean. So every latency row says:

- *timing*: `per query` (each query timed alone: percentiles over queries) or `batch mean` (shares of
  batches of up to B queries: the mean only, p50/p95/p99 `not measured`; `batch_size: 1` times each
  query alone);
- *includes*: the parts inside the total (`search`, `scope + search`, `first stage + rerank`, a hybrid's
  `component <name>` searches + `fusion`), with each part's mean per query in the parts table;
- *caches*: how many query vectors came from the embedding cache and how many rerank pairs from the pair
  cache during this search (`warm` when all, `cold` when none), or that this was not recorded. The runner
  encodes every query into the embedding cache before it times a search (`warmed up before timing`), so
  every system and every tuning setting is timed with the same warm query-vector cache, whichever ran
  first; a dense query's latency is then its search without the encoding of its query. The rerank pair
  cache is not warmed (that would time cache lookups, not the reranker): its state is shown as it was.

The figures come from the result's `latency` block (`results/usage.py`) and the run's per-query
latencies; the three renderers format these rows and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from retbench.report import fmt, plots
from retbench.report.html_page import note, table_html

__all__ = [
    "LATENCY_HEADER",
    "LATENCY_NOTE",
    "PARTS_HEADER",
    "PARTS_NOTE",
    "caches_text",
    "latency_html",
    "latency_rows",
    "part_rows",
    "timing_text",
]

NOT_MEASURED = "not measured"
LATENCY_HEADER = (
    "system",
    "queries",
    "timing",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "mean ms",
    "max ms",
    "includes",
    "caches",
)
LATENCY_NOTE = (
    "Wall time retbench measured around each query's whole search (every part in `includes` is inside it). "
    "`per query`: each query timed alone, percentiles over queries. `batch mean`: a batch's wall time shared evenly "
    "by its queries, so only the mean is measured (p50/p95/p99 `not measured`; `batch_size: 1` times each query "
    "alone). `caches`: query vectors from the embedding cache and rerank pairs from the pair cache during this "
    "search. Every query is encoded into the embedding cache before any search is timed (`warmed up before "
    "timing`), so every system is timed with the same warm query-vector cache and no latency holds the encoding "
    "of its query; a warm pair cache (filled by an earlier system or run) makes a rerank look fast."
)
PARTS_HEADER = ("system", "part", "queries", "mean ms per query", "total s", "share of total")
PARTS_NOTE = (
    "The parts of a composite system's query latency, each measured inside the total: a hybrid's component searches "
    "and its fusion, a scope's selector and searches, a rerank's first stage and rerank stage (the first stage is the "
    "total less the rerank stage's wall time). Share of total: the part's seconds over all queries' seconds."
)


def timing_text(query: Mapping[str, Any] | None) -> str:
    """'per query', 'batch mean (batches of up to 64)', or 'not recorded' for results older than the record."""
    if not query:
        return "not recorded"
    if query.get("timing") == "batch":
        return f"batch mean (batches of up to {query.get('largest_batch', '?')})"
    return "per query"


def caches_text(query: Mapping[str, Any] | None) -> str:
    """'query vectors: 300 of 300 from cache (warm)'; 'no cache' when none was involved; 'not recorded' without
    a record (answers read back from the journal, a search on Ray workers, an older result)."""
    caches = (query or {}).get("caches")
    if caches is None:
        return "not recorded"
    if not caches:
        return "no cache"
    warmed = bool((query or {}).get("warmup"))
    parts = []
    for c in caches:
        hit, of = int(c["from_cache"]), int(c["of"])
        state = "warm" if of and hit == of else "cold" if hit == 0 else "partly warm"
        after = ", warmed up before timing" if warmed and c["what"] == "query vectors" else ""
        parts.append(f"{c['what']}: {hit:,} of {of:,} from cache ({state}){after}")
    return "; ".join(parts)


def _amortised(summary: Any) -> bool:
    return (getattr(summary, "latency_query", None) or {}).get("timing") == "batch"


def latency_rows(systems: Sequence[Any]) -> list[list[str]]:
    """One row per timed system (`SystemSummary`: `latency` in ms, `latency_query` the stored conditions)."""
    rows = []
    for s in systems:
        lat, query = s.latency, getattr(s, "latency_query", None) or {}
        if not lat:
            continue
        pct = [NOT_MEASURED] * 3 if _amortised(s) else [fmt.num(lat.get(k), 2) for k in ("p50", "p95", "p99")]
        rows.append(
            [
                s.name,
                fmt.count(lat.get("n")),
                timing_text(query or None),
                *pct,
                fmt.num(lat.get("mean"), 2),
                fmt.num(lat.get("max"), 2) if not _amortised(s) else NOT_MEASURED,
                " + ".join(query.get("includes") or ["search"]),
                caches_text(query or None),
            ]
        )
    return rows


def part_rows(blocks: Sequence[tuple[str, Mapping[str, Any]]]) -> list[list[str]]:
    """(system, part, queries, mean ms per query, total s, share of total) for each part of a composite system;
    `blocks` are (system name, its stored `latency` block)."""
    rows = []
    for name, block in blocks:
        query = (block or {}).get("query") or {}
        parts = query.get("parts") or {}
        if len(parts) < 2:
            continue
        total = ((block.get("stages") or {}).get("search") or {}).get("total_s")
        for part, p in parts.items():
            n, seconds = int(p.get("n") or 0), float(p.get("total_s") or 0.0)
            share = f"{seconds / total:.1%}" if total else "n/a"
            rows.append([name, part, fmt.count(n), fmt.ms(seconds / n if n else None, 2), fmt.num(seconds, 3), share])
    return rows


def latency_html(data: Any) -> str:
    """The HTML report's latency section (`ReportData`): the latency table, the parts table and, for systems
    timed per query, the distribution chart (a batch's equal shares have no distribution to draw)."""
    rows = latency_rows(data.systems)
    if not rows:
        return '<p class="muted">No per-query latency was recorded.</p>'
    cells = ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows]
    out = table_html(list(LATENCY_HEADER), cells, set(range(1, 8))) + note(LATENCY_NOTE)
    parts = part_rows([(s.name, s.stages) for s in data.systems])
    if parts:
        cells = ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in parts]
        out += table_html(list(PARTS_HEADER), cells, {2, 3, 4, 5}) + note(PARTS_NOTE)
    timed = [s for s in data.systems if s.latencies_ms and not _amortised(s)]
    if not timed:
        return out + note("No system was timed per query, so no latency distribution is drawn.")
    lines = []
    for s in timed:
        n = len(s.latencies_ms)
        xs = [max(v, 1e-3) for v in s.latencies_ms]
        lines.append(plots.Series(s.name, [xs[0], *xs], [0.0, *[(i + 1) / n for i in range(n)]]))
    lo, hi = min(x for s in lines for x in s.xs), max(x for s in lines for x in s.xs)
    log = hi / lo >= 20
    svg = plots.line_chart(
        lines,
        title="Latency distribution per query",
        kind="latency-ecdf",
        x_label="latency (ms)",
        y_label="share of queries at or below",
        x_log=log,
        y_range=(0.0, 1.0),
        y_unit="%",
        x_range=None if log else (0.0, hi * 1.02),
        step=True,
        markers=False,
    )
    left = [s.name for s in data.systems if s.latencies_ms and _amortised(s)]
    caption = "Cumulative distribution: the height at a latency is the share of queries answered at least that fast."
    if left:
        caption += f" Timed as batches, so not drawn: {', '.join(left)}."
    return f"{out}<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def stored_rows(results: Sequence[Any]) -> tuple[list[str], list[list[str]]]:
    """The latency table from stored results alone (`SystemResult`s: the terminal after a run), without the
    p99 and max columns, which only the per-query latencies of the saved run give."""
    from types import SimpleNamespace

    systems = []
    for r in results:
        search = ((r.latency or {}).get("stages") or {}).get("search")
        if not search:
            continue
        ms = {k: None if search.get(f"{k}_s") is None else 1000.0 * search[f"{k}_s"] for k in ("p50", "p95", "mean")}
        systems.append(
            SimpleNamespace(name=r.name, latency={**ms, "n": search.get("n")}, latency_query=r.latency.get("query"))
        )
    keep = [i for i, h in enumerate(LATENCY_HEADER) if h not in ("p99 ms", "max ms")]
    return [LATENCY_HEADER[i] for i in keep], [[row[i] for i in keep] for row in latency_rows(systems)]
