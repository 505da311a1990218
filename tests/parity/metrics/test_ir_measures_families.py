"""ERR, gdeval's nDCG, RBP and its residual, and the C/W/L measures agree with their reference implementations.

References: gdeval.pl (run through perl by ir_measures' gdeval provider; it prints 5 decimals, so those two
measures are compared at that precision: within 5e-6), cwl_eval (through ir_measures' cwl_eval provider, and
cwl_eval's own classes where ir_measures does not reach: the residual, graded gains) to 1e-9.

Inputs: random graded qrels (grades -1 to 4) and runs with ties, unjudged documents, queries with no
relevant document, empty rankings and judged queries the system did not answer; and a real bm25s run on
SciFact's test queries. gdeval breaks ties as trec_eval and retbench do (score descending, doc id descending)
and gets the tied scores; cwl_eval keeps the order it is given, so it gets the run in retbench's order.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bm25_scifact import scifact_bm25
from retbench.data import Qrels, Run
from retbench.evaluation import evaluate

ir_measures = pytest.importorskip("ir_measures")
logging.getLogger("ir_measures.cwl_eval").disabled = True  # it warns when max_rel is above the grades seen

DOCS = [f"d{i}" for i in range(25)]  # "d10" < "d2" as strings: tie order is not numeric order


@st.composite
def graded_qrels_and_run(draw):
    """Numeric query ids (gdeval.pl requires them), grades -1..4, quarter-step scores with ties."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(draw(st.integers(1, 6))):
        qid = str(q + 1)
        judged = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=10, unique=True))
        qrels[qid] = {d: draw(st.integers(-1, 4)) for d in judged}
        answer = draw(st.sampled_from(["full", "full", "full", "missing", "empty"]))
        if answer == "missing":
            continue
        ranked = [] if answer == "empty" else draw(st.lists(st.sampled_from(DOCS), max_size=20, unique=True))
        run[qid] = {d: draw(st.integers(0, 16)) / 4.0 for d in ranked}
    return qrels, run


def _ours(qrels, run, names):
    ev = evaluate(Run.from_dict(run), Qrels(qrels), names, no_relevant="zero")
    return {m: dict(zip(ev.query_ids, ev.column(m).tolist(), strict=True)) for m in ev.metrics}


def _in_our_order(run):
    """The run with distinct scores that spell retbench's ranking (for references that keep input order)."""
    ranked = Run.from_dict(run)
    return {q: {d: float(len(ranked.docs(q)) - i) for i, d in enumerate(ranked.docs(q))} for q in ranked.query_ids}


def _reference(provider, measures, qrels, run):
    parsed = [ir_measures.parse_measure(m) for m in measures]
    out: dict[str, dict[str, float]] = {m: {} for m in measures}
    for metric in ir_measures.providers.registry[provider].evaluator(parsed, qrels).iter_calc(run):
        out[measures[parsed.index(metric.measure)]][metric.query_id] = float(metric.value)
    return out


GDEVAL = [(f"ERR@{k}", f"err@{k}") for k in (1, 5, 10, 20)] + [
    (f"nDCG(dcg='exp-log2')@{k}", f"ndcg_exp@{k}") for k in (1, 5, 10, 20)
]


def _check_gdeval(qrels, run):
    theirs = _reference("gdeval", [t for t, _ in GDEVAL], qrels, run)
    ours = _ours(qrels, run, [o for _, o in GDEVAL])
    for t, o in GDEVAL:
        assert theirs[t], t
        for qid, value in theirs[t].items():
            assert ours[o][qid] == pytest.approx(value, abs=5e-6 + 1e-12), (o, qid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=graded_qrels_and_run())
def test_err_and_exponential_ndcg_match_gdeval_at_its_printed_precision(data):
    _check_gdeval(*data)


def test_err_refuses_grades_above_gdevals_scale():
    from retbench.errors import ConfigError

    with pytest.raises(ConfigError, match="ERR takes grades 0 to 4"):
        _ours({"1": {"a": 5}}, {"1": {"a": 1.0}}, ["err@5"])


CWL = [
    ("RBP(p=0.5,rel=1)", "rbp(p=0.5,rel=1)"),
    ("RBP(p=0.8,rel=2)", "rbp(p=0.8,rel=2)"),
    ("RBP(p=0.95,rel=1)", "rbp(p=0.95,rel=1)"),
    ("INST(max_rel=4)", "INST(max_rel=4)"),
    ("INST(T=2.5,min_rel=1,max_rel=3)", "INST(T=2.5,min_rel=1,max_rel=3)"),
    ("INSQ(max_rel=1)", "INSQ(max_rel=1)"),
    ("INSQ(T=3,max_rel=4)", "INSQ(T=3,max_rel=4)"),
    ("BPM(T=1,max_rel=4)@3", "BPM(T=1,max_rel=4)@3"),
    ("BPM(T=2,max_rel=2)@10", "BPM(T=2,max_rel=2)@10"),
    ("SDCG(max_rel=4)@5", "SDCG(max_rel=4)@5"),
    ("SDCG(min_rel=1,max_rel=2)@10", "SDCG(min_rel=1,max_rel=2)@10"),
    # the NERR forms of ERR, as ir_measures' own cwl_eval tests spell them, and with other parameters
    ("NERR8(max_rel=1)@10", "NERR8(max_rel=1)@10"),
    ("NERR8(min_rel=1,max_rel=4)@3", "NERR8(min_rel=1,max_rel=4)@3"),
    ("NERR9(max_rel=1)@10", "NERR9(max_rel=1)@10"),
    ("NERR9(max_rel=4)@5", "NERR9(max_rel=4)@5"),
    ("NERR10(p=0.8, max_rel=1)", "NERR10(p=0.8,max_rel=1)"),
    ("NERR10(max_rel=4)", "NERR10(max_rel=4)"),
    ("NERR11(T=2.0, max_rel=1)", "NERR11(T=2,max_rel=1)"),
    ("NERR11(max_rel=3)", "NERR11(max_rel=3)"),
]


def _check_cwl(qrels, run):
    theirs = _reference("cwl_eval", [t for t, _ in CWL], qrels, _in_our_order(run))
    ours = _ours(qrels, run, [t.replace(" ", "") for t, _ in CWL])  # ir_measures' own spellings
    assert len(ours) == len(CWL)
    for (t, _), name in zip(CWL, ours, strict=True):  # evaluate keeps the order the metrics were asked in
        assert theirs[t], t
        for qid, value in theirs[t].items():
            assert ours[name][qid] == pytest.approx(value, abs=1e-9), (name, qid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=graded_qrels_and_run())
def test_rbp_and_the_cwl_measures_match_cwl_eval(data):
    _check_cwl(*data)


# -- what ir_measures does not reach: cwl_eval's own classes --------------------------------------------
def _cwl_rbp(p, gains, depth):
    """cwl_eval's RBP and its residual for one ranking (`gains`: NaN where unjudged), over `depth` ranks."""
    from cwl.ruler.measures.cwl_rbp import RBPCWLMetric
    from cwl.ruler.ranking import Ranking

    metric = RBPCWLMetric(p)
    metric.residuals = True
    value = metric.measure(Ranking("q", np.asarray(gains, dtype=float), np.full(len(gains), np.nan), max_n=depth))
    return float(value), float(metric.residual_expected_utility)


def _judged_gains(qrels, run, graded):
    """Per query in the run, the gain of each ranked doc in retbench's order (NaN: unjudged or negative)."""
    ranked = Run.from_dict(run)
    out = {}
    for q in ranked.query_ids:
        judged = qrels.get(q, {})
        top = max([g for g in judged.values()] + [1])
        out[q] = [
            np.nan if judged.get(d, -1) < 0 else (judged[d] / top if graded else float(judged[d] >= 1))
            for d in ranked.docs(q)
        ]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=graded_qrels_and_run(), p=st.sampled_from([0.5, 0.8, 0.9, 0.99]))
def test_rbp_residual_and_graded_rbp_match_cwl_eval_on_an_unbounded_ranking(data, p):
    """cwl_eval scores unjudged documents as 0 (RBP) and as fully relevant (its best case); the residual is the
    difference. Its depth is set far past the ranking (p^20000 is below 1e-80), so its tail is the
    infinite one of Moffat and Zobel. Graded gains are trec_eval 10.0's (grade / the query's top grade
    when that is above 1, m_rbp.c), given to cwl_eval as gains."""
    qrels, run = data
    ours = _ours(qrels, run, [f"rbp(p={p})", f"rbp_resid(p={p})"])
    graded, resid = ours.values()
    gains = _judged_gains(qrels, run, graded=True)
    for q, g in gains.items():
        if q not in qrels:
            continue
        value, residual = _cwl_rbp(p, g, 20_000)
        assert graded[q] == pytest.approx(value, abs=1e-9), q
        if np.isnan(g).any():
            assert resid[q] == pytest.approx(residual, abs=1e-9), q
        else:  # trec_eval 10.0's rbp_resid is 0 when nothing ranked is unjudged; cwl_eval still counts the tail
            assert resid[q] == 0.0 and residual == pytest.approx(p ** len(g), abs=1e-9), q


def test_trec_eval_rbp_names_and_parameters_read_as_trec_eval_10_defines_them():
    qrels = {"1": {"a": 2, "b": 0, "c": 1, "d": 3, "e": -1}, "2": {"x": 1, "y": 0}}
    run = {"1": {"a": 1.0, "b": 0.5, "c": 0.5, "e": 0.5, "f": 0.25, "d": 0.0}, "2": {"y": 2.0, "x": 1.0}}
    ev = evaluate(Run.from_dict(run), Qrels(qrels), ["rbp", "rbp_resid", "rbp.p=0.8", "rbp_resid.p=0.8"])
    assert ev.metrics == ["rbp", "rbp_resid", "rbp(p=0.8)", "rbp_resid(p=0.8)"]
    # query 1 is ranked a e c b f d (ties by doc id descending); gains are grade / 3; e (grade -1) and f are
    # unjudged. trec_eval 10.0 -q prints rbp 0.1527, rbp_resid 0.6871, rbp_p=0.8 0.2415, rbp_resid_p=0.8 0.5041
    for p, col, printed in ((0.9, 0, (0.1527, 0.6871)), (0.8, 2, (0.2415, 0.5041))):
        want = (1 - p) * (2 / 3 + (1 / 3) * p**2 + 1.0 * p**5)
        assert ev.values[0, col] == pytest.approx(want, abs=1e-12) and round(want, 4) == printed[0]
        resid = p**6 + (1 - p) * (p + p**4)
        assert ev.values[0, col + 1] == pytest.approx(resid, abs=1e-12) and round(resid, 4) == printed[1]
        assert ev.values[1, col] == pytest.approx((1 - p) * p, abs=1e-12)  # top grade 1: gains as they are
        assert ev.values[1, col + 1] == 0.0  # every ranked document judged


def test_cwl_measures_ask_for_the_top_of_the_grade_scale():
    from retbench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"INST needs max_rel.*INST\(max_rel=3\)"):
        _ours({"1": {"a": 1}}, {"1": {"a": 1.0}}, ["INST"])


# -- a real run ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bm25(scifact):
    return scifact_bm25(scifact)


def test_gdeval_measures_match_on_a_scifact_bm25_run(bm25):
    _check_gdeval(*bm25)


def test_cwl_measures_match_on_a_scifact_bm25_run(bm25):
    _check_cwl(*bm25)
    qrels, run = bm25
    ours = _ours(qrels, run, ["rbp(p=0.8,rel=1)", "rbp_resid(p=0.8)"])
    # about one relevant document a query, so RBP is at most 1 - p = 0.2: a sane run, not a degenerate one
    assert 0.1 < np.mean(list(ours["rbp(p=0.8,rel=1)"].values())) < 0.2
    gains = _judged_gains(qrels, run, graded=False)
    for q in list(gains)[:60]:
        _, residual = _cwl_rbp(0.8, gains[q], 20_000)
        assert ours["rbp_resid(p=0.8)"][q] == pytest.approx(residual, abs=1e-9), q
