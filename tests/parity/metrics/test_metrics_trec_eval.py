"""The metric engine agrees with trec_eval (through pytrec_eval, which embeds trec_eval's C code) to 1e-9.

Random graded qrels and runs with ties (scores exact in float32, since pytrec_eval keeps scores as
32-bit floats), doc ids whose string order differs from their numeric order (trec_eval breaks
ties by doc id descending, as strings), judged queries the system did not answer, empty rankings,
negative grades and queries with no relevant document.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.data import Qrels, Run
from retbench.evaluation import evaluate
from trec_oracle import ORACLE, PAIRS, qrels_and_run, scifact_overlap_run


def _ours(qrels, run, level, mode):
    names = [ours for _, ours in PAIRS]
    return evaluate(Run.from_dict(run), Qrels(qrels), names, relevance_level=level, no_relevant="zero", mode=mode)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run(), level=st.sampled_from([1, 2]))
def test_every_shared_measure_matches_pytrec_eval(data, level):
    qrels, run = data
    theirs = ORACLE(qrels, run, level=level)
    ev = _ours(qrels, run, level, "trec_eval")
    assert ev.query_ids == list(qrels)
    for trec_name, name in PAIRS:
        col = dict(zip(ev.query_ids, ev.column(name).tolist(), strict=True))
        for qid in qrels:
            expected = theirs[qid][trec_name] if qid in theirs else 0.0  # trec_eval -c: unanswered is 0
            assert col[qid] == pytest.approx(expected, abs=1e-9), (name, qid)
        # trec_eval -c averages over all judged queries
        assert ev.mean(name) == pytest.approx(sum(col.values()) / len(qrels), abs=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_pytrec_eval_mode_averages_over_the_queries_pytrec_eval_returns(data):
    qrels, run = data
    theirs = ORACLE(qrels, run)
    ev = _ours(qrels, run, 1, "pytrec_eval")
    assert sorted(ev.query_ids) == sorted(theirs)
    assert sorted(ev.excluded) == sorted(set(qrels) - set(theirs))
    for trec_name, name in PAIRS:
        if not theirs:
            assert np.isnan(ev.mean(name))
            continue
        expected = float(np.mean([v[trec_name] for v in theirs.values()]))
        assert ev.mean(name) == pytest.approx(expected, abs=1e-9), name


def test_trec_eval_names_parse_to_the_same_measures():
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    run = {"q": {"c": 3.0, "b": 2.0, "x": 1.5, "a": 1.0}}
    ours = evaluate(Run.from_dict(run), Qrels(qrels), [t for t, _ in PAIRS])
    assert ours.metrics == [name for _, name in PAIRS]
    assert ours.trec_names == [t for t, _ in PAIRS]
    theirs = ORACLE(qrels, run)["q"]
    for trec_name, name in PAIRS:
        assert ours.mean(name) == pytest.approx(theirs[trec_name], abs=1e-12)


def test_scifact_run_matches_pytrec_eval(scifact):
    """A real run: SciFact test qrels, every test query ranked over all 5,183 docs by a simple word-overlap score."""
    qrels = scifact.split("test")
    run = scifact_overlap_run(scifact, qrels)
    theirs = ORACLE(qrels.to_dict(), run)
    ev = evaluate(Run.from_dict(run), qrels, [name for _, name in PAIRS])
    assert len(ev.query_ids) == 300 and not ev.skipped
    for trec_name, name in PAIRS:
        expected = np.array([theirs[q][trec_name] for q in ev.query_ids])
        np.testing.assert_allclose(ev.column(name), expected, rtol=0, atol=1e-9, err_msg=name)
    assert 0.3 < ev.mean("ndcg@10") < 0.8  # a sane run, not a degenerate one
