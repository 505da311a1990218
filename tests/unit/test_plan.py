"""Label budgets and detectable drops: the predicted power against the randomization test's own rejection rate
on SciFact per-query values with injected drops, and `retbench plan` over a real results directory.

Every simulation is seeded. A rejection rate from S data sets has standard error sqrt(p (1 - p) / S); the
tolerances below are four of them (of both estimates together where both are simulated).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import abdata
from repo_paths import CONFIGS
from retbench.cli import app
from retbench.criteria import load_criteria
from retbench.errors import InputError
from retbench.planning import drop_model, plan_criteria
from retbench.power import (
    DropModel,
    detectable,
    needed_normal,
    needed_simulated,
    power_normal,
    power_simulated,
)
from retbench.report import fmt
from retbench.resolution import queries_to_separate
from retbench.stats.paired import randomization_test, z_quantile

CRITERIA = CONFIGS / "ship-criteria-scifact.yaml"
ALPHA = 0.05
SIMS = 500  # simulated data sets tested with the real randomization test


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    return abdata.evaluations(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


def column(evals, system: str, metric: str) -> np.ndarray:
    return evals[system].column(metric)


def rejection_rate(deltas: np.ndarray) -> float:
    """Share of the [SIMS, n] simulated data sets that `randomization_test` (the gate's test) rejects."""
    return float(np.mean([randomization_test(d, 1000, seed) < ALPHA for seed, d in enumerate(deltas)]))


def tolerance(p: float, *sims: int) -> float:
    return 4.0 * math.sqrt(max(p * (1.0 - p), 0.02) * sum(1.0 / s for s in sims))


# -- the predicted power is the test's rejection rate ---------------------------------------------------
@pytest.mark.parametrize("metric", ["recall@5", "ndcg@10"])
@pytest.mark.parametrize(("drop", "n"), [(0.03, 300), (0.05, 120)])
def test_predicted_power_matches_the_randomization_tests_rejection_rate_on_real_paired_changes(evals, metric, drop, n):
    """Inject a known drop into the real per-query changes of a weaker BM25 against BM25 (re-centred on it)."""
    base, weak = column(evals, "bm25", metric), column(evals, "bm25_weak", metric)
    changes = weak - base
    population = changes - changes.mean() - drop
    rng = np.random.default_rng(11)
    simulated = population[rng.integers(0, population.size, size=(SIMS, n))]
    rate = rejection_rate(simulated)
    model = DropModel.from_values(base, weak)
    assert model.kind == "paired"
    predicted = power_normal(model, n, drop, ALPHA)
    assert 0.2 < rate < 0.99  # a case where power is in question
    assert predicted == pytest.approx(rate, abs=tolerance(rate, SIMS))
    # the planner's own simulation runs the same test
    assert power_simulated(model, n, drop, ALPHA, n_sims=1000, seed=5) == pytest.approx(
        rate, abs=tolerance(rate, SIMS, 1000)
    )


@pytest.mark.parametrize(("metric", "drop", "n"), [("recall@5", 0.03, 200), ("mrr@10", 0.03, 150)])
def test_simulated_power_matches_the_rejection_rate_of_drops_made_of_lost_queries(evals, metric, drop, n):
    """Inject a known drop into BM25's values by zeroing a seeded random share of queries (the lost-queries model)."""
    base = column(evals, "bm25", metric)
    rng = np.random.default_rng(12)
    values = base[rng.integers(0, base.size, size=(SIMS, n))]
    lost = rng.random((SIMS, n)) < drop / base.mean()
    simulated = -values * lost
    assert simulated.mean() == pytest.approx(-drop, abs=0.01)
    rate = rejection_rate(simulated)
    model = drop_model(metric, base)
    assert model.kind == "lost"
    assert 0.2 < rate < 0.99
    assert power_simulated(model, n, drop, ALPHA, n_sims=1000, seed=5) == pytest.approx(
        rate, abs=tolerance(rate, SIMS, 1000)
    )
    # a handful of changed queries: the exact test is coarser than its normal approximation (with k changed
    # queries its smallest p-value is 2 / 2^k), which overstates the power here; `retbench plan` shows both
    assert power_normal(model, n, drop, ALPHA) > rate + tolerance(rate, SIMS)


# -- detectable drops and queries needed ----------------------------------------------------------------
@pytest.mark.parametrize("candidate", [None, "bm25_weak"], ids=["lost", "paired"])
@pytest.mark.parametrize("metric", ["recall@5", "mrr@10"])
def test_detectable_drop_has_the_power_asked_for_and_needed_queries_are_the_fewest(evals, candidate, metric):
    base = column(evals, "bm25", metric)
    model = drop_model(metric, base, column(evals, candidate, metric) if candidate else None)
    mde = detectable(model, base.size, ALPHA, 0.8)
    assert 0.0 < mde < 0.2
    assert power_normal(model, base.size, mde, ALPHA) == pytest.approx(0.8, abs=1e-6)
    need = needed_normal(model, 0.03, ALPHA)
    assert need is not None
    assert power_normal(model, need, 0.03, ALPHA) >= 0.8 > power_normal(model, need - 1, 0.03, ALPHA)
    sim = needed_simulated(model, 0.03, ALPHA, n_sims=300, n_flips=300, seed=3)
    assert sim is not None
    assert power_simulated(model, sim, 0.03, ALPHA, n_sims=300, n_flips=300, seed=3) >= 0.8
    assert power_simulated(model, int(sim * 0.9), 0.03, ALPHA, n_sims=300, n_flips=300, seed=3) < 0.8


def test_small_drops_reduce_to_the_textbook_formula(evals):
    """(z_(1-alpha/2) + z_power) s / sqrt(n) when the drop is small next to the spread of the changes."""
    base, weak = column(evals, "bm25", "ndcg@10"), column(evals, "bm25_weak", "ndcg@10")
    model = DropModel.from_values(base, weak)
    n = base.size
    textbook = (z_quantile(1 - ALPHA / 2) + z_quantile(0.8)) * float((weak - base).std()) / math.sqrt(n)
    assert detectable(model, n, ALPHA) == pytest.approx(textbook, rel=0.05)
    assert detectable(model, 4 * n, ALPHA) == pytest.approx(detectable(model, n, ALPHA) / 2, rel=0.05)


def test_a_candidate_that_changed_nothing_falls_back_to_lost_queries(evals):
    base = column(evals, "bm25", "recall@5")
    assert DropModel.from_values(base, base.copy()).kind == "lost"
    assert drop_model("recall@5", np.zeros(50)).possible(0.01) is False
    assert math.isnan(detectable(drop_model("recall@5", np.zeros(50)), 50, ALPHA))
    assert needed_normal(drop_model("recall@5", base), 0.9, ALPHA) is None  # more than everything there is


def test_plan_reads_the_gates_and_uses_their_limits(evals):
    crit = load_criteria(CRITERIA)
    plan = plan_criteria(crit, evals["bm25"], evals["bm25_weak"], n_sims=200, n_flips=200)
    assert [m.gate for m in plan.metrics] == [g.name for g in crit.gates]
    for m, g in zip(plan.metrics, crit.gates, strict=True):
        base, weak = column(evals, "bm25", g.metric), column(evals, "bm25_weak", g.metric)
        assert (m.n, m.model, m.limit, m.effect) == (300, "paired", g.limits.regression_max, g.limits.regression_max)
        assert m.observed == pytest.approx(float((weak - base).mean()))
        assert m.detectable == pytest.approx(detectable(DropModel.from_values(base, weak), 300, crit.alpha))
        assert m.sees_limit == (m.detectable <= g.limits.regression_max)
    with pytest.raises(InputError, match="positive drop"):
        plan_criteria(crit, evals["bm25"], effect=0.0)


# -- the command ------------------------------------------------------------------------------------------
def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", "--simulations", "200", "--flips", "200", *args])


def test_cli_plan_prints_detectable_drops_and_queries_needed_for_the_scifact_criteria(results_dir, tmp_path):
    out = tmp_path / "plan.json"
    res = _plan(
        "--criteria",
        str(CRITERIA),
        "--baseline",
        str(results_dir),
        "--baseline-system",
        "bm25",
        "--candidate",
        str(results_dir),
        "--candidate-system",
        "bm25_weak",
        "--json",
        str(out),
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert [m["metric"] for m in data["metrics"]] == ["recall@5", "mrr@10", "ndcg@10"]
    recall = data["metrics"][0]
    assert recall["model"] == "paired" and recall["n"] == 300
    mde = f"{100 * recall['detectable']:.1f} pp"
    assert f"retrieval_recall_at_5 (recall@5): this gold set detects a drop of {mde}; the limit is 1.0 pp" in res.output
    assert f"{recall['needed_normal']:,} / {recall['needed_simulated']:,}" in res.output
    assert recall["needed_normal"] > 300 and recall["sees_limit"] is False
    # MRR and nDCG are scores, not shares: their sizes read as absolute decimals, never percentage points
    for m in data["metrics"][1:]:
        size, limit = f"{m['detectable']:.3f}", f"{m['limit']:.3f}"
        sentence = f"({fmt.metric_label(m['metric'])}): this gold set detects a drop of {size}; the limit is {limit}"
        assert sentence in res.output
        assert f"| {fmt.metric_label(m['metric'])} | {m['n']:,} | {size} | {limit} |" in res.output
    pp_lines = [line for line in res.output.splitlines() if " pp" in line]
    assert pp_lines and all("recall@5" in line for line in pp_lines)  # percentage points only for the share


def test_cli_plan_without_a_candidate_and_with_a_target_effect(results_dir):
    res = _plan(
        "--criteria", str(CRITERIA), "--baseline", str(results_dir), "--baseline-system", "bm25", "--effect", "0.05"
    )
    assert res.exit_code == 0, res.output
    assert "No candidate was given" in res.output
    # every gate planned for the drop of 0.05 asked for, in its unit: recall@5 in points, MRR and nDCG as decimals
    assert res.output.count("| 5.0 pp |") == 1 and res.output.count("| 0.050 |") == 2


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--baseline-system", "nope"], "unknown system 'nope'"),
        (["--baseline-system", "bm25", "--effect", "-0.01"], "positive drop"),
        ([], "several systems"),
    ],
)
def test_cli_plan_bad_input_exits_2_with_one_message(results_dir, args, words):
    res = _plan("--criteria", str(CRITERIA), "--baseline", str(results_dir), *args)
    assert res.exit_code == 2
    assert words in res.output
    assert "Traceback" not in res.output


def test_gate_comment_shows_the_same_detectable_drop_as_plan(results_dir, tmp_path):
    common = ["--baseline", str(results_dir), "--baseline-system", "bm25"]
    plan = _plan(
        "--criteria",
        str(CRITERIA),
        *common,
        "--candidate",
        str(results_dir),
        "--candidate-system",
        "bm25_weak",
        "--json",
        str(tmp_path / "p.json"),
    )
    assert plan.exit_code == 0, plan.output
    gate = CliRunner().invoke(
        app,
        [
            "gate",
            "--resamples",
            "500",
            "--criteria",
            str(CRITERIA),
            *common,
            "--candidate",
            str(results_dir),
            "--candidate-system",
            "bm25_weak",
            "--comment",
            str(tmp_path / "c.md"),
            "--json",
            str(tmp_path / "g.json"),
        ],
    )
    assert gate.exit_code == 1, gate.output
    comment = (tmp_path / "c.md").read_text()
    gates = json.loads((tmp_path / "g.json").read_text())["gates"]
    for planned, gated in zip(json.loads((tmp_path / "p.json").read_text())["metrics"], gates, strict=True):
        assert gated["detectable"] == pytest.approx(planned["detectable"], abs=1e-12)
        size = f"{100 * gated['detectable']:.1f} pp"
        limit = f"{100 * gated['regression_max']:.1f} pp"
        if not fmt.is_share(gated["metric"]):  # a score (MRR, nDCG): its limit and detectable drop print as decimals
            size, limit = f"{gated['detectable']:.3f}", f"{gated['regression_max']:.3f}"
        assert f"this gold set detects a drop of {size}; the limit is {limit}" in comment
        assert gated["detectable_note"] == f"this gold set detects a drop of {size}; the limit is {limit}"
        assert f"may drop at most {limit} (detectable: {size})" in comment
    assert [g["metric"] for g in gates] == ["recall@5", "mrr@10", "ndcg@10"]  # a share and two scores were checked


def synthetic_llm_qrels(results_dir: Path, path: Path, flip: float, seed: int = 0) -> Path:
    """LLM qrels for BM25's top-10 pool: SciFact's human grade of each pair, a seeded share of them flipped."""
    from retbench.data import Qrels
    from retbench.io.beir import read_beir
    from retbench.io.trec import write_qrels
    from retbench.results import load_results

    human = read_beir(abdata.SCIFACT).split("test")
    run = load_results(results_dir).run("bm25")
    rng = np.random.default_rng(seed)
    judged = {}
    for q in human:
        docs = run.docs(q)[:10]
        flips = rng.random(len(docs)) < flip
        judged[q] = {d: int((human[q].get(d, 0) > 0) != f) for d, f in zip(docs, flips, strict=True)}
    write_qrels(Qrels(judged), path)
    return path


def test_cli_plan_tells_how_many_human_labels_ppi_needs_beside_llm_labels(results_dir, tmp_path):
    needed = {}
    for flip in (0.1, 0.5):
        qrels = synthetic_llm_qrels(results_dir, tmp_path / f"llm_{flip}.txt", flip)
        out = tmp_path / f"plan_{flip}.json"
        res = _plan(
            "--criteria",
            str(CRITERIA),
            "--baseline",
            str(results_dir),
            "--baseline-system",
            "bm25",
            "--llm-qrels",
            str(qrels),
            "--json",
            str(out),
        )
        assert res.exit_code == 0, res.output
        budget = json.loads(out.read_text())["metrics"][1]["ppi"]  # MRR@10
        assert 200 < budget["n_human"] <= 300 and budget["n_human"] <= budget["n_llm"] <= 300
        needed[flip] = budget["needed_unlimited"]
        assert f"PPI needs {_count(budget['needed'])} beside the {budget['n_llm']} LLM-labelled" in res.output
    # a good judge saves human labels; a judge that flips half the grades costs more than it saves
    assert needed[0.1] is not None and needed[0.1] < 150
    assert needed[0.5] is None or needed[0.5] > 300


def _count(n: int | None) -> str:
    return f"{n:,} human labels" if n is not None else "more human labels than any number"


def test_the_gate_against_itself_plans_with_lost_queries(evals):
    from retbench.criteria import parse_criteria
    from retbench.gates import run_gates

    crit = parse_criteria({"gates": [{"name": "r", "metric": "recall@5", "regression_max": 0.03}]})
    ev = evals["bm25"]
    r = run_gates(crit, ev, ev, n_resamples=200).results[0]
    assert r.detectable_model == "lost"
    assert r.detectable == pytest.approx(detectable(drop_model("recall@5", ev.column("recall@5")), 300, 0.05))


def test_cli_plan_reads_run_files_and_refuses_missing_llm_qrels(results_dir, evals, tmp_path):
    runs = results_dir / "systems"
    args = ["--criteria", str(CRITERIA), "--qrels", str(abdata.SCIFACT / "qrels" / "test.tsv")]
    res = _plan(
        *args, "--baseline", str(runs / "bm25" / "run.trec"), "--candidate", str(runs / "bm25_weak" / "run.trec")
    )
    assert res.exit_code == 0, res.output
    base, weak = column(evals, "bm25", "recall@5"), column(evals, "bm25_weak", "recall@5")
    mde = detectable(DropModel.from_values(base, weak), base.size, ALPHA)  # as scored in the results directory
    assert f"this gold set detects a drop of {100 * mde:.1f} pp; the limit is 1.0 pp" in res.output
    res = _plan(*args, "--baseline", str(runs / "bm25" / "run.trec"), "--llm-qrels", str(tmp_path / "none.txt"))
    assert res.exit_code == 2 and "none.txt" in res.output


def test_cli_plan_says_how_many_labelled_queries_would_separate_the_first_two_systems(results_dir, evals):
    res = _plan("--criteria", str(CRITERIA), "--baseline", str(results_dir), "--baseline-system", "bm25")
    assert res.exit_code == 0, res.output
    metric = "recall@5"  # the criteria's first gated metric
    means = {s: ev.mean(metric) for s, ev in evals.items()}
    first, second = sorted(means, key=lambda s: -means[s])[:2]
    n = queries_to_separate(evals[first].column(metric), evals[second].column(metric))
    assert n is not None and n > 0
    assert (
        f"first two on {metric}: {first} ({means[first]:.4f}) and {second} ({means[second]:.4f}); "
        f"a paired test at 80% power separates them with about {n:,} labelled queries (these results have 300)."
    ) in res.output
