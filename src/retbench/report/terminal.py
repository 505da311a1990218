"""Terminal renderings (rich) of library results; no computation happens here."""

from __future__ import annotations

from typing import Any


def render_dataset_info(info: dict[str, Any]) -> Any:
    """A rich renderable for `dataset_info()` output."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = Table(title=f"{info['name']}  ({info['path']})", show_header=False, box=None)
    head.add_row("documents", f"{info['documents']:,}")
    head.add_row("queries", f"{info['queries']:,}")
    head.add_row("join rule", info["join_rule"])
    for unit in ("words", "chars"):
        s = info[f"document_{unit}"]
        if s:
            head.add_row(
                f"document {unit}",
                f"min {s['min']}  mean {s['mean']}  median {s['median']:g}  p95 {s['p95']:g}  max {s['max']}",
            )
    splits = Table(title="qrels splits")
    for col in ("split", "judged queries", "with a relevant doc", "judgements", "grades", "relevant / query"):
        splits.add_column(col, justify="right" if col != "split" else "left")
    for name, s in info["splits"].items():
        grades = ", ".join(f"{g}: {n}" for g, n in s["grades"].items())
        splits.add_row(
            name,
            f"{s['queries']:,}",
            f"{s['queries_with_relevant']:,}",
            f"{s['judgements']:,}",
            grades,
            str(s["relevant_per_query"]),
        )
    parts: list[Any] = [head, splits]
    if info["problems"]:
        parts.append(Text("problems:", style="bold yellow"))
        parts += [Text(f"  - {p}", style="yellow") for p in info["problems"]]
    else:
        parts.append(Text("no problems found", style="green"))
    return Group(*parts)


def render_summary(metrics_json: dict[str, Any], metrics: list[str], title: str = "") -> Any:
    """The end-of-run table: one row per system, its means and its coverage ("scored N of M")."""
    from rich.table import Table

    table = Table(title=title or None)
    table.add_column("system")
    for m in metrics:
        table.add_column(m, justify="right")
    table.add_column("scored", justify="right")
    for system, row in metrics_json.items():
        if "error" in row:
            table.add_row(system, *["—" for _ in metrics], f"[red]failed: {row['error']}[/red]")
            continue
        cov = row.get("coverage", {})
        scored = f"{cov.get('answered', '?')} of {cov.get('judged', '?')}"
        if cov.get("failed"):
            scored += f" [red]({cov['failed']} failed → 0)[/red]"
        if cov.get("mode") == "pytrec_eval":
            scored += " [yellow](pytrec_eval mode: answered only)[/yellow]"
        table.add_row(system, *[f"{row[m]:.4f}" if isinstance(row.get(m), float) else "—" for m in metrics], scored)
    return table


def render_costs(metrics_json: dict[str, Any]) -> Any:
    """Latency by stage and LLM tokens/cost per system (None when no system recorded either)."""
    from types import SimpleNamespace

    from rich.console import Group
    from rich.table import Table

    from retbench.report import breakdowns as b

    systems = [
        SimpleNamespace(name=name, stages=row.get("latency") or {}, usage=row.get("usage") or {})
        for name, row in metrics_json.items()
        if isinstance(row, dict)
    ]
    parts = []
    for title, header, rows in (
        ("latency by stage", b.STAGE_HEADER, b.stage_rows(systems)),
        ("LLM tokens and cost", b.USAGE_HEADER, b.usage_rows(systems)),
    ):
        if rows:
            table = Table(title=title)
            for i, col in enumerate(header):
                table.add_column(col, justify="left" if i < 2 else "right")
            for r in rows:
                table.add_row(*r)
            parts.append(table)
    return Group(*parts) if parts else None


def render_leaderboard(board: Any) -> Any:
    """Dataset x system on the primary metric, the mean over datasets and the average rank (best first)."""
    from rich.table import Table

    from retbench.report import fmt

    table = Table(title=f"leaderboard: {fmt.metric_label(board.metric)} (rank 1 = best)")
    table.add_column("system")
    for d in board.datasets:
        table.add_column(d, justify="right")
    table.add_column("mean", justify="right")
    table.add_column("avg rank", justify="right")
    for system, scores, mean, rank in board.rows():
        table.add_row(system, *(fmt.num(v) if v is not None else "—" for v in scores), fmt.num(mean), f"{rank:.2f}")
    return table
