"""A run whose backend failed is shown as failed in the history, never as a 0.0 trend point, and a point's
counts add up to the dataset's query count (judged + skipped for having no relevant document).

Real runs: a BEIR folder written here, the word-overlap retriever of `tests/plugins/toy_retrievers.py`, one
instance failing on every query (a backend down), through `retbench run` and `retbench history`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.results.history_read import entries

runner = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _plugins_on_path() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(repo_paths.PLUGINS))
        yield


def app():
    from retbench.cli import app as cli

    return cli


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5 queries (q4 judges nothing relevant); `down` fails on every query, `up` answers them all."""
    tmp = tmp_path_factory.mktemp("history")
    data = tmp / "data"
    (data / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": "", "text": f"common w{i}"} for i in range(6)]
    (data / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"common w{i}"}) + "\n" for i in range(5))
    )
    qrels = [f"q{i}\td{i}\t1" for i in range(4)] + ["q4\td4\t0"]
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    overlap = "toy_retrievers:WordOverlap"
    cfg = {
        "name": "trend",
        "output": str(tmp / "out"),
        "depth": 10,
        "batch_size": 1,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": [
            {"name": "down", "adapter": overlap, "params": {"fail_on": ["common"]}},
            {"name": "up", "adapter": overlap},
        ],
    }
    (tmp / "exp.yaml").write_text(yaml.safe_dump(cfg))
    db = tmp / "history.db"
    res = runner.invoke(app(), ["run", str(tmp / "exp.yaml"), "--quiet"], env={"RETBENCH_HISTORY": str(db)})
    assert res.exit_code == 3, res.output  # a backend failed during the run
    return db


def test_a_system_whose_every_query_failed_is_no_trend_point(history):
    (entry,) = entries(history)
    down = next(k for k, (name, _) in entry.points.items() if name == "down")
    up = next(k for k, (name, _) in entry.points.items() if name == "up")
    assert down not in entry.scores and entry.coverage[down]["error"] == "every judged query failed (4 of 4)"
    assert entry.scores[up]["ndcg@10"][0] > 0


def test_the_trend_table_says_failed_where_the_backend_failed_and_counts_the_skipped_query(history):
    res = runner.invoke(
        app(), ["history", "--history-file", str(history), "--metric", "ndcg@10"], env={"COLUMNS": "250"}
    )
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "failed (4/4 queries)" in text and "0.0000" not in text
    assert "(1 skipped)" in text  # 5 queries in the split: 4 judged and scored, 1 without a relevant document


def test_a_history_of_failed_runs_alone_says_why_it_has_no_metric_to_follow(history):
    res = runner.invoke(app(), ["history", "--history-file", str(history), "--system", "down"])
    assert res.exit_code == 2
    assert "1 failed point holds no number" in " ".join(res.output.split())
