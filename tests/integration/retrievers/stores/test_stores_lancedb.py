"""LanceDB (embedded) over retbench's embeddings, and LanceDB's full-text index as a lexical system.

Flat search must equal FAISS flat; IVF-PQ and HNSW must stay close to it; filters must equal FAISS'
exact filtered search; the full-text index must find documents by their words, and be filterable.
"""

from __future__ import annotations

import pytest

pytest.importorskip("lancedb")

from retbench.data import Corpus
from retbench.errors import ConfigError
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


def _run(data, **params):
    corpus, queries, _ = data
    r = create("lancedb", {**params, **ENC}, name="lance")
    try:
        r.index(corpus)
        return r.search(queries, 10)
    finally:
        r.close()


def test_flat_search_equals_faiss_flat_for_every_distance(data, ref):
    _, queries, _ = data
    cosine, dot, l2 = _run(data), _run(data, distance="dot"), _run(data, distance="l2")
    for q in queries:
        assert_same_ranking(cosine.ranking(q), ref["ip"].ranking(q))
        assert_same_ranking(dot.ranking(q), ref["ip"].ranking(q))
        assert_same_ranking(l2.ranking(q), ref["l2"].ranking(q), tol=1e-4)


@pytest.mark.parametrize(
    "params",
    [
        {"index": "ivf_pq", "num_partitions": 2, "num_sub_vectors": 48, "nprobes": 2, "refine_factor": 10},
        {"index": "hnsw", "num_partitions": 1, "m": 16, "ef_construction": 100, "ef": 100},
    ],
)
def test_ivf_pq_and_hnsw_indexes_are_built_and_stay_close_to_exact(data, ref, params, tmp_path):
    corpus, queries, _ = data
    r = create("lancedb", {"path": str(tmp_path), **params, **ENC}, name="lance-ann")
    try:
        r.index(corpus)
        kinds = {i.index_type for i in r._t.tbl.list_indices()}
        assert kinds == {"IvfPq" if params["index"] == "ivf_pq" else "IvfHnswSq"}, kinds
        run = r.search(queries, 10)
        assert r.disk_bytes() > 0 and (tmp_path / "retbench_lance_ann.lance").is_dir()
    finally:
        r.close()
    overlap = sum(len(set(run.docs(q)) & set(ref["ip"].docs(q))) for q in queries) / (10 * len(queries))
    assert overlap >= 0.8


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_add_after_index_and_a_deleted_document_never_comes_back(data, index):
    corpus, _, _ = data
    r = create("lancedb", {"index": index, "num_partitions": 1, **ENC}, name="lance-ingest")
    try:
        check_add_replace_delete(r, corpus)
        assert r._t.tbl.count_rows() == len(corpus) - 1
    finally:
        r.close()


def test_filtered_search_equals_exact_filtered_search(data):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    reference = exact_filtered_reference(corpus, queries)
    r = create("lancedb", ENC, name="lance-filter")
    try:
        r.index(corpus)
        run = r.search(queries, 10)
    finally:
        r.close()
    assert_filtered_like_exact(run, reference, corpus, queries)


def test_full_text_index_finds_words_adds_deletes_and_filters(data):
    corpus, queries, _ = data
    corpus = with_metadata(corpus)
    r = create("lancedb-fts", {}, name="lance-fts")
    try:
        r.index(corpus)
        assert "filters" in r.capabilities and "encoder" not in r.describe()
        run = r.search(queries, 10)
        assert sum(bool(len(run.docs(q))) for q in queries) == len(queries)
        r.add(Corpus(["new-1"], ["zygomorphic flowers of orchids"], [""], [{"lang": "en", "year": 2001, "open": True}]))
        assert r.search_one("zygomorphic", 1)[0][0] == "new-1"
        r.delete(["new-1"])
        assert r.search_one("zygomorphic", 5) == [] and len(r) == len(corpus)
        fruns = r.search(filtered(queries), 10)
        meta = dict(zip(corpus.ids, corpus.metadata, strict=True))
        from retbench.retrievers.filters import parse_filter

        for q in queries:
            flt = parse_filter(filtered(queries).metadata[q]["filter"])
            assert all(flt.matches(meta[d]) for d in fruns.docs(q))
    finally:
        r.close()


def test_bad_settings_fail_clearly():
    with pytest.raises(ConfigError, match="unknown index"):
        create("lancedb", {"index": "ivf"})
    with pytest.raises(ConfigError, match="unknown distance"):
        create("lancedb", {"distance": "ip"})


@pytest.mark.parametrize(("adapter", "params"), [("lancedb", {**ENC, "index": "flat"}), ("lancedb-fts", {})])
def test_searches_print_no_deprecation_lines(data, adapter, params, capfd):
    """LanceDB's engine logs a deprecation line per query unless the score column is asked for by name."""
    corpus, queries, _ = data
    r = create(adapter, params)
    try:
        r.index(corpus)
        capfd.readouterr()
        run = r.search(queries, 10)
    finally:
        r.close()
    assert sum(bool(len(run.docs(q))) for q in queries) == len(queries)
    assert "Deprecation" not in capfd.readouterr().err
