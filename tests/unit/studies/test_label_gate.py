"""The gate judges a label study's PPI estimates by its own rules: a floor on the candidate's estimated mean, a
drop limit on the estimated change B − A that, under require_significance, blocks only when the change's
interval excludes 0; the comment names the labels beside each verdict and carries the incomplete-judgements
caveat; what a study cannot answer is an input error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from label_gate_data import build_study
from retbench.criteria import parse_criteria
from retbench.errors import EXIT_GATE_FAILED, EXIT_OK, ConfigError, InputError
from retbench.gates.labels import interval_p
from retbench.report.gate_comment import gate_json, render_comment
from retbench.studies.labels.answer import estimate_study
from retbench.studies.labels.gate import gate_study


def _criteria(**gate: object):
    return parse_criteria({"gates": [{"name": "ndcg@10", **gate}]})


@pytest.fixture(scope="module")
def study(scifact, tmp_path_factory) -> Path:
    """bm25 (A) against shifted (B: BM25's ranks 6-15 as its top 10), half the queue graded by people."""
    return build_study(scifact, tmp_path_factory.mktemp("gate"))


def test_a_drop_whose_interval_excludes_zero_blocks_and_the_comment_names_the_labels(study):
    answer = estimate_study(study, 0.05)
    diff = answer["difference"]
    assert diff["estimate"] == "PPI" and diff["high"] < 0  # the study itself is sure shifted is worse
    done = gate_study(_criteria(regression_max=0.02, require_significance=True), study)
    assert done.exit_code == EXIT_GATE_FAILED and done.verdict == "fail"
    r = done.report.results[0]
    assert (done.report.baseline, done.report.candidate) == ("bm25", "shifted")
    assert r.delta == pytest.approx(diff["mean"]) and r.ci == (diff["low"], diff["high"])
    assert r.p is not None and r.p < 0.05
    counts = answer["systems"]["shifted"]
    text = render_comment(done.report)
    expected = f"PPI, {counts['n_human']:,} human / {counts['n_llm']:,} LLM labels, judged@10 1.00"
    assert f"({expected}): blocks merge" in text  # beside the verdict's sentence
    assert gate_json(done.report)["study"]["metric"] == "nDCG@10"


def test_the_better_system_as_candidate_passes_its_floor_and_drop_limit(scifact, tmp_path):
    study = build_study(scifact, tmp_path, decision=("shifted", "bm25"))
    done = gate_study(_criteria(threshold=0.3, regression_max=0.0), study)
    assert done.exit_code == EXIT_OK and done.verdict == "pass"
    assert done.report.results[0].estimate["source"] == "ppi"


def test_a_floor_is_checked_on_the_ppi_mean_and_said_undecided_inside_the_interval(study):
    systems = estimate_study(study, 0.05)["systems"]
    cand, worse = systems["bm25"], systems["shifted"]
    assert cand["high"] - cand["low"] > 0.01
    below = gate_study(_criteria(threshold=cand["mean"] + 0.005), study, candidate_system="bm25")
    above = gate_study(_criteria(threshold=cand["mean"] - 0.005), study, candidate_system="bm25")
    assert below.exit_code == EXIT_GATE_FAILED and above.exit_code == EXIT_OK
    assert below.report.baseline is None  # a candidate other than the decision's B: thresholds only
    for done in (below, above):
        assert done.report.results[0].estimate["undecided"] == ["floor"]
        assert "undecided: the interval holds the floor" in render_comment(done.report)
    far = gate_study(_criteria(threshold=worse["high"] + 0.01), study, candidate_system="shifted")
    assert far.report.results[0].estimate["undecided"] == []


def test_require_significance_lets_a_drop_through_only_while_its_interval_holds_zero(scifact, tmp_path):
    study = build_study(scifact, tmp_path, decision=("bm25", "swapped"), share=0.3)
    diff = estimate_study(study, 0.05)["difference"]
    drop = -diff["mean"]
    assert drop > 0  # swapping ranks 1 and 2 can only lose
    strict = gate_study(_criteria(regression_max=0.0, require_significance=True), study)
    check = strict.report.results[0].checks[0]
    holds_zero = diff["low"] <= 0 <= diff["high"]
    assert check.waived == holds_zero and check.passed == holds_zero
    plain = gate_study(_criteria(regression_max=0.0), study)  # without require_significance the estimate decides
    assert plain.exit_code == EXIT_GATE_FAILED
    at_limit = gate_study(_criteria(regression_max=drop), study)
    assert at_limit.report.results[0].estimate["undecided"] == ["regression"]


def test_the_change_p_value_is_below_alpha_exactly_when_the_interval_excludes_zero(study):
    for alpha in (0.01, 0.05, 0.2):
        diff = estimate_study(study, alpha)["difference"]
        p = interval_p(diff, alpha)
        assert (p < alpha) == (not diff["low"] <= 0 <= diff["high"])
        assert interval_p({**diff, "mean": 0.0}, alpha) == pytest.approx(1.0)


def test_a_top_k_too_often_unlabelled_gets_the_caveat_and_llm_only_numbers_say_so(scifact, tmp_path):
    study = build_study(scifact, tmp_path, share=0.0, failed=0.3)
    done = gate_study(_criteria(threshold=0.0), study)
    judged = done.report.results[0].estimate["judged"]
    assert judged < 0.9
    text = render_comment(done.report)
    assert f"only {judged:.0%} of the top 10 documents" in text
    assert "judge bias uncorrected: no human labels yet" in text
    assert done.report.results[0].estimate["source"] == "llm"


def test_what_a_study_cannot_answer_is_refused_naming_the_field(study):
    with pytest.raises(ConfigError, match="estimates only 'ndcg@10'") as err:
        gate_study(parse_criteria({"gates": [{"name": "recall@5", "threshold": 0.5}]}), study)
    assert err.value.field == "metric"
    with pytest.raises(ConfigError, match="tag limits"):
        gate_study(_criteria(threshold=0.1, tags={"x": {"threshold": 0.1}}), study)
    with pytest.raises(ConfigError, match="need a baseline"):
        gate_study(_criteria(regression_max=0.1), study, candidate_system="bm25")
    with pytest.raises(InputError, match="no system 'dense'"):
        gate_study(_criteria(threshold=0.1), study, candidate_system="dense")


def test_a_study_without_a_decision_needs_the_candidate_named(scifact, tmp_path):
    study = build_study(scifact, tmp_path, decision=None)
    with pytest.raises(InputError, match="no decision"):
        gate_study(_criteria(threshold=0.1), study)
    done = gate_study(
        _criteria(threshold=0.1, regression_max=0.5), study, candidate_system="swapped", baseline_system="bm25"
    )
    assert done.report.results[0].delta == pytest.approx(
        estimate_study(study, 0.05, pair=("bm25", "swapped"))["difference"]["mean"]
    )
