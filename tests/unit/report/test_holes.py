"""Incomplete judgements: a low judged@10 is said next to the numbers, with the measures made for holes."""

from __future__ import annotations

import re

import pytest

from retbench.data import Run
from retbench.evaluation import evaluate
from retbench.report.html import render_html
from retbench.report.markdown import report_markdown
from retbench.results.caveats import JUDGED_THRESHOLD, find_holes
from retbench.results.read import load_judgements


def test_scifact_top_ten_is_mostly_unjudged_and_the_report_says_so(scifact_study, scifact_report):
    qrels, _ = load_judgements(scifact_study.manifest.data)
    assert [h.system for h in scifact_report.holes] == list(
        scifact_study.systems
    )  # SciFact judges ~1 document per query
    for h in scifact_report.holes:
        run, ev = scifact_study.run(h.system), scifact_study.evaluation(h.system)
        shares = []
        for q in ev.query_ids:
            top = run.docs(q)[:10]
            shares.append(sum(d in qrels[q] for d in top) / len(top) if top else 0.0)
        assert h.judged == pytest.approx(sum(shares) / len(shares), abs=1e-12)
        assert h.judged < JUDGED_THRESHOLD
        assert set(h.values) == {"bpref", "infAP", "nDCG@10 (condensed, -J)", "RBP p=0.8 (graded)", "RBP residual"}
        assert 0 <= h.values["RBP p=0.8 (graded)"] <= h.values["RBP p=0.8 (graded)"] + h.values["RBP residual"] <= 1
    md, page = report_markdown(scifact_report), render_html(scifact_report)
    for h in scifact_report.holes:
        assert h.sentence() in md
        assert f'data-holes="{h.system}"' in page
    assert "## Incomplete judgements" in md


def test_condensed_ndcg_equals_ndcg_of_the_run_with_unjudged_documents_removed(scifact_study, scifact_report):
    qrels, _ = load_judgements(scifact_study.manifest.data)
    h = scifact_report.holes[0]
    run, ev = scifact_study.run(h.system), scifact_study.evaluation(h.system)
    condensed = {q: {d: s for d, s in run.ranking(q) if d in qrels[q]} for q in ev.query_ids}
    table = evaluate(Run.from_dict(condensed), qrels.subset(ev.query_ids), ["ndcg@10"], ev.settings())
    assert h.values["nDCG@10 (condensed, -J)"] == pytest.approx(float(table.values[:, 0].mean()), abs=1e-12)
    assert (
        h.values["nDCG@10 (condensed, -J)"] > scifact_report.system(h.system).means["ndcg@10"]
    )  # holes pulled it down


def test_threshold_reads_stored_judged_share_when_qrels_are_gone(scifact_study):
    ev = {s: scifact_study.evaluation(s) for s in list(scifact_study.systems)[:2]}
    a, b = list(ev)
    got = find_holes(ev, {}, None, {a: {"judged@10": 0.95}, b: {"judged@10": 0.5, "bpref": 0.4}})
    assert [(h.system, h.judged, h.values) for h in got] == [(b, 0.5, {"bpref": 0.4})]


def test_rbp_beside_the_holes_is_computed_at_the_p_its_label_names(scifact_study, scifact_report):
    """Plain arithmetic (Moffat and Zobel 2008; trec_eval 10.0's rbp_resid) at the p read from the label."""
    qrels, _ = load_judgements(scifact_study.manifest.data)
    h = scifact_report.holes[0]
    run, ev = scifact_study.run(h.system), scifact_study.evaluation(h.system)
    label = next(lab for lab in h.values if lab.startswith("RBP p="))
    p = float(re.fullmatch(r"RBP p=([0-9.]+) \(graded\)", label)[1])  # type: ignore[index]
    rbp, resid = [], []
    for q in ev.query_ids:
        docs, judged = run.docs(q), qrels[q]
        top = max([g for g in judged.values()] + [1])
        rbp.append((1 - p) * sum(max(judged.get(d, 0), 0) / top * p**i for i, d in enumerate(docs)))
        holes = any(judged.get(d, -1) < 0 for d in docs)
        resid.append(1 - (1 - p) * sum(p**i for i, d in enumerate(docs) if judged.get(d, -1) >= 0) if holes else 0)
    assert h.values[label] == pytest.approx(sum(rbp) / len(rbp), abs=1e-12)
    assert h.values["RBP residual"] == pytest.approx(sum(resid) / len(resid), abs=1e-12)
