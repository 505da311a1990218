"""Judgement-group measures (trec_eval -R qrels_jg: map_avgjg, P_avgjg, Rprec_mult_avgjg) equal the mean, over
the groups that judged a query, of trec_eval's map, P and Rprec_mult (pytrec_eval) under each group's judgements,
to 1e-9, on random graded qrels from up to three groups with negative grades, unjudged documents, ties and
queries some groups did not judge. trec_eval 10.0's own qrels_jg commands: test_trec_eval10.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.data import Run
from retbench.errors import ConfigError, InputError
from retbench.evaluation.judgement_groups import evaluate_groups
from retbench.io.qrels_jg import read_qrels_jg
from trec_oracle import qrels_and_run

NAMES = ["map_avgjg", "P_avgjg.1,3,10", "Rprec_mult_avgjg.0.5,1,2"]
THEIRS = {"map": "map_avgjg", "P_1": "P_avgjg_1", "P_3": "P_avgjg_3", "P_10": "P_avgjg_10"}
THEIRS |= {f"Rprec_mult_{x}": f"Rprec_mult_avgjg_{x}" for x in ("0.50", "1.00", "2.00")}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    a=qrels_and_run(), b=qrels_and_run(), c=qrels_and_run(), n_groups=st.integers(1, 3), level=st.sampled_from([1, 2])
)
def test_each_measure_is_the_mean_over_the_groups_that_judged_the_query(a, b, c, n_groups, level):
    import pytrec_eval

    run = {q: r for q, r in a[1].items() if r}  # trec_eval has no empty rankings
    groups = {f"g{i}": qrels for i, (qrels, _) in enumerate([a, b, c][:n_groups])}
    ev = evaluate_groups(Run.from_dict(run), groups, NAMES, relevance_level=level)
    measures = {"map", "P.1,3,10", "Rprec_mult.0.5,1,2"}
    per_group = {}
    for g, qrels in groups.items():
        safe = {
            q: (j if any(v > 0 for v in j.values()) else {d: max(v, 0) for d, v in j.items()}) for q, j in qrels.items()
        }
        per_group[g] = pytrec_eval.RelevanceEvaluator(safe, measures, relevance_level=level).evaluate(run)
    for i, qid in enumerate(ev.query_ids):
        judged_by = [g for g, qrels in groups.items() if qid in qrels]
        for theirs, ours in THEIRS.items():
            values = [per_group[g][qid][theirs] if qid in run else 0.0 for g in judged_by]
            assert ev.values[i, ev.metrics.index(ours)] == pytest.approx(sum(values) / len(values), abs=1e-9)


def test_a_judgement_group_file_is_read_with_comments_and_bad_lines_are_named(tmp_path):
    path = tmp_path / "qrels.jg"
    path.write_text("# assessors A and B\n1 A d1 1\n1 B d1 0\n2 B d#2 2\n")
    assert read_qrels_jg(path) == {"A": {"1": {"d1": 1}}, "B": {"1": {"d1": 0}, "2": {"d#2": 2}}}
    for text, words in [("1 A d1\n", "expected 4 fields"), ("1 A d1 x\n", "integer"), ("1 A d 1\n1 A d 0\n", "twice")]:
        path.write_text(text)
        with pytest.raises(InputError, match=words):
            read_qrels_jg(path)


def test_measures_of_plain_qrels_are_refused_on_judgement_groups():
    with pytest.raises(ConfigError, match="map_avgjg"):
        evaluate_groups(Run.from_dict({"1": {"d1": 1.0}}), {"A": {"1": {"d1": 1}}}, ["map"])
