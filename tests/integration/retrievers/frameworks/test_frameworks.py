"""LangChain and LlamaIndex retrievers as systems: real framework components over a SciFact slice.

The framework vector stores embed with the same packaged all-MiniLM-L6-v2 settings as the FAISS flat
`dense` system, so their nDCG@10 must match it: the adapters lose nothing between the framework and
the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import repo_paths
from retbench.data import QueryStatus
from retbench.errors import ConfigError
from stored import flat

pytest.importorskip("langchain_core", reason="the frameworks extra is not installed")
pytest.importorskip("langchain_community", reason="the frameworks extra is not installed")
pytest.importorskip("llama_index.core", reason="the frameworks extra is not installed")
pytest.importorskip("sentence_transformers", reason="the dense extra is not installed")
pytestmark = pytest.mark.slow

PLUGINS = str(repo_paths.PLUGINS)
ENCODER = {"max_seq_length": 128, "batch_size": 32}
SLICE = {"name": "scifact", "split": "test", "max_queries": 30, "corpus_sample": 200}
LC = "retbench.retrievers.frameworks.langchain_examples"
LI = "retbench.retrievers.frameworks.llamaindex_examples"


@pytest.fixture(autouse=True)
def _plugins_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(PLUGINS)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`retbench run` of LangChain BM25, LangChain and LlamaIndex vector stores and FAISS flat on the slice."""
    from retbench.studies.benchmark import load_config, run_experiment

    out = tmp_path_factory.mktemp("frameworks")
    cfg = {
        "name": "frameworks",
        "output": str(out / "results"),
        "depth": 100,
        "metrics": ["ndcg@10", "recall@100"],
        "datasets": [SLICE],
        "systems": [
            {"name": "faiss", "adapter": "dense", "params": {"index": "flat_ip", **ENCODER}},
            {"name": "lc_bm25", "adapter": "langchain", "params": {"factory": f"{LC}:bm25"}},
            {
                "name": "lc_vectors",
                "adapter": "langchain",
                "params": {"factory": f"{LC}:vector_store", "params": {"encoder": ENCODER}, "concurrency": 3},
            },
            {
                "name": "li_vectors",
                "adapter": "llamaindex",
                "params": {"factory": f"{LI}:vector_index", "params": {"encoder": ENCODER}},
            },
        ],
    }
    path = out / "frameworks.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run_experiment(load_config(path), log=lambda _msg: None)
    return out / "results"


def _metrics(results: Path) -> dict:
    return flat(results)


def test_framework_vector_stores_over_the_same_minilm_vectors_match_faiss_flat_ndcg(experiment: Path) -> None:
    m = _metrics(experiment)
    for system in ("lc_vectors", "li_vectors"):
        assert m[system]["coverage"]["answered"] == m["faiss"]["coverage"]["answered"] == 30
        assert abs(m[system]["ndcg@10"] - m["faiss"]["ndcg@10"]) <= 0.005, (system, m[system], m["faiss"])
        assert abs(m[system]["recall@100"] - m["faiss"]["recall@100"]) <= 0.005


def test_langchain_bm25_answers_every_query_with_rank_bm25_order(experiment: Path, scifact) -> None:
    from rank_bm25 import BM25Okapi

    from retbench.io.trec import read_run
    from retbench.studies.benchmark import DatasetSpec, prepare_dataset

    m = _metrics(experiment)
    assert m["lc_bm25"]["coverage"]["answered"] == 30 and m["lc_bm25"]["ndcg@10"] > 0.3
    ds, queries = prepare_dataset(DatasetSpec(**{k: v for k, v in SLICE.items() if k != "name"}, spec="scifact"))
    ids, texts = list(ds.corpus.ids), ds.corpus.joined_texts()
    bm25 = BM25Okapi([t.split() for t in texts], k1=1.5, b=0.75, epsilon=0.25)
    run = read_run(experiment / "systems" / "lc_bm25" / "run.trec")
    for qid in list(queries)[:5]:
        scores = bm25.get_scores(queries[qid].split())
        best = sorted(range(len(ids)), key=lambda i: -scores[i])[:5]
        got = list(run.docs(qid))[:5]
        # the same documents at the same ranks, except where rank_bm25's scores tie
        for rank, (want, have) in enumerate(zip(best, got, strict=True)):
            assert ids[want] == have or scores[want] == pytest.approx(scores[ids.index(have)]), (qid, rank)


def test_the_manifest_records_the_factory_its_params_and_the_framework_version(experiment: Path) -> None:
    from importlib.metadata import version

    systems = json.loads((experiment / "manifest.json").read_text())["systems"]
    li = systems["li_vectors"]["describe"]
    assert li["factory"] == f"{LI}:vector_index" and li["params"] == {"encoder": ENCODER}
    assert li["framework_version"] == version("llama-index-core")
    assert systems["lc_bm25"]["describe"]["framework_version"] == version("langchain-core")


def _indexed(adapter: str, params: dict, scifact, n_docs: int = 200):
    from retbench.retrievers.base import create

    r = create(adapter, params)
    corpus = scifact.corpus.subset(list(scifact.corpus.ids)[:n_docs])
    r.index(corpus)
    return r, corpus


def _queries(scifact, words: list[str]):
    from retbench.data import Queries

    return Queries({f"q{i}": w for i, w in enumerate(words)})


def test_a_failing_langchain_query_is_recorded_verbatim_and_the_others_are_answered(scifact) -> None:
    r, _ = _indexed(
        "langchain", {"factory": "framework_retrievers:langchain_failing", "params": {"words": ["cell"]}}, scifact
    )
    run = r.search(_queries(scifact, ["protein folding", "stem cell therapy", "cancer risk"]), 10)
    assert run.status["q1"] == QueryStatus.ERROR
    assert run.errors["q1"] == "RuntimeError: shard for 'cell' is down"
    assert run.status["q0"] == run.status["q2"] == QueryStatus.OK and len(list(run.docs("q0"))) == 10


def test_a_failing_llamaindex_query_is_recorded_verbatim_and_the_others_are_answered(scifact) -> None:
    r, corpus = _indexed(
        "llamaindex", {"factory": "framework_retrievers:llamaindex_failing", "params": {"fail_on": "cell"}}, scifact
    )
    run = r.search(_queries(scifact, ["protein folding", "stem cell therapy"]), 5)
    assert run.status["q1"] == QueryStatus.ERROR
    assert run.errors["q1"] == "ConnectionError: vector store refused 'cell'"
    assert run.status["q0"] == QueryStatus.OK and set(run.docs("q0")) <= set(corpus.ids)


def test_documents_without_an_id_make_the_answer_invalid_naming_the_rank(scifact) -> None:
    r, _ = _indexed("langchain", {"factory": "framework_retrievers:langchain_without_ids"}, scifact)
    run = r.search(_queries(scifact, ["protein folding"]), 10)
    assert run.status["q0"] == QueryStatus.INVALID
    assert run.errors["q0"] == "invalid answer: rank 1: the document has no 'id' in its metadata and no document id"


def test_ids_outside_the_indexed_corpus_are_invalid_unless_the_check_is_off(scifact) -> None:
    r, _ = _indexed("langchain", {"factory": "framework_retrievers:langchain_foreign_ids"}, scifact)
    run = r.search(_queries(scifact, ["protein folding"]), 10)
    assert run.status["q0"] == QueryStatus.INVALID and "is not in the indexed corpus" in run.errors["q0"]
    r.check_ids = False
    run = r.search(_queries(scifact, ["protein folding"]), 10)
    assert run.status["q0"] == QueryStatus.OK and all(d.startswith("chunk-") for d in run.docs("q0"))


def test_llamaindex_chunks_map_to_their_document_through_ref_doc_id_once_each(scifact) -> None:
    params = {
        "factory": f"{LI}:vector_index",
        "params": {"encoder": ENCODER, "chunk_size": 64},
        "id_key": "no_such_key",
    }
    r, corpus = _indexed("llamaindex", params, scifact, n_docs=40)
    run = r.search(_queries(scifact, ["protein folding in cells", "vitamin D and bone density"]), 10)
    for q in ("q0", "q1"):
        docs = list(run.docs(q))
        assert run.status.get(q, QueryStatus.OK) == QueryStatus.OK and docs
        assert set(docs) <= set(corpus.ids) and len(docs) == len(set(docs))


def test_a_factory_that_returns_no_retriever_or_gets_an_unknown_parameter_is_a_config_error(scifact) -> None:
    from retbench.retrievers.base import create

    with pytest.raises(ConfigError) as err:
        _indexed("langchain", {"factory": "framework_retrievers:not_a_retriever"}, scifact, n_docs=5)
    assert err.value.field == "params.factory" and "not a langchain_core.retrievers:BaseRetriever" in str(err.value)
    with pytest.raises(ConfigError) as err:
        create("langchain", {"factory": f"{LC}:bm25", "params": {"k3": 1}})
    assert err.value.field == "params.params.k3"
    with pytest.raises(ConfigError) as err:
        create("llamaindex", {"factory": "framework_retrievers:no_such_factory"})
    assert err.value.field == "params.factory"


def test_a_langchain_retriever_answering_none_is_an_invalid_answer_not_a_traceback(scifact) -> None:
    for timeout in (60, None):  # through retbench's own pool and through LangChain's batch
        r, _ = _indexed(
            "langchain", {"factory": "framework_retrievers:langchain_answers_none", "timeout_s": timeout}, scifact
        )
        run = r.search(_queries(scifact, ["protein folding", "cancer risk"]), 10)
        assert run.status["q0"] == run.status["q1"] == QueryStatus.INVALID
        assert run.errors["q0"] == "invalid answer: the retriever returned NoneType, not a list of documents"


def test_a_hung_framework_call_is_a_timeout_status_and_the_other_queries_are_answered(scifact) -> None:
    import framework_retrievers

    params = {"factory": "framework_retrievers:langchain_hanging", "params": {"words": ["cell"]}, "timeout_s": 4}
    r, _ = _indexed("langchain", params, scifact)
    try:
        run = r.search(_queries(scifact, ["protein folding", "stem cell therapy", "cancer risk"]), 10)
    finally:
        framework_retrievers.RELEASE.set()
    assert run.status["q1"] == QueryStatus.TIMEOUT
    assert run.errors["q1"] == "TimeoutError: no answer within 4 s (timeout_s)"
    assert run.status["q0"] == run.status["q2"] == QueryStatus.OK and len(list(run.docs("q0"))) == 10
    assert r.describe()["timeout_s"] == 4.0
    from retbench.retrievers.base import create

    with pytest.raises(ConfigError, match="timeout_s must be positive"):
        create("langchain", {"factory": f"{LC}:bm25", "timeout_s": 0})
