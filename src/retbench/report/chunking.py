"""The chunking report: the all-chunks table and the fixed-context-budget table, from the study's `StudyResult`.

On a BEIR dataset (judged by qrels at document level) the main table holds the document metrics and
there are no character-level columns nor budget table; in both modes the main table counts the
queries whose ranking is shorter than the depth ("returned < depth", the cell's coverage `short`).

Gathered once into a `ChunkingReport` (tables, the recall-at-budget curves, resource lines and the
notes) and rendered from it as Markdown (report.md), HTML (report.html: the same tables, scrolling with
a sticky header, plus recall per budget as a chart) and terminal tables (report/terminal.py), so the
three can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from types import SimpleNamespace
from typing import Any

from retbench.config.chunking import ChunkingModel
from retbench.metrics.judges.spans import budget_label
from retbench.report import breakdowns, fmt
from retbench.report.markdown import md_table
from retbench.report.resolution import interval_cell, note
from retbench.report.tables import SHORT_NOTE, resource_line, short_runs
from retbench.resolution import RankResolution, resolve_result
from retbench.results.model import MetricValue, StudyResult

#: the columns both chunking reports share (character-level and BEIR documents)
CHUNK_COLUMNS_DEFINITION = (
    "**over max len**: chunks with more tokens than the model reads (truncated when embedded); "
    "**docs w/o chunk**: documents that produced no chunk; **encode s**: time to embed the chunks "
    "(dense only; '(N new)' = chunks not already in the embedding cache)."
)


def _f(v: Any, digits: int = 3) -> str:
    """A figure of a result ('—' for anything that is not a number: a failed pair, a missing column)."""
    return fmt.num(v, digits, missing="—") if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def _with_ci(v: MetricValue | None) -> str:
    """A metric's mean with its 95% interval as metrics.json stores it ('0.813 [0.780, 0.846]'; '—' for none)."""
    if v is None or not fmt.finite(v.value):
        return "—"
    bounds = fmt.interval(v.ci_low, v.ci_high, digits=3)
    return _f(v.value) + (f" {bounds}" if bounds else "")


def breakdown_tables(cfg: ChunkingModel, result: StudyResult) -> list[tuple[str, list[str], list[list[str]]]]:
    """(pair, header, rows) of each pair's breakdown by group (tags, doc_type, answerable), as `retbench run`
    shows it (report/breakdowns.py); pairs that recorded none are left out."""
    out = []
    for pair in result:
        if pair.error is None and pair.breakdown:
            summary = SimpleNamespace(breakdown=pair.breakdown)
            header = breakdowns.breakdown_header(cfg.metrics, breakdowns.has_rates(summary))
            out.append((pair.name, header, breakdowns.breakdown_rows(summary, cfg.metrics)))
    return out


def resolution_of(cfg: ChunkingModel, result: StudyResult) -> RankResolution | None:
    """The (chunker, system) pairs' rank intervals on the study's ranking metric (`primary:`, else
    `metrics.primary.default_primary`): three pairs or more with a value of it; failed pairs and pairs without it out."""
    return resolve_result(result, [pair.name for pair in result], cfg.ranking_metric)


def summary_rows(
    cfg: ChunkingModel, result: StudyResult, res: RankResolution | None = None
) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) of the main table and of the fixed-budget table, formatted for any renderer; with `res`,
    a rank-interval column on the ranking metric follows the metrics."""
    k0 = cfg.span_token_k[0] if cfg.span_token_k else None
    ranked = [f"{cfg.ranking_metric} rank 95%"] if res is not None else []
    token = [f"token P@{k0}", f"token R@{k0}", f"token IoU@{k0}"] if k0 is not None else []
    head = [
        "chunker",
        "system",
        "chunks",
        "tokens/chunk min / mean / p95 / max",
        "docs w/o chunk",
        "over max len",
        "encode s",
        *cfg.metrics,
        *ranked,
        *token,
        "returned < depth",
    ]
    rows, brows = [], []
    bhead = ["budget", "chunker", "system", "chunks used", "recall", "MRR", "token P", "token R", "token IoU"]
    for pair in result:
        x, m = pair.extra or {}, pair.means()
        if pair.error is not None:
            rows.append(
                [x.get("chunker", pair.name), x.get("system", ""), *(["—"] * (len(head) - 3)), f"failed: {pair.error}"]
            )
            continue
        c, t = x["chunks"], x["timings"]
        dist = f"{c.get('tokens_min', '—')} / {_f(c.get('tokens_mean'), 0)} / {_f(c.get('tokens_p95'), 0)} / {c.get('tokens_max', '—')}"
        enc = _f(t.get("encode_seconds"), 1) + (f" ({t['chunks_encoded']} new)" if "chunks_encoded" in t else "")
        rows.append(
            [
                x["chunker"],
                x["system"],
                str(c["n_chunks"]),
                dist,
                str(c["docs_without_chunks"]),
                str(c.get("chunks_over_max", "—")),
                enc if "encode_seconds" in t else "—",
                *(_with_ci(pair.metrics.get(x)) for x in cfg.metrics),
                *([interval_cell(res, pair.name)] if res is not None else []),
                *(_f(m.get(f"token_{x}@{k0}")) for x in ("precision", "recall", "iou") if k0 is not None),
                short_runs(pair.coverage),
            ]
        )
        for b in cfg.span_budgets:
            s = budget_label(b)
            brows.append(
                [
                    f"{b} tokens",
                    x["chunker"],
                    x["system"],
                    _f(m.get(f"chunks{s}"), 1),
                    _f(m.get(f"recall{s}")),
                    _f(m.get(f"mrr{s}")),
                    _f(m.get(f"token_precision{s}")),
                    _f(m.get(f"token_recall{s}")),
                    _f(m.get(f"token_iou{s}")),
                ]
            )
    brows.sort(key=lambda r: (int(r[0].split()[0]), r[2], r[1]))
    return head, rows, bhead, brows


#: what the bracket beside each metric's mean is
CI_DEFINITION = (
    "**[low, high]**: the 95% percentile-bootstrap interval of the mean over the questions, as metrics.json stores it "
    "(the same as `retbench run`'s)."
)

#: the coverage note on short rankings, as a definition (the term in bold)
SHORT_DEFINITION = "**{}**:{}".format(*SHORT_NOTE.split(":", 1))

BUDGET_NOTE = (
    "Larger chunks win recall@k trivially (k chunks hold more text), so each retriever is also read at a fixed "
    "budget: its top chunks in rank order while their tokens fit (the chunk that would overflow and all after it are left out)."
)


@dataclass
class ChunkingReport:
    """What every rendering of a chunking study shows (see the module docstring)."""

    title: str
    intro: str
    head: list[str]
    rows: list[list[str]]
    budget_head: list[str]
    budget_rows: list[list[str]]
    budgets: list[int]
    # pair name -> recall at each budget (None: failed pair or no value), for the chart
    budget_recall: dict[str, list[float | None]] = field(default_factory=dict)
    resources: list[tuple[str, str]] = field(default_factory=list)  # (pair, resource line)
    definitions: list[str] = field(default_factory=list)  # Markdown-inline text (**term**: meaning)
    breakdowns: list[tuple[str, list[str], list[list[str]]]] = field(default_factory=list)  # (pair, header, rows)


def gather(cfg: ChunkingModel, result: StudyResult) -> ChunkingReport:
    """Everything the chunking report shows, formatted once."""
    res = resolution_of(cfg, result)
    head, rows, bhead, brows = summary_rows(cfg, result, res)
    manifest = result.manifest.data
    ds = (result.manifest.datasets or [{}])[0]
    ranked = [CI_DEFINITION, *([f"**{cfg.ranking_metric} rank 95%**: {note(res)}"] if res is not None else [])]
    if cfg.documents is not None:
        rep = _gather_documents(cfg, manifest, head, rows, ds)
        rep.definitions[:0] = ranked
        rep.breakdowns = breakdown_tables(cfg, result)
        return rep
    k0 = cfg.span_token_k[0]
    intro = (
        f"{ds.get('queries')} questions, {ds.get('gold_spans')} gold excerpts over {ds.get('documents')} documents "
        f"({ds.get('name')}); {cfg.depth} chunks retrieved per question; tokens counted with {manifest.get('tokenizer')} "
        f"(max length {cfg.max_seq_length} incl. {manifest.get('special_tokens')} special tokens). "
        f"Relevance by span overlap (min {cfg.relevance.min_chars} char(s), min fraction {float(cfg.relevance.min_fraction)})."
    )
    curves = {
        pair.name: [_value(pair.value(f"recall{budget_label(b)}")) for b in cfg.span_budgets]
        for pair in result
        if pair.error is None
    }
    cells = {name: m["resources"] for name, m in (manifest.get("systems") or {}).items() if m.get("resources")}
    definitions = [
        "**recall@k**: share of a question's gold excerpts overlapped by at least one of the top k chunks "
        "(counted over excerpts, not chunks: several chunks may cover one excerpt).",
        "**MRR@k**: 1 / rank of the first chunk overlapping any gold excerpt; nDCG and P@k grade a chunk 1 when it "
        "overlaps an excerpt, with the relevant chunks of this chunking as the ideal.",
        f"**token P / R / IoU@{k0}**: character-level (exact, tokenizer-free) precision, recall and IoU of the union of "
        "the top chunks' text (overlapping chunks counted once) against the union of the gold excerpts, as in Chroma's study.",
        *ranked,
        CHUNK_COLUMNS_DEFINITION,
        SHORT_DEFINITION,
    ]
    return ChunkingReport(
        title=f"Chunking experiment: {cfg.study_name}",
        intro=intro,
        head=head,
        rows=rows,
        budget_head=bhead,
        budget_rows=brows,
        budgets=cfg.span_budgets,
        budget_recall=curves,
        resources=[(name, resource_line(r)) for name, r in cells.items()],
        definitions=definitions,
        breakdowns=breakdown_tables(cfg, result),
    )


def _gather_documents(
    cfg: ChunkingModel,
    manifest: dict[str, Any],
    head: list[str],
    rows: list[list[str]],
    ds: dict[str, Any],
) -> ChunkingReport:
    """The report of a BEIR dataset: document metrics against its qrels, no character-level view."""
    sliced = ", ".join(
        f"{k.replace('_', ' ')} {ds[k]}" for k in ("max_queries", "corpus_sample") if ds.get(k) is not None
    )
    intro = (
        f"{ds.get('queries')} queries over {ds.get('documents')} documents ({ds.get('name')}, split {ds.get('split')}"
        f"{'; ' + sliced if sliced else ''}); relevance is the qrels' grade of a chunk's document, and each system "
        f"searches deeper until it has {cfg.depth} distinct documents per query. Tokens counted with "
        f"{manifest.get('tokenizer')} (max length {cfg.max_seq_length} incl. {manifest.get('special_tokens')} special tokens)."
    )
    cells = {name: m["resources"] for name, m in (manifest.get("systems") or {}).items() if m.get("resources")}
    definitions = [
        "**document ranking**: each document at the rank of its best (first) chunk, repeated documents dropped; "
        "the metrics are those of `retbench run` on that document ranking against the qrels (trec_eval's), so a "
        "chunker that keeps each document whole scores exactly as the system does on the documents.",
        f"**searching deeper**: {cfg.depth} chunks are asked for first; a query with fewer distinct documents is "
        "searched again with twice as many chunks until it has them or the system has no more to return.",
        CHUNK_COLUMNS_DEFINITION,
        SHORT_DEFINITION,
    ]
    return ChunkingReport(
        title=f"Chunking experiment: {cfg.study_name}",
        intro=intro,
        head=head,
        rows=rows,
        budget_head=[],
        budget_rows=[],
        budgets=[],
        resources=[(name, resource_line(r)) for name, r in cells.items()],
        definitions=definitions,
    )


def _value(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def render_markdown(cfg: ChunkingModel, result: StudyResult) -> str:
    """The chunking report: all chunks, then every retriever at a fixed context budget, then definitions."""
    return report_markdown(gather(cfg, result))


def report_markdown(rep: ChunkingReport) -> str:
    resources = (
        ["## Resources", "", *(f"- **{name}**: {line}" for name, line in rep.resources), ""] if rep.resources else []
    )
    parts = [
        f"# {rep.title}",
        "",
        rep.intro,
        "",
        "## All retrieved chunks",
        "",
        md_table(rep.head, rep.rows),
        "",
        *(
            ["## Fixed context budget", "", BUDGET_NOTE, "", md_table(rep.budget_head, rep.budget_rows), ""]
            if rep.budgets
            else []
        ),
        *breakdown_markdown(rep),
        *resources,
        "## Definitions",
        "",
        *(f"- {d}" for d in rep.definitions),
    ]
    return "\n".join(parts) + "\n"


def breakdown_markdown(rep: ChunkingReport) -> list[str]:
    """The breakdown by group of every pair that recorded one, as a Markdown section (nothing when none did)."""
    if not rep.breakdowns:
        return []
    lines = ["## Breakdown by group", "", breakdowns.BREAKDOWN_NOTE, ""]
    for name, header, rows in rep.breakdowns:
        lines += [f"### {name}", "", md_table(header, rows), ""]
    return lines


def render_html(cfg: ChunkingModel, result: StudyResult) -> str:
    """report.html of a chunking study: one self-contained page (inline CSS, SVG and script, no network)."""
    return report_html(gather(cfg, result))


def report_html(rep: ChunkingReport) -> str:
    from retbench.report import html_page, plots

    chart = ""
    series = [
        plots.Series(
            name,
            [float(b) for b, v in zip(rep.budgets, vals, strict=True) if v is not None],
            [v for v in vals if v is not None],
        )
        for name, vals in rep.budget_recall.items()
        if any(v is not None for v in vals)
    ]
    if len(rep.budgets) >= 2 and series:
        svg = plots.line_chart(
            series,
            title="Recall at a fixed context budget, per chunker + retriever",
            kind="budget-recall",
            x_label="context budget (tokens)",
            y_label="recall within the budget",
            x_log=max(rep.budgets) / min(rep.budgets) >= 20,
            y_range=(0.0, 1.0),
        )
        chart = (
            f"<figure>{svg}<figcaption>Recall of the gold excerpts by the top chunks that fit each budget "
            f"(the table's recall column). {html_page.LEGEND_HINT}</figcaption></figure>"
        )
    left = {0, 1}
    sections = [
        ("chunks", "All retrieved chunks", html_page.text_table(rep.head, rep.rows, left)),
    ]
    if rep.budgets:
        sections.append(
            (
                "budget",
                "Fixed context budget",
                html_page.note(BUDGET_NOTE) + chart + html_page.text_table(rep.budget_head, rep.budget_rows, {0, 1, 2}),
            )
        )
    if rep.breakdowns:
        tables = "".join(f"<h3>{escape(name)}</h3>" + html_page.text_table(h, r, {0}) for name, h, r in rep.breakdowns)
        sections.append(("breakdown", "Breakdown by group", html_page.note(breakdowns.BREAKDOWN_NOTE) + tables))
    if rep.resources:
        items = "".join(f"<li><b>{escape(name)}</b>: {escape(line)}</li>" for name, line in rep.resources)
        sections.append(("resources", "Resources", f"<ul>{items}</ul>"))
    defs = "".join(f"<li>{html_page.inline_markdown(d)}</li>" for d in rep.definitions)
    sections.append(("definitions", "Definitions", f"<ul>{defs}</ul>"))
    return html_page.page(rep.title, f"<p>{escape(rep.intro)}</p>", sections)
