"""Ready factories for the `langchain` adapter, built from LangChain's own components.

- `bm25`: langchain-community's `BM25Retriever` (rank_bm25's Okapi BM25; LangChain's default
  preprocessing splits on whitespace without lower-casing, `lowercase: true` lower-cases both sides).
- `vector_store`: langchain-core's `InMemoryVectorStore` (exact cosine similarity) over embeddings from
  retbench's `Encoder`: by default the packaged all-MiniLM-L6-v2, with the same settings, vectors and
  embedding cache as the `dense` adapter given the same `encoder` block.

Config: `{adapter: langchain, params: {factory: "retbench.retrievers.frameworks.langchain_examples:bm25"}}`.
A factory of your own has the same shape: `def build(documents: list[Document], **params) -> BaseRetriever`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from retbench.jsontypes import JSONValue
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.encoders.encoder import create_encoder


class EncoderEmbeddings(Embeddings):
    """LangChain embeddings computed by a retbench Encoder (its model, prefixes, normalization and cache)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._lock = (
            threading.Lock()
        )  # LangChain's batch embeds queries from several threads; the cache is not shared-safe

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            return [[float(x) for x in v] for v in self.encoder.encode_documents(texts)]

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            return [float(x) for x in self.encoder.encode_queries([text])[0]]


def bm25(
    documents: list[Document], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25, lowercase: bool = False
) -> BaseRetriever:
    """LangChain's BM25Retriever over the documents (rank_bm25 BM25Okapi with these parameters)."""
    from langchain_community.retrievers import BM25Retriever

    extra: dict[str, Callable[[str], list[str]]] = (
        {"preprocess_func": lambda text: text.lower().split()} if lowercase else {}
    )
    return BM25Retriever.from_documents(documents, bm25_params={"k1": k1, "b": b, "epsilon": epsilon}, **extra)


def vector_store(documents: list[Document], encoder: Mapping[str, JSONValue] | None = None) -> BaseRetriever:
    """An InMemoryVectorStore retriever (cosine similarity) over Encoder embeddings of the documents."""
    store = InMemoryVectorStore(EncoderEmbeddings(create_encoder(encoder or {}, fld="params.params.encoder")))
    store.add_documents(documents)
    return store.as_retriever()
