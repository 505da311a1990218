"""One default for a query with no relevant document at a relevance level: a metric's own level
(`recall@10(rel=2)`) follows the same `no_relevant` policy as the evaluation's level (`eval -l 2`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.evaluation import evaluate

# q1 has a grade-2 document; q2 only grade-1 ones (nothing relevant at level 2); q3 nothing relevant at all;
# q4 has a grade-2 document the system never answered (missing: scores 0, counted)
QRELS = Qrels(
    {
        "q1": {"a": 2, "b": 1, "z": 0},
        "q2": {"c": 1, "d": 1},
        "q3": {"e": 0},
        "q4": {"f": 2},
    }
)
RUN = Run.from_dict(
    {
        "q1": {"b": 3.0, "a": 2.0, "x": 1.0},
        "q2": {"c": 3.0, "y": 2.0},
        "q3": {"e": 1.0},
    }
)
NAMES = ["recall@10", "P@5", "ndcg@10", "map"]


@pytest.mark.parametrize("policy", ["skip", "zero", "one"])
def test_a_metric_at_its_own_level_equals_the_metric_evaluated_at_that_level(policy: str):
    at_two = evaluate(RUN, QRELS, NAMES, relevance_level=2, no_relevant=policy)
    own = evaluate(RUN, QRELS, [f"{m}(rel=2)" for m in NAMES[:2]] + NAMES[2:], no_relevant=policy)
    for m in NAMES[:2]:
        want, got = at_two.aggregate()[m], own.aggregate()[f"{m}(rel=2)"]
        assert got["mean"] == pytest.approx(want["mean"], abs=1e-12) and got["n"] == want["n"], (m, policy)
        assert want["mean"] == pytest.approx(float(np.mean(at_two.column(m))), abs=1e-12)


def test_skip_is_the_default_and_leaves_the_query_out_of_that_metric_only():
    ev = evaluate(RUN, QRELS, ["recall@10(rel=2)", "recall@10"])
    assert ev.no_relevant == "skip" and ev.skipped == ["q3"]  # nothing relevant at the evaluation's level
    rows = dict(zip(ev.query_ids, ev.column("recall@10(rel=2)").tolist(), strict=True))
    assert rows["q1"] == 1.0 and math.isnan(rows["q2"]) and rows["q4"] == 0.0
    assert ev.column("recall@10").tolist() == [1.0, 0.5, 0.0]  # q2 counts at level 1


def test_trec_eval_counting_is_asked_for_by_zero():
    ev = evaluate(RUN, QRELS, ["recall@10(rel=2)"], no_relevant="zero")
    assert dict(zip(ev.query_ids, ev.column("recall@10(rel=2)").tolist(), strict=True))["q2"] == 0.0
