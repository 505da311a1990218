"""Every trec_eval 9 measure (`-m all_trec`) agrees with pytrec_eval (trec_eval's own C code) to 1e-9, per query
and in trec_eval's `all` line (means, geometric means with their 1e-5 floor, sums and the query count), at
relevance levels 1 and 2 and with judged documents only (-J), on random graded qrels with negative grades and
unjudged documents, runs with ties, unanswered judged queries and empty rankings, and on SciFact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.data import Qrels, Run
from retbench.evaluation import evaluate
from retbench.metrics.base import MIN_GEO_MEAN
from retbench.metrics.registry import parse_metrics
from trec_oracle import qrels_and_run, scifact_overlap_run

# what pytrec_eval computes that retbench has no row for: the run's name and a string of grades
NOT_MEASURES = {"runid", "relstring"}
TREC_EVAL_10 = ("unj_", "rbp")  # trec_eval 10.0's measures, which pytrec_eval (trec_eval 9) lacks: tests/unit/metrics
ALL = parse_metrics(["all_trec"])


def _safe(qrels):
    """pytrec_eval 0.5.x can hang on a query whose grades are all <= 0 with a negative one (see trec_oracle);
    both sides get the same rewrite, so every measure still sees identical input."""
    return {
        q: (j if any(g > 0 for g in j.values()) else {d: max(g, 0) for d, g in j.items()}) for q, j in qrels.items()
    }


def _theirs(qrels, run, level, judged_only):
    import pytrec_eval

    ev = pytrec_eval.RelevanceEvaluator(qrels, {"all_trec"}, relevance_level=level, judged_docs_only_flag=judged_only)
    # an empty ranking reads memory pytrec_eval never set (a crash, now and then); trec_eval has none
    return ev.evaluate({q: r for q, r in run.items() if r})


def _check(qrels, run, level=1, judged_only=False):
    qrels = _safe(qrels)
    theirs = _theirs(qrels, run, level, judged_only)
    ev = evaluate(
        Run.from_dict(run),
        Qrels(qrels),
        ["all_trec"],
        relevance_level=level,
        no_relevant="zero",
        judged_only=judged_only,
        recall_rounding="floor_plus_0.9",  # pytrec_eval is trec_eval 9 (10.0's rounding: test_trec_eval10.py)
    )
    assert ev.query_ids == list(qrels)
    some = next(iter(theirs.values()), None)
    if some is not None:  # every measure pytrec_eval prints has its row (runid and relstring aside)
        assert set(some) - NOT_MEASURES <= set(ev.trec_names)
    for j, (name, trec) in enumerate(zip(ev.metrics, ev.trec_names, strict=True)):
        assert trec is not None, name
        if trec.startswith(TREC_EVAL_10):
            continue
        gm = trec.startswith("gm_")
        expected = []
        for i, qid in enumerate(ev.query_ids):
            if run.get(qid):  # trec_eval has no empty rankings: -c scores those as unanswered
                want = theirs[qid][trec]
                want = math.exp(want) if gm else want  # pytrec_eval gives log(max(v, 1e-5)) per query
                # -J can leave a ranking empty: trec_eval then divides 0 by 0 (iprec_at_recall_0.00), retbench says 0
                want = 0.0 if math.isnan(want) and judged_only else want
            else:  # trec_eval -c: an unanswered query scores 0, but keeps its relevant count and counts once
                want = {"num_rel": sum(g >= level for g in qrels[qid].values()), "num_q": 1.0}.get(trec, 0.0)
                want = max(want, MIN_GEO_MEAN) if gm else want
            got = max(ev.values[i, j], MIN_GEO_MEAN) if gm else ev.values[i, j]
            assert got == pytest.approx(want, abs=1e-9), (trec, qid)
            expected.append(want)
        col = np.array(expected)
        kind = {"gm": "gmean", "nu": "sum"}.get(trec[:2], "mean")
        all_line = {
            "gmean": math.exp(np.mean(np.log(np.maximum(col, MIN_GEO_MEAN)))),
            "sum": col.sum(),
            "mean": col.mean(),
        }[kind]
        assert ev.mean(name) == pytest.approx(all_line, rel=1e-12, abs=1e-12), trec


def test_all_trec_is_every_measure_pytrec_eval_supports():
    import pytrec_eval

    families = {s.trec_name.split("_")[0] for s in ALL if s.trec_name}
    for fam in set(pytrec_eval.supported_measures) - NOT_MEASURES:
        assert fam.split("_")[0] in families, fam


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run(), level=st.sampled_from([1, 2]), judged_only=st.booleans())
def test_every_all_trec_measure_matches_pytrec_eval(data, level, judged_only):
    qrels, run = data
    _check(qrels, run, level, judged_only)


def test_grade_levels_and_tied_scores_on_a_hand_made_query():
    qrels = {"q": {"a": 3, "b": 1, "c": 0, "d": -1, "e": 2, "f": 0, "g": 1}}
    run = {"q": {"x": 5.0, "c": 5.0, "a": 4.0, "d": 3.5, "y": 3.0, "b": 3.0, "f": 2.0, "e": 1.0, "z": 0.5}}
    for level in (1, 2, 3):
        for judged_only in (False, True):
            _check(qrels, run, level, judged_only)


@pytest.mark.parametrize("judged_only", [False, True])
def test_scifact_run_matches_pytrec_eval_on_every_measure(scifact, judged_only):
    qrels = scifact.split("test")
    run = scifact_overlap_run(scifact, qrels, depth=100)
    _check(qrels.to_dict(), run, 1, judged_only)
