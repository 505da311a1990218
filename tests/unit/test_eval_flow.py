"""`retbench eval`'s flow is a Python call: `evaluation.flow.evaluate_files` reads the files, combines LLM labels
with human ones (a human label always wins), scores under `EvalSettings`, labels each number with its source and
refuses bad metric names one by one; the command prints what it returns, number for number.

The inputs are three queries written out by hand: q1's first document is judged not relevant by a person and
relevant by the LLM (the person wins: P@1 = 0), q2's first document carries an LLM label only (it counts: P@1 = 1),
and q3's only judged document is not relevant to the person (skipped: no relevant document).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.errors import ConfigError, InputError
from retbench.evaluation.flow import evaluate_files
from retbench.metrics.settings import EvalSettings


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    human = tmp_path / "human.qrels"
    human.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 1\nq3 0 d5 0\n")
    llm = tmp_path / "llm_qrels.txt"
    llm.write_text("q1 0 d1 3\nq1 0 d2 3\nq2 0 d4 1\nq3 0 d5 2\n")
    (tmp_path / "llm_qrels.provenance.json").write_text(json.dumps({"labels": "llm", "depth": 2}))
    run = tmp_path / "run.trec"
    run.write_text(
        "q1 Q0 d2 1 2.0 r\nq1 Q0 d1 2 1.0 r\nq2 Q0 d4 1 2.0 r\nq2 Q0 d3 2 1.0 r\nq3 Q0 d5 1 2.0 r\nq3 Q0 d6 2 1.0 r\n"
    )
    return {"human": human, "llm": llm, "run": run}


def test_human_and_llm_labels_combine_with_the_human_label_winning_and_the_number_says_it_is_llm_labelled(files):
    done = evaluate_files(files["human"], files["run"], ["P@1"], labels="human+llm", llm_qrels=files["llm"])
    assert {r["query_id"]: r["P@1"] for r in done.evaluation.per_query()} == {"q1": 0.0, "q2": 1.0}
    assert done.evaluation.skipped == ["q3"]
    # only q1 carries both labels on its whole top 2: too few for PPI, so the mean is labelled as LLM-labelled
    est = done.estimates["P@1"]
    assert (est["source"], est["n_llm"], est["mean"]) == ("llm", 2, 0.5)
    assert any("judge bias is not corrected" in n for n in done.notes)
    assert done.exit_code == 0 and done.refused == []


def test_human_labels_alone_leave_the_llm_only_label_out(files):
    done = evaluate_files(files["human"], files["run"], ["P@1"])
    assert {r["query_id"]: r["P@1"] for r in done.evaluation.per_query()} == {"q1": 0.0, "q2": 0.0}
    assert done.estimates == {} and done.notes[0] == "labels: human"


def test_the_settings_are_the_typed_ones_a_lower_relevance_level_counts_the_grade_two_label(files):
    strict = evaluate_files(files["llm"], files["run"], ["P@1"], EvalSettings(relevance_level=3))
    loose = evaluate_files(files["llm"], files["run"], ["P@1"], EvalSettings(relevance_level=2))
    assert strict.evaluation.relevance_level == 3 and strict.evaluation.skipped == ["q2", "q3"]
    assert {r["query_id"]: r["P@1"] for r in loose.evaluation.per_query()} == {"q1": 1.0, "q3": 1.0}


def test_a_bad_metric_name_is_refused_on_its_own_and_every_name_bad_raises_the_first(files):
    done = evaluate_files(files["human"], files["run"], ["P@1", "nope@3"])
    assert done.evaluation.metrics == ["P@1"] and done.exit_code == 2
    assert len(done.refused) == 1 and done.refused[0].startswith("-m nope@3: ")
    with pytest.raises(ConfigError, match="nope"):
        evaluate_files(files["human"], files["run"], ["nope@3"])


def test_llm_labels_asked_for_without_llm_qrels_are_refused_naming_the_field(files):
    with pytest.raises(InputError) as err:
        evaluate_files(files["human"], files["run"], ["P@1"], labels="llm")
    assert err.value.field == "labels"


def test_the_command_prints_what_the_flow_returns(files):
    done = evaluate_files(files["human"], files["run"], ["P@1"], labels="human+llm", llm_qrels=files["llm"])
    args = [str(files["human"]), str(files["run"]), "-m", "P@1", "--labels", "human+llm"]
    res = CliRunner().invoke(app, ["eval", *args, "--llm-qrels", str(files["llm"]), "-f", "json"])
    assert res.exit_code == 0, res.output
    printed = json.loads(res.output)["metrics"]["P@1"]
    assert printed["mean"] == done.evaluation.aggregate(ci=False)["P@1"]["mean"]
    assert printed["estimate"] == pytest.approx(done.estimates["P@1"])
