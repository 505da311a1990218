"""A chunk retriever that answers with documents, for chunking a BEIR corpus judged by its qrels.

A document's rank is its best chunk's: the chunk ranking collapsed to distinct documents, first occurrence kept
(`metrics.judges.top_documents`), searched deeper until `depth` documents are found or the retriever has no more.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from retbench.chunkers import ChunkSet
from retbench.data import Corpus, Queries, Run
from retbench.jsontypes import JSONObject
from retbench.metrics.judges import top_documents
from retbench.retrievers.base import Retriever

if TYPE_CHECKING:
    from retbench.retrievers.encoders.encoder import Encoder


def encoder_of(retriever: Retriever) -> Encoder | None:
    """The Encoder of a dense retriever (or of a hybrid's dense component, or the one a wrapper searches), if any."""
    if retriever.inner is not None:
        return encoder_of(retriever.inner)
    enc: Encoder | None = retriever.encoder
    if enc is not None:
        return enc
    for c in retriever.components:
        enc = encoder_of(c)
        if enc is not None:
            return enc
    return None


class BestChunkDocuments(Retriever):
    """A chunk retriever answering with documents: each at its best chunk's rank, `depth` of them if it can.

    It asks the wrapped retriever for `k` chunks, collapses them to distinct documents (first
    occurrence kept, `top_documents`), and asks again with twice as many chunks, for the queries
    still short of `k` documents only, until they have `k` or the retriever has nothing more to
    give (it returned fewer chunks than asked, or it was asked for every chunk). Latencies add up
    over the rounds; a round that fails for a query records that failure (never the earlier,
    shallower answer in its place). `deeper` counts the queries searched again and the most chunks asked.
    """

    inner: Retriever  # always a wrapper

    def __init__(self, inner: Retriever, chunks: ChunkSet) -> None:
        super().__init__(inner.name)
        self.inner = inner
        self.chunks = chunks
        self.adapter = inner.adapter
        self.capabilities = inner.capabilities & {"save", "load"}
        self.deeper = {"queries": 0, "max_chunks": 0}

    def describe(self) -> JSONObject:
        return {**self.inner.describe(), "documents": "ranked by their best chunk"}

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def index(self, corpus: Corpus) -> None:
        self.inner.index(corpus)

    def save(self, path: str | Path) -> None:
        self.inner.save(path)

    def load(self, path: str | Path) -> None:
        self.inner.load(path)

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        ask = min(k, len(self.chunks))
        found = self.inner.search(queries, ask, batch_size=batch_size)
        docs = top_documents(found, self.chunks, k)
        latency, batch = dict(found.latency), dict(found.latency_batch)  # every deeper ask adds to both
        todo = _short_of(found, docs, ask, k)
        while todo and ask < len(self.chunks):
            ask = min(2 * ask, len(self.chunks))
            self.deeper["queries"] += len(todo)
            self.deeper["max_chunks"] = max(self.deeper["max_chunks"], ask)
            found = self.inner.search(queries.subset(todo), ask, batch_size=batch_size)
            more = top_documents(found, self.chunks, k)
            for q in todo:
                latency[q] = latency.get(q, 0.0) + found.latency.get(q, 0.0)
                batch[q] = max(batch.get(q, 1), found.latency_batch.get(q, 1))
            again = set(todo)
            docs = Run.concat([docs.subset([q for q in docs.query_ids if q not in again]), more]).subset(list(queries))
            todo = _short_of(found, more, ask, k)
        docs.latency, docs.latency_batch = latency, {q: n for q, n in batch.items() if n > 1}
        return docs

    def close(self) -> None:
        """The wrapped retriever is closed by whoever made it (it serves every chunker)."""


def _short_of(chunks: Run, docs: Run, asked: int, k: int) -> list[str]:
    """Answered queries with fewer than `k` documents whose retriever gave every chunk asked (more may exist)."""
    return [
        q
        for q in docs.query_ids
        if not docs.status[q].failed and _length(docs, q) < k and q in chunks and _length(chunks, q) >= asked
    ]


def _length(run: Run, q: str) -> int:
    s = run.span(q)
    return int(s.stop - s.start)


def joined_corpus(corpus: Corpus) -> Corpus:
    """A BEIR corpus as the text that gets indexed (title and text joined by its rule), so chunk offsets cover both."""
    return Corpus(list(corpus.ids), corpus.joined_texts(), None, join_rule="text_only", name=corpus.name)
