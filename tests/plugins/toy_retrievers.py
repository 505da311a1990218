"""Users' own retrievers, loaded by `module:factory` in configs (tests put this folder on sys.path).

`WordOverlap` is a complete adapter: it scores documents by shared lowercase words. Options make it
slow (to be killed mid-run) or fail on chosen queries (to check failures are recorded verbatim).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from retbench.data import Corpus
from retbench.retrievers.base import Ranking, Retriever


class WordOverlap(Retriever):
    adapter = "toy_retrievers:WordOverlap"

    def __init__(
        self, delay: float = 0.0, fail_on: Sequence[str] = (), calls_log: str = "", name: str | None = None
    ) -> None:
        super().__init__(name)
        self.delay, self.fail_on, self.calls_log = delay, set(fail_on), calls_log or os.environ.get("TOY_CALLS_LOG", "")
        self._docs: list[tuple[str, set[str]]] = []

    def describe(self) -> dict:
        return {"adapter": self.adapter, "delay": self.delay}

    def index(self, corpus: Corpus) -> None:
        self._docs = [(corpus.ids[i], set(corpus.joined(i).lower().split())) for i in range(len(corpus))]

    def search_one(self, text: str, k: int) -> Ranking:
        if self.calls_log:
            with open(self.calls_log, "a") as fh:
                fh.write(text.replace("\n", " ") + "\n")
        if self.delay:
            time.sleep(self.delay)
        if any(marker in text for marker in self.fail_on):
            raise RuntimeError(f"WAL is corrupted at offset 78667: checksum mismatch for {text[:20]!r}")
        words = set(text.lower().split())
        scored = [(doc, float(len(words & toks))) for doc, toks in self._docs]
        scored = [x for x in scored if x[1] > 0]
        scored.sort(key=lambda x: (-x[1], x[0]))
        return scored[:k]


def word_overlap(**kwargs) -> WordOverlap:
    """A factory function, the other form `module:factory` accepts."""
    return WordOverlap(**kwargs)
