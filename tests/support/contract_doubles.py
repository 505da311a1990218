"""A small correct retriever the conformance-kit tests break in one way each (a stand-in for a user's own)."""

from __future__ import annotations

from collections.abc import Sequence

from retbench.data import Corpus
from retbench.retrievers.base import Ranking, Retriever


class Lexical(Retriever):
    """Word overlap over an in-memory index, best first, ids from the corpus; `close()` releases the index,
    after which its backend raises (as a client whose server went away would)."""

    adapter = "toy-overlap"

    def index(self, corpus: Corpus) -> None:
        self.docs: dict[str, set[str]] | None = {
            d: set(corpus.joined(i).lower().split()) for i, d in enumerate(corpus.ids)
        }

    def backend(self, texts: Sequence[str], k: int) -> list[Ranking]:
        if self.docs is None:
            raise RuntimeError("index released")
        out = []
        for text in texts:
            words = set(text.lower().split())
            scored = sorted(((float(len(words & w)), d) for d, w in self.docs.items()), reverse=True)
            out.append([(d, s) for s, d in scored[:k] if s > 0])
        return out

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.backend(texts, k)

    def close(self) -> None:
        self.docs = None
