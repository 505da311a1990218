"""Table headers and cells both report renderers share (report.md and report.html show the same columns):
the coverage table, the resource figures, and the queries that returned fewer documents than asked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retbench.report import fmt

if TYPE_CHECKING:
    from retbench.report.model import SystemSummary


SHORT_NOTE = (
    "returned < depth: answered queries whose ranking is shorter than the depth asked for (a chunked retriever "
    "collapsing chunks to fewer documents, a store returning fewer); their missing ranks count as not relevant, "
    "and a metric whose cutoff passes the ranking's length is scored as if the ranking were full."
)


def short_runs(coverage: Mapping[str, Any]) -> str:
    """'N (depth D)': the counted queries that returned fewer documents than asked ('—' when not recorded)."""
    if coverage.get("short") is None:
        return "—"
    return f"{int(coverage['short'])} (depth {coverage.get('depth')})"


#: the coverage table's columns, the same in report.md and report.html
COVERAGE_HEADER = (
    "system",
    "judged",
    "answered",
    "failed",
    "missing",
    "skipped (no relevant doc)",
    "returned < depth",
    "counting",
)

RESOURCE_HEADER = (
    "system",
    "devices",
    "encode docs/s",
    "index s",
    "index on disk MiB",
    "search queries/s",
    "peak RSS MiB",
)


def resource_rows(systems: Sequence[SystemSummary]) -> list[list[str]]:
    """One row per system with resource figures (peak RSS: the largest stage of this process, then
    the workers' where a cluster did the work); both report renderers show these rows."""

    rows = []
    for s in systems:
        r = s.resources
        if not r:
            continue
        peaks = [r.get(f"{st}_peak_rss_mib") for st in ("encode", "index", "search")]
        own = max((p for p in peaks if p is not None), default=None)
        workers = [(r.get(k) or {}).get("worker_peak_rss_mib") for k in ("encode_on", "search_on")]
        worker = max((w for w in workers if w), default=None)
        peak = fmt.num(own, 0) + (f" (workers {fmt.num(worker, 0)})" if worker else "")
        disk = r.get("index_bytes")
        rows.append(
            [
                s.name,
                ", ".join(r.get("devices") or []),
                fmt.num(r.get("encode_docs_per_s"), 1),
                fmt.num(r.get("index_seconds"), 2),
                fmt.num(disk / 2**20 if disk is not None else None, 1),
                fmt.num(r.get("search_queries_per_s"), 1),
                peak,
            ]
        )
    return rows


def resource_line(r: Mapping[str, Any]) -> str:
    """A study's resource figures as one Markdown line: peak RSS per stage, index size, throughput, devices."""

    peaks = [
        f"{k.removesuffix('_peak_rss_mib').replace('_', ' ')} {fmt.num(v, 0)}"
        for k, v in r.items()
        if k.endswith("_peak_rss_mib") and v is not None
    ]
    scope = " (the process's peak so far)" if r.get("peak_rss_scope") == "process" else ""
    parts = [f"peak RSS MiB{scope}: {', '.join(peaks)}"] if peaks else []
    if r.get("index_bytes") is not None:
        parts.append(f"index on disk {fmt.num(r['index_bytes'] / 2**20, 1)} MiB")
    for key, unit in (("encode_docs_per_s", "encode docs/s"), ("index_docs_per_s", "index docs/s")):
        if r.get(key) is not None:
            parts.append(f"{unit} {fmt.num(r[key], 1)}")
    if r.get("search_queries_per_s") is not None:
        parts.append(f"search queries/s {fmt.num(r['search_queries_per_s'], 1)}")
    parts.append(f"devices {', '.join(r.get('devices') or []) or 'not recorded'}")
    return "Resources: " + "; ".join(parts) + "."
