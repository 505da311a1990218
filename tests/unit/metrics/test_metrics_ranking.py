"""Metric formulas on hand-made cases whose answers are worked out in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retbench.data import Corpus, Qrels, Run, Sample
from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.metrics.ranking import log_rank_score

LOG2 = math.log2


def one(ranking: list[str], judged: dict[str, int], metrics: list[str], **kw) -> dict[str, float]:
    """Evaluate a single query ranked in the given order (scores n, n-1, ...)."""
    run = Run.from_dict({"q": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}})
    ev = evaluate(run, Qrels({"q": judged}), metrics, **kw)
    return ev.means()


def test_seed_001_worked_example():
    # Rel = {doc-3, doc-9}, k = 5, ranking [doc-7, doc-3, doc-1, doc-9, doc-2]
    got = one(
        ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"],
        {"doc-3": 1, "doc-9": 1},
        ["retrieval-hit-at-k", "retrieval-recall-at-k", "retrieval-mrr", "retrieval-ndcg-at-k"],
    )
    assert got["hit@5"] == 1.0
    assert got["recall@5"] == 1.0
    assert got["mrr"] == 0.5
    # (1/log2 3 + 1/log2 5) / (1 + 1/log2 3) = 1.0616 / 1.6309
    assert got["ndcg@5"] == pytest.approx((1 / LOG2(3) + 1 / LOG2(5)) / (1 + 1 / LOG2(3)))
    assert round(got["ndcg@5"], 2) == 0.65


def test_precision_divides_by_k_even_when_fewer_were_returned():
    got = one(["a", "b"], {"a": 1}, ["P@10", "P@1", "f1@10"])
    assert got["P@10"] == 0.1 and got["P@1"] == 1.0
    assert got["f1@10"] == pytest.approx(2 * 0.1 * 1.0 / 1.1)


def test_recall_map_and_rprec_divide_by_all_relevant_docs():
    # relevant: a (rank 1), c (rank 3), z (never retrieved) -> R = 3
    got = one(["a", "b", "c", "d"], {"a": 1, "c": 2, "z": 1, "b": 0}, ["recall@2", "recall@4", "map", "rprec", "map@2"])
    assert got["recall@2"] == pytest.approx(1 / 3)
    assert got["recall@4"] == pytest.approx(2 / 3)
    assert got["map"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert got["map@2"] == pytest.approx((1 / 1) / 3)  # trec_eval map_cut: still divided by R
    assert got["rprec"] == pytest.approx(2 / 3)  # top R = 3 docs hold a and c


def test_mrr_is_uncut_unless_given_a_cutoff():
    got = one(["a", "b", "c", "d", "e", "f"], {"f": 1}, ["mrr", "mrr@5", "hit@5", "hit@6"])
    assert got["mrr"] == pytest.approx(1 / 6)
    assert got["mrr@5"] == 0.0
    assert got["hit@5"] == 0.0 and got["hit@6"] == 1.0


def test_relevance_level_applies_to_binary_measures_only():
    ranking, judged = ["a", "b", "c"], {"a": 1, "b": 2, "c": 0}
    lvl1 = one(ranking, judged, ["recall@3", "mrr", "ndcg@3", "P@3"])
    lvl2 = one(ranking, judged, ["recall@3", "mrr", "ndcg@3", "P@3"], relevance_level=2)
    assert lvl1["recall@3"] == 1.0 and lvl2["recall@3"] == 1.0  # R shrinks to {b}
    assert lvl1["mrr"] == 1.0 and lvl2["mrr"] == 0.5
    assert lvl1["P@3"] == pytest.approx(2 / 3) and lvl2["P@3"] == pytest.approx(1 / 3)
    assert lvl1["ndcg@3"] == lvl2["ndcg@3"]  # linear-gain nDCG uses the grades themselves
    # and a per-metric level overrides the evaluation's
    assert one(ranking, judged, ["mrr(rel=2)"])["mrr(rel=2)"] == 0.5


def test_ndcg_linear_and_exponential_gains():
    # grades by rank: [1, 3, 0]; ideal [3, 1]
    got = one(["a", "b", "c"], {"a": 1, "b": 3}, ["ndcg@3", "ndcg_exp@3", "ndcg"])
    dcg = 1 + 3 / LOG2(3)
    idcg = 3 + 1 / LOG2(3)
    assert got["ndcg@3"] == pytest.approx(dcg / idcg)
    assert got["ndcg"] == pytest.approx(dcg / idcg)
    dcg_e = 1 + 7 / LOG2(3)
    idcg_e = 7 + 1 / LOG2(3)
    assert got["ndcg_exp@3"] == pytest.approx(dcg_e / idcg_e)


def test_ndcg_ideal_counts_relevant_docs_that_were_never_retrieved():
    got = one(["a"], {"a": 1, "z": 1}, ["ndcg@5"])
    assert got["ndcg@5"] == pytest.approx(1 / (1 + 1 / LOG2(3)))


def test_hybrid_log_rank_score_from_seed_004():
    # N = 5 returned, relevant at ranks 2 and 4 of R = 2; gamma = 1: score(r) = 1 - ln(r) / ln(5)
    ranking = ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"]
    judged = {"doc-3": 1, "doc-9": 1}
    got = one(ranking, judged, ["hybrid@5", "hybrid@5(alpha=0,gamma=3)", "hybrid@5(alpha=1)"])
    quality = ((1 - math.log(2) / math.log(5)) + (1 - math.log(4) / math.log(5))) / 2
    assert got["hybrid@5"] == pytest.approx(0.5 * 1.0 + 0.5 * quality)
    steep = ((1 - math.log(1 + 3 * 1) / math.log(1 + 3 * 4)) + (1 - math.log(1 + 3 * 3) / math.log(1 + 3 * 4))) / 2
    assert got["hybrid@5(alpha=0,gamma=3)"] == pytest.approx(steep)
    assert got["hybrid@5(alpha=1)"] == 1.0  # pure recall
    # the cutoff limits N: top 2 = [doc-7, doc-3], doc-3 is last of N = 2 -> quality 0, recall 1/2
    assert one(ranking, judged, ["hybrid@2"])["hybrid@2"] == pytest.approx(0.5 * 0.5)


def test_log_rank_score_edges():
    assert log_rank_score(np.array([1]), np.array([1]))[0] == 1.0  # a single result at rank 1
    assert log_rank_score(np.array([1, 10]), np.array([10, 10])).tolist() == [1.0, 0.0]
    with pytest.raises(ValueError):
        log_rank_score(np.array([1]), np.array([2]), gamma=0.0)


def _golden_run():
    run = Run.from_dict(
        {
            "s1": {"c1": 3.0, "c2": 2.0, "c3": 1.0},
            "s2": {"c4": 3.0, "c1": 2.0},
        }
    )
    samples = [
        Sample("s1", "q", {"c2": 1, "c3": 1}, support_groups=[["c2"], ["c3", "c9"]], answer="Thirty  DAYS"),
        Sample("s2", "q", {"c1": 1, "c5": 1}, support_groups=[["c1"], ["c5"]], answer="refund"),
    ]
    texts = {"c1": "Returns: a refund is issued", "c2": "Our window is thirty\ndays long.", "c3": "x", "c4": "y"}
    return run, samples, texts


def test_recall_any_and_all_over_support_groups():
    run, samples, _ = _golden_run()
    qrels = Qrels({s.id: s.expected for s in samples})
    ev = evaluate(run, qrels, ["recall_any@2", "recall_all@2", "recall_all@3"], samples=samples)
    # s1: top 2 = c1, c2 -> group [c2] hit, group [c3, c9] missed; top 3 covers both
    # s2: top 2 = c4, c1 -> [c1] hit, [c5] never retrieved
    assert ev.column("recall_any@2").tolist() == [1.0, 1.0]
    assert ev.column("recall_all@2").tolist() == [0.0, 0.0]
    assert ev.column("recall_all@3").tolist() == [1.0, 0.0]


def test_recall_all_without_groups_needs_every_relevant_doc():
    got = one(["a", "b", "c"], {"a": 1, "c": 1, "d": 0}, ["recall_all@2", "recall_all@3", "recall_any@1"])
    assert got == {"recall_all@2": 0.0, "recall_all@3": 1.0, "recall_any@1": 1.0}


def test_answer_containment_normalizes_case_and_whitespace():
    run, samples, texts = _golden_run()
    qrels = Qrels({s.id: s.expected for s in samples})
    ev = evaluate(run, qrels, ["containment@1", "answer-containment-at-k"], samples=samples, texts=texts, default_k=2)
    # s1: "thirty days" is in c2 (rank 2), not in c1; s2: "refund" is in c1 (rank 2)
    assert ev.column("containment@1").tolist() == [0.0, 0.0]
    assert ev.column("containment@2").tolist() == [1.0, 1.0]


def test_answer_containment_reads_a_corpus():
    run, samples, _ = _golden_run()
    corpus = Corpus(["c1", "c2"], ["a refund is issued", "window of thirty days"], ["Returns", ""])
    ev = evaluate(run, Qrels({s.id: s.expected for s in samples}), ["containment@3"], samples=samples, texts=corpus)
    assert ev.column("containment@3").tolist() == [1.0, 1.0]


def test_answer_containment_without_an_expected_answer_is_an_input_error():
    run, samples, texts = _golden_run()
    samples[1].answer = None
    with pytest.raises(InputError, match="s2"):
        evaluate(run, Qrels({s.id: s.expected for s in samples}), ["containment@3"], samples=samples, texts=texts)


def test_per_sample_k_wins_over_the_metric_k_and_default_k():
    run = Run.from_dict({"a": {"x": 3.0, "y": 2.0, "z": 1.0}, "b": {"x": 3.0, "y": 2.0, "z": 1.0}})
    qrels = Qrels({"a": {"z": 1}, "b": {"z": 1}})
    samples = [Sample("a", "q", {"z": 1}, metadata={"k": 3}), Sample("b", "q", {"z": 1})]
    ev = evaluate(run, qrels, ["hit@1", "hit"], samples=samples, default_k=2)
    assert ev.metrics == ["hit@1", "hit@2"]
    assert ev.column("hit@1").tolist() == [1.0, 0.0]  # a: its own k = 3; b: the metric's k = 1
    assert ev.column("hit@2").tolist() == [1.0, 0.0]  # b: default_k = 2
    ev3 = evaluate(run, qrels, ["hit"], default_k=3)
    assert ev3.column("hit@3").tolist() == [1.0, 1.0]
