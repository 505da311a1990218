"""Metric names (retbench, trec_eval, seed aliases), parameters, and metrics added by users."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from repo_paths import METRIC_PLUGIN as PLUGIN_DIR
from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics import catalog, registry
from retbench.metrics.catalog import register
from retbench.metrics.registry import parse_metric, parse_metrics


@pytest.mark.parametrize(
    ("spec", "canonical", "trec"),
    [
        ("ndcg@10", "ndcg@10", "ndcg_cut_10"),
        ("NDCG@10", "ndcg@10", "ndcg_cut_10"),
        ("ndcg_cut_10", "ndcg@10", "ndcg_cut_10"),
        ("ndcg_cut.10", "ndcg@10", "ndcg_cut_10"),
        ("ndcg", "ndcg", "ndcg"),
        ("P@5", "P@5", "P_5"),
        ("p@5", "P@5", "P_5"),
        ("P_5", "P@5", "P_5"),
        ("precision@5", "P@5", "P_5"),
        ("recall@100", "recall@100", "recall_100"),
        ("R@100", "recall@100", "recall_100"),
        ("recall_100", "recall@100", "recall_100"),
        ("success_5", "hit@5", "success_5"),
        ("hit@5", "hit@5", "success_5"),
        ("mrr", "mrr", "recip_rank"),
        ("recip_rank", "mrr", "recip_rank"),
        ("mrr@10", "mrr@10", None),
        ("map", "map", "map"),
        ("map_cut_100", "map@100", "map_cut_100"),
        ("Rprec", "rprec", "Rprec"),
        ("rprec", "rprec", "Rprec"),
        ("f1@5", "f1@5", None),
        ("recall@5(rel=2)", "recall@5(rel=2)", None),
        ("P(rel=2)@5", "P@5(rel=2)", None),
        ("hybrid@10", "hybrid@10", None),
        ("hybrid@10(gamma=2, alpha=0.5)", "hybrid@10(gamma=2)", None),
        ("retrieval-hit-at-k", "hit@5", "success_5"),
        ("retrieval-recall-at-k", "recall@5", "recall_5"),
        ("retrieval-mrr", "mrr", "recip_rank"),
        ("retrieval-ndcg-at-k", "ndcg@5", "ndcg_cut_5"),
        ("answer-containment-at-k", "containment@5", None),
        ("recall(k=20)", "recall@20", "recall_20"),
    ],
)
def test_names(spec, canonical, trec):
    parsed = parse_metric(spec, default_k=5)
    assert parsed.name == canonical
    assert parsed.trec_name == trec


def test_trec_eval_comma_lists_expand():
    assert [m.name for m in parse_metrics(["P.5,10", "ndcg_cut.10,20", "P_5"])] == ["P@5", "P@10", "ndcg@10", "ndcg@20"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ndgc@10", r"unknown metric 'ndgc@10'; valid names: hit@k, recall@k, P@k"),
        ("rprec@5", "takes no cutoff"),
        ("recall@5(alpha=1)", "unknown parameter"),
        ("recall@5(rel=0)", "relevance level"),
        ("recall@5(rel)", "name=number"),
        ("ndcg@10(rel=2)", "unknown parameter"),  # linear nDCG ignores relevance levels
        ("recall@0", "cutoff must be >= 1"),
    ],
)
def test_bad_names_are_config_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_metric(spec)


class TopGrade:
    """A user metric: the highest grade found in the top k (graded 'best hit')."""

    name = "top_grade"
    cutoff = "k"
    binary = False

    def compute(self, ctx, k, params):
        gm = ctx.gm
        mask = gm.hit_ranks < k[gm.hit_rows]
        out = np.zeros(len(gm))
        np.maximum.at(out, gm.hit_rows[mask], gm.hit_grades[mask])
        return out


def test_register_adds_a_metric_like_a_builtin():
    register(TopGrade())
    try:
        run = Run.from_dict({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 1.0}})
        ev = evaluate(run, Qrels({"q1": {"b": 1, "c": 3}, "q2": {"y": 2}}), ["top_grade@2", "top_grade@3"])
        assert ev.column("top_grade@2").tolist() == [1.0, 0.0]
        assert ev.column("top_grade@3").tolist() == [3.0, 0.0]
        assert "top_grade@k" in catalog.valid_names()
        with pytest.raises(ConfigError, match="already registered"):
            register(TopGrade())
    finally:
        catalog.unregister("top_grade")
    with pytest.raises(ConfigError, match="unknown metric"):
        parse_metric("top_grade@2")


def test_register_rejects_objects_that_are_not_metrics():
    class NoCompute:
        name = "broken"
        cutoff = "k"

    with pytest.raises(ConfigError, match="compute"):
        register(NoCompute())
    with pytest.raises(ConfigError, match="name"):
        register(type("Bad", (), {"name": "has space", "cutoff": "k", "compute": lambda *a: None})())
    with pytest.raises(ConfigError, match="already taken"):
        register(type("Dup", (), {"name": "other", "aliases": ("ndcg",), "cutoff": "k", "compute": lambda *a: None})())


def test_entry_point_plugin_is_found(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    catalog.reload_plugins()
    try:
        assert type(catalog.available()["labelled"]).__module__ == "example_metric"  # the plugin's row, not a built-in
        run = Run.from_dict({"q": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.5}})
        ev = evaluate(run, Qrels({"q": {"a": 1, "c": 0}}), ["labelled@4", "labelled@1"])
        assert ev.column("labelled@4").tolist() == [0.5] and ev.column("labelled@1").tolist() == [1.0]
    finally:
        catalog.unregister("labelled")
        sys.modules.pop("example_metric", None)


def test_adr_gate_spellings_parse_everywhere() -> None:
    """Seed 000 names gates `retrieval_recall_at_5` / `retrieval_mrr`: the registry reads them for eval, run and gate alike."""
    from retbench.metrics.registry import parse_metric

    assert parse_metric("retrieval_recall_at_5").name == "recall@5"
    assert parse_metric("retrieval_mrr").name == "mrr"
    assert parse_metric("retrieval_ndcg_at_10").name == "ndcg@10"
    assert parse_metric("retrieval_hit_at_k", default_k=3).name == "hit@3"
    assert parse_metric("answer_containment_at_3").name == "containment@3"


@pytest.mark.parametrize(
    ("name", "lower"),
    [
        ("holes@10", True),
        ("unj@10", True),
        ("unj_10", True),
        ("rbp_resid", True),
        ("rbp_resid(p=0.8)", True),
        ("scope_miss_rate", True),
        ("hallucination_rate", True),
        ("negative_match", True),
        ("judged@10", False),
        ("rbp", False),
        ("ndcg@10", False),
        ("recall@5", False),
    ],
)
def test_measures_of_unknowns_and_errors_are_lower_is_better(name, lower):
    """Gates cap them, tune minimises them and rankings put their smallest first."""
    assert registry.lower_is_better(name) is lower


def test_every_row_whose_meaning_is_a_share_prints_as_a_percentage():
    from retbench.report import fmt  # the rule is the printed unit, so check it where reports read it

    shares = [n for n, m in catalog.available().items() if str(getattr(m, "meaning", "")).startswith("share of")]
    assert {"scope_miss_rate", "unj", "set_P", "set_recall", "faithfulness", "holes", "judged"} <= set(shares)
    assert [n for n in shares if not fmt.is_share(n)] == []
    assert fmt.value("set_P", 0.25) == "25.0%" and fmt.value("mrr", 0.25) == "0.250"


def test_rbp_residual_is_zero_for_a_fully_judged_short_ranking_as_its_meaning_says():
    """trec_eval 10.0's rbp_resid: the tail past a fully judged ranking is left out; one hole brings it back."""
    qrels = Qrels({"q": {"a": 1, "b": 0}})
    judged = evaluate(Run.from_dict({"q": {"a": 2.0, "b": 1.0}}), qrels, ["rbp_resid"])
    holed = evaluate(Run.from_dict({"q": {"a": 2.0, "x": 1.0}}), qrels, ["rbp_resid"])
    assert judged.values[0, 0] == 0.0
    assert holed.values[0, 0] == pytest.approx(1 - 0.1 * 0.9**0)  # 1 - (1 - p) sum_{judged i} p^(i-1)
    meaning = str(getattr(registry.lookup("rbp_resid"), "meaning", ""))
    assert "past the end" not in meaning and "0 when every returned result is labelled" in meaning
