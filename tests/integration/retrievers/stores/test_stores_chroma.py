"""Chroma over retbench's embeddings: embedded (memory, persistent) and a real `chroma run` server.

Reference: the dense FAISS flat index over the same Encoder vectors; on 250 SciFact documents Chroma's
HNSW must return the same rankings up to float noise, with scores converted to similarities.
"""

from __future__ import annotations

import pytest

pytest.importorskip("chromadb")

from retbench.data import Corpus
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.retrievers.base import create
from retbench.testing import free_port, start_chroma
from stores_support import (
    ENC,
    assert_filtered_like_exact,
    assert_same_ranking,
    exact_filtered_reference,
    filtered,
    with_metadata,
)


@pytest.fixture(scope="module")
def flat(data):
    corpus, queries, _ = data
    r = create("dense", {"index": "flat_ip", **ENC}, name="flat")
    r.index(corpus)
    return r, r.search(queries, 10)


def _search(params: dict, data, k: int = 10, name: str = "chroma"):
    corpus, queries, _ = data
    r = create("chroma", {**params, **ENC}, name=name)
    try:
        r.index(corpus)
        return r.search(queries, k)
    finally:
        r.close()


def test_embedded_chroma_matches_faiss_flat(data, flat):
    _, queries, qrels = data
    _, ref = flat
    run = _search({"hnsw": {"M": 16, "construction_ef": 100, "search_ef": 100}}, data)
    for q in queries:
        assert_same_ranking(run.ranking(q), ref.ranking(q))
    a = evaluate(run, qrels, ["ndcg@10"]).aggregate()["ndcg@10"]["mean"]
    b = evaluate(ref, qrels, ["ndcg@10"]).aggregate()["ndcg@10"]["mean"]
    assert abs(a - b) < 1e-9 and a > 0.5


def test_spaces_convert_distances_to_similarities(data, flat):
    _, queries, _ = data
    _, ref = flat
    ip = _search({"space": "ip"}, data)
    l2 = _search({"space": "l2"}, data)
    for q in list(queries)[:10]:
        assert_same_ranking(ip.ranking(q), ref.ranking(q))
        # normalized vectors: squared L2 = 2 - 2 cos, so -distance = 2 cos - 2
        assert_same_ranking(l2.ranking(q), [(d, 2 * s - 2) for d, s in ref.ranking(q)])


def test_persistent_client_keeps_the_collection(data, tmp_path):
    corpus, queries, _ = data
    path = tmp_path / "chroma-db"
    first = _search({"path": str(path), "collection": "scifact-slice"}, data)
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    assert client.get_collection("scifact-slice").count() == len(corpus)
    again = _search({"path": str(path), "collection": "scifact-slice"}, data)  # index() replaces it
    assert client.get_collection("scifact-slice").count() == len(corpus)
    assert all(first.ranking(q) == again.ranking(q) for q in queries)


def test_add_and_delete(data):
    corpus = data[0]
    half = len(corpus) // 2
    first = corpus.subset(corpus.ids[:half])
    rest = corpus.subset(corpus.ids[half:])
    r = create("chroma", ENC, name="ingest")
    try:
        r.index(first)
        assert len(r) == half
        probe = rest.joined(0)
        assert rest.ids[0] not in [d for d, _ in r.search_one(probe, 5)]
        r.add(rest)
        assert len(r) == len(corpus)
        top, score = r.search_one(probe, 1)[0]
        assert top == rest.ids[0] and score == pytest.approx(1.0, abs=1e-5)  # the document finds itself
        r.add(rest.subset(rest.ids[:3]))  # same ids again: replaced, not duplicated
        assert len(r) == len(corpus)
        changed = Corpus([rest.ids[0]], ["an entirely different text about volcano ash"], [""])
        r.add(changed)
        assert r.search_one("volcano ash", 1)[0][0] == rest.ids[0]
        r.delete([rest.ids[0], "no-such-id"])
        assert len(r) == len(corpus) - 1
        assert rest.ids[0] not in [d for d, _ in r.search_one("volcano ash", 20)]
    finally:
        r.close()


def test_store_settings_reach_the_collection_and_bad_ones_are_config_errors(data):
    corpus, _, _ = data
    r = create("chroma", {"hnsw": {"max_neighbors": 8, "ef_construction": 50, "ef_search": 40}, **ENC}, name="cfg")
    try:
        r.index(corpus.subset(corpus.ids[:20]))
        cfg = r._col.configuration_json["hnsw"]
        assert (cfg["space"], cfg["max_neighbors"], cfg["ef_construction"], cfg["ef_search"]) == ("cosine", 8, 50, 40)
        d = r.describe()
        assert d["space"] == "cosine" and d["hnsw"]["max_neighbors"] == 8 and d["encoder"]["max_seq_length"] == 128
    finally:
        r.close()
    with pytest.raises(ConfigError, match="unknown hnsw setting 'ef'"):
        create("chroma", {"hnsw": {"ef": 10}})
    with pytest.raises(ConfigError, match="unknown space"):
        create("chroma", {"space": "dot"})
    with pytest.raises(ConfigError, match="CHROMA_TOKEN_UNSET"):
        create("chroma", {"host": "127.0.0.1", "token_env": "CHROMA_TOKEN_UNSET"})


# -- a real Chroma server ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chroma_server():
    with start_chroma(timeout=60) as server:
        yield server.port


def test_chroma_server_matches_embedded(data, flat, chroma_server):
    _, queries, _ = data
    _, ref = flat
    remote = _search(
        {"host": "127.0.0.1", "port": chroma_server, "collection": "scifact-slice"}, data, name="chroma-http"
    )
    for q in queries:
        assert_same_ranking(remote.ranking(q), ref.ranking(q))
    assert all(remote.latency[q] > 0 for q in queries)


def test_unreachable_chroma_server_is_a_backend_error_naming_it(data):
    from retbench.errors import BackendError

    port = free_port()
    r = create("chroma", {"host": "127.0.0.1", "port": port, **ENC})
    with pytest.raises(BackendError, match=f"Chroma at http://127.0.0.1:{port}"):
        r.index(data[0].subset(data[0].ids[:5]))


def test_filtered_search_keeps_only_matching_documents_close_to_exact(data):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    r = create("chroma", ENC, name="chroma-filter")
    try:
        r.index(corpus)
        run = r.search(queries, 10)
    finally:
        r.close()
    assert_filtered_like_exact(run, exact_filtered_reference(corpus, queries), corpus, queries, min_overlap=0.9)


def test_a_store_without_filters_refuses_filtered_queries_before_searching(data):
    from retbench.errors import ConfigError

    corpus, queries, _ = data
    r = create("bm25s", {})
    r.index(corpus)
    with pytest.raises(ConfigError, match=r"cannot apply metadata filters, and 30 queries carry one"):
        r.search(filtered(queries), 10)
