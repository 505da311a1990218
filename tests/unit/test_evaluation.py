"""Counting rules of `evaluate` (who is in the denominator, and with what value) and aggregation."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Qrels, QueryStatus, Run, RunBuilder, Sample
from retbench.data.samples import groups_from_samples
from retbench.errors import ConfigError
from retbench.evaluation import Evaluation, evaluate

QRELS = Qrels(
    {
        "answered": {"a": 1, "b": 0},
        "unanswered": {"c": 1},
        "norel": {"d": 0},  # judged, nothing relevant
        "failed": {"e": 1},
    }
)


def _run() -> Run:
    b = RunBuilder("sys")
    b.add("answered", [("x", 2.0), ("a", 1.0)])
    b.add("norel", [("d", 1.0)])
    b.add("failed", [], status=QueryStatus.TIMEOUT, error="deadline exceeded")
    b.add("not-judged", [("a", 1.0)])
    return b.build()


def test_unanswered_and_failed_queries_count_as_zero_and_are_reported():
    ev = evaluate(_run(), QRELS, ["mrr", "recall@5"])
    assert ev.query_ids == ["answered", "unanswered", "failed"]  # qrels order; norel skipped
    assert ev.status == ["ok", "missing", "timeout"]
    assert ev.column("mrr").tolist() == [0.5, 0.0, 0.0]
    assert ev.mean("mrr") == pytest.approx(0.5 / 3)  # trec_eval -c: 3 counted queries
    assert ev.skipped == ["norel"]
    assert ev.unjudged == ["not-judged"]
    assert ev.status_counts()["missing"] == 1 and ev.status_counts()["timeout"] == 1


def test_a_failed_query_with_a_partial_ranking_is_still_zero():
    b = RunBuilder()
    b.add("answered", [("a", 1.0)], status=QueryStatus.ERROR)
    ev = evaluate(b.build(), Qrels({"answered": {"a": 1}}), ["mrr"])
    assert ev.status == ["error"] and ev.column("mrr").tolist() == [0.0]


@pytest.mark.parametrize(("policy", "counted", "value"), [("skip", 3, None), ("zero", 4, 0.0), ("one", 4, 1.0)])
def test_no_relevant_policy(policy, counted, value):
    ev = evaluate(_run(), QRELS, ["mrr", "ndcg@10"], no_relevant=policy)
    assert len(ev.query_ids) == counted
    if value is None:
        assert "norel" not in ev.query_ids and ev.skipped == ["norel"]
    else:
        row = ev.query_ids.index("norel")
        assert ev.values[row].tolist() == [value, value] and ev.skipped == []


def test_pytrec_eval_mode_counts_answered_queries_only_and_says_so():
    ev = evaluate(_run(), QRELS, ["mrr"], mode="pytrec_eval")
    # the query with nothing relevant is counted, as pytrec_eval returns it (0) and BEIR averages it
    assert ev.query_ids == ["answered", "norel"] and ev.no_relevant == "zero" and not ev.skipped
    assert sorted(ev.excluded) == ["failed", "unanswered"]
    assert ev.mean("mrr") == (0.5 + 0.0) / 2
    assert "answered queries only" in ev.label
    assert ev.to_dict()["mode_label"] == ev.label


def test_an_empty_ranking_is_an_answer():
    run = Run.from_dict({"q": {}})
    ev = evaluate(run, Qrels({"q": {"a": 1}}), ["mrr"], mode="pytrec_eval")
    assert ev.status == ["empty"] and ev.query_ids == ["q"] and ev.mean("mrr") == 0.0


def test_duplicates_are_reported():
    run = Run.from_dict({"q": [("a", 1.0), ("a", 3.0), ("b", 2.0)]})
    ev = evaluate(run, Qrels({"q": {"a": 1}}), ["mrr"])
    assert ev.n_duplicates == 1
    assert ev.mean("mrr") == 0.5  # the first "a" (score 1.0) is kept: rank 2


def test_scores_are_float64_not_float32():
    # equal in float32 (pytrec_eval would see a tie and put "b" first); distinct as float64
    run = Run.from_dict({"q": {"a": 0.10000000001, "b": 0.1}})
    assert np.float32(0.10000000001) == np.float32(0.1)
    ev = evaluate(run, Qrels({"q": {"a": 1}}), ["mrr"])
    assert ev.mean("mrr") == 1.0


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="mode"):
        evaluate(_run(), QRELS, ["mrr"], mode="ranx")
    with pytest.raises(ConfigError, match="no_relevant"):
        evaluate(_run(), QRELS, ["mrr"], no_relevant="drop")
    with pytest.raises(ConfigError, match="relevance level must be a whole number from 0"):
        evaluate(_run(), QRELS, ["mrr"], relevance_level=-1)  # 0 is trec_eval's -l 0 (every judged doc relevant)
    with pytest.raises(ConfigError, match=r"unknown metric 'ndgc@10'.*ndcg"):
        evaluate(_run(), QRELS, ["ndgc@10"])


def test_column_accepts_any_spelling_of_a_metric():
    ev = evaluate(_run(), QRELS, ["ndcg_cut_10", "recip_rank"])
    assert ev.metrics == ["ndcg@10", "mrr"]
    assert ev.column("NDCG@10").tolist() == ev.column("ndcg_cut.10").tolist()
    with pytest.raises(KeyError):
        ev.column("map")


def test_bootstrap_interval_is_reproducible_and_brackets_the_mean(scifact):
    qrels = scifact.split("test")
    # a run that finds the first relevant doc of every third query at rank 1
    run = Run.from_dict(
        {q: {next(iter(docs)): 1.0} if i % 3 == 0 else {"nope": 1.0} for i, (q, docs) in enumerate(qrels.items())}
    )
    ev = evaluate(run, qrels, ["hit@1", "mrr"])
    agg = ev.aggregate(seed=1)
    assert agg == ev.aggregate(seed=1)
    assert agg["hit@1"]["n"] == 300 and agg["hit@1"]["mean"] == pytest.approx(100 / 300)
    assert agg["hit@1"]["ci_low"] < agg["hit@1"]["mean"] < agg["hit@1"]["ci_high"]
    # the normal-approximation width for p = 1/3, n = 300 is about +-0.053
    assert agg["hit@1"]["ci_high"] - agg["hit@1"]["ci_low"] == pytest.approx(
        2 * 1.96 * np.sqrt(1 / 3 * 2 / 3 / 300), rel=0.15
    )
    assert "ci_low" not in ev.aggregate(ci=False)["mrr"]


def test_breakdown_by_tag_and_category():
    run = Run.from_dict({"a": {"x": 1.0}, "b": {"y": 1.0}, "c": {"x": 1.0}})
    samples = [
        Sample("a", "q", {"x": 1}, tags=["billing"], category="factual"),
        Sample("b", "q", {"x": 1}, tags=["billing", "hard"], category="multi_hop"),
        Sample("c", "q", {"x": 1}, tags=["hard"], category="factual"),
    ]
    ev = evaluate(run, Qrels({s.id: s.expected for s in samples}), ["hit@1"], samples=samples)
    groups = groups_from_samples(samples)
    assert groups == {
        "billing": ["a", "b"],
        "hard": ["b", "c"],
        "category:factual": ["a", "c"],
        "category:multi_hop": ["b"],
    }
    bd = ev.breakdown(groups)
    assert bd["billing"]["hit@1"] == 0.5 and bd["hard"]["hit@1"] == 0.5
    assert bd["category:factual"]["hit@1"] == 1.0 and bd["category:multi_hop"]["hit@1"] == 0.0
    assert ev.group_sizes(groups)["category:multi_hop"] == 1


def test_per_query_table_round_trips_exactly(tmp_path):
    ev = evaluate(_run(), QRELS, ["ndcg@10", "map", "recall@5(rel=2)"], mode="pytrec_eval", no_relevant="one")
    ev.values[0, 0] = 1 / 3  # a value whose decimal form is long
    ev.to_tsv(tmp_path / "pq.tsv")
    back = Evaluation.from_tsv(tmp_path / "pq.tsv")
    assert back.metrics == ev.metrics and back.query_ids == ev.query_ids and back.status == ev.status
    assert back.values.tolist() == ev.values.tolist()
    for key in ("system", "mode", "skipped", "excluded", "unjudged", "n_duplicates", "no_relevant", "trec_names"):
        assert getattr(back, key) == getattr(ev, key), key
    header = (tmp_path / "pq.tsv").read_text().splitlines()
    assert any(line.startswith("# mode: ") for line in header)
    assert "query_id\tstatus\tndcg@10\tmap\trecall@5(rel=2)" in header


def test_a_mean_asked_for_by_any_spelling_is_read_back_by_that_spelling():
    """`evaluate(..., ["AP", "nDCG@10"]).means()["AP"]` answers, though the table stores trec_eval's `map`."""
    ev = evaluate(
        Run.from_dict({"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}),
        {"q1": {"d2": 1}, "q2": {"d3": 2}},
        ["AP", "nDCG@10", "P@1"],
    )
    means = ev.means()
    assert list(means) == ["map", "ndcg@10", "P@1"]
    assert means["AP"] == means["map"] == ev.mean("AP") == 0.75
    assert means["nDCG@10"] == means["ndcg@10"] and "nDCG@10" in means and "AP" in means
    assert means.get("AP") == 0.75 and means.get("recall@5") is None and "recall@5" not in means
    with pytest.raises(KeyError):
        means["recall@5"]
