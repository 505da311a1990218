"""The diversity measures on a worked example, by hand (agreement with ndeval: tests/parity/metrics)."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Run
from retbench.evaluation import evaluate
from retbench.metrics.judges.subtopics import SubtopicQrels

# d1 covers subtopics a and b, d2 covers b, d3 covers c; d4 is judged non-relevant; d5 is unjudged
QRELS = SubtopicQrels(
    [("q", "a", "d1", 1), ("q", "b", "d1", 1), ("q", "b", "d2", 1), ("q", "c", "d3", 1), ("q", "a", "d4", 0)]
)
RUN = Run.from_dict({"q": {"d2": 4.0, "d1": 3.0, "d5": 2.0, "d3": 1.0}})


def _one(name: str) -> float:
    return float(evaluate(RUN, QRELS, [name]).values[0, 0])


def test_novelty_gains_decay_for_a_subtopic_seen_again():
    # gains by rank: d2 -> b:1 = 1; d1 -> a:1 + b:0.5 = 1.5; d5 -> 0; d3 -> c:1 = 1
    d = [1.0, np.log(2) / np.log(3), np.log(2) / np.log(4), np.log(2) / np.log(5)]
    run_dcg = 1.0 * d[0] + 1.5 * d[1] + 1.0 * d[3]
    ideal_dcg = 2.0 * d[0] + 1.0 * d[1] + 0.5 * d[2]  # greedy: d1 (a, b), then d3 (c), then d2 (b again)
    assert _one("alpha_nDCG@4") == pytest.approx(run_dcg / ideal_dcg)
    assert _one("NRBP") == pytest.approx((1 - 0.5 * 0.5) / 3 * (1.0 + 1.5 * 0.5 + 1.0 * 0.125))


def test_intent_aware_precision_and_subtopic_recall_count_subtopics():
    assert _one("P_IA@2") == pytest.approx(3 / (2 * 3))  # pairs (d2, b), (d1, a), (d1, b)
    assert _one("STREC@2") == pytest.approx(2 / 3) and _one("STREC@4") == pytest.approx(1.0)


def test_err_ia_is_normalized_by_a_ranking_relevant_to_every_subtopic_except_at_rank_one():
    raw = 1.0 + 1.5 / 2
    assert _one("ERR_IA@2") == pytest.approx(raw / (3.0 + 3 * 0.5 / 2))
    assert _one("ERR_IA@1") == pytest.approx(1.0)  # ndeval leaves rank 1 undivided


def test_a_relevance_level_reads_subtopic_grades_as_binary_at_that_level():
    qrels = SubtopicQrels([("q", "a", "d1", 2), ("q", "b", "d2", 1)])
    ev = evaluate(Run.from_dict({"q": {"d2": 2.0, "d1": 1.0}}), qrels, ["STREC@1", "STREC(rel=2)@1"])
    assert ev.values[0].tolist() == [0.5, 0.0]
