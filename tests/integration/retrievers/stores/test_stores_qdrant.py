"""Qdrant over retbench's embeddings: qdrant-client local mode (memory and on-disk) against FAISS flat.

Local mode is exact brute force, so rankings must equal FAISS flat up to float noise. No Qdrant
server can run on this machine (the server is a separate binary, not a Python package), so the
server path is checked only as far as it can be without one: an unreachable URL fails clearly.
"""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("qdrant_client")

from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import create
from stores_support import (
    ENC,
    assert_filtered_like_exact,
    assert_same_ranking,
    check_add_replace_delete,
    exact_filtered_reference,
    filtered,
    with_metadata,
)


def _search(params: dict, data, k: int = 10):
    corpus, queries, _ = data
    r = create("qdrant", {**params, **ENC}, name="qdrant")
    try:
        r.index(corpus)
        return r.search(queries, k)
    finally:
        r.close()


def test_local_qdrant_is_exact(data, ref):
    _, queries, _ = data
    run = _search({}, data)
    for q in queries:
        assert_same_ranking(run.ranking(q), ref["ip"].ranking(q))


def test_distances(data, ref):
    _, queries, _ = data
    dot = _search({"distance": "dot"}, data)
    euclid = _search({"distance": "euclid"}, data)
    for q in list(queries)[:10]:
        assert_same_ranking(dot.ranking(q), ref["ip"].ranking(q))
        # Qdrant's euclid score is the (unsquared) distance, negated here; FAISS flat_l2 gives -squared distance
        assert_same_ranking(euclid.ranking(q), [(d, -((-s) ** 0.5)) for d, s in ref["l2"].ranking(q)], tol=1e-4)


def test_on_disk_local_mode_persists(data, tmp_path):
    corpus, _, _ = data
    path = tmp_path / "qdrant"
    _search({"path": str(path), "collection": "slice"}, data)
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(path))
    try:
        assert client.count("slice").count == len(corpus)
        point = client.retrieve("slice", ids=[0], with_payload=True)[0]
        assert point.payload == {"doc_id": corpus.ids[0], "meta": {}}
    finally:
        client.close()


def test_add_and_delete(data):
    corpus, _, _ = data
    r = create("qdrant", ENC, name="ingest")
    try:
        check_add_replace_delete(r, corpus)
        assert len(r.search_one("volcano ash", 10_000)) == len(corpus) - 1
    finally:
        r.close()


def test_describe_says_local_mode_is_exact(data):
    r = create("qdrant", {"hnsw_config": {"m": 8}, "hnsw_ef": 32})
    d = r.describe()
    assert d["mode"].startswith("local (exact") and "hnsw_config" not in d
    r = create("qdrant", {"url": "http://127.0.0.1:1", "hnsw_config": {"m": 8}, "hnsw_ef": 32})
    d = r.describe()
    assert d["mode"] == "server" and d["hnsw_config"] == {"m": 8} and d["hnsw_ef"] == 32 and d["force_hnsw"] is True


@pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection", "ignore:Failed to obtain server version"
)
def test_bad_settings_and_unreachable_server(data, monkeypatch):
    with pytest.raises(ConfigError, match="unknown hnsw_config setting 'M'"):
        create("qdrant", {"hnsw_config": {"M": 16}})
    with pytest.raises(ConfigError, match="unknown distance"):
        create("qdrant", {"distance": "l2"})
    with pytest.raises(ConfigError, match="QDRANT_KEY_UNSET"):
        create("qdrant", {"url": "http://127.0.0.1:1", "api_key_env": "QDRANT_KEY_UNSET"})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RB_QDRANT_KEY", "qdrant-s3cret")
    r = create("qdrant", {"url": f"http://127.0.0.1:{port}", "api_key_env": "RB_QDRANT_KEY", **ENC})
    assert "qdrant-s3cret" not in str(r.describe())
    with pytest.raises(BackendError, match=f"Qdrant at http://127.0.0.1:{port}") as err:
        r.index(data[0].subset(data[0].ids[:5]))
    assert "qdrant-s3cret" not in str(err.value)
    r.close()


def test_filtered_search_equals_exact_filtered_search(data):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    r = create("qdrant", ENC, name="qdrant-filter")
    try:
        r.index(corpus)
        run = r.search(queries, 10)
    finally:
        r.close()
    assert_filtered_like_exact(run, exact_filtered_reference(corpus, queries), corpus, queries)
