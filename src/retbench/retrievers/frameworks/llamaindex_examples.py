"""A ready factory for the `llamaindex` adapter, built from LlamaIndex's own components.

- `vector_index`: a `VectorStoreIndex` (LlamaIndex's in-memory `SimpleVectorStore`, cosine similarity)
  with one node per document, embedded by retbench's `Encoder` through a small `BaseEmbedding`: by
  default the packaged all-MiniLM-L6-v2 with the same settings, vectors and embedding cache as the
  `dense` adapter given the same `encoder` block. `chunk_size` instead splits documents with
  LlamaIndex's `SentenceSplitter` (chunks keep their document's id).
- `bm25`: a LlamaIndex `BaseRetriever` scoring the documents with rank_bm25's `BM25Okapi` (the scorer of
  LangChain's `BM25Retriever`, same parameters, whitespace tokens), so a LlamaIndex pipeline runs with no
  model; hits come back as `NodeWithScore` in score order (ties: corpus order), `similarity_top_k` deep.

Config: `{adapter: llamaindex, params: {factory: "retbench.retrievers.frameworks.llamaindex_examples:vector_index"}}`.
A factory of your own has the same shape: `def build(documents: list[Document], **params) -> BaseRetriever`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import PrivateAttr

from retbench.jsontypes import JSONValue
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.encoders.encoder import create_encoder


class EncoderEmbedding(BaseEmbedding):
    """LlamaIndex embeddings computed by a retbench Encoder (its model, prefixes, normalization and cache)."""

    _encoder: Any = PrivateAttr()
    _lock: Any = PrivateAttr()

    def __init__(self, encoder: Encoder, **kwargs: Any) -> None:
        super().__init__(model_name=encoder.model_name, embed_batch_size=1024, **kwargs)
        self._encoder = encoder
        self._lock = threading.Lock()  # queries arrive from several threads; the cache is not shared-safe

    def _get_query_embedding(self, query: str) -> list[float]:
        with self._lock:
            return [float(x) for x in self._encoder.encode_queries([query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            return [[float(x) for x in v] for v in self._encoder.encode_documents(texts)]


def vector_index(
    documents: list[Document], encoder: Mapping[str, JSONValue] | None = None, chunk_size: int | None = None
) -> BaseRetriever:
    """A VectorStoreIndex retriever over Encoder embeddings: one node per document unless chunk_size is given."""
    embed = EncoderEmbedding(create_encoder(encoder or {}, fld="params.params.encoder"))
    if chunk_size is None:
        index = VectorStoreIndex(nodes=documents, embed_model=embed)
    else:
        from llama_index.core.node_parser import SentenceSplitter

        splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=min(20, chunk_size // 4))
        index = VectorStoreIndex.from_documents(documents, embed_model=embed, transformations=[splitter])
    return index.as_retriever()


class BM25Retriever(BaseRetriever):
    """rank_bm25's BM25Okapi over LlamaIndex documents (see the module docstring)."""

    def __init__(self, documents: list[Document], k1: float, b: float, epsilon: float, lowercase: bool) -> None:
        from rank_bm25 import BM25Okapi

        super().__init__()
        self._documents, self._lowercase = documents, lowercase
        self._bm25 = BM25Okapi([self._tokens(d.get_content()) for d in documents], k1=k1, b=b, epsilon=epsilon)
        self.similarity_top_k = 4

    def _tokens(self, text: str) -> list[str]:
        return (text.lower() if self._lowercase else text).split()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        scores = self._bm25.get_scores(self._tokens(query_bundle.query_str))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[: self.similarity_top_k]
        return [NodeWithScore(node=self._documents[i], score=float(scores[i])) for i in order]


def bm25(
    documents: list[Document], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25, lowercase: bool = False
) -> BaseRetriever:
    """A LlamaIndex retriever over rank_bm25's BM25Okapi with these parameters (no model needed)."""
    return BM25Retriever(documents, k1, b, epsilon, lowercase)
