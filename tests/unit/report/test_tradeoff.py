"""The trade-off chart: quality against mean/p50/p95 latency per system, the Pareto front marked, read back from the SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

import abdata
from retbench.pareto import Point, pareto_front
from retbench.report.html import render_html
from retbench.report.model import build_report
from retbench.report.tradeoff import tradeoff_svg
from retbench.results import read_results

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return build_report(read_results(abdata.scifact_results(tmp_path_factory.getbasetemp())), n_resamples=200)


def test_the_pareto_front_keeps_exactly_the_points_nothing_beats():
    pts = [Point("fast", 0.5, 1.0), Point("slow_best", 0.7, 9.0), Point("beaten", 0.4, 5.0), Point("mid", 0.6, 3.0)]
    assert pareto_front(pts) == ["fast", "mid", "slow_best"]
    # an exact twin is not dominated (nothing is strictly better), so both stay
    assert pareto_front([Point("a", 0.5, 1.0), Point("b", 0.5, 1.0)]) == ["a", "b"]


def test_the_html_report_draws_quality_against_mean_latency_with_the_front_marked_and_no_batch_percentiles(data):
    html = render_html(data)
    assert 'id="tradeoff"' in html
    svgs = re.findall(r'<svg[^>]*data-chart="tradeoff".*?</svg>', html, flags=re.S)
    # these BM25 systems answer all queries in one timed batch: a mean each, no p50/p95 to draw; no cost chart
    # either (no LLM calls)
    assert all(s.latency["p50"] is None and s.latency["mean"] > 0 for s in data.systems)
    assert len(svgs) == 1
    assert "so on the mean chart only: " + ", ".join(s.name for s in data.systems) in html
    for key, svg in zip(("mean",), svgs, strict=True):
        root = ET.fromstring(svg)
        assert key in root.find(f"{SVG}title").text
        pts = [Point(s.name, s.means[data.primary], s.latency[key]) for s in data.systems]
        front = set(pareto_front(pts))
        marked = {}
        for g in root.iter(f"{SVG}g"):
            if "data-pareto" in g.attrib:
                mark = next(iter(g))
                marked[mark.attrib["data-series"]] = g.attrib["data-pareto"] == "1"
                title = mark.find(f"{SVG}title").text
                system = mark.attrib["data-series"]
                assert f"{data.system(system).means[data.primary]:.4f}" in title
        assert marked == {p.name: p.name in front for p in pts}
        line = root.find(f"{SVG}polyline[@class='pareto-front']")
        assert len(line.attrib["points"].split()) == len(front)


def test_a_chart_of_fewer_than_two_systems_is_not_drawn():
    assert tradeoff_svg([Point("a", 0.5, 1.0)], x_label="x", y_label="y", title="t") == ""


def test_the_svg_is_tall_enough_for_every_legend_entry_of_14_systems():
    names = [f"store-{i:02d}-hnsw-m16-ef{64 + i}" for i in range(14)]
    pts = [Point(n, 0.30 + 0.02 * i, 5.0 + 3 * i) for i, n in enumerate(names)]
    root = ET.fromstring(tradeoff_svg(pts, x_label="mean latency (ms)", y_label="nDCG@10", title="t"))
    height, width = float(root.attrib["height"]), float(root.attrib["width"])
    assert root.attrib["viewBox"] == f"0 0 {width:g} {height:g}"
    items = [g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "legend-item"]
    assert [g.attrib["data-series"] for g in items] == names
    for g in items:  # each entry's hit area (its rect) lies inside the drawing, not below its bottom edge
        rect = g.find(f"{SVG}rect")
        assert float(rect.attrib["y"]) + float(rect.attrib["height"]) <= height, g.attrib["data-series"]
        assert float(rect.attrib["x"]) + float(rect.attrib["width"]) <= width
