"""Milvus (Milvus Lite's gRPC server, started on loopback) over retbench's embeddings through pymilvus.

FLAT must equal FAISS flat; HNSW with its parameters passed through must stay close to it; filters
must equal FAISS' exact filtered search; deleted documents never come back.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import create
from retbench.testing import LOOPBACK, free_port, listening_addresses, start_milvus
from stores_support import (
    ENC,
    assert_filtered_like_exact,
    assert_same_ranking,
    check_add_replace_delete,
    exact_filtered_reference,
    filtered,
    with_metadata,
)


@pytest.fixture(scope="module")
def milvus():
    with start_milvus() as server:
        yield server


def _store(milvus, name: str, **params):
    return create("milvus", {"uri": milvus.address, **params, **ENC}, name=name)


def test_milvus_lite_listens_on_loopback_only(milvus):
    addresses = listening_addresses(milvus.port)
    assert addresses and addresses <= LOOPBACK, addresses


def test_flat_equals_faiss_flat_and_hnsw_stays_close(milvus, data):
    corpus, queries, _ = data
    ref = {}
    for metric in ("ip", "l2"):
        r = create("dense", {"index": f"flat_{metric}", **ENC})
        r.index(corpus)
        ref[metric] = r.search(queries, 10)
    runs = {}
    for label, params in {
        "cosine": {},
        "ip": {"distance": "ip"},
        "l2": {"distance": "l2"},
        "hnsw": {"index_type": "HNSW", "index_params": {"M": 8, "efConstruction": 64}, "search_params": {"ef": 64}},
    }.items():
        r = _store(milvus, f"milvus-{label}", **params)
        try:
            r.index(corpus)
            runs[label] = r.search(queries, 10)
            if label == "hnsw":
                info = r._connect().describe_index(r.collection, "vec")
                assert info["index_type"] == "HNSW", info
        finally:
            r.close()
    for q in queries:
        assert_same_ranking(runs["cosine"].ranking(q), ref["ip"].ranking(q))
        assert_same_ranking(runs["ip"].ranking(q), ref["ip"].ranking(q))
        assert_same_ranking(runs["l2"].ranking(q), ref["l2"].ranking(q), tol=1e-4)
    overlap = sum(len(set(runs["hnsw"].docs(q)) & set(ref["ip"].docs(q))) for q in queries) / (10 * len(queries))
    assert overlap >= 0.8


def test_add_after_index_and_a_deleted_document_never_comes_back(milvus, data):
    corpus, _, _ = data
    r = _store(milvus, "milvus-ingest", index_type="HNSW")
    try:
        check_add_replace_delete(r, corpus, tol=1e-4)
    finally:
        r.close()


def test_filtered_search_equals_exact_filtered_search(milvus, data):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    reference = exact_filtered_reference(corpus, queries)
    r = _store(milvus, "milvus-filter")
    try:
        r.index(corpus)
        run = r.search(queries, 10)
    finally:
        r.close()
    assert_filtered_like_exact(run, reference, corpus, queries)


def test_bad_settings_and_an_unreachable_server_fail_clearly(data):
    with pytest.raises(ConfigError, match="needs a uri"):
        create("milvus", {})
    with pytest.raises(ConfigError, match="MILVUS_UNSET"):
        create("milvus", {"uri": "http://127.0.0.1:1", "token_env": "MILVUS_UNSET"})
    r = create("milvus", {"uri": f"http://127.0.0.1:{free_port()}", "timeout": 3, **ENC})
    with pytest.raises(BackendError, match=r"Milvus at http://127\.0\.0\.1"):
        r.index(data[0].subset(data[0].ids[:5]))
    r.close()
