"""Executors: a Ray cluster gives the same run files and metrics as one process, resumes encodes from
the cache's shards, survives a worker killed mid-batch with every query journaled once, and says what
to install when ray is missing. One local 2-CPU Ray cluster serves the whole module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import repo_paths
from repo_paths import CONFIGS, SCIFACT, SRC
from retbench.config.experiment import ExecutorBlock
from retbench.errors import ConfigError
from retbench.io.trec import read_run
from retbench.results import read_results
from retbench.results.usage import scores_only
from retbench.studies.benchmark import load_config, parse_config, run_experiment
from retbench.studies.executors import NICENESS_ENV, init_ray, make_executor

PLUGINS = str(repo_paths.PLUGINS)
DATASET = {"name": "scifact", "split": "test", "max_queries": 16, "corpus_sample": 150}


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """A local Ray cluster of 2 CPUs whose workers import retbench and the test plugins."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'retbench[ray]')")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC), PLUGINS, *([saved] if saved else [])])
    saved_env = {name: os.environ.get(name) for name in ("RAY_USAGE_STATS_ENABLED", NICENESS_ENV)}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    sys.path.insert(0, PLUGINS)
    try:
        try:
            # Ray's session files (logs, sockets) under the test's temporary folder, not /tmp/ray; pytest's short
            # base paths keep the socket paths inside the 107-byte limit of a Unix socket name
            init_ray(
                ray,
                num_cpus=2,
                include_dashboard=False,
                logging_level="WARNING",
                _temp_dir=str(tmp_path_factory.mktemp("ray")),
            )
        except Exception as exc:  # Ray gives a local node a fixed 30 s to start; an overloaded machine misses it
            if "timed out during startup" not in str(exc):
                raise
            load = os.getloadavg()[0]
            pytest.skip(f"Ray's local node did not start within its fixed 30 s, 3 tries (load average {load:.0f})")
        yield ray
    finally:
        ray.shutdown()
        sys.path.remove(PLUGINS)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _config(tmp_path: Path, name: str, systems: list[dict], executor: object = None) -> Path:
    raw = {
        "name": name,
        "output": str(tmp_path / name),
        "depth": 20,
        "batch_size": 4,
        "metrics": ["ndcg@10", "recall@5", "map"],
        "datasets": [DATASET],
        "systems": systems,
    }
    if executor is not None:
        raw["executor"] = executor
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _dense(cache: Path) -> dict:
    return {"name": "dense", "adapter": "dense", "params": {"cache_dir": str(cache), "shard_size": 40}}


BM25 = {"name": "bm25", "adapter": "bm25s"}


def _run(path: Path, **kw):
    return run_experiment(load_config(path), log=lambda _: None, **kw)


def test_ray_gives_the_same_run_files_and_metrics_as_one_process_and_a_rerun_encodes_nothing(ray_cluster, tmp_path):
    local = _run(_config(tmp_path, "local", [BM25, _dense(tmp_path / "cache-local")]))
    spread_cfg = _config(tmp_path, "spread", [BM25, _dense(tmp_path / "cache-ray")], executor="ray")
    spread = _run(spread_cfg)
    assert scores_only(spread.result.to_dict()) == scores_only(local.result.to_dict())
    # BM25 runs are the same bytes; dense scores are the same up to float32 rounding (the guarantee the Ray
    # how-to states): Ray's workers run torch on one thread each and encode shard by shard, and float sums
    # taken in another order or batch shape differ in the last bits. The rankings are the same.
    bm25 = [(tmp_path / run / "systems" / "bm25" / "run.trec").read_bytes() for run in ("spread", "local")]
    assert bm25[0] == bm25[1]
    mine, theirs = (read_run(tmp_path / run / "systems" / "dense" / "run.trec") for run in ("spread", "local"))
    assert mine.query_ids == theirs.query_ids
    for q in theirs.query_ids:
        assert [d for d, _ in mine.ranking(q)] == [d for d, _ in theirs.ranking(q)], q
        assert np.allclose([s for _, s in mine.ranking(q)], [s for _, s in theirs.ranking(q)], rtol=1e-5, atol=1e-6)
    manifest = json.loads((tmp_path / "spread" / "manifest.json").read_text())
    assert manifest["executor"]["kind"] == "ray"
    dense = manifest["systems"]["dense"]["resources"]
    # 150 documents in shards of 40 over the cluster's two CPUs, written into the Ray run's own cache
    assert dense["encode_on"]["encoded"] == 150 and dense["encode_on"]["workers"] == 2
    # workers of a cluster retbench starts run at the priority of the process that started them (Ray's default
    # adds nice 15), and say what they used; the suite itself may run under `nice`, so compare with our own
    assert dense["encode_on"]["worker_nice"] == [os.nice(0)] and dense["encode_on"]["worker_cpu_seconds"] > 0
    assert len(list((tmp_path / "cache-ray").rglob("*.keys.npy"))) >= 4
    assert dense["search_on"]["executor"] == "ray" and dense["index_bytes"] > 150 * 384 * 4
    for key in ("encode_peak_rss_mib", "index_peak_rss_mib", "search_queries_per_s", "devices"):
        assert dense[key], key

    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    data = build_report(read_results(tmp_path / "spread"), n_resamples=200)
    md = report_markdown(data)
    assert "## Resources" in md and "encode docs/s" in md and "(workers " in md
    assert 'id="resources"' in render_html(data)

    again = _run(spread_cfg, force=True)
    redo = json.loads((tmp_path / "spread" / "manifest.json").read_text())["systems"]["dense"]["resources"]
    assert redo["encode_on"]["encoded"] == 0 and scores_only(again.result.to_dict()) == scores_only(
        local.result.to_dict()
    )


def test_an_interrupted_encode_resumes_from_the_shards_already_written(ray_cluster, tmp_path):
    from retbench.io.beir import read_beir
    from retbench.retrievers.dense import DenseRetriever

    texts = read_beir(SCIFACT).corpus.joined_texts()[:90]
    retriever = DenseRetriever(cache_dir=str(tmp_path / "cache"), shard_size=30)
    executor = make_executor(ExecutorBlock(kind="ray"))
    try:
        first = executor.encode_corpus(retriever, texts[:60])  # the part done before the interruption
        rest = executor.encode_corpus(retriever, texts)
        none = executor.encode_corpus(retriever, texts)
    finally:
        executor.close()
    assert (first["encoded"], rest["encoded"], none["encoded"]) == (60, 30, 0)
    assert retriever.encoder.plan(texts) == []


def test_a_search_worker_killed_mid_batch_is_retried_and_every_query_is_journaled_once(ray_cluster, tmp_path):
    marker = tmp_path / "killed.pid"
    dies = {"name": "dies", "adapter": "toy_retrievers:DiesOnce", "params": {"marker": str(marker)}}
    outcome = _run(_config(tmp_path, "dies", [dies], executor={"kind": "ray", "max_retries": 2}))
    assert marker.exists() and int(marker.read_text()) != os.getpid()  # a worker process really died
    lines = (tmp_path / "dies" / "systems" / "dies" / "journal.jsonl").read_text().splitlines()[1:]
    keys = [json.loads(line)["key"] for line in lines]
    assert len(keys) == len(set(keys)) == DATASET["max_queries"]
    assert outcome.systems[0].failed_queries == 0
    local = _run(_config(tmp_path, "local", [BM25]))
    died, alone = (scores_only(o.result.to_dict())["systems"] for o in (outcome, local))
    assert died["dies"] == alone["bm25"]


def test_executor_settings_errors_name_the_field(tmp_path):
    def executor(block: object | None) -> ExecutorBlock:
        data = {"datasets": ["scifact"], "systems": [{"adapter": "bm25s"}]}
        return parse_config(data if block is None else {**data, "executor": block}, "exp.yaml").executor

    with pytest.raises(ConfigError) as err:
        executor({"kind": "spark"})
    assert err.value.field == "executor.kind"
    with pytest.raises(ConfigError) as err:
        executor({"kind": "ray", "workerz": 2})
    assert err.value.field == "executor.workerz"
    with pytest.raises(ConfigError) as err:
        executor({"kind": "ray", "workers": 0})
    assert err.value.field == "executor.workers"
    assert executor(None).kind == "in_process" and executor("ray").kind == "ray"


def test_without_ray_installed_the_error_says_which_extra_to_install():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from retbench.errors import ConfigError\n"
        "from retbench.config.experiment import ExecutorBlock\n"
        "from retbench.studies.executors import make_executor\n"
        "try:\n    make_executor(ExecutorBlock(kind='ray'))\n"
        "except ConfigError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120).stdout
    assert "retbench[ray]" in out and "ray==2.60.0" in out


def test_the_shipped_ray_config_selects_the_ray_executor():
    cfg = load_config(CONFIGS / "ray.yaml")
    assert cfg.executor.kind == "ray" and cfg.executor.max_retries == 3
