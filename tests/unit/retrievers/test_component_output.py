"""What a reranker or an encoder returns is checked before anything reads it.

A plugin reranker that returns None, a ragged or short list, text or NaN gets every query of that call recorded as
an error whose message names the reranker and what it returned, never NumPy's own error and never blamed on the
pair cache the scores would have gone to. An encoder's batch must be one finite row of numbers per text, all rows
the same length: anything else is a BackendError naming the encoder and the shape it returned.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from retbench.data import Corpus, Queries, QueryStatus, RunBuilder
from retbench.errors import BackendError
from retbench.retrievers.encoders import Encoder
from retbench.retrievers.rerank import RerankStage
from retbench.retrievers.rerank.scorers import Reranker

DOCS = ["d1", "d2", "d3"]


class Misbehaving(Reranker):
    """A plugin reranker that answers `reply` whatever it is asked (on purpose)."""

    kind = "misbehaving"

    def __init__(self, reply: object) -> None:
        self.reply = reply

    def fingerprint(self) -> str:
        return f"misbehaving-{self.reply!r}"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:  # pragma: no cover - score_many answers
        raise AssertionError

    def score_many(self, items):  # type: ignore[override]
        return self.reply


def _rerank(reply: object, tmp_path):
    corpus = Corpus(DOCS, ["alpha", "beta", "gamma"])
    queries = Queries({"q1": "alpha"})
    first = RunBuilder("first")
    first.add("q1", [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)])
    stage = RerankStage(Misbehaving(reply), 3, cache_dir=tmp_path)
    return stage.rerank(first.build(), queries, corpus)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (None, "reranker misbehaving returned NoneType, not one list of scores per query"),
        ([[1.0, 2.0]], "reranker misbehaving returned 2 scores for 3 documents (query 1)"),
        ([[1.0, [2.0], 3.0]], "reranker misbehaving returned a score of type list ([2.0]) for query 1"),
        ([[1.0, "2", 3.0]], "reranker misbehaving returned a score of type str ('2') for query 1"),
        ([None], "reranker misbehaving returned NoneType for query 1, not a list of 3 scores"),
        ([[1.0, float("nan"), 3.0]], "reranker misbehaving returned a non-finite score (nan) for query 1"),
        ([[1.0, 1e300, 3.0]], "reranker misbehaving returned a score beyond float32's range (1e+300)"),
        ([[1.0, 2.0, 3.0], [1.0]], "reranker misbehaving returned 2 score lists for 1 queries"),
    ],
)
def test_a_reranker_reply_that_is_not_one_finite_score_per_document_is_an_error_naming_the_reranker(
    reply, said, tmp_path
):
    run = _rerank(reply, tmp_path)
    assert run.status["q1"] is QueryStatus.ERROR
    assert run.errors["q1"] == f"ValueError: {said}"
    assert "cache" not in run.errors["q1"]


def test_a_well_formed_reply_reranks(tmp_path):
    run = _rerank([[1.0, 3.0, 2]], tmp_path)
    assert run.status["q1"] is QueryStatus.OK and run.docs("q1") == ["d2", "d3", "d1"]


class Answering(Encoder):
    """An encoder plugin whose model answers `reply` for every batch (on purpose)."""

    def __init__(self, reply: object) -> None:
        super().__init__("plugin-model", cache=False)
        self.reply = reply

    def _encode_batch(self, texts: list[str], role: str):  # type: ignore[override]
        return self.reply


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (None, "encoder plugin-model returned NoneType for 2 text(s), not their vectors"),
        ([[1.0, 2.0], [3.0]], "encoder plugin-model returned vectors that are not one equal-length row of numbers"),
        ([[1.0, 2.0]], "encoder plugin-model returned an array of shape (1, 2) for 2 text(s) (expected 2 x dim)"),
        ([1.0, 2.0], "encoder plugin-model returned an array of shape (2,) for 2 text(s)"),
        (
            [[1.0, float("nan")], [0.0, 1.0]],
            "encoder plugin-model returned NaN or infinite values for 1 text(s), first: 'a'",
        ),
    ],
)
def test_an_encoder_batch_that_is_not_one_finite_row_per_text_names_the_encoder_and_its_shape(reply, said):
    with pytest.raises(BackendError) as err:
        Answering(reply).encode(["a", "b"])
    assert str(err.value).startswith(said)


def test_a_well_formed_encoder_batch_comes_back_as_float32():
    vecs = Answering([[1, 0], [0, 1]]).encode(["a", "b"])
    assert vecs.dtype == np.float32 and vecs.tolist() == [[1.0, 0.0], [0.0, 1.0]]
