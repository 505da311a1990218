"""Reports: the numbers are metrics.json's, coverage and counting mode are shown, plots are well formed."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from typer.testing import CliRunner

import abdata
from retbench.cli import app
from retbench.metrics.cutoffs import metric_curves
from retbench.report import histogram, plots
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.report.model import build_report
from retbench.results import read_results

SVG = "{http://www.w3.org/2000/svg}"


def stored(results_dir) -> dict:
    """metrics.json's systems, as written."""
    return json.loads((results_dir / "metrics.json").read_text())["systems"]


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def data(results_dir):
    return build_report(read_results(results_dir), n_resamples=1000)


@pytest.fixture(scope="module")
def pytrec_data(tmp_path_factory):
    return build_report(read_results(abdata.pytrec_results(tmp_path_factory.getbasetemp())), n_resamples=500)


def test_baseline_and_primary_come_from_the_validated_config_the_manifest_recorded(results_dir):
    """The report asks the typed manifest, which reads the validated config (`config.resolved`); the stored YAML
    text is read only for a manifest written before the validated config was recorded."""
    result = read_results(results_dir)
    resolved = dict(result.manifest.data["config"]["resolved"])
    asked = {"baseline": "bm25_weak", "primary": ["recall@10"]}
    result.manifest.data["config"] = {
        "file": "x.yaml",
        "sha256": "0",
        "text": "baseline: [",
        "resolved": resolved | asked,
    }
    data = build_report(result, n_resamples=200, drill_k=0)
    assert (data.baseline, data.primary) == ("bm25_weak", "recall@10")
    assert [(p.system_a, p.system_b) for p in data.comparison.pairs] == [
        ("bm25_weak", "bm25"),
        ("bm25_weak", "bm25_nostem"),
    ]
    result.manifest.data["config"] = {"file": "x.yaml", "sha256": "0", "text": "baseline: bm25\nprimary: [recall@1]\n"}
    data = build_report(result, n_resamples=200, drill_k=0)
    assert (data.baseline, data.primary) == ("bm25", "recall@1")


def test_model_means_are_metrics_json_and_deltas_are_per_query(results_dir, data):
    mj = {k: {m: v["value"] for m, v in row["metrics"].items()} for k, row in stored(results_dir).items()}
    assert [s.name for s in data.systems] == list(mj)
    for s in data.systems:
        assert s.means == mj[s.name]
        assert s.coverage["judged"] == s.coverage["answered"] == 300
        low, high = s.ci["recall@5"]
        assert low < s.means["recall@5"] < high
    assert data.baseline == "bm25" and data.primary == "recall@5"
    base = np.array(data.deltas["bm25_weak"])
    assert base.size == 300
    assert base.mean() == pytest.approx(mj["bm25_weak"]["recall@5"] - mj["bm25"]["recall@5"])
    assert data.curves == {"recall": [(1, "recall@1"), (5, "recall@5"), (10, "recall@10"), (100, "recall@100")]}


def test_metric_curves_group_by_family_and_parameters():
    got = metric_curves(["ndcg@10", "ndcg@5", "P@5", "recall@5(rel=2)", "recall@10(rel=2)", "recall@10", "mrr"])
    assert got == {
        "ndcg": [(5, "ndcg@5"), (10, "ndcg@10")],
        "recall(rel=2)": [(5, "recall@5(rel=2)"), (10, "recall@10(rel=2)")],
    }


def test_pytrec_mode_and_failures_are_labelled(pytrec_data):
    flaky = pytrec_data.system("flaky")
    assert flaky.mode == "pytrec_eval"
    assert flaky.coverage["failed"] > 0
    assert flaky.coverage["judged"] == 100
    assert flaky.coverage["answered"] == 100 - flaky.coverage["failed"]
    md = report_markdown(pytrec_data)
    assert "pytrec_eval mode" in md
    assert f"scored {flaky.answered} of 100 ({flaky.coverage['failed']} failed)" in md
    assert f"{flaky.means['recall@5']:.4f} †" in md
    page = render_html(pytrec_data)
    assert "pytrec_eval mode" in page and "left out of the means" in page


def test_markdown_report_lists_every_mean_with_coverage(data):
    md = report_markdown(data)
    for s in data.systems:
        row = next(line for line in md.splitlines() if line.startswith(f"| {s.name} | scored"))
        for m in data.metrics:
            assert f"{s.means[m]:.4f}" in row
    assert "## A/B comparison" in md and "### `bm25_weak` (B) vs `bm25` (A)" in md
    assert "## Latency" in md and "## Coverage" in md


def test_html_is_self_contained_and_well_formed(data, results_dir):
    page = render_html(data)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert "<script src" not in page and "@import" not in page
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    kinds = []
    for svg in svgs:
        root = ET.fromstring(svg)  # every chart is well-formed XML
        kinds.append(root.get("data-chart"))
        assert root.find(f"{SVG}title").text
    assert sorted(kinds) == sorted(
        [
            "mean-ci",
            "metric-curve",
            "metric-curve",
            "metric-curve",
            "delta-histogram",
            "delta-histogram",
            "coverage",
            "tradeoff",  # quality vs mean latency: these systems are timed as one batch, so no p50/p95 charts
            "pr-curve",
        ]
    )
    assert "No system was timed per query, so no latency distribution is drawn." in page
    blob = re.search(r'<script type="application/json" id="retbench-data">(.*?)</script>', page, flags=re.S).group(1)
    assert json.loads(blob)["metrics"] == json.loads((results_dir / "metrics.json").read_text())


def test_delta_histogram_keeps_small_gains_and_losses_out_of_the_unchanged_bar():
    deltas = [0.0] * 7 + [1.0, 1.0, -0.5, 0.333, -0.04, 0.04, 0.01, -0.1, 0.1]
    root = ET.fromstring(histogram.delta_histogram(deltas, title="t", x_label="x"))
    bars = {
        (r.get("data-kind"), r.get("data-lo"), r.get("data-hi")): int(r.get("data-count"))
        for r in root.iter(f"{SVG}rect")
        if r.get("class") == "bar"
    }
    assert bars == {
        ("worse", "-0.5", "-0.4"): 1,
        ("worse", "-0.1", "0"): 2,
        ("unchanged", "0", "0"): 7,
        ("better", "0", "0.1"): 3,
        ("better", "0.3", "0.4"): 1,
        ("better", "0.9", "1"): 2,
    }
    legend = " ".join(t.text for t in root.iter(f"{SVG}text") if t.text)
    assert "worse: 3" in legend and "unchanged: 7" in legend and "better: 6" in legend


def test_line_chart_maps_points_inside_the_frame():
    svg = plots.line_chart(
        [plots.Series("a", [1, 5, 100], [0.2, 0.5, 0.9])],
        title="t",
        x_label="k",
        y_label="r",
        x_log=True,
        y_range=(0.0, 1.0),
    )
    root = ET.fromstring(svg)
    xs = [float(c.get("cx")) for c in root.iter(f"{SVG}circle")]
    ys = [float(c.get("cy")) for c in root.iter(f"{SVG}circle")]
    width = int(root.get("width"))
    assert 0 < xs[0] < xs[1] < xs[2] < width
    assert ys[0] > ys[1] > ys[2] > 0  # higher values are drawn higher
    # log axis: 5 sits at log10(5)/2 of the way from 1 to 100
    assert (xs[1] - xs[0]) / (xs[2] - xs[0]) == pytest.approx(np.log10(5) / 2, rel=1e-3)


@pytest.mark.parametrize(("lo", "hi"), [(0, 1), (0.37, 0.91), (0, 283), (-1, 1)])
def test_nice_ticks_cover_the_range_with_round_steps(lo, hi):
    ticks = plots.nice_ticks(lo, hi)
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0])
    assert ticks[0] >= lo - 1e-9 and ticks[-1] <= hi + 1e-9 and ticks[-1] + steps[0] > hi
    mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
    assert round(mantissa, 6) in (1, 2, 2.5, 5)


def test_cli_report_writes_html_and_markdown(results_dir, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "report",
            str(results_dir),
            "--html",
            str(tmp_path / "r.html"),
            "--markdown",
            str(tmp_path / "r.md"),
            "--resamples",
            "500",
            "--baseline",
            "bm25_weak",
            "--primary",
            "ndcg_cut_10",
        ],
    )
    assert res.exit_code == 0, res.output
    md = (tmp_path / "r.md").read_text()
    assert "### `bm25` (B) vs `bm25_weak` (A)" in md
    assert "Per-query change in nDCG@10" in (tmp_path / "r.html").read_text()
    bad = CliRunner().invoke(app, ["report", str(results_dir), "--baseline", "nobody"])
    assert bad.exit_code == 2 and "nobody" in bad.output
