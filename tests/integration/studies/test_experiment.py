"""The experiment runner: results layout, resume, validation errors, failures, and a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.cli import app
from retbench.results import load_results
from stored import flat

PLUGINS = str(repo_paths.PLUGINS)
runner = CliRunner()


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


def write_config(tmp_path: Path, systems: list[dict], **extra) -> Path:
    cfg = {
        "name": "t",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["ndcg@10", "recall@5", "mrr", "map"],
        "datasets": [{"name": "scifact", "split": "test", "max_queries": 12, "corpus_sample": 200}],
        "systems": systems,
        **extra,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}


def test_run_writes_results_and_matches_pytrec_eval(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from retbench.io.trec import read_run

    cfg = write_config(tmp_path, [BM25, {"name": "overlap", "adapter": "toy_retrievers:word_overlap"}])
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    metrics = flat(out)
    assert list(metrics) == ["bm25", "overlap"]
    assert metrics["bm25"]["coverage"]["judged"] == 12 and metrics["bm25"]["coverage"]["answered"] == 12
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["datasets"][0]["join_rule"] == "title_space_text"
    assert manifest["datasets"][0]["corpus_fingerprint"] and "numpy" in manifest["versions"]
    assert "index_seconds" in manifest["systems"]["bm25"]["timings"]
    res = load_results(out)
    ev = res.evaluation("bm25")
    assert len(ev.query_ids) == 12
    # the stored run, checked independently with pytrec_eval against the slice's qrels
    from retbench.studies.benchmark import DatasetSpec, prepare_dataset

    ds, _ = prepare_dataset(DatasetSpec("scifact", "test", 12, 200))
    qrels = ds.split("test").to_dict()
    run = read_run(out / "systems" / "bm25" / "run.trec")
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recip_rank"}).evaluate(run.to_dict())
    ndcg = sum(v["ndcg_cut_10"] for v in scores.values()) / len(qrels)
    assert metrics["bm25"]["ndcg@10"] == pytest.approx(ndcg, abs=1e-9)
    assert "12 of 12" in result.output


def test_rerun_skips_and_force_redoes(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, [BM25])
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    done = tmp_path / "out" / "systems" / "bm25" / "done.json"
    first = done.stat().st_mtime_ns
    again = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert again.exit_code == 0 and "skipped" in again.output
    assert done.stat().st_mtime_ns == first
    forced = runner.invoke(app, ["run", str(cfg), "--quiet", "--force"])
    assert forced.exit_code == 0 and "skipped" not in forced.output
    assert done.stat().st_mtime_ns != first


@pytest.mark.parametrize(
    ("systems", "extra", "needles"),
    [
        ([{"adapter": "nope"}], {}, ["systems[0].adapter", "unknown adapter 'nope'", "bm25s"]),
        ([{"adapter": "bm25s", "params": {"k3": 1}}], {}, ["params.k3", "unknown parameter 'k3'", "k1"]),
        ([BM25], {"metrics": ["ndcg@10", "bogus@3"]}, ["metrics[1]", "unknown metric 'bogus@3'"]),
        ([BM25], {"datasets": [{"name": "no-such-dataset"}]}, ["no-such-dataset"]),
        ([BM25], {"depth": 0}, ["field 'depth'"]),
    ],
)
def test_config_errors_name_the_field(tmp_path: Path, systems: list, extra: dict, needles: list[str]) -> None:
    cfg = write_config(tmp_path, systems, **extra)
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for n in needles:
        assert n in result.output, (n, result.output)


def test_backend_failures_are_recorded_and_exit_3(tmp_path: Path) -> None:
    from retbench.studies.benchmark import DatasetSpec, prepare_dataset

    _, queries = prepare_dataset(DatasetSpec("scifact", "test", 12, 200))
    victim = next(iter(queries))
    marker = queries[victim][:30]
    toy = {"name": "toy", "adapter": "toy_retrievers:WordOverlap", "params": {"fail_on": [marker]}}
    cfg = write_config(tmp_path, [toy], batch_size=1)
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 3, result.output
    assert "WAL is corrupted at offset 78667" in result.output  # the backend's message, verbatim
    out = tmp_path / "out"
    status = [json.loads(x) for x in (out / "systems" / "toy" / "status.jsonl").read_text().splitlines()]
    failed = [s for s in status if s["status"] == "error"]
    assert [s["qid"] for s in failed] == [victim]
    assert "RuntimeError: WAL is corrupted" in failed[0]["error"]
    cov = flat(out)["toy"]["coverage"]
    assert cov == {**cov, "judged": 12, "failed": 1, "answered": 11}
    ev = load_results(out).evaluation("toy")
    row = ev.query_ids.index(victim)
    assert ev.values[row].tolist() == [0.0] * len(ev.metrics)  # counted as 0, never imputed


def test_sigkill_resumes_without_redoing_or_duplicating(tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"
    toy = {"name": "slow", "adapter": "toy_retrievers:WordOverlap", "params": {"delay": 0.15, "calls_log": str(calls)}}
    cfg = write_config(tmp_path, [toy], batch_size=1)
    env = {**os.environ, "PYTHONPATH": PLUGINS + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "retbench.cli", "run", str(cfg), "--quiet"]
    journal = tmp_path / "out" / "systems" / "slow" / "journal.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) >= 5:  # header + >= 4 queries
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    journaled = len(journal.read_text().splitlines()) - 1
    assert 4 <= journaled < 12
    calls_before = len(calls.read_text().splitlines())
    finished = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    total_calls = len(calls.read_text().splitlines())
    # resumed: only the unjournaled queries were asked again (at most the one in flight is repeated)
    assert total_calls - calls_before == 12 - journaled
    out = tmp_path / "out"
    status = [json.loads(x)["qid"] for x in (out / "systems" / "slow" / "status.jsonl").read_text().splitlines()]
    assert len(status) == 12 and len(set(status)) == 12
    assert flat(out)["slow"]["coverage"]["answered"] == 12


def test_pytrec_eval_mode_coverage_counts(tmp_path: Path) -> None:
    from retbench.studies.benchmark import DatasetSpec, prepare_dataset

    _, queries = prepare_dataset(DatasetSpec("scifact", "test", 12, 200))
    marker = queries[next(iter(queries))][:30]
    toy = {"name": "toy", "adapter": "toy_retrievers:WordOverlap", "params": {"fail_on": [marker]}}
    cfg = write_config(tmp_path, [toy], batch_size=1, evaluation={"mode": "pytrec_eval"})
    result = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert result.exit_code == 3, result.output
    cov = flat(tmp_path / "out")["toy"]["coverage"]
    # the failed query is left out of the mean (labelled mode) but still counted as judged and failed
    assert (cov["judged"], cov["failed"], cov["answered"], cov["scored"], cov["mode"]) == (12, 1, 11, 11, "pytrec_eval")
    assert "pytrec_eval mode" in result.output


def test_a_python_run_experiment_writes_the_same_reports_and_history_entry_as_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retbench
    from retbench.results.history_read import entries

    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("RETBENCH_HISTORY", str(history))
    systems = [BM25, {"name": "overlap", "adapter": "toy_retrievers:word_overlap"}]
    cfg = write_config(tmp_path, systems)
    result = runner.invoke(app, ["run", str(cfg), "--quiet", "--output", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    outcome = retbench.run_experiment(cfg, log=lambda _: None)  # the config's own output: tmp_path / "out"
    assert outcome.reports == ["report.md", "report.html"]

    def shown(folder: Path) -> tuple[list[str], str, str]:
        md = (folder / "report.md").read_text()
        html = (folder / "report.html").read_text()
        summary = md.split("## Summary", 1)[1].split("## Latency", 1)[0]  # means, CIs, coverage, comparison
        drill = html.split('id="retbench-drill">', 1)[1].split("</script>", 1)[0]  # per-query documents, values
        return [line for line in md.splitlines() if line.startswith("#")], summary, drill

    assert shown(tmp_path / "out") == shown(tmp_path / "cli")
    assert "## A/B comparison" in (tmp_path / "out" / "report.md").read_text()
    assert sorted(Path(e.results_dir).name for e in entries(history)) == ["cli", "out"]


def test_the_metric_at_k_curves_come_from_the_cells_own_evaluation_with_the_reports_values(tmp_path: Path) -> None:
    from retbench.evaluation import curves
    from retbench.studies.benchmark import DatasetSpec, load_config, prepare_dataset, run_experiment

    cfg = write_config(tmp_path, [BM25, {"name": "overlap", "adapter": "toy_retrievers:word_overlap"}])
    outcome = run_experiment(load_config(cfg), log=lambda _: None, history=False)
    in_memory = {o.name: o.result.curves for o in outcome.systems if o.result is not None}
    assert set(in_memory) == {"bm25", "overlap"} and all(len(c["ndcg"]) == 20 for c in in_memory.values())
    res = load_results(tmp_path / "out")
    assert res.evaluation("bm25").metrics == ["ndcg@10", "recall@5", "mrr", "map"]  # the table keeps the config's
    qrels = prepare_dataset(DatasetSpec("scifact", "test", 12, 200))[0].split("test")
    from_disk = curves.k_curves({s: res.evaluation(s) for s in in_memory}, {s: res.run(s) for s in in_memory}, qrels)
    assert from_disk == {f: {s: in_memory[s][f] for s in in_memory} for f in curves.CURVE_FAMILIES}
    assert from_disk["ndcg"]["bm25"][9] == pytest.approx(res.evaluation("bm25").mean("ndcg@10"), rel=1e-12)
