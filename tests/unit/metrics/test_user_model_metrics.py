"""ERR, RBP and its residual, the C/W/L measures and the names users write for them, on worked examples.

Agreement with the reference implementations (gdeval, cwl_eval, trec_eval 10.0) is the parity tier's job
(tests/parity/metrics/test_ir_measures_families.py); these examples pin the formulas by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics import parse_metric
from retbench.metrics.names import rewrite


def _values(qrels, run, names):
    ev = evaluate(Run.from_dict(run), Qrels(qrels), names, no_relevant="zero")
    return dict(zip(ev.metrics, ev.values[0].tolist(), strict=True))


def test_err_cascades_down_the_ranking_with_gdevals_stopping_probabilities():
    # grades 3, 0, 1 at ranks 1-3: R = 7/16, 0, 1/16
    got = _values({"q": {"a": 3, "b": 0, "c": 1}}, {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, ["err@1", "err@3", "err"])
    r1, r3 = 7 / 16, 1 / 16
    assert got["err@1"] == pytest.approx(r1)
    assert got["err@3"] == pytest.approx(r1 + (1 - r1) * r3 / 3) == pytest.approx(got["err"])


def test_binary_rbp_weighs_rank_i_by_p_to_the_i_minus_one_and_the_residual_counts_holes_and_tail():
    qrels = {"q": {"a": 1, "b": 0, "c": 2}}
    run = {"q": {"a": 4.0, "x": 3.0, "c": 2.0, "b": 1.0}}  # x is unjudged
    got = _values(qrels, run, ["rbp(p=0.5,rel=1)", "rbp(p=0.5,rel=2)", "rbp_resid(p=0.5)"])
    assert got["rbp(p=0.5,rel=1)"] == pytest.approx(0.5 * (1 + 0.25))
    assert got["rbp(p=0.5,rel=2)"] == pytest.approx(0.5 * 0.25)
    assert got["rbp_resid(p=0.5)"] == pytest.approx(0.5 * 0.5 + 0.5**4)  # x at rank 2, then the tail past rank 4


def test_graded_rbp_scales_grades_by_the_querys_top_grade_as_trec_eval_10_does():
    got = _values({"q": {"a": 2, "c": 4}}, {"q": {"a": 2.0, "c": 1.0}}, ["rbp(p=0.5)"])
    assert got["rbp(p=0.5)"] == pytest.approx(0.5 * (2 / 4 + 1.0 * 0.5))


def test_sdcg_is_dcg_over_k_fully_relevant_documents_and_insq_weights_do_not_depend_on_gains():
    qrels = {"q": {"a": 2, "b": 1}}
    run = {"q": {"b": 2.0, "z": 1.5, "a": 1.0}}
    got = _values(qrels, run, ["SDCG(max_rel=2)@3", "INSQ(max_rel=2)"])
    dcg = 0.5 / np.log2(2) + 1.0 / np.log2(4)
    assert got["SDCG@3(max_rel=2)"] == pytest.approx(dcg / sum(1 / np.log2(i + 1) for i in (1, 2, 3)))
    reach = np.cumprod([1.0] + [((i + 1) / (i + 2)) ** 2 for i in range(1, 1000)])
    assert got["INSQ(max_rel=2)"] == pytest.approx((0.5 * reach[0] + 1.0 * reach[2]) / reach.sum())


def test_bpm_reads_until_the_gain_it_wants_or_k_documents():
    # BPM is the gain per document read: W is uniform over the ranks the user reads, so the stopping rank shows
    qrels = {"q": {"a": 1, "b": 0, "c": 1, "d": 0, "e": 1}}
    run = {"q": {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0}}  # relevant at ranks 1, 3 and 5
    got = _values(qrels, run, ["BPM(T=2,max_rel=1)@10", "BPM(T=5,max_rel=1)@2", "BPM(T=5,max_rel=1)@10"])
    assert got["BPM@10(T=2,max_rel=1)"] == pytest.approx(2 / 3)  # two relevant documents read by rank 3
    assert got["BPM@2(T=5,max_rel=1)"] == pytest.approx(1 / 2)  # k = 2 documents read, one relevant
    assert got["BPM@10(T=5,max_rel=1)"] == pytest.approx(3 / 10)  # never reaches T: reads all 10 ranks (k)


def test_bpm_accumulates_graded_gains_scaled_by_max_rel():
    # max_rel=2: grade 2 gains 1, grade 1 gains 0.5; T=2 is reached at rank 5 (1 + 0 + 0.5 + 0 + 1)
    qrels = {"q": {"a": 2, "c": 1, "d": 0, "e": 2}}
    run = {"q": {"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0, "f": 0.5}}  # b and f unjudged
    got = _values(qrels, run, ["BPM(T=2,max_rel=2)@10"])
    assert got["BPM@10(T=2,max_rel=2)"] == pytest.approx(2.5 / 5)


@pytest.mark.parametrize(
    ("written", "parsed"),
    [
        ("ERR@20", "err@20"),
        ("RBP", "rbp(p=0.8)"),
        ("RBP(p=0.9,rel=2)", "rbp(rel=2)"),
        ("rbp", "rbp"),
        ("rbp.p=0.95", "rbp(p=0.95)"),
        ("rbp_resid_p=0.8", "rbp_resid(p=0.8)"),
        ("nDCG(dcg='exp-log2')@10", "ndcg_exp@10"),
        ("nDCG@10", "ndcg@10"),
        ("P(rel=2)@5", "P@5(rel=2)"),
        ("AP", "map"),
        ("RR", "mrr"),
        ("R@100", "recall@100"),
        ("Success@10", "hit@10"),
        ("SDCG(dcg='log2',max_rel=3)@10", "SDCG@10(max_rel=3)"),
        ("INST(T=2,max_rel=3)", "INST(T=2,max_rel=3)"),
    ],
)
def test_ir_measures_and_trec_eval_spellings_parse_to_the_same_measure(written, parsed):
    spec = parse_metric(written)
    assert spec.name == parsed
    assert parse_metric(spec.name).name == parsed  # a canonical name reads back as itself


def test_ir_measures_names_of_trec_eval_measures_become_trec_eval_names():
    assert [rewrite(n) for n in ("Bpref", "IPrec@0.1", "NumRet(rel=1)", "NumRet", "SetP", "SetAP")] == [
        "bpref",
        "iprec_at_recall_0.10",
        "num_rel_ret",
        "num_ret",
        "set_P",
        "set_map",
    ]


def test_a_cwl_measure_without_the_top_of_the_grade_scale_is_refused_when_parsed():
    with pytest.raises(ConfigError, match=r"BPM needs max_rel.*BPM\(max_rel=3\)@10"):
        parse_metric("BPM(T=2)@10")
    with pytest.raises(ConfigError, match="judged_only"):
        parse_metric("nDCG(judged_only=True)@10")
