"""`langchain`: any LangChain `BaseRetriever`, built by the user's factory, run as a retbench system.

    adapter: langchain
    params:
      factory: my_rag.retrievers:build        # def build(documents: list[Document], **params) -> BaseRetriever
      params: {chunk_size: 512}               # the factory's own parameters
      id_key: id                              # metadata key holding the doc id (else Document.id)
      concurrency: 4                          # queries in flight at once
      score_key: null                         # a metadata key holding a score, if the retriever sets one
      timeout_s: 60                           # seconds per query; null: LangChain's own `batch`, no deadline

The documents are `langchain_core.documents.Document(page_content=title + " " + text,
metadata={..., id_key: doc id}, id=doc id)`. Each query is the retriever's own `invoke`, `concurrency`
at a time, timed alone and under `timeout_s` (as `batch` would run them, plus the deadline); with
`timeout_s: null` queries go through the retriever's `batch` with `return_exceptions=True` and latency
is the batch's wall time shared evenly. Either way one failing query is recorded (verbatim) without
losing the others. The depth is set where LangChain has a known setting
(a `k` field, as on `BM25Retriever`, or `search_kwargs["k"]`, as on a vector store's retriever); any
other retriever returns its own number of hits, cut to k. See `retrievers/frameworks/__init__.py`
for ids, scores and statuses, and `langchain_examples.py` for ready factories.
"""

from __future__ import annotations

from typing import Any

from retbench.data import Corpus
from retbench.retrievers.base import register
from retbench.retrievers.frameworks import FrameworkRetriever, Hit, Outcome, as_score, pooled, timed_batch


@register("langchain")
class LangChainRetriever(FrameworkRetriever):
    """A LangChain BaseRetriever from a `module:function` factory; see the module docstring."""

    adapter = "langchain"
    package = "langchain_core"
    distribution = "langchain-core"
    base_class = "langchain_core.retrievers:BaseRetriever"
    hint = "a vector store's `.as_retriever()` is one"

    def documents(self, corpus: Corpus) -> list[Any]:
        from langchain_core.documents import Document

        return [Document(page_content=text, metadata=meta, id=doc) for doc, text, meta in self.records(corpus)]

    def set_depth(self, k: int) -> None:
        r = self.retriever
        if "k" in getattr(type(r), "model_fields", {}):
            r.k = k
        elif isinstance(getattr(r, "search_kwargs", None), dict):
            r.search_kwargs = {**r.search_kwargs, "k": k}

    def retrieve(self, texts: list[str]) -> list[Outcome]:
        if self.timeout_s is not None:
            return pooled(texts, self.retriever.invoke, self.concurrency, self.timeout_s)
        config = {"max_concurrency": self.concurrency}
        return timed_batch(texts, lambda t: self.retriever.batch(t, config=config, return_exceptions=True))

    def hit(self, item: Any) -> Hit:
        meta = getattr(item, "metadata", None) or {}
        doc = meta.get(self.id_key)
        if doc is None:
            doc = getattr(item, "id", None)
        score = meta.get(self.score_key) if self.score_key else None
        return Hit(doc, as_score(score))
