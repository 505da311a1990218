"""The history trend in the terminal: every series label whole at any width, and no empty table."""

from __future__ import annotations

import json

from rich.console import Console

from retbench.report.history import nothing_matched, render_trend, what_is_recorded
from retbench.results.history_read import Entry

SYSTEMS = [f"bm25-analyzer-variant-{i:02d}" for i in range(6)]
DATASETS = [{"name": "cranfield", "split": "test", "queries": 225}, {"name": "scifact", "split": "test"}]


def entry(run: int, experiment: str = "quick") -> Entry:
    e = Entry(run, f"2026-01-0{run}T10:00:00", experiment, "out", "h", "abc123", False, None, None, DATASETS)
    for ds in DATASETS:
        for name in SYSTEMS:
            key = f"{name}@{ds['name']}"
            e.points[key] = (name, ds)
            e.scores[key] = {"ndcg@10": (0.4 + run / 100, 0.35, 0.45)}
            e.coverage[key] = {"answered": 225, "judged": 225}
    return e


def printed(renderable: object, width: int) -> str:
    con = Console(width=width, record=True, color_system=None)
    con.print(renderable)
    return con.export_text()


def test_twelve_series_print_with_whole_labels_at_80_and_160_columns():
    rows = [entry(1), entry(2), entry(3)]
    for width in (80, 160):
        text = printed(render_trend(rows, "ndcg@10"), width)
        assert "…" not in text
        parts = 1 if width == 160 else 3  # at 80 columns, one part per run
        for name in SYSTEMS:
            assert text.count(f"{name} · cranfield/test 225q") == parts, text  # a row (transposed) per series
        assert max(len(line) for line in text.splitlines()) <= width
        assert "transposed" in text


def test_a_history_query_that_matches_nothing_says_what_the_history_holds():
    everything = [entry(1), entry(2, "full")]
    said = nothing_matched({"--experiment": "nope", "--system": None}, everything, [], None)
    assert said.startswith("no run in the history matches --experiment nope; it holds experiments full, quick;")
    assert "systems bm25-analyzer-variant-00," in said and "datasets cranfield/test, scifact/test" in said
    assert said.endswith("metrics ndcg@10")
    no_metric = nothing_matched({"--experiment": "quick"}, everything, [everything[0]], "judged@10")
    assert no_metric == "no runs matching --experiment quick recorded judged@10; they recorded: ndcg@10"
    assert nothing_matched({}, [], [], None) == "the history holds no run yet (every `retbench run` adds one)"
    assert json.dumps(what_is_recorded([])) == json.dumps("no experiments; no systems; no datasets; no metrics")
