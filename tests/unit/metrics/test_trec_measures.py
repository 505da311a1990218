"""trec_eval's names, parameters, nicknames and aggregates as the registry rows declare them; unj (trec_eval
10.0, which pytrec_eval lacks) by hand; -J and -M as settings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics.catalog import catalog
from retbench.metrics.registry import parse_metric, parse_metrics

QRELS = {"q1": {"a": 2, "b": 0, "c": 1, "n": -1}, "q2": {"x": 1, "y": 0}, "q3": {"z": 1}}
RUN = {"q1": {"u1": 9.0, "a": 8.0, "b": 7.0, "n": 6.0, "u2": 5.0, "c": 4.0}, "q2": {"y": 2.0, "u": 1.0}}


def _ev(metrics, **kw):
    return evaluate(Run.from_dict(RUN), Qrels(QRELS), metrics, no_relevant="zero", **kw)


def test_trec_eval_spellings_name_the_same_measures():
    names = lambda specs: [(s.name, s.trec_name) for s in parse_metrics(specs)]  # noqa: E731
    assert names(["P.5,10"]) == [("P@5", "P_5"), ("P@10", "P_10")]
    assert names(["iprec_at_recall.0.1"]) == [("iprec_at_recall(recall=0.1)", "iprec_at_recall_0.10")]
    assert names(["set_F.0.5"]) == [("set_F(beta=0.5)", "set_F_0.5")]
    assert names(["utility.2,-1,0,0"]) == [("utility(a=2)", "utility_2,-1,0,0")]
    assert names(["11pt_avg", "Rprec_mult_0.20", "unj_5"]) == [
        ("iprec_11pt", "11pt_avg"),
        ("rprec_mult(mult=0.2)", "Rprec_mult_0.20"),
        ("unj@5", "unj_5"),
    ]
    assert len(parse_metrics(["ndcg_cut"])) == 9 and len(parse_metrics(["iprec_at_recall"])) == 11
    assert parse_metric("P").name == "P@5"  # a bare retbench name keeps its default cutoff
    with pytest.raises(ConfigError, match="takes 4 values"):
        parse_metrics(["utility.1,2"])


def test_a_cutoff_typed_after_a_dot_is_read_as_trec_evals_atol_reads_it():
    names = lambda specs: [s.trec_name for s in parse_metrics(specs)]  # noqa: E731
    assert names(["ndcg_cut.10,20,23.4"]) == ["ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert names(["P.7.9"]) == ["P_7"]
    for bad in ("ndcg_cut_23.4", "P.inf", "P.0.5"):  # a printed name is whole; inf is no cutoff; atol(".5") = 0
        with pytest.raises(ConfigError, match="cutoff"):
            parse_metrics([bad])


def test_nicknames_expand_to_trec_eval_families():
    official = [s.trec_name for s in parse_metrics(["official"])]
    assert official[:5] == ["num_q", "num_ret", "num_rel", "num_rel_ret", "map"]
    assert "bpref" in official and "P_1000" in official and "ndcg" not in official
    every = {s.trec_name for s in parse_metrics(["all_trec"])}
    assert {"infAP", "gm_bpref", "G", "binG", "Rndcg", "ndcg_rel", "set_F", "unj_20", "success_10"} <= every


def test_unj_counts_unjudged_and_negatively_judged_documents_over_k():
    ev = _ev(["unj@5", "unj@10"])
    # q1 top 5: u1 (no label), a, b, n (negative: in the pool, not judged), u2 -> 3 of 5; top 10: 3 of 10
    # q2: u unjudged -> 1/5, 1/10; q3 unanswered -> 0
    assert ev.column("unj@5").tolist() == [3 / 5, 1 / 5, 0.0]
    assert ev.column("unj@10").tolist() == [3 / 10, 1 / 10, 0.0]


def test_geometric_and_summed_aggregates_with_their_intervals():
    ev = _ev(["gm_map", "map", "num_rel", "num_ret", "num_q"])
    ap = ev.column("map")
    assert ev.mean("gm_map") == pytest.approx(math.exp(np.mean(np.log(np.maximum(ap, 1e-5)))))
    assert ev.mean("num_rel") == 4.0  # q1: a, c; q2: x; q3: z (unanswered keeps its relevant count)
    assert ev.mean("num_ret") == 8.0 and ev.mean("num_q") == 3.0
    agg = ev.aggregate(ci=True, n_boot=200)
    assert agg["gm_map"]["aggregate"] == "gmean" and agg["num_rel"]["aggregate"] == "sum"
    assert "aggregate" not in agg["map"]
    for m in ("gm_map", "num_rel", "num_ret"):
        assert agg[m]["ci_low"] <= agg[m]["mean"] <= agg[m]["ci_high"], m
    assert agg["num_q"]["ci_low"] == agg["num_q"]["ci_high"] == 3.0


def test_judged_only_and_max_docs_change_what_is_scored():
    plain, judged = _ev(["P@2", "num_ret"]), _ev(["P@2", "num_ret"], judged_only=True)
    assert plain.column("P@2")[0] == 0.5 and judged.column("P@2")[0] == 0.5  # u1 a | a b
    assert judged.column("num_ret").tolist() == [3.0, 1.0, 0.0]  # a b c; y
    cut = _ev(["num_ret", "recall@100"], max_docs=2)
    assert cut.column("num_ret").tolist() == [2.0, 2.0, 0.0]
    with pytest.raises(ConfigError, match="max_docs"):
        _ev(["map"], max_docs=0)


def test_every_trec_row_says_its_trec_eval_name_and_aggregate_in_the_catalog():
    rows = {r["name"]: r for r in catalog()}
    assert rows["gm_map"]["aggregate"] == "gmean" and rows["num_rel"]["aggregate"] == "sum"
    assert rows["iprec_at_recall"]["trec_eval"] == ["iprec_at_recall_recall"]
    assert rows["P"]["parameters"] == {"rel": 1}
    assert rows["iprec_11pt"]["trec_eval"] == ["11pt_avg"]
