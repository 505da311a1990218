"""`retbench export mlflow` logs a results directory to a real MLflow tracking store (SQLite), read back
through MLflow's own client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from repo_paths import SRC
from retbench.cli import app
from stored import flat

mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed (scripts/setup.sh installs it)")
runner = CliRunner()


def test_export_logs_params_metrics_and_artifacts_that_mlflow_reads_back(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    cfg = {
        "name": "tracked",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["ndcg@10", "recall@5"],
        "datasets": [{"name": "scifact", "max_queries": 12, "corpus_sample": 150}],
        "systems": [{"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.2, "b": 0.75}}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    assert runner.invoke(app, ["run", str(tmp_path / "exp.yaml"), "--quiet", "--no-history"]).exit_code == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = runner.invoke(
        app,
        ["export", "mlflow", str(tmp_path / "out"), "--tracking-uri", uri, "--experiment", "retbench-test",
         "--artifact-location", str(tmp_path / "artifacts")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("retbench-test")
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert set(runs) == {"tracked", "bm25"}
    parent, child = runs["tracked"], runs["bm25"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    metrics = flat(tmp_path / "out")["bm25"]
    aggregates = json.loads((tmp_path / "out" / "systems" / "bm25" / "aggregates.json").read_text())

    params = child.data.params
    assert params["config.depth"] == "20" and params["config.systems"].startswith("[{")
    assert params["dataset0.qrels_fingerprint"] == manifest["datasets"][0]["qrels_fingerprint"]
    assert params["dataset0.corpus_fingerprint"] == manifest["datasets"][0]["corpus_fingerprint"]
    assert params["versions.numpy"] == manifest["versions"]["numpy"]
    assert params["adapter"] == "bm25s" and params["describe.k1"] == "1.2"
    assert parent.data.params["config.name"] == "tracked"

    m = child.data.metrics
    assert m["ndcg_at_10"] == metrics["ndcg@10"] and m["recall_at_5"] == metrics["recall@5"]
    assert m["ndcg_at_10.ci_low"] == aggregates["ndcg@10"]["ci_low"]
    assert m["ndcg_at_10.ci_high"] == aggregates["ndcg@10"]["ci_high"]
    assert m["coverage.judged"] == 12 and m["coverage.answered"] == 12
    assert json.loads(child.data.tags["retbench.metric_names"])["ndcg_at_10"] == "ndcg@10"

    files = {a.path for a in client.list_artifacts(child.info.run_id, "system")}
    assert files >= {"system/per_query.tsv", "system/run.trec", "system/status.jsonl", "system/aggregates.json"}
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"metrics.json", "manifest.json",
                                                                           "report.md", "report.html"}  # fmt: skip
    local = client.download_artifacts(child.info.run_id, "system/per_query.tsv", str(tmp_path / "dl"))
    assert Path(local).read_bytes() == (tmp_path / "out" / "systems" / "bm25" / "per_query.tsv").read_bytes()


def test_exporting_the_same_results_twice_logs_them_once_and_new_work_logs_anew(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    cfg = {
        "name": "twice",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["ndcg@10"],
        "datasets": [{"name": "scifact", "max_queries": 8, "corpus_sample": 100}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}, {"name": "weak", "adapter": "bm25s", "params": {"k1": 0.1}}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    run = ["run", str(tmp_path / "exp.yaml"), "--quiet", "--no-history"]
    assert runner.invoke(app, run).exit_code == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    export = ["export", "mlflow", str(tmp_path / "out"), "--tracking-uri", uri,
              "--artifact-location", str(tmp_path / "artifacts")]  # fmt: skip
    first = runner.invoke(app, export)
    assert first.exit_code == 0 and "logged to MLflow experiment" in first.output, first.output
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("twice")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 3
    parent = next(r for r in runs if r.info.run_name == "twice")
    assert len(parent.data.tags["retbench.fingerprint"]) == 64

    second = runner.invoke(app, export)
    assert second.exit_code == 0, second.output
    assert f"already in MLflow experiment {exp.experiment_id}: parent run {parent.info.run_id}" in second.output
    assert "bm25: run" in second.output and "weak: run" in second.output
    assert len(client.search_runs([exp.experiment_id])) == 3  # nothing logged twice

    assert runner.invoke(app, run).exit_code == 0  # a re-run that searched nothing: the same results
    assert "already in MLflow" in runner.invoke(app, export).output
    assert runner.invoke(app, [*run, "--force"]).exit_code == 0  # searched again: new results, a new export
    third = runner.invoke(app, export)
    assert third.exit_code == 0 and "logged to MLflow experiment" in third.output, third.output
    assert len(client.search_runs([exp.experiment_id])) == 6


# -- a store MLflow cannot use is one line and exit 2, and a silent server cannot hold the export ---------
@pytest.fixture(scope="module")
def small_results(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("mlflow_bad")
    cfg = {
        "name": "tracked",
        "output": str(base / "out"),
        "depth": 20,
        "metrics": ["ndcg@10"],
        "datasets": [{"name": "scifact", "max_queries": 8, "corpus_sample": 100}],
        "systems": [{"name": "bm25", "adapter": "bm25s"}],
    }
    (base / "exp.yaml").write_text(yaml.safe_dump(cfg))
    assert runner.invoke(app, ["run", str(base / "exp.yaml"), "--quiet", "--no-history"]).exit_code == 0
    return base / "out"


def _export(results: Path, uri: str, *extra: str):
    return runner.invoke(app, ["export", "mlflow", str(results), "--tracking-uri", uri, *extra])


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("ftp://host/store", "unsupported tracking URI scheme 'ftp'"),
        ("mlruns-folder", "is MLflow's file store, which MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true"),
        ("file:///tmp/mlruns", "is MLflow's file store"),
    ],
)
def test_a_tracking_uri_mlflow_cannot_use_is_refused_before_mlflow_is_asked(small_results, monkeypatch, uri, message):
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    result = _export(small_results, uri)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_damaged_sqlite_store_is_one_line_naming_it(small_results, tmp_path):
    store = tmp_path / "mlflow.db"
    store.write_bytes(b"this is not an SQLite database" * 100)
    result = _export(small_results, f"sqlite:///{store}")
    assert result.exit_code == 2, result.output
    assert f"MLflow tracking store 'sqlite:///{store}' failed" in result.output
    assert "file is not a database" in result.output and len(result.output.strip().splitlines()) == 1
    assert store.read_bytes() == b"this is not an SQLite database" * 100


def test_a_tracking_server_that_never_answers_costs_the_timeout_not_minutes(small_results):
    import socket

    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = _export(small_results, uri, "--timeout", "1")
    assert result.exit_code == 2, result.output
    assert f"MLflow tracking store '{uri}' failed" in result.output
    assert "timed out" in result.output.lower() or "timeout" in result.output.lower()


def test_a_password_in_the_tracking_uri_is_not_repeated_in_the_error(small_results):
    result = _export(small_results, "ftp://alice:s3cret@host/store")
    assert result.exit_code == 2 and "s3cret" not in result.output


def test_a_read_only_sqlite_store_is_one_line_naming_it(small_results, tmp_path):
    import sqlite3

    store = tmp_path / "ro.db"
    with sqlite3.connect(store) as con:
        con.execute("CREATE TABLE unrelated (a)")
    uri = f"sqlite:///file:{store}?mode=ro&uri=true"  # SQLite's own read-only open: every write is refused
    # a real process: MLflow logs to the stderr it found at import, which an in-process runner does not capture
    src = str(SRC)
    proc = subprocess.run(
        [sys.executable, "-m", "retbench.cli", "export", "mlflow", str(small_results), "--tracking-uri", uri],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        cwd=tmp_path,  # MLflow makes a folder named after the URI's path under the working directory
        timeout=300,
    )
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, out
    assert "attempt to write a readonly database" in out
    assert len(out.splitlines()) == 1, out  # MLflow's own INFO lines (table creation) are quieted


def test_an_export_cut_short_is_replaced_not_taken_for_a_finished_one(small_results, tmp_path):
    from mlflow.tracking import MlflowClient

    from retbench.results import load_results
    from retbench.results.mlflow_export import FINGERPRINT_TAG, results_fingerprint

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment("tracked", str(tmp_path / "artifacts"))
    # what an export killed after its first request leaves: a parent run with the fingerprint, never finished
    cut = client.create_run(
        exp_id, run_name="tracked", tags={FINGERPRINT_TAG: results_fingerprint(load_results(small_results))}
    )
    done = _export(small_results, uri)
    assert done.exit_code == 0 and "logged to MLflow experiment" in done.output, done.output
    assert client.get_run(cut.info.run_id).info.lifecycle_stage == "deleted"
    live = client.search_runs([exp_id])
    assert sorted(r.info.run_name for r in live) == ["bm25", "tracked"]
    assert all(r.info.status == "FINISHED" for r in live)


def test_artifacts_land_beside_the_sqlite_store_not_in_the_working_folder_and_the_console_says_where(
    small_results, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    work, store = tmp_path / "repo", tmp_path / "store"
    work.mkdir()
    store.mkdir()
    monkeypatch.chdir(work)  # a user's repository: the export must not leave ./mlruns in it
    uri = f"sqlite:///{store / 'mlflow.db'}"
    out = _export(small_results, uri, "--experiment", "beside")
    assert out.exit_code == 0, out.output
    where = (store / "mlartifacts").as_uri()
    assert f"artifacts: {where}" in out.output
    assert list(work.iterdir()) == []
    exp = MlflowClient(tracking_uri=uri).get_experiment_by_name("beside")
    assert exp.artifact_location == where
    assert any((store / "mlartifacts").rglob("metrics.json"))

    chosen = tmp_path / "chosen"
    given = _export(small_results, uri, "--experiment", "chosen", "--artifact-location", chosen.as_uri())
    assert given.exit_code == 0 and f"artifacts: {chosen.as_uri()}" in given.output
    assert any(chosen.rglob("metrics.json")) and list(work.iterdir()) == []
    again = _export(small_results, uri, "--experiment", "beside")  # the same results: nothing logged again
    assert again.exit_code == 0 and "nothing logged again" in again.output and f"artifacts: {where}" in again.output
