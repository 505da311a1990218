"""check_retriever's own contract: every violation is a ContractError naming the check, never a crash of the kit.

Each class below is a small retriever a user might write, broken in one way: it answers None, too few
rankings, nothing at all, raises, or hides its backend's failure behind empty answers.
"""

from __future__ import annotations

import functools

import pytest

import repo_paths
from contract_doubles import Lexical
from retbench.data import Corpus, Queries
from retbench.errors import InputError
from retbench.retrievers.base import Retriever
from retbench.studies.benchmark import DatasetSpec, prepare_dataset
from retbench.testing import ContractError, check_retriever
from retbench.testing.contract import CORE_CHECKS


@functools.lru_cache(maxsize=1)
def scifact() -> tuple[Corpus, Queries]:
    """60 SciFact documents (the shipped corpus) and 8 of its test queries."""
    ds, queries = prepare_dataset(
        DatasetSpec(spec=str(repo_paths.SCIFACT), split="test", max_queries=8, corpus_sample=60)
    )
    c = ds.corpus
    return Corpus(list(c.ids), list(c.texts), list(c.titles or []) or None), queries


class ReturnsNone(Lexical):
    def search_batch(self, texts, k):  # type: ignore[override]
        return None


class TooFew(Lexical):
    def search_batch(self, texts, k):
        return super().search_batch(texts, k)[:-1]


class NotPairs(Lexical):
    def search_batch(self, texts, k):
        return [[d for d, _ in r] for r in super().search_batch(texts, k)]


class AnswersNothing(Lexical):
    def search_batch(self, texts, k):
        return [[] for _ in texts]


class RaisesTypeError(Lexical):
    def index(self, corpus: Corpus) -> None:
        raise TypeError("unexpected keyword 'corpus'")


class SwallowsErrors(Lexical):
    """Catches its backend's exception and answers nothing: a dead backend would read as 'nothing relevant'."""

    def search_batch(self, texts, k):
        try:
            return self.backend(texts, k)
        except Exception:
            return [[] for _ in texts]


class OverridesSearchAndSwallows(Lexical):
    """Overrides `search` itself (so the kit cannot break its search_batch) and still hides the failure."""

    def search(self, queries, k, *, batch_size=0):
        try:
            self.backend([], k)
        except RuntimeError:
            self.docs = {}
        return super().search(queries, k, batch_size=batch_size)


def test_a_correct_retriever_passes_every_core_check():
    corpus, queries = scifact()
    assert check_retriever(Lexical, corpus, queries) == list(CORE_CHECKS)


@pytest.mark.parametrize(
    ("cls", "check", "needle"),
    [
        (ReturnsNone, "search", "search_batch returned NoneType for 8 queries"),
        (TooFew, "search", "search_batch returned 7 rankings for 8 queries"),
        (NotPairs, "search", "is not a (doc id, score) pair"),
        (AnswersNothing, "answers", "made of a corpus document's own words"),
        (RaisesTypeError, "index", "the retriever raised TypeError: unexpected keyword"),
        (SwallowsErrors, "hidden failures", "a failing backend is hidden as an empty answer"),
        (OverridesSearchAndSwallows, "hidden failures", "hidden as an empty answer"),
    ],
)
def test_each_violation_is_a_contract_error_naming_its_check(cls, check, needle):
    corpus, queries = scifact()
    with pytest.raises(ContractError, match=rf"^{check}: ") as err:
        check_retriever(cls, corpus, queries)
    assert needle in str(err.value)


def test_the_answers_probe_is_built_from_the_corpus_even_when_the_user_queries_find_nothing():
    corpus, _ = scifact()
    unmatched = Queries({"q1": "zzzz qqqq", "q2": "xxxx yyyy"})
    assert check_retriever(Lexical, corpus, unmatched) == list(CORE_CHECKS)
    with pytest.raises(ContractError, match=r"^answers: "):
        check_retriever(AnswersNothing, corpus, unmatched)


def test_a_factory_that_raises_is_a_contract_error_and_a_tiny_corpus_is_an_input_error():
    corpus, queries = scifact()

    def broken() -> Retriever:
        raise ValueError("no such model")

    with pytest.raises(ContractError, match=r"^factory: the retriever raised ValueError: no such model"):
        check_retriever(broken, corpus, queries)
    with pytest.raises(InputError, match="at least 4 documents"):
        check_retriever(Lexical, corpus.subset(corpus.ids[:3]), queries)
