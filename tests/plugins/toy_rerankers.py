"""A user's own reranker, loaded by `module:factory` (tests put this folder on sys.path).

`Overlap` scores a document by the share of the query's lowercase words it contains; `fail_on`
makes it raise for chosen query texts, to check failures are recorded verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence

from retbench.retrievers.rerank import Reranker


class Overlap(Reranker):
    kind = "toy_rerankers:Overlap"

    def __init__(self, fail_on: Sequence[str] = ()) -> None:
        self.fail_on = set(fail_on)

    def fingerprint(self) -> str:
        return "toy-overlap-v1"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        if query in self.fail_on:
            raise RuntimeError(f"toy reranker refuses {query!r}")
        words = set(query.lower().split())
        return [len(words & set(d.lower().split())) / max(1, len(words)) for d in documents]


RELEASE = __import__("threading").Event()  # set by a test to let hung calls return


class Stuck(Overlap):
    """Overlap that never answers (until RELEASE is set) when a query contains `word`: a stuck model server."""

    kind = "toy_rerankers:Stuck"

    def __init__(self, word: str = "stuck", fail_on: Sequence[str] = ()) -> None:
        super().__init__(fail_on)
        self.word = word

    def score_many(self, items):
        if any(self.word in q.lower().split() for q, _ in items):
            RELEASE.wait(120)
        return super().score_many(items)
