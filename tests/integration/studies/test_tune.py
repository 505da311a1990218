"""`retbench tune` on real SciFact queries: per-fold choices equal a selection recomputed from the per-query
tables, every setting is searched once (a rerun searches nothing), and bad grids are refused by file:line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import ConfigError
from retbench.inputs import load_systems
from retbench.studies.tune import load_config, run_tune
from retbench.tuning import assign_folds

runner = CliRunner()


def write(tmp_path: Path, grid: object, **extra: object) -> Path:
    exp = {
        "name": "t",
        "depth": 20,
        "metrics": ["ndcg@10"],
        "datasets": [{"name": "scifact", "split": "test", "max_queries": 40, "corpus_sample": 300}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    tune = {"experiment": "exp.yaml", "system": "bm25", "metric": "ndcg@10", "folds": 4, "grid": grid, **extra}
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(tune, sort_keys=False))
    return path


def test_each_fold_chooses_the_best_setting_on_the_other_folds_and_the_chosen_block_runs(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, {"params.k1": [0.5, 1.5, 3.0], "params.b": [0.3, 0.75]}), tmp_path / "out")
    out = run_tune(cfg, log=lambda _: None)
    # the default (k1 1.5, b 0.75) is also a grid point: searched once, not twice
    assert len(out.settings) == 6 and out.duplicates == ["params.k1=1.5, params.b=0.75"]
    loaded = load_systems([tmp_path / "out" / "runs"], metrics=["ndcg@10"])
    scores = np.stack([loaded.get(f"bm25-{s.index:02d}").column("ndcg@10") for s in out.settings])
    folds = assign_folds(scores.shape[1], 4, seed=0)
    for f, fold in enumerate(out.result.folds):
        assert fold.chosen == int(np.argmax(scores[:, folds != f].mean(axis=1)))
    record = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert record["out_of_sample"]["ci"][0] <= record["out_of_sample"]["mean"] <= record["out_of_sample"]["ci"][1]
    assert record["optimism"] == record["in_sample_best"]["mean"] - record["out_of_sample"]["mean"]
    chosen = yaml.safe_load((tmp_path / "out" / "chosen.yaml").read_text().split("\n", 1)[1])
    assert chosen[0]["name"] == "bm25" and chosen[0]["params"] == out.settings[out.result.chosen].system["params"]


def test_a_lower_is_better_metric_is_tuned_down_each_fold_choosing_the_fewest_holes(tmp_path: Path) -> None:
    path = write(tmp_path, {"params.k1": [0.5, 1.5, 3.0], "params.b": [0.3, 0.75]}, metric="holes@10")
    out = run_tune(load_config(path, tmp_path / "out"), log=lambda _: None)
    loaded = load_systems([tmp_path / "out" / "runs"], metrics=["holes@10"])
    scores = np.stack([loaded.get(f"bm25-{s.index:02d}").column("holes@10") for s in out.settings])
    folds = assign_folds(scores.shape[1], 4, seed=0)
    for f, fold in enumerate(out.result.folds):
        assert fold.chosen == int(np.argmin(scores[:, folds != f].mean(axis=1)))
    assert out.result.in_sample_best == int(np.argmin(scores.mean(axis=1)))
    record = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert record["higher_is_better"] is False
    assert record["optimism"] == record["out_of_sample"]["mean"] - record["in_sample_best"]["mean"]


def test_the_cli_prints_the_out_of_sample_estimate_and_a_rerun_searches_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, [{"params.k1": 0.9}, {"params.k1": 1.2, "params.b": 0.9}])
    first = runner.invoke(app, ["tune", str(path), "--output", str(tmp_path / "o"), "--max-queries", "24"])
    assert first.exit_code == 0, first.output
    assert "out-of-sample ndcg@10:" in first.output and "optimism" in first.output and "fold 4:" in first.output
    assert "24 queries" in first.output
    journal = tmp_path / "o" / "runs" / "systems" / "bm25-01" / "journal.jsonl"
    before = journal.read_bytes()
    again = runner.invoke(app, ["tune", str(path), "--output", str(tmp_path / "o"), "--max-queries", "24"])
    assert again.exit_code == 0, again.output
    assert journal.read_bytes() == before
    assert again.output.split("out-of-sample")[1] == first.output.split("out-of-sample")[1]


def test_a_grid_key_that_is_not_in_the_system_and_an_unknown_system_are_refused_by_file_and_line(tmp_path: Path):
    path = write(tmp_path, {"name": ["x"]})
    result = runner.invoke(app, ["tune", str(path), "--output", str(tmp_path / "o")])
    assert result.exit_code == 2 and "cannot change the system's name" in result.output
    path = write(tmp_path, {"params.k1": [1.0]}, system="dense")
    result = runner.invoke(app, ["tune", str(path)])
    assert result.exit_code == 2 and "tune.yaml:2" in result.output and "no system 'dense'" in result.output
    path = write(tmp_path, {"params.k1": []})
    try:
        load_config(path)
    except ConfigError as exc:
        assert "grid" in str(exc)
    else:
        raise AssertionError("an empty value list was accepted")


def test_the_candidate_table_ranks_every_setting_with_its_interval_and_the_report_charts_the_trade_off(tmp_path):
    """Four settings: each one's rank interval equals `rank_intervals` on the stored per-query tables (paired over
    the queries), in tune.json, the printed candidate table and report.html, whose trade-off charts put each
    setting's in-sample mean against its stored latency (the batch mean: these settings are timed as batches) with
    the Pareto front marked."""
    import re

    from retbench.pareto import Point, pareto_front
    from retbench.resolution import rank_intervals
    from retbench.results import read_results
    from retbench.results.usage import latency_summary

    path = write(tmp_path, [{"params.k1": 0.3}, {"params.k1": 1.2, "params.b": 0.9}, {"params.b": 0.1}])
    res = runner.invoke(app, ["tune", str(path), "--output", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    keys = [f"bm25-{i:02d}" for i in range(4)]
    stored = read_results(tmp_path / "o" / "runs")
    evs = [stored.evaluation(k) for k in keys]
    assert all(ev.query_ids == evs[0].query_ids for ev in evs)
    want = rank_intervals(np.column_stack([ev.column("ndcg@10") for ev in evs]), keys, n_resamples=2000)
    record = json.loads((tmp_path / "o" / "tune.json").read_text())
    for s, key in zip(record["settings"], keys, strict=True):
        i = want.names.index(key)
        assert s["rank_interval"] == [want.low[i], want.high[i]] and s["tied_first"] == (key in want.tied_first)
        label = want.interval(key) + (" (tied 1st)" if len(want.tied_first) > 1 and key in want.tied_first else "")
        assert re.search(rf"^  \[{s['index']}\]\s+{re.escape(s['label'])}\s+{s['in_sample_mean']:.4f}\s+"
                         rf"{re.escape(label)}\s", res.output, flags=re.M), (key, label)  # fmt: skip
    html = (tmp_path / "o" / "report.html").read_text()
    assert 'id="candidates"' in html and 'id="tradeoff"' in html
    points = []
    for i, (key, s) in enumerate(zip(keys, record["settings"], strict=True)):
        run = stored.run(key)
        assert run.latency_batch  # bm25s answers in batches: a batch mean, never per-query percentiles
        _, lat = latency_summary([v for v in run.latency.values() if v is not None], amortised=True)
        points.append(Point(f"[{i}] {s['label']}", s["in_sample_mean"], lat["mean"]))
    front = set(pareto_front(points))
    assert "vs p50 latency" not in html
    chart = html.split("vs mean latency (batch mean)", 1)[1].split("</svg>", 1)[0]
    marked = re.findall(r'<g data-pareto="(\d)">.*?<title>([^<:]+):', chart, flags=re.S)
    assert {n.replace("&quot;", '"') for on, n in marked if on == "1"} == front
    assert (tmp_path / "o" / "report.md").read_text().count("| [") == 4
