"""The report's costs: per 1,000 queries from stated prices, missing prices said, and the three-way Pareto front."""

from __future__ import annotations

import re

import pytest
import yaml

import abdata
from retbench.pareto import pareto_front_3
from retbench.report.html import render_html
from retbench.report.model import build_report
from retbench.results import read_results
from retbench.results.costs import gather_costs
from retbench.studies.benchmark import load_config, run_experiment

CPU = {"price": 0.0000236, "source": "example CPU machine price", "example": True}


@pytest.fixture(scope="module")
def priced(tmp_path_factory):
    """Two BM25 systems over a SciFact slice; the CPU second is priced, the index storage of one system is not."""
    out = tmp_path_factory.mktemp("costs") / "priced"
    cfg = {
        "name": "priced",
        "output": str(out),
        "metrics": ["ndcg@10"],
        "datasets": [{"name": str(abdata.SCIFACT), "split": "test", "max_queries": 40, "corpus_sample": 800}],
        "systems": [{"name": n, **abdata.SYSTEMS[n]} for n in ("bm25", "bm25_weak")],
        "costs": {
            "cpu_second": CPU,
            "systems": {"bm25": {"index_gb_month": {"price": 0.08, "source": "example disk price", "example": True}}},
        },
    }
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(cfg))
    run_experiment(load_config(path), log=lambda _m: None)
    return build_report(read_results(out), n_resamples=200)


def test_each_system_gets_its_cost_per_1000_queries_from_its_measured_search_seconds(priced):
    costs = gather_costs(priced.result)
    for s in priced.systems:
        per = costs[s.name]["per_1k_queries"]
        seconds = s.resources["search_seconds"]
        assert per["total"] == pytest.approx(seconds / s.latency["n"] * 1000 * CPU["price"])
        assert per["items"][0]["source"] == "example CPU machine price"
    assert costs["bm25"]["index_per_month"]["total"] is not None
    assert costs["bm25_weak"]["index_per_month"]["total"] is None  # measured, not priced: missing, not 0


def test_the_html_report_shows_costs_missing_prices_the_examples_and_a_cost_chart(priced):
    html = render_html(priced)
    table = re.search(r'<table class="costs">.*?</table>', html, flags=re.S).group(0)
    assert "bm25_weak" in table and "missing" in table and "index_gb_month" in table
    assert "cost per 1,000 queries (USD)" in html
    assert "examples to show the arithmetic" in html
    assert "Pareto front over quality, latency and cost" in html


def test_the_three_way_front_keeps_a_system_that_is_best_on_any_one_axis():
    pts = [("cheap", 0.5, 10.0, 0.01), ("fast", 0.5, 1.0, 0.05), ("best", 0.7, 20.0, 0.2), ("beaten", 0.5, 10.0, 0.02)]
    assert pareto_front_3(pts) == ["cheap", "fast", "best"]


def test_the_run_summary_prints_each_systems_cost_per_1000_queries(priced):
    from rich.console import Console

    from retbench.report.terminal import render_costs

    con = Console(width=160, record=True, color_system=None)
    con.print(render_costs(priced.result))
    text = con.export_text()
    assert "cost (stated prices" in text and "per 1,000 queries" in text
    for s in priced.systems:
        assert s.name in text
    assert "examples to show the arithmetic" in text
