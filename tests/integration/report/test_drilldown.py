"""The report's per-query drill-down and metric@k curves, from the stored runs and the dataset's qrels;
the drill-down checked in headless Chromium (the page renders a query's documents offline)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

import abdata
from browser import CHROMIUM, dump_dom
from retbench.report.html import render_html
from retbench.report.model import build_report
from retbench.results import load_results, read_results
from stored import flat


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def data(results):
    return build_report(read_results(results), n_resamples=200)


def test_curves_cover_every_k_up_to_the_depth_and_agree_with_the_reported_means(data, results):
    metrics = flat(results)
    assert set(data.drill.curves) == {"recall", "ndcg", "hit"}
    for system, row in metrics.items():
        recall = data.drill.curves["recall"][system]
        assert len(recall) == 100  # the run depth
        assert recall[4] == pytest.approx(row["recall@5"], abs=1e-12)
        assert recall[9] == pytest.approx(row["recall@10"], abs=1e-12)
        assert recall[99] == pytest.approx(row["recall@100"], abs=1e-12)
        assert data.drill.curves["ndcg"][system][9] == pytest.approx(row["ndcg@10"], abs=1e-12)
        assert all(a <= b + 1e-12 for a, b in itertools.pairwise(recall))  # recall@k never falls


def test_each_query_holds_every_systems_top_k_grades_misses_and_metric_values(data, results):
    from retbench.io.beir import read_beir

    res = load_results(results)
    qrels = read_beir(abdata.SCIFACT).split("test")
    drill = data.drill
    assert drill.k == 10 and drill.systems == list(res.systems)
    q = next(e for e in drill.queries if e["missed"]["bm25_weak"])
    run = res.run("bm25_weak")
    assert [d for d, _, _ in q["top"]["bm25_weak"]] == run.docs(q["id"])[:10]
    assert [g for d, _, g in q["top"]["bm25_weak"]] == [qrels[q["id"]].get(d) for d in run.docs(q["id"])[:10]]
    ranks = {d: r for r, d in enumerate(run.docs(q["id"]), start=1)}
    for doc, grade, rank in q["missed"]["bm25_weak"]:
        assert grade == qrels[q["id"]][doc] and rank == ranks.get(doc) and (rank is None or rank > 10)
    ev = res.evaluation("bm25_weak")
    assert q["values"]["bm25_weak"] == ev.values[ev.query_ids.index(q["id"])].tolist()
    assert drill.docs[q["top"]["bm25_weak"][0][0]]  # a text snippet for every shown document
    j = drill.metrics.index(data.primary)
    base = q["values"][data.baseline][j]
    assert q["change"] == max((q["values"][s][j] - base for s in drill.systems if s != data.baseline), key=abs)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium not installed (Debian: apt-get install -y chromium)")
def test_chromium_shows_a_querys_documents_and_the_most_changed_queries_offline(data, results, tmp_path):
    page = tmp_path / "report.html"
    html = render_html(data)
    assert "<script src" not in html and not re.search(r'(src|href)="https?:', html)  # one file, no network
    page.write_text(html, encoding="utf-8")
    res = load_results(results)
    q = next(e for e in data.drill.queries if e["missed"]["bm25_weak"])
    dom = dump_dom(page, f"#q={q['id']}", tmp_path / "p1")
    shown = dom.split('id="drill-view"', 1)[1]
    assert f'data-query="{q["id"]}"' in shown
    for system in res.systems:
        block = shown.split(f'class="drill-system" data-system="{system}"', 1)[1].split('class="drill-system"', 1)[0]
        top = re.findall(r'<tr(?: class="rel")? data-doc="([^"]+)"', block)
        assert top == res.run(system).docs(q["id"])[:10]
        cells = dict(re.findall(rf'data-system="{system}" data-qmetric="([^"]+)">([^<]+)<', shown))
        ev = res.evaluation(system)
        row = ev.values[ev.query_ids.index(q["id"])]
        assert cells == {m: f"{v:.4f}" for m, v in zip(ev.metrics, row, strict=True)}
    missed = shown.split('class="drill-system" data-system="bm25_weak"', 1)[1]
    assert re.findall(r'<li data-doc="([^"]+)"', missed.split("</ul>", 1)[0]) == [
        d for d, _, _ in q["missed"]["bm25_weak"]
    ]
    assert data.drill.docs[q["top"]["bm25"][0][0]][:40] in shown.replace("&amp;", "&")

    changed = dump_dom(page, "#changed", tmp_path / "p2")
    select = changed.split('<select id="drill-query">', 1)[1].split("</select>", 1)[0]
    options = re.findall(r'<option value="([^"]+)"', select)
    expected = sorted((e for e in data.drill.queries if e["change"]), key=lambda e: -abs(e["change"]))[:25]
    assert options == [e["id"] for e in expected]
    assert f'data-query="{expected[0]["id"]}"' in changed  # the most changed query opens first
