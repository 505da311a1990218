"""Paired comparison: the tests against scipy and exact enumeration, Holm, alignment, CLI."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from typer.testing import CliRunner

import abdata
from retbench.alignment import align
from retbench.cli import app
from retbench.comparison import compare, compare_pair
from retbench.evaluation import Evaluation
from retbench.results import read_results
from retbench.stats.paired import bootstrap_ci, holm, paired_ttest, randomization_test, wilcoxon_signed_rank


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    return abdata.evaluations(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


def vectors(evals, metric: str, a: str = "bm25", b: str = "bm25_weak") -> tuple[np.ndarray, np.ndarray]:
    return evals[a].column(metric), evals[b].column(metric)


# -- t-test and Wilcoxon against scipy on real per-query vectors ---------------------------------
@pytest.mark.parametrize("metric", abdata.METRICS)
@pytest.mark.parametrize("pair", [("bm25", "bm25_weak"), ("bm25", "bm25_nostem"), ("bm25_nostem", "bm25_weak")])
def test_ttest_and_wilcoxon_match_scipy_on_scifact(evals, metric, pair):
    a, b = vectors(evals, metric, *pair)
    assert not np.array_equal(a, b)
    ours = paired_ttest(a, b)
    ref = stats.ttest_rel(b, a)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    # zero_method="wilcox" drops zero deltas. The normal approximation must equal scipy's asymptotic
    # method (same statistic, same tie correction) on every vector ...
    n_nonzero = int(np.count_nonzero(b - a))
    approx = wilcoxon_signed_rank(a, b, exact_max=0)
    ref_w = stats.wilcoxon(b, a, zero_method="wilcox", correction=False, method="asymptotic")
    assert approx.pvalue == pytest.approx(ref_w.pvalue, rel=1e-9)
    assert min(approx.statistic, n_nonzero * (n_nonzero + 1) / 2 - approx.statistic) == pytest.approx(ref_w.statistic)
    # ... and the default (exact up to 50 non-zero deltas, conditional on ties) its exact reference
    wx = wilcoxon_signed_rank(a, b)
    assert wx.statistic == approx.statistic
    assert wx.pvalue == pytest.approx(exact_signed_rank_reference(b - a), rel=1e-9)


def exact_signed_rank_reference(d: np.ndarray) -> float:
    """Two-sided p of the signed-rank sum under random signs, by scipy (no ties), enumeration, or convolution."""
    d = d[d != 0]
    if d.size > 50:
        return stats.wilcoxon(d, zero_method="wilcox", correction=False, method="asymptotic").pvalue
    if len(np.unique(np.abs(d))) == d.size:
        return stats.wilcoxon(d, method="exact").pvalue
    if len(np.unique(np.abs(d))) == 1:  # all ranks tied: the sign test
        return stats.binomtest(int(np.sum(d > 0)), d.size).pvalue
    ranks2 = np.rint(2 * stats.rankdata(np.abs(d))).astype(int)
    observed = int(ranks2[d > 0].sum())
    pmf = np.array([1.0])
    for r in ranks2:  # product of (x^0 + x^r) / 2
        term = np.zeros(r + 1)
        term[0] = term[r] = 0.5
        pmf = np.convolve(pmf, term)
    return min(1.0, 2 * min(pmf[: observed + 1].sum(), pmf[observed:].sum()))


def test_wilcoxon_small_samples_match_scipy_default():
    rng = np.random.default_rng(3)
    for n in (5, 12, 30, 50):
        a = rng.random(n)
        b = a + rng.normal(0.05, 0.2, n)
        assert wilcoxon_signed_rank(a, b).pvalue == pytest.approx(stats.wilcoxon(b, a).pvalue, rel=1e-12)
    # ties and zeros with n <= 13: scipy enumerates all sign patterns exactly, as we do
    a = np.array([0, 1, 0, 1, 0.5, 0.5, 1, 0, 0, 1, 0.2, 0.0])
    b = np.array([1, 1, 0, 0, 1, 0, 0.5, 1, 0.5, 0, 1, 1.0])
    assert wilcoxon_signed_rank(a, b).pvalue == pytest.approx(stats.wilcoxon(b, a).pvalue, rel=1e-12)


def test_wilcoxon_exact_with_ties_equals_brute_force_enumeration():
    d = np.array([0.5, -0.5, 0.5, 1.0, 1.0, -1.0, 0.2, 0.2, 0.2, -0.2, 0.7, 0.5, 1.0, -0.3, 0.5, 0.2])
    ranks = stats.rankdata(np.abs(d))
    observed = ranks[d > 0].sum()
    sums = np.array([ranks[np.array(s, dtype=bool)].sum() for s in itertools.product([0, 1], repeat=d.size)])
    p_brute = min(1.0, 2 * min((sums <= observed + 1e-9).mean(), (sums >= observed - 1e-9).mean()))
    assert wilcoxon_signed_rank(np.zeros_like(d), d).pvalue == pytest.approx(p_brute, rel=1e-12)


def test_identical_systems_are_not_significant():
    x = np.array([0.0, 1.0, 0.5, 0.5, 1.0])
    assert paired_ttest(x, x).pvalue == 1.0
    assert wilcoxon_signed_rank(x, x).pvalue == 1.0
    assert randomization_test(x - x) == 1.0
    assert bootstrap_ci(x - x) == (0.0, 0.0)


# -- randomization test and bootstrap --------------------------------------------------------------
def test_randomization_is_reproducible_under_a_seed_and_estimator_is_count_plus_one(evals):
    a, b = vectors(evals, "recall@5")
    d = b - a
    p1 = randomization_test(d, 2000, seed=7)
    assert p1 == randomization_test(d, 2000, seed=7)
    # (count + 1) / (n + 1): always a multiple of 1/2001, never 0
    assert (p1 * 2001) == pytest.approx(round(p1 * 2001))
    strong = np.full(40, 0.5)
    assert randomization_test(strong, 999, seed=0) == pytest.approx(1 / 1000)


def test_randomization_agrees_with_exact_sign_flip_enumeration():
    rng = np.random.default_rng(11)
    d = np.round(rng.normal(0.1, 0.4, 14), 2)
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=d.size)))
    exact = float((np.abs(signs @ d) >= abs(d.sum()) - 1e-9).mean())
    p = randomization_test(d, 20_000, seed=1)
    # Monte Carlo error of 20k resamples is about 0.0035 at p = 0.5
    assert p == pytest.approx(exact, abs=0.015)


def test_randomization_agrees_with_ttest_on_scifact(evals):
    a, b = vectors(evals, "ndcg@10")
    p_rand = randomization_test(b - a, 10_000, seed=0)
    p_t = paired_ttest(a, b).pvalue
    # different tests, same data: same order of magnitude on 300 queries
    assert p_rand == pytest.approx(p_t, rel=0.35, abs=0.003)


def test_bootstrap_ci_brackets_mean_and_matches_normal_theory(evals):
    a, b = vectors(evals, "mrr@10")
    d = b - a
    low, high = bootstrap_ci(d, 10_000, seed=0)
    assert low < d.mean() < high
    half = 1.96 * d.std(ddof=1) / math.sqrt(d.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.12)
    assert bootstrap_ci(d, 2000, seed=4) == bootstrap_ci(d, 2000, seed=4)


# -- Holm ------------------------------------------------------------------------------------------
def test_holm_worked_example():
    adj = holm([0.01, 0.04, 0.03, float("nan"), 0.2])
    # sorted 0.01, 0.03, 0.04, 0.2 with m = 4: 0.04, 0.09, max(0.08, 0.09), 0.2
    np.testing.assert_allclose(adj[[0, 2, 1, 4]], [0.04, 0.09, 0.09, 0.2])
    assert math.isnan(adj[3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=30))
def test_holm_properties(ps):
    p = np.array(ps)
    adj = holm(p)
    assert np.all(adj >= p - 1e-15)
    assert np.all(adj <= 1.0)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(adj[order]) >= -1e-15)
    # Holm never rejects more than Bonferroni-at-level rejects per step, never less than Bonferroni
    assert np.all(adj <= np.minimum(1.0, p * p.size) + 1e-15)


# -- alignment and the comparison object ------------------------------------------------------------
def test_align_counts_failed_and_missing_as_zero_and_reports_them():
    a = Evaluation("a", ["recall@5"], ["q1", "q2", "q3"], np.array([[1.0], [0.5], [1.0]]), ["ok", "ok", "ok"])
    b = Evaluation("b", ["recall@5"], ["q1", "q2", "q4"], np.array([[1.0], [0.9], [1.0]]), ["ok", "timeout", "ok"])
    al = align(a, b)
    assert al.query_ids == ["q1", "q2", "q3", "q4"]
    np.testing.assert_array_equal(al.a[:, 0], [1.0, 0.5, 1.0, 0.0])
    # q2 timed out on b: 0 even though the table says 0.9; q3 never answered by b: 0
    np.testing.assert_array_equal(al.b[:, 0], [1.0, 0.0, 0.0, 1.0])
    assert al.counts("a") == {"queries": 4, "answered": 3, "failed": 0, "missing": 1}
    assert al.counts("b") == {"queries": 4, "answered": 2, "failed": 1, "missing": 1}
    # tables built in Python carry no stored coverage: the comparison counts from the aligned statuses
    pair = compare_pair(a, b, n_resamples=10)
    assert (pair.counts_a, pair.counts_b) == (al.counts("a"), al.counts("b"))


def test_compare_all_pairs_holm_across_metrics_and_pairs(evals):
    cmp = compare(
        list(evals.values()), metrics=["recall@5", "mrr@10"], n_resamples=2000, seed=3, queries={"1": "query one"}
    )
    assert [(p.system_a, p.system_b) for p in cmp.pairs] == [
        ("bm25", "bm25_nostem"),
        ("bm25", "bm25_weak"),
        ("bm25_nostem", "bm25_weak"),
    ]
    cells = [m for p in cmp.pairs for m in p.metrics]
    assert len(cells) == 6
    for test in ("randomization", "ttest", "wilcoxon"):
        np.testing.assert_allclose([m.adjusted[test] for m in cells], holm([m.pvalues[test] for m in cells]))
    m = cmp.pair("bm25", "bm25_weak").metric("recall@5")
    a, b = vectors(evals, "recall@5")
    assert m.mean_a == pytest.approx(a.mean()) and m.mean_b == pytest.approx(b.mean())
    assert m.delta == pytest.approx((b - a).mean())
    assert m.wins + m.ties + m.losses == 300
    assert m.wins == int(np.sum(b > a)) and m.losses == int(np.sum(b < a))
    deltas = [c.delta for c in m.top_changes]
    assert deltas == sorted(deltas, reverse=True)
    gains, losses = [x for x in deltas if x > 0], [x for x in deltas if x < 0]
    assert len(gains) == min(5, m.wins) and len(losses) == min(5, m.losses)
    assert gains[0] == pytest.approx((b - a).max()) and losses[-1] == pytest.approx((b - a).min())
    assert len(m.top_changes) == len(deltas) and all(c.text for c in m.top_changes if c.query_id == "1")
    json.dumps(cmp.to_dict(), allow_nan=False)


def test_compare_pair_is_antisymmetric(evals):
    ab = compare_pair(evals["bm25"], evals["bm25_weak"], ["ndcg@10"], n_resamples=1000, seed=0).metrics[0]
    ba = compare_pair(evals["bm25_weak"], evals["bm25"], ["ndcg@10"], n_resamples=1000, seed=0).metrics[0]
    assert ab.delta == pytest.approx(-ba.delta)
    assert (ab.wins, ab.losses) == (ba.losses, ba.wins)
    assert ab.pvalues["randomization"] == ba.pvalues["randomization"]
    assert ab.pvalues["wilcoxon"] == pytest.approx(ba.pvalues["wilcoxon"])


# -- CLI ---------------------------------------------------------------------------------------------
def test_cli_compare_tests_each_system_against_the_first_on_the_first_metric_by_default(results_dir, tmp_path):
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(app, ["compare", str(results_dir), "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert [(p["system_a"], p["system_b"]) for p in data["pairs"]] == [("bm25", "bm25_nostem"), ("bm25", "bm25_weak")]
    assert [[m["metric"] for m in p["metrics"]] for p in data["pairs"]] == [["recall@5"], ["recall@5"]]
    assert data["family"] == 2 and data["n_resamples"] == 10_000 and data["note"] is None
    assert "Tested: each system (B) against `bm25` (A) on recall@5: 2 tests" in res.output
    assert "(other pairs: `--all-pairs`; other metrics: `--metrics`" in res.output
    assert "comparing:" not in res.output  # two tests: no progress lines
    # the heading names B then A, as the columns are: A = bm25, B = bm25_weak, delta = B - A
    assert "## `bm25_weak` (B) vs `bm25` (A)" in res.output
    assert "| metric | A: bm25 | B: bm25_weak | Δ (B − A) |" in res.output
    cell = data["pairs"][1]["metrics"][0]
    assert cell["delta"] == pytest.approx(cell["mean_b"] - cell["mean_a"])


def test_cli_compare_all_pairs_on_request_with_holm_across_every_test(results_dir, tmp_path):
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(
        app,
        ["compare", str(results_dir), "--all-pairs", "--metrics", "recall@5,mrr@10", "--resamples", "2000",
         "--json", str(out)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "bm25_weak" in res.output and "Holm" in res.output and "Tested: 3 pairs on recall@5, MRR@10" in res.output
    data = json.loads(out.read_text())
    assert len(data["pairs"]) == 3 and data["family"] == 6
    cell = data["pairs"][1]["metrics"][0]
    assert cell["metric"] == "recall@5" and cell["adjusted"]["randomization"] >= cell["pvalues"]["randomization"]


def test_the_compare_heading_suggests_only_widening_options_not_given_yet(results_dir):
    def heading(*args: str) -> str:
        res = CliRunner().invoke(app, ["compare", str(results_dir), "--resamples", "200", *args])
        assert res.exit_code == 0, res.output
        return next(line for line in res.output.splitlines() if line.startswith("Tested:"))

    given_pairs = heading("--all-pairs")
    assert "--all-pairs" not in given_pairs and "(other metrics: `--metrics`, or `--metrics all`)." in given_pairs
    given_metrics = heading("--metrics", "recall@5,mrr@10")
    assert given_metrics.endswith("(other pairs: `--all-pairs`; every metric: `--metrics all`).")
    assert heading("--all-pairs", "--metrics", "mrr@10").endswith("(every metric: `--metrics all`).")
    assert heading("--all-pairs", "--metrics", "all").endswith("Holm-corrected together.")  # nothing left: no hint
    # two systems: every pair is the one pair already tested, so --all-pairs is not suggested
    assert "--all-pairs" not in heading("--systems", "bm25,bm25_weak")


def test_resamples_are_sized_so_holms_strictest_step_can_be_passed_or_it_is_said(results_dir, tmp_path):
    from retbench.comparison import ALPHA, resamples_for, resolution_note

    # 300 tests at 10,000 resamples: the smallest Holm-adjusted p is 300 / 10,001 = 0.03
    assert resolution_note(300, 10_000) is None
    assert resolution_note(300, 5_000) == (
        "with 300 tests, p cannot go below 0.06 (Holm-adjusted) at 5,000 resamples, so no randomization p can be "
        "below 0.05: use --resamples 6,001 or more, or test fewer pairs or metrics"
    )
    for family in (1, 2, 18, 300, 1000):
        r = resamples_for(family)
        assert r >= 10_000 and 1 / (r + 1) < ALPHA / family and resolution_note(family, r) is None
    assert 1 / (resamples_for(300) + 1) <= ALPHA / (10 * 300)

    out = tmp_path / "cmp.json"
    every = ["compare", str(results_dir), "--all-pairs", "--metrics", "all", "--json", str(out)]
    few = CliRunner().invoke(app, [*every, "--resamples", "100"])
    assert few.exit_code == 0, few.output
    family = 3 * len(abdata.METRICS)
    assert f"note: with {family} tests, p cannot go below" in few.output and "at 100 resamples" in few.output
    assert json.loads(out.read_text())["note"].startswith(f"with {family} tests")
    sized = CliRunner().invoke(app, every)
    assert sized.exit_code == 0 and "note: with" not in sized.output
    # asked for every pair and every metric: the heading no longer suggests them; the resampling shows progress
    assert "`--all-pairs`" not in sized.output and "`--metrics all`" not in sized.output
    assert f"comparing: {family} tests" in sized.output and "randomization test (resample blocks)" in sized.output
    data = json.loads(out.read_text())
    assert data["family"] == family and data["n_resamples"] == resamples_for(family) and data["note"] is None
    best = min(m["adjusted"]["randomization"] for p in data["pairs"] for m in p["metrics"])
    assert best < ALPHA  # bm25 vs bm25_weak over 300 queries: a real difference can be found among 18 tests

    # the run report says it too, in both renderers
    from retbench.report.html import render_html
    from retbench.report.markdown import report_markdown
    from retbench.report.model import build_report

    report = build_report(read_results(results_dir), n_resamples=5, drill_k=0)
    assert report.comparison.family == 2
    said = "with 2 tests, p cannot go below 0.33 (Holm-adjusted) at 5 resamples"
    assert f"Note: {said}" in report_markdown(report) and f"Note: {said}" in render_html(report)
    assert build_report(read_results(results_dir), drill_k=0).comparison.note is None


def test_the_configs_baseline_and_primary_metrics_choose_what_compare_and_the_run_report_test(tmp_path):
    import yaml

    cfg = {
        "name": "ab",
        "output": str(tmp_path / "out"),
        "depth": 20,
        "metrics": ["recall@5", "mrr@10", "ndcg@10"],
        "primary": ["mrr@10", "ndcg@10"],
        "baseline": "weak",
        "datasets": [{"name": str(abdata.SCIFACT), "max_queries": 20, "corpus_sample": 200}],
        "systems": [{"name": n, **abdata.SYSTEMS[k]} for n, k in (("bm25", "bm25"), ("weak", "bm25_weak"))],
    }
    path = tmp_path / "ab.yaml"
    path.write_text(yaml.safe_dump(cfg))
    ran = CliRunner().invoke(app, ["run", str(path), "--quiet", "--no-history"])
    assert ran.exit_code == 0, ran.output
    out = tmp_path / "c.json"
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "out"), "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert [(p["system_a"], p["system_b"]) for p in data["pairs"]] == [("weak", "bm25")]
    assert [m["metric"] for m in data["pairs"][0]["metrics"]] == ["mrr@10", "ndcg@10"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "### `bm25` (B) vs `weak` (A)" in report
    assert "Tested: `bm25` (B) against `weak` (A) on MRR@10, nDCG@10: 2 tests" in report
    html = (tmp_path / "out" / "report.html").read_text()
    assert "bm25 (B) vs weak (A)" in html and "A: weak" in html
    # --baseline and --metric still win over the config
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "out"), "--baseline", "bm25", "--metric", "recall@5",
                                   "--json", str(out)])  # fmt: skip
    data = json.loads(out.read_text())
    assert [(p["system_a"], p["system_b"]) for p in data["pairs"]] == [("bm25", "weak")]
    assert [m["metric"] for m in data["pairs"][0]["metrics"]] == ["recall@5"]

    for key, value, field in (("baseline", "nosuch", "baseline"), ("primary", ["map"], "primary[0]")):
        bad = tmp_path / f"bad_{key}.yaml"
        bad.write_text(yaml.safe_dump({**cfg, key: value}))
        refused = CliRunner().invoke(app, ["run", str(bad), "--quiet", "--no-history"])
        assert refused.exit_code == 2 and f"field '{field}'" in refused.output, refused.output


def test_cli_compare_run_files_with_qrels(results_dir, tmp_path, evals):
    run_a = results_dir / "systems" / "bm25" / "run.trec"
    run_b = results_dir / "systems" / "bm25_weak" / "run.trec"
    qrels = abdata.SCIFACT / "qrels" / "test.tsv"
    res = CliRunner().invoke(
        app,
        [
            "compare",
            str(run_a),
            str(run_b),
            "--qrels",
            str(qrels),
            "--metrics",
            "recall@5",
            "--resamples",
            "1000",
            "--json",
            str(tmp_path / "c.json"),
        ],
    )
    assert res.exit_code == 0, res.output
    cell = json.loads((tmp_path / "c.json").read_text())["pairs"][0]["metrics"][0]
    assert cell["delta"] == pytest.approx(
        evals["bm25_weak"].mean("recall@5") - evals["bm25"].mean("recall@5"), abs=1e-12
    )


def test_cli_compare_bad_input_exits_2(results_dir, tmp_path):
    res = CliRunner().invoke(app, ["compare", str(results_dir), "--metrics", "nosuch@5"])
    assert res.exit_code == 2
    assert "nosuch@5" in res.output
    res = CliRunner().invoke(app, ["compare", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "missing" in res.output


def test_cli_compare_two_results_dirs_pairs_systems_by_name(results_dir, tmp_path):
    other = tmp_path / "candidate"
    other.symlink_to(results_dir, target_is_directory=True)
    out = tmp_path / "c.json"
    res = CliRunner().invoke(
        app,
        ["compare", str(results_dir), str(other), "--metrics", "recall@5", "--resamples", "500", "--json", str(out)],
    )
    assert res.exit_code == 0, res.output
    pairs = json.loads(out.read_text())["pairs"]
    assert [(p["system_a"], p["system_b"]) for p in pairs] == [
        (f"scifact_ab/{s}", f"candidate/{s}") for s in ("bm25", "bm25_nostem", "bm25_weak")
    ]
    for p in pairs:  # a system against itself: no change, nothing significant
        cell = p["metrics"][0]
        assert cell["delta"] == 0.0 and cell["pvalues"]["randomization"] == 1.0 and cell["ties"] == 300


def test_compare_and_gate_show_the_coverage_stored_in_metrics_json_not_a_recount(tmp_path_factory, tmp_path):
    out = tmp_path / "results"
    shutil.copytree(abdata.pytrec_results(tmp_path_factory.getbasetemp()), out)
    mj = json.loads((out / "metrics.json").read_text())
    stored = {"judged": 100, "answered": 61, "failed": 30, "missing": 9}  # not what flaky's tables say
    assert {k: mj["systems"]["flaky"]["coverage"][k] for k in stored} != stored
    mj["systems"]["flaky"]["coverage"].update(stored)
    (out / "metrics.json").write_text(json.dumps(mj))
    expected = {"queries": 100, "answered": 61, "failed": 30, "missing": 9}

    ran = CliRunner().invoke(app, ["compare", str(out), "--resamples", "50", "--json", str(tmp_path / "c.json")])
    assert ran.exit_code == 0, ran.output
    pair = json.loads((tmp_path / "c.json").read_text())["pairs"][0]
    assert (pair["system_a"], pair["system_b"]) == ("bm25", "flaky")
    assert pair["counts_b"] == expected
    assert "`flaky` scored 61 of 100 (30 failed, 9 missing: counted as 0)" in ran.output

    crit = tmp_path / "criteria.yaml"
    crit.write_text("max_failed_queries: 100\ngates:\n  - {name: floor, metric: recall@5, threshold: 0.0}\n")
    args = ["gate", "--criteria", str(crit), "--candidate", str(out), "--candidate-system", "flaky"]
    ran = CliRunner().invoke(app, [*args, "--resamples", "50", "--json", str(tmp_path / "g.json")])
    assert ran.exit_code == 0, ran.output
    assert json.loads((tmp_path / "g.json").read_text())["candidate"] == {"system": "flaky", **expected}


def test_a_bare_run_file_has_its_coverage_computed_against_the_qrels(tmp_path_factory, tmp_path):
    res = abdata.pytrec_results(tmp_path_factory.getbasetemp())
    runs = [str(res / "systems" / s / "run.trec") for s in ("bm25", "flaky")]
    qrels = str(abdata.SCIFACT / "qrels" / "test.tsv")
    ran = CliRunner().invoke(
        app, ["compare", *runs, "--qrels", qrels, "--resamples", "50", "--json", str(tmp_path / "c.json")]
    )
    assert ran.exit_code == 0, ran.output
    counts = json.loads((tmp_path / "c.json").read_text())["pairs"][0]["counts_a"]
    # no metrics.json beside a run file: every judged query of the qrels counts, the 200 never asked are missing
    assert counts["queries"] == 300 and counts["missing"] == 200
    assert counts["answered"] + counts["failed"] + counts["missing"] == 300


# -- different settings: said, and refused where the numbers cannot be compared ----------------------
def _truncated(run: Path, depth: int, out: Path) -> str:
    """The run file cut to its first `depth` lines per query (a run searched less deep)."""
    seen: dict[str, int] = {}
    lines = []
    for line in run.read_text().splitlines(keepends=True):
        q = line.split()[0]
        seen[q] = seen.get(q, 0) + 1
        if seen[q] <= depth:
            lines.append(line)
    out.write_text("".join(lines))
    return str(out)


def test_compare_refuses_runs_of_different_depth_when_a_metric_looks_deeper(results_dir, tmp_path):
    deep = str(results_dir / "systems" / "bm25" / "run.trec")
    shallow = _truncated(results_dir / "systems" / "bm25" / "run.trec", 10, tmp_path / "shallow.trec")
    qrels = str(abdata.SCIFACT / "qrels" / "test.tsv")
    args = ["compare", deep, shallow, "--qrels", qrels, "--resamples", "50"]
    ran = CliRunner().invoke(app, [*args, "--metrics", "recall@100"])
    assert ran.exit_code == 2, ran.output
    assert "depth 100 (run/bm25) vs 10 (shallow/bm25): recall@100 looks deeper than 10" in ran.output
    assert "--allow-different-settings" in ran.output
    # a metric within both depths: the same numbers either way, so only said
    ran = CliRunner().invoke(app, [*args, "--metrics", "recall@5"])
    assert ran.exit_code == 0, ran.output
    assert "note: results differ in depth 100 (run/bm25) vs 10 (shallow/bm25)" in ran.output
    ran = CliRunner().invoke(app, [*args, "--metrics", "recall@100,mrr", "--allow-different-settings"])
    assert ran.exit_code == 0, ran.output
    assert "note: --allow-different-settings" in ran.output and "recall@100, mrr look deeper than 10" in ran.output


def test_compare_and_gate_refuse_results_scored_at_another_relevance_level(tmp_path):
    small = {"max_queries": 40, "corpus_sample": 600}
    one = abdata.make_results(tmp_path / "level1", {"bm25": abdata.SYSTEMS["bm25"]}, dataset=small)
    two = abdata.make_results(
        tmp_path / "level2",
        {"bm25": abdata.SYSTEMS["bm25"]},
        dataset=small,
        evaluation={"relevance_level": 2, "no_relevant": "zero"},
    )
    ran = CliRunner().invoke(app, ["compare", str(one), str(two), "--resamples", "50"])
    assert ran.exit_code == 2, ran.output
    assert "relevance level 1 (level1/bm25) vs 2 (level2/bm25)" in ran.output
    crit = tmp_path / "criteria.yaml"
    crit.write_text("gates:\n  - {name: floor, metric: recall@5, regression_max: 0.5}\n")
    gate = ["gate", "--criteria", str(crit), "--candidate", str(two), "--baseline", str(one), "--resamples", "50"]
    ran = CliRunner().invoke(app, gate)
    assert ran.exit_code == 2, ran.output
    assert "relevance level 1 (baseline bm25) vs 2 (candidate bm25)" in ran.output
    ran = CliRunner().invoke(app, [*gate, "--allow-different-settings"])
    assert ran.exit_code == 1, ran.output  # let through, the gate then judges (no document has grade 2)
    assert "note: --allow-different-settings" in ran.output
