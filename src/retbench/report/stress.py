"""The stress report: one terminal line per level, the headline, failures verbatim, report.md and report.html.

Everything here reads the `StressSummary` (`retbench.results.stress`) that the study writes to summary.json,
so a report can be re-rendered from the file alone (`results.stress.read_stress`). Latencies read in milliseconds with two decimals, rates as
percentages, quality means with four decimals ('–' where there is no value).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from retbench.data.status import QueryStatus
from retbench.report import fmt, plots
from retbench.report.tables import resource_line
from retbench.results.stress import IngestFigures, LevelFigures, StressSummary
from retbench.results.stress_figures import Failure

#: what a failed request can be: error, timeout, invalid
_FAILURES = tuple(s.value for s in QueryStatus if s.failed)
#: where a failure of the streaming case happened: a live query, a checkpoint query, a freshness probe, a write
STREAM_PHASES = ("live", "checkpoint", "probe", "write")


def _ms(v: float | None) -> str:
    return fmt.num(v, 2, missing="–")


def _mean(v: float | None) -> str:
    return fmt.num(v, 4, missing="–")


def level_line(fig: LevelFigures) -> str:
    """One terminal line per finished level: requests, QPS, latency, failures, the first metric's mean."""
    lat = fig.latency_success
    qps = fmt.num(fig.qps, 1) if fig.qps else "-"
    p50, p99 = fmt.num(lat.p50, 2, missing="-"), fmt.num(lat.p99, 2, missing="-")
    q = fig.quality
    first = next(iter(q.metrics.items()), None) if q is not None else None
    score = (
        f", {first[0]} {_mean(first[1].mean)} ({fmt.coverage(q.scored, q.of)}; failed count 0)"
        if first and q is not None
        else ""
    )
    return f"concurrency {fig.concurrency}: {fig.completed} requests, {qps} QPS, p50 {p50} ms, p99 {p99} ms, {fig.failed} failed{score}"


def headline(summary: StressSummary) -> str:
    """One line for the end of a stress run: how many requests failed, or where ingestion stopped."""
    ing = summary.ingest
    if ing is not None and ing.first_failure is not None:
        return f"ingestion failed after {ing.written} of {ing.documents} documents; no query was sent"
    rate = fmt.pct(summary.failure_rate, 2)
    allowed = fmt.pct(summary.allowed_failure_rate, 2)
    return f"{summary.failed} of {summary.requests} requests failed ({rate}; allowed {allowed})"


def describe_failure(f: Failure) -> str:
    """Where a failure happened, then its label and the backend's message exactly as it came."""
    if f.phase == "ingest":
        docs = f.docs or (None, None)
        where = f"ingest batch {f.batch}, documents {docs[0]}-{docs[1]}"
    elif f.phase in STREAM_PHASES:  # the streaming case: where in the stream, and under which filter
        flt = "" if f.filter is None else f", filter {fmt.pct(f.filter, 1)}"
        where = f"{f.phase}, query {f.qid}, after batch {f.batches}{flt}"
    else:
        warm = ", warm-up" if f.phase == "warmup" else ""
        where = f"query {f.qid}, concurrency {f.level}, attempt {f.attempt}{warm}"
    label = f.exc_type or f.kind
    if f.kind == "invalid":
        label = f"invalid result ({f.detail})"
    elif f.kind == "timeout":
        label = "timeout"
    return f"({where}) {label}: {f.message}"


def _ingest(ing: IngestFigures) -> list[str]:
    rate = f"{fmt.num(ing.docs_per_s, 0)} docs/s" if ing.docs_per_s else "–"
    lines = [f"Ingestion: {ing.written} of {ing.documents} documents written in {ing.batches} batch(es), {rate}."]
    f = ing.first_failure
    if f is not None:
        docs = f.docs or (None, None)
        lines += [
            "",
            f"**Ingestion failed** at batch {f.batch} (documents {docs[0]}–{docs[1]}): `{f.exc_type}: {f.message}`",
        ]
    return [*lines, ""]


def _latency_table(levels: Sequence[LevelFigures]) -> list[str]:
    lines = [
        "| concurrency | requests | QPS | success p50 / p95 / p99 / max (ms) | failure p50 / p95 / max (ms) | error | timeout | invalid | empty | short |",
        "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for f in levels:
        ok, bad, r = f.latency_success, f.latency_failure, f.rates
        qps = fmt.num(f.qps, 1) if f.qps else "–"
        lines.append(
            f"| {f.concurrency} | {f.completed} | {qps} | {_ms(ok.p50)} / {_ms(ok.p95)} / {_ms(ok.p99)} / {_ms(ok.max)} "
            f"| {_ms(bad.p50)} / {_ms(bad.p95)} / {_ms(bad.max)} | {fmt.pct(r['error'])} | {fmt.pct(r['timeout'])} "
            f"| {fmt.pct(r['invalid'])} | {fmt.pct(r['empty'])} | {fmt.pct(r['short'])} |"
        )
    return [*lines, ""]


def _quality_table(levels: Sequence[LevelFigures], metrics: Sequence[str]) -> list[str]:
    lines = ["Quality on the stressed responses (failed and unasked queries count 0; nothing imputed):", ""]
    only_heads = " | ".join(f"{m} (success-only)" for m in metrics)
    lines.append("| concurrency | scored | " + " | ".join(metrics) + " | " + only_heads + " |")
    lines.append("|---:|---|" + "---:|" * (2 * len(metrics)))
    for f in levels:
        q = f.quality
        ms = q.metrics if q is not None else {}
        heads = " | ".join(_mean(ms[m].mean if m in ms else None) for m in metrics)
        only = " | ".join(_mean(ms[m].mean_success_only if m in ms else None) for m in metrics)
        scored = f"scored {q.scored} of {q.of}" if q is not None else "scored None of None"
        lines.append(f"| {f.concurrency} | {scored} | {heads} | {only} |")
    return [*lines, ""]


def _failures(summary: StressSummary, levels: Sequence[LevelFigures]) -> list[str]:
    kinds: dict[str, int] = {}
    for f in levels:
        for o in _FAILURES:
            kinds[o] = kinds.get(o, 0) + f.counts[o]
        for d, n in f.invalid_kinds.items():
            kinds[f"invalid: {d}"] = kinds.get(f"invalid: {d}", 0) + n
        for t, n in f.error_types.items():
            kinds[f"error attempts: {t}"] = kinds.get(f"error attempts: {t}", 0) + n
    retries = sum(f.retries for f in levels)
    recovered = sum(f.recovered_by_retry for f in levels)
    lines = [
        f"Failures: {summary.failed} of {summary.requests} requests ({fmt.pct(summary.failure_rate)}); "
        f"{retries} retries, {recovered} requests recovered by a retry (every attempt is in failures.jsonl)."
    ]
    if any(kinds.values()):
        lines += ["", "| failure | count |", "|---|---:|"]
        lines += [f"| {k} | {n} |" for k, n in kinds.items() if n]
    return lines


def render_markdown(summary: StressSummary) -> str:
    """The stress section of a report: latency and QPS by level, failure breakdown, quality with coverage."""
    lines = [f"## Stress: {summary.system} on {summary.dataset} ({summary.split})", ""]
    if summary.ingest is not None:
        lines += _ingest(summary.ingest)
    if summary.resources:
        lines += [resource_line(summary.resources), ""]
    levels = summary.levels
    if levels:
        lines += _latency_table(levels)
        lines += _quality_table(levels, summary.metrics)
        lines += _failures(summary, levels)
    lines += [f"\nWarning: {w}" for w in summary.warnings]
    return "\n".join(lines + closing_lines(summary)) + "\n"


def closing_lines(summary: StressSummary) -> list[str]:
    """The first failure (where, and the backend's message) and why the run stopped early, if it did."""
    lines: list[str] = []
    if summary.first_failure is not None:
        lines += ["", f"First failure {describe_failure(summary.first_failure)}"]
    if summary.stopped:
        lines += ["", f"Stopped: {summary.stopped}."]
    return lines


def _chart(levels: Sequence[LevelFigures], series: Mapping[str, Sequence[float | None]], title: str, y: str) -> str:
    """A line per series over the concurrency levels (a level without a value is left out of its line)."""
    xs = [float(f.concurrency) for f in levels]
    lines = [
        plots.Series(name, [x for x, v in zip(xs, vs, strict=True) if v is not None], [v for v in vs if v is not None])
        for name, vs in series.items()
    ]
    lines = [s for s in lines if s.xs]
    if not lines:
        return ""
    return plots.line_chart(lines, title=title, x_label="concurrency", y_label=y, width=460, height=260)


def _charts(levels: Sequence[LevelFigures]) -> str:
    if not levels:
        return ""
    qps = _chart(levels, {"QPS": [f.qps for f in levels]}, "achieved QPS (requests per second)", "QPS")
    pcts = {p: [getattr(f.latency_success, p) for f in levels] for p in ("p50", "p95", "p99")}
    lat = _chart(levels, pcts, "success latency (ms)", "ms")
    return f'<div style="display:flex;gap:16px;flex-wrap:wrap">{qps}{lat}</div>'


def html_blocks(markdown: str, charts: str) -> list[str]:
    """The Markdown's tables as HTML tables, its heading followed by the charts, other lines as paragraphs."""
    blocks: list[str] = []
    table: list[str] = []

    def close() -> None:
        if table:
            blocks.append("<table>" + "".join(table) + "</table>")
            table.clear()

    for line in markdown.splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            tag = "td" if table else "th"
            cells = line.strip().strip("|").split("|")
            table.append("<tr>" + "".join(f"<{tag}>{html.escape(c.strip())}</{tag}>" for c in cells) + "</tr>")
            continue
        close()
        if line.startswith("## "):
            blocks += [f"<h2>{html.escape(line[3:])}</h2>", charts]
        elif line.strip():
            blocks.append(f"<p>{html.escape(line)}</p>")
    close()
    return blocks


def render_html(summary: StressSummary) -> str:
    """The stress section as standalone HTML: QPS and latency charts by level, then the same tables as Markdown."""
    blocks = html_blocks(render_markdown(summary), _charts(summary.levels))
    style = "body{font-family:sans-serif;max-width:1100px;margin:2em auto}td,th{border:1px solid #ddd;padding:2px 6px}td{text-align:right}"
    title = html.escape(f"stress: {summary.system} on {summary.dataset}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head><body>{''.join(blocks)}</body></html>\n"
