"""The interpolated precision-recall curve: trec_eval's 11 points from the stored runs, drawn where they belong."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest

from retbench.evaluation.curves import LEVELS
from retbench.report.html import render_html
from retbench.report.prcurve import pr_figure
from retbench.results.read import load_judgements

SVG = "{http://www.w3.org/2000/svg}"


def interpolated(ranked: list[str], relevant: set[str], rounding: str = "round") -> list[float]:
    """One query's iprec at recall 0.0 .. 1.0 as trec_eval computes it (m_iprec_at_recall.c): level p stands
    for n = max(1, lround(p * R)) relevant documents in trec_eval 10.0 (max(1, (long)(p * R + 0.9)) in 9); the
    value is the best precision at any rank where at least n relevant documents have been found (0 when fewer
    are ever found)."""
    precision_after: list[float] = []  # precision at the rank of the i-th relevant document found
    for rank, doc in enumerate(ranked, start=1):
        if doc in relevant:
            precision_after.append((len(precision_after) + 1) / rank)
    out = []
    for level in LEVELS:
        x = level * len(relevant)
        need = max(1, math.floor(x + 0.5) if rounding == "round" else math.floor(x + 0.9))
        out.append(max(precision_after[need - 1 :], default=0.0))
    return out


def test_curve_is_the_mean_of_each_querys_interpolated_precision(scifact_study, scifact_report):
    qrels, _ = load_judgements(scifact_study.manifest.data)
    assert list(scifact_report.pr_curves) == list(
        scifact_study.systems
    )  # the study did not ask for the points: computed
    for system, curve in scifact_report.pr_curves.items():
        run, ev = scifact_study.run(system), scifact_study.evaluation(system)
        assert ev.recall_rounding == "round"  # the trec_eval mode follows trec_eval 10.0
        relevant = [{d for d, g in qrels[q].items() if g >= 1} for q in ev.query_ids]
        per_query = [interpolated(run.docs(q), rel) for q, rel in zip(ev.query_ids, relevant, strict=True)]
        want = [sum(col) / len(per_query) for col in zip(*per_query, strict=True)]
        assert curve == pytest.approx(want, abs=1e-12)
        assert all(a >= b for a, b in itertools.pairwise(curve))  # interpolation never rises


def test_html_draws_one_line_of_eleven_points_per_system(scifact_report):
    page = render_html(scifact_report)
    assert 'id="pr-curve"' in page or "Precision-recall curve" in page
    svg = next(s for s in re.findall(r"<svg .*?</svg>", page, flags=re.S) if 'data-chart="pr-curve"' in s)
    root = ET.fromstring(svg)
    for system, _curve in scifact_report.pr_curves.items():
        marks = [g for g in root.iter(f"{SVG}g") if g.get("data-series") == system]
        assert marks, system
    title = root.find(f"{SVG}title").text
    assert "precision-recall" in title.lower()
    assert "round(r × R)" in page and "trec_eval 10.0's rule" in page  # the caption names the recall rounding


def test_the_caption_names_trec_eval_9s_rule_for_curves_scored_with_it():
    page = pr_figure({"a": [1.0] * 11}, "floor_plus_0.9")
    assert "floor(r × R + 0.9)" in page and "trec_eval 9" in page and "10.0" not in page


def test_figure_points_map_recall_to_x_and_precision_to_y():
    root = ET.fromstring(
        re.search(
            r"<svg .*?</svg>", pr_figure({"a": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]}), re.S
        ).group(0)
    )
    line = next(p for p in root.iter(f"{SVG}polyline"))
    pts = [tuple(map(float, xy.split(","))) for xy in line.get("points").split()]
    assert len(pts) == 11
    xs, ys = zip(*pts, strict=True)
    assert list(xs) == sorted(xs) and list(ys) == sorted(ys)  # recall rises rightwards, precision falls (y grows)
    steps = [b - a for a, b in itertools.pairwise(xs)]
    assert max(steps) - min(steps) < 0.2  # evenly spaced recall levels on a linear axis
