"""Markdown renderers: the A/B comparison and the results report.

Both are plain GitHub-flavoured Markdown (tables, no HTML beyond <details>), so they read in a
terminal, a PR, or a wiki. Every mean is shown next to its coverage ("scored N of M").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retbench.report import fmt


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _side(name: str, counts: Mapping[str, int]) -> str:
    answered = counts["queries"] - counts["failed"] - counts["missing"]
    extra = [f"{counts[k]} {k}" for k in ("failed", "missing") if counts.get(k)]
    return f"`{name}` {fmt.coverage(answered, counts['queries'])}" + (f" ({', '.join(extra)}: counted as 0)" if extra else "")


def comparison_markdown(cmp: Any, *, alpha: float = 0.05, top_metric: str | None = None) -> str:
    """A comparison (compare.Comparison) as Markdown: one table per pair, then the most changed queries."""
    n_cells = sum(len(p.metrics) for p in cmp.pairs)
    lines = ["# A/B comparison", ""]
    for pair in cmp.pairs:
        a, b = pair.system_a, pair.system_b
        lines += [f"## `{b}` vs `{a}`", "", f"{_side(a, pair.counts_a)}; {_side(b, pair.counts_b)}.", ""]
        rows = []
        for m in pair.metrics:
            sig = " *" if m.adjusted.get("randomization", 1.0) < alpha else ""
            rows.append([
                fmt.metric_label(m.metric),
                fmt.num(m.mean_a),
                fmt.num(m.mean_b),
                f"{m.delta:+.4f}{sig}",
                f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}]",
                fmt.p_short(m.pvalues["randomization"]),
                fmt.p_short(m.adjusted.get("randomization")),
                fmt.p_short(m.adjusted.get("ttest")),
                fmt.p_short(m.adjusted.get("wilcoxon")),
                fmt.num(m.effect_size, 2),
                f"{m.wins}/{m.ties}/{m.losses}",
            ])
        lines += _table(
            ["metric", a, b, "Δ (B − A)", f"{cmp.confidence:.0%} CI", "p rand.", "p rand. Holm", "p t-test Holm",
             "p Wilcoxon Holm", "d_z", "win/tie/loss"],
            rows,
        )
        lines.append("")
        focus = next((m for m in pair.metrics if m.metric == top_metric), pair.metrics[0] if pair.metrics else None)
        if focus is not None and focus.top_changes:
            lines += [f"Most changed queries on {fmt.metric_label(focus.metric)}:", ""]
            lines += _table(
                ["query", "text", a, b, "Δ", "status"],
                [[c.query_id, _short(c.text), fmt.num(c.a), fmt.num(c.b), f"{c.delta:+.4f}",
                  c.status_a if c.status_a == c.status_b else f"{c.status_a} → {c.status_b}"] for c in focus.top_changes],
            )
            lines.append("")
    lines += [
        f"Δ is B − A; `*` marks a Holm-corrected randomization p below {alpha:g}. Tests are paired over the same queries: "
        f"randomization (sign flip, {cmp.n_resamples:,} resamples, seed {cmp.seed}), t-test, and Wilcoxon signed-rank "
        f"(zero_method `{cmp.wilcoxon_zero_method}`: zero deltas dropped). Holm correction runs across all {n_cells} "
        f"(metric, pair) comparisons, separately for each test. CI: paired percentile bootstrap of the mean delta. "
        "d_z = mean delta / sd of deltas. Failed and unanswered queries count 0, never dropped.",
        "",
    ]
    return "\n".join(lines)


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"
