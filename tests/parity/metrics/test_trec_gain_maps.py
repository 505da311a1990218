"""trec_eval's gain maps (`ndcg.1=3,2=9`, also G, ndcg_rel, Rndcg) and 11pt_avg's own recall levels, against
trec_eval's C code (pytrec_eval).

pytrec_eval cannot be given a gain map (it splits measure parameters at commas), but trec_eval's own help says
what one is: the qrels with each level's grade replaced by its gain. So for integer gains that keep the levels'
order, the measure with a gain map must equal pytrec_eval's measure on the rewritten qrels, to 1e-9, on random
graded qrels with negative grades, unjudged documents, ties and empty rankings. Fractional gains and trec_eval's
own ordering of near-equal gains are checked byte for byte against trec_eval 10.0's expected file
(test_trec_eval10.py) and against a trec_eval binary where one is found.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics.registry import parse_metric, parse_metrics
from trec_oracle import qrels_and_run

FAMILIES = ("ndcg", "G", "ndcg_rel", "Rndcg")


@st.composite
def gain_maps(draw):
    """{grade: gain} for grades 0..3: increasing whole gains (level 0 may get one: then Rndcg is left out,
    its count of relevant documents would change with the rewritten grade)."""
    zero = draw(st.sampled_from([0, 0, 1, 2]))
    steps = draw(st.lists(st.integers(1, 5), min_size=3, max_size=3))
    gains = {0: zero}
    for grade, step in zip((1, 2, 3), steps, strict=True):
        gains[grade] = gains[grade - 1] + step
    keep = draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=1, max_size=4, unique=True))
    return {g: gains[g] for g in sorted(keep) if gains[g] != g} or {2: gains[2] + 7}


def _pytrec(qrels, run, measures):
    import pytrec_eval

    safe = {
        q: (j if any(g > 0 for g in j.values()) else {d: max(g, 0) for d, g in j.items()}) for q, j in qrels.items()
    }
    return pytrec_eval.RelevanceEvaluator(safe, set(measures)).evaluate({q: r for q, r in run.items() if r})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run(), gains=gain_maps())
def test_a_gain_map_equals_the_measure_on_qrels_whose_grades_are_the_gains(data, gains):
    qrels, run = data
    text = ",".join(f"{lv}={g}" for lv, g in gains.items())
    families = [f for f in FAMILIES if not (f == "Rndcg" and gains.get(0, 0) > 0)]
    ev = evaluate(Run.from_dict(run), Qrels(qrels), [f"{f}.{text}" for f in families], no_relevant="zero")
    rewritten = {q: {d: (gains.get(g, g) if g >= 0 else g) for d, g in j.items()} for q, j in qrels.items()}
    theirs = _pytrec(rewritten, run, families)
    for fam in families:
        name = f"{fam}.{text}"
        assert ev.trec_names[ev.metrics.index(name)] == f"{fam}_{text}"
        for i, qid in enumerate(ev.query_ids):
            want = theirs[qid][fam] if run.get(qid) else 0.0
            want = 0.0 if math.isnan(want) else want
            assert ev.values[i, ev.metrics.index(name)] == pytest.approx(want, abs=1e-9), (fam, qid)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run(), levels=st.lists(st.sampled_from([0, 5, 10, 15, 20, 33, 50, 66, 75, 90, 100]), min_size=1))
def test_eleven_point_average_over_given_levels_is_the_mean_of_interpolated_precision_there(data, levels):
    qrels, run = data
    points = sorted({p / 100 for p in levels})
    text = ",".join(f"{p:g}" for p in points)
    ev = evaluate(
        Run.from_dict(run),
        Qrels(qrels),
        [f"11pt_avg.{text}"],
        no_relevant="zero",
        recall_rounding="floor_plus_0.9",
    )
    theirs = _pytrec(qrels, run, [f"iprec_at_recall.{text}"])
    col = ev.metrics.index(f"11pt_avg.{text}")
    for i, qid in enumerate(ev.query_ids):
        want = sum(theirs[qid][f"iprec_at_recall_{p:.2f}"] for p in points) / len(points) if run.get(qid) else 0.0
        assert ev.values[i, col] == pytest.approx(0.0 if math.isnan(want) else want, abs=1e-9), qid


def test_parameter_lists_read_back_to_the_same_measure_and_print_as_trec_eval_does():
    for spec, printed in [("11pt_avg..25,.5,.75", "11pt_avg_.25,.5,.75"), ("ndcg.1=3,2=9,4=4.5", "ndcg_1=3,2=9,4=4.5")]:
        parsed = parse_metric(spec)
        assert parsed.trec_name == printed
        assert parse_metric(parsed.name).trec_name == printed
        assert [s.trec_name for s in parse_metrics([spec])] == [printed]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("11pt_avg..5,.25", "increasing order"),
        ("11pt_avg.0.1,1.5", "in [0, 1]"),
        ("ndcg.1=-2", "must be >= 0"),
        ("ndcg.-1=2", "level >= 0"),
        ("G.1=2,1=3", "two gains"),
        ("Rndcg.x=1", "level=gain"),
    ],
)
def test_parameter_lists_trec_eval_would_misread_are_refused_with_the_reason(spec, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_metric(spec)
