"""A failure belongs to the query that raised it, whatever the batching.

Real plugin retrievers (tests/plugins/toy_retrievers.py) fail on chosen queries: one that implements only
`search_one`, one whose batch API rejects a whole batch; a scope router raises for one query; a reranker
raises for one query inside a call of several. Whatever the batch size, exactly the chosen queries fail,
each with its own message verbatim, and every other query is answered as it is when searched alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import repo_paths
from retbench.cli import app
from retbench.data import Corpus, Queries, QueryStatus, RunBuilder
from retbench.retrievers.base import create
from retbench.retrievers.scope import ScopedRetriever

runner = CliRunner()
N_QUERIES = 30
CHOSEN = {f"q{i}" for i in range(N_QUERIES) if i % 7 == 3}  # q3, q10, q17, q24


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(repo_paths.PLUGINS))


def corpus() -> Corpus:
    return Corpus([f"d{i}" for i in range(N_QUERIES)], [f"word{i} common text" for i in range(N_QUERIES)])


def queries(marker: str = "zebra") -> Queries:
    return Queries({f"q{i}": f"word{i} common" + (f" {marker}" if f"q{i}" in CHOSEN else "") for i in range(N_QUERIES)})


@pytest.mark.parametrize("adapter", ["toy_retrievers:WordOverlap", "toy_retrievers:BatchOnly"])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_only_the_queries_that_raise_fail_whatever_the_batch_size(adapter: str, batch_size: int) -> None:
    retriever = create(adapter, {"fail_on": ["zebra"]})
    retriever.index(corpus())
    run = retriever.search(queries(), 5, batch_size=batch_size)
    alone = retriever.search(queries(), 5, batch_size=1)
    assert set(run.failed()) == CHOSEN
    message = "RuntimeError: WAL is corrupted" if adapter.endswith("WordOverlap") else "RuntimeError: 400 Bad Request"
    for q in CHOSEN:
        assert run.status[q] is QueryStatus.ERROR
        assert run.errors[q].startswith(message) and repr(queries()[q][:20]) in run.errors[q]  # its own message
    for q in set(run.query_ids) - CHOSEN:
        assert run.ranking(q) == alone.ranking(q) and run.ranking(q)[0][0] == f"d{q[1:]}"
        assert q not in run.errors


def test_a_batch_asked_again_query_by_query_is_counted_and_its_latencies_stay_batch_shares() -> None:
    retriever = create("toy_retrievers:BatchOnly", {"fail_on": ["zebra"]})
    retriever.index(corpus())
    run = retriever.search(queries(), 5, batch_size=7)
    assert retriever.fallbacks is not None
    # batches 0-6, 7-13, 14-20, 21-27 each hold one chosen query; 28-29 holds none
    assert (retriever.fallbacks.batches, retriever.fallbacks.queries) == (4, 28)
    assert retriever.fallbacks.first_error.startswith("RuntimeError: 400 Bad Request")
    assert {run.latency_batch[q] for q in run.query_ids} == {7, 2}  # never presented as per-query timings


def test_a_search_one_plugin_is_timed_one_query_at_a_time() -> None:
    retriever = create("toy_retrievers:WordOverlap", {"fail_on": ["zebra"]})
    retriever.index(corpus())
    run = retriever.search(queries(), 5, batch_size=64)
    assert run.latency_batch == {} and set(run.latency) == set(run.query_ids)


def test_a_scope_router_that_raises_for_one_query_fails_that_query_alone() -> None:
    inner = create("toy_retrievers:WordOverlap", {})
    scoped = ScopedRetriever(inner, "toy_retrievers:refuses_marked", "on")
    scoped.index(corpus())
    run = scoped.search(queries(), 5, batch_size=64)
    assert set(run.failed()) == CHOSEN
    for q in CHOSEN:
        assert run.errors[q] == (
            f"scope selector toy_retrievers:refuses_marked: LookupError: router has no route for {queries()[q][:20]!r}"
        )
    assert all(run.ranking(q)[0][0] == f"d{q[1:]}" for q in set(run.query_ids) - CHOSEN)


def test_a_reranker_that_raises_for_one_query_of_a_call_fails_that_query_alone(tmp_path: Path) -> None:
    from retbench.retrievers.rerank import RerankStage, create_reranker

    data, asked = corpus(), queries()
    first = create("toy_retrievers:WordOverlap", {})
    first.index(data)
    run = first.search(asked, 10)
    failing = sorted(CHOSEN)[0]
    reranker = create_reranker("toy_rerankers:Overlap", {"fail_on": [asked[failing]]})
    stage = RerankStage(reranker, 10, cache_dir=tmp_path, queries_per_call=16)
    reranked = stage.rerank(run, asked, data)
    assert reranked.failed() == [failing]
    assert reranked.errors[failing] == f"RuntimeError: toy reranker refuses {asked[failing]!r}"
    assert stage.stats.isolated_calls == 1
    # a query failed in the first stage stays failed with its own error
    b = RunBuilder("first")
    for q in run.query_ids:
        b.add(q, status=QueryStatus.TIMEOUT, error="timed out") if q == "q0" else b.add(q, run.ranking(q))
    again = RerankStage(reranker, 10, cache_dir=tmp_path, queries_per_call=16).rerank(b.build(), asked, data)
    assert set(again.failed()) == {"q0", failing}


def test_an_experiment_with_the_default_batch_size_records_only_the_failing_queries(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "qrels").mkdir(parents=True)
    docs = corpus()
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": docs.texts[i]}) + "\n" for i, d in enumerate(docs.ids))
    )
    qs = queries()
    (data / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": qs[q]}) + "\n" for q in qs))
    qrels = "".join(f"{q}\td{q[1:]}\t1\n" for q in qs)
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    systems = [
        {"name": name, "adapter": f"toy_retrievers:{name}", "params": {"fail_on": ["zebra"]}}
        for name in ("WordOverlap", "BatchOnly")
    ]
    cfg = {
        "name": "t",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": ["ndcg@10"],
        "datasets": [{"path": str(data), "split": "test"}],
        "systems": systems,
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["run", str(tmp_path / "exp.yaml"), "--quiet"])
    assert result.exit_code == 3, result.output  # a backend failed during the run: on 4 queries
    out = tmp_path / "out"
    for name in ("WordOverlap", "BatchOnly"):
        rows = [json.loads(x) for x in (out / "systems" / name / "status.jsonl").read_text().splitlines()]
        assert {r["qid"] for r in rows if r["status"] == "error"} == CHOSEN
        assert sum(r["status"] == "ok" for r in rows) == N_QUERIES - len(CHOSEN)
    manifest = json.loads((out / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert '"batch_fallbacks": {"batches": 1, "queries": 30' in text  # the whole-query-set batch, asked again
