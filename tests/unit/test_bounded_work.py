"""Every count a person types that sets how much work is done has a stated upper bound, and out-of-range integers
are one message naming the setting (never NumPy's OverflowError, never minutes of work).

- resamples (compare, gate, report, the Python API): at most `stats.MAX_RESAMPLES`, the reason in `--help`;
- plan: its search for the labelled queries needed simulates nothing past `power.MAX_QUERIES` (the normal
  approximation answers there), its simulations and flips are bounded, and its sentences read as English
  whatever the count;
- evaluation settings (`-l`, `-M`, `-N`, `relevance_level=`): whole numbers within the range judging can use.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import abdata
import retbench.power as power
from repo_paths import CONFIGS
from retbench.api import compare
from retbench.cli import app
from retbench.errors import ConfigError, InputError
from retbench.evaluation import evaluate
from retbench.io.frames import as_qrels, as_run
from retbench.stats.paired import MAX_RESAMPLES, bootstrap_cis, randomization_tests

CRITERIA = CONFIGS / "ship-criteria-scifact.yaml"
QRELS = {"q1": {"d1": 1}, "q2": {"d3": 2}}
RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    return abdata.scifact_results(tmp_path_factory.getbasetemp())


# -- resamples -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["compare", "gate", "report"])
def test_every_resamples_option_states_its_bound_and_why_in_the_help(command):
    res = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert res.exit_code == 0
    text = " ".join(res.output.split())
    assert f"At most {MAX_RESAMPLES:,}: a randomization p cannot go below 1 / (resamples + 1)" in text


@pytest.mark.parametrize("command", ["compare", "report"])
def test_too_many_resamples_is_refused_before_any_work_naming_the_option(results_dir, command):
    res = CliRunner().invoke(app, [command, str(results_dir), "--resamples", str(MAX_RESAMPLES + 1)])
    assert res.exit_code == 2
    assert f"error: --resamples: at most {MAX_RESAMPLES:,} resamples (got {MAX_RESAMPLES + 1:,})" in res.output


def test_the_python_entry_points_hold_the_same_bound_and_refuse_a_negative_seed():
    deltas = [np.array([0.1, -0.2, 0.3])]
    for test in (randomization_tests, bootstrap_cis):
        with pytest.raises(InputError, match="at most 1,000,000 resamples"):
            test(deltas, 10**8)
        with pytest.raises(InputError, match="seed is a whole number >= 0"):
            test(deltas, 100, -1)
    with pytest.raises(InputError, match="at most 1,000,000 resamples"):
        compare({"a": RUN, "b": RUN}, QRELS, ["mrr"], n_resamples=10**8)


# -- evaluation settings -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("relevance_level", 10**400, "relevance level must be a whole number from 1 to 2,147,483,647"),
        ("relevance_level", float("inf"), "relevance level must be a whole number from 1 to 2,147,483,647, got inf"),
        ("max_docs", 10**20, "max_docs must be a whole number from 1 to 2,147,483,647"),
        ("max_docs", float("nan"), "max_docs must be a whole number"),
        ("collection_size", 10**30, "collection_size must be a whole number from 1 to 9,007,199,254,740,992"),
    ],
)
def test_an_integer_setting_out_of_its_usable_range_is_one_config_error(setting, value, words):
    run, qrels = as_run(RUN), as_qrels(QRELS)
    with pytest.raises(ConfigError, match=words) as err:
        evaluate(run, qrels, ["ndcg@10"], **{setting: value})
    assert err.value.field == setting and len(str(err.value)) < 200  # a 400-digit number is not echoed whole


@pytest.mark.parametrize("option", ["-M", "-l", "-N"])
def test_eval_with_a_twenty_digit_integer_option_exits_2_with_one_message(tmp_path, option):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("q1 0 d1 1\n")
    run.write_text("q1 Q0 d1 1 2.0 s\nq1 Q0 d2 2 1.0 s\n")
    res = CliRunner().invoke(app, ["eval", str(qrels), str(run), option, "99999999999999999999"])
    assert res.exit_code == 2, res.output
    assert not isinstance(res.exception, OverflowError)
    assert "must be a whole number from 1 to" in res.output


# -- plan ----------------------------------------------------------------------------------------------------
def _plan(results_dir, *args: str):
    return CliRunner().invoke(
        app,
        ["plan", "--criteria", str(CRITERIA), "--baseline", str(results_dir), "--baseline-system", "bm25", *args],
    )


def test_a_tiny_target_drop_simulates_nothing_past_the_bound_and_says_more_than_it(results_dir, tmp_path, monkeypatch):
    sizes: list[int] = []
    real = power.power_simulated

    def recorded(model, n, *args, **kwargs):  # the real simulation, with the sizes it was asked for kept
        sizes.append(n)
        return real(model, n, *args, **kwargs)

    monkeypatch.setattr(power, "power_simulated", recorded)
    out = tmp_path / "plan.json"
    res = _plan(results_dir, "--effect", "1e-12", "--simulations", "100", "--flips", "100", "--json", str(out))
    assert res.exit_code == 0, res.output
    assert all(n <= power.MAX_QUERIES for n in sizes)  # the search asks the simulation for no more
    data = json.loads(out.read_text())
    assert data["simulation"]["max_queries"] == power.MAX_QUERIES
    for m in data["metrics"]:
        assert m["needed_normal"] > power.MAX_QUERIES and m["needed_simulated"] is None
        assert f"{m['needed_normal']:,} / more than {power.MAX_QUERIES:,} |" in res.output
    assert "not reachable" not in res.output


def test_a_drop_the_model_cannot_make_reads_as_a_sentence(results_dir):
    res = _plan(results_dir, "--effect", "0.99", "--simulations", "50", "--flips", "50")
    assert res.exit_code == 0, res.output
    assert "about not reachable" not in res.output and "not reachable" not in res.output
    assert "(no number of labelled queries would detect a drop of 99.0 pp: the model of the data has no drop" in (
        res.output
    )
    assert "| none / none |" in res.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--simulations", "100001"], "simulations must be a whole number from 1 to 10,000"),
        (["--flips", "0"], "flips must be a whole number from 1 to 2,000"),
        (["--flips", "2001"], "flips must be a whole number from 1 to 2,000"),
        (["--seed", "-3"], "a seed is a whole number >= 0"),
    ],
)
def test_plan_refuses_unbounded_or_invalid_simulation_settings(results_dir, args, words):
    res = _plan(results_dir, *args)
    assert res.exit_code == 2 and words in res.output, res.output
