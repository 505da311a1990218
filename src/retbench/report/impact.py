"""The ingestion-impact report (report.md) and its candidates table (also the CLI's terminal table).

The study returns an `ImpactResult` (results/impact.py: Impact records, the gain weights and a summary); this
module only formats it. Differences read signed with four decimals ('0' when nothing changed, '–' when undefined).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from retbench.report import fmt
from retbench.report.markdown import md_table
from retbench.report.tables import resource_line
from retbench.results.impact import Impact, ImpactResult, impact_by_group

COMPACT = ("#", "document", "group", "status", "gain", "novelty min", "changed", "gained", "lost")


def _nearest(i: Impact) -> str:
    nov = i.novelty
    if nov is None or nov.nearest_doc is None:
        return "–"
    return f"{nov.nearest_doc} ({fmt.num(nov.max_cos, 3)})"


def _novelty(i: Impact, what: str) -> str:
    return fmt.num(getattr(i.novelty, what), 3) if i.novelty else "–"


def impact_rows(
    impacts: Sequence[Impact], metrics: Sequence[str], recall: str, *, compact: bool = False
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the candidates table (report.md; `compact` keeps a terminal's width: the gain's
    recall delta and the columns in COMPACT)."""
    header = [
        "#",
        "document",
        "group",
        "status",
        "gain",
        "novelty min",
        "novelty mean",
        "nearest (cos)",
        *(f"Δ{m}" for m in metrics),
        "Δcontext recall",
        f"own Δ{recall}",
        "changed",
        "gained",
        "lost",
    ]
    rows = [
        [
            str(n),
            i.doc_id,
            i.group,
            i.status + (f" ({i.duplicate_of})" if i.status == "duplicate" else ""),
            fmt.num(i.gain),
            _novelty(i, "min"),
            _novelty(i, "mean"),
            _nearest(i),
            *(fmt.signed(i.deltas.get(m)) for m in metrics),
            fmt.signed(i.d_context_recall),
            fmt.signed(i.own_deltas.get(recall)) if i.own_queries else "–",
            str(len(i.changed)),
            str(len(i.gained)),
            str(len(i.lost)),
        ]
        for n, i in enumerate(impacts, start=1)
    ]
    if compact:
        keep = [j for j, h in enumerate(header) if h in COMPACT or h == f"Δ{recall}"]
        return [header[j] for j in keep], [[r[j] for j in keep] for r in rows]
    return header, rows


def _header(result: ImpactResult) -> list[str]:
    g, metrics, summary, manifest = result.gain, result.metrics, result.summary, result.manifest
    return [
        f"# Ingestion impact: {result.name}",
        "",
        f"Dataset {manifest['dataset']['name']} ({manifest['dataset']['split']}, {summary['evaluation_queries']} evaluation queries); "
        f"knowledge base K = {summary['knowledge_base_documents']} documents; {summary['candidates']} candidates. "
        f"Retriever `{manifest['retriever'].get('adapter')}`; engine: {summary['engine']}.",
        "",
        "With K: " + ", ".join(f"{m} = {fmt.num(v)}" for m, v in result.before.items()) + ".",
        "",
        f"Gain = {g.alpha:g} × Δ{g.recall} + {g.beta:g} × Δcontext recall + {g.gamma:g} × novelty ({g.novelty} over chunks). "
        "Δ = metric mean over the evaluation queries with K + {d} minus with K; novelty = 1 − best cosine to K's chunks. "
        "'changed' counts queries whose top-k changed; 'gained'/'lost' those whose "
        f"{summary.get('affected_by', metrics[0])} went up/down (see candidates.json for the ids).",
        "",
        *_context_recall_judge(manifest.get("context_recall")),
    ]


def _context_recall_judge(cr: Mapping[str, Any] | None) -> list[str]:
    """Which judge decided that a reference sentence is supported (ΔContextRecall), by name."""
    if not cr:
        return []
    if cr.get("judge") == "llm":
        statuses = cr.get("statuses") or {}
        ok, total = statuses.get("ok", 0), sum(statuses.values())
        failed = ", ".join(f"{c} {st}" for st, c in sorted(statuses.items()) if st != "ok")
        how = (
            f"the LLM judge {cr.get('model')} with prompt {cr.get('prompt')} "
            f"(judged {ok} of {total} (query, document) pairs"
            + (f"; {failed}: no sentence supported" if failed else "")
            + ")"
        )
    else:
        how = f"cosine ≥ {fmt.num(cr.get('threshold'), 2)} to a sentence of the context"
    return [
        f"Context recall: a reference sentence is supported when judged so by {how}; top {cr.get('context_k')} context.",
        "",
    ]


def _by_group(alone: Sequence[Impact], metrics: Sequence[str]) -> list[str]:
    groups = impact_by_group(alone, metrics)
    if len(groups) <= 1:
        return []
    header = ["group", "n", "mean gain", "mean novelty min", *(f"mean Δ{m}" for m in metrics)]
    header.append("candidates with changed results")
    rows = [
        [
            g.group,
            str(g.n),
            fmt.num(g.mean_gain),
            fmt.num(g.mean_novelty_min, 3),
            *(fmt.signed(g.mean_deltas[m], 5) for m in metrics),
            str(g.changed),
        ]
        for g in groups
    ]
    return ["## By group", "", md_table(header, rows), ""]


def _study_checks(st: Mapping[str, Any], recall: str) -> list[str]:
    if "gold" not in st:
        return []
    gd = st["gold"]
    lines = [
        "## Study checks",
        "",
        f"- removed gold documents with positive own-query Δ{recall}: {gd['positive_own_delta_recall']} of {gd['n']} "
        f"(mean own-query Δ{recall} {fmt.signed(gd['mean_own_delta_recall'], 3)}); "
        f"not positive: {', '.join(gd['zero_or_negative_own_delta_recall']) or 'none'}",
        f"- gold documents ranked above every other candidate by gain: {gd['ranked_above_every_other_candidate']} of {gd['n']} "
        f"(lowest gold gain {fmt.num(gd['min_gain'])}, highest other {fmt.num(gd['max_other_gain'])})",
    ]
    for grp in ("near_duplicate", "present"):
        if grp in st:
            x = st[grp]
            lines.append(
                f"- {grp}: novelty < 0.05 for {x['novelty_below_0.05']} of {x['n']} (max {fmt.num(x['max_novelty'])}); "
                f"Δ{recall} = 0 for {x['recall_unchanged']} of {x['n']}; queries whose top-k changed: {x['results_changed_queries']}"
            )
    return [*lines, ""]


def _alone(alone: Sequence[Impact], metrics: Sequence[str], summary: Mapping[str, Any], recall: str) -> list[str]:
    h, rows = impact_rows(alone, metrics, recall)
    lines = ["## Candidates ranked by gain (each alone against K)", "", md_table(h, rows), ""]
    lines += ["### Affected queries of the 10 best candidates", ""]
    for i in alone[:10]:
        lines.append(
            f"- {i.doc_id}: changed {len(i.changed)}; gained: {', '.join(i.gained) or 'none'}; "
            f"lost: {', '.join(i.lost) or 'none'}; own queries: {', '.join(i.own_queries) or 'none'}"
        )
    lines.append("")
    return lines + _by_group(alone, metrics) + _study_checks(summary.get("study", {}), recall)


def _sequential(seq: Sequence[Impact], metrics: Sequence[str], order: str) -> list[str]:
    h = ["step", "document", "group", "status", "gain", "novelty min", *(f"Δ{m}" for m in metrics)]
    h += ["Δcontext recall", *metrics]
    rows = []
    for n, i in enumerate(seq, start=1):
        a = i.after or {}
        rows.append(
            [
                str(n),
                i.doc_id,
                i.group,
                i.status,
                fmt.num(i.gain),
                _novelty(i, "min"),
                *(fmt.signed(i.deltas.get(m)) for m in metrics),
                fmt.signed(i.d_context_recall),
                *(fmt.num(a.get(m)) for m in metrics),
            ]
        )
    return [
        "## Sequential ingestion (cumulative; metric columns are the means after each step)",
        "",
        f"Order: {order}.",
        "",
        md_table(h, rows),
        "",
    ]


def render_report(result: ImpactResult) -> str:
    """report.md: the ranked candidates table, group means, study checks, sequential and leave-one-out tables."""
    recall, metrics, results, summary, manifest = (
        result.gain.recall,
        result.metrics,
        result.results,
        result.summary,
        result.manifest,
    )
    lines = _header(result)
    if "alone" in results:
        lines += _alone(results["alone"], metrics, summary, recall)
    if "sequential" in results:
        lines += _sequential(results["sequential"], metrics, result.sequential_order)
    if "leave_one_out" in results:
        h, rows = impact_rows(results["leave_one_out"], metrics, recall)
        lines += [
            "## Leave-one-out (documents in K: metric with K minus without d; novelty against K without d)",
            "",
            md_table(h, rows),
            "",
        ]
    timings = ", ".join(f"{k.removesuffix('_seconds')} {v}" for k, v in manifest["timings"].items())
    lines.append(f"Timings (s): {timings}")
    if manifest.get("resources"):
        lines += ["", resource_line(manifest["resources"])]
    return "\n".join([*lines, ""])
