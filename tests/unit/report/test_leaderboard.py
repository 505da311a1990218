"""Experiments over several datasets end in a leaderboard (terminal, report.md, report.html);
`ignore_identical_ids` is an evaluation setting recorded in the manifest."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.cli import app
from retbench.leaderboard import build_leaderboard
from retbench.report.leaderboard import leaderboard_dict
from retbench.report.resolution import rank_label
from retbench.resolution import rank_intervals
from retbench.results import MetricValue, StudyManifest, StudyResult, SystemResult, read_results

PLUGINS = str(repo_paths.PLUGINS)
runner = CliRunner()
BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}
OVERLAP = {"name": "overlap", "adapter": "toy_retrievers:word_overlap"}


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


def write_twins(root: Path) -> Path:
    """A BEIR folder shaped like ArguAna: every query is also a corpus document, under the same id."""
    root.mkdir(parents=True)
    docs, queries, qrels = [], [], ["query-id\tcorpus-id\tscore"]
    for i in range(8):
        topic = f"topic{i} subject{i} matter{i}"
        docs.append({"_id": f"arg{i}", "title": "", "text": f"{topic} the argument itself"})
        docs.append({"_id": f"counter{i}", "title": "", "text": f"{topic} a counter argument"})
        queries.append({"_id": f"arg{i}", "text": f"{topic} the argument itself"})
        qrels.append(f"arg{i}\tcounter{i}\t1")
    for i in range(20):
        docs.append({"_id": f"noise{i}", "title": "", "text": f"unrelated filler words number {i}"})
    with gzip.open(root / "corpus.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(d) + "\n" for d in docs)
    with gzip.open(root / "queries.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(q) + "\n" for q in queries)
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return root


def write_config(tmp_path: Path, datasets: list, out: str = "out", **extra) -> Path:
    cfg = {
        "name": "suite",
        "output": str(tmp_path / out),
        "depth": 10,
        "metrics": ["ndcg@10", "mrr"],
        "datasets": datasets,
        "systems": [BM25, OVERLAP],
        **extra,
    }
    path = tmp_path / f"{out}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def study(rows: dict[str, dict]) -> StudyResult:
    """Typed results from {key: {metric: value} or {"error": ...}}."""
    return StudyResult(
        StudyManifest(),
        {
            k: SystemResult(k, error=r["error"])
            if "error" in r
            else SystemResult(k, {m: MetricValue(v) for m, v in r.items()})
            for k, r in rows.items()
        },
    )


def test_ranks_tie_at_their_average_and_a_missing_score_ranks_last():
    mj = {
        "a/x": {"ndcg@10": 0.5},
        "a/y": {"ndcg@10": 0.5},
        "a/z": {"ndcg@10": 0.1},
        "b/x": {"ndcg@10": 0.2},
        "b/y": {"ndcg@10": 0.9},
        "b/z": {"error": "backend failed"},
    }
    board = build_leaderboard(study(mj), "ndcg@10")
    assert board.datasets == ["a", "b"]
    assert board.avg_rank == {"x": (1.5 + 2) / 2, "y": (1.5 + 1) / 2, "z": (3 + 3) / 2}
    assert board.systems == ["y", "x", "z"]
    assert board.mean["y"] == pytest.approx(0.7) and board.mean["z"] is None
    assert build_leaderboard(study({"x": {"ndcg@10": 0.3}}), "ndcg@10") is None  # one dataset: no leaderboard


def test_a_lower_is_better_metric_ranks_its_smallest_value_first():
    rates = {"a/x": 0.06, "a/y": 0.26, "a/z": 0.925, "b/x": 0.1, "b/y": 0.05, "b/z": 0.8}
    board = build_leaderboard(study({k: {"hallucination_rate": v} for k, v in rates.items()}), "hallucination_rate")
    assert board.avg_rank == {"x": (1 + 2) / 2, "y": (2 + 1) / 2, "z": 3.0}
    assert board.systems == ["x", "y", "z"]  # x and y tie on average rank; x has the lower mean (0.08 < 0.155)
    assert (board.best("a"), board.best("b")) == (0.06, 0.05)  # the bold cell of each dataset


def test_an_experiment_over_two_datasets_prints_and_writes_a_leaderboard(tmp_path: Path):
    twins = write_twins(tmp_path / "twins")
    cfg = write_config(tmp_path, [{"name": "scifact", "max_queries": 10, "corpus_sample": 150}, {"path": str(twins)}])
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    res = read_results(out)
    assert sorted(res.systems) == ["scifact/bm25", "scifact/overlap", "twins/bm25", "twins/overlap"]
    board = build_leaderboard(res, "ndcg@10")
    assert "leaderboard: nDCG@10" in result.output
    for system in ("bm25", "overlap"):
        mean = (res[f"scifact/{system}"].metrics["ndcg@10"].value + res[f"twins/{system}"].metrics["ndcg@10"].value) / 2
        assert board.mean[system] == pytest.approx(mean, abs=1e-12)
        assert re.search(rf"{system}\s.*{mean:.4f}\s.*{board.avg_rank[system]:.2f}", result.output)
    md = (out / "report.md").read_text()
    section = md.split("## Leaderboard: nDCG@10", 1)[1].split("\n## ", 1)[0]
    assert "| system | scifact | twins | mean | avg rank |" in section
    assert f"| {board.systems[0]} |" in section.splitlines()[4]  # best first
    html = (out / "report.html").read_text()
    assert 'id="leaderboard"' in html
    cell = f'data-dataset="twins" data-value="{res["twins/bm25"].metrics["ndcg@10"].value!r}"'
    assert cell in html
    # the report compares systems within each dataset, never across datasets
    pairs = re.findall(r"^### `(.+)` \(B\) vs `(.+)` \(A\)$", md, flags=re.M)
    assert pairs == [("scifact/overlap", "scifact/bm25"), ("twins/overlap", "twins/bm25")]


def test_ignore_identical_ids_is_off_by_default_and_recorded_in_the_manifest(tmp_path: Path):
    twins = str(write_twins(tmp_path / "twins"))
    plain = write_config(tmp_path, [{"path": twins}], out="plain")
    beir = write_config(tmp_path, [{"path": twins}], out="beir", evaluation={"ignore_identical_ids": True})
    for cfg in (plain, beir):
        result = runner.invoke(app, ["run", str(cfg), "--quiet"])
        assert result.exit_code == 0, result.output
    m_plain, m_beir = read_results(tmp_path / "plain"), read_results(tmp_path / "beir")
    # each query finds itself at rank 1 and its counter-argument at rank 2; BEIR/MTEB drop the first
    assert m_plain["bm25"].value("mrr") == pytest.approx(0.5)
    assert m_beir["bm25"].value("mrr") == pytest.approx(1.0)
    assert json.loads((tmp_path / "plain" / "manifest.json").read_text())["evaluation"]["ignore_identical_ids"] is False
    assert json.loads((tmp_path / "beir" / "manifest.json").read_text())["evaluation"]["ignore_identical_ids"] is True
    # the stored run is what the system returned; only the evaluation leaves the query's own id out
    run = (tmp_path / "beir" / "systems" / "bm25" / "run.trec").read_text().splitlines()
    assert run[0].split()[:3] == ["arg0", "Q0", "arg0"]


def test_ignore_identical_ids_must_be_a_boolean(tmp_path: Path):
    cfg = write_config(tmp_path, ["scifact"], evaluation={"ignore_identical_ids": "yes"})
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 2
    assert "evaluation.ignore_identical_ids" in result.output


def test_a_system_that_fails_while_indexing_still_exits_3_after_the_others_are_written(tmp_path: Path):
    (tmp_path / "alien.trec").write_text("1 Q0 not-a-scifact-doc 1 1.0 x\n")
    alien = {"name": "alien", "adapter": "runfile", "params": {"path": str(tmp_path / "alien.trec")}}
    cfg = {
        "name": "broken",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["mrr"],
        "datasets": [{"name": "scifact", "max_queries": 5, "corpus_sample": 100}],
        "systems": [BM25, alien],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["run", str(tmp_path / "exp.yaml"), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "backend failed for alien" in result.output
    res = read_results(tmp_path / "out")
    assert res["alien"].error and not res["alien"].metrics and res["bm25"].metrics["mrr"].value > 0


def test_a_suite_leaderboard_shows_each_rank_interval_and_the_group_tied_for_first(tmp_path: Path):
    twins = write_twins(tmp_path / "twins")
    cfg = write_config(tmp_path, [{"name": "scifact", "max_queries": 30, "corpus_sample": 300}, {"path": str(twins)}])
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    res = read_results(out)
    board = build_leaderboard(res, "ndcg@10")
    systems = ["bm25", "overlap"]
    tables = []
    for d in ("scifact", "twins"):
        evs = [res.evaluation(f"{d}/{s}") for s in systems]
        assert all(ev.query_ids == evs[0].query_ids for ev in evs)
        tables.append(np.column_stack([ev.column("ndcg@10") for ev in evs]))
    expected = rank_intervals(tables, systems, n_resamples=2000, seed=0)
    got = board.resolution
    assert got is not None
    assert (got.names, got.low, got.high, got.tied_first) == (
        expected.names,
        expected.low,
        expected.high,
        expected.tied_first,
    )
    assert got.means == pytest.approx([board.mean[s] for s in systems], abs=1e-12)
    labels = {
        s: expected.interval(s) + (" (tied 1st)" if len(expected.tied_first) > 1 and s in expected.tied_first else "")
        for s in systems
    }
    tied = ", ".join(expected.tied_first)
    for system, label in labels.items():
        assert re.search(rf"{system}\s.*{re.escape(label)}", result.output)
    md = (out / "report.md").read_text().split("## Leaderboard: nDCG@10", 1)[1].split("\n## ", 1)[0]
    assert "| system | scifact | twins | mean | avg rank | rank 95% |" in md
    for system, label in labels.items():
        assert re.search(rf"^\| {system} \|.*\| {re.escape(label)} \|$", md, flags=re.M)
    html = (out / "report.html").read_text()
    for s in systems:
        klass = "num tied-first" if s in expected.tied_first else "num"
        assert f'<td class="{klass}" data-interval="{expected.interval(s)}">' in html
    if len(expected.tied_first) > 1:
        assert f"Tied for first: {tied}" in md and f"Tied for first: {tied}" in html
    else:
        assert f"Only {tied} reaches rank 1" in md
    assert leaderboard_dict(board)["tied_first"] == expected.tied_first


def test_a_system_with_no_score_of_the_metric_anywhere_is_not_ranked_rather_than_last():
    rates = {"a/x": 0.2, "a/y": 0.4, "b/x": 0.3, "b/y": 0.1}
    rows = {k: {"scope_miss_rate": v, "recall@5": 0.5} for k, v in rates.items()}
    rows |= {"a/plain": {"recall@5": 0.8}, "b/plain": {"recall@5": 0.9}}  # no scope stage: no scope_miss_rate
    board = build_leaderboard(study(rows), "scope_miss_rate")
    assert board.avg_rank["plain"] is None and rank_label(board.avg_rank["plain"]) == "not ranked"
    assert board.systems == ["x", "y", "plain"]  # x: 1 and 2, y: 2 and 1; x has the lower mean miss rate
    assert leaderboard_dict(board)["rows"][2]["average_rank"] is None


def test_a_suite_ranks_on_the_first_metric_of_the_systems_when_a_label_coverage_measure_is_listed_first(
    tmp_path: Path,
):
    sets = [{"path": str(write_twins(tmp_path / name))} for name in ("twins", "twins2")]
    cfg = write_config(tmp_path, sets, metrics=["holes@10", "ndcg@10"])
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "leaderboard: nDCG@10" in result.output
    assert "## Leaderboard: nDCG@10" in (tmp_path / "out" / "report.md").read_text()


def test_identical_ids_dropped_that_the_qrels_judge_relevant_are_counted_and_said(tmp_path: Path):
    twins = write_twins(tmp_path / "twins")
    with (twins / "qrels" / "test.tsv").open("a") as fh:  # a public qrels file may judge a query's own id
        fh.write("arg0\targ0\t1\narg1\targ1\t1\n")
    cfg = write_config(tmp_path, [{"path": str(twins)}], evaluation={"ignore_identical_ids": True})
    result = runner.invoke(app, ["run", str(cfg), "--quiet", "--no-history"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    cov = read_results(tmp_path / "out")["bm25"].coverage
    assert (cov["identical_ids_dropped"], cov["identical_ids_relevant"]) == (8, 2)
    said = "bm25: BEIR's identical-id rule dropped 8 retrieved documents whose id equals their query's, 2 of them"
    assert said in " ".join(result.output.split())
    md = (tmp_path / "out" / "report.md").read_text()
    assert "identical query/doc ids ignored (8 dropped, 2 of them judged relevant)" in md
    assert said in " ".join(md.split())
