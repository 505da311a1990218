"""A latency says what it measured: its timing (per query or a batch's mean), the parts inside it, and the caches'
state, in the terminal, report.md and report.html; real runs of the shipped MiniLM model on a SciFact slice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from retbench.cli import app

runner = CliRunner()
QUERIES = 12
DENSE = {"index": "flat_ip", "normalize": True, "max_seq_length": 128}


def _run(root: Path, scifact_path: Path, systems: list[dict], batch_size: int = 64, *args: str) -> tuple[str, Path]:
    """Run an experiment through the CLI; its terminal output and results folder."""
    cfg = {
        "name": "latency",
        "output": str(root / "out"),
        "depth": 20,
        "metrics": ["ndcg@10"],
        "batch_size": batch_size,
        "datasets": [
            {"name": str(scifact_path), "split": "test", "max_queries": QUERIES, "corpus_sample": 150, "seed": 0}
        ],
        "systems": systems,
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "exp.yaml"
    path.write_text(yaml.safe_dump(cfg))
    ran = runner.invoke(app, ["run", str(path), *args], env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    return ran.output, root / "out"


def _latency(out: Path, system: str) -> dict:
    return json.loads((out / "metrics.json").read_text())["systems"][system]["latency"]


def _status(out: Path, system: str) -> list[dict]:
    lines = (out / "systems" / system / "status.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _md_row(out: Path, system: str) -> list[str]:
    md = (out / "report.md").read_text()
    section = md.split("## Latency\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| {system} |"))
    return [c.strip() for c in row.strip("|").split("|")]


@pytest.fixture(scope="module")
def composite(tmp_path_factory, scifact_path: Path) -> tuple[str, Path, Path]:
    """dense (a cold embedding cache), then a hybrid whose dense component reads the vectors dense left, then BM25
    reranked by the MiniLM bi-encoder; all searched as one batch of 12 queries."""
    root = tmp_path_factory.mktemp("composite")
    cache = str(root / "embeddings")
    systems = [
        {"name": "dense", "adapter": "dense", "params": {**DENSE, "cache_dir": cache}},
        {
            "name": "hybrid",
            "adapter": "hybrid",
            "params": {
                "fusion": "rrf",
                "components": [
                    {"name": "bm25", "adapter": "bm25s"},
                    {"name": "dense", "adapter": "dense", "params": {**DENSE, "cache_dir": cache}},
                ],
            },
        },
        {
            "name": "reranked",
            "adapter": "bm25s",
            "rerank": {"kind": "bi_encoder", "depth": 20, "max_length": 128, "cache": False},
        },
    ]
    output, out = _run(root, scifact_path, systems)
    return output, out, root


def test_every_system_is_timed_after_the_same_query_vector_warm_up_whichever_ran_first(composite):
    _, out, _ = composite
    dense, hybrid = _latency(out, "dense"), _latency(out, "hybrid")
    # dense ran first on a cold cache, yet its queries were encoded before its search was timed, as the hybrid's were
    warm = [{"what": "query vectors", "from_cache": QUERIES, "of": QUERIES}]
    assert dense["query"]["caches"] == warm == hybrid["query"]["caches"]
    assert dense["query"]["warmup"] == {"query_vectors": QUERIES, "encoded": QUERIES}
    assert hybrid["query"]["warmup"] == {"query_vectors": QUERIES, "encoded": 0}  # dense had encoded them
    # what encoding a query costs is measured for both, apart from the cache: the hybrid's is not free
    manifest = json.loads((out / "manifest.json").read_text())["systems"]
    rates = [
        manifest[s]["resources"]["search_on"]["query_warmup"]["encode_seconds_per_query"] for s in ("dense", "hybrid")
    ]
    assert all(r > 0 for r in rates)


def test_a_hybrids_latency_holds_its_components_and_fusion(composite):
    _, out, _ = composite
    hybrid = _latency(out, "hybrid")
    parts = hybrid["query"]["parts"]
    assert hybrid["query"]["includes"] == ["component bm25", "component dense", "fusion"] == list(parts)
    assert all(p["n"] == QUERIES and p["total_s"] > 0 for p in parts.values())
    # the parts were timed inside the queries' latencies: their sum is within the total
    total = sum(r["latency"] for r in _status(out, "hybrid"))
    assert sum(p["total_s"] for p in parts.values()) <= total + 1e-5 * QUERIES  # status.jsonl rounds to 1e-6 s
    assert hybrid["stages"]["search"]["total_s"] >= sum(p["total_s"] for p in parts.values())
    row = _md_row(out, "hybrid")
    assert row[8] == "component bm25 + component dense + fusion"
    assert row[9] == f"query vectors: {QUERIES} of {QUERIES} from cache (warm), warmed up before timing"
    assert _md_row(out, "dense")[9] == row[9]
    md = (out / "report.md").read_text()
    assert "| hybrid | component dense | 12 |" in md and "| hybrid | fusion | 12 |" in md


def test_a_reranked_systems_latency_holds_the_first_stage_and_the_rerank_with_the_pair_cache_state(composite):
    _, out, _ = composite
    query = _latency(out, "reranked")["query"]
    assert query["includes"] == ["first stage", "rerank"]
    pairs = json.loads((out / "manifest.json").read_text())["systems"]["reranked"]["rerank"]["pairs"]
    assert query["parts"]["rerank"]["total_s"] == pairs["wall_seconds"] > 0
    total = _latency(out, "reranked")["stages"]["search"]["total_s"]
    assert query["parts"]["first stage"]["total_s"] + query["parts"]["rerank"]["total_s"] == pytest.approx(total)
    assert query["caches"] == [{"what": "rerank pairs", "from_cache": 0, "of": pairs["pairs_scored"]}]


def test_batch_timed_latencies_show_the_batch_mean_and_no_percentiles_in_every_format(composite):
    output, out, _ = composite
    for system in ("dense", "hybrid", "reranked"):
        status = _status(out, system)
        assert {r["latency_batch"] for r in status} == {QUERIES}  # one batch of 12: each latency is a twelfth
        search = _latency(out, system)["stages"]["search"]
        assert search["p50_s"] is None and search["p95_s"] is None and search["amortised"] is True
        assert search["mean_s"] == pytest.approx(sum(r["latency"] for r in status) / QUERIES, abs=1e-6)
        row = _md_row(out, system)
        assert row[2] == f"batch mean (batches of up to {QUERIES})"
        assert row[3:6] == ["not measured"] * 3 and row[7] == "not measured"  # p50, p95, p99; max
        assert float(row[6]) == pytest.approx(1000 * search["mean_s"], abs=0.006)
    html = (out / "report.html").read_text()
    assert html.count("batch mean (batches of up to 12)") == 3
    assert "No system was timed per query, so no latency distribution is drawn." in html
    assert 'data-chart="latency-ecdf"' not in html
    assert output.count("batch mean (batches of up to 12)") == 3 and "not measured" in output


def test_a_second_run_says_its_query_vectors_came_from_the_warm_cache(composite, scifact_path: Path):
    _, _, root = composite
    cache = str(root / "embeddings")
    output, out = _run(
        root / "again",
        scifact_path,
        [{"name": "dense", "adapter": "dense", "params": {**DENSE, "cache_dir": cache}}],
    )
    assert _latency(out, "dense")["query"]["caches"] == [
        {"what": "query vectors", "from_cache": QUERIES, "of": QUERIES}
    ]
    assert f"query vectors: {QUERIES} of {QUERIES} from cache (warm)" in output
    assert f"query vectors: {QUERIES} of {QUERIES} from cache (warm)" in (out / "report.html").read_text()


def test_queries_timed_one_at_a_time_get_percentiles_and_a_distribution(tmp_path: Path, scifact_path: Path):
    output, out = _run(tmp_path, scifact_path, [{"name": "bm25", "adapter": "bm25s"}], 1)
    status = _status(out, "bm25")
    assert len(status) == QUERIES and not any("latency_batch" in r for r in status)
    query = _latency(out, "bm25")["query"]
    assert query["timing"] == "per_query" and query["includes"] == ["search"] and query["caches"] == []
    search = _latency(out, "bm25")["stages"]["search"]
    assert search["p50_s"] is not None and "amortised" not in search
    row = _md_row(out, "bm25")
    assert row[2] == "per query" and "not measured" not in row and row[9] == "no cache"
    assert 'data-chart="latency-ecdf"' in (out / "report.html").read_text()
    assert "per query" in output


def test_a_run_read_back_from_its_journal_says_its_cache_state_was_not_recorded(tmp_path: Path, scifact_path: Path):
    _run(tmp_path, scifact_path, [{"name": "bm25", "adapter": "bm25s"}])
    assert _latency(tmp_path / "out", "bm25")["query"]["caches"] == []  # searched here, no cache involved
    (tmp_path / "out" / "systems" / "bm25" / "done.json").unlink()  # every answer is still in the journal
    _, out = _run(tmp_path, scifact_path, [{"name": "bm25", "adapter": "bm25s"}])
    assert "caches" not in _latency(out, "bm25")["query"]  # re-scored without searching: nothing was watched
    assert _md_row(out, "bm25")[9] == "not recorded"
    assert _md_row(out, "bm25")[2] == f"batch mean (batches of up to {QUERIES})"  # the journal kept the batch
