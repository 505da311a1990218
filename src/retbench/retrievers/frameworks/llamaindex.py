"""`llamaindex`: any LlamaIndex `BaseRetriever`, built by the user's factory, run as a retbench system.

    adapter: llamaindex
    params:
      factory: my_rag.retrievers:build        # def build(documents: list[Document], **params) -> BaseRetriever
      params: {}                              # the factory's own parameters
      id_key: id                              # node metadata key holding the doc id (else the node's ref_doc_id)
      concurrency: 4                          # queries in flight (threads calling `retrieve`)
      timeout_s: 60                           # seconds per query (a late one is status timeout); null: none
      score_key: null                         # a metadata key holding a score, for nodes without one

The documents are `llama_index.core.Document(text=title + " " + text, id_=doc id, metadata={...,
id_key: doc id})` with every metadata key excluded from the embedded and LLM text, so the vectors are
those of the text alone. A factory that splits them into chunks keeps the id: chunks carry the
document's metadata and `ref_doc_id`; several chunks of one document count once, at the best rank.
Each query is one `retrieve` call on a thread pool and is timed alone. `NodeWithScore.score` is kept
when every hit has one in non-increasing order. The depth is set through `similarity_top_k` where the
retriever has it (vector index and BM25 retrievers); see `retrievers/frameworks/__init__.py` for ids,
scores and statuses, and `llamaindex_examples.py` for a ready factory.
"""

from __future__ import annotations

from typing import Any

from retbench.data import Corpus
from retbench.retrievers.base import register
from retbench.retrievers.frameworks import FrameworkRetriever, Hit, Outcome, as_score, pooled


@register("llamaindex")
class LlamaIndexRetriever(FrameworkRetriever):
    """A LlamaIndex BaseRetriever from a `module:function` factory; see the module docstring."""

    adapter = "llamaindex"
    package = "llama_index.core"
    distribution = "llama-index-core"
    base_class = "llama_index.core.retrievers:BaseRetriever"
    hint = "an index's `.as_retriever()` is one"

    def documents(self, corpus: Corpus) -> list[Any]:
        from llama_index.core import Document

        docs = []
        for doc, text, meta in self.records(corpus):
            keys = list(meta)
            docs.append(
                Document(
                    text=text,
                    id_=doc,
                    metadata=meta,
                    excluded_embed_metadata_keys=keys,
                    excluded_llm_metadata_keys=keys,
                )
            )
        return docs

    def set_depth(self, k: int) -> None:
        if hasattr(self.retriever, "similarity_top_k"):
            self.retriever.similarity_top_k = k

    def retrieve(self, texts: list[str]) -> list[Outcome]:
        return pooled(texts, self.retriever.retrieve, self.concurrency, self.timeout_s)

    def hit(self, item: Any) -> Hit:
        node = getattr(item, "node", item)
        doc = (getattr(node, "metadata", None) or {}).get(self.id_key)
        if doc is None:
            doc = getattr(node, "ref_doc_id", None)
        score = getattr(item, "score", None)
        if score is None and self.score_key:
            score = (getattr(node, "metadata", None) or {}).get(self.score_key)
        return Hit(doc, as_score(score))
