"""Relevance level 0 (trec_eval -l 0): every judged document, grade 0 included, is relevant to the binary measures;
the graded ones (nDCG, graded RBP) and those with a level of their own keep reading the grades."""

from __future__ import annotations

import pytest

from retbench.data import Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate

QRELS = {"q": {"a": 2, "b": 0, "c": 1, "d": -1, "e": 0}}  # d: in the pool, not judged (trec_eval's reading)
RUN = Run.from_dict({"q": {"a": 5.0, "b": 4.0, "x": 3.0, "d": 2.0, "c": 1.0}})  # x: nobody judged it


def test_judged_documents_count_as_relevant_and_grades_still_weigh():
    names = ["P@5", "num_rel", "num_rel_ret", "map", "P(rel=2)@5", "ndcg", "rbp", "bpref"]
    zero = evaluate(RUN, QRELS, names, relevance_level=0, no_relevant="zero")
    one = evaluate(RUN, QRELS, names, relevance_level=1, no_relevant="zero")
    got = {m: zero.mean(m) for m in names}
    assert got["P@5"] == pytest.approx(3 / 5)  # a, b and c are judged with a grade >= 0; x and d are not
    assert got["num_rel"] == 4 and got["num_rel_ret"] == 3  # a, b, c, e
    assert got["map"] == pytest.approx((1 / 1 + 2 / 2 + 3 / 5) / 4)
    for graded in ("P(rel=2)@5", "ndcg", "rbp"):  # a level of their own, or the grades: as at level 1
        assert zero.mean(graded) == pytest.approx(one.mean(graded))
    # no judged document lies below level 0 (N = 0): each relevant one retrieved counts 1, as trec_eval -l0 prints
    assert got["bpref"] == pytest.approx(3 / 4)
    assert zero.relevance_level == 0


def test_a_negative_level_is_still_refused():
    with pytest.raises(ConfigError, match="relevance level"):
        evaluate(RUN, QRELS, ["P@5"], relevance_level=-1)
