"""Ship-criteria gates: parsing with located errors, verdicts and exit codes, the PR comment, the CLI."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import abdata
from repo_paths import CONFIGS, ROOT, V1_RESULTS
from retbench.cli import app
from retbench.criteria import load_criteria, parse_criteria
from retbench.errors import ConfigError
from retbench.gates import run_gates
from retbench.report.gate_comment import gate_json, render_comment, sentence
from retbench.stats.paired import randomization_test


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    return abdata.evaluations(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


def criteria(*gates: dict, **top) -> object:
    return parse_criteria({"gates": list(gates), **top})


def gate(metric="recall@5", threshold=None, regression_max=None, severity="error", **kw) -> dict:
    g = {"name": kw.pop("name", f"g_{metric}"), "metric": metric, "severity": severity, **kw}
    if threshold is not None:
        g["threshold"] = threshold
    if regression_max is not None:
        g["regression_max"] = regression_max
    return g


def length_groups(evals) -> dict[str, list[str]]:
    """Real tags: SciFact claims split by their length in words."""
    from retbench.io.beir import read_queries

    q = read_queries(abdata.SCIFACT / "queries.jsonl.gz")
    ids = evals["bm25"].query_ids
    return {"short": [i for i in ids if len(q[i].split()) <= 10], "long": [i for i in ids if len(q[i].split()) > 10]}


# -- the criteria file -------------------------------------------------------------------------------
def ranked_at(ranks: list[int], system: str):
    """A real evaluation where query i has one relevant document, retrieved at rank ranks[i] (0: not at all)."""
    from retbench.data import Qrels, Run
    from retbench.evaluation import evaluate

    qrels = {f"q{i}": {"rel": 1} for i in range(len(ranks))}
    run = {}
    for i, rank in enumerate(ranks):
        docs = [f"d{j}" for j in range(10)]
        if rank:
            docs[rank - 1] = "rel"
        run[f"q{i}"] = {d: float(10 - j) for j, d in enumerate(docs)}
    return evaluate(Run.from_dict(run), Qrels(qrels), ["recall@5", "mrr@10"], system=system)


def test_shipped_criteria_block_below_85_percent_recall_or_a_3_point_drop_and_only_warn_on_mrr():
    """configs/ship-criteria.yaml through the gate: recall@5 blocks (floor 0.85, drop 0.03), MRR@10 warns (0.62)."""
    crit = load_criteria(CONFIGS / "ship-criteria.yaml")

    def verdict(cand: list[int], base: list[int] | None = None) -> tuple[int, str]:
        rep = run_gates(crit, ranked_at(cand, "cand"), ranked_at(base, "base") if base else None, n_resamples=200)
        return rep.exit_code, rep.verdict

    top = [1] * 100
    # recall@5 of 0.86 / 0.84 against an equal baseline, MRR@10 well above 0.62 (hits at rank 1): the floor decides
    assert verdict([1] * 86 + [0] * 14, [1] * 86 + [0] * 14)[0] == 0
    assert verdict([1] * 84 + [0] * 16, [1] * 84 + [0] * 16) == (1, "fail")
    # above the floor, a 2 point drop from the baseline passes and a 4 point drop blocks
    assert verdict([1] * 90 + [0] * 10, [1] * 92 + [0] * 8)[0] == 0
    assert verdict([1] * 90 + [0] * 10, [1] * 94 + [0] * 6) == (1, "fail")
    # every hit at rank 5: recall@5 = 1.0 but MRR@10 = 0.2, far below 0.62 and down from 1.0: a warning only
    assert verdict([5] * 100, top) == (0, "warn")


def test_shipped_scifact_criteria_pass_bm25_against_itself_and_block_the_weak_variant(evals):
    """configs/ship-criteria-scifact.yaml sets floors BM25 meets on SciFact (recall@5 about 0.74); the ADR's do not."""
    base = evals["bm25"]
    scifact = load_criteria(CONFIGS / "ship-criteria-scifact.yaml")
    assert run_gates(scifact, base, base, n_resamples=200).exit_code == 0
    assert run_gates(load_criteria(CONFIGS / "ship-criteria.yaml"), base, base, n_resamples=200).exit_code == 1
    weak = run_gates(scifact, evals["bm25_weak"], base, n_resamples=200)
    assert weak.exit_code == 1 and not weak.results[0].passed


def test_adr_gate_names_resolve_through_the_registry(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "gates:\n  - name: retrieval_recall_at_5\n    threshold: 0.85\n  - name: retrieval_mrr\n    threshold: 0.6\n"
        "  - name: seed\n    metric: retrieval-recall-at-k\n    threshold: 0.5\n"
    )
    assert [g.metric for g in load_criteria(path).gates] == ["recall@5", "mrr", "recall@5"]


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (
            "gates:\n  - name: a\n    metric: recal@5\n    threshold: 0.8\n",
            3,
            "gates[0].metric",
            "unknown metric 'recal@5'",
        ),
        (
            "gates:\n  - name: a\n    metric: recall@5\n    threshold: 0.8\n    severity: fatal\n",
            5,
            "gates[0].severity",
            "'error' or 'warning'",
        ),
        ("gates:\n  - name: a\n    metric: recall@5\n    threshold: -1\n", 4, "gates[0].threshold", ">= 0"),
        ("gates:\n  - name: a\n    metric: recall@5\n", 2, "gates[0]", "needs a threshold or a regression_max"),
        (
            "gates:\n  - name: a\n    metric: recall@5\n    treshold: 0.8\n",
            4,
            "gates[0].treshold",
            "unknown key 'treshold'",
        ),
        ("gates: []\n", 1, "gates", "at least one gate"),
        ("gates:\n  - name: a\n    metric: [recall@5\n", 4, None, "malformed YAML"),
    ],
)
def test_bad_criteria_name_file_line_and_field(tmp_path, text, line, field, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_criteria(path)
    assert err.value.path == str(path)
    assert err.value.line == line
    assert err.value.field == field
    assert words in str(err.value)
    assert err.value.exit_code == 2


# -- verdicts ------------------------------------------------------------------------------------------
def test_better_baseline_fails_the_error_gate_and_the_comment_names_the_drop(evals):
    base, cand = evals["bm25"], evals["bm25_weak"]
    rep = run_gates(criteria(gate("recall@5", 0.70, 0.01)), cand, base, n_resamples=2000)
    r = rep.results[0]
    assert r.baseline == pytest.approx(base.mean("recall@5"))
    assert r.candidate == pytest.approx(cand.mean("recall@5"))
    assert r.delta == pytest.approx(r.candidate - r.baseline) and r.delta < -0.01
    assert r.p == randomization_test(cand.column("recall@5") - base.column("recall@5"), 2000, 0)
    assert not r.passed and r.blocks
    assert rep.exit_code == 1 and rep.verdict == "fail"
    text = render_comment(rep)
    expected = f"g_recall@5 (recall@5) dropped from {100 * r.baseline:.1f}% to {100 * r.candidate:.1f}% ({100 * r.delta:+.1f} pp, p = "
    assert expected in text
    assert "blocks merge" in text.splitlines()[0]
    assert "exceeds the 1.0 pp allowed" in text


def test_same_system_passes_and_floor_alone_can_fail(evals):
    ev = evals["bm25"]
    ok = run_gates(criteria(gate("recall@5", 0.70, 0.01)), ev, ev, n_resamples=500)
    assert ok.exit_code == 0 and ok.verdict == "pass"
    assert "unchanged at" in sentence(ok.results[0]) and "p = 1.00" in sentence(ok.results[0])
    floor = run_gates(criteria(gate("recall@5", 0.80)), ev, None)
    assert floor.exit_code == 1
    assert sentence(floor.results[0]) == f"g_recall@5 (recall@5) is {100 * ev.mean('recall@5'):.1f}%: blocks merge"
    assert "below the 80.0% floor" in render_comment(floor)


def test_failing_warning_gate_does_not_block(evals):
    rep = run_gates(
        criteria(gate("recall@5", 0.5, 0.5), gate("mrr@10", 0.9, severity="warning")),
        evals["bm25_weak"],
        evals["bm25"],
        n_resamples=500,
    )
    assert [r.passed for r in rep.results] == [True, False]
    assert rep.exit_code == 0 and rep.verdict == "warn"
    text = render_comment(rep)
    assert "passes with warnings" in text.splitlines()[0]
    assert "warning, does not block merge" in text


def test_require_significance_lets_a_noisy_drop_pass(evals):
    base, cand = evals["bm25"], evals["bm25_nostem"]
    drop = base.mean("recall@5") - cand.mean("recall@5")
    p = randomization_test(cand.column("recall@5") - base.column("recall@5"), 2000, 0)
    assert drop > 0.01 and p > 0.05  # a 1.7 pp drop on 300 queries that is not significant
    strict = run_gates(criteria(gate("recall@5", regression_max=0.01)), cand, base, n_resamples=2000)
    lenient = run_gates(
        criteria(gate("recall@5", regression_max=0.01, require_significance=True)), cand, base, n_resamples=2000
    )
    assert strict.exit_code == 1
    assert lenient.exit_code == 0
    assert "not statistically significant" in render_comment(lenient)


def test_tag_breakdown_and_per_tag_floor(evals):
    groups = length_groups(evals)
    base, cand = evals["bm25"], evals["bm25_weak"]
    short_mean = float(np.mean([cand.column("recall@5")[cand.query_ids.index(q)] for q in groups["short"]]))
    crit = criteria(gate("recall@5", 0.5, tags={"short": {"threshold": short_mean + 0.01}}))
    rep = run_gates(crit, cand, base, groups=groups, n_resamples=500)
    rows = {t.tag: t for t in rep.results[0].tags}
    assert rows["short"].n + rows["long"].n == 300
    assert rows["short"].candidate == pytest.approx(short_mean)
    assert rep.exit_code == 1
    assert f"on tag `short`: {100 * short_mean:.1f}% is below the" in render_comment(rep)
    assert "by tag (2 tags" in render_comment(rep)


def test_unusable_criteria_are_config_errors(evals):
    with pytest.raises(ConfigError, match="need a baseline"):
        run_gates(criteria(gate("recall@5", regression_max=0.03)), evals["bm25"], None)
    with pytest.raises(ConfigError, match=r"needs metric 'P@5'.*does not have"):
        run_gates(criteria(gate("P@5", 0.1)), evals["bm25"], None)
    with pytest.raises(ConfigError, match="no query has that tag"):
        run_gates(criteria(gate("recall@5", 0.1, tags={"multi_hop": {"threshold": 0.5}})), evals["bm25"], None)


def test_json_output_is_strict_json(evals):
    rep = run_gates(criteria(gate("recall@5", 0.7, 0.01)), evals["bm25_weak"], evals["bm25"], n_resamples=200)
    data = json.loads(json.dumps(gate_json(rep), allow_nan=False))
    assert data["verdict"] == "fail" and data["exit_code"] == 1
    assert data["gates"][0]["message"].startswith("g_recall@5 (recall@5) dropped from")
    assert data["candidate"] == {"system": "bm25_weak", "queries": 300, "answered": 300, "failed": 0, "missing": 0}


def test_comment_and_json_keep_each_gates_own_name_and_print_scores_as_decimals(evals):
    crit = criteria(
        gate("recall@5", 0.99, name="recall_at_5"),
        gate("recall@5", 0.1, name="recall_floor"),
        gate("mrr@10", 0.99, name="mrr"),
        gate("ndcg@10", 0.99, 0.001, name="ndcg10"),
    )
    rep = run_gates(crit, evals["bm25_weak"], evals["bm25"], n_resamples=200)
    text = render_comment(rep)
    mrr = evals["bm25_weak"].mean("mrr@10")
    ndcg_delta = evals["bm25_weak"].mean("ndcg@10") - evals["bm25"].mean("ndcg@10")
    assert "recall_at_5 (recall@5) dropped" in text and "| recall_floor (recall@5) (error) |" in text
    assert f"| mrr (MRR@10) (error) | {evals['bm25'].mean('mrr@10'):.3f} | {mrr:.3f} |" in text
    assert f"ndcg10 (nDCG@10) dropped from {evals['bm25'].mean('ndcg@10'):.3f}" in text
    assert f"({ndcg_delta:+.3f}, p = " in text and "may drop at most 0.001" in text
    assert f"{100 * mrr:.1f}%" not in text and "retrieval recall@5" not in text
    data = gate_json(rep)
    assert [g["label"] for g in data["gates"]] == [
        "recall_at_5 (recall@5)",
        "recall_floor (recall@5)",
        "mrr (MRR@10)",
        "ndcg10 (nDCG@10)",
    ]
    assert [g["message"].split(" ")[0] for g in data["gates"]] == ["recall_at_5", "recall_floor", "mrr", "ndcg10"]


# -- CLI -------------------------------------------------------------------------------------------------
def _gate(*args: str):
    return CliRunner().invoke(app, ["gate", "--resamples", "1000", *args])


def test_cli_gate_fails_with_exit_1_and_writes_comment_and_json(results_dir, tmp_path, evals):
    qfile = tmp_path / "queries.jsonl"
    groups = length_groups(evals)
    from retbench.io.beir import read_queries

    q = read_queries(abdata.SCIFACT / "queries.jsonl.gz")
    with open(qfile, "w") as fh:
        for tag, ids in groups.items():
            for i in ids:
                fh.write(json.dumps({"_id": i, "text": q[i], "metadata": {"tags": [tag]}}) + "\n")
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria-scifact.yaml"),
        "--baseline",
        str(results_dir),
        "--baseline-system",
        "bm25",
        "--candidate",
        str(results_dir),
        "--candidate-system",
        "bm25_weak",
        "--queries",
        str(qfile),
        "--comment",
        str(tmp_path / "c.md"),
        "--json",
        str(tmp_path / "g.json"),
    )
    assert res.exit_code == 1, res.output
    comment = (tmp_path / "c.md").read_text()
    assert "retrieval_recall_at_5 (recall@5) dropped from 73.6% to 70.8%" in comment
    assert "`short`" in comment and "`long`" in comment
    assert json.loads((tmp_path / "g.json").read_text())["verdict"] == "fail"


def test_cli_gate_passes_with_exit_0(results_dir, tmp_path):
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria-scifact.yaml"),
        "--baseline",
        str(results_dir),
        "--baseline-system",
        "bm25_weak",
        "--candidate",
        str(results_dir),
        "--candidate-system",
        "bm25",
    )
    assert res.exit_code == 0, res.output
    assert "Retrieval quality gate: passes" in res.output


def test_cli_gate_run_files(results_dir):
    runs = results_dir / "systems"
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria-scifact.yaml"),
        "--baseline",
        str(runs / "bm25" / "run.trec"),
        "--candidate",
        str(runs / "bm25_weak" / "run.trec"),
        "--qrels",
        str(abdata.SCIFACT / "qrels" / "test.tsv"),
    )
    assert res.exit_code == 1, res.output
    assert "retrieval_recall_at_5 (recall@5) dropped from 73.6% to 70.8%" in res.output


def test_cli_gate_bad_criteria_exit_2(results_dir, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("gates:\n  - name: x\n    metric: ndcg@7\n    threshold: 0.5\n")
    res = _gate("--criteria", str(bad), "--candidate", str(results_dir), "--candidate-system", "bm25")
    assert res.exit_code == 2
    assert "ndcg@7" in res.output and "does not have" in res.output
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria.yaml"),
        "--candidate",
        str(results_dir),
        "--candidate-system",
        "bm25",
    )
    assert res.exit_code == 2 and "need a baseline" in res.output
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria.yaml"),
        "--candidate",
        str(results_dir),
        "--baseline",
        str(tmp_path / "nowhere"),
    )
    assert res.exit_code == 2 and "nowhere" in res.output


def test_cli_gate_backend_failures_exit_3(tmp_path_factory, tmp_path):
    slice_dir = abdata.pytrec_results(tmp_path_factory.getbasetemp())
    status = (slice_dir / "systems" / "flaky" / "status.jsonl").read_text().splitlines()
    failed = sum(json.loads(line)["status"] == "error" for line in status)
    assert failed > 0
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria-scifact.yaml"),
        "--baseline",
        str(slice_dir),
        "--baseline-system",
        "bm25",
        "--candidate",
        str(slice_dir),
        "--candidate-system",
        "flaky",
        "--comment",
        str(tmp_path / "c.md"),
    )
    assert res.exit_code == 3, res.output
    assert f"failed on {failed} of 100 queries" in (tmp_path / "c.md").read_text()
    assert "backend failure" in res.output


def test_example_ci_workflow_uses_real_options():
    import re

    import click
    import yaml

    from retbench.cli import app as typer_app

    wf = yaml.safe_load((ROOT / "examples" / "ci" / "retbench-gate.yml").read_text())
    steps = wf["jobs"]["retrieval-gate"]["steps"]
    scripts = "\n".join(s.get("run", "") for s in steps).replace("\\\n", " ")
    group = typer_app if isinstance(typer_app, click.Group) else __import__("typer").main.get_command(typer_app)
    for command in ("run", "gate"):
        line = next(ln for ln in scripts.splitlines() if f"retbench {command} " in ln)
        known = {o for p in group.commands[command].params for o in getattr(p, "opts", [])}
        used = set(re.findall(r"(--[a-z][a-z-]*)", line))
        assert used and used <= known, (command, used - known)
    env = wf["env"]
    assert (ROOT / env["EXPERIMENT"]).is_file() and (ROOT / env["CRITERIA"]).is_file()
    assert load_criteria(ROOT / env["CRITERIA"]).gates
    systems = [s["name"] for s in yaml.safe_load((ROOT / env["EXPERIMENT"]).read_text())["systems"]]
    assert env["SYSTEM"] in systems


def test_gate_counts_unanswered_queries_as_zero_even_in_pytrec_mode(tmp_path_factory):
    from retbench.results import load_results

    res = load_results(abdata.pytrec_results(tmp_path_factory.getbasetemp()))
    base, cand = res.evaluation("bm25"), res.evaluation("flaky")
    assert cand.mode == "pytrec_eval" and len(cand.query_ids) < 100  # failed queries are not in its table
    rep = run_gates(criteria(gate("recall@5", 0.5)), cand, base, n_resamples=200)
    assert rep.results[0].candidate == pytest.approx(cand.column("recall@5").sum() / 100)
    assert rep.results[0].candidate < cand.mean("recall@5")
    assert rep.exit_code == 3 and len(rep.failures) == 100 - len(cand.query_ids)
    assert "still counts every judged query" in render_comment(rep)


def test_cli_gate_same_system_in_two_results_dirs_like_ci(results_dir, tmp_path):
    current = tmp_path / "current"
    current.symlink_to(results_dir, target_is_directory=True)
    res = _gate(
        "--criteria",
        str(CONFIGS / "ship-criteria-scifact.yaml"),
        "--baseline",
        str(results_dir),
        "--baseline-system",
        "bm25",
        "--candidate",
        str(current),
        "--candidate-system",
        "bm25",
        "--json",
        str(tmp_path / "g.json"),
    )
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["candidate"]["system"] == data["baseline"]["system"] == "bm25"
    assert all(g["delta"] == 0.0 and g["p"] == 1.0 for g in data["gates"])


# -- different data, out-of-range thresholds ---------------------------------------------------------------
@pytest.fixture(scope="module")
def other_data_dir(tmp_path_factory):
    """BM25 on another slice of SciFact (100 queries, 1,000 sampled documents): other corpus, other qrels."""
    return abdata.pytrec_results(tmp_path_factory.getbasetemp())


def test_gate_refuses_a_baseline_computed_on_different_data_unless_allowed(results_dir, other_data_dir):
    args = ["--criteria", str(CONFIGS / "ship-criteria-scifact.yaml"), "--candidate", str(other_data_dir)]
    args += ["--candidate-system", "bm25", "--baseline", str(results_dir), "--baseline-system", "bm25"]
    res = _gate(*args)
    assert res.exit_code == 2
    assert "different data" in res.output and "--allow-different-data" in res.output
    assert "corpus" in res.output and "qrels" in res.output and "Traceback" not in res.output
    # the slice is counted in pytrec_eval mode, whose default no-relevant policy (zero) differs from trec_eval's
    res = _gate(*args, "--allow-different-data", "--allow-different-settings")
    assert res.exit_code in (0, 1) and "note: --allow-different-data" in res.output


def test_compare_refuses_results_on_different_data_unless_allowed(results_dir, other_data_dir):
    args = ["compare", str(results_dir), str(other_data_dir), "--systems", "bm25", "--resamples", "200"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "different data" in res.output
    res = CliRunner().invoke(app, [*args, "--allow-different-data", "--allow-different-settings"])  # modes differ too
    assert res.exit_code == 0 and "note: --allow-different-data" in res.output


def test_compare_checks_a_run_file_scored_on_other_qrels_against_a_results_directory(results_dir, tmp_path):
    run_file = results_dir / "systems" / "bm25" / "run.trec"
    qrels = abdata.SCIFACT / "qrels" / "test.tsv"
    args = ["compare", str(results_dir), str(run_file), "--systems", "bm25", "--resamples", "200"]
    same = CliRunner().invoke(app, [*args, "--qrels", str(qrels)])
    assert same.exit_code == 0, same.output  # the directory's own qrels: nothing to say
    assert "different data" not in same.output
    lines = qrels.read_text().splitlines()
    (tmp_path / "fewer.tsv").write_text("\n".join(lines[: len(lines) // 2]) + "\n")  # half the judgements
    other = CliRunner().invoke(app, [*args, "--qrels", str(tmp_path / "fewer.tsv")])
    assert other.exit_code == 2 and "different data" in other.output, other.output
    assert "scored on --qrels" in other.output and "Traceback" not in other.output


@pytest.mark.parametrize(
    "limits, words",
    [
        ({"threshold": 85}, "outside the metric's range [0, 1] (write 0.85, not 85)"),
        ({"threshold": 1.5}, "outside the metric's range"),
        ({"regression_max": 2}, "larger than the metric's whole range"),
    ],
)
def test_a_threshold_outside_the_metrics_range_is_a_config_error(limits, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        criteria(gate("recall@5", **limits))
    with pytest.raises(ConfigError, match=r"tags\.short"):
        criteria(gate("ndcg@10", 0.5, tags={"short": limits}))


# -- the Python API: the same flow as the CLI ------------------------------------------------------------
def test_retbench_gate_gives_the_cli_verdict_json_on_the_same_inputs(results_dir, tmp_path):
    import retbench

    crit, args = CONFIGS / "ship-criteria-scifact.yaml", {"baseline_system": "bm25", "candidate_system": "bm25_weak"}
    options = [f"--{k.replace('_', '-')}={v}" for k, v in args.items()]
    res = _gate(f"--criteria={crit}", f"--baseline={results_dir}", f"--candidate={results_dir}", *options,
                f"--json={tmp_path / 'cli.json'}")  # fmt: skip
    assert res.exit_code == 1, res.output
    done = retbench.gate(crit, results_dir, results_dir, n_resamples=1000, record=False, **args)
    assert done.exit_code == 1 and done.verdict == "fail"
    assert gate_json(done.report) == json.loads((tmp_path / "cli.json").read_text())


def test_retbench_gate_resolves_a_history_baseline_and_records_the_verdict(results_dir, tmp_path):
    import shutil

    import retbench
    from retbench.results import read_results
    from retbench.results.history import register

    history = tmp_path / "history.sqlite"
    first, second = tmp_path / "first", tmp_path / "second"
    for where in (first, second):
        shutil.copytree(results_dir, where)
    crit = CONFIGS / "ship-criteria-scifact.yaml"
    register(read_results(first), path=history)
    said: list[str] = []
    one = retbench.gate(
        crit,
        first,
        "history:last-pass",
        candidate_system="bm25",
        history_file=history,
        n_resamples=500,
        note=said.append,
    )
    assert one.verdict == "pass" and one.report.baseline is None  # the project's first gate: thresholds only
    assert said == one.notes and "this gate checks thresholds only" in one.notes[0]
    assert one.recorded_on is not None and one.notes[-1] == f"history: bm25 pass recorded on run {one.recorded_on}"
    later = register(read_results(second), path=history).run_id
    two = retbench.gate(
        crit, second, "history:last-pass", candidate_system="bm25", history_file=history, n_resamples=500
    )
    assert two.report.baseline == "bm25" and two.notes[0].startswith(f"baseline: history run {one.recorded_on} of ")
    assert two.recorded_on == later


def test_a_system_that_failed_as_a_whole_is_left_out_of_a_gate_on_its_folder_and_refused_by_name(tmp_path):
    crit = tmp_path / "c.yaml"
    crit.write_text("gates:\n  - {name: r, metric: recall@5, threshold: 0.5, regression_max: 0.1}\n")
    common = ["--criteria", str(crit), "--candidate", str(V1_RESULTS), "--baseline", str(V1_RESULTS)]
    ok = _gate(*common, "--candidate-system", "plain", "--baseline-system", "bm25")
    assert ok.exit_code == 0, ok.output
    named = _gate(*common, "--candidate-system", "broken", "--baseline-system", "bm25")
    assert named.exit_code == 2 and "system 'broken' failed as a whole: BackendError" in named.output


def test_a_failure_on_a_query_without_relevant_documents_is_not_counted_of_the_judged_total(evals):
    """The comment's header once read "failed on 5 of 4 queries": failures count every query asked, the total
    only the judged ones. A failure outside the judged queries is said apart."""
    cand = evals["bm25"]
    rep = run_gates(criteria(gate("recall@5", 0.1)), cand, failures={"asked-but-not-judged": "error"}, n_resamples=200)
    assert rep.backend_failed and rep.candidate_counts["failed"] == 0
    head = render_comment(rep).splitlines()[0]
    assert head.endswith(f"failed on 1 query (0 of the {len(cand.query_ids)} judged ones)"), head


def test_a_gate_on_holes_caps_them_and_passes_when_they_fall(results_dir, tmp_path):
    """holes@10 is lower-is-better: its threshold is a ceiling ('at most') and a fall is no regression."""
    from retbench.data import Run
    from retbench.evaluation import evaluate
    from retbench.io.beir import read_qrels_tsv
    from retbench.io.trec import read_run

    qrels, _ = read_qrels_tsv(abdata.SCIFACT / "qrels" / "test.tsv")
    run = read_run(results_dir / "systems" / "bm25" / "run.trec")
    qids = [q for q in run.query_ids if q in qrels]
    # the same documents with the judged ones moved to the top: fewer holes in every top 10
    fewer = {q: {d: (1000.0 if d in qrels[q] else 0.0) + s for d, s in run.ranking(q)} for q in qids}
    base = evaluate(run, qrels.subset(qids), ["holes@10"])
    cand = evaluate(Run.from_dict(fewer), qrels.subset(qids), ["holes@10"])
    assert cand.mean("holes@10") < base.mean("holes@10") - 0.005
    ceiling = (base.mean("holes@10") + cand.mean("holes@10")) / 2
    rep = run_gates(criteria(gate("holes@10", ceiling, 0.005)), cand, base, n_resamples=500)
    assert rep.exit_code == 0 and rep.results[0].passed, render_comment(rep)
    text = render_comment(rep)
    assert f"at most {100 * ceiling:.1f}%, may rise at most 0.5 pp" in text and "at least 9" not in text
    worse = run_gates(criteria(gate("holes@10", ceiling, 0.005)), base, cand, n_resamples=500)
    assert worse.exit_code == 1
    assert f"above the {100 * ceiling:.1f}% ceiling" in render_comment(worse)
    assert "the rise of" in render_comment(worse)
