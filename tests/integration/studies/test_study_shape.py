"""One shape for every study: the results layout, the cell runner, typed configs with file:line errors."""

from __future__ import annotations

import json
import math
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
from retbench.config import sample_ids
from retbench.errors import ConfigError, InputError
from retbench.io.files import replace_atomically, write_json
from retbench.results import load_results
from retbench.results.layout import OutputLock
from stored import flat

PLUGINS = str(repo_paths.PLUGINS)
runner = CliRunner()
BM25 = {"name": "bm25", "adapter": "bm25s", "params": {"k1": 1.5, "b": 0.75}}


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


def tiny_beir(root: Path, qrels_rows: list[tuple[str, str, int]] | None = None) -> Path:
    """A four-document BEIR folder written by hand (corpus, queries, test and dev qrels)."""
    root.mkdir(parents=True)
    docs = {
        "d1": "tomatoes need full sun and deep watering",
        "d2": "roses are pruned in late winter",
        "d3": "bread needs flour water salt and yeast",
        "d4": "soup starts with onions softened in butter",
    }
    with open(root / "corpus.jsonl", "w") as fh:
        for i, t in docs.items():
            fh.write(json.dumps({"_id": i, "title": "", "text": t}) + "\n")
    queries = {"q1": "when are roses pruned", "q2": "what does bread need", "q3": "what do tomatoes need"}
    with open(root / "queries.jsonl", "w") as fh:
        for i, t in queries.items():
            fh.write(json.dumps({"_id": i, "text": t}) + "\n")
    (root / "qrels").mkdir()
    rows = qrels_rows if qrels_rows is not None else [("q1", "d2", 1), ("q2", "d3", 1), ("q3", "d1", 2)]
    for split in ("test", "dev"):
        body = "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)
        (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + body)
    return root


def write_yaml(path: Path, obj: dict) -> Path:
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def strict_load(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def assert_strict_json_everywhere(root: Path) -> int:
    """Every .json and .jsonl file under root parses with a strict parser; returns how many were read."""
    n = 0
    for p in root.rglob("*"):
        if p.suffix == ".json":
            strict_load(p.read_text())
            n += 1
        elif p.suffix == ".jsonl":
            for line in p.read_text().splitlines():
                if line.strip():
                    strict_load(line)
            n += 1
    return n


# -- results layout --------------------------------------------------------------------------------
def test_a_two_dataset_run_is_read_back_by_report_and_compare(tmp_path: Path) -> None:
    other = tiny_beir(tmp_path / "garden")
    cfg = write_yaml(
        tmp_path / "two.yaml",
        {
            "name": "two",
            "output": str(tmp_path / "out"),
            "depth": 10,
            "metrics": ["ndcg@10", "recall@5"],
            "datasets": [
                {"name": "scifact", "max_queries": 5, "corpus_sample": 100},
                {"path": str(other)},
            ],
            "systems": [BM25, {"name": "overlap", "adapter": "toy_retrievers:word_overlap"}],
        },
    )
    ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "out"
    res = load_results(out)
    assert list(res.systems) == ["scifact/bm25", "scifact/overlap", "garden/bm25", "garden/overlap"]
    assert (out / "systems" / "garden" / "bm25" / "per_query.tsv").is_file()
    assert res["garden/bm25"].coverage["judged"] == 3
    report = runner.invoke(app, ["report", str(out), "--resamples", "200"])
    assert report.exit_code == 0, report.output
    assert "garden/overlap" in report.output
    compared = runner.invoke(
        app, ["compare", str(out), "--systems", "garden/bm25,garden/overlap", "--resamples", "200"]
    )
    assert compared.exit_code == 0, compared.output
    every_pair = runner.invoke(app, ["compare", str(out), "--resamples", "200"])  # pairs within each dataset
    assert every_pair.exit_code == 0, every_pair.output
    assert assert_strict_json_everywhere(out) >= 10


def test_the_same_dataset_with_two_splits_gets_two_folders(tmp_path: Path) -> None:
    garden = tiny_beir(tmp_path / "garden")
    cfg = write_yaml(
        tmp_path / "splits.yaml",
        {
            "output": str(tmp_path / "out"),
            "metrics": ["ndcg@10"],
            "datasets": [{"path": str(garden), "split": "test"}, {"path": str(garden), "split": "dev"}],
            "systems": [BM25],
        },
    )
    ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert ran.exit_code == 0, ran.output
    assert list(load_results(tmp_path / "out").systems) == ["garden/bm25", "garden-dev/bm25"]


def test_the_same_dataset_and_split_twice_is_refused_when_the_config_is_read(tmp_path: Path) -> None:
    garden = tiny_beir(tmp_path / "garden")
    cfg = write_yaml(
        tmp_path / "twice.yaml",
        {
            "output": str(tmp_path / "out"),
            "datasets": [{"path": str(garden)}, {"path": str(garden), "split": "test"}],
            "systems": [BM25],
        },
    )
    ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert ran.exit_code == 2
    assert f"{cfg}:4: field 'datasets[1]'" in ran.output and "listed twice" in ran.output
    assert not (tmp_path / "out").exists()


def test_an_interrupted_write_leaves_the_previous_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "run.trec"
    target.write_text("q1 Q0 d1 1 1.0 old\n")

    def half_then_die(tmp: Path) -> None:
        tmp.write_text("q1 Q0 d")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        replace_atomically(target, half_then_die)
    assert target.read_text() == "q1 Q0 d1 1 1.0 old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.trec"]  # no temporary file left behind


def test_json_files_are_strict_nan_and_infinity_become_null(tmp_path: Path) -> None:
    write_json(tmp_path / "m.json", {"mean": math.nan, "ci": [math.inf, -math.inf, 0.5]})
    assert strict_load((tmp_path / "m.json").read_text()) == {"mean": None, "ci": [None, None, 0.5]}


def test_a_second_process_on_the_same_output_is_refused_naming_the_lock_and_its_holder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from retbench.results.layout import OutputLock\n"
            f"with OutputLock({str(out)!r}):\n    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        cfg = write_yaml(
            tmp_path / "x.yaml",
            {"output": str(out), "datasets": [{"path": str(tiny_beir(tmp_path / "g"))}], "systems": [BM25]},
        )
        ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
        assert ran.exit_code == 2
        assert str(out / ".retbench.lock") in ran.output and f"pid {holder.pid}" in ran.output
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    with OutputLock(out):  # released when its holder died
        pass


def test_a_split_without_any_relevant_document_is_a_clear_error_and_datasets_info_says_so(tmp_path: Path) -> None:
    garden = tiny_beir(tmp_path / "garden", qrels_rows=[("q1", "d2", 0), ("q2", "d3", 0)])
    cfg = write_yaml(
        tmp_path / "x.yaml",
        {"output": str(tmp_path / "out"), "datasets": [{"path": str(garden)}], "systems": [BM25]},
    )
    ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert ran.exit_code == 2
    assert "split 'test' judges no document relevant" in ran.output
    info = runner.invoke(app, ["datasets", "info", str(garden), "--json"])
    assert info.exit_code == 0, info.output
    assert any("split 'test' judges no document relevant" in p for p in json.loads(info.output)["problems"])


# -- config errors name file:line and field in every study ---------------------------------------------
def test_run_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "output: out\n"
        "datasets:\n"
        "  - {name: scifact, max_queries: 5}\n"
        "systems:\n"
        "  - {name: bm25, adapter: bm25s}\n"
        "  - name: other\n"
        "    adapter: bm25s\n"
        "    params:\n"
        "      k1: 1.2\n"
        "      k3: 8\n"
    )
    ran = runner.invoke(app, ["run", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:10: field 'systems[1].params.k3'" in ran.output


def test_a_bad_evaluation_setting_is_a_config_error_before_any_work(tmp_path: Path) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        f"output: {tmp_path / 'out'}\ndatasets: [scifact]\nsystems: [{{adapter: bm25s}}]\n"
        "evaluation:\n  relevance_level: 1\n  mode: trec\n"
    )
    ran = runner.invoke(app, ["run", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:6: field 'evaluation.mode'" in ran.output
    assert not (tmp_path / "out").exists()


def test_chunking_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "chunking.yaml"
    cfg.write_text(
        "dataset: chunking_eval\nchunkers:\n  - {name: c, kind: fixed_chars, size: 100}\nsystems:\n  - adapter: bm25s\n"
        "    params: {nope: 1}\n"
    )
    ran = runner.invoke(app, ["chunking", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:6: field 'systems[0].params.nope'" in ran.output


def test_ingest_impact_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "ingest.yaml"
    cfg.write_text("name: x\ndataset:\n  name: scifact\n  max_queries: -3\n")
    ran = runner.invoke(app, ["ingest-impact", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:4: field 'dataset.max_queries'" in ran.output


def test_a_bad_encoder_setting_in_ingest_impact_is_refused_before_any_work(tmp_path: Path) -> None:
    cfg = tmp_path / "ingest.yaml"
    cfg.write_text(
        f"output: {tmp_path / 'out'}\ndataset: scifact\nencoder:\n  batch_size: many\n"
        "candidates: [{kind: holdout, n: 2, seed: 0}]\n"
    )
    ran = runner.invoke(app, ["ingest-impact", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:4: field 'encoder.batch_size'" in ran.output
    assert not (tmp_path / "out").exists()


def test_stress_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    cfg = tmp_path / "stress.yaml"
    cfg.write_text(
        "datasets: [scifact]\nsystems: [{adapter: bm25s}]\nmetrics: [ndcg@10]\nstress:\n  levels: [1]\n"
        "  requests: lots\n"
    )
    ran = runner.invoke(app, ["stress", str(cfg)])
    assert ran.exit_code == 2
    assert f"{cfg}:6: field 'stress.requests'" in ran.output


def test_a_dataset_block_means_the_same_in_run_stress_and_ingest_impact(tmp_path: Path) -> None:
    block = "{name: scifact, max_querys: 5}"
    configs = {
        "run": f"datasets:\n  - {block}\nsystems: [{{adapter: bm25s}}]\n",
        "stress": f"datasets:\n  - {block}\nsystems: [{{adapter: bm25s}}]\nstress: {{levels: [1]}}\n",
        "ingest-impact": f"candidates: [{{kind: holdout, n: 2}}]\ndataset: {block}\n",
    }
    reasons = set()
    for study, text in configs.items():
        cfg = tmp_path / f"{study}.yaml"
        cfg.write_text(text)
        ran = runner.invoke(app, [study, str(cfg)])
        assert ran.exit_code == 2, (study, ran.output)
        where = "dataset" if study == "ingest-impact" else "datasets[0]"
        head = f"{cfg}:2: field '{where}.max_querys': "
        assert head in ran.output, (study, ran.output)
        reasons.add(ran.output.split(head, 1)[1].strip())
    assert len(reasons) == 1 and next(iter(reasons)).startswith("unknown key 'max_querys'; allowed: corpus_sample")


# -- max_queries and the chunking study's journal ----------------------------------------------------
def test_max_queries_is_the_same_seeded_sample_in_every_study(tmp_path: Path) -> None:
    from retbench.io.chunking_eval import read_chunking_eval
    from retbench.io.datasets import load_dataset, resolve
    from retbench.studies.benchmark import DatasetSpec, prepare_dataset

    ds = load_dataset("scifact", ["test"])
    judged = [q for q in ds.split("test") if q in ds.queries]
    _, queries = prepare_dataset(DatasetSpec("scifact", "test", max_queries=7, seed=3))
    assert list(queries) == sample_ids(judged, 7, 3) != judged[:7]

    small = write_yaml(
        tmp_path / "c.yaml",
        {
            "output": str(tmp_path / "c"),
            "dataset": "chunking_eval",
            "max_queries": 7,
            "seed": 3,
            "metrics": ["recall@5"],
            "chunkers": [{"name": "c", "kind": "fixed_chars", "size": 400}],
            "systems": [{"name": "overlap", "adapter": "toy_retrievers:word_overlap"}],
        },
    )
    ran = runner.invoke(app, ["chunking", str(small)])
    assert ran.exit_code == 0, ran.output
    asked = [json.loads(x)["qid"] for x in (tmp_path / "c/systems/c+overlap/status.jsonl").read_text().splitlines()]
    all_ids = read_chunking_eval(resolve("chunking_eval")).queries.ids
    assert asked == sample_ids(all_ids, 7, 3) != all_ids[:7]


def test_the_chunking_study_resumes_after_sigkill_without_redoing_or_duplicating_a_query(tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"
    n = 12
    slow = {"name": "slow", "adapter": "toy_retrievers:WordOverlap", "params": {"delay": 0.15, "calls_log": str(calls)}}
    cfg = write_yaml(
        tmp_path / "c.yaml",
        {
            "output": str(tmp_path / "out"),
            "dataset": "chunking_eval",
            "max_queries": n,
            "batch_size": 1,
            "metrics": ["recall@5"],
            "chunkers": [{"name": "c", "kind": "fixed_chars", "size": 400}],
            "systems": [slow],
        },
    )
    env = {**os.environ, "PYTHONPATH": PLUGINS + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "retbench.cli", "chunking", str(cfg)]
    journal = tmp_path / "out" / "systems" / "c+slow" / "journal.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) >= 5:  # header + >= 4 queries
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    journaled = len(journal.read_text().splitlines()) - 1
    assert 4 <= journaled < n
    calls_before = len(calls.read_text().splitlines())
    finished = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert len(calls.read_text().splitlines()) - calls_before == n - journaled  # only the unjournaled queries
    status = [json.loads(x)["qid"] for x in (journal.parent / "status.jsonl").read_text().splitlines()]
    assert len(status) == n and len(set(status)) == n
    metrics = flat(tmp_path / "out")
    assert metrics["c+slow"]["coverage"]["answered"] == n
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "finished earlier, skipped" in again.stdout
    assert len(calls.read_text().splitlines()) - calls_before == n - journaled  # nothing asked again
    assert assert_strict_json_everywhere(tmp_path / "out") >= 5


def test_changing_only_the_metrics_rescores_the_journal_without_searching_again(tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"
    toy = {"name": "toy", "adapter": "toy_retrievers:WordOverlap", "params": {"calls_log": str(calls)}}
    body = {
        "output": str(tmp_path / "out"),
        "datasets": [{"path": str(tiny_beir(tmp_path / "g"))}],
        "systems": [toy],
        "metrics": ["ndcg@10"],
    }
    cfg = write_yaml(tmp_path / "x.yaml", body)
    assert runner.invoke(app, ["run", str(cfg), "--quiet"]).exit_code == 0
    asked = len(calls.read_text().splitlines())
    write_yaml(cfg, {**body, "metrics": ["ndcg@10", "mrr@10"], "batch_size": 7})
    ran = runner.invoke(app, ["run", str(cfg), "--quiet"])
    assert ran.exit_code == 0, ran.output
    assert len(calls.read_text().splitlines()) == asked
    assert "mrr@10" in flat(tmp_path / "out")["toy"]


def test_config_errors_raised_inside_a_study_keep_their_own_location() -> None:
    from retbench.config import field_lines, line_of, locate

    lines = field_lines("a:\n  b:\n    - {c: 1}\n    - c: 2\n      d: 3\n")
    assert line_of(lines, "a.b[1].d") == 5 and line_of(lines, "a.b[1].missing") == 4
    err = locate(ConfigError("bad", field="a.b[0].c"), "x.yaml", lines)
    assert str(err) == "x.yaml:3: field 'a.b[0].c': bad"
    elsewhere = InputError("other file", path="y.tsv", line=2)
    assert locate(elsewhere, "x.yaml", lines) is elsewhere  # type: ignore[arg-type]
