"""The chunking report: the all-chunks table and the fixed-context-budget table, from metrics.json."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retbench.metrics.judges.spans import budget_label
from retbench.report import fmt
from retbench.report.markdown import md_table
from retbench.report.model import resource_line

if TYPE_CHECKING:
    from retbench.studies.chunking import ChunkingConfig


def _f(v: Any, digits: int = 3) -> str:
    """A figure from metrics.json ('—' for anything that is not a number: a failed pair, a missing column)."""
    return fmt.num(v, digits, missing="—") if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def summary_rows(
    cfg: ChunkingConfig, metrics_json: dict[str, Any]
) -> tuple[list[str], list[list[str]], list[str], list[list[str]]]:
    """(header, rows) of the main table and of the fixed-budget table, formatted for any renderer."""
    k0 = cfg.token_k[0]
    head = [
        "chunker",
        "system",
        "chunks",
        "tokens/chunk min / mean / p95 / max",
        "docs w/o chunk",
        "over max len",
        "encode s",
        *cfg.metrics,
        f"token P@{k0}",
        f"token R@{k0}",
        f"token IoU@{k0}",
    ]
    rows, brows = [], []
    bhead = ["budget", "chunker", "system", "chunks used", "recall", "MRR", "token P", "token R", "token IoU"]
    for key, m in metrics_json.items():
        if "error" in m:
            rows.append(
                [m.get("chunker", key), m.get("system", ""), *(["—"] * (len(head) - 3)), f"failed: {m['error']}"]
            )
            continue
        c, t = m["chunks"], m["timings"]
        dist = f"{c.get('tokens_min', '—')} / {_f(c.get('tokens_mean'), 0)} / {_f(c.get('tokens_p95'), 0)} / {c.get('tokens_max', '—')}"
        enc = _f(t.get("encode_seconds"), 1) + (f" ({t['chunks_encoded']} new)" if "chunks_encoded" in t else "")
        rows.append(
            [
                m["chunker"],
                m["system"],
                str(c["n_chunks"]),
                dist,
                str(c["docs_without_chunks"]),
                str(c.get("chunks_over_max", "—")),
                enc if "encode_seconds" in t else "—",
                *(_f(m.get(x)) for x in cfg.metrics),
                _f(m.get(f"token_precision@{k0}")),
                _f(m.get(f"token_recall@{k0}")),
                _f(m.get(f"token_iou@{k0}")),
            ]
        )
        for b in cfg.budgets:
            s = budget_label(b)
            brows.append(
                [
                    f"{b} tokens",
                    m["chunker"],
                    m["system"],
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


def _resources(manifest: dict[str, Any]) -> list[str]:
    """One line of resource figures per chunking x retriever cell (from its manifest entry)."""
    cells = {name: m["resources"] for name, m in (manifest.get("systems") or {}).items() if m.get("resources")}
    if not cells:
        return []
    return ["## Resources", "", *(f"- **{name}**: {resource_line(r)}" for name, r in cells.items()), ""]


def render_markdown(cfg: ChunkingConfig, metrics_json: dict[str, Any], manifest: dict[str, Any]) -> str:
    """The chunking report: all chunks, then every retriever at a fixed context budget, then definitions."""
    head, rows, bhead, brows = summary_rows(cfg, metrics_json)
    ds = manifest.get("datasets", [{}])[0]
    k0 = cfg.token_k[0]
    parts = [
        f"# Chunking experiment: {cfg.name}",
        "",
        f"{ds.get('queries')} questions, {ds.get('gold_spans')} gold excerpts over {ds.get('documents')} documents "
        f"({ds.get('name')}); {cfg.depth} chunks retrieved per question; tokens counted with {manifest.get('tokenizer')} "
        f"(max length {cfg.max_seq_length} incl. {manifest.get('special_tokens')} special tokens). "
        f"Relevance by span overlap (min {cfg.min_chars} char(s), min fraction {cfg.min_fraction}).",
        "",
        "## All retrieved chunks",
        "",
        md_table(head, rows),
        "",
        "## Fixed context budget",
        "",
        "Larger chunks win recall@k trivially (k chunks hold more text), so each retriever is also read at a fixed "
        "budget: its top chunks in rank order while their tokens fit (the chunk that would overflow and all after it are left out).",
        "",
        md_table(bhead, brows),
        "",
        *_resources(manifest),
        "## Definitions",
        "",
        "- **recall@k**: share of a question's gold excerpts overlapped by at least one of the top k chunks "
        "(counted over excerpts, not chunks: several chunks may cover one excerpt).",
        "- **MRR@k**: 1 / rank of the first chunk overlapping any gold excerpt; nDCG and P@k grade a chunk 1 when it "
        "overlaps an excerpt, with the relevant chunks of this chunking as the ideal.",
        f"- **token P / R / IoU@{k0}**: character-level (exact, tokenizer-free) precision, recall and IoU of the union of "
        "the top chunks' text (overlapping chunks counted once) against the union of the gold excerpts, as in Chroma's study.",
        "- **over max len**: chunks with more tokens than the model reads (truncated when embedded); "
        "**docs w/o chunk**: documents that produced no chunk; **encode s**: time to embed the chunks "
        "(dense only; '(N new)' = chunks not already in the embedding cache).",
    ]
    return "\n".join(parts) + "\n"
