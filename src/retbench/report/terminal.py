"""Terminal renderings (rich) of library results; no computation happens here.

Tables are laid out for the width of the console they are printed on (`COLUMNS`, else the terminal's
width, else 160 when output is piped), and a table never cuts a number or a name to fit: `FittedTable`
prints it as it is when it fits, else transposed (columns as rows) when that fits, else split into
several tables that each fit, every part repeating the key column (the system) so each row can still
be read. Only a name wider than the whole console wraps onto a second line; nothing is replaced by "…".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from retbench.estimates import source_label
from retbench.secrets import redact

if TYPE_CHECKING:  # (results: annotations only; `retbench eval` prints a table without loading the results package)
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.text import Text

    from retbench.config.chunking import ChunkingModel
    from retbench.leaderboard import Leaderboard
    from retbench.report.resolution import RankResolution
    from retbench.results.model import MetricValue, StudyResult

Cell: TypeAlias = "str | Text"  # a str (printed as is, never read as markup) or a rich Text (styled)


def _text(cell: Cell) -> Text:
    """A cell as rich Text, redacted whole before any layout can wrap it (an error cell may quote a
    backend that echoed a secret, and a wrapped secret is split by the table's border)."""
    from rich.text import Text

    if isinstance(cell, Text):
        plain = redact(cell.plain)
        return cell if plain == cell.plain else Text(plain, style=cell.style)
    return Text(redact(str(cell)))


def _table_width(widths: Sequence[int]) -> int:
    """Width of a rich Table (default box, padding 1 each side) whose columns have these natural widths."""
    return sum(w + 3 for w in widths) + 1


@dataclass
class FittedTable:
    """A table that lays itself out for the console it is printed on (see the module docstring).

    `keys` leading columns identify a row (the system; system and stage); the rest are values, right
    aligned unless listed in `left`. `corner` heads the key column when the table is transposed.
    """

    header: list[str]
    rows: list[list[Cell]]
    title: str = ""
    keys: int = 1
    left: set[int] = field(default_factory=set)
    corner: str = ""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        yield from self.layout(options.max_width)

    def layout(self, width: int) -> list[RenderableType]:
        """The tables to print at `width` columns: the table, its transpose, or parts of either."""
        texts = [[_text(c) for c in row] for row in self.rows]
        cols = [[_text(h), *(r[i] for r in texts)] for i, h in enumerate(self.header)]
        widths = [max(t.cell_len for t in col) for col in cols]
        if _table_width(widths) <= width or not self.rows:
            return self._table(self.header, texts, self.keys, self.left, self.title, _table_width(widths))
        t_header, t_rows = self._transposed(texts)
        t_widths = [max(_text(c).cell_len for c in [h, *(r[i] for r in t_rows)]) for i, h in enumerate(t_header)]
        if _table_width(t_widths) <= width:
            title = f"{self.title} (transposed to fit {width} columns)" if self.title else ""
            return self._table(t_header, t_rows, 1, {0}, title, _table_width(t_widths))
        plain = self._groups(widths, self.keys, width)
        flipped = self._groups(t_widths, 1, width)
        if len(flipped) < len(plain):
            return self._parts(t_header, t_rows, 1, {0}, flipped, "transposed, ", t_widths)
        return self._parts(self.header, texts, self.keys, self.left, plain, "", widths)

    def _transposed(self, texts: list[list[Text]]) -> tuple[list[str], list[list[Text]]]:
        """One row per value column, one column per row (its key cells joined by " / ")."""
        from rich.text import Text

        names = [Text(" / ").join(r[: self.keys]) for r in texts]
        corner = self.corner or " / ".join(self.header[: self.keys])
        header = [corner, *(n.plain for n in names)]
        rows = [[_text(h), *(r[i] for r in texts)] for i, h in enumerate(self.header) if i >= self.keys]
        return header, rows

    @staticmethod
    def _groups(widths: list[int], keys: int, width: int) -> list[list[int]]:
        """Value columns in order, cut into groups that fit beside the key columns (at least one per group)."""
        groups: list[list[int]] = []
        current: list[int] = []
        base = widths[:keys]
        for i in range(keys, len(widths)):
            if current and _table_width([*base, *(widths[j] for j in current), widths[i]]) > width:
                groups.append(current)
                current = []
            current.append(i)
        return [*groups, current] if current else groups

    def _parts(
        self,
        header: list[str],
        rows: list[list[Text]],
        keys: int,
        left: set[int],
        groups: list[list[int]],
        how: str,
        widths: list[int],
    ) -> list[RenderableType]:
        out: list[RenderableType] = []
        n = len(header) - keys
        for p, group in enumerate(groups, start=1):
            cols = [*range(keys), *group]
            title = (
                f"{self.title + ' ' if self.title else ''}({how}part {p} of {len(groups)}: "
                f"columns {group[0] - keys + 1}-{group[-1] - keys + 1} of {n})"
            )
            out += self._table(
                [header[i] for i in cols],
                [[r[i] for i in cols] for r in rows],
                keys,
                {j for j, i in enumerate(cols) if i in left},
                title,
                _table_width([widths[i] for i in cols]),
            )
        return out

    @staticmethod
    def _table(
        header: list[str], rows: list[list[Text]], keys: int, left: set[int], title: str, width: int
    ) -> list[RenderableType]:
        """The table, titled; a title wider than the table (`width` columns) goes on a line of its own above it,
        where it has the console's width, so it is not folded into the table's narrower one."""
        from rich.table import Table
        from rich.text import Text

        title = redact(title)
        above = Text(title).cell_len > width
        table = Table(title=None if above else title or None)
        for i, h in enumerate(header):
            is_key = i < keys
            table.add_column(
                _text(h),
                justify="left" if is_key or i in left else "right",
                no_wrap=not is_key,
                overflow="fold",
            )
        for r in rows:
            table.add_row(*r)
        return [Text(title, style="italic"), table] if above else [table]


def render_dataset_info(info: dict[str, Any]) -> RenderableType:
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


def render_summary(result: StudyResult, metrics: list[str], title: str = "") -> RenderableType:
    """The end-of-run table: one row per system, its means and its coverage ("scored N of M")."""
    from rich.text import Text

    rows: list[list[Cell]] = []
    for system in result:
        if system.error is not None:
            rows.append([system.name, *["—" for _ in metrics], Text(f"failed: {system.error}", style="red")])
            continue
        cov = system.coverage
        scored = Text(f"{cov.get('answered', '?')} of {cov.get('judged', '?')}")
        if cov.get("failed"):
            scored.append(f" ({cov['failed']} failed → 0)", style="red")
        if cov.get("mode") == "pytrec_eval":
            scored.append(" (pytrec_eval mode: answered only)", style="yellow")
        rows.append([system.name, *(_with_source(system.metrics.get(m), m) for m in metrics), scored])
    table = FittedTable(["system", *metrics, "scored"], rows, title=title, corner="metric")
    return _with_caveats(table, result, metrics)


def _with_caveats(table: RenderableType, result: StudyResult, metrics: list[str]) -> RenderableType:
    """The table with one line under it per fact that weakens its numbers (report/weakening.py), if any."""
    from rich.console import Group
    from rich.text import Text

    # deferred: `retbench eval` imports this module for its tables, and these pull in the report model
    from retbench.report.weakening import caveat_lines
    from retbench.results.caveats import study_caveats

    lines = caveat_lines(study_caveats(result), metrics)
    return Group(table, *(Text(redact(line), style="yellow") for line in lines)) if lines else table


def _with_source(value: MetricValue | None, metric: str) -> str:
    """A system's mean, with its label source where that is not human, read from the value's own estimate block
    as report.md and report.html read it (`estimates.source_label`: LLM labels, or PPI with its n human / n LLM);
    an LLM-judged metric stored without the block is LLM labels alone."""
    from retbench.metrics.judged import JUDGED_METRICS

    if value is None or value.value != value.value:
        return "—"
    alone = {"source": "llm"} if value.estimate is None and metric in JUDGED_METRICS else None
    source = source_label(value.estimate or alone, value=True)
    return f"{value.value:.4f}" + (f" ({source})" if source else "")


def render_costs(result: StudyResult) -> RenderableType | None:
    """Query latency (with what it measured), its parts, latency by stage, failure rates by group (only groups
    with a failure) and LLM tokens/cost per system (None when no system recorded any)."""
    from types import SimpleNamespace

    from rich.console import Group
    from rich.text import Text as RichText

    from retbench.report import breakdowns as b
    from retbench.report import latency as lat
    from retbench.report.costs import COST_HEADER, cost_table
    from retbench.results.costs import gather_costs

    systems = [
        SimpleNamespace(name=s.name, stages=s.latency, usage=s.usage or {}, breakdown=s.breakdown or {}) for s in result
    ]
    parts = []
    for title, header, rows in (
        ("query latency", *lat.stored_rows(list(result))),
        ("parts of each query's latency", lat.PARTS_HEADER, lat.part_rows([(s.name, s.latency) for s in result])),
        ("latency by stage", b.STAGE_HEADER, b.stage_rows(systems)),
        ("failure rates by group (error / timeout / empty)", b.RATE_HEADER, b.rate_rows(systems)),
        ("LLM tokens and cost", b.USAGE_HEADER, b.usage_rows(systems)),
    ):
        if rows:
            parts.append(FittedTable(list(header), [list(r) for r in rows], title=title, keys=2))
    priced = gather_costs(result)  # the experiment's stated prices (`costs:`): cost per 1,000 queries
    if priced:
        rows, notes = cost_table(None, priced)
        parts.append(FittedTable(COST_HEADER, rows, title="cost (stated prices; missing = a measured item unpriced)"))
        parts += [RichText(n) for n in notes]
    return Group(*parts) if parts else None


def render_leaderboard(board: Leaderboard) -> RenderableType:
    """Dataset x system on the primary metric, the mean over datasets and the average rank (best first)."""
    from rich.console import Group
    from rich.text import Text

    from retbench.report import fmt
    from retbench.report.resolution import interval_cell, note, rank_label

    res = board.resolution
    rows: list[list[Cell]] = [
        [
            system,
            *(fmt.num(v) if v is not None else "—" for v in scores),
            fmt.num(mean),
            rank_label(board.avg_rank.get(system)),
            *([interval_cell(res, system)] if res is not None else []),
        ]
        for system, scores, mean, rank in board.rows()
    ]
    table = FittedTable(
        ["system", *board.datasets, "mean", "avg rank", *(["rank 95%"] if res is not None else [])],
        rows,
        title=f"leaderboard: {fmt.metric_label(board.metric)} (rank 1 = best)",
        corner="dataset",
    )
    return table if res is None else Group(table, Text(note(res, over_datasets=True), style="dim"))


def render_resolution(res: RankResolution, metric: str) -> RenderableType:
    """Rank, rank interval and share of resamples ranked first of three or more systems on one dataset."""
    from rich.console import Group
    from rich.text import Text

    from retbench.report import fmt
    from retbench.report.resolution import RESOLUTION_HEADER, note, resolution_rows

    rows: list[list[Cell]] = [list(r) for r in resolution_rows(res)]
    title = f"rank resolution: {fmt.metric_label(metric)}"
    return Group(FittedTable(RESOLUTION_HEADER, rows, title=title), Text(note(res), style="dim"))


def render_chunking(cfg: ChunkingModel, result: StudyResult) -> RenderableType:
    """The chunking report for the terminal: its intro, both tables fitted to the console, and where the rest is."""
    from rich.console import Group
    from rich.text import Text

    from retbench.report.chunking import BUDGET_NOTE, gather

    rep = gather(cfg, result)
    return Group(
        Text(rep.title, style="bold"),
        Text(rep.intro),
        FittedTable(rep.head, [list(r) for r in rep.rows], title="All retrieved chunks", keys=2, corner="column"),
        *(
            [
                Text(BUDGET_NOTE),
                FittedTable(
                    rep.budget_head,
                    [list(r) for r in rep.budget_rows],
                    title="Fixed context budget",
                    keys=3,
                    corner="column",
                ),
            ]
            if rep.budgets
            else []
        ),
        *(
            FittedTable(header, [list(r) for r in rows], title=f"breakdown by group: {name}", corner="column")
            for name, header, rows in rep.breakdowns
        ),
        Text("Resources, definitions and the budget chart: report.md and report.html.", style="dim"),
    )
