"""Each metric row declares how it reads to people (label, meaning), its parameters and its trec_eval name,
and every renderer and the `retbench metrics` listing read those rows rather than their own tables."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from retbench.cli import app
from retbench.metrics import catalog
from retbench.report import fmt


def test_every_builtin_row_declares_a_meaning_and_the_catalog_lists_it():
    rows = {r["name"]: r for r in catalog.catalog()}
    assert set(rows) >= {"ndcg", "recall", "P", "mrr", "map", "exact_match", "faithfulness"}
    for name, row in rows.items():
        assert row["meaning"] and "{k}" not in row["meaning"], name  # one plain sentence, cutoff written as k
        assert row["label"]
    assert rows["ndcg"]["label"] == "nDCG" and rows["ndcg"]["trec_eval"] == ["ndcg", "ndcg_cut_k"]
    assert rows["P"]["parameters"] == {"rel": 1} and rows["P"]["trec_eval"] == ["P_k"]
    assert rows["hybrid"]["parameters"] == {"rel": 1, "alpha": 0.5, "gamma": 1.0}
    assert rows["hallucination_rate"]["lower_is_better"] and rows["groundedness"]["range"] == [0.0, 5.0]


def test_report_labels_and_meanings_come_from_the_rows_however_the_name_is_spelt():
    assert [fmt.metric_label(m) for m in ("mrr@10", "ndcg_cut_10", "P@5", "recip_rank", "recall_all@5")] == [
        "MRR@10",
        "nDCG_10",
        "precision@5",
        "MRR",
        "recall (all supports)@5",
    ]
    assert fmt.metric_meaning("P@5") == "share of the top 5 results that are relevant"
    assert fmt.metric_meaning("ndcg@k").startswith("ranking quality of the top k ")
    assert fmt.metric_label("latency") == "latency"  # not a metric: spelt as given


class _TopGrade:
    """A plugin row: its label and meaning reach every report without touching report code."""

    name = "top_grade"
    cutoff = "k"
    binary = False
    label = "top grade"
    meaning = "share of the top {k} results with the highest grade"
    description = "top-grade docs in the top k / k"

    def compute(self, ctx, k, params):
        return np.zeros(len(ctx.gm))


def test_a_plugin_rows_label_and_meaning_reach_reports_and_the_listing():
    catalog.register(_TopGrade())
    try:
        assert fmt.metric_label("top_grade@3") == "top grade@3"
        assert fmt.metric_meaning("top_grade@3") == "share of the top 3 results with the highest grade"
        res = CliRunner().invoke(app, ["metrics", "--json"])
        assert res.exit_code == 0, res.output
        listed = {r["name"]: r for r in json.loads(res.output)}
        assert listed["top_grade"]["label"] == "top grade" and listed["top_grade"]["parameters"] == {}
        assert set(listed) == set(catalog.available())
    finally:
        catalog.unregister("top_grade")
