"""Every number says which labels it comes from: human, LLM, or prediction-powered (PPI), with the counts.

The inputs are real: a BM25 run over SciFact's 300 test queries (top 10), SciFact's human qrels, and an
"LLM" qrels file written as `judge-relevance` writes it (grades 0-3 in TREC qrels, a provenance file beside
it) by a synthetic judge of known quality: every pooled (query, document) pair gets the human grade, with a
seeded 15% of them flipped (relevant <-> not relevant). A gold-set tier of 120 queries carries human labels
for every pooled document (explicit 0 for the non-relevant ones, as an assessor judging the pool writes
them); one tier query is left with a hole, so it is not doubly labelled. The expected PPI figures are
computed here from the label arrays alone (MRR@10 is 1 / rank of the first relevant document in the top 10)
and `stats.ppi_mean`, not from retbench's evaluation.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.io.judgements import PROVENANCE_FILE
from retbench.io.trec import write_run
from retbench.retrievers import create
from retbench.stats.ppi import classical_mean_ci, ppi_mean
from retbench.studies.labels.relevance import QRELS_FILE

runner = CliRunner()
DEPTH = 10
FLIP = 0.15
TIER = 120


def first_hit(labels: np.ndarray) -> np.ndarray:
    """RR@10 per row of binary labels by rank: 1 / rank of the first relevant document, else 0."""
    hit = labels.any(axis=1)
    return np.where(hit, 1.0 / (labels.argmax(axis=1) + 1), 0.0)


@pytest.fixture(scope="module")
def labelled(scifact, tmp_path_factory):
    """The run, the gold-set tier's human qrels, the plain human qrels, the LLM qrels, and the label arrays."""
    root = tmp_path_factory.mktemp("labels")
    human = scifact.split("test")
    qids = list(human)
    retriever = create("bm25s", {"k1": 1.5, "b": 0.75, "stopwords": "en", "stemmer": "english"})
    retriever.index(scifact.corpus)
    run = retriever.search(scifact.queries.subset(qids), DEPTH)
    write_run(run, root / "run.trec")
    rng = np.random.default_rng(7)
    top = {q: run.docs(q)[:DEPTH] for q in qids}
    truth = {q: [int(human[q].get(d, 0) > 0) for d in top[q]] for q in qids}
    llm = {q: [g ^ int(rng.random() < FLIP) for g in truth[q]] for q in qids}
    # the LLM qrels as judge-relevance writes them: "q 0 doc grade" lines and the provenance beside them
    judged = root / "judged"
    judged.mkdir()
    (judged / QRELS_FILE).write_text(
        "".join(f"{q} 0 {d} {3 * g}\n" for q in qids for d, g in zip(top[q], llm[q], strict=True))
    )
    (judged / PROVENANCE_FILE).write_text(json.dumps({"labels": "llm", "file": QRELS_FILE, "depth": DEPTH}))
    # the gold-set tier: every pooled document judged by a person; the last tier query keeps one hole
    tier = [qids[i] for i in sorted(np.random.default_rng(3).choice(len(qids), TIER, replace=False).tolist())]
    lines = []
    for q in tier:
        grades = {d: human[q].get(d, 0) for d in top[q]} | dict(human[q])
        if q == tier[-1]:
            grades.pop(next(d for d in top[q] if d not in human[q]))
        lines += [f"{q} 0 {d} {g}\n" for d, g in grades.items()]
    (root / "tier.qrels").write_text("".join(lines))
    lines = [f"{q} 0 {d} {g}\n" for q in qids for d, g in human[q].items()]
    (root / "human.qrels").write_text("".join(lines))
    return root, qids, tier, np.array([truth[q] for q in qids], bool), np.array([llm[q] for q in qids], bool)


def eval_json(*args: str) -> dict:
    result = runner.invoke(app, ["eval", *args, "-f", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_llm_labels_with_a_human_tier_give_the_prediction_powered_mean_with_its_counts(labelled):
    root, qids, tier, truth, llm = labelled
    out = eval_json(
        str(root / "tier.qrels"),
        str(root / "run.trec"),
        "--llm-qrels",
        str(root / "judged" / QRELS_FILE),
        "--labels",
        "human+llm",
        "-m",
        "mrr@10",
    )
    est = out["metrics"]["mrr@10"]["estimate"]
    # expected from the label arrays alone: queries whose LLM labels find nothing relevant are skipped (as
    # evaluation's default no_relevant=skip does), the tier minus its holed query is doubly labelled
    pos = {q: i for i, q in enumerate(qids)}
    counted = [q for q in qids if llm[pos[q]].any()]
    doubly = [q for q in tier[:-1] if q in set(counted)]
    others = [q for q in counted if q not in set(doubly)]
    rows = [pos[q] for q in doubly]
    y, f = first_hit(truth[rows]), first_hit(llm[rows])
    fu = first_hit(llm[[pos[q] for q in others]])
    mean, low, high = ppi_mean(y, f, fu)
    assert est["source"] == "ppi"
    assert (est["n_human"], est["n_llm"]) == (len(doubly), len(counted))
    assert len(doubly) > 100 and len(counted) > 250  # the synthetic judge leaves most queries counted
    assert est["mean"] == pytest.approx(mean, abs=1e-12)
    assert (est["ci_low"], est["ci_high"]) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    # the existing keys are unchanged: the mean of the merged labels, over the merged queries
    assert out["metrics"]["mrr@10"]["n"] == out["n_queries"] and out["labels"] == "human+llm"
    assert est["mean"] != out["metrics"]["mrr@10"]["mean"]
    # this seeded instance covers the mean under human labels of the same queries (the coverage rate over
    # 500 trials is tests/test_ppi.py's); the uncorrected LLM-label mean is biased upward by the flips
    everyone = [pos[q] for q in counted]
    truth_mean, llm_mean = float(first_hit(truth[everyone]).mean()), float(first_hit(llm[everyone]).mean())
    assert low <= truth_mean <= high
    assert llm_mean > truth_mean


def test_the_table_says_ppi_with_both_counts_next_to_the_mean(labelled):
    root, *_ = labelled
    args = [str(root / "tier.qrels"), str(root / "run.trec"), "--llm-qrels", str(root / "judged" / QRELS_FILE)]
    result = runner.invoke(app, ["eval", *args, "--labels", "llm", "-m", "mrr@10", "-m", "ndcg@10"])
    assert result.exit_code == 0, result.output
    est = eval_json(*args, "--labels", "llm", "-m", "mrr@10")["metrics"]["mrr@10"]["estimate"]
    assert f"{est['n_human']} human / {est['n_llm']} LLM" in result.output
    assert f"PPI {est['mean']:.4f}" in result.output
    assert "prediction-powered" in result.output


def test_llm_labels_without_doubly_labelled_queries_are_llm_with_the_classical_interval(labelled):
    """SciFact's qrels judge only relevant documents: the pooled non-relevant ones carry LLM labels alone."""
    root, _, _, _, llm = labelled
    args = [str(root / "human.qrels"), str(root / "run.trec"), "--llm-qrels", str(root / "judged" / QRELS_FILE)]
    out = eval_json(*args, "--labels", "llm", "-m", "mrr@10")
    est = out["metrics"]["mrr@10"]["estimate"]
    values = first_hit(llm[llm.any(axis=1)])
    assert (est["source"], est["n_human"], est["n_llm"]) == ("llm", 0, values.size)
    assert (est["mean"], est["ci_low"], est["ci_high"]) == pytest.approx(classical_mean_ci(values), abs=1e-12)
    assert out["metrics"]["mrr@10"]["mean"] == pytest.approx(values.mean(), abs=1e-12)
    table = runner.invoke(app, ["eval", *args, "--labels", "llm", "-m", "mrr@10"])
    assert "LLM labels, judge bias uncorrected" in table.output
    assert "judge bias is not corrected" in table.output


def test_human_labels_are_human_with_every_counted_query(labelled):
    root, qids, *_ = labelled
    out = eval_json(str(root / "human.qrels"), str(root / "run.trec"), "-m", "mrr@10")
    agg = out["metrics"]["mrr@10"]
    assert agg["estimate"]["source"] == "human"
    assert (agg["estimate"]["n_human"], agg["estimate"]["n_llm"]) == (len(qids), 0) == (agg["n"], 0)
    assert agg["estimate"]["mean"] == agg["mean"]
    table = runner.invoke(app, ["eval", str(root / "human.qrels"), str(root / "run.trec"), "-m", "mrr@10"])
    assert "PPI" not in table.output and "LLM labels" not in table.output


def test_doubly_labelled_queries_need_both_labels_on_every_judged_top_document(labelled):
    from retbench.estimates import doubly_labelled
    from retbench.io.trec import read_qrels, read_run

    root, qids, tier, *_ = labelled
    run = read_run(root / "run.trec")
    llm = read_qrels(root / "judged" / QRELS_FILE)
    got = doubly_labelled(run, read_qrels(root / "tier.qrels"), llm, DEPTH)
    assert got == tier[:-1]  # the holed query is out
    assert doubly_labelled(run, read_qrels(root / "human.qrels"), llm, DEPTH) == [
        q for q in qids if all(d in read_qrels(root / "human.qrels")[q] for d in run.docs(q)[:DEPTH])
    ]


def test_the_gate_gives_the_prediction_powered_paired_difference_and_the_comment_names_each_source(labelled, scifact):
    """Baseline: a weak BM25 (its own top 10 judged by the same synthetic judge); candidate: the tuned one."""
    from retbench.criteria import parse_criteria
    from retbench.evaluation import evaluate
    from retbench.gates import run_gates
    from retbench.io.trec import read_qrels, read_run
    from retbench.report.gate_comment import gate_json, render_comment
    from retbench.stats.ppi import ppi_mean_diff

    root, qids, tier, *_ = labelled
    cand = read_run(root / "run.trec", name="tuned")
    weak = create("bm25s", {"k1": 0.3, "b": 1.0, "stopwords": None, "stemmer": None})
    weak.index(scifact.corpus)
    base = weak.search(scifact.queries.subset(qids), DEPTH)
    human, tier_qrels = scifact.split("test"), read_qrels(root / "tier.qrels")
    rng = np.random.default_rng(11)  # the judge labels the weak run's extra documents too
    llm = {q: dict(d) for q, d in read_qrels(root / "judged" / QRELS_FILE).items()}
    for q in qids:
        for d in base.docs(q)[:DEPTH]:
            llm[q].setdefault(d, 3 * (int(human[q].get(d, 0) > 0) ^ int(rng.random() < FLIP)))
    # the tier's people judged the weak run's pool too
    tier_full = {q: {d: human[q].get(d, 0) for d in base.docs(q)[:DEPTH]} | dict(tier_qrels[q]) for q in tier[:-1]}
    metric = "mrr@10"
    by_llm = [evaluate(r, llm, [metric], no_relevant="zero") for r in (base, cand)]
    by_human = [evaluate(r, tier_full, [metric], no_relevant="zero") for r in (base, cand)]
    crit = parse_criteria({"gates": [{"name": "mrr", "metric": metric, "regression_max": 0.05}]})
    report = run_gates(crit, by_llm[1], by_llm[0], human=(by_human[0], by_human[1]))
    est = report.results[0].estimate
    # expected: the tier's human values, the LLM values on the tier and on the other queries
    lab = [qids.index(q) for q in tier[:-1]]
    unl = [i for i in range(len(qids)) if i not in set(lab)]
    ha, hb = (h.column(metric) for h in by_human)
    la, lb = (e.column(metric) for e in by_llm)
    delta, low, high = ppi_mean_diff(ha, hb, la[lab], lb[lab], la[unl], lb[unl])
    assert (est["source"], est["n_human"], est["n_llm"]) == ("ppi", TIER - 1, len(qids))
    assert (est["delta"], est["ci_low"], est["ci_high"]) == pytest.approx((delta, low, high), abs=1e-12)
    assert delta > 0 and report.results[0].delta > 0  # the tuned BM25 beats the weak one under both
    comment = render_comment(report)
    assert f"{TIER - 1} human / {len(qids)} LLM-labelled queries" in comment and "PPI change" in comment
    # MRR is a score: its change reads as a decimal, never in percentage points
    assert f"PPI change {delta:+.3f} [{low:+.3f}, {high:+.3f}]" in comment
    assert gate_json(report)["gates"][0]["estimate"]["source"] == "ppi"
    # a tier of one query cannot carry an interval: the LLM-label numbers say they are uncorrected
    one = tuple(h.subset(tier[:1]) for h in by_human)
    thin = run_gates(crit, by_llm[1], by_llm[0], human=(one[0], one[1]))
    assert thin.results[0].estimate == {"source": "llm", "n_human": 0, "n_llm": len(qids)}
    assert "LLM labels (judge bias not corrected)" in render_comment(thin)
    # tables scored with human labels and no tier given: the gate's numbers are human, and the comment says so
    plain = run_gates(crit, by_human[1], by_human[0])
    assert plain.results[0].estimate == {"source": "human", "n_human": TIER - 1, "n_llm": 0}
    assert f"from human labels, {TIER - 1} queries" in render_comment(plain)


def test_the_terminal_summary_names_an_llm_judged_means_source_beside_it():
    from rich.console import Console

    from retbench.report.terminal import render_summary
    from retbench.results.model import MetricValue, StudyManifest, StudyResult, SystemResult

    values = {"ndcg@10": MetricValue(0.5), "faithfulness": MetricValue(0.66)}
    system = SystemResult("bm25", values, coverage={"answered": 3, "judged": 3})
    console = Console(record=True, width=200)
    console.print(render_summary(StudyResult(StudyManifest({}), {"bm25": system}), ["ndcg@10", "faithfulness"]))
    text = console.export_text()
    assert "0.6600 (LLM labels, judge bias uncorrected)" in text  # stored without an estimate block: LLM labels
    assert "0.5000 (" not in text


def test_a_broken_provenance_file_is_an_input_error_naming_it(labelled, tmp_path):
    root, *_ = labelled
    (tmp_path / QRELS_FILE).write_text((root / "judged" / QRELS_FILE).read_text())
    (tmp_path / PROVENANCE_FILE).write_text('{"labels": "llm", "depth": ')
    args = [str(root / "tier.qrels"), str(root / "run.trec"), "--llm-qrels", str(tmp_path / QRELS_FILE)]
    result = runner.invoke(app, ["eval", *args, "--labels", "llm"])
    assert result.exit_code == 2
    assert PROVENANCE_FILE in result.output and "not valid JSON" in result.output
