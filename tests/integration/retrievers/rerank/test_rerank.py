"""Rerank stages: the first stage's top `depth` re-ordered, both runs kept, invariants checked, pair scores cached.

The cross-encoder is a tiny one fine-tuned here from the packaged all-MiniLM-L6-v2 on a few SciFact
*train* pairs (no cross-encoder weights are installable): it exercises the real CrossEncoder path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import repo_paths
from retbench.data import QueryStatus, RunBuilder
from retbench.errors import ConfigError
from retbench.results import read_results
from stored import flat_system

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.slow

PLUGINS = str(repo_paths.PLUGINS)


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


@pytest.fixture(scope="session")
def scifact_train():
    from retbench.io.datasets import load_dataset

    return load_dataset("scifact", ["train", "test"])


@pytest.fixture(scope="session")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory, scifact_train) -> Path:
    from retbench.retrievers.encoders import default_model
    from retbench.retrievers.rerank.train import train_cross_encoder, training_pairs

    pairs = training_pairs(scifact_train, "train", max_queries=8, negatives=2, hard=False, seed=1)
    return train_cross_encoder(
        default_model(), pairs, tmp_path_factory.mktemp("ce") / "tiny-ce", batch_size=8, max_length=96, seed=1
    )


@pytest.fixture(scope="module")
def slice_(scifact_train):
    """12 SciFact test queries over their judged documents plus 150 others, with a BM25 first stage."""
    from retbench.retrievers.bm25 import BM25SRetriever

    qrels = scifact_train.split("test")
    qids = [q for q in qrels if q in scifact_train.queries][:12]
    keep = {d for q in qids for d in qrels[q]}
    keep.update(list(scifact_train.corpus.ids)[:150])
    corpus = scifact_train.corpus.subset([d for d in scifact_train.corpus.ids if d in keep])
    queries = scifact_train.queries.subset(qids)
    bm25 = BM25SRetriever(name="bm25")
    bm25.index(corpus)
    return corpus, queries, bm25.search(queries, 20)


class CountingCrossEncoder:
    """The real cross-encoder reranker, with its model calls counted."""

    def __new__(cls, model: Path, **kw):
        from retbench.retrievers.rerank import CrossEncoderReranker

        class Counted(CrossEncoderReranker):
            calls = 0
            pairs = 0

            def predict(self, pairs):
                type(self).calls += 1
                type(self).pairs += len(pairs)
                return super().predict(pairs)

        return Counted(str(model), **kw)


def test_reranked_docs_are_the_first_stage_top_depth_reordered_by_the_cross_encoder(
    tiny_cross_encoder, slice_, tmp_path
):
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    stage = RerankStage(create_reranker("cross_encoder", {"model": str(tiny_cross_encoder)}), 10, cache_dir=tmp_path)
    reranked = stage.rerank(first, queries, corpus, name="bm25+ce")
    ce = stage.reranker
    assert reranked.query_ids == first.query_ids
    for q in first.query_ids:
        assert sorted(reranked.docs(q)) == sorted(first.docs(q)[:10])
        texts = [corpus.joined(corpus.index[d]) for d in reranked.docs(q)]
        expected = ce.predict([(queries[q], t) for t in texts])
        assert [s for _, s in reranked.ranking(q)] == pytest.approx(expected.tolist(), rel=1e-5, abs=1e-6)
        scores = [s for _, s in reranked.ranking(q)]
        assert scores == sorted(scores, reverse=True)
    assert any(reranked.docs(q) != first.docs(q)[:10] for q in first.query_ids), "the model re-orders something"


def test_at_depth_one_the_reranked_run_is_the_first_stage_top_one(tiny_cross_encoder, slice_, tmp_path):
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    stage = RerankStage(create_reranker("cross_encoder", {"model": str(tiny_cross_encoder)}), 1, cache_dir=tmp_path)
    reranked = stage.rerank(first, queries, corpus)
    assert {q: reranked.docs(q) for q in first.query_ids} == {q: first.docs(q)[:1] for q in first.query_ids}


def test_pair_scores_are_cached_so_a_second_depth_or_a_rerun_scores_no_pair_twice(tiny_cross_encoder, slice_, tmp_path):
    from retbench.retrievers.rerank import RerankStage

    corpus, queries, first = slice_
    ce = CountingCrossEncoder(tiny_cross_encoder)
    deep = RerankStage(ce, 10, cache_dir=tmp_path).rerank(first, queries, corpus)
    pairs_at_10 = type(ce).pairs
    assert pairs_at_10 == sum(min(10, len(first.docs(q))) for q in first.query_ids)
    calls = type(ce).calls
    shallow_stage = RerankStage(ce, 5, cache_dir=tmp_path)
    shallow = shallow_stage.rerank(first, queries, corpus)
    rerun = RerankStage(CountingCrossEncoder(tiny_cross_encoder), 10, cache_dir=tmp_path)
    again = rerun.rerank(first, queries, corpus)
    assert type(ce).calls == calls and type(ce).pairs == pairs_at_10
    assert rerun.stats.scored == 0 and rerun.stats.cached == pairs_at_10
    assert shallow_stage.stats.scored == 0
    assert again.to_dict() == deep.to_dict()
    assert all(sorted(shallow.docs(q)) == sorted(first.docs(q)[:5]) for q in first.query_ids)


def test_the_bi_encoder_reorders_the_first_stage_top_depth_by_minilm_cosine_computed_independently(slice_, tmp_path):
    from sentence_transformers import SentenceTransformer

    from retbench.retrievers.encoders import default_model
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    reranker = create_reranker("bi_encoder", {"cache_dir": str(tmp_path / "embeddings")})
    stage = RerankStage(reranker, 10, cache_dir=tmp_path)
    reranked = stage.rerank(first, queries, corpus, name="bm25+bi")
    model = SentenceTransformer(default_model(), device="cpu")  # the same model, without retbench's Encoder
    for q in first.query_ids:
        assert sorted(reranked.docs(q)) == sorted(first.docs(q)[:10])
        qv = model.encode([queries[q]], normalize_embeddings=True)[0]
        dv = model.encode([corpus.joined(corpus.index[d]) for d in reranked.docs(q)], normalize_embeddings=True)
        scores = [s for _, s in reranked.ranking(q)]
        assert scores == pytest.approx((dv @ qv).tolist(), abs=1e-5)
        assert scores == sorted(scores, reverse=True)
    assert any(reranked.docs(q) != first.docs(q)[:10] for q in first.query_ids), "the model re-orders something"
    again = RerankStage(
        create_reranker("bi_encoder", {"cache_dir": str(tmp_path / "embeddings")}), 10, cache_dir=tmp_path
    )
    assert again.rerank(first, queries, corpus).to_dict() == reranked.to_dict() and again.stats.scored == 0


def test_a_first_stage_failure_and_a_reranker_failure_are_recorded_per_query_verbatim(slice_, tmp_path):
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    bad_q, failing_q = first.query_ids[0], first.query_ids[5]
    b = RunBuilder("first")
    for q in first.query_ids:
        if q == bad_q:
            b.add(q, status=QueryStatus.TIMEOUT, error="backend timed out after 2 s")
        else:
            b.add(q, first.ranking(q))
    plugin = create_reranker("toy_rerankers:Overlap", {"fail_on": [queries[failing_q]]})
    reranked = RerankStage(plugin, 10, cache_dir=tmp_path, queries_per_call=1).rerank(b.build(), queries, corpus)
    assert reranked.status[bad_q] is QueryStatus.TIMEOUT
    assert reranked.errors[bad_q] == "backend timed out after 2 s"
    assert reranked.status[failing_q] is QueryStatus.ERROR
    assert reranked.errors[failing_q] == f"RuntimeError: toy reranker refuses {queries[failing_q]!r}"
    assert sum(reranked.status[q].failed for q in reranked.query_ids) == 2


def test_a_pair_cache_folder_given_as_a_string_caches_like_a_path(slice_, tmp_path):
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    stage = RerankStage(create_reranker("toy_rerankers:Overlap", {}), 10, cache_dir=str(tmp_path))
    reranked = stage.rerank(first, queries, corpus)
    assert not reranked.errors
    assert stage.stats.scored == sum(min(10, len(first.docs(q))) for q in first.query_ids)
    again = RerankStage(create_reranker("toy_rerankers:Overlap", {}), 10, cache_dir=tmp_path)
    assert again.rerank(first, queries, corpus).to_dict() == reranked.to_dict() and again.stats.scored == 0


def _expected_rrf(first: list[str], reranked: list[str], k: float = 60.0) -> list[str]:
    """Reciprocal rank fusion written out: 1/(k + rank) from each list, ties by doc id descending."""
    score = {d: 1 / (k + first.index(d) + 1) + 1 / (k + reranked.index(d) + 1) for d in first}
    return sorted(score, key=lambda d: (score[d], d), reverse=True)


def test_a_fused_rerank_mixes_the_first_stage_ranking_with_the_rerankers_over_the_same_candidates(slice_, tmp_path):
    from retbench.retrievers.rerank import RerankFusion, RerankStage, create_reranker

    corpus, queries, first = slice_
    overlap = create_reranker("toy_rerankers:Overlap", {})
    alone = RerankStage(overlap, 15, cache_dir=tmp_path).rerank(first, queries, corpus)
    fused_stage = RerankStage(overlap, 15, cache_dir=tmp_path, fusion=RerankFusion("rrf"))
    fused = fused_stage.rerank(first, queries, corpus)
    assert fused_stage.stats.scored == 0  # the reranker's own scores came from the cache
    assert fused_stage.describe()["fuse"] == {"fusion": "rrf", "weights": [1.0, 1.0], "rrf_k": 60.0}
    moved = 0
    for q in first.query_ids:
        top = first.docs(q)[:15]
        assert fused.docs(q) == _expected_rrf(top, alone.docs(q))
        moved += fused.docs(q) not in (top, alone.docs(q))
    assert moved > 0  # the fusion is neither input on this slice
    only_first = RerankStage(overlap, 15, cache_dir=tmp_path, fusion=RerankFusion("weighted", (1.0, 0.0)))
    only_rerank = RerankStage(overlap, 15, cache_dir=tmp_path, fusion=RerankFusion("weighted", (0.0, 1.0)))
    by_first, by_rerank = only_first.rerank(first, queries, corpus), only_rerank.rerank(first, queries, corpus)
    for q in first.query_ids:
        assert by_first.docs(q) == first.docs(q)[:15]
        assert by_rerank.docs(q) == alone.docs(q)


@pytest.mark.parametrize(
    ("fuse", "field", "reason"),
    [
        ({"fusion": "rff"}, "fuse.fusion", "rrf"),
        ({"weights": [1]}, "fuse.weights", "2"),
        ({"weights": [-1, 1]}, "fuse.weights[0]", "0"),
        ({"rrf_k": -5}, "fuse.rrf_k", "0"),
        ({"normalisation": "zscore"}, "fuse.normalisation", "normalization"),
        ("rrf", "fuse", "must be a mapping"),
    ],
)
def test_a_bad_fuse_block_is_a_config_error_naming_its_field(tmp_path, fuse, field, reason):
    from retbench.studies.benchmark import parse_config

    cfg = _config(tmp_path, tmp_path)
    cfg["systems"][1]["rerank"]["fuse"] = fuse
    with pytest.raises(ConfigError) as err:
        parse_config(cfg, "rr.yaml")
    assert err.value.field == f"systems[1].rerank.{field}"
    assert reason in str(err.value)


def test_a_reranked_list_that_is_not_the_first_stage_top_depth_breaks_an_invariant():
    from retbench.retrievers.rerank import invariant_problem

    assert invariant_problem(["a", "b", "c"], ["b", "a"], 2) is None
    assert "not in the first stage's top 2" in invariant_problem(["a", "b", "c"], ["c", "a"], 2)
    assert "has 1 docs" in invariant_problem(["a", "b", "c"], ["a"], 2)
    assert invariant_problem(["a", "b"], ["a"], 1) is None


def test_a_rerank_answer_that_skips_or_invents_a_document_is_refused_with_the_reason():
    from retbench.retrievers.rerank import parse_rerank_response

    ok = {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]}
    assert parse_rerank_response(ok, 2) == [0.1, 0.9]
    assert parse_rerank_response([{"index": 0, "score": 2.0}], 1) == [2.0]  # text-embeddings-inference's shape
    with pytest.raises(ValueError, match="index 5 is not one of the 2"):
        parse_rerank_response({"results": [{"index": 5, "relevance_score": 1}]}, 2)
    with pytest.raises(ValueError, match="left out 1 of 2"):
        parse_rerank_response({"results": [{"index": 0, "relevance_score": 1}]}, 2)


def _config(tmp_path: Path, model: Path, depth: int = 10, metrics=("ndcg@10", "recall@10")) -> dict:
    return {
        "name": "rr",
        "output": str(tmp_path / "out"),
        "depth": 10,
        "metrics": list(metrics),
        "datasets": [{"name": "scifact", "split": "test", "max_queries": 15, "corpus_sample": 200}],
        "systems": [
            {"name": "bm25", "adapter": "bm25s"},
            {
                "name": "bm25-ce",
                "adapter": "bm25s",
                "rerank": {"kind": "cross_encoder", "depth": depth, "model": str(model), "max_length": 96},
            },
        ],
    }


def test_a_rerank_depth_below_a_metric_cutoff_is_a_config_error_naming_the_field(tmp_path):
    from retbench.studies.benchmark import parse_config

    with pytest.raises(ConfigError) as err:
        parse_config(_config(tmp_path, tmp_path, depth=5), "rr.yaml")
    assert err.value.field == "systems[1].rerank.depth"
    assert "below the largest metric cutoff 10" in str(err.value)
    bad = _config(tmp_path, tmp_path)
    bad["systems"][1]["rerank"]["temperature"] = 2
    with pytest.raises(ConfigError) as err:
        parse_config(bad, "rr.yaml")
    assert err.value.field == "systems[1].rerank.temperature"


def test_an_experiment_keeps_both_runs_and_reports_the_ceiling_and_the_paired_comparison(
    tiny_cross_encoder, tmp_path, monkeypatch
):
    from retbench.io.trec import read_run
    from retbench.studies.benchmark import parse_config, run_experiment

    monkeypatch.setenv("RETBENCH_CACHE", str(tmp_path / "cache"))
    cfg = parse_config(_config(tmp_path, tiny_cross_encoder), "rr.yaml")
    outcome = run_experiment(cfg, log=lambda _: None)
    sysdir = tmp_path / "out" / "systems" / "bm25-ce"
    first = read_run(sysdir / "first_stage" / "run.trec")
    final = read_run(sysdir / "run.trec")
    plain = read_run(tmp_path / "out" / "systems" / "bm25" / "run.trec")
    assert first.to_dict() == plain.to_dict()  # the same first stage as the plain system
    assert all(set(final.docs(q)) == set(first.docs(q)[:10]) for q in first.query_ids)
    m = flat_system(outcome.result["bm25-ce"])
    assert m["first_stage"]["ndcg@10"] == pytest.approx(outcome.result["bm25"].metrics["ndcg@10"].value)
    ceiling = m["rerank"]["ceiling"]
    assert ceiling["metric"] == "recall@10"
    # reranking the top 10 cannot change recall@10: the ceiling is met exactly
    assert m["recall@10"] == pytest.approx(ceiling["value"])
    paired = m["rerank"]["vs_first_stage"]["ndcg@10"]
    assert paired["n"] == m["coverage"]["scored"]
    assert paired["delta"] == pytest.approx(m["ndcg@10"] - m["first_stage"]["ndcg@10"], abs=1e-9)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["systems"]["bm25-ce"]["rerank"]["pairs"]["pairs_scored"] > 0
    # both reports show the ceiling and the paired test beside the final metrics, for the reranked system only
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    data = build_report(read_results(tmp_path / "out"), n_resamples=200)
    md = report_markdown(data)
    section = md.split("## Rerank stages", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| bm25-ce "))
    assert f"recall@10 = {ceiling['value']:.4f}" in row
    assert f"{m['first_stage']['ndcg@10']:.4f} | {m['ndcg@10']:.4f}" in row
    assert f"{paired['wins']}/{paired['ties']}/{paired['losses']}" in row
    assert "| bm25 " not in section
    assert 'id="rerank"' in render_html(data)
    # a second run of the same config with --force re-scores nothing: every pair comes from the cache
    again = run_experiment(cfg, force=True, log=lambda _: None)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["systems"]["bm25-ce"]["rerank"]["pairs"]["pairs_scored"] == 0
    assert flat_system(again.result["bm25-ce"])["ndcg@10"] == m["ndcg@10"]


def test_the_http_reranker_reads_retbench_serve_rerank_like_the_local_cross_encoder(
    tiny_cross_encoder, slice_, tmp_path
):
    from retbench.retrievers.rerank import RerankStage, create_reranker
    from retbench.serve import RetrievalServer

    corpus, queries, first = slice_
    local = create_reranker("cross_encoder", {"model": str(tiny_cross_encoder)})
    server = RetrievalServer(reranker=local, host="127.0.0.1", port=0)
    assert server.address[0] == "127.0.0.1"
    with server:
        remote = create_reranker("http", {"url": server.rerank_url, "model": "tiny-ce"})
        over_http = RerankStage(remote, 10, cache=False).rerank(first, queries, corpus)
    in_process = RerankStage(local, 10, cache=False).rerank(first, queries, corpus)
    assert over_http.query_ids == in_process.query_ids
    for q in in_process.query_ids:
        assert over_http.docs(q) == in_process.docs(q)
        assert [s for _, s in over_http.ranking(q)] == pytest.approx([s for _, s in in_process.ranking(q)], rel=1e-6)


def test_a_rerank_server_answers_top_n_best_first_and_refuses_bad_requests(tmp_path):
    import urllib.error
    import urllib.request

    from retbench.retrievers.rerank import create_reranker
    from retbench.serve import RetrievalServer

    def post(url: str, body: dict) -> tuple[int, dict]:
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    with RetrievalServer(reranker=create_reranker("toy_rerankers:Overlap")) as server:
        code, body = post(
            server.rerank_url, {"query": "red fox", "documents": ["a cat", "red fox", "red hen"], "top_n": 2}
        )
        assert code == 200
        assert body == {"results": [{"index": 1, "relevance_score": 1.0}, {"index": 2, "relevance_score": 0.5}]}
        code, body = post(server.rerank_url, {"query": "x", "documents": "not a list"})
        assert code == 400 and "documents" in body["error"]
        code, body = post(server.url, {"query": "x", "k": 3})
        assert code == 404 and "no retriever" in body["error"]


def test_lce_batches_keep_each_positive_first_with_all_its_query_negatives_and_fit_the_batch():
    import random

    from retbench.retrievers.rerank.train import _batches

    examples = [(f"q{i}", f"pos{i}.{j}", 1.0) for i in range(7) for j in range(1 + i % 2)]
    examples += [(f"q{i}", f"neg{i}.{j}", 0.0) for i in range(7) for j in range(3)]
    examples += [("q-no-negative", "pos", 1.0)]  # no negative to rank against: left out
    epoch = _batches(examples, 9, "lce")(random.Random(0))
    groups = []
    for pairs, sizes in epoch:
        assert sum(sizes) == len(pairs) and (len(pairs) <= 9 or len(sizes) == 1)
        start = 0
        for n in sizes:
            groups.append(pairs[start : start + n])
            start += n
    assert sorted(g[0][1] for g in groups) == sorted(d for q, d, y in examples if y > 0 and q != "q-no-negative")
    for g in groups:
        q = g[0][0]
        assert g[0][2] == 1.0 and all(e[0] == q and e[2] == 0.0 for e in g[1:])
        assert {e[1] for e in g[1:]} == {d for qq, d, y in examples if qq == q and y == 0.0}
    bce = _batches(examples, 9, "bce")(random.Random(0))
    assert sorted(e for pairs, _ in bce for e in pairs) == sorted(examples)
    with pytest.raises(ValueError, match="positive and a negative"):
        _batches([("q", "d", 1.0)], 4, "lce")


def test_a_reranker_call_past_its_timeout_is_a_timeout_status_for_its_queries_never_a_score(slice_, tmp_path):
    import toy_rerankers

    from retbench.data import Queries
    from retbench.retrievers.rerank import RerankStage, create_reranker

    corpus, queries, first = slice_
    stuck_q = first.query_ids[3]
    texts = {q: (f"stuck {queries[q]}" if q == stuck_q else queries[q]) for q in first.query_ids}
    stage = RerankStage(create_reranker("toy_rerankers:Stuck", {}), 10, cache_dir=tmp_path, queries_per_call=1)
    stage.timeout_s = 3.0
    try:
        reranked = stage.rerank(first, Queries(texts), corpus)
    finally:
        toy_rerankers.RELEASE.set()
    assert reranked.status[stuck_q] is QueryStatus.TIMEOUT
    assert reranked.errors[stuck_q] == "TimeoutError: no answer within 3 s (rerank.timeout_s)"
    assert sum(reranked.status[q].failed for q in reranked.query_ids) == 1
    assert stage.stats.scored == sum(min(10, len(first.docs(q))) for q in first.query_ids if q != stuck_q)


def test_rerank_parameters_are_checked_when_the_config_is_read_before_any_work(tmp_path, monkeypatch):
    from retbench.studies.benchmark import parse_config

    bad = _config(tmp_path, tmp_path)
    bad["systems"][1]["rerank"]["batch_size"] = 0  # a value only the reranker itself refuses
    with pytest.raises(ConfigError) as err:
        parse_config(bad, "rr.yaml")
    assert err.value.field == "systems[1].rerank" and "batch_size and max_length must be positive" in str(err.value)
    monkeypatch.delenv("RR_KEY_UNSET", raising=False)
    http = _config(tmp_path, tmp_path)
    http["systems"][1]["rerank"] = {
        "kind": "http",
        "depth": 10,
        "url": "http://127.0.0.1:9/rerank",
        "api_key_env": "RR_KEY_UNSET",
    }
    with pytest.raises(ConfigError, match="environment variable 'RR_KEY_UNSET' is not set"):
        parse_config(http, "rr.yaml")
    plugin = _config(tmp_path, tmp_path)
    plugin["systems"][1]["rerank"] = {"kind": "toy_rerankers:Overlap", "depth": 10, "fail_onn": ["x"]}
    with pytest.raises(ConfigError) as err:
        parse_config(plugin, "rr.yaml")
    assert err.value.field == "systems[1].rerank.fail_onn"
    timeout = _config(tmp_path, tmp_path)
    timeout["systems"][1]["rerank"]["timeout_s"] = 0
    with pytest.raises(ConfigError) as err:
        parse_config(timeout, "rr.yaml")
    assert err.value.field == "systems[1].rerank.timeout_s"
    assert not (tmp_path / "out").exists()  # refused before anything was indexed or written
