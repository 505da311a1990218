"""Users' own retrievers, loaded by `module:factory` in configs (tests put this folder on sys.path).

`WordOverlap` is a complete adapter: it scores documents by shared lowercase words. Options make it
slow (to be killed mid-run) or fail on chosen queries (to check failures are recorded verbatim).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence

from retbench.data import Corpus, Queries, Run
from retbench.retrievers.base import Ranking, Retriever
from retbench.retrievers.bm25 import BM25SRetriever


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


class BatchOnly(WordOverlap):
    """WordOverlap behind a batch-only API, as most stores have: one request per batch, and a query containing
    a `fail_on` marker makes the whole request fail (the backend rejects the batch, not the query)."""

    adapter = "toy_retrievers:BatchOnly"

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        bad = [t for t in texts if any(marker in t for marker in self.fail_on)]
        if bad:
            raise RuntimeError(f"400 Bad Request: the store rejected query {bad[0][:20]!r}")
        return [WordOverlap.search_one(self, t, k) for t in texts]


def refuses_marked(text: str, metadata: dict) -> dict | None:
    """A scope selector (a router) that raises for a query containing "zebra" and picks no scope otherwise."""
    if "zebra" in text:
        raise LookupError(f"router has no route for {text[:20]!r}")
    return None


def word_overlap(**kwargs) -> WordOverlap:
    """A factory function, the other form `module:factory` accepts."""
    return WordOverlap(**kwargs)


# what a careless backend answers: one bad item per query, chosen by the query's position
BAD_ITEMS = [
    ("doc\nq9 Q0 forged 1 99 x", 1.0),  # a newline would forge a TREC line
    ("doc\twith-tab", 1.0),
    ("doc with space", 1.0),
    ("", 1.0),
    (None, 1.0),
    ({"id": "d1"}, 1.0),
    (True, 1.0),
    ("fine-id", float("nan")),
    ("fine-id", float("inf")),
]


class BadAnswers(WordOverlap):
    """WordOverlap whose n-th query's answer carries BAD_ITEMS[n] at rank 2 (queries past the list are fine)."""

    adapter = "toy_retrievers:BadAnswers"

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name=name)
        self._seen: dict[str, int] = {}

    def search_one(self, text: str, k: int) -> Ranking:
        ranking = super().search_one(text, k)
        n = self._seen.setdefault(text, len(self._seen))
        if n < len(BAD_ITEMS) and ranking:
            ranking = [ranking[0], BAD_ITEMS[n], *ranking[1:]]  # type: ignore[list-item]
        return ranking


class DiesOnce(BM25SRetriever):
    """bm25s whose search process kills itself (SIGKILL) on its first batch, once per `marker` file.

    Stands in for a worker lost mid-task (a machine reclaimed, an out-of-memory kill): the batch is
    lost with the process, and whoever runs the search must retry it without journaling twice.
    """

    adapter = "toy_retrievers:DiesOnce"

    def __init__(self, marker: str = "", name: str | None = None) -> None:
        super().__init__(name=name)
        self.marker = marker

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        if self.marker and not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().search_batch(texts, k)


class ReturnsFewer(WordOverlap):
    """A store that returns at most `returns` documents whatever k is asked (a capped store, collapsed chunks)."""

    adapter = "toy_retrievers:ReturnsFewer"

    def __init__(self, returns: int = 5, name: str | None = None) -> None:
        super().__init__(name=name)
        self.returns = returns

    def search_one(self, text: str, k: int) -> Ranking:
        return super().search_one(text, k)[: self.returns]


class LosesItsNode(WordOverlap):
    """Indexes, then loses the node that serves it: every search call fails as a whole, no query answered."""

    adapter = "toy_retrievers:LosesItsNode"

    def search(self, queries: Queries, k: int, *, batch_size: int = 0) -> Run:
        raise ConnectionResetError(104, "Connection reset by peer: the search node left the cluster")


def unreachable_store(**kwargs) -> Retriever:
    """A factory whose client connects when it is built, to a store that is not there."""
    raise ConnectionRefusedError(111, "Connection refused: the vector store at 127.0.0.1 is not listening")


def not_a_retriever(**kwargs) -> object:
    """A factory that returns the wrong type: a config error, not a backend failure."""
    return {"retriever": "forgot to build it"}
