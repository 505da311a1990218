"""Users' own LangChain and LlamaIndex retrievers and factories (tests put this folder on sys.path).

They are real framework retrievers written the way a user would: one fails on chosen queries, others
lose or change the document ids, so the tests can check how retbench records each case.
"""

from __future__ import annotations

from typing import Any

from langchain_community.retrievers import BM25Retriever
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from llama_index.core.retrievers import BaseRetriever as LlamaBaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle


class FailsOnWords(BaseRetriever):
    """A LangChain retriever that delegates to BM25 but raises for queries containing one of `words`."""

    inner: Any
    words: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hit = [w for w in self.words if w in query.lower().split()]
        if hit:
            raise RuntimeError(f"shard for {hit[0]!r} is down")
        return self.inner.invoke(query)


def langchain_failing(documents: list[Document], words: list[str]) -> BaseRetriever:
    return FailsOnWords(inner=BM25Retriever.from_documents(documents, k=10), words=words)


def langchain_without_ids(documents: list[Document]) -> BaseRetriever:
    """BM25 over copies of the documents that kept only their text (no metadata, no Document.id)."""
    return BM25Retriever.from_documents([Document(page_content=d.page_content) for d in documents])


def langchain_foreign_ids(documents: list[Document]) -> BaseRetriever:
    """BM25 over documents whose ids were rewritten (as a store with its own keys would)."""
    return BM25Retriever.from_documents(
        [Document(page_content=d.page_content, metadata={"id": f"chunk-{d.id}"}) for d in documents]
    )


def not_a_retriever(documents: list[Document]) -> list[Document]:
    return documents


class LlamaWordOverlap(LlamaBaseRetriever):
    """A LlamaIndex retriever scoring nodes by shared lowercase words; raises for queries containing `fail_on`."""

    def __init__(self, nodes: list[Any], fail_on: str) -> None:
        super().__init__()
        self.nodes, self.fail_on = nodes, fail_on

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        words = set(query_bundle.query_str.lower().split())
        if self.fail_on in words:
            raise ConnectionError(f"vector store refused {self.fail_on!r}")
        scored = [(len(words & set(n.get_content().lower().split())), n) for n in self.nodes]
        scored.sort(key=lambda x: -x[0])
        return [NodeWithScore(node=n, score=float(s)) for s, n in scored[:10] if s > 0]


def llamaindex_failing(documents: list[Any], fail_on: str) -> LlamaBaseRetriever:
    return LlamaWordOverlap(documents, fail_on)


class AnswersNone(BaseRetriever):
    """A LangChain retriever with a bug users write: it forgets to return its documents (answers None)."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> Any:
        return None


def langchain_answers_none(documents: list[Document]) -> BaseRetriever:
    return AnswersNone()


RELEASE = __import__("threading").Event()  # set by a test to let hung calls return


class HangsOnWords(BaseRetriever):
    """BM25 that never answers (until RELEASE is set) queries containing one of `words`: a stuck backend."""

    inner: Any
    words: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if any(w in query.lower().split() for w in self.words):
            RELEASE.wait(120)
        return self.inner.invoke(query)


def langchain_hanging(documents: list[Document], words: list[str]) -> BaseRetriever:
    return HangsOnWords(inner=BM25Retriever.from_documents(documents, k=10), words=words)
